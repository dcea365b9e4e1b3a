//! The operator's RBAC rules: the verbs the generated code and the runtime call, per
//! resource, and nothing more.
//!
//! Reads go through watch caches, so no kind is granted `get`; children are removed by the
//! garbage collector through their owner references, so none is granted `delete`.

use serde::Serialize;

use super::{Archetype, Primary, relations::Resolved};
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

    /// A rule that only feeds a watch cache; for Secrets it says what that costs.
    fn watched(group: &Text, resource: Text, reason: &'static str) -> Self {
        let reason = if is_secrets(group, &resource) {
            "watched Secrets: list/watch reads the data of every Secret in scope, not only the ones mapped"
        } else {
            reason
        };
        Self::new(group, resource, &["list", "watch"], reason)
    }
}

fn is_secrets(group: &Text, resource: &Text) -> bool {
    group.raw().is_empty() && resource.raw() == "secrets"
}

/// The verbs per resource:
/// - the primary is listed and watched, and patched only by the finalizer (its own
///   `metadata.finalizers`) and by sharding (its shard and drain labels); its status is
///   patched only where the code writes it;
/// - owned kinds are listed, watched and applied: a server-side apply that creates the
///   child is authorized as `create` as well as `patch`; the primary's `finalizers`
///   subresource takes `update` because the children's owner references block the owner's
///   deletion (the OwnerReferencesPermissionEnforcement admission plugin checks it);
/// - watched and generic kinds are only listed and watched.
pub(super) fn rules(
    archetype: Archetype,
    primary: &Primary,
    relations: &Resolved,
    finalizer: bool,
    status_helper: bool,
    sharding: bool,
) -> Vec<Rule> {
    let mut rules = Vec::new();
    // A generic operator reconciles each of its kinds as a primary of its own.
    let primaries: Vec<(&Text, &Text)> = match archetype {
        Archetype::Generic => primary
            .kinds
            .iter()
            .map(|k| (&k.group, &k.plural))
            .collect(),
        _ => vec![(&primary.group, &primary.plural)],
    };
    for (group, plural) in primaries {
        rules.extend(primary_rules(
            (group, plural),
            relations,
            (finalizer, sharding),
            status_helper,
        ));
    }
    for owned in &relations.owns {
        let reason = if is_secrets(&owned.group, &owned.plural) {
            "owned Secrets, applied: list/watch reads the data of every Secret in scope"
        } else {
            "owned children, applied (an apply that creates is also a create)"
        };
        rules.push(Rule::new(
            &owned.group,
            owned.plural.clone(),
            &["list", "watch", "create", "patch"],
            reason,
        ));
    }
    for watched in &relations.watches {
        let related = &watched.related;
        let owned = relations
            .owns
            .iter()
            .any(|o| o.group == related.group && o.plural == related.plural);
        if !owned {
            rules.push(Rule::watched(
                &related.group,
                related.plural.clone(),
                "watched objects",
            ));
        }
    }
    merged(rules)
}

/// One rule per resource, sorted, holding every verb any rule for it grants: a kind can be
/// the primary and watched, or owned and watched, and no verb of either may be lost.
fn merged(mut rules: Vec<Rule>) -> Vec<Rule> {
    rules.sort();
    let mut out: Vec<Rule> = Vec::with_capacity(rules.len());
    for rule in rules {
        match out.last_mut() {
            Some(last) if last.api_group == rule.api_group && last.resource == rule.resource => {
                for verb in rule.verbs {
                    if !last.verbs.contains(&verb) {
                        last.verbs.push(verb);
                    }
                }
            }
            _ => out.push(rule),
        }
    }
    out
}

/// A primary's own rules: its resource `plural` in `group`.
fn primary_rules(
    (group, plural): (&Text, &Text),
    relations: &Resolved,
    (finalizer, sharding): (bool, bool),
    status_helper: bool,
) -> Vec<Rule> {
    let sub = |name: &str| Text::new(format!("{}/{name}", plural.raw()));
    let mut rules = Vec::new();
    let patched_for = match (finalizer, sharding) {
        (false, false) => None,
        (true, false) => Some("primary resource (patched only for the finalizer)"),
        (false, true) => Some(
            "primary resource (patched only for sharding: the sharder writes the shard and drain labels, a replica removes them to let an object go)",
        ),
        (true, true) => Some(
            "primary resource (patched only for the finalizer, and for sharding: the sharder writes the shard and drain labels, a replica removes them to let an object go)",
        ),
    };
    match patched_for {
        Some(reason) => rules.push(Rule::new(
            group,
            plural.clone(),
            &["list", "watch", "patch"],
            reason,
        )),
        None => rules.push(Rule::watched(group, plural.clone(), "primary resource")),
    }
    if status_helper {
        rules.push(Rule::new(
            group,
            sub("status"),
            &["patch"],
            "status written only when it changed",
        ));
    }
    rules.push(Rule::new(
        &Text::from("events.k8s.io"),
        Text::from("events"),
        &["create", "patch"],
        "events about reconcile outcomes",
    ));
    if !relations.owns.is_empty() {
        rules.push(Rule::new(
            group,
            sub("finalizers"),
            &["update"],
            "children's owner references that block the primary's deletion",
        ));
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_for_one_resource_merge_their_verbs_rather_than_drop_one() {
        let group = Text::from("apps");
        let watched = Rule::watched(&group, Text::from("deployments"), "watched objects");
        let primary = Rule::new(
            &group,
            Text::from("deployments"),
            &["list", "watch", "patch"],
            "primary resource (patched only for the finalizer)",
        );
        let events = Rule::new(
            &Text::from("events.k8s.io"),
            Text::from("events"),
            &["create"],
            "e",
        );
        let rules = merged(vec![primary, events, watched]);
        assert_eq!(rules.len(), 2, "{rules:?}");
        let verbs: Vec<&str> = rules[0].verbs.iter().map(|v| v.0).collect();
        assert_eq!(verbs, ["list", "watch", "patch"], "{rules:?}");
    }
}
