//! A Kubernetes client that counts every request it makes, by verb, in
//! `operator_api_requests_total`.

use std::sync::LazyLock;

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
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&counted)
        .build())
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
