//! The plain kube-rs peer beside example-operator in `bench runtime`: the same job (a finalizer
//! and one server-side applied ConfigMap per PrometheusRule), the same N new primaries in a
//! fresh namespace of the same control plane, written with kube's `Controller` alone
//! (`xtask/bench/peers/kube-rs`). The peer serves no metrics, so what both are compared on is
//! read from outside: the API server's write counters, and the process's own `/proc`.

use std::{
    collections::BTreeMap,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::{Bench, OperatorRound, Row, cpu_seconds, difference, fs, peak_rss, stop};

/// The peer's field manager, and the value of its children's managed-by label.
const MANAGER: &str = "kube-rs-peer";

/// What one round of the peer measured.
pub(super) struct PeerRound {
    pub(super) converged: Duration,
    peak_bytes: u64,
    cpu_seconds: f64,
    /// The API server's writes by verb and resource while it converged and settled.
    server_requests: BTreeMap<(String, String), u64>,
    /// The API server's writes while it started over the converged world.
    restart_writes: u64,
}

impl Bench {
    /// The peer converging `n` new primaries in `namespace`, then started again over them.
    pub(super) async fn peer_round(&self, namespace: &str, n: usize) -> Result<PeerRound> {
        self.primaries(namespace, n).await?;
        let before = self.server_writes().await?;
        let started = Instant::now();
        let mut peer = self.start_peer(namespace)?;
        let converged = self.children_of(namespace, n, MANAGER).await;
        let converged = converged.map(|()| started.elapsed());
        let result = async {
            let converged = converged?;
            let after = self.writes_settled(Instant::now()).await?;
            let (peak_bytes, cpu_seconds) = (peak_rss(&peer)?, cpu_seconds(&peer)?);
            stop(&mut peer);
            let mut restarted = self.start_peer(&format!("{namespace}-restart"))?;
            let settled = self.writes_settled(Instant::now()).await;
            stop(&mut restarted);
            let restart_writes = difference(&after, &settled?).values().sum();
            anyhow::Ok(PeerRound {
                converged,
                peak_bytes,
                cpu_seconds,
                server_requests: difference(&before, &after),
                restart_writes,
            })
        }
        .await;
        stop(&mut peer);
        self.forget(namespace).await?;
        result
    }

    /// Starts the peer under example-operator's ServiceAccount (it needs the same rights),
    /// its log in `{log}.log`.
    fn start_peer(&self, log: &str) -> Result<Child> {
        let log = fs::File::create(self.logs.join(format!("{log}.log")))?;
        Command::new(&self.peer_binary)
            .env("KUBECONFIG", &self.operator_kubeconfig)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.peer_binary.display()))
    }

    /// The API server's write counters once they have not moved for 3 s, at least 3 s after
    /// `since`: the peer has no readiness to wait for, so a start over a converged world is
    /// done when it has written nothing for that long.
    async fn writes_settled(&self, since: Instant) -> Result<BTreeMap<(String, String), u64>> {
        let mut last = self.server_writes().await?;
        let mut still_since = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = self.server_writes().await?;
            if now != last {
                (last, still_since) = (now, Instant::now());
            } else if still_since.elapsed() >= Duration::from_secs(3)
                && since.elapsed() >= Duration::from_secs(3)
            {
                return Ok(now);
            }
            if since.elapsed() > Duration::from_secs(300) {
                bail!("the API server's writes did not settle within 5 minutes");
            }
        }
    }
}

/// The writes per primary, by verb and resource, as `PATCH configmaps 1.00`.
fn per_primary(writes: &BTreeMap<(String, String), u64>, n: usize) -> String {
    let each: Vec<String> = writes
        .iter()
        .map(|((verb, resource), count)| {
            format!("{verb} {resource} {:.2}", *count as f64 / n as f64)
        })
        .collect();
    each.join(", ")
}

/// example-operator (`ours`) against the peer, at `n` primaries: converge time, peak RSS,
/// CPU seconds, the API server's writes per primary, and writes on a restart.
pub(super) fn rows(n: usize, ours: &OperatorRound, peer: &PeerRound, rounds: &str) -> Vec<Row> {
    let command =
        "`cargo xtask bench runtime`, the peer `xtask/bench/peers/kube-rs` in the same script";
    vec![
        Row::times(
            format!("converge {n} new PrometheusRules, against the plain kube-rs peer{rounds}"),
            ours.converged,
            peer.converged,
            format!("{command}: process start to the last owned ConfigMap"),
        ),
        Row::peaks(
            format!("peak RSS at {n}, against the plain kube-rs peer"),
            (
                format!("{:.0} MiB", ours.peak_bytes as f64 / 1048576.0),
                ours.peak_bytes,
            ),
            peer.peak_bytes,
            format!("{command}: VmHWM of each process"),
        ),
        Row {
            figure: format!("CPU seconds converging {n}, against the plain kube-rs peer"),
            ours: format!("{:.2} s", ours.cpu_seconds),
            floor: format!("{:.2} s", peer.cpu_seconds),
            ratio: format!("{:.2}×", ours.cpu_seconds / peer.cpu_seconds.max(0.01)),
            command: format!("{command}: user and system time of each process"),
        },
        Row {
            figure: format!(
                "the API server's writes per new primary at {n}, against the plain kube-rs peer"
            ),
            ours: per_primary(&ours.server_requests, n),
            floor: per_primary(&peer.server_requests, n),
            ratio: String::new(),
            command: format!(
                "{command}: apiserver_request_total for prometheusrules and configmaps, with the garbage collector's"
            ),
        },
        Row {
            figure: format!(
                "writes on a restart over {n} converged primaries, against the plain kube-rs peer"
            ),
            ours: ours.restart_writes.to_string(),
            floor: peer.restart_writes.to_string(),
            ratio: String::new(),
            command: format!(
                "{command}: operator_api_requests_total's writes (ours), apiserver_request_total's (the peer's)"
            ),
        },
    ]
}
