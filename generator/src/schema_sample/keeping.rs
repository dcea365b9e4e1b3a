//! What a CEL rule asks of an object, read from the rule itself, so that a sample built from
//! the schema can be changed to keep the CRD's own rules.
//!
//! The least object a schema allows often breaks a rule of the same CRD: a singleton's
//! `self.metadata.name == 'cluster'`, a reference limited to some kinds
//! (`self.kind == 'Gateway' || self.kind == 'HTTPRoute'`), a field that must be there
//! (`has(self.spec.x)`). The sample is the generator's invention, not the user's input, so
//! the generator reads what the rule wants and tries it: [`alternatives`] turns the rule into
//! ways of keeping it, each a set of [`Hint`]s that hold together, and the sample builder
//! ([`super::kept_variations`]) applies them at the rule's field. It lives with the sample
//! builder, its only reader, and not with the rules' evaluation in [`crate::cel`] (which
//! re-exports it as `cel::keeping`), because [`crate::cel::breaking`] there builds on the
//! sample.
//!
//! Only these forms are read, at any depth under `||`, `&&` and `?:`:
//!
//! - equality of a field with a literal, either way round (`self.a.b == 'x'`, `1 == self.n`);
//! - membership in a list of literals (`self.kind in ['A', 'B']`);
//! - `has(self.a)` and `!has(self.a)`;
//! - size bounds (`size(self.a) >= 2`, `self.a.size() > 0`, `self.a != ''`).
//!
//! Anything else gives no hint, and the rule is left to the generic variations of the sample
//! builder or reported as one the sample could not keep.

use serde_json::Value;

use ::cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue};

/// At most this many ways of keeping one rule are tried: a rule of many `||` and `&&` would
/// otherwise multiply them.
const MAX_ALTERNATIVES: usize = 32;

/// A size bound above this gives no hint: the rule comes from a stranger's CRD, and a sample
/// of a billion characters is no sample.
const MAX_SIZE: usize = 256;

/// One change the rule asks for, at `path` below the field the rule is attached to (`self`).
#[derive(Debug, Clone, PartialEq)]
pub enum Hint {
    /// The field holds this value.
    Equal { path: Vec<String>, value: Value },
    /// The field is there.
    Present { path: Vec<String> },
    /// The field is left out.
    Absent { path: Vec<String> },
    /// The string or list has at least this many characters or items.
    AtLeast { path: Vec<String>, size: usize },
}

/// The ways of keeping `rule`, each a set of hints that must hold together; empty when the
/// rule does not parse or has none of the forms this module reads.
pub fn alternatives(rule: &str) -> Vec<Vec<Hint>> {
    let Ok(expr) = ::cel::parser::Parser::new().parse(rule) else {
        return Vec::new();
    };
    let mut ways = ways(&expr);
    ways.truncate(MAX_ALTERNATIVES);
    ways
}

/// The ways of making `expr` true.
fn ways(expr: &IdedExpr) -> Vec<Vec<Hint>> {
    match &expr.expr {
        Expr::Call(call) => call_ways(call),
        // `has(self.a)` parses as a test-only selection.
        Expr::Select(select) if select.test => field_path(expr)
            .map(|path| vec![vec![Hint::Present { path }]])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn call_ways(call: &CallExpr) -> Vec<Vec<Hint>> {
    let args = &call.args;
    match (call.func_name.as_str(), args.as_slice()) {
        ("_||_", [left, right]) => {
            let mut all = ways(left);
            all.extend(ways(right));
            all
        }
        ("_&&_", [left, right]) => both(ways(left), ways(right)),
        // Either branch may be the one taken.
        ("_?_:_", [_, then, otherwise]) => {
            let mut all = ways(then);
            all.extend(ways(otherwise));
            all
        }
        ("!_", [inner]) => match &inner.expr {
            Expr::Select(select) if select.test => field_path(inner)
                .map(|path| vec![vec![Hint::Absent { path }]])
                .unwrap_or_default(),
            _ => Vec::new(),
        },
        ("_==_", [left, right]) => equal(left, right)
            .or_else(|| equal(right, left))
            .map(|hint| vec![vec![hint]])
            .unwrap_or_default(),
        ("_!=_", [left, right]) => not_empty(left, right)
            .or_else(|| not_empty(right, left))
            .map(|hint| vec![vec![hint]])
            .unwrap_or_default(),
        ("@in", [item, list]) => {
            let (Some(path), Expr::List(list)) = (field_path(item), &list.expr) else {
                return Vec::new();
            };
            list.elements
                .iter()
                .filter_map(literal)
                .map(|value| {
                    vec![Hint::Equal {
                        path: path.clone(),
                        value,
                    }]
                })
                .collect()
        }
        ("_>=_" | "_>_", [left, right]) => at_least(call, left, right)
            .or_else(|| bound(call, left, right))
            .map(|hint| vec![vec![hint]])
            .unwrap_or_default(),
        ("_<=_" | "_<_", [left, right]) => bound(call, left, right)
            .map(|hint| vec![vec![hint]])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Every way of `left` together with every way of `right`; a side with no way gives none.
fn both(left: Vec<Vec<Hint>>, right: Vec<Vec<Hint>>) -> Vec<Vec<Hint>> {
    let mut all = Vec::new();
    for l in &left {
        for r in &right {
            if all.len() == MAX_ALTERNATIVES {
                return all;
            }
            all.push(l.iter().chain(r).cloned().collect());
        }
    }
    all
}

/// `self.a == literal`.
fn equal(field: &IdedExpr, value: &IdedExpr) -> Option<Hint> {
    Some(Hint::Equal {
        path: field_path(field)?,
        value: literal(value)?,
    })
}

/// `self.a != ''`: the field holds at least one character.
fn not_empty(field: &IdedExpr, value: &IdedExpr) -> Option<Hint> {
    (literal(value)? == "").then_some(())?;
    Some(Hint::AtLeast {
        path: field_path(field)?,
        size: 1,
    })
}

/// `self.n > 1`, `self.n <= 10`: the field at the nearest integer the bound allows.
fn bound(call: &CallExpr, field: &IdedExpr, limit: &IdedExpr) -> Option<Hint> {
    let limit = literal(limit)?.as_i64()?;
    let value = match call.func_name.as_str() {
        "_>_" => limit.checked_add(1)?,
        "_<_" => limit.checked_sub(1)?,
        _ => limit,
    };
    Some(Hint::Equal {
        path: field_path(field)?,
        value: Value::from(value),
    })
}

/// `size(self.a) >= n`, `self.a.size() > n`: at least `n` (or `n + 1`) characters or items.
fn at_least(call: &CallExpr, left: &IdedExpr, right: &IdedExpr) -> Option<Hint> {
    let bound = match literal(right)? {
        Value::Number(n) => usize::try_from(n.as_u64()?).ok()?,
        _ => return None,
    };
    let size = if call.func_name == "_>_" {
        bound.checked_add(1)?
    } else {
        bound
    };
    if size > MAX_SIZE {
        return None;
    }
    let Expr::Call(inner) = &left.expr else {
        return None;
    };
    let measured = match (
        inner.func_name.as_str(),
        &inner.target,
        inner.args.as_slice(),
    ) {
        ("size", Some(target), []) => target.as_ref(),
        ("size", None, [arg]) => arg,
        _ => return None,
    };
    Some(Hint::AtLeast {
        path: field_path(measured)?,
        size,
    })
}

/// The path of a chain of selections from `self` (`self.spec.ref.kind` gives
/// `["spec", "ref", "kind"]`); `None` for anything else.
fn field_path(expr: &IdedExpr) -> Option<Vec<String>> {
    match &expr.expr {
        Expr::Ident(name) if name == "self" => Some(Vec::new()),
        Expr::Select(select) => {
            let mut path = field_path(&select.operand)?;
            path.push(select.field.clone());
            Some(path)
        }
        _ => None,
    }
}

/// A literal as JSON.
fn literal(expr: &IdedExpr) -> Option<Value> {
    let Expr::Literal(value) = &expr.expr else {
        return None;
    };
    match value {
        LiteralValue::String(text) => Some(Value::from(text.inner())),
        LiteralValue::Int(n) => Some(Value::from(*n.inner())),
        LiteralValue::UInt(n) => Some(Value::from(*n.inner())),
        LiteralValue::Double(n) => serde_json::Number::from_f64(*n.inner()).map(Value::Number),
        LiteralValue::Boolean(b) => Some(Value::from(*b.inner())),
        LiteralValue::Bytes(_) | LiteralValue::Null => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(dotted: &str) -> Vec<String> {
        dotted.split('.').map(str::to_owned).collect()
    }

    fn equal(dotted: &str, value: Value) -> Hint {
        Hint::Equal {
            path: path(dotted),
            value,
        }
    }

    #[test]
    fn a_pinned_name_asks_for_that_name() {
        assert_eq!(
            alternatives("self.metadata.name == 'cluster'"),
            vec![vec![equal("metadata.name", json!("cluster"))]]
        );
        assert_eq!(
            alternatives("'default' == self.metadata.name"),
            vec![vec![equal("metadata.name", json!("default"))]]
        );
    }

    #[test]
    fn each_kind_a_reference_may_name_is_a_way_of_keeping_the_rule() {
        let ways = alternatives("self.kind == 'Gateway' || self.kind == 'HTTPRoute'");
        assert_eq!(
            ways,
            vec![
                vec![equal("kind", json!("Gateway"))],
                vec![equal("kind", json!("HTTPRoute"))]
            ]
        );
        let listed = alternatives("self.group in ['gateway.networking.k8s.io', '']");
        assert_eq!(
            listed[0],
            vec![equal("group", json!("gateway.networking.k8s.io"))]
        );
        assert_eq!(listed.len(), 2);
    }

    #[test]
    fn a_conjunction_asks_for_both_sides_at_once() {
        let ways = alternatives("self.group == 'g' && (self.kind == 'A' || self.kind == 'B')");
        assert_eq!(
            ways,
            vec![
                vec![equal("group", json!("g")), equal("kind", json!("A"))],
                vec![equal("group", json!("g")), equal("kind", json!("B"))],
            ]
        );
        assert!(
            alternatives("self.a == 'x' && self.b.startsWith('y')").is_empty(),
            "a side with no way leaves the whole without one"
        );
    }

    #[test]
    fn presence_absence_and_sizes_are_read() {
        assert_eq!(
            alternatives("has(self.spec.secretRef) || !has(self.spec.inline)"),
            vec![
                vec![Hint::Present {
                    path: path("spec.secretRef")
                }],
                vec![Hint::Absent {
                    path: path("spec.inline")
                }],
            ]
        );
        assert_eq!(
            alternatives("size(self.hosts) >= 2"),
            vec![vec![Hint::AtLeast {
                path: path("hosts"),
                size: 2
            }]]
        );
        assert_eq!(
            alternatives("self.name.size() > 0"),
            vec![vec![Hint::AtLeast {
                path: path("name"),
                size: 1
            }]]
        );
        assert_eq!(
            alternatives("self.name != ''"),
            vec![vec![Hint::AtLeast {
                path: path("name"),
                size: 1
            }]]
        );
    }

    #[test]
    fn an_integer_bound_asks_for_the_nearest_value_it_allows() {
        assert_eq!(
            alternatives("self.replicas > 0"),
            vec![vec![equal("replicas", json!(1))]]
        );
        assert_eq!(
            alternatives("self.replicas >= 3"),
            vec![vec![equal("replicas", json!(3))]]
        );
        assert_eq!(
            alternatives("self.replicas < 10"),
            vec![vec![equal("replicas", json!(9))]]
        );
        assert!(alternatives("self.replicas > 9223372036854775807").is_empty());
    }

    #[test]
    fn a_size_bound_beyond_any_sample_gives_no_hint() {
        assert!(alternatives("size(self.name) >= 1000000000000").is_empty());
        assert!(alternatives("self.hosts.size() > 256").is_empty());
    }

    #[test]
    fn rules_of_other_forms_or_that_do_not_parse_give_nothing() {
        assert!(alternatives("self.minReplicas <= self.maxReplicas").is_empty());
        assert!(alternatives("self.all(x, x.size() > 0)").is_empty());
        assert!(alternatives("self.a == ").is_empty());
        assert!(alternatives("other.a == 'x'").is_empty());
    }

    #[test]
    fn a_rule_of_many_alternatives_is_capped() {
        let rule = (0..100)
            .map(|i| format!("self.kind == 'K{i}'"))
            .collect::<Vec<_>>()
            .join(" || ");
        assert_eq!(alternatives(&rule).len(), MAX_ALTERNATIVES);
    }
}
