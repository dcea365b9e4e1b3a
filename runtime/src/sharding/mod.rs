//! Sharding: several replicas reconcile at once, each its own share of the objects.
//!
//! The design is the label design of timebertt/kubernetes-controller-sharding, written for
//! kube-rs:
//! - **Membership.** Each replica holds a Lease of its own, named by its pod and labelled
//!   [`RING_LABEL`]` = <operator>`. A replica is a live shard while the sharder sees its Lease
//!   renewed ([`Membership`]), and it stops reconciling before its Lease could expire
//!   ([`Fence`]).
//! - **Assignment.** One actor, the sharder (the leader of the usual election), gives every
//!   primary to a live shard by consistent hashing ([`Ring`]) and writes that shard's name as
//!   the object's [`Labels::shard`] label; children carry their owner's label, set when they
//!   are applied. Each replica watches only objects that carry its own name.
//! - **Rebalancing.** An object whose shard is still live but no longer its shard on the ring
//!   is first marked with [`Labels::drain`]. Its replica acknowledges that inside a reconcile
//!   (so never while one is in flight) by removing both labels, and only then does the sharder
//!   assign it again: no object is ever reconciled by two replicas at once. An object of a
//!   shard that is gone needs no handshake, because that replica fenced itself first.
//!
//! Everything here is a pure decision over what the API server said; the watches and writes
//! around it take the [`Assignment`] trait, so that a server-side filter (Kubernetes 1.36's
//! sharded list and watch) can replace the labels later.

mod actor;
mod labels;
mod member;
mod membership;
mod ring;
mod sharder;

pub use actor::run as run_sharder;
pub use labels::{Decision, Labels, Placement, SHARD_LABEL_PREFIX};
pub use member::Member;
pub use membership::{Fence, Membership};
pub use ring::{Assignment, ObjectKey, Ring, VIRTUAL_NODES};
pub use sharder::{Relabel, Sharder};

/// The label on every shard's Lease naming the operator (the ring) it is a member of; the
/// sharder lists Leases by it.
pub const RING_LABEL: &str = "sharding.operator-gen.io/ring";

/// Why a sharding setting is unusable.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A ring's name must be a DNS label, because it becomes the name part of label keys.
    #[error(
        "sharding ring {0:?} is not a DNS label (at most 63 lower-case letters, digits and '-', \
         starting and ending with a letter or digit); name the operator so"
    )]
    RingName(String),
}
