//! Writing several files as one change: staged, journaled, renamed, and rolled back on
//! failure, or restored by the next run after a kill.
//!
//! The order is what makes it safe. The journal is written before anything outside the
//! staging names is touched, and lists every target with whether it existed. Each file is
//! staged beside its target (`.name.operator-gen-new`), each existing target is kept under a
//! backup name (`.name.operator-gen-old`, a hard link), and only then are the staged files
//! renamed over their targets. Until the journal says `committed`, restoring means: put
//! every backup back, remove every target that did not exist, remove what was staged and the
//! directories the run made. After it, restoring means removing the leftovers.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{PlannedFile, disk::Disk};
use crate::error::{Error, Result};

/// The journal's name in the output folder.
pub(super) const JOURNAL: &str = ".operator-gen-journal";

/// What a write is doing, as the next run needs to know it to undo it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Journal {
    /// Set once every file is in place: the write is done and only leftovers remain.
    committed: bool,
    /// Directories the write creates, relative to the output folder (empty for the folder
    /// itself, `..` for its parent when that is missing too), shallowest first.
    created_dirs: Vec<PathBuf>,
    files: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    /// Relative to the output folder.
    path: PathBuf,
    /// Whether a file was there before the write.
    existed: bool,
}

/// `path` with its file name prefixed by `.` and suffixed by `suffix`, in the same folder.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.operator-gen-{suffix}"))
}

fn staged(path: &Path) -> PathBuf {
    beside(path, "new")
}

fn backup(path: &Path) -> PathBuf {
    beside(path, "old")
}

fn write_error(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Write {
        path: path.to_owned(),
        source,
    }
}

/// Refuses to report on a folder an interrupted write left half done: check mode writes
/// nothing, so it cannot restore it, and comparing against it would mislead.
pub(super) fn refuse_pending(disk: &dyn Disk, root: &Path) -> Result<()> {
    let journal = root.join(JOURNAL);
    if disk.exists(&journal) {
        return Err(Error::Interrupted { journal });
    }
    Ok(())
}

/// Restores the folder an interrupted write left, if any, and removes its journal; returns
/// whether there was one.
pub(super) fn recover(disk: &dyn Disk, root: &Path) -> Result<bool> {
    let path = root.join(JOURNAL);
    let Some(bytes) = disk.read(&path).map_err(write_error(&path))? else {
        return Ok(false);
    };
    let journal: Journal = serde_json::from_slice(&bytes).map_err(|e| Error::Journal {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    undo(disk, root, &journal).map(|()| true)
}

/// Writes `changes` into `root` as one change.
pub(super) fn write(disk: &dyn Disk, root: &Path, changes: &[&PlannedFile]) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let journal = Journal {
        committed: false,
        created_dirs: missing_dirs(disk, root, changes),
        files: changes
            .iter()
            .map(|file| Entry {
                path: file.path.clone(),
                existed: disk.exists(&root.join(&file.path)),
            })
            .collect(),
    };
    let result = make_outside_dirs(disk, root, &journal)
        .and_then(|()| save(disk, root, &journal))
        .and_then(|()| {
            put_in_place(disk, root, &journal, changes)?;
            save(
                disk,
                root,
                &Journal {
                    committed: true,
                    ..journal.clone()
                },
            )
        });
    match result {
        Ok(()) => {
            // Done: what is left is leftovers, which the next run also clears.
            let _ = undo(
                disk,
                root,
                &Journal {
                    committed: true,
                    ..journal
                },
            );
            Ok(())
        }
        Err(error) => {
            // If undoing fails too (the disk is gone), the journal stays for the next run.
            let _ = undo(disk, root, &journal);
            Err(error)
        }
    }
}

/// Creates the output folder and any missing parents, for the journal to go in.
fn make_outside_dirs(disk: &dyn Disk, root: &Path, journal: &Journal) -> Result<()> {
    for dir in journal.created_dirs.iter().filter(|d| !is_inside(d)) {
        let dir = locate(root, dir);
        disk.create_dir(&dir).map_err(write_error(&dir))?;
    }
    Ok(())
}

/// Every directory the changes need that does not exist yet, shallowest first: missing
/// parents of the output folder (as `..`, `../..`), the folder itself (as the empty path),
/// then folders inside it.
fn missing_dirs(disk: &dyn Disk, root: &Path, changes: &[&PlannedFile]) -> Vec<PathBuf> {
    let mut outside: Vec<PathBuf> = Vec::new();
    let mut up = PathBuf::new();
    for ancestor in root.ancestors() {
        if ancestor.as_os_str().is_empty() || disk.exists(ancestor) {
            break;
        }
        outside.push(up.clone());
        up.push("..");
    }
    outside.reverse();
    let mut inside: Vec<PathBuf> = changes
        .iter()
        .flat_map(|file| file.path.ancestors().skip(1).map(Path::to_path_buf))
        .filter(|dir| is_inside(dir))
        .collect();
    inside.sort_by_key(|d| (d.components().count(), d.clone()));
    inside.dedup();
    inside.retain(|dir| !disk.exists(&root.join(dir)));
    outside.into_iter().chain(inside).collect()
}

/// Where a directory of the journal is: `..` components climb from `root` by name, not
/// through the filesystem, because `root` itself may be gone by the time they are used.
fn locate(root: &Path, dir: &Path) -> PathBuf {
    let up = dir
        .components()
        .take_while(|c| matches!(c, std::path::Component::ParentDir))
        .count();
    let base = root.ancestors().nth(up).unwrap_or(root);
    dir.components()
        .skip(up)
        .fold(base.to_path_buf(), |path, c| path.join(c))
}

/// Whether a relative directory is a folder inside the output folder, rather than the
/// folder itself or one of its parents.
fn is_inside(dir: &Path) -> bool {
    dir.components()
        .next()
        .is_some_and(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Creates the directories, stages every file, keeps every old one, then renames.
fn put_in_place(
    disk: &dyn Disk,
    root: &Path,
    journal: &Journal,
    changes: &[&PlannedFile],
) -> Result<()> {
    for dir in journal.created_dirs.iter().filter(|d| is_inside(d)) {
        let dir = root.join(dir);
        disk.create_dir(&dir).map_err(write_error(&dir))?;
    }
    for (file, entry) in changes.iter().zip(&journal.files) {
        let target = root.join(&file.path);
        let staged = staged(&target);
        let like = entry.existed.then_some(target.as_path());
        disk.write_new(&staged, file.contents.as_bytes(), like)
            .map_err(write_error(&staged))?;
    }
    for entry in journal.files.iter().filter(|e| e.existed) {
        let target = root.join(&entry.path);
        disk.keep(&target, &backup(&target))
            .map_err(write_error(&target))?;
    }
    for entry in &journal.files {
        let target = root.join(&entry.path);
        disk.rename(&staged(&target), &target)
            .map_err(write_error(&target))?;
    }
    Ok(())
}

/// Writes the journal atomically: whole, or not at all.
fn save(disk: &dyn Disk, root: &Path, journal: &Journal) -> Result<()> {
    let path = root.join(JOURNAL);
    let temp = staged(&path);
    let bytes = serde_json::to_vec(journal).map_err(|e| Error::Journal {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if disk.exists(&temp) {
        disk.remove_file(&temp).map_err(write_error(&temp))?;
    }
    disk.write_new(&temp, &bytes, None)
        .map_err(write_error(&temp))?;
    disk.rename(&temp, &path).map_err(write_error(&path))
}

/// Brings the folder back to before the write (or, once committed, clears leftovers), then
/// removes the journal. Every step is tried; the first failure is returned, and the journal
/// is kept when anything failed, for the next run to finish.
fn undo(disk: &dyn Disk, root: &Path, journal: &Journal) -> Result<()> {
    let mut failures = Failures::default();
    for entry in journal.files.iter().rev() {
        let target = root.join(&entry.path);
        let backup = backup(&target);
        if !journal.committed {
            if entry.existed && disk.exists(&backup) {
                failures.note(disk.rename(&backup, &target), &target);
            } else if !entry.existed {
                failures.note(remove_if_there(disk, &target), &target);
            }
        }
        // A rename onto another name of the same file leaves the backup in place.
        failures.note(remove_if_there(disk, &backup), &backup);
        let staged = staged(&target);
        failures.note(remove_if_there(disk, &staged), &staged);
    }
    let journal_path = root.join(JOURNAL);
    let staged_journal = staged(&journal_path);
    failures.note(remove_if_there(disk, &staged_journal), &staged_journal);
    if let Some(error) = failures.first {
        return Err(error);
    }
    remove_if_there(disk, &journal_path).map_err(write_error(&journal_path))?;
    if !journal.committed {
        for dir in journal.created_dirs.iter().rev() {
            // Only if empty: something else may have been put there since.
            let _ = disk.remove_dir(&locate(root, dir));
        }
    }
    Ok(())
}

fn remove_if_there(disk: &dyn Disk, path: &Path) -> std::io::Result<()> {
    if disk.exists(path) {
        disk.remove_file(path)
    } else {
        Ok(())
    }
}

/// The first of several steps that failed, the rest having been tried anyway.
#[derive(Default)]
struct Failures {
    first: Option<Error>,
}

impl Failures {
    fn note(&mut self, result: std::io::Result<()>, path: &Path) {
        if let Err(source) = result
            && self.first.is_none()
        {
            self.first = Some(Error::Write {
                path: path.to_owned(),
                source,
            });
        }
    }
}
