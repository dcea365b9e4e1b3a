//! Writing several files as one change: staged, journaled, renamed, and rolled back on
//! failure, or restored by the next run after a kill.
//!
//! The order is what makes it safe. The journal is written before anything outside the
//! staging names is touched, and lists every target with whether it existed and a checksum
//! of what the write puts there. Each file is staged beside its target
//! (`.name.operator-gen-new`), each existing target is kept under a backup name
//! (`.name.operator-gen-old`, a hard link), and only then are the staged files renamed over
//! their targets. A file the write removes (a vendored runtime file the runtime no longer has)
//! is kept under its backup name like a replaced one, and removed after the renames. Until the
//! journal says `committed`, restoring means: put every backup back,
//! remove every target that did not exist, remove what was staged and the folders the run
//! made. After it, restoring means removing the leftovers.
//!
//! # The journal is input too
//!
//! The journal lies in the crate folder, where a clone, a tarball or a pull request can plant
//! one. It stays there because a restore must travel with the folder it restores (a folder
//! moved or copied after a kill still holds its journal), and because a journal kept
//! anywhere else would be a write outside the crate. So a journal is trusted only for what
//! the write it describes could have done, and checked whole before anything is changed:
//!
//! - a file entry is a plain relative path that a plan can write (`writable`);
//! - a folder entry is a plain relative path inside the crate; the crate folder and its
//!   parents are never journaled (a kill may leave them, empty);
//! - nothing on the way to an entry is a link, and each name it uses holds a regular file
//!   (a folder for a folder entry) or nothing;
//! - a file is removed or replaced only while it holds what the write put there (the
//!   journaled checksum), or still is the file its backup kept.
//!
//! Anything else refuses the restore, naming the journal and what to do.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{PlannedFile, disk::Disk, hex};
use crate::{
    crate_dir::{self, Kind},
    error::{Error, Result},
    limits::{MAX_CRATE_FILE_BYTES, MAX_JOURNAL_BYTES},
};

/// The journal's name in the output folder.
pub(super) const JOURNAL: &str = ".operator-gen-journal";

/// What a write is doing, as the next run needs to know it to undo it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Journal {
    /// Set once every file is in place: the write is done and only leftovers remain.
    committed: bool,
    /// Folders the write creates inside the output folder, shallowest first.
    created_dirs: Vec<PathBuf>,
    files: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    /// Relative to the output folder.
    path: PathBuf,
    /// Whether a file was there before the write.
    existed: bool,
    /// The SHA-256 of what the write puts there, in hex: a restore removes or replaces only
    /// a file that holds exactly this, so it can never undo anything but this write. Empty,
    /// which no file's checksum is, for a file the write removes.
    written: String,
    /// Whether the write removes the file (a vendored runtime file the runtime no longer has)
    /// rather than putting one there; its backup is what a restore puts back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    removed: bool,
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

/// Whether `name`, in the crate folder, is a journal being written when a run was killed:
/// the only leftover a run can leave before its journal exists.
pub(super) fn is_staged_journal(name: &str) -> bool {
    staged(Path::new(JOURNAL)) == Path::new(name)
}

fn checksum(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Whether `path` is a plain relative path: one or more names, no `..`, no root.
pub(super) fn is_plain(path: &Path) -> bool {
    path.components().next().is_some()
        && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// The refusal of the journal in `disk`'s folder, for `reason`.
fn untrusted(disk: &dyn Disk, reason: String) -> Error {
    Error::Journal {
        path: disk.dir().path(Path::new(JOURNAL)),
        reason,
    }
}

/// The journal an interrupted write left, if any.
fn load(disk: &dyn Disk) -> Result<Option<Journal>> {
    let bytes = match disk.read(Path::new(JOURNAL), MAX_JOURNAL_BYTES) {
        Ok(bytes) => bytes,
        Err(e @ (crate_dir::Error::NotPlain { .. } | crate_dir::Error::TooLarge { .. })) => {
            return Err(untrusted(disk, e.to_string()));
        }
        Err(e) => return Err(e.into()),
    };
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| untrusted(disk, format!("it does not parse: {e}")))
}

/// Refuses to report on a folder an interrupted write left half done: check mode writes
/// nothing, so it cannot restore it, and comparing against it would mislead. A journal no
/// write could have left is refused as such.
pub(super) fn refuse_pending(disk: &dyn Disk, writable: &dyn Fn(&Path) -> bool) -> Result<()> {
    match load(disk)? {
        None => Ok(()),
        Some(journal) => {
            check(disk, &journal, writable)?;
            Err(Error::Interrupted {
                journal: disk.dir().path(Path::new(JOURNAL)),
            })
        }
    }
}

/// Restores the folder an interrupted write left, if any, and removes its journal; returns
/// whether there was one. `writable` says which paths a plan can write.
pub(super) fn recover(disk: &dyn Disk, writable: &dyn Fn(&Path) -> bool) -> Result<bool> {
    let Some(journal) = load(disk)? else {
        return Ok(false);
    };
    check(disk, &journal, writable)?;
    undo(disk, &journal).map(|()| true)
}

/// Checks that `journal` describes a write operator-gen could have made, and that undoing it
/// touches nothing else; see the module's doc.
fn check(disk: &dyn Disk, journal: &Journal, writable: &dyn Fn(&Path) -> bool) -> Result<()> {
    let refuse = |reason: String| untrusted(disk, reason);
    let expect = |path: &Path, wanted: Kind| match disk.kind(path) {
        Ok(None) => Ok(()),
        Ok(Some(kind)) if kind == wanted => Ok(()),
        Ok(Some(_)) => Err(refuse(format!(
            "{} is not a plain {}",
            path.display(),
            if wanted == Kind::Folder {
                "folder"
            } else {
                "file"
            }
        ))),
        Err(e) => Err(refuse(e.to_string())),
    };
    for dir in &journal.created_dirs {
        if !is_plain(dir) {
            return Err(refuse(format!(
                "it lists the folder {:?}, which is not inside the crate",
                dir.display()
            )));
        }
        expect(dir, Kind::Folder)?;
    }
    for entry in &journal.files {
        if !is_plain(&entry.path) || !writable(&entry.path) {
            return Err(refuse(format!(
                "it lists {:?}, which operator-gen never writes",
                entry.path.display()
            )));
        }
        for path in [&entry.path, &staged(&entry.path), &backup(&entry.path)] {
            expect(path, Kind::File)?;
        }
        if !journal.committed {
            check_undoable(disk, entry).map_err(refuse)?;
        }
    }
    Ok(())
}

/// Whether undoing `entry` touches only the write's own file: the target holds what the
/// write put there, or nothing, or (for a file that existed) the file its backup kept.
fn check_undoable(disk: &dyn Disk, entry: &Entry) -> std::result::Result<(), String> {
    let digest = |path: &Path| {
        disk.read(path, MAX_CRATE_FILE_BYTES)
            .map(|bytes| bytes.map(|b| checksum(&b)))
            .map_err(|e| e.to_string())
    };
    let Some(current) = digest(&entry.path)? else {
        return Ok(());
    };
    if current == entry.written {
        return Ok(());
    }
    if entry.existed {
        match digest(&backup(&entry.path))? {
            // Not replaced yet: the write stopped before its renames.
            None => return Ok(()),
            Some(kept) if kept == current => return Ok(()),
            Some(_) => {}
        }
    }
    Err(format!(
        "{} holds neither what the interrupted write put there nor what it replaced",
        entry.path.display()
    ))
}

/// Writes `changes` into the folder as one change.
pub(super) fn write(disk: &dyn Disk, changes: &[&PlannedFile], removals: &[&Path]) -> Result<()> {
    if changes.is_empty() && removals.is_empty() {
        return Ok(());
    }
    refuse_in_the_way(disk, changes)?;
    refuse_in_the_way_of_removals(disk, removals)?;
    let mut files = Vec::with_capacity(changes.len() + removals.len());
    for file in changes {
        files.push(Entry {
            path: file.path.clone(),
            existed: disk.kind(&file.path)?.is_some(),
            written: checksum(file.contents.as_bytes()),
            removed: false,
        });
    }
    // After the files put in place: `put_in_place` pairs the changes with the first entries.
    for path in removals {
        files.push(Entry {
            path: path.to_path_buf(),
            existed: true,
            written: String::new(),
            removed: true,
        });
    }
    let journal = Journal {
        committed: false,
        created_dirs: missing_inside(disk, changes)?,
        files,
    };
    let committed = Journal {
        committed: true,
        ..journal.clone()
    };
    let result = save(disk, &journal)
        .and_then(|()| put_in_place(disk, &journal, changes))
        .and_then(|()| save(disk, &committed));
    match result {
        Ok(()) => {
            // Done: what is left is leftovers, which the next run also clears.
            let _ = undo(disk, &committed);
            Ok(())
        }
        Err(error) => {
            // If undoing fails too (the disk is gone), the journal stays for the next run.
            let _ = undo(disk, &journal);
            Err(error)
        }
    }
}

/// Refuses a write when something is at a name it stages a file or keeps a backup under.
///
/// A write's own leftovers there are listed by its journal, and the restore that runs first
/// has cleared them; anything still there was put there otherwise (a clone, an archive, a run
/// that lost its journal). Writing on would fail on it anyway, and the rollback would take a
/// file at a backup name for the one it kept, putting it in place of its target. So it is
/// refused before anything is written, naming it, and never removed here: it may be
/// someone's file.
fn refuse_in_the_way(disk: &dyn Disk, changes: &[&PlannedFile]) -> Result<()> {
    for file in changes {
        for (name, role) in [
            (staged(&file.path), "new version"),
            (backup(&file.path), "backup"),
        ] {
            if let Some(kind) = disk.kind(&name)? {
                return Err(Error::InTheWay {
                    path: disk.dir().path(&name),
                    found: kind.describe(),
                    role,
                    target: file.path.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Every folder inside the crate folder the changes need that does not exist yet,
/// shallowest first.
fn missing_inside(disk: &dyn Disk, changes: &[&PlannedFile]) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = changes
        .iter()
        .flat_map(|file| file.path.ancestors().skip(1).map(Path::to_path_buf))
        .filter(|dir| is_plain(dir))
        .collect();
    dirs.sort_by_key(|d| (d.components().count(), d.clone()));
    dirs.dedup();
    let mut missing = Vec::new();
    for dir in dirs {
        if disk.kind(&dir)?.is_none() {
            missing.push(dir);
        }
    }
    Ok(missing)
}

/// Refuses a removal when something is at the name its backup is kept under, as
/// [`refuse_in_the_way`] does for the files a write puts in place.
fn refuse_in_the_way_of_removals(disk: &dyn Disk, removals: &[&Path]) -> Result<()> {
    for path in removals {
        let name = backup(path);
        if let Some(kind) = disk.kind(&name)? {
            return Err(Error::InTheWay {
                path: disk.dir().path(&name),
                found: kind.describe(),
                role: "backup",
                target: path.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// Creates the folders, stages every file, keeps every old one, then renames; a file the
/// write removes is removed last, its backup kept like any other.
fn put_in_place(disk: &dyn Disk, journal: &Journal, changes: &[&PlannedFile]) -> Result<()> {
    for dir in &journal.created_dirs {
        disk.create_dir(dir)?;
    }
    for (file, entry) in changes.iter().zip(&journal.files) {
        let like = entry.existed.then_some(file.path.as_path());
        disk.write_new(&staged(&file.path), file.contents.as_bytes(), like)?;
    }
    for entry in journal.files.iter().filter(|e| e.existed) {
        disk.keep(&entry.path, &backup(&entry.path))?;
    }
    for entry in journal.files.iter().filter(|e| !e.removed) {
        disk.rename(&staged(&entry.path), &entry.path)?;
    }
    for entry in journal.files.iter().filter(|e| e.removed) {
        disk.remove_file(&entry.path)?;
    }
    Ok(())
}

/// Writes the journal atomically: whole, or not at all.
fn save(disk: &dyn Disk, journal: &Journal) -> Result<()> {
    let path = Path::new(JOURNAL);
    let temp = staged(path);
    let bytes = serde_json::to_vec(journal).map_err(|e| untrusted(disk, e.to_string()))?;
    remove_if_there(disk, &temp)?;
    disk.write_new(&temp, &bytes, None)?;
    Ok(disk.rename(&temp, path)?)
}

/// Brings the folder back to before the write (or, once committed, clears leftovers), then
/// removes the journal. Every step is tried; the first failure is returned, and the journal
/// is kept when anything failed, for the next run to finish.
fn undo(disk: &dyn Disk, journal: &Journal) -> Result<()> {
    let mut failures = Failures::default();
    for entry in journal.files.iter().rev() {
        let target = entry.path.as_path();
        let backup = backup(target);
        if !journal.committed {
            if entry.existed && disk.kind(&backup).is_ok_and(|k| k.is_some()) {
                failures.note(disk.rename(&backup, target));
            } else if !entry.existed {
                failures.note(remove_if_there(disk, target));
            }
        }
        // A rename onto another name of the same file leaves the backup in place.
        failures.note(remove_if_there(disk, &backup));
        failures.note(remove_if_there(disk, &staged(target)));
    }
    failures.note(remove_if_there(disk, &staged(Path::new(JOURNAL))));
    if let Some(error) = failures.first {
        return Err(error.into());
    }
    remove_if_there(disk, Path::new(JOURNAL))?;
    if !journal.committed {
        for dir in journal.created_dirs.iter().rev() {
            // Only if empty: something else may have been put there since.
            let _ = disk.remove_dir(dir);
        }
    }
    Ok(())
}

fn remove_if_there(disk: &dyn Disk, path: &Path) -> crate_dir::Result<()> {
    match disk.kind(path)? {
        Some(_) => disk.remove_file(path),
        None => Ok(()),
    }
}

/// The first of several steps that failed, the rest having been tried anyway.
#[derive(Default)]
struct Failures {
    first: Option<crate_dir::Error>,
}

impl Failures {
    fn note(&mut self, result: crate_dir::Result<()>) {
        if let Err(error) = result
            && self.first.is_none()
        {
            self.first = Some(error);
        }
    }
}
