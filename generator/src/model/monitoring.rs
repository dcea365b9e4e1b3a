//! What watches the operator itself: the ServiceMonitor that scrapes its metrics Service, the
//! alerts of its PrometheusRule, and a Grafana dashboard, for `deploy/monitoring/`.
//!
//! Every query selects the operator by `job`, which prometheus-operator sets to the Service's
//! name for a ServiceMonitor's targets. The metric names are the runtime's
//! (`operator_gen_runtime::metrics` and `process`); the e2e runs the rules and every
//! dashboard query against a real Prometheus scraping a running operator.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Value, json};

use crate::text::{Constant, Text, YamlDocument};

/// The Service port the ServiceMonitor scrapes, by name, and the path it reads.
pub const METRICS_PORT: &str = "http";
pub const METRICS_PATH: &str = "/metrics";

/// The monitoring assets of one operator.
#[derive(Debug, Clone, Serialize)]
pub struct Monitoring {
    /// The `job` label of the operator's series: its Service's name.
    pub job: Text,
    pub port: Constant,
    pub path: Constant,
    pub alerts: Vec<Alert>,
    /// The dashboard's ConfigMap in the Grafana sidecar's convention, all but its metadata,
    /// which the template writes: its namespace is the release's in a chart.
    pub dashboard: YamlDocument,
    /// The ConfigMap's name.
    pub dashboard_name: Text,
}

/// One alerting rule of the operator's PrometheusRule.
#[derive(Debug, Clone, Serialize)]
pub struct Alert {
    pub name: Constant,
    pub expr: Text,
    /// How long the condition holds before the alert fires.
    pub wait: Constant,
    pub severity: Constant,
    pub summary: Text,
}

/// One dashboard panel: a title and its queries with their legends.
struct Panel {
    title: &'static str,
    unit: &'static str,
    queries: Vec<(String, &'static str)>,
}

/// `value` as a PromQL string literal, for a label matcher.
fn promql_string(value: &str) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "\"\"".to_owned())
}

/// The monitoring of the operator `crate_name`.
pub(super) fn monitoring(
    crate_name: &str,
    webhooks: bool,
) -> Result<Monitoring, serde_saphyr::ser::Error> {
    let job = format!("job={}", promql_string(crate_name));
    Ok(Monitoring {
        job: Text::new(crate_name),
        port: Constant(METRICS_PORT),
        path: Constant(METRICS_PATH),
        alerts: alerts(&job, webhooks),
        dashboard: YamlDocument::new(&dashboard(crate_name, &job, webhooks))?,
        dashboard_name: Text::new(format!("{crate_name}-dashboard")),
    })
}

fn alert(
    name: &'static str,
    expr: String,
    wait: &'static str,
    severity: &'static str,
    summary: &'static str,
) -> Alert {
    Alert {
        name: Constant(name),
        expr: Text::new(expr),
        wait: Constant(wait),
        severity: Constant(severity),
        summary: Text::new(summary),
    }
}

/// The alerts: the operator is unreachable, has no leader, cannot list, or keeps failing.
fn alerts(job: &str, webhooks: bool) -> Vec<Alert> {
    let mut alerts = vec![
        alert(
            "OperatorDown",
            format!("up{{{job}}} == 0"),
            "5m",
            "critical",
            "Prometheus cannot scrape a replica of the operator",
        ),
        alert(
            "OperatorNoLeader",
            format!("absent(operator_leader{{{job}}} == 1)"),
            "5m",
            "critical",
            "No replica of the operator leads, so nothing is reconciled",
        ),
        alert(
            "OperatorWatchesNotReady",
            // Only the leader runs watches; a replica waiting for the Lease has them all
            // pending, as it should.
            format!(
                "max(operator_watches_pending{{{job}}} and on(instance) operator_leader{{{job}}} == 1) > 0"
            ),
            "10m",
            "warning",
            "A watch of the leading replica has not listed its objects, so reconciles wait",
        ),
        alert(
            "OperatorReconcileErrors",
            format!("sum(rate(operator_reconcile_errors_total{{{job}}}[5m])) > 0"),
            "15m",
            "warning",
            "Reconciles keep failing",
        ),
    ];
    if webhooks {
        alerts.push(alert(
            "OperatorWebhookFailures",
            format!(
                "sum(rate(operator_webhook_requests_total{{{job},outcome=~\"failed|invalid\"}}[5m])) > 0"
            ),
            "5m",
            "warning",
            "Webhook requests fail or arrive malformed",
        ));
        alerts.push(alert(
            "OperatorWebhookCertificateExpiring",
            // 0 until a replica serves a certificate; such a replica is unready, not expiring.
            format!(
                "(operator_webhook_certificate_expiry_timestamp_seconds{{{job}}} > 0) - time() < 7 * 24 * 3600"
            ),
            "1h",
            "warning",
            "The webhooks' certificate expires within 7 days: its renewal is not working",
        ));
    }
    alerts
}

fn panels(job: &str, webhooks: bool) -> Vec<Panel> {
    let rate = |metric: &str, by: &str| format!("sum{by} (rate({metric}{{{job}}}[5m]))");
    let mut panels = vec![
        Panel {
            title: "Reconciles",
            unit: "ops",
            queries: vec![(rate("operator_reconciles_total", ""), "reconciles")],
        },
        Panel {
            title: "Reconcile errors",
            unit: "ops",
            queries: vec![(
                rate("operator_reconcile_errors_total", " by (kind)"),
                "{{kind}}",
            )],
        },
        Panel {
            title: "Reconcile duration",
            unit: "s",
            queries: [("0.5", "p50"), ("0.99", "p99")]
                .into_iter()
                .map(|(q, legend)| {
                    (
                        format!(
                            "histogram_quantile({q}, {})",
                            rate("operator_reconcile_duration_seconds_bucket", " by (le)")
                        ),
                        legend,
                    )
                })
                .collect(),
        },
        Panel {
            title: "API requests by verb",
            unit: "reqps",
            queries: vec![(
                rate("operator_api_requests_total", " by (verb)"),
                "{{verb}}",
            )],
        },
        Panel {
            title: "Reconciling replicas, sharder and pending watches",
            unit: "short",
            queries: vec![
                // The leader, or with `--sharding` every replica whose shard's Lease holds.
                (format!("sum(operator_leader{{{job}}})"), "reconciling"),
                (
                    format!("sum(operator_sharder{{{job}}})"),
                    "running the sharder",
                ),
                (
                    format!("max(operator_watches_pending{{{job}}})"),
                    "watches pending",
                ),
            ],
        },
        Panel {
            title: "Cached objects",
            unit: "short",
            queries: vec![(
                format!("operator_cache_objects{{{job}}}"),
                "{{instance}} {{kind}}",
            )],
        },
        Panel {
            title: "Memory",
            unit: "bytes",
            queries: vec![(
                format!("process_resident_memory_bytes{{{job}}}"),
                "{{instance}}",
            )],
        },
        Panel {
            title: "CPU",
            unit: "percentunit",
            queries: vec![(
                format!("rate(process_cpu_seconds_total{{{job}}}[5m])"),
                "{{instance}}",
            )],
        },
    ];
    if webhooks {
        panels.push(Panel {
            title: "Webhook requests",
            unit: "reqps",
            queries: vec![(
                rate("operator_webhook_requests_total", " by (hook, outcome)"),
                "{{hook}} {{outcome}}",
            )],
        });
    }
    panels
}

/// Every series of the runtime's that the alerts and the dashboard of an operator (with
/// `webhooks` or not) read, by name: the contract with the runtime's registrations, which
/// xtask's contract test holds the runtime to.
pub fn runtime_series(webhooks: bool) -> BTreeSet<String> {
    let job = "job=\"operator\"";
    let alerts = alerts(job, webhooks)
        .into_iter()
        .map(|alert| alert.expr.raw().to_owned());
    let queries = panels(job, webhooks)
        .into_iter()
        .flat_map(|panel| panel.queries.into_iter().map(|(query, _)| query));
    alerts
        .chain(queries)
        .flat_map(|query| series_in(&query))
        .collect()
}

/// The names in a PromQL `query` that are the runtime's series (`operator_*`, `process_*`).
fn series_in(query: &str) -> Vec<String> {
    query
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("operator_") || word.starts_with("process_"))
        .map(str::to_owned)
        .collect()
}

/// The dashboard ConfigMap but its metadata: the JSON model under `<crate>.json`, with a
/// Prometheus data source to pick. The template labels it for Grafana's dashboard sidecar.
fn dashboard(crate_name: &str, job: &str, webhooks: bool) -> Value {
    let source = json!({"type": "prometheus", "uid": "${datasource}"});
    let panels: Vec<Value> = panels(job, webhooks)
        .into_iter()
        .enumerate()
        .map(|(index, panel)| {
            let targets: Vec<Value> = panel
                .queries
                .iter()
                .zip('A'..)
                .map(|((expr, legend), id)| {
                    json!({"datasource": source, "expr": expr, "legendFormat": legend, "refId": id.to_string()})
                })
                .collect();
            json!({
                "id": index + 1,
                "type": "timeseries",
                "title": panel.title,
                "datasource": source,
                "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
                "gridPos": {"h": 8, "w": 12, "x": (index % 2) * 12, "y": (index / 2) * 8},
                "targets": targets,
            })
        })
        .collect();
    let model = json!({
        "title": crate_name,
        "uid": dashboard_uid(crate_name),
        "tags": ["operator-gen", "kubernetes-operator"],
        "timezone": "browser",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
        }]},
        "panels": panels,
    });
    let text = serde_json::to_string_pretty(&model).unwrap_or_default() + "\n";
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "data": {format!("{crate_name}.json"): text},
    })
}

/// Grafana's dashboard uid holds at most 40 characters.
fn dashboard_uid(crate_name: &str) -> String {
    crate_name.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_series_are_read_from_every_alert_and_panel() {
        let plain = runtime_series(false);
        let with_webhooks = runtime_series(true);
        assert!(
            plain.contains("operator_reconcile_duration_seconds_bucket"),
            "{plain:?}"
        );
        assert!(plain.contains("process_cpu_seconds_total"), "{plain:?}");
        assert!(
            !plain.contains("operator_webhook_requests_total"),
            "{plain:?}"
        );
        assert!(with_webhooks.is_superset(&plain));
        assert!(
            with_webhooks.contains("operator_webhook_certificate_expiry_timestamp_seconds"),
            "{with_webhooks:?}"
        );
    }

    #[test]
    fn every_query_selects_the_operator_by_its_job() {
        let monitoring = monitoring("widget-controller", true).expect("serializes");
        assert!(!monitoring.alerts.is_empty());
        for alert in &monitoring.alerts {
            assert!(
                alert.expr.raw().contains("job=\"widget-controller\""),
                "{}",
                alert.expr.raw()
            );
        }
        let text = monitoring.dashboard.as_str();
        assert!(text.contains("widget-controller.json"), "{text}");
        for panel in panels("job=\"widget-controller\"", true) {
            for (expr, _) in panel.queries {
                assert!(expr.contains("job=\"widget-controller\""), "{expr}");
            }
        }
    }

    #[test]
    fn webhook_alerts_and_panels_come_only_with_webhooks() {
        let with = monitoring("w", true).expect("serializes");
        let without = monitoring("w", false).expect("serializes");
        let named = |m: &Monitoring| {
            m.alerts
                .iter()
                .any(|a| a.name.0 == "OperatorWebhookFailures")
        };
        assert!(named(&with) && !named(&without));
        assert!(
            with.dashboard
                .as_str()
                .contains("operator_webhook_requests_total")
        );
        assert!(
            !without
                .dashboard
                .as_str()
                .contains("operator_webhook_requests_total")
        );
    }

    #[test]
    fn a_label_value_is_quoted_as_promql_reads_it() {
        assert_eq!(promql_string("a\"b\\c"), r#""a\"b\\c""#);
    }
}
