//! The operator's RBAC rules: exactly the verbs the generated code uses, per resource.

use serde::Serialize;

use super::{Archetype, Primary, relations::Relations};
use crate::text::{Constant, Text};

/// One rule of the operator's ClusterRole (or Role).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Rule {
    pub api_group: Text,
    pub resource: Text,
    pub verbs: Vec<Constant>,
    /// Why the operator needs it, written as a YAML comment.
    pub reason: Constant,
}

impl Rule {
    fn new(group: &Text, resource: Text, verbs: &[&'static str], reason: &'static str) -> Self {
        Self {
            api_group: group.clone(),
            resource,
            verbs: verbs.iter().copied().map(Constant).collect(),
            reason: Constant(reason),
        }
    }
}

/// The verbs the generated code uses, per resource, and nothing more: the primary is read
/// and patched (finalizers), its status patched only where the code writes it, owned kinds
/// are fully managed, watched kinds only read.
pub(super) fn rules(
    archetype: Archetype,
    primary: &Primary,
    generic_kinds: &[super::Related],
    relations: &Relations,
    finalizer: bool,
    status_helper: bool,
) -> Vec<Rule> {
    let mut rules = Vec::new();
    if archetype == Archetype::Generic {
        for kind in generic_kinds {
            rules.push(Rule::new(
                &kind.group,
                kind.plural.clone(),
                &["get", "list", "watch"],
                "reconciled kind (metadata)",
            ));
        }
    } else {
        let sub = |name: &str| Text::new(format!("{}/{name}", primary.plural.raw()));
        rules.push(Rule::new(
            &primary.group,
            primary.plural.clone(),
            &["get", "list", "watch", "patch"],
            "primary resource",
        ));
        if status_helper {
            rules.push(Rule::new(
                &primary.group,
                sub("status"),
                &["patch"],
                "status written only when it changed",
            ));
        }
        if archetype != Archetype::Dynamic {
            rules.push(Rule::new(
                &Text::from("events.k8s.io"),
                Text::from("events"),
                &["create", "patch"],
                "events about reconcile outcomes",
            ));
        }
        if finalizer {
            rules.push(Rule::new(
                &primary.group,
                sub("finalizers"),
                &["update"],
                "finalizer for external cleanup",
            ));
        }
    }
    let managed = ["get", "list", "watch", "create", "patch", "delete"];
    for owned in &relations.owns {
        rules.push(Rule::new(
            &owned.group,
            owned.plural.clone(),
            &managed,
            "owned children",
        ));
    }
    for watched in &relations.watches {
        let related = &watched.related;
        let owned = relations
            .owns
            .iter()
            .any(|o| o.group == related.group && o.plural == related.plural);
        if !owned {
            rules.push(Rule::new(
                &related.group,
                related.plural.clone(),
                &["get", "list", "watch"],
                "watched objects",
            ));
        }
    }
    rules.sort();
    rules.dedup_by(|a, b| a.api_group == b.api_group && a.resource == b.resource);
    rules
}
