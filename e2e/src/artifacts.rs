//! The workspace's programs as `cargo test --workspace` builds them, for the commands that run
//! them (`e2e`, `bench allocations`).
//!
//! Cargo resolves features for the packages a command selects. `cargo run -p x` and
//! `cargo test -p x` therefore build kube, the runtime and everything above them with other
//! features than `cargo test --workspace` does, and compile them all again. One
//! `cargo build --workspace --bins --tests` selects what `cargo test --workspace` selects, so
//! it reuses that build and compiles only the binaries the tests do not need; the commands then
//! run the executables it names.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::Stdio,
};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

/// What a compiled target is, as far as running it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A `[[bin]]` (or `src/main.rs`), built as itself.
    Bin,
    /// An integration test (`tests/*.rs`), built as a test harness.
    Test,
}

/// The executables of one build, by the folder of their package's Cargo.toml.
#[derive(Debug, Default)]
pub struct Artifacts {
    executables: BTreeMap<(PathBuf, Kind, String), PathBuf>,
}

impl Artifacts {
    /// Builds every binary and test of the workspace in `workspace`, as `cargo test
    /// --workspace` selects them; compiler errors go to stderr as cargo renders them.
    pub fn build(workspace: &Path) -> Result<Self> {
        let mut child = operator_gen_tests::cargo()
            .args(["build", "--quiet", "--workspace", "--bins", "--tests"])
            .arg("--message-format=json-render-diagnostics")
            .current_dir(workspace)
            .stdout(Stdio::piped())
            .spawn()
            .context("running cargo build")?;
        let stdout = child.stdout.take().context("cargo build's output")?;
        let mut artifacts = Self::default();
        for line in BufReader::new(stdout).lines() {
            artifacts.record(&line?);
        }
        let status = child.wait()?;
        if !status.success() {
            bail!("building the workspace's binaries and tests failed ({status})");
        }
        Ok(artifacts)
    }

    /// The binary `name` of the package in `package_dir`.
    pub fn bin(&self, package_dir: &Path, name: &str) -> Result<&Path> {
        self.find(package_dir, Kind::Bin, name)
    }

    /// The integration test `name` (`tests/<name>.rs`) of the package in `package_dir`.
    pub fn test(&self, package_dir: &Path, name: &str) -> Result<&Path> {
        self.find(package_dir, Kind::Test, name)
    }

    fn find(&self, package_dir: &Path, kind: Kind, name: &str) -> Result<&Path> {
        let dir = canonical(package_dir);
        self.executables
            .get(&(dir, kind, name.to_owned()))
            .map(PathBuf::as_path)
            .with_context(|| {
                format!(
                    "the workspace build made no {kind:?} `{name}` for {}",
                    package_dir.display()
                )
            })
    }

    /// Notes the executable one line of cargo's JSON output names, if it names one.
    fn record(&mut self, line: &str) {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            return;
        };
        if message["reason"] != "compiler-artifact" {
            return;
        }
        let (Some(executable), Some(manifest), Some(name)) = (
            message["executable"].as_str(),
            message["manifest_path"].as_str(),
            message["target"]["name"].as_str(),
        ) else {
            return;
        };
        let kinds = message["target"]["kind"].as_array();
        let is = |kind: &str| kinds.is_some_and(|k| k.iter().any(|v| v == kind));
        let test_build = message["profile"]["test"] == true;
        let kind = match (is("bin"), is("test"), test_build) {
            (true, _, false) => Kind::Bin,
            (_, true, true) => Kind::Test,
            // A library's or a binary's own unit tests: nothing here runs them.
            _ => return,
        };
        let Some(dir) = Path::new(manifest).parent() else {
            return;
        };
        self.executables.insert(
            (canonical(dir), kind, name.to_owned()),
            PathBuf::from(executable),
        );
    }
}

/// `path` as the file system resolves it, so that a folder named through a symlink or with
/// `..` finds what cargo reported; as given when it does not exist.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn artifact(kind: &str, name: &str, test: bool, executable: Option<&str>) -> String {
        json!({
            "reason": "compiler-artifact",
            "manifest_path": "/nowhere/generated/backup-controller/Cargo.toml",
            "target": { "kind": [kind], "name": name },
            "profile": { "test": test },
            "executable": executable,
        })
        .to_string()
    }

    #[test]
    fn binaries_and_integration_tests_are_found_by_package_folder_and_name() {
        let mut artifacts = Artifacts::default();
        artifacts.record(&artifact("bin", "crdgen", false, Some("/t/debug/crdgen")));
        artifacts.record(&artifact(
            "test",
            "cluster",
            true,
            Some("/t/deps/cluster-1"),
        ));
        let dir = Path::new("/nowhere/generated/backup-controller");
        assert_eq!(
            artifacts.bin(dir, "crdgen").ok(),
            Some(Path::new("/t/debug/crdgen"))
        );
        assert_eq!(
            artifacts.test(dir, "cluster").ok(),
            Some(Path::new("/t/deps/cluster-1"))
        );
        let other = Path::new("/nowhere/generated/deployment-guard");
        let missing = artifacts.bin(other, "crdgen").unwrap_err().to_string();
        assert!(missing.contains("deployment-guard"), "{missing}");
    }

    /// Each package with its features, as `cargo tree` prints it for `selection`.
    fn features(selection: &[&str]) -> std::collections::BTreeSet<String> {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let output = operator_gen_tests::cargo()
            .args([
                "tree", "--locked", "--prefix", "none", "--format", "{p}|{f}",
            ])
            .args(selection)
            .current_dir(workspace)
            .output()
            .expect("running cargo tree");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| line.replace(" (*)", "").replace(" (proc-macro)", ""))
            .collect()
    }

    #[test]
    fn xtask_builds_its_dependencies_as_the_workspace_tests_do() {
        let tests = features(&["--workspace", "--edges", "normal,build,dev"]);
        let xtask = features(&["--package", "xtask", "--edges", "normal,build"]);
        let differ: Vec<&String> = xtask.difference(&tests).collect();
        assert!(
            differ.is_empty(),
            "`cargo xtask` would compile these again, with other features than \
             `cargo test --workspace` gave them; name the tests' features in \
             xtask/Cargo.toml:\n{differ:#?}"
        );
    }

    #[test]
    fn unit_test_harnesses_libraries_and_other_messages_are_not_taken_for_programs() {
        let mut artifacts = Artifacts::default();
        // A binary's unit tests share its name; only the binary itself is the program.
        artifacts.record(&artifact(
            "bin",
            "backup-controller",
            true,
            Some("/t/deps/b-1"),
        ));
        artifacts.record(&artifact("lib", "backup_controller", false, None));
        artifacts.record(&artifact(
            "lib",
            "backup_controller",
            true,
            Some("/t/deps/b-2"),
        ));
        artifacts.record(r#"{"reason":"build-finished","success":true}"#);
        artifacts.record("not JSON");
        assert!(artifacts.executables.is_empty(), "{artifacts:?}");
    }
}
