//! The smallest instance of a CRD schema: every required field, each at its least value.
//!
//! Generated operators carry it as `controller::sample`, so that the tests shipped with them
//! have an object to reconcile without the generator knowing anything about the CRD. It must
//! deserialize into the generated types (a required field is a non-`Option` Rust field) and,
//! for the cluster test, pass the API server's validation as far as a schema allows: enums,
//! lengths, bounds and item counts are honoured. A string with a `pattern` gets an example
//! read off the pattern where one can be ([`pattern_example`]); where none can, the API
//! server may reject it, and the cluster test then names the field.
//!
//! Where the least object breaks one of the CRD's own CEL rules, [`kept_variations`] changes it
//! the way the rule asks, as [`keeping`] reads the rule, and [`variations`] tries generic
//! changes.

pub mod keeping;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::{Map, Value};

use self::keeping::Hint;

/// The top-level fields of a sample object, without `apiVersion`, `kind` and `metadata`,
/// which the operator sets itself.
///
/// `spec` is always present when the schema has one, because kube's root types hold it as a
/// plain field whether or not the CRD marks it required.
///
/// It is cut short where it would outgrow [`MAX_SAMPLE_BYTES`]; [`sample_with`] says where.
pub fn sample_body(root: &JSONSchemaProps) -> Map<String, Value> {
    body_within(root, &mut Budget::new())
}

fn body_within(root: &JSONSchemaProps, budget: &mut Budget) -> Map<String, Value> {
    let mut body = match least(root, budget) {
        Value::Object(body) => body,
        _ => Map::new(),
    };
    for meta in ["apiVersion", "kind", "metadata"] {
        body.remove(meta);
    }
    if let Some(spec) = root.properties.as_ref().and_then(|p| p.get("spec")) {
        body.entry("spec")
            .or_insert_with(|| budget.property("spec", spec));
    }
    body
}

/// A sample body as [`sample_with`] built it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    pub body: Value,
    /// The first field (`spec.rules[]`) whose least value would have outgrown
    /// [`MAX_SAMPLE_BYTES`], and so was cut short: the body then has fewer items or a shorter
    /// string there than the schema asks for, and the API server refuses it.
    pub cut_at: Option<String>,
}

/// [`sample_body`] with `overlay` written over it: the manifest's `sample:`, for values a
/// schema cannot give (a string that must match a `pattern`, a reference that must resolve).
pub fn sample_with(root: &JSONSchemaProps, overlay: Option<&Value>) -> Sampled {
    let mut budget = Budget::new();
    let mut body = Value::Object(body_within(root, &mut budget));
    if let Some(overlay) = overlay {
        merge(&mut body, overlay);
    }
    Sampled {
        body,
        cut_at: budget.cut_at,
    }
}

/// The most bytes of JSON a sample is built to. The API server stores no object over 1.5 MiB
/// (etcd's request limit), and the least objects of 150 real CRDs take under 2 KiB; a schema
/// whose least object is larger (three nested `minItems: 1000` arrays, a `minLength` of
/// 2^33) would otherwise cost the generator all its memory.
pub const MAX_SAMPLE_BYTES: usize = 256 * 1024;

/// What is left of [`MAX_SAMPLE_BYTES`] while a sample is built, the field being built, and
/// where the sample was first cut short.
struct Budget {
    left: usize,
    path: Vec<String>,
    cut_at: Option<String>,
}

impl Budget {
    fn new() -> Self {
        Self {
            left: MAX_SAMPLE_BYTES,
            path: Vec::new(),
            cut_at: None,
        }
    }

    /// Takes `bytes` when they are left, and says whether they were.
    fn take(&mut self, bytes: usize) -> bool {
        let taken = bytes <= self.left;
        if taken {
            self.left -= bytes;
        }
        taken
    }

    /// Takes what is left of `wanted` bytes, at most, and returns how many it took; the
    /// field is recorded as cut short when that is fewer.
    fn take_up_to(&mut self, wanted: usize) -> usize {
        let taken = wanted.min(self.left);
        self.left -= taken;
        if taken < wanted {
            self.cut();
        }
        taken
    }

    /// Records the field being built as cut short, unless one was before: `spec.rules[]`.
    fn cut(&mut self) {
        if self.cut_at.is_none() {
            let mut at = String::new();
            for segment in &self.path {
                if !at.is_empty() && segment != "[]" {
                    at.push('.');
                }
                at.push_str(segment);
            }
            self.cut_at = Some(at);
        }
    }

    /// The least value of the property `name`, within what is left.
    fn property(&mut self, name: &str, schema: &JSONSchemaProps) -> Value {
        // The key, its quotes and the colon.
        self.take_up_to(name.len() + 3);
        self.path.push(name.to_owned());
        let value = least(schema, self);
        self.path.pop();
        value
    }
}

/// Objects one step away from `object` at the field `path` (`spec.rules[0]`, as CEL rules
/// and the API server name fields; empty for the object itself), for a sample to meet a rule
/// the least object breaks, such as "exactly one of these fields must be set": each optional
/// property added at its least value, each empty string or list given a least element, each
/// enum property given its other values. In the schema's order, so the first that helps is
/// always the same one.
///
/// A string field the rule is about gets `a` for an empty value, or an example of the
/// regular expression a rule of the form `self.matches('...')` names.
pub fn variations(root: &JSONSchemaProps, object: &Value, path: &str, rule: &str) -> Vec<Value> {
    let Some((schema, pointer)) = locate(root, path) else {
        return Vec::new();
    };
    if schema.type_.as_deref() == Some("string") {
        let current = object.pointer(&pointer).and_then(Value::as_str);
        let matched = rule
            .trim()
            .strip_prefix("self.matches('")
            .and_then(|rest| rest.strip_suffix("')"))
            .map(|literal| literal.replace("\\\\", "\\"))
            .and_then(|pattern| pattern_example(&pattern, 1));
        // Empty or left out (and so defaulted, often to ""): the least text that is not.
        let replacement = matched.or_else(|| {
            current
                .is_none_or(str::is_empty)
                .then(|| match string(schema, &mut Budget::new()) {
                    Value::String(text) if !text.is_empty() => text,
                    _ => "a".to_owned(),
                })
        });
        let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", ""));
        let mut changed = object.clone();
        return match (replacement, changed.pointer_mut(parent)) {
            (Some(replacement), Some(Value::Object(fields))) => {
                let key = key.replace("~1", "/").replace("~0", "~");
                fields.insert(key, Value::String(replacement));
                vec![changed]
            }
            _ => Vec::new(),
        };
    }
    let (Some(Value::Object(fields)), Some(properties)) =
        (object.pointer(&pointer), schema.properties.as_ref())
    else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut with = |name: &str, value: Value| {
        let mut changed = object.clone();
        if let Some(Value::Object(target)) = changed.pointer_mut(&pointer) {
            target.insert(name.to_owned(), value);
            found.push(changed);
        }
    };
    for (name, property) in properties {
        match fields.get(name) {
            None => with(name, sample(property)),
            Some(Value::String(text)) if text.is_empty() => with(name, Value::from("a")),
            Some(Value::Array(items)) if items.is_empty() => {
                if let Some(JSONSchemaPropsOrArray::Schema(item)) = &property.items {
                    with(name, Value::Array(vec![sample(item)]));
                }
            }
            Some(current) => {
                for other in property.enum_.iter().flatten() {
                    if other.0 != *current && !other.0.is_null() {
                        with(name, other.0.clone());
                    }
                }
            }
        }
    }
    found
}

/// Objects that take, at the field `path` where `rule` is attached, what the rule itself asks
/// for ([`keeping`]): one per way of keeping it, in the rule's order. A field the
/// rule names is created, with any objects on the way to it; a field the schema does not type
/// (`metadata`, in a CRD) takes the rule's value as it is.
pub fn kept_variations(
    root: &JSONSchemaProps,
    object: &Value,
    path: &str,
    rule: &str,
) -> Vec<Value> {
    let Some((schema, pointer)) = locate(root, path) else {
        return Vec::new();
    };
    keeping::alternatives(rule)
        .iter()
        .filter_map(|hints| {
            let mut changed = object.clone();
            let node = changed.pointer_mut(&pointer)?;
            for hint in hints {
                apply(schema, node, hint)?;
            }
            (changed != *object).then_some(changed)
        })
        .collect()
}

/// Makes `node`, of schema `schema`, do what `hint` asks at its path; `None` when it cannot.
fn apply(schema: &JSONSchemaProps, node: &mut Value, hint: &Hint) -> Option<()> {
    let (path, last) = match hint {
        Hint::Equal { path, .. }
        | Hint::Present { path }
        | Hint::Absent { path }
        | Hint::AtLeast { path, .. } => path.split_last().map(|(last, up)| (up, last))?,
    };
    let mut field_schema = Some(schema);
    let mut parent = node;
    for name in path {
        field_schema = field_schema.and_then(|s| s.properties.as_ref()?.get(name));
        let fields = parent.as_object_mut()?;
        parent = fields
            .entry(name.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    let field_schema = field_schema.and_then(|s| s.properties.as_ref()?.get(last));
    let fields = parent.as_object_mut()?;
    match hint {
        Hint::Equal { value, .. } => {
            fields.insert(last.clone(), value.clone());
        }
        Hint::Absent { .. } => {
            fields.remove(last);
        }
        Hint::Present { .. } => {
            let least = field_schema.map_or_else(|| Value::from("a"), sample);
            fields.entry(last.clone()).or_insert(least);
        }
        Hint::AtLeast { size, .. } => {
            // A size the rule's text gives, so capped as a schema's is: a rule the sample
            // cannot keep within the cap is left broken, and warned of.
            let size = (*size).min(MAX_SAMPLE_BYTES);
            let current = fields
                .get(last)
                .cloned()
                .or_else(|| field_schema.map(sample))
                .unwrap_or_else(|| Value::from(""));
            let grown = match current {
                Value::String(text) if text.chars().count() < size => {
                    Value::String(format!("{text}{}", "a".repeat(size - text.chars().count())))
                }
                Value::Object(mut entries) if entries.len() < size => {
                    // A map (`additionalProperties`): entries `a`, `b`, … at their least value.
                    let value = match field_schema.and_then(|s| s.additional_properties.as_ref()) {
                        Some(JSONSchemaPropsOrBool::Schema(value)) => sample(value),
                        _ => return None,
                    };
                    for key in (b'a'..=b'z').map(|c| char::from(c).to_string()) {
                        if entries.len() >= size {
                            break;
                        }
                        entries.entry(key).or_insert_with(|| value.clone());
                    }
                    Value::Object(entries)
                }
                Value::Array(mut items) if items.len() < size => {
                    let item = match field_schema.and_then(|s| s.items.as_ref()) {
                        Some(JSONSchemaPropsOrArray::Schema(item)) => sample(item),
                        _ => items.first().cloned()?,
                    };
                    let each = serde_json::to_string(&item).map_or(1, |text| text.len() + 1);
                    items.resize(size.min(items.len() + MAX_SAMPLE_BYTES / each), item);
                    Value::Array(items)
                }
                other => other,
            };
            fields.insert(last.clone(), grown);
        }
    }
    Some(())
}

/// The schema of the field `path` and its JSON pointer in the object.
fn locate<'a>(root: &'a JSONSchemaProps, path: &str) -> Option<(&'a JSONSchemaProps, String)> {
    let mut schema = root;
    let mut pointer = String::new();
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (name, indices) = segment.split_once('[').unwrap_or((segment, ""));
        schema = schema.properties.as_ref()?.get(name)?;
        pointer.push('/');
        pointer.push_str(&name.replace('~', "~0").replace('/', "~1"));
        for index in indices.split('[').filter(|i| !i.is_empty()) {
            let index: usize = index.trim_end_matches(']').parse().ok()?;
            schema = match &schema.items {
                Some(JSONSchemaPropsOrArray::Schema(item)) => item,
                _ => return None,
            };
            pointer.push_str(&format!("/{index}"));
        }
    }
    Some((schema, pointer))
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

/// The least value `schema` accepts, cut short where it would outgrow [`MAX_SAMPLE_BYTES`].
pub fn sample(schema: &JSONSchemaProps) -> Value {
    least(schema, &mut Budget::new())
}

/// [`sample`] within what is left of `budget`.
fn least(schema: &JSONSchemaProps, budget: &mut Budget) -> Value {
    let given = schema
        .default
        .as_ref()
        .map(|default| &default.0)
        .or_else(|| {
            let mut values = schema.enum_.iter().flatten();
            values.find(|v| !v.0.is_null()).map(|first| &first.0)
        });
    if let Some(given) = given {
        // A default or an enum value is the CRD's own text, within the CRD's cap: counted,
        // never cut.
        let bytes = given.to_string().len() + 1;
        budget.left = budget.left.saturating_sub(bytes);
        return given.clone();
    }
    let value = if schema.x_kubernetes_int_or_string == Some(true) {
        Value::from(schema.minimum.map_or(0, |m| m.ceil() as i64))
    } else {
        match schema.type_.as_deref() {
            Some("string") => string(schema, budget),
            Some("integer") => Value::from(least_number(schema) as i64),
            Some("number") => Value::from(least_number(schema)),
            Some("boolean") => Value::Bool(false),
            Some("array") => array(schema, budget),
            Some("object") => object(schema, budget),
            _ if schema.properties.is_some() => object(schema, budget),
            _ => untyped(schema, budget),
        }
    };
    if !matches!(value, Value::String(_) | Value::Array(_) | Value::Object(_)) {
        // A scalar: its few bytes, and the separator after it.
        budget.take_up_to(value.to_string().len() + 1);
    }
    value
}

fn string(schema: &JSONSchemaProps, budget: &mut Budget) -> Value {
    let wanted = usize::try_from(schema.min_length.unwrap_or(0)).unwrap_or(usize::MAX);
    // The quotes, and the text as long as what is left allows.
    let min_length = budget
        .take_up_to(wanted.saturating_add(2))
        .saturating_sub(2);
    let text = match schema.format.as_deref() {
        Some("date-time") => "1970-01-01T00:00:00Z".to_owned(),
        Some("date") => "1970-01-01".to_owned(),
        // Base64 of `a`: the empty string is also base64, but decodes to nothing, which a
        // sample should not hold where the schema asks for bytes.
        Some("byte") => "YQ==".to_owned(),
        // Formats the API server checks, each with a least value it accepts.
        Some("email") => "a@example.com".to_owned(),
        Some("uri") => "https://example.com".to_owned(),
        Some("ipv4") => "192.0.2.1".to_owned(),
        Some("ipv6") => "2001:db8::1".to_owned(),
        Some("cidr") => "192.0.2.0/24".to_owned(),
        Some("uuid") => "00000000-0000-0000-0000-000000000000".to_owned(),
        Some("duration") => "1s".to_owned(),
        // Not empty, for the same reason, unless the schema allows nothing longer.
        _ => {
            let least = if schema.max_length == Some(0) {
                0
            } else {
                min_length.max(1)
            };
            schema
                .pattern
                .as_deref()
                .and_then(|pattern| {
                    pattern_example(pattern, least).or_else(|| pattern_example(pattern, min_length))
                })
                .unwrap_or_else(|| "a".repeat(least))
        }
    };
    Value::String(text)
}

/// The longest pattern an example is looked for; longer ones are left to the API server.
const MAX_PATTERN: usize = 1024;

/// A short string that `pattern` matches and that is at least `min_length` long, when one
/// can be read off the pattern: each alternation takes its first branch, each repetition its
/// least count, each class a letter or digit where it has one. Patterns are Go's RE2 syntax,
/// which the Rust regex crate shares but for a few escapes; the example is confirmed with the
/// regex engine, and `None` is the answer whenever anything is in doubt.
pub fn pattern_example(pattern: &str, min_length: usize) -> Option<String> {
    use regex_syntax::hir::{Class, HirKind, Look};
    if pattern.len() > MAX_PATTERN {
        return None;
    }
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(64)
        .build()
        .parse(pattern)
        .ok()?;
    fn write(
        hir: &regex_syntax::hir::Hir,
        out: &mut String,
        budget: &mut usize,
        at_least: u32,
    ) -> Option<()> {
        *budget = budget.checked_sub(1)?;
        match hir.kind() {
            HirKind::Empty | HirKind::Look(Look::Start | Look::End) => {}
            HirKind::Look(_) => return None,
            HirKind::Literal(literal) => out.push_str(std::str::from_utf8(&literal.0).ok()?),
            HirKind::Class(Class::Unicode(class)) => {
                let ranges = class.ranges();
                let inside = |c: char| ranges.iter().any(|r| r.start() <= c && c <= r.end());
                let pick = ['a', 'x', '0', '1', 'A']
                    .into_iter()
                    .find(|c| inside(*c))
                    .or_else(|| (' '..='~').find(|c| inside(*c)))
                    .or_else(|| ranges.first().map(|r| r.start()))?;
                out.push(pick);
            }
            HirKind::Class(Class::Bytes(_)) => return None,
            HirKind::Repetition(repetition) => {
                let count = repetition
                    .min
                    .max(at_least.min(repetition.max.unwrap_or(1)));
                for _ in 0..count.min(64) {
                    write(&repetition.sub, out, budget, at_least)?;
                }
            }
            HirKind::Capture(capture) => write(&capture.sub, out, budget, at_least)?,
            HirKind::Concat(parts) => {
                for part in parts {
                    write(part, out, budget, at_least)?;
                }
            }
            HirKind::Alternation(branches) => write(branches.first()?, out, budget, at_least)?,
        }
        Some(())
    }
    let regex = regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .ok()?;
    // The least example first; then, for a longer one, every repetition at least once; then
    // letters added at the end, for as long as the pattern agrees.
    let mut candidates = Vec::new();
    for at_least in [0, 1] {
        let mut example = String::new();
        write(&hir, &mut example, &mut 10_000, at_least)?;
        candidates.push(example);
    }
    let mut padded = candidates[0].clone();
    while padded.chars().count() < min_length && padded.len() <= MAX_PATTERN {
        padded.push('a');
    }
    candidates.push(padded);
    candidates
        .into_iter()
        .find(|example| example.chars().count() >= min_length && regex.is_match(example))
}

fn least_number(schema: &JSONSchemaProps) -> f64 {
    match schema.minimum {
        Some(minimum) if schema.exclusive_minimum == Some(true) => minimum.floor() + 1.0,
        Some(minimum) => minimum.ceil(),
        None => 0.0,
    }
}

/// `minItems` copies of the least item, as many of them as the budget holds.
fn array(schema: &JSONSchemaProps, budget: &mut Budget) -> Value {
    let wanted = usize::try_from(schema.min_items.unwrap_or(0)).unwrap_or(usize::MAX);
    if wanted == 0 || !budget.take(2) {
        return Value::Array(Vec::new());
    }
    let before = budget.left;
    budget.path.push("[]".to_owned());
    let item = match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(items)) => least(items, budget),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items
            .first()
            .map_or(Value::Null, |item| least(item, budget)),
        None => Value::Null,
    };
    budget.path.pop();
    // Each copy costs what the first did, and a separator.
    let each = (before - budget.left).max(1);
    let copies = budget.take_up_to((wanted - 1).saturating_mul(each)) / each;
    Value::Array(vec![item; copies + 1])
}

/// Required properties, plus those the first `oneOf`/`anyOf` alternative requires: CRDs use
/// alternatives that list only `required` to say "one of these fields must be set".
fn object(schema: &JSONSchemaProps, budget: &mut Budget) -> Value {
    let mut object = Map::new();
    budget.take_up_to(2);
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
                .or_insert_with(|| budget.property(name, property));
        }
    }
    // `minProperties`: the first optional properties, in the schema's order, make up the count.
    let least = usize::try_from(schema.min_properties.unwrap_or(0)).unwrap_or(0);
    for (name, property) in properties {
        if object.len() >= least {
            break;
        }
        object
            .entry(name.clone())
            .or_insert_with(|| budget.property(name, property));
    }
    Value::Object(object)
}

/// No type: the first typed alternative, else an empty object (any JSON value is accepted).
fn untyped(schema: &JSONSchemaProps, budget: &mut Budget) -> Value {
    [&schema.one_of, &schema.any_of]
        .into_iter()
        .flatten()
        .flatten()
        .find(|alternative| alternative.type_.is_some())
        .map_or_else(|| Value::Object(Map::new()), |typed| least(typed, budget))
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
    fn a_least_object_over_the_cap_is_cut_short_and_says_where() {
        let nested = |depth: usize, items: u64| {
            let mut schema = json!({"type": "integer"});
            for _ in 0..depth {
                schema = json!({"type": "array", "minItems": items, "items": schema});
            }
            schema
        };
        let cases = [
            // The API server accepts this CRD; its least object is 10^9 integers.
            (nested(3, 1000), "spec.rules[]"),
            (nested(1, 1 << 40), "spec.rules"),
            (
                json!({"type": "string", "minLength": 1_u64 << 33}),
                "spec.rules",
            ),
        ];
        for (rules, cut_at) in cases {
            let root = schema(json!({
                "type": "object",
                "properties": {"spec": {
                    "type": "object",
                    "required": ["rules"],
                    "properties": {"rules": rules}
                }}
            }));
            let sampled = sample_with(&root, None);
            let bytes = serde_json::to_string(&sampled.body).expect("JSON").len();
            assert!(bytes <= MAX_SAMPLE_BYTES, "{cut_at}: {bytes} bytes");
            assert!(
                bytes > MAX_SAMPLE_BYTES / 2,
                "{cut_at}: the cap is used, {bytes} bytes"
            );
            assert_eq!(sampled.cut_at.as_deref(), Some(cut_at));
        }
        let small = schema(json!({"type": "object", "properties": {"spec": nested(2, 10)}}));
        assert_eq!(sample_with(&small, None).cut_at, None, "within the cap");
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
            sample_with(&root, Some(&overlay)).body,
            json!({"spec": {"host": "api.example.com", "port": 1}})
        );
        assert_eq!(
            sample_with(&root, None).body,
            json!({"spec": {"host": "a.example.com", "port": 1}})
        );
    }

    #[test]
    fn a_pattern_gives_an_example_it_matches() {
        let cases = [
            // Real patterns from CRDs: a duration, a URL scheme, an image reference.
            ("^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$", 0, "0ms"),
            ("^(http|https|ssh)://.*$", 0, "http://"),
            (
                "^[^\\.\\/]+(\\.[^\\.\\/]+)+(\\/[^\\/:@]+)+(:[^:@]+(@sha256.+)?|@sha256.+)$",
                0,
                "a.a/a:a",
            ),
            ("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", 3, "aaa"),
        ];
        for (pattern, min_length, example) in cases {
            assert_eq!(
                pattern_example(pattern, min_length).as_deref(),
                Some(example),
                "{pattern}"
            );
        }
        // Look-arounds are not RE2, and a pattern no string of that length matches has none.
        assert_eq!(pattern_example("^(?!x)a$", 0), None);
        assert_eq!(pattern_example("^ab$", 3), None);
        let root = schema(json!({"type": "string", "pattern": "^v[0-9]+$", "minLength": 1}));
        assert_eq!(sample(&root), json!("v0"));
        // Every part optional: still not the empty string (see the test below).
        let duration = schema(json!({"type": "string", "pattern": "^(([0-9]+)h)?(([0-9]+)m)?$"}));
        assert_eq!(sample(&duration), json!("0h0m"));
        assert_eq!(
            sample(&schema(json!({"type": "string", "format": "byte"}))),
            json!("YQ==")
        );
        let at_least = schema(json!({"type": "object", "minProperties": 1,
            "properties": {"b": {"type": "integer"}, "a": {"type": "string", "pattern": "^x$"}}}));
        assert_eq!(sample(&at_least), json!({"a": "x"}));
    }

    #[test]
    fn variations_change_one_thing_at_the_named_field() {
        let root = schema(json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "source": {"type": "object", "properties": {
                    "claim": {"type": "string"},
                    "content": {"type": "string"},
                    "mode": {"type": "string", "enum": ["A", "B"]}
                }},
                "rules": {"type": "array", "items": {"type": "object", "properties": {
                    "port": {"type": "integer", "minimum": 1}
                }}}
            }}}
        }));
        let object = json!({"spec": {"source": {"mode": "A", "claim": ""}, "rules": [{}]}});
        assert_eq!(
            variations(&root, &object, "spec.source", "has(self.content)"),
            [
                json!({"spec": {"source": {"mode": "A", "claim": "a"}, "rules": [{}]}}),
                json!({"spec": {"source": {"mode": "A", "claim": "", "content": "a"}, "rules": [{}]}}),
                json!({"spec": {"source": {"mode": "B", "claim": ""}, "rules": [{}]}}),
            ]
        );
        assert_eq!(
            variations(&root, &object, "spec.rules[0]", "has(self.port)"),
            [json!({"spec": {"source": {"mode": "A", "claim": ""}, "rules": [{"port": 1}]}})]
        );
        assert!(variations(&root, &object, "spec.missing", "true").is_empty());
        assert_eq!(
            variations(&root, &object, "spec.source.claim", "self.size() > 0"),
            [json!({"spec": {"source": {"mode": "A", "claim": "a"}, "rules": [{}]}})]
        );
        assert_eq!(
            variations(
                &root,
                &object,
                "spec.source.claim",
                r"self.matches('^v\\d+$')"
            ),
            [json!({"spec": {"source": {"mode": "A", "claim": "v0"}, "rules": [{}]}})]
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
        assert_eq!(sample(&spec), json!({"secretName": "a"}));
    }

    #[test]
    /// The API server accepts `""` for a string, but a sample is what a user reads and edits,
    /// and an empty string is what Go operators (`omitempty`) and many CEL rules
    /// (`self.name != ''`) take for a field left out: a sample that means to set a field gives
    /// it a value.
    fn no_string_is_empty_unless_the_schema_wants_it() {
        let text = |extra: Value| {
            let mut string = json!({"type": "string"});
            if let (Value::Object(fields), Value::Object(more)) = (&mut string, extra) {
                fields.extend(more);
            }
            sample(&schema(string))
        };
        assert_eq!(text(json!({})), json!("a"));
        assert_eq!(text(json!({"minLength": 3})), json!("aaa"));
        assert_eq!(text(json!({"maxLength": 0})), json!(""));
        assert_eq!(text(json!({"format": "email"})), json!("a@example.com"));
        assert_eq!(text(json!({"format": "ipv4"})), json!("192.0.2.1"));
        let required = schema(json!({"type": "object", "required": ["secretName"],
            "properties": {"secretName": {"type": "string"}}}));
        assert_eq!(sample(&required), json!({"secretName": "a"}));
    }
}
