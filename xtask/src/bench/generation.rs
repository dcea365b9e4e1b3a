//! `cargo xtask bench gen`: `gen` as users run it, against `kopium -f` on the same CRD.
//!
//! Two builds of one command: the release `operator-gen` (the profile `cargo install` uses,
//! built here with `cargo build --release -p operator-gen-cli`) and `cargo xtask gen` (this
//! process's own dev build, timed without cargo's start-up). Each runs two ways:
//!
//! - `gen` into a new folder: the whole cost, with every fsync the writer makes so that a
//!   crash leaves the old crate or the new one (counted once, under strace, untimed);
//! - `gen --check` against a folder that does not exist: the same reading, generating and
//!   comparing, without the disk. This is the like-for-like figure, as kopium writes nothing.
//!
//! Runs are paired (kopium, then each of ours, in turn) and reduced to medians, so that load on
//! the machine falls on every side alike. The ratios are printed, never asserted.

use std::{
    fs,
    io::Read,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::{Row, median};

/// The kopium release the generator is measured against, the one it uses as a library.
const KOPIUM_VERSION: &str = "0.24.1";

/// The system calls that make written data durable.
const SYNC_CALLS: &[&str] = &["fsync", "fdatasync", "syncfs", "sync_file_range"];

/// Wall and CPU time of one finished process.
#[derive(Clone, Copy)]
struct Cost {
    wall: Duration,
    cpu: Duration,
}

/// One way of running `gen`.
struct Variant {
    /// Which build, as the table names it.
    build: &'static str,
    binary: PathBuf,
    /// `--check` against a missing folder, rather than writing a new one.
    check: bool,
}

impl Variant {
    /// `gen` on `crd` into `out`.
    fn command(&self, crd: &Path, out: &Path) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .arg("gen")
            .arg("--crd")
            .arg(crd)
            .arg("--out")
            .arg(out);
        if self.check {
            command.arg("--check");
        }
        command
    }

    /// What `gen --check` answers for a crate that does not exist yet: every file would
    /// change, which it reports with exit status 1.
    fn accepted_status(&self) -> &'static [i32] {
        if self.check { &[0, 1] } else { &[0] }
    }
}

pub(super) fn rows(workspace: &Path, runs: usize) -> Result<Vec<Row>> {
    let kopium = kopium()?;
    let (release, xtask) = (release_binary(workspace)?, std::env::current_exe()?);
    let variants = [
        (true, &release),
        (true, &xtask),
        (false, &release),
        (false, &xtask),
    ]
    .map(|(check, binary)| Variant {
        build: if *binary == xtask {
            "cargo xtask gen"
        } else {
            "release operator-gen"
        },
        binary: binary.clone(),
        check,
    });
    let inputs = [
        workspace.join("crds/monitoring.coreos.com/prometheusrules.yaml"),
        largest_crd(&workspace.join("../shared/crds"))?,
    ];
    let scratch = workspace.join("target/bench/gen");
    let absent = scratch.join("absent");
    if absent.exists() {
        fs::remove_dir_all(&absent)?;
    }
    let mut rows = Vec::new();
    for input in inputs {
        let shown = input.strip_prefix(workspace).unwrap_or(&input).display();
        let mut floor = Vec::new();
        let mut ours: Vec<Vec<Cost>> = variants.iter().map(|_| Vec::new()).collect();
        for run in 0..runs {
            floor.push(timed(
                Command::new(&kopium).arg("-f").arg(&input),
                &[0],
                "kopium",
            )?);
            for (variant, costs) in variants.iter().zip(&mut ours) {
                let out = if variant.check {
                    absent.clone()
                } else {
                    let out = scratch.join(format!("run-{run}"));
                    if out.exists() {
                        fs::remove_dir_all(&out)?;
                    }
                    out
                };
                costs.push(timed(
                    &mut variant.command(&input, &out),
                    variant.accepted_status(),
                    variant.build,
                )?);
            }
        }
        let size = fs::metadata(&input)?.len();
        let name = input
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (floor_wall, floor_cpu) = medians(&floor);
        for (variant, costs) in variants.iter().zip(&ours) {
            let (wall, cpu) = medians(costs);
            let (what, target, syncs) = if variant.check {
                ("gen --check", "<missing folder> --check", String::new())
            } else {
                let out = scratch.join("synced");
                if out.exists() {
                    fs::remove_dir_all(&out)?;
                }
                let syncs = sync_calls(variant.command(&input, &out))?.map_or_else(
                    || ", fsyncs not counted (no strace)".to_owned(),
                    |n| format!(", {n} fsyncs"),
                );
                ("gen", "<new folder>", syncs)
            };
            rows.push(Row {
                figure: format!(
                    "{what}, {}, {name} ({} KB), median of {runs}",
                    variant.build,
                    size / 1024
                ),
                ours: format!(
                    "{:.3} s (CPU {:.3} s){syncs}",
                    wall.as_secs_f64(),
                    cpu.as_secs_f64()
                ),
                floor: format!(
                    "{:.3} s (CPU {:.3} s)",
                    floor_wall.as_secs_f64(),
                    floor_cpu.as_secs_f64()
                ),
                ratio: format!(
                    "{:.2}× (CPU {:.2}×)",
                    wall.as_secs_f64() / floor_wall.as_secs_f64(),
                    cpu.as_secs_f64() / floor_cpu.as_secs_f64()
                ),
                command: format!(
                    "`{} gen --crd {shown} --out {target}` vs `kopium -f {shown}`",
                    match variant.build {
                        "cargo xtask gen" => "target/debug/xtask",
                        _ => "target/release/operator-gen",
                    }
                ),
            });
        }
    }
    Ok(rows)
}

/// The median wall and CPU time of `costs`.
fn medians(costs: &[Cost]) -> (Duration, Duration) {
    (
        median(costs.iter().map(|c| c.wall).collect()),
        median(costs.iter().map(|c| c.cpu).collect()),
    )
}

/// Runs `command` to completion, its output discarded, and returns what it cost. An exit
/// status outside `accepted` is an error carrying the process's stderr.
fn timed(command: &mut Command, accepted: &[i32], what: &str) -> Result<Cost> {
    let started = Instant::now();
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let pid = i32::try_from(child.id()).context("a process id")?;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be filled in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for; the pointers are to live locals.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    if reaped != pid || !libc::WIFEXITED(status) || !accepted.contains(&libc::WEXITSTATUS(status)) {
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr {
            let _ = pipe.read_to_string(&mut stderr);
        }
        bail!("{what} failed: {stderr}");
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Ok(Cost {
        wall,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
    })
}

/// How many times `command` and its threads asked for data to be made durable, from a run
/// under strace; `None` when strace is not installed.
fn sync_calls(command: Command) -> Result<Option<usize>> {
    let log =
        std::env::temp_dir().join(format!("operator-gen-bench-{}.strace", std::process::id()));
    let traced = Command::new("strace")
        .args(["-f", "-qq", "-e"])
        .arg(format!("trace={}", SYNC_CALLS.join(",")))
        .arg("-o")
        .arg(&log)
        .arg(command.get_program())
        .args(command.get_args())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let status = match traced {
        Ok(status) => status,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).context("running strace"),
    };
    let text = fs::read_to_string(&log).with_context(|| format!("reading {}", log.display()));
    let _ = fs::remove_file(&log);
    if !status.success() {
        bail!("gen under strace failed ({status})");
    }
    Ok(Some(count_sync_calls(&text?)))
}

/// Sync calls in an strace log. A call another thread interrupted is logged twice, as
/// `fsync(3 <unfinished ...>` and `<... fsync resumed>`: only the first names it with `(`.
fn count_sync_calls(log: &str) -> usize {
    log.lines()
        .filter(|line| {
            SYNC_CALLS.iter().any(|call| {
                line.split_whitespace()
                    .any(|word| word.starts_with(&format!("{call}(")))
            })
        })
        .count()
}

/// The release `operator-gen`, built first so that the table measures the current source.
fn release_binary(workspace: &Path) -> Result<PathBuf> {
    let status = operator_gen_tests::cargo()
        .args(["build", "--release", "--quiet", "-p", "operator-gen-cli"])
        .current_dir(workspace)
        .status()
        .context("running cargo build --release")?;
    if !status.success() {
        bail!("cargo build --release -p operator-gen-cli failed ({status})");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace.join("target"), PathBuf::from);
    Ok(target.join("release/operator-gen"))
}

/// `kopium`, installed into the cache the first time.
fn kopium() -> Result<PathBuf> {
    let cache = operator_gen_cluster::machine_cache().join(format!("kopium-{KOPIUM_VERSION}"));
    let binary = cache.join("bin/kopium");
    if !binary.exists() {
        eprintln!(
            "installing kopium {KOPIUM_VERSION} into {}",
            cache.display()
        );
        let status = operator_gen_tests::cargo()
            .args([
                "install",
                "kopium",
                "--locked",
                "--quiet",
                "--version",
                KOPIUM_VERSION,
            ])
            .arg("--root")
            .arg(&cache)
            .status()?;
        if !status.success() {
            bail!("cargo install kopium failed ({status})");
        }
    }
    Ok(binary)
}

/// The largest CRD file under `dir`, one level of folders deep.
fn largest_crd(dir: &Path) -> Result<PathBuf> {
    let mut largest: Option<(u64, PathBuf)> = None;
    for group in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let group = group?.path();
        if !group.is_dir() {
            continue;
        }
        for file in fs::read_dir(&group)? {
            let path = file?.path();
            let size = fs::metadata(&path)?.len();
            if path.extension().is_some_and(|e| e == "yaml")
                && largest.as_ref().is_none_or(|(s, _)| size > *s)
            {
                largest = Some((size, path));
            }
        }
    }
    largest.map(|(_, path)| path).context("no CRDs found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_costs_at_least_its_own_cpu_time() {
        let cost = timed(
            Command::new("sh").args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]),
            &[0],
            "a loop",
        )
        .expect("sh runs");
        assert!(
            cost.cpu > Duration::ZERO && cost.wall >= cost.cpu / 2,
            "{:?} {:?}",
            cost.wall,
            cost.cpu
        );
        assert!(timed(&mut Command::new("false"), &[0], "false").is_err());
        assert!(timed(&mut Command::new("false"), &[0, 1], "false").is_ok());
    }

    #[test]
    fn interrupted_sync_calls_count_once() {
        let log = "\
101 fsync(3)                          = 0
102 fdatasync(4 <unfinished ...>
101 openat(AT_FDCWD, \"fsync(\", O_RDONLY) = 5
102 <... fdatasync resumed>)          = 0
103 syncfs(5)                         = 0
";
        assert_eq!(count_sync_calls(log), 3);
    }
}
