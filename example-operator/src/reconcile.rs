//! Reconcile logic for `PrometheusRule`: each rule becomes a ConfigMap holding the rule file
//! that Prometheus would load, `<name>.rules.yaml`, and is published to an outside rule
//! registry. The registry is a folder (`RULE_REGISTRY_DIR`): each rule's file sits in it as
//! `<namespace>.<name>.rules.yaml` until the rule is deleted, and a file named
//! `<namespace>.<name>` dropped into its `triggers/` folder asks for that rule to be
//! reconciled again (the registry changed it). Without `RULE_REGISTRY_DIR` there is none.
//!
//! This file is the user's: `cargo xtask gen --out example-operator` rewrites the generated
//! modules around it and never touches it.

use std::{
    collections::BTreeMap,
    io::ErrorKind,
    path::{Path, PathBuf},
    sync::Arc,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    ResourceExt,
    api::ObjectMeta,
    runtime::{controller::Action, reflector::ObjectRef},
};
use serde::Serialize;

use crate::{
    controller::{Context, Primary, Reconciler, success_action},
    error::{Error, Result},
    types::{PrometheusRule, PrometheusRuleGroups},
};

/// Label that marks the ConfigMaps this operator renders, for `kubectl get cm -l`.
pub const RULE_FILE_LABEL: &str = "monitoring.example.com/rule-file";

/// The operator's state: where the outside rule registry is, if there is one.
#[derive(Debug)]
pub struct Operator {
    registry: Option<PathBuf>,
}

impl Default for Operator {
    /// The registry named by `RULE_REGISTRY_DIR`, as the generated `main.rs` builds it.
    fn default() -> Self {
        Self {
            registry: std::env::var_os("RULE_REGISTRY_DIR").map(PathBuf::from),
        }
    }
}

impl Reconciler for Operator {
    async fn apply(&self, rule: Arc<PrometheusRule>, ctx: Arc<Context>) -> Result<Action> {
        let config_map = rule_config_map(&rule)?;
        tracing::info!(rule = %rule.name_any(), config_map = %config_map.name_any(), "applying rule file");
        // `apply_owned` sets the controller ownerReference and writes nothing when the live
        // ConfigMap already matches, so a second reconcile of an unchanged rule is read-only.
        let applied = ctx.apply_owned(&rule, config_map).await?;
        if let (Some(registry), Some(data)) = (&self.registry, applied.data) {
            for (file, content) in data {
                let path = registry.join(format!("{}.{file}", namespace_of(&rule)));
                // Written only when it differs, like the ConfigMap.
                if std::fs::read_to_string(&path).ok().as_ref() != Some(&content) {
                    std::fs::write(&path, content).map_err(registry_error(&path))?;
                }
            }
        }
        Ok(success_action())
    }

    async fn cleanup(&self, rule: Arc<PrometheusRule>, _ctx: Arc<Context>) -> Result<Action> {
        if let Some(registry) = &self.registry {
            let file = format!("{}.{}.rules.yaml", namespace_of(&rule), rule.name_any());
            let path = registry.join(file);
            match std::fs::remove_file(&path) {
                Err(error) if error.kind() != ErrorKind::NotFound => {
                    return Err(registry_error(&path)(error));
                }
                _ => tracing::info!(rule = %rule.name_any(), "removed from the registry"),
            }
        }
        Ok(Action::await_change())
    }

    async fn poll_rule_registry(&self, _ctx: Arc<Context>) -> Result<Vec<ObjectRef<Primary>>> {
        let Some(registry) = &self.registry else {
            return Ok(Vec::new());
        };
        let triggers = registry.join("triggers");
        let entries = match std::fs::read_dir(&triggers) {
            Ok(entries) => entries,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(registry_error(&triggers)(error)),
        };
        let mut changed = Vec::new();
        for entry in entries {
            let path = entry.map_err(registry_error(&triggers))?.path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if let Some((namespace, name)) = name.as_deref().and_then(|n| n.split_once('.')) {
                changed.push(ObjectRef::new(name).within(namespace));
            }
            std::fs::remove_file(&path).map_err(registry_error(&path))?;
        }
        Ok(changed)
    }
}

fn namespace_of(rule: &PrometheusRule) -> String {
    rule.namespace().unwrap_or_default()
}

/// A registry that cannot be read or written is down for now: retried with backoff.
fn registry_error(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |error| Error::Transient(format!("rule registry {}: {error}", path.display()))
}

/// The Prometheus rule file format: the top-level `groups:` list.
#[derive(Serialize)]
struct RuleFile<'a> {
    groups: &'a [PrometheusRuleGroups],
}

/// The ConfigMap `<name>-rules` holding `<name>.rules.yaml` for `rule`.
pub fn rule_config_map(rule: &PrometheusRule) -> Result<ConfigMap> {
    let name = rule.name_any();
    let groups = rule.spec.groups.as_deref().unwrap_or_default();
    let file = serde_saphyr::to_string(&RuleFile { groups })
        .map_err(|e| Error::Permanent(format!("rule {name} cannot be written as YAML: {e}")))?;
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{name}-rules")),
            namespace: rule.namespace(),
            labels: Some(BTreeMap::from([(RULE_FILE_LABEL.to_owned(), name.clone())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(format!("{name}.rules.yaml"), file)])),
        ..ConfigMap::default()
    })
}

#[cfg(test)]
mod tests {
    use http::{Method, Request, Response, StatusCode};
    use kube::{client::Body, runtime::watcher};
    use serde_json::{Value, json};

    use super::*;

    fn rule() -> PrometheusRule {
        serde_json::from_value(json!({
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {"name": "api", "namespace": "team-a", "uid": "6b1e"},
            "spec": {"groups": [{"name": "api.rules", "rules": [
                {"alert": "HighErrorRate", "expr": "rate(errors[5m]) > 0.1", "for": "10m"}
            ]}]}
        }))
        .expect("a valid PrometheusRule")
    }

    #[test]
    fn the_rule_file_holds_the_groups() {
        let config_map = rule_config_map(&rule()).unwrap();
        assert_eq!(config_map.metadata.name.as_deref(), Some("api-rules"));
        assert_eq!(config_map.metadata.namespace.as_deref(), Some("team-a"));
        let data = config_map.data.unwrap();
        let file: Value = serde_saphyr::from_str(&data["api.rules.yaml"]).unwrap();
        assert_eq!(file["groups"][0]["name"], "api.rules");
        assert_eq!(file["groups"][0]["rules"][0]["alert"], "HighErrorRate");
        assert_eq!(file["groups"][0]["rules"][0]["for"], "10m");
    }

    #[tokio::test]
    async fn the_registry_triggers_reconciles_and_cleanup_removes_the_rule() {
        let dir = std::env::temp_dir().join(format!("rule-registry-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("triggers")).unwrap();
        std::fs::write(dir.join("triggers/team-a.api"), "").unwrap();
        std::fs::write(dir.join("team-a.api.rules.yaml"), "groups: []\n").unwrap();
        let operator = Operator {
            registry: Some(dir.clone()),
        };
        let (service, _handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let ctx = Arc::new(Context::new(kube::Client::new(service, "default")));

        let changed = operator.poll_rule_registry(Arc::clone(&ctx)).await;
        assert_eq!(
            changed.unwrap(),
            vec![ObjectRef::new("api").within("team-a")]
        );
        let again = operator.poll_rule_registry(Arc::clone(&ctx)).await;
        assert!(again.unwrap().is_empty(), "a trigger fires once");
        operator.cleanup(Arc::new(rule()), ctx).await.unwrap();
        assert!(!dir.join("team-a.api.rules.yaml").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Answers requests in order and records them; `None` answers 404.
    async fn serve(
        mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
        answers: Vec<Option<Value>>,
    ) -> Vec<(Method, String, Option<Value>)> {
        let mut seen = Vec::new();
        for answer in answers {
            let Some((request, respond)) = handle.next_request().await else {
                break;
            };
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap();
            let body =
                (!bytes.is_empty()).then(|| serde_json::from_slice::<Value>(&bytes).unwrap());
            let uri = parts.uri.to_string();
            seen.push((parts.method, uri, body));
            let response = match answer {
                Some(object) => Response::new(Body::from(object.to_string().into_bytes())),
                None => {
                    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404});
                    let mut response = Response::new(Body::from(status.to_string().into_bytes()));
                    *response.status_mut() = StatusCode::NOT_FOUND;
                    response
                }
            };
            respond.send_response(response);
        }
        seen
    }

    #[tokio::test]
    async fn first_reconcile_applies_the_child_and_the_second_writes_nothing() {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let ctx = Arc::new(Context::new(kube::Client::new(service, "default")));
        let cache = &ctx.children.config_map;
        cache.apply_watcher_event(&watcher::Event::InitDone);
        let applied = serde_json::to_value(rule_config_map(&rule()).unwrap()).unwrap();
        let mut live = applied.clone();
        live["metadata"]["resourceVersion"] = json!("12");
        live["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("example-operator");
        live["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "name": "api",
            "uid": "6b1e", "controller": true
        }]);
        // First reconcile: the cache holds no child, so one apply. Second: the watch has
        // cached what was applied, which already matches, so no request at all.
        let server = tokio::spawn(serve(handle, vec![Some(live.clone())]));

        let operator = Operator { registry: None };
        operator
            .apply(Arc::new(rule()), Arc::clone(&ctx))
            .await
            .unwrap();
        let cached: ConfigMap = serde_json::from_value(live.clone()).unwrap();
        cache.apply_watcher_event(&watcher::Event::Apply(cached));
        operator
            .apply(Arc::new(rule()), Arc::clone(&ctx))
            .await
            .unwrap();
        drop(ctx);
        let seen = server.await.unwrap();

        let path = "/api/v1/namespaces/team-a/configmaps/api-rules";
        assert_eq!(seen.len(), 1, "one apply and nothing more: {seen:#?}");
        let (method, uri, body) = &seen[0];
        assert_eq!(method, Method::PATCH);
        assert!(
            uri.starts_with(path)
                && uri.contains("fieldManager=example-operator")
                && uri.contains("force=true"),
            "{uri}"
        );
        let body = body.as_ref().expect("an apply body");
        assert_eq!(
            body["metadata"]["ownerReferences"],
            live["metadata"]["ownerReferences"]
        );
        assert_eq!(body["metadata"]["labels"], live["metadata"]["labels"]);
        assert_eq!(body["data"], applied["data"]);
    }
}
