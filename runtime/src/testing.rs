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
use kube::{Client, client::Body};
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
