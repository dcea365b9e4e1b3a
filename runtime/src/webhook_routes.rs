//! The routes of an operator's webhooks, as its `operator.yaml` declares them: each admission
//! hook and the conversion at its own path, each under the body cap that fits it, every answer
//! counted. A generated crate names the paths and its hooks; [`crate::webhook_server::serve`]
//! serves the routes over HTTPS.
//!
//! ```
//! # use std::sync::Arc;
//! # use k8s_openapi::api::core::v1::ConfigMap;
//! use operator_gen_runtime::{
//!     admission::{Admission, Hook},
//!     metrics::{Metrics, ReadyWhen},
//!     webhook_routes::Routes,
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

use std::{collections::BTreeMap, sync::Arc};

use axum::{
    Router,
    body::Bytes,
    extract::{DefaultBodyLimit, Request, State},
    routing::post,
};
use kube::Resource;
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    admission::{self, Admission, Hook, Hooked},
    conversion::{Conversions, Hub},
    metrics::Metrics,
};

/// The largest AdmissionReview read. The API server accepts requests of up to 3 MiB, and a
/// review of an update carries both the new and the old object.
pub const MAX_REVIEW_BYTES: usize = 8 * 1024 * 1024;

/// An operator's webhook routes, built one hook at a time.
pub struct Routes {
    metrics: Arc<Metrics>,
    router: Router<Arc<Metrics>>,
    /// The admission hooks by path, made routes last: one path may admit several kinds.
    admission: BTreeMap<String, Hooked>,
}

impl Routes {
    /// No routes yet; every answer of those added is counted in `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            metrics,
            router: Router::new(),
            admission: BTreeMap::new(),
        }
    }

    /// Answers `hook` of `admission` for objects of `K` at `path`, reading reviews of at most
    /// [`MAX_REVIEW_BYTES`]. Each answer it can give is a series from the start, at zero.
    ///
    /// Added again at the same path for another kind, the one webhook admits both: each review
    /// goes to the hooks of the kind it names (see [`Hooked`]).
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
    /// reviews are converted in turn (see [`Conversions`]).
    pub fn conversion<H: Hub + 'static>(self, path: &str, max_bytes: usize) -> Self {
        let conversions = Conversions::new(max_bytes, &self.metrics);
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
        let router = self
            .admission
            .into_iter()
            .fold(self.router, |router, (path, hooked)| {
                let hooked = Arc::new(hooked);
                let route = post(
                    move |State(metrics): State<Arc<Metrics>>, body: Bytes| async move {
                        hooked.answer(&metrics, &body).await
                    },
                )
                .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES));
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
}
