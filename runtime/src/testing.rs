//! A mock API server for tests, behind the `test-util` feature: a [`kube::Client`] whose
//! requests a closure answers and which records each, so a test asserts what an operator wrote
//! (and that it read nothing) without a cluster. With a cluster, [`cluster`] holds the test a
//! generated crate ships in `tests/cluster.rs`.
//!
//! ```
//! # async fn example() {
//! use operator_gen_runtime::testing::{mock_api, not_found};
//!
//! let (client, server) = mock_api(|seen| match seen.method {
//!     http::Method::GET => (404, not_found()),
//!     _ => (200, seen.body.clone()),
//! });
//! // ... hand `client` to the code under test, then drop it ...
//! drop(client);
//! let seen = server.await.expect("the mock API server ran");
//! assert!(seen.is_empty());
//! # }
//! ```

pub mod cluster;

use std::{
    collections::VecDeque,
    io::Write,
    sync::{Arc, Mutex},
};

use http::{Method, Request, Response, StatusCode, Uri};
use kube::{Client, Resource, client::Body};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// A request the mock API server answered.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request's method.
    pub method: Method,
    /// The request's URI, with its query.
    pub uri: Uri,
    /// The request's body as JSON; `Null` when it had none or it was not JSON.
    pub body: Value,
}

impl Seen {
    /// The request's path, without its query.
    pub fn path(&self) -> &str {
        self.uri.path()
    }
}

/// A client of a mock API server that answers each request with `answer` (an HTTP status and a
/// JSON body) and records it. Awaiting the handle, once every clone of the client is dropped,
/// gives the requests in the order they came.
pub fn mock_api(
    answer: impl Fn(&Seen) -> (u16, Value) + Send + 'static,
) -> (Client, JoinHandle<Vec<Seen>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let server = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some((request, respond)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let request = Seen {
                method: parts.method,
                uri: parts.uri,
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            let (status, body) = answer(&request);
            let mut response = Response::new(Body::from(body.to_string().into_bytes()));
            *response.status_mut() =
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            respond.send_response(response);
            seen.push(request);
        }
        seen
    });
    (Client::new(service, "default"), server)
}

/// A client whose requests go nowhere, for a test that makes none: each would fail.
pub fn offline_client() -> Client {
    let (service, _handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    Client::new(service, "default")
}

/// Answers like an API server that holds `object` and nothing else: any request to `object`'s
/// own path gets `object`, a read of anything else finds nothing, and a write of anything else
/// returns what was sent. For [`mock_api`].
pub fn holding<K>(object: &K) -> impl Fn(&Seen) -> (u16, Value) + Send + 'static + use<K>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let meta = object.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    let own = format!("{}/{name}", K::url_path(&(), meta.namespace.as_deref()));
    let object = serde_json::to_value(object).unwrap_or_default();
    move |seen| {
        if seen.path().starts_with(&own) {
            (200, object.clone())
        } else if seen.method == Method::GET {
            (404, not_found())
        } else {
            (200, seen.body.clone())
        }
    }
}

/// The uid of every [`admission_review`].
#[cfg(feature = "webhooks")]
pub const REVIEW_UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

/// An AdmissionReview as the API server sends it to a webhook of `K`: `operation` on `object`,
/// with `old` (null for a create), under the uid [`REVIEW_UID`].
#[cfg(feature = "webhooks")]
pub fn admission_review<K>(operation: &str, object: &Value, old: &Value) -> Vec<u8>
where
    K: Resource<DynamicType = ()>,
{
    let (group, version) = (K::group(&()), K::version(&()));
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": REVIEW_UID,
            "kind": {"group": group, "version": version, "kind": K::kind(&())},
            "resource": {"group": group, "version": version, "resource": K::plural(&())},
            "name": object["metadata"]["name"],
            "operation": operation,
            "userInfo": {"username": "admin"},
            "object": object,
            "oldObject": old,
        }
    })
    .to_string()
    .into_bytes()
}

/// The object the API server stores after a mutating webhook answered `response` to `sent`:
/// `sent` with the answer's JSON patch applied, if it has one.
#[cfg(feature = "webhooks")]
pub fn patched(mut sent: Value, response: &kube::core::admission::AdmissionResponse) -> Value {
    if let Some(patch) = &response.patch {
        let patch: json_patch::Patch = serde_json::from_slice(patch).expect("a JSON patch");
        json_patch::patch(&mut sent, &patch).expect("the patch applies to the object sent");
    }
    sent
}

/// What `hook` of `admission` answers to a review of `object`'s creation, beside the object
/// as it was sent.
#[cfg(feature = "webhooks")]
async fn review_creation<K, A>(
    hook: crate::admission::Hook,
    admission: &A,
    object: &K,
) -> (
    Value,
    kube::core::admission::AdmissionResponse,
    crate::webhook_server::Outcome,
)
where
    K: Resource<DynamicType = ()> + Serialize + serde::de::DeserializeOwned + Send + Sync,
    A: crate::admission::Admission<K>,
{
    let sent = serde_json::to_value(object).expect("the object encodes");
    let body = admission_review::<K>("CREATE", &sent, &Value::Null);
    let (response, outcome) = crate::admission::review(hook, admission, &body).await;
    (sent, response, outcome)
}

/// Asserts that the validate hook of `admission`, answering a review of `object`'s creation,
/// decides as calling it directly does, under the review's uid, with the outcome it counts.
#[cfg(feature = "webhooks")]
pub async fn assert_answers_as_validate<K, A>(admission: &A, object: &K)
where
    K: Resource<DynamicType = ()> + Serialize + serde::de::DeserializeOwned + Send + Sync,
    A: crate::admission::Admission<K>,
{
    use crate::{admission::Hook, webhook_server::Outcome};

    let (_, response, outcome) = review_creation(Hook::Validate, admission, object).await;
    let expected = admission.validate(object, None).await;
    assert_eq!(
        response.allowed,
        expected.is_ok(),
        "{}",
        response.result.message
    );
    assert_eq!(outcome == Outcome::Allowed, expected.is_ok());
    assert_eq!(response.uid, REVIEW_UID);
}

/// Asserts that the mutate hook of `admission`, answering a review of `object`'s creation,
/// allows it with a patch that makes the stored object what calling it directly makes of
/// `object`.
#[cfg(feature = "webhooks")]
pub async fn assert_patch_stores_what_mutate_makes<K, A>(admission: &A, object: &K)
where
    K: Resource<DynamicType = ()> + Serialize + serde::de::DeserializeOwned + Send + Sync,
    A: crate::admission::Admission<K>,
{
    use crate::{admission::Hook, webhook_server::Outcome};

    let (sent, response, outcome) = review_creation(Hook::Mutate, admission, object).await;
    assert!(response.allowed, "{}", response.result.message);
    let answered = if response.patch.is_some() {
        Outcome::Patched
    } else {
        Outcome::Allowed
    };
    assert_eq!(outcome, answered);
    let mut expected: K = serde_json::from_value(sent.clone()).expect("the object decodes");
    admission
        .mutate(&mut expected)
        .await
        .expect("mutate allows the object");
    let stored: K =
        serde_json::from_value(patched(sent, &response)).expect("the patched object decodes");
    assert_eq!(
        serde_json::to_value(stored).expect("encodes"),
        serde_json::to_value(expected).expect("encodes")
    );
}

/// Asserts of each hook in `served` what [`assert_answers_as_validate`] or
/// [`assert_patch_stores_what_mutate_makes`] asserts: a review of `object`'s creation is
/// answered as calling the hook directly decides.
#[cfg(feature = "webhooks")]
pub async fn assert_hooks_answer_as_called<K, A>(
    admission: &A,
    object: &K,
    served: &[crate::admission::Hook],
) where
    K: Resource<DynamicType = ()> + Serialize + serde::de::DeserializeOwned + Send + Sync,
    A: crate::admission::Admission<K>,
{
    use crate::admission::Hook;

    for hook in served {
        match hook {
            Hook::Validate => assert_answers_as_validate(admission, object).await,
            Hook::Mutate => assert_patch_stores_what_mutate_makes(admission, object).await,
        }
    }
}

/// Asserts that the webhook routes `routes` builds for a conversion cap convert a review of
/// 100 objects of `api_version` posted to `path`, and refuse one a byte over the cap unread.
/// The objects are in the version asked for already: what is checked is the route and its
/// cap, not the conversion.
#[cfg(feature = "webhooks")]
pub async fn assert_converts_at(
    path: &str,
    api_version: &str,
    routes: impl Fn(usize) -> axum::Router,
) {
    use tower::ServiceExt as _;

    let objects = (0..100)
        .map(|i| json!({"apiVersion": api_version, "metadata": {"name": format!("object-{i}")}}))
        .collect();
    let body = crate::conversion::round_trips::recorded(api_version, objects);
    let post = |max_bytes: usize| {
        let request = axum::http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(body.clone()))
            .expect("a request");
        routes(max_bytes).oneshot(request)
    };
    let response = post(body.len()).await.expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    let answer = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body");
    let answer: kube::core::conversion::ConversionReview =
        serde_json::from_slice(&answer).expect("a review");
    let converted = answer.response.expect("a response").converted_objects;
    assert_eq!(converted.len(), 100);
    let refused = post(body.len() - 1).await.expect("an answer");
    assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let reason = axum::body::to_bytes(refused.into_body(), usize::MAX)
        .await
        .expect("a body");
    assert!(String::from_utf8_lossy(&reason).contains("--conversion-max-bytes"));
}

/// An object of kind `K` named `name`, every other field at its default: a child for
/// [`assert_applies_owned_once`].
pub fn named<K: Resource<DynamicType = ()> + Default>(name: &str) -> K {
    let mut object = K::default();
    object.meta_mut().name = Some(name.to_owned());
    object
}

/// `object` as the API server returns it once stored: with a uid, which an owner reference to
/// it needs.
pub fn stored<K: Resource>(mut object: K) -> K {
    object.meta_mut().uid = Some("0b5e55ed-5a3e-4c1e-9e2b-5a3a1e000001".to_owned());
    object
}

/// An object of kind `K` named `sample`, in `default` when `K` is namespaced, as a
/// metadata-only watch delivers it once the API server stored it: a generic operator's
/// primary, for its shipped tests.
pub fn stored_metadata<K>() -> kube::api::PartialObjectMeta<K>
where
    K: Resource<DynamicType = (), Scope: crate::run::WatchScope> + Default,
{
    let mut object = kube::api::PartialObjectMeta::<K>::default();
    object.metadata.name = Some("sample".to_owned());
    if <K::Scope as crate::run::WatchScope>::NAMESPACED {
        object.metadata.namespace = Some("default".to_owned());
    }
    stored(object)
}

/// Asserts that `object` reads back through its own type as it was written: nothing the type
/// serializes is lost or changed on the way.
pub fn assert_round_trips<K: Serialize + serde::de::DeserializeOwned>(object: &K) {
    let json = serde_json::to_value(object).expect("the object serializes");
    let again: K = serde_json::from_value(json.clone()).expect("the object deserializes");
    let again = serde_json::to_value(&again).expect("the object serializes again");
    assert_eq!(again, json, "the object changed on a round trip");
}

/// Asserts that `seen` is what `crate::apply::apply_owned` sends for `child`: a server-side
/// apply to the child's own path, forced, as `field_manager`, labelled as managed by it, with
/// `owner` as the child's only owner and its controller.
pub fn assert_owned_apply<P, C>(seen: &Seen, owner: &P, child: &C, field_manager: &str)
where
    P: Resource<DynamicType = ()>,
    C: Resource<DynamicType = ()>,
{
    let meta = child.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    let path = format!("{}/{name}", C::url_path(&(), meta.namespace.as_deref()));
    assert_eq!((&seen.method, seen.path()), (&Method::PATCH, path.as_str()));
    let query = seen.uri.query().unwrap_or_default();
    let manager = format!("fieldManager={field_manager}");
    assert!(
        query.contains(&manager) && query.contains("force=true"),
        "{query}"
    );
    let labels = &seen.body["metadata"]["labels"];
    assert_eq!(
        labels[crate::apply::MANAGED_BY_LABEL],
        field_manager,
        "{labels}"
    );
    let owner_meta = owner.meta();
    let owners = json!([{
        "apiVersion": P::api_version(&()),
        "kind": P::kind(&()),
        "name": owner_meta.name,
        "uid": owner_meta.uid,
        "controller": true
    }]);
    assert_eq!(seen.body["metadata"]["ownerReferences"], owners);
}

/// A context of operator `O` on a mock API server that holds `owner`, after it applied `child`
/// once: the context, the server (which returns what it saw once the context is dropped),
/// and the child as the apply returned it.
async fn applied_once<O, C>(
    owner: &O::Primary,
    child: C,
) -> (crate::context::Context<O>, JoinHandle<Vec<Seen>>, C)
where
    O: crate::context::Operator,
    C: crate::context::CachedIn<O::Children>,
{
    let (client, server) = mock_api(holding(owner));
    let ctx = crate::context::Context::<O>::new(client);
    let applied = ctx.apply_owned(owner, child).await.expect("applied");
    (ctx, server, applied)
}

/// Asserts what [`crate::context::Context::apply_owned`] of operator `O` does with `child` of
/// `owner`: one server-side apply (see [`assert_owned_apply`]) and nothing else, neither a
/// read nor, once the child's cache holds what the apply returned, a second write of the same
/// child.
pub async fn assert_applies_owned_once<O, C>(owner: &O::Primary, child: C)
where
    O: crate::context::Operator,
    C: crate::context::CachedIn<O::Children>,
{
    let (ctx, server, applied) = applied_once::<O, C>(owner, child.clone()).await;
    // The watch delivers the applied child to the cache, as the API server returned it.
    let cached = kube::runtime::watcher::Event::Apply(applied.clone());
    C::cache(&ctx.children).apply_watcher_event(&cached);
    ctx.apply_owned(owner, child).await.expect("unchanged");
    drop(ctx);
    let seen = server.await.expect("the mock API server ran");
    assert_eq!(
        seen.len(),
        1,
        "one apply; no read, and no write of an unchanged child: {seen:#?}"
    );
    assert_owned_apply(&seen[0], owner, &applied, O::NAME);
}

/// Asserts that [`crate::context::Context::apply_owned`] of operator `O` restores `child` of
/// `owner` once it drifted from what was applied: with the cached child holding what the
/// apply returned less its ownerReference (removed by hand, say), the same apply is written
/// again, with the ownerReference back, and nothing is read.
pub async fn assert_restores_owned<O, C>(owner: &O::Primary, child: C)
where
    O: crate::context::Operator,
    C: crate::context::CachedIn<O::Children>,
{
    let (ctx, server, applied) = applied_once::<O, C>(owner, child.clone()).await;
    let mut drifted = applied.clone();
    drifted.meta_mut().owner_references = None;
    let cached = kube::runtime::watcher::Event::Apply(drifted);
    C::cache(&ctx.children).apply_watcher_event(&cached);
    let restored = ctx.apply_owned(owner, child).await.expect("restored");
    drop(ctx);
    let seen = server.await.expect("the mock API server ran");
    assert_eq!(
        seen.len(),
        2,
        "the apply, then the same apply again over the drifted child; no read: {seen:#?}"
    );
    assert_owned_apply(&seen[1], owner, &restored, O::NAME);
}

/// Asserts that an object of any kind whose label, annotation or field (`named_by`) holds
/// `primary`'s name maps to `primary`, as a watch's mapper maps it: in `primary`'s namespace
/// when it has one, and to no primary when the object names none. The object is untyped, so
/// this holds the rule and its key, whatever else the watched kind requires.
pub fn assert_named_by<P>(primary: &P, named_by: crate::relations::NamedBy)
where
    P: Resource<DynamicType = (), Scope: crate::run::WatchScope>,
{
    use crate::relations::{NamedBy, named_primary};

    let name = primary.meta().name.clone().expect("the primary has a name");
    let namespace = primary
        .meta()
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let object = |named: bool| {
        let mut object = json!({"metadata": {"name": "watched", "namespace": namespace}});
        if named {
            let (at, value) = match named_by {
                NamedBy::Label(key) => (format!("/metadata/labels/{}", escaped(key)), &name),
                NamedBy::Annotation(key) => {
                    (format!("/metadata/annotations/{}", escaped(key)), &name)
                }
                NamedBy::Field(pointer) => (pointer.to_owned(), &name),
            };
            set_at(&mut object, &at, Value::String(value.clone()));
        }
        let resource = kube::api::ApiResource::erase::<P>(&());
        let mut object: kube::api::DynamicObject =
            serde_json::from_value(object).expect("an object");
        object.types = Some(kube::api::TypeMeta {
            api_version: resource.api_version,
            kind: resource.kind,
        });
        object
    };
    let named = named_primary::<P, _>(&object(true), named_by).expect("it names the primary");
    assert_eq!(named.name, name, "{named_by:?}");
    assert_eq!(named.namespace, primary.meta().namespace, "{named_by:?}");
    assert_eq!(named_primary::<P, _>(&object(false), named_by), None);
}

/// `key` as one JSON pointer segment.
fn escaped(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Sets the value at JSON `pointer` in `object`, making the objects on the way.
fn set_at(object: &mut Value, pointer: &str, value: Value) {
    let mut at = object;
    let segments: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, path)) = segments.split_last() else {
        return;
    };
    for segment in path {
        at = &mut at[segment.as_str()];
    }
    at[last.as_str()] = value;
}

/// Asserts that the admission routes `routes` builds answer at each `(path, hook)` of
/// `served`: a review of `object`'s creation as `admission`'s hook decides (at the mutate
/// route, with `validate` after `mutate` when `served` validates too), and a review of an
/// object that does not decode as `K` denied with the reason, never allowed unread.
#[cfg(feature = "webhooks")]
pub async fn assert_admission_routes<K, A>(
    routes: impl Fn() -> axum::Router,
    served: &[(&str, crate::admission::Hook)],
    admission: &A,
    object: &K,
) where
    K: Resource<DynamicType = ()> + Serialize + serde::de::DeserializeOwned + Clone + Send + Sync,
    A: crate::admission::Admission<K>,
{
    use tower::ServiceExt as _;

    use crate::admission::Hook;

    let answer = |path: &str, body: Vec<u8>| {
        let request = axum::http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(body))
            .expect("a request");
        let response = routes().oneshot(request);
        async move {
            let response = response.await.expect("an answer");
            assert_eq!(response.status(), StatusCode::OK);
            let body = axum::body::to_bytes(response.into_body(), usize::MAX).await;
            let review: kube::core::admission::AdmissionReview<K> =
                serde_json::from_slice(&body.expect("a body")).expect("a review");
            review.response.expect("a response")
        }
    };
    let sent = serde_json::to_value(object).expect("the object encodes");
    let mut unreadable = sent.clone();
    unreadable["metadata"]["name"] = json!(["not", "a", "name"]);
    let validated = served.iter().any(|&(_, hook)| hook == Hook::Validate);
    for &(path, hook) in served {
        let decided = match hook {
            Hook::Validate => admission.validate(object, None).await,
            Hook::Mutate => {
                let mut mutated = object.clone();
                match admission.mutate(&mut mutated).await {
                    // A kind validated too is validated as mutated at the mutate route.
                    Ok(()) if validated => admission.validate(&mutated, None).await,
                    decided => decided,
                }
            }
        };
        let response = answer(path, admission_review::<K>("CREATE", &sent, &Value::Null)).await;
        assert_eq!(
            response.allowed,
            decided.is_ok(),
            "{path}: {}",
            response.result.message
        );
        let refused = answer(
            path,
            admission_review::<K>("CREATE", &unreadable, &Value::Null),
        )
        .await;
        assert!(
            !refused.allowed,
            "{path} allowed an object it could not read"
        );
        assert!(
            !refused.result.message.is_empty(),
            "{path} denied without a reason"
        );
    }
}

/// The body of the API server's 404.
pub fn not_found() -> Value {
    status(404, "NotFound", "not found")
}

/// The body of the API server's 409 for a write made from a stale `resourceVersion`.
pub fn conflict() -> Value {
    status(
        409,
        "Conflict",
        "the object has been modified; please apply your changes to the latest version and try again",
    )
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "reason": reason, "message": message, "code": code,
    })
}

/// The requests made to `path`.
pub fn at<'a>(seen: &'a [Seen], path: &str) -> Vec<&'a Seen> {
    seen.iter().filter(|s| s.path() == path).collect()
}

/// The last lines this process logged, kept for a failing test to show: a cluster test that
/// runs an operator in process says why it waited in vain.
#[derive(Clone)]
pub struct LogTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    keep: usize,
}

impl LogTail {
    /// A tail of the last `keep` lines, receiving nothing until [`LogTail::install`].
    pub fn new(keep: usize) -> Self {
        Self {
            lines: Arc::new(Mutex::new(VecDeque::with_capacity(keep))),
            keep,
        }
    }

    /// Sends this process's logs here, filtered by `RUST_LOG` (default `info`), once per test
    /// binary: a later call, or one after another subscriber was set, changes nothing.
    pub fn install(&self) {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(self.clone())
            .try_init();
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines.iter().map(String::as_str).collect()
    }

    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines.push_back(line);
        while lines.len() > self.keep {
            lines.pop_front();
        }
    }
}

/// One log line being written, kept in its [`LogTail`] when done.
pub struct LogLine {
    tail: LogTail,
    text: Vec<u8>,
}

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.text).into_owned();
        self.tail.push(text);
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogTail {
    type Writer = LogLine;

    fn make_writer(&'a self) -> LogLine {
        LogLine {
            tail: self.clone(),
            text: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::Api;

    use super::*;

    /// A type that loses `kept` when it is read back.
    #[derive(Serialize, serde::Deserialize)]
    struct Lossy {
        name: String,
        #[serde(skip_deserializing)]
        kept: u8,
    }

    #[test]
    fn a_type_that_reads_back_what_it_wrote_round_trips() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".to_owned());
        assert_round_trips(&pod);
    }

    #[test]
    #[should_panic(expected = "changed on a round trip")]
    fn a_type_that_loses_a_field_does_not_round_trip() {
        let name = "a".to_owned();
        assert_round_trips(&Lossy { name, kept: 7 });
    }

    #[tokio::test]
    async fn a_server_holding_one_object_returns_it_finds_nothing_else_and_echoes_writes() {
        let pod = crate::conditions::tests::pod();
        let (client, server) = mock_api(holding(&pod));
        let pods = Api::<Pod>::namespaced(client.clone(), "default");
        let read = pods.get("web").await.expect("held");
        assert_eq!(read.metadata.name.as_deref(), Some("web"));
        assert!(pods.get("db").await.is_err(), "nothing else is held");
        let maps = Api::<ConfigMap>::namespaced(client.clone(), "default");
        let mut child = ConfigMap::default();
        child.metadata.name = Some("child".to_owned());
        let params = kube::api::PostParams::default();
        let created = maps.create(&params, &child).await.expect("echoed");
        assert_eq!(created.metadata.name.as_deref(), Some("child"));
        drop((pods, maps, client));
        let seen = server.await.expect("the mock API server ran");
        assert_eq!(seen.len(), 3);
    }

    #[test]
    fn a_log_tail_keeps_the_last_lines_oldest_first() {
        let tail = LogTail::new(2);
        for line in ["one\n", "two\n", "three\n"] {
            let mut writer = tracing_subscriber::fmt::MakeWriter::make_writer(&tail);
            writer.write_all(line.as_bytes()).expect("in memory");
        }
        assert_eq!(tail.lines(), "two\nthree\n");
    }

    #[tokio::test]
    async fn an_offline_client_fails_every_request() {
        let pods = Api::<Pod>::namespaced(offline_client(), "default");
        assert!(pods.get("web").await.is_err());
    }
}
