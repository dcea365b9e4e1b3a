//! One replica of a sharded operator, as a generated controller runs it: its membership, the
//! terms it reconciles its shard in, and its side of the drain.
//!
//! A term here is what a leadership term is without sharding ([`leader::Term`]): the watches
//! and the controller over them. It starts when the replica's fence opens (its Lease renewed)
//! and ends when the fence closes or the operator is asked to stop; reconciles in flight then
//! finish, inside the half margin the fence leaves before the Lease could expire.
//!
//! It is a module of its own, above both [`crate::sharding`] (the protocol it takes part in)
//! and [`crate::leader`] (whose terms it runs, and whose election its sharder runs under), so
//! that the protocol needs nothing of the election.

use std::future::Future;

use kube::{
    Api, Resource, ResourceExt,
    api::{ApiResource, Patch, PatchParams},
    runtime::watcher,
};
use serde::de::DeserializeOwned;
use tokio::{sync::watch, time::Instant};

use crate::{
    leader::{self, Election},
    metrics::{Metrics, ReadyWhen},
    settings::{Common, InitialList},
    sharding::{self, Error, Fence, Labels, Member, is_label_value},
    shutdown::Shutdown,
};

/// This replica's place in its ring.
pub struct Replica {
    client: kube::Client,
    namespace: String,
    ring: String,
    member: Member,
    labels: Labels,
    name: String,
    fence: watch::Sender<Fence>,
    /// How the sharder's watches list what exists (`--initial-list`).
    initial_list: InitialList,
}

/// Why a term ended.
enum Ending {
    Stopped,
    Fenced,
    /// Its watches made no progress listing for [`crate::metrics::LISTING_STALLED`].
    Stalled,
}

impl Replica {
    /// The replica `name` (its pod's name) of the ring `ring` (the operator's name), whose
    /// Lease of `lease_seconds` is kept in `namespace`.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        ring: &str,
        lease_seconds: u64,
    ) -> Result<Self, Error> {
        let labels = Labels::new(ring)?;
        if !is_label_value(name) {
            return Err(Error::ShardName(name.to_owned()));
        }
        let member = Member::new(client.clone(), namespace, name, ring, lease_seconds);
        let (fence, _) = watch::channel(member.fence());
        Ok(Self {
            client,
            namespace: namespace.to_owned(),
            ring: ring.to_owned(),
            member,
            labels,
            name: name.to_owned(),
            fence,
            initial_list: InitialList::default(),
        })
    }

    /// The replica the operator's settings name (`--pod-name`, `--lease-seconds`), in the ring
    /// `ring` (the operator's name), its Lease kept in `namespace`; its sharder lists as
    /// `--initial-list` says.
    pub fn from_settings(
        client: kube::Client,
        namespace: &str,
        ring: &str,
        settings: &Common,
    ) -> Result<Self, Error> {
        let name = settings.pod_name.as_deref().ok_or(Error::Unnamed)?;
        let replica = Self::new(client, namespace, name, ring, settings.lease_seconds)?;
        Ok(Self {
            initial_list: settings.initial_list,
            ..replica
        })
    }

    /// The ring it is a shard of: the operator's name.
    pub(crate) fn ring(&self) -> &str {
        &self.ring
    }

    /// This replica's shard: the value of the shard label on its objects.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The watch of the primaries placed on this shard.
    pub fn primaries(&self) -> watcher::Config {
        watcher::Config::default().labels(&self.labels.selector(&self.name))
    }

    /// `config` narrowed to this shard's objects: for children, which carry their owner's
    /// shard label (see [`crate::apply::apply_owned`]).
    pub fn narrowed(&self, config: watcher::Config) -> watcher::Config {
        let selector = self.labels.selector(&self.name);
        let selector = match &config.label_selector {
            Some(existing) => format!("{existing},{selector}"),
            None => selector,
        };
        config.labels(&selector)
    }

    /// Whether this replica may reconcile now: its fence holds. A reconcile that starts after
    /// the fence closed, before its term's controller stopped, does nothing.
    pub fn holds(&self) -> bool {
        self.fence.borrow().holds(Instant::now())
    }

    /// Runs `work`, a reconcile, until it completes or this replica's fence closes, whichever
    /// comes first: `None` when the fence closed first, and `work` was dropped at its next
    /// await point. The fence closing ends the term, but kube's graceful shutdown lets the
    /// reconciles in flight finish, and one that ran past the fence could still be writing
    /// when the sharder moves its object.
    pub async fn within_fence<F: Future>(&self, work: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            output = work => Some(output),
            () = closed(self.fence.subscribe()) => None,
        }
    }

    /// Marks this replica's Lease renewed at `at`, as its renewals would: for the tests of
    /// what keeps to the fence.
    #[cfg(test)]
    pub(crate) fn renewed_at(&self, at: Instant) {
        self.fence.send_modify(|fence| fence.renewed(at));
    }

    /// Whether the sharder asked this replica to let `obj` go.
    pub fn drain_requested(&self, obj: &impl Resource) -> bool {
        self.labels.drain_requested(obj.labels())
    }

    /// Lets `obj` go: removes its shard and drain labels on condition that it is at the
    /// version this reconcile read, so the sharder places it again. Called inside a reconcile,
    /// so no reconcile of it is in flight here while it moves.
    pub async fn let_go<K>(&self, api: &Api<K>, obj: &K) -> Result<(), kube::Error>
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let version = obj.resource_version().unwrap_or_default();
        let patch = self.labels.acknowledge(&version);
        api.patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        Ok(())
    }

    /// Holds this replica's Lease and runs `term` whenever its fence holds, until `shutdown`
    /// is requested; then lets the last term finish and deletes the Lease, so the sharder moves
    /// this replica's objects at once. `metrics` follow the terms, as they follow leadership.
    pub async fn run<F, Fut>(&self, metrics: &Metrics, shutdown: &Shutdown, mut term: F)
    where
        F: FnMut(leader::Term) -> Fut,
        Fut: Future<Output = ()>,
    {
        let (terms_done, done) = tokio::sync::oneshot::channel::<()>();
        let holding = self.member.hold(&self.fence, async move {
            let _ = done.await;
        });
        let serving = async {
            let mut fence = self.fence.subscribe();
            while opened(&mut fence, shutdown).await {
                tracing::info!(shard = %self.name, "reconciling this shard");
                metrics.leading();
                let end = {
                    let (stop, closed) = (shutdown.requested(), closed(self.fence.subscribe()));
                    async move {
                        tokio::select! {
                            () = stop => Ending::Stopped,
                            () = closed => Ending::Fenced,
                            () = metrics.stalled() => Ending::Stalled,
                        }
                    }
                };
                let ending = leader::serve(&mut term, end).await;
                metrics.standing_by();
                match ending {
                    Some(Ending::Fenced) if !shutdown.is_requested() => {
                        tracing::warn!(shard = %self.name, "the shard's Lease went unrenewed; stopped reconciling until it is renewed");
                    }
                    Some(Ending::Stalled) if !shutdown.is_requested() => leader::stalled_again(),
                    _ => break,
                }
            }
            let _ = terms_done.send(());
        };
        tokio::join!(holding, serving);
    }
}

/// Runs `replica` until the operator is asked to stop: `term` reconciles its shard whenever its
/// fence holds, and while it leads `election` (always campaigned for, whatever
/// `--leader-election` says) it also runs the sharder that places the primaries of `kinds`
/// that `objects` selects ([`crate::sharding::objects_in`] a namespace or every one) on the
/// ring's shards. `metrics` follow the
/// replica's terms, and say whether it runs the sharder and how many objects the sharder could
/// not place.
pub async fn run_sharded<F, Fut>(
    replica: &Replica,
    election: Election,
    metrics: &Metrics,
    objects: watcher::Config,
    kinds: &[ApiResource],
    term: F,
) -> Result<(), leader::Error>
where
    F: FnMut(leader::Term) -> Fut,
    Fut: Future<Output = ()>,
{
    let shutdown = Shutdown::process();
    let election = election.with_shutdown(shutdown.clone()).campaigning();
    let sharder_metrics = Metrics::new(ReadyWhen::WatchesListed(0));
    let sharder = election.run(&sharder_metrics, |term| {
        let client = replica.client.clone();
        let objects = objects.clone();
        async move {
            let placed = sharding::run_listing(
                client,
                &replica.ring,
                &replica.namespace,
                objects,
                kinds,
                replica.initial_list,
                metrics,
                term.ended(),
            );
            if let Err(error) = placed.await {
                tracing::error!(%error, "the sharder stopped");
            }
        }
    });
    let (elected, ()) = tokio::join!(sharder, replica.run(metrics, &shutdown, term));
    elected
}

/// Waits until `fence` holds; false if the operator was asked to stop first.
async fn opened(fence: &mut watch::Receiver<Fence>, shutdown: &Shutdown) -> bool {
    let open = fence.wait_for(|fence| fence.holds(Instant::now()));
    tokio::select! {
        biased;
        () = shutdown.requested() => false,
        open = open => open.is_ok(),
    }
}

/// Resolves when `fence` closes: its deadline passes before a renewal moves it, or a renewal
/// finds the Lease taken over.
async fn closed(mut fence: watch::Receiver<Fence>) {
    loop {
        let Some(deadline) = fence.borrow_and_update().deadline() else {
            return;
        };
        if Instant::now() >= deadline {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {}
            changed = fence.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc, Mutex,
            atomic::{AtomicU32, Ordering},
        },
        time::Duration,
    };

    use http::Method;
    use serde_json::{Value, json};

    use super::*;
    use crate::{
        metrics::{LISTING_STALLED, ReadyWhen},
        testing::{Seen, mock_api, not_found},
    };

    const LEASE_SECONDS: u64 = 10;

    fn replica(client: kube::Client) -> Replica {
        Replica::new(client, "ops", "op-0", "my-operator", LEASE_SECONDS).expect("valid names")
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_is_cut_short_when_the_fence_closes_and_not_while_renewals_move_it() {
        let (client, _server) = mock_api(|_| (404, not_found()));
        let replica = replica(client);
        let sleep = |seconds| tokio::time::sleep(Duration::from_secs(seconds));
        assert_eq!(
            replica.within_fence(sleep(1)).await,
            None,
            "never renewed: closed from the start"
        );
        let start = Instant::now();
        replica.fence.send_modify(|fence| fence.renewed(start));
        assert_eq!(replica.within_fence(sleep(1)).await, Some(()));
        // A 10 s Lease renewed 3 s before it expires: the fence closes 1 s before that.
        assert_eq!(replica.within_fence(sleep(60)).await, None);
        assert_eq!(start.elapsed(), Duration::from_secs(9));
        // A renewal while the work runs moves the deadline on.
        let renewed = Instant::now();
        replica.fence.send_modify(|fence| fence.renewed(renewed));
        let renew = async {
            sleep(5).await;
            replica
                .fence
                .send_modify(|fence| fence.renewed(Instant::now()));
        };
        let (finished, ()) = tokio::join!(replica.within_fence(sleep(12)), renew);
        assert_eq!(finished, Some(()));
    }

    /// What the Lease endpoint does next.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Server {
        /// Stores every write at the next version.
        Up,
        /// Answers the next renewal 404, as after a takeover, then is up again.
        TakeOver,
        /// Answers 503 to everything.
        Down,
    }

    /// A Lease endpoint that behaves as `server` says.
    fn lease_server(server: Arc<Mutex<Server>>) -> impl Fn(&Seen) -> (u16, Value) + Send + 'static {
        let version = AtomicU32::new(0);
        move |seen| {
            let mut server = server.lock().expect("lock");
            if *server == Server::Down {
                return (503, json!({"kind": "Status", "code": 503}));
            }
            if seen.method == Method::DELETE {
                return (200, json!({"kind": "Status", "status": "Success"}));
            }
            let is_renewal = seen.body["metadata"]["resourceVersion"].is_string();
            if is_renewal && *server == Server::TakeOver {
                *server = Server::Up;
                return (404, not_found());
            }
            let next = version.fetch_add(1, Ordering::SeqCst) + 1;
            (
                200,
                json!({
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": "op-0", "namespace": "ops", "resourceVersion": next.to_string()},
                }),
            )
        }
    }

    #[tokio::test]
    async fn the_sharder_lists_as_the_settings_say() {
        let client = crate::testing::offline_client();
        assert_eq!(replica(client.clone()).initial_list, InitialList::default());
        let settings = Common {
            pod_name: Some("op-0".to_owned()),
            initial_list: InitialList::Paged,
            ..Common::default()
        };
        let replica = Replica::from_settings(client, "ops", "my-operator", &settings);
        let replica = replica.expect("valid names");
        assert_eq!(replica.initial_list, InitialList::Paged);
        assert_eq!(replica.name(), "op-0");
    }

    #[tokio::test]
    async fn a_shard_name_that_cannot_be_a_label_value_is_refused() {
        let (client, _) = mock_api(|_| (404, not_found()));
        let error = Replica::new(client, "ops", "op/0", "my-operator", 10)
            .err()
            .expect("refused");
        assert!(error.to_string().contains("op/0"), "{error}");
    }

    #[tokio::test]
    async fn children_are_narrowed_to_the_shard_beside_their_own_selector() {
        let (client, _) = mock_api(|_| (404, not_found()));
        let replica = replica(client);
        let managed = watcher::Config::default().labels("app.kubernetes.io/managed-by=my-operator");
        assert_eq!(
            replica.narrowed(managed).label_selector.as_deref(),
            Some("app.kubernetes.io/managed-by=my-operator,shard.operator-gen.io/my-operator=op-0")
        );
        assert_eq!(
            replica.primaries().label_selector.as_deref(),
            Some("shard.operator-gen.io/my-operator=op-0")
        );
    }

    #[tokio::test]
    async fn letting_go_removes_both_labels_on_condition_of_the_version_read() {
        let (client, server) = mock_api(|seen| (200, seen.body.clone()));
        let replica = replica(client.clone());
        let mut map = k8s_openapi::api::core::v1::ConfigMap::default();
        map.metadata.name = Some("cm".into());
        map.metadata.namespace = Some("apps".into());
        map.metadata.resource_version = Some("42".into());
        map.metadata.labels = Some(
            [
                (
                    "shard.operator-gen.io/my-operator".to_owned(),
                    "op-0".to_owned(),
                ),
                (
                    "drain.operator-gen.io/my-operator".to_owned(),
                    "true".to_owned(),
                ),
            ]
            .into(),
        );
        assert!(replica.drain_requested(&map));
        let api = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client, "apps");
        // The mock echoes the patch, which does not parse as a ConfigMap's whole: only the
        // request matters here.
        let _ = replica.let_go(&api, &map).await;
        drop((replica, api));
        let seen = server.await.expect("the mock API server ran");
        let [patch] = seen.as_slice() else {
            panic!("one request: {seen:?}");
        };
        assert_eq!(patch.method, Method::PATCH);
        assert_eq!(patch.path(), "/api/v1/namespaces/apps/configmaps/cm");
        assert_eq!(
            patch.body,
            json!({"metadata": {"resourceVersion": "42", "labels": {
                "shard.operator-gen.io/my-operator": null,
                "drain.operator-gen.io/my-operator": null,
            }}})
        );
    }

    /// Runs a replica against `lease_server` with a term that records when it starts and ends
    /// (on the paused clock, from the test's start), until `stop_after`; the server turns to
    /// each of `script`'s states at its time.
    async fn terms_over(
        script: &[(Duration, Server)],
        stop_after: Duration,
    ) -> (Vec<(Duration, Duration)>, Vec<Seen>) {
        terms_listing(script, stop_after, true).await
    }

    /// [`terms_over`], with a term whose one watch lists at once, or, unless `lists`, never
    /// gets anything at all.
    async fn terms_listing(
        script: &[(Duration, Server)],
        stop_after: Duration,
        lists: bool,
    ) -> (Vec<(Duration, Duration)>, Vec<Seen>) {
        let state = Arc::new(Mutex::new(Server::Up));
        let (client, server) = mock_api(lease_server(Arc::clone(&state)));
        let replica = replica(client);
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        let (shutdown, trigger) = Shutdown::manual();
        let start = Instant::now();
        let terms = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&terms);
        let watched = Arc::clone(&metrics);
        let run = replica.run(&metrics, &shutdown, move |term| {
            let recorded = Arc::clone(&recorded);
            if lists {
                watched.watch_synced();
            }
            async move {
                let began = start.elapsed();
                term.ended().await;
                recorded
                    .lock()
                    .expect("lock")
                    .push((began, start.elapsed()));
            }
        });
        let script = async {
            for (at, next) in script {
                tokio::time::sleep_until(start + *at).await;
                *state.lock().expect("lock") = *next;
            }
            tokio::time::sleep_until(start + stop_after).await;
            trigger.stop();
        };
        tokio::join!(run, script);
        drop(replica);
        let seen = server.await.expect("the mock API server ran");
        let terms = terms.lock().expect("lock").clone();
        (terms, seen)
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_reconciles_in_one_term_while_it_renews_and_deletes_its_lease_on_stop() {
        let (terms, seen) = terms_over(&[], Duration::from_secs(60)).await;
        let [(began, ended)] = terms.as_slice() else {
            panic!("one term: {terms:?}");
        };
        assert!(*began < Duration::from_millis(10), "began at {began:?}");
        assert_eq!(*ended, Duration::from_secs(60));
        assert_eq!(seen.last().map(|s| s.method.clone()), Some(Method::DELETE));
        let renewals = seen.iter().filter(|s| s.method == Method::PATCH).count();
        assert!(
            renewals >= 60 / LEASE_SECONDS as usize,
            "{renewals} renewals"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_term_whose_watches_get_nothing_while_they_list_is_started_again_and_one_listed_is_not()
     {
        let stop = LISTING_STALLED * 2 + Duration::from_secs(30);
        let (listed, _) = terms_listing(&[], stop, true).await;
        assert_eq!(listed.len(), 1, "{listed:?}");
        let (stalled, _) = terms_listing(&[], stop, false).await;
        let [(_, first_end), (second_began, second_end), (third_began, _)] = stalled.as_slice()
        else {
            panic!("three terms: {stalled:?}");
        };
        for (began, ended) in [(Duration::ZERO, *first_end), (*second_began, *second_end)] {
            let lasted = ended - began;
            assert!(
                lasted >= LISTING_STALLED && lasted <= LISTING_STALLED + Duration::from_secs(2),
                "a stalled term lasted {lasted:?}"
            );
        }
        // Started again at once: the replica still holds its shard.
        assert!(
            *second_began - *first_end < Duration::from_secs(1),
            "{stalled:?}"
        );
        assert!(
            *third_began - *second_end < Duration::from_secs(1),
            "{stalled:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_taken_over_ends_the_term_before_it_could_expire_and_a_new_one_follows_a_rejoin()
     {
        let taken_at = Duration::from_secs(15);
        let (terms, _) = terms_over(&[(taken_at, Server::TakeOver)], Duration::from_secs(60)).await;
        let [(_, first_end), (second_began, _)] = terms.as_slice() else {
            panic!("two terms: {terms:?}");
        };
        // The renewal after the takeover finds the Lease gone and closes the fence at once:
        // the term ends no later than the next renewal, within a Lease of the takeover.
        assert!(*first_end > taken_at, "{first_end:?}");
        assert!(
            *first_end <= taken_at + Duration::from_secs(LEASE_SECONDS),
            "{first_end:?}"
        );
        // The replica joins again a whole Lease later, as a new member.
        assert!(
            *second_began >= *first_end + Duration::from_secs(LEASE_SECONDS),
            "{second_began:?} after {first_end:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_api_server_away_ends_the_term_before_the_lease_could_expire_and_its_return_starts_one()
     {
        let away = Duration::from_secs(20);
        let back = Duration::from_secs(45);
        let (terms, _) = terms_over(
            &[(away, Server::Down), (back, Server::Up)],
            Duration::from_secs(90),
        )
        .await;
        let [(_, first_end), (second_began, _)] = terms.as_slice() else {
            panic!("two terms: {terms:?}");
        };
        // The last renewal that succeeded was sent before `away`; the term ends before that
        // Lease could expire.
        assert!(*first_end > away, "{first_end:?}");
        assert!(
            *first_end < away + Duration::from_secs(LEASE_SECONDS),
            "{first_end:?}"
        );
        // Renewals are retried every second: the next term starts soon after the return.
        assert!(*second_began >= back, "{second_began:?}");
        assert!(
            *second_began <= back + Duration::from_secs(2),
            "{second_began:?}"
        );
    }
}
