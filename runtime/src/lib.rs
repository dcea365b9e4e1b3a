//! The runtime under the operators that [operator-gen] generates: what is the same in every
//! operator, written once as ordinary Rust and tested here, so a generated crate keeps only what
//! differs (its types, the relations it declares, its entry point and `deploy/`).
//!
//! Where things are:
//! - [`settings`]: the flags every operator takes, as a clap struct a generated `Settings`
//!   flattens;
//! - [`logging`]: log lines for people or for log pipelines;
//! - [`traces`]: a span per reconcile whose trace id the log lines carry, exported over OTLP
//!   with the `otlp` feature;
//! - [`client`]: a Kubernetes client that counts its requests by verb;
//! - [`metrics`]: reconcile metrics and readiness, in the Prometheus text format;
//! - [`process`]: the process's CPU, memory and file descriptors, read from `/proc` per scrape;
//! - [`endpoints`]: `/metrics`, `/healthz` and `/readyz` over HTTP;
//! - `connections`: what every port allows its clients: a cap on open connections, and
//!   deadlines for headers and for answers the client does not read;
//! - [`failures`]: consecutive failed reconciles per object, and the per-object backoff they
//!   give;
//! - [`events`]: Kubernetes Events for failed reconciles and the first success after them;
//! - [`backoff`]: how a failed watch is retried, capped at a few seconds, and at once after a
//!   410 Gone;
//! - [`leader`]: leader election on a Lease, so that of several replicas one reconciles, in
//!   terms: a replica that loses the Lease campaigns again in process;
//! - [`sharding`]: several replicas reconciling at once, each its own share of the objects:
//!   consistent hashing over the replicas' Leases, the drain handshake that moves an object,
//!   and the fence that stops a replica before its Lease could expire;
//! - [`shutdown`]: SIGTERM or Ctrl+C, heard across leadership terms;
//! - [`cache`]: a cache's writing half that outlives a term, an owned kind's cache with it,
//!   and the caches' sizes as a metric;
//! - [`apply`]: owned children written by server-side apply only when their cached copy
//!   differs;
//! - [`run`]: the run loop: leader election or the shard's terms, and in each term the
//!   primary's watch, the relations a generated controller adds, and the controller over them;
//! - [`triggers`]: what else makes a primary reconcile: a watched object that names it, and an
//!   outside system, polled or sending;
//! - [`context`]: what every reconcile of an operator shares, built from the operator's
//!   description, and the helpers a reconcile calls: apply a child, write the status or the
//!   condition;
//! - [`error`]: what a reconcile fails with, transient or permanent: every generated crate's
//!   `Error`;
//! - [`lifecycle`]: what every reconcile goes through around the operator's hooks: the
//!   shard's fence and drain, the finalizer, the condition, the failure count, metrics and an
//!   Event;
//! - [`conditions`]: the operator's own entry in `status.conditions`, written only when the
//!   outcome changed, beside the entries of other controllers;
//! - [`sample`]: a generated crate's sample object, from the smallest body its schema allows;
//! - [`untyped`]: a kind known by where it lives in the API, its fields JSON: the primary of a
//!   dynamic operator, run like any typed one;
//! - `testing` (feature `test-util`): a mock API server that records what an operator
//!   wrote, and what the tests that come with a generated crate assert, `tests/cluster.rs`
//!   whole;
//! - `admission` (feature `webhooks`): the admission review around an operator's own hooks;
//! - `conversion` (feature `webhooks`): the conversion webhook of a resource served in several
//!   versions, answered an object at a time through the hub, losing nothing on a round trip;
//! - `certificates` (feature `webhooks`): the webhooks' serving certificate, kept in a Secret,
//!   and its CA published where the API server reads it;
//! - `request_budget` (feature `webhooks`): a webhook request's body under a shared byte
//!   budget and a deadline, then a turn at the work behind it;
//! - `webhook_routes` (feature `webhooks`): the webhooks' routes, each hook at its path under
//!   the body cap that fits it;
//! - `webhook_server` (feature `webhooks`): the webhooks' HTTPS server, reloading a renewed
//!   certificate in place.
//!
//! Arrows run one way: a generated crate depends on this one, and nothing here names anything
//! a generated crate defines. k8s-openapi's version feature is the binary's choice; this crate
//! enables none.
//!
//! [operator-gen]: https://crates.io/crates/operator-gen
#![deny(missing_docs)]

#[cfg(feature = "webhooks")]
pub mod admission;
pub mod apply;
pub mod backoff;
pub mod cache;
#[cfg(feature = "webhooks")]
pub mod certificates;
pub mod client;
pub mod conditions;
// Not a promise: xtask's `webhook-server-peak` measures the webhook server under its real
// limits, so the limits and their acceptor are reachable, and hidden from the docs.
#[doc(hidden)]
pub mod connections;
pub mod context;
#[cfg(feature = "webhooks")]
pub mod conversion;
pub mod endpoints;
pub mod error;
pub mod events;
pub mod failures;
pub mod leader;
pub mod lifecycle;
pub mod logging;
pub mod metrics;
pub mod process;
#[cfg(feature = "webhooks")]
mod request_budget;
pub mod run;
pub mod sample;
pub mod settings;
pub mod sharding;
pub mod shutdown;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod traces;
pub mod triggers;
pub mod untyped;
#[cfg(feature = "webhooks")]
pub mod webhook_routes;
#[cfg(feature = "webhooks")]
pub mod webhook_server;

pub use metrics::Retryable;
