//! The labels that carry an assignment, and what the sharder writes into them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Assignment, Error, ObjectKey};
use crate::apply::SHARD_LABEL_PREFIX;

/// The label keys of one ring: which shard an object belongs to, and whether it is being
/// drained from it. Keyed by the operator, so that two sharded operators that reconcile the
/// same objects do not read each other's labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    shard: String,
    drain: String,
}

impl Labels {
    /// The labels of the ring named `ring` (the operator's name).
    pub fn new(ring: &str) -> Result<Self, Error> {
        if !is_dns_label(ring) {
            return Err(Error::RingName(ring.to_owned()));
        }
        Ok(Self {
            shard: format!("{SHARD_LABEL_PREFIX}{ring}"),
            drain: format!("drain.operator-gen.io/{ring}"),
        })
    }

    /// The key of the label whose value names the object's shard.
    pub fn shard(&self) -> &str {
        &self.shard
    }

    /// The key of the label that asks the object's shard to let it go.
    pub fn drain(&self) -> &str {
        &self.drain
    }

    /// Whether an object with `labels` is being drained from its shard: its replica should
    /// acknowledge in its next reconcile, with [`Labels::acknowledge`], instead of reconciling.
    pub fn drain_requested(&self, labels: &BTreeMap<String, String>) -> bool {
        labels.contains_key(&self.drain)
    }

    /// The label selector of the objects placed on `shard`: what its replica watches.
    pub fn selector(&self, shard: &str) -> String {
        format!("{}={shard}", self.shard)
    }

    /// Where an object with `labels` stands.
    pub fn placement(&self, labels: &BTreeMap<String, String>) -> Placement {
        Placement {
            shard: labels.get(&self.shard).cloned(),
            draining: self.drain_requested(labels),
        }
    }

    /// The merge patch by which a replica lets go of a drained object: both labels removed,
    /// on condition that the object is still at `resource_version`.
    pub fn acknowledge(&self, resource_version: &str) -> Value {
        json!({"metadata": {
            "resourceVersion": resource_version,
            "labels": {&self.shard: null, &self.drain: null},
        }})
    }
}

/// Whether `value` can be a label's value, so a shard of that name can be written: at most 63
/// letters, digits, '-', '_' and '.', starting and ending with a letter or digit.
pub(crate) fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// A DNS-1123 label: what Kubernetes accepts as the name part of a label key.
fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
}

/// Where an object stands, as its labels say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// The shard its label names, if any.
    pub shard: Option<String>,
    /// Whether its shard is asked to let it go.
    pub draining: bool,
}

/// What the sharder does with one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: the object is where it belongs, its drain is not yet acknowledged, or no shard
    /// is live to take it.
    Keep,
    /// Give the object to this shard (and clear any drain of a shard that is gone).
    Assign(String),
    /// Ask the object's live shard to let it go.
    Drain,
}

impl Decision {
    /// What the sharder decides for an object at `placement`, given where `assignment` puts
    /// `key` and whether a shard is `live`.
    pub fn for_object(
        placement: &Placement,
        key: &ObjectKey<'_>,
        assignment: &impl Assignment,
        live: impl Fn(&str) -> bool,
    ) -> Self {
        // With no live shard (every replica gone, or the sharder's view of them stale),
        // assignments stay as they are rather than being cleared.
        let Some(desired) = assignment.shard_for(key) else {
            return Self::Keep;
        };
        match placement.shard.as_deref() {
            None => Self::Assign(desired.to_owned()),
            Some(shard) if !live(shard) => Self::Assign(desired.to_owned()),
            Some(_) if placement.draining => Self::Keep,
            Some(shard) if shard == desired => Self::Keep,
            Some(_) => Self::Drain,
        }
    }

    /// The merge patch that carries the decision out, on condition that the object is still
    /// at `resource_version` (a reconcile that acknowledged a drain in between wins); `None`
    /// for [`Decision::Keep`].
    pub fn patch(&self, names: &Labels, resource_version: &str) -> Option<Value> {
        let labels = match self {
            Self::Keep => return None,
            Self::Assign(shard) => json!({names.shard(): shard, names.drain(): null}),
            Self::Drain => json!({names.drain(): "true"}),
        };
        Some(json!({"metadata": {"resourceVersion": resource_version, "labels": labels}}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharding::{Ring, fixtures::key};

    #[test]
    fn a_ring_name_must_be_a_dns_label() {
        for bad in ["", "-op", "op-", "Op", "op/x", "op.x", &"o".repeat(64)] {
            assert!(Labels::new(bad).is_err(), "{bad:?}");
        }
        let labels = Labels::new("my-operator").expect("a DNS label");
        assert_eq!(labels.shard(), "shard.operator-gen.io/my-operator");
        assert_eq!(labels.drain(), "drain.operator-gen.io/my-operator");
        assert_eq!(
            labels.selector("my-operator-7d9f-x2"),
            "shard.operator-gen.io/my-operator=my-operator-7d9f-x2"
        );
        assert!(is_label_value("my-operator-7d9f-x2") && is_label_value("A.b_c"));
        for bad in ["", "-a", "a-", "a/b", &"a".repeat(64)] {
            assert!(!is_label_value(bad), "{bad:?}");
        }
    }

    /// The sharder's decision for an object labelled `shard` (and drained when `draining`),
    /// on a ring of op-a and op-b of which `live` are live.
    fn decide(shard: Option<&str>, draining: bool, live: &[&str]) -> (Decision, String) {
        let names = Labels::new("op").expect("a DNS label");
        let ring = Ring::new(live.iter().copied());
        let mut labels = BTreeMap::new();
        if let Some(shard) = shard {
            labels.insert(names.shard().to_owned(), shard.to_owned());
        }
        if draining {
            labels.insert(names.drain().to_owned(), "true".to_owned());
        }
        let object = key("w");
        let desired = ring.shard_for(&object).unwrap_or_default().to_owned();
        let placement = names.placement(&labels);
        let decision = Decision::for_object(&placement, &object, &ring, |s| live.contains(&s));
        (decision, desired)
    }

    #[test]
    fn an_unassigned_object_goes_to_its_shard_on_the_ring() {
        let (decision, desired) = decide(None, false, &["op-a", "op-b"]);
        assert_eq!(decision, Decision::Assign(desired));
    }

    #[test]
    fn an_object_of_a_live_shard_is_drained_before_it_moves() {
        let (_, desired) = decide(None, false, &["op-a", "op-b"]);
        let other = if desired == "op-a" { "op-b" } else { "op-a" };
        assert_eq!(
            decide(Some(other), false, &["op-a", "op-b"]).0,
            Decision::Drain
        );
        // Until the shard acknowledges, the sharder waits.
        assert_eq!(
            decide(Some(other), true, &["op-a", "op-b"]).0,
            Decision::Keep
        );
        assert_eq!(
            decide(Some(&desired), false, &["op-a", "op-b"]).0,
            Decision::Keep
        );
    }

    #[test]
    fn a_drain_label_left_on_an_unassigned_object_does_not_hold_it_back() {
        let (decision, desired) = decide(None, true, &["op-a", "op-b"]);
        assert_eq!(decision, Decision::Assign(desired));
    }

    #[test]
    fn an_object_of_a_gone_shard_moves_at_once_even_while_draining() {
        for draining in [false, true] {
            let (decision, desired) = decide(Some("op-gone"), draining, &["op-a", "op-b"]);
            assert_eq!(decision, Decision::Assign(desired));
        }
    }

    #[test]
    fn with_no_live_shard_assignments_stay() {
        assert_eq!(decide(Some("op-a"), false, &[]).0, Decision::Keep);
        assert_eq!(decide(None, false, &[]).0, Decision::Keep);
    }

    #[test]
    fn patches_are_conditional_on_the_version_decided_on() {
        let names = Labels::new("op").expect("a DNS label");
        let assign = Decision::Assign("op-a".into()).patch(&names, "42");
        assert_eq!(
            assign,
            Some(json!({"metadata": {"resourceVersion": "42", "labels": {
                "shard.operator-gen.io/op": "op-a",
                "drain.operator-gen.io/op": null,
            }}}))
        );
        let drain = Decision::Drain.patch(&names, "7").expect("a patch");
        assert_eq!(
            drain["metadata"]["labels"]["drain.operator-gen.io/op"],
            "true"
        );
        assert_eq!(drain["metadata"]["resourceVersion"], "7");
        assert_eq!(Decision::Keep.patch(&names, "7"), None);
        let ack = names.acknowledge("9");
        assert_eq!(ack["metadata"]["resourceVersion"], "9");
        assert_eq!(
            ack["metadata"]["labels"]["shard.operator-gen.io/op"],
            Value::Null
        );
        assert_eq!(
            ack["metadata"]["labels"]["drain.operator-gen.io/op"],
            Value::Null
        );
    }
}
