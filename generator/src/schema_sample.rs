//! The smallest instance of a CRD schema: every required field, each at its least value.
//!
//! Generated operators carry it as `controller::sample`, so that the tests shipped with them
//! have an object to reconcile without the generator knowing anything about the CRD. It must
//! deserialize into the generated types (a required field is a non-`Option` Rust field) and,
//! for the cluster test, pass the API server's validation as far as a schema allows: enums,
//! lengths, bounds and item counts are honoured. A `pattern` cannot be satisfied in general,
//! so a required string with one may be rejected; the cluster test then names the field.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray,
};
use serde_json::{Map, Value};

/// The top-level fields of a sample object, without `apiVersion`, `kind` and `metadata`,
/// which the operator sets itself.
///
/// `spec` is always present when the schema has one, because kube's root types hold it as a
/// plain field whether or not the CRD marks it required.
pub fn sample_body(root: &JSONSchemaProps) -> Map<String, Value> {
    let mut body = match sample(root) {
        Value::Object(body) => body,
        _ => Map::new(),
    };
    for meta in ["apiVersion", "kind", "metadata"] {
        body.remove(meta);
    }
    if let Some(spec) = root.properties.as_ref().and_then(|p| p.get("spec")) {
        body.entry("spec").or_insert_with(|| sample(spec));
    }
    body
}

/// [`sample_body`] with `overlay` written over it: the manifest's `sample:`, for values a
/// schema cannot give (a string that must match a `pattern`, a reference that must resolve).
pub fn sample_with(root: &JSONSchemaProps, overlay: Option<&Value>) -> Value {
    let mut body = Value::Object(sample_body(root));
    if let Some(overlay) = overlay {
        merge(&mut body, overlay);
    }
    body
}

/// Writes `overlay` over `base`: objects merge key by key, anything else replaces.
fn merge(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                merge(base.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (base, overlay) => *base = overlay.clone(),
    }
}

/// The least value `schema` accepts.
pub fn sample(schema: &JSONSchemaProps) -> Value {
    if let Some(default) = &schema.default {
        return default.0.clone();
    }
    if let Some(first) = schema.enum_.iter().flatten().find(|v| !v.0.is_null()) {
        return first.0.clone();
    }
    if schema.x_kubernetes_int_or_string == Some(true) {
        return Value::from(schema.minimum.map_or(0, |m| m.ceil() as i64));
    }
    match schema.type_.as_deref() {
        Some("string") => string(schema),
        Some("integer") => Value::from(least_number(schema) as i64),
        Some("number") => Value::from(least_number(schema)),
        Some("boolean") => Value::Bool(false),
        Some("array") => array(schema),
        Some("object") => object(schema),
        _ if schema.properties.is_some() => object(schema),
        _ => untyped(schema),
    }
}

fn string(schema: &JSONSchemaProps) -> Value {
    let text = match schema.format.as_deref() {
        Some("date-time") => "1970-01-01T00:00:00Z".to_owned(),
        Some("date") => "1970-01-01".to_owned(),
        _ => "a".repeat(usize::try_from(schema.min_length.unwrap_or(0)).unwrap_or(0)),
    };
    Value::String(text)
}

fn least_number(schema: &JSONSchemaProps) -> f64 {
    match schema.minimum {
        Some(minimum) if schema.exclusive_minimum == Some(true) => minimum.floor() + 1.0,
        Some(minimum) => minimum.ceil(),
        None => 0.0,
    }
}

fn array(schema: &JSONSchemaProps) -> Value {
    let count = usize::try_from(schema.min_items.unwrap_or(0)).unwrap_or(0);
    let item = match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(items)) => sample(items),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.first().map_or(Value::Null, sample),
        None => Value::Null,
    };
    Value::Array(vec![item; count])
}

/// Required properties, plus those the first `oneOf`/`anyOf` alternative requires: CRDs use
/// alternatives that list only `required` to say "one of these fields must be set".
fn object(schema: &JSONSchemaProps) -> Value {
    let mut object = Map::new();
    let Some(properties) = &schema.properties else {
        return Value::Object(object);
    };
    let first_alternative = [&schema.one_of, &schema.any_of]
        .into_iter()
        .flatten()
        .filter_map(|alternatives| alternatives.first())
        .flat_map(|alternative| alternative.required.iter().flatten());
    for name in schema.required.iter().flatten().chain(first_alternative) {
        if let Some(property) = properties.get(name) {
            object
                .entry(name.clone())
                .or_insert_with(|| sample(property));
        }
    }
    Value::Object(object)
}

/// No type: the first typed alternative, else an empty object (any JSON value is accepted).
fn untyped(schema: &JSONSchemaProps) -> Value {
    [&schema.one_of, &schema.any_of]
        .into_iter()
        .flatten()
        .flatten()
        .find(|alternative| alternative.type_.is_some())
        .map_or_else(|| Value::Object(Map::new()), sample)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(value: Value) -> JSONSchemaProps {
        serde_json::from_value(value).expect("a schema")
    }

    #[test]
    fn only_required_fields_appear_each_at_its_least_value() {
        let root = schema(json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["name", "replicas", "mode", "when", "ports", "labels", "port"],
                    "properties": {
                        "name": {"type": "string", "minLength": 3},
                        "replicas": {"type": "integer", "minimum": 1},
                        "ratio": {"type": "number"},
                        "mode": {"type": "string", "enum": ["Fast", "Slow"]},
                        "when": {"type": "string", "format": "date-time"},
                        "ports": {"type": "array", "minItems": 2,
                                  "items": {"type": "integer", "minimum": 0, "exclusiveMinimum": true}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "port": {"x-kubernetes-int-or-string": true},
                        "optional": {"type": "string"}
                    }
                },
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
            }
        }));
        let body = sample_body(&root);
        assert_eq!(
            Value::Object(body),
            json!({"spec": {
                "name": "aaa", "replicas": 1, "mode": "Fast", "when": "1970-01-01T00:00:00Z",
                "ports": [1, 1], "labels": {}, "port": 0
            }})
        );
    }

    #[test]
    fn spec_is_present_even_when_not_required_and_defaults_win() {
        let root = schema(json!({
            "type": "object",
            "required": ["mesh"],
            "properties": {
                "apiVersion": {"type": "string"},
                "mesh": {"type": "string", "default": "default"},
                "spec": {"type": "object", "properties": {"x": {"type": "string"}}}
            }
        }));
        assert_eq!(
            Value::Object(sample_body(&root)),
            json!({"mesh": "default", "spec": {}})
        );
    }

    #[test]
    fn the_overlay_sets_what_the_schema_cannot_and_keeps_the_rest() {
        let root = schema(json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "required": ["host", "port"],
                "properties": {
                    "host": {"type": "string", "pattern": "^[a-z]+\\.example\\.com$"},
                    "port": {"type": "integer", "minimum": 1}
                }
            }}
        }));
        let overlay = json!({"spec": {"host": "api.example.com"}});
        assert_eq!(
            sample_with(&root, Some(&overlay)),
            json!({"spec": {"host": "api.example.com", "port": 1}})
        );
        assert_eq!(
            sample_with(&root, None),
            json!({"spec": {"host": "", "port": 1}})
        );
    }

    #[test]
    fn the_first_alternative_decides_which_of_several_fields_is_set() {
        let spec = schema(json!({
            "type": "object",
            "oneOf": [{"required": ["secretName"]}, {"required": ["configMapName"]}],
            "properties": {
                "secretName": {"type": "string"},
                "configMapName": {"type": "string"}
            }
        }));
        assert_eq!(sample(&spec), json!({"secretName": ""}));
    }
}
