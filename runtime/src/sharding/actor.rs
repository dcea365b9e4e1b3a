//! The sharder as a task: it watches the ring's Leases and the metadata of every object of the
//! kinds it places, feeds them to a [`Sharder`], and writes the labels it asks for.
//!
//! It runs on one replica at a time (the leader of the usual election). Objects are watched as
//! metadata only, so the sharder holds no spec or status; while the Leases' watch is failing,
//! or silent for longer than a Lease, it moves nothing, because it cannot tell replicas that
//! stopped from an API server it cannot reach.

use std::{collections::BTreeSet, future::Future, time::Duration};

use futures::{FutureExt, StreamExt, stream};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions},
    core::PartialObjectMeta,
    runtime::watcher::{self, Event},
};
use tokio::time::Instant;

use super::{Error, Labels, ObjectId, RING_LABEL, Relabel, Sharder};
use crate::{
    backoff::RetryExt,
    lists,
    metrics::{Metrics, ReadyWhen},
    settings::InitialList,
};

/// How many label writes the sharder has in flight at once: enough that assigning thousands of
/// objects takes seconds, few enough not to crowd the API server.
const CONCURRENT_WRITES: usize = 16;

/// How long the sharder waits before it first retries writes the API server failed; each
/// failure in a row doubles it, up to [`LONGEST_RETRY`].
const RETRY: Duration = Duration::from_secs(1);

/// The longest the sharder waits between retries: an object that cannot be moved (a write its
/// admission refuses, say) is retried this rarely, not in a storm that grows with such
/// objects, and counted in `operator_sharder_unplaced`.
const LONGEST_RETRY: Duration = Duration::from_secs(60);

/// How long to wait before retrying after `failures` failed writes in a row.
fn retry_after(failures: u32) -> Duration {
    RETRY
        .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1)))
        .min(LONGEST_RETRY)
}

/// An object's metadata, as the sharder watches every kind.
type Meta = PartialObjectMeta<DynamicObject>;

/// Runs the sharder of the ring `ring` over the objects of `kinds` in `objects_namespace` (in
/// every namespace with `None`), the ring's Leases being in `lease_namespace`, until `stop`
/// resolves. The objects of every kind are placed on the same shards. Its watches list what
/// exists as [`InitialList::default`] does; a sharded replica's sharder lists as its
/// settings say.
pub async fn run(
    client: Client,
    ring: &str,
    lease_namespace: &str,
    objects_namespace: Option<&str>,
    kinds: &[ApiResource],
    stop: impl Future<Output = ()>,
) -> Result<(), Error> {
    let initial_list = InitialList::default();
    let metrics = Metrics::new(ReadyWhen::WatchesListed(0));
    run_listing(
        client,
        ring,
        lease_namespace,
        objects_in(objects_namespace),
        kinds,
        initial_list,
        &metrics,
        stop,
    )
    .await
}

/// The watch of the objects a sharder places, in `namespace` or in every namespace. An Api of
/// PartialObjectMeta lists and watches metadata only; a field selector narrows it to one
/// namespace for any kind, where `Api::namespaced` would need a namespaced one.
pub fn objects_in(namespace: Option<&str>) -> watcher::Config {
    let config = watcher::Config::default();
    match namespace {
        Some(namespace) => config.fields(&format!("metadata.namespace={namespace}")),
        None => config,
    }
}

/// [`run`], its watches listing what exists as `initial_list` says, reporting to `metrics`
/// that it runs and how many objects it could not place.
#[expect(
    clippy::too_many_arguments,
    reason = "the sharder's wiring, called from one place"
)]
pub(crate) async fn run_listing(
    client: Client,
    ring: &str,
    lease_namespace: &str,
    objects: watcher::Config,
    kinds: &[ApiResource],
    initial_list: InitialList,
    metrics: &Metrics,
    stop: impl Future<Output = ()>,
) -> Result<(), Error> {
    let _running = metrics.sharder_runs();
    let labels = Labels::new(ring)?;
    let keys: Vec<(&str, &str)> = kinds
        .iter()
        .map(|kind| (kind.group.as_str(), kind.kind.as_str()))
        .collect();
    let mut sharder = Sharder::new(labels, &keys);
    let lease_api = Api::<Lease>::namespaced(client.clone(), lease_namespace);
    let ring_leases = watcher::Config::default().labels(&format!("{RING_LABEL}={ring}"));
    let leases = lists::watch(lease_api.clone(), ring_leases, initial_list).retried();
    let objects = stream::select_all(kinds.iter().enumerate().map(|(index, kind)| {
        let api = Api::<Meta>::all_with(client.clone(), kind);
        let events = lists::watch(api, objects.clone(), initial_list).retried();
        events.map(move |event| (index, event)).boxed()
    }));
    tokio::pin!(leases, objects, stop);
    let mut state = Watches::default();
    let mut retry_at: Option<Instant> = None;
    let mut failures = 0;
    loop {
        let now = Instant::now();
        let wake = [sharder.next_check(now), retry_at]
            .into_iter()
            .flatten()
            .min();
        let relabels = tokio::select! {
            biased;
            () = &mut stop => return Ok(()),
            Some(event) = leases.next() => {
                state.lease_event(&mut sharder, event, Instant::now());
                drain_ready(&mut leases, &mut state, &mut sharder);
                state.decide(&mut sharder)
            }
            Some((kind, event)) = objects.next() => {
                if let (Err(error), Some(kind)) = (&event, kinds.get(kind)) {
                    tracing::warn!(%error, kind = %kind.kind, "the sharded objects cannot be watched");
                }
                state.object_event(&mut sharder, kind, event)
            }
            () = sleep_until(wake) => {
                // Every renewal already received is read before any Lease is judged expired:
                // the sharder may have been writing while they came.
                drain_ready(&mut leases, &mut state, &mut sharder);
                let now = Instant::now();
                let retrying = retry_at.is_some_and(|at| at <= now);
                if retrying {
                    retry_at = None;
                }
                let relabels = state.decide(&mut sharder);
                if retrying && state.leases_current {
                    sharder.pending()
                } else {
                    relabels
                }
            }
        };
        let takeovers = state.takeovers(&sharder, Instant::now());
        let writing = Instant::now();
        let unplaced = write(&client, kinds, relabels).await;
        let taken = take_over(&lease_api, takeovers).await;
        state.wrote_for(writing.elapsed());
        metrics.sharder_unplaced(unplaced);
        if taken && unplaced == 0 {
            failures = 0;
        } else {
            failures += 1;
            retry_at = Some(Instant::now() + retry_after(failures));
        }
    }
}

/// Feeds `state` every Lease event the watch has ready without waiting.
fn drain_ready<S>(leases: &mut std::pin::Pin<&mut S>, state: &mut Watches, sharder: &mut Sharder)
where
    S: futures::Stream<Item = Result<Event<Lease>, watcher::Error>>,
{
    while let Some(Some(event)) = leases.next().now_or_never() {
        state.lease_event(sharder, event, Instant::now());
    }
}

/// Sleeps until `at`, or for ever without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What the sharder knows of its watches: the Leases', and each kind's.
#[derive(Default)]
struct Watches {
    /// Whether the Leases' watch answered since it last failed: the membership is current.
    leases_current: bool,
    /// When the Leases' watch last brought news while it was current.
    heard_at: Option<Instant>,
    /// How long the sharder has spent writing since then, reading no watch: what the Leases'
    /// watch brought meanwhile waited unread, so that time is not the watch's silence.
    writing: Duration,
    /// When the Leases' watch last brought news before it failed, while it has not answered
    /// since: a server shutting down may keep a watch open and silent before it fails it.
    failed_at: Option<Instant>,
    /// When the Leases' watch last brought news before the outage it came back from, until a
    /// renewal is seen after it: a server just back may answer the sharder's list seconds
    /// before it answers the replicas' renewals, so the Leases start afresh again then (with
    /// two durations each until renewed), and none is taken over before.
    recovering_since: Option<Instant>,
    /// Whether the membership became current again since the last decision: every object is
    /// then looked at, also those that came while it was not.
    recovered: bool,
    /// Whether the Leases' watch is listing (between `Init` and `InitDone`).
    listing_leases: bool,
    /// The Leases and objects a relist has shown so far, to forget the rest when it is done.
    /// Each kind's watch lists on its own.
    listed_leases: BTreeSet<String>,
    listed_objects: BTreeSet<ObjectId>,
}

impl Watches {
    /// The writes the membership calls for now: none while it is not current, every object's
    /// after it became current again, else those of a change of the ring.
    fn decide(&mut self, sharder: &mut Sharder) -> Vec<Relabel> {
        if !self.leases_current {
            return Vec::new();
        }
        let changed = sharder.refresh();
        if std::mem::take(&mut self.recovered) {
            sharder.pending()
        } else {
            changed
        }
    }

    /// The expired Leases to take over now: none while the membership is not current, because
    /// a Lease may only look expired for want of news.
    fn takeovers(&self, sharder: &Sharder, now: Instant) -> Vec<(String, String)> {
        if self.leases_current && self.recovering_since.is_none() {
            sharder.takeovers(now)
        } else {
            Vec::new()
        }
    }

    /// The Leases' watch answered: after a failure, every Lease that was live when it failed
    /// starts its duration again, because nobody could renew while the sharder could not see.
    /// kube's watcher resumes a failed watch without listing again unless the server answers
    /// 410 Gone, so any answer counts, not only a list's end.
    fn leases_answered(&mut self, sharder: &mut Sharder, now: Instant) {
        if self.leases_current {
            return;
        }
        if let Some(failed_at) = self.failed_at.take() {
            sharder.resync(failed_at, now);
            self.recovering_since = Some(failed_at);
        }
        self.leases_current = true;
        self.recovered = true;
    }

    /// A Leases' watch that brought no news for longer than any Lease lasts was deaf, not
    /// quiet: each replica renews within its Lease. A server shutting down keeps its watches
    /// open and silent while it refuses new connections, and a watch may resume after that
    /// without an error. The news that ends such a silence is taken as the end of an outage
    /// that began when the watch was last heard.
    fn end_silence(&mut self, sharder: &Sharder, now: Instant) {
        let Some(heard_at) = self.heard_at else {
            return;
        };
        let silent = now
            .saturating_duration_since(heard_at)
            .saturating_sub(std::mem::take(&mut self.writing));
        if self.leases_current && sharder.silence_limit().is_some_and(|limit| silent > limit) {
            tracing::warn!(
                ?silent,
                "the shards' Leases were not heard of for longer than a Lease; moving nothing until they are again"
            );
            self.failed_at = Some(heard_at);
            self.leases_current = false;
        }
    }

    /// The sharder wrote for `elapsed`, reading no watch: placing 10,000 new objects takes
    /// longer than a Lease, and the renewals that came meanwhile are read after it.
    fn wrote_for(&mut self, elapsed: Duration) {
        self.writing += elapsed;
    }

    fn lease_event(
        &mut self,
        sharder: &mut Sharder,
        event: Result<Event<Lease>, watcher::Error>,
        now: Instant,
    ) {
        if event.is_ok() {
            self.end_silence(sharder, now);
            self.heard_at = Some(now);
        }
        match event {
            Err(error) => {
                tracing::warn!(%error, "the shards' Leases cannot be watched; moving nothing");
                if self.leases_current {
                    self.failed_at = Some(self.heard_at.unwrap_or(now));
                }
                self.leases_current = false;
            }
            Ok(Event::Init) => {
                self.listing_leases = true;
                self.listed_leases.clear();
            }
            Ok(Event::InitApply(lease)) => {
                self.listed_leases.extend(lease.metadata.name.clone());
                sharder.lease_applied(&lease, now);
            }
            Ok(Event::InitDone) => {
                self.listing_leases = false;
                let listed = std::mem::take(&mut self.listed_leases);
                sharder.retain_leases(|name| listed.contains(name));
                self.leases_answered(sharder, now);
            }
            Ok(Event::Apply(lease)) => {
                let renewed = sharder.lease_applied(&lease, now);
                if !self.listing_leases {
                    self.leases_answered(sharder, now);
                }
                if renewed
                    && self.leases_current
                    && let Some(since) = self.recovering_since.take()
                {
                    sharder.resync(since, now);
                }
            }
            Ok(Event::Delete(lease)) => {
                if let Some(name) = &lease.metadata.name {
                    sharder.lease_deleted(name);
                }
                if !self.listing_leases {
                    self.leases_answered(sharder, now);
                }
            }
        }
    }

    fn object_event(
        &mut self,
        sharder: &mut Sharder,
        kind: usize,
        event: Result<Event<Meta>, watcher::Error>,
    ) -> Vec<Relabel> {
        match event {
            // Logged by the caller, which knows the kind's name.
            Err(_) => Vec::new(),
            Ok(Event::Init) => {
                self.listed_objects.retain(|(listed, _, _)| *listed != kind);
                Vec::new()
            }
            Ok(Event::InitApply(object)) => {
                let meta = &object.metadata;
                if let Some(name) = &meta.name {
                    self.listed_objects
                        .insert((kind, meta.namespace.clone(), name.clone()));
                }
                // Written once the list is done, when the Leases may also be known.
                sharder.object_applied(kind, meta);
                Vec::new()
            }
            Ok(Event::InitDone) => {
                let listed = &mut self.listed_objects;
                sharder.retain_objects(|key| key.0 != kind || listed.contains(key));
                listed.retain(|(listed, _, _)| *listed != kind);
                if self.leases_current {
                    sharder.pending()
                } else {
                    Vec::new()
                }
            }
            Ok(Event::Apply(object)) if self.leases_current => sharder
                .object_applied(kind, &object.metadata)
                .into_iter()
                .collect(),
            Ok(Event::Apply(object)) => {
                sharder.object_applied(kind, &object.metadata);
                Vec::new()
            }
            Ok(Event::Delete(object)) => {
                sharder.object_deleted(kind, &object.metadata);
                Vec::new()
            }
        }
    }
}

/// Deletes each expired Lease on condition that it is still at the version the sharder last
/// saw; whether none failed but for a newer version (renewed after all) or an absence (already
/// gone). The deletion, once the watch shows it, takes the shard off the ring.
async fn take_over(leases: &Api<Lease>, takeovers: Vec<(String, String)>) -> bool {
    let mut ok = true;
    for (name, version) in takeovers {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(version),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match leases.delete(&name, &params).await {
            Ok(_) => tracing::info!(lease = %name, "took over an expired shard's Lease"),
            Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => {}
            Err(error) => {
                tracing::warn!(%error, lease = %name, "could not take over an expired Lease");
                ok = false;
            }
        }
    }
    ok
}

/// Writes `relabels` to the objects of `kinds`, a few at a time; how many failed. One refused
/// as stale counts as written: a newer version of the object is on its way to the sharder,
/// which decides again then.
async fn write(client: &Client, kinds: &[ApiResource], relabels: Vec<Relabel>) -> usize {
    if relabels.is_empty() {
        return 0;
    }
    let written: Vec<bool> = stream::iter(relabels)
        .map(|relabel| write_one(client, kinds, relabel))
        .buffer_unordered(CONCURRENT_WRITES)
        .collect()
        .await;
    written.into_iter().filter(|ok| !ok).count()
}

async fn write_one(client: &Client, kinds: &[ApiResource], relabel: Relabel) -> bool {
    let Some(kind) = kinds.get(relabel.kind) else {
        return true;
    };
    let api = match relabel.namespace.as_deref() {
        Some(namespace) => Api::<DynamicObject>::namespaced_with(client.clone(), namespace, kind),
        None => Api::<DynamicObject>::all_with(client.clone(), kind),
    };
    let patch = Patch::Merge(&relabel.patch);
    match api
        .patch_metadata(&relabel.name, &PatchParams::default(), &patch)
        .await
    {
        Ok(_) => true,
        // Stale (409) or gone (404): the watch brings the news, and the sharder decides again.
        Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => true,
        Err(error) => {
            tracing::warn!(%error, kind = %kind.kind, name = %relabel.name, "could not write a shard label");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::sharding::fixtures::lease;

    const SHARD: &str = "shard.operator-gen.io/op";

    fn placed(name: &str, shard: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            resource_version: Some("1".to_owned()),
            labels: Some(
                shard
                    .map(|s| (SHARD.to_owned(), s.to_owned()))
                    .into_iter()
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        }
    }

    fn failure() -> watcher::Error {
        watcher::Error::NoResourceVersion
    }

    /// A sharder whose Leases op-a and op-b were listed at `at`, with `objects` placed where
    /// that ring puts them.
    fn listed(at: Instant, objects: usize) -> (Watches, Sharder) {
        let mut state = Watches::default();
        let kinds = [("", "ConfigMap")];
        let mut sharder = Sharder::new(Labels::new("op").expect("a DNS label"), &kinds);
        state.lease_event(&mut sharder, Ok(Event::Init), at);
        for name in ["op-a", "op-b"] {
            state.lease_event(&mut sharder, Ok(Event::InitApply(lease(name, 100))), at);
        }
        state.lease_event(&mut sharder, Ok(Event::InitDone), at);
        state.decide(&mut sharder);
        for i in 0..objects {
            let name = format!("object-{i}");
            let shard = sharder.shard_for(0, Some("default"), &name);
            let object = placed(&name, shard.map(str::to_owned).as_deref());
            assert_eq!(sharder.object_applied(0, &object), None);
        }
        (state, sharder)
    }

    /// Object `name`, as its kind's watch lists it.
    fn seen(name: &str) -> Result<Event<Meta>, watcher::Error> {
        Ok(Event::InitApply(PartialObjectMeta {
            types: None,
            metadata: placed(name, None),
            _phantom: std::marker::PhantomData,
        }))
    }

    #[test]
    fn failed_writes_back_off_doubling_to_a_minute_and_start_over_after_a_success() {
        let waits: Vec<u64> = (1..=9).map(|f| retry_after(f).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(retry_after(u32::MAX), LONGEST_RETRY);
    }

    #[test]
    fn a_kind_that_lists_again_forgets_only_its_own_objects() {
        let now = Instant::now();
        let mut state = Watches::default();
        let kinds = [("apps", "Deployment"), ("apps", "StatefulSet")];
        let mut sharder = Sharder::new(Labels::new("op").expect("a DNS label"), &kinds);
        state.lease_event(&mut sharder, Ok(Event::Init), now);
        state.lease_event(&mut sharder, Ok(Event::InitApply(lease("op-a", 100))), now);
        state.lease_event(&mut sharder, Ok(Event::InitDone), now);
        state.decide(&mut sharder);
        for kind in [0, 1] {
            state.object_event(&mut sharder, kind, Ok(Event::Init));
            for name in ["a", "b"] {
                state.object_event(&mut sharder, kind, seen(name));
            }
            state.object_event(&mut sharder, kind, Ok(Event::InitDone));
        }
        assert_eq!(sharder.objects(), 4);
        // The Deployments list again, and are half way when the StatefulSets list again, "b"
        // deleted while their watch was away.
        state.object_event(&mut sharder, 0, Ok(Event::Init));
        state.object_event(&mut sharder, 0, seen("a"));
        state.object_event(&mut sharder, 1, Ok(Event::Init));
        state.object_event(&mut sharder, 1, seen("a"));
        let placed = state.object_event(&mut sharder, 1, Ok(Event::InitDone));
        assert_eq!(sharder.objects(), 3, "only the StatefulSet b is gone");
        assert!(
            placed
                .iter()
                .all(|relabel| relabel.kind == 0 || relabel.name == "a")
        );
        state.object_event(&mut sharder, 0, seen("b"));
        state.object_event(&mut sharder, 0, Ok(Event::InitDone));
        assert_eq!(sharder.objects(), 3, "the Deployments' list kept both");
        let pending: Vec<(usize, String)> = sharder
            .pending()
            .into_iter()
            .map(|relabel| (relabel.kind, relabel.name))
            .collect();
        let expected = [(0, "a"), (0, "b"), (1, "a")].map(|(kind, name)| (kind, name.to_owned()));
        assert_eq!(pending, expected, "each placed as its kind");
    }

    #[test]
    fn a_watch_resumed_without_a_list_makes_the_membership_current_again() {
        let start = Instant::now();
        let (mut state, mut sharder) = listed(start, 0);
        state.lease_event(&mut sharder, Err(failure()), start);
        // An object created meanwhile is tracked but not written while the view is stale.
        let later = start + Duration::from_secs(1);
        assert_eq!(
            state.object_event(
                &mut sharder,
                0,
                Ok(Event::Apply(PartialObjectMeta {
                    types: None,
                    metadata: placed("new", None),
                    _phantom: std::marker::PhantomData,
                })),
            ),
            []
        );
        assert!(state.decide(&mut sharder).is_empty());
        // kube resumes the watch from its resourceVersion: the next event is a plain Apply.
        state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", 101))), later);
        let writes = state.decide(&mut sharder);
        let names: Vec<&str> = writes.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["new"], "what came while it was stale is placed now");
    }

    #[test]
    fn an_outage_longer_than_a_lease_moves_nothing_once_the_watch_answers() {
        let start = Instant::now();
        let (mut state, mut sharder) = listed(start, 100);
        let failed = start + Duration::from_secs(1);
        state.lease_event(&mut sharder, Err(failure()), failed);
        // 60 s later the watch answers with op-a's renewal only; op-b has not renewed yet.
        let back = start + Duration::from_secs(60);
        assert!(
            state.decide(&mut sharder).is_empty(),
            "stale: nothing moves"
        );
        state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", 160))), back);
        assert!(state.decide(&mut sharder).is_empty());
        assert_eq!(sharder.shards(), ["op-a", "op-b"]);
        assert!(state.takeovers(&sharder, back).is_empty());
        // op-b that never renews is still found out, two durations later, and taken over.
        for at in [5, 10, 15] {
            let renewed = back + Duration::from_secs(at);
            let lease = lease("op-a", 160 + i64::try_from(at).expect("small"));
            state.lease_event(&mut sharder, Ok(Event::Apply(lease)), renewed);
            assert!(state.takeovers(&sharder, renewed).is_empty());
        }
        let expired = back + Duration::from_secs(20);
        state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", 180))), expired);
        let takeovers = state.takeovers(&sharder, expired);
        assert_eq!(takeovers.len(), 1);
        assert_eq!(takeovers[0].0, "op-b");
        state.lease_event(&mut sharder, Ok(Event::Delete(lease("op-b", 100))), expired);
        let moves = state.decide(&mut sharder);
        assert_eq!(sharder.shards(), ["op-a"]);
        assert!(!moves.is_empty());
    }

    #[test]
    fn after_an_outage_no_lease_is_taken_over_before_a_renewal_is_seen() {
        let start = Instant::now();
        let (mut state, mut sharder) = listed(start, 10);
        state.lease_event(&mut sharder, Err(failure()), start + Duration::from_secs(1));
        // The watch lists again at 30 s, but the server answers no renewal for 20 s more.
        let back = start + Duration::from_secs(30);
        state.lease_event(&mut sharder, Ok(Event::Init), back);
        for name in ["op-a", "op-b"] {
            state.lease_event(&mut sharder, Ok(Event::InitApply(lease(name, 100))), back);
        }
        state.lease_event(&mut sharder, Ok(Event::InitDone), back);
        let slow = back + Duration::from_secs(20);
        assert!(state.takeovers(&sharder, slow).is_empty());
        // op-a's first renewal starts every Lease afresh; op-b, which never renews, is taken
        // over two durations after that.
        for at in [0, 8, 16] {
            let renewed = slow + Duration::from_secs(at);
            let lease = lease("op-a", 150 + i64::try_from(at).expect("small"));
            state.lease_event(&mut sharder, Ok(Event::Apply(lease)), renewed);
        }
        assert!(
            state
                .takeovers(&sharder, slow + Duration::from_secs(19))
                .is_empty()
        );
        let expired = slow + Duration::from_secs(20);
        state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", 170))), expired);
        let takeovers = state.takeovers(&sharder, expired);
        let names: Vec<&str> = takeovers.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["op-b"]);
    }

    #[test]
    fn a_replica_whose_renewals_come_back_a_lease_after_anothers_keeps_its_objects() {
        let start = Instant::now();
        let (mut state, mut sharder) = listed(start, 100);
        state.lease_event(&mut sharder, Err(failure()), start + Duration::from_secs(1));
        // The server is back at 60 s. op-a renews at once; op-b's first try waits out its
        // timeout against a server not answering yet, and renews 12 s later.
        let back = start + Duration::from_secs(60);
        let lagging = back + Duration::from_secs(12);
        for (at, renewed) in [
            (back, 160),
            (back + Duration::from_secs(6), 166),
            (lagging, 172),
        ] {
            state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", renewed))), at);
        }
        assert!(state.takeovers(&sharder, lagging).is_empty());
        state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-b", 172))), lagging);
        assert!(state.decide(&mut sharder).is_empty());
        assert_eq!(sharder.shards(), ["op-a", "op-b"]);
        // From its renewal on, op-b's Lease lasts one duration again.
        let quiet = lagging + Duration::from_secs(10);
        for (at, renewed) in [(lagging + Duration::from_secs(6), 178), (quiet, 182)] {
            state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", renewed))), at);
        }
        let takeovers = state.takeovers(&sharder, quiet);
        let names: Vec<&str> = takeovers.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["op-b"]);
    }

    #[test]
    fn a_watch_silent_for_longer_than_a_lease_takes_nothing_over_and_ends_an_outage() {
        let start = Instant::now();
        let (mut state, mut sharder) = listed(start, 100);
        let heard = start + Duration::from_secs(5);
        state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", 105))), heard);
        // The server shuts down at 6 s: it refuses every renewal but keeps the watch open and
        // silent. Both Leases are due long before anything is heard again.
        assert!(
            state
                .takeovers(&sharder, heard + Duration::from_secs(25))
                .is_empty()
        );
        // At 40 s the watch brings op-a's renewal, with no error before it: the silence was an
        // outage, and op-b gets two durations from then.
        let back = start + Duration::from_secs(40);
        state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", 140))), back);
        assert!(state.decide(&mut sharder).is_empty());
        for at in [7, 14] {
            let renewed = back + Duration::from_secs(at);
            let lease = lease("op-a", 140 + i64::try_from(at).expect("small"));
            state.lease_event(&mut sharder, Ok(Event::Apply(lease)), renewed);
            assert!(state.takeovers(&sharder, renewed).is_empty());
        }
        assert_eq!(sharder.shards(), ["op-a", "op-b"]);
        let expired = back + Duration::from_secs(20);
        state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", 160))), expired);
        let takeovers = state.takeovers(&sharder, expired);
        let names: Vec<&str> = takeovers.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            ["op-b"],
            "a replica that really stopped is still found out"
        );
    }

    #[test]
    fn a_sharder_writing_for_longer_than_a_lease_does_not_take_its_own_deafness_for_an_outage() {
        let start = Instant::now();
        let (mut state, mut sharder) = listed(start, 100);
        let heard = start + Duration::from_secs(5);
        state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", 105))), heard);
        // The sharder places many new objects from 6 s to 31 s; the renewals that came
        // meanwhile are read after it, and the watch was never silent for longer than a Lease.
        state.wrote_for(Duration::from_secs(25));
        let read = start + Duration::from_secs(32);
        // An event that renews nothing, so that an outage would still be recovering from.
        let unchanged = || Ok(Event::Apply(lease("op-a", 105)));
        state.lease_event(&mut sharder, unchanged(), read);
        assert!(
            state.recovering_since.is_none(),
            "no outage to recover from"
        );
        // A silence while it listened is one still.
        let silent = read + Duration::from_secs(21);
        state.wrote_for(Duration::from_secs(1));
        state.lease_event(&mut sharder, unchanged(), silent);
        assert!(
            state.recovering_since.is_some(),
            "20 s unheard while listening was an outage"
        );
    }

    #[test]
    fn a_lease_that_had_expired_before_the_outage_stays_expired() {
        let start = Instant::now();
        let (mut state, mut sharder) = listed(start, 10);
        // op-a renews; op-b expires at 10 s; the watch fails at 12 s and answers at 40 s.
        // (A watch silent before it failed would not show op-b was dead: then it is reset.)
        state.lease_event(
            &mut sharder,
            Ok(Event::Apply(lease("op-a", 105))),
            start + Duration::from_secs(5),
        );
        // The watch still brings op-a's renewals at 11 s, after op-b expired.
        let heard = start + Duration::from_secs(11);
        state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", 111))), heard);
        let failed = start + Duration::from_secs(12);
        state.lease_event(&mut sharder, Err(failure()), failed);
        let back = start + Duration::from_secs(40);
        state.lease_event(&mut sharder, Ok(Event::Apply(lease("op-a", 140))), back);
        let takeovers = state.takeovers(&sharder, back);
        let names: Vec<&str> = takeovers.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            ["op-b"],
            "op-a is renewed; op-b was dead before the outage"
        );
    }
}
