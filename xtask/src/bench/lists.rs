//! `cargo xtask bench lists`: example-operator's memory with each initial list its watches can
//! take (`--initial-list`), at `--memory-primaries` primaries on the project's API server: a
//! streaming list (`sendInitialEvents`) against pages of the most recent state (kube's
//! `ListSemantic::MostRecent`), and pages from the watch cache (`ListSemantic::Any`) against
//! the same. Each round converges new primaries, then starts the operator again over the
//! converged world, where listing what exists is most of what it does. The rounds take the
//! modes in turn, so drift in the machine or the API server falls on each alike.

use std::{
    fs,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use super::{Bench, Row, median, peak_rss, stop};

/// The initial lists compared, as `--initial-list` names them; the first is each row's floor.
const MODES: [&str; 3] = ["paged", "streaming", "paged-any"];

/// The operator's metrics port in these rounds.
const PORT: u16 = 19400;

/// What one round of one mode measured.
#[derive(Clone, Copy)]
struct Round {
    /// From the operator's start to the last child.
    converged: Duration,
    /// The operator's VmHWM converging.
    converge_peak: u64,
    /// The started-again operator's VmHWM, once settled.
    restart_peak: u64,
    /// From the second start to every watch listed.
    restart_ready: Duration,
    /// The API server's peak RSS while the operator started again, and its RSS before.
    server_restart: (u64, u64),
    /// The bytes the API server allocated meanwhile (`go_memstats_alloc_bytes_total`), other
    /// clients' requests included.
    server_allocated: u64,
}

pub(super) async fn rows(bench: &Bench, n: usize, repeat: usize) -> Result<Vec<Row>> {
    let mut rounds: Vec<Vec<Round>> = vec![Vec::new(); MODES.len()];
    for round in 0..repeat {
        for (mode, measured) in MODES.iter().zip(&mut rounds) {
            let took = bench
                .list_round(&format!("bench-lists-{mode}-{round}"), n, mode)
                .await?;
            eprintln!(
                "lists round {round}, {mode}: converged in {:.2?} at {}, started over listed in {:.2?} at {}; meanwhile the API server allocated {} and peaked at {} from {}",
                took.converged,
                mib(took.converge_peak),
                took.restart_ready,
                mib(took.restart_peak),
                mib(took.server_allocated),
                mib(took.server_restart.0),
                mib(took.server_restart.1),
            );
            measured.push(took);
        }
    }
    let [paged, streaming, any] = [0, 1, 2].map(|i| rounds[i].as_slice());
    let command = |what: &str| {
        format!(
            "`cargo xtask bench --memory-primaries {n} --repeat {repeat} lists`: {what}, example-operator with INITIAL_LIST set to each in turn"
        )
    };
    let against = [
        ("a streaming list against paged lists", streaming, paged),
        (
            "paged lists from the watch cache (Any) against the most recent (MostRecent)",
            any,
            paged,
        ),
    ];
    let mut rows = Vec::new();
    for (name, ours, floor) in against {
        rows.push(peaks(
            format!("peak RSS converging {n} new primaries, {name}"),
            ours,
            floor,
            |r| r.converge_peak,
            command("VmHWM of the operator from its start to the last child and settled"),
        ));
    }
    for (name, ours, floor) in against {
        rows.push(peaks(
            format!("peak RSS starting over {n} converged primaries and children, {name}"),
            ours,
            floor,
            |r| r.restart_peak,
            command("VmHWM of the operator started again over the converged world, once settled"),
        ));
    }
    for (name, ours, floor) in against {
        rows.push(times(
            format!("time to list {n} converged pairs when started over, {name}"),
            ours,
            floor,
            |r| r.restart_ready,
            command(
                "from the operator's start to operator_watches_pending 0 (both watches listed)",
            ),
        ));
        rows.push(times(
            format!("converge {n} new PrometheusRules, {name}"),
            ours,
            floor,
            |r| r.converged,
            command("from the operator's start to the last owned ConfigMap"),
        ));
    }
    for (name, ours, floor) in against {
        rows.push(peaks(
            format!("bytes the API server allocated while the operator started over, {name}"),
            ours,
            floor,
            |r| r.server_allocated,
            command("the rise of kube-apiserver's go_memstats_alloc_bytes_total from the operator's start to settled, other clients' requests included"),
        ));
        rows.push(peaks(
            format!("the API server's peak RSS while the operator started over, {name}"),
            ours,
            floor,
            |r| r.server_restart.0,
            command(&format!(
                "VmRSS of kube-apiserver sampled every 100 ms, which other clients move too; its RSS at each start, median: {} and {}",
                mib(median_of(ours, |r| r.server_restart.1)),
                mib(median_of(floor, |r| r.server_restart.1)),
            )),
        ));
    }
    Ok(rows)
}

impl Bench {
    /// Converges `n` new primaries in `namespace` with the initial list `mode`, then starts
    /// the operator again over them; removes them after.
    async fn list_round(&self, namespace: &str, n: usize, mode: &str) -> Result<Round> {
        self.primaries(namespace, n).await?;
        let env = [("INITIAL_LIST", mode)];
        let measured = async {
            let started = Instant::now();
            let mut operator = self.start_operator(PORT, namespace, &env)?;
            let converged = async {
                self.children(namespace, n).await?;
                let converged = started.elapsed();
                self.settle(PORT).await?;
                anyhow::Ok((converged, peak_rss(&operator)?))
            }
            .await;
            stop(&mut operator);
            let (converged, converge_peak) = converged?;

            let allocated = self.server_allocated().await?;
            let sampler = ServerRss::start(self)?;
            let started = Instant::now();
            let log = format!("{namespace}-again");
            let mut operator = self.start_operator(PORT, &log, &env)?;
            let restarted = async {
                self.listed(PORT).await?;
                let ready = started.elapsed();
                self.settle(PORT).await?;
                anyhow::Ok((ready, peak_rss(&operator)?))
            }
            .await;
            stop(&mut operator);
            let server_restart = sampler.stop().await;
            let server_allocated = self.server_allocated().await?.saturating_sub(allocated);
            let (restart_ready, restart_peak) = restarted?;
            anyhow::Ok(Round {
                converged,
                converge_peak,
                restart_peak,
                restart_ready,
                server_restart,
                server_allocated,
            })
        }
        .await;
        self.forget(namespace).await?;
        measured
    }

    /// The bytes the API server has allocated since it started.
    async fn server_allocated(&self) -> Result<u64> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = self.admin.request_text(request).await?;
        let value = text
            .lines()
            .find_map(|line| line.strip_prefix("go_memstats_alloc_bytes_total "))
            .context("the API server's /metrics has no go_memstats_alloc_bytes_total")?;
        Ok(value.trim().parse::<f64>()? as u64)
    }
}

/// The API server's resident memory, sampled until stopped.
struct ServerRss {
    stopped: Arc<AtomicBool>,
    sampling: tokio::task::JoinHandle<(u64, u64)>,
}

impl ServerRss {
    /// Samples the RSS of the API server the bench runs against, from its pid file.
    fn start(bench: &Bench) -> Result<Self> {
        let status = format!("/proc/{}/status", bench.apiserver_pid);
        let stopped = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stopped);
        let sampling = tokio::spawn(async move {
            let before = rss(&status);
            let mut peak = before;
            while !stopping.load(Ordering::Relaxed) {
                peak = peak.max(rss(&status));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (peak.max(rss(&status)), before)
        });
        Ok(Self { stopped, sampling })
    }

    /// The peak RSS since the start, and the RSS at the start; 0 where it could not be read.
    async fn stop(self) -> (u64, u64) {
        self.stopped.store(true, Ordering::Relaxed);
        self.sampling.await.unwrap_or((0, 0))
    }
}

/// VmRSS from a `/proc/<pid>/status`, in bytes; 0 if it cannot be read.
fn rss(status: &str) -> u64 {
    let kib = fs::read_to_string(status).ok().and_then(|text| {
        text.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    kib.unwrap_or(0) * 1024
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / 1048576.0)
}

fn median_of(rounds: &[Round], figure: impl Fn(&Round) -> u64) -> u64 {
    let mut values: Vec<u64> = rounds.iter().map(figure).collect();
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

/// A row of two peaks in bytes, the medians of the rounds with every round beside them.
fn peaks(
    figure: String,
    ours: &[Round],
    floor: &[Round],
    peak: impl Fn(&Round) -> u64 + Copy,
    command: String,
) -> Row {
    let runs = |rounds: &[Round]| {
        let all: Vec<String> = rounds
            .iter()
            .map(|r| format!("{:.0}", peak(r) as f64 / 1048576.0))
            .collect();
        format!("{} ({})", mib(median_of(rounds, peak)), all.join(", "))
    };
    let (ours_median, floor_median) = (median_of(ours, peak), median_of(floor, peak));
    Row {
        figure: format!("{figure}, median of {}", ours.len()),
        ours: runs(ours),
        floor: runs(floor),
        ratio: format!("{:.2}×", ours_median as f64 / floor_median.max(1) as f64),
        command,
    }
}

/// A row of two durations, the medians of the rounds with every round beside them.
fn times(
    figure: String,
    ours: &[Round],
    floor: &[Round],
    time: impl Fn(&Round) -> Duration + Copy,
    command: String,
) -> Row {
    let runs = |rounds: &[Round]| {
        let all: Vec<String> = rounds
            .iter()
            .map(|r| format!("{:.2}", time(r).as_secs_f64()))
            .collect();
        let median = median(rounds.iter().map(time).collect());
        format!("{:.2} s ({})", median.as_secs_f64(), all.join(", "))
    };
    let ratio = median(ours.iter().map(time).collect()).as_secs_f64()
        / median(floor.iter().map(time).collect()).as_secs_f64();
    Row {
        figure: format!("{figure}, median of {}", ours.len()),
        ours: runs(ours),
        floor: runs(floor),
        ratio: format!("{ratio:.2}×"),
        command,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(peak_mib: u64) -> Round {
        Round {
            converged: Duration::from_secs(peak_mib),
            converge_peak: peak_mib * 1048576,
            restart_peak: 0,
            restart_ready: Duration::ZERO,
            server_restart: (0, 0),
            server_allocated: 0,
        }
    }

    #[test]
    fn a_row_gives_the_medians_their_ratio_and_every_round() {
        let ours = [round(30), round(10), round(20)];
        let floor = [round(40), round(40), round(50)];
        let row = peaks(
            "peak".to_owned(),
            &ours,
            &floor,
            |r| r.converge_peak,
            String::new(),
        );
        assert_eq!(row.ours, "20 MiB (30, 10, 20)");
        assert_eq!(row.floor, "40 MiB (40, 40, 50)");
        assert_eq!(row.ratio, "0.50×");
        assert_eq!(row.figure, "peak, median of 3");
        let row = times(
            "time".to_owned(),
            &ours,
            &floor,
            |r| r.converged,
            String::new(),
        );
        assert_eq!(row.ours, "20.00 s (30.00, 10.00, 20.00)");
        assert_eq!(row.ratio, "0.50×");
    }

    #[test]
    fn the_rss_of_a_process_is_read_from_its_status() {
        let own = rss(&format!("/proc/{}/status", std::process::id()));
        assert!(own > 0);
        assert_eq!(rss("/proc/0/no-such-status"), 0);
    }
}
