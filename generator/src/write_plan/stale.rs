//! Files of the generator's own folders that a plan no longer has, or never had. Every file
//! in these folders is the generator's, so any other is removed by the same write that brings
//! the rest up to date ([`OWNED_FOLDERS`]):
//!
//! - the vendored runtime's (`crate::vendor::VENDOR_DIR`): a file the runtime dropped, or the
//!   whole copy once `operator.yaml` names a shared runtime;
//! - the chart's `templates/`, `charts/` and `crds/`, every folder Helm reads without being
//!   told: a file planted there would be rendered and installed with the chart. kustomize
//!   reads only what the checksummed `kustomization.yaml` names, so `deploy/base/` needs no
//!   walk.
//!
//! A file found there that the generator did not write (it has no intact checksum) is
//! hand-edited: `--check` names it, and `gen` removes it only with `--force`.
//!
//! The folders are walked as every path below a crate folder is: nothing is followed, and
//! anything but plain folders and regular files is refused. The walk is capped in entries and
//! depth, because the folder comes with the crate, from whoever made it. The folders removals
//! leave empty are removed after the write ([`prune`]): not journaled, since an empty folder
//! left by a failure is harmless, and the next write removes it.

use std::path::{Path, PathBuf};

use super::{PlannedFile, disk::Disk};
use crate::{
    crate_dir::{self, CrateDir, Kind},
    error::{Error, Result},
    vendor::VENDOR_DIR,
};

/// The folders whose every file the generator writes.
pub(super) const OWNED_FOLDERS: [&str; 4] = [
    VENDOR_DIR,
    "deploy/chart/templates",
    "deploy/chart/charts",
    "deploy/chart/crds",
];

/// The most entries the walk of one owned folder looks at: the runtime has a few dozen
/// files, the chart's templates a dozen.
const MAX_ENTRIES: usize = 4096;

/// The most folders deep below an owned folder the walk goes: the runtime's `src/` is two.
const MAX_DEPTH: usize = 8;

/// The files in the generator's own folders that `planned` does not hold, sorted.
pub(super) fn files(disk: &dyn Disk, planned: &[PlannedFile]) -> Result<Vec<PathBuf>> {
    let mut stale = Vec::new();
    for top in OWNED_FOLDERS {
        let (files, _) = walk(disk, Path::new(top))?;
        stale.extend(
            files
                .into_iter()
                .filter(|path| !planned.iter().any(|file| file.path == *path)),
        );
    }
    Ok(stale)
}

/// Removes the empty folders of the generator's own folders, deepest first, and `vendor/`
/// when it is empty. Failures are ignored: the folder stays, empty, for the next run.
pub(super) fn prune(disk: &dyn Disk) {
    for top in OWNED_FOLDERS.map(Path::new) {
        let Ok((_, folders)) = walk(disk, top) else {
            continue;
        };
        let vendor = (top == Path::new(VENDOR_DIR))
            .then(|| top.parent())
            .flatten();
        for folder in folders.iter().rev().map(PathBuf::as_path).chain(vendor) {
            let empty = CrateDir::new(disk.dir().path(folder))
                .entries()
                .is_ok_and(|entries| entries.is_empty());
            if empty && matches!(disk.kind(folder), Ok(Some(Kind::Folder))) {
                let _ = disk.remove_dir(folder);
            }
        }
    }
}

/// Every file below the owned folder `top`, sorted, and every folder, each after the one
/// holding it.
fn walk(disk: &dyn Disk, top: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    match disk.kind(top)? {
        None => return Ok((Vec::new(), Vec::new())),
        Some(Kind::Folder) => {}
        Some(other) => return Err(not_plain(disk, top, other, "folder")),
    }
    let mut files = Vec::new();
    let mut seen = 0;
    let mut walked = Vec::new();
    let mut folders = vec![(top.to_path_buf(), 0)];
    while let Some((folder, depth)) = folders.pop() {
        walked.push(folder.clone());
        // Each folder was found by a walk that follows nothing; it is listed by its full path.
        let entries = CrateDir::new(disk.dir().path(&folder)).entries()?;
        for (name, kind) in entries {
            seen += 1;
            let path = folder.join(&name);
            if seen > MAX_ENTRIES || depth >= MAX_DEPTH {
                return Err(Error::Limit {
                    origin: disk.dir().path(top).display().to_string(),
                    reason: format!(
                        "holds more than {MAX_ENTRIES} entries or folders more than {MAX_DEPTH} \
                         deep, where the generator writes a few dozen files: remove the \
                         folder, and `gen` writes it again"
                    ),
                });
            }
            match kind {
                Kind::Folder => folders.push((path, depth + 1)),
                Kind::File => files.push(path),
                other => return Err(not_plain(disk, &path, other, "file")),
            }
        }
    }
    files.sort();
    Ok((files, walked))
}

fn not_plain(disk: &dyn Disk, path: &Path, kind: Kind, wanted: &'static str) -> Error {
    crate_dir::Error::NotPlain {
        path: disk.dir().path(path),
        found: kind.describe(),
        wanted,
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::super::{GENERATED_MARK, Mode, Ownership, Plan, checksum_line};
    use super::*;
    use crate::error::Error;

    fn generated(path: &str, body: &str) -> PlannedFile {
        PlannedFile {
            path: path.into(),
            contents: format!("// {GENERATED_MARK}\n{}\n{body}", checksum_line("//", body)),
            ownership: Ownership::Generated,
        }
    }

    fn vendored(name: &str) -> String {
        format!("{VENDOR_DIR}/src/{name}")
    }

    /// A crate with a vendored runtime of `lib.rs` and `run/old.rs`, and the plan of the next
    /// run, whose runtime has `lib.rs` alone.
    fn crate_with_a_dropped_file() -> (tempfile::TempDir, Plan) {
        let dir = tempfile::tempdir().unwrap();
        let before = Plan::new(vec![
            generated("src/main.rs", "fn main() {}\n"),
            generated(&vendored("lib.rs"), "pub mod run;\n"),
            generated(&vendored("run/old.rs"), "pub fn old() {}\n"),
        ])
        .unwrap();
        before
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap();
        let after = Plan::new(vec![
            generated("src/main.rs", "fn main() {}\n"),
            generated(&vendored("lib.rs"), "\n"),
        ])
        .unwrap();
        (dir, after)
    }

    #[test]
    fn a_file_the_runtime_dropped_is_removed_with_its_empty_folder() {
        let (dir, plan) = crate_with_a_dropped_file();
        let old = vendored("run/old.rs");
        let check = plan.apply(dir.path(), Mode::Check).unwrap();
        assert_eq!(check.removed(), vec![Path::new(&old)]);
        assert!(check.changed().contains(&Path::new(&old)), "{check}");
        assert!(check.to_string().contains("1 removed"), "{check}");
        let diff = plan.diff(dir.path()).unwrap();
        assert!(
            diff.contains(&format!("--- a/{old}")) && diff.contains("-pub fn old() {}"),
            "{diff}"
        );

        let report = plan
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap();
        assert_eq!(report.removed(), vec![Path::new(&old)]);
        assert!(!dir.path().join(&old).exists());
        assert!(
            !dir.path().join(VENDOR_DIR).join("src/run").exists(),
            "the emptied folder goes"
        );
        assert!(dir.path().join(vendored("lib.rs")).exists());
        let again = plan.apply(dir.path(), Mode::Check).unwrap();
        assert!(again.changed().is_empty(), "{again}");
    }

    #[test]
    fn a_plan_without_a_vendored_runtime_removes_the_whole_copy_and_vendor() {
        let (dir, _) = crate_with_a_dropped_file();
        std::fs::create_dir_all(dir.path().join("vendor/other")).unwrap();
        let shared = Plan::new(vec![generated("src/main.rs", "fn main() {}\n")]).unwrap();
        let report = shared
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap();
        assert_eq!(report.removed().len(), 2, "{report}");
        assert!(!dir.path().join(VENDOR_DIR).exists());
        assert!(
            dir.path().join("vendor/other").exists(),
            "what is not the generator's stays"
        );
    }

    #[test]
    fn a_dropped_file_edited_by_hand_is_refused_unless_forced() {
        let (dir, plan) = crate_with_a_dropped_file();
        let old = dir.path().join(vendored("run/old.rs"));
        let edited = std::fs::read_to_string(&old).unwrap() + "// mine\n";
        std::fs::write(&old, &edited).unwrap();
        let err = plan
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap_err();
        assert!(matches!(err, Error::NotGenerated { .. }), "{err:?}");
        assert_eq!(
            std::fs::read_to_string(&old).unwrap(),
            edited,
            "nothing was written"
        );
        let check = plan.apply(dir.path(), Mode::Check).unwrap();
        assert!(
            check
                .hand_edited()
                .contains(&Path::new(&vendored("run/old.rs")))
        );
        plan.apply(dir.path(), Mode::Write { force: true }).unwrap();
        assert!(!old.exists());
    }

    #[test]
    fn a_link_in_the_vendored_folder_is_refused_not_followed() {
        let (dir, plan) = crate_with_a_dropped_file();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim.rs"), "keep\n").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("victim.rs"),
            dir.path().join(vendored("link.rs")),
        )
        .unwrap();
        let err = plan
            .apply(dir.path(), Mode::Write { force: true })
            .unwrap_err()
            .to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(outside.path().join("victim.rs").exists());
        assert!(
            dir.path().join(vendored("run/old.rs")).exists(),
            "nothing was removed"
        );
    }

    #[test]
    fn a_file_planted_in_the_chart_templates_is_flagged_and_removed_only_when_forced() {
        let dir = tempfile::tempdir().unwrap();
        let template = "deploy/chart/templates/deployment.yaml";
        let plan = Plan::new(vec![generated(template, "kind: Deployment\n")]).unwrap();
        plan.apply(dir.path(), Mode::Write { force: false })
            .unwrap();
        for planted in [
            "templates/job.yaml",
            "charts/sub/Chart.yaml",
            "crds/extra.yaml",
        ] {
            let path = dir.path().join("deploy/chart").join(planted);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "kind: Job\n").unwrap();
        }
        let check = plan.apply(dir.path(), Mode::Check).unwrap();
        assert_eq!(check.hand_edited().len(), 3, "{check}");
        let err = plan
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap_err();
        assert!(matches!(err, Error::NotGenerated { .. }), "{err:?}");
        assert!(err.to_string().contains("--force"), "{err}");
        assert!(dir.path().join("deploy/chart/templates/job.yaml").exists());

        plan.apply(dir.path(), Mode::Write { force: true }).unwrap();
        assert!(!dir.path().join("deploy/chart/templates/job.yaml").exists());
        assert!(
            !dir.path().join("deploy/chart/charts").exists(),
            "emptied folders go"
        );
        assert!(!dir.path().join("deploy/chart/crds").exists());
        assert!(dir.path().join(template).exists(), "the planned file stays");
        let again = plan.apply(dir.path(), Mode::Check).unwrap();
        assert!(again.changed().is_empty(), "{again}");
    }
}
