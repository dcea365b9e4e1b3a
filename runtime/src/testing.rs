//! A mock API server for tests, behind the `test-util` feature: a [`kube::Client`] whose
//! requests a closure answers and which records each, so a test asserts what an operator wrote
//! (and that it read nothing) without a cluster.
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::Api;

    use super::*;

    #[tokio::test]
    async fn a_server_holding_one_object_returns_it_finds_nothing_else_and_echoes_writes() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".to_owned());
        pod.metadata.namespace = Some("default".to_owned());
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

    #[tokio::test]
    async fn an_offline_client_fails_every_request() {
        let pods = Api::<Pod>::namespaced(offline_client(), "default");
        assert!(pods.get("web").await.is_err());
    }
}
