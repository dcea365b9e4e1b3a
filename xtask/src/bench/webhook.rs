//! `cargo xtask bench webhook`: what one admission request costs example-operator's webhook,
//! in process, against the least any webhook must do with the same request: decode the
//! AdmissionReview and encode an answer. The difference is the typed decode, the hooks, the
//! JSON patch and its check against the object sent.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use example_operator::{controller::Primary, webhook::Hooks};
use kube::core::{
    DynamicObject,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview},
};
use operator_gen_runtime::{internals::admission_review as review, webhooks::admission::Hook};
use serde_json::json;

use super::Row;

/// The AdmissionReview the API server sends for creating the shipped sample.
fn sample_review() -> Result<Vec<u8>> {
    let sample = example_operator::controller::sample("bench", Some("default"))
        .context("example-operator's sample")?;
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000001",
            "kind": {"group": "monitoring.coreos.com", "version": "v1", "kind": "PrometheusRule"},
            "resource": {"group": "monitoring.coreos.com", "version": "v1", "resource": "prometheusrules"},
            "name": "bench",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": sample,
            "oldObject": null,
        }
    });
    Ok(serde_json::to_vec(&review)?)
}

/// The floor: decode the review, allow it, encode the answer.
fn floor(body: &[u8]) -> Result<Vec<u8>> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)?;
    let request: AdmissionRequest<DynamicObject> = review
        .try_into()
        .map_err(|_| anyhow::anyhow!("no request"))?;
    Ok(serde_json::to_vec(
        &AdmissionResponse::from(&request).into_review(),
    )?)
}

/// Per-request time of `answer` over `iterations` requests.
pub(super) async fn per_request<F, Fut>(iterations: usize, mut answer: F) -> Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Vec<u8>>>,
{
    let started = Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(answer().await?);
    }
    Ok(started.elapsed() / iterations as u32)
}

pub(super) fn median<T: Copy + PartialOrd>(mut samples: Vec<T>) -> T {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    samples[samples.len() / 2]
}

/// Rounds of floor then webhook, paired so that a noisy moment weighs on both sides.
pub(super) const ROUNDS: usize = 7;

pub(super) async fn rows(iterations: usize) -> Result<Vec<Row>> {
    let body = sample_review()?;
    let mut rows = Vec::new();
    for (hook, name) in [(Hook::Validate, "validate"), (Hook::Mutate, "mutate")] {
        let (mut ours, mut floors, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let floor_time = per_request(iterations, || async { floor(&body) }).await?;
            let ours_time = per_request(iterations, || async {
                let (response, _) = review::<Primary, _>(hook, &Hooks, &body).await;
                Ok(serde_json::to_vec(&response.into_review())?)
            })
            .await?;
            ratios.push(ours_time.as_secs_f64() / floor_time.as_secs_f64());
            ours.push(ours_time);
            floors.push(floor_time);
        }
        rows.push(Row {
            figure: format!(
                "answer one `{name}` AdmissionReview of the sample, median of {ROUNDS} paired rounds of {iterations}"
            ),
            ours: format!("{:.1} µs", median(ours).as_secs_f64() * 1e6),
            floor: format!(
                "{:.1} µs (decode the review, encode an answer)",
                median(floors).as_secs_f64() * 1e6
            ),
            ratio: format!("{:.2}× (median of the rounds' ratios)", median(ratios)),
            command: "cargo xtask bench webhook".to_owned(),
        });
    }
    Ok(rows)
}
