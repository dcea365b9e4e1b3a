//! Checks of a crate's versions against what [`super`] promises, for the tests that come with
//! a generated crate: an object with every field its schema declares goes through the hub and
//! back unchanged, an edit made in an older version wins without losing the hub's own fields,
//! and a recorded review is answered object by object.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResourceExt, Resource};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use super::{Hub, body, convert, decode, merge_diff, review};
use crate::webhook_server::Outcome;

/// The uid of [`recorded`] reviews.
pub const UID: &str = "f263987e-4d58-465a-9195-bf72a1c83623";

/// An object of `K` with every field its schema declares, built from the schema `K::crd()`
/// gives, so the round trips cover whatever the types hold now. `edited` picks other values.
/// Decoded and encoded once, so it is the object as the type writes it.
///
/// # Panics
/// When the sample does not decode as `K`: the types and their schema disagree.
pub fn full<K>(edited: bool) -> Value
where
    K: CustomResourceExt + Resource<DynamicType = ()> + Serialize + DeserializeOwned,
{
    let crd = K::crd();
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref());
    let schema = serde_json::to_value(schema).expect("a schema encodes");
    let mut object = sample(&schema, edited);
    object["apiVersion"] = K::api_version(&()).into();
    object["kind"] = K::kind(&()).into();
    object["metadata"] = json!({
        "name": "sample",
        "namespace": "default",
        "uid": "af7e84e4-573e-4b6e-bb66-0ea578c740da",
        "annotations": {"example.com/kept": "as it was"},
    });
    let typed: K = serde_json::from_value(object).expect("the sample decodes as its version");
    serde_json::to_value(typed).expect("the sample encodes")
}

/// A value for `schema`: every property of an object, one entry of an array or a map, the
/// first of an enum (the last when `edited`), and a string of the shape a format asks for.
pub fn sample(schema: &Value, edited: bool) -> Value {
    let pick = |first: &'static str, second: &'static str| if edited { second } else { first };
    if let Some(values) = schema["enum"]
        .as_array()
        .filter(|values| !values.is_empty())
    {
        let at = if edited { values.len() - 1 } else { 0 };
        return values[at].clone();
    }
    // A schema that is only a choice of others (kube's structural schemas rarely are).
    let untyped = schema.get("type").is_none() && schema.get("properties").is_none();
    let first = ["anyOf", "oneOf", "allOf"]
        .iter()
        .find_map(|choice| schema[*choice].as_array()?.first());
    if let (true, Some(first)) = (untyped, first) {
        return sample(first, edited);
    }
    if schema["x-kubernetes-int-or-string"] == true {
        return Value::from(if edited { 2 } else { 1 });
    }
    match schema["type"].as_str() {
        Some("object") => {
            let entry = &schema["additionalProperties"];
            match schema["properties"].as_object() {
                Some(properties) => properties
                    .iter()
                    .map(|(key, schema)| (key.clone(), sample(schema, edited)))
                    .collect(),
                None if entry.is_object() => json!({ "key": sample(entry, edited) }),
                None => json!({}),
            }
        }
        Some("array") => Value::Array(vec![sample(&schema["items"], edited)]),
        Some("integer") => Value::from(if edited { 2 } else { 1 }),
        Some("number") => Value::from(if edited { 2.5 } else { 1.5 }),
        Some("boolean") => Value::from(!edited),
        Some("string") => Value::from(match schema["format"].as_str() {
            Some("date-time") => pick("2024-01-01T00:00:00Z", "2025-02-02T00:00:00Z"),
            Some("date") => pick("2024-01-01", "2025-02-02"),
            Some("byte") => pick("c2FtcGxl", "ZWRpdGVk"),
            _ => pick("sample", "edited"),
        }),
        _ => json!({}),
    }
}

/// What converting `hub` down to `Older` and back loses: the part the annotation keeps.
fn lost<H, Older>(hub: &Value) -> Option<Value>
where
    H: Hub + From<Older>,
    Older: Clone + From<H>,
{
    let hub: H = decode(hub.clone()).expect("a hub");
    let back = H::from(Older::from(hub.clone()));
    merge_diff(
        &body(&back).expect("encodes"),
        &body(&hub).expect("encodes"),
    )
}

/// Checks that `hub` goes down to `Older` and back unchanged, and that when a client edits it
/// as `Older`, the edit shows when it is read again as `Older` while the hub's own fields stay.
///
/// # Panics
/// When either does not hold.
pub fn hub_trips_through<H, Older>(hub: &Value, edited: &Value)
where
    H: Hub + From<Older>,
    Older: Resource<DynamicType = ()> + Clone + From<H>,
{
    let (hub_version, version) = (H::api_version(&()), Older::api_version(&()));
    let older = convert::<H>(hub.clone(), &version).expect("converts down");
    assert_eq!(older["apiVersion"], version.as_ref());
    let back = convert::<H>(older.clone(), &hub_version).expect("converts up");
    assert_eq!(&back, hub, "{version} lost part of the hub");

    let mut changed = older;
    changed["spec"] = edited["spec"].clone();
    let stored = convert::<H>(changed.clone(), &hub_version).expect("converts up");
    let annotations = &stored["metadata"]["annotations"];
    assert!(
        annotations.get(H::KEPT_IN).is_none(),
        "the hub keeps no annotation"
    );
    let again = convert::<H>(stored.clone(), &version).expect("converts down");
    assert_eq!(
        again["spec"], changed["spec"],
        "an edit made as {version} was undone"
    );
    assert_eq!(
        lost::<H, Older>(&stored),
        lost::<H, Older>(hub),
        "an edit made as {version} lost the hub's own fields"
    );
}

/// Checks that `older`, an object of an older version, goes up to the hub and back unchanged.
///
/// # Panics
/// When it does not.
pub fn older_trips_through_the_hub<H: Hub>(older: &Value) {
    let version = older["apiVersion"].as_str().unwrap_or_default();
    let hub = convert::<H>(older.clone(), &H::api_version(&())).expect("converts up");
    let annotations = &hub["metadata"]["annotations"];
    assert!(
        annotations.get(H::KEPT_IN).is_none(),
        "the hub keeps no annotation"
    );
    let back = convert::<H>(hub, version).expect("converts down");
    assert_eq!(&back, older, "{version} changed on its way through the hub");
}

/// Checks every promise above for `Older`, one older version of hub `H`, on objects with every
/// field their schemas declare (`full`): the hub goes down to `Older` and back, edited there
/// or not (`hub_trips_through`), an object of `Older` goes up and back
/// (`older_trips_through_the_hub`), and a review asking for `Older` is answered
/// (`answers_recorded_review`).
///
/// # Panics
/// When any of them does not hold.
pub fn older_version_converts<H, Older>()
where
    H: Hub + CustomResourceExt + From<Older>,
    Older: CustomResourceExt + Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    Older: Clone + From<H>,
{
    hub_trips_through::<H, Older>(&full::<H>(false), &full::<Older>(true));
    older_trips_through_the_hub::<H>(&full::<Older>(false));
    answers_recorded_review::<H>(&full::<H>(false), &Older::api_version(&()));
}

/// Checks that `crd` serves `versions` versions, stores only `hub`, and converts between them
/// through its webhook.
///
/// # Panics
/// When it does not.
pub fn serves_every_version_storing(crd: &CustomResourceDefinition, hub: &str, versions: usize) {
    let stored: Vec<&str> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.storage)
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(stored, [hub], "only the hub is stored");
    assert_eq!(crd.spec.versions.len(), versions, "every version is served");
    let strategy = crd.spec.conversion.as_ref().map(|c| c.strategy.as_str());
    assert_eq!(strategy, Some("Webhook"), "a webhook converts them");
}

/// A ConversionReview as kube-apiserver sends it, recorded, asking for `desired`, with
/// `objects`.
pub fn recorded(desired: &str, objects: Vec<Value>) -> Vec<u8> {
    json!({
        "kind": "ConversionReview",
        "apiVersion": "apiextensions.k8s.io/v1",
        "request": {"uid": UID, "desiredAPIVersion": desired, "objects": objects},
        "response": {"uid": "", "convertedObjects": null, "result": {"metadata": {}}},
    })
    .to_string()
    .into_bytes()
}

/// The answer [`review`] writes for `body`, read back as kube reads one.
///
/// # Panics
/// When the answer is no ConversionReview.
pub fn answer<H: Hub>(body: &[u8]) -> (kube::core::conversion::ConversionReview, Outcome) {
    let mut out = Vec::new();
    let outcome = review::<H>(body, &mut out).expect("writing to memory does not fail");
    let answer = serde_json::from_slice(&out).expect("the answer is a ConversionReview");
    (answer, outcome)
}

/// Checks that a recorded review of `hub` and a copy of it, asking for `desired`, gets both
/// back in that version, in the order sent, for the review's uid.
///
/// # Panics
/// When it does not.
pub fn answers_recorded_review<H: Hub>(hub: &Value, desired: &str) {
    let mut second = hub.clone();
    second["metadata"]["name"] = "second".into();
    let (answer, outcome) = answer::<H>(&recorded(desired, vec![hub.clone(), second]));
    assert_eq!(outcome, Outcome::Converted);
    let response = answer.response.expect("a response");
    assert_eq!(response.uid, UID);
    let success = Some(kube::core::response::StatusSummary::Success);
    let message = &response.result.message;
    assert_eq!(response.result.status, success, "{message}");
    let names: Vec<&str> = response
        .converted_objects
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    let first = hub["metadata"]["name"].as_str().unwrap_or_default();
    assert_eq!(names, [first, "second"], "in the order sent");
    for object in &response.converted_objects {
        assert_eq!(object["apiVersion"], desired);
    }
}
