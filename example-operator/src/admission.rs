//! Admission hooks for `PrometheusRule`, which the generated webhook server (`src/webhook.rs`)
//! calls before the API server stores a rule. This file is the user's: `cargo xtask gen --out
//! example-operator` never touches it.
//!
//! `validate` refuses what Prometheus would refuse to load, so that a broken rule is caught by
//! `kubectl apply` instead of in a Prometheus log: a rule that neither alerts nor records, or
//! that does both. `mutate` gives every group that names no `interval` the default one, so the
//! stored rule says how often it is evaluated.

use crate::{controller::Primary, types::PrometheusRuleGroupsRules};

/// How often a group is evaluated when it does not say.
pub const DEFAULT_INTERVAL: &str = "1m";

/// Whether `rule` may be stored; `old` is unused, as any valid rule may replace another.
pub async fn validate(rule: &Primary, old: Option<&Primary>) -> Result<(), String> {
    let _ = old;
    for group in rule.spec.groups.iter().flatten() {
        for (index, each) in group.rules.iter().flatten().enumerate() {
            check(each)
                .map_err(|reason| format!("group {:?}, rule {index}: {reason}", group.name))?;
        }
    }
    Ok(())
}

/// A rule alerts or records, one of the two.
fn check(rule: &PrometheusRuleGroupsRules) -> Result<(), &'static str> {
    match (&rule.alert, &rule.record) {
        (Some(_), Some(_)) => Err("a rule sets both `alert` and `record`; set one"),
        (None, None) => Err("a rule sets neither `alert` nor `record`; set one"),
        _ => Ok(()),
    }
}

/// Gives every group without an `interval` the default one.
pub async fn mutate(rule: &mut Primary) -> Result<(), String> {
    for group in rule.spec.groups.iter_mut().flatten() {
        group
            .interval
            .get_or_insert_with(|| DEFAULT_INTERVAL.to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule_with(alert: Option<&str>, record: Option<&str>) -> Primary {
        let mut rule = crate::controller::sample("r", Some("default")).expect("the sample");
        let groups = rule.spec.groups.as_mut().expect("the sample has groups");
        let rules = groups[0].rules.as_mut().expect("the sample has rules");
        rules[0].alert = alert.map(str::to_owned);
        rules[0].record = record.map(str::to_owned);
        rule
    }

    #[tokio::test]
    async fn a_rule_must_alert_or_record_but_not_both() {
        assert!(validate(&rule_with(Some("A"), None), None).await.is_ok());
        assert!(
            validate(&rule_with(None, Some("job:up:sum")), None)
                .await
                .is_ok()
        );
        let neither = validate(&rule_with(None, None), None)
            .await
            .expect_err("refused");
        assert!(
            neither.contains("neither `alert` nor `record`"),
            "{neither}"
        );
        assert!(
            neither.contains("example.rules"),
            "names the group: {neither}"
        );
        assert!(
            validate(&rule_with(Some("A"), Some("b")), None)
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn only_groups_without_an_interval_get_the_default() {
        let mut rule = rule_with(Some("A"), None);
        let groups = rule.spec.groups.as_mut().expect("the sample has groups");
        groups.push(groups[0].clone());
        groups[1].interval = Some("5m".to_owned());
        mutate(&mut rule).await.expect("allowed");
        let groups = rule.spec.groups.expect("still there");
        assert_eq!(groups[0].interval.as_deref(), Some(DEFAULT_INTERVAL));
        assert_eq!(groups[1].interval.as_deref(), Some("5m"));
    }
}
