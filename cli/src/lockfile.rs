//! A generated crate's `Cargo.lock`, kept in step with the Cargo.toml the generator writes, so
//! that `cargo build --locked` (and so the generated Dockerfile) works from the first build and
//! after every change to `operator.yaml`.
//!
//! Cargo.lock is the user's: its versions move when the user runs `cargo update`, and a crate
//! in a workspace uses the workspace's lock, so nothing is done there. One rule fits it, for
//! `new` and for `gen` alike ([`follow`]): when the lock is missing or out of step with
//! Cargo.toml (a manifest that turns on webhooks or sharding changes the runtime's features,
//! an owned kind or an extra dependency adds packages), the entries of the seed (this
//! repository's own Cargo.lock, as the command was built: `seed.lock` links to it, and `cargo
//! package` takes what the link leads to) are added for every package the lock does not name,
//! and `cargo update --workspace` resolves the crate from there. It keeps every version
//! already locked, resolves only what no locked version answers, and drops what the crate no
//! longer uses, reading only the registry's index: offline first, from the registry cache,
//! then online, saying so. (`cargo metadata` would fit the lock the same way, but it also
//! downloads every package, other platforms' too, which fails offline.) When cargo cannot, the
//! lock is put back byte for byte as it was (or removed, when there was none), so no
//! half-fitted lock is left for a `--locked` build to trip on.
//!
//! [`step`] is what `gen --check` asks: whether `cargo update --workspace --locked --offline`
//! would change the lock.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use operator_gen::crate_dir::CrateDir;

/// The Cargo.lock of the operator-gen workspace this command was built in.
const SEED: &str = include_str!("../seed.lock");

/// The lock's name in the crate folder.
const LOCK: &str = "Cargo.lock";

/// The most a crate's Cargo.lock may hold: a lock of a thousand packages is a few hundred KiB.
const MAX_LOCK_BYTES: u64 = 16 * 1024 * 1024;

/// What [`follow`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lock {
    /// The crate is a member of the workspace of this Cargo.toml, whose Cargo.lock cargo uses.
    InWorkspace(PathBuf),
    /// The crate's lock was in step with its Cargo.toml already, and is left as it was.
    InStep,
    /// Written or brought into step.
    Fitted(Fitted),
    /// Not written, for this reason; the lock is as it was before.
    Failed(String),
}

/// What fitting changed in the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fitted {
    /// Whether the crate had no lock before.
    pub created: bool,
    /// Whether cargo had to ask the registry, the registry cache being short of an answer.
    pub online: bool,
    /// `name version` of each package the lock gained, sorted.
    pub added: Vec<String>,
    /// `name version` of each package the lock lost, sorted.
    pub removed: Vec<String>,
}

/// Whether a crate's lock is in step with its Cargo.toml, as `gen --check` asks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// In a workspace, or without a lock of its own: there is nothing of the crate's to check.
    NotOwn,
    InStep,
    /// cargo would change the lock; its words.
    OutOfStep(String),
    /// cargo could not tell offline (an empty registry cache); its words.
    Unknown(String),
}

impl Lock {
    /// What to tell the user, if anything: a line for the report, or a warning.
    pub fn report(&self, out: &Path) -> Option<Result<String, String>> {
        let dir = crate::shown_path(out);
        match self {
            Self::InStep | Self::InWorkspace(_) => None,
            Self::Fitted(fitted) => Some(Ok(fitted.report(&dir))),
            Self::Failed(reason) => Some(Err(format!(
                "{dir}/Cargo.lock could not be brought into step with Cargo.toml, offline or \
                 online, and is left as it was: {}; fix what cargo names (a dependency of \
                 operator.yaml, or your registry settings), then run `cargo update --workspace` \
                 in {dir} and build with `cargo build --locked` (the Dockerfile does)",
                crate::shown(reason)
            ))),
        }
    }
}

impl Fitted {
    fn report(&self, dir: &str) -> String {
        let mut line = if self.created {
            format!(
                "wrote {dir}/Cargo.lock: the versions operator-gen is tested with, fitted to the \
                 crate by cargo; it is yours (commit it), and `cargo build --locked` builds with it"
            )
        } else {
            let listed = |what: &str, packages: &[String]| {
                (!packages.is_empty()).then(|| format!("{what} {}", packages.join(", ")))
            };
            let changes: Vec<String> = [
                listed("added", &self.added),
                listed("removed", &self.removed),
            ]
            .into_iter()
            .flatten()
            .collect();
            format!(
                "brought {dir}/Cargo.lock into step with Cargo.toml ({}); every other locked \
                 version is kept",
                if changes.is_empty() {
                    "its own entry".to_owned()
                } else {
                    crate::shown(&changes.join("; "))
                }
            )
        };
        if self.online {
            line.push_str(
                "\n  the registry cache could not answer for every package offline, so cargo \
                 asked the registry online",
            );
        }
        line
    }
}

/// Gives the crate in `out` a Cargo.lock in step with its Cargo.toml, unless it is a workspace
/// member: the lock it has when that is in step already, else its lock (or none) with the
/// seed's entries for what it lacks, fitted by cargo.
pub fn follow(out: &Path) -> Lock {
    let cargo = cargo();
    match foreign_workspace(&cargo, out) {
        Ok(Some(root)) => return Lock::InWorkspace(root),
        Ok(None) => (),
        Err(reason) => return Lock::Failed(reason),
    }
    let dir = CrateDir::new(out);
    let before = match dir.read(Path::new(LOCK), MAX_LOCK_BYTES) {
        Ok(before) => before,
        Err(error) => return Lock::Failed(error.to_string()),
    };
    let before_text = match before.as_deref().map(std::str::from_utf8).transpose() {
        Ok(text) => text,
        Err(_) => return Lock::Failed(format!("{LOCK} is not UTF-8 text")),
    };
    if before.is_some() && cargo_update(&cargo, out, Update::Check) == Ok(()) {
        return Lock::InStep;
    }
    let start = with_seed_for_missing(before_text.unwrap_or_default());
    if let Err(reason) = replace(&dir, &start) {
        return Lock::Failed(reason);
    }
    let mut reason = String::new();
    for (update, online) in [(Update::Offline, false), (Update::Online, true)] {
        match cargo_update(&cargo, out, update) {
            Ok(()) => {
                let after = dir
                    .read(Path::new(LOCK), MAX_LOCK_BYTES)
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                let (added, removed) = changes(
                    before_text.unwrap_or_default(),
                    &String::from_utf8_lossy(&after),
                );
                return Lock::Fitted(Fitted {
                    created: before.is_none(),
                    online,
                    added,
                    removed,
                });
            }
            Err(error) => reason = error,
        }
    }
    // Only what this run put there (which cargo may have rewritten) is replaced or removed.
    let restored = match &before {
        Some(bytes) => replace(&dir, &String::from_utf8_lossy(bytes)),
        None => dir
            .remove_file(Path::new(LOCK))
            .map_err(|error| error.to_string()),
    };
    if let Err(error) = restored {
        reason.push_str(&format!("; and putting the lock back failed: {error}"));
    }
    Lock::Failed(reason)
}

/// Whether the crate in `out` has a lock of its own, and whether it is in step.
pub fn step(out: &Path) -> Step {
    let cargo = cargo();
    match foreign_workspace(&cargo, out) {
        Ok(None) => (),
        Ok(Some(_)) | Err(_) => return Step::NotOwn,
    }
    match CrateDir::new(out).kind(Path::new(LOCK)) {
        Ok(Some(_)) => (),
        Ok(None) | Err(_) => return Step::NotOwn,
    }
    match cargo_update(&cargo, out, Update::Check) {
        Ok(()) => Step::InStep,
        Err(reason) if reason.contains("--locked") => Step::OutOfStep(reason),
        Err(reason) => Step::Unknown(reason),
    }
}

/// The cargo that runs this command (`cargo xtask` sets `CARGO`), else the one on PATH.
fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// The Cargo.toml of the workspace the crate in `out` belongs to, whose lock cargo uses; `None`
/// when the crate is a workspace of its own, which keeps its own lock.
fn foreign_workspace(cargo: &std::ffi::OsStr, out: &Path) -> Result<Option<PathBuf>, String> {
    let root = workspace_manifest(cargo, out)?;
    let own = std::fs::canonicalize(out.join("Cargo.toml")).ok();
    if own.is_some() && own != std::fs::canonicalize(&root).ok() {
        return Ok(Some(root));
    }
    Ok(None)
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

/// The three ways this module runs `cargo update --workspace`, which updates only the crate's
/// own entry and resolves what no locked version answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Update {
    /// `--locked --offline`: fails, changing nothing, when the lock is out of step.
    Check,
    /// `--offline`: from the registry cache.
    Offline,
    /// From the registry.
    Online,
}

fn cargo_update(cargo: &std::ffi::OsStr, out: &Path, update: Update) -> Result<(), String> {
    let flags: &[&str] = match update {
        Update::Check => &["--locked", "--offline"],
        Update::Offline => &["--offline"],
        Update::Online => &[],
    };
    let output = Command::new(cargo)
        .args(["update", "--workspace", "--quiet"])
        .args(flags)
        .current_dir(out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("running cargo: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        let flags: String = flags.iter().map(|flag| format!(" {flag}")).collect();
        Err(format!(
            "`cargo update --workspace{flags}` failed: {}",
            last_line(&output.stderr)
        ))
    }
}

/// Replaces the crate's lock with `text`: written beside it, then renamed over it.
fn replace(dir: &CrateDir, text: &str) -> Result<(), String> {
    let staged = Path::new(".Cargo.lock.operator-gen-new");
    let lock = Path::new(LOCK);
    // A staged file a killed run left is this module's own.
    if dir.kind(staged).map_err(|e| e.to_string())? == Some(operator_gen::crate_dir::Kind::File) {
        dir.remove_file(staged).map_err(|e| e.to_string())?;
    }
    let like = (dir.kind(lock).map_err(|e| e.to_string())?.is_some()).then_some(lock);
    dir.write_new(staged, text.as_bytes(), like)
        .and_then(|()| dir.rename(staged, lock))
        .map_err(|e| e.to_string())
}

/// One `[[package]]` entry of a lock, as its text and its `name` and `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry<'a> {
    text: String,
    name: &'a str,
    version: &'a str,
}

/// The `[[package]]` entries of a lock's text, in order. An entry is the lines from its header
/// to the next table's; lines that are not `key = "value"` are kept in its text, and an entry
/// without a name is left out, for cargo to read as it would.
fn entries(lock: &str) -> Vec<Entry<'_>> {
    let mut found = Vec::new();
    let mut current: Option<Entry<'_>> = None;
    for line in lock.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            found.extend(current.take().filter(|entry| !entry.name.is_empty()));
            if trimmed == "[[package]]" {
                current = Some(Entry {
                    text: String::new(),
                    name: "",
                    version: "",
                });
            }
        }
        let Some(entry) = current.as_mut() else {
            continue;
        };
        entry.text.push_str(line);
        entry.text.push('\n');
        if let Some(value) = quoted_value(trimmed, "name") {
            entry.name = value;
        } else if let Some(value) = quoted_value(trimmed, "version") {
            entry.version = value;
        }
    }
    found.extend(current.filter(|entry| !entry.name.is_empty()));
    found
}

/// The value of a `key = "value"` line.
fn quoted_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(key)?.trim_start().strip_prefix('=')?;
    rest.trim().strip_prefix('"')?.strip_suffix('"')
}

/// `lock` with the seed's entries for every package it does not name appended: cargo prefers
/// every locked version, so those it already has stay as they are.
fn with_seed_for_missing(lock: &str) -> String {
    let named: BTreeSet<&str> = entries(lock).iter().map(|entry| entry.name).collect();
    let mut text = if lock.trim().is_empty() {
        // A lock cargo has not written yet takes the seed's header (its format version).
        SEED[..SEED.find("[[package]]").unwrap_or(0)].to_owned()
    } else {
        lock.to_owned()
    };
    for entry in entries(SEED) {
        if !named.contains(entry.name) {
            if !text.ends_with("\n\n") {
                text.push('\n');
            }
            text.push_str(&entry.text);
        }
    }
    text
}

/// What went from `before` to `after`: the `name version` pairs added and removed, sorted.
fn changes(before: &str, after: &str) -> (Vec<String>, Vec<String>) {
    let pairs = |lock: &str| -> BTreeSet<String> {
        entries(lock)
            .iter()
            .map(|entry| format!("{} {}", entry.name, entry.version))
            .collect()
    };
    let (before, after) = (pairs(before), pairs(after));
    (
        after.difference(&before).cloned().collect(),
        before.difference(&after).cloned().collect(),
    )
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
        assert_eq!(
            entries(SEED).len(),
            packages.len(),
            "every entry of the seed is read as cargo reads it"
        );
    }

    #[test]
    fn a_lock_gains_the_seeds_entries_only_for_packages_it_does_not_name() {
        let seeded = entries(SEED);
        let kube = seeded.iter().find(|e| e.name == "kube").expect("kube");
        let mine = "version = 4\n\n[[package]]\nname = \"kube\"\nversion = \"0.0.1\"\n\n\
                    [[package]]\nname = \"mine\"\nversion = \"1.0.0\"\n";
        let merged = with_seed_for_missing(mine);
        assert!(
            merged.starts_with(mine),
            "the user's lock comes first, as it was"
        );
        let merged_entries = entries(&merged);
        let kubes: Vec<&str> = merged_entries
            .iter()
            .filter(|e| e.name == "kube")
            .map(|e| e.version)
            .collect();
        assert_eq!(kubes, ["0.0.1"], "kube {} is not added", kube.version);
        let rest = seeded.iter().filter(|e| e.name != "kube").count();
        assert_eq!(merged_entries.len(), 2 + rest, "mine, and the seed's rest");
        let table: toml::Table = merged.parse().expect("still a TOML lock");
        assert!(table.contains_key("package"));
    }

    #[test]
    fn no_lock_starts_from_the_whole_seed_with_its_format_version() {
        let merged = with_seed_for_missing("");
        assert_eq!(entries(&merged).len(), entries(SEED).len());
        let table: toml::Table = merged.parse().expect("a TOML lock");
        assert_eq!(
            table.get("version"),
            SEED.parse::<toml::Table>()
                .expect("the seed")
                .get("version")
        );
    }

    #[test]
    fn changes_name_each_version_added_and_removed() {
        let before = "[[package]]\nname = \"a\"\nversion = \"1.0.0\"\n\n\
                      [[package]]\nname = \"b\"\nversion = \"1.0.0\"\n";
        let after = "[[package]]\nname = \"a\"\nversion = \"1.0.0\"\n\n\
                     [[package]]\nname = \"b\"\nversion = \"2.0.0\"\n\n\
                     [[package]]\nname = \"c\"\nversion = \"0.1.0\"\n\n[metadata]\nx = \"y\"\n";
        let (added, removed) = changes(before, after);
        assert_eq!(added, ["b 2.0.0", "c 0.1.0"]);
        assert_eq!(removed, ["b 1.0.0"]);
    }

    #[test]
    fn a_failed_fit_leaves_no_seed_and_says_what_to_run() {
        let tmp = tempfile::tempdir().unwrap();
        // No Cargo.toml: cargo cannot fit a lock to anything.
        let Lock::Failed(reason) = follow(tmp.path()) else {
            panic!("a folder without a crate gets no lock");
        };
        assert!(!tmp.path().join("Cargo.lock").exists(), "{reason}");
        let warning = Lock::Failed(reason)
            .report(tmp.path())
            .expect("a warning")
            .unwrap_err();
        assert!(
            warning.contains("cargo update --workspace") && warning.contains("--locked"),
            "{warning}"
        );
    }

    #[test]
    fn a_lock_cargo_cannot_fit_is_put_back_byte_for_byte() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("src")).unwrap();
        std::fs::write(tmp.path().join("src/lib.rs"), "").unwrap();
        // A dependency no registry has: neither the cache nor the registry can resolve it.
        std::fs::write(
            tmp.path().join("Cargo.toml"),
            "[package]\nname = \"x\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [dependencies]\nno-such-crate-operator-gen = { path = \"missing\" }\n",
        )
        .unwrap();
        let mine = "# mine\nversion = 4\n";
        std::fs::write(tmp.path().join("Cargo.lock"), mine).unwrap();
        let Lock::Failed(reason) = follow(tmp.path()) else {
            panic!("an unresolvable dependency cannot be locked");
        };
        assert!(reason.contains("cargo update"), "{reason}");
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("Cargo.lock")).unwrap(),
            mine
        );
        assert!(!tmp.path().join(".Cargo.lock.operator-gen-new").exists());
    }

    #[test]
    fn a_lock_that_is_a_link_is_refused_and_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("Cargo.toml"),
            "[package]\nname = \"x\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
        )
        .unwrap();
        std::fs::create_dir(tmp.path().join("src")).unwrap();
        std::fs::write(tmp.path().join("src/lib.rs"), "").unwrap();
        let elsewhere = tmp.path().join("elsewhere.lock");
        std::fs::write(&elsewhere, "# not the crate's\n").unwrap();
        std::os::unix::fs::symlink(&elsewhere, tmp.path().join("Cargo.lock")).unwrap();
        let Lock::Failed(reason) = follow(tmp.path()) else {
            panic!("a linked lock is not the crate's to fit");
        };
        assert!(reason.contains("symbolic link"), "{reason}");
        assert_eq!(
            std::fs::read_to_string(&elsewhere).unwrap(),
            "# not the crate's\n"
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
