//! The sharder as a task: it watches the ring's Leases and the metadata of every object of one
//! kind, feeds them to a [`Sharder`], and writes the labels it asks for.
//!
//! It runs on one replica at a time (the leader of the usual election). Objects are watched as
//! metadata only, so the sharder holds no spec or status; while the Leases' watch is failing it
//! moves nothing, because it cannot tell replicas that stopped from an API server it cannot
//! reach.

use std::{collections::BTreeSet, fmt::Debug, future::Future, time::Duration};

use futures::{StreamExt, stream};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, Client, Resource,
    api::{Patch, PatchParams},
    core::{PartialObjectMeta, Request},
    runtime::watcher::{self, Event, watcher},
};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::{Error, Labels, RING_LABEL, Relabel, Sharder};
use crate::backoff::RetryExt;

/// How many label writes the sharder has in flight at once: enough that assigning thousands of
/// objects takes seconds, few enough not to crowd the API server.
const CONCURRENT_WRITES: usize = 16;

/// How long the sharder waits before it retries writes the API server failed.
const RETRY: Duration = Duration::from_secs(1);

/// Runs the sharder of the ring `ring` over the objects of kind `K` in `objects_namespace` (in
/// every namespace with `None`), the ring's Leases being in `lease_namespace`, until `stop`
/// resolves.
pub async fn run<K>(
    client: Client,
    ring: &str,
    lease_namespace: &str,
    objects_namespace: Option<&str>,
    stop: impl Future<Output = ()>,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let labels = Labels::new(ring)?;
    let mut sharder = Sharder::new(labels, &K::group(&()), &K::kind(&()));
    let leases = watcher(
        Api::<Lease>::namespaced(client.clone(), lease_namespace),
        watcher::Config::default().labels(&format!("{RING_LABEL}={ring}")),
    )
    .retried();
    // An Api of PartialObjectMeta lists and watches metadata only; a field selector narrows it
    // to one namespace for any kind, where `Api::namespaced` would need a namespaced one.
    let mut objects_config = watcher::Config::default();
    if let Some(namespace) = objects_namespace {
        objects_config = objects_config.fields(&format!("metadata.namespace={namespace}"));
    }
    let objects = watcher(
        Api::<PartialObjectMeta<K>>::all(client.clone()),
        objects_config,
    )
    .retried();
    tokio::pin!(leases, objects, stop);
    let mut state = Watches::default();
    let mut retry_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let wake = [sharder.next_check(now), retry_at]
            .into_iter()
            .flatten()
            .min();
        let relabels = tokio::select! {
            biased;
            () = &mut stop => return Ok(()),
            Some(event) = leases.next() => state.lease_event(&mut sharder, event),
            Some(event) = objects.next() => state.object_event(&mut sharder, event),
            () = sleep_until(wake) => {
                let retrying = retry_at.take().is_some_and(|at| at <= Instant::now());
                let mut relabels = state.refresh(&mut sharder);
                if retrying {
                    relabels = sharder.pending();
                }
                relabels
            }
        };
        if !write::<K>(&client, relabels).await {
            retry_at = Some(Instant::now() + RETRY);
        }
    }
}

/// Sleeps until `at`, or for ever without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What the sharder knows of its two watches.
#[derive(Default)]
struct Watches {
    /// Whether the Leases' watch has listed since it last failed: the membership is current.
    leases_current: bool,
    /// The Leases and objects a relist has shown so far, to forget the rest when it is done.
    listed_leases: BTreeSet<String>,
    listed_objects: BTreeSet<(Option<String>, String)>,
}

impl Watches {
    fn refresh(&self, sharder: &mut Sharder) -> Vec<Relabel> {
        if self.leases_current {
            sharder.refresh(Instant::now())
        } else {
            Vec::new()
        }
    }

    fn lease_event(
        &mut self,
        sharder: &mut Sharder,
        event: Result<Event<Lease>, watcher::Error>,
    ) -> Vec<Relabel> {
        let now = Instant::now();
        match event {
            Err(error) => {
                tracing::warn!(%error, "the shards' Leases cannot be watched; moving nothing");
                self.leases_current = false;
            }
            Ok(Event::Init) => self.listed_leases.clear(),
            Ok(Event::InitApply(lease)) => {
                self.listed_leases.extend(lease.metadata.name.clone());
                sharder.lease_applied(&lease, now);
            }
            Ok(Event::InitDone) => {
                let listed = std::mem::take(&mut self.listed_leases);
                sharder.retain_leases(|name| listed.contains(name));
                if !self.leases_current {
                    // Back after a failure: nobody could renew while the sharder could not
                    // see, so every Lease starts its duration again.
                    sharder.resync(now);
                }
                self.leases_current = true;
            }
            Ok(Event::Apply(lease)) => sharder.lease_applied(&lease, now),
            Ok(Event::Delete(lease)) => {
                if let Some(name) = &lease.metadata.name {
                    sharder.lease_deleted(name);
                }
            }
        }
        self.refresh(sharder)
    }

    fn object_event<K>(
        &mut self,
        sharder: &mut Sharder,
        event: Result<Event<PartialObjectMeta<K>>, watcher::Error>,
    ) -> Vec<Relabel> {
        match event {
            Err(error) => {
                tracing::warn!(%error, "the sharded objects cannot be watched");
                Vec::new()
            }
            Ok(Event::Init) => {
                self.listed_objects.clear();
                Vec::new()
            }
            Ok(Event::InitApply(object)) => {
                let meta = &object.metadata;
                if let Some(name) = &meta.name {
                    self.listed_objects
                        .insert((meta.namespace.clone(), name.clone()));
                }
                // Written once the list is done, when the Leases may also be known.
                sharder.object_applied(meta);
                Vec::new()
            }
            Ok(Event::InitDone) => {
                let listed = std::mem::take(&mut self.listed_objects);
                sharder.retain_objects(|key| listed.contains(key));
                if self.leases_current {
                    sharder.pending()
                } else {
                    Vec::new()
                }
            }
            Ok(Event::Apply(object)) if self.leases_current => sharder
                .object_applied(&object.metadata)
                .into_iter()
                .collect(),
            Ok(Event::Apply(object)) => {
                sharder.object_applied(&object.metadata);
                Vec::new()
            }
            Ok(Event::Delete(object)) => {
                sharder.object_deleted(&object.metadata);
                Vec::new()
            }
        }
    }
}

/// Writes `relabels`, a few at a time; whether all were written or refused as stale (a newer
/// version of the object is on its way to the sharder, which decides again then).
async fn write<K>(client: &Client, relabels: Vec<Relabel>) -> bool
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    if relabels.is_empty() {
        return true;
    }
    let written: Vec<bool> = stream::iter(relabels)
        .map(|relabel| write_one::<K>(client, relabel))
        .buffer_unordered(CONCURRENT_WRITES)
        .collect()
        .await;
    written.into_iter().all(|ok| ok)
}

async fn write_one<K>(client: &Client, relabel: Relabel) -> bool
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let url = K::url_path(&(), relabel.namespace.as_deref());
    let request = match Request::new(url).patch_metadata(
        &relabel.name,
        &PatchParams::default(),
        &Patch::Merge(&relabel.patch),
    ) {
        Ok(request) => request,
        Err(error) => {
            tracing::warn!(%error, name = %relabel.name, "could not build a label write");
            return true;
        }
    };
    match client.request::<PartialObjectMeta<K>>(request).await {
        Ok(_) => true,
        // Stale (409) or gone (404): the watch brings the news, and the sharder decides again.
        Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => true,
        Err(error) => {
            tracing::warn!(%error, name = %relabel.name, "could not write a shard label");
            false
        }
    }
}
