//! The webhooks' HTTPS server: it waits for a certificate, serves with it on every replica,
//! leader or not (the API server may call any of them through the Service), and reloads a
//! renewed certificate in place.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::Router;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};

use crate::{
    certificates::{Certificate, Certificates},
    connections::WEBHOOKS,
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
    let (mut current, tls) = first_certificate(&certificates).await;
    let acceptor = |capped: crate::connections::Capped| {
        RustlsAcceptor::new(tls.clone())
            .handshake_timeout(WEBHOOKS.headers)
            .acceptor(capped)
    };
    let server = match std::net::TcpListener::bind(addr)
        .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
        .and_then(|listener| WEBHOOKS.server(listener, acceptor, &metrics))
    {
        Ok(server) => server,
        Err(error) => {
            tracing::error!(%error, %addr, "cannot serve the webhooks; this replica stays unready");
            return;
        }
    };
    certificates.publish_ca(&[&current]).await;
    metrics.serving();
    metrics.certificate_expires(current.expires_at());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(REFRESH).await;
            current = refresh(&certificates, current, &tls).await;
            metrics.certificate_expires(current.expires_at());
        }
    });
    tracing::info!(%addr, "serving webhooks");
    if let Err(error) = server.serve(routes.into_make_service()).await {
        tracing::error!(%error, "the webhooks are down");
    }
}

/// The first usable certificate, asked for every [`RETRY`] until there is one.
async fn first_certificate(certificates: &Certificates) -> (Certificate, RustlsConfig) {
    loop {
        match certificates.current().await {
            Ok(certificate) => match certificate.server_config() {
                Ok(config) => return (certificate, RustlsConfig::from_config(config)),
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
    tls: &RustlsConfig,
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
            tls.reload_from_config(config);
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
    use super::*;

    #[test]
    fn the_uid_is_read_from_a_body_that_is_not_a_whole_review() {
        let body = br#"{"request": {"uid": "u-1", "object": 7}, "kind": 8}"#;
        assert_eq!(request_uid(body).as_deref(), Some("u-1"));
        assert_eq!(request_uid(b"{not json"), None);
        assert_eq!(Outcome::Converted.name(), "converted");
    }
}
