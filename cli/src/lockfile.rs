//! A generated crate's first `Cargo.lock`: the versions operator-gen is tested with, fitted to
//! the crate by cargo, so that `cargo build --locked` works from the first build.
//!
//! Cargo.lock is the user's. It is written once, when the crate has none, after the generated
//! files are in place, and never again: its versions move when the user runs `cargo update`,
//! and a crate in a workspace uses the workspace's lock, so none is written there. The seed is
//! this repository's own Cargo.lock, as the command was built (`seed.lock` links to it, and
//! `cargo package` takes what the link leads to); `cargo update --workspace` then keeps each
//! locked version the crate uses, resolves only what it needs beyond them (a manifest's extra
//! `dependencies:`) and drops the rest, reading only the registry's index. It is offline first,
//! from the registry cache, then online. (`cargo metadata` would fit the lock the same way, but
//! it also downloads every package, other platforms' too, which fails offline.) When cargo is
//! missing or fails, the seed is removed again, so no half-fitted lock is left for a `--locked`
//! build to trip on.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

/// The Cargo.lock of the operator-gen workspace this command was built in.
const SEED: &str = include_str!("../seed.lock");

/// What [`seed`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lock {
    /// The crate has a Cargo.lock already, which is the user's.
    Present,
    /// The crate is a member of the workspace of this Cargo.toml, whose Cargo.lock cargo uses.
    InWorkspace(PathBuf),
    /// Written from the seed and fitted to the crate.
    Written,
    /// Not written, for this reason; no seed is left behind.
    Failed(String),
}

impl Lock {
    /// What to tell the user, if anything: a line for the report, or a warning.
    pub fn report(&self, out: &Path) -> Option<Result<String, String>> {
        let dir = crate::shown(&out.display());
        match self {
            Self::Present | Self::InWorkspace(_) => None,
            Self::Written => Some(Ok(format!(
                "wrote {dir}/Cargo.lock: the versions operator-gen is tested with, fitted to the \
                 crate by cargo; it is yours (commit it), and `cargo build --locked` builds with it"
            ))),
            Self::Failed(reason) => Some(Err(format!(
                "no Cargo.lock was written in {dir}: {}; run `cargo generate-lockfile` there, \
                 then build with `cargo build --locked` (the Dockerfile does)",
                crate::shown(reason)
            ))),
        }
    }
}

/// Gives the crate in `out` a Cargo.lock if it has none and is not a workspace member.
pub fn seed(out: &Path) -> Lock {
    let lock = out.join("Cargo.lock");
    if std::fs::symlink_metadata(&lock).is_ok() {
        return Lock::Present;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // No cargo, or a folder inside a workspace that does not list it: `cargo metadata` could
    // not fit a lock either.
    let root = match workspace_manifest(&cargo, out) {
        Ok(root) => root,
        Err(reason) => return Lock::Failed(reason),
    };
    let own = std::fs::canonicalize(out.join("Cargo.toml")).ok();
    if own.is_some() && own != std::fs::canonicalize(&root).ok() {
        return Lock::InWorkspace(root);
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .and_then(|mut file| file.write_all(SEED.as_bytes()));
    if let Err(error) = written {
        return Lock::Failed(format!("writing {}: {error}", lock.display()));
    }
    let mut reason = String::new();
    for offline in [true, false] {
        match fit(&cargo, out, offline) {
            Ok(()) => return Lock::Written,
            Err(error) => reason = error,
        }
    }
    // Only the seed this run wrote (which cargo may have rewritten) is there to remove.
    let _ = std::fs::remove_file(&lock);
    Lock::Failed(reason)
}

/// The Cargo.toml of the workspace the crate in `out` belongs to (its own when it is none's).
fn workspace_manifest(cargo: &std::ffi::OsStr, out: &Path) -> Result<PathBuf, String> {
    let output = Command::new(cargo)
        .args(["locate-project", "--workspace", "--message-format", "plain"])
        .current_dir(out)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`cargo locate-project` failed: {}",
            last_line(&output.stderr)
        ));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}

/// Has cargo fit the lock in `out` to the crate, keeping the versions it locks: `--workspace`
/// updates only the crate's own entry, and resolves what no locked version answers.
fn fit(cargo: &std::ffi::OsStr, out: &Path, offline: bool) -> Result<(), String> {
    let mut command = Command::new(cargo);
    command.args(["update", "--workspace", "--quiet"]);
    if offline {
        command.arg("--offline");
    }
    let output = command
        .current_dir(out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("running cargo: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo update --workspace{}` failed: {}",
            if offline { " --offline" } else { "" },
            last_line(&output.stderr)
        ))
    }
}

/// The last line of a command's error output that says anything: cargo ends with its error.
fn last_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    let error = lines.clone().find(|line| line.starts_with("error"));
    error
        .or_else(|| lines.next_back())
        .unwrap_or("no output")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_is_a_lock_of_the_versions_generated_crates_build_with() {
        let table: toml::Table = SEED.parse().expect("a Cargo.lock");
        let packages = table["package"].as_array().expect("packages");
        let version_of = |name: &str| {
            packages
                .iter()
                .find(|p| p["name"].as_str() == Some(name))
                .and_then(|p| p["version"].as_str())
        };
        for name in ["kube", "k8s-openapi", "tokio", "operator-gen-runtime"] {
            assert!(version_of(name).is_some(), "{name} is not in the seed");
        }
    }

    #[test]
    fn a_crate_with_a_lock_keeps_it() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("Cargo.lock"), "mine").unwrap();
        assert_eq!(seed(tmp.path()), Lock::Present);
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("Cargo.lock")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn a_failed_fit_leaves_no_seed_and_says_what_to_run() {
        let tmp = tempfile::tempdir().unwrap();
        // No Cargo.toml: cargo cannot fit a lock to anything.
        let Lock::Failed(reason) = seed(tmp.path()) else {
            panic!("a folder without a crate gets no lock");
        };
        assert!(!tmp.path().join("Cargo.lock").exists(), "{reason}");
        let warning = Lock::Failed(reason)
            .report(tmp.path())
            .expect("a warning")
            .unwrap_err();
        assert!(
            warning.contains("cargo generate-lockfile") && warning.contains("--locked"),
            "{warning}"
        );
    }

    #[test]
    fn the_last_error_line_is_what_is_reported() {
        let stderr =
            b"    Updating index\nerror: no matching package named `x` found\n\nnote: hi\n";
        assert_eq!(
            last_line(stderr),
            "error: no matching package named `x` found"
        );
        assert_eq!(last_line(b""), "no output");
    }
}
