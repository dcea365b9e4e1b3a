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
/// What a rule asks of an object, kept beside the sample builder that reads it.
pub use crate::schema_sample::keeping;

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use kube_cel::{CompilationError, CompiledSchema, ErrorKind};
use serde_json::Value;

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
    pub fn compile(schema: &'a Value) -> Self {
        let compiled = has_rules_in(schema, 0).then(|| kube_cel::compile_schema(schema));
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
        CompilationError::Parse { rule, source } => (rule.as_str(), source.to_string()),
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
}
