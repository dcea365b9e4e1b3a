//! The conversion webhook of a custom resource served in several versions: the API server
//! stores every object as the hub (the storage version) and posts a ConversionReview whenever
//! a client reads or writes another version. Each object goes to the hub and from there to the
//! version asked for, through the `From` conversions of the operator's types.
//!
//! A generated crate names its versions by implementing [`Hub`] on the storage version, with
//! [`up`] and [`down`] for each older one; everything else is here, the same for every
//! resource:
//! - [`review`] answers a review an object at a time, so that nothing holds more than one
//!   object beyond the request's body: the API server sends a whole list, unpaginated;
//! - [`up`] and [`down`] lose nothing on a trip through an older version. When converting the
//!   hub down loses part of it, the hub's body is kept in the annotation [`Hub::KEPT_IN`], and
//!   converting up lays over it what the client changed since, as the older version saw it.
//!   So a field only the hub has survives a client that reads, edits and writes the older
//!   version, and the client's edits of the fields it has win. The annotation counts toward
//!   the object's 256 KiB of annotations;
//! - [`Conversions`] serves reviews in turn, off the async workers, streaming each answer;
//! - [`serve`] points a CRD's conversion at the webhook;
//! - `round_trips` (feature `test-util`) checks a crate's versions against these promises.

use std::io::Write;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};
use kube::Resource;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::webhook_server::Outcome;

#[cfg(any(test, feature = "test-util"))]
pub mod round_trips;
mod serving;
mod stream;

#[cfg(test)]
pub(crate) use serving::ANSWER_STALL;
#[cfg(test)]
pub(crate) use serving::CONVERSIONS_AT_ONCE;
pub use serving::Conversions;

/// The storage version of a custom resource, which every other version converts to and from.
pub trait Hub: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone {
    /// The annotation of an older version's object that keeps what that version cannot say.
    const KEPT_IN: &'static str;

    /// An object of any served version as the hub: decoded for the hub's own version, [`up`]
    /// for each older one, and an error naming any other.
    ///
    /// # Errors
    /// An object of a version not served, or one its version's type cannot decode.
    fn from_version(object: Value) -> Result<Self, String>;

    /// The hub as version `desired`: encoded for the hub's own version, [`down`] for each
    /// older one, and an error naming any other.
    ///
    /// # Errors
    /// A version not served.
    fn into_version(self, desired: &str) -> Result<Value, String>;
}

/// Answers the ConversionReview in `body` into `out`: every object in the version asked for,
/// in the order sent, or a failure naming the first object that could not be converted.
///
/// The review is read twice, once to check it and find the version asked for, once to convert
/// its objects one at a time, each written to `out` as soon as it is converted.
/// `convertedObjects` comes before `result` in the answer, so a failure found part-way is
/// still answered as one (the API server reads `result` first).
///
/// # Errors
/// Only those of `out`, such as the API server going away mid-answer.
pub fn review<H: Hub>(body: &[u8], out: &mut impl Write) -> std::io::Result<Outcome> {
    let request = match serde_json::from_slice::<stream::Head>(body) {
        Ok(stream::Head {
            request: Some(request),
        }) => request,
        Ok(stream::Head { request: None }) => {
            let reason = "not a ConversionReview: the review holds no request";
            return stream::refuse(out, body, reason);
        }
        Err(error) => {
            let reason = format!("not a ConversionReview: {error}");
            return stream::refuse(out, body, &reason);
        }
    };
    let mut answer = stream::Answer::start(out, &request.uid)?;
    let desired = request.desired_api_version;
    let walked = stream::each_object(body, |object| answer.push(convert::<H>(object, &desired)));
    if let Err(error) = walked {
        answer.fail(format!(
            "the review changed between two reads of it: {error}"
        ));
    }
    answer.finish()
}

/// `object` in version `desired` (`group/version`), through the hub `H`.
///
/// # Errors
/// One that names the object and the version it could not be converted from or to.
pub fn convert<H: Hub>(object: Value, desired: &str) -> Result<Value, String> {
    let from = object["apiVersion"].as_str().unwrap_or_default().to_owned();
    if from == desired {
        return Ok(object);
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let hub = H::from_version(object).map_err(|e| format!("{name:?} as {from}: {e}"))?;
    hub.into_version(desired)
        .map_err(|e| format!("{name:?} as {desired}: {e}"))
}

/// An older version's object as the hub: its `From` conversion, or, when the annotation kept
/// the hub it was made from, that hub with the client's changes laid over it. The changes are
/// what differs between the object now and the kept hub as the older version saw it, so an
/// edit of a field both versions have wins, and a field only the hub has stays.
///
/// # Errors
/// An object `Older` cannot decode, or an annotation that holds no object.
pub fn up<H, Older>(object: Value) -> Result<H, String>
where
    H: Hub + From<Older>,
    Older: Resource + Serialize + DeserializeOwned + Clone + From<H>,
{
    let mut older: Older = decode(object)?;
    let kept = take_kept(older.meta_mut(), H::KEPT_IN);
    let now = H::from(older);
    let Some(kept) = kept else {
        return Ok(now);
    };
    let kept: Value = serde_json::from_str(&kept)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| {
            format!(
                "annotation {} does not hold the object this webhook wrote",
                H::KEPT_IN
            )
        })?;
    let now = encode(&now)?;
    let was: H = decode(with_body(now.clone(), kept.clone()))?;
    let seen = H::from(Older::from(was));
    let mut merged = kept;
    if let Some(changes) = merge_diff(&body(&seen)?, &with_body(Value::Null, now.clone())) {
        json_patch::merge(&mut merged, &changes);
    }
    decode(with_body(now, merged))
}

/// The hub as an older version: its `From` conversion and, when converting back would not
/// give the hub again, the hub's body kept in the annotation.
///
/// # Errors
/// A hub or an older object that does not encode.
pub fn down<H, Older>(mut hub: H) -> Result<Value, String>
where
    H: Hub + From<Older>,
    Older: Resource + Serialize + Clone + From<H>,
{
    // The annotation is this webhook's own: one that came with the hub is stale.
    take_kept(hub.meta_mut(), H::KEPT_IN);
    let mut older = Older::from(hub.clone());
    let hub_body = body(&hub)?;
    if merge_diff(&body(&H::from(older.clone()))?, &hub_body).is_some() {
        older
            .meta_mut()
            .annotations
            .get_or_insert_default()
            .insert(H::KEPT_IN.to_owned(), hub_body.to_string());
    }
    encode(&older)
}

/// The hub's own version's object, decoded: for [`Hub::from_version`].
///
/// # Errors
/// One the hub's type cannot decode.
pub fn decode<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// The hub, encoded as its own version: for [`Hub::into_version`].
///
/// # Errors
/// One that does not encode.
pub fn encode(value: &impl Serialize) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|e| e.to_string())
}

/// The error [`Hub::from_version`] and [`Hub::into_version`] give for a version `crd` does not serve.
pub fn not_served(version: Option<&str>, crd: &str) -> String {
    format!("{version:?} is not a version of {crd}")
}

/// Where a CRD's conversion webhook is served: behind a Service, at a path.
#[derive(Debug, Clone, Copy)]
pub struct Webhook<'a> {
    /// The Service in front of the webhooks.
    pub service: &'a str,
    /// The Service's namespace.
    pub namespace: &'a str,
    /// The path the API server posts ConversionReviews to.
    pub path: &'a str,
    /// cert-manager's Certificate for the webhooks, when cert-manager's CA injector writes
    /// the `caBundle`; without it the operator does.
    pub certificate: Option<&'a str>,
}

/// Points `crd`'s conversion at `webhook`, on port 443 of its Service.
pub fn serve(crd: &mut CustomResourceDefinition, webhook: &Webhook<'_>) {
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            conversion_review_versions: vec!["v1".to_owned()],
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    name: webhook.service.to_owned(),
                    namespace: webhook.namespace.to_owned(),
                    path: Some(webhook.path.to_owned()),
                    port: Some(443),
                }),
                ..WebhookClientConfig::default()
            }),
        }),
    });
    if let Some(certificate) = webhook.certificate {
        let from = format!("{}/{certificate}", webhook.namespace);
        crd.metadata
            .annotations
            .get_or_insert_default()
            .insert("cert-manager.io/inject-ca-from".to_owned(), from);
    }
}

/// Points `crd`'s conversion webhook, as [`serve`] set it, at `base` followed by its path
/// (`https://127.0.0.1:8443` and `/convert`) instead of at its Service: for an operator run
/// outside the cluster, which the API server reaches at `base`. The operator writes its CA into
/// the `caBundle` there as it does behind the Service, and its certificate names `localhost`
/// and `127.0.0.1`.
///
/// # Errors
/// A `base` that is not `https://<host>[:<port>]`, or a CRD [`serve`] did not point at a
/// webhook.
pub fn serve_at(crd: &mut CustomResourceDefinition, base: &str) -> Result<(), String> {
    let base = webhook_base(base)?;
    let config = crd
        .spec
        .conversion
        .as_mut()
        .and_then(|conversion| conversion.webhook.as_mut())
        .and_then(|webhook| webhook.client_config.as_mut())
        .ok_or("the CRD converts through no webhook")?;
    let path = config
        .service
        .take()
        .and_then(|service| service.path)
        .unwrap_or_default();
    config.url = Some(format!("{base}{path}"));
    Ok(())
}

/// `base` as a webhook's URL begins: `https://`, a host and perhaps a port, with no path,
/// query or credentials, which the API server refuses in a webhook's URL.
fn webhook_base(base: &str) -> Result<&str, String> {
    let refused = || {
        format!(
            "{base:?} is not a webhook base URL: give https://<host>[:<port>], such as https://127.0.0.1:8443"
        )
    };
    // `http::Uri` drops a fragment, which would end up before the path.
    if base.contains('#') {
        return Err(refused());
    }
    let uri: http::Uri = base.parse().map_err(|_| refused())?;
    let bare = uri
        .path_and_query()
        .is_none_or(|p| p.as_str() == "/" || p.as_str().is_empty());
    let plain_host = uri.authority().is_some_and(|a| !a.as_str().contains('@'));
    if uri.scheme_str() != Some("https") || !plain_host || !bare {
        return Err(refused());
    }
    Ok(base.trim_end_matches('/'))
}

/// Removes and returns the kept fields, leaving no empty annotations behind.
fn take_kept(meta: &mut kube::api::ObjectMeta, annotation: &str) -> Option<String> {
    let annotations = meta.annotations.as_mut()?;
    let kept = annotations.remove(annotation);
    if annotations.is_empty() {
        meta.annotations = None;
    }
    kept
}

/// The keys of an object that are not its body: conversions never take them from the
/// annotation.
const HEAD: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// An object without `apiVersion`, `kind` and `metadata`: what conversions change.
fn body(object: &impl Serialize) -> Result<Value, String> {
    Ok(with_body(Value::Null, encode(object)?))
}

/// `object`'s `apiVersion`, `kind` and `metadata` (none when it is not an object) with the
/// body of `body`.
fn with_body(object: Value, body: Value) -> Value {
    let mut fields: serde_json::Map<String, Value> = match body {
        Value::Object(fields) => fields,
        _ => serde_json::Map::new(),
    };
    fields.retain(|key, _| !HEAD.contains(&key.as_str()));
    if let Value::Object(head) = object {
        fields.extend(
            head.into_iter()
                .filter(|(key, _)| HEAD.contains(&key.as_str())),
        );
    }
    Value::Object(fields)
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`, or `None` when they are equal.
/// Objects are compared key by key; anything else is replaced whole.
fn merge_diff(from: &Value, to: &Value) -> Option<Value> {
    if from == to {
        return None;
    }
    let (Value::Object(from), Value::Object(to)) = (from, to) else {
        return Some(to.clone());
    };
    let mut patch = serde_json::Map::new();
    for (key, value) in to {
        let changed = match from.get(key) {
            Some(old) => merge_diff(old, value),
            None => Some(value.clone()),
        };
        if let Some(changed) = changed {
            patch.insert(key.clone(), changed);
        }
    }
    for key in from.keys().filter(|key| !to.contains_key(*key)) {
        patch.insert(key.clone(), Value::Null);
    }
    Some(Value::Object(patch))
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use kube::api::ObjectMeta;
    use serde::Deserialize;
    use serde_json::json;

    use super::round_trips::{UID, answer, answers_recorded_review, recorded};
    use super::*;

    const KEPT_IN: &str = "widgets.example.com/hub-fields";

    /// A version of the `Widget` kind: its spec says what the version can say.
    pub(super) trait Version: Clone + Serialize + DeserializeOwned {
        const VERSION: &'static str;
    }

    #[derive(Debug, Clone, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct Widget<S> {
        api_version: String,
        kind: String,
        metadata: ObjectMeta,
        spec: S,
    }

    /// The hub: a size and a colour.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub(super) struct V2 {
        size: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        color: Option<String>,
    }

    /// The older version: a size only.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    struct V1 {
        size: i64,
    }

    impl Version for V2 {
        const VERSION: &'static str = "v2";
    }

    impl Version for V1 {
        const VERSION: &'static str = "v1";
    }

    impl<S: Version> Widget<S> {
        fn new(metadata: ObjectMeta, spec: S) -> Self {
            Self {
                api_version: format!("example.com/{}", S::VERSION),
                kind: "Widget".to_owned(),
                metadata,
                spec,
            }
        }
    }

    impl<S: Version> Resource for Widget<S> {
        type DynamicType = ();
        type Scope = k8s_openapi::NamespaceResourceScope;

        fn kind(_: &()) -> Cow<'_, str> {
            "Widget".into()
        }
        fn group(_: &()) -> Cow<'_, str> {
            "example.com".into()
        }
        fn version(_: &()) -> Cow<'_, str> {
            S::VERSION.into()
        }
        fn plural(_: &()) -> Cow<'_, str> {
            "widgets".into()
        }
        fn meta(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn meta_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    }

    impl From<Widget<V1>> for Widget<V2> {
        fn from(older: Widget<V1>) -> Self {
            let spec = V2 {
                size: older.spec.size,
                color: None,
            };
            Self::new(older.metadata, spec)
        }
    }

    impl From<Widget<V2>> for Widget<V1> {
        fn from(hub: Widget<V2>) -> Self {
            Self::new(
                hub.metadata,
                V1 {
                    size: hub.spec.size,
                },
            )
        }
    }

    impl Hub for Widget<V2> {
        const KEPT_IN: &'static str = KEPT_IN;

        fn from_version(object: Value) -> Result<Self, String> {
            match object["apiVersion"].as_str() {
                Some("example.com/v2") => decode(object),
                Some("example.com/v1") => up::<Self, Widget<V1>>(object),
                other => Err(not_served(other, "widgets.example.com")),
            }
        }

        fn into_version(self, desired: &str) -> Result<Value, String> {
            match desired {
                "example.com/v2" => encode(&self),
                "example.com/v1" => down::<Self, Widget<V1>>(self),
                other => Err(not_served(Some(other), "widgets.example.com")),
            }
        }
    }

    /// The hub of the test's `Widget`: a size and a colour, over an older version with a size.
    pub(super) type Hub2 = Widget<V2>;

    fn hub(color: Option<&str>) -> Value {
        let metadata = ObjectMeta {
            name: Some("sample".to_owned()),
            namespace: Some("default".to_owned()),
            annotations: Some([("example.com/kept".to_owned(), "as it was".to_owned())].into()),
            ..ObjectMeta::default()
        };
        let spec = V2 {
            size: 3,
            color: color.map(str::to_owned),
        };
        encode(&Widget::new(metadata, spec)).expect("encodes")
    }

    #[test]
    fn what_the_older_version_cannot_say_is_kept_going_down_and_restored_going_up() {
        let hub = hub(Some("red"));
        let older = convert::<Hub2>(hub.clone(), "example.com/v1").expect("converts down");
        assert_eq!(older["spec"], json!({"size": 3}));
        let kept = older["metadata"]["annotations"][KEPT_IN].as_str();
        let kept: Value = serde_json::from_str(kept.expect("kept")).expect("JSON");
        assert_eq!(kept["spec"]["color"], "red");
        let back = convert::<Hub2>(older, "example.com/v2").expect("converts up");
        assert_eq!(back, hub, "nothing lost, and the annotation gone");
    }

    #[test]
    fn an_edit_made_in_the_older_version_wins_and_the_hubs_own_fields_stay() {
        let hub = hub(Some("red"));
        let mut older = convert::<Hub2>(hub.clone(), "example.com/v1").expect("converts down");
        older["spec"]["size"] = 5.into();
        let stored = convert::<Hub2>(older, "example.com/v2").expect("converts up");
        assert_eq!(stored["spec"], json!({"size": 5, "color": "red"}));
        assert!(stored["metadata"]["annotations"].get(KEPT_IN).is_none());
        let edited = json!({"spec": {"size": 7}});
        round_trips::hub_trips_through::<Hub2, Widget<V1>>(&hub, &edited);
    }

    #[test]
    fn a_hub_the_older_version_can_say_whole_is_given_no_annotation() {
        let hub = hub(None);
        let older = convert::<Hub2>(hub.clone(), "example.com/v1").expect("converts down");
        assert!(older["metadata"]["annotations"].get(KEPT_IN).is_none());
        round_trips::older_trips_through_the_hub::<Hub2>(&older);
        let mut stale = hub;
        stale["metadata"]["annotations"][KEPT_IN] = "left by a client".into();
        let older = convert::<Hub2>(stale, "example.com/v1").expect("converts down");
        let annotations = &older["metadata"]["annotations"];
        assert!(
            annotations.get(KEPT_IN).is_none(),
            "a stale annotation is dropped"
        );
    }

    #[test]
    fn an_annotation_that_holds_no_object_fails_the_conversion_naming_it() {
        let mut older = convert::<Hub2>(hub(Some("red")), "example.com/v1").expect("converts");
        older["metadata"]["annotations"][KEPT_IN] = "[1, 2]".into();
        let error = convert::<Hub2>(older, "example.com/v2").expect_err("refused");
        assert!(
            error.contains("\"sample\"") && error.contains(KEPT_IN),
            "{error}"
        );
    }

    #[test]
    fn a_recorded_review_is_answered_for_its_uid_object_by_object() {
        answers_recorded_review::<Hub2>(&hub(Some("red")), "example.com/v1");
        answers_recorded_review::<Hub2>(&hub(Some("red")), "example.com/v2");
    }

    #[test]
    fn a_crd_served_at_a_base_url_keeps_its_path_and_refuses_what_the_api_server_would() {
        let webhook = Webhook {
            service: "widget-operator",
            namespace: "operators",
            path: "/convert",
            certificate: None,
        };
        let mut crd = CustomResourceDefinition::default();
        assert!(
            serve_at(&mut crd, "https://127.0.0.1:8443").is_err(),
            "no webhook yet"
        );
        serve(&mut crd, &webhook);
        serve_at(&mut crd, "https://127.0.0.1:8443/").expect("a loopback base");
        let config = crd
            .spec
            .conversion
            .as_ref()
            .and_then(|c| c.webhook.as_ref());
        let config = config.and_then(|w| w.client_config.as_ref()).expect("kept");
        assert_eq!(
            config.url.as_deref(),
            Some("https://127.0.0.1:8443/convert")
        );
        assert_eq!(
            config.service, None,
            "the API server takes a URL or a Service, not both"
        );
        for refused in [
            "http://127.0.0.1:8443",
            "https://127.0.0.1:8443/convert",
            "https://user:pass@127.0.0.1:8443",
            "https://127.0.0.1:8443?x=1",
            "https://127.0.0.1:8443#x",
            "127.0.0.1:8443",
            "",
        ] {
            let mut crd = CustomResourceDefinition::default();
            serve(&mut crd, &webhook);
            let error = serve_at(&mut crd, refused).expect_err(refused);
            assert!(error.contains("https://<host>[:<port>]"), "{error}");
        }
    }

    #[test]
    fn a_version_not_served_fails_the_review_naming_it() {
        let body = recorded("example.invalid/v9", vec![hub(None)]);
        let (answer, outcome) = answer::<Hub2>(&body);
        assert_eq!(outcome, Outcome::Failed);
        let response = answer.response.expect("a response");
        assert_eq!(response.uid, UID);
        let message = &response.result.message;
        assert!(message.contains("example.invalid/v9"), "{message}");
    }

    #[test]
    fn a_body_that_is_no_review_is_refused_without_a_panic() {
        let (answer, outcome) = answer::<Hub2>(b"{not json");
        assert_eq!(outcome, Outcome::Invalid);
        let message = answer.response.expect("a response").result.message;
        assert!(message.contains("not a ConversionReview"), "{message}");
    }

    #[test]
    fn a_review_without_a_list_of_objects_is_refused_for_its_uid() {
        let body = recorded("example.com/v1", vec![]);
        let mut body: Value = serde_json::from_slice(&body).expect("JSON");
        body["request"]["objects"] = json!({"not": "a list"});
        let (answer, outcome) = answer::<Hub2>(body.to_string().as_bytes());
        assert_eq!(outcome, Outcome::Invalid);
        let response = answer.response.expect("a response");
        assert_eq!(response.uid, UID);
        let message = &response.result.message;
        assert!(message.contains("a list of objects"), "{message}");
    }

    #[test]
    fn an_object_that_cannot_be_converted_fails_the_whole_review_naming_it() {
        let hub = hub(Some("red"));
        let mut stranger = hub.clone();
        stranger["apiVersion"] = "example.invalid/v9".into();
        stranger["metadata"]["name"] = "stranger".into();
        let objects = vec![hub.clone(), stranger, hub];
        let (answer, outcome) = answer::<Hub2>(&recorded("example.com/v1", objects));
        assert_eq!(outcome, Outcome::Failed);
        let result = answer.response.expect("a response").result;
        let failure = Some(kube::core::response::StatusSummary::Failure);
        assert_eq!(result.status, failure);
        let message = &result.message;
        assert!(
            message.contains("stranger") && message.contains("example.invalid/v9"),
            "{message}"
        );
    }

    #[test]
    fn the_answer_does_not_depend_on_the_order_of_the_request_fields() {
        let objects = vec![hub(Some("red"))];
        // Objects first, the version asked for last: a serializer that sorts keys never writes this.
        let reordered = [
            r#"{"request":{"objects":"#,
            &Value::from(objects.clone()).to_string(),
            &format!(r#","uid":"{UID}","desiredAPIVersion":"example.com/v1"}},"#),
            r#""kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1"}"#,
        ]
        .concat();
        let (first, _) = answer::<Hub2>(&recorded("example.com/v1", objects));
        let (second, outcome) = answer::<Hub2>(reordered.as_bytes());
        assert_eq!(outcome, Outcome::Converted);
        let encoded = |review: kube::core::conversion::ConversionReview| {
            serde_json::to_value(review.response).expect("encodes")
        };
        assert_eq!(encoded(second), encoded(first));
    }

    #[test]
    fn the_sample_of_a_schema_fills_every_field_and_edited_picks_other_values() {
        let schema = json!({"type": "object", "properties": {
            "size": {"type": "integer"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "at": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "port": {"x-kubernetes-int-or-string": true},
        }});
        let first = round_trips::sample(&schema, false);
        assert_eq!(
            first,
            json!({"size": 1, "mode": "a", "at": "2024-01-01T00:00:00Z", "tags": ["sample"],
                   "labels": {"key": true}, "port": 1})
        );
        let edited = round_trips::sample(&schema, true);
        assert_eq!(edited["mode"], "b");
        assert_ne!(edited["size"], first["size"]);
        assert_ne!(edited["labels"], first["labels"]);
    }

    #[test]
    fn the_crd_is_converted_behind_the_service_and_cert_manager_injects_its_ca() {
        let mut crd = CustomResourceDefinition::default();
        let webhook = Webhook {
            service: "widget-operator",
            namespace: "operators",
            path: "/convert",
            certificate: Some("widget-operator-webhooks"),
        };
        serve(&mut crd, &webhook);
        let conversion = crd.spec.conversion.expect("a conversion");
        assert_eq!(conversion.strategy, "Webhook");
        let client = conversion.webhook.and_then(|w| w.client_config);
        let service = client
            .and_then(|c| c.service)
            .expect("the webhook is the Service");
        let at = (
            service.name.as_str(),
            service.namespace.as_str(),
            service.path.as_deref(),
        );
        assert_eq!(at, ("widget-operator", "operators", Some("/convert")));
        let annotations = crd.metadata.annotations.expect("annotated");
        let from = &annotations["cert-manager.io/inject-ca-from"];
        assert_eq!(from, "operators/widget-operator-webhooks");
        let mut crd = CustomResourceDefinition::default();
        serve(
            &mut crd,
            &Webhook {
                certificate: None,
                ..webhook
            },
        );
        assert_eq!(
            crd.metadata.annotations, None,
            "the operator writes its caBundle"
        );
    }
}
