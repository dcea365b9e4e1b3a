//! The lock that keeps a second run out of a crate folder while one writes it.
//!
//! Two runs writing one folder at once would race on the journal and the staging names, and
//! both would fail, each rolling back what it could. So a write holds an exclusive lock on the
//! folder from before its first read to its end, and a check a shared one: a second run fails
//! at once, naming the folder ([`crate_dir::Error::Busy`]). A folder that does not exist yet
//! is made first, so that it is locked before anything is compared against it.

use std::{io, path::PathBuf};

use super::{Mode, disk::Disk};
use crate::{
    crate_dir::{self, FolderLock},
    error::Result,
};

/// The lock of a run, and the folders the run made to hold it.
pub(super) struct Held {
    _lock: Option<FolderLock>,
    /// The crate folder and its parents that did not exist, shallowest first. They are never
    /// journaled (the journal lies inside them): a failed run removes them again if they are
    /// still empty, and after a kill they stay, empty or holding the journal.
    made: Vec<PathBuf>,
}

impl Held {
    /// Removes the folders the run made, if nothing has been put in them since; for a run
    /// that failed.
    pub(super) fn unmake(&self, disk: &dyn Disk) {
        for dir in self.made.iter().rev() {
            // Only if empty: the journal of a write that could not be undone stays there.
            let _ = disk.remove_outside_dir(dir);
        }
    }
}

/// Locks the crate folder for a run in `mode`. A write into a folder that does not exist yet
/// makes it and its missing parents first when `create` (it has files to write).
///
/// # Errors
///
/// [`crate_dir::Error::Busy`] when another run holds the folder, and any failure to make it.
pub(super) fn take(disk: &dyn Disk, mode: Mode, create: bool) -> Result<Held> {
    let exclusive = matches!(mode, Mode::Write { .. });
    let lock = disk.dir().lock(exclusive)?;
    if lock.is_some() || !exclusive || !create {
        return Ok(Held {
            _lock: lock,
            made: Vec::new(),
        });
    }
    let mut held = Held {
        _lock: None,
        made: Vec::new(),
    };
    for dir in missing(disk.dir().root()) {
        match disk.create_outside_dir(&dir) {
            Ok(()) => held.made.push(dir),
            // Another run made it meanwhile: the lock below tells whether it still writes.
            Err(crate_dir::Error::Io { cause, .. })
                if cause.kind() == io::ErrorKind::AlreadyExists => {}
            Err(error) => {
                held.unmake(disk);
                return Err(error.into());
            }
        }
    }
    // `None` here (a dangling link at --out) leaves the write to fail as the OS says.
    match disk.dir().lock(true) {
        Ok(lock) => held._lock = lock,
        // Another run locked the folder this one made before this one could: it is that
        // run's now, to fill or to remove.
        Err(error @ crate_dir::Error::Busy { .. }) => return Err(error.into()),
        Err(error) => {
            held.unmake(disk);
            return Err(error.into());
        }
    }
    Ok(held)
}

/// The crate folder and its parents that do not exist yet, shallowest first.
fn missing(root: &std::path::Path) -> Vec<PathBuf> {
    let mut missing: Vec<PathBuf> = root
        .ancestors()
        .take_while(|dir| !dir.as_os_str().is_empty() && std::fs::symlink_metadata(dir).is_err())
        .map(|dir| dir.to_path_buf())
        .collect();
    missing.reverse();
    missing
}
