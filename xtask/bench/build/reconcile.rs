//! The bench's job, in the crate `cargo xtask bench build` generates with `operator-gen new`
//! for a PrometheusRule that owns a ConfigMap: the reconcile the plain kube-rs and
//! controller-runtime peers (`xtask/bench/peers/`) also have, so that the three builds compare
//! the same program. The bench writes this file over the generated crate's `src/reconcile.rs`,
//! which is the user's, and builds it; it is not a member of the workspace.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{ResourceExt, api::ObjectMeta, runtime::controller::Action};
use serde::Serialize;

use crate::{
    controller::{Context, Primary, Reconciler, success_action},
    error::{Error, Result},
    types::PrometheusRuleGroups,
};

/// The operator's own state: none.
#[derive(Debug, Default)]
pub struct Operator {}

impl Reconciler for Operator {
    async fn apply(&self, rule: Arc<Primary>, ctx: Arc<Context>) -> Result<Action> {
        let config_map = rule_config_map(&rule)?;
        ctx.apply_owned(&rule, config_map).await?;
        Ok(success_action())
    }
}

#[derive(Serialize)]
struct RuleFile<'a> {
    groups: &'a [PrometheusRuleGroups],
}

/// The ConfigMap `<name>-rules` holding `<name>.rules.yaml` for `rule`.
fn rule_config_map(rule: &Primary) -> Result<ConfigMap> {
    let name = rule.name_any();
    let groups = rule.spec.groups.as_deref().unwrap_or_default();
    let file = serde_saphyr::to_string(&RuleFile { groups })
        .map_err(|e| Error::Permanent(format!("rule {name} cannot be written as YAML: {e}")))?;
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{name}-rules")),
            namespace: rule.namespace(),
            labels: Some(BTreeMap::from([(
                "monitoring.example.com/rule-file".to_owned(),
                name.clone(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(format!("{name}.rules.yaml"), file)])),
        ..ConfigMap::default()
    })
}
