//! Reconcile logic for `PrometheusRule` (`Primary` below, from `crate::types`).
//!
//! This file is yours: the generator created it once and will never overwrite it. The hooks
//! you can implement are declared on `Reconciler` in `controller.rs`; any you leave out keep
//! their default behaviour, so regenerating after a manifest change keeps this file compiling.

use std::sync::Arc;

use kube::{
    ResourceExt,
    runtime::{controller::Action, reflector::ObjectRef},
};

use operator_gen_runtime::relations::NamedBy;

use crate::{
    controller::{self, Context, Primary, Reconciler, success_action},
    error::Result,
};

/// The operator's own state: clients for outside systems, configuration.
#[derive(Debug, Default)]
pub struct Operator {}

impl Reconciler for Operator {
    async fn apply(&self, obj: Arc<Primary>, ctx: Arc<Context>) -> Result<Action> {
        tracing::info!(name = %obj.name_any(), namespace = ?obj.namespace(), "reconciling");
        // Watched Secret: a change to one whose label `monitoring.example.com/prometheusrule`
        // names this object reconciles it. The watch caches them (`cache: true`): read the
        // ones that name it from memory, rather than from the API server.
        let named_by = NamedBy::Label(controller::SECRET_LABEL);
        for secret in ctx.cached.secret.naming(obj.as_ref(), named_by) {
            tracing::debug!(secret = %secret.name_any(), "names it");
        }
        // Owned ConfigMap: applied with a controller ownerReference, so it is
        // garbage-collected with its owner. Fill in its content.
        let config_map = k8s_openapi::api::core::v1::ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(obj.name_any()),
                ..Default::default()
            },
            ..Default::default()
        };
        ctx.apply_owned(&obj, config_map).await?;
        Ok(success_action())
    }

    /// Runs before the object is deleted: the finalizer holds the deletion until this returns
    /// `Ok`. Remove what the outside systems below hold for it; owned children are
    /// garbage-collected without help.
    async fn cleanup(&self, obj: Arc<Primary>, ctx: Arc<Context>) -> Result<Action> {
        tracing::info!(name = %obj.name_any(), namespace = ?obj.namespace(), "cleaning up");
        drop(ctx);
        Ok(Action::await_change())
    }

    /// `rule-registry` is polled every 30 s: return the objects to reconcile because it
    /// changed.
    async fn poll_rule_registry(&self, ctx: Arc<Context>) -> Result<Vec<ObjectRef<Primary>>> {
        drop(ctx);
        Ok(Vec::new())
    }
}
