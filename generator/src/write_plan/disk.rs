//! Every filesystem operation the writer makes, behind a trait so that tests can make any
//! one of them fail, or stop the writer as a kill would. The real one goes through
//! [`CrateDir`], which never follows a link or opens a special file below the crate folder.

use std::path::Path;

use crate::crate_dir::{CrateDir, Error, Kind, Result};

/// The operations of a write, each one small enough that failing it in a test stands for
/// every way the real one can fail (permissions, a full disk, a file-size limit). Paths are
/// relative to the crate folder, except those of the `outside` operations.
pub(super) trait Disk {
    /// The crate folder.
    fn dir(&self) -> &CrateDir;
    /// The regular file's bytes within `max`, or `None` when there is nothing there.
    fn read(&self, path: &Path, max: u64) -> Result<Option<Vec<u8>>>;
    /// What is at `path`, links not followed.
    fn kind(&self, path: &Path) -> Result<Option<Kind>>;
    /// Creates one folder, whose parent exists.
    fn create_dir(&self, path: &Path) -> Result<()>;
    /// Creates a new file holding `contents`, synced to disk. It takes the mode of the file
    /// at `like` when given, else the process umask's.
    fn write_new(&self, path: &Path, contents: &[u8], like: Option<&Path>) -> Result<()>;
    /// Makes `to` a second name of the file at `from` (or a copy of it, keeping its mode).
    fn keep(&self, from: &Path, to: &Path) -> Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    fn remove_file(&self, path: &Path) -> Result<()>;
    /// Removes an empty folder.
    fn remove_dir(&self, path: &Path) -> Result<()>;
    /// Creates the crate folder or one of its missing parents, as the user named it.
    fn create_outside_dir(&self, path: &Path) -> Result<()>;
    /// Removes an empty folder that [`Disk::create_outside_dir`] made.
    fn remove_outside_dir(&self, path: &Path) -> Result<()>;
}

/// The real filesystem, below the crate folder.
pub(super) struct RealDisk(pub CrateDir);

impl Disk for RealDisk {
    fn dir(&self) -> &CrateDir {
        &self.0
    }

    fn read(&self, path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
        self.0.read(path, max)
    }

    fn kind(&self, path: &Path) -> Result<Option<Kind>> {
        self.0.kind(path)
    }

    fn create_dir(&self, path: &Path) -> Result<()> {
        self.0.create_dir(path)
    }

    fn write_new(&self, path: &Path, contents: &[u8], like: Option<&Path>) -> Result<()> {
        self.0.write_new(path, contents, like)
    }

    fn keep(&self, from: &Path, to: &Path) -> Result<()> {
        self.0.link_or_copy(from, to)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.0.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.0.remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> Result<()> {
        self.0.remove_dir(path)
    }

    fn create_outside_dir(&self, path: &Path) -> Result<()> {
        std::fs::create_dir(path).map_err(|cause| Error::Io {
            action: "creating",
            path: path.to_owned(),
            cause,
        })
    }

    fn remove_outside_dir(&self, path: &Path) -> Result<()> {
        std::fs::remove_dir(path).map_err(|cause| Error::Io {
            action: "removing",
            path: path.to_owned(),
            cause,
        })
    }
}
