//! Peak memory of a webhook server answering `<at-once>` reviews of `<bytes>` bytes at the same
//! time, sent over loopback to the routes a generated crate serves, under the limits the
//! webhook server applies (`connections::WEBHOOKS`, and each route's budget and turns). TLS is
//! left out: it adds a fixed buffer per connection, not a multiple of the body.
//!
//! Usage: `webhook-server-peak <admission|mutate-minimal|validate-minimal|conversion> <bytes> <at-once>`.
//! - `admission`: example-operator's validating webhook, on an UPDATE of a PrometheusRule whose
//!   object and old object each hold half the body in small rules.
//! - `mutate-minimal` and `validate-minimal`: its mutating or validating webhook, on a CREATE
//!   of a PrometheusRule of minimal rules (`{"expr":"1"}`): the most objects per byte, typed
//!   decoding's worst case.
//! - `conversion`: backup-controller's conversion webhook, on a review of as many Backups as
//!   fit, each converted down with the hub kept in its annotation.
//!
//! It prints one JSON line: the body, how many were sent and answered, the peak resident set
//! once the body exists (one copy, shared by the senders) and after the answers, and the
//! resident set left once the answers are sent and the body dropped, in KiB.

use std::{io::Write as _, net::SocketAddr, sync::Arc};

use conversion_peak::{conversion_review, peak_kib, rss_kib};
use operator_gen_runtime::{
    internals::WEBHOOKS,
    settings::Conversion,
    telemetry::{Metrics, ReadyWhen},
};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A PrometheusRule of as many small rules as fit in `bytes` of JSON, written as text rather
/// than built as a JSON value, so that building it costs no more than the text; with
/// `minimal`, each rule is the least one (`{"expr":"1"}`), the most objects per byte.
fn rule(bytes: usize, minimal: bool) -> String {
    let mut rules = String::with_capacity(bytes);
    let mut index = 0;
    while rules.len() + 100 < bytes {
        if index > 0 {
            rules.push(',');
        }
        if minimal {
            rules.push_str(r#"{"expr":"1"}"#);
        } else {
            rules.push_str(&format!(
                r#"{{"alert":"Alert{index:07}","expr":"vector(1)","labels":{{"severity":"warning"}}}}"#
            ));
        }
        index += 1;
    }
    format!(
        r#"{{"apiVersion":"monitoring.coreos.com/v1","kind":"PrometheusRule","metadata":{{"name":"large","namespace":"default"}},"spec":{{"groups":[{{"name":"g","interval":"1m","rules":[{rules}]}}]}}}}"#
    )
}

fn admission_body(bytes: usize) -> Vec<u8> {
    let object = rule(bytes / 2, false);
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"0d1c2b3a-0000-4000-8000-000000000001","kind":{{"group":"monitoring.coreos.com","version":"v1","kind":"PrometheusRule"}},"resource":{{"group":"monitoring.coreos.com","version":"v1","resource":"prometheusrules"}},"name":"large","namespace":"default","operation":"UPDATE","userInfo":{{"username":"admin"}},"object":{object},"oldObject":{object}}}}}"#
    )
    .into_bytes()
}

/// A CREATE of a PrometheusRule of minimal rules filling `bytes`: one object, the shape of
/// the hardening round's 7.2 MiB review to `/mutate`.
fn minimal_create_body(bytes: usize) -> Vec<u8> {
    let object = rule(bytes, true);
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"0d1c2b3a-0000-4000-8000-000000000001","kind":{{"group":"monitoring.coreos.com","version":"v1","kind":"PrometheusRule"}},"resource":{{"group":"monitoring.coreos.com","version":"v1","resource":"prometheusrules"}},"name":"large","namespace":"default","operation":"CREATE","userInfo":{{"username":"admin"}},"object":{object}}}}}"#
    )
    .into_bytes()
}

/// POSTs `body` to `path` and reads the whole answer; its status line's code, or the error
/// that ended the exchange.
async fn post(addr: SocketAddr, path: &str, body: Arc<Vec<u8>>) -> String {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: peak\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        // A refusal may come before the body is sent whole: read it either way.
        let _ = stream.write_all(&body).await;
        let mut status = [0; 12];
        stream.read_exact(&mut status).await?;
        let mut rest = [0; 64 * 1024];
        while stream.read(&mut rest).await? > 0 {}
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&status[9..]).into_owned())
    };
    exchange.await.unwrap_or_else(|error| error.to_string())
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: webhook-server-peak <admission|mutate-minimal|validate-minimal|conversion> <bytes> <at-once>";
    let way = args.next().ok_or(usage)?;
    let bytes: usize = args.next().and_then(|b| b.parse().ok()).ok_or(usage)?;
    let at_once: usize = args.next().and_then(|b| b.parse().ok()).ok_or(usage)?;
    let metrics = Arc::new(Metrics::new(ReadyWhen::WebhooksServe { watches: 0 }));
    let (router, path, body) = match way.as_str() {
        "admission" => (
            example_operator::webhook::router(Arc::clone(&metrics)),
            "/validate",
            admission_body(bytes),
        ),
        "mutate-minimal" | "validate-minimal" => (
            example_operator::webhook::router(Arc::clone(&metrics)),
            if way == "mutate-minimal" {
                "/mutate"
            } else {
                "/validate"
            },
            minimal_create_body(bytes),
        ),
        "conversion" => {
            let settings = backup_controller::settings::Settings {
                conversion: Conversion {
                    max_bytes: bytes + 1024,
                },
                ..backup_controller::settings::Settings::defaults()
            };
            (
                backup_controller::webhook::router(Arc::clone(&metrics), &settings),
                backup_controller::conversion::PATH,
                conversion_review(bytes).0,
            )
        }
        _ => return Err(usage.to_owned()),
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let served = Arc::clone(&metrics);
    tokio::spawn(async move { WEBHOOKS.serve_plain(listener, router, &served).await });
    let body = Arc::new(body);
    let with_body = peak_kib()?;
    let sent: Vec<_> = (0..at_once)
        .map(|_| tokio::spawn(post(addr, path, Arc::clone(&body))))
        .collect();
    let mut answers = std::collections::BTreeMap::<String, usize>::new();
    for sent in sent {
        *answers
            .entry(sent.await.map_err(|e| e.to_string())?)
            .or_default() += 1;
    }
    let body_bytes = body.len();
    drop(body);
    // What the answers left resident once their tasks have ended.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let line = json!({
        "way": way,
        "body_bytes": body_bytes,
        "at_once": at_once,
        "answers": answers,
        "peak_with_body_kib": with_body,
        "peak_kib": peak_kib()?,
        "rss_after_kib": rss_kib()?,
    });
    writeln!(std::io::stdout(), "{line}").map_err(|e| e.to_string())
}
