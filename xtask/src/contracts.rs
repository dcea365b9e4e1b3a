//! The contracts between the generator and the runtime that no type checks. The generator
//! cannot depend on the runtime (kopium brings kube 4, the runtime kube 5), so nothing but the
//! e2e would notice when one side renames what the other writes by name. xtask depends on
//! both, so it holds them to each other here, in unit tests that run with the others:
//! - the series the generated alerts and dashboards read are ones the runtime serves;
//! - every request a reconcile makes through the runtime (the finalizer, the owned child's
//!   apply, the status, the Event) is one the generated role grants;
//! - `deploy/local/` and `crdgen --webhook-url` send the API server to the port an operator run
//!   with `cargo run` serves its webhooks on;
//! - every flag OPERATOR.md's table of settings lists is one the runtime takes, with that
//!   variable and default, and the table lists every flag of the runtime's groups.

#[cfg(test)]
mod tests {
    use std::{
        collections::BTreeSet,
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
    };

    use example_operator::{
        controller::{Context, Primary as PrometheusRule, Reconciler as _, sample},
        reconcile::Operator,
    };
    use http::Method;
    use kube::runtime::watcher;
    use operator_gen::model::runtime_series;
    use operator_gen_runtime::{
        telemetry::{Metrics, ReadyWhen},
        testing::{self, Seen},
    };
    use serde_json::{Value, json};

    /// Every series `metrics` serves, by name: the samples it renders, and for a metric with
    /// no sample yet (a family before its first label set) the series its type gives.
    fn served(metrics: &Metrics) -> BTreeSet<String> {
        let text = metrics.render();
        let mut series = BTreeSet::new();
        for line in text.lines() {
            if let Some(declared) = line.strip_prefix("# TYPE ") {
                let mut words = declared.split_whitespace();
                let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                    continue;
                };
                let suffixes: &[&str] = match kind {
                    "counter" => &["_total"],
                    "histogram" => &["_bucket", "_sum", "_count"],
                    _ => &[""],
                };
                series.extend(suffixes.iter().map(|suffix| format!("{name}{suffix}")));
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap_or_default();
                series.insert(name.to_owned());
            }
        }
        series
    }

    #[test]
    fn every_series_the_generated_alerts_and_dashboards_read_is_one_the_runtime_serves() {
        for webhooks in [false, true] {
            let metrics = if webhooks {
                let metrics = Metrics::new(ReadyWhen::WebhooksServe { watches: 1 });
                metrics.expect_webhook_answers("validate", &["allowed"]);
                metrics
            } else {
                Metrics::new(ReadyWhen::WatchesListed(1))
            };
            let served = served(&metrics);
            let read = runtime_series(webhooks);
            assert!(read.len() >= 8, "{read:?}");
            let missing: Vec<&String> = read.difference(&served).collect();
            assert!(
                missing.is_empty(),
                "with webhooks: {webhooks}; read by the generated monitoring, not served by the \
                 runtime: {missing:?}\nserved: {served:?}"
            );
        }
    }

    /// What `seen` asks of RBAC: the API group, the resource (with its subresource) and the
    /// verb.
    fn asked(seen: &Seen) -> (String, String, &'static str) {
        let segments: Vec<&str> = seen.path().trim_start_matches('/').split('/').collect();
        let (group, rest) = match segments.as_slice() {
            ["api", _version, rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => panic!("not an API path: {}", seen.path()),
        };
        let rest = match rest {
            ["namespaces", _namespace, rest @ ..] if !rest.is_empty() => rest,
            rest => rest,
        };
        let resource = match rest {
            [resource] | [resource, _] => (*resource).to_owned(),
            [resource, _, sub] => format!("{resource}/{sub}"),
            _ => panic!("not a resource path: {}", seen.path()),
        };
        let watching = seen.uri.query().is_some_and(|q| q.contains("watch=true"));
        let verb = match (&seen.method, rest.len()) {
            (&Method::GET, 1) if watching => "watch",
            (&Method::GET, 1) => "list",
            (&Method::GET, _) => "get",
            (&Method::POST, _) => "create",
            (&Method::PATCH, _) => "patch",
            (&Method::PUT, _) => "update",
            (&Method::DELETE, _) => "delete",
            (method, _) => panic!("an unexpected method {method}"),
        };
        (group.to_owned(), resource, verb)
    }

    /// Every `(group, resource, verb)` the roles of a `deploy/base/rbac.yaml` grant.
    fn granted(rbac: &str) -> BTreeSet<(String, String, String)> {
        let documents: Vec<Value> = serde_saphyr::from_str_multiple(rbac).expect("rbac.yaml");
        let rules = documents
            .iter()
            .filter(|d| matches!(d["kind"].as_str(), Some("ClusterRole" | "Role")))
            .flat_map(|d| d["rules"].as_array().cloned().unwrap_or_default());
        let strings = |value: &Value| -> Vec<String> {
            let list = value.as_array().cloned().unwrap_or_default();
            list.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        };
        let mut grants = BTreeSet::new();
        for rule in rules {
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        grants.insert((group.clone(), resource.clone(), verb));
                    }
                }
            }
        }
        grants
    }

    #[tokio::test]
    async fn every_request_a_reconcile_makes_is_one_the_generated_role_grants() {
        let rule = sample("api", Some("default")).expect("the sample decodes");
        let fresh = testing::stored(rule);
        let with_finalizer = |deleted: bool| -> PrometheusRule {
            let mut object = serde_json::to_value(&fresh).expect("a rule");
            object["metadata"]["finalizers"] = json!([example_operator::controller::FINALIZER]);
            if deleted {
                object["metadata"]["deletionTimestamp"] = json!("2026-11-28T12:00:00Z");
            }
            serde_json::from_value(object).expect("a rule")
        };
        // The API server holds the rule with its finalizer, and refuses the first apply of its
        // child, so that a failed reconcile and the success after it each publish an Event.
        let holding = testing::holding(&with_finalizer(false));
        let refused = Arc::new(AtomicBool::new(false));
        let refuse_once = Arc::clone(&refused);
        let answer = move |seen: &Seen| {
            let apply = seen.method == Method::PATCH && seen.path().contains("/configmaps/");
            if apply && !refuse_once.swap(true, Ordering::SeqCst) {
                (409, testing::conflict())
            } else {
                holding(seen)
            }
        };
        let (client, server) = testing::mock_api(answer);
        let ctx = Arc::new(Context::new(client));
        ctx.children
            .config_map
            .apply_watcher_event(&watcher::Event::InitDone);
        let operator = Operator::default();
        // The finalizer added, the child refused, the child applied, the cleanup.
        let runs = [
            (fresh.clone(), true),
            (with_finalizer(false), false),
            (with_finalizer(false), true),
            (with_finalizer(true), true),
        ];
        for (object, succeeds) in runs {
            let hooks = (
                |obj| operator.apply(obj, Arc::clone(&ctx)),
                |obj| operator.cleanup(obj, Arc::clone(&ctx)),
            );
            let result = ctx.reconcile(Arc::new(object), hooks).await;
            assert_eq!(result.is_ok(), succeeds, "{result:?}");
        }
        assert!(refused.load(Ordering::SeqCst));
        drop(ctx);
        let seen = server.await.expect("the mock API server ran");

        let rbac = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../example-operator/deploy/base/rbac.yaml"),
        )
        .expect("example-operator's generated RBAC");
        let grants = granted(&rbac);
        let asked: BTreeSet<_> = seen.iter().map(asked).collect();
        let kinds: BTreeSet<&str> = asked
            .iter()
            .map(|(_, resource, _)| resource.as_str())
            .collect();
        for expected in ["prometheusrules", "configmaps", "events"] {
            assert!(
                kinds.contains(expected),
                "no request for {expected}: {asked:?}"
            );
        }
        let refused: Vec<_> = asked
            .iter()
            .filter(|(group, resource, verb)| {
                !grants.contains(&(group.clone(), resource.clone(), (*verb).to_owned()))
            })
            .collect();
        assert!(
            refused.is_empty(),
            "asked of the API server but not granted by deploy/base/rbac.yaml: {refused:?}"
        );
    }

    #[test]
    fn the_local_webhook_url_is_on_the_port_a_local_run_serves_its_webhooks_on() {
        use operator_gen::model::{LOCAL_WEBHOOK_BASE, LOCAL_WEBHOOK_PORT};
        use operator_gen_runtime::settings::WEBHOOK_ADDR;

        assert_eq!(WEBHOOK_ADDR.port(), LOCAL_WEBHOOK_PORT);
        assert_eq!(
            LOCAL_WEBHOOK_BASE,
            format!("https://{WEBHOOK_ADDR}"),
            "with no `local.webhooks`, a crate's default --webhook-addr is the runtime's"
        );
    }

    #[test]
    fn every_flag_the_generated_docs_list_is_the_runtimes_with_its_variable_and_default() {
        use clap::Args as _;
        use operator_gen_runtime::settings::{Common, Conversion, Sharding, Webhooks};

        let command = clap::Command::new("operator");
        let mut command = Sharding::augment_args(Conversion::augment_args(Webhooks::augment_args(
            Common::augment_args(command),
        )));
        // Built, a flag has the defaults clap gives it (`false` for a switch) and `--help`.
        command.build();
        let rows = operator_gen::model::flags::every_row();
        for row in &rows {
            let long = row.flag.0.trim_start_matches("--");
            let arg = command
                .get_arguments()
                .find(|arg| arg.get_long() == Some(long))
                .unwrap_or_else(|| panic!("the runtime takes no {}", row.flag.0));
            let variable = arg.get_env().and_then(|env| env.to_str());
            assert_eq!(variable, Some(row.variable.0), "{}", row.flag.0);
            // The docs write a default as `code`, with a gloss after it, or as a word.
            let documented = match row.default.0 {
                "off" => Some("false"),
                "none" => None,
                text => Some(text.split('`').nth(1).unwrap_or(text)),
            };
            let default = arg.get_default_values().first().and_then(|v| v.to_str());
            assert_eq!(default, documented, "{}", row.flag.0);
        }
        // And the other way: the docs list every flag the runtime's groups take.
        let flags = command.get_arguments().filter_map(|arg| arg.get_long());
        for arg in flags.filter(|long| *long != "help") {
            assert!(
                rows.iter().any(|row| row.flag.0 == format!("--{arg}")),
                "OPERATOR.md's table lacks --{arg}"
            );
        }
    }
}
