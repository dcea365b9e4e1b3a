//! `crate::replica` in a runtime built without the `sharding` feature: no replica has a place
//! on a ring. [`Replica`] has no values, so the code that keeps a reconcile or a watch to a
//! shard is the same code as with the feature, and the compiler drops every path that would
//! need one: nothing of the protocol, the sharder or their hashing is built.

use std::future::Future;

use kube::{Api, Resource, runtime::watcher};

/// A replica's place on a ring, which this build cannot have.
pub enum Replica {}

impl Replica {
    /// This replica's shard.
    pub fn name(&self) -> &str {
        match *self {}
    }

    /// The watch of the primaries placed on this shard.
    pub fn primaries(&self) -> watcher::Config {
        match *self {}
    }

    /// `config` narrowed to this shard's objects.
    pub fn narrowed(&self, _config: watcher::Config) -> watcher::Config {
        match *self {}
    }

    /// Whether this replica may reconcile now.
    pub fn holds(&self) -> bool {
        match *self {}
    }

    /// Runs `work` until this replica's fence closes.
    pub async fn within_fence<F: Future>(&self, _work: F) -> Option<F::Output> {
        match *self {}
    }

    /// Whether the sharder asked this replica to let `obj` go.
    pub fn drain_requested(&self, _obj: &impl Resource) -> bool {
        match *self {}
    }

    /// Lets `obj` go to another shard.
    pub async fn let_go<K>(&self, _api: &Api<K>, _obj: &K) -> Result<(), kube::Error> {
        match *self {}
    }
}
