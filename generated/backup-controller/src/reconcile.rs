//! Reconcile logic for `Backup` (`Primary` below, from `crate::types`).
//!
//! This file is yours: the generator created it once and will never overwrite it. The hooks
//! you can implement are declared on `Reconciler` in `controller.rs`; any you leave out keep
//! their default behaviour, so regenerating after a manifest change keeps this file compiling.
//!
//! The `Ready` condition in `status.conditions` is written for you after every
//! reconcile, only when it changed: `True` when `apply` succeeds, `False` with the error after
//! a permanent failure. To say more, call `ctx.set_condition(&obj, ok, reason, message)` in
//! `apply`; it takes the place of the one written after it.

use std::sync::Arc;

use kube::{ResourceExt, runtime::controller::Action};

use crate::{
    controller::{Context, Primary, Reconciler, success_action},
    error::Result,
};

/// The operator's own state: clients for outside systems, configuration.
#[derive(Debug, Default)]
pub struct Operator {}

impl Reconciler for Operator {
    async fn apply(&self, obj: Arc<Primary>, ctx: Arc<Context>) -> Result<Action> {
        tracing::info!(name = %obj.name_any(), namespace = ?obj.namespace(), "reconciling");
        drop(ctx);
        Ok(success_action())
    }
}
