//! Every filesystem operation the writer makes, behind a trait so that tests can make any
//! one of them fail, or stop the writer as a kill would.

use std::{
    fs,
    io::{self, Write},
    path::Path,
};

/// The operations of a write, each one small enough that failing it in a test stands for
/// every way the real one can fail (permissions, a full disk, a file-size limit).
pub(super) trait Disk {
    /// The file's bytes, or `None` when there is no file.
    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>>;
    /// Whether anything is at `path`.
    fn exists(&self, path: &Path) -> bool;
    /// Creates one directory, whose parent exists.
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// Creates a new file holding `contents`, synced to disk. It takes the mode of the file
    /// at `like` when given, else the process umask's.
    fn write_new(&self, path: &Path, contents: &[u8], like: Option<&Path>) -> io::Result<()>;
    /// Makes `to` a second name of the file at `from` (or a copy of it, keeping its mode).
    fn keep(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
}

/// The real filesystem.
pub(super) struct RealDisk;

impl Disk for RealDisk {
    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        match fs::read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn exists(&self, path: &Path) -> bool {
        fs::symlink_metadata(path).is_ok()
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }

    fn write_new(&self, path: &Path, contents: &[u8], like: Option<&Path>) -> io::Result<()> {
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o666);
        let mut file = options.open(path)?;
        file.write_all(contents)?;
        if let Some(like) = like {
            file.set_permissions(fs::metadata(like)?.permissions())?;
        }
        file.sync_all()
    }

    fn keep(&self, from: &Path, to: &Path) -> io::Result<()> {
        match fs::hard_link(from, to) {
            Ok(()) => Ok(()),
            Err(_) => fs::copy(from, to).map(drop),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }
}
