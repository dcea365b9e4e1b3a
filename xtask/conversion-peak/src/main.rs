//! Peak memory of answering one ConversionReview of `<bytes>` bytes, backup-controller's
//! worst: Backups as small as they come, each converted down to `v1alpha1` with the hub kept
//! in its annotation. `cargo xtask bench conversion` builds this in release and runs it once
//! per way, in a process of its own, because the peak resident set (`VmHWM`) only grows.
//!
//! Usage: `conversion-peak <streamed|whole> <bytes>`. It prints one JSON line: the body's
//! size and objects, and the peak resident set in KiB once the body exists and after the
//! answer.
//!
//! - `streamed`: the webhook's own `conversion::review`, which reads the objects one at a
//!   time and writes each as it is converted (here, into nothing).
//! - `whole`: the review decoded whole, every object converted into a list, and the answer
//!   encoded whole, as the webhook did before it streamed.

use std::io::Write as _;

use backup_controller::conversion::Hub;
use conversion_peak::{conversion_review, peak_kib};
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use operator_gen_runtime::internals::{conversion_review as review, convert};

/// The review decoded whole, converted into a list, and the answer encoded whole.
fn whole(body: &[u8]) -> Result<usize, String> {
    let review: ConversionReview = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let mut request = ConversionRequest::try_from(review).map_err(|_| "no request".to_owned())?;
    let desired = request.desired_api_version.clone();
    let objects = std::mem::take(&mut request.objects);
    let converted = objects
        .into_iter()
        .map(|object| convert::<Hub>(object, &desired))
        .collect::<Result<Vec<_>, _>>()?;
    let answer = ConversionResponse::for_request(request)
        .success(converted)
        .into_review();
    let encoded = serde_json::to_vec(&answer).map_err(|e| e.to_string())?;
    Ok(encoded.len())
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: conversion-peak <streamed|whole> <bytes>";
    let way = args.next().ok_or(usage)?;
    let bytes: usize = args.next().and_then(|b| b.parse().ok()).ok_or(usage)?;
    let (body, objects) = conversion_review(bytes);
    let with_body = peak_kib()?;
    match way.as_str() {
        "streamed" => {
            let outcome = review::<Hub>(&body, &mut std::io::sink()).map_err(|e| e.to_string())?;
            if outcome != operator_gen_runtime::webhooks::Answer::Converted {
                return Err(format!("the review was answered {outcome:?}"));
            }
        }
        "whole" => {
            whole(&body)?;
        }
        _ => return Err(usage.to_owned()),
    }
    let peak = peak_kib()?;
    let line = serde_json::json!({
        "body_bytes": body.len(),
        "objects": objects,
        "peak_with_body_kib": with_body,
        "peak_kib": peak,
    });
    writeln!(std::io::stdout(), "{line}").map_err(|e| e.to_string())
}
