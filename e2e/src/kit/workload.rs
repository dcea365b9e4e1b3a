//! An operator deployed as pods: its Deployment, the pods it has, and the Lease its replicas
//! elect a leader on, as the API server reports them. When pods do not become Ready, the
//! error says why, with each pod's events and its container's last log lines.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use super::{Kubectl, Replica, logs, replica};

/// The label every generated Deployment selects its pods by.
const NAME_LABEL: &str = "app.kubernetes.io/name";

/// The Deployment `name` in `namespace`, and where the node writes its pods' logs.
#[derive(Debug, Clone)]
pub struct Workload {
    kubectl: Kubectl,
    pub namespace: String,
    pub name: String,
    pod_logs: PathBuf,
}

/// One pod of the workload.
#[derive(Debug, Clone)]
pub struct Pod {
    pub name: String,
    pub uid: String,
    pub ip: Option<IpAddr>,
    pub ready: bool,
    /// Whether it is being deleted (its endpoints leave the Service).
    pub terminating: bool,
    pub restarts: u64,
}

impl Pod {
    /// Its endpoints, once it has an address.
    pub fn replica(&self) -> Option<Replica> {
        Some(Replica {
            name: self.name.clone(),
            host: self.ip?,
            metrics_port: replica::POD_METRICS_PORT,
            webhook_port: replica::POD_WEBHOOK_PORT,
        })
    }
}

impl Workload {
    pub fn new(kubectl: Kubectl, namespace: &str, name: &str, pod_logs: &Path) -> Self {
        Self {
            kubectl,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            pod_logs: pod_logs.to_owned(),
        }
    }

    /// Its pods, as the API server lists them now.
    pub fn pods(&self) -> Result<Vec<Pod>> {
        let selector = format!("{NAME_LABEL}={}", self.name);
        let list = self.kubectl.json(&[
            "get",
            "pods",
            "-n",
            &self.namespace,
            "-l",
            &selector,
            "-o",
            "json",
        ])?;
        Ok(list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(pod)
            .collect())
    }

    /// Its Ready pods that are not being deleted, as replicas to talk to.
    pub fn replicas(&self) -> Result<Vec<Replica>> {
        Ok(self
            .pods()?
            .iter()
            .filter(|pod| pod.ready && !pod.terminating)
            .filter_map(Pod::replica)
            .collect())
    }

    /// The replicas its Deployment asks for.
    pub fn wanted(&self) -> Result<u64> {
        let deployment = self.deployment()?;
        Ok(deployment["spec"]["replicas"].as_u64().unwrap_or(1))
    }

    fn deployment(&self) -> Result<Value> {
        self.kubectl.json(&[
            "get",
            "deployment",
            &self.name,
            "-n",
            &self.namespace,
            "-o",
            "json",
        ])
    }

    /// Waits until the Deployment's rollout is complete: every replica it asks for updated,
    /// Ready, and no other pod left; how many are Ready.
    pub fn wait_ready(&self, patience: Duration) -> Result<u64> {
        let deadline = Instant::now() + patience;
        loop {
            let deployment = self.deployment()?;
            let wanted = deployment["spec"]["replicas"].as_u64().unwrap_or(1);
            let status = &deployment["status"];
            let count = |field: &str| status[field].as_u64().unwrap_or(0);
            let generation = deployment["metadata"]["generation"].as_u64();
            let observed = status["observedGeneration"].as_u64();
            let pods = self.pods()?;
            let done = generation == observed
                && count("updatedReplicas") == wanted
                && count("readyReplicas") == wanted
                && count("availableReplicas") == wanted
                && pods.len() as u64 == wanted
                && pods.iter().all(|p| p.ready && !p.terminating);
            if done && (wanted == 0 || self.routed()?) {
                return Ok(wanted);
            }
            if Instant::now() > deadline {
                bail!(
                    "{}/{wanted} pods of {}/{} Ready after {patience:?}:\n{}",
                    pods.iter().filter(|p| p.ready).count(),
                    self.namespace,
                    self.name,
                    self.why_not_ready(&pods)
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Whether the operator's Service answers at its ClusterIP, as kube-proxy routes it from
    /// this machine: pods become Ready before their endpoints reach kube-proxy's rules, and until
    /// then the API server's calls to the webhooks are refused.
    fn routed(&self) -> Result<bool> {
        let service = self.kubectl.json(&[
            "get",
            "service",
            &self.name,
            "-n",
            &self.namespace,
            "-o",
            "json",
        ])?;
        let Some(ip) = service["spec"]["clusterIP"]
            .as_str()
            .and_then(|ip| ip.parse::<IpAddr>().ok())
        else {
            return Ok(false);
        };
        let through = Replica {
            name: format!("service {}", self.name),
            host: ip,
            metrics_port: replica::POD_METRICS_PORT,
            webhook_port: replica::POD_WEBHOOK_PORT,
        };
        Ok(through.ready().unwrap_or(false))
    }

    /// Each pod that is not Ready, with its events and its container's last log lines.
    pub fn why_not_ready(&self, pods: &[Pod]) -> String {
        let mut report = String::new();
        for pod in pods.iter().filter(|pod| !pod.ready || pod.terminating) {
            report.push_str(&format!(
                "  pod {} (ready: {}, terminating: {}, restarts: {})\n",
                pod.name, pod.ready, pod.terminating, pod.restarts
            ));
            let selector = format!("involvedObject.name={}", pod.name);
            if let Ok(events) = self.kubectl.json(&[
                "get",
                "events",
                "-n",
                &self.namespace,
                "--field-selector",
                &selector,
                "-o",
                "json",
            ]) {
                for event in events["items"].as_array().into_iter().flatten() {
                    report.push_str(&format!(
                        "    event {} {}: {}\n",
                        event["type"].as_str().unwrap_or_default(),
                        event["reason"].as_str().unwrap_or_default(),
                        event["message"].as_str().unwrap_or_default()
                    ));
                }
            }
            for (_, log) in self.logs().iter().filter(|(owner, _)| *owner == pod.name) {
                let text = logs::read_from(log, 0);
                let lines: Vec<&str> = text.lines().map(logs::written).collect();
                for line in &lines[lines.len().saturating_sub(10)..] {
                    report.push_str(&format!("    log: {line}\n"));
                }
            }
        }
        if report.is_empty() {
            report.push_str("  every pod listed is Ready; the Deployment has not caught up\n");
        }
        report
    }

    /// Sets the Deployment's replicas.
    pub fn scale(&self, replicas: u64) -> Result<()> {
        let replicas = format!("--replicas={replicas}");
        self.kubectl.run(
            &[
                "scale",
                "deployment",
                &self.name,
                "-n",
                &self.namespace,
                &replicas,
            ],
            None,
        )
    }

    /// Scales the Deployment to none and waits until every pod is gone: at once, its
    /// processes killed on the node, for a check that needs no replica running and not the
    /// graceful stop, which a rollout and the deletion of a pod prove.
    pub fn stop(&self, cluster: &operator_gen_cluster::Cluster, patience: Duration) -> Result<()> {
        self.scale(0)?;
        let deadline = Instant::now() + patience;
        // Once each is being deleted: killed sooner, the kubelet would start it again.
        while self.pods()?.iter().any(|pod| !pod.terminating) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        for pod in self.pods()? {
            cluster.crash_pod(&pod.uid);
        }
        while !self.pods()?.is_empty() {
            if Instant::now() > deadline {
                bail!(
                    "{}/{}'s pods were not gone after {patience:?}",
                    self.namespace,
                    self.name
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Ok(())
    }

    /// Ends the pod `name` as a crash or a lost node would: its processes killed at once on
    /// the node (the kubelet's shortest grace period is still two seconds, and its preStop
    /// would run), then the pod deleted with no grace, so that it neither finishes its
    /// reconciles nor hands back its Lease, and does not come back.
    pub fn kill(&self, cluster: &operator_gen_cluster::Cluster, name: &str) -> Result<()> {
        let pods = self.pods()?;
        let pod = named(&pods, name)?;
        if cluster.crash_pod(&pod.uid) == 0 {
            bail!("no process of pod {name} was found on the node");
        }
        self.kubectl.run(
            &[
                "delete",
                "pod",
                name,
                "-n",
                &self.namespace,
                "--grace-period=0",
                "--force",
                "--wait=false",
            ],
            None,
        )
    }

    /// The holder of the operator's own Lease (named after it), if anyone holds it.
    pub fn leader(&self) -> Result<Option<String>> {
        let lease = self.kubectl.json(&[
            "get",
            "lease",
            &self.name,
            "-n",
            &self.namespace,
            "--ignore-not-found",
            "-o",
            "json",
        ]);
        Ok(lease
            .ok()
            .and_then(|lease| lease["spec"]["holderIdentity"].as_str().map(str::to_owned)))
    }

    /// Its pods' logs, with the pod each belongs to, including pods that are gone.
    pub fn logs(&self) -> Vec<(String, PathBuf)> {
        logs::of_pods(&self.pod_logs, &self.namespace, &self.name)
    }
}

fn pod(item: &Value) -> Pod {
    let conditions = item["status"]["conditions"].as_array();
    let ready = conditions
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    let restarts = item["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|status| status["restartCount"].as_u64())
        .sum();
    let text = |field: &str| {
        item["metadata"][field]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    Pod {
        name: text("name"),
        uid: text("uid"),
        ip: item["status"]["podIP"]
            .as_str()
            .and_then(|ip| ip.parse().ok()),
        ready,
        terminating: !item["metadata"]["deletionTimestamp"].is_null(),
        restarts,
    }
}

/// The pod `name` of `pods`.
pub fn named<'a>(pods: &'a [Pod], name: &str) -> Result<&'a Pod> {
    pods.iter()
        .find(|pod| pod.name == name)
        .with_context(|| format!("no pod {name}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_is_ready_by_its_condition_and_terminating_by_its_deletion_time() {
        let item = json!({
            "metadata": {"name": "op-1", "deletionTimestamp": "2026-12-01T00:00:00Z"},
            "status": {
                "podIP": "10.87.0.9",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"restartCount": 2}],
            },
        });
        let pod = pod(&item);
        assert!(pod.ready && pod.terminating);
        assert_eq!(pod.restarts, 2);
        assert_eq!(
            pod.replica().map(|r| r.host.to_string()).as_deref(),
            Some("10.87.0.9")
        );
        let pending = super::pod(&json!({"metadata": {"name": "op-2"}, "status": {}}));
        assert!(!pending.ready && !pending.terminating && pending.replica().is_none());
    }
}
