//! `cargo xtask bench conversion`: what converting a page of objects costs backup-controller's
//! conversion webhook, in process, against the least any conversion webhook must do with the
//! same request: decode the ConversionReview, set each object's `apiVersion`, encode the
//! answer. The difference is decoding each object as its version, the `From` conversions
//! through the hub, and keeping (or restoring) what the older version cannot say.

use anyhow::{Context as _, Result};
use backup_controller::conversion::{convert, review};
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde_json::{Value, json};

use super::{
    Row,
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
                "status": {"observedGeneration": 1},
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
        .map(|hub| convert(hub.clone(), "example.com/v1alpha1"))
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
                let (answer, _) = review(&body);
                Ok(serde_json::to_vec(&answer)?)
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
