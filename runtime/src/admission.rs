//! Admission: the API server passes an object to the operator's hooks before it stores it.
//! The hooks are the user's ([`Admission`]); what every operator does around them is here: the
//! review read, an object typed or refused, a deadline, the patch of what `mutate` changed, and
//! the updates of an object being deleted that skip the hooks.

use std::{future::Future, marker::PhantomData, time::Duration};

use axum::Json;
use futures::future::BoxFuture;
use kube::core::{
    DynamicObject, Resource,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview},
};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    metrics::Metrics,
    webhook_server::{self, Outcome, request_uid},
};

/// How long a hook may take. The generated configurations give the API server's call 10
/// seconds (`timeoutSeconds`); answering within half of that turns a slow hook into a denial
/// that says so, rather than the API server's timeout.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// Which hook a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// Whether the object may be stored.
    Validate,
    /// What to change before it is validated and stored.
    Mutate,
}

impl Hook {
    /// The `hook` label.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Validate => "validate",
            Hook::Mutate => "mutate",
        }
    }

    /// What this hook's answers can come to: only a mutation is ever patched.
    pub fn outcomes(self) -> &'static [Outcome] {
        match self {
            Hook::Validate => &[
                Outcome::Allowed,
                Outcome::Denied,
                Outcome::Invalid,
                Outcome::Failed,
            ],
            Hook::Mutate => &[
                Outcome::Allowed,
                Outcome::Patched,
                Outcome::Denied,
                Outcome::Invalid,
                Outcome::Failed,
            ],
        }
    }
}

/// Makes each outcome `hook` can answer with a series in `metrics` from the start, at zero.
pub fn expect_answers(metrics: &Metrics, hook: Hook) {
    webhook_server::expect_answers(metrics, hook.name(), hook.outcomes());
}

/// An operator's admission hooks for objects of `K`. They run on every replica and must
/// answer within [`HOOK_TIMEOUT`]; an `Err` refuses the request, and its text is what
/// `kubectl` prints.
pub trait Admission<K>: Send + Sync + 'static {
    /// Whether `object` may be stored: `old` is the stored object on an update, `None` on a
    /// create.
    fn validate(
        &self,
        object: &K,
        old: Option<&K>,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// Changes `object` before it is validated and stored, such as setting a default.
    fn mutate(&self, object: &mut K) -> impl Future<Output = Result<(), String>> + Send;
}

/// One hook served at one path, for one kind or for several: a generic operator's hooks
/// admit each of its kinds through one webhook whose rules list them all. Each request goes to
/// the kind it names; with one kind, every request is read as that kind.
pub struct Hooked {
    hook: Hook,
    kinds: Vec<Admitted>,
}

/// One kind's admission at a path, with the kind's type erased so that kinds share a path.
struct Admitted {
    group: String,
    kind: String,
    decide: Box<dyn Decide>,
}

/// [`decide`] for one kind `K` and its hooks `A`.
trait Decide: Send + Sync {
    fn decide(
        &self,
        hook: Hook,
        request: AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'_, (AdmissionResponse, Outcome)>;
}

/// The hooks `A` of objects of `K`.
struct Typed<K, A> {
    admission: A,
    kind: PhantomData<fn() -> K>,
}

impl<K, A> Decide for Typed<K, A>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync,
    A: Admission<K>,
{
    fn decide(
        &self,
        hook: Hook,
        request: AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'_, (AdmissionResponse, Outcome)> {
        Box::pin(decide::<K, A>(hook, &self.admission, request))
    }
}

impl Hooked {
    /// `hook` of `admission`, for objects of `K`.
    pub fn new<K, A>(hook: Hook, admission: A) -> Self
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
        A: Admission<K>,
    {
        let kinds = Vec::new();
        Self { hook, kinds }.with::<K, A>(admission)
    }

    /// The same hook, also for objects of `K`, with their hooks `admission`.
    ///
    /// # Panics
    ///
    /// When `K`'s kind is admitted here already: its first hooks would answer every review.
    pub fn with<K, A>(mut self, admission: A) -> Self
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
        A: Admission<K>,
    {
        let (group, kind) = (K::group(&()).into_owned(), K::kind(&()).into_owned());
        let twice = self
            .kinds
            .iter()
            .any(|k| k.group == group && k.kind == kind);
        assert!(
            !twice,
            "{kind} of group {group:?} is admitted twice at one path"
        );
        self.kinds.push(Admitted {
            group,
            kind,
            decide: Box::new(Typed::<K, A> {
                admission,
                kind: PhantomData,
            }),
        });
        self
    }

    /// Which hook this is.
    pub fn hook(&self) -> Hook {
        self.hook
    }

    /// Answers the AdmissionReview in `body`, and counts the answer.
    pub async fn answer(
        &self,
        metrics: &Metrics,
        body: &[u8],
    ) -> Json<AdmissionReview<DynamicObject>> {
        let (response, outcome) = self.review(body).await;
        metrics.webhook_answered(self.hook.name(), outcome.name());
        Json(response.into_review())
    }

    /// Reads an AdmissionReview, runs the hook of the kind it names and says what to answer.
    pub async fn review(&self, body: &[u8]) -> (AdmissionResponse, Outcome) {
        let request = match read(body) {
            Ok(request) => request,
            Err(response) => return (*response, Outcome::Invalid),
        };
        let admitted = match self.kinds.as_slice() {
            [only] => Some(only),
            kinds => kinds
                .iter()
                .find(|k| k.group == request.kind.group && k.kind == request.kind.kind),
        };
        match admitted {
            Some(admitted) => admitted.decide.decide(self.hook, request).await,
            None => {
                let reason = format!(
                    "this webhook admits no {} of group {:?}",
                    request.kind.kind, request.kind.group
                );
                (
                    AdmissionResponse::from(&request).deny(reason),
                    Outcome::Invalid,
                )
            }
        }
    }
}

/// Reads an AdmissionReview, runs `hook` on its object and says what to answer.
pub async fn review<K, A>(hook: Hook, admission: &A, body: &[u8]) -> (AdmissionResponse, Outcome)
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync,
    A: Admission<K>,
{
    match read(body) {
        Ok(request) => decide::<K, A>(hook, admission, request).await,
        Err(response) => (*response, Outcome::Invalid),
    }
}

/// The request of the AdmissionReview in `body`, or the answer that refuses it as no review.
fn read(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, Box<AdmissionResponse>> {
    serde_json::from_slice::<AdmissionReview<DynamicObject>>(body)
        .map_err(|e| e.to_string())
        .and_then(|review| {
            review
                .try_into()
                .map_err(|_| "the review holds no request".to_owned())
        })
        .map_err(|reason| {
            let mut response =
                AdmissionResponse::invalid(format!("not an AdmissionReview: {reason}"));
            // The API server accepts an answer only for its request's uid.
            response.uid = request_uid(body).unwrap_or_default();
            Box::new(response)
        })
}

/// Runs `hook` of `admission` on the object of `request`, as a `K`, and says what to answer.
async fn decide<K, A>(
    hook: Hook,
    admission: &A,
    request: AdmissionRequest<DynamicObject>,
) -> (AdmissionResponse, Outcome)
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync,
    A: Admission<K>,
{
    let response = AdmissionResponse::from(&request);
    if only_finalizing(request.object.as_ref(), request.old_object.as_ref()) {
        return (response, Outcome::Allowed);
    }
    let (mut sent, object, old) = match typed::<K>(request.object, request.old_object) {
        Ok(Some(typed)) => typed,
        // A delete or connect has no object; the generated configurations do not send them.
        Ok(None) => return (response, Outcome::Allowed),
        Err(error) => {
            let reason = format!(
                "{:?} is not a valid {}: {error}",
                request.name,
                K::kind(&())
            );
            return (response.deny(reason), Outcome::Invalid);
        }
    };
    let hooked = async move {
        match hook {
            Hook::Validate => admission
                .validate(&object, old.as_ref())
                .await
                .map(|()| None),
            Hook::Mutate => mutation(admission, object).await.map(Some),
        }
    };
    match tokio::time::timeout(HOOK_TIMEOUT, hooked).await {
        Err(_) => {
            let reason = format!(
                "the {} hook did not answer within {HOOK_TIMEOUT:?}",
                hook.name()
            );
            (response.deny(reason), Outcome::Failed)
        }
        Ok(Err(reason)) => (response.deny(reason), Outcome::Denied),
        Ok(Ok(None)) => (response, Outcome::Allowed),
        Ok(Ok(Some(patch))) if patch.0.is_empty() => (response, Outcome::Allowed),
        Ok(Ok(Some(patch))) => {
            // The patch is computed on the object as typed; the API server applies it to the
            // object it sent, which may lack a field the type fills in. Refuse clearly here
            // rather than have the API server refuse a patch that does not apply.
            if let Err(error) = json_patch::patch(&mut sent, &patch) {
                let reason = format!("mutate's change does not apply to the object sent: {error}");
                return (response.deny(reason), Outcome::Failed);
            }
            match response.clone().with_patch(patch) {
                Ok(patched) => (patched, Outcome::Patched),
                Err(error) => (response.deny(error.to_string()), Outcome::Failed),
            }
        }
    }
}

/// What an update of an object being deleted may change without the hooks: its finalizers,
/// which must come off even if the hooks would now refuse the object, or it stays Terminating
/// for good; its owner references, which the garbage collector edits and must not be refused;
/// and what the API server writes itself. Nothing a hook would judge the object by.
const FINALIZING: [&str; 4] = [
    "finalizers",
    "ownerReferences",
    "managedFields",
    "resourceVersion",
];

/// Whether `object` is being deleted and differs from `old`, the stored object, only in
/// [`FINALIZING`] fields. Any other change of an object being deleted is hooked as usual, so
/// that setting a deletion timestamp is no way around them.
fn only_finalizing(object: Option<&DynamicObject>, old: Option<&DynamicObject>) -> bool {
    let (Some(object), Some(old)) = (object, old) else {
        return false;
    };
    if object.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let without = |object: &DynamicObject| {
        let mut value = serde_json::to_value(object).ok()?;
        let metadata = value.get_mut("metadata")?.as_object_mut()?;
        for field in FINALIZING {
            metadata.remove(field);
        }
        Some(value)
    };
    // Compared only when both encode: a request that cannot be read is hooked, not skipped.
    matches!((without(object), without(old)), (Some(now), Some(was)) if now == was)
}

/// The request's object as sent and as a `K`, and the old object as one; `None` when the
/// request carries no object.
fn typed<K: DeserializeOwned>(
    object: Option<DynamicObject>,
    old: Option<DynamicObject>,
) -> serde_json::Result<Option<(serde_json::Value, K, Option<K>)>> {
    let Some(object) = object else {
        return Ok(None);
    };
    let sent = serde_json::to_value(object)?;
    let typed = K::deserialize(&sent)?;
    let old = old
        .map(|old| serde_json::to_value(old).and_then(|old| K::deserialize(&old)))
        .transpose()?;
    Ok(Some((sent, typed, old)))
}

/// Runs `mutate` and returns what it changed, as a JSON patch against the object as typed.
async fn mutation<K: Serialize, A: Admission<K>>(
    admission: &A,
    mut object: K,
) -> Result<json_patch::Patch, String> {
    let before = serde_json::to_value(&object).map_err(|e| e.to_string())?;
    admission.mutate(&mut object).await?;
    let after = serde_json::to_value(&object).map_err(|e| e.to_string())?;
    Ok(json_patch::diff(&before, &after))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
    use kube::core::PartialObjectMeta;
    use serde_json::{Value, json};

    use super::*;
    use crate::testing::{REVIEW_UID, admission_review, patched};

    /// Hooks over ConfigMaps: a ConfigMap named `refused` is refused, `slow` takes too long,
    /// and `mutate` labels every one.
    struct Hooks;

    impl Admission<ConfigMap> for Hooks {
        async fn validate(
            &self,
            object: &ConfigMap,
            _old: Option<&ConfigMap>,
        ) -> Result<(), String> {
            match object.metadata.name.as_deref() {
                Some("refused") => Err("refused by name".to_owned()),
                Some("slow") => {
                    tokio::time::sleep(HOOK_TIMEOUT * 2).await;
                    Ok(())
                }
                _ => Ok(()),
            }
        }

        async fn mutate(&self, object: &mut ConfigMap) -> Result<(), String> {
            object
                .metadata
                .labels
                .get_or_insert_default()
                .insert("defaulted".to_owned(), "yes".to_owned());
            Ok(())
        }
    }

    /// An AdmissionReview of a ConfigMap, as the API server sends it.
    fn review_of(operation: &str, object: Value, old: Value) -> Vec<u8> {
        admission_review::<ConfigMap>(operation, &object, &old)
    }

    fn config_map(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": {"a": "b"}})
    }

    async fn run(hook: Hook, body: &[u8]) -> (AdmissionResponse, Outcome) {
        review::<ConfigMap, _>(hook, &Hooks, body).await
    }

    #[test]
    fn every_answer_a_hook_can_give_is_a_series_from_the_start() {
        let metrics = Metrics::new(crate::metrics::ReadyWhen::WebhooksServe { watches: 1 });
        expect_answers(&metrics, Hook::Mutate);
        let text = metrics.render();
        for outcome in ["allowed", "patched", "denied", "invalid", "failed"] {
            let series = format!("hook=\"mutate\",outcome=\"{outcome}\"");
            assert!(text.contains(&series), "{series} in {text}");
        }
        assert!(!Hook::Validate.outcomes().contains(&Outcome::Patched));
    }

    #[tokio::test]
    async fn a_body_that_is_no_review_is_refused_without_a_panic() {
        let (response, outcome) = run(Hook::Validate, b"{not json").await;
        assert_eq!(outcome, Outcome::Invalid);
        assert!(!response.allowed);
        assert!(
            response.result.message.contains("not an AdmissionReview"),
            "{}",
            response.result.message
        );
    }

    #[tokio::test]
    async fn an_object_that_does_not_decode_is_denied_for_its_request() {
        let object =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": 7});
        let (response, outcome) =
            run(Hook::Validate, &review_of("CREATE", object, Value::Null)).await;
        assert_eq!(outcome, Outcome::Invalid);
        assert!(!response.allowed);
        assert_eq!(response.uid, REVIEW_UID);
    }

    #[tokio::test]
    async fn validate_decides_and_its_reason_is_what_the_user_reads() {
        let (response, outcome) = run(
            Hook::Validate,
            &review_of("CREATE", config_map("fine"), Value::Null),
        )
        .await;
        assert!(response.allowed);
        assert_eq!(outcome, Outcome::Allowed);
        let (response, outcome) = run(
            Hook::Validate,
            &review_of("CREATE", config_map("refused"), Value::Null),
        )
        .await;
        assert!(!response.allowed);
        assert_eq!(outcome, Outcome::Denied);
        assert_eq!(response.result.message, "refused by name");
    }

    #[tokio::test(start_paused = true)]
    async fn a_hook_slower_than_the_deadline_is_a_denial_that_says_so() {
        let (response, outcome) = run(
            Hook::Validate,
            &review_of("CREATE", config_map("slow"), Value::Null),
        )
        .await;
        assert!(!response.allowed);
        assert_eq!(outcome, Outcome::Failed);
        assert!(
            response.result.message.contains("did not answer within"),
            "{}",
            response.result.message
        );
    }

    #[tokio::test]
    async fn the_patch_makes_the_stored_object_what_mutate_made_it() {
        let sent = config_map("fine");
        let (response, outcome) = run(
            Hook::Mutate,
            &review_of("CREATE", sent.clone(), Value::Null),
        )
        .await;
        assert!(response.allowed, "{}", response.result.message);
        assert_eq!(outcome, Outcome::Patched);
        let stored = patched(sent, &response);
        assert_eq!(stored["metadata"]["labels"]["defaulted"], "yes");
        assert_eq!(stored["data"]["a"], "b", "nothing else changed");
    }

    /// Hooks over any kind's metadata, as a generic operator's are: an object labelled
    /// `refused` is refused, and `mutate` annotates every one.
    struct MetadataHooks;

    impl<K: Resource<DynamicType = ()> + Send + Sync> Admission<PartialObjectMeta<K>>
        for MetadataHooks
    {
        async fn validate(
            &self,
            object: &PartialObjectMeta<K>,
            _old: Option<&PartialObjectMeta<K>>,
        ) -> Result<(), String> {
            match object
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("refused"))
            {
                true => Err(format!("{} refused by label", K::kind(&()))),
                false => Ok(()),
            }
        }

        async fn mutate(&self, object: &mut PartialObjectMeta<K>) -> Result<(), String> {
            let annotations = object.metadata.annotations.get_or_insert_default();
            annotations.insert("kind".to_owned(), K::kind(&()).into_owned());
            Ok(())
        }
    }

    /// A Secret, as the API server sends one.
    fn secret(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"}, "data": {"a": "Yg=="}})
    }

    /// The validate hook of [`MetadataHooks`] for ConfigMaps and Secrets at one path.
    fn both_kinds(hook: Hook) -> Hooked {
        Hooked::new::<PartialObjectMeta<ConfigMap>, _>(hook, MetadataHooks)
            .with::<PartialObjectMeta<Secret>, _>(MetadataHooks)
    }

    #[tokio::test]
    async fn hooks_of_several_kinds_run_as_the_kind_each_review_names() {
        let hooked = both_kinds(Hook::Mutate);
        let sent = secret("s");
        let body = admission_review::<Secret>("CREATE", &sent, &Value::Null);
        let (response, outcome) = hooked.review(&body).await;
        assert_eq!(outcome, Outcome::Patched, "{}", response.result.message);
        let stored = patched(sent, &response);
        assert_eq!(stored["metadata"]["annotations"]["kind"], "Secret");
        assert_eq!(
            stored["data"]["a"], "Yg==",
            "a metadata hook patches only metadata"
        );

        let mut labelled = config_map("c");
        labelled["metadata"]["labels"] = json!({"refused": "yes"});
        let body = admission_review::<ConfigMap>("CREATE", &labelled, &Value::Null);
        let (response, outcome) = both_kinds(Hook::Validate).review(&body).await;
        assert_eq!(outcome, Outcome::Denied);
        assert_eq!(response.result.message, "ConfigMap refused by label");
    }

    #[tokio::test]
    async fn a_kind_none_of_the_hooks_admit_is_denied_for_its_request() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        let body = admission_review::<Pod>("CREATE", &pod, &Value::Null);
        let (response, outcome) = both_kinds(Hook::Validate).review(&body).await;
        assert_eq!(outcome, Outcome::Invalid);
        assert!(!response.allowed);
        assert_eq!(response.uid, REVIEW_UID);
        assert!(
            response.result.message.contains("admits no Pod"),
            "{}",
            response.result.message
        );
    }

    #[test]
    #[should_panic(expected = "admitted twice")]
    fn one_kind_cannot_be_admitted_twice_at_one_path() {
        let _ = both_kinds(Hook::Validate).with::<PartialObjectMeta<Secret>, _>(MetadataHooks);
    }

    /// A ConfigMap being deleted, with a finalizer and an owner, and data no hook could read,
    /// so that only a request the hooks are skipped for is allowed.
    fn being_deleted() -> Value {
        let mut object = config_map("going");
        object["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        object["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
        object["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "c5a1b2d4-0000-4000-8000-000000000001",
        }]);
        object["metadata"]["resourceVersion"] = json!("7");
        object["data"] = json!(7);
        object
    }

    #[tokio::test]
    async fn taking_finalizers_and_owners_off_an_object_being_deleted_skips_the_hooks() {
        let old = being_deleted();
        let mut object = old.clone();
        object["metadata"]["finalizers"] = json!([]);
        object["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("ownerReferences");
        object["metadata"]["resourceVersion"] = json!("8");
        for hook in [Hook::Validate, Hook::Mutate] {
            let (response, outcome) =
                run(hook, &review_of("UPDATE", object.clone(), old.clone())).await;
            assert!(response.allowed, "{}", response.result.message);
            assert_eq!(outcome, Outcome::Allowed);
            assert!(response.patch.is_none());
        }
    }

    #[tokio::test]
    async fn any_other_change_of_an_object_being_deleted_is_hooked() {
        let old = being_deleted();
        let mut object = old.clone();
        object["metadata"]["finalizers"] = json!([]);
        object["metadata"]["labels"] = json!({"changed": "too"});
        let (response, outcome) = run(Hook::Validate, &review_of("UPDATE", object, old)).await;
        // The data cannot be typed, so a hooked request is refused as invalid.
        assert!(!response.allowed);
        assert_eq!(outcome, Outcome::Invalid);
    }
}
