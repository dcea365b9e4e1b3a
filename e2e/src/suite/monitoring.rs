//! The operator's own monitoring (`deploy/monitoring/`), against a real Prometheus: Debian's
//! `prometheus` and `promtool`, installed once per machine by `cluster/control-plane/prometheus.sh`.
//!
//! prometheus-operator does not run here, so nothing turns the ServiceMonitor into a scrape
//! config. Prometheus, on this machine, scrapes each of the operator's pods at its address on
//! the node's bridge through `static_configs` instead, with the job, port and path the
//! ServiceMonitor gives (its port checked against the generated Service), and loads the
//! PrometheusRule's groups as its rule file. The ServiceMonitor and PrometheusRule themselves
//! pass a server dry run against prometheus-operator's own CRDs.

use std::{
    fs,
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::Suite;

/// How long Prometheus gets to scrape, evaluate and answer: it scrapes and evaluates every
/// second here, and a rate needs two samples.
const PATIENCE: Duration = Duration::from_secs(60);

/// Debian's Prometheus and its rule tester.
#[derive(Clone)]
pub(crate) struct Prometheus {
    server: PathBuf,
    promtool: PathBuf,
}

/// Installs Prometheus when it is missing, as the control plane's build installs etcd.
pub(crate) fn install(workspace: &Path) -> Result<Prometheus> {
    let found = |tool: &str| -> Option<PathBuf> {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(tool))
                .find(|path| path.is_file())
        })
    };
    if found("prometheus").is_none() || found("promtool").is_none() {
        let script = workspace.join("cluster/control-plane/prometheus.sh");
        let status = Command::new("bash").arg(&script).status()?;
        if !status.success() {
            bail!("{} failed ({status})", script.display());
        }
    }
    Ok(Prometheus {
        server: found("prometheus").context("no prometheus on PATH after installing it")?,
        promtool: found("promtool").context("no promtool on PATH after installing it")?,
    })
}

/// One YAML document of a generated file.
fn document(path: &Path) -> Result<Value> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_str_with_options(&text, operator_gen::limits::yaml_options())
        .with_context(|| format!("reading {}", path.display()))
}

/// Where Prometheus scrapes: the job and path of the ServiceMonitor's one endpoint, whose port
/// and selector must be the generated Service's.
fn scrape_target(dir: &Path) -> Result<(String, String)> {
    let monitor = document(&dir.join("deploy/monitoring/service-monitor.yaml"))?;
    let service = document(&dir.join("deploy/base/service.yaml"))?;
    let wanted = &monitor["spec"]["selector"]["matchLabels"];
    let labels = &service["metadata"]["labels"];
    let selected = wanted
        .as_object()
        .is_some_and(|w| !w.is_empty() && w.iter().all(|(k, v)| &labels[k] == v));
    if !selected {
        bail!(
            "the ServiceMonitor selects {wanted}, which the Service's labels {labels} do not match"
        );
    }
    // Without a namespaceSelector, prometheus-operator looks in the ServiceMonitor's own
    // namespace.
    let namespaces = match monitor["spec"]["namespaceSelector"]["matchNames"].as_array() {
        Some(names) => names.clone(),
        None => vec![monitor["metadata"]["namespace"].clone()],
    };
    if !namespaces.contains(&service["metadata"]["namespace"]) {
        bail!("the ServiceMonitor looks in {namespaces:?}, not in the Service's namespace");
    }
    let endpoint = &monitor["spec"]["endpoints"][0];
    let port = &endpoint["port"];
    let ports = service["spec"]["ports"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !ports.iter().any(|p| &p["name"] == port) {
        bail!("the ServiceMonitor scrapes port {port}, which the Service does not name");
    }
    let path = endpoint["path"].as_str().unwrap_or("/metrics").to_owned();
    let job = service["metadata"]["name"]
        .as_str()
        .context("the Service has no name")?
        .to_owned();
    Ok((job, path))
}

/// A free port on loopback, for Prometheus's own web server.
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `text` percent-encoded for a query string.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The JSON body of `GET path` on Prometheus's API.
fn api(port: u16, path: &str) -> Result<Value> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body)
        .context("no HTTP body")?;
    serde_json::from_str(body).with_context(|| format!("{path} answered {body}"))
}

/// The PromQL of every dashboard panel.
fn dashboard_queries(dir: &Path, job: &str) -> Result<Vec<String>> {
    let map = document(&dir.join("deploy/monitoring/dashboard.yaml"))?;
    let model = map["data"][format!("{job}.json")]
        .as_str()
        .context("the dashboard ConfigMap holds no <job>.json")?;
    let model: Value = serde_json::from_str(model)?;
    let queries: Vec<String> = model["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|panel| panel["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|target| target["expr"].as_str().map(str::to_owned))
        .collect();
    if queries.is_empty() {
        bail!("the dashboard has no queries");
    }
    Ok(queries)
}

/// Unit tests of every alert (name and annotations) for `promtool test rules`: each fires on
/// the series meant to trip it once its `for:` has passed, not a minute after they trip, and
/// none fires for a healthy operator. promtool's clock is simulated, so `for:` passes in no
/// time.
fn rule_tests(job: &str, alerts: &[(String, Value)]) -> Result<Value> {
    let series = |name: &str, labels: &str, values: &str| json!({"series": format!("{name}{{job=\"{job}\"{labels}}}"), "values": values});
    let healthy = vec![
        series("up", ",instance=\"a\"", "1x40"),
        series("operator_leader", ",instance=\"a\"", "1x40"),
        series("operator_watches_pending", ",instance=\"a\"", "0x40"),
        series(
            "operator_reconcile_errors_total",
            ",instance=\"a\",kind=\"transient\"",
            "0x40",
        ),
        series(
            "operator_webhook_requests_total",
            ",instance=\"a\",hook=\"validate\",outcome=\"failed\"",
            "0x40",
        ),
        // A certificate that expires in 90 days (promtool's clock starts at the epoch).
        series(
            "operator_webhook_certificate_expiry_timestamp_seconds",
            ",instance=\"a\"",
            "7776000x40",
        ),
        // A replica waiting for the Lease: up, not leading, every watch pending, as it should.
        series("up", ",instance=\"b\"", "1x40"),
        series("operator_leader", ",instance=\"b\"", "0x40"),
        series("operator_watches_pending", ",instance=\"b\"", "3x40"),
        // ... and one still waiting for its certificate.
        series(
            "operator_webhook_certificate_expiry_timestamp_seconds",
            ",instance=\"b\"",
            "0x40",
        ),
    ];
    let mut tests = vec![json!({
        "interval": "1m",
        "input_series": healthy,
        "alert_rule_test": alerts
            .iter()
            .map(|(name, _)| json!({"eval_time": "40m", "alertname": name, "exp_alerts": []}))
            .collect::<Vec<_>>(),
    })];
    for (name, annotations) in alerts {
        let (input, at, labels) = match name.as_str() {
            "OperatorDown" => (
                series("up", ",instance=\"a\"", "0x10"),
                "6m",
                json!({"severity": "critical", "job": job, "instance": "a"}),
            ),
            "OperatorNoLeader" => (
                series("operator_leader", ",instance=\"a\"", "0x10"),
                "6m",
                json!({"severity": "critical"}),
            ),
            "OperatorWatchesNotReady" => (
                json!([
                    series("operator_watches_pending", ",instance=\"a\"", "1x15"),
                    series("operator_leader", ",instance=\"a\"", "1x15"),
                ]),
                "11m",
                json!({"severity": "warning"}),
            ),
            "OperatorReconcileErrors" => (
                series(
                    "operator_reconcile_errors_total",
                    ",instance=\"a\",kind=\"transient\"",
                    "0+6x30",
                ),
                "21m",
                json!({"severity": "warning"}),
            ),
            "OperatorWebhookFailures" => (
                series(
                    "operator_webhook_requests_total",
                    ",instance=\"a\",hook=\"validate\",outcome=\"failed\"",
                    "0+6x20",
                ),
                "11m",
                json!({"severity": "warning"}),
            ),
            "OperatorWebhookCertificateExpiring" => (
                // Expires a day after the epoch, and is not renewed.
                series(
                    "operator_webhook_certificate_expiry_timestamp_seconds",
                    ",instance=\"a\"",
                    "86400x80",
                ),
                "62m",
                json!({"severity": "warning", "job": job, "instance": "a"}),
            ),
            other => bail!("no promtool test for the alert {other}: add one here"),
        };
        tests.push(json!({
            "interval": "1m",
            "input_series": if input.is_array() { input } else { json!([input]) },
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": name, "exp_alerts": []},
                {"eval_time": at, "alertname": name, "exp_alerts": [{"exp_labels": labels, "exp_annotations": annotations}]},
            ],
        }));
    }
    Ok(json!({"rule_files": ["rules.json"], "evaluation_interval": "1m", "tests": tests}))
}

/// Writes the PrometheusRule's groups as `rules.json` in `work` and has `promtool` check them
/// and run [`rule_tests`] on them; the alerts, with their annotations.
fn test_rules(
    prometheus: &Prometheus,
    dir: &Path,
    work: &Path,
    job: &str,
) -> Result<Vec<(String, Value)>> {
    let rule = document(&dir.join("deploy/monitoring/prometheus-rule.yaml"))?;
    let groups = json!({"groups": rule["spec"]["groups"]});
    fs::write(work.join("rules.json"), groups.to_string())?;
    let alerts: Vec<(String, Value)> = groups["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| Some((r["alert"].as_str()?.to_owned(), r["annotations"].clone())))
        .collect();
    fs::write(
        work.join("tests.json"),
        rule_tests(job, &alerts)?.to_string(),
    )?;
    for args in [
        ["check", "rules", "rules.json"],
        ["test", "rules", "tests.json"],
    ] {
        let output = Command::new(&prometheus.promtool)
            .args(args)
            .current_dir(work)
            .output()?;
        if !output.status.success() {
            bail!(
                "promtool {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    Ok(alerts)
}

/// A Prometheus process, stopped when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Suite {
    /// The ServiceMonitor and PrometheusRule pass a server dry run; the rules pass
    /// `promtool check` and `promtool test`; a Prometheus scraping the running operator finds
    /// every target up, evaluates every rule without error, and has data for every
    /// dashboard query.
    pub(super) fn monitoring(&mut self) -> Result<()> {
        let prometheus = self.env.prometheus.clone();
        let (job, path) = scrape_target(&self.dir)?;
        self.install_monitoring_crds()?;
        self.admin(
            &["apply", "--dry-run=server", "-k"],
            Some(&self.dir.join("deploy/monitoring")),
        )?;

        let work = self.env.logs.join("prometheus");
        if work.exists() {
            fs::remove_dir_all(&work)?;
        }
        fs::create_dir_all(&work)?;
        let alerts = test_rules(&prometheus, &self.dir, &work, &job)?;

        let targets: Vec<String> = self
            .replicas()?
            .iter()
            .map(|replica| format!("{}:{}", replica.host, replica.metrics_port))
            .collect();
        let config = json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": ["rules.json"],
            "scrape_configs": [{
                "job_name": job,
                "metrics_path": path,
                "static_configs": [{"targets": &targets}],
            }],
        });
        fs::write(work.join("prometheus.json"), config.to_string())?;
        let port = free_port()?;
        let log = fs::File::create(work.join("prometheus.log"))?;
        let _running = Running(
            Command::new(&prometheus.server)
                .arg(format!(
                    "--config.file={}",
                    work.join("prometheus.json").display()
                ))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    work.join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .context("starting prometheus")?,
        );
        let queries = dashboard_queries(&self.dir, &job)?;
        let started = Instant::now();
        let mut missing = Vec::new();
        while started.elapsed() < PATIENCE {
            missing = self.what_prometheus_lacks(port, &queries);
            if missing.is_empty() {
                println!(
                    "\n    {}: Prometheus: {} targets up, {} rules evaluated without error, {} dashboard queries with data, {} promtool tests passed",
                    self.name,
                    targets.len(),
                    alerts.len(),
                    queries.len(),
                    alerts.len() + 1
                );
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        bail!(
            "after {PATIENCE:?}, Prometheus (log: {}) still lacks: {}",
            work.join("prometheus.log").display(),
            missing.join("; ")
        )
    }

    /// What is not there yet: a target not up, a rule not evaluated or failing, a query
    /// without data.
    fn what_prometheus_lacks(&self, port: u16, queries: &[String]) -> Vec<String> {
        let mut missing = Vec::new();
        match api(port, "/api/v1/targets") {
            Ok(targets) => {
                let active = targets["data"]["activeTargets"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if active.is_empty() {
                    missing.push("no active target".to_owned());
                }
                for target in active.iter().filter(|t| t["health"] != "up") {
                    missing.push(format!(
                        "target {} is {} ({})",
                        target["scrapeUrl"], target["health"], target["lastError"]
                    ));
                }
            }
            Err(error) => missing.push(format!("targets: {error:#}")),
        }
        match api(port, "/api/v1/rules") {
            Ok(rules) => {
                let rules: Vec<Value> = rules["data"]["groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
                    .collect();
                if rules.is_empty() {
                    missing.push("no rules loaded".to_owned());
                }
                for rule in rules.iter().filter(|r| r["health"] != "ok") {
                    missing.push(format!(
                        "rule {} is {} ({})",
                        rule["name"], rule["health"], rule["lastError"]
                    ));
                }
            }
            Err(error) => missing.push(format!("rules: {error:#}")),
        }
        for query in queries {
            match api(port, &format!("/api/v1/query?query={}", encoded(query))) {
                Ok(answer)
                    if answer["data"]["result"]
                        .as_array()
                        .is_some_and(|r| !r.is_empty()) => {}
                Ok(answer) => missing.push(format!("no data for {query} ({})", answer["error"])),
                Err(error) => missing.push(format!("{query}: {error:#}")),
            }
        }
        missing
    }

    /// prometheus-operator's ServiceMonitor and PrometheusRule CRDs, the real ones as
    /// published; installed only when missing, since an operator under test may reconcile
    /// PrometheusRules itself.
    fn install_monitoring_crds(&self) -> Result<()> {
        let folder = self
            .env
            .workspace
            .join("../shared/crds/monitoring.coreos.com");
        for (file, name) in [
            (
                "servicemonitors.yaml",
                "servicemonitors.monitoring.coreos.com",
            ),
            (
                "prometheusrules.yaml",
                "prometheusrules.monitoring.coreos.com",
            ),
        ] {
            let present = self.admin(&["get", "crd", name], None).is_ok();
            if present {
                continue;
            }
            self.admin(&["apply", "--server-side", "-f"], Some(&folder.join(file)))?;
            self.admin(
                &[
                    "wait",
                    "--for=condition=Established",
                    "--timeout=60s",
                    &format!("crd/{name}"),
                ],
                None,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_percent_encoded_whole() {
        assert_eq!(encoded("up{job=\"a b\"}"), "up%7Bjob%3D%22a%20b%22%7D");
    }
}
