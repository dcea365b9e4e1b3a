//! The peers beside example-operator in `bench runtime`: the same job (a finalizer and one
//! server-side applied ConfigMap per PrometheusRule), the same N new primaries in a fresh
//! namespace of the same control plane, written as a user who did not pick operator-gen would:
//!
//! - the plain kube-rs peer, kube's `Controller` alone (`xtask/bench/peers/kube-rs`);
//! - the controller-runtime peer, kubebuilder's scaffold (`xtask/bench/peers/controller-runtime`),
//!   once with controller-runtime's caches as they come and once with its documented
//!   equivalents of example-operator's (a label-selected ConfigMap cache, no managedFields).
//!
//! The peers serve no metrics the bench reads, so what they are compared on is read from
//! outside: the API server's write counters, and each process's own `/proc`.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::{Bench, OperatorRound, Row, cpu_seconds, difference, fs, peak_rss, stop};
use operator_gen_cluster::go_command;

/// A peer, as the bench runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Peer {
    KubeRs,
    ControllerRuntime,
    /// controller-runtime with `--label-selected-cache`.
    ControllerRuntimeSelected,
}

impl Peer {
    pub(super) const ALL: [Self; 3] = [
        Self::KubeRs,
        Self::ControllerRuntime,
        Self::ControllerRuntimeSelected,
    ];

    /// Its name in a table.
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::KubeRs => "plain kube-rs",
            Self::ControllerRuntime => "controller-runtime, default caches",
            Self::ControllerRuntimeSelected => "controller-runtime, label-selected cache",
        }
    }

    /// A short name for namespaces and logs.
    fn slug(self) -> &'static str {
        match self {
            Self::KubeRs => "kube-rs",
            Self::ControllerRuntime => "cr",
            Self::ControllerRuntimeSelected => "cr-selected",
        }
    }

    /// Its field manager, and the value of its children's managed-by label.
    fn manager(self) -> &'static str {
        match self {
            Self::KubeRs => "kube-rs-peer",
            Self::ControllerRuntime | Self::ControllerRuntimeSelected => "controller-runtime-peer",
        }
    }

    /// Its arguments: logs at info (the scaffold's default is debug; kube-rs's are at warn),
    /// no probe port, and the cache.
    fn args(self) -> Vec<&'static str> {
        let go = vec!["--zap-log-level=info", "--health-probe-bind-address=0"];
        match self {
            Self::KubeRs => Vec::new(),
            Self::ControllerRuntime => go,
            Self::ControllerRuntimeSelected => [go, vec!["--label-selected-cache"]].concat(),
        }
    }
}

/// Where the peers' binaries are, once built.
pub(super) struct PeerBinaries {
    kube_rs: PathBuf,
    controller_runtime: PathBuf,
}

impl PeerBinaries {
    /// The peers' binaries for a bench run, the Go peer built here: the kube-rs peer is built
    /// with example-operator, in the same cargo invocation (`Bench::start`).
    pub(super) fn build(workspace: &Path) -> Result<Self> {
        Ok(Self {
            kube_rs: workspace.join("target/release/kube-rs-peer"),
            controller_runtime: build_controller_runtime(workspace, false)?,
        })
    }

    fn binary(&self, peer: Peer) -> &Path {
        match peer {
            Peer::KubeRs => &self.kube_rs,
            Peer::ControllerRuntime | Peer::ControllerRuntimeSelected => &self.controller_runtime,
        }
    }
}

/// The controller-runtime peer's folder.
pub(super) fn controller_runtime_dir(workspace: &Path) -> PathBuf {
    workspace.join("xtask/bench/peers/controller-runtime")
}

/// Builds the controller-runtime peer into `target/bench/peers/`, with the control plane's Go
/// caches and flags (`go_command`), vetted first when `vet`. Its `go.sum` pins every module.
pub(super) fn build_controller_runtime(workspace: &Path, vet: bool) -> Result<PathBuf> {
    let dir = controller_runtime_dir(workspace);
    let out = workspace.join("target/bench/peers/controller-runtime-peer");
    if vet {
        run_go(go_command(&dir).args(["vet", "./..."]), "vetting")?;
    }
    run_go(
        go_command(&dir)
            .args(["build", "-trimpath", "-o"])
            .arg(&out)
            .arg("./cmd"),
        "building",
    )?;
    Ok(out)
}

fn run_go(command: &mut Command, doing: &str) -> Result<()> {
    let status = command.status().context(
        "running go (the controller-runtime peer needs Go 1.26 and the Go module proxy)",
    )?;
    if !status.success() {
        bail!("{doing} xtask/bench/peers/controller-runtime failed ({status}); go said why above");
    }
    Ok(())
}

/// What one round of a peer measured.
pub(super) struct PeerRound {
    pub(super) converged: Duration,
    pub(super) peak_bytes: u64,
    cpu_seconds: f64,
    /// The API server's writes by verb and resource while it converged and settled.
    server_requests: BTreeMap<(String, String), u64>,
    /// The API server's writes while it started over the converged world.
    restart_writes: u64,
}

impl Bench {
    /// `peer` converging `n` new primaries in `namespace`, then started again over them.
    pub(super) async fn peer_round(&self, peer: Peer, round: &str, n: usize) -> Result<PeerRound> {
        let namespace = format!("bench-{}-{round}", peer.slug());
        self.primaries(&namespace, n).await?;
        let before = self.server_writes().await?;
        let started = Instant::now();
        let mut process = self.start_peer(peer, &namespace)?;
        let converged = self.children_of(&namespace, n, peer.manager()).await;
        let converged = converged.map(|()| started.elapsed());
        let result = async {
            let converged = converged?;
            let after = self.writes_settled(Instant::now()).await?;
            let (peak_bytes, cpu_seconds) = (peak_rss(&process)?, cpu_seconds(&process)?);
            stop(&mut process);
            let mut restarted = self.start_peer(peer, &format!("{namespace}-restart"))?;
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
        stop(&mut process);
        self.forget(&namespace).await?;
        result
    }

    /// Starts `peer` under example-operator's ServiceAccount (it needs the same rights),
    /// its log in `{log}.log`.
    fn start_peer(&self, peer: Peer, log: &str) -> Result<Child> {
        let log = fs::File::create(self.logs.join(format!("{log}.log")))?;
        let binary = self.peers.binary(peer);
        Command::new(binary)
            .args(peer.args())
            .env("KUBECONFIG", &self.operator_kubeconfig)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))
    }

    /// The API server's write counters once they have not moved for 3 s, at least 3 s after
    /// `since`: the peers have no readiness to wait for, so a start over a converged world is
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

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / 1048576.0)
}

/// example-operator (`ours`) against `peer`, at `n` primaries: converge time, peak RSS, CPU
/// seconds, the API server's writes per primary, and writes on a restart.
pub(super) fn rows(
    n: usize,
    ours: &OperatorRound,
    (peer, measured): (Peer, &PeerRound),
    rounds: &str,
) -> Vec<Row> {
    let against = format!("against {}", peer.name());
    let command =
        "`cargo xtask bench runtime`, the peers of `xtask/bench/peers/` in the same script";
    vec![
        Row::times(
            format!("converge {n} new PrometheusRules, {against}{rounds}"),
            ours.converged,
            measured.converged,
            format!("{command}: process start to the last owned ConfigMap"),
        ),
        Row::peaks(
            format!("peak RSS at {n}, {against}"),
            (mib(ours.peak_bytes), ours.peak_bytes),
            measured.peak_bytes,
            format!("{command}: VmHWM of each process"),
        ),
        Row {
            figure: format!("CPU seconds converging {n}, {against}"),
            ours: format!("{:.2} s", ours.cpu_seconds),
            floor: format!("{:.2} s", measured.cpu_seconds),
            ratio: format!("{:.2}×", ours.cpu_seconds / measured.cpu_seconds.max(0.01)),
            command: format!("{command}: user and system time of each process"),
        },
        Row {
            figure: format!("the API server's writes per new primary at {n}, {against}"),
            ours: per_primary(&ours.server_requests, n),
            floor: per_primary(&measured.server_requests, n),
            ratio: String::new(),
            command: format!(
                "{command}: apiserver_request_total for prometheusrules and configmaps, with the garbage collector's"
            ),
        },
        Row {
            figure: format!("writes on a restart over {n} converged primaries, {against}"),
            ours: ours.restart_writes.to_string(),
            floor: measured.restart_writes.to_string(),
            ratio: String::new(),
            command: format!(
                "{command}: operator_api_requests_total's writes (ours), apiserver_request_total's (the peers')"
            ),
        },
    ]
}

/// One size's figures for every implementation and the floor, for the side-by-side table.
pub(super) struct Size<'a> {
    pub(super) n: usize,
    pub(super) ours: &'a OperatorRound,
    pub(super) floor: Duration,
    pub(super) peers: Vec<(Peer, &'a PeerRound)>,
    /// ", median of 3" or empty.
    pub(super) rounds: String,
}

/// The side-by-side table README's Performance section quotes: a column for example-operator,
/// each peer and the floor, a row per figure and size, and RSS per primary and child pair from
/// the two sizes.
pub(super) fn side_by_side(sizes: &[Size<'_>]) -> String {
    let mut header = vec!["".to_owned(), "example-operator".to_owned()];
    header.extend(Peer::ALL.map(|peer| peer.name().to_owned()));
    header.push("floor".to_owned());
    let mut lines = vec![line(&header), line(&vec!["---".to_owned(); header.len()])];
    let peer_cells = |size: &Size<'_>, cell: &dyn Fn(&PeerRound) -> String| -> Vec<String> {
        Peer::ALL
            .iter()
            .map(|peer| {
                size.peers
                    .iter()
                    .find(|(p, _)| p == peer)
                    .map_or_else(String::new, |(_, round)| cell(round))
            })
            .collect()
    };
    for size in sizes {
        let n = size.n;
        let seconds = |d: Duration| format!("{:.2} s", d.as_secs_f64());
        let mut row = vec![
            format!("converge {n}{}", size.rounds),
            seconds(size.ours.converged),
        ];
        row.extend(peer_cells(size, &|r| seconds(r.converged)));
        row.push(seconds(size.floor));
        lines.push(line(&row));
        let mut row = vec![format!("peak RSS at {n}"), mib(size.ours.peak_bytes)];
        row.extend(peer_cells(size, &|r| mib(r.peak_bytes)));
        row.push(String::new());
        lines.push(line(&row));
        let mut row = vec![
            format!("CPU seconds at {n}"),
            format!("{:.2} s", size.ours.cpu_seconds),
        ];
        row.extend(peer_cells(size, &|r| format!("{:.2} s", r.cpu_seconds)));
        row.push(String::new());
        lines.push(line(&row));
        let mut row = vec![
            format!("writes per primary at {n}"),
            per_primary(&size.ours.server_requests, n),
        ];
        row.extend(peer_cells(size, &|r| per_primary(&r.server_requests, n)));
        row.push("APPLY configmaps 1.00, PATCH prometheusrules 1.00".to_owned());
        lines.push(line(&row));
        let mut row = vec![
            format!("writes on a restart over {n}"),
            size.ours.restart_writes.to_string(),
        ];
        row.extend(peer_cells(size, &|r| r.restart_writes.to_string()));
        row.push("0".to_owned());
        lines.push(line(&row));
    }
    if let [small, .., big] = sizes {
        let pairs = big.n.saturating_sub(small.n).max(1) as f64;
        let per_pair = |small_bytes: u64, big_bytes: u64| {
            let pair = big_bytes.saturating_sub(small_bytes) as f64 / pairs;
            format!("{:.1} KiB", pair / 1024.0)
        };
        let mut row = vec![
            "RSS per primary and child pair".to_owned(),
            per_pair(small.ours.peak_bytes, big.ours.peak_bytes),
        ];
        row.extend(Peer::ALL.iter().map(|peer| {
            let at = |size: &Size<'_>| {
                size.peers
                    .iter()
                    .find(|(p, _)| p == peer)
                    .map(|(_, r)| r.peak_bytes)
            };
            match (at(small), at(big)) {
                (Some(s), Some(b)) => per_pair(s, b),
                _ => String::new(),
            }
        }));
        row.push(String::new());
        lines.push(line(&row));
    }
    lines.join("\n")
}

fn line(cells: &[String]) -> String {
    format!("| {} |", cells.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operator(converged_ms: u64, peak_mib: u64) -> OperatorRound {
        OperatorRound {
            converged: Duration::from_millis(converged_ms),
            operator_requests: BTreeMap::new(),
            server_requests: BTreeMap::from([(
                ("PATCH".to_owned(), "prometheusrules".to_owned()),
                10,
            )]),
            restart_writes: 0,
            peak_bytes: peak_mib * 1048576,
            cpu_seconds: 0.5,
        }
    }

    fn peer(converged_ms: u64, peak_mib: u64) -> PeerRound {
        PeerRound {
            converged: Duration::from_millis(converged_ms),
            peak_bytes: peak_mib * 1048576,
            cpu_seconds: 0.25,
            server_requests: BTreeMap::from([(("APPLY".to_owned(), "configmaps".to_owned()), 20)]),
            restart_writes: 10,
        }
    }

    #[test]
    fn the_side_by_side_table_has_a_column_per_peer_and_a_pair_row_from_both_sizes() {
        let (ours_small, ours_big) = (operator(1500, 20), operator(9000, 29));
        let (kube_small, kube_big) = (peer(2000, 10), peer(12000, 28));
        let sizes = [
            Size {
                n: 10,
                ours: &ours_small,
                floor: Duration::from_millis(1000),
                peers: vec![(Peer::KubeRs, &kube_small)],
                rounds: ", median of 3".to_owned(),
            },
            Size {
                n: 100,
                ours: &ours_big,
                floor: Duration::from_millis(5000),
                peers: vec![(Peer::KubeRs, &kube_big)],
                rounds: String::new(),
            },
        ];
        let table = side_by_side(&sizes);
        let lines: Vec<&str> = table.lines().collect();
        let columns = |line: &str| line.matches(" | ").count() + 1;
        // The figure, example-operator, every peer (measured or not), the floor.
        assert_eq!(columns(lines[0]), 2 + Peer::ALL.len() + 1, "{table}");
        assert!(
            lines.iter().all(|line| columns(line) == columns(lines[0])),
            "{table}"
        );
        assert!(
            table.contains("| converge 10, median of 3 | 1.50 s | 2.00 s |  |  | 1.00 s |"),
            "{table}"
        );
        assert!(
            table.contains(
                "| writes per primary at 10 | PATCH prometheusrules 1.00 | APPLY configmaps 2.00 |"
            ),
            "{table}"
        );
        // (29 − 20) MiB over 90 pairs, and (28 − 10) MiB for the peer.
        let pair = |mib: f64| format!("{:.1} KiB", mib * 1024.0 / 90.0);
        let last = lines.last().copied().unwrap_or_default();
        assert!(
            last.starts_with(&format!(
                "| RSS per primary and child pair | {} | {} |",
                pair(9.0),
                pair(18.0)
            )),
            "{table}"
        );
    }

    #[test]
    fn a_peers_manager_and_flags_are_what_its_source_declares() {
        let peers = crate::workspace_root().join("xtask/bench/peers");
        let kube_rs = fs::read_to_string(peers.join("kube-rs/src/main.rs")).unwrap_or_default();
        let go_main =
            fs::read_to_string(peers.join("controller-runtime/cmd/main.go")).unwrap_or_default();
        let go_controller = fs::read_to_string(
            peers.join("controller-runtime/internal/controller/prometheusrule_controller.go"),
        )
        .unwrap_or_default();
        assert!(kube_rs.contains(&format!(
            "const MANAGER: &str = \"{}\";",
            Peer::KubeRs.manager()
        )));
        for peer in [Peer::ControllerRuntime, Peer::ControllerRuntimeSelected] {
            assert!(go_controller.contains(&format!("Manager = \"{}\"", peer.manager())));
            for flag in &peer.args() {
                let name = flag
                    .trim_start_matches("--")
                    .split('=')
                    .next()
                    .unwrap_or_default();
                // The scaffold's own flags and zap's, which BindFlags adds.
                let declared = go_main.contains(&format!("\"{name}\"")) || name.starts_with("zap-");
                assert!(
                    declared,
                    "{flag} is not a flag of the controller-runtime peer"
                );
            }
        }
        assert!(
            Peer::ControllerRuntimeSelected
                .args()
                .contains(&"--label-selected-cache")
        );
        assert!(
            !Peer::ControllerRuntime
                .args()
                .contains(&"--label-selected-cache")
        );
    }
}
