//! `cargo xtask bench conversion`: what converting a page of objects costs backup-controller's
//! conversion webhook, in process, against the least any conversion webhook must do with the
//! same request: decode the ConversionReview, set each object's `apiVersion`, encode the
//! answer. The difference is decoding each object as its version, the `From` conversions
//! through the hub, and keeping (or restoring) what the older version cannot say.

use anyhow::{Context as _, Result};
use backup_controller::conversion::Hub;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use operator_gen_runtime::internals::{conversion_review as review, convert};
use serde_json::{Value, json};

use super::{
    Row,
    peak_tools::{MEMORY_LIMIT_MIB, build_peak_tools, tool_report},
    webhook::{ROUNDS, median, per_request},
};

/// Objects in one review, as in a page of a list.
const OBJECTS: usize = 100;

/// A ConversionReview of `objects`, asking for `desired`.
fn review_of(desired: &str, objects: Vec<Value>) -> Result<Vec<u8>> {
    Ok(serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000001",
            "desiredAPIVersion": desired,
            "objects": objects,
        }
    }))?)
}

/// `OBJECTS` hubs, each with a field the older version lacks, so that converting down keeps
/// it in the annotation.
fn hubs() -> Vec<Value> {
    (0..OBJECTS)
        .map(|i| {
            json!({
                "apiVersion": "example.com/v1",
                "kind": "Backup",
                "metadata": {"name": format!("backup-{i}"), "namespace": "default", "uid": format!("uid-{i}")},
                "spec": {"message": "back up nightly", "note": "only the hub has this"},
                "status": {"conditions": [{
                    "type": "Ready", "status": "True", "reason": "Reconciled",
                    "message": "the last reconcile succeeded", "observedGeneration": 1,
                    "lastTransitionTime": "2026-11-29T00:00:00Z",
                }]},
            })
        })
        .collect()
}

/// The floor: decode the review, relabel every object, encode the answer.
fn floor(body: &[u8]) -> Result<Vec<u8>> {
    let review: ConversionReview = serde_json::from_slice(body)?;
    let mut request =
        ConversionRequest::try_from(review).map_err(|_| anyhow::anyhow!("no request"))?;
    let desired = request.desired_api_version.clone();
    let mut objects = std::mem::take(&mut request.objects);
    for object in &mut objects {
        object["apiVersion"] = json!(desired);
    }
    let response = ConversionResponse::for_request(request).success(objects);
    Ok(serde_json::to_vec(&response.into_review())?)
}

pub(super) async fn rows(rounds_of: usize) -> Result<Vec<Row>> {
    let hubs = hubs();
    let older: Vec<Value> = hubs
        .iter()
        .map(|hub| convert::<Hub>(hub.clone(), "example.com/v1alpha1"))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!(e))
        .context("converting the hubs down once")?;
    let cases = [
        ("down to v1alpha1", review_of("example.com/v1alpha1", hubs)?),
        ("up to v1", review_of("example.com/v1", older)?),
    ];
    let mut rows = Vec::new();
    for (name, body) in cases {
        let (mut ours, mut floors, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let floor_time = per_request(rounds_of, || async { floor(&body) }).await?;
            let ours_time = per_request(rounds_of, || async {
                let mut answer = Vec::new();
                review::<Hub>(&body, &mut answer)?;
                Ok(answer)
            })
            .await?;
            ratios.push(ours_time.as_secs_f64() / floor_time.as_secs_f64());
            ours.push(ours_time);
            floors.push(floor_time);
        }
        rows.push(Row {
            figure: format!(
                "convert a ConversionReview of {OBJECTS} Backups {name} (backup-controller), median of {ROUNDS} paired rounds of {rounds_of}"
            ),
            ours: format!("{:.0} µs", median(ours).as_secs_f64() * 1e6),
            floor: format!(
                "{:.0} µs (decode the review, relabel each object, encode the answer)",
                median(floors).as_secs_f64() * 1e6
            ),
            ratio: format!("{:.2}× (median of the rounds' ratios)", median(ratios)),
            command: "cargo xtask bench conversion".to_owned(),
        });
    }
    Ok(rows)
}

/// One run of `conversion-peak` (`xtask/conversion-peak`), as it reports itself.
#[derive(serde::Deserialize)]
struct Peak {
    body_bytes: u64,
    objects: u64,
    peak_with_body_kib: u64,
    peak_kib: u64,
}

/// Runs the release build of `conversion-peak` one `way` over a review of `bytes`.
fn peak(workspace: &std::path::Path, way: &str, bytes: usize) -> Result<Peak> {
    tool_report(workspace, "conversion-peak", &[way, &bytes.to_string()])
}

/// The peak memory of backup-controller's conversion webhook answering the largest review it
/// accepts by default, of the smallest objects, in a release build: streamed, as it is, and
/// decoded whole, as it was. The webhook converts two reviews at once at most.
pub(super) fn memory_rows(workspace: &std::path::Path) -> Result<Vec<Row>> {
    build_peak_tools(workspace)?;
    let bytes = backup_controller::settings::Settings::defaults()
        .conversion
        .max_bytes;
    let streamed = peak(workspace, "streamed", bytes)?;
    let whole = peak(workspace, "whole", bytes)?;
    let mib = |kib: u64| kib as f64 / 1024.0;
    Ok(vec![Row {
        figure: format!(
            "peak RSS answering the largest ConversionReview accepted ({:.0} MiB of {} Backups, each converted down), release build",
            streamed.body_bytes as f64 / (1024.0 * 1024.0),
            streamed.objects
        ),
        ours: format!(
            "{:.0} MiB streamed ({:.0} MiB with the body alone); two at once: about {:.0} MiB",
            mib(streamed.peak_kib),
            mib(streamed.peak_with_body_kib),
            2.0 * mib(streamed.peak_kib)
        ),
        floor: format!(
            "the Deployment's {MEMORY_LIMIT_MIB:.0} MiB limit; decoded whole, as before: {:.0} MiB",
            mib(whole.peak_kib)
        ),
        ratio: format!(
            "{:.2}× of the limit ({:.1}× the body; whole: {:.1}×)",
            mib(streamed.peak_kib) / MEMORY_LIMIT_MIB,
            mib(streamed.peak_kib) / (streamed.body_bytes as f64 / 1024.0 / 1024.0),
            mib(whole.peak_kib) / (whole.body_bytes as f64 / 1024.0 / 1024.0)
        ),
        command: "cargo xtask bench conversion".to_owned(),
    }])
}
