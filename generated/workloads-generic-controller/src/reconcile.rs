//! Reconcile logic shared by Deployment, StatefulSet: one function for every kind, on metadata
//! only (`PartialObjectMeta`), as in the kube-rs generic reconciler pattern.
//!
//! This file is yours: the generator created it once and will never overwrite it. The hooks
//! you can implement are declared on `Reconciler` in `controller.rs`; any you leave out keep
//! their default behaviour, so regenerating after a manifest change keeps this file compiling.

use std::sync::Arc;

use kube::{
    ResourceExt,
    api::PartialObjectMeta,
    runtime::{controller::Action, reflector::ObjectRef},
};

use crate::{
    controller::{Context, Kind, Reconciler, success_action},
    error::Result,
};

/// The operator's own state: clients for outside systems, configuration.
#[derive(Debug, Default)]
pub struct Operator {}

impl Reconciler for Operator {
    async fn apply<K: Kind>(
        &self,
        obj: Arc<PartialObjectMeta<K>>,
        ctx: Arc<Context<K>>,
    ) -> Result<Action> {
        let kind = K::kind(&());
        tracing::info!(%kind, name = %obj.name_any(), namespace = ?obj.namespace(), "reconciling");
        // Watched Secret: a change to one whose label `example.com/workload`
        // names this object reconciles it.
        // Owned ConfigMap: applied with a controller ownerReference, so it is
        // garbage-collected with its owner. Its name holds the owner's kind, since objects of
        // two kinds may share a name. Fill in its content.
        let config_map = k8s_openapi::api::core::v1::ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("{}-{}", kind.to_lowercase(), obj.name_any())),
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
    async fn cleanup<K: Kind>(
        &self,
        obj: Arc<PartialObjectMeta<K>>,
        ctx: Arc<Context<K>>,
    ) -> Result<Action> {
        let kind = K::kind(&());
        tracing::info!(%kind, name = %obj.name_any(), namespace = ?obj.namespace(), "cleaning up");
        drop(ctx);
        Ok(Action::await_change())
    }

    /// `inventory` is polled every 30 s: return the objects to reconcile because it
    /// changed.
    async fn poll_inventory<K: Kind>(
        &self,
        ctx: Arc<Context<K>>,
    ) -> Result<Vec<ObjectRef<PartialObjectMeta<K>>>> {
        drop(ctx);
        Ok(Vec::new())
    }
}
