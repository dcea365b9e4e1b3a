//! `cargo xtask bench build`: what a user pays to build the bench's job (a finalizer and one
//! server-side applied ConfigMap per PrometheusRule) three ways, each copied into a folder of
//! its own outside the workspace and built as its user would, with no flags of ours:
//!
//! - a crate `operator-gen new` generates for the PrometheusRule CRD, owning a ConfigMap, with
//!   the job's reconcile (`xtask/bench/build/reconcile.rs`) over the skeleton's;
//! - the plain kube-rs peer (`xtask/bench/peers/kube-rs`), with the workspace's `Cargo.lock`;
//! - the controller-runtime peer (`xtask/bench/peers/controller-runtime`), with `go build` in
//!   the environment of `cluster::go_command` (`CGO_ENABLED=0`, as kubebuilder's Dockerfile
//!   builds it, and its `go.sum` read-only).
//!
//! For each: `cargo build` and `cargo build --release` from an empty target directory, the
//! same after a one-line edit of the reconcile (the median of three edits), the crates in the
//! dependency graph, and the release binary's size. A cold Go build starts from an empty
//! `GOCACHE` (so it compiles the standard library, which Rust ships built) and the module
//! cache the control plane's build filled (as cargo's registry is already downloaded).

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::median;
use operator_gen_cluster::go_command;

/// The line each incremental build inserts at the top of the reconcile, the `{}` numbered so
/// that every edit is a change.
const RUST_EDIT: &str = "        tracing::debug!(\"one-line edit {}\");";
const GO_EDIT: &str = "\t_ = \"one-line edit {}\"";

/// One of the three builds.
struct Subject {
    name: &'static str,
    dir: PathBuf,
    /// The reconcile's file, and the line after which the edit goes.
    reconcile: PathBuf,
    anchor: &'static str,
}

/// What building one subject cost.
struct Cost {
    cold_debug: Duration,
    edit_debug: Duration,
    cold_release: Duration,
    edit_release: Duration,
    crates: usize,
    binary_bytes: u64,
}

/// The build-cost table, as README quotes it.
pub(super) fn table(workspace: &Path) -> Result<String> {
    let root = std::env::temp_dir().join("operator-gen-bench-build");
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("emptying {}", root.display()))?;
    }
    fs::create_dir_all(&root)?;
    let generated = generated_crate(workspace, &root)?;
    let generated_cost = cargo_cost(&generated, "bench-operator")?;
    let peer = kube_rs_peer(workspace, &root)?;
    let peer_cost = cargo_cost(&peer, "kube-rs-peer")?;
    let go = controller_runtime_peer(workspace, &root)?;
    let go_cost = go_cost(&go)?;
    // The generated crate's crates that the plain kube-rs peer does not have: what the
    // runtime and the generated wiring add.
    let added: Vec<String> = dependency_graph(&generated.dir)?
        .difference(&dependency_graph(&peer.dir)?)
        .cloned()
        .collect();
    fs::remove_dir_all(&root)?;
    Ok(render(&generated_cost, &peer_cost, &go_cost, &added))
}

fn render(ours: &Cost, peer: &Cost, go: &Cost, added: &[String]) -> String {
    let seconds = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    let ratio = |a: Duration, b: Duration| format!("{:.2}×", a.as_secs_f64() / b.as_secs_f64());
    let mib = |bytes: u64| format!("{:.1} MiB", bytes as f64 / 1048576.0);
    let times = |c: &Cost| [c.cold_debug, c.edit_debug, c.cold_release, c.edit_release];
    let figures = [
        "debug build, cold",
        "debug build after a one-line edit of the reconcile",
        "release build, cold",
        "release build after a one-line edit of the reconcile",
    ];
    let mut lines = vec![
        "| | generated crate | plain kube-rs | ratio | controller-runtime (`go build`) |"
            .to_owned(),
        "| --- | --- | --- | --- | --- |".to_owned(),
    ];
    let (ours_times, peer_times, go_times) = (times(ours), times(peer), times(go));
    for (i, figure) in figures.iter().enumerate() {
        lines.push(format!(
            "| {figure} | {} | {} | {} | {} |",
            seconds(ours_times[i]),
            seconds(peer_times[i]),
            ratio(ours_times[i], peer_times[i]),
            seconds(go_times[i]),
        ));
    }
    lines.push(format!(
        "| crates (Go: modules) in the dependency graph | {} | {} | {:.2}× | {} |",
        ours.crates,
        peer.crates,
        ours.crates as f64 / peer.crates.max(1) as f64,
        go.crates
    ));
    lines.push(format!(
        "| release binary | {} | {} | {:.2}× | {} |",
        mib(ours.binary_bytes),
        mib(peer.binary_bytes),
        ours.binary_bytes as f64 / peer.binary_bytes.max(1) as f64,
        mib(go.binary_bytes)
    ));
    lines.push(String::new());
    lines.push(format!(
        "The generated crate's {} crates that the plain kube-rs peer does not build: {}.",
        added.len(),
        added.join(", ")
    ));
    lines.join("\n")
}

/// `operator-gen new` for the PrometheusRule CRD, owning a ConfigMap, with serde-saphyr and the
/// job's reconcile.
fn generated_crate(workspace: &Path, root: &Path) -> Result<Subject> {
    let status = operator_gen_tests::cargo()
        .args(["build", "--quiet", "-p", "operator-gen-cli"])
        .current_dir(workspace)
        .status()?;
    if !status.success() {
        bail!("building operator-gen failed ({status})");
    }
    let operator_gen = workspace.join("target/debug/operator-gen");
    let dir = root.join("bench-operator");
    let crd = workspace.join("crds/monitoring.coreos.com/prometheusrules.yaml");
    run(Command::new(&operator_gen)
        .arg("new")
        .arg(&dir)
        .arg("--crd")
        .arg(&crd))?;
    let manifest = dir.join("operator.yaml");
    let mut text = fs::read_to_string(&manifest)?;
    text.push_str("owns: [{ kind: ConfigMap }]\ndependencies:\n  serde-saphyr: \"2.1.1\"\n");
    fs::write(&manifest, text)?;
    run(Command::new(&operator_gen).arg("gen").current_dir(&dir))?;
    let reconcile = dir.join("src/reconcile.rs");
    fs::copy(workspace.join("xtask/bench/build/reconcile.rs"), &reconcile)?;
    Ok(Subject {
        name: "the generated crate",
        dir,
        reconcile,
        anchor: "async fn apply(",
    })
}

/// The kube-rs peer as a crate of its own: the workspace's inherited fields written out, and
/// the workspace's `Cargo.lock`, so it builds the same versions without the workspace's
/// profiles.
fn kube_rs_peer(workspace: &Path, root: &Path) -> Result<Subject> {
    let dir = root.join("kube-rs-peer");
    copy_tree(&workspace.join("xtask/bench/peers/kube-rs"), &dir)?;
    let manifest = dir.join("Cargo.toml");
    let text = fs::read_to_string(&manifest)?
        .replace("edition.workspace = true", "edition = \"2024\"")
        .replace("rust-version.workspace = true\n", "")
        .replace("license.workspace = true\n", "");
    fs::write(&manifest, format!("{text}\n[workspace]\n"))?;
    fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock"))?;
    Ok(Subject {
        name: "the plain kube-rs peer",
        reconcile: dir.join("src/main.rs"),
        dir,
        anchor: "async fn apply(",
    })
}

fn controller_runtime_peer(workspace: &Path, root: &Path) -> Result<Subject> {
    let dir = root.join("controller-runtime-peer");
    copy_tree(
        &workspace.join("xtask/bench/peers/controller-runtime"),
        &dir,
    )?;
    Ok(Subject {
        name: "the controller-runtime peer",
        reconcile: dir.join("internal/controller/prometheusrule_controller.go"),
        dir,
        anchor: ") Reconcile(ctx context.Context",
    })
}

/// Cold and incremental debug and release builds of a cargo package with one binary, `bin`.
fn cargo_cost(subject: &Subject, bin: &str) -> Result<Cost> {
    let build = |release: bool| -> Result<Duration> {
        let mut cargo = operator_gen_tests::cargo_unlinted();
        cargo.arg("build").arg("--quiet").current_dir(&subject.dir);
        cargo
            .env_remove("CARGO_INCREMENTAL")
            .env_remove("CARGO_TARGET_DIR");
        if release {
            cargo.arg("--release");
        }
        timed(&mut cargo, subject.name)
    };
    eprintln!("building {} cold, debug and release", subject.name);
    let cold_debug = build(false)?;
    let cold_release = build(true)?;
    let edit_debug = edited(subject, RUST_EDIT, || build(false))?;
    let edit_release = edited(subject, RUST_EDIT, || build(true))?;
    Ok(Cost {
        cold_debug,
        edit_debug,
        cold_release,
        edit_release,
        crates: dependency_graph(&subject.dir)?.len(),
        binary_bytes: fs::metadata(subject.dir.join("target/release").join(bin))?.len(),
    })
}

/// Cold and incremental `go build` of the controller-runtime peer; its debug and release are
/// the same build.
fn go_cost(subject: &Subject) -> Result<Cost> {
    let cache = subject.dir.join("go-build-cache");
    let out = subject.dir.join("controller-runtime-peer");
    let build = || {
        let mut go = go_command(&subject.dir);
        go.env("GOCACHE", &cache)
            .args(["build", "-o"])
            .arg(&out)
            .arg("./cmd");
        timed(&mut go, subject.name)
    };
    eprintln!("building {} cold", subject.name);
    let cold = build()?;
    let edit = edited(subject, GO_EDIT, build)?;
    let listed = go_command(&subject.dir)
        .args([
            "list",
            "-deps",
            "-f",
            "{{with .Module}}{{.Path}}{{end}}",
            "./cmd",
        ])
        .output()?;
    let modules: BTreeSet<&str> = std::str::from_utf8(&listed.stdout)?
        .lines()
        .filter(|line| !line.is_empty())
        .collect();
    Ok(Cost {
        cold_debug: cold,
        edit_debug: edit,
        cold_release: cold,
        edit_release: edit,
        crates: modules.len(),
        binary_bytes: fs::metadata(&out)?.len(),
    })
}

/// The median of three builds, each after a different one-line edit of the reconcile.
fn edited(
    subject: &Subject,
    edit: &str,
    mut build: impl FnMut() -> Result<Duration>,
) -> Result<Duration> {
    let original = fs::read_to_string(&subject.reconcile)?;
    let (head, tail) = original.split_once(subject.anchor).with_context(|| {
        format!(
            "{} has no `{}`",
            subject.reconcile.display(),
            subject.anchor
        )
    })?;
    let (line, rest) = tail.split_once('\n').context("the anchor ends no line")?;
    let mut samples = Vec::new();
    for i in 0..3 {
        let line_of_edit = edit.replace("{}", &i.to_string());
        let text = format!("{head}{}{line}\n{line_of_edit}\n{rest}", subject.anchor);
        fs::write(&subject.reconcile, text)?;
        samples.push(build()?);
    }
    fs::write(&subject.reconcile, original)?;
    Ok(median(samples))
}

fn timed(command: &mut Command, name: &str) -> Result<Duration> {
    let started = Instant::now();
    let status = command.status()?;
    if !status.success() {
        bail!("building {name} failed ({status})");
    }
    Ok(started.elapsed())
}

fn run(command: &mut Command) -> Result<()> {
    let status = command.status()?;
    if !status.success() {
        bail!("{command:?} failed ({status})");
    }
    Ok(())
}

/// The packages (name and version) `cargo tree` lists for the crate in `dir`, with build
/// dependencies and proc-macros, without dev-dependencies.
fn dependency_graph(dir: &Path) -> Result<BTreeSet<String>> {
    let output = operator_gen_tests::cargo_unlinted()
        .args(["tree", "--quiet", "-e", "normal,build", "--prefix", "none"])
        .current_dir(dir)
        .output()?;
    if !output.status.success() {
        bail!("cargo tree in {} failed", dir.display());
    }
    Ok(String::from_utf8(output.stdout)?
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some(format!("{} {}", words.next()?, words.next()?))
        })
        .collect())
}

/// Copies the files under `from` to `to`, skipping `target/`.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            if entry.file_name() != "target" {
                copy_tree(&source, &target)?;
            }
        } else {
            fs::copy(&source, &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_edit_changes_the_reconcile_after_its_anchor_and_the_file_is_restored() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let reconcile = dir.path().join("main.rs");
        let original = "fn other() {}\n    async fn apply(&self) {\n        work();\n    }\n";
        fs::write(&reconcile, original).expect("writable");
        let subject = Subject {
            name: "a test",
            dir: dir.path().to_owned(),
            reconcile: reconcile.clone(),
            anchor: "async fn apply(",
        };
        let mut seen = Vec::new();
        let took = edited(&subject, RUST_EDIT, || {
            seen.push(fs::read_to_string(&reconcile)?);
            Ok(Duration::from_millis(10 * seen.len() as u64))
        });
        assert_eq!(
            took.ok(),
            Some(Duration::from_millis(20)),
            "the median of three builds"
        );
        assert_eq!(seen.len(), 3);
        for (i, text) in seen.iter().enumerate() {
            let expected = format!(
                "fn other() {{}}\n    async fn apply(&self) {{\n        tracing::debug!(\"one-line edit {i}\");\n        work();\n    }}\n"
            );
            assert_eq!(text, &expected);
        }
        assert_eq!(
            fs::read_to_string(&reconcile).ok().as_deref(),
            Some(original)
        );
    }

    #[test]
    fn a_reconcile_without_its_anchor_is_an_error_that_names_the_file() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let reconcile = dir.path().join("main.go");
        fs::write(&reconcile, "package main\n").expect("writable");
        let subject = Subject {
            name: "a test",
            dir: dir.path().to_owned(),
            reconcile,
            anchor: ") Reconcile(ctx context.Context",
        };
        let error = edited(&subject, GO_EDIT, || Ok(Duration::ZERO)).err();
        let message = error.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains("main.go") && message.contains("Reconcile"),
            "{message}"
        );
    }
}
