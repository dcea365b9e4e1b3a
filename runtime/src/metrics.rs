//! Reconcile metrics and readiness, shared by a controller and its webhooks, in the Prometheus
//! text format.
//!
//! Every counter is in the text from the start, at zero where nothing happened yet: a rate or
//! an alert over a series that appears only at the first error would see no data until then.
//! Beside the operator's own (`operator_*`), the text holds whether this replica leads, how
//! many watches are still listing, and the process's CPU and memory ([`crate::process`]).

use std::{
    collections::BTreeSet,
    hash::Hash,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use kube::{
    Resource,
    runtime::{reflector::Store, watcher},
};

use prometheus_client::{
    encoding::{
        EncodeLabelSet,
        text::{encode_eof, encode_registry},
    },
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

use crate::cache::Counted;
use crate::{
    cache::{CacheSizes, CacheSizesCollector},
    client::{API_REQUESTS, RequestLabels},
    process::ProcessCollector,
};

/// An error a reconcile can fail with, as the metrics and the backoff see it.
pub trait Retryable {
    /// Whether retrying after a delay may succeed: the API server or the network, rather than
    /// an object that cannot be reconciled as it is.
    fn is_transient(&self) -> bool;
}

/// The kinds of error counted, each a series from the start.
const ERROR_KINDS: [&str; 2] = ["transient", "permanent"];

/// The verbs counted, each a series from the start.
const VERBS: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];

/// Labels of the error counter: whether the error is retried.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ErrorLabels {
    /// `transient` (retried with backoff) or `permanent` (waits for a change).
    pub kind: String,
}

/// Labels of the per-watch readiness gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabels {
    /// The kind the watch lists.
    pub watch: String,
}

/// Labels of the webhook request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// `validate`, `mutate` or `convert`.
    pub hook: String,
    /// How the request was answered: `allowed`, `patched`, `denied`, `converted`, `invalid`
    /// or `failed`.
    pub outcome: String,
}

/// Labels of the refused connections counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PortLabels {
    /// `webhooks` or `endpoints`.
    pub(crate) port: String,
}

/// How long webhook requests may wait with no turn given to any before the replica says it is
/// not ready: the API server's admission timeout, after which every request waiting has failed.
pub(crate) const WEBHOOKS_STUCK: Duration = Duration::from_secs(10);

/// How long a term's watches may list with nothing at all coming through any of them (no
/// object, no error) before the term is started again with new ones. A list that is slow but
/// moves never trips it, nor does one that fails and retries; a watch whose answer sits
/// unread does: a replica back from an API server outage once started a term whose primaries'
/// watch read 16 KiB of its streaming list and then nothing for ten minutes, its cache
/// empty and every object placed on it unreconciled. controller-runtime bounds a cache's
/// first sync the same way (`CacheSyncTimeout`, 2 minutes), by failing the manager.
pub(crate) const LISTING_STALLED: Duration = Duration::from_secs(120);

/// When a replica is ready, which is what puts it behind a Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadyWhen {
    /// When this many watches have each listed everything, so reconciles see the whole
    /// cluster.
    WatchesListed(usize),
    /// When the webhooks serve with a certificate. Every replica serves, leading or not, and a
    /// leader's watches still listing must not refuse admissions meanwhile. Its `watches` are
    /// still counted in `operator_watches_pending`, for the alert.
    WebhooksServe {
        /// The watches the operator runs once it leads.
        watches: usize,
    },
}

/// Reconcile metrics and readiness, shared through a controller's context.
pub struct Metrics {
    registry: Registry,
    /// The process's own metrics, under their conventional names (no `operator_` prefix).
    process: Registry,
    /// Reconciles run, successful or not.
    pub(crate) reconciles: Counter,
    /// Failed reconciles by kind of error.
    pub(crate) errors: Family<ErrorLabels, Counter>,
    /// How long reconciles take, in seconds.
    pub(crate) duration: Histogram,
    /// Webhook requests answered, by hook and outcome; registered only with webhooks, and
    /// described once [`Metrics::expect_webhook_answers`] names the hooks.
    webhook_requests: Family<WebhookLabels, Counter>,
    /// When the served webhook certificate expires; registered only with webhooks, and 0
    /// until one is served.
    certificate_expiry: Gauge,
    /// Watches that have not yet listed everything.
    unsynced: AtomicUsize,
    /// [`Metrics::unsynced`], as served.
    watches_pending: Gauge,
    /// When anything last came through a watch still listing, or the term started.
    listing_moved: Mutex<tokio::time::Instant>,
    /// Per watch, 1 once it has listed everything in this term.
    watches_listed: Family<WatchLabels, Gauge>,
    /// The watches [`Metrics::watches_listed`] has series for, to reset them between terms.
    watch_names: Mutex<BTreeSet<String>>,
    /// 1 while this replica leads (or runs without leader election), 0 before.
    leader: Gauge,
    /// Whether the webhooks still wait for their certificate.
    webhooks_pending: AtomicBool,
    /// Webhook requests waiting for a turn, and when a turn was last given: a replica whose
    /// requests wait and have been given none for [`WEBHOOKS_STUCK`] cannot answer.
    webhook_waiting: AtomicUsize,
    webhook_last_turn: Mutex<Instant>,
    /// Connections closed as soon as accepted, by port, for being over its cap.
    connections_refused: Family<PortLabels, Counter>,
    connections_closed_idle: Family<PortLabels, Counter>,
    /// 1 while this replica runs a sharded operator's sharder. Without the `sharding`
    /// feature, the gauges are served, at 0, and kept only by the registry.
    #[cfg(feature = "sharding")]
    sharder: Gauge,
    /// Objects the sharder could not label at its last attempt.
    #[cfg(feature = "sharding")]
    unplaced: Gauge,
    /// The caches counted in `operator_cache_objects`.
    caches: Arc<CacheSizes>,
    ready_when: ReadyWhen,
    /// Whether the log last said the credentials are refused.
    credentials_told_dead: AtomicBool,
}

impl Metrics {
    /// Reconciles run so far, successful or not.
    pub fn reconciles(&self) -> u64 {
        self.reconciles.get()
    }

    /// Metrics for an operator that is ready `ready_when`.
    pub fn new(ready_when: ReadyWhen) -> Self {
        let mut registry = Registry::with_prefix("operator");
        let reconciles = Counter::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let duration = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        for kind in ERROR_KINDS {
            let _ = errors.get_or_create(&ErrorLabels {
                kind: kind.to_owned(),
            });
        }
        for verb in VERBS {
            let _ = API_REQUESTS.get_or_create(&RequestLabels {
                verb: verb.to_owned(),
            });
        }
        registry.register("reconciles", "Reconciles run", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Failed reconciles by kind",
            errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Reconcile duration",
            duration.clone(),
        );
        registry.register(
            "api_requests",
            "Requests made to the Kubernetes API server, by verb",
            API_REQUESTS.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "Whether this replica reconciles (1) or waits (0): it holds the leader Lease, or, with --sharding, its own shard's Lease; operator_sharder says which replica places the objects",
            leader.clone(),
        );
        let watches_pending = Gauge::default();
        registry.register(
            "watches_pending",
            "Watches that have not yet listed everything since this replica began to lead",
            watches_pending.clone(),
        );
        let watches_listed = Family::<WatchLabels, Gauge>::default();
        registry.register(
            "watch_listed",
            "Whether a watch has listed everything since this replica began to lead (1) or not (0), by the kind it watches",
            watches_listed.clone(),
        );
        let connections_refused = Family::<PortLabels, Counter>::default();
        registry.register(
            "connections_refused",
            "Connections closed as soon as accepted, by port, because as many as it allows were open, each with a request in flight",
            connections_refused.clone(),
        );
        let connections_closed_idle = Family::<PortLabels, Counter>::default();
        registry.register(
            "connections_closed_idle",
            "Idle connections closed, by port, to make room for a new one at the port's cap or its peer's: the oldest of the peer holding the most",
            connections_closed_idle.clone(),
        );
        let sharder: Gauge = Gauge::default();
        registry.register(
            "sharder",
            "Whether this replica runs the sharder that places a sharded operator's objects (1) or not (0)",
            sharder.clone(),
        );
        let unplaced: Gauge = Gauge::default();
        registry.register(
            "sharder_unplaced",
            "Objects the sharder could not label with their shard at its last attempt; it retries them with a backoff of up to a minute",
            unplaced.clone(),
        );
        let caches = Arc::new(CacheSizes::default());
        registry.register_collector(Box::new(CacheSizesCollector(Arc::clone(&caches))));
        let mut process = Registry::default();
        process.register_collector(Box::new(ProcessCollector));
        let webhook_requests = Family::<WebhookLabels, Counter>::default();
        let certificate_expiry = Gauge::default();
        if matches!(ready_when, ReadyWhen::WebhooksServe { .. }) {
            registry.register(
                "webhook_requests",
                "Webhook requests answered, by hook and outcome",
                webhook_requests.clone(),
            );
            registry.register(
                "webhook_certificate_expiry_timestamp_seconds",
                "When the certificate the webhooks serve expires, in seconds since the Unix epoch (0 before one is served)",
                certificate_expiry.clone(),
            );
        }
        let watches = match ready_when {
            ReadyWhen::WatchesListed(watches) | ReadyWhen::WebhooksServe { watches } => watches,
        };
        watches_pending.set(i64::try_from(watches).unwrap_or(i64::MAX));
        Self {
            registry,
            process,
            reconciles,
            errors,
            duration,
            webhook_requests,
            certificate_expiry,
            unsynced: AtomicUsize::new(watches),
            watches_pending,
            listing_moved: Mutex::new(tokio::time::Instant::now()),
            watches_listed,
            watch_names: Mutex::default(),
            leader,
            webhooks_pending: AtomicBool::new(true),
            webhook_waiting: AtomicUsize::new(0),
            webhook_last_turn: Mutex::new(Instant::now()),
            connections_refused,
            connections_closed_idle,
            #[cfg(feature = "sharding")]
            sharder,
            #[cfg(feature = "sharding")]
            unplaced,
            caches,
            ready_when,
            credentials_told_dead: AtomicBool::new(false),
        }
    }

    /// Records one reconcile that started at `started` and ended with `error`, if any.
    pub fn observe<E: Retryable>(&self, started: Instant, error: Option<&E>) {
        self.reconciles.inc();
        self.duration.observe(started.elapsed().as_secs_f64());
        if let Some(error) = error {
            let kind = if error.is_transient() {
                "transient"
            } else {
                "permanent"
            };
            self.errors
                .get_or_create(&ErrorLabels {
                    kind: kind.to_owned(),
                })
                .inc();
        }
    }

    /// Follows one watch of `watch` (a kind) for `.inspect(...)` on its stream: its
    /// `operator_watch_listed` series is 0 until the watch first lists everything, then 1,
    /// and `operator_watches_pending` counts down once. It reads the watch's own events, not
    /// `Store::wait_until_ready`: that wakes only the latest of several waiters, and the
    /// controller already waits on its store there.
    pub fn listing<K>(
        self: &Arc<Self>,
        watch: &str,
    ) -> impl FnMut(&Result<watcher::Event<K>, watcher::Error>) + Send + use<K> {
        let labels = WatchLabels {
            watch: watch.to_owned(),
        };
        self.watches_listed.get_or_create(&labels).set(0);
        self.watch_names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(labels.watch.clone());
        let metrics = Arc::clone(self);
        let mut listed = false;
        move |event| {
            if !listed {
                metrics.listing_moved();
            }
            if !listed && matches!(event, Ok(watcher::Event::InitDone)) {
                listed = true;
                metrics.watches_listed.get_or_create(&labels).set(1);
                metrics.watch_synced();
            }
        }
    }

    /// Notes that one watch has listed everything; [`Metrics::listing`] calls it.
    pub(crate) fn watch_synced(&self) {
        if let Ok(was) = self
            .unsynced
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        {
            self.watches_pending
                .set(i64::try_from(was - 1).unwrap_or(i64::MAX));
        }
    }

    /// Notes that this replica leads from now on (it took the Lease, or runs without one), and
    /// so starts its watches, which have all to list again.
    pub fn leading(&self) {
        self.all_watches_pending();
        self.leader.set(1);
    }

    /// Notes that something came through a watch that is still listing.
    fn listing_moved(&self) {
        *self
            .listing_moved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = tokio::time::Instant::now();
    }

    /// Whether this replica leads, some of its watches have not listed, and nothing came
    /// through any of them for [`LISTING_STALLED`].
    pub(crate) fn listing_stalled(&self) -> bool {
        self.leader.get() == 1
            && self.unsynced.load(Ordering::SeqCst) > 0
            && self
                .listing_moved
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .elapsed()
                > LISTING_STALLED
    }

    /// Resolves once [`Metrics::listing_stalled`], checked every second: a term's end.
    pub(crate) async fn stalled(&self) {
        while !self.listing_stalled() {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    fn all_watches_pending(&self) {
        self.listing_moved();
        let watches = self.watches();
        self.unsynced.store(watches, Ordering::SeqCst);
        self.watches_pending
            .set(i64::try_from(watches).unwrap_or(i64::MAX));
    }

    /// Notes that this replica stopped leading and waits for the Lease again: its watches
    /// have stopped.
    pub fn standing_by(&self) {
        self.leader.set(0);
        self.all_watches_pending();
        let names = self.watch_names.lock().unwrap_or_else(|p| p.into_inner());
        for watch in names.iter() {
            let labels = WatchLabels {
                watch: watch.clone(),
            };
            self.watches_listed.get_or_create(&labels).set(0);
        }
    }

    fn watches(&self) -> usize {
        match self.ready_when {
            ReadyWhen::WatchesListed(watches) | ReadyWhen::WebhooksServe { watches } => watches,
        }
    }

    /// Serves how many objects `store` holds as the cache of `kind`, in place of an earlier
    /// cache of that kind, for as long as the returned guard lives: a term's cache is not
    /// kept alive, or counted, after the term.
    pub(crate) fn count_cache<K>(&self, kind: &str, store: Store<K>) -> Counted
    where
        K: Resource + Clone + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        self.caches.count(kind, store)
    }

    /// Notes that the webhooks serve with a certificate.
    pub fn serving(&self) {
        self.webhooks_pending.store(false, Ordering::SeqCst);
    }

    /// Notes when the certificate the webhooks now serve expires, if it could be read.
    pub fn certificate_expires(&self, at: Option<i64>) {
        if let Some(at) = at {
            self.certificate_expiry.set(at);
        }
    }

    /// Makes `hook`'s answers with each of `outcomes` series at zero, so they are in the text
    /// before the first request.
    pub fn expect_webhook_answers(&self, hook: &str, outcomes: &[&str]) {
        for outcome in outcomes {
            let _ = self.webhook_requests.get_or_create(&WebhookLabels {
                hook: hook.to_owned(),
                outcome: (*outcome).to_owned(),
            });
        }
    }

    /// Counts one webhook request answered by `hook` with `outcome`.
    pub fn webhook_answered(&self, hook: &str, outcome: &str) {
        let labels = WebhookLabels {
            hook: hook.to_owned(),
            outcome: outcome.to_owned(),
        };
        self.webhook_requests.get_or_create(&labels).inc();
    }

    /// Makes the refused and the closed idle connections of `port` series at zero.
    pub(crate) fn expect_connections_refused(&self, port: &str) {
        let labels = PortLabels {
            port: port.to_owned(),
        };
        let _ = self.connections_refused.get_or_create(&labels);
        let _ = self.connections_closed_idle.get_or_create(&labels);
    }

    /// Counts one connection to `port` closed for being over its cap.
    pub(crate) fn connection_refused(&self, port: &str) {
        let labels = PortLabels {
            port: port.to_owned(),
        };
        self.connections_refused.get_or_create(&labels).inc();
    }

    /// Counts one idle connection to `port` closed to make room for a new one.
    pub(crate) fn connection_closed_idle(&self, port: &str) {
        let labels = PortLabels {
            port: port.to_owned(),
        };
        self.connections_closed_idle.get_or_create(&labels).inc();
    }

    /// Notes that this replica runs the sharder, until the guard is dropped.
    #[cfg(feature = "sharding")]
    pub(crate) fn sharder_runs(&self) -> impl Drop + '_ {
        struct Running<'a>(&'a Gauge);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                self.0.set(0);
            }
        }
        self.sharder.set(1);
        Running(&self.sharder)
    }

    /// Notes how many objects the sharder could not place at its last attempt.
    #[cfg(feature = "sharding")]
    pub(crate) fn sharder_unplaced(&self, objects: usize) {
        self.unplaced
            .set(i64::try_from(objects).unwrap_or(i64::MAX));
    }

    /// Notes that a webhook request waits for a turn, until [`Metrics::webhook_turn_given`].
    #[cfg(feature = "webhooks")]
    pub(crate) fn webhook_waits(&self) {
        self.webhook_waiting.fetch_add(1, Ordering::SeqCst);
    }

    /// Notes that a request that waited has a turn, or stopped waiting.
    #[cfg(feature = "webhooks")]
    pub(crate) fn webhook_turn_given(&self) {
        self.webhook_waiting.fetch_sub(1, Ordering::SeqCst);
        *self
            .webhook_last_turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    /// Whether webhook requests wait, and none has been given a turn for [`WEBHOOKS_STUCK`].
    fn webhooks_stuck(&self) -> bool {
        self.webhook_waiting.load(Ordering::SeqCst) > 0
            && self
                .webhook_last_turn
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .elapsed()
                > WEBHOOKS_STUCK
    }

    /// Whether this replica is ready, as [`ReadyWhen`] says. A replica waiting for the Lease
    /// is ready to take over: were it not, a rolling update of two replicas would wait for a
    /// new pod that cannot lead until an old one, which the update keeps, stops.
    ///
    /// A replica whose credentials the API server has refused for longer than a Lease lasts
    /// is not ready, whatever else holds: its caches and webhooks no longer follow the
    /// cluster, and another replica should serve.
    pub fn is_ready(&self) -> bool {
        self.ready_with(crate::client::credentials_refused_for())
    }

    /// [`Metrics::is_ready`], the credentials refused for `refused`.
    fn ready_with(&self, refused: Option<Duration>) -> bool {
        if self.credentials_dead(refused) {
            return false;
        }
        match self.ready_when {
            ReadyWhen::WatchesListed(_) => {
                self.leader.get() == 0 || self.unsynced.load(Ordering::SeqCst) == 0
            }
            ReadyWhen::WebhooksServe { .. } => {
                !self.webhooks_pending.load(Ordering::SeqCst) && !self.webhooks_stuck()
            }
        }
    }

    /// Whether the API server has refused this process's credentials for longer than a Lease
    /// lasts ([`crate::settings::LEASE_SECONDS`]); said once in the log each time it becomes so.
    fn credentials_dead(&self, refused: Option<Duration>) -> bool {
        let limit = Duration::from_secs(crate::settings::LEASE_SECONDS);
        let refused = refused.filter(|refused| *refused > limit);
        let dead = refused.is_some();
        if self.credentials_told_dead.swap(dead, Ordering::SeqCst) != dead {
            match refused {
                Some(refused) => tracing::error!(
                    refused_for = ?refused,
                    "the API server refuses this replica's credentials (401 Unauthorized): \
                     reporting not ready until it accepts them; check the ServiceAccount's \
                     token, or the kubeconfig"
                ),
                None => tracing::info!("the API server accepts this replica's credentials again"),
            }
        }
        dead
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut text, &self.registry);
        let _ = encode_registry(&mut text, &self.process);
        let _ = encode_eof(&mut text);
        text
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    #[test]
    fn a_replica_whose_credentials_are_refused_past_a_lease_is_not_ready_until_accepted() {
        let metrics = Metrics::new(ReadyWhen::WatchesListed(0));
        let lease = Duration::from_secs(crate::settings::LEASE_SECONDS);
        assert!(metrics.ready_with(None));
        assert!(
            metrics.ready_with(Some(lease / 2)),
            "a blip is no dead token"
        );
        assert!(!metrics.ready_with(Some(lease * 2)));
        assert!(metrics.ready_with(None), "ready again once accepted");
    }

    #[derive(Debug)]
    struct Failure {
        transient: bool,
    }

    impl Retryable for Failure {
        fn is_transient(&self) -> bool {
            self.transient
        }
    }

    #[test]
    fn a_leader_is_ready_once_every_watch_listed_and_a_standby_at_once() {
        let metrics = Metrics::new(ReadyWhen::WatchesListed(2));
        assert!(metrics.is_ready(), "a standby is ready to take over");
        metrics.leading();
        assert!(!metrics.is_ready());
        metrics.watch_synced();
        assert!(!metrics.is_ready());
        metrics.watch_synced();
        assert!(metrics.is_ready());
        metrics.watch_synced();
        assert!(
            metrics.is_ready(),
            "a relist after the first does not count down past zero"
        );
    }

    #[test]
    fn pending_watches_and_leadership_are_served_as_they_change() {
        let metrics = Metrics::new(ReadyWhen::WatchesListed(2));
        let text = metrics.render();
        assert!(text.contains("operator_watches_pending 2\n"), "{text}");
        assert!(text.contains("operator_leader 0\n"), "{text}");
        metrics.leading();
        metrics.watch_synced();
        let text = metrics.render();
        assert!(text.contains("operator_watches_pending 1\n"), "{text}");
        assert!(text.contains("operator_leader 1\n"), "{text}");
        metrics.watch_synced();
        metrics.watch_synced();
        assert!(metrics.render().contains("operator_watches_pending 0\n"));
    }

    #[test]
    fn each_watch_is_listed_once_per_term_by_kind() {
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(2)));
        metrics.leading();
        let mut primary = metrics.listing::<ConfigMap>("PrometheusRule");
        let mut children = metrics.listing::<ConfigMap>("ConfigMap");
        let text = metrics.render();
        assert!(
            text.contains("operator_watch_listed{watch=\"ConfigMap\"} 0\n"),
            "{text}"
        );
        primary(&Ok(watcher::Event::Init));
        primary(&Ok(watcher::Event::InitDone));
        primary(&Ok(watcher::Event::InitDone));
        let text = metrics.render();
        assert!(
            text.contains("operator_watch_listed{watch=\"PrometheusRule\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("operator_watches_pending 1\n"),
            "a relist counts once: {text}"
        );
        children(&Ok(watcher::Event::InitDone));
        assert!(metrics.is_ready());
        metrics.standing_by();
        let text = metrics.render();
        assert!(
            text.contains("operator_watch_listed{watch=\"PrometheusRule\"} 0\n"),
            "a standby watches nothing: {text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_listing_stalls_only_while_it_leads_with_nothing_coming_through() {
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        let mut primary = metrics.listing::<ConfigMap>("PrometheusRule");
        tokio::time::advance(LISTING_STALLED * 2).await;
        assert!(!metrics.listing_stalled(), "a standby lists nothing");
        metrics.leading();
        tokio::time::advance(LISTING_STALLED - Duration::from_secs(1)).await;
        // A failure the watcher retries is something coming through too.
        primary(&Err(watcher::Error::NoResourceVersion));
        tokio::time::advance(LISTING_STALLED - Duration::from_secs(1)).await;
        assert!(!metrics.listing_stalled(), "it moved within the bound");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(metrics.listing_stalled());
        primary(&Ok(watcher::Event::InitDone));
        tokio::time::advance(LISTING_STALLED * 2).await;
        assert!(!metrics.listing_stalled(), "listed: nothing to wait for");
    }

    #[test]
    fn a_new_term_lists_every_watch_again() {
        let metrics = Metrics::new(ReadyWhen::WatchesListed(2));
        metrics.leading();
        metrics.watch_synced();
        metrics.watch_synced();
        metrics.standing_by();
        let text = metrics.render();
        assert!(text.contains("operator_leader 0\n"), "{text}");
        assert!(
            text.contains("operator_watches_pending 2\n"),
            "a standby runs no watch: {text}"
        );
        assert!(metrics.is_ready(), "standing by again");
        metrics.leading();
        let text = metrics.render();
        assert!(text.contains("operator_watches_pending 2\n"), "{text}");
        assert!(
            !metrics.is_ready(),
            "the new term's watches have not listed"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_is_served_under_its_conventional_names_before_the_end_marker() {
        let text = Metrics::new(ReadyWhen::WatchesListed(0)).render();
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_start_time_seconds",
            "process_open_fds",
        ] {
            assert!(
                text.lines()
                    .any(|line| line.starts_with(&format!("{name} "))),
                "{name}: {text}"
            );
        }
        assert!(text.ends_with("# EOF\n"), "one end marker, last: {text}");
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    }

    #[test]
    fn readiness_with_webhooks_waits_for_the_certificate_not_the_watches() {
        let metrics = Metrics::new(ReadyWhen::WebhooksServe { watches: 1 });
        metrics.watch_synced();
        assert!(!metrics.is_ready(), "the webhooks have no certificate yet");
        metrics.serving();
        assert!(metrics.is_ready());
    }

    #[test]
    fn reconciles_and_errors_are_counted_by_kind() {
        let metrics = Metrics::new(ReadyWhen::WatchesListed(0));
        metrics.observe::<Failure>(Instant::now(), None);
        metrics.observe(Instant::now(), Some(&Failure { transient: false }));
        metrics.observe(Instant::now(), Some(&Failure { transient: true }));
        metrics.observe(Instant::now(), Some(&Failure { transient: true }));
        let text = metrics.render();
        assert!(text.contains("operator_reconciles_total 4"), "{text}");
        assert!(
            text.contains("operator_reconcile_errors_total{kind=\"permanent\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("operator_reconcile_errors_total{kind=\"transient\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("operator_reconcile_duration_seconds_count 4"),
            "{text}"
        );
    }

    #[test]
    fn every_counter_is_described_before_anything_happens() {
        let metrics = Metrics::new(ReadyWhen::WebhooksServe { watches: 1 });
        metrics.expect_webhook_answers("validate", &["allowed"]);
        let text = metrics.render();
        for name in [
            "operator_reconciles",
            "operator_reconcile_errors",
            "operator_reconcile_duration_seconds",
            "operator_api_requests",
            "operator_webhook_requests",
            "operator_leader",
            "operator_watches_pending",
        ] {
            assert!(text.contains(&format!("# HELP {name} ")), "{name}: {text}");
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}: {text}");
        }
        assert!(
            text.contains("operator_reconcile_errors_total{kind=\"transient\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("operator_api_requests_total{verb=\"patch\"}"),
            "{text}"
        );
    }

    #[test]
    fn webhook_answers_are_counted_by_hook_and_outcome() {
        let metrics = Metrics::new(ReadyWhen::WebhooksServe { watches: 1 });
        metrics.expect_webhook_answers("validate", &["allowed", "denied"]);
        metrics.webhook_answered("validate", "denied");
        let text = metrics.render();
        assert!(
            text.contains(
                "operator_webhook_requests_total{hook=\"validate\",outcome=\"denied\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "operator_webhook_requests_total{hook=\"validate\",outcome=\"allowed\"} 0"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_served_certificates_expiry_is_kept_until_a_readable_one_replaces_it() {
        let metrics = Metrics::new(ReadyWhen::WebhooksServe { watches: 1 });
        let expiry = "operator_webhook_certificate_expiry_timestamp_seconds";
        assert!(metrics.render().contains(&format!("{expiry} 0\n")));
        metrics.certificate_expires(Some(1_900_000_000));
        metrics.certificate_expires(None);
        let text = metrics.render();
        assert!(text.contains(&format!("{expiry} 1900000000\n")), "{text}");
    }

    #[test]
    fn without_webhooks_no_webhook_counter_is_served() {
        let text = Metrics::new(ReadyWhen::WatchesListed(1)).render();
        assert!(!text.contains("webhook"), "{text}");
    }
}
