//! The resident memory a replica keeps after large admission reviews: the memory their work
//! freed goes back to the system (`allocator`), not only to the allocator's arenas, so a burst
//! of large reviews does not leave a replica nearer its limit for the next one.
//!
//! Alone in its process, since the resident set is the whole process's.

#![cfg(all(feature = "webhooks", target_os = "linux", target_env = "gnu"))]

use std::{collections::BTreeMap, net::SocketAddr, sync::Arc};

use k8s_openapi::api::core::v1::ConfigMap;
use operator_gen_runtime::{
    internals::WEBHOOKS,
    telemetry::{Metrics, ReadyWhen},
    webhooks::{
        Routes,
        admission::{Admission, Hook},
    },
};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Reviews answered at once, as a burst of large creates would send them.
const AT_ONCE: usize = 8;

/// Each review's ConfigMap holds this many small entries, 1.8 MB of JSON: many small
/// allocations per byte, as small rules are for a PrometheusRule.
const ENTRIES: usize = 120_000;

/// How far above its resident set before the reviews a replica may stay once they are
/// answered. Without handing freed memory back it stayed 130 MiB above (a debug build); with
/// it, within 1 MiB.
const KEPT_MIB: u64 = 32;

/// Labels every ConfigMap and admits it.
struct Labels;

impl Admission<ConfigMap> for Labels {
    async fn validate(&self, _: &ConfigMap, _: Option<&ConfigMap>) -> Result<(), String> {
        Ok(())
    }

    async fn mutate(&self, object: &mut ConfigMap) -> Result<(), String> {
        let labels = object.metadata.labels.get_or_insert_default();
        labels.insert("checked".to_owned(), "yes".to_owned());
        Ok(())
    }
}

/// The resident set of this process, in KiB.
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

/// A CREATE of a ConfigMap of `entries` small entries, as the API server sends it.
fn review(entries: usize) -> Vec<u8> {
    let data: BTreeMap<String, String> = (0..entries)
        .map(|i| (format!("k{i:07}"), "v".to_owned()))
        .collect();
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0d1c2b3a-0000-4000-8000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "large",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "large", "namespace": "default"},
                "data": data,
            },
        }
    })
    .to_string()
    .into_bytes()
}

/// POSTs `body` to `/mutate` and reads the whole answer: its status line and body.
async fn post(addr: SocketAddr, body: Arc<Vec<u8>>) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /mutate HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("the head");
    stream.write_all(&body).await.expect("the body");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("the answer");
    String::from_utf8_lossy(&answer).into_owned()
}

/// Whether `answer` allowed the review with a patch: the hook ran on the decoded object.
fn patched(answer: &str) -> bool {
    answer.starts_with("HTTP/1.1 200")
        && answer.contains(r#""allowed":true"#)
        && answer.contains("patch")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_reviews_answered_at_once_leave_the_resident_set_near_where_it_was() {
    let metrics = Arc::new(Metrics::new(ReadyWhen::WebhooksServe { watches: 0 }));
    let routes = Routes::new(Arc::clone(&metrics))
        .admission::<ConfigMap, _>("/mutate", Hook::Mutate, Labels)
        .into_router();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    let served = Arc::clone(&metrics);
    tokio::spawn(async move { WEBHOOKS.serve_plain(listener, routes, &served).await });
    // One small review first, so that what the server holds for good is in the baseline, and
    // the body built before it, with what building it freed handed back.
    let small = post(addr, Arc::new(review(10))).await;
    assert!(patched(&small), "{small}");
    let body = Arc::new(review(ENTRIES));
    // SAFETY: `malloc_trim` takes no pointers and frees nothing in use.
    unsafe { libc::malloc_trim(0) };
    let before = resident_kib();

    let sent: Vec<_> = (0..AT_ONCE)
        .map(|_| tokio::spawn(post(addr, Arc::clone(&body))))
        .collect();
    for sent in sent {
        let answer = sent.await.expect("the sender");
        assert!(patched(&answer), "every review answered: {answer:.300}");
    }
    // The runtime hands memory back on a blocking thread, after the answers.
    let mut after = resident_kib();
    for _ in 0..40 {
        if after.saturating_sub(before) / 1024 <= KEPT_MIB {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        after = resident_kib();
    }

    let kept_mib = after.saturating_sub(before) / 1024;
    assert!(
        kept_mib <= KEPT_MIB,
        "{AT_ONCE} reviews of {} bytes left the resident set {kept_mib} MiB above the {} MiB \
         it was before, 2 s after the answers (at most {KEPT_MIB})",
        body.len(),
        before / 1024
    );
}
