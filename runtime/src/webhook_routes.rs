//! The routes of an operator's webhooks, as its `operator.yaml` declares them: each admission
//! hook and the conversion at its own path, each under the body cap that fits it, every answer
//! counted. A generated crate names the paths and its hooks; [`crate::webhooks::serve`]
//! serves the routes over HTTPS.
//!
//! ```
//! # use std::sync::Arc;
//! # use k8s_openapi::api::core::v1::ConfigMap;
//! use operator_gen_runtime::{
//!     telemetry::{Metrics, ReadyWhen},
//!     webhooks::{
//!         Routes,
//!         admission::{Admission, Hook},
//!     },
//! };
//!
//! struct Hooks;
//!
//! impl Admission<ConfigMap> for Hooks {
//!     async fn validate(&self, _: &ConfigMap, _: Option<&ConfigMap>) -> Result<(), String> {
//!         Ok(())
//!     }
//!
//!     async fn mutate(&self, _: &mut ConfigMap) -> Result<(), String> {
//!         Ok(())
//!     }
//! }
//!
//! let metrics = Arc::new(Metrics::new(ReadyWhen::WebhooksServe { watches: 1 }));
//! let router = Routes::new(metrics)
//!     .admission::<ConfigMap, _>("/validate", Hook::Validate, Hooks)
//!     .into_router();
//! ```

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use axum::{
    Router,
    extract::{DefaultBodyLimit, Request, State},
    routing::post,
};
use kube::Resource;
use serde::{Serialize, de::DeserializeOwned};

#[cfg(test)]
use crate::admission::MAX_REVIEW_BYTES;
use crate::{
    admission::{self, Admission, Admissions, Hook, Hooked},
    conversion::{Conversions, Hub},
    metrics::Metrics,
    request_budget::{Turns, WORK_BYTES},
};

/// An operator's webhook routes, built one hook at a time.
pub struct Routes {
    metrics: Arc<Metrics>,
    /// The memory every hook's work shares (see [`crate::request_budget`]).
    turns: Turns,
    router: Router<Arc<Metrics>>,
    /// The admission hooks by path, made routes last: one path may admit several kinds.
    admission: BTreeMap<String, Hooked>,
}

impl Routes {
    /// No routes yet; every answer of those added is counted in `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            turns: Turns::new(WORK_BYTES, Arc::clone(&metrics)),
            metrics,
            router: Router::new(),
            admission: BTreeMap::new(),
        }
    }

    /// Answers `hook` of `admission` for objects of `K` at `path`, reading reviews of at most
    /// [`MAX_REVIEW_BYTES`](crate::admission::MAX_REVIEW_BYTES). Each answer it can give is a series from the start, at zero.
    ///
    /// Added again at the same path for another kind, the one webhook admits both: each review
    /// goes to the hooks of the kind it names (see `Hooked`).
    ///
    /// A kind added with both hooks has its mutations validated at the mutate route too, by
    /// the `admission` added for the mutation (see [`Admission::mutate`]).
    ///
    /// # Panics
    ///
    /// When `path` already serves the other hook: one webhook either validates or mutates.
    pub fn admission<K, A>(mut self, path: &str, hook: Hook, admission: A) -> Self
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
        A: Admission<K>,
    {
        let hooked = match self.admission.remove(path) {
            Some(hooked) => {
                assert_eq!(
                    hooked.hook(),
                    hook,
                    "{path} serves one hook, for every kind"
                );
                hooked.with::<K, A>(admission)
            }
            None => {
                admission::expect_answers(&self.metrics, hook);
                Hooked::new::<K, A>(hook, admission)
            }
        };
        self.admission.insert(path.to_owned(), hooked);
        self
    }

    /// Converts objects through hub `H` at `path`, reading reviews of at most `max_bytes`: the
    /// API server sends a whole list in one review, so the cap is the operator's flag, and the
    /// reviews are converted in turn (see `Conversions`).
    pub fn conversion<H: Hub + 'static>(self, path: &str, max_bytes: usize) -> Self {
        let conversions = Conversions::new(max_bytes, &self.metrics, self.turns.clone());
        let route = post(
            move |State(metrics): State<Arc<Metrics>>, request: Request| async move {
                conversions.answer::<H>(metrics, request).await
            },
        )
        // Conversions reads the body itself, up to its own cap.
        .layer(DefaultBodyLimit::disable());
        Self {
            router: self.router.route(path, route),
            ..self
        }
    }

    /// The routes, to serve.
    pub fn into_router(self) -> Router {
        // One budget and one set of turns for every admission path (see `Admissions`).
        let admissions = Admissions::new(self.turns.clone());
        let validated: BTreeSet<(String, String)> = self
            .admission
            .values()
            .filter(|hooked| hooked.hook() == Hook::Validate)
            .flat_map(Hooked::kinds)
            .map(|(group, kind)| (group.to_owned(), kind.to_owned()))
            .collect();
        let validates =
            |group: &str, kind: &str| validated.contains(&(group.to_owned(), kind.to_owned()));
        let router = self
            .admission
            .into_iter()
            .fold(self.router, |router, (path, hooked)| {
                let hooked = Arc::new(hooked.validating(validates));
                let admissions = admissions.clone();
                let route = post(
                    move |State(metrics): State<Arc<Metrics>>, request: Request| async move {
                        admissions.answer(&hooked, &metrics, request).await
                    },
                )
                // Admissions reads the body itself, up to its own cap.
                .layer(DefaultBodyLimit::disable());
                router.route(&path, route)
            });
        router.with_state(self.metrics)
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use serde_json::{Value, json};
    use tower::ServiceExt as _;

    use super::*;
    use crate::{
        metrics::ReadyWhen,
        testing::{admission_review, assert_converts_at},
    };

    /// Refuses every ConfigMap.
    struct Refuse;

    impl Admission<ConfigMap> for Refuse {
        async fn validate(&self, _: &ConfigMap, _: Option<&ConfigMap>) -> Result<(), String> {
            Err("refused".to_owned())
        }

        async fn mutate(&self, _: &mut ConfigMap) -> Result<(), String> {
            Ok(())
        }
    }

    /// Allows every Secret.
    struct Allow;

    impl Admission<Secret> for Allow {
        async fn validate(&self, _: &Secret, _: Option<&Secret>) -> Result<(), String> {
            Ok(())
        }

        async fn mutate(&self, _: &mut Secret) -> Result<(), String> {
            Ok(())
        }
    }

    fn secret() -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a", "namespace": "default"}})
    }

    /// ConfigMap as a hub with no older versions: a review of objects already in its version
    /// is converted by passing them through.
    impl Hub for ConfigMap {
        const KEPT_IN: &'static str = "example.com/kept";

        fn from_version(object: Value) -> Result<Self, String> {
            serde_json::from_value(object).map_err(|e| e.to_string())
        }

        fn into_version(self, desired: &str) -> Result<Value, String> {
            if desired == "v1" {
                serde_json::to_value(self).map_err(|e| e.to_string())
            } else {
                Err(format!("no version {desired}"))
            }
        }
    }

    fn metrics() -> Arc<Metrics> {
        Arc::new(Metrics::new(ReadyWhen::WebhooksServe { watches: 1 }))
    }

    async fn post(router: Router, path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
        let request = axum::http::Request::post(path)
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(body))
            .expect("a request");
        let response = router.oneshot(request).await.expect("an answer");
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body");
        (status, body.to_vec())
    }

    fn config_map() -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}})
    }

    #[tokio::test]
    async fn an_admission_hook_answers_at_its_path_and_is_counted() {
        let metrics = metrics();
        let router = Routes::new(Arc::clone(&metrics))
            .admission::<ConfigMap, _>("/validate", Hook::Validate, Refuse)
            .into_router();
        let review = admission_review::<ConfigMap>("CREATE", &config_map(), &Value::Null);
        let (status, answer) = post(router.clone(), "/validate", review.clone()).await;
        assert_eq!(status, StatusCode::OK);
        let answer: Value = serde_json::from_slice(&answer).expect("a review");
        assert_eq!(answer["response"]["allowed"], false);
        assert!(
            metrics
                .render()
                .contains("hook=\"validate\",outcome=\"denied\"} 1"),
            "{}",
            metrics.render()
        );
        let (status, _) = post(router, "/mutate", review).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "only the hooks added are served"
        );
    }

    #[tokio::test]
    async fn kinds_added_at_one_path_are_each_answered_there() {
        let router = Routes::new(metrics())
            .admission::<ConfigMap, _>("/validate", Hook::Validate, Refuse)
            .admission::<Secret, _>("/validate", Hook::Validate, Allow)
            .into_router();
        for (review, allowed) in [
            (
                admission_review::<ConfigMap>("CREATE", &config_map(), &Value::Null),
                false,
            ),
            (
                admission_review::<Secret>("CREATE", &secret(), &Value::Null),
                true,
            ),
        ] {
            let (status, answer) = post(router.clone(), "/validate", review).await;
            assert_eq!(status, StatusCode::OK);
            let answer: Value = serde_json::from_slice(&answer).expect("a review");
            assert_eq!(answer["response"]["allowed"], allowed, "{answer}");
        }
    }

    #[tokio::test]
    async fn a_kind_both_validated_and_mutated_is_refused_at_the_mutate_route() {
        let review = admission_review::<ConfigMap>("CREATE", &config_map(), &Value::Null);
        let both = Routes::new(metrics())
            .admission::<ConfigMap, _>("/validate", Hook::Validate, Refuse)
            .admission::<ConfigMap, _>("/mutate", Hook::Mutate, Refuse)
            .admission::<Secret, _>("/mutate", Hook::Mutate, Allow)
            .into_router();
        let mutated_only = Routes::new(metrics())
            .admission::<ConfigMap, _>("/mutate", Hook::Mutate, Refuse)
            .into_router();
        for (router, allowed) in [(both.clone(), false), (mutated_only, true)] {
            let (status, answer) = post(router, "/mutate", review.clone()).await;
            assert_eq!(status, StatusCode::OK);
            let answer: Value = serde_json::from_slice(&answer).expect("a review");
            assert_eq!(answer["response"]["allowed"], allowed, "{answer}");
        }
        let secret = admission_review::<Secret>("CREATE", &secret(), &Value::Null);
        let (_, answer) = post(both, "/mutate", secret).await;
        let answer: Value = serde_json::from_slice(&answer).expect("a review");
        assert_eq!(
            answer["response"]["allowed"], true,
            "a kind mutated but not validated is not validated: {answer}"
        );
    }

    #[test]
    #[should_panic(expected = "serves one hook")]
    fn one_path_cannot_both_validate_and_mutate() {
        let _ = Routes::new(metrics())
            .admission::<ConfigMap, _>("/hook", Hook::Validate, Refuse)
            .admission::<Secret, _>("/hook", Hook::Mutate, Allow);
    }

    #[tokio::test]
    async fn an_admission_review_over_the_cap_is_refused_unread() {
        let router = Routes::new(metrics())
            .admission::<ConfigMap, _>("/validate", Hook::Validate, Refuse)
            .into_router();
        let (status, _) = post(router, "/validate", vec![b' '; MAX_REVIEW_BYTES + 1]).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[tokio::test]
    async fn a_conversion_is_answered_at_its_path_and_one_over_its_cap_is_refused_unread() {
        assert_converts_at("/convert", "v1", |max_bytes| {
            Routes::new(metrics())
                .conversion::<ConfigMap>("/convert", max_bytes)
                .into_router()
        })
        .await;
    }

    /// Hostile clients against the routes served as the webhook server serves them (plain
    /// HTTP here: TLS changes nothing of what is measured), each beside a client that must
    /// still be answered.
    mod hostile {
        use std::{net::SocketAddr, time::Duration};

        use tokio::{
            io::{AsyncReadExt as _, AsyncWriteExt as _},
            net::TcpStream,
        };

        use super::*;
        use crate::connections::WEBHOOKS;

        /// The routes of a conversion and a validation, served with the webhooks' limits.
        async fn serve() -> SocketAddr {
            let metrics = metrics();
            let router = Routes::new(Arc::clone(&metrics))
                .admission::<ConfigMap, _>("/validate", Hook::Validate, Refuse)
                .conversion::<ConfigMap>("/convert", 64 * 1024 * 1024)
                .into_router();
            WEBHOOKS.serve_on_loopback(router, &metrics)
        }

        /// A ConversionReview of `count` ConfigMaps already in `v1`, which pass through.
        fn conversion_review(count: usize) -> Vec<u8> {
            let objects: Vec<Value> = (0..count)
                .map(|i| {
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("c{i}"), "namespace": "d"},
                        "data": {"k": "v".repeat(100)}})
                })
                .collect();
            serde_json::to_vec(&json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "request": {"uid": "u-1", "desiredAPIVersion": "v1", "objects": objects},
            }))
            .expect("a review")
        }

        /// Sends the head of a POST to `path` announcing `length` bytes, and `sent` of them.
        async fn stalled_post(
            addr: SocketAddr,
            path: &str,
            length: usize,
            sent: usize,
        ) -> TcpStream {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            let head = format!(
                "POST {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await.expect("a head");
            stream
                .write_all(&vec![b' '; sent])
                .await
                .expect("part of a body");
            stream
        }

        /// POSTs `body` to `path` and reads the whole answer; the status line and the body.
        async fn post_whole(addr: SocketAddr, path: &str, body: &[u8]) -> (String, Vec<u8>) {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            let head = format!(
                "POST {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).await.expect("a head");
            stream.write_all(body).await.expect("a body");
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await.expect("an answer");
            let status = String::from_utf8_lossy(&answer[..answer.len().min(12)]).into_owned();
            (status, answer)
        }

        /// What a client that must be answered gets, within a second.
        async fn answered(addr: SocketAddr, path: &str, body: &[u8]) -> (String, Vec<u8>) {
            tokio::time::timeout(Duration::from_secs(1), post_whole(addr, path, body))
                .await
                .expect("answered while the hostile clients hold on")
        }

        #[tokio::test]
        async fn conversions_and_admissions_answer_while_stalled_bodies_are_held_open() {
            let addr = serve().await;
            let mut stalled = Vec::new();
            for _ in 0..8 {
                stalled.push(stalled_post(addr, "/convert", 10_000, 10).await);
                stalled.push(stalled_post(addr, "/validate", 10_000, 10).await);
            }
            let (status, answer) = answered(addr, "/convert", &conversion_review(3)).await;
            assert_eq!(
                status,
                "HTTP/1.1 200",
                "{}",
                String::from_utf8_lossy(&answer)
            );
            assert!(String::from_utf8_lossy(&answer).contains("\"c2\""));
            let review = admission_review::<ConfigMap>("CREATE", &config_map(), &Value::Null);
            let (status, answer) = answered(addr, "/validate", &review).await;
            assert_eq!(status, "HTTP/1.1 200");
            assert!(String::from_utf8_lossy(&answer).contains("refused"));
        }

        #[tokio::test]
        async fn an_admission_answers_at_once_beside_chunked_posts_that_never_send_a_chunk() {
            let addr = serve().await;
            // With no length announced, each once reserved the cap (8 MiB, two in the
            // budget) for a second, in line before the review below: 16 held it 8 s.
            let mut silent = Vec::new();
            for _ in 0..16 {
                let mut stream = TcpStream::connect(addr).await.expect("connect");
                let head = "POST /validate HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                stream.write_all(head.as_bytes()).await.expect("a head");
                silent.push(stream);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            let review = admission_review::<ConfigMap>("CREATE", &config_map(), &Value::Null);
            let (status, answer) = answered(addr, "/validate", &review).await;
            assert_eq!(status, "HTTP/1.1 200");
            assert!(String::from_utf8_lossy(&answer).contains("refused"));
        }

        #[tokio::test]
        async fn a_request_head_longer_than_a_connection_buffers_is_refused() {
            let addr = serve().await;
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            // hyper checks its cap between reads, so a head just over it may pass whole.
            let filler = "a".repeat(2 * crate::connections::READ_BUFFER);
            let head =
                format!("POST /validate HTTP/1.1\r\nhost: test\r\nx-filler: {filler}\r\n\r\n");
            // The server may close while the head is still being written.
            let _ = stream.write_all(head.as_bytes()).await;
            let mut answer = Vec::new();
            let read =
                tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut answer));
            let _ = read.await.expect("closed at once");
            let answer = String::from_utf8_lossy(&answer);
            assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
        }

        #[tokio::test]
        async fn conversions_answer_after_clients_that_never_read_their_answers() {
            let addr = serve().await;
            // Answers far larger than the socket buffers and the answer's queue.
            let large = conversion_review(60_000);
            let mut unread = Vec::new();
            for _ in 0..crate::conversion::CONVERSIONS_AT_ONCE {
                let mut stream = TcpStream::connect(addr).await.expect("connect");
                let head = format!(
                    "POST /convert HTTP/1.1\r\nhost: test\r\ncontent-length: {}\r\n\r\n",
                    large.len()
                );
                stream.write_all(head.as_bytes()).await.expect("a head");
                stream.write_all(&large).await.expect("a body");
                unread.push(stream);
            }
            // Both turns are held by answers nobody reads, until the answers' deadline.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let waited = std::time::Instant::now();
            let (status, _) = tokio::time::timeout(
                crate::conversion::ANSWER_STALL * 3,
                post_whole(addr, "/convert", &conversion_review(3)),
            )
            .await
            .expect("answered once the unread answers were given up");
            assert_eq!(status, "HTTP/1.1 200");
            assert!(waited.elapsed() <= crate::conversion::ANSWER_STALL * 2);
        }
    }
}
