//! `cargo xtask bench sharded`: example-operator converging many new primaries with
//! `--sharding`, as one replica and as three, on the project's own control plane.
//!
//! On two cores with the API server and etcd beside the replicas, three replicas are not
//! expected to converge sooner; what sharding buys is memory per replica, so that is the
//! figure, with the sharder's replica apart: its watch of every primary's metadata does not
//! shrink with the shard count. Run by `bench runtime`, the rows also set one replica against
//! the unsharded round at the same size, which is what sharding itself costs.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use super::{Bench, OperatorRound, Row, http_get, peak_rss, stop_gracefully};

/// The first replica's metrics port; the others follow.
const PORT: u16 = 19310;
/// The first replica's webhook port; the others follow.
const WEBHOOK_PORT: u16 = 19410;

/// What one sharded round measured, per replica in start order.
struct Round {
    converged: Duration,
    /// Peak RSS and primaries cached, per replica.
    replicas: Vec<(u64, u64)>,
    /// Which replica ran the sharder.
    sharder: usize,
}

/// The sharded rows at `n` primaries; with `unsharded`, the plain operator's round at the same
/// size, also what one sharded replica costs over it.
pub(super) async fn rows(
    bench: &Bench,
    n: usize,
    unsharded: Option<&OperatorRound>,
) -> Result<Vec<Row>> {
    let one = bench.sharded_round("bench-sharded-1", n, 1).await?;
    let three = bench.sharded_round("bench-sharded-3", n, 3).await?;
    let mib = |bytes: u64| bytes as f64 / 1048576.0;
    let (single, _) = one.replicas[0];
    let others: Vec<&(u64, u64)> = three
        .replicas
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != three.sharder)
        .map(|(_, r)| r)
        .collect();
    let worker = others.iter().map(|(rss, _)| *rss).max().unwrap_or(0);
    let (sharder, sharder_cached) = three.replicas[three.sharder];
    let shares: Vec<String> = three
        .replicas
        .iter()
        .enumerate()
        .map(|(i, (rss, cached))| {
            let role = if i == three.sharder { " (sharder)" } else { "" };
            format!("{:.0} MiB, {cached} cached{role}", mib(*rss))
        })
        .collect();
    let mut rows = Vec::new();
    if let Some(plain) = unsharded {
        rows.push(Row::times(
            format!("converge {n} new PrometheusRules, sharded, 1 replica against the unsharded operator"),
            one.converged,
            plain.converged,
            "the rounds above: the sharder labels every primary before a replica sees it, one more write each".to_owned(),
        ));
        rows.push(Row::peaks(
            format!("peak RSS at {n} primaries and children, sharded, 1 replica against the unsharded operator"),
            (format!("{:.0} MiB", mib(single)), single),
            plain.peak_bytes,
            "VmHWM of each: the one replica also runs the sharder".to_owned(),
        ));
    }
    rows.extend([
        Row::times(
            format!("converge {n} new PrometheusRules, sharded, 3 replicas against 1"),
            three.converged,
            one.converged,
            "`cargo xtask bench sharded`: `--sharding` replicas from process start to the last owned ConfigMap; no speed-up is expected on 2 cores beside the API server and etcd".to_owned(),
        ),
        Row::peaks(
            format!("peak RSS per replica at {n} primaries and children, sharded, 3 replicas against 1"),
            (format!("{:.0} MiB (largest replica without the sharder)", mib(worker)), worker),
            single,
            format!("VmHWM of each process: {}", shares.join("; ")),
        ),
        Row {
            figure: "the sharder's own memory, sharded, 3 replicas".to_owned(),
            ours: format!(
                "{:.0} MiB over the largest other replica",
                mib(sharder.saturating_sub(worker))
            ),
            floor: String::new(),
            ratio: String::new(),
            command: format!(
                "VmHWM of the replica leading the operator's Lease (it cached {sharder_cached} primaries of its own) minus the largest other's: its watch of every primary's metadata"
            ),
        },
    ]);
    Ok(rows)
}

impl Bench {
    /// Converges `n` new primaries in `namespace` with `replicas` sharded replicas.
    async fn sharded_round(&self, namespace: &str, n: usize, replicas: usize) -> Result<Round> {
        self.primaries(namespace, n).await?;
        let started = Instant::now();
        let mut processes = Vec::new();
        for index in 0..replicas {
            processes.push(self.start_shard(namespace, index)?);
        }
        let measured = async {
            self.children(namespace, n).await?;
            let converged = started.elapsed();
            let mut measured = Vec::new();
            for (index, process) in processes.iter().enumerate() {
                let port = PORT + index as u16;
                self.settle(port).await?;
                measured.push((peak_rss(process)?, cached_primaries(port)?));
            }
            let leases: Api<Lease> = Api::namespaced(self.admin.clone(), &self.operator_namespace);
            let holder = leases
                .get(example_operator::controller::FIELD_MANAGER)
                .await?
                .spec
                .and_then(|spec| spec.holder_identity)
                .context("the operator's Lease has no holder")?;
            let sharder = (0..replicas)
                .find(|index| holder == shard_name(*index))
                .with_context(|| {
                    format!("the Lease is held by {holder}, no replica of this round")
                })?;
            anyhow::Ok(Round {
                converged,
                replicas: measured,
                sharder,
            })
        }
        .await;
        for process in &mut processes {
            stop_gracefully(process);
        }
        self.forget(namespace).await?;
        measured
    }

    /// Starts the replica `index` with sharding on.
    fn start_shard(&self, namespace: &str, index: usize) -> Result<Child> {
        let name = shard_name(index);
        let log = std::fs::File::create(self.logs.join(format!("{namespace}-{name}.log")))?;
        Command::new(&self.operator_binary)
            .env("KUBECONFIG", &self.operator_kubeconfig)
            .env("RUST_LOG", "warn")
            .env("LOG_FORMAT", "json")
            .env("METRICS_ADDR", format!("127.0.0.1:{}", PORT + index as u16))
            // Each its own: the webhooks serve on every replica.
            .env(
                "WEBHOOK_ADDR",
                format!("127.0.0.1:{}", WEBHOOK_PORT + index as u16),
            )
            .env("POD_NAMESPACE", &self.operator_namespace)
            .env("POD_NAME", &name)
            .env("LEADER_ELECTION", "true")
            .env("SHARDING", "true")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.operator_binary.display()))
    }
}

fn shard_name(index: usize) -> String {
    format!("bench-shard-{index}")
}

/// `operator_cache_objects` of the primary on the replica serving metrics on `port`.
fn cached_primaries(port: u16) -> Result<u64> {
    let text = http_get(port, "/metrics")?;
    text.lines()
        .find_map(|line| line.strip_prefix("operator_cache_objects{kind=\"PrometheusRule\"} "))
        .and_then(|n| n.trim().parse().ok())
        .context("no operator_cache_objects for PrometheusRule")
}
