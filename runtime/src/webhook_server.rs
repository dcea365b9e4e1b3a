//! The webhooks' HTTPS server: it waits for a certificate, serves with it on every replica,
//! leader or not (the API server may call any of them through the Service), and reloads a
//! renewed certificate in place.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::Router;
use rustls::ServerConfig;
use tokio::{net::TcpStream, sync::watch};
use tokio_rustls::{Accept, TlsAcceptor};

use crate::{
    certificates::{Certificate, Certificates},
    connections::{Guarded, WEBHOOKS},
    metrics::Metrics,
};

/// How long to wait before asking for a certificate again, while there is none.
const RETRY: Duration = Duration::from_secs(5);

/// How often the certificate is read again: cert-manager renews it in place, and in the
/// self-managed mode an emptied Secret is filled anew and the CA published again.
pub const REFRESH: Duration = Duration::from_secs(60);

/// Serves `routes` over HTTPS on `addr` with the certificate `certificates` keeps, until the
/// process ends. Readiness ([`Metrics::serving`]) waits for the first certificate and the bound
/// port: until then, no Service endpoint leads here. A port that cannot be bound leaves the
/// replica unready, and says why.
pub async fn serve(
    addr: SocketAddr,
    certificates: Certificates,
    routes: Router,
    metrics: Arc<Metrics>,
) {
    let (mut current, config) = first_certificate(&certificates).await;
    // The configuration each handshake takes: the newest certificate's, replaced in place.
    let (tls, served) = watch::channel(config);
    let listener = match std::net::TcpListener::bind(addr) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, %addr, "cannot serve the webhooks; this replica stays unready");
            return;
        }
    };
    certificates.publish_ca(&[&current]).await;
    metrics.serving();
    metrics.certificate_expires(current.expires_at());
    let refreshed = Arc::clone(&metrics);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(REFRESH).await;
            current = refresh(&certificates, current, &tls).await;
            refreshed.certificate_expires(current.expires_at());
        }
    });
    tracing::info!(%addr, "serving webhooks");
    // Once the operator is asked to stop, every replica keeps answering the API server's open
    // connections, each once more with `Connection: close`: the API server moves to another
    // replica rather than losing a request it wrote into a closed one.
    let shutdown = crate::shutdown::Shutdown::process();
    if let Err(error) = WEBHOOKS
        .serve_draining(listener, routes, tls_handshake(served), &metrics, &shutdown)
        .await
    {
        tracing::error!(%error, "the webhooks are down");
    }
}

/// What each connection goes through before its first request: a TLS handshake with the
/// configuration `served` holds as it starts, so every connection after a renewal gets the
/// renewed certificate, and the ones before keep theirs.
fn tls_handshake(
    served: watch::Receiver<Arc<ServerConfig>>,
) -> impl Fn(Guarded<TcpStream>) -> Accept<Guarded<TcpStream>> {
    move |stream| TlsAcceptor::from(served.borrow().clone()).accept(stream)
}

/// The first usable certificate, asked for every [`RETRY`] until there is one.
async fn first_certificate(certificates: &Certificates) -> (Certificate, Arc<ServerConfig>) {
    loop {
        match certificates.current().await {
            Ok(certificate) => match certificate.server_config() {
                Ok(config) => return (certificate, config),
                Err(error) => tracing::warn!(%error, "the webhook certificate is unusable"),
            },
            Err(error) => tracing::warn!(%error, "no webhook certificate yet"),
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Reads the certificate again and serves the new one if it changed; returns the one served.
/// While replicas move to a new certificate, the configurations trust both CAs: the others
/// still serve the old one until their own refresh, within [`REFRESH`].
async fn refresh(
    certificates: &Certificates,
    served: Certificate,
    tls: &watch::Sender<Arc<ServerConfig>>,
) -> Certificate {
    let fresh = match certificates.current().await {
        Ok(fresh) if fresh != served => fresh,
        Ok(_) => {
            certificates.publish_ca(&[&served]).await;
            return served;
        }
        Err(error) => {
            tracing::warn!(%error, "could not read the webhook certificate; serving the last one");
            return served;
        }
    };
    match fresh.server_config() {
        Ok(config) => {
            certificates.publish_ca(&[&fresh, &served]).await;
            tls.send_replace(config);
            tracing::info!("serving a new webhook certificate");
            fresh
        }
        Err(error) => {
            tracing::warn!(%error, "the new webhook certificate is unusable; serving the last one");
            served
        }
    }
}

/// How a webhook request was answered, as counted in `operator_webhook_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Admitted unchanged.
    Allowed,
    /// Admitted with a patch of what `mutate` changed.
    Patched,
    /// Refused by a hook.
    Denied,
    /// Every object converted.
    Converted,
    /// Refused because the request or its object could not be read.
    Invalid,
    /// Refused because a hook failed to answer in time or its change could not be sent, or
    /// because an object could not be converted.
    Failed,
}

impl Outcome {
    /// The `outcome` label.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Patched => "patched",
            Outcome::Denied => "denied",
            Outcome::Converted => "converted",
            Outcome::Invalid => "invalid",
            Outcome::Failed => "failed",
        }
    }
}

/// Makes each of `outcomes` of `hook` a series in `metrics` from the start, at zero, so that a
/// dashboard or an alert finds it before the first request.
pub fn expect_answers(metrics: &Metrics, hook: &str, outcomes: &[Outcome]) {
    let names: Vec<&str> = outcomes.iter().map(|outcome| outcome.name()).collect();
    metrics.expect_webhook_answers(hook, &names);
}

/// The uid of whatever request `body` holds, read as loosely as JSON allows: the API server
/// accepts an answer only for its request's uid, even a refusal of a body it cannot read.
/// Every other field is skipped, not kept: a body that is no review may still be large.
pub fn request_uid(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Loose {
        request: Option<LooseRequest>,
    }
    #[derive(serde::Deserialize)]
    struct LooseRequest {
        uid: Option<String>,
    }
    serde_json::from_slice::<Loose>(body).ok()?.request?.uid
}

#[cfg(test)]
mod tests {
    use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject as _};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio_rustls::TlsConnector;

    use super::*;
    use crate::{
        certificates::names,
        metrics::{Metrics, ReadyWhen},
    };

    /// A GET of `/` over TLS from a client that trusts only `trusted`'s CA: the answer, or why
    /// there was none.
    async fn get_trusting(addr: SocketAddr, trusted: &Certificate) -> Result<String, String> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(trusted.ca_pem()) {
            roots.add(ca.expect("a CA")).expect("a root");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let name = ServerName::try_from("localhost").expect("a name");
        let connector = TlsConnector::from(Arc::new(config));
        let mut tls = connector
            .connect(name, stream)
            .await
            .map_err(|e| e.to_string())?;
        let request = b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n";
        tls.write_all(request).await.map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        // A server that closes without close_notify ends the read with an error: keep what came.
        let _ = tls.read_to_end(&mut answer).await;
        Ok(String::from_utf8_lossy(&answer).into_owned())
    }

    #[tokio::test]
    async fn connections_after_a_renewal_get_the_renewed_certificate() {
        let issue = || Certificate::issue("widget-webhook", &names("widget-webhook", "ops"));
        let (first, renewed) = (issue().expect("issued"), issue().expect("issued"));
        let (tls, served) = watch::channel(first.server_config().expect("usable"));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let addr = listener.local_addr().expect("its address");
        let routes = Router::new().route("/", axum::routing::get(|| async { "hello" }));
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(0)));
        tokio::spawn(async move {
            WEBHOOKS
                .serve(listener, routes, tls_handshake(served), &metrics)
                .await
        });
        let answer = get_trusting(addr, &first).await.expect("served");
        assert!(answer.ends_with("hello"), "{answer}");

        tls.send_replace(renewed.server_config().expect("usable"));
        let answer = get_trusting(addr, &renewed)
            .await
            .expect("served the renewed one");
        assert!(answer.ends_with("hello"), "{answer}");
        let stale = get_trusting(addr, &first).await;
        assert!(
            stale.is_err(),
            "the first CA signed nothing served now: {stale:?}"
        );
    }

    #[test]
    fn the_uid_is_read_from_a_body_that_is_not_a_whole_review() {
        let body = br#"{"request": {"uid": "u-1", "object": 7}, "kind": 8}"#;
        assert_eq!(request_uid(body).as_deref(), Some("u-1"));
        assert_eq!(request_uid(b"{not json"), None);
        assert_eq!(Outcome::Converted.name(), "converted");
    }
}
