//! The plain kube-rs peer of `cargo xtask bench runtime`: what a kube-rs user writes for the
//! job the bench gives example-operator, from kube's own examples and without operator-gen.
//! Every PrometheusRule gets a finalizer (`kube::runtime::finalizer`) and one ConfigMap holding
//! its rule file, applied server-side with a controller ownerReference on every reconcile
//! (`Controller::owns` brings the ConfigMaps' changes back).
//!
//! Where it matches example-operator by choice rather than by kube's defaults, so that the two
//! do the same work: it watches the whole cluster, reconciles at most 64 objects at once
//! (kube's default is unlimited), and watches only the ConfigMaps it manages, by label. It
//! keeps kube's defaults everywhere else: its caches keep `managedFields`, and it applies the
//! child without comparing it with the cached one first.

// A copy of example-operator's types, constructors and all; the peer builds its objects by hand.
#[allow(dead_code)]
mod types;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ObjectMeta, Patch, PatchParams},
    runtime::{
        Controller,
        controller::{Action, Config},
        finalizer::{self, Event},
        watcher,
    },
};
use serde::Serialize;

use crate::types::{PrometheusRule, PrometheusRuleGroups};

/// The field manager of its applies, and the value of its children's managed-by label.
const MANAGER: &str = "kube-rs-peer";
const FINALIZER: &str = "kube-rs-peer.example.com/cleanup";
const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
const RULE_FILE_LABEL: &str = "monitoring.example.com/rule-file";
/// Reconciles at once, as example-operator's default.
const CONCURRENCY: u16 = 64;

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("rule {0} cannot be written as YAML: {1}")]
    Yaml(String, String),
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Finalizer(#[from] Box<finalizer::Error<Error>>),
}

struct Context {
    client: Client,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let client = Client::try_default().await?;
    let children = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGER}"));
    Controller::new(
        Api::<PrometheusRule>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<ConfigMap>::all(client.clone()), children)
    .with_config(Config::default().concurrency(CONCURRENCY))
    .shutdown_on_signal()
    .run(reconcile, error_policy, Arc::new(Context { client }))
    .for_each(|result| async move {
        if let Err(error) = result {
            tracing::warn!(%error, "reconcile failed");
        }
    })
    .await;
    Ok(())
}

/// Holds the finalizer on `rule`, and applies its ConfigMap while it lives.
async fn reconcile(rule: Arc<PrometheusRule>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = rule.namespace().unwrap_or_default();
    let rules: Api<PrometheusRule> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer::finalizer(&rules, FINALIZER, rule, |event| async {
        match event {
            Event::Apply(rule) => apply(&rule, &ctx).await,
            Event::Cleanup(_) => Ok(Action::await_change()),
        }
    })
    .await
    .map_err(|error| Error::Finalizer(Box::new(error)))
}

async fn apply(rule: &PrometheusRule, ctx: &Context) -> Result<Action, Error> {
    let mut child = rule_config_map(rule)?;
    child.metadata.owner_references = rule.controller_owner_ref(&()).map(|owner| vec![owner]);
    let namespace = rule.namespace().unwrap_or_default();
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    let params = PatchParams::apply(MANAGER).force();
    config_maps
        .patch(&child.name_any(), &params, &Patch::Apply(&child))
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_rule: Arc<PrometheusRule>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(%error, "retrying");
    Action::requeue(Duration::from_secs(5))
}

#[derive(Serialize)]
struct RuleFile<'a> {
    groups: &'a [PrometheusRuleGroups],
}

/// The rule file of `rule`, as example-operator writes it.
fn rule_config_map(rule: &PrometheusRule) -> Result<ConfigMap, Error> {
    let name = rule.name_any();
    let groups = rule.spec.groups.as_deref().unwrap_or_default();
    let file = serde_saphyr::to_string(&RuleFile { groups })
        .map_err(|error| Error::Yaml(name.clone(), error.to_string()))?;
    let labels = [
        (RULE_FILE_LABEL.to_owned(), name.clone()),
        (MANAGED_BY_LABEL.to_owned(), MANAGER.to_owned()),
    ];
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{name}-rules")),
            namespace: rule.namespace(),
            labels: Some(BTreeMap::from(labels)),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(format!("{name}.rules.yaml"), file)])),
        ..ConfigMap::default()
    })
}
