//! The runtime under the operators that [operator-gen] generates: what is the same in every
//! operator, written once as ordinary Rust and tested here, so a generated crate keeps only what
//! differs (its types, the relations it declares, its entry point and `deploy/`).
//!
//! # From a watch to a status
//! An operator describes itself once, as an [`Operator`](context::Operator): its primary kind,
//! its flags, the caches of the kinds it owns ([`children!`]) and of the watched kinds it reads
//! ([`cached!`]), and what `operator.yaml` says about every reconcile. Then, for one object:
//! 1. **Watch.** A [`Runner`](run::Runner) runs the controller while this replica leads (or,
//!    with `--sharding`, over this replica's shard). It watches the primary, the owned
//!    children by the managed-by label, and whatever else [`relations`] adds, each into a
//!    cache that drops the fields nobody reads.
//! 2. **Reconcile.** A change, a child's change or a trigger queues the primary. The
//!    reconcile goes through the [`Lifecycle`](reconcile::Lifecycle) of its
//!    [`Context`](context::Context): the shard's fence, the finalizer, then the operator's own
//!    hooks, which read from caches and write owned children with
//!    [`Context::apply_owned`](context::Context::apply_owned), only when the cached copy
//!    differs.
//! 3. **Status.** The outcome is written as the operator's own condition in
//!    `status.conditions`, only when it changed; a failure is counted, retried after the
//!    object's own backoff, and reported as an Event, and [`telemetry`] counts and traces it.
//!
//! # Where things are
//! - [`run`]: the runner, the leader election or shard terms around it, and where it watches;
//! - [`context`]: the operator's description, the context its reconciles share, and the
//!   helpers they call: apply a child, write the status or the condition;
//! - [`reconcile`]: the lifecycle around the hooks, its errors, the condition and the backoff;
//! - [`relations`]: what else makes a primary reconcile: watched objects and outside systems;
//! - [`telemetry`]: logs, traces, metrics and readiness, the counting client, the endpoints;
//! - [`webhooks`] (feature `webhooks`): admission, conversion and their certificate;
//! - [`settings`]: the flags every operator takes, as a clap struct a generated `Settings`
//!   flattens;
//! - [`kinds`]: untyped kinds and sample objects;
//! - [`testing`] (feature `test-util`): a mock API server that records what an operator wrote,
//!   and the assertions the tests that come with a generated crate make;
//! - [`prelude`]: what a reconcile names most.
//!
//! Arrows run one way: a generated crate depends on this one, and nothing here names anything
//! a generated crate defines. k8s-openapi's version feature is the binary's choice; this crate
//! enables none.
//!
//! # Versions
//! The public surface is pinned in `public-api.txt` (see `tests/public_api.rs`): a change to
//! it is a reviewed diff. Releases follow semver as cargo reads it: while the version is
//! `0.y`, a change that removes or alters anything listed there is a new `y`, and additions are
//! a new patch.
//!
//! [operator-gen]: https://crates.io/crates/operator-gen
#![deny(missing_docs)]
#![warn(unnameable_types)]

// The implementation, one concept per module; what is public is re-exported by the modules
// below, and nothing else is a promise.
#[cfg(feature = "webhooks")]
mod admission;
#[cfg(feature = "webhooks")]
mod allocator;
mod apply;
mod backoff;
mod cache;
#[cfg(feature = "webhooks")]
mod certificates;
mod client;
mod conditions;
mod connections;
#[cfg(feature = "webhooks")]
mod conversion;
mod endpoints;
mod error;
mod events;
mod failures;
mod leader;
mod lifecycle;
mod lists;
mod logging;
mod metrics;
mod process;
// A replica's place in its ring; built without sharding, a type with no values.
#[cfg(feature = "sharding")]
mod replica;
#[cfg(not(feature = "sharding"))]
#[path = "unsharded.rs"]
mod replica;
#[cfg(feature = "webhooks")]
mod request_budget;
mod sample;
#[cfg(feature = "sharding")]
mod sharding;
mod shutdown;
mod traces;
mod triggers;
mod untyped;
#[cfg(feature = "webhooks")]
mod webhook_routes;
#[cfg(feature = "webhooks")]
mod webhook_server;

// The front door.
pub mod context;
pub mod kinds;
pub mod prelude;
pub mod reconcile;
pub mod relations;
pub mod run;
pub mod settings;
pub mod telemetry;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
#[cfg(feature = "webhooks")]
pub mod webhooks;

#[doc(hidden)]
pub mod internals;
