//! `cargo xtask package`: the publishable crates packaged, and each one's build shown to need
//! nothing its package leaves out, read from what the compiler recorded.
//!
//! `cargo package` would prove the second part by building every package again from its
//! `.crate`, as a workspace of its own. Such a workspace unifies fewer features than this one
//! (log, memchr, hyper, futures, tokio, syn…), so that build shares almost nothing with the
//! workspace's: in CI it compiled 141 crates, kube 4 and k8s-openapi 0.28 among them, in 850 s.
//! The compiler already wrote down every file it read for the workspace's build: each unit's
//! dep-info (`target/debug/deps/*.d`), and each build script's `rerun-if-changed` lines. So
//! this packages without verifying (cargo still checks each manifest, that every dependency
//! has a version, and resolves the command's Cargo.lock against the packaged crates), lists
//! each package's files, and fails when a library's or binary's build read a file of its
//! crate that the package leaves out, or any file outside its crate and the target directory.
//! What it cannot see is a feature the workspace turns on for a dependency that the crate
//! relies on without asking for it; `cargo package` with verification finds that, at the cost
//! above, when a release is cut.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

#[derive(Args)]
pub struct PackageArgs {
    /// The packages to package and check (cargo's `-p`), at least one.
    #[arg(short, long = "package", required = true)]
    packages: Vec<String>,
    /// Package files with uncommitted changes too (cargo's `--allow-dirty`).
    #[arg(long)]
    allow_dirty: bool,
}

pub fn run(args: PackageArgs) -> Result<ExitCode> {
    let workspace = crate::workspace_root();
    let target = workspace.join("target/debug");
    let mut package = operator_gen_tests::cargo();
    package
        .current_dir(&workspace)
        .args(["package", "--no-verify"]);
    if args.allow_dirty {
        package.arg("--allow-dirty");
    }
    for name in &args.packages {
        package.args(["-p", name]);
    }
    if !package.status().context("running cargo package")?.success() {
        bail!("cargo package --no-verify failed; its error is above");
    }
    let metadata = Metadata::read(&workspace)?;
    let mut failures = 0;
    for name in &args.packages {
        let crate_dir = metadata.manifest_dir(name)?;
        let packaged = packaged_files(&workspace, name, args.allow_dirty)?;
        let reads = files_read(&target, &workspace, name, &metadata.targets(name)?)?;
        let problems = unpackaged(&reads, &crate_dir, &workspace.join("target"), &packaged);
        for problem in &problems {
            eprintln!("{name}: {problem}");
        }
        if problems.is_empty() {
            eprintln!(
                "{name}: its build read {} files of its crate, every one in its package",
                reads
                    .compiled
                    .iter()
                    .filter(|path| path.starts_with(&crate_dir))
                    .count()
            );
        }
        failures += problems.len();
    }
    if failures > 0 {
        bail!(
            "{failures} files a build needs are not in its package: add them to the crate's \
             `include` in Cargo.toml, or stop reading them"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The workspace's packages, from `cargo metadata`: where each lives and its targets.
struct Metadata(serde_json::Value);

impl Metadata {
    fn read(workspace: &Path) -> Result<Self> {
        let stdout = cargo_stdout(
            workspace,
            &["metadata", "--no-deps", "--format-version", "1"],
        )?;
        Ok(Self(serde_json::from_str(&stdout)?))
    }

    fn package(&self, name: &str) -> Result<&serde_json::Value> {
        self.0["packages"]
            .as_array()
            .and_then(|packages| packages.iter().find(|package| package["name"] == name))
            .with_context(|| format!("no package {name} in this workspace"))
    }

    fn manifest_dir(&self, name: &str) -> Result<PathBuf> {
        let manifest = self.package(name)?["manifest_path"]
            .as_str()
            .with_context(|| format!("cargo metadata gives {name} no manifest_path"))?;
        Ok(Path::new(manifest)
            .parent()
            .unwrap_or(Path::new("/"))
            .to_owned())
    }

    /// The library's and binaries' names as their files are named (`-` as `_`): the targets
    /// a package is published for; its tests, benches and examples are not built from it.
    fn targets(&self, name: &str) -> Result<Vec<String>> {
        let targets = self.package(name)?["targets"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok(targets
            .iter()
            .filter(|target| {
                target["kind"].as_array().is_some_and(|kinds| {
                    kinds.iter().any(|kind| {
                        ["lib", "bin", "proc-macro"].contains(&kind.as_str().unwrap_or(""))
                    })
                })
            })
            .filter_map(|target| target["name"].as_str().map(|name| name.replace('-', "_")))
            .collect())
    }
}

/// The files `cargo package` puts in `name`'s package, by their path in it.
fn packaged_files(workspace: &Path, name: &str, allow_dirty: bool) -> Result<BTreeSet<PathBuf>> {
    let mut args = vec!["package", "--list", "-p", name];
    if allow_dirty {
        args.push("--allow-dirty");
    }
    Ok(cargo_stdout(workspace, &args)?
        .lines()
        .map(PathBuf::from)
        .collect())
}

/// What `cargo <args>` in `workspace` prints, or its error.
fn cargo_stdout(workspace: &Path, args: &[&str]) -> Result<String> {
    let output = operator_gen_tests::cargo()
        .current_dir(workspace)
        .args(args)
        .output()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "cargo {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// What a build of one package read: the files its compiler opened, and the files its build
/// script asked to be rerun for. A watched folder is left out: a build script may watch more
/// than it reads (templates' watches its whole crate), and what it includes from there is
/// compiled, so in the dep-info.
#[derive(Default)]
struct Reads {
    compiled: BTreeSet<PathBuf>,
    watched: BTreeSet<PathBuf>,
}

/// What builds of `name`'s library, binaries and build script in `target` (the workspace's
/// `target/debug`) read, as absolute paths of files that still exist. A unit's fingerprint
/// folder is named `<package>-<hash>` and holds `lib-<target>` or `bin-<target>` for the unit
/// whose dep-info is `deps/<target>-<hash>.d` (`test-lib-…` is its test harness); a build
/// script's files are in `build/<package>-<hash>/`.
fn files_read(target: &Path, workspace: &Path, name: &str, targets: &[String]) -> Result<Reads> {
    let mut reads = Reads::default();
    let mut units = 0;
    for fingerprint in folders_of(&target.join(".fingerprint"), name)? {
        let Some(hash) = hash_of(&fingerprint, name) else {
            continue;
        };
        for target_name in targets {
            let built = ["lib", "bin"]
                .iter()
                .any(|kind| fingerprint.join(format!("{kind}-{target_name}")).exists());
            let dep_info = target.join("deps").join(format!("{target_name}-{hash}.d"));
            if built && dep_info.exists() {
                reads
                    .compiled
                    .extend(dep_info_files(&read(&dep_info)?, workspace));
                units += 1;
            }
        }
    }
    for build in folders_of(&target.join("build"), name)? {
        for entry in std::fs::read_dir(&build)? {
            let path = entry?.path();
            let file_name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            if file_name.starts_with("build_script_build-") && file_name.ends_with(".d") {
                reads
                    .compiled
                    .extend(dep_info_files(&read(&path)?, workspace));
            } else if file_name == "output" {
                reads.watched.extend(watched_paths(&read(&path)?));
            }
        }
    }
    if units == 0 {
        bail!(
            "no build of {name} in {}: build the workspace first (cargo test --workspace)",
            target.display()
        );
    }
    // clippy's driver, CI's compiler for the workspace's crates, records the workspace's
    // manifest, whose `[lints]` it reads; cargo package writes those into each package's own.
    reads.compiled.remove(&workspace.join("Cargo.toml"));
    reads.compiled.retain(|path| path.is_file());
    reads.watched.retain(|path| path.is_file());
    Ok(reads)
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// The folders in `dir` named `<name>-<16 hex digits>`, cargo's name for a unit of `name`.
fn folders_of(dir: &Path, name: &str) -> Result<Vec<PathBuf>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut folders = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if hash_of(&path, name).is_some() {
            folders.push(path);
        }
    }
    folders.sort();
    Ok(folders)
}

fn hash_of<'a>(folder: &'a Path, name: &str) -> Option<&'a str> {
    let hash = folder
        .file_name()?
        .to_str()?
        .strip_prefix(name)?
        .strip_prefix('-')?;
    (hash.len() == 16 && hash.bytes().all(|byte| byte.is_ascii_hexdigit())).then_some(hash)
}

/// The files of a rustc dep-info file: its first rule's prerequisites, with `\ ` for a space
/// in a path, relative ones (cargo passes a member's sources relative to the workspace)
/// resolved against `workspace`.
fn dep_info_files(text: &str, workspace: &Path) -> Vec<PathBuf> {
    let Some((_, prerequisites)) = text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| line.split_once(": "))
    else {
        return Vec::new();
    };
    let mut files = Vec::new();
    let mut file = String::new();
    let mut chars = prerequisites.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => file.extend(chars.next()),
            ' ' => files.push(std::mem::take(&mut file)),
            _ => file.push(c),
        }
    }
    files.push(file);
    files
        .into_iter()
        .filter(|file| !file.is_empty())
        .map(|file| lexical(&workspace.join(file)))
        .collect()
}

/// `path` with its `.` and `..` taken out by their names alone (`include_str!("../x")` is
/// recorded as `src/../x`), so that it compares with the package's list.
fn lexical(path: &Path) -> PathBuf {
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    clean
}

/// The paths a build script's output asks cargo to rerun it for (`cargo::rerun-if-changed=`,
/// or the older `cargo:`). Only absolute ones: a relative path is relative to the package, which
/// the script's output folder does not name, and the workspace's scripts print absolute ones.
fn watched_paths(output: &str) -> Vec<PathBuf> {
    output
        .lines()
        .filter_map(|line| {
            line.strip_prefix("cargo::rerun-if-changed=")
                .or_else(|| line.strip_prefix("cargo:rerun-if-changed="))
        })
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .collect()
}

/// What is wrong with a package, given what its builds read: a compiled or watched file of its
/// crate that the package leaves out, or a compiled file outside both its crate and the target
/// directory (where build scripts write). A watched file elsewhere is no read: templates'
/// script watches where its links lead as well as the links.
fn unpackaged(
    reads: &Reads,
    crate_dir: &Path,
    target: &Path,
    packaged: &BTreeSet<PathBuf>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for path in reads.compiled.iter().chain(&reads.watched) {
        if path.starts_with(target) {
            continue;
        }
        match path.strip_prefix(crate_dir) {
            Ok(inside) if !packaged.contains(inside) => problems.push(format!(
                "its build reads {}, which its package leaves out",
                inside.display()
            )),
            Ok(_) => {}
            Err(_) if reads.compiled.contains(path) => problems.push(format!(
                "its build reads {}, outside its crate, which no package of it can hold",
                path.display()
            )),
            Err(_) => {}
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dep_info_gives_the_first_rules_files_with_escaped_spaces_and_paths_resolved() {
        let text = "# env-dep:X=1\n/t/deps/a-1.d: gen/src/lib.rs /out/my\\ file.rs gen/src/../b.rs\n\ngen/src/lib.rs:\n";
        assert_eq!(
            dep_info_files(text, Path::new("/w")),
            [
                PathBuf::from("/w/gen/src/lib.rs"),
                PathBuf::from("/out/my file.rs"),
                PathBuf::from("/w/gen/b.rs")
            ]
        );
    }

    #[test]
    fn a_build_scripts_watched_paths_are_its_rerun_lines_in_either_spelling() {
        let output = "cargo::rerun-if-changed=/c/a.toml\ncargo:rerun-if-changed=/c/b\ncargo::rustc-cfg=x\ncargo::rerun-if-changed=rel\n";
        assert_eq!(
            watched_paths(output),
            [PathBuf::from("/c/a.toml"), PathBuf::from("/c/b")]
        );
    }

    #[test]
    fn a_unit_folder_is_its_package_name_and_a_sixteen_digit_hash() {
        assert_eq!(
            hash_of(
                Path::new("/f/operator-gen-0123456789abcdef"),
                "operator-gen"
            ),
            Some("0123456789abcdef")
        );
        assert_eq!(
            hash_of(
                Path::new("/f/operator-gen-templates-0123456789abcdef"),
                "operator-gen"
            ),
            None
        );
        assert_eq!(
            hash_of(Path::new("/f/operator-gen-0123"), "operator-gen"),
            None
        );
    }

    #[test]
    fn a_read_file_the_package_leaves_out_or_outside_the_crate_is_named_and_others_pass() {
        let reads = Reads {
            compiled: [
                "/w/c/src/lib.rs",
                "/w/c/src/left_out.rs",
                "/w/target/debug/build/c-1/out/t.rs",
                "/w/README.md",
            ]
            .into_iter()
            .map(PathBuf::from)
            .collect(),
            watched: ["/w/c/package.toml", "/w/runtime/Cargo.toml"]
                .into_iter()
                .map(PathBuf::from)
                .collect(),
        };
        let packaged = ["Cargo.toml", "src/lib.rs"]
            .into_iter()
            .map(PathBuf::from)
            .collect();
        let problems = unpackaged(&reads, Path::new("/w/c"), Path::new("/w/target"), &packaged);
        assert_eq!(
            problems,
            [
                "its build reads /w/README.md, outside its crate, which no package of it can hold",
                "its build reads src/left_out.rs, which its package leaves out",
                "its build reads package.toml, which its package leaves out",
            ]
        );
    }
}
