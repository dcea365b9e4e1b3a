//! Admission: the API server passes an object to the operator's hooks before it stores it.
//! The hooks are the user's ([`Admission`]); what every operator does around them is here: the
//! review read, an object typed or refused, a deadline, the patch of what `mutate` changed, and
//! the updates of an object being deleted that skip the hooks.

use std::{future::Future, marker::PhantomData, time::Duration};

use axum::{
    Json,
    extract::Request,
    response::{IntoResponse as _, Response},
};
use futures::future::BoxFuture;
use kube::core::{
    DynamicObject, GroupVersionKind, Resource, TypeMeta,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview},
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use tokio::time::Instant;

use crate::{
    allocator,
    metrics::Metrics,
    request_budget::{Bodies, Turns},
    webhook_server::{self, Outcome, request_uid},
};

mod weight;

use weight::{MAX_REVIEW_WORK, Shape};

/// How long a hook may take. The generated configurations give the API server's call 10
/// seconds (`timeoutSeconds`); answering within half of that turns a slow hook into a denial
/// that says so, rather than the API server's timeout.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an admission request may take from its first byte to its answer: under the 10
/// seconds the generated configurations give the API server's call (`timeoutSeconds`).
pub(crate) const ADMISSION_DEADLINE: Duration = Duration::from_secs(9);

/// How many of the largest reviews may be arriving at once, across every hook.
const BODIES_AT_ONCE: usize = 2;

/// The largest AdmissionReview read. The API server accepts requests of up to 3 MiB, and a
/// review of an update carries both the new and the old object.
pub const MAX_REVIEW_BYTES: usize = 8 * 1024 * 1024;

/// What an admission refused before its hook says first.
const NOT_ANSWERED: &str = "the AdmissionReview was not answered";

/// Admission reviews read and answered in turn: bodies of at most [`MAX_REVIEW_BYTES`] under a
/// shared budget, then hooked once their work's memory (`weight`) fits beside the rest, each
/// within [`ADMISSION_DEADLINE`] (see `request_budget`). A review whose work is over
/// [`MAX_REVIEW_WORK`] is denied before it is decoded.
#[derive(Clone)]
pub(crate) struct Admissions {
    bodies: Bodies,
    turns: Turns,
}

impl Admissions {
    /// Admissions whose work takes turns from `turns`, shared with the other webhooks.
    pub(crate) fn new(turns: Turns) -> Self {
        Self {
            bodies: Bodies::new(MAX_REVIEW_BYTES, BODIES_AT_ONCE),
            turns,
        }
    }

    /// Reads the review of `request`, waits for a turn and answers it with `hooked`, all
    /// within [`ADMISSION_DEADLINE`]; counts the answer.
    pub(crate) async fn answer(
        &self,
        hooked: &Hooked,
        metrics: &Metrics,
        request: Request,
    ) -> Response {
        let deadline = Instant::now() + ADMISSION_DEADLINE;
        let hook = hooked.hook.name();
        let body = match self.bodies.read(request.into_body(), deadline).await {
            Ok(body) => body,
            Err(refused) => return refused.answer(metrics, hook, NOT_ANSWERED),
        };
        let shape = Shape::of(&body.bytes);
        let work = shape.work(hooked.hook, body.bytes.len());
        // What the answer took, freed once it is built: the body alone for a review denied
        // unread or refused a turn.
        let (response, took) = if work > MAX_REVIEW_WORK {
            let denied = too_costly(metrics, hook, &body.bytes, &shape, work);
            (denied, body.bytes.len())
        } else {
            match self.turns.take(work, deadline).await {
                Ok(_turn) => (answered(hooked, metrics, &body.bytes, deadline).await, work),
                Err(refused) => {
                    let refusal = refused.answer(metrics, hook, NOT_ANSWERED);
                    (refusal, body.bytes.len())
                }
            }
        };
        drop(body);
        allocator::freed(took);
        response
    }
}

/// The answer of `hooked` to a review, or a failure for its uid at `deadline`.
async fn answered(hooked: &Hooked, metrics: &Metrics, body: &[u8], deadline: Instant) -> Response {
    match tokio::time::timeout_at(deadline, hooked.answer(metrics, body)).await {
        Ok(answer) => answer.into_response(),
        Err(_) => {
            let mut response = AdmissionResponse::invalid(format!(
                "the review was not answered within {ADMISSION_DEADLINE:?}"
            ));
            response.uid = request_uid(body).unwrap_or_default();
            metrics.webhook_answered(hooked.hook.name(), Outcome::Failed.name());
            Json(response.into_review()).into_response()
        }
    }
}

/// The denial of a review whose work is over [`MAX_REVIEW_WORK`]: an answer for its uid,
/// so the API server refuses the object whatever the webhook's failure policy.
fn too_costly(metrics: &Metrics, hook: &str, body: &[u8], shape: &Shape, work: usize) -> Response {
    const MIB: usize = 1024 * 1024;
    let reason = format!(
        "the review holds {} JSON objects in {} bytes, which {hook} would take about {} MiB \
         to decode and answer, over the {} MiB one review may take: split the object",
        shape.objects,
        body.len(),
        work / MIB,
        MAX_REVIEW_WORK / MIB
    );
    tracing::warn!(%reason);
    let mut response = AdmissionResponse::invalid(reason);
    response.uid = request_uid(body).unwrap_or_default();
    metrics.webhook_answered(hook, Outcome::Invalid.name());
    Json(response.into_review()).into_response()
}

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

    /// Changes `object` before it is validated and stored, such as setting a default. When
    /// the same kind is validated too, the mutate route also runs [`Admission::validate`] on
    /// the object as mutated, the object the validate route would be sent, and refuses there
    /// what it refuses: the API server calls `mutate` first, and a refused object then costs
    /// one review's memory rather than two.
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
    /// Whether the kind is validated too, so that a mutation is validated before it is
    /// answered (see [`Admission::mutate`]).
    validated: bool,
    decide: Box<dyn Decide>,
}

/// [`decide`] for one kind `K` and its hooks `A`.
trait Decide: Send + Sync {
    fn decide<'a>(
        &'a self,
        hook: Hook,
        validated: bool,
        body: &'a [u8],
    ) -> BoxFuture<'a, (AdmissionResponse, Outcome)>;
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
    fn decide<'a>(
        &'a self,
        hook: Hook,
        validated: bool,
        body: &'a [u8],
    ) -> BoxFuture<'a, (AdmissionResponse, Outcome)> {
        Box::pin(judge::<K, A>(hook, validated, &self.admission, body))
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
            validated: false,
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

    /// The kinds admitted here, as (group, kind).
    pub(crate) fn kinds(&self) -> impl Iterator<Item = (&str, &str)> {
        self.kinds
            .iter()
            .map(|k| (k.group.as_str(), k.kind.as_str()))
    }

    /// The same mutation, which validates the mutated objects of each kind that `validated`
    /// says the operator validates too (see [`Admission::mutate`]). A validation is unchanged.
    pub(crate) fn validating(mut self, validated: impl Fn(&str, &str) -> bool) -> Self {
        if self.hook == Hook::Mutate {
            for admitted in &mut self.kinds {
                admitted.validated = validated(&admitted.group, &admitted.kind);
            }
        }
        self
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
        let admitted = match self.kinds.as_slice() {
            [only] => only,
            kinds => {
                let head = match read_head(body) {
                    Ok(head) => head,
                    Err(response) => return (*response, Outcome::Invalid),
                };
                let named = kinds
                    .iter()
                    .find(|k| k.group == head.kind.group && k.kind == head.kind.kind);
                let Some(admitted) = named else {
                    let reason = format!(
                        "this webhook admits no {} of group {:?}",
                        head.kind.kind, head.kind.group
                    );
                    return (answer_for(&head.uid).deny(reason), Outcome::Invalid);
                };
                admitted
            }
        };
        admitted
            .decide
            .decide(self.hook, admitted.validated, body)
            .await
    }
}

/// An AdmissionReview as read here: its type and request, with no field flattened, so that
/// the objects are decoded straight into their type and never held as a generic tree first.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review<R> {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<R>,
}

/// What a review says of its request besides the objects, which are skipped.
#[derive(Deserialize)]
struct Head {
    uid: String,
    kind: GroupVersionKind,
    #[serde(default)]
    name: String,
}

/// The head of the AdmissionReview in `body`, or the answer that refuses it as no review.
fn read_head(body: &[u8]) -> Result<Head, Box<AdmissionResponse>> {
    serde_json::from_slice::<Review<Head>>(body)
        .map_err(|e| e.to_string())
        .and_then(|review| {
            review
                .request
                .ok_or_else(|| "the review holds no request".to_owned())
        })
        .map_err(|reason| {
            let mut response =
                AdmissionResponse::invalid(format!("not an AdmissionReview: {reason}"));
            // The API server accepts an answer only for its request's uid.
            response.uid = request_uid(body).unwrap_or_default();
            Box::new(response)
        })
}

/// An allowing answer for the request of `uid`, to deny or patch.
fn answer_for(uid: &str) -> AdmissionResponse {
    let mut response = AdmissionResponse::invalid(String::new());
    response.uid = uid.to_owned();
    response.allowed = true;
    response.result = kube::core::Status::default();
    response
}

/// Reads an AdmissionReview of a `K`, runs `hook` on its object and says what to answer, as
/// a route of that hook alone answers.
pub async fn review<K, A>(hook: Hook, admission: &A, body: &[u8]) -> (AdmissionResponse, Outcome)
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync,
    A: Admission<K>,
{
    judge::<K, A>(hook, false, admission, body).await
}

/// [`review`], where a mutation of a kind that is `validated` too is validated before it is
/// answered.
async fn judge<K, A>(
    hook: Hook,
    validated: bool,
    admission: &A,
    body: &[u8],
) -> (AdmissionResponse, Outcome)
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync,
    A: Admission<K>,
{
    if only_finalizing(body) {
        return match read_head(body) {
            Ok(head) => (answer_for(&head.uid), Outcome::Allowed),
            Err(response) => (*response, Outcome::Invalid),
        };
    }
    match read::<K>(body) {
        Ok(request) => decide::<K, A>(hook, validated, admission, body, request).await,
        Err(response) => (*response, Outcome::Invalid),
    }
}

/// The request of the AdmissionReview in `body`, its objects as `K`s; or the answer that
/// refuses it, for its request when the review is one but its object is no `K`.
fn read<K>(body: &[u8]) -> Result<AdmissionRequest<K>, Box<AdmissionResponse>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let error = match serde_json::from_slice::<Review<AdmissionRequest<K>>>(body) {
        Ok(Review {
            api_version,
            kind,
            request: Some(mut request),
        }) => {
            request.types = TypeMeta { api_version, kind };
            return Ok(request);
        }
        Ok(Review { request: None, .. }) => "the review holds no request".to_owned(),
        Err(error) => error.to_string(),
    };
    let head = read_head(body)?;
    let reason = format!("{:?} is not a valid {}: {error}", head.name, K::kind(&()));
    Err(Box::new(answer_for(&head.uid).deny(reason)))
}

/// Runs `hook` of `admission` on the object of `request`, read from `body`, and says what to
/// answer; a mutation of a kind `validated` too is validated as mutated.
async fn decide<K, A>(
    hook: Hook,
    validated: bool,
    admission: &A,
    body: &[u8],
    request: AdmissionRequest<K>,
) -> (AdmissionResponse, Outcome)
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync,
    A: Admission<K>,
{
    let response = AdmissionResponse::from(&request);
    // A delete or connect has no object; the generated configurations do not send them.
    let Some(object) = request.object else {
        return (response, Outcome::Allowed);
    };
    let old = request.old_object;
    let hooked = async move {
        match hook {
            Hook::Validate => admission
                .validate(&object, old.as_ref())
                .await
                .map(|()| None),
            Hook::Mutate if validated => mutation(admission, object, Some(old.as_ref()))
                .await
                .map(Some),
            Hook::Mutate => {
                drop(old);
                mutation(admission, object, None).await.map(Some)
            }
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
            let applied = sent_object(body).and_then(|mut sent| {
                json_patch::patch(&mut sent, &patch).map_err(|e| e.to_string())
            });
            if let Err(error) = applied {
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

/// The object of the review in `body` as sent, read again only for a mutation; the old object
/// is skipped.
fn sent_object(body: &[u8]) -> Result<serde_json::Value, String> {
    #[derive(Deserialize)]
    struct Sent {
        object: serde_json::Value,
    }
    serde_json::from_slice::<Review<Sent>>(body)
        .map_err(|e| e.to_string())?
        .request
        .map(|sent| sent.object)
        .ok_or_else(|| "the review holds no request".to_owned())
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

/// Whether the review in `body` updates an object being deleted that differs from the stored
/// one only in [`FINALIZING`] fields. Any other change of an object being deleted is hooked as
/// usual, so that setting a deletion timestamp is no way around them. Read as sent, before the
/// objects are typed: an object the type can no longer read must still lose its finalizers.
/// Only an object being deleted is read whole here.
fn only_finalizing(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Deleting {
        object: Option<Metadata>,
    }
    #[derive(Deserialize)]
    struct Metadata {
        metadata: DeletionTimestamp,
    }
    #[derive(Deserialize)]
    struct DeletionTimestamp {
        #[serde(rename = "deletionTimestamp")]
        deletion_timestamp: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Both {
        object: serde_json::Value,
        old_object: serde_json::Value,
    }
    let deleting = serde_json::from_slice::<Review<Deleting>>(body)
        .ok()
        .and_then(|review| review.request?.object)
        .is_some_and(|object| object.metadata.deletion_timestamp.is_some());
    if !deleting {
        return false;
    }
    let Some(Both { object, old_object }) = serde_json::from_slice::<Review<Both>>(body)
        .ok()
        .and_then(|review| review.request)
    else {
        return false;
    };
    let without = |mut value: serde_json::Value| {
        let metadata = value.get_mut("metadata")?.as_object_mut()?;
        for field in FINALIZING {
            metadata.remove(field);
        }
        Some(value)
    };
    matches!((without(object), without(old_object)), (Some(now), Some(was)) if now == was)
}

/// Runs `mutate` and returns what it changed, as a JSON patch against the object as typed.
/// With `validate_against`, the stored object (`None` on a create), `validate` judges the
/// mutated object before its patch is made.
async fn mutation<K: Serialize, A: Admission<K>>(
    admission: &A,
    mut object: K,
    validate_against: Option<Option<&K>>,
) -> Result<json_patch::Patch, String> {
    let before = serde_json::to_value(&object).map_err(|e| e.to_string())?;
    admission.mutate(&mut object).await?;
    if let Some(old) = validate_against {
        admission.validate(&object, old).await?;
    }
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

    /// Hooks whose `validate` refuses a ConfigMap that `mutate` has not labelled, or one
    /// named `refused`.
    struct Defaulting;

    impl Admission<ConfigMap> for Defaulting {
        async fn validate(&self, object: &ConfigMap, _: Option<&ConfigMap>) -> Result<(), String> {
            let labelled = object
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("defaulted"));
            match object.metadata.name.as_deref() {
                _ if !labelled => Err("not defaulted".to_owned()),
                Some("refused") => Err("refused by name".to_owned()),
                _ => Ok(()),
            }
        }

        async fn mutate(&self, object: &mut ConfigMap) -> Result<(), String> {
            Hooks.mutate(object).await
        }
    }

    #[tokio::test]
    async fn a_mutation_of_a_validated_kind_is_refused_with_the_reason_of_validate() {
        let body = review_of("CREATE", config_map("refused"), Value::Null);
        let (response, outcome) =
            judge::<ConfigMap, _>(Hook::Mutate, true, &Defaulting, &body).await;
        assert!(!response.allowed);
        assert_eq!(outcome, Outcome::Denied);
        assert_eq!(response.result.message, "refused by name");
        assert_eq!(response.uid, REVIEW_UID);
        let (response, outcome) =
            judge::<ConfigMap, _>(Hook::Mutate, false, &Defaulting, &body).await;
        assert!(response.allowed, "a mutate route alone does not validate");
        assert_eq!(outcome, Outcome::Patched);
    }

    #[tokio::test]
    async fn validate_at_the_mutate_route_judges_the_object_as_mutated() {
        let sent = config_map("fine");
        let body = review_of("CREATE", sent.clone(), Value::Null);
        let (response, outcome) =
            judge::<ConfigMap, _>(Hook::Mutate, true, &Defaulting, &body).await;
        assert!(response.allowed, "{}", response.result.message);
        assert_eq!(outcome, Outcome::Patched);
        let stored = patched(sent, &response);
        assert_eq!(stored["metadata"]["labels"]["defaulted"], "yes");
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
