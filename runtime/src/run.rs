//! The run loop every operator shares: the metrics endpoints, leader election or, with
//! `--sharding`, the shard's terms, and in each term the watches and the controller over them,
//! until the operator is asked to stop.
//!
//! A generated controller declares only what is its own: its [`Options`] (from
//! `operator.yaml`), its relations (a function that adds them to the controller over the
//! primary, from the streams a [`Watches`] gives) and its reconcile, for each kind it
//! reconciles (a typed operator's one primary, or each of a generic operator's kinds).
//! [`Elected`] and [`Runner::run_term`] do the rest, the same way for every operator:
//! - the primary's watch, on this replica's shard with `--sharding`, cached, and filtered by
//!   the changes that `operator.yaml` says trigger a reconcile;
//! - the owned children's watches, narrowed to the children this operator manages, on this
//!   shard;
//! - every reconcile traced and, through [`Lifecycle::reconcile`], kept to the shard's fence;
//! - after a failure, the per-object backoff of [`Lifecycle::retry_action`];
//! - every watch (the primary's, the children's, the watched kinds', the sharder's) listing
//!   what exists as `--initial-list` says ([`InitialList`]), streamed by default, in pages
//!   where the API server refuses that (`lists.rs`).

use std::{
    fmt::Debug,
    future::Future,
    hash::{DefaultHasher, Hash, Hasher},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures::{Stream, StreamExt};
use kube::{
    Api, Client, Resource,
    api::ApiResource,
    core::{ClusterResourceScope, NamespaceResourceScope},
    runtime::{
        Controller, Predicate, PredicateConfig, WatchStreamExt,
        controller::{self, Action},
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    apply::MANAGED_BY_LABEL,
    backoff::{self, RetryExt as _},
    cache::{Cache, Counted, FeedExt as _, forget_unread_fields},
    endpoints,
    leader::{self, Election},
    lifecycle::{Lifecycle, ReconcileError},
    lists,
    metrics::Metrics,
    replica::Replica,
    settings::{Common, InitialList},
    traces,
};
#[cfg(feature = "sharding")]
use crate::{replica::run_sharded, sharding};

mod shared;

pub use crate::leader::{Error as ElectionError, Term};
#[cfg(feature = "sharding")]
pub use crate::sharding::Error as ShardingError;

/// Where an operator watches: the whole cluster, or the namespace its client defaults to
/// (`scope: Namespace` in `operator.yaml`, for an operator that holds only a Role).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace.
    Cluster,
    /// The client's default namespace: the operator's own.
    Namespace,
}

impl Scope {
    /// The namespace an operator of this scope watches with `client`: the client's default
    /// namespace, or none for everywhere.
    pub fn namespace(self, client: &Client) -> Option<&str> {
        match self {
            Self::Cluster => None,
            Self::Namespace => Some(client.default_namespace()),
        }
    }
}

/// How an operator's controller runs, as its `operator.yaml` says.
pub struct Options<K: 'static> {
    /// The operator's name: its field manager, its Lease, its shard ring, and the value of
    /// [`MANAGED_BY_LABEL`] on its children.
    pub name: &'static str,
    /// Which changes of a primary trigger a reconcile: `kube::runtime::predicates` functions,
    /// hashed together, so a change to any of them passes. None: every change.
    pub changes: &'static [fn(&K) -> Option<u64>],
    /// Reconciles at once; 0 for no limit. Each holds an API connection while it writes, and
    /// a burst of new objects must not open thousands.
    pub concurrency: u16,
    /// Changes within this long of each other make one reconcile.
    pub debounce: Duration,
    /// Where the operator watches.
    pub scope: Scope,
    /// Whether the objects of the operator's own workload are left alone: its Deployment and
    /// pods, its Service and its webhooks' Secret, which carry [`OWN_WORKLOAD_LABEL`] with the
    /// operator's name. Set for an operator of built-in kinds, whose own workload is of the
    /// kinds it reconciles: reconciling it, the operator would own and finalize its own
    /// Deployment, which would then outlive an uninstall that takes the operator's RBAC with it.
    pub leaves_own_workload: bool,
}

/// The label with the operator's name on every object of its own workload that `deploy/` and
/// its Helm chart make: what [`Options::leaves_own_workload`] leaves alone.
pub const OWN_WORKLOAD_LABEL: &str = "app.kubernetes.io/name";

/// `config` without the objects of the operator `name`'s own workload ([`OWN_WORKLOAD_LABEL`]),
/// as well as the labels it selects already.
pub(crate) fn without_own_workload(config: watcher::Config, name: &str) -> watcher::Config {
    let own = format!("{OWN_WORKLOAD_LABEL}!={name}");
    let labels = match config.label_selector.as_deref() {
        Some(selected) => format!("{selected},{own}"),
        None => own,
    };
    config.labels(&labels)
}

impl<K> Options<K> {
    /// The controller's configuration these options give.
    pub fn config(&self) -> kube::runtime::Config {
        kube::runtime::Config::default()
            .concurrency(self.concurrency)
            .debounce(self.debounce)
    }
}

/// A kind's scope, as an [`Api`] over where the operator watches needs it: a namespaced kind
/// is watched in the operator's namespace when it keeps to one, a cluster-scoped kind always
/// cluster-wide.
pub trait WatchScope {
    /// Whether objects of this scope live in a namespace.
    const NAMESPACED: bool;

    /// The API of `K`'s objects in `namespace`, or in every namespace.
    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>;

    /// The API that `obj` is written through: its own namespace's, or the cluster-wide one;
    /// none for a namespaced object without a namespace.
    fn api_of<K>(client: Client, obj: &K) -> Option<Api<K>>
    where
        K: Resource<Scope = Self, DynamicType = ()>;
}

impl WatchScope for NamespaceResourceScope {
    const NAMESPACED: bool = true;

    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        match namespace {
            Some(namespace) => Api::namespaced(client, namespace),
            None => Api::all(client),
        }
    }

    fn api_of<K>(client: Client, obj: &K) -> Option<Api<K>>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        let namespace = obj.meta().namespace.as_deref()?;
        Some(Api::namespaced(client, namespace))
    }
}

impl WatchScope for ClusterResourceScope {
    const NAMESPACED: bool = false;

    fn api<K>(client: Client, _: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        Api::all(client)
    }

    fn api_of<K>(client: Client, _: &K) -> Option<Api<K>>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        Some(Api::all(client))
    }
}

/// The API that `obj` is written through (see [`WatchScope::api_of`]); a namespaced object
/// without a namespace is a permanent error: it cannot be written until it changes.
pub fn object_api<K: Watched>(client: &Client, obj: &K) -> Result<Api<K>, crate::error::Error> {
    <K::Scope as WatchScope>::api_of(client.clone(), obj).ok_or_else(|| {
        crate::error::Error::Permanent(format!(
            "{} {} has no namespace",
            K::kind(&()),
            obj.meta().name.as_deref().unwrap_or_default()
        ))
    })
}

/// A kind a controller can watch.
pub trait Watched:
    Resource<DynamicType = (), Scope: WatchScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = (), Scope: WatchScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// The watches of one term, for a generated controller to add its relations from: each
/// stream is retried after failures, and the owned ones feed the operator's caches.
pub struct Watches<'a> {
    client: &'a Client,
    metrics: &'a Arc<Metrics>,
    namespace: Option<&'a str>,
    managed: watcher::Config,
    /// How each watch of the term lists what exists when it starts (`--initial-list`).
    initial_list: InitialList,
    /// The owned kinds' caches, counted in the metrics for this term.
    counted: Mutex<Vec<Counted>>,
    /// The watches the term's controllers share (see [`Elected`]), so each related kind is
    /// watched once however many controllers relate it; with one controller, each watch has
    /// one follower, which gets every object and error as an unshared watch would give them.
    shared: shared::Shared,
}

impl<'a> Watches<'a> {
    /// The children of kind `C` this operator manages (by [`MANAGED_BY_LABEL`], and on this
    /// replica's shard with `--sharding`), put in `cache` before the reconcile they trigger:
    /// for `Controller::owns_stream`. The cache's size is served as a metric for the term.
    pub fn owned<C: Watched>(
        &self,
        cache: &Cache<C>,
    ) -> impl Stream<Item = Result<C, watcher::Error>> + Send + 'static {
        let key = shared::Key::of::<C>(&self.managed, true);
        self.shared.stream(key, || {
            let kind = C::kind(&());
            self.count(&kind, cache);
            lists::watch(self.api(), self.managed.clone(), self.initial_list)
                .retried()
                .inspect(self.metrics.listing(&kind))
                .modify(forget_unread_fields)
                .reflect_into(cache.feed().clone())
                .touched_objects()
        })
    }

    /// The objects of kind `C` that `config` selects, uncached: for
    /// `Controller::watches_stream`. A `PartialObjectMeta<C>` watches their metadata only.
    /// They are listed as `--initial-list` says, whatever `config` says of it, and the watch
    /// counts in the metrics and readiness as `watched <kind>`: a change to an object listed
    /// late would reconcile its primary late.
    pub fn watched<C: Watched>(
        &self,
        config: watcher::Config,
    ) -> impl Stream<Item = Result<C, watcher::Error>> + Send + 'static {
        let key = shared::Key::of::<C>(&config, false);
        self.shared.stream(key, || {
            let watch = format!("watched {}", C::kind(&()));
            lists::watch(self.api(), config, self.initial_list)
                .retried()
                .inspect(self.metrics.listing(&watch))
                .touched_objects()
        })
    }

    /// The objects of kind `C` that `config` selects, whole, put in `cache` before the
    /// reconcile they trigger: for `Controller::watches_stream`, when a reconcile reads them
    /// (`cache: true` in `operator.yaml`). Like [`Watches::watched`], they are listed as
    /// `--initial-list` says and count in readiness as `watched <kind>`; the cache's size is
    /// served as `operator_cache_objects{kind="watched <kind>"}` for the term. What no
    /// reconcile reads (`managedFields`, kubectl's last applied copy) is dropped first.
    pub fn cached<C: Watched>(
        &self,
        cache: &Cache<C>,
        config: watcher::Config,
    ) -> impl Stream<Item = Result<C, watcher::Error>> + Send + 'static {
        let key = shared::Key::of::<C>(&config, true);
        self.shared.stream(key, || {
            let watch = format!("watched {}", C::kind(&()));
            self.count(&watch, cache);
            lists::watch(self.api(), config, self.initial_list)
                .retried()
                .inspect(self.metrics.listing(&watch))
                .modify(forget_unread_fields)
                .reflect_into(cache.feed().clone())
                .touched_objects()
        })
    }

    /// Serves the size of `cache` as the cache of `kind` for as long as this term lasts.
    fn count<C: Watched>(&self, kind: &str, cache: &Cache<C>) {
        let counted = self.metrics.count_cache(kind, Store::clone(cache));
        self.counted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(counted);
    }

    /// The watches of one term, in `namespace` or the whole cluster, with the children of
    /// the operator `name` on `shard`, or on every shard without one, each listing what exists
    /// as `initial_list` says, shared by the term's controllers.
    fn new(
        client: &'a Client,
        metrics: &'a Arc<Metrics>,
        namespace: Option<&'a str>,
        name: &str,
        shard: Option<&Replica>,
        initial_list: InitialList,
    ) -> Self {
        let managed = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={name}"));
        // With `--sharding`, only this shard's: children carry their owner's shard label.
        let managed = match shard {
            Some(shard) => shard.narrowed(managed),
            None => managed,
        };
        Watches {
            client,
            metrics,
            namespace,
            managed,
            initial_list,
            counted: Mutex::default(),
            shared: shared::Shared::default(),
        }
    }

    fn api<C: Watched>(&self) -> Api<C> {
        <C::Scope as WatchScope>::api(self.client.clone(), self.namespace)
    }
}

/// Runs an operator's controller: see the [module](self).
///
/// A whole operator, of ConfigMaps, owning nothing, written by hand with `Runner::run` (an
/// [`Elected`] of one kind). A generated crate's `controller.rs` runs its kinds through
/// [`Elected`] and [`Runner::run_term`] instead, one per kind, so that one family of crates
/// serves an operator of one kind and one of several.
///
/// ```no_run
/// use std::{sync::Arc, time::Duration};
///
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::runtime::{controller::Action, predicates};
/// use operator_gen_runtime::{
///     context::{Context, Operator},
///     reconcile::{Backoff, Result, no_cleanup},
///     run::{Options, Runner, Scope},
///     settings::Common,
///     telemetry::{self, ReadyWhen},
/// };
///
/// /// What the operator is: its primary, its flags, what it owns and how it backs off.
/// struct Labeller;
///
/// impl Operator for Labeller {
///     type Primary = ConfigMap;
///     type Settings = Common;
///     type Children = ();
///     type Cached = ();
///     const NAME: &'static str = "labeller";
///     const BACKOFF: Backoff = Backoff {
///         base: Duration::from_secs(1),
///         max: Duration::from_secs(300),
///     };
///     const READY_WHEN: ReadyWhen = ReadyWhen::WatchesListed(1);
/// }
///
/// /// How its controller runs: what triggers a reconcile, how many at once, where.
/// const RUN: Options<ConfigMap> = Options {
///     name: Labeller::NAME,
///     changes: &[predicates::generation],
///     concurrency: 16,
///     debounce: Duration::ZERO,
///     scope: Scope::Namespace,
///     leaves_own_workload: false,
/// };
///
/// /// The operator's own hook: read from the context's caches, write what differs.
/// async fn apply(obj: Arc<ConfigMap>, ctx: Arc<Context<Labeller>>) -> Result<Action> {
///     let _ = (obj, ctx);
///     Ok(Action::await_change())
/// }
///
/// #[tokio::main]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let settings = Common::default(); // a binary parses its flags into this
///     let _logging = telemetry::init(settings.log_format);
///     let client = telemetry::counted().await?;
///     let ctx = Arc::new(Context::<Labeller>::with_settings(client.clone(), settings.clone()));
///     Runner::new(client, &RUN, &settings, "default")
///         .run(
///             ctx,
///             |controller, _watches| controller,
///             |obj, ctx| async move {
///                 let hooks = (|obj| apply(obj, Arc::clone(&ctx)), no_cleanup);
///                 ctx.reconcile(obj, hooks).await
///             },
///         )
///         .await?;
///     Ok(())
/// }
/// ```
pub struct Runner<'a, K: 'static> {
    client: Client,
    options: &'a Options<K>,
    common: &'a Common,
    pod_namespace: &'a str,
    #[cfg(feature = "sharding")]
    sharding: bool,
}

impl<'a, K> Runner<'a, K>
where
    K: Watched + Serialize,
{
    /// A runner of the controller `options` describe, with the common settings and the
    /// Lease's namespace (the pod's own).
    pub fn new(
        client: Client,
        options: &'a Options<K>,
        common: &'a Common,
        pod_namespace: &'a str,
    ) -> Self {
        Self {
            client,
            options,
            common,
            pod_namespace,
            #[cfg(feature = "sharding")]
            sharding: false,
        }
    }

    /// The watch of the primaries this replica reconciles: with `--sharding`, those placed on
    /// its `shard`; none of the operator's own workload when its options say so.
    fn primaries(&self, shard: Option<&Replica>) -> watcher::Config {
        let config = shard.map_or_else(watcher::Config::default, Replica::primaries);
        match self.options.leaves_own_workload {
            true => without_own_workload(config, self.options.name),
            false => config,
        }
    }

    /// The same runner, splitting the primaries between the replicas when `sharding` is on
    /// (`--sharding`): each reconciles its own shard, and the leader also places them.
    #[cfg(feature = "sharding")]
    pub fn sharded(mut self, sharding: bool) -> Self {
        self.sharding = sharding;
        self
    }

    /// Runs until SIGTERM or Ctrl+C, then lets reconciles in flight finish. With leader
    /// election it runs while this replica leads: a replica that loses the Lease stops
    /// reconciling and campaigns again.
    ///
    /// In every term, `relate` adds the operator's relations to the controller over the
    /// primary, and `reconcile` reconciles one object with the context `ctx`. This is
    /// [`Elected`] with one controller: [`Runner::run_term`] in every term.
    pub async fn run<Ctx, E, Relate, Reconcile, Reconciled>(
        self,
        ctx: Arc<Ctx>,
        relate: Relate,
        reconcile: Reconcile,
    ) -> Result<(), leader::Error>
    where
        Ctx: AsRef<Lifecycle<K>> + Send + Sync + 'static,
        E: ReconcileError,
        Relate: Fn(Controller<K>, &Watches<'_>) -> Controller<K>,
        Reconcile: Fn(Arc<K>, Arc<Ctx>) -> Reconciled,
        Reconciled: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let metrics = Arc::clone(lifecycle(&*ctx).metrics());
        let elected = self.elected(&*ctx)?;
        let (runner, relate, reconcile) = (&self, &relate, &reconcile);
        let run_term = |term, watches| {
            let ctx = Arc::clone(&ctx);
            async move {
                runner
                    .run_term(ctx, relate, reconcile, &term, &watches)
                    .await
            }
        };
        elected.run(&metrics, run_term).await
    }

    /// One term of this controller, until `leadership` ends, with the `watches` that
    /// [`Elected`] gives the term: for an operator that runs several, one per kind, in each
    /// term of one election, sharing the watches of their related kinds. The runner's sharding
    /// is not used: such an operator shards through the [`Shards`] it gives [`Elected`].
    pub async fn run_term<Ctx, E, Relate, Reconcile, Reconciled>(
        &self,
        ctx: Arc<Ctx>,
        relate: Relate,
        reconcile: Reconcile,
        leadership: &leader::Term,
        watches: &Watches<'_>,
    ) where
        Ctx: AsRef<Lifecycle<K>> + Send + Sync + 'static,
        E: ReconcileError,
        Relate: Fn(Controller<K>, &Watches<'_>) -> Controller<K>,
        Reconcile: Fn(Arc<K>, Arc<Ctx>) -> Reconciled,
        Reconciled: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let metrics = Arc::clone(lifecycle(&*ctx).metrics());
        let (reader, writer) = reflector::store();
        let kind = K::kind(&());
        let _cached = metrics.count_cache(&kind, reader.clone());
        let config = self.primaries(lifecycle(&*ctx).shard());
        let listed = Arc::new(AtomicBool::new(false));
        let primaries = lists::watch(watches.api::<K>(), config, watches.initial_list)
            .retried()
            .inspect(metrics.listing(&kind))
            .modify(forget_unread_fields)
            .reflect(writer)
            .inspect(first_listed(&listed))
            .applied_objects();
        let primaries = match self.options.changes {
            [] => primaries.left_stream(),
            changes => primaries
                .predicate_filter(Changes(changes), PredicateConfig::default())
                .right_stream(),
        };
        let controller =
            Controller::for_stream(primaries, reader).trigger_backoff(backoff::triggers());
        let controller = relate(controller, watches).graceful_shutdown_on(leadership.ended());
        let error_policy = |obj: Arc<K>, error: &E, ctx: Arc<Ctx>| {
            lifecycle(&*ctx).retry_action(&ObjectRef::from_obj(obj.as_ref()), error)
        };
        let driven = drive(
            controller,
            self.options.config(),
            ctx,
            reconcile,
            error_policy,
        );
        until_stopped(driven, leadership.ended(), &listed).await;
    }

    /// The election [`Runner::run`] runs this controller in: of the operator's name, watching
    /// where its options say and, with `--sharding`, on this replica's shard, which the
    /// reconciles of `ctx`'s lifecycle keep to.
    fn elected<Ctx>(&self, ctx: &Ctx) -> Result<Elected<'a>, leader::Error>
    where
        Ctx: AsRef<Lifecycle<K>>,
    {
        let (client, name) = (self.client.clone(), self.options.name);
        let elected = Elected::new(client, name, self.common, self.pod_namespace);
        Ok(elected
            .scope(self.options.scope)
            .shards(self.shards()?.join::<K, _>(ctx)))
    }

    /// With `--sharding`, this replica's place on the ring of the operator's name.
    #[cfg(feature = "sharding")]
    fn shards(&self) -> Result<Shards, sharding::Error> {
        let flag = crate::settings::Sharding { on: self.sharding };
        let (client, name) = (&self.client, self.options.name);
        Shards::new(client, name, self.pod_namespace, self.common, &flag)
    }

    /// Built without sharding: every replica campaigns for one Lease.
    #[cfg(not(feature = "sharding"))]
    #[expect(
        clippy::unnecessary_wraps,
        reason = "the same signature as with sharding"
    )]
    fn shards(&self) -> Result<Shards, leader::Error> {
        Ok(Shards::off())
    }
}

/// How an operator of several kinds splits its objects between its replicas: not at all, or
/// (`--sharding`) on one ring, where the sharder places the objects of every kind that
/// [`Shards::join`]s it and each kind's reconciles keep to this replica's shard.
pub struct Shards {
    replica: Option<Arc<Replica>>,
    kinds: Vec<ApiResource>,
    /// Whether the sharder leaves the operator's own workload unplaced, as the controllers
    /// leave it unreconciled ([`Options::leaves_own_workload`]).
    leaves_own_workload: bool,
}

impl Shards {
    /// No sharding: every replica campaigns for one Lease, and the leader reconciles all.
    pub fn off() -> Self {
        Self {
            replica: None,
            kinds: Vec::new(),
            leaves_own_workload: false,
        }
    }

    /// This replica of the operator `name`, as the settings name it (`--pod-name`), with its
    /// Lease in `pod_namespace`, when `flag` is on (`--sharding`); else [`Shards::off`].
    ///
    /// # Errors
    /// When this replica has no name, or one that cannot be a label value.
    #[cfg(feature = "sharding")]
    pub fn new(
        client: &Client,
        name: &str,
        pod_namespace: &str,
        common: &Common,
        flag: &crate::settings::Sharding,
    ) -> Result<Self, sharding::Error> {
        if !flag.on {
            return Ok(Self::off());
        }
        let replica = Replica::from_settings(client.clone(), pod_namespace, name, common)?;
        Ok(Self {
            replica: Some(Arc::new(replica)),
            kinds: Vec::new(),
            leaves_own_workload: false,
        })
    }

    /// The same, with the sharder leaving the operator's own workload unplaced: for the
    /// controllers whose options leave it alone ([`Options::leaves_own_workload`]), which
    /// never acknowledge a move of an object they do not watch.
    #[must_use]
    pub fn leaving_own_workload(mut self, leave: bool) -> Self {
        self.leaves_own_workload = leave;
        self
    }

    /// The same, with the objects of `K` placed on the ring too, once however often `K`
    /// joins, and the reconciles of `ctx`'s lifecycle kept to this replica's shard.
    #[must_use]
    pub fn join<K, Ctx>(mut self, ctx: &Ctx) -> Self
    where
        K: Watched + Serialize,
        Ctx: AsRef<Lifecycle<K>>,
    {
        if let Some(replica) = &self.replica {
            lifecycle(ctx).join_shard(Arc::clone(replica));
            let kind = ApiResource::erase::<K>(&());
            if !self.kinds.contains(&kind) {
                self.kinds.push(kind);
            }
        }
        self
    }
}

impl Shards {
    /// Runs `term` in every term of `election` or, sharded, in every term this replica's
    /// fence holds, beside the sharder of the kinds that joined, over their objects in
    /// `namespace` or in every namespace.
    async fn run<F, Fut>(
        &self,
        election: Election,
        metrics: &Metrics,
        #[cfg_attr(not(feature = "sharding"), expect(unused_variables))] namespace: Option<&str>,
        term: F,
    ) -> Result<(), leader::Error>
    where
        F: FnMut(leader::Term) -> Fut,
        Fut: Future<Output = ()>,
    {
        match &self.replica {
            #[cfg(feature = "sharding")]
            Some(replica) => {
                let objects = self.placed(replica, namespace);
                run_sharded(replica, election, metrics, objects, &self.kinds, term).await
            }
            #[cfg(not(feature = "sharding"))]
            Some(replica) => match **replica {},
            None => election.run(metrics, term).await,
        }
    }
}

#[cfg(feature = "sharding")]
impl Shards {
    /// What the sharder of `replica`'s ring places: the objects of the kinds that joined, in
    /// `namespace` or every namespace, and none of the operator's own workload when its
    /// controllers leave it alone.
    fn placed(&self, replica: &Replica, namespace: Option<&str>) -> watcher::Config {
        let objects = sharding::objects_in(namespace);
        match self.leaves_own_workload {
            true => without_own_workload(objects, replica.ring()),
            false => objects,
        }
    }
}

impl Debug for Shards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<&str> = self.kinds.iter().map(|kind| kind.kind.as_str()).collect();
        f.debug_struct("Shards")
            .field("shard", &self.replica.as_deref().map(Replica::name))
            .field("kinds", &kinds)
            .finish()
    }
}

/// The controllers of an operator in each term of one election: one per kind, each through
/// [`Runner::run_term`], or the one that [`Runner::run`] runs here. It serves
/// the metrics endpoints, then runs the terms while this replica leads (leader election on the
/// Lease of the operator's name), or with [`Elected::shards`] in every term its shard's fence
/// holds, until the operator is asked to stop. Each term's [`Watches`] are shared: the
/// controllers that watch the same related kind the same way watch it once, and every owned
/// kind's cache is filled once.
///
/// ```no_run
/// # async fn run(client: kube::Client, settings: &operator_gen_runtime::settings::Common) -> Result<(), operator_gen_runtime::run::ElectionError> {
/// use std::sync::Arc;
/// use operator_gen_runtime::{run::{Elected, Scope, Term}, telemetry::{Metrics, ReadyWhen}};
///
/// let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(2)));
/// Elected::new(client, "my-operator", settings, "my-operator-system")
///     .scope(Scope::Namespace)
///     .run(&metrics, |term: Term, watches| async move {
///         // One `Runner::run_term` per kind, joined, each given `&term` and `&watches`.
///         let _ = (term, watches);
///     })
///     .await
/// # }
/// ```
pub struct Elected<'a> {
    client: Client,
    name: &'a str,
    common: &'a Common,
    pod_namespace: &'a str,
    scope: Scope,
    shards: Shards,
}

impl<'a> Elected<'a> {
    /// The operator `name` (its Lease and field manager), with the common settings and the
    /// Lease's namespace (the pod's own). It watches every namespace and is not sharded until
    /// [`Elected::scope`] and [`Elected::shards`] say otherwise.
    pub fn new(client: Client, name: &'a str, common: &'a Common, pod_namespace: &'a str) -> Self {
        Self {
            client,
            name,
            common,
            pod_namespace,
            scope: Scope::Cluster,
            shards: Shards::off(),
        }
    }

    /// The same, watching where `scope` says.
    #[must_use]
    pub fn scope(mut self, scope: Scope) -> Self {
        self.scope = scope;
        self
    }

    /// The same, splitting the objects of the kinds that joined `shards` between the
    /// replicas.
    #[must_use]
    pub fn shards(mut self, shards: Shards) -> Self {
        self.shards = shards;
        self
    }

    /// Runs `run_term` in every term, with the term and its shared watches, until SIGTERM or
    /// Ctrl+C.
    ///
    /// Each term's future owns its term and watches rather than borrowing them: the compiler
    /// can then prove this future `Send` when `run_term`'s are (for `tokio::spawn`), which it
    /// cannot for one that awaits an `AsyncFn`'s.
    ///
    /// # Errors
    /// The election's, when the Lease cannot be read or written for good.
    pub async fn run<'s, F, Fut>(
        &'s self,
        metrics: &'s Arc<Metrics>,
        mut run_term: F,
    ) -> Result<(), leader::Error>
    where
        F: FnMut(leader::Term, Watches<'s>) -> Fut,
        Fut: Future<Output = ()>,
    {
        endpoints::spawn(self.common.metrics_addr, metrics);
        let namespace = self.scope.namespace(&self.client);
        let election = Election::new(
            self.client.clone(),
            self.name,
            self.pod_namespace,
            self.common,
        );
        let term = |leadership| run_term(leadership, self.watches(metrics));
        let ran = self.shards.run(election, metrics, namespace, term).await;
        // The webhooks' server answers its open connections once more before the process ends.
        crate::shutdown::Shutdown::process()
            .drained(crate::connections::DRAIN)
            .await;
        ran
    }

    /// The watches of one term, where this operator watches and on this replica's shard with
    /// `--sharding`, shared by the term's controllers.
    fn watches<'w>(&'w self, metrics: &'w Arc<Metrics>) -> Watches<'w> {
        let namespace = self.scope.namespace(&self.client);
        let shard = self.shards.replica.as_deref();
        let initial_list = self.common.initial_list;
        Watches::new(
            &self.client,
            metrics,
            namespace,
            self.name,
            shard,
            initial_list,
        )
    }
}

/// Runs `controller` with `config` until it stops: every reconcile of `reconcile` traced (see
/// [`traces::traced`]), every failure answered by `error_policy`, and every outcome logged.
async fn drive<K, Ctx, E, Reconcile, Reconciled, Policy>(
    controller: Controller<K>,
    config: kube::runtime::Config,
    ctx: Arc<Ctx>,
    reconcile: Reconcile,
    error_policy: Policy,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Debug + Eq + Hash + Clone + Unpin,
    Ctx: Send + Sync + 'static,
    E: std::error::Error + Send + 'static,
    Reconcile: Fn(Arc<K>, Arc<Ctx>) -> Reconciled,
    Reconciled: Future<Output = Result<Action, E>> + Send + 'static,
    Policy: Fn(Arc<K>, &E, Arc<Ctx>) -> Action,
{
    tracing::info!("controller started");
    controller
        .with_config(config)
        .run(
            move |obj, ctx| traces::traced(Arc::clone(&obj), reconcile(obj, ctx)),
            error_policy,
            ctx,
        )
        .for_each(|result| async move { log_outcome(result) })
        .await;
    tracing::info!("controller stopped");
}

/// Sets `listed` once the primaries' store holds their first list: for `.inspect(...)` after
/// the store's reflector, so that it is set as the store becomes ready.
fn first_listed<K>(
    listed: &Arc<AtomicBool>,
) -> impl FnMut(&Result<watcher::Event<K>, watcher::Error>) + use<K> {
    let listed = Arc::clone(listed);
    move |event| {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            listed.store(true, Ordering::SeqCst);
        }
    }
}

/// Drives a term's controller until it stops. Once the term `ended`, a controller whose
/// primaries were never `listed` is dropped rather than awaited: it has reconciled nothing
/// (kube's controller runs no reconcile before its store is ready), and it would never stop,
/// since its runner waits for that store, which its stopped watches no longer fill. A term cut
/// short while it listed (its Lease unrenewed, its watches stalled) would otherwise hang the
/// replica for good, renewing its Lease and reconciling none of the objects placed on it.
async fn until_stopped(
    driven: impl Future<Output = ()>,
    ended: impl Future<Output = ()>,
    listed: &AtomicBool,
) {
    let unlisted_at_end = async {
        ended.await;
        if listed.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = driven => {}
        () = unlisted_at_end => {
            tracing::info!("the term ended before the primaries were first listed; stopped with nothing reconciled");
        }
    }
}

/// The lifecycle an operator's context holds.
fn lifecycle<K, Ctx>(ctx: &Ctx) -> &Lifecycle<K>
where
    K: Resource<DynamicType = ()>,
    Ctx: AsRef<Lifecycle<K>>,
{
    ctx.as_ref()
}

/// What one item of the controller's stream came to, in the log, each kind under its own
/// message: a failed watch is not a failed reconcile, and a failed reconcile is logged once.
fn log_outcome<K, E, Q>(result: Result<(ObjectRef<K>, Action), controller::Error<E, Q>>)
where
    K: Resource,
    E: std::error::Error + 'static,
    Q: std::error::Error + 'static,
{
    match result {
        Ok((object, _)) => tracing::debug!(%object, "reconciled"),
        // A reconcile queued for an object deleted since: nothing is left to do.
        Err(controller::Error::ObjectNotFound(object)) => {
            tracing::debug!(%object, "deleted before its reconcile");
        }
        // The error policy logged it already, with what happens next
        // (`Failures::retry_action`).
        Err(controller::Error::ReconcilerFailed(_, object)) => {
            tracing::debug!(%object, "reconcile failed");
        }
        // The API server keeps a watch's resource version only so long: the watcher lists
        // again, as it must now and then, and nothing failed.
        Err(controller::Error::QueueError(error)) if expired(&error) => {
            tracing::debug!(%error, "a watch's resource version expired; listing again");
        }
        // The watcher tries again with its own backoff; the reconciles go on from the cache.
        Err(controller::Error::QueueError(error)) => {
            tracing::warn!(%error, "a watch failed; retrying");
        }
        Err(controller::Error::RunnerError(error)) => {
            // Only its readiness gate fails: the caches it waits for before the first reconcile.
            tracing::warn!(%error, "the controller's caches did not become ready");
        }
    }
}

/// Whether a watch failed only because its resource version, or a paged list's continue
/// token, expired (410 Gone), which the watcher answers by listing again.
fn expired(error: &(dyn std::error::Error + 'static)) -> bool {
    match error.downcast_ref::<watcher::Error>() {
        Some(watcher::Error::WatchError(status)) => status.code == 410,
        Some(watcher::Error::InitialListFailed(kube::Error::Api(status))) => status.code == 410,
        _ => false,
    }
}

/// The changes `Options::changes` names, as one predicate: a change to any of them passes.
/// As with kube's `Predicate::combine`, an object none of them says anything about passes.
struct Changes<K: 'static>(&'static [fn(&K) -> Option<u64>]);

impl<K> Predicate<K> for Changes<K> {
    /// Called for every event of the primary's watch, so it hashes as it goes, allocating
    /// nothing.
    fn hash_property(&self, obj: &K) -> Option<u64> {
        let mut hasher = DefaultHasher::new();
        let mut described = false;
        for change in self.0 {
            let value = change(obj);
            described |= value.is_some();
            value.hash(&mut hasher);
        }
        described.then(|| hasher.finish())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
    use kube::runtime::predicates;
    use serde_json::json;
    use tokio::sync::oneshot;

    use super::*;
    use crate::{
        metrics::ReadyWhen,
        testing::{Seen, mock_api, not_found},
    };

    const OPTIONS: Options<Pod> = Options {
        name: "widget-operator",
        changes: &[predicates::generation, predicates::finalizers],
        concurrency: 4,
        debounce: Duration::ZERO,
        scope: Scope::Namespace,
        leaves_own_workload: false,
    };

    fn pod(generation: Option<i64>, finalizers: &[&str], label: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.generation = generation;
        pod.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
        pod.metadata.labels = Some([("app".to_owned(), label.to_owned())].into());
        pod
    }

    /// A mock API server that lists one ConfigMap, `a` in `namespace`, and fails every watch:
    /// a failed watch is retried after a delay, long after a test is done.
    fn one_config_map(namespace: &str) -> (Client, tokio::task::JoinHandle<Vec<Seen>>) {
        let list = json!({
            "apiVersion": "v1",
            "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "1"},
            "items": [{
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": namespace, "resourceVersion": "1"},
            }],
        });
        mock_api(
            move |seen| match seen.uri.query().unwrap_or_default().contains("watch=true") {
                true => (500, not_found()),
                false => (200, list.clone()),
            },
        )
    }

    /// A context of one kind, as a generic operator holds one per kind: its lifecycle.
    struct KindContext<K: Resource<DynamicType = ()>>(Lifecycle<K>);

    impl<K: Resource<DynamicType = ()>> AsRef<Lifecycle<K>> for KindContext<K> {
        fn as_ref(&self) -> &Lifecycle<K> {
            &self.0
        }
    }

    fn kind_context<K: Watched + Serialize>(client: &Client) -> KindContext<K> {
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(2)));
        let recorder = crate::lifecycle::recorder(client.clone(), OPTIONS.name, None);
        let backoff = crate::failures::Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(10),
        };
        KindContext(Lifecycle::new(metrics, recorder, backoff))
    }

    #[cfg(feature = "sharding")]
    #[tokio::test]
    async fn the_kinds_that_join_a_sharding_share_one_replica_and_one_sharder() {
        let client = crate::testing::offline_client();
        let (pods, config_maps) = (kind_context::<Pod>(&client), kind_context(&client));
        let unnamed = Common::default();
        let [flag_off, flag_on] = [false, true].map(|on| crate::settings::Sharding { on });
        let off = Shards::new(&client, OPTIONS.name, "ops", &unnamed, &flag_off);
        let off = off.expect("no name needed").join(&pods).join(&config_maps);
        assert!(off.replica.is_none() && off.kinds.is_empty());
        assert!(
            pods.0.shard().is_none(),
            "unsharded, its reconciles run as ever"
        );
        let refused = Shards::new(&client, OPTIONS.name, "ops", &unnamed, &flag_on);
        assert!(matches!(refused, Err(sharding::Error::Unnamed)));

        let named = named_widget();
        let on = Shards::new(&client, OPTIONS.name, "ops", &named, &flag_on).expect("named");
        let on = on
            .join(&pods)
            .join::<ConfigMap, _>(&config_maps)
            .join(&pods);
        assert_eq!(
            format!("{on:?}"),
            r#"Shards { shard: Some("widget-0"), kinds: ["Pod", "ConfigMap"] }"#,
            "the sharder places both, each once"
        );
        let replica = on.replica.as_deref().expect("sharded");
        for shard in [pods.0.shard(), config_maps.0.shard()] {
            let held = shard.is_some_and(|shard| std::ptr::eq(shard, replica));
            assert!(held, "one replica, one Lease, one fence for every kind");
        }
    }

    #[tokio::test]
    async fn an_object_is_written_in_its_own_namespace_or_cluster_wide_by_its_scope() {
        let client = crate::testing::offline_client();
        let mut pod = pod(None, &[], "a");
        pod.metadata.name = Some("web".to_owned());
        let error = object_api(&client, &pod).expect_err("a pod without namespace");
        assert!(!crate::metrics::Retryable::is_transient(&error), "{error}");
        assert_eq!(error.to_string(), "Pod web has no namespace");
        pod.metadata.namespace = Some("team-a".to_owned());
        let api = object_api(&client, &pod).expect("namespaced");
        assert_eq!(api.resource_url(), "/api/v1/namespaces/team-a/pods");
        let node = Node::default();
        let api = object_api(&client, &node).expect("cluster-scoped");
        assert_eq!(api.resource_url(), "/api/v1/nodes");
    }

    #[test]
    fn a_failed_watch_is_logged_as_one_an_expired_one_is_not_and_a_failed_reconcile_is_left_to_its_error_policy()
     {
        let tail = crate::testing::LogTail::new(8);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(tail.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let web = ObjectRef::<Pod>::new("web").within("apps").erase();
            log_outcome::<Pod, std::io::Error, std::io::Error>(Err(
                controller::Error::ReconcilerFailed(
                    std::io::Error::other("the apply conflicted"),
                    Box::new(web),
                ),
            ));
            log_outcome::<Pod, std::io::Error, std::io::Error>(Err(controller::Error::QueueError(
                std::io::Error::other("the connection was reset"),
            )));
            let gone =
                kube::core::Status::failure("too old resource version", "Expired").with_code(410);
            log_outcome::<Pod, std::io::Error, watcher::Error>(Err(controller::Error::QueueError(
                watcher::Error::WatchError(Box::new(gone)),
            )));
        });
        let lines = tail.lines();
        assert_eq!(lines.lines().count(), 1, "{lines}");
        assert!(lines.contains("a watch failed; retrying"), "{lines}");
        assert!(lines.contains("the connection was reset"), "{lines}");
        assert!(
            !lines.contains("too old resource version"),
            "an expired watch is listed again, no failure: {lines}"
        );
        assert!(!lines.contains("reconcile"), "{lines}");
    }

    #[test]
    fn a_change_to_any_named_field_passes_and_a_change_to_another_does_not() {
        let changes = Changes(OPTIONS.changes);
        let before = changes.hash_property(&pod(Some(1), &[], "a"));
        assert!(before.is_some());
        let relabelled = changes.hash_property(&pod(Some(1), &[], "b"));
        assert_eq!(relabelled, before, "labels are not among the changes");
        let bumped = changes.hash_property(&pod(Some(2), &[], "a"));
        assert_ne!(bumped, before);
        let finalized = changes.hash_property(&pod(Some(1), &["cleanup"], "a"));
        assert_ne!(finalized, before);
        assert_ne!(finalized, bumped);
        let generation_only = Changes(&[predicates::generation::<Pod>]);
        let silent = generation_only.hash_property(&pod(None, &[], "a"));
        assert_eq!(silent, None, "an object none of them describes passes");
    }

    #[tokio::test]
    async fn children_are_watched_where_the_operator_watches_and_only_its_own() {
        let client = crate::testing::offline_client();
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        let common = Common::default();
        let elected = Elected::new(client.clone(), OPTIONS.name, &common, "ops");
        let everywhere = elected.watches(&metrics);
        assert_eq!(everywhere.api::<Pod>().resource_url(), "/api/v1/pods");
        drop(everywhere);
        let elected = elected.scope(Scope::Namespace);
        let watches = elected.watches(&metrics);
        let managed = watches.managed.label_selector.as_deref();
        assert_eq!(
            managed,
            Some("app.kubernetes.io/managed-by=widget-operator")
        );
        assert_eq!(
            watches.api::<Pod>().resource_url(),
            "/api/v1/namespaces/default/pods",
            "the client's namespace"
        );
        assert_eq!(watches.api::<Node>().resource_url(), "/api/v1/nodes");
        drop(watches);
    }

    #[cfg(feature = "sharding")]
    #[tokio::test]
    async fn on_a_shard_children_are_watched_on_it_too() {
        let client = crate::testing::offline_client();
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        let common = Common::default();
        let elected = Elected::new(client.clone(), OPTIONS.name, &common, "ops");
        let replica = Replica::new(client.clone(), "ops", "widget-0", OPTIONS.name, 15);
        let replica = Some(Arc::new(replica.expect("a valid shard name")));
        let sharded = elected.shards(Shards {
            replica,
            kinds: Vec::new(),
            leaves_own_workload: false,
        });
        let selector = sharded.watches(&metrics).managed.label_selector;
        let selector = selector.expect("a selector");
        assert!(selector.starts_with("app.kubernetes.io/managed-by=widget-operator,"));
        assert!(selector.ends_with("=widget-0"), "{selector}");
    }

    #[tokio::test]
    async fn an_operator_that_leaves_its_own_workload_watches_no_object_labelled_with_its_name() {
        let client = crate::testing::offline_client();
        let common = Common::default();
        let runner = Runner::new(client.clone(), &OPTIONS, &common, "ops");
        assert_eq!(runner.primaries(None).label_selector, None);
        let leaving = Options {
            leaves_own_workload: true,
            ..OPTIONS
        };
        let runner = Runner::new(client.clone(), &leaving, &common, "ops");
        assert_eq!(
            runner.primaries(None).label_selector.as_deref(),
            Some("app.kubernetes.io/name!=widget-operator")
        );
    }

    #[cfg(feature = "sharding")]
    #[tokio::test]
    async fn a_shard_that_leaves_its_own_workload_watches_its_own_primaries_but_those() {
        let client = crate::testing::offline_client();
        let common = Common::default();
        let leaving = Options {
            leaves_own_workload: true,
            ..OPTIONS
        };
        let runner = Runner::new(client.clone(), &leaving, &common, "ops");
        let replica = Replica::new(client, "ops", "widget-0", OPTIONS.name, 15);
        let replica = replica.expect("a valid shard name");
        let sharded = runner.primaries(Some(&replica)).label_selector;
        let sharded = sharded.expect("a selector");
        assert!(
            sharded.ends_with("=widget-0,app.kubernetes.io/name!=widget-operator"),
            "still only its shard: {sharded}"
        );
    }

    #[cfg(feature = "sharding")]
    #[tokio::test]
    async fn the_sharder_leaves_the_own_workload_unplaced_when_the_controllers_do() {
        let client = crate::testing::offline_client();
        let replica = Replica::new(client, "ops", "widget-0", OPTIONS.name, 15);
        let replica = replica.expect("a valid shard name");
        let shards = Shards {
            replica: None,
            kinds: Vec::new(),
            leaves_own_workload: false,
        };
        let everything = shards.placed(&replica, Some("apps"));
        assert_eq!(everything.label_selector, None);
        assert_eq!(
            everything.field_selector.as_deref(),
            Some("metadata.namespace=apps")
        );
        let leaving = shards.leaving_own_workload(true).placed(&replica, None);
        assert_eq!(
            leaving.label_selector.as_deref(),
            Some("app.kubernetes.io/name!=widget-operator")
        );
        assert_eq!(leaving.field_selector, None);
    }

    /// The settings of the replica `widget-0`.
    fn named_widget() -> Common {
        Common {
            pod_name: Some("widget-0".to_owned()),
            ..Common::default()
        }
    }

    #[tokio::test]
    async fn a_runner_is_elected_as_its_options_and_sharding_flag_say() {
        let client = crate::testing::offline_client();
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        let named = named_widget();
        let runner = || Runner::new(client.clone(), &OPTIONS, &named, "ops");
        let unsharded = kind_context::<Pod>(&client);
        let elected = runner().elected(&unsharded).expect("unsharded");
        assert_eq!(elected.name, OPTIONS.name);
        assert_eq!(elected.pod_namespace, "ops");
        assert_eq!(elected.scope, OPTIONS.scope);
        assert!(elected.shards.replica.is_none() && unsharded.0.shard().is_none());
        let selector = elected.watches(&metrics).managed.label_selector;
        assert_eq!(
            selector.as_deref(),
            Some("app.kubernetes.io/managed-by=widget-operator")
        );
    }

    #[cfg(feature = "sharding")]
    #[tokio::test]
    async fn a_runner_with_the_sharding_flag_is_elected_on_its_shard_and_needs_a_name() {
        let client = crate::testing::offline_client();
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        let named = named_widget();
        let runner = || Runner::new(client.clone(), &OPTIONS, &named, "ops");
        let sharded = kind_context::<Pod>(&client);
        let elected = runner().sharded(true).elected(&sharded).expect("named");
        assert_eq!(
            format!("{:?}", elected.shards),
            r#"Shards { shard: Some("widget-0"), kinds: ["Pod"] }"#
        );
        let replica = elected.shards.replica.as_deref().expect("sharded");
        let held = sharded
            .0
            .shard()
            .is_some_and(|shard| std::ptr::eq(shard, replica));
        assert!(
            held,
            "reconciles keep to the shard its children are watched on"
        );
        let selector = elected.watches(&metrics).managed.label_selector;
        assert!(selector.expect("a selector").ends_with("=widget-0"));

        let unnamed = Common::default();
        let runner = Runner::new(client.clone(), &OPTIONS, &unnamed, "ops").sharded(true);
        let refused = runner.elected(&kind_context::<Pod>(&client));
        let unnamed = matches!(
            refused,
            Err(leader::Error::Sharding(sharding::Error::Unnamed))
        );
        assert!(unnamed, "{:?}", refused.err());
    }

    /// A hand-written operator may spawn the future of `Runner::run`, from a function
    /// generic over its hooks.
    #[tokio::test]
    async fn a_runner_runs_in_a_future_tokio_can_spawn() {
        const RUN: Options<ConfigMap> = Options {
            name: "widget-operator",
            changes: &[],
            concurrency: 0,
            debounce: Duration::ZERO,
            scope: Scope::Cluster,
            leaves_own_workload: false,
        };
        async fn run_with<R: Send + Sync + 'static>(
            ctx: Arc<KindContext<ConfigMap>>,
            hooks: R,
            common: Common,
        ) -> Result<(), leader::Error> {
            let (hooks, cache) = (Arc::new(hooks), Cache::<Pod>::default());
            let client = crate::testing::offline_client();
            let runner = Runner::new(client, &RUN, &common, "ops");
            #[cfg(feature = "sharding")]
            let runner = runner.sharded(common.pod_name.is_some());
            runner
                .run(
                    Arc::clone(&ctx),
                    |controller, watches| controller.owns_stream(watches.owned(&cache)),
                    move |_, _| {
                        let _hooks = Arc::clone(&hooks);
                        async { Ok::<_, crate::error::Error>(Action::await_change()) }
                    },
                )
                .await
        }
        fn spawnable<F: Future + Send + 'static>(_: F) {}
        let ctx = Arc::new(kind_context(&crate::testing::offline_client()));
        spawnable(run_with(ctx, (), Common::default()));
    }

    /// Generated crates run one controller per kind in each term of `Elected`, joined, from a
    /// function generic over the operator's hooks (`controller::run_with`), and their cluster
    /// tests spawn its future: the shape of a generated operator of two kinds.
    #[tokio::test]
    async fn controllers_of_two_kinds_joined_in_each_term_run_in_a_future_tokio_can_spawn() {
        const CONFIG_MAPS: Options<ConfigMap> = Options {
            name: "widget-operator",
            changes: &[],
            concurrency: 0,
            debounce: Duration::ZERO,
            scope: Scope::Cluster,
            leaves_own_workload: false,
        };
        async fn run_for<K: Watched + Serialize, R: Send + Sync + 'static>(
            options: &Options<K>,
            ctx: &Arc<KindContext<K>>,
            hooks: &Arc<R>,
            (term, watches): (&Term, &Watches<'_>),
        ) {
            let (client, common, hooks) = (
                crate::testing::offline_client(),
                Common::default(),
                Arc::clone(hooks),
            );
            Runner::new(client, options, &common, "ops")
                .run_term(
                    Arc::clone(ctx),
                    |controller, _| controller,
                    move |_, _| {
                        let _hooks = Arc::clone(&hooks);
                        async { Ok::<_, crate::error::Error>(Action::await_change()) }
                    },
                    term,
                    watches,
                )
                .await;
        }
        async fn run_with<R: Send + Sync + 'static>(
            (pods, config_maps): (Arc<KindContext<Pod>>, Arc<KindContext<ConfigMap>>),
            hooks: R,
            common: Common,
        ) -> Result<(), leader::Error> {
            let hooks = Arc::new(hooks);
            let (metrics, hooks) = (Arc::clone(pods.0.metrics()), &hooks);
            let (pods, config_maps) = (&pods, &config_maps);
            let client = crate::testing::offline_client();
            Elected::new(client, OPTIONS.name, &common, "ops")
                .run(&metrics, |term, watches| async move {
                    tokio::join!(
                        run_for(&OPTIONS, pods, hooks, (&term, &watches)),
                        run_for(&CONFIG_MAPS, config_maps, hooks, (&term, &watches)),
                    );
                })
                .await
        }
        fn spawnable<F: Future + Send + 'static>(_: F) {}
        let client = crate::testing::offline_client();
        let contexts = (
            Arc::new(kind_context(&client)),
            Arc::new(kind_context(&client)),
        );
        spawnable(run_with(contexts, (), Common::default()));
    }

    #[tokio::test]
    async fn every_watch_of_a_term_lists_as_the_settings_say_whatever_its_config_said() {
        for (initial_list, streamed) in
            [(InitialList::Streaming, true), (InitialList::Paged, false)]
        {
            let (client, server) = mock_api(|_| (500, not_found()));
            let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(2)));
            let common = Common {
                initial_list,
                ..Common::default()
            };
            let elected = Elected::new(client, OPTIONS.name, &common, "ops");
            let watches = elected.watches(&metrics);
            assert_eq!(watches.initial_list, initial_list);
            let cache = Cache::<ConfigMap>::default();
            let owned = Box::pin(watches.owned(&cache)).next().await;
            assert!(
                matches!(owned, Some(Err(_))),
                "the mock fails every request"
            );
            // A relation's own config says nothing of the initial list the term takes.
            let config = watcher::Config::default()
                .streaming_lists()
                .labels("app=web");
            let watched = Box::pin(watches.watched::<Node>(config)).next().await;
            assert!(
                matches!(watched, Some(Err(_))),
                "the mock fails every request"
            );
            drop(watches);
            drop(elected);
            let seen = server.await.expect("the mock API server");
            let queries: Vec<&str> = seen.iter().filter_map(|s| s.uri.query()).collect();
            assert_eq!(queries.len(), 2, "{queries:?}");
            for query in &queries {
                assert_eq!(
                    query.contains("sendInitialEvents=true"),
                    streamed,
                    "{query}"
                );
                assert_eq!(query.contains("watch=true"), streamed, "{query}");
            }
            assert!(queries[0].contains("managed-by"), "{queries:?}");
            assert!(queries[1].contains("app%3Dweb"), "{queries:?}");
        }
    }

    #[tokio::test]
    async fn controllers_sharing_a_term_list_an_owned_kind_once_and_each_gets_its_objects() {
        let (client, server) = one_config_map("ops");
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        let paged = InitialList::Paged;
        let watches = Watches::new(&client, &metrics, Some("ops"), OPTIONS.name, None, paged);
        let cache = Cache::<ConfigMap>::default();
        let mut driver = Box::pin(watches.owned(&cache));
        let mut follower = Box::pin(watches.owned(&cache));
        for stream in [&mut driver, &mut follower] {
            let child = stream
                .next()
                .await
                .map(|child| child.map(|c| c.metadata.name));
            assert_eq!(child.and_then(Result::ok), Some(Some("a".to_owned())));
        }
        // The list is cached once it is complete, before the watch after it, which fails here.
        assert!(matches!(driver.next().await, Some(Err(_))));
        assert_eq!(cache.state().len(), 1);
        drop((driver, follower, watches));
        drop(client);
        let seen = server.await.expect("the mock server");
        let lists = seen
            .iter()
            .filter(|seen| seen.uri.path() == "/api/v1/namespaces/ops/configmaps");
        let lists =
            lists.filter(|seen| !seen.uri.query().unwrap_or_default().contains("watch=true"));
        assert_eq!(lists.count(), 1, "{seen:?}");
    }

    /// A controller over primaries whose watch never lists, stopped gracefully once
    /// `ended` resolves, as a term's is; the primaries' stream, and whether they were listed.
    fn never_listed(ended: oneshot::Receiver<()>) -> (impl Future<Output = ()>, Arc<AtomicBool>) {
        let (reader, writer) = reflector::store::<ConfigMap>();
        let listed = Arc::new(AtomicBool::new(false));
        let events =
            futures::stream::iter([Ok(watcher::Event::Init)]).chain(futures::stream::pending::<
                Result<watcher::Event<ConfigMap>, _>,
            >());
        let primaries = events
            .reflect(writer)
            .inspect(first_listed(&listed))
            .applied_objects();
        let controller = Controller::for_stream(primaries, reader)
            .trigger_backoff(backoff::triggers())
            .graceful_shutdown_on(async {
                ended.await.ok();
            });
        let reconcile = |_: Arc<ConfigMap>, _: Arc<()>| async {
            Ok::<_, crate::error::Error>(Action::await_change())
        };
        let policy = |_: Arc<ConfigMap>, _: &crate::error::Error, _| Action::await_change();
        let config = kube::runtime::Config::default();
        (
            drive(controller, config, Arc::new(()), reconcile, policy),
            listed,
        )
    }

    #[tokio::test]
    async fn a_term_that_ends_before_its_primaries_are_listed_stops_at_once() {
        let (end, ended) = oneshot::channel::<()>();
        let (term_ended, term_end) = oneshot::channel::<()>();
        let (driven, listed) = never_listed(ended);
        let stopping = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = end.send(());
            let _ = term_ended.send(());
        };
        let stopped = until_stopped(
            driven,
            async {
                term_end.await.ok();
            },
            &listed,
        );
        let ((), stopped) = tokio::join!(
            stopping,
            tokio::time::timeout(Duration::from_secs(5), stopped)
        );
        stopped.expect("stopped without waiting for a store that never fills");
        assert!(!listed.load(Ordering::SeqCst));
    }

    /// A replica asked to stop while its primaries are listed and every other request fails
    /// (the children's watch among them): its reconcile waits for a cache that never lists.
    /// The stop must not wait for that reconcile longer than [`leader::STOP_PATIENCE`].
    #[tokio::test(start_paused = true)]
    async fn a_stop_while_every_child_watch_fails_ends_within_the_stop_patience() {
        const CONFIG_MAPS: Options<ConfigMap> = Options {
            name: "widget-operator",
            changes: &[],
            concurrency: 0,
            debounce: Duration::ZERO,
            scope: Scope::Namespace,
            leaves_own_workload: false,
        };
        let list = json!({
            "apiVersion": "v1",
            "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "1"},
            "items": [{
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "ops", "resourceVersion": "1"},
            }],
        });
        let (client, _server) = mock_api(move |seen| {
            let watch = seen.uri.query().unwrap_or_default().contains("watch=true");
            match (seen.path().ends_with("/configmaps"), watch) {
                (true, false) => (200, list.clone()),
                _ => (500, not_found()),
            }
        });
        let common = Common {
            initial_list: InitialList::Paged,
            ..Common::default()
        };
        let (shutdown, trigger) = crate::shutdown::Shutdown::manual();
        let election =
            Election::new(client.clone(), OPTIONS.name, "ops", &common).with_shutdown(shutdown);
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(2)));
        let ctx = Arc::new(kind_context::<ConfigMap>(&client));
        let children = Cache::<k8s_openapi::api::core::v1::Secret>::default();
        let (reconciling, reconciled) = tokio::sync::mpsc::unbounded_channel::<()>();
        let runner = Runner::new(client.clone(), &CONFIG_MAPS, &common, "ops");
        let run = election.run(&metrics, |term| {
            let (ctx, runner, children) = (Arc::clone(&ctx), &runner, children.clone());
            let (reconciling, metrics) = (reconciling.clone(), Arc::clone(&metrics));
            let client = client.clone();
            async move {
                let paged = InitialList::Paged;
                let watches =
                    Watches::new(&client, &metrics, Some("ops"), OPTIONS.name, None, paged);
                let owned = children.clone();
                let relate = move |controller: Controller<ConfigMap>, watches: &Watches<'_>| {
                    controller.owns_stream(watches.owned(&owned))
                };
                let reconcile = move |_: Arc<ConfigMap>, _: Arc<KindContext<ConfigMap>>| {
                    let (children, reconciling) = (children.clone(), reconciling.clone());
                    async move {
                        let _ = reconciling.send(());
                        children.listed().await;
                        Ok::<_, crate::error::Error>(Action::await_change())
                    }
                };
                runner
                    .run_term(ctx, relate, reconcile, &term, &watches)
                    .await;
            }
        });
        let stop = async {
            let mut reconciled = reconciled;
            reconciled.recv().await;
            trigger.stop();
            tokio::time::Instant::now()
        };
        let bound = leader::STOP_PATIENCE + Duration::from_secs(1);
        let (asked, ran) = tokio::join!(stop, async {
            let ran = tokio::time::timeout(Duration::from_secs(600), run).await;
            (ran, tokio::time::Instant::now())
        });
        let (ran, stopped) = ran;
        ran.expect("the replica stops without a second signal")
            .expect("no election to fail");
        assert!(
            stopped - asked <= bound,
            "stopped {:?} after the stop",
            stopped - asked
        );
    }

    /// Why [`until_stopped`] drops such a controller: kube's own graceful stop waits for the
    /// store. Should a kube release stop it, this fails, and the drop is no longer needed.
    #[tokio::test]
    async fn kubes_controller_stopped_before_its_store_is_ready_never_finishes() {
        let (end, ended) = oneshot::channel::<()>();
        let (driven, _) = never_listed(ended);
        let _ = end.send(());
        let waited = tokio::time::timeout(Duration::from_secs(2), driven).await;
        assert!(waited.is_err(), "kube's controller stopped on its own");
    }

    #[tokio::test]
    async fn a_driven_controller_reconciles_what_it_lists_until_it_is_stopped() {
        let (client, server) = one_config_map("ns");
        let api = Api::<ConfigMap>::namespaced(client, "ns");
        let (stop, stopped) = oneshot::channel::<()>();
        let controller =
            Controller::new(api, watcher::Config::default()).graceful_shutdown_on(async {
                stopped.await.ok();
            });
        let reconcile = |obj: Arc<ConfigMap>, stop: Arc<Mutex<Option<oneshot::Sender<()>>>>| {
            let stop = stop.lock().map(|mut stop| stop.take()).ok().flatten();
            async move {
                assert_eq!(obj.metadata.name.as_deref(), Some("a"));
                stop.map(|stop| stop.send(()));
                Ok::<_, crate::error::Error>(Action::await_change())
            }
        };
        let never_failed = |_: Arc<ConfigMap>, error: &crate::error::Error, _| panic!("{error}");
        let ctx = Arc::new(Mutex::new(Some(stop)));
        let config = kube::runtime::Config::default();
        let driven = drive(
            controller,
            config,
            Arc::clone(&ctx),
            reconcile,
            never_failed,
        );
        tokio::time::timeout(Duration::from_secs(10), driven)
            .await
            .expect("stopped after its reconcile");
        assert!(ctx.lock().is_ok_and(|stop| stop.is_none()), "reconciled");
        server.abort();
    }
}
