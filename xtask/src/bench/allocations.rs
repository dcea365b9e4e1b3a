//! `cargo xtask bench allocations`: example-operator's heap, counted by dhat
//! (`xtask/allocation-count`), converging 1,000 and then 10,000 primaries with their children
//! on an in-process mock API server. It gates like kube-rs' own memory benchmark: a change that
//! makes the 10,000 run allocate more than 10% over the checked-in baseline, in blocks or in
//! peak bytes, fails; `--bless` writes the baseline anew.
//!
//! It counts the heap, not RSS: allocation counts repeat from run to run where RSS moves with
//! the allocator and the machine. The RSS of the same runs is printed beside it, and
//! `bench runtime` measures RSS against a real API server.

use std::path::Path;

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

use super::Row;
use operator_gen_e2e::artifacts::Artifacts;

/// The checked-in baseline, beside the bench it is the baseline of.
const BASELINE: &str = "xtask/allocation-count/baseline.json";
/// The primaries of the small run, and of the large run the gate reads.
const SMALL: usize = 1_000;
const LARGE: usize = 10_000;
/// How much more than the baseline a run may allocate.
const TOLERANCE: f64 = 1.10;

/// What one run of `allocation-count` printed.
#[derive(Deserialize)]
struct Run {
    total_blocks: u64,
    total_bytes: u64,
    max_bytes: u64,
    curr_bytes: u64,
    rss_bytes: u64,
    seconds: f64,
}

/// The figures the gate holds a run to.
#[derive(Serialize, Deserialize)]
struct Baseline {
    primaries: usize,
    total_blocks: u64,
    max_bytes: u64,
}

/// The rows of the table, and what went over the baseline (nothing when blessing).
pub(super) fn rows(workspace: &Path, bless: bool) -> Result<(Vec<Row>, Vec<String>)> {
    let artifacts = Artifacts::build(workspace)?;
    let binary = artifacts.bin(
        &workspace.join("xtask/allocation-count"),
        "allocation-count",
    )?;
    let small = run(binary, SMALL)?;
    let large = run(binary, LARGE)?;
    let pairs = (LARGE - SMALL) as f64;
    let kib = |bytes: f64| bytes / 1024.0;
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let mut rows = vec![
        Row {
            figure: format!("heap allocations converging {LARGE} primaries and children"),
            ours: format!(
                "{} blocks, {:.0} MiB in all, {:.0} MiB at the peak",
                large.total_blocks,
                mib(large.total_bytes),
                mib(large.max_bytes)
            ),
            floor: String::new(),
            ratio: String::new(),
            command: format!(
                "`cargo xtask bench allocations` (dhat, debug build, {:.1} s under dhat)",
                large.seconds
            ),
        },
        Row {
            figure: "live heap per primary and child pair, converged".to_owned(),
            ours: format!(
                "{:.1} KiB",
                kib(large.curr_bytes.saturating_sub(small.curr_bytes) as f64 / pairs)
            ),
            floor: String::new(),
            ratio: String::new(),
            command: format!(
                "(heap at {LARGE} − heap at {SMALL}) / {pairs}: {:.0} MiB and {:.0} MiB",
                mib(large.curr_bytes),
                mib(small.curr_bytes)
            ),
        },
        Row {
            figure: "RSS per primary and child pair, converged".to_owned(),
            ours: format!(
                "{:.1} KiB",
                kib(large.rss_bytes.saturating_sub(small.rss_bytes) as f64 / pairs)
            ),
            floor: String::new(),
            ratio: String::new(),
            command: format!(
                "(VmRSS at {LARGE} − VmRSS at {SMALL}) / {pairs}, system allocator under dhat: {:.0} MiB and {:.0} MiB",
                mib(large.rss_bytes),
                mib(small.rss_bytes)
            ),
        },
    ];
    let path = workspace.join(BASELINE);
    if bless {
        let baseline = Baseline {
            primaries: LARGE,
            total_blocks: large.total_blocks,
            max_bytes: large.max_bytes,
        };
        std::fs::write(&path, serde_json::to_string_pretty(&baseline)? + "\n")?;
        println!("wrote {BASELINE}");
        return Ok((rows, Vec::new()));
    }
    let baseline: Baseline = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {BASELINE}"))?,
    )
    .with_context(|| format!("reading {BASELINE}"))?;
    if baseline.primaries != LARGE {
        bail!(
            "{BASELINE} is for {} primaries, not {LARGE}: run `cargo xtask bench allocations --bless`",
            baseline.primaries
        );
    }
    let mut over = Vec::new();
    for (what, now, then) in [
        (
            "blocks allocated",
            large.total_blocks,
            baseline.total_blocks,
        ),
        ("peak heap bytes", large.max_bytes, baseline.max_bytes),
    ] {
        let ratio = now as f64 / then.max(1) as f64;
        rows.push(Row {
            figure: format!("{what} against the baseline"),
            ours: now.to_string(),
            floor: then.to_string(),
            ratio: format!("{ratio:.3}×"),
            command: format!("fails above {TOLERANCE:.2}×; `--bless` updates {BASELINE}"),
        });
        if ratio > TOLERANCE {
            over.push(format!(
                "{what}: {now} is {ratio:.3}× the baseline's {then}, above {TOLERANCE:.2}×; if the change is worth it, run `cargo xtask bench allocations --bless` and commit {BASELINE}"
            ));
        }
    }
    Ok((rows, over))
}

/// One run of `allocation-count` (the binary at `binary`) over `primaries`.
fn run(binary: &Path, primaries: usize) -> Result<Run> {
    let output = std::process::Command::new(binary)
        .args(["--primaries", &primaries.to_string()])
        // A registry folder would add file writes to every reconcile.
        .env_remove("RULE_REGISTRY_DIR")
        .output()
        .with_context(|| format!("running {}", binary.display()))?;
    if !output.status.success() {
        bail!(
            "allocation-count --primaries {primaries}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let last = output
        .stdout
        .split(|&b| b == b'\n')
        .rfind(|line| !line.is_empty())
        .context("allocation-count printed nothing")?;
    serde_json::from_slice(last).context("reading allocation-count's report")
}
