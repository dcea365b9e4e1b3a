//! Reconcile logic for `TargetGroupPolicy`: each policy's health check, published in a
//! ConfigMap of its own (`<policy>-health-check`) for dashboards and runbooks that should not
//! need read access to the policies themselves. This file is the user's: `cargo xtask gen --out
//! generated/targetgrouppolicy-auditor` never touches it.
//!
//! The policy's status belongs to AWS's Gateway API controller. This operator adds only its
//! own `HealthCheckPublished` condition there (`status.condition` in `operator.yaml`), which the
//! generated controller writes after each reconcile, by server-side apply of that one entry.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{ResourceExt, api::ObjectMeta, runtime::controller::Action};

use crate::{
    controller::{Context, Primary, Reconciler, success_action},
    error::{Error, Result},
};

/// The operator's own state: none.
#[derive(Debug, Default)]
pub struct Operator {}

impl Reconciler for Operator {
    async fn apply(&self, policy: Arc<Primary>, ctx: Arc<Context>) -> Result<Action> {
        ctx.apply_owned(&policy, health_check_config_map(&policy)?)
            .await?;
        Ok(success_action())
    }
}

/// The ConfigMap that publishes `policy`'s health check: `healthCheck.json` (`{}` when the
/// policy leaves it to the defaults), and the target the policy applies to.
pub fn health_check_config_map(policy: &Primary) -> Result<ConfigMap> {
    let health_check = serde_json::to_string(&policy.spec.health_check)?;
    let health_check = if health_check == "null" {
        "{}".to_owned()
    } else {
        health_check
    };
    let target = &policy.spec.target_ref;
    if target.name.is_empty() {
        return Err(Error::Permanent(
            "the policy names no target (`spec.targetRef.name`)".to_owned(),
        ));
    }
    let data = BTreeMap::from([
        ("healthCheck.json".to_owned(), health_check),
        (
            "target".to_owned(),
            format!("{}/{}", target.kind, target.name),
        ),
    ]);
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{}-health-check", policy.name_any())),
            namespace: policy.namespace(),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn policy(health_check: serde_json::Value) -> Primary {
        serde_json::from_value(json!({
            "apiVersion": "application-networking.k8s.aws/v1alpha1",
            "kind": "TargetGroupPolicy",
            "metadata": {"name": "checkout", "namespace": "shop", "uid": "c4e1"},
            "spec": {
                "targetRef": {"group": "application-networking.k8s.aws", "kind": "ServiceExport", "name": "checkout"},
                "healthCheck": health_check,
            }
        }))
        .expect("a valid TargetGroupPolicy")
    }

    #[test]
    fn the_config_map_publishes_the_health_check_and_its_target() {
        let config_map =
            health_check_config_map(&policy(json!({"path": "/healthz", "intervalSeconds": 10})))
                .expect("published");
        assert_eq!(
            config_map.metadata.name.as_deref(),
            Some("checkout-health-check")
        );
        assert_eq!(config_map.metadata.namespace.as_deref(), Some("shop"));
        let data = config_map.data.expect("data");
        let published: serde_json::Value =
            serde_json::from_str(&data["healthCheck.json"]).expect("JSON");
        assert_eq!(published["path"], "/healthz");
        assert_eq!(published["intervalSeconds"], 10);
        assert_eq!(data["target"], "ServiceExport/checkout");
    }

    #[test]
    fn a_policy_without_a_health_check_publishes_an_empty_one() {
        let mut policy = policy(json!({}));
        policy.spec.health_check = None;
        let data = health_check_config_map(&policy).expect("published").data;
        assert_eq!(data.expect("data")["healthCheck.json"], "{}");
    }
}
