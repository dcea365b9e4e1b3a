//! Objects made to break one CEL rule: a sample changed at the node the rule is attached
//! to, so that the corpus run can check that the API server refuses what kube-cel refuses.
//!
//! An API server only accepts or refuses a whole object, so agreement with it is judged per
//! object: for each rule the sample reaches, the sample itself (which passes) and one variant
//! that breaks that rule. The variant is found generically, never per CRD: a short list of
//! changes at the rule's node and its direct children is tried in a fixed order, each kept
//! only when it still fits the structural schema ([`crate::schema_check`]) and breaks the rule
//! in kube-cel's eyes. A variant that breaks this rule alone is preferred; else the first that
//! breaks it among others. When no single change does, pairs of changes at the rule's node
//! or at fields the rule names are tried (`self.scope == 'LegacyCluster' ||
//! !has(self.claimNames)` on a sample whose scope defaults to `LegacyCluster` needs both); the
//! first of a pair may misfit where the second mends it (a list item duplicated, then its key
//! changed). A rule no change in the list breaks (one the schema's own `enum`, `pattern` or
//! list keys already enforce, or one behind three conditions) has no variant, and is reported
//! as such.
//!
//! It lives in the generator, beside the rules' evaluation, because it reads the schema as
//! the generator does (k8s-openapi 0.28's `JSONSchemaProps`) and uses the generator's least
//! values ([`crate::schema_sample`]) and structural check.
//!
//! # The changes, in order
//!
//! - at a string: the rule's own string literals (`'//'` in `!self.value.contains('//')`,
//!   and an address, a CIDR or a URL for a rule calling `isIP`, `isCIDR` or `isURL`),
//!   `""`, another value, a long value (`maxLength` long, else [`LONG_STRING`]), keeping
//!   those its `pattern` matches, plus two examples of the pattern; an `enum` string takes its
//!   other values; a string with a `format` takes none, since the API server checks formats
//!   and these would not pass;
//! - at a number: `0`, `-1`, one more, a large value (`maximum`, else [`LARGE_NUMBER`]);
//! - at a boolean: the other value;
//! - at an array: emptied, its first item removed, its first item duplicated, an item added;
//!   at the rule's node, its first item changed as an object or a value;
//! - at an object: for each property in the schema's (name) order, removed when it is
//!   optional and present, changed as above when present (and, when the rule names it, its
//!   own properties too, down to [`MAX_NAMED_DEPTH`] levels), added at its least value (an
//!   array also with one item, or one of the rule's literals; a map with the entries
//!   `minProperties` asks for; a value also at each of the values above) when left out; a map
//!   gains or loses an entry.
//!
//! At the object itself `apiVersion`, `kind`, `metadata` and `status` are left alone: the API
//! server judges the first three with its own code, and drops `status` on a create.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::{Map, Value};

use super::{Broken, Checked, Evaluated, Rules};
use crate::{schema_check, schema_sample};

/// The length of a long string whose schema sets no `maxLength`: longer than a DNS name
/// (253), a label value (63) and most lengths rules compare with.
pub const LONG_STRING: usize = 1024;

/// A large number whose schema sets no `maximum`; it fits in an `int32`.
pub const LARGE_NUMBER: i64 = 1_000_000_000;

/// How many single changes are evaluated for one rule at most, so that a node with many
/// properties stays cheap; the order keeps the result the same on every run.
const MAX_CANDIDATES: usize = 400;

/// How many pairs of changes are evaluated for one rule at most, when no single change
/// breaks it.
const MAX_PAIRS: usize = 400;

/// How many first changes of a pair are tried at most, so that the second changes of each
/// stay cheap to build.
const MAX_PAIR_FIRSTS: usize = 64;

/// Fields at the object itself that are never changed.
const ROOT_FIELDS_LEFT_ALONE: [&str; 4] = ["apiVersion", "kind", "metadata", "status"];

/// An object that breaks a rule the sample meets.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// The changed object.
    pub object: Value,
    /// The change, for a person: ``/spec/maxReplicas` set to 1000000000``.
    pub change: String,
    /// The rules kube-cel says the object breaks, the one it was made for among them.
    pub broken: Vec<Broken>,
}

/// One rule the sample reaches and kube-cel evaluates, with the variant made to break it.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub rule: Evaluated,
    /// `None` when no change in the list breaks the rule (say, a rule that reads only
    /// `metadata`, or one that three changes together would break), or when the sample
    /// itself breaks it.
    pub variant: Option<Variant>,
}

/// The sample as kube-cel judges it, and a trial for each rule it evaluated.
#[derive(Debug, Clone, PartialEq)]
pub struct Trials {
    pub sample: Checked,
    pub trials: Vec<Trial>,
}

/// Judges `object` (the whole resource, as [`super::check`] takes it) against the CEL rules
/// of `schema` (one CRD version's `openAPIV3Schema`, as JSON), and looks for a variant of it
/// that breaks each rule it evaluated.
///
/// # Errors
///
/// A message when `schema` is not a schema the generator can read.
pub fn trials(schema: &Value, object: &Value) -> Result<Trials, String> {
    let rules = Rules::compile(schema);
    let sample = rules.check(object);
    if sample.evaluated.is_empty() {
        return Ok(Trials {
            sample,
            trials: Vec::new(),
        });
    }
    let typed: JSONSchemaProps = serde_json::from_value(schema.clone())
        .map_err(|e| format!("the schema could not be read: {e}"))?;
    let finder = Finder {
        rules: &rules,
        schema: &typed,
        sample: &sample,
        object,
        defaulted: rules.defaulted(object),
    };
    let trials = sample
        .evaluated
        .iter()
        .map(|rule| Trial {
            rule: rule.clone(),
            // A rule the sample already breaks is judged on the sample alone.
            variant: if sample.broken.iter().any(|broken| rule.is(broken)) {
                None
            } else {
                finder.variant(rule)
            },
        })
        .collect();
    Ok(Trials { sample, trials })
}

/// What looking for a variant needs, computed once per sample.
struct Finder<'a> {
    rules: &'a Rules<'a>,
    schema: &'a JSONSchemaProps,
    sample: &'a Checked,
    object: &'a Value,
    defaulted: Value,
}

/// A candidate variant: the changed object, the change for a person, and the JSON pointer of
/// the field whose value changed.
struct Candidate {
    object: Value,
    change: String,
    at: String,
}

impl Finder<'_> {
    /// The first candidate that breaks `rule` alone, else the first that breaks it; failing
    /// both, the same among pairs of changes at the rule's node or at fields it names.
    fn variant(&self, rule: &Evaluated) -> Option<Variant> {
        let base = materialized(self.object, &self.defaulted, &rule.node)?;
        let hints = Hints::of(&rule.rule);
        let before = self.misfits(&base);
        let (firsts, misfits): (Vec<_>, Vec<_>) = self
            .candidates(&base, rule, &hints)
            .into_iter()
            .partition(|candidate| self.fits(&candidate.object, &before));
        let mut fallback = None;
        for candidate in firsts.iter().take(MAX_CANDIDATES) {
            match self.breaks(rule, candidate, None) {
                Some((variant, true)) => return Some(variant),
                Some((variant, false)) => {
                    fallback.get_or_insert(variant);
                }
                None => {}
            }
        }
        if fallback.is_some() {
            return fallback;
        }
        // A first change may misfit where a second, at any field, mends it: a list item
        // duplicated, then its key changed, breaks a rule that compares items.
        let named = |candidate: &Candidate| candidate.at == rule.node || hints.names(&candidate.at);
        let fitting = firsts.iter().map(|first| (first, true));
        let pairs = fitting
            .chain(misfits.iter().map(|first| (first, false)))
            .filter(|(first, _)| named(first))
            .take(MAX_PAIR_FIRSTS)
            .flat_map(|(first, fits)| {
                let seconds = self.candidates(&first.object, rule, &hints);
                seconds
                    .into_iter()
                    .filter(move |second| (named(second) || !fits) && second.at != first.at)
                    .filter(|second| self.fits(&second.object, &before))
                    .map(move |second| (first, second))
            });
        for (first, second) in pairs.take(MAX_PAIRS) {
            match self.breaks(rule, &second, Some(first)) {
                Some((variant, true)) => return Some(variant),
                Some((variant, false)) => {
                    fallback.get_or_insert(variant);
                }
                None => {}
            }
        }
        fallback
    }

    /// The structural problems of `object`.
    fn misfits(&self, object: &Value) -> Vec<schema_check::Problem> {
        schema_check::check(self.schema, object)
            .err()
            .unwrap_or_default()
    }

    /// Whether `object` fits the structural schema as well as the sample does: no problem
    /// that is not in `before`.
    fn fits(&self, object: &Value, before: &[schema_check::Problem]) -> bool {
        self.misfits(object)
            .iter()
            .all(|problem| before.contains(problem))
    }

    /// The candidates at the rule's node of `base`, fitting or not.
    fn candidates(&self, base: &Value, rule: &Evaluated, hints: &Hints) -> Vec<Candidate> {
        schema_at(self.schema, base, &rule.node)
            .map(|schema| candidates(schema, base, &rule.node, hints))
            .unwrap_or_default()
    }

    /// The variant `candidate` makes (after `first`, when it is the second of two changes)
    /// when it breaks `rule`, and whether it breaks that rule alone.
    fn breaks(
        &self,
        rule: &Evaluated,
        candidate: &Candidate,
        first: Option<&Candidate>,
    ) -> Option<(Variant, bool)> {
        let checked = self.rules.check(&candidate.object);
        if !checked.broken.iter().any(|broken| rule.is(broken)) {
            return None;
        }
        // Alone: no rule broken but this one and those the sample already broke, and no rule
        // kube-cel could not evaluate that the sample did not have.
        let alone = checked
            .broken
            .iter()
            .all(|broken| rule.is(broken) || self.sample.broken.contains(broken))
            && checked.warnings.len() == self.sample.warnings.len();
        let change = match first {
            Some(first) => format!("{}, and {}", first.change, candidate.change),
            None => candidate.change.clone(),
        };
        let variant = Variant {
            object: candidate.object.clone(),
            change,
            broken: checked.broken,
        };
        Some((variant, alone))
    }
}

/// Strings the Kubernetes CEL library's parsers take (`!isIP(h)` is broken by an address),
/// by the function's name.
const PARSED: [(&str, &str); 6] = [
    ("isIP", "192.0.2.1"),
    ("ip", "192.0.2.1"),
    ("isCIDR", "192.0.2.0/24"),
    ("cidr", "192.0.2.0/24"),
    ("isURL", "https://example.com/a"),
    ("url", "https://example.com/a"),
];

/// What a rule's text says about the values that may break it: the string literals it
/// compares with (`'LegacyCluster'`, `'//'`, and an address for `isIP`) and the names it
/// reads (`scope`, `tls`).
#[derive(Debug, Default)]
struct Hints {
    literals: Vec<String>,
    names: BTreeSet<String>,
}

impl Hints {
    fn of(rule: &str) -> Self {
        let mut hints = Self::default();
        let mut chars = rule.chars().peekable();
        let mut word = String::new();
        while let Some(c) = chars.next() {
            if c.is_ascii_alphanumeric() || c == '_' {
                word.push(c);
                continue;
            }
            if !word.is_empty() {
                hints.names.insert(std::mem::take(&mut word));
            }
            if c == '\'' || c == '"' {
                let mut literal = String::new();
                let mut closed = false;
                while let Some(inner) = chars.next() {
                    match inner {
                        '\\' => literal.extend(chars.next()),
                        quote if quote == c => {
                            closed = true;
                            break;
                        }
                        other => literal.push(other),
                    }
                }
                if closed && !hints.literals.contains(&literal) {
                    hints.literals.push(literal);
                }
            }
        }
        if !word.is_empty() {
            hints.names.insert(word);
        }
        for (function, value) in PARSED {
            if hints.names.contains(function) && !hints.is_literal(value) {
                hints.literals.push(value.to_owned());
            }
        }
        hints
    }

    fn is_literal(&self, value: &str) -> bool {
        self.literals.iter().any(|literal| literal == value)
    }

    /// Whether the rule names the field at `pointer` (a list's items by the list's name).
    fn names(&self, pointer: &str) -> bool {
        pointer
            .rsplit('/')
            .find(|segment| segment.parse::<usize>().is_err())
            .is_some_and(|name| self.names.contains(&unescape(name)))
    }
}
/// `object` with the node at `pointer` present: where the object leaves out the node or one
/// of its parents (a rule reached it through a default), the first missing one is taken from
/// `defaulted`. `None` when the node is in neither.
fn materialized(object: &Value, defaulted: &Value, pointer: &str) -> Option<Value> {
    let mut out = object.clone();
    let mut at = String::new();
    for segment in pointer.split('/').skip(1) {
        let next = format!("{at}/{segment}");
        if out.pointer(&next).is_none() {
            let value = defaulted.pointer(&next)?.clone();
            match out.pointer_mut(&at)? {
                Value::Object(fields) => {
                    fields.insert(unescape(segment), value);
                }
                _ => return None,
            }
            return Some(out);
        }
        at = next;
    }
    Some(out)
}

/// The schema of the node at `pointer` in `object`.
fn schema_at<'s>(
    root: &'s JSONSchemaProps,
    object: &Value,
    pointer: &str,
) -> Option<&'s JSONSchemaProps> {
    let mut schema = root;
    let mut value = object;
    for segment in pointer.split('/').skip(1) {
        let key = unescape(segment);
        schema = match (value, &schema.items) {
            (Value::Array(items), Some(JSONSchemaPropsOrArray::Schema(item))) => {
                value = items.get(key.parse::<usize>().ok()?)?;
                item
            }
            (Value::Object(fields), _) => {
                value = fields.get(&key)?;
                match schema.properties.as_ref().and_then(|p| p.get(&key)) {
                    Some(property) => property,
                    None => match &schema.additional_properties {
                        Some(JSONSchemaPropsOrBool::Schema(values)) => values,
                        _ => return None,
                    },
                }
            }
            _ => return None,
        };
    }
    Some(schema)
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Every change at the node at `pointer` and its direct children, in order, each with its
/// description; none is checked yet.
fn candidates(
    schema: &JSONSchemaProps,
    base: &Value,
    pointer: &str,
    hints: &Hints,
) -> Vec<Candidate> {
    let mut out = Candidates {
        base,
        hints,
        found: Vec::new(),
        seen: BTreeSet::new(),
    };
    match base.pointer(pointer) {
        Some(Value::Object(fields)) => out.object(schema, fields, pointer, 0),
        Some(Value::Array(items)) => {
            out.array(schema, items, pointer);
            // A rule on a list reads its items' fields (`self.all(l, has(l.tls))`).
            if let (Some(JSONSchemaPropsOrArray::Schema(item)), Some(first)) =
                (&schema.items, items.first())
            {
                let at = format!("{pointer}/0");
                match first {
                    Value::Object(fields) => out.object(item, fields, &at, 1),
                    other => out.child(item, other, &at),
                }
            }
        }
        Some(current) => out.scalar(schema, Some(current), pointer),
        None => {}
    }
    out.found
}

/// Collects candidates, each a copy of `base` changed at one place, each object once.
struct Candidates<'a> {
    base: &'a Value,
    hints: &'a Hints,
    found: Vec<Candidate>,
    seen: BTreeSet<String>,
}

impl Candidates<'_> {
    /// `base` with the value at `pointer` set to `value` (`None`: removed).
    fn set(&mut self, pointer: &str, value: Option<Value>, change: String) {
        let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", ""));
        let mut changed = self.base.clone();
        let done = match (changed.pointer_mut(parent), value) {
            (Some(Value::Object(fields)), Some(value)) => {
                fields.insert(unescape(key), value);
                true
            }
            (Some(Value::Object(fields)), None) => fields.remove(&unescape(key)).is_some(),
            (Some(Value::Array(items)), value) => match (key.parse::<usize>(), value) {
                (Ok(index), Some(value)) if index < items.len() => {
                    items[index] = value;
                    true
                }
                (Ok(index), None) if index < items.len() => {
                    items.remove(index);
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if done && changed != *self.base && self.seen.insert(changed.to_string()) {
            self.found.push(Candidate {
                object: changed,
                change,
                at: pointer.to_owned(),
            });
        }
    }

    /// The changes at an object's properties, `depth` levels below the rule's node; below
    /// a property the rule names, its own properties' too, down to [`MAX_NAMED_DEPTH`].
    fn object(
        &mut self,
        schema: &JSONSchemaProps,
        fields: &Map<String, Value>,
        pointer: &str,
        depth: usize,
    ) {
        let required = schema.required.iter().flatten().collect::<Vec<_>>();
        for (name, property) in schema.properties.iter().flatten() {
            if pointer.is_empty() && ROOT_FIELDS_LEFT_ALONE.contains(&name.as_str()) {
                continue;
            }
            let at = format!("{pointer}/{}", escape(name));
            match fields.get(name) {
                Some(current) => {
                    if !required.contains(&name) {
                        self.set(&at, None, format!("`{at}` removed"));
                    }
                    self.child(property, current, &at);
                    if depth < MAX_NAMED_DEPTH && self.hints.names.contains(name) {
                        self.below(property, current, &at, depth + 1);
                    }
                }
                None => {
                    let mut values = added(property);
                    // A list of strings the rule searches (`exists(k, k.contains('/'))`).
                    if let Some(JSONSchemaPropsOrArray::Schema(item)) = &property.items {
                        let literals = scalar_values(item, None, &self.hints.literals)
                            .into_iter()
                            .filter(|v| v.as_str().is_some_and(|v| self.hints.is_literal(v)));
                        values.extend(literals.map(|v| Value::Array(vec![v])));
                    }
                    for added in values {
                        self.set(&at, Some(added.clone()), format!("`{at}` added as {added}"));
                    }
                    if !matches!(property.type_.as_deref(), Some("object" | "array")) {
                        self.scalar(property, None, &at);
                    }
                }
            }
        }
        if let Some(JSONSchemaPropsOrBool::Schema(values)) = &schema.additional_properties {
            let known = schema.properties.as_ref();
            let mut entries = fields
                .iter()
                .filter(|(key, _)| known.is_none_or(|p| !p.contains_key(*key)))
                .peekable();
            if entries.peek().is_none() {
                let at = format!("{pointer}/key");
                for added in added(values) {
                    self.set(&at, Some(added.clone()), format!("`{at}` added as {added}"));
                }
            }
            for (key, current) in entries {
                let at = format!("{pointer}/{}", escape(key));
                self.set(&at, None, format!("`{at}` removed"));
                self.child(values, current, &at);
            }
        }
    }

    /// The changes inside a property the rule names: its fields, or its first item's.
    fn below(&mut self, schema: &JSONSchemaProps, current: &Value, pointer: &str, depth: usize) {
        match (current, &schema.items) {
            (Value::Object(fields), _) => self.object(schema, fields, pointer, depth),
            (Value::Array(items), Some(JSONSchemaPropsOrArray::Schema(item))) => {
                if let Some(Value::Object(fields)) = items.first() {
                    self.object(item, fields, &format!("{pointer}/0"), depth);
                }
            }
            _ => {}
        }
    }

    /// The changes at a direct child: its value, not its own children.
    fn child(&mut self, schema: &JSONSchemaProps, current: &Value, pointer: &str) {
        match current {
            Value::Array(items) => self.array(schema, items, pointer),
            Value::Object(_) => {
                for replacement in [schema_sample::sample(schema), Value::Object(Map::new())] {
                    let change = format!("`{pointer}` replaced by {replacement}");
                    self.set(pointer, Some(replacement), change);
                }
            }
            scalar => self.scalar(schema, Some(scalar), pointer),
        }
    }

    /// The changes at an array itself.
    fn array(&mut self, schema: &JSONSchemaProps, list: &[Value], pointer: &str) {
        let with = |list: Vec<Value>| Some(Value::Array(list));
        if !list.is_empty() {
            self.set(pointer, with(Vec::new()), format!("`{pointer}` emptied"));
        }
        if list.len() > 1 {
            let rest = list[1..].to_vec();
            self.set(pointer, with(rest), format!("`{pointer}/0` removed"));
        }
        if let Some(first) = list.first() {
            let mut twice = list.to_vec();
            twice.insert(0, first.clone());
            self.set(pointer, with(twice), format!("`{pointer}/0` duplicated"));
        }
        if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items {
            let added = schema_sample::sample(item);
            let mut longer = list.to_vec();
            longer.push(added.clone());
            self.set(
                pointer,
                with(longer),
                format!("`{pointer}` given an item {added}"),
            );
        }
    }

    /// The changes at a string, number or boolean (`current`: `None` when left out).
    fn scalar(&mut self, schema: &JSONSchemaProps, current: Option<&Value>, pointer: &str) {
        for value in scalar_values(schema, current, &self.hints.literals) {
            let change = format!("`{pointer}` set to {value}");
            self.set(pointer, Some(value), change);
        }
    }
}

/// The values a field left out is added at: its least value; a map at its least is given
/// the entries its `minProperties` asks for, and an array is also added with one item.
fn added(schema: &JSONSchemaProps) -> Vec<Value> {
    let mut least = schema_sample::sample(schema);
    let minimum = schema.min_properties.and_then(|m| usize::try_from(m).ok());
    if let (Value::Object(fields), Some(JSONSchemaPropsOrBool::Schema(values)), Some(minimum)) =
        (&mut least, &schema.additional_properties, minimum)
    {
        for number in 0..minimum.min(MAX_ENTRIES) {
            if fields.len() >= minimum {
                break;
            }
            fields
                .entry(format!("key{number}"))
                .or_insert_with(|| schema_sample::sample(values));
        }
    }
    let mut values = vec![least];
    if let (Some(Value::Array(items)), Some(JSONSchemaPropsOrArray::Schema(item))) =
        (values.first(), &schema.items)
        && items.is_empty()
    {
        values.push(Value::Array(vec![schema_sample::sample(item)]));
    }
    values
}

/// How many levels below the rule's node changes reach, through properties the rule names.
pub const MAX_NAMED_DEPTH: usize = 3;

/// The most map entries a field is added with.
const MAX_ENTRIES: usize = 16;

/// The values a scalar field is tried at, in order, without its current one; `literals` are
/// the string literals of the rule.
fn scalar_values(
    schema: &JSONSchemaProps,
    current: Option<&Value>,
    literals: &[String],
) -> Vec<Value> {
    let mut values: Vec<Value> = Vec::new();
    let enumerated = schema.enum_.as_ref().is_some_and(|e| !e.is_empty());
    if enumerated {
        let others = schema.enum_.iter().flatten().map(|v| &v.0);
        values.extend(others.filter(|v| !v.is_null()).cloned());
    } else {
        let int_or_string = schema.x_kubernetes_int_or_string == Some(true);
        let kind = match (schema.type_.as_deref(), current) {
            (_, Some(Value::String(_))) if int_or_string => Some("string"),
            _ if int_or_string => Some("integer"),
            (kind, _) => kind,
        };
        match kind {
            Some("string") if schema.format.as_deref().is_none_or(str::is_empty) => {
                values.extend(strings(schema, literals).into_iter().map(Value::String));
            }
            Some("integer") => {
                let next = current
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    .saturating_add(1);
                let large = schema.maximum.map_or(LARGE_NUMBER, |m| m.floor() as i64);
                values.extend([0, -1, next, large].map(Value::from));
            }
            Some("number") => {
                let large = schema.maximum.unwrap_or(LARGE_NUMBER as f64);
                values.extend([0.0, -1.0, large].map(Value::from));
            }
            Some("boolean") => {
                let flipped = !current.and_then(Value::as_bool).unwrap_or(false);
                values.extend([Value::Bool(flipped), Value::Bool(!flipped)]);
            }
            _ => {}
        }
    }
    let mut unique: Vec<Value> = Vec::new();
    for value in values {
        if Some(&value) != current && !unique.contains(&value) {
            unique.push(value);
        }
    }
    unique
}

/// The rule's literals, the empty string, another value and a long value (`maxLength` long,
/// else [`LONG_STRING`]); for a string with a `pattern`, only those the pattern matches, and
/// two examples of the pattern.
fn strings(schema: &JSONSchemaProps, literals: &[String]) -> Vec<String> {
    let long = schema
        .max_length
        .and_then(|max| usize::try_from(max).ok())
        .unwrap_or(LONG_STRING)
        .min(LONG_STRING);
    let mut strings = literals.to_vec();
    strings.extend([String::new(), "Other/Value 0!".to_owned(), "a".repeat(long)]);
    let Some(pattern) = schema.pattern.as_deref() else {
        return strings;
    };
    strings.extend(
        [0, long]
            .into_iter()
            .filter_map(|length| schema_sample::pattern_example(pattern, length)),
    );
    // Go's RE2 and the regex crate share their syntax but for a few escapes; a pattern the
    // regex crate cannot read leaves only the examples, which it confirmed.
    match regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
    {
        Ok(regex) => strings.retain(|s| regex.is_match(s)),
        Err(_) => strings.clear(),
    }
    strings
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object_with(spec: Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "sample"}, "spec": spec})
    }

    fn schema_with(spec: Value) -> Value {
        json!({"type": "object", "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec
        }})
    }

    #[test]
    fn a_variant_breaks_a_min_at_most_max_rule_and_only_that_rule() {
        let schema = schema_with(json!({
            "type": "object",
            "required": ["minReplicas", "maxReplicas"],
            "x-kubernetes-validations": [
                {"rule": "self.minReplicas <= self.maxReplicas", "message": "min above max"}
            ],
            "properties": {
                "minReplicas": {"type": "integer", "minimum": 0},
                "maxReplicas": {"type": "integer", "minimum": 0}
            }
        }));
        let object = object_with(json!({"minReplicas": 0, "maxReplicas": 0}));
        let found = trials(&schema, &object).unwrap();
        assert!(found.sample.broken.is_empty());
        let [trial] = found.trials.as_slice() else {
            panic!("{:?}", found.trials)
        };
        assert_eq!(trial.rule.path, "spec");
        let variant = trial.variant.as_ref().expect("a variant");
        // maxReplicas comes first; no value of it breaks the rule, 1 for minReplicas does.
        assert_eq!(variant.change, "`/spec/minReplicas` set to 1");
        assert_eq!(
            variant.object["spec"],
            json!({"minReplicas": 1, "maxReplicas": 0})
        );
        assert_eq!(variant.broken.len(), 1);
        assert!(trial.rule.is(&variant.broken[0]), "{:?}", variant.broken);
    }

    #[test]
    fn a_rule_no_change_can_break_is_reported_without_a_variant() {
        let schema = schema_with(json!({
            "type": "object",
            "required": ["name"],
            "x-kubernetes-validations": [{"rule": "size(self.name) >= 0"}],
            "properties": {"name": {"type": "string"}}
        }));
        let found = trials(&schema, &object_with(json!({"name": "a"}))).unwrap();
        assert_eq!(found.trials.len(), 1);
        assert_eq!(found.trials[0].variant, None);
    }

    #[test]
    fn a_change_the_structural_schema_refuses_is_never_a_variant() {
        let schema = schema_with(json!({
            "type": "object",
            "required": ["port"],
            "x-kubernetes-validations": [{"rule": "self.port < 1000", "message": "a low port"}],
            "properties": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}}
        }));
        let found = trials(&schema, &object_with(json!({"port": 1}))).unwrap();
        let variant = found.trials[0].variant.as_ref().expect("a variant");
        // 0 and -1 are under the minimum and 1000000000 over the maximum: the maximum it is.
        assert_eq!(variant.change, "`/spec/port` set to 65535");
    }

    #[test]
    fn a_variant_breaking_the_rule_alone_is_preferred_to_an_earlier_one_breaking_more() {
        let schema = schema_with(json!({
            "type": "object",
            "required": ["a", "b"],
            "x-kubernetes-validations": [
                {"rule": "self.a + self.b < 100"},
                {"rule": "self.a < 100"}
            ],
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}
        }));
        let found = trials(&schema, &object_with(json!({"a": 0, "b": 0}))).unwrap();
        let sum = &found.trials[0];
        assert_eq!(sum.rule.rule, "self.a + self.b < 100");
        let variant = sum.variant.as_ref().expect("a variant");
        // A large `a` breaks both rules; a large `b` breaks the sum alone.
        assert_eq!(variant.change, "`/spec/b` set to 1000000000");
        assert_eq!(variant.broken.len(), 1);
    }

    #[test]
    fn a_rule_on_list_items_is_broken_at_the_first_item() {
        let schema = schema_with(json!({
            "type": "object",
            "properties": {"ports": {"type": "array", "items": {
                "type": "integer",
                "x-kubernetes-validations": [{"rule": "self > 0", "message": "ports are positive"}]
            }}}
        }));
        let found = trials(&schema, &object_with(json!({"ports": [80, 443]}))).unwrap();
        let trial = &found.trials[0];
        assert_eq!(
            (trial.rule.path.as_str(), trial.rule.node.as_str()),
            ("spec.ports[0]", "/spec/ports/0")
        );
        let variant = trial.variant.as_ref().expect("a variant");
        assert_eq!(variant.object["spec"]["ports"], json!([0, 443]));
    }

    #[test]
    fn a_node_the_sample_has_only_by_default_is_written_into_the_variant() {
        let schema = schema_with(json!({
            "type": "object",
            "properties": {"tls": {
                "type": "object",
                "default": {"mode": "strict"},
                "required": ["mode"],
                "x-kubernetes-validations": [{"rule": "self.mode == 'strict'"}],
                "properties": {"mode": {"type": "string", "enum": ["strict", "loose"]}}
            }}
        }));
        let found = trials(&schema, &object_with(json!({}))).unwrap();
        let variant = found.trials[0].variant.as_ref().expect("a variant");
        assert_eq!(variant.object["spec"], json!({"tls": {"mode": "loose"}}));
    }

    #[test]
    fn a_string_literal_of_the_rule_is_tried_first() {
        let schema = schema_with(json!({
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "!has(self.selector) || !self.selector.contains('global(')"}
            ],
            "properties": {"selector": {"type": "string"}}
        }));
        let found = trials(&schema, &object_with(json!({"selector": "all()"}))).unwrap();
        let variant = found.trials[0].variant.as_ref().expect("a variant");
        assert_eq!(variant.change, "`/spec/selector` set to \"global(\"");
    }

    #[test]
    fn a_rule_two_changes_break_gets_a_pair_at_fields_it_names() {
        // The sample's scope defaults to the one value that lets claimNames be.
        let schema = schema_with(json!({
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.scope == 'Legacy' || !has(self.claimNames)"}
            ],
            "properties": {
                "scope": {"type": "string", "enum": ["Legacy", "Namespaced"], "default": "Legacy"},
                "claimNames": {"type": "object", "properties": {"kind": {"type": "string"}}},
                "other": {"type": "string"}
            }
        }));
        let found = trials(&schema, &object_with(json!({}))).unwrap();
        let variant = found.trials[0].variant.as_ref().expect("a variant");
        assert_eq!(
            variant.change,
            "`/spec/claimNames` added as {}, and `/spec/scope` set to \"Namespaced\""
        );
        assert_eq!(
            variant.object["spec"],
            json!({"claimNames": {}, "scope": "Namespaced"})
        );
    }

    #[test]
    fn a_list_item_duplicated_then_given_another_key_breaks_a_rule_comparing_items() {
        let schema = schema_with(json!({
            "type": "object",
            "properties": {"listeners": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "x-kubernetes-validations": [
                    {"rule": "self.all(a, self.exists_one(b, a.port == b.port))", "message": "one port each"}
                ],
                "items": {
                    "type": "object",
                    "required": ["name", "port"],
                    "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}
                }
            }}
        }));
        let object = object_with(json!({"listeners": [{"name": "a", "port": 1}]}));
        let found = trials(&schema, &object).unwrap();
        let variant = found.trials[0].variant.as_ref().expect("a variant");
        assert_eq!(
            variant.change,
            "`/spec/listeners/0` duplicated, and `/spec/listeners/0/name` set to \"\""
        );
        assert_eq!(
            variant.object["spec"]["listeners"],
            json!([{"name": "", "port": 1}, {"name": "a", "port": 1}])
        );
    }

    #[test]
    fn a_list_of_strings_is_added_holding_a_literal_the_rule_looks_for() {
        let schema = schema_with(json!({
            "type": "object",
            "x-kubernetes-validations": [{
                "rule": "!(has(self.addresses) && self.addresses.exists(k, k.contains('/')) && self.resolution != 'STATIC')"
            }],
            "properties": {
                "addresses": {"type": "array", "items": {"type": "string"}},
                "resolution": {"type": "string", "enum": ["STATIC", "DNS"], "default": "STATIC"}
            }
        }));
        let found = trials(&schema, &object_with(json!({}))).unwrap();
        let variant = found.trials[0].variant.as_ref().expect("a variant");
        assert_eq!(
            variant.object["spec"],
            json!({"addresses": ["/"], "resolution": "DNS"})
        );
    }

    #[test]
    fn a_rule_calling_is_ip_is_broken_by_an_address() {
        let schema = schema_with(json!({
            "type": "object",
            "properties": {"hostnames": {
                "type": "array",
                "x-kubernetes-validations": [{"rule": "self.all(h, !isIP(h))"}],
                "items": {"type": "string", "pattern": "^[a-z0-9.]+$"}
            }}
        }));
        let found = trials(&schema, &object_with(json!({"hostnames": ["a"]}))).unwrap();
        let variant = found.trials[0].variant.as_ref().expect("a variant");
        assert_eq!(variant.object["spec"]["hostnames"], json!(["192.0.2.1"]));
    }

    #[test]
    fn a_map_is_added_with_the_entries_its_min_properties_asks_for() {
        let schema = schema_with(json!({
            "type": "object",
            "x-kubernetes-validations": [{"rule": "!has(self.ports)", "message": "no ports"}],
            "properties": {"ports": {
                "type": "object",
                "minProperties": 1,
                "additionalProperties": {"type": "integer"}
            }}
        }));
        let found = trials(&schema, &object_with(json!({}))).unwrap();
        let variant = found.trials[0].variant.as_ref().expect("a variant");
        assert_eq!(variant.object["spec"], json!({"ports": {"key0": 0}}));
    }

    #[test]
    fn a_string_with_a_pattern_or_a_format_only_takes_values_it_allows() {
        let patterned: JSONSchemaProps = serde_json::from_value(
            json!({"type": "string", "pattern": "^[a-z]+$", "maxLength": 5}),
        )
        .unwrap();
        let values = scalar_values(
            &patterned,
            Some(&json!("a")),
            &["9".to_owned(), "b".to_owned()],
        );
        assert_eq!(values, [json!("b"), json!("aaaaa")]);
        let formatted: JSONSchemaProps =
            serde_json::from_value(json!({"type": "string", "format": "duration"})).unwrap();
        assert!(scalar_values(&formatted, Some(&json!("1s")), &[]).is_empty());
    }
}
