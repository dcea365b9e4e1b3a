//! Checking a value against a CRD version's structural schema, the way the API server does.
//!
//! The generator uses it to refuse an `operator.yaml` `sample:` that the cluster would refuse,
//! before it writes a crate around it. Without it the mistake would show only when the
//! generated crate's cluster test creates the object, far from the line that caused it.
//!
//! # What is checked
//!
//! As the API server does, the value is first defaulted: a missing field, or a `null` one
//! whose schema is not `nullable`, takes the schema's `default`, and any other non-nullable
//! `null` field is dropped. Then the checks are `type`, `nullable`,
//! `x-kubernetes-int-or-string`, `enum`, `required`, unknown fields (`properties`,
//! `additionalProperties`, `x-kubernetes-preserve-unknown-fields`),
//! `x-kubernetes-embedded-resource`, `items`, `x-kubernetes-list-type` (`set` and `map`
//! entries must be unique), `minItems`/`maxItems`, `minLength`/`maxLength`,
//! `minimum`/`maximum` (and the exclusive forms), `minProperties`/`maxProperties`, and
//! `allOf`/`anyOf`/`oneOf`/`not`.
//!
//! Unknown fields are refused, not dropped. A lenient request would have the API server
//! prune them without a word, but `kubectl` asks for strict field validation by default, and
//! a field the schema does not know is almost always a misspelling.
//!
//! # What is not checked
//!
//! - `pattern`: the generator has no regex engine, and the API server's patterns are Go RE2
//!   syntax. A string that must match one passes here, and the cluster names it if it does
//!   not match.
//! - `format`, `multipleOf` and the CEL rules in `x-kubernetes-validations` are also left
//!   to the cluster. Each needs an evaluator that the API server has and the generator does
//!   not, or (for `multipleOf`) is too rare in CRDs to be worth one.
//! - The inside of a resource's `metadata`, beyond the fields the schema lists. The API
//!   server checks ObjectMeta (names, labels) with its own code, not with the CRD's schema,
//!   which leaves `metadata` as an untyped `type: object`.

use std::{collections::HashMap, fmt};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::{Map, Number, Value};

/// How many levels the check descends (into the value, or into a schema's alternatives)
/// before it reports the part below as too deep instead of checking it.
///
/// The YAML reader already limits how deep a sample can be. This limit also bounds the stack
/// when the value was built in some other way.
pub const MAX_DEPTH: usize = 256;

/// One way in which a value does not fit its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where the problem is, written as the API server writes paths:
    /// `spec.groups[0].rules[1].expr`, with map keys in brackets (`spec.labels[app]`).
    /// Empty for the value itself.
    pub path: String,
    /// What is wrong, for example `expected an integer, found a string`.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "top level: {}", self.message)
        } else {
            write!(f, "field `{}`: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for Problem {}

/// Checks `value` against `schema`, the `openAPIV3Schema` of one CRD version.
///
/// `value` is a resource object, usually its body alone. `apiVersion`, `kind` and
/// `metadata` may be left out, even when the schema requires them, and are accepted when
/// present.
///
/// # Errors
///
/// Returns every problem found, in the order of the value's fields, so that one run can
/// report all of them.
pub fn check(schema: &JSONSchemaProps, value: &Value) -> Result<(), Vec<Problem>> {
    let value = defaulted(Some(schema), value, 0);
    let mut checker = Checker::default();
    checker.value(schema, &value, "", 0, Place::Root);
    if checker.problems.is_empty() {
        Ok(())
    } else {
        Err(checker.problems)
    }
}

/// Where in the schema a value is checked. This decides which fields exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The top of the resource. The caller may leave out `apiVersion`, `kind` and `metadata`.
    Root,
    /// A node of the structural schema, which lists the fields that may exist.
    Node,
    /// Inside `allOf`, `anyOf`, `oneOf` or `not`. Structural schemas keep types,
    /// `additionalProperties` and the pruning extensions out of these, so an alternative only
    /// adds constraints: a field that it does not list is not an unknown field.
    Alternative,
}

impl Place {
    fn below(self) -> Self {
        match self {
            Self::Root | Self::Node => Self::Node,
            Self::Alternative => Self::Alternative,
        }
    }
}

/// Collects problems rather than stopping at the first, so one run reports all of them.
#[derive(Default)]
struct Checker {
    problems: Vec<Problem>,
}

impl Checker {
    fn problem(&mut self, path: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            path: path.to_owned(),
            message: message.into(),
        });
    }

    fn value(
        &mut self,
        schema: &JSONSchemaProps,
        value: &Value,
        path: &str,
        depth: usize,
        place: Place,
    ) {
        if depth > MAX_DEPTH {
            self.problem(
                path,
                format!("nested more than {MAX_DEPTH} levels deep, too deep to check"),
            );
            return;
        }
        if value.is_null() && schema.nullable == Some(true) {
            return;
        }
        if let Some(expected) = type_mismatch(schema, value) {
            self.problem(
                path,
                format!("expected {expected}, found {}", describe(value)),
            );
            return;
        }
        if let Some(allowed) = &schema.enum_
            && !allowed.iter().any(|a| same(&a.0, value))
        {
            let listed: Vec<String> = allowed.iter().map(|a| a.0.to_string()).collect();
            self.problem(
                path,
                format!("must be one of {}, found {value}", listed.join(", ")),
            );
        }
        match value {
            Value::String(text) => self.string(schema, text, path),
            Value::Number(number) => self.number(schema, number, path),
            Value::Array(items) => self.array(schema, items, path, depth, place),
            Value::Object(fields) => self.object(schema, fields, path, depth, place),
            // The API server runs only the type and enum checks on a null.
            Value::Null => return,
            Value::Bool(_) => {}
        }
        self.alternatives(schema, value, path, depth);
    }

    fn string(&mut self, schema: &JSONSchemaProps, text: &str, path: &str) {
        // The API server counts characters (Go runes), not bytes.
        let length = i64::try_from(text.chars().count()).unwrap_or(i64::MAX);
        if let Some(min) = schema.min_length
            && length < min
        {
            self.problem(
                path,
                format!(
                    "must be at least {} long, found {length}",
                    count(min, "character")
                ),
            );
        }
        if let Some(max) = schema.max_length
            && length > max
        {
            self.problem(
                path,
                format!(
                    "must be at most {} long, found {length}",
                    count(max, "character")
                ),
            );
        }
    }

    fn number(&mut self, schema: &JSONSchemaProps, number: &Number, path: &str) {
        let Some(value) = number.as_f64() else {
            return;
        };
        if let Some(min) = schema.minimum {
            if schema.exclusive_minimum == Some(true) {
                if value <= min {
                    self.problem(path, format!("must be greater than {min}, found {number}"));
                }
            } else if value < min {
                self.problem(path, format!("must be at least {min}, found {number}"));
            }
        }
        if let Some(max) = schema.maximum {
            if schema.exclusive_maximum == Some(true) {
                if value >= max {
                    self.problem(path, format!("must be less than {max}, found {number}"));
                }
            } else if value > max {
                self.problem(path, format!("must be at most {max}, found {number}"));
            }
        }
    }

    fn array(
        &mut self,
        schema: &JSONSchemaProps,
        items: &[Value],
        path: &str,
        depth: usize,
        place: Place,
    ) {
        let length = i64::try_from(items.len()).unwrap_or(i64::MAX);
        if let Some(min) = schema.min_items
            && length < min
        {
            self.problem(
                path,
                format!("must have at least {}, found {length}", count(min, "item")),
            );
        }
        if let Some(max) = schema.max_items
            && length > max
        {
            self.problem(
                path,
                format!("must have at most {}, found {length}", count(max, "item")),
            );
        }
        for (index, item) in items.iter().enumerate() {
            if let Some(item_schema) = item_schema(schema, index) {
                self.value(
                    item_schema,
                    item,
                    &format!("{path}[{index}]"),
                    depth + 1,
                    place.below(),
                );
            }
        }
        if place != Place::Alternative {
            self.list_type(schema, items, path);
        }
    }

    /// `x-kubernetes-list-type`: a `set` holds each value once, a `map` each key once.
    /// A key is the tuple of the fields named in `x-kubernetes-list-map-keys`.
    fn list_type(&mut self, schema: &JSONSchemaProps, items: &[Value], path: &str) {
        let keys: &[String] = schema.x_kubernetes_list_map_keys.as_deref().unwrap_or(&[]);
        let is_map = match schema.x_kubernetes_list_type.as_deref() {
            Some("set") => false,
            Some("map") => true,
            _ => return,
        };
        // Items are keyed by their JSON text, so a long list costs one pass, not one
        // comparison per pair.
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (index, item) in items.iter().enumerate() {
            let key = if is_map {
                let Value::Object(fields) = item else {
                    continue;
                };
                let parts: Vec<String> = keys
                    .iter()
                    .map(|k| format!("{k}: {}", fields.get(k).unwrap_or(&Value::Null)))
                    .collect();
                parts.join(", ")
            } else {
                item.to_string()
            };
            match seen.get(&key) {
                Some(first) if is_map => self.problem(
                    &format!("{path}[{index}]"),
                    format!(
                        "has the same key ({key}) as item [{first}], but a list of type `map` \
                         holds each key once"
                    ),
                ),
                Some(first) => self.problem(
                    &format!("{path}[{index}]"),
                    format!(
                        "repeats item [{first}], but a list of type `set` holds each value once"
                    ),
                ),
                None => {
                    seen.insert(key, index);
                }
            }
        }
    }

    fn object(
        &mut self,
        schema: &JSONSchemaProps,
        fields: &Map<String, Value>,
        path: &str,
        depth: usize,
        place: Place,
    ) {
        let length = i64::try_from(fields.len()).unwrap_or(i64::MAX);
        if let Some(min) = schema.min_properties
            && length < min
        {
            self.problem(
                path,
                format!("must have at least {}, found {length}", count(min, "field")),
            );
        }
        if let Some(max) = schema.max_properties
            && length > max
        {
            self.problem(
                path,
                format!("must have at most {}, found {length}", count(max, "field")),
            );
        }
        let embedded = place == Place::Node && schema.x_kubernetes_embedded_resource == Some(true);
        let resource = place == Place::Root || embedded;
        for (key, field) in fields {
            let field_path = child_path(path, key);
            let property = schema.properties.as_ref().and_then(|p| p.get(key));
            if resource && is_resource_field(key) {
                self.resource_field(property, key, field, &field_path, depth + 1);
            } else if let Some(property) = property {
                self.value(property, field, &field_path, depth + 1, place.below());
            } else {
                match &schema.additional_properties {
                    Some(JSONSchemaPropsOrBool::Schema(values)) => {
                        self.value(
                            values,
                            field,
                            &format!("{path}[{key}]"),
                            depth + 1,
                            place.below(),
                        );
                    }
                    Some(JSONSchemaPropsOrBool::Bool(true)) => {}
                    _ if place == Place::Alternative
                        || schema.x_kubernetes_preserve_unknown_fields == Some(true) => {}
                    _ => self.problem(&field_path, unknown_field(schema)),
                }
            }
        }
        for name in schema.required.iter().flatten() {
            // The caller passes the body; the operator sets these itself.
            if place == Place::Root && is_resource_field(name) {
                continue;
            }
            if !fields.contains_key(name) {
                self.problem(&child_path(path, name), "required, but missing");
            }
        }
        if embedded {
            for name in ["apiVersion", "kind"] {
                if !fields.contains_key(name) {
                    self.problem(
                        &child_path(path, name),
                        "required in an embedded resource, but missing",
                    );
                }
            }
        }
    }

    /// `apiVersion`, `kind` and `metadata` of a resource, which the API server checks
    /// whether or not the schema lists them. `listed` is the schema's own entry, if any.
    fn resource_field(
        &mut self,
        listed: Option<&JSONSchemaProps>,
        key: &str,
        field: &Value,
        path: &str,
        depth: usize,
    ) {
        if key == "metadata" {
            let Value::Object(meta) = field else {
                self.problem(
                    path,
                    format!("expected an object, found {}", describe(field)),
                );
                return;
            };
            // A schema may restrict listed metadata fields (`name`, `generateName`); the rest
            // is ObjectMeta's business.
            let listed = listed.and_then(|m| m.properties.as_ref());
            for (name, value) in meta {
                if let Some(property) = listed.and_then(|p| p.get(name)) {
                    self.value(
                        property,
                        value,
                        &child_path(path, name),
                        depth + 1,
                        Place::Node,
                    );
                }
            }
            return;
        }
        match field {
            Value::String(text) if text.is_empty() => self.problem(path, "must not be empty"),
            Value::String(_) => {
                if let Some(listed) = listed {
                    self.value(listed, field, path, depth, Place::Node);
                }
            }
            other => self.problem(
                path,
                format!("expected a string, found {}", describe(other)),
            ),
        }
    }

    /// `allOf` needs every alternative to fit, `anyOf` at least one, `oneOf` exactly one,
    /// and `not` none, as in the API server. In structural schemas the alternatives only add
    /// constraints (see [`Place::Alternative`]).
    fn alternatives(&mut self, schema: &JSONSchemaProps, value: &Value, path: &str, depth: usize) {
        for alternative in schema.all_of.iter().flatten() {
            self.value(alternative, value, path, depth + 1, Place::Alternative);
        }
        if let Some(any_of) = &schema.any_of {
            let outcomes = trials(any_of, value, path, depth);
            if !outcomes.iter().any(Vec::is_empty) {
                self.problem(
                    path,
                    format!(
                        "fits none of the `anyOf` alternatives: {}",
                        summary(&outcomes)
                    ),
                );
            }
        }
        if let Some(one_of) = &schema.one_of {
            let outcomes = trials(one_of, value, path, depth);
            let fitting: Vec<String> = outcomes
                .iter()
                .enumerate()
                .filter(|(_, problems)| problems.is_empty())
                .map(|(index, _)| (index + 1).to_string())
                .collect();
            match fitting.len() {
                0 => self.problem(
                    path,
                    format!(
                        "fits none of the `oneOf` alternatives: {}",
                        summary(&outcomes)
                    ),
                ),
                1 => {}
                _ => self.problem(
                    path,
                    format!(
                        "fits `oneOf` alternatives {}, but must fit exactly one",
                        fitting.join(" and ")
                    ),
                ),
            }
        }
        if let Some(not) = &schema.not
            && trials(std::slice::from_ref(not.as_ref()), value, path, depth)
                .iter()
                .all(Vec::is_empty)
        {
            self.problem(path, "fits the schema under `not`, which it must not");
        }
    }
}

/// The problems that `value` has against each of `alternatives`, each checked on its own.
fn trials(
    alternatives: &[JSONSchemaProps],
    value: &Value,
    path: &str,
    depth: usize,
) -> Vec<Vec<Problem>> {
    alternatives
        .iter()
        .map(|alternative| {
            let mut checker = Checker::default();
            checker.value(alternative, value, path, depth + 1, Place::Alternative);
            checker.problems
        })
        .collect()
}

/// Why each alternative failed: `1) field `x`: ...; 2) ...`.
fn summary(outcomes: &[Vec<Problem>]) -> String {
    let parts: Vec<String> = outcomes
        .iter()
        .enumerate()
        .map(|(index, problems)| {
            let reasons: Vec<String> = problems.iter().map(Problem::to_string).collect();
            format!("{}) {}", index + 1, reasons.join(", "))
        })
        .collect();
    parts.join("; ")
}

/// What `value` should have been, if its type does not fit `schema`.
fn type_mismatch(schema: &JSONSchemaProps, value: &Value) -> Option<&'static str> {
    if schema.x_kubernetes_int_or_string == Some(true) {
        return (!(is_integer(value) || value.is_string())).then_some("an integer or a string");
    }
    let (expected, fits) = match schema.type_.as_deref()? {
        "object" => ("an object", value.is_object()),
        "array" => ("an array", value.is_array()),
        "string" => ("a string", value.is_string()),
        "integer" => ("an integer", is_integer(value)),
        "number" => ("a number", value.is_number()),
        "boolean" => ("a boolean", value.is_boolean()),
        _ => return None,
    };
    (!fits).then_some(expected)
}

/// A whole number. Like the API server, this includes a float with no fraction (`2.0`),
/// because JSON does not tell the two apart.
fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64()
                || n.is_u64()
                || n.as_f64()
                    .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
        }
        _ => false,
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// JSON equality, except that numbers compare by value, so `enum: [1]` accepts `1.0`.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn count(n: i64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn is_resource_field(name: &str) -> bool {
    matches!(name, "apiVersion" | "kind" | "metadata")
}

fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn unknown_field(schema: &JSONSchemaProps) -> String {
    match &schema.properties {
        Some(properties) if !properties.is_empty() => {
            let known: Vec<&str> = properties.keys().map(String::as_str).collect();
            format!("unknown field; the fields here are {}", known.join(", "))
        }
        _ => "unknown field; the schema allows no fields here".to_owned(),
    }
}

/// The schema for a field of an object: its property, else the schema for map values.
fn field_schema<'a>(schema: &'a JSONSchemaProps, key: &str) -> Option<&'a JSONSchemaProps> {
    schema
        .properties
        .as_ref()
        .and_then(|p| p.get(key))
        .or(match &schema.additional_properties {
            Some(JSONSchemaPropsOrBool::Schema(values)) => Some(values.as_ref()),
            _ => None,
        })
}

fn item_schema(schema: &JSONSchemaProps, index: usize) -> Option<&JSONSchemaProps> {
    match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(items)) => Some(items.as_ref()),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.get(index),
        None => None,
    }
}

/// `value` as the API server validates it: a non-nullable `null` replaced by the schema's
/// `default`, or dropped if there is none, and each missing field that has a `default`
/// filled in. This mirrors apiextensions-apiserver's `PruneNonNullableNullsWithoutDefaults`
/// and `Default`, which run before validation. Without it a sample that leaves out a
/// defaulted required field would be refused here and accepted by the cluster.
///
/// Below [`MAX_DEPTH`] the copy holds `null`. The checker stops at that depth anyway, and
/// reports any part of the value that it needed to see there.
fn defaulted(schema: Option<&JSONSchemaProps>, value: &Value, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    match value {
        Value::Object(fields) => {
            let mut out = Map::new();
            for (key, field) in fields {
                let sub = schema.and_then(|s| field_schema(s, key));
                let field = match (sub, field) {
                    (Some(sub), Value::Null) if sub.nullable != Some(true) => match &sub.default {
                        Some(default) => &default.0,
                        None => continue,
                    },
                    _ => field,
                };
                out.insert(key.clone(), defaulted(sub, field, depth + 1));
            }
            let properties = schema.and_then(|s| s.properties.as_ref());
            for (key, property) in properties.into_iter().flatten() {
                if let Some(default) = &property.default
                    && !out.contains_key(key)
                {
                    out.insert(
                        key.clone(),
                        defaulted(Some(property), &default.0, depth + 1),
                    );
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    let sub = schema.and_then(|s| item_schema(s, index));
                    let item = match (sub, item) {
                        (Some(sub), Value::Null) if sub.nullable != Some(true) => {
                            sub.default.as_ref().map_or(item, |d| &d.0)
                        }
                        _ => item,
                    };
                    defaulted(sub, item, depth + 1)
                })
                .collect(),
        ),
        scalar => scalar.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use serde_json::json;

    use super::*;

    fn schema(value: Value) -> JSONSchemaProps {
        serde_json::from_value(value).expect("a schema")
    }

    /// Asserts that `value` fits `schema`, showing the problems if it does not.
    #[track_caller]
    fn assert_fits(schema: &JSONSchemaProps, value: Value) {
        if let Err(problems) = check(schema, &value) {
            panic!("{value} should fit, but: {problems:#?}");
        }
    }

    /// The problems `value` has against `schema`, which must be some.
    #[track_caller]
    fn problems(schema: &JSONSchemaProps, value: Value) -> Vec<Problem> {
        let problems = check(schema, &value).expect_err("the value should not fit");
        assert!(!problems.is_empty(), "an error must name a problem");
        problems
    }

    /// The paths of the problems `value` has against `schema`.
    #[track_caller]
    fn paths(schema: &JSONSchemaProps, value: Value) -> Vec<String> {
        problems(schema, value)
            .into_iter()
            .map(|p| p.path)
            .collect()
    }

    /// The problems, as they display, that `value` has against `schema`.
    #[track_caller]
    fn messages(schema: &JSONSchemaProps, value: Value) -> Vec<String> {
        problems(schema, value)
            .iter()
            .map(Problem::to_string)
            .collect()
    }

    /// A root schema whose `spec` is `spec`.
    fn with_spec(spec: Value) -> JSONSchemaProps {
        schema(json!({"type": "object", "properties": {"spec": spec}}))
    }

    #[test]
    fn each_type_accepts_its_own_values_and_integers_count_as_numbers() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {
                "o": {"type": "object"}, "a": {"type": "array"}, "s": {"type": "string"},
                "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"}
            }
        }));
        let fitting = json!({"spec": {"o": {}, "a": [], "s": "x", "i": 3, "n": 3, "b": true}});
        assert_fits(&root, fitting);
        assert_fits(&root, json!({"spec": {"n": 2.5}}));
        assert_eq!(
            messages(
                &root,
                json!({"spec": {"o": [], "a": {}, "s": 1, "i": "3", "n": "3", "b": "true"}})
            ),
            [
                "field `spec.a`: expected an array, found an object",
                "field `spec.b`: expected a boolean, found a string",
                "field `spec.i`: expected an integer, found a string",
                "field `spec.n`: expected a number, found a string",
                "field `spec.o`: expected an object, found an array",
                "field `spec.s`: expected a string, found an integer",
            ]
        );
    }

    #[test]
    fn an_integer_may_be_written_as_a_whole_float_but_not_with_a_fraction() {
        let root = with_spec(json!({"type": "object", "properties": {"i": {"type": "integer"}}}));
        assert_fits(&root, json!({"spec": {"i": 2.0}}));
        assert_eq!(
            messages(&root, json!({"spec": {"i": 2.5}})),
            ["field `spec.i`: expected an integer, found a number"]
        );
    }

    #[test]
    fn null_is_refused_where_it_is_kept_unless_the_schema_is_nullable() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {
                "plain": {"type": "array", "items": {"type": "string"}},
                "nullable": {"type": "array", "items": {"type": "string", "nullable": true}}
            }
        }));
        assert_fits(&root, json!({"spec": {"nullable": [null, "x"]}}));
        assert_eq!(
            messages(&root, json!({"spec": {"plain": ["x", null]}})),
            ["field `spec.plain[1]`: expected a string, found null"]
        );
    }

    #[test]
    fn a_non_nullable_null_field_is_dropped_or_defaulted_as_the_api_server_does() {
        let root = with_spec(json!({
            "type": "object",
            "required": ["name", "size"],
            "properties": {
                "name": {"type": "string"},
                "size": {"type": "integer", "default": 3},
                "note": {"type": "string"},
                "tags": {"type": "object", "nullable": true}
            }
        }));
        // `note` is dropped, `size` defaulted, `tags` kept as a null it may hold.
        assert_fits(
            &root,
            json!({"spec": {"name": "a", "size": null, "note": null, "tags": null}}),
        );
        // A missing field with a default is filled in before `required` is checked.
        assert_fits(&root, json!({"spec": {"name": "a"}}));
        assert_eq!(
            messages(&root, json!({"spec": {"name": null}})),
            ["field `spec.name`: required, but missing"]
        );
    }

    #[test]
    fn int_or_string_takes_an_integer_or_a_string_and_nothing_else() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {"port": {
                "x-kubernetes-int-or-string": true,
                "anyOf": [{"type": "integer"}, {"type": "string"}]
            }}
        }));
        assert_fits(&root, json!({"spec": {"port": 80}}));
        assert_fits(&root, json!({"spec": {"port": "http"}}));
        assert_eq!(
            messages(&root, json!({"spec": {"port": true}})),
            ["field `spec.port`: expected an integer or a string, found a boolean"]
        );
        assert_eq!(
            messages(&root, json!({"spec": {"port": 1.5}})),
            ["field `spec.port`: expected an integer or a string, found a number"]
        );
    }

    #[test]
    fn preserve_unknown_fields_accepts_any_field_but_still_checks_typed_ones() {
        let root = with_spec(json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "size": {"type": "integer"},
                "strict": {"type": "object", "properties": {"a": {"type": "string"}}}
            }
        }));
        assert_fits(
            &root,
            json!({"spec": {"size": 1, "anything": {"deep": [1, "two"]}, "strict": {"a": "x"}}}),
        );
        // Typed fields are checked, and a nested object without the extension is strict again.
        assert_eq!(
            paths(&root, json!({"spec": {"size": "1", "strict": {"b": 1}}})),
            ["spec.size", "spec.strict.b"]
        );
    }

    #[test]
    fn an_embedded_resource_needs_api_version_and_kind_and_allows_metadata() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {"template": {
                "type": "object",
                "x-kubernetes-embedded-resource": true,
                "properties": {
                    "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
                }
            }}
        }));
        let fitting = json!({"spec": {"template": {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "x", "labels": {"a": "b"}},
            "spec": {"replicas": 1}
        }}});
        assert_fits(&root, fitting);
        assert_eq!(
            messages(
                &root,
                json!({"spec": {"template": {"kind": "", "metadata": "x"}}})
            ),
            [
                "field `spec.template.kind`: must not be empty",
                "field `spec.template.metadata`: expected an object, found a string",
                "field `spec.template.apiVersion`: required in an embedded resource, but missing",
            ]
        );
    }

    #[test]
    fn the_root_accepts_api_version_kind_and_metadata_without_requiring_them() {
        let root = schema(json!({
            "type": "object",
            "required": ["apiVersion", "kind", "metadata", "spec"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}},
                "spec": {"type": "object"}
            }
        }));
        assert_fits(&root, json!({"spec": {}}));
        let full = json!({
            "apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": "thing", "namespace": "default", "labels": {"a": "b"}},
            "spec": {}
        });
        assert_fits(&root, full);
        assert_eq!(
            messages(
                &root,
                json!({"apiVersion": 1, "metadata": {"name": "too-long"}, "spec": {}})
            ),
            [
                "field `apiVersion`: expected a string, found an integer",
                "field `metadata.name`: must be at most 5 characters long, found 8",
            ]
        );
        // Left out of the schema, they are accepted all the same.
        let bare = schema(json!({"type": "object", "properties": {"spec": {"type": "object"}}}));
        assert_fits(
            &bare,
            json!({"kind": "Thing", "metadata": {"name": "x"}, "spec": {}}),
        );
    }

    #[test]
    fn required_fields_must_be_present() {
        let root = with_spec(json!({
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "other": {"type": "string"}}
        }));
        assert_fits(&root, json!({"spec": {"name": ""}}));
        assert_eq!(
            messages(&root, json!({"spec": {"other": "x"}})),
            ["field `spec.name`: required, but missing"]
        );
    }

    #[test]
    fn an_enum_value_must_equal_one_of_the_listed_json_values() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["Fast", "Slow"]},
                "level": {"type": "integer", "enum": [1, 2]}
            }
        }));
        assert_fits(&root, json!({"spec": {"mode": "Slow", "level": 2.0}}));
        assert_eq!(
            messages(&root, json!({"spec": {"mode": "fast", "level": 3}})),
            [
                "field `spec.level`: must be one of 1, 2, found 3",
                "field `spec.mode`: must be one of \"Fast\", \"Slow\", found \"fast\"",
            ]
        );
    }

    #[test]
    fn unknown_fields_are_refused_by_name_unless_additional_properties_allows_them() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {
                "closed": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                "empty": {"type": "object"},
                "refusing": {"type": "object", "additionalProperties": false},
                "open": {"type": "object", "additionalProperties": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }
        }));
        let fitting = json!({"spec": {
            "closed": {"a": "x"}, "empty": {}, "open": {"any": [1]}, "labels": {"app": "x"}
        }});
        assert_fits(&root, fitting);
        assert_eq!(
            messages(
                &root,
                json!({"spec": {
                    "closed": {"c": "x"}, "empty": {"d": 1}, "refusing": {"e": 1},
                    "labels": {"app.kubernetes.io/name": 1}, "extra": true
                }})
            ),
            [
                "field `spec.closed.c`: unknown field; the fields here are a, b",
                "field `spec.empty.d`: unknown field; the schema allows no fields here",
                "field `spec.extra`: unknown field; the fields here are closed, empty, labels, open, refusing",
                "field `spec.labels[app.kubernetes.io/name]`: expected a string, found an integer",
                "field `spec.refusing.e`: unknown field; the schema allows no fields here",
            ]
        );
    }

    #[test]
    fn every_item_is_checked_against_items() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {"ports": {"type": "array", "items": {
                "type": "object", "required": ["port"], "properties": {"port": {"type": "integer"}}
            }}}
        }));
        assert_fits(
            &root,
            json!({"spec": {"ports": [{"port": 1}, {"port": 2}]}}),
        );
        assert_eq!(
            paths(
                &root,
                json!({"spec": {"ports": [{"port": 1}, {"port": "2"}, {}]}})
            ),
            ["spec.ports[1].port", "spec.ports[2].port"]
        );
    }

    #[test]
    fn min_and_max_items_bound_the_length_of_an_array() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {"a": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "integer"}}}
        }));
        assert_fits(&root, json!({"spec": {"a": [1, 2]}}));
        assert_eq!(
            messages(&root, json!({"spec": {"a": []}})),
            ["field `spec.a`: must have at least 1 item, found 0"]
        );
        assert_eq!(
            messages(&root, json!({"spec": {"a": [1, 2, 3]}})),
            ["field `spec.a`: must have at most 2 items, found 3"]
        );
    }

    #[test]
    fn min_and_max_length_count_characters_not_bytes() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 3}}
        }));
        // Three characters, six bytes.
        assert_fits(&root, json!({"spec": {"s": "äöü"}}));
        assert_eq!(
            messages(&root, json!({"spec": {"s": "a"}})),
            ["field `spec.s`: must be at least 2 characters long, found 1"]
        );
        assert_eq!(
            messages(&root, json!({"spec": {"s": "abcd"}})),
            ["field `spec.s`: must be at most 3 characters long, found 4"]
        );
    }

    #[test]
    fn minimum_and_maximum_are_inclusive_unless_marked_exclusive() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {
                "inclusive": {"type": "integer", "minimum": 1, "maximum": 3},
                "exclusive": {"type": "number", "minimum": 1, "maximum": 3,
                              "exclusiveMinimum": true, "exclusiveMaximum": true}
            }
        }));
        assert_fits(&root, json!({"spec": {"inclusive": 1, "exclusive": 1.5}}));
        assert_fits(&root, json!({"spec": {"inclusive": 3}}));
        assert_eq!(
            messages(&root, json!({"spec": {"inclusive": 0, "exclusive": 1}})),
            [
                "field `spec.exclusive`: must be greater than 1, found 1",
                "field `spec.inclusive`: must be at least 1, found 0",
            ]
        );
        assert_eq!(
            messages(&root, json!({"spec": {"inclusive": 4, "exclusive": 3}})),
            [
                "field `spec.exclusive`: must be less than 3, found 3",
                "field `spec.inclusive`: must be at most 3, found 4",
            ]
        );
    }

    #[test]
    fn min_and_max_properties_bound_the_number_of_fields() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {"m": {"type": "object", "minProperties": 1, "maxProperties": 1,
                                 "additionalProperties": {"type": "string"}}}
        }));
        assert_fits(&root, json!({"spec": {"m": {"a": "x"}}}));
        assert_eq!(
            messages(&root, json!({"spec": {"m": {}}})),
            ["field `spec.m`: must have at least 1 field, found 0"]
        );
        assert_eq!(
            messages(&root, json!({"spec": {"m": {"a": "x", "b": "y"}}})),
            ["field `spec.m`: must have at most 1 field, found 2"]
        );
    }

    #[test]
    fn a_pattern_is_not_checked() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {"d": {"type": "string", "pattern": "^[0-9]+s$"}}
        }));
        assert_fits(&root, json!({"spec": {"d": "soon"}}));
    }

    #[test]
    fn list_types_set_and_map_refuse_repeated_values_and_keys() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {
                "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "map": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"}, "value": {"type": "integer"}}}}
            }
        }));
        let fitting = json!({"spec": {
            "set": ["a", "b"], "map": [{"name": "a", "value": 1}, {"name": "b", "value": 1}]
        }});
        assert_fits(&root, fitting);
        assert_eq!(
            messages(
                &root,
                json!({"spec": {
                    "set": ["a", "b", "a"], "map": [{"name": "a", "value": 1}, {"name": "a", "value": 2}]
                }})
            ),
            [
                "field `spec.map[1]`: has the same key (name: \"a\") as item [0], but a list of type \
                 `map` holds each key once",
                "field `spec.set[2]`: repeats item [0], but a list of type `set` holds each value once",
            ]
        );
    }

    #[test]
    fn any_of_needs_one_fitting_alternative_one_of_exactly_one_all_of_all_and_not_none() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {
                "any": {"type": "object",
                        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                        "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
                "one": {"type": "object",
                        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                        "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
                "all": {"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 5}]},
                "not": {"type": "string", "not": {"enum": ["forbidden"]}}
            }
        }));
        let fitting = json!({"spec": {"any": {"a": "x", "b": "y"}, "one": {"b": "y"}, "all": 3, "not": "ok"}});
        assert_fits(&root, fitting);
        assert_eq!(
            messages(
                &root,
                json!({"spec": {"any": {}, "one": {"a": "x", "b": "y"}, "all": 9, "not": "forbidden"}})
            ),
            [
                "field `spec.all`: must be at most 5, found 9",
                "field `spec.any`: fits none of the `anyOf` alternatives: 1) field `spec.any.a`: \
                 required, but missing; 2) field `spec.any.b`: required, but missing",
                "field `spec.not`: fits the schema under `not`, which it must not",
                "field `spec.one`: fits `oneOf` alternatives 1 and 2, but must fit exactly one",
            ]
        );
    }

    #[test]
    fn an_alternative_listing_some_fields_does_not_make_others_unknown() {
        let root = with_spec(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "anyOf": [{"properties": {"a": {"minLength": 1}}}]
        }));
        assert_fits(&root, json!({"spec": {"a": "x", "b": "y"}}));
        assert_eq!(paths(&root, json!({"spec": {"a": ""}})), ["spec"]);
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_reported_rather_than_followed() {
        let mut nested = schema(json!({"type": "string"}));
        let mut value = json!("leaf");
        for _ in 0..MAX_DEPTH + 10 {
            nested = JSONSchemaProps {
                type_: Some("array".to_owned()),
                items: Some(JSONSchemaPropsOrArray::Schema(Box::new(nested))),
                ..JSONSchemaProps::default()
            };
            value = json!([value]);
        }
        let problems = check(&nested, &value).expect_err("too deep");
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].path, "[0]".repeat(MAX_DEPTH + 1));
        assert_eq!(
            problems[0].message,
            format!("nested more than {MAX_DEPTH} levels deep, too deep to check")
        );
    }

    #[test]
    fn a_problem_displays_its_path_and_message() {
        let problem = Problem {
            path: "spec.x".to_owned(),
            message: "expected an integer, found a string".to_owned(),
        };
        assert_eq!(
            problem.to_string(),
            "field `spec.x`: expected an integer, found a string"
        );
        let root = Problem {
            path: String::new(),
            message: "expected an object, found a string".to_owned(),
        };
        assert_eq!(
            root.to_string(),
            "top level: expected an object, found a string"
        );
    }

    /// The storage version's schema of the PrometheusRule CRD that example-operator uses.
    fn prometheus_rule_schema() -> JSONSchemaProps {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/crds/monitoring.coreos.com/prometheusrules.yaml");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let value: Value = serde_saphyr::from_str(&text).expect("the CRD is YAML");
        let crd: CustomResourceDefinition = serde_json::from_value(value).expect("the CRD parses");
        crd.spec
            .versions
            .into_iter()
            .find(|version| version.storage)
            .and_then(|version| version.schema)
            .and_then(|validation| validation.open_api_v3_schema)
            .expect("a storage version with a schema")
    }

    /// A PrometheusRule body with one group holding `rule`.
    fn rule_body(rule: Value) -> Value {
        json!({"spec": {"groups": [{"name": "example.rules", "rules": [rule]}]}})
    }

    #[test]
    fn prometheus_rule_least_sample_and_example_operator_sample_fit_the_crd() {
        let root = prometheus_rule_schema();
        let least = crate::schema_sample::sample_with(&root, None).body;
        assert_fits(&root, least);
        let overlay = rule_body(json!({"alert": "AlwaysFiring", "expr": "vector(1)"}));
        let example = crate::schema_sample::sample_with(&root, Some(&overlay)).body;
        assert_fits(&root, example);
    }

    #[test]
    fn prometheus_rule_with_a_misspelt_or_mistyped_field_is_refused_by_path() {
        let root = prometheus_rule_schema();
        let misspelt = rule_body(json!({"alert": "AlwaysFiring", "exp": "vector(1)"}));
        assert_eq!(
            paths(&root, misspelt),
            [
                "spec.groups[0].rules[0].exp",
                "spec.groups[0].rules[0].expr"
            ]
        );
        let mistyped = rule_body(json!({"alert": "AlwaysFiring", "expr": "vector(1)", "for": 5}));
        assert_eq!(
            messages(&root, mistyped),
            ["field `spec.groups[0].rules[0].for`: expected a string, found an integer"]
        );
    }
}
