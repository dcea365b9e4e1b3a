//! A static estimate of what evaluating a CEL rule costs, read from its syntax tree.
//!
//! The CEL library in use has no cost estimator, and its evaluation cannot be interrupted,
//! so a rule that would run for minutes is found here, before it runs, and not evaluated
//! ([`crate::limits::MAX_CEL_COST`]). The estimate is in about the steps evaluation takes:
//!
//! - every node of the tree costs one;
//! - a macro (`all`, `exists`, `map`, `filter`) runs its body once per item of what it
//!   ranges over, so nested macros multiply;
//! - `map` and `filter` build their list by adding to it once per item, and adding copies
//!   it, so they cost the square of their length;
//! - adding strings or lists, comparing them and the string functions cost their length.
//!
//! Lengths are known for literals and what is built from them. A field of the object is
//! counted as one item: the objects checked are samples, built within
//! [`crate::schema_sample::MAX_SAMPLE_BYTES`], and their lists are short (real CRDs ask for
//! at most one item). This is what makes the estimate cheap and keeps every real CRD's
//! rules well under the budget; the runaway rules are those over literals.

use std::collections::HashMap;

use kube_cel::cel::common::ast::{EntryExpr, Expr, LiteralValue};

/// What evaluating an expression costs, and how long its value may be: items of a list or
/// map, bytes of a string. All arithmetic saturates, so a hostile tree cannot wrap it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Estimate {
    cost: u64,
    len: u64,
    /// For a list, the longest of its items.
    item_len: u64,
}

impl Estimate {
    /// A value of length one that costs one step to reach: a field, a number, a boolean.
    const ONE: Self = Self {
        cost: 1,
        len: 1,
        item_len: 1,
    };
}

/// The estimated cost of evaluating `expr` once.
pub fn estimate(expr: &Expr) -> u64 {
    Estimator::default().expr(expr).cost
}

/// The lengths of the variables macros bind, innermost last.
#[derive(Default)]
struct Estimator {
    bound: HashMap<String, Vec<Estimate>>,
}

impl Estimator {
    fn expr(&mut self, expr: &Expr) -> Estimate {
        match expr {
            Expr::Unspecified => Estimate::ONE,
            Expr::Ident(name) => self
                .bound
                .get(name)
                .and_then(|values| values.last().copied())
                .map_or(Estimate::ONE, |value| Estimate { cost: 1, ..value }),
            Expr::Literal(literal) => literal_estimate(literal),
            Expr::Select(select) => {
                let operand = self.expr(&select.operand.expr);
                Estimate {
                    cost: operand.cost.saturating_add(1),
                    ..Estimate::ONE
                }
            }
            Expr::List(list) => {
                let items: Vec<_> = list.elements.iter().map(|e| self.expr(&e.expr)).collect();
                Estimate {
                    cost: sum(items.iter().map(|item| item.cost)).saturating_add(1),
                    len: items.len() as u64,
                    item_len: items.iter().map(|item| item.len).max().unwrap_or(1),
                }
            }
            Expr::Map(map) => self.entries(map.entries.iter().map(|entry| &entry.expr)),
            Expr::Struct(object) => self.entries(object.entries.iter().map(|entry| &entry.expr)),
            Expr::Call(call) => {
                let target = call.target.as_ref().map(|target| self.expr(&target.expr));
                let args: Vec<_> = call.args.iter().map(|arg| self.expr(&arg.expr)).collect();
                call_estimate(&call.func_name, target, &args)
            }
            Expr::Comprehension(comprehension) => {
                let range = self.expr(&comprehension.iter_range.expr);
                let init = self.expr(&comprehension.accu_init.expr);
                let items = range.len;
                let item = Estimate {
                    cost: 1,
                    len: range.item_len,
                    item_len: 1,
                };
                // The accumulator grows to at most one entry per item: a list built by `map`.
                let accumulator = Estimate {
                    cost: 1,
                    len: init.len.saturating_add(items),
                    item_len: init.item_len.max(range.item_len),
                };
                let bound = [
                    (comprehension.iter_var.as_str(), item),
                    (comprehension.accu_var.as_str(), accumulator),
                ];
                let bound_second = comprehension.iter_var2.as_deref().map(|name| (name, item));
                for (name, value) in bound.iter().copied().chain(bound_second) {
                    self.bound.entry(name.to_owned()).or_default().push(value);
                }
                let step = self.expr(&comprehension.loop_step.expr);
                let condition = self.expr(&comprehension.loop_cond.expr);
                let result = self.expr(&comprehension.result.expr);
                for (name, _) in bound.iter().copied().chain(bound_second) {
                    if let Some(values) = self.bound.get_mut(name) {
                        values.pop();
                    }
                }
                let each = step.cost.saturating_add(condition.cost);
                Estimate {
                    cost: sum([
                        range.cost,
                        init.cost,
                        items.saturating_mul(each),
                        result.cost,
                    ]),
                    len: result.len,
                    item_len: step.item_len,
                }
            }
        }
    }

    /// A map or struct literal: each key and value once.
    fn entries<'e>(&mut self, entries: impl Iterator<Item = &'e EntryExpr>) -> Estimate {
        let mut cost = 1u64;
        let mut len = 0u64;
        for entry in entries {
            let parts = match entry {
                EntryExpr::MapEntry(entry) => {
                    self.expr(&entry.key.expr).cost + self.expr(&entry.value.expr).cost
                }
                EntryExpr::StructField(field) => self.expr(&field.value.expr).cost,
            };
            cost = cost.saturating_add(parts);
            len = len.saturating_add(1);
        }
        Estimate {
            cost,
            len,
            item_len: 1,
        }
    }
}

fn literal_estimate(literal: &LiteralValue) -> Estimate {
    let len = match literal {
        LiteralValue::String(text) => text.len() as u64,
        LiteralValue::Bytes(bytes) => bytes.len() as u64,
        _ => 1,
    };
    Estimate {
        len,
        ..Estimate::ONE
    }
}

/// A function or operator applied to values already estimated.
fn call_estimate(function: &str, target: Option<Estimate>, args: &[Estimate]) -> Estimate {
    let operands: Vec<Estimate> = target.into_iter().chain(args.iter().copied()).collect();
    let reached = sum(operands.iter().map(|operand| operand.cost)).saturating_add(1);
    let lengths = sum(operands.iter().map(|operand| operand.len));
    let longest_item = operands.iter().map(|operand| operand.item_len).max();
    let (work, len) = match function {
        // Adding copies both sides.
        "_+_" => (lengths, lengths),
        "join" => {
            let joined = operands
                .first()
                .map_or(1, |list| list.len.saturating_mul(list.item_len));
            (joined, joined)
        }
        "_?_:_" => (
            0,
            operands
                .iter()
                .map(|operand| operand.len)
                .max()
                .unwrap_or(1),
        ),
        "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" => (lengths, lengths),
        "split" => (lengths, lengths),
        "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" | "@in" | "contains" | "startsWith"
        | "endsWith" | "matches" | "indexOf" | "lastIndexOf" | "find" | "findAll" | "size" => {
            (lengths, 1)
        }
        _ => (0, 1),
    };
    Estimate {
        cost: reached.saturating_add(work),
        len,
        item_len: if function == "split" {
            lengths
        } else {
            longest_item.unwrap_or(1)
        },
    }
}

fn sum(values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use kube_cel::cel::Program;

    use super::*;
    use crate::limits::MAX_CEL_COST;

    fn cost(rule: &str) -> u64 {
        let program = Program::compile(rule).expect("the test's rule parses");
        estimate(&program.expression().expr)
    }

    /// A literal list of `n` numbers, `[0, 1, …]`.
    fn numbers(n: usize) -> String {
        let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        format!("[{}]", items.join(", "))
    }

    /// A literal list of `n` strings of `len` bytes.
    fn strings(n: usize, len: usize) -> String {
        let items: Vec<String> = (0..n).map(|_| format!("'{}'", "a".repeat(len))).collect();
        format!("[{}]", items.join(", "))
    }

    #[test]
    fn rules_over_fields_cost_a_few_steps_each() {
        for rule in [
            "self.replicas <= self.maxReplicas",
            "self.all(l1, self.exists_one(l2, l1.name == l2.name))",
            "!has(self.tls) || self.tls.mode in ['Terminate', 'Passthrough']",
            "self.map(x, x.name).size() == self.size()",
        ] {
            assert!(cost(rule) < 100, "{rule}: {}", cost(rule));
        }
    }

    #[test]
    fn nested_macros_over_literal_lists_multiply_past_the_budget() {
        let list = numbers(1000);
        let one = cost(&format!("{list}.all(x, x >= 0)"));
        let three = cost(&format!(
            "{list}.all(x, {list}.all(y, {list}.all(z, x + y + z >= 0)))"
        ));
        assert!(one < MAX_CEL_COST / 100, "one level costs {one}");
        assert!(three > MAX_CEL_COST, "three levels cost only {three}");
    }

    #[test]
    fn a_product_of_two_string_lists_is_over_the_budget_and_one_list_is_not() {
        let list = strings(1000, 8);
        let one = cost(&format!("{list}.map(x, x + 'b').size() > 0"));
        let product = cost(&format!("{list}.map(x, {list}.map(y, x + y)).size() > 0"));
        assert!(one < MAX_CEL_COST, "one list costs {one}");
        assert!(product > MAX_CEL_COST, "the product costs only {product}");
    }

    #[test]
    fn a_macro_binds_its_variable_only_inside_its_body() {
        let list = strings(3, 100_000);
        // Inside, `x` is a 100,000-byte string; outside, `x` is a field.
        assert!(cost(&format!("{list}.exists(x, x + x == '')")) > 600_000);
        assert!(cost(&format!("{list}.exists(y, true) && x + x == ''")) < 1_000);
    }
}
