//! What every reconcile of a primary goes through around the operator's own hooks, in order:
//! the shard's fence and drain (with `--sharding`), the finalizer, the operator's condition,
//! then the object's failure count, the reconcile metrics and an Event.
//!
//! A generated controller builds one [`Lifecycle`] from what `operator.yaml` declares (a
//! finalizer, a condition) and calls [`Lifecycle::reconcile`] with its `apply` and `cleanup`
//! hooks; everything here is the same for every operator, so it is tested once, here, rather
//! than in every generated crate.

use std::{
    fmt::Debug,
    future::Future,
    sync::{Arc, OnceLock},
    time::Instant,
};

use kube::{
    Api, Resource,
    runtime::{
        controller::Action,
        events::{Recorder, Reporter},
        finalizer::{self, finalizer},
        reflector::ObjectRef,
    },
};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    conditions::{self, Conditions},
    events,
    failures::{Backoff, Outcomes},
    metrics::{Metrics, Retryable},
    replica::Replica,
};

/// When an object its shard's closed fence turned away is tried again. The term normally ends
/// as the fence closes, and the next term's first list reconciles the object anyway; but a
/// renewal that lands just past the deadline reopens the fence before the term has seen it
/// close, and the term goes on. Without a retry, what the turned-away reconcile was for (an
/// object's deletion, say) would wait for its next change.
pub(crate) const FENCE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// What a reconcile can fail with, for the lifecycle to fail one: the operator's own error,
/// which the lifecycle's own failures (an API call, the condition's write, the finalizer's
/// patches) convert into. A generated crate's `Error` is one.
pub trait ReconcileError:
    std::error::Error
    + Retryable
    + From<kube::Error>
    + From<conditions::Error>
    + From<finalizer::Error<Self>>
    + Send
    + Sync
    + 'static
{
}

impl<E> ReconcileError for E where
    E: std::error::Error
        + Retryable
        + From<kube::Error>
        + From<conditions::Error>
        + From<finalizer::Error<E>>
        + Send
        + Sync
        + 'static
{
}

/// The steps around every reconcile of a `K`, and what they keep between reconciles.
pub struct Lifecycle<K: Resource<DynamicType = ()>> {
    outcomes: Outcomes<ObjectRef<K>>,
    recorder: Recorder,
    finalizer: Option<String>,
    conditions: Option<Conditions<K>>,
    shard: OnceLock<Arc<Replica>>,
}

impl<K> Lifecycle<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    /// Reconciles counted in `metrics`, failures retried after `backoff`, and Events published
    /// by `recorder`; no finalizer and no condition until they are added.
    pub fn new(metrics: Arc<Metrics>, recorder: Recorder, backoff: Backoff) -> Self {
        Self {
            outcomes: Outcomes::new(metrics, backoff),
            recorder,
            finalizer: None,
            conditions: None,
            shard: OnceLock::new(),
        }
    }

    /// The same steps, with the finalizer `name` held on every object until `cleanup` has
    /// run for it.
    pub fn with_finalizer(mut self, name: &str) -> Self {
        self.finalizer = Some(name.to_owned());
        self
    }

    /// The same steps, with the condition `spec` describes written by `field_manager` after
    /// every reconcile whose outcome changed it.
    pub fn with_condition(mut self, spec: conditions::Spec, field_manager: &str) -> Self {
        self.conditions = Some(Conditions::new(spec, field_manager));
        self
    }

    /// The operator's condition, if it keeps one.
    pub(crate) fn conditions(&self) -> Option<&Conditions<K>> {
        self.conditions.as_ref()
    }

    /// Sets the operator's condition on `obj`, which `api` writes, as `Conditions::set`
    /// does; writes nothing and returns `false` for an operator that keeps no condition.
    ///
    /// # Errors
    /// A write the API server refused.
    pub async fn set_condition(
        &self,
        api: &Api<K>,
        obj: &K,
        ok: bool,
        reason: &str,
        message: &str,
    ) -> Result<bool, conditions::Error> {
        match &self.conditions {
            Some(conditions) => conditions.set(api, obj, ok, reason, message).await,
            None => Ok(false),
        }
    }

    /// Makes `replica` this lifecycle's shard (`--sharding`), once: the reconciles that
    /// follow keep to its fence and let its drained objects go. The lifecycles of an operator
    /// of several kinds share one replica. The shard it holds.
    pub(crate) fn join_shard(&self, replica: Arc<Replica>) -> &Replica {
        self.shard.get_or_init(|| replica)
    }

    /// The shard this lifecycle keeps to, once it joined one.
    pub(crate) fn shard(&self) -> Option<&Replica> {
        self.shard.get().map(Arc::as_ref)
    }

    /// The metrics every reconcile is counted in.
    pub fn metrics(&self) -> &Arc<Metrics> {
        self.outcomes.metrics()
    }

    /// Consecutive failed reconciles of `key` so far.
    pub fn failure_count(&self, key: &ObjectRef<K>) -> u32 {
        self.outcomes.failure_count(key)
    }

    /// What to do after a reconcile of `key` failed with `error`: see
    /// `crate::failures::Failures::retry_action`.
    pub fn retry_action<E>(&self, key: &ObjectRef<K>, error: &E) -> Action
    where
        E: Retryable + std::fmt::Display,
    {
        self.outcomes.retry_action(key, error)
    }

    /// Reconciles `obj`, which `api` reads and writes, with the operator's hooks: `apply` for
    /// an object that lives, `cleanup` for one being deleted (only with a finalizer; without
    /// one a deleted object is gone before any reconcile could see it).
    ///
    /// Past its shard's fence the object is left alone, since it may be moving, and a
    /// reconcile the fence closes on is cut short at its next await point; a drain the
    /// sharder asked for is acknowledged here, inside the reconcile, so that no reconcile of
    /// it is in flight on this replica while it moves. A condition write that fails turns a
    /// successful reconcile into a failed one, so it is retried until the condition says what
    /// happened.
    pub async fn reconcile<H>(
        &self,
        api: &Api<K>,
        obj: Arc<K>,
        hooks: H,
    ) -> Result<Action, H::Error>
    where
        H: Hooks<K>,
    {
        let Some(shard) = self.shard.get() else {
            return self.run_hooks(api, obj, hooks).await;
        };
        let key = ObjectRef::from_obj(obj.as_ref());
        if !shard.holds() {
            return Ok(Action::requeue(FENCE_RETRY));
        }
        if shard.drain_requested(obj.as_ref()) {
            shard.let_go(api, obj.as_ref()).await?;
            tracing::info!(object = %key, "let go to another shard");
            return Ok(Action::await_change());
        }
        match shard.within_fence(self.run_hooks(api, obj, hooks)).await {
            Some(result) => result,
            None => {
                // The fence closing ends this term; the next term's first list reconciles
                // every object of the shard again, wherever it is placed by then.
                tracing::info!(object = %key, "cut short: this replica's shard Lease went unrenewed");
                Ok(Action::requeue(FENCE_RETRY))
            }
        }
    }

    /// The hooks inside the finalizer, then the condition, the failure count, the metrics and
    /// the Event: [`Lifecycle::reconcile`] once the shard has let it through.
    async fn run_hooks<H>(&self, api: &Api<K>, obj: Arc<K>, hooks: H) -> Result<Action, H::Error>
    where
        H: Hooks<K>,
    {
        let started = Instant::now();
        let key = ObjectRef::from_obj(obj.as_ref());
        let reference = obj.object_ref(&());
        let failed_before = self.outcomes.failure_count(&key) > 0;
        if let Some(conditions) = &self.conditions {
            conditions.begin(&key);
        }
        let observed = Arc::clone(&obj);
        let mut gone = false;
        let result = match &self.finalizer {
            Some(name) => {
                let finalized = finalizer(api, name, obj, |event| async move {
                    match event {
                        finalizer::Event::Apply(obj) => hooks.apply(obj).await,
                        finalizer::Event::Cleanup(obj) => hooks.cleanup(obj).await,
                    }
                })
                .await;
                match finalized {
                    // The cache still showed an object that was deleted since: it is gone, and
                    // so is the work (and the condition it would have carried).
                    Err(error) if deleted_meanwhile(&error) => {
                        tracing::debug!(object = %key, "deleted before its finalizer could be written");
                        gone = true;
                        Ok(Action::await_change())
                    }
                    finalized => finalized.map_err(H::Error::from),
                }
            }
            None => hooks.apply(obj).await,
        };
        let result = match &self.conditions {
            Some(conditions) if !gone => match conditions.record(api, &observed, &result).await {
                Err(error) if result.is_ok() => Err(error.into()),
                _ => result,
            },
            _ => result,
        };
        self.outcomes.record(&key, started, &result);
        events::report(&self.recorder, &reference, &result, failed_before).await;
        result
    }
}

/// The hooks an operator writes, which [`Lifecycle::reconcile`] runs inside what every
/// reconcile goes through: `apply` for an object that lives, and `cleanup` for one being
/// deleted (only with a finalizer; without one a deleted object is gone before a reconcile
/// could see it). Each reconcile takes its hooks by value and calls one of them.
///
/// A pair of closures `(apply, cleanup)` is one, so a generated controller hands its
/// reconciler's hooks over as `(apply, no_cleanup)`; so is any type of an operator's own.
///
/// ```
/// use std::sync::Arc;
///
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::runtime::controller::Action;
/// use operator_gen_runtime::reconcile::{Error, Hooks, no_cleanup};
///
/// async fn apply(obj: Arc<ConfigMap>) -> Result<Action, Error> {
///     // Read from caches, apply the children that differ, then wait for a change.
///     let _ = obj;
///     Ok(Action::await_change())
/// }
///
/// fn hooks() -> impl Hooks<ConfigMap, Error = Error> {
///     (apply, no_cleanup)
/// }
/// # let _ = hooks();
/// ```
pub trait Hooks<K>: Send {
    /// What both hooks fail with.
    type Error: ReconcileError;

    /// Brings the world in line with `obj`, which lives.
    fn apply(self, obj: Arc<K>) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// Cleans up after `obj`, which is being deleted, before its finalizer goes.
    fn cleanup(self, obj: Arc<K>) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

impl<K, E, Apply, Applied, Cleanup, Cleaned> Hooks<K> for (Apply, Cleanup)
where
    E: ReconcileError,
    Apply: FnOnce(Arc<K>) -> Applied + Send,
    Applied: Future<Output = Result<Action, E>> + Send,
    Cleanup: FnOnce(Arc<K>) -> Cleaned + Send,
    Cleaned: Future<Output = Result<Action, E>> + Send,
{
    type Error = E;

    fn apply(self, obj: Arc<K>) -> impl Future<Output = Result<Action, E>> + Send {
        (self.0)(obj)
    }

    fn cleanup(self, obj: Arc<K>) -> impl Future<Output = Result<Action, E>> + Send {
        (self.1)(obj)
    }
}

/// Whether the finalizer's patch found no object: one the cache still showed was deleted
/// before the finalizer could be added (deleted while it had none) or removed again (an
/// earlier reconcile removed it, and the object went at once). Neither is a failure.
fn deleted_meanwhile<E>(error: &finalizer::Error<E>) -> bool
where
    E: std::error::Error + 'static,
{
    matches!(
        error,
        finalizer::Error::AddFinalizer(kube::Error::Api(status))
            | finalizer::Error::RemoveFinalizer(kube::Error::Api(status))
            if status.code == 404
    )
}

/// The `cleanup` hook of an operator without a finalizer, for [`Lifecycle::reconcile`]: never
/// called, since without a finalizer a deleted object is gone before a reconcile could see it.
///
/// # Errors
/// None: it does nothing.
pub async fn no_cleanup<K, E>(_: Arc<K>) -> Result<Action, E> {
    Ok(Action::await_change())
}

/// The default `cleanup` hook of an operator that holds a finalizer: there is nothing outside
/// the cluster to clean up, so it says so in the log and lets the finalizer go.
///
/// # Errors
/// None: it cleans up nothing.
pub async fn nothing_to_clean_up<K: Resource<DynamicType = ()>, E>(
    obj: Arc<K>,
) -> Result<Action, E> {
    let object = ObjectRef::from_obj(obj.as_ref());
    tracing::info!(%object, "no external cleanup implemented");
    Ok(Action::await_change())
}

/// The Event recorder of an operator that publishes as `field_manager` from the pod
/// `instance`.
pub fn recorder(client: kube::Client, field_manager: &str, instance: Option<String>) -> Recorder {
    let reporter = Reporter {
        controller: field_manager.to_owned(),
        instance,
    };
    Recorder::new(client, reporter)
}

#[cfg(test)]
mod tests {
    use std::{
        sync::atomic::{AtomicUsize, Ordering::SeqCst},
        time::Duration,
    };

    use http::Method;
    use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::Time};
    use serde_json::json;

    use super::*;
    use crate::{
        conditions::tests::{ALL_FIELDS as CONDITION, pod},
        metrics::ReadyWhen,
        testing::{Seen, at, conflict, holding, mock_api},
    };

    const FINALIZER: &str = "widgets.example.com/cleanup";
    const FIELD_MANAGER: &str = "widget-operator";
    const BACKOFF: Backoff = Backoff {
        base: Duration::from_secs(5),
        max: Duration::from_secs(300),
    };
    const POD_PATH: &str = "/api/v1/namespaces/default/pods/web";

    /// An operator's error, as a generated crate's is made.
    #[derive(Debug, thiserror::Error)]
    enum Failure {
        #[error("kubernetes api: {0}")]
        Kube(#[from] kube::Error),
        #[error(transparent)]
        Condition(#[from] conditions::Error),
        #[error("finalizer: {0}")]
        Finalizer(#[source] Box<finalizer::Error<Failure>>),
        #[error("{0}")]
        Permanent(String),
    }

    impl From<finalizer::Error<Failure>> for Failure {
        fn from(error: finalizer::Error<Failure>) -> Self {
            Self::Finalizer(Box::new(error))
        }
    }

    impl Retryable for Failure {
        fn is_transient(&self) -> bool {
            match self {
                Self::Permanent(_) => false,
                Self::Finalizer(inner) => match inner.as_ref() {
                    finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => {
                        e.is_transient()
                    }
                    _ => true,
                },
                Self::Kube(_) | Self::Condition(_) => true,
            }
        }
    }

    fn lifecycle(client: &kube::Client) -> Lifecycle<Pod> {
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        Lifecycle::new(
            metrics,
            recorder(client.clone(), FIELD_MANAGER, None),
            BACKOFF,
        )
    }

    /// The operator's hooks: counts their calls, and fails permanently when told to.
    #[derive(Default)]
    struct Probe {
        applied: AtomicUsize,
        cleaned: AtomicUsize,
        fail: bool,
    }

    impl Probe {
        async fn apply(&self, _: Arc<Pod>) -> Result<Action, Failure> {
            self.applied.fetch_add(1, SeqCst);
            if self.fail {
                return Err(Failure::Permanent("the spec names no target".to_owned()));
            }
            Ok(Action::await_change())
        }

        async fn cleanup(&self, _: Arc<Pod>) -> Result<Action, Failure> {
            self.cleaned.fetch_add(1, SeqCst);
            Ok(Action::await_change())
        }
    }

    async fn run(
        lifecycle: &Lifecycle<Pod>,
        api: &Api<Pod>,
        probe: &Probe,
        object: &Pod,
    ) -> Result<Action, Failure> {
        let (apply, cleanup) = (|obj| probe.apply(obj), |obj| probe.cleanup(obj));
        lifecycle
            .reconcile(api, Arc::new(object.clone()), (apply, cleanup))
            .await
    }

    #[tokio::test]
    async fn the_finalizer_is_added_before_apply_and_removed_after_cleanup() {
        let object = pod();
        let (client, server) = mock_api(holding(&object));
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let lifecycle = lifecycle(&client).with_finalizer(FINALIZER);
        let probe = Probe::default();

        run(&lifecycle, &api, &probe, &object)
            .await
            .expect("the finalizer is added");
        assert_eq!(
            probe.applied.load(SeqCst),
            0,
            "apply waits for the finalizer"
        );
        let mut guarded = object;
        guarded.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        run(&lifecycle, &api, &probe, &guarded)
            .await
            .expect("apply runs");
        assert_eq!(probe.applied.load(SeqCst), 1);
        let mut deleted = guarded;
        deleted.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        run(&lifecycle, &api, &probe, &deleted)
            .await
            .expect("cleanup runs");
        assert_eq!(probe.cleaned.load(SeqCst), 1);
        assert_eq!(
            probe.applied.load(SeqCst),
            1,
            "a deleted object is not applied"
        );
        drop((lifecycle, api, client));

        let seen = server.await.expect("the mock API server ran");
        let own = at(&seen, POD_PATH);
        assert_eq!(own.len(), 2, "one patch adds, one removes: {seen:#?}");
        assert!(own.iter().all(|s| s.method == Method::PATCH));
        assert_eq!(
            own[0].body,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}
            ])
        );
        assert_eq!(
            own[1].body,
            json!([
                {"op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER},
                {"op": "remove", "path": "/metadata/finalizers/0"}
            ])
        );
    }

    #[tokio::test]
    async fn an_object_gone_when_its_finalizer_is_removed_again_is_no_failure() {
        let (client, server) = mock_api(|_| (404, crate::testing::not_found()));
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let lifecycle = lifecycle(&client).with_finalizer(FINALIZER);
        let probe = Probe::default();
        let mut deleted = pod();
        deleted.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        deleted.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let action = run(&lifecycle, &api, &probe, &deleted).await;
        assert_eq!(action.expect("nothing left to do"), Action::await_change());
        assert_eq!(
            probe.cleaned.load(SeqCst),
            1,
            "cleanup ran, as it may again"
        );
        drop((lifecycle, api, client));
        let seen = server.await.expect("the mock API server ran");
        assert_eq!(at(&seen, POD_PATH).len(), 1, "one removal tried: {seen:#?}");
    }

    #[tokio::test]
    async fn an_object_deleted_before_its_finalizer_is_added_is_no_failure_and_gets_no_condition() {
        let (client, server) = mock_api(|_| (404, crate::testing::not_found()));
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let lifecycle = lifecycle(&client)
            .with_finalizer(FINALIZER)
            .with_condition(CONDITION, FIELD_MANAGER);
        let probe = Probe::default();
        let action = run(&lifecycle, &api, &probe, &pod()).await;
        assert_eq!(action.expect("nothing left to do"), Action::await_change());
        assert_eq!(
            probe.applied.load(SeqCst),
            0,
            "apply waits for the finalizer"
        );
        drop((lifecycle, api, client));
        let seen = server.await.expect("the mock API server ran");
        assert_eq!(
            seen.len(),
            1,
            "one addition tried, and no condition written: {seen:#?}"
        );
        assert_eq!(
            (seen[0].path(), &seen[0].method),
            (POD_PATH, &Method::PATCH)
        );
    }

    #[tokio::test]
    async fn without_a_finalizer_or_a_condition_only_apply_runs_and_nothing_is_written() {
        let object = pod();
        let (client, server) = mock_api(holding(&object));
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let lifecycle = lifecycle(&client);
        let probe = Probe::default();
        let mut deleted = object.clone();
        deleted.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        run(&lifecycle, &api, &probe, &object)
            .await
            .expect("applied");
        run(&lifecycle, &api, &probe, &deleted)
            .await
            .expect("applied");
        assert_eq!(probe.applied.load(SeqCst), 2);
        assert_eq!(probe.cleaned.load(SeqCst), 0);
        let set = lifecycle
            .set_condition(&api, &object, true, "Ready", "")
            .await;
        assert!(!set.expect("nothing to write"), "no condition is kept");
        drop((lifecycle, api, client));
        let seen = server.await.expect("the mock API server ran");
        assert!(seen.is_empty(), "nothing to write: {seen:#?}");
    }

    #[tokio::test]
    async fn the_condition_is_written_only_when_the_outcome_changed() {
        let object = pod();
        let (client, server) = mock_api(holding(&object));
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let lifecycle = lifecycle(&client).with_condition(CONDITION, FIELD_MANAGER);
        let failing = Probe {
            fail: true,
            ..Probe::default()
        };

        run(&lifecycle, &api, &Probe::default(), &object)
            .await
            .expect("reconciled");
        let ok = conditions::Outcome {
            ok: true,
            reason: "Reconciled",
            message: conditions::SUCCEEDED,
            generation: Some(3),
        };
        let recorded = CONDITION.entry(&ok, &[], json!("2026-01-01T00:00:00Z"));
        let mut json = serde_json::to_value(&object).expect("serializes");
        json["status"]["conditions"] = json!([recorded.expect("a first outcome is recorded")]);
        let reconciled: Pod = serde_json::from_value(json).expect("the condition fits");
        run(&lifecycle, &api, &Probe::default(), &reconciled)
            .await
            .expect("reconciled again");
        let failed = run(&lifecycle, &api, &failing, &reconciled).await;
        assert!(failed.is_err());
        assert_eq!(lifecycle.failure_count(&ObjectRef::from_obj(&object)), 1);
        drop((lifecycle, api, client));

        let seen = server.await.expect("the mock API server ran");
        let writes = at(&seen, &format!("{POD_PATH}/status"));
        assert_eq!(writes.len(), 2, "an unchanged status is kept: {seen:#?}");
        for write in &writes {
            assert_eq!(write.method, Method::PATCH);
            let version = &write.body["metadata"]["resourceVersion"];
            assert_eq!(version, "41", "guarded by what it was read at");
        }
        let first = &writes[0].body["status"]["conditions"][0];
        assert_eq!(
            (&first["type"], &first["status"]),
            (&json!("Reconciled"), &json!("True"))
        );
        assert_eq!(first["observedGeneration"], 3);
        let second = &writes[1].body["status"]["conditions"][0];
        assert_eq!(second["status"], "False");
        assert_eq!(second["reason"], "PermanentError");
        let message = second["message"].as_str().unwrap_or_default();
        assert!(message.contains("the spec names no target"), "{message}");
        let events: Vec<_> = seen
            .iter()
            .filter(|s| s.method == Method::POST && s.path().ends_with("/events"))
            .collect();
        assert_eq!(events.len(), 1, "one Warning event: {seen:#?}");
        assert_eq!(events[0].body["type"], "Warning");
    }

    #[tokio::test]
    async fn a_condition_a_hook_sets_is_the_only_one_written() {
        let object = pod();
        let (client, server) = mock_api(holding(&object));
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let lifecycle = lifecycle(&client).with_condition(CONDITION, FIELD_MANAGER);
        let sets_its_own = |obj: Arc<Pod>| {
            let (lifecycle, api) = (&lifecycle, &api);
            async move {
                let reason = "Waiting";
                let wrote = lifecycle
                    .set_condition(api, &obj, false, reason, "the issuer is not ready")
                    .await?;
                assert!(wrote, "a condition is kept");
                Ok::<_, Failure>(Action::await_change())
            }
        };
        lifecycle
            .reconcile(&api, Arc::new(object), (sets_its_own, no_cleanup))
            .await
            .expect("reconciled");
        drop((lifecycle, api, client));
        let seen = server.await.expect("the mock API server ran");
        let writes = at(&seen, &format!("{POD_PATH}/status"));
        assert_eq!(writes.len(), 1, "set once, by the hook: {seen:#?}");
        let written = &writes[0].body["status"]["conditions"][0];
        assert_eq!(
            (&written["status"], &written["reason"]),
            (&json!("False"), &json!("Waiting"))
        );
    }

    #[tokio::test]
    async fn a_refused_condition_write_fails_the_reconcile_so_it_is_retried() {
        let object = pod();
        let status = format!("{POD_PATH}/status");
        let answer = holding(&object);
        let (client, server) = mock_api(move |seen: &Seen| {
            if seen.path() == status {
                (409, conflict())
            } else {
                answer(seen)
            }
        });
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let lifecycle = lifecycle(&client).with_condition(CONDITION, FIELD_MANAGER);
        let result = run(&lifecycle, &api, &Probe::default(), &object).await;
        let error = result.expect_err("the condition was not written");
        assert!(error.is_transient(), "retried: {error}");
        let retry = lifecycle.retry_action(&ObjectRef::from_obj(&object), &error);
        assert_eq!(retry, Action::requeue(BACKOFF.base));
        let last = lifecycle.conditions().and_then(Conditions::last_error);
        assert!(last.is_some_and(|e| e.contains("Conflict") || e.contains("409")));
        drop((lifecycle, api, client));
        let _ = server.await;
    }

    #[cfg(feature = "sharding")]
    #[tokio::test]
    async fn past_its_shards_fence_an_object_is_left_alone_and_tried_again_soon() {
        let object = pod();
        let (client, server) = mock_api(holding(&object));
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let lifecycle = lifecycle(&client).with_finalizer(FINALIZER);
        // A replica that has not renewed its Lease yet: its fence is closed.
        let replica = Replica::new(client.clone(), "operators", "replica-a", FIELD_MANAGER, 15);
        let shard = lifecycle.join_shard(Arc::new(replica.expect("a valid shard name")));
        assert!(!shard.holds());
        let probe = Probe::default();
        let action = run(&lifecycle, &api, &probe, &object).await;
        // Tried again soon, in case the fence reopens before the term ends.
        assert_eq!(
            action.expect("nothing failed"),
            Action::requeue(FENCE_RETRY)
        );
        assert_eq!(probe.applied.load(SeqCst), 0);
        assert_eq!(lifecycle.failure_count(&ObjectRef::from_obj(&object)), 0);
        drop((lifecycle, api, client));
        let seen = server.await.expect("the mock API server ran");
        assert!(seen.is_empty(), "no finalizer, no write: {seen:#?}");
    }

    #[cfg(feature = "sharding")]
    #[tokio::test(start_paused = true)]
    async fn a_reconcile_the_fence_closes_on_is_cut_short_before_its_condition_is_written() {
        let object = pod();
        let (client, server) = mock_api(holding(&object));
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let lifecycle = lifecycle(&client).with_condition(CONDITION, FIELD_MANAGER);
        let replica = Replica::new(client.clone(), "operators", "replica-a", FIELD_MANAGER, 15);
        let shard = lifecycle.join_shard(Arc::new(replica.expect("a valid shard name")));
        shard.renewed_at(tokio::time::Instant::now());
        let finished = AtomicUsize::new(0);
        // A hook that outlasts the Lease: the fence closes while it waits.
        let slow = |_| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            finished.fetch_add(1, SeqCst);
            Ok::<_, Failure>(Action::await_change())
        };
        let action = lifecycle
            .reconcile(&api, Arc::new(object.clone()), (slow, no_cleanup))
            .await;
        assert_eq!(
            action.expect("nothing failed"),
            Action::requeue(FENCE_RETRY)
        );
        assert_eq!(finished.load(SeqCst), 0, "the hook was dropped mid-way");
        assert!(!shard.holds());
        drop((lifecycle, api, client));
        let seen = server.await.expect("the mock API server ran");
        assert!(seen.is_empty(), "no condition, no Event: {seen:#?}");
    }

    #[tokio::test]
    async fn failures_are_counted_per_object_until_a_success_and_a_permanent_one_waits() {
        let object = pod();
        let (client, server) = mock_api(holding(&object));
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let lifecycle = lifecycle(&client);
        let failing = Probe {
            fail: true,
            ..Probe::default()
        };
        let key = ObjectRef::from_obj(&object);
        let error = run(&lifecycle, &api, &failing, &object)
            .await
            .expect_err("fails");
        run(&lifecycle, &api, &failing, &object)
            .await
            .expect_err("fails again");
        assert_eq!(lifecycle.failure_count(&key), 2);
        let mut other = pod();
        other.metadata.name = Some("db".to_owned());
        assert_eq!(lifecycle.failure_count(&ObjectRef::from_obj(&other)), 0);
        assert_eq!(lifecycle.retry_action(&key, &error), Action::await_change());
        run(&lifecycle, &api, &Probe::default(), &object)
            .await
            .expect("succeeds");
        assert_eq!(lifecycle.failure_count(&key), 0, "a success resets");
        drop((lifecycle, api, client));
        let seen = server.await.expect("the mock API server ran");
        let events: Vec<&str> = seen
            .iter()
            // A repeated Event is a PATCH of the first one's series.
            .filter(|s| s.path().contains("/events"))
            .filter_map(|s| s.body["reason"].as_str())
            .collect();
        assert_eq!(
            events,
            ["ReconcileFailed", "ReconcileFailed", "Reconciled"],
            "each failure, then the first success after them: {seen:#?}"
        );
    }
}
