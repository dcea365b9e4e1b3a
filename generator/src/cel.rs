//! A CRD's CEL rules (`x-kubernetes-validations`) evaluated on an object before any API
//! server sees it, with kube-cel, the evaluator behind kube's `cel` feature.
//!
//! kopium drops the rules, so a generated crate's types do not know them. The API server
//! (the project's e2e and corpus run kube-apiserver 1.37, which enforces them) refuses an
//! object that breaks one, but only once it is sent: checking here says which rule and field
//! before then, for the sample a generated crate's tests create and for the objects the e2e
//! creates. The generator, the corpus run and the e2e all call [`check`], so they agree on
//! what passes, and the corpus run checks that the API server agrees too ([`breaking`]).
//!
//! # What counts
//!
//! Rules are counted once each, however many objects or list items they run on:
//!
//! - **evaluated**: ran on the object, and gave `true` or `false`;
//! - **warned**: kube-cel cannot compile them, or cannot evaluate them (a function or macro
//!   it lacks, a result that is not a boolean); they are reported, never held against the
//!   object. A rule that fails on the object (reads a field the object leaves out) breaks it,
//!   as it does on the API server;
//! - **skipped**: transition rules, which compare with `oldSelf`: an object being created has
//!   no old self, so the API server skips them too (unless `optionalOldSelf` is set);
//! - **not reached**: rules on fields the object leaves out, which the API server does not run
//!   either.

pub mod breaking;
mod cost;
/// What a rule asks of an object, kept beside the sample builder that reads it.
pub use crate::schema_sample::keeping;

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use kube_cel::{CompilationError, CompiledSchema, ErrorKind};
use serde_json::Value;

use crate::limits;
use crate::text::Text;

/// How many of a schema's rules an object met, and how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub evaluated: usize,
    pub warned: usize,
    pub skipped: usize,
    pub not_reached: usize,
}

impl Tally {
    /// Every rule in the schema.
    pub fn rules(&self) -> usize {
        self.evaluated + self.warned + self.skipped + self.not_reached
    }
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Self) {
        self.evaluated += other.evaluated;
        self.warned += other.warned;
        self.skipped += other.skipped;
        self.not_reached += other.not_reached;
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} evaluated, {} warned, {} skipped (oldSelf), {} not reached",
            self.evaluated, self.warned, self.skipped, self.not_reached
        )
    }
}

/// A rule the object breaks: the rule gave `false`, or failed on it (read a missing field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// The CEL expression.
    pub rule: String,
    /// Where it failed, as the API server writes field paths (`spec.replicas`); empty for
    /// the object itself.
    pub path: String,
    /// The rule's message, or kube-cel's for a rule without one.
    pub message: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.path.is_empty() {
            "the object".to_owned()
        } else {
            format!("`{}`", Text::from(self.path.as_str()).comment())
        };
        write!(
            f,
            "CEL rule `{}` at {at}: {}",
            Text::from(self.rule.as_str()).comment(),
            Text::from(self.message.as_str()).comment()
        )
    }
}

/// A rule an object reached and kube-cel evaluated, at the first place it ran (for a rule on
/// list items or map values, the first item or value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluated {
    /// The CEL expression.
    pub rule: String,
    /// The rule's `message` as written, if it has one.
    pub message: Option<String>,
    /// The rule's `reason` (`FieldValueForbidden`, …), which sets the kind of the API
    /// server's error; `None` for `FieldValueInvalid`.
    pub reason: Option<String>,
    /// Where a break of the rule is reported, as [`Broken::path`] gives it: the node's path
    /// joined with the rule's `fieldPath`.
    pub path: String,
    /// The node the rule is attached to, as a JSON pointer into the object with its defaults
    /// applied ([`Rules::defaulted`]); empty for the object itself.
    pub node: String,
}

impl Evaluated {
    /// Whether `broken` is this rule, broken at this place.
    pub fn is(&self, broken: &Broken) -> bool {
        broken.rule == self.rule && broken.path == self.path
    }
}

/// What checking one object found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    pub tally: Tally,
    /// One line per warned rule, naming it and its field, escaped for a terminal.
    pub warnings: Vec<String>,
    /// The rules the object breaks; empty when it passes.
    pub broken: Vec<Broken>,
    /// The rules counted as evaluated in `tally`, in the schema's order.
    pub evaluated: Vec<Evaluated>,
}

/// Evaluates the CEL rules of `schema` (one CRD version's `openAPIV3Schema`, as JSON) on
/// `object` (the whole resource, `apiVersion`, `kind` and `metadata` included, as rules on
/// the root may read them), defaulted first as the API server does.
///
/// To check many objects against one schema, compile it once with [`Rules::compile`].
pub fn check(schema: &Value, object: &Value) -> Checked {
    Rules::compile(schema).check(object)
}

/// A CRD version's CEL rules, compiled once, to check many objects against them.
pub struct Rules<'a> {
    schema: &'a Value,
    /// `None` when the schema has no rules: most have none, and need no compiling.
    compiled: Option<CompiledSchema>,
}

impl<'a> Rules<'a> {
    /// Compiles the rules of `schema`, one CRD version's `openAPIV3Schema` as JSON. A rule
    /// kube-cel cannot compile is a warning of every [`Rules::check`], not an error here.
    ///
    /// A rule over the generator's caps is not compiled at all but warned of the same way:
    /// one whose text is over [`limits::cel_text_over_caps`], before the parser sees it, and
    /// one whose estimated cost (`cel::cost`) is over [`limits::MAX_CEL_COST`], before it is run.
    pub fn compile(schema: &'a Value) -> Self {
        let compiled = has_rules_in(schema, 0).then(|| {
            let (screened, refused) = screen(schema);
            let mut compiled = limits::with_deep_stack(|| kube_cel::compile_schema(&screened));
            refuse(&mut compiled, &refused, 0);
            compiled
        });
        Self { schema, compiled }
    }

    /// `object` with the schema's defaults applied, as the API server applies them before it
    /// evaluates any rule.
    pub fn defaulted(&self, object: &Value) -> Value {
        kube_cel::apply_defaults(self.schema, object)
    }

    /// [`check`] with these rules.
    pub fn check(&self, object: &Value) -> Checked {
        let mut checked = Checked::default();
        let Some(compiled) = &self.compiled else {
            return checked;
        };
        let mut counter = Counter::default();
        counter.walk_all(compiled, "", 0);
        let defaulted = self.defaulted(object);
        counter.walk_reached(compiled, &defaulted, "", "", 0);
        let mut unevaluable = BTreeSet::new();
        if let Err(errors) = kube_cel::validate_compiled(compiled, object, None) {
            for error in errors {
                match error.kind {
                    // The API server refuses an object on which a rule fails to evaluate (a
                    // field it reads is missing) just as one on which it gives `false`.
                    ErrorKind::ValidationFailure | ErrorKind::EvaluationError => {
                        checked.broken.push(Broken {
                            rule: error.rule,
                            path: error.field_path,
                            message: error.message,
                        })
                    }
                    // Counted, with their place, when the schema was walked.
                    ErrorKind::CompilationFailure
                    | ErrorKind::InvalidRule
                    | ErrorKind::SchemaTooDeep => {}
                    _ => {
                        if unevaluable.insert(error.rule.clone()) {
                            counter.warnings.push(format!(
                                "CEL rule `{}` at {} could not be evaluated here ({}); it is not checked",
                                Text::from(error.rule.as_str()).comment(),
                                field(&error.field_path),
                                Text::from(error.message.as_str()).comment()
                            ));
                        }
                    }
                }
            }
        }
        let total_evaluated = counter.evaluated.len();
        counter
            .evaluated_rules
            .retain(|rule| !unevaluable.contains(&rule.rule));
        let evaluated_then_warned = total_evaluated - counter.evaluated_rules.len();
        checked.tally = Tally {
            evaluated: counter.evaluated_rules.len(),
            warned: counter.uncompiled + evaluated_then_warned,
            skipped: counter.skipped.len(),
            not_reached: counter.total
                - counter.uncompiled
                - total_evaluated
                - counter.skipped.len(),
        };
        checked.warnings = counter.warnings;
        checked.evaluated = counter.evaluated_rules;
        checked
    }
}

/// Finds the version of `crd` (a CustomResourceDefinition as JSON) that `object`'s
/// `apiVersion` names and [`check`]s `object` against its schema.
///
/// # Errors
///
/// A message naming what is missing when the CRD serves no such version or the version has no
/// schema.
pub fn check_against_crd(crd: &Value, object: &Value) -> Result<Checked, String> {
    Ok(check(version_schema(crd, object)?, object))
}

/// The `openAPIV3Schema` of the version of `crd` (a CustomResourceDefinition as JSON) that
/// `object`'s `apiVersion` names.
///
/// # Errors
///
/// A message naming what is missing when the CRD serves no such version or the version has no
/// schema.
pub fn version_schema<'c>(crd: &'c Value, object: &Value) -> Result<&'c Value, String> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let version = api_version.rsplit('/').next().unwrap_or_default();
    let name = crd["metadata"]["name"].as_str().unwrap_or("the CRD");
    let versions = crd["spec"]["versions"].as_array().into_iter().flatten();
    let served = versions
        .into_iter()
        .find(|v| v["name"].as_str() == Some(version))
        .ok_or_else(|| {
            format!(
                "{} has no version {:?} for an object of apiVersion {:?}",
                Text::from(name).comment(),
                version,
                api_version
            )
        })?;
    let schema = &served["schema"]["openAPIV3Schema"];
    if !schema.is_object() {
        return Err(format!(
            "{} version {:?} has no openAPIV3Schema",
            Text::from(name).comment(),
            version
        ));
    }
    Ok(schema)
}

/// Why the generator does not compile or run a rule: the rule's text or its estimated
/// cost is over a cap. It stands in for the parser's error in the compiled schema, so a
/// refused rule is counted and warned of as one kube-cel cannot compile.
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// What a refused expression is replaced with before compiling: text the CEL parser refuses
/// at its first character, naming the refusal it stands for.
const REFUSED_MARK: &str = "#refused by operator-gen ";

/// `schema` with every rule and `messageExpression` whose text is over the caps replaced by a
/// [`REFUSED_MARK`], and why each was, by its number in the mark. The schema is copied only
/// when something is replaced.
fn screen(schema: &Value) -> (std::borrow::Cow<'_, Value>, Vec<(String, String)>) {
    let mut refused = Vec::new();
    let mut screened = std::borrow::Cow::Borrowed(schema);
    if over_caps_in(schema, 0) {
        screen_in(screened.to_mut(), &mut refused, 0);
    }
    (screened, refused)
}

/// Whether any rule or `messageExpression` under `schema` is over the caps.
fn over_caps_in(schema: &Value, depth: usize) -> bool {
    let over = |rule: &Value| {
        ["rule", "messageExpression"].iter().any(|key| {
            rule.get(key)
                .and_then(Value::as_str)
                .is_some_and(|text| limits::cel_text_over_caps(text).is_some())
        })
    };
    match schema {
        Value::Object(fields) => {
            fields
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|rules| rules.iter().any(over))
                || (depth < crate::schema_check::MAX_DEPTH
                    && fields.values().any(|v| over_caps_in(v, depth + 1)))
        }
        Value::Array(items) => {
            depth < crate::schema_check::MAX_DEPTH
                && items.iter().any(|v| over_caps_in(v, depth + 1))
        }
        _ => false,
    }
}

fn screen_in(schema: &mut Value, refused: &mut Vec<(String, String)>, depth: usize) {
    let children: Vec<&mut Value> = match schema {
        Value::Object(fields) => {
            let rules = fields
                .get_mut("x-kubernetes-validations")
                .and_then(Value::as_array_mut);
            for rule in rules.into_iter().flatten() {
                for key in ["rule", "messageExpression"] {
                    let Some(text) = rule.get_mut(key) else {
                        continue;
                    };
                    let reason = text.as_str().and_then(limits::cel_text_over_caps);
                    if let (Some(reason), Some(original)) = (reason, text.as_str()) {
                        let mark = format!("{REFUSED_MARK}{}", refused.len());
                        refused.push((original.to_owned(), reason));
                        *text = Value::String(mark);
                    }
                }
            }
            fields.values_mut().collect()
        }
        Value::Array(items) => items.iter_mut().collect(),
        _ => Vec::new(),
    };
    if depth < crate::schema_check::MAX_DEPTH {
        for child in children {
            screen_in(child, refused, depth + 1);
        }
    }
}

/// Puts back what [`screen`] replaced, each as a [`Refused`] error, and refuses every
/// compiled rule whose estimated cost (with its `messageExpression`) is over the budget.
fn refuse(node: &mut CompiledSchema, screened: &[(String, String)], depth: usize) {
    for validation in &mut node.validations {
        let refusal = match &*validation {
            Err(CompilationError::Parse { rule, .. }) => {
                marked(rule, screened).map(|(text, reason)| (shorten(text), reason.clone()))
            }
            Err(CompilationError::MessageExpressionParse {
                rule,
                message_expression,
                ..
            }) => marked(message_expression, screened)
                .map(|(_, reason)| (shorten(rule), format!("its messageExpression: {reason}"))),
            Ok(compiled) => {
                let cost = cost::estimate(&compiled.program.expression().expr).saturating_add(
                    compiled
                        .message_program
                        .as_ref()
                        .map_or(0, |message| cost::estimate(&message.expression().expr)),
                );
                (cost > limits::MAX_CEL_COST).then(|| {
                    let reason = format!(
                        "its estimated cost of {cost} is over the budget of {}",
                        limits::MAX_CEL_COST
                    );
                    (shorten(&compiled.rule.rule), reason)
                })
            }
            Err(_) => None,
        };
        if let Some((rule, reason)) = refusal {
            *validation = Err(CompilationError::Parse {
                rule,
                source: Box::new(Refused(reason)),
            });
        }
    }
    if depth >= crate::schema_check::MAX_DEPTH {
        return;
    }
    let children = node
        .properties
        .values_mut()
        .chain(node.items.as_deref_mut())
        .chain(node.additional_properties.as_deref_mut())
        .chain(&mut node.all_of)
        .chain(&mut node.one_of)
        .chain(&mut node.any_of);
    for child in children {
        refuse(child, screened, depth + 1);
    }
}

/// The original text and the reason a [`REFUSED_MARK`] stands for.
fn marked<'s>(text: &str, screened: &'s [(String, String)]) -> Option<&'s (String, String)> {
    let number = text.strip_prefix(REFUSED_MARK)?.parse::<usize>().ok()?;
    screened.get(number)
}

/// A rule's text as a warning quotes it: at most 120 characters.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(120) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// `path` as messages name a field.
fn field(path: &str) -> String {
    if path.is_empty() {
        "the object".to_owned()
    } else {
        format!("`{}`", Text::from(path).comment())
    }
}

/// Whether a CRD version's schema carries `x-kubernetes-validations` anywhere: most have
/// none, and need neither converting to JSON nor compiling.
pub fn has_rules(schema: &JSONSchemaProps) -> bool {
    schema.x_kubernetes_validations.is_some()
        || crate::schema_tree::subschemas(schema)
            .chain(schema.not.as_deref())
            .any(has_rules)
}

/// [`has_rules`] on a schema as JSON.
fn has_rules_in(schema: &Value, depth: usize) -> bool {
    match schema {
        Value::Object(fields) => {
            fields.contains_key("x-kubernetes-validations")
                || (depth < crate::schema_check::MAX_DEPTH
                    && fields.values().any(|v| has_rules_in(v, depth + 1)))
        }
        Value::Array(items) => {
            depth < crate::schema_check::MAX_DEPTH
                && items.iter().any(|v| has_rules_in(v, depth + 1))
        }
        _ => false,
    }
}

/// The rules of a compiled schema, as an object reaches them. Rules are told apart by where
/// they sit in the compiled tree, so a rule on list items counts once for all of them.
#[derive(Default)]
struct Counter {
    total: usize,
    uncompiled: usize,
    /// The rules reached and run, by place; with where each first ran, and its text to match
    /// kube-cel's errors.
    evaluated: BTreeSet<usize>,
    evaluated_rules: Vec<Evaluated>,
    skipped: BTreeSet<usize>,
    warnings: Vec<String>,
}

impl Counter {
    /// Counts every rule, and warns of each that kube-cel cannot compile, naming its place.
    fn walk_all(&mut self, node: &CompiledSchema, path: &str, depth: usize) {
        for result in &node.validations {
            self.total += 1;
            if let Err(error) = result {
                self.uncompiled += 1;
                self.warnings.push(uncompiled(error, path));
            }
        }
        if depth >= crate::schema_check::MAX_DEPTH {
            return;
        }
        let mut properties: Vec<_> = node.properties.iter().collect();
        properties.sort_by_key(|(name, _)| name.as_str());
        for (name, child) in properties {
            self.walk_all(child, &join(path, name), depth + 1);
        }
        if let Some(items) = &node.items {
            self.walk_all(items, &format!("{path}[*]"), depth + 1);
        }
        if let Some(values) = &node.additional_properties {
            self.walk_all(values, &format!("{path}[*]"), depth + 1);
        }
        for branch in node.all_of.iter().chain(&node.one_of).chain(&node.any_of) {
            self.walk_all(branch, path, depth + 1);
        }
    }

    /// Counts the rules `value` reaches, walking as kube-cel's validator walks; `pointer` is
    /// `path` as a JSON pointer. Properties are walked in name order, so the first place a
    /// rule runs is the same on every run.
    fn walk_reached(
        &mut self,
        node: &CompiledSchema,
        value: &Value,
        path: &str,
        pointer: &str,
        depth: usize,
    ) {
        for compiled in node.validations.iter().flatten() {
            let place = std::ptr::from_ref(compiled) as usize;
            let transition =
                compiled.is_transition_rule && compiled.rule.optional_old_self != Some(true);
            if transition {
                self.skipped.insert(place);
            } else if self.evaluated.insert(place) {
                self.evaluated_rules.push(Evaluated {
                    rule: compiled.rule.rule.clone(),
                    message: compiled.rule.message.clone(),
                    reason: compiled.rule.reason.clone(),
                    path: rule_path(path, compiled.rule.field_path.as_deref()),
                    node: pointer.to_owned(),
                });
            }
        }
        if depth >= crate::schema_check::MAX_DEPTH {
            return;
        }
        let below = |key: &str| format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
        if let Value::Object(fields) = value {
            let mut properties: Vec<_> = node.properties.iter().collect();
            properties.sort_by_key(|(name, _)| name.as_str());
            for (name, child) in properties {
                if let Some(child_value) = fields.get(name) {
                    let (path, pointer) = (join(path, name), below(name));
                    self.walk_reached(child, child_value, &path, &pointer, depth + 1);
                }
            }
            if let Some(values) = node
                .additional_properties
                .as_deref()
                .filter(|_| !node.preserve_unknown_fields)
            {
                for (key, child_value) in fields {
                    if !node.properties.contains_key(key) {
                        let (path, pointer) = (join(path, key), below(key));
                        self.walk_reached(values, child_value, &path, &pointer, depth + 1);
                    }
                }
            }
        }
        if let (Some(items), Value::Array(list)) = (&node.items, value) {
            for (index, item) in list.iter().enumerate() {
                let (path, pointer) = (format!("{path}[{index}]"), format!("{pointer}/{index}"));
                self.walk_reached(items, item, &path, &pointer, depth + 1);
            }
        }
        for branch in node.all_of.iter().chain(&node.one_of).chain(&node.any_of) {
            self.walk_reached(branch, value, path, pointer, depth + 1);
        }
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// Where kube-cel (and the API server) report a broken rule: the node's path, joined with the
/// rule's `fieldPath` when it has one.
fn rule_path(path: &str, field_path: Option<&str>) -> String {
    match field_path {
        Some(field) if field.starts_with('.') => format!("{path}{field}"),
        Some(field) if !path.is_empty() => format!("{path}.{field}"),
        Some(field) => field.to_owned(),
        None => path.to_owned(),
    }
}

/// The warning for a rule kube-cel cannot compile.
fn uncompiled(error: &CompilationError, path: &str) -> String {
    let (rule, reason) = match error {
        CompilationError::Parse { rule, source } => {
            if let Some(refused) = source.downcast_ref::<Refused>() {
                return format!(
                    "CEL rule `{}` at {} is not checked: {}",
                    Text::from(rule.as_str()).comment(),
                    field(path),
                    refused
                );
            }
            (rule.as_str(), source.to_string())
        }
        CompilationError::MessageExpressionParse {
            rule,
            message_expression,
            source,
        } => (
            rule.as_str(),
            format!("its messageExpression {message_expression:?}: {source}"),
        ),
        other => ("", other.to_string()),
    };
    format!(
        "CEL rule `{}` at {} cannot be compiled by kube-cel ({}); it is not checked",
        Text::from(rule).comment(),
        field(path),
        Text::from(reason.as_str()).comment()
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A schema with a rule of each kind: one the sample meets, one on a field it leaves
    /// out, a transition rule, one kube-cel cannot parse, and one per list item.
    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "x-kubernetes-validations": [
                        {"rule": "self.replicas <= self.maxReplicas", "message": "replicas over the maximum"},
                        {"rule": "self.replicas >= oldSelf.replicas", "message": "no scaling down"},
                        {"rule": "self.replicas ==", "message": "broken"}
                    ],
                    "properties": {
                        "replicas": {"type": "integer"},
                        "maxReplicas": {"type": "integer", "default": 3},
                        "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() > 2"}]},
                        "ports": {"type": "array", "items": {
                            "type": "integer",
                            "x-kubernetes-validations": [{"rule": "self > 0", "message": "ports are positive"}]
                        }}
                    }
                }
            }
        })
    }

    #[test]
    fn a_passing_object_counts_each_rule_once_by_what_happened_to_it() {
        let object =
            json!({"metadata": {"name": "a"}, "spec": {"replicas": 2, "ports": [80, 443]}});
        let checked = check(&schema(), &object);
        assert!(checked.broken.is_empty(), "{:?}", checked.broken);
        assert_eq!(
            checked.tally,
            Tally {
                evaluated: 2,
                warned: 1,
                skipped: 1,
                not_reached: 1
            }
        );
        assert_eq!(checked.tally.rules(), 5);
        assert_eq!(checked.warnings.len(), 1, "{:?}", checked.warnings);
        assert!(
            checked.warnings[0].contains("`self.replicas ==`")
                && checked.warnings[0].contains("`spec`"),
            "{}",
            checked.warnings[0]
        );
    }

    #[test]
    fn a_broken_rule_is_named_with_its_field_and_message_after_defaulting() {
        // maxReplicas takes its default, 3, as the API server would set it.
        let object = json!({"spec": {"replicas": 4, "ports": [80, 0]}});
        let checked = check(&schema(), &object);
        let shown: Vec<String> = checked.broken.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "CEL rule `self.replicas <= self.maxReplicas` at `spec`: replicas over the maximum",
                "CEL rule `self > 0` at `spec.ports[1]`: ports are positive"
            ],
            "{shown:?}"
        );
    }

    #[test]
    fn a_schema_without_rules_is_not_compiled_and_counts_nothing() {
        let plain = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        assert_eq!(check(&plain, &json!({"spec": {}})), Checked::default());
    }

    #[test]
    fn the_version_is_found_from_the_object_api_version() {
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"versions": [
                {"name": "v1", "schema": {"openAPIV3Schema": schema()}},
                {"name": "v2", "schema": {"openAPIV3Schema": {"type": "object"}}}
            ]}
        });
        let object = json!({"apiVersion": "example.com/v1", "spec": {"replicas": 9}});
        let checked = check_against_crd(&crd, &object).unwrap();
        assert_eq!(checked.broken.len(), 1);
        let later = json!({"apiVersion": "example.com/v2", "spec": {"replicas": 9}});
        assert!(check_against_crd(&crd, &later).unwrap().broken.is_empty());
        let missing = json!({"apiVersion": "example.com/v3"});
        let error = check_against_crd(&crd, &missing).unwrap_err();
        assert!(
            error.contains("widgets.example.com") && error.contains("v3"),
            "{error}"
        );
    }

    /// A schema whose `spec` carries `rules`, and whose `spec.name` a well-formed one.
    fn spec_rules(rules: &[Value]) -> Value {
        json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "x-kubernetes-validations": rules,
                "properties": {"name": {
                    "type": "string",
                    "x-kubernetes-validations": [{"rule": "self.size() > 0"}]
                }}
            }}
        })
    }

    /// Checks `rules` on a sample in bounded time, and gives its tally and warnings.
    fn check_rules(rules: &[Value]) -> Checked {
        check(&spec_rules(rules), &json!({"spec": {"name": "a"}}))
    }

    #[test]
    fn a_rule_over_the_text_caps_is_warned_of_and_never_parsed() {
        let selection = format!("self{}", ".a".repeat(200_000));
        let nested = format!("{}1{}", "(".repeat(40), ")".repeat(40));
        for (rule, cap) in [
            (selection, "bytes long"),
            (format!("self{} == 1", ".a".repeat(300)), "chains more than"),
            (nested, "nest deeper"),
        ] {
            let checked = check_rules(&[json!({"rule": rule})]);
            assert_eq!(checked.tally.warned, 1, "{:?}", checked.warnings);
            assert_eq!(checked.tally.evaluated, 1, "the other rule still runs");
            let warning = &checked.warnings[0];
            assert!(
                warning.contains("is not checked") && warning.contains(cap) && warning.len() < 400,
                "{warning}"
            );
        }
    }

    #[test]
    fn a_message_expression_over_the_caps_refuses_its_rule() {
        let message = format!("'a'{}", " + 'a'".repeat(300));
        let checked = check_rules(&[json!({"rule": "true", "messageExpression": message})]);
        assert_eq!(checked.tally.warned, 1, "{:?}", checked.warnings);
        assert!(
            checked.warnings[0].contains("`true`")
                && checked.warnings[0].contains("its messageExpression"),
            "{}",
            checked.warnings[0]
        );
    }

    #[test]
    fn a_rule_over_the_cost_budget_is_warned_of_and_not_run() {
        // 400 short strings, so that the rules are within the text caps.
        let list: Vec<String> = (0..400).map(|i| format!("'{i}'")).collect();
        let list = format!("[{}]", list.join(","));
        let product = format!("{list}.map(x, {list}.map(y, x + y)).size() > 0");
        let nested = format!("{list}.all(x, {list}.all(y, {list}.all(z, x != '')))");
        for rule in [product, nested] {
            let checked = check_rules(&[json!({"rule": rule})]);
            assert_eq!(checked.tally.warned, 1, "{:?}", checked.warnings);
            assert!(
                checked.warnings[0].contains("estimated cost"),
                "{}",
                checked.warnings[0]
            );
        }
    }

    #[test]
    fn a_rule_of_a_real_shape_within_the_caps_is_still_run() {
        let rule = "self.name.size() > 0 && ['a', 'b'].all(x, x != self.name)";
        let checked = check(
            &spec_rules(&[json!({"rule": rule})]),
            &json!({"spec": {"name": "a"}}),
        );
        assert_eq!(checked.tally.evaluated, 2, "{:?}", checked.warnings);
        assert_eq!(checked.broken.len(), 1, "{:?}", checked.broken);
    }
}
