//! `/metrics`, `/healthz` and `/readyz` over plain HTTP, for Prometheus and the kubelet.

use std::{net::SocketAddr, sync::Arc};

use axum::{Router, extract::State, http::StatusCode, routing::get};

use crate::{connections::ENDPOINTS, metrics::Metrics};

/// The routes, for a server of the caller's (or a test's) choosing.
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(m): State<Arc<Metrics>>| async move { m.render() }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(metrics)
}

/// Serves the routes on `addr` until the process ends, under the `ENDPOINTS` limits.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = std::net::TcpListener::bind(addr)?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    ENDPOINTS
        .serve_plain(listener, router(Arc::clone(&metrics)), &metrics)
        .await
}

/// Serves the routes on `addr` in a task of their own, logging if they go down: a replica
/// without its probes is restarted by the kubelet, which is better than running unseen.
/// Called once as an operator starts, it first raises the open files limit (see
/// `connections::raise_open_files_limit`).
pub fn spawn(addr: SocketAddr, metrics: &Arc<Metrics>) {
    crate::connections::raise_open_files_limit();
    let metrics = Arc::clone(metrics);
    tokio::spawn(async move {
        if let Err(error) = serve(addr, metrics).await {
            tracing::error!(%error, "metrics and health endpoints are down");
        }
    });
}

async fn readyz(State(metrics): State<Arc<Metrics>>) -> (StatusCode, &'static str) {
    if metrics.is_ready() {
        (StatusCode::OK, "ready")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: a leader's watches are still listing, or the webhooks wait for a certificate",
        )
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::metrics::ReadyWhen;

    /// The status line and body of a GET of `path` from a server on `addr`.
    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("read");
        answer
    }

    #[tokio::test]
    async fn readyz_answers_503_until_a_leaders_watches_listed_and_metrics_are_served() {
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        metrics.leading();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("an address");
        tokio::spawn(axum::serve(listener, router(Arc::clone(&metrics))).into_future());

        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        metrics.watch_synced();
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
        let text = get(addr, "/metrics").await;
        assert!(
            text.contains("# TYPE operator_reconciles counter"),
            "{text}"
        );
    }
}
