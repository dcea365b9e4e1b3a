//! `gen`: generate an operator crate, or check that a generated one is current.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Instant,
};

use anyhow::Context as _;
use operator_gen::{Job, Mode};

use crate::{Shell, lockfile::Step, shown, shown_path};

#[derive(clap::Args, Debug, Clone)]
pub struct GenArgs {
    /// CRD source: an http(s) URL, a file, or `-` for stdin. Overrides `primary.crd`.
    #[arg(long)]
    pub crd: Option<String>,
    /// Kind or CRD name to pick when the source holds several CRDs.
    #[arg(long)]
    pub kind: Option<String>,
    /// Served version to generate for; the storage version by default.
    #[arg(long)]
    pub version: Option<String>,
    /// The operator manifest; `<out>/operator.yaml` when present, else no relations.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Output crate directory. Without it: the folder of `--manifest`, else the current folder
    /// for `operator-gen`, and generated/prometheusrule-controller for `cargo xtask` in the
    /// operator-gen repository.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write nothing; exit non-zero when a file would change.
    #[arg(long)]
    pub check: bool,
    /// Write nothing; print the changes as unified diffs (and exit non-zero if there are any).
    #[arg(long, conflicts_with = "force")]
    pub diff: bool,
    /// Overwrite generated files even when they were edited by hand.
    #[arg(long, conflicts_with = "check")]
    pub force: bool,
    /// Accept plain http:// CRD URLs (from --crd or the manifest) and redirects to http.
    /// Refused by default: a CRD fetched without TLS can be altered on the way.
    #[arg(long)]
    pub allow_http: bool,
}

/// Runs `gen` as `shell` offers it; the exit code says whether a check found changes.
pub fn run(args: GenArgs, shell: &Shell) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let out = args
        .out
        .or_else(|| manifest_folder(args.manifest.as_deref()))
        .unwrap_or_else(|| shell.default_out.clone());
    let job = Job {
        crd: args.crd,
        kind: args.kind,
        version: args.version,
        manifest: args.manifest,
        out,
        allow_http: args.allow_http,
    };
    let check = args.check || args.diff;
    let mode = if check {
        Mode::Check
    } else {
        Mode::Write { force: args.force }
    };
    let (generated, report) = job
        .run(mode)
        .with_context(|| format!("generating {}", crate_shown(&job.out)))?;
    if args.diff {
        let diff = generated.plan.diff(&job.out)?;
        let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), diff.as_bytes());
    }
    let operator = &generated.operator;
    let primary = &operator.primary;
    let source = if let Some(origin) = &generated.origin {
        let note = if primary.storage_version {
            "the storage version"
        } else {
            "not the storage version"
        };
        format!(
            "{} ({}, version {}, {note})",
            shown(origin),
            primary.crd_name,
            primary.version
        )
    } else {
        format!("{:?} operator for {}", operator.archetype, primary.kind)
    };
    let mut out = format!(
        "{} {} from {source} in {} ms: {report}\n",
        if check { "checked" } else { "generated" },
        crate_shown(&job.out),
        started.elapsed().as_millis(),
    );
    let removed = report.removed();
    for path in report.changed() {
        let verb = match (check, removed.contains(&path)) {
            (true, true) => "would remove",
            (true, false) => "would change",
            (false, true) => "removed",
            (false, false) => "wrote",
        };
        out.push_str(&format!("  {verb} {}\n", shown_path(path)));
    }
    // After the files are in place: cargo fits the lock to the Cargo.toml just written.
    let lock = (!check).then(|| crate::lockfile::follow(&job.out));
    let lock = lock.as_ref().and_then(|lock| lock.report(&job.out));
    if let Some(Ok(line)) = &lock {
        out.push_str(&format!("  {line}\n"));
    }
    // A Cargo.toml that would change fails the check already; the lock is fitted to it then.
    let cargo_toml_changes = report
        .changed()
        .iter()
        .any(|path| *path == Path::new("Cargo.toml"));
    let step = (check && !cargo_toml_changes).then(|| crate::lockfile::step(&job.out));
    // A closed pipe (`| head`) is no reason to fail, let alone panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
    for warning in &generated.warnings {
        eprintln!("warning: {}", shown(warning));
    }
    let command = shown(&job.command_as(shell.name, &shell.default_out));
    if let Some(Err(error)) = &lock {
        // The generated files are in place and current; the lock is as it was.
        eprintln!("error: {error}");
        return Ok(ExitCode::FAILURE);
    }
    let lock_out_of_step = step.is_some_and(|step| told_out_of_step(step, &job.out, &command));
    if check && !report.changed().is_empty() {
        for path in report.hand_edited() {
            eprintln!(
                "{} was edited by hand, so `{command}` will refuse to overwrite it: move the edit \
                 into src/reconcile.rs (or operator.yaml) and run `{command}`, or run \
                 `{command} --force` to discard the edit",
                shown_path(path)
            );
        }
        eprintln!(
            "{} is out of date: run `{command}` and commit the result",
            crate_shown(&job.out),
        );
        return Ok(ExitCode::FAILURE);
    }
    if lock_out_of_step {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Tells what `gen --check` found of the crate's lock, and whether it is out of step, which
/// fails the check: a lock cargo cannot check offline is only warned of.
fn told_out_of_step(step: Step, out: &Path, command: &str) -> bool {
    match step {
        Step::OutOfStep(reason) => {
            eprintln!(
                "{}/Cargo.lock is out of step with Cargo.toml, so `cargo build --locked` (and the \
                 Dockerfile) would fail ({}): run `{command}`, which brings it into step keeping \
                 every locked version, and commit the result",
                crate_shown(out),
                shown(&reason)
            );
            true
        }
        Step::Unknown(reason) => {
            eprintln!(
                "warning: whether {}/Cargo.lock is in step with Cargo.toml could not be checked \
                 offline: {}",
                crate_shown(out),
                shown(&reason)
            );
            false
        }
        Step::InStep | Step::NotOwn => false,
    }
}

/// The crate folder as messages name it: the path typed, unless it ends without a name (`.`,
/// `..`), which says nothing in a message; then the folder's own name.
fn crate_shown(out: &Path) -> String {
    let own_name = || {
        let dir = out.canonicalize().ok()?;
        Some(dir.file_name()?.to_string_lossy().into_owned())
    };
    match out.file_name().is_none().then(own_name).flatten() {
        Some(name) => shown(&name),
        None => shown_path(out),
    }
}

/// The folder a manifest belongs to, which is the crate it describes: a manifest never
/// regenerates another crate because `--out` was left out.
fn manifest_folder(manifest: Option<&std::path::Path>) -> Option<PathBuf> {
    let folder = manifest?.parent()?;
    Some(if folder.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        folder.to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crate_typed_as_dot_is_named_by_its_folder_and_a_named_path_as_typed() {
        let here = std::env::current_dir().expect("the test's folder");
        let here = here.file_name().expect("a named folder").to_string_lossy();
        assert_eq!(crate_shown(Path::new(".")), here);
        let dir = tempfile::tempdir().expect("a scratch folder");
        let crate_dir = dir.path().join("backup-controller");
        std::fs::create_dir_all(crate_dir.join("src")).expect("the crate's folders");
        assert_eq!(crate_shown(&crate_dir.join("src/..")), "backup-controller");
        let typed = Path::new("../ops/backup-controller");
        assert_eq!(crate_shown(typed), "../ops/backup-controller");
    }

    #[test]
    fn a_manifest_names_its_own_folder_as_the_crate() {
        let nested = manifest_folder(Some(Path::new("../my-op/operator.yaml")));
        assert_eq!(nested, Some(PathBuf::from("../my-op")));
        let here = manifest_folder(Some(Path::new("operator.yaml")));
        assert_eq!(here, Some(PathBuf::from(".")));
        assert_eq!(manifest_folder(None), None);
    }
}
