//! The context every reconcile of an operator shares: its client, metrics, settings, Event
//! recorder, the caches of its owned children and of the watched kinds it caches, and the
//! lifecycle around its hooks. A generated crate
//! describes its operator once ([`Operator`]) and names `Context<ThatOperator>` its
//! `Context`; the helpers a reconcile calls (apply a child, write the status or the condition)
//! are written here, once.

use std::sync::Arc;

use kube::{
    Client, Resource, ResourceExt,
    core::{ClusterResourceScope, object::HasStatus},
    runtime::{controller::Action, events::Recorder, reflector::ObjectRef},
};
use serde::Serialize;

use crate::{
    apply, conditions,
    error::{Error, Result},
    failures::Backoff,
    lifecycle::{self, Hooks, Lifecycle},
    metrics::{Metrics, ReadyWhen},
    run::{self, WatchScope, Watched},
    settings::Flags,
};

pub use crate::{apply::MANAGED_BY_LABEL, cache::Cache};

/// An operator, as its generated crate describes it to the runtime: its kinds, its flags and
/// what its `operator.yaml` says about every reconcile.
pub trait Operator: 'static {
    /// The kind it reconciles.
    type Primary: Watched + Serialize;
    /// Its flags.
    type Settings: Flags;
    /// The caches of the kinds it owns, declared with [`children!`](crate::children); `()`
    /// when it owns none.
    type Children: Caches;
    /// The caches of the watched kinds it reads in a reconcile, declared with
    /// [`cached!`](crate::cached); `()` when it caches none. A watch is uncached, and streams
    /// only what its mapping needs, unless `operator.yaml` asks for `cache: true`.
    type Cached: Caches;

    /// Its name: field manager, Lease, and the value of the managed-by label on its children.
    const NAME: &'static str;
    /// The per-object backoff after failed reconciles.
    const BACKOFF: Backoff;
    /// When a replica is ready.
    const READY_WHEN: ReadyWhen;
    /// The finalizer it holds on every primary, if it cleans up outside the cluster.
    const FINALIZER: Option<&'static str> = None;
    /// The condition it keeps in `status.conditions`, if any.
    const CONDITION: Option<conditions::Spec> = None;
}

/// Caches a reconcile reads, each filled by a watch in every term: those of the kinds an
/// operator owns ([`children!`](crate::children)), or of the watched kinds it caches
/// ([`cached!`](crate::cached)). Clones share the caches.
pub trait Caches: Clone + Default + Send + Sync + 'static {
    /// Waits until every cache has listed its kind in this term, so that a reconcile never
    /// takes a child that is not cached yet for one that does not exist, nor the last term's
    /// child for this one's, and a restart writes nothing.
    fn ready(&self) -> impl Future<Output = ()> + Send;
}

/// An operator that owns or caches nothing has nothing to wait for.
impl Caches for () {
    async fn ready(&self) {}
}

/// Declares an operator's [`Operator::Children`]: a struct with one [`Cache`] per owned kind,
/// and the [`CachedIn`] impls through which [`Context::apply_owned`] finds a kind's cache.
///
/// ```
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
///
/// operator_gen_runtime::children! {
///     /// What this operator owns.
///     pub struct Children {
///         config_map: ConfigMap,
///         secret: Secret,
///     }
/// }
///
/// let children = Children::default();
/// assert!(children.config_map.state().is_empty());
/// ```
#[macro_export]
macro_rules! children {
    ($(#[$attr:meta])* $vis:vis struct $name:ident { $($field:ident: $kind:ty),+ $(,)? }) => {
        $crate::__caches! {
            $(#[$attr])* $vis struct $name { $($field: $kind = "children"),+ }
        }

        $(
            impl $crate::context::CachedIn<$name> for $kind {
                fn cache(children: &$name) -> &$crate::context::Cache<Self> {
                    &children.$field
                }
            }
        )+
    };
}

/// Declares an operator's [`Operator::Cached`]: a struct with one [`Cache`] per watched kind
/// that a reconcile reads, each filled by its watch (`run::Watches::cached`). Unlike
/// [`children!`], it gives no way to apply them: the operator does not own them.
///
/// ```
/// use k8s_openapi::api::core::v1::Secret;
///
/// operator_gen_runtime::cached! {
///     /// The watched kinds this operator reads.
///     pub struct Cached {
///         secret: Secret,
///     }
/// }
///
/// let cached = Cached::default();
/// assert!(cached.secret.state().is_empty());
/// ```
#[macro_export]
macro_rules! cached {
    ($(#[$attr:meta])* $vis:vis struct $name:ident { $($field:ident: $kind:ty),+ $(,)? }) => {
        $crate::__caches! {
            $(#[$attr])* $vis struct $name { $($field: $kind = "watched objects"),+ }
        }
    };
}

/// The struct of caches [`children!`] and [`cached!`] declare, and its [`Caches`] impl.
#[doc(hidden)]
#[macro_export]
macro_rules! __caches {
    ($(#[$attr:meta])* $vis:vis struct $name:ident { $($field:ident: $kind:ty = $what:literal),+ }) => {
        $(#[$attr])*
        #[derive(Clone, Default)]
        $vis struct $name {
            $(
                #[doc = concat!("The cached `", stringify!($kind), "` ", $what, ".")]
                pub $field: $crate::context::Cache<$kind>,
            )+
        }

        impl $crate::context::Caches for $name {
            async fn ready(&self) {
                $(self.$field.listed().await;)+
            }
        }
    };
}

/// A kind an operator owns, with its cache among the operator's children `C`: what
/// [`Context::apply_owned`] compares a child with before it writes.
pub trait CachedIn<C>: Watched + Serialize {
    /// The cache of this kind.
    fn cache(children: &C) -> &Cache<Self>;
}

/// Everything a reconcile of operator `O` needs, shared by all of them.
///
/// A reconcile reads from the context's caches and writes through its helpers, each of which
/// writes only what differs. Here, an operator of Deployments that owns one ConfigMap each:
///
/// ```no_run
/// use std::{sync::Arc, time::Duration};
///
/// use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
/// use kube::{ResourceExt, api::ObjectMeta, runtime::controller::Action};
/// use operator_gen_runtime::{
///     children,
///     context::{Context, Operator},
///     reconcile::{Backoff, Result},
///     settings::Common,
///     telemetry::ReadyWhen,
/// };
///
/// children! {
///     /// The ConfigMaps it owns, cached.
///     struct Children {
///         config_map: ConfigMap,
///     }
/// }
///
/// struct ReplicaNotes;
///
/// impl Operator for ReplicaNotes {
///     type Primary = Deployment;
///     type Settings = Common;
///     type Children = Children;
///     type Cached = ();
///     const NAME: &'static str = "replica-notes";
///     const BACKOFF: Backoff = Backoff {
///         base: Duration::from_secs(1),
///         max: Duration::from_secs(60),
///     };
///     // The Deployments' watch and the ConfigMaps'.
///     const READY_WHEN: ReadyWhen = ReadyWhen::WatchesListed(2);
/// }
///
/// /// Gives every Deployment a ConfigMap of its name that notes how many replicas it asks for.
/// /// The apply is compared with the cached child first, so an unchanged Deployment costs no
/// /// request.
/// async fn apply(deployment: Arc<Deployment>, ctx: Arc<Context<ReplicaNotes>>) -> Result<Action> {
///     let replicas = deployment.spec.replicas.unwrap_or(1).to_string();
///     let note = ConfigMap {
///         metadata: ObjectMeta {
///             name: Some(deployment.name_any()),
///             ..ObjectMeta::default()
///         },
///         data: Some([("replicas".to_owned(), replicas)].into()),
///         ..ConfigMap::default()
///     };
///     ctx.apply_owned(&deployment, note).await?;
///     Ok(Action::await_change())
/// }
/// ```
pub struct Context<O: Operator> {
    /// Client for the Kubernetes API.
    pub client: Client,
    /// Reconcile metrics and readiness, served on `/metrics`.
    pub metrics: Arc<Metrics>,
    /// How the operator runs: its flags, or their environment variables.
    pub settings: O::Settings,
    /// Publishes Kubernetes Events about reconcile outcomes.
    pub recorder: Recorder,
    /// Caches of the owned children, which reconciles read instead of the API server.
    pub children: O::Children,
    /// Caches of the watched kinds the operator reads, filled by their watches: a reconcile
    /// reads a watched object here rather than from the API server.
    pub cached: O::Cached,
    /// What every reconcile goes through around the hooks: the shard's fence and drain, the
    /// finalizer, the condition, the failure count and backoff, metrics and Events.
    lifecycle: Lifecycle<O::Primary>,
}

impl<O: Operator> AsRef<Lifecycle<O::Primary>> for Context<O> {
    fn as_ref(&self) -> &Lifecycle<O::Primary> {
        &self.lifecycle
    }
}

impl<O: Operator> Context<O> {
    /// A context around `client`, with the settings the environment gives; ready once the
    /// watches have listed everything.
    pub fn new(client: Client) -> Self {
        Self::with_settings(client, O::Settings::from_env())
    }

    /// A context around `client` that runs with `settings`.
    pub fn with_settings(client: Client, settings: O::Settings) -> Self {
        let metrics = Arc::new(Metrics::new(O::READY_WHEN));
        let caches = (O::Children::default(), O::Cached::default());
        Self::with_shared(client, settings, metrics, &caches)
    }

    /// A context around `client` that runs with `settings` and shares `metrics` and
    /// `caches` (the owned children's, and the cached watched kinds') with the contexts of an
    /// operator's other kinds: every controller's watches count towards one readiness, and
    /// one watch of each owned or cached kind fills one cache that all of them read.
    pub fn with_shared(
        client: Client,
        settings: O::Settings,
        metrics: Arc<Metrics>,
        caches: &(O::Children, O::Cached),
    ) -> Self {
        let (children, cached) = caches;
        let pod_name = settings.common().pod_name.clone();
        let recorder = lifecycle::recorder(client.clone(), O::NAME, pod_name);
        let mut lifecycle = Lifecycle::new(Arc::clone(&metrics), recorder.clone(), O::BACKOFF);
        if let Some(finalizer) = O::FINALIZER {
            lifecycle = lifecycle.with_finalizer(finalizer);
        }
        if let Some(condition) = O::CONDITION {
            lifecycle = lifecycle.with_condition(condition, O::NAME);
        }
        Self {
            client,
            metrics,
            settings,
            recorder,
            children: children.clone(),
            cached: cached.clone(),
            lifecycle,
        }
    }

    /// Consecutive failed reconciles of `key` so far.
    pub fn failure_count(&self, key: &ObjectRef<O::Primary>) -> u32 {
        self.lifecycle.failure_count(key)
    }

    /// What every reconcile goes through around the operator's hooks.
    pub fn lifecycle(&self) -> &Lifecycle<O::Primary> {
        &self.lifecycle
    }

    /// Reconciles `obj` with the operator's hooks, `apply` for an object that lives and
    /// `cleanup` for one being deleted, once every cache (children's and cached watched
    /// kinds') has listed in this term: see [`Lifecycle::reconcile`]. It reads nothing from the
    /// API server.
    ///
    /// # Errors
    /// What a hook fails with, or the lifecycle's own failures (a namespaced object without a
    /// namespace, the finalizer's patches, the condition's write).
    pub async fn reconcile(
        &self,
        obj: Arc<O::Primary>,
        hooks: impl Hooks<O::Primary, Error = Error>,
    ) -> Result<Action> {
        self.children.ready().await;
        self.cached.ready().await;
        let api = run::object_api(&self.client, obj.as_ref())?;
        self.lifecycle.reconcile(&api, obj, hooks).await
    }

    /// Sets `obj`'s status to `status` through the `/status` subresource, writing only when a
    /// field differs from the status `obj` already has; returns whether it wrote. A status
    /// write leaves `metadata.generation` alone, so it does not retrigger the controller.
    ///
    /// A write that changes the operator's own condition sets it, as
    /// [`Context::set_condition`] does: the reconcile does not write it a second time. A
    /// status copied from `obj`, its condition entry as read, leaves the condition to the
    /// reconcile's outcome.
    pub async fn patch_status(
        &self,
        obj: &O::Primary,
        status: &<O::Primary as HasStatus>::Status,
    ) -> Result<bool>
    where
        O::Primary: HasStatus<Status: Serialize>,
    {
        let api = run::object_api(&self.client, obj)?;
        let wrote = apply::patch_status(&api, obj, &obj.status(), status).await?;
        if let (true, Some(conditions)) = (wrote, self.lifecycle.conditions()) {
            let status = serde_json::to_value(status).map_err(apply::Error::from)?;
            conditions.note_status(obj, &status);
        }
        Ok(wrote)
    }

    /// Sets the operator's condition on `obj`, writing only when its status, reason, message
    /// or observed generation changed; returns whether it wrote, and `false` for an operator
    /// that keeps none. Called during a reconcile, it takes the place of the outcome the
    /// reconcile would record: the condition is written once. `message` may be empty, as the
    /// condition conventions allow.
    pub async fn set_condition(
        &self,
        obj: &O::Primary,
        ok: bool,
        reason: &str,
        message: &str,
    ) -> Result<bool> {
        let api = run::object_api(&self.client, obj)?;
        Ok(self
            .lifecycle
            .set_condition(&api, obj, ok, reason, message)
            .await?)
    }

    /// The last error of a write of the operator's condition, for a test that waits for it in
    /// vain.
    pub fn last_status_error(&self) -> Option<String> {
        self.lifecycle.conditions().and_then(|c| c.last_error())
    }

    /// Server-side applies `child` with a controller ownerReference to `owner`, so it is
    /// garbage-collected with it and its changes trigger a reconcile. A namespaced child goes
    /// in `owner`'s namespace unless it names its own; a cluster-scoped one is applied
    /// cluster-wide.
    ///
    /// The cached child is compared first, and when it already holds every field of `child`
    /// nothing is written, which keeps a repeated reconcile from writing at all. Nothing is
    /// read from the API server.
    pub async fn apply_owned<C>(&self, owner: &O::Primary, mut child: C) -> Result<C>
    where
        C: CachedIn<O::Children>,
    {
        if <C::Scope as WatchScope>::NAMESPACED && child.namespace().is_none() {
            child.meta_mut().namespace = owner.namespace();
        }
        let Some(api) = <C::Scope as WatchScope>::api_of(self.client.clone(), &child) else {
            let name = child.name_any();
            return Err(Error::Permanent(format!(
                "{name} has no namespace to go in"
            )));
        };
        let cache = C::cache(&self.children);
        Ok(apply::apply_owned(&api, cache, owner, child, O::NAME).await?)
    }

    /// [`Context::apply_owned`], by the name it had for a cluster-scoped child before it took
    /// both scopes.
    #[deprecated(note = "`apply_owned` applies a cluster-scoped child too")]
    pub async fn apply_owned_cluster<C>(&self, owner: &O::Primary, child: C) -> Result<C>
    where
        C: CachedIn<O::Children> + Resource<Scope = ClusterResourceScope>,
    {
        self.apply_owned(owner, child).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
    use kube::runtime::{controller::Action, watcher};

    use super::*;
    use crate::testing::{
        assert_applies_owned_once, assert_owned_apply, holding, mock_api, named, offline_client,
    };

    /// An operator of Pods that owns ConfigMaps and Namespaces.
    struct Pods;

    crate::children! {
        /// A ConfigMap and a Namespace, owned by the operator of Pods.
        struct Children {
            config_maps: ConfigMap,
            namespaces: Namespace,
        }
    }

    impl Operator for Pods {
        type Primary = Pod;
        type Settings = crate::settings::Common;
        type Children = Children;
        type Cached = ();

        const NAME: &'static str = "pod-operator";
        const BACKOFF: Backoff = Backoff {
            base: std::time::Duration::from_secs(3),
            max: std::time::Duration::from_secs(60),
        };
        const READY_WHEN: ReadyWhen = ReadyWhen::WatchesListed(1);
    }

    fn owner() -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".to_owned());
        pod.metadata.namespace = Some("team-a".to_owned());
        pod.metadata.uid = Some("0b5e55ed-0000-0000-0000-000000000002".to_owned());
        pod
    }

    #[tokio::test]
    async fn a_child_goes_in_its_owners_namespace_and_each_kind_is_compared_with_its_own_cache() {
        let owner = owner();
        let (client, server) = mock_api(holding(&owner));
        let ctx = Context::<Pods>::new(client);
        ctx.children
            .config_maps
            .apply_watcher_event(&watcher::Event::InitDone);
        let config_map = ctx
            .apply_owned(&owner, named::<ConfigMap>("settings"))
            .await;
        let config_map = config_map.expect("applied");
        assert_eq!(config_map.metadata.namespace.as_deref(), Some("team-a"));
        ctx.children
            .config_maps
            .apply_watcher_event(&watcher::Event::Apply(config_map.clone()));
        let again = ctx
            .apply_owned(&owner, named::<ConfigMap>("settings"))
            .await;
        again.expect("unchanged");
        let namespace = ctx.apply_owned(&owner, named::<Namespace>("team-b")).await;
        namespace.expect("applied");
        drop(ctx);
        let seen = server.await.expect("the mock API server ran");
        assert_eq!(
            seen.len(),
            2,
            "the cached ConfigMap is not written again: {seen:#?}"
        );
        assert_owned_apply(&seen[0], &owner, &config_map, Pods::NAME);
        assert_owned_apply(&seen[1], &owner, &named::<Namespace>("team-b"), Pods::NAME);
    }

    #[tokio::test]
    async fn a_cluster_scoped_child_is_applied_once_through_the_same_call() {
        assert_applies_owned_once::<Pods, _>(&owner(), named::<Namespace>("team-b")).await;
    }

    #[tokio::test]
    async fn a_child_with_no_namespace_to_go_in_is_a_permanent_error_without_a_request() {
        let ctx = Context::<Pods>::new(offline_client());
        let mut owner = owner();
        owner.metadata.namespace = None;
        let error = ctx
            .apply_owned(&owner, named::<ConfigMap>("settings"))
            .await
            .expect_err("nowhere to go");
        assert!(!error.is_transient(), "{error}");
    }

    /// [`Caches::ready`] of the test's `Children`.
    fn ready(children: &Children) -> impl Future<Output = ()> + Send {
        super::Caches::ready(children)
    }

    #[tokio::test]
    async fn declared_children_are_ready_once_every_cache_has_listed_and_each_kind_finds_its_own() {
        let children = Children::default();
        children
            .config_maps
            .apply_watcher_event(&watcher::Event::InitDone);
        let waiting = tokio::time::timeout(Duration::from_millis(50), ready(&children)).await;
        assert!(waiting.is_err(), "the Namespaces have not been listed");
        children
            .namespaces
            .apply_watcher_event(&watcher::Event::InitDone);
        tokio::time::timeout(Duration::from_secs(5), ready(&children))
            .await
            .expect("both listed");
        let config_maps = <ConfigMap as CachedIn<Children>>::cache(&children);
        assert!(std::ptr::eq(config_maps, &children.config_maps));
        let namespaces = <Namespace as CachedIn<Children>>::cache(&children);
        assert!(std::ptr::eq(namespaces, &children.namespaces));
    }

    #[tokio::test]
    async fn a_reconcile_of_an_object_without_its_namespace_fails_before_any_hook_runs() {
        let ctx = Context::<Pods>::new(offline_client());
        let children = &ctx.children;
        children
            .config_maps
            .apply_watcher_event(&watcher::Event::InitDone);
        children
            .namespaces
            .apply_watcher_event(&watcher::Event::InitDone);
        let mut pod = owner();
        pod.metadata.namespace = None;
        let applied = |_| async { panic!("no hook runs") };
        let result = ctx
            .reconcile(Arc::new(pod), (applied, lifecycle::no_cleanup))
            .await;
        let error = result.expect_err("a namespaced object without a namespace");
        assert!(!error.is_transient(), "{error}");
    }

    /// An operator of Pods that reads the Secrets its watch caches.
    struct SecretReaders;

    crate::cached! {
        /// The Secrets it reads.
        struct Cached {
            secrets: k8s_openapi::api::core::v1::Secret,
        }
    }

    impl Operator for SecretReaders {
        type Primary = Pod;
        type Settings = crate::settings::Common;
        type Children = ();
        type Cached = Cached;

        const NAME: &'static str = "secret-readers";
        const BACKOFF: Backoff = Pods::BACKOFF;
        const READY_WHEN: ReadyWhen = ReadyWhen::WatchesListed(2);
    }

    #[tokio::test]
    async fn a_reconcile_waits_until_every_cached_watch_has_listed() {
        let ctx = Context::<SecretReaders>::new(offline_client());
        let mut pod = owner();
        pod.metadata.namespace = None;
        let pod = Arc::new(pod);
        let applied = |_| async { panic!("no hook runs") };
        let reconcile = || ctx.reconcile(Arc::clone(&pod), (applied, lifecycle::no_cleanup));
        let waiting = tokio::time::timeout(Duration::from_millis(50), reconcile()).await;
        assert!(waiting.is_err(), "the Secrets have not been listed");
        ctx.cached
            .secrets
            .apply_watcher_event(&watcher::Event::InitDone);
        let result = tokio::time::timeout(Duration::from_secs(5), reconcile()).await;
        let result = result.expect("the cache has listed");
        result.expect_err("the reconcile ran, and failed on the missing namespace");
    }

    #[tokio::test]
    async fn the_backoff_and_the_condition_are_the_operators() {
        let ctx = Context::<Pods>::new(offline_client());
        let key = ObjectRef::new("a").within("ns");
        let transient = Error::Transient("the registry is down".to_owned());
        let base = Pods::BACKOFF.base;
        assert_eq!(
            ctx.lifecycle().retry_action(&key, &transient),
            Action::requeue(base)
        );
        let permanent = Error::Permanent("invalid spec".to_owned());
        assert_eq!(
            ctx.lifecycle().retry_action(&key, &permanent),
            Action::await_change()
        );
        let written = ctx.set_condition(&owner(), true, "Ready", "").await;
        assert!(!written.expect("no condition, no write"));
        assert_eq!(ctx.last_status_error(), None);
    }
}
