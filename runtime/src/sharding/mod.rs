//! Sharding: several replicas reconcile at once, each its own share of the objects.
//!
//! The design is the label design of timebertt/kubernetes-controller-sharding, written for
//! kube-rs:
//! - **Membership.** Each replica holds a Lease of its own ([`Member`]), named by its pod and
//!   labelled [`RING_LABEL`]` = <operator>`, and renews it on condition that it is still at the
//!   version it last wrote. It stops reconciling before its Lease could expire ([`Fence`]).
//!   The sharder times renewals on its own clock ([`Membership`]); when a Lease expires it
//!   takes it over by deleting it on condition of the version it saw, so a renewal stored in
//!   between wins, and a replica whose renewal then finds its Lease gone knows it lost its
//!   objects and joins again a Lease later. A shard leaves the ring only when its Lease is gone.
//! - **Assignment.** One actor, the sharder ([`run_sharder`], on the leader of the usual
//!   election), gives every primary to a shard by consistent hashing ([`Ring`]) and writes
//!   that shard's name as the object's [`Labels::shard`] label; children carry their owner's
//!   label, set when they are applied. Each replica watches only objects that carry its name.
//! - **Rebalancing.** An object whose shard is still on the ring but no longer its shard there
//!   is first marked with [`Labels::drain`]. Its replica acknowledges that inside a reconcile
//!   (so never while one is in flight) by removing both labels, and only then does the sharder
//!   assign it again: no object is reconciled by two replicas at once. An object of a shard
//!   whose Lease is gone needs no handshake: that replica stopped, or fenced itself first.
//! - **Outages.** While the sharder cannot watch the Leases it moves nothing, and when the
//!   watch answers again every Lease that was live when it last brought news starts afresh,
//!   with two durations until its first renewal: an API server away for longer than a Lease
//!   reshuffles nothing, even when one replica's renewals come back later than another's.
//!
//! The decisions ([`Sharder`], [`Decision`], [`Membership`], [`Fence`]) are pure and tested
//! here; `cargo xtask e2e` proves the protocol on a real API server. The watches and writes
//! around them take the [`Assignment`] trait, so that a server-side filter (Kubernetes 1.36's
//! sharded list and watch) can replace the labels later. A replica's terms, which join this
//! protocol to the leader's terms and election, are [`crate::replica`]'s.

mod actor;
#[cfg(test)]
mod fixtures;
mod labels;
mod member;
mod membership;
mod ring;
mod sharder;

pub(crate) use actor::objects_in;
pub use actor::run as run_sharder;
pub(crate) use actor::run_listing;
pub(crate) use labels::is_label_value;
pub use labels::{Decision, Labels, Placement};
pub use member::Member;
pub use membership::{Fence, Membership};
pub use ring::{Assignment, ObjectKey, Ring};
pub use sharder::{ObjectId, Relabel, Sharder};

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
    /// A replica's name becomes the value of the shard label on its objects.
    #[error(
        "shard {0:?} is not a label value (at most 63 letters, digits, '-', '_' and '.', \
         starting and ending with a letter or digit); set POD_NAME (--pod-name) to the pod's name"
    )]
    ShardName(String),
    /// A replica's Lease and shard are named after its pod.
    #[error("sharding needs this replica's name: set POD_NAME (--pod-name) to the pod's name")]
    Unnamed,
}
