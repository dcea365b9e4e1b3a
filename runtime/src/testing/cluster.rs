//! The test a generated crate ships in `tests/cluster.rs`: its operator against the real API
//! server in `KUBECONFIG`, from a sample's creation to its deletion. It is written here once,
//! for any [`Operator`], and says why when it fails.

use std::{fmt::Debug, future::Future, sync::Arc, time::Duration};

use futures::future::BoxFuture;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, PartialObjectMeta, PostParams},
    runtime::reflector::ObjectRef,
};
use serde::{Serialize, de::DeserializeOwned};
use tokio::task::JoinHandle;

use super::LogTail;
use crate::{
    context::{Context, Operator},
    leader,
    metrics::ReadyWhen,
    run::WatchScope,
};

/// How long the cluster gets to reconcile, and then to delete, the sample.
const PATIENCE: Duration = Duration::from_secs(60);

/// How many of the operator's last log lines a failure shows.
const LOG_LINES: usize = 40;

/// Runs `O`'s controller in this process (`run`, given its context), creates the object
/// `sample` makes, waits until it is reconciled (without a failure, the finalizer in place and
/// the condition `True`, as far as `O` holds either), deletes it and waits until it is gone.
///
/// # Panics
/// When any of that does not happen within a minute: with the failures so far, the last error
/// writing the condition, and the operator's last log lines.
pub async fn reconciles_a_sample<O, Run, Ran>(
    sample: fn(&str, Option<&str>) -> serde_json::Result<O::Primary>,
    run: Run,
) where
    O: Operator,
    Run: FnOnce(Arc<Context<O>>) -> Ran,
    Ran: Future<Output = Result<(), leader::Error>> + Send + 'static,
{
    let mut cluster = Cluster::connect().await;
    let ctx = Arc::new(Context::<O>::new(cluster.client.clone()));
    cluster.run(run(Arc::clone(&ctx)));
    let sampled = Sampled {
        sample,
        read_back: whole::<O::Primary>,
    };
    sampled.is_reconciled_and_deleted(&ctx, &cluster.logs).await;
}

/// The cluster in `KUBECONFIG`, with an operator run in this process against it and the
/// operator's last log lines: where a test checks the operator's kinds in turn, as a generic
/// operator's does (one operator, one Lease and one webhook port for all of them). The operator
/// stops when this is dropped.
pub struct Cluster {
    client: Client,
    logs: LogTail,
    operator: Option<JoinHandle<Result<(), leader::Error>>>,
}

impl Cluster {
    /// A client for the cluster in `KUBECONFIG`, with this process's log lines kept from now.
    ///
    /// # Panics
    /// Without `KUBECONFIG`, or when it gives no client.
    pub async fn connect() -> Self {
        assert!(
            std::env::var_os("KUBECONFIG").is_some(),
            "no KUBECONFIG: point it at a cluster where the operator's deploy/local/ is applied"
        );
        let logs = LogTail::new(LOG_LINES);
        logs.install();
        let client = Client::try_default()
            .await
            .expect("a client for the cluster in KUBECONFIG");
        Self {
            client,
            logs,
            operator: None,
        }
    }

    /// The client, for the operator's contexts.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs `operator` in this process until this is dropped (or another is run instead).
    pub fn run<Ran>(&mut self, operator: Ran)
    where
        Ran: Future<Output = Result<(), leader::Error>> + Send + 'static,
    {
        if let Some(earlier) = self.operator.replace(tokio::spawn(operator)) {
            earlier.abort();
        }
    }

    /// [`reconciles_a_sample`] for a kind `K` whose metadata the running operator reconciles
    /// (its primary is `PartialObjectMeta<K>`) in `ctx`: creates the whole `K` that `sample`
    /// makes, reads back its metadata until it is reconciled, deletes it and waits until it is
    /// gone.
    ///
    /// # Panics
    /// As [`reconciles_a_sample`] does.
    pub async fn reconciles_the_metadata_of_a_sample<O, K>(
        &self,
        ctx: &Context<O>,
        sample: fn(&str, Option<&str>) -> serde_json::Result<K>,
    ) where
        O: Operator<Primary = PartialObjectMeta<K>>,
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + Sync,
        K: 'static,
        K::Scope: WatchScope,
    {
        let sampled = Sampled {
            sample,
            read_back: metadata::<K>,
        };
        sampled.is_reconciled_and_deleted(ctx, &self.logs).await;
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(operator) = self.operator.take() {
            operator.abort();
        }
    }
}

/// How the test reads back, as the primary `P`, the object of kind `S` it created.
type ReadBack<S, P> = for<'a> fn(&'a Api<S>, &'a str) -> BoxFuture<'a, kube::Result<Option<P>>>;

/// The object itself, where it is the primary.
fn whole<'a, P>(api: &'a Api<P>, name: &'a str) -> BoxFuture<'a, kube::Result<Option<P>>>
where
    P: Clone + DeserializeOwned + Debug + Send + 'static,
{
    Box::pin(api.get_opt(name))
}

/// Its metadata, where the primary is `PartialObjectMeta<K>`.
fn metadata<'a, K>(
    api: &'a Api<K>,
    name: &'a str,
) -> BoxFuture<'a, kube::Result<Option<PartialObjectMeta<K>>>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    Box::pin(api.get_metadata_opt(name))
}

/// The object the test creates, of kind `S`, and how it reads back the primary it is.
struct Sampled<S, P> {
    sample: fn(&str, Option<&str>) -> serde_json::Result<S>,
    read_back: ReadBack<S, P>,
}

impl<S, P> Sampled<S, P>
where
    S: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
    S::Scope: WatchScope,
    P: Resource<DynamicType = ()> + Serialize,
{
    /// Creates the sample while an operator runs around `ctx`, waits until it is reconciled,
    /// deletes it and waits until it is gone; `logs` say why when it is not.
    async fn is_reconciled_and_deleted<O>(&self, ctx: &Context<O>, logs: &LogTail)
    where
        O: Operator<Primary = P>,
    {
        let namespaced = <S::Scope as WatchScope>::NAMESPACED;
        let namespace = namespaced.then(|| ctx.client.default_namespace().to_owned());
        let api: Api<S> = <S::Scope as WatchScope>::api(ctx.client.clone(), namespace.as_deref());
        let name = format!("{}-{}", O::NAME, std::process::id());
        let sample = (self.sample)(&name, namespace.as_deref()).expect("the sample fits the types");
        if matches!(O::READY_WHEN, ReadyWhen::WebhooksServe { .. }) {
            // Where deploy/base/webhooks.yaml is installed, the API server calls this
            // process's own webhooks (`WEBHOOK_ADDR`), which serve once they have the
            // certificate.
            let serving = async {
                while !ctx.metrics.is_ready() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            };
            if tokio::time::timeout(PATIENCE, serving).await.is_err() {
                eprintln!("the webhooks are not serving; creating the sample anyway");
            }
        }
        if let Err(error) = api.create(&PostParams::default(), &sample).await {
            panic!(
                "the API server refused {name}, the sample: {error}. Is deploy/base/crd.yaml \
                 applied? Where the schema asks for more than its least object gives (a \
                 `pattern`, a name that must resolve), set those fields under `sample:` in \
                 operator.yaml."
            );
        }
        let mut key = ObjectRef::<P>::new(&name);
        key.namespace = namespace;
        let reconciled = async {
            loop {
                let live = (self.read_back)(&api, &name).await;
                let live = live.expect("reading the sample back");
                if let Some(live) = live.filter(|live| is_reconciled(ctx, &key, live)) {
                    return live;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        };
        let outcome = tokio::time::timeout(PATIENCE, reconciled).await;
        let deleted = api.delete(&name, &DeleteParams::default()).await;
        let live = outcome.unwrap_or_else(|_| {
            let status_error = ctx.last_status_error().unwrap_or_else(|| "none".to_owned());
            panic!(
                "{name} was not reconciled within {PATIENCE:?}; failures so far: {}; the last \
                 error writing its condition: {status_error}; the operator's last log lines:\n{}",
                ctx.failure_count(&key),
                logs.lines()
            )
        });
        assert_eq!(live.meta().name.as_deref(), Some(name.as_str()));
        deleted.expect("deleting the sample");
        // With a finalizer, deletion waits for the cleanup hook to succeed and release it.
        let gone = async {
            while !matches!(api.get_opt(&name).await, Ok(None)) {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        };
        let gone = tokio::time::timeout(PATIENCE, gone).await;
        assert!(gone.is_ok(), "{name} was not deleted within {PATIENCE:?}");
    }
}

/// Whether the controller has reconciled `live` without failing, as far as the API shows: the
/// finalizer is in place and the condition is `True`, where `O` holds them.
fn is_reconciled<O: Operator>(
    ctx: &Context<O>,
    key: &ObjectRef<O::Primary>,
    live: &O::Primary,
) -> bool {
    let clean = ctx.metrics.reconciles.get() > 0 && ctx.failure_count(key) == 0;
    let guarded =
        O::FINALIZER.is_none_or(|finalizer| live.finalizers().iter().any(|f| f == finalizer));
    let recorded = O::CONDITION.is_none_or(|condition| {
        let json = serde_json::to_value(live).unwrap_or_default();
        json.pointer("/status/conditions")
            .and_then(serde_json::Value::as_array)
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c["type"] == condition.type_name && c["status"] == "True")
            })
    });
    clean && guarded && recorded
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;
    use crate::{conditions, failures::Backoff, settings::Common, testing::offline_client};

    /// An operator of Pods that holds a finalizer and keeps a condition.
    struct Guarded;

    impl Operator for Guarded {
        type Primary = Pod;
        type Settings = Common;
        type Children = ();
        type Cached = ();

        const NAME: &'static str = "pod-operator";
        const BACKOFF: Backoff = Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(10),
        };
        const READY_WHEN: ReadyWhen = ReadyWhen::WatchesListed(1);
        const FINALIZER: Option<&'static str> = Some("example.com/cleanup");
        const CONDITION: Option<conditions::Spec> = Some(conditions::Spec {
            type_name: "Ready",
            reason: true,
            message: true,
            observed_generation: false,
            last_transition_time: false,
            list_map: false,
        });
    }

    fn pod(finalizers: &[&str], ready: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "finalizers": finalizers},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }))
        .expect("a Pod")
    }

    #[tokio::test]
    async fn a_sample_is_reconciled_once_it_holds_the_finalizer_and_the_condition_is_true() {
        let ctx = Context::<Guarded>::new(offline_client());
        let done = pod(&["example.com/cleanup"], "True");
        let key = ObjectRef::from_obj(&done);
        assert!(!is_reconciled(&ctx, &key, &done), "no reconcile yet");
        ctx.metrics.reconciles.inc();
        assert!(is_reconciled(&ctx, &key, &done));
        assert!(
            !is_reconciled(&ctx, &key, &pod(&[], "True")),
            "no finalizer"
        );
        let failing = pod(&["example.com/cleanup"], "False");
        assert!(
            !is_reconciled(&ctx, &key, &failing),
            "the condition is not True"
        );
    }
}
