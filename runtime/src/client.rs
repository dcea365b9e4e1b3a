//! A Kubernetes client that counts every request it makes, by verb, in
//! `operator_api_requests_total`, and notes since when the API server has refused its
//! credentials, so that a replica whose token stopped working reports not ready
//! (`Metrics::is_ready`) rather than staying live and ready forever.

use std::{
    sync::{LazyLock, Mutex, PoisonError},
    time::{Duration, Instant},
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
};

/// Labels of the API request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The Kubernetes verb: `get`, `list`, `watch`, `create`, `update`, `patch` or `delete`.
    pub verb: String,
}

/// Requests this process made to the API server, by verb. One counter for the process,
/// because the client is built before any controller and its metrics.
pub(crate) static API_REQUESTS: LazyLock<Family<RequestLabels, Counter>> =
    LazyLock::new(Family::default);

/// A client for the cluster the environment names (`KUBECONFIG`, or the pod's own account),
/// counting every request it makes in `operator_api_requests_total`.
pub async fn counted() -> Result<kube::Client, kube::Error> {
    let config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    counted_from(config)
}

/// A client for `config`, counting every request it makes.
pub fn counted_from(config: kube::Config) -> Result<kube::Client, kube::Error> {
    let counted = tower::util::MapRequestLayer::new(count_request);
    let answers = tower::util::MapResponseLayer::new(note_answer);
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&counted)
        .with_layer(&answers)
        .build())
}

/// Since when every answer of the API server to this process has been `401 Unauthorized`:
/// its token expired or was revoked. Any other answer clears it; no answer at all (the API
/// server is down) leaves it as it is.
static CREDENTIALS_REFUSED_SINCE: Mutex<Option<Instant>> = Mutex::new(None);

fn note_answer<B>(response: http::Response<B>) -> http::Response<B> {
    note_status(response.status(), Instant::now());
    response
}

fn note_status(status: http::StatusCode, at: Instant) {
    let mut since = CREDENTIALS_REFUSED_SINCE
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if status == http::StatusCode::UNAUTHORIZED {
        since.get_or_insert(at);
    } else {
        *since = None;
    }
}

/// How long the API server has refused this process's credentials, if it does now.
pub(crate) fn credentials_refused_for() -> Option<Duration> {
    CREDENTIALS_REFUSED_SINCE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .map(|since| since.elapsed())
}

fn count_request<B>(request: http::Request<B>) -> http::Request<B> {
    let verb = verb(request.method(), request.uri());
    API_REQUESTS
        .get_or_create(&RequestLabels {
            verb: verb.to_owned(),
        })
        .inc();
    request
}

/// The Kubernetes verb of a request: from its method and, for reads, from whether it names
/// one object (`get`), watches (`watch`) or reads a collection (`list`).
pub fn verb(method: &http::Method, uri: &http::Uri) -> &'static str {
    let watching = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    match *method {
        http::Method::GET if watching => "watch",
        http::Method::GET if names_an_object(uri.path()) => "get",
        http::Method::GET => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

/// Whether an API path ends at one object (or its subresource) rather than a collection:
/// `/api/v1/namespaces/a/configmaps/b` does, `/api/v1/namespaces/a/configmaps` does not.
fn names_an_object(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let resource = match segments.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
        _ => return false,
    };
    match resource {
        ["namespaces", _namespace, _kind, _name, ..] => true,
        ["namespaces", _namespace, _kind] => false,
        [_kind, _name, ..] => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Metrics, ReadyWhen};

    #[test]
    fn requests_are_counted_by_their_kubernetes_verb() {
        let cases = [
            ("GET", "/api/v1/namespaces/a/configmaps/b", "get"),
            ("GET", "/api/v1/namespaces/a/configmaps", "list"),
            (
                "GET",
                "/api/v1/configmaps?watch=true&resourceVersion=5",
                "watch",
            ),
            (
                "GET",
                "/apis/apps/v1/namespaces/a/deployments/b/status",
                "get",
            ),
            (
                "GET",
                "/apis/monitoring.coreos.com/v1/prometheusrules",
                "list",
            ),
            ("GET", "/api/v1/namespaces/a", "get"),
            ("GET", "/api/v1/namespaces", "list"),
            (
                "PATCH",
                "/api/v1/namespaces/a/configmaps/b?fieldManager=x",
                "patch",
            ),
            (
                "POST",
                "/apis/events.k8s.io/v1/namespaces/a/events",
                "create",
            ),
            (
                "PUT",
                "/apis/coordination.k8s.io/v1/namespaces/a/leases/b",
                "update",
            ),
            ("DELETE", "/api/v1/namespaces/a/pods/b", "delete"),
            ("OPTIONS", "/api/v1/namespaces", "other"),
        ];
        for (method, uri, expected) in cases {
            let method: http::Method = method.parse().expect("a method");
            let uri: http::Uri = uri.parse().expect("a uri");
            assert_eq!(verb(&method, &uri), expected, "{method} {uri}");
        }
    }

    /// The one test that touches the process's record of refused credentials, so that no
    /// other sees it change: through a client built by [`counted_from`], against a loopback
    /// server that answers 401 until it is told the token works.
    #[tokio::test]
    async fn credentials_count_as_refused_from_the_first_401_until_any_other_answer() {
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let answer = {
            let accepted = std::sync::Arc::clone(&accepted);
            move || async move {
                if accepted.load(std::sync::atomic::Ordering::SeqCst) {
                    (http::StatusCode::FORBIDDEN, "{}")
                } else {
                    (http::StatusCode::UNAUTHORIZED, "{}")
                }
            }
        };
        let router = axum::Router::new().fallback(answer);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        tokio::spawn(axum::serve(listener, router).into_future());
        let config = kube::Config::new(url.parse().expect("a URL"));
        let client = counted_from(config).expect("a client");
        let get = || async {
            let _ = client
                .request_text(
                    http::Request::get("/api/v1/namespaces/a/configmaps/b")
                        .body(Vec::new())
                        .expect("a request"),
                )
                .await;
        };

        note_status(http::StatusCode::OK, Instant::now());
        let before = Instant::now();
        get().await;
        get().await;
        let refused = credentials_refused_for().expect("refused by the server");
        assert!(refused <= before.elapsed(), "counted from the first 401");
        // A forbidden request authenticated: the token works again.
        accepted.store(true, std::sync::atomic::Ordering::SeqCst);
        get().await;
        assert_eq!(credentials_refused_for(), None);
    }

    #[test]
    fn a_counted_request_shows_in_every_metrics_registry() {
        let request = http::Request::delete("/api/v1/namespaces/a/secrets/s")
            .body(())
            .expect("a request");
        count_request(request);
        let text = Metrics::new(ReadyWhen::WatchesListed(0)).render();
        assert!(
            text.contains("operator_api_requests_total{verb=\"delete\"}"),
            "{text}"
        );
    }
}
