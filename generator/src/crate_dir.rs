//! The crate folder (`--out`) and every file below it, reached one path component at a time
//! so that nothing inside the folder can lead a read, a write or a delete anywhere else.
//!
//! A crate folder comes from strangers as often as a CRD does: a clone, a tarball, a pull
//! request that CI checks with `gen --check`. The folder itself is trusted as the user typed
//! it, links and all. Below it, every component is opened with `openat` and `O_NOFOLLOW`
//! (cap-std alone would still follow a link that stays inside the folder), and only plain
//! folders and regular files are used: a symbolic link, a FIFO, a device or a socket on any
//! path is refused, never followed, opened or read.
//!
//! # Guarantees
//!
//! - A path is walked from the crate folder down, each folder opened with `O_NOFOLLOW |
//!   O_DIRECTORY`, so a link or a non-folder on the way ends the walk with [`Error::NotPlain`].
//! - A file is looked at with `lstat` before it is opened, then opened with `O_NOFOLLOW |
//!   O_NONBLOCK` and its type checked again with `fstat`: a FIFO cannot block the open, and a
//!   device is never opened at all.
//! - A read stops one byte past its cap, so `/dev/zero` or a huge file costs the cap, never
//!   more ([`crate::limits::read_at_most`]).
//! - Changes made by another local user between a check and a use (TOCTOU) are out of scope:
//!   the threat is the folder's content as it arrived, not a concurrent attacker.
//!
//! [`read_regular`] reads a file named from outside the folder (a CRD a manifest names) with
//! the same type check and cap, following links, since that path was given by name.

use std::{
    ffi::OsStr,
    fs::File,
    io::{self, Write as _},
    os::fd::OwnedFd,
    path::{Component, Path, PathBuf},
};

use rustix::{
    fs::{AtFlags, FileType, Mode, OFlags, Stat},
    io::Errno,
};

use crate::{
    limits,
    text::{shown, shown_path},
};

/// The crate's own manifest, in its folder.
pub const MANIFEST: &str = "operator.yaml";

/// The file a CRD read from stdin is saved as, beside the manifest that names it.
pub const SAVED_CRD: &str = "crd.yaml";

/// What can go wrong below the crate folder.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Something other than a plain folder or a regular file is on a path below the folder.
    #[error(
        "{} is {found}, not a plain {wanted}; operator-gen never follows links or opens special files in a crate folder, so that the folder cannot make it read or write anything outside it: replace it with a plain {wanted}, or remove it",
        shown_path(.path)
    )]
    NotPlain {
        path: PathBuf,
        found: &'static str,
        wanted: &'static str,
    },

    /// A file is larger than the cap of the read, which is at least as large as any file
    /// operator-gen writes.
    #[error(
        "{} is larger than {}, more than any file operator-gen reads or writes there holds; move it away",
        shown_path(.path),
        limits::bytes(*.max)
    )]
    TooLarge { path: PathBuf, max: u64 },

    /// A path that is not a plain relative path below the folder: a bug in the caller.
    #[error("{} is not a path below the crate folder; this is a bug in operator-gen", shown_path(.path))]
    Outside { path: PathBuf },

    /// The operating system refused an operation.
    ///
    /// The OS error is part of the message and deliberately not the error's `source()`: a
    /// report that prints the chain (`{:#}`) would print it twice.
    #[error("{action} {}: {}", shown_path(.path), shown(&.cause))]
    Io {
        /// What was being done: `reading`, `writing`, `renaming`, ...
        action: &'static str,
        path: PathBuf,
        cause: io::Error,
    },

    /// Another run holds the folder's lock ([`CrateDir::lock`]).
    #[error(
        "another operator-gen run is writing the crate folder {}{}; try again when it finishes",
        shown_path(.path),
        if *.exclusive { " (or checking it)" } else { "" }
    )]
    Busy {
        path: PathBuf,
        /// Whether this run wanted to write (an exclusive lock), which a check holding the
        /// folder keeps out too.
        exclusive: bool,
    },
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What is at a path, without following a link there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Folder,
    /// Anything else, described for a message: `a symbolic link`, `a FIFO`, ...
    Other(&'static str),
}

impl Kind {
    fn of(file_type: FileType) -> Self {
        match file_type {
            FileType::RegularFile => Self::File,
            FileType::Directory => Self::Folder,
            FileType::Symlink => Self::Other("a symbolic link"),
            FileType::Fifo => Self::Other("a FIFO"),
            FileType::Socket => Self::Other("a socket"),
            FileType::CharacterDevice => Self::Other("a character device"),
            FileType::BlockDevice => Self::Other("a block device"),
            FileType::Unknown => Self::Other("a file of unknown type"),
        }
    }

    /// What it is, for a message: `a file`, `a folder`, `a symbolic link`, ...
    pub fn describe(self) -> &'static str {
        match self {
            Self::File => "a file",
            Self::Folder => "a folder",
            Self::Other(what) => what,
        }
    }
}

fn kind_of(stat: &Stat) -> Kind {
    Kind::of(FileType::from_raw_mode(stat.st_mode))
}

/// The lock [`CrateDir::lock`] took, released when this is dropped.
#[derive(Debug)]
pub struct FolderLock {
    /// The open folder the lock is on: closing it releases the lock. `None` where the
    /// filesystem takes no locks.
    _held: Option<OwnedFd>,
}

/// The crate folder: every path given to its methods is relative to it, made of plain names
/// only (no `..`, no root), and is walked without following links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrateDir {
    root: PathBuf,
}

impl CrateDir {
    /// The folder at `root`, as the user named it; it need not exist yet.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The folder as the user named it.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `relative` as a person finds it: below the folder as the user named it.
    pub fn path(&self, relative: &Path) -> PathBuf {
        self.root.join(relative)
    }

    fn io(&self, action: &'static str, relative: &Path) -> impl FnOnce(Errno) -> Error {
        let path = self.path(relative);
        move |errno| Error::Io {
            action,
            path,
            cause: errno.into(),
        }
    }

    /// The folder itself, or `None` when it does not exist. Opened following links: the
    /// user typed it.
    fn open_root(&self) -> Result<Option<OwnedFd>> {
        let root = if self.root.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.root
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        match rustix::fs::open(root, flags, Mode::empty()) {
            Ok(fd) => Ok(Some(fd)),
            Err(Errno::NOENT) => Ok(None),
            Err(errno) => Err(self.io("opening", Path::new(""))(errno)),
        }
    }

    /// Takes an advisory lock (`flock`) on the folder itself, without waiting: exclusive for
    /// a run that writes (`exclusive`), shared for one that only compares. `None` when the
    /// folder does not exist yet. The lock is held until the returned value is dropped.
    ///
    /// The lock is on the folder's own descriptor, so no lock file is left behind, and the
    /// kernel releases it when the process ends, however it ends: a killed run never leaves a
    /// stale lock. Where the filesystem takes no locks (some network mounts) the run goes on
    /// unlocked, as it would have before: the lock only keeps two runs of operator-gen apart.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] when another run holds a lock this one cannot share.
    pub fn lock(&self, exclusive: bool) -> Result<Option<FolderLock>> {
        use rustix::fs::FlockOperation;

        let Some(fd) = self.open_root()? else {
            return Ok(None);
        };
        let operation = if exclusive {
            FlockOperation::NonBlockingLockExclusive
        } else {
            FlockOperation::NonBlockingLockShared
        };
        loop {
            return match rustix::fs::flock(&fd, operation) {
                Ok(()) => Ok(Some(FolderLock { _held: Some(fd) })),
                Err(Errno::INTR) => continue,
                Err(Errno::WOULDBLOCK) => Err(Error::Busy {
                    path: self.root.clone(),
                    exclusive,
                }),
                Err(_) => Ok(Some(FolderLock { _held: None })),
            };
        }
    }

    /// The folder holding `relative`'s last name, and that name; `None` when a folder on the
    /// way does not exist. Each folder is opened with `O_NOFOLLOW`, so a link on the way is
    /// refused rather than followed.
    fn parent<'a>(&self, relative: &'a Path) -> Result<Option<(OwnedFd, &'a OsStr)>> {
        let names = names(relative).ok_or_else(|| Error::Outside {
            path: self.path(relative),
        })?;
        let Some((last, folders)) = names.split_last() else {
            return Err(Error::Outside {
                path: self.path(relative),
            });
        };
        let Some(mut dir) = self.open_root()? else {
            return Ok(None);
        };
        let mut walked = PathBuf::new();
        for name in folders {
            walked.push(name);
            let flags = OFlags::RDONLY
                | OFlags::DIRECTORY
                | OFlags::NOFOLLOW
                | OFlags::NONBLOCK
                | OFlags::CLOEXEC;
            dir = match rustix::fs::openat(&dir, *name, flags, Mode::empty()) {
                Ok(next) => next,
                Err(Errno::NOENT) => return Ok(None),
                Err(Errno::LOOP | Errno::NOTDIR) => {
                    return Err(self.not_plain(&dir, name, &walked, "folder"));
                }
                Err(errno) => return Err(self.io("opening", &walked)(errno)),
            };
        }
        Ok(Some((dir, last)))
    }

    /// The refusal of `name` in `dir`, saying what it is.
    fn not_plain(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        relative: &Path,
        wanted: &'static str,
    ) -> Error {
        let found = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map(|stat| kind_of(&stat).describe())
            .unwrap_or("not a plain file or folder");
        Error::NotPlain {
            path: self.path(relative),
            found,
            wanted,
        }
    }

    /// What is at `relative` (a link is reported as one, not followed), or `None`.
    pub fn kind(&self, relative: &Path) -> Result<Option<Kind>> {
        let Some((dir, name)) = self.parent(relative)? else {
            return Ok(None);
        };
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(kind_of(&stat))),
            Err(Errno::NOENT) => Ok(None),
            Err(errno) => Err(self.io("looking at", relative)(errno)),
        }
    }

    /// Whether anything at all is at `relative`, a link included.
    pub fn exists(&self, relative: &Path) -> Result<bool> {
        self.kind(relative).map(|kind| kind.is_some())
    }

    /// The regular file at `relative`, opened for reading; `None` when nothing is there.
    fn open_file(&self, relative: &Path) -> Result<Option<(File, Stat)>> {
        let Some((dir, name)) = self.parent(relative)? else {
            return Ok(None);
        };
        let before = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(Errno::NOENT) => return Ok(None),
            Err(errno) => return Err(self.io("looking at", relative)(errno)),
        };
        if kind_of(&before) != Kind::File {
            return Err(self.not_plain(&dir, name, relative, "file"));
        }
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&dir, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => return Err(self.not_plain(&dir, name, relative, "file")),
            Err(errno) => return Err(self.io("opening", relative)(errno)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(self.io("looking at", relative))?;
        if kind_of(&stat) != Kind::File {
            return Err(Error::NotPlain {
                path: self.path(relative),
                found: kind_of(&stat).describe(),
                wanted: "file",
            });
        }
        Ok(Some((File::from(fd), stat)))
    }

    /// The bytes of the regular file at `relative`, at most `max` of them; `None` when
    /// nothing is there.
    pub fn read(&self, relative: &Path, max: u64) -> Result<Option<Vec<u8>>> {
        let Some((file, _)) = self.open_file(relative)? else {
            return Ok(None);
        };
        read_capped(file, self.path(relative), max).map(Some)
    }

    /// Creates the folder `relative`, whose parent exists.
    pub fn create_dir(&self, relative: &Path) -> Result<()> {
        let (dir, name) = self.existing_parent(relative)?;
        rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777))
            .map_err(self.io("creating", relative))
    }

    /// The folder holding `relative`, which must exist.
    fn existing_parent<'a>(&self, relative: &'a Path) -> Result<(OwnedFd, &'a OsStr)> {
        self.parent(relative)?.ok_or_else(|| Error::Io {
            action: "writing",
            path: self.path(relative),
            cause: io::Error::from(io::ErrorKind::NotFound),
        })
    }

    /// Creates a new file at `relative` holding `contents`, synced to disk. Nothing may be
    /// there yet, not even a link. It takes the mode of the regular file at `mode_of` when
    /// given, else the process umask's.
    pub fn write_new(
        &self,
        relative: &Path,
        contents: &[u8],
        mode_of: Option<&Path>,
    ) -> Result<()> {
        let mode = match mode_of {
            Some(like) => self
                .open_file(like)?
                .map(|(_, stat)| Mode::from_raw_mode(stat.st_mode & 0o7777)),
            None => None,
        };
        self.create(relative, contents, mode)
    }

    /// Creates a new file at `relative` holding `contents`, synced to disk, that only its owner
    /// may read or write (mode 0600) from the moment it exists: for a credential.
    pub fn write_new_private(&self, relative: &Path, contents: &[u8]) -> Result<()> {
        self.create(relative, contents, Some(Mode::from_raw_mode(0o600)))
    }

    /// Creates the new file `relative` with `contents`, in `mode` when given (else 0666 under
    /// the umask). A file in a `mode` is created in that mode's bits only, then set to it, so
    /// that it is never more open than asked for.
    fn create(&self, relative: &Path, contents: &[u8], mode: Option<Mode>) -> Result<()> {
        let (dir, name) = self.existing_parent(relative)?;
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::NOCTTY
            | OFlags::CLOEXEC;
        let created = mode.unwrap_or(Mode::from_raw_mode(0o666));
        let fd = rustix::fs::openat(&dir, name, flags, created)
            .map_err(self.io("creating", relative))?;
        if let Some(mode) = mode {
            rustix::fs::fchmod(&fd, mode).map_err(self.io("writing", relative))?;
        }
        let mut file = File::from(fd);
        let written = file.write_all(contents).and_then(|()| file.sync_all());
        written.map_err(|cause| Error::Io {
            action: "writing",
            path: self.path(relative),
            cause,
        })
    }

    /// Makes `to` a second name of the regular file at `from`, or a copy of it with its mode
    /// where the filesystem has no hard links.
    pub fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        let (from_dir, from_name) = self.existing_parent(from)?;
        let (to_dir, to_name) = self.existing_parent(to)?;
        // Without AT_SYMLINK_FOLLOW, a link at `from` would be linked as a link, never
        // followed; the caller has checked that a regular file is there.
        match rustix::fs::linkat(&from_dir, from_name, &to_dir, to_name, AtFlags::empty()) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(self.io("keeping", to)(Errno::EXIST)),
            Err(_) => {
                let bytes = self
                    .read(from, limits::MAX_CRATE_FILE_BYTES)?
                    .unwrap_or_default();
                self.write_new(to, &bytes, Some(from))
            }
        }
    }

    /// Renames `from` to `to`, replacing what is at `to` (a file, never what a link there
    /// points at).
    pub fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (from_dir, from_name) = self.existing_parent(from)?;
        let (to_dir, to_name) = self.existing_parent(to)?;
        rustix::fs::renameat(&from_dir, from_name, &to_dir, to_name)
            .map_err(self.io("renaming", to))
    }

    /// Removes the name `relative` (a link there is removed, not followed).
    pub fn remove_file(&self, relative: &Path) -> Result<()> {
        let (dir, name) = self.existing_parent(relative)?;
        rustix::fs::unlinkat(&dir, name, AtFlags::empty()).map_err(self.io("removing", relative))
    }

    /// Removes the empty folder `relative`.
    pub fn remove_dir(&self, relative: &Path) -> Result<()> {
        let (dir, name) = self.existing_parent(relative)?;
        rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR).map_err(self.io("removing", relative))
    }

    /// The names directly in the folder, each with what it is (links not followed), sorted;
    /// empty when the folder does not exist.
    pub fn entries(&self) -> Result<Vec<(String, Kind)>> {
        let Some(root) = self.open_root()? else {
            return Ok(Vec::new());
        };
        let listing =
            rustix::fs::Dir::read_from(&root).map_err(self.io("listing", Path::new("")))?;
        let mut entries = Vec::new();
        for entry in listing {
            let entry = entry.map_err(self.io("listing", Path::new("")))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name: &OsStr = std::os::unix::ffi::OsStrExt::from_bytes(name);
            let stat = rustix::fs::statat(&root, name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(self.io("looking at", Path::new(name)))?;
            entries.push((name.to_string_lossy().into_owned(), kind_of(&stat)));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(entries)
    }
}

/// The names of a plain relative path, or `None` for one with `..`, a root or a prefix.
fn names(relative: &Path) -> Option<Vec<&OsStr>> {
    relative
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect()
}

/// Reads `file` to its end within `max` bytes.
fn read_capped(file: File, path: PathBuf, max: u64) -> Result<Vec<u8>> {
    match limits::read_at_most(file, max) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(Error::TooLarge { path, max }),
        Err(cause) => Err(Error::Io {
            action: "reading",
            path,
            cause,
        }),
    }
}

/// The regular file at `path`, named from outside the crate folder (a CRD file a manifest
/// names), at most `max` bytes of it; `None` when there is none. Links are followed, since
/// the path names the file; anything but a regular file is refused, and it is opened without
/// blocking, so a FIFO cannot hang the run and a device is never read.
pub fn read_regular(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    let fail = |action: &'static str| {
        move |errno: Errno| Error::Io {
            action,
            path: path.to_owned(),
            cause: errno.into(),
        }
    };
    let stat = match rustix::fs::stat(path) {
        Ok(stat) => stat,
        Err(Errno::NOENT) => return Ok(None),
        Err(errno) => return Err(fail("looking at")(errno)),
    };
    let not_plain = |stat: &Stat| Error::NotPlain {
        path: path.to_owned(),
        found: kind_of(stat).describe(),
        wanted: "file",
    };
    if kind_of(&stat) != Kind::File {
        return Err(not_plain(&stat));
    }
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(fail("opening"))?;
    let stat = rustix::fs::fstat(&fd).map_err(fail("looking at"))?;
    if kind_of(&stat) != Kind::File {
        return Err(not_plain(&stat));
    }
    read_capped(File::from(fd), path.to_owned(), max).map(Some)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// A crate folder holding `src/a.rs`, and a secret file beside it, outside.
    fn scene() -> (tempfile::TempDir, CrateDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("crate");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "fn a() {}").unwrap();
        let secret = tmp.path().join("secret");
        std::fs::write(&secret, "TOKEN=hunter2").unwrap();
        (tmp, CrateDir::new(root), secret)
    }

    fn mkfifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
    }

    #[test]
    fn a_private_file_is_its_owners_alone_and_never_replaces_one() {
        use std::os::unix::fs::PermissionsExt as _;
        let (_tmp, dir, _) = scene();
        dir.write_new_private(Path::new("src/token"), b"t").unwrap();
        let mode = std::fs::metadata(dir.path(Path::new("src/token")))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = dir.write_new_private(Path::new("src/a.rs"), b"t");
        assert!(again.is_err());
        assert_eq!(
            std::fs::read(dir.path(Path::new("src/a.rs"))).unwrap(),
            b"fn a() {}"
        );
    }

    #[test]
    fn plain_files_are_read_within_their_cap() {
        let (_tmp, dir, _) = scene();
        let read = dir.read(Path::new("src/a.rs"), 100).unwrap();
        assert_eq!(read.as_deref(), Some(&b"fn a() {}"[..]));
        assert_eq!(dir.read(Path::new("src/none.rs"), 100).unwrap(), None);
        assert_eq!(dir.read(Path::new("none/a.rs"), 100).unwrap(), None);
        let err = dir.read(Path::new("src/a.rs"), 3).unwrap_err();
        assert!(matches!(err, Error::TooLarge { max: 3, .. }), "{err:?}");
    }

    #[test]
    fn a_link_anywhere_on_a_path_is_refused_not_followed() {
        let (tmp, dir, secret) = scene();
        symlink(&secret, dir.path(Path::new("src/error.rs"))).unwrap();
        symlink(tmp.path(), dir.path(Path::new("deploy"))).unwrap();
        let cases = [
            ("src/error.rs", "src/error.rs", "file"),
            ("deploy/secret", "deploy", "folder"),
        ];
        for (path, link, wanted) in cases {
            let err = dir.read(Path::new(path), 1 << 20).unwrap_err();
            let text = err.to_string();
            assert!(
                matches!(
                    err,
                    Error::NotPlain {
                        found: "a symbolic link",
                        ..
                    }
                ) && text.contains(&format!("crate/{link} is a symbolic link"))
                    && text.contains(&format!("not a plain {wanted}"))
                    && !text.contains("hunter2"),
                "{text}"
            );
        }
        let err = dir
            .write_new(Path::new("deploy/new.yaml"), b"x", None)
            .unwrap_err();
        assert!(matches!(err, Error::NotPlain { .. }), "{err:?}");
        assert!(!tmp.path().join("new.yaml").exists());
        let err = dir
            .write_new(Path::new("src/error.rs"), b"x", None)
            .unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOKEN=hunter2");
        assert_eq!(
            dir.kind(Path::new("src/error.rs")).unwrap(),
            Some(Kind::Other("a symbolic link"))
        );
    }

    /// What a refusal says was found.
    fn found(err: Error) -> &'static str {
        match err {
            Error::NotPlain { found, .. } => found,
            other => panic!("not a refusal: {other:?}"),
        }
    }

    #[test]
    fn a_fifo_or_a_device_is_refused_without_blocking() {
        let (_tmp, dir, _) = scene();
        let fifo = Path::new("src/fifo.rs");
        mkfifo(&dir.path(fifo));
        assert_eq!(found(dir.read(fifo, 100).unwrap_err()), "a FIFO");
        let named = read_regular(&dir.path(fifo), 100).unwrap_err();
        assert_eq!(found(named), "a FIFO");
        let device = read_regular(Path::new("/dev/zero"), 100).unwrap_err();
        assert_eq!(found(device), "a character device");
    }

    #[test]
    fn paths_that_leave_the_folder_are_refused() {
        let (_tmp, dir, _) = scene();
        for path in ["../secret", "/etc/passwd", "src/../../secret", ""] {
            let err = dir.read(Path::new(path), 100).unwrap_err();
            assert!(matches!(err, Error::Outside { .. }), "{path}: {err:?}");
        }
    }

    #[test]
    fn writes_renames_and_removals_stay_below_the_folder() {
        let (_tmp, dir, _) = scene();
        dir.create_dir(Path::new("deploy")).unwrap();
        dir.write_new(Path::new("deploy/.a.new"), b"new", None)
            .unwrap();
        dir.link_or_copy(Path::new("src/a.rs"), Path::new("src/.a.old"))
            .unwrap();
        dir.rename(Path::new("deploy/.a.new"), Path::new("src/a.rs"))
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path(Path::new("src/a.rs"))).unwrap(),
            "new"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path(Path::new("src/.a.old"))).unwrap(),
            "fn a() {}"
        );
        dir.remove_file(Path::new("src/.a.old")).unwrap();
        dir.remove_dir(Path::new("deploy")).unwrap();
        assert_eq!(
            dir.entries().unwrap(),
            vec![("src".to_owned(), Kind::Folder)]
        );
        assert!(!dir.exists(Path::new("deploy")).unwrap());
    }

    #[test]
    fn an_os_error_is_told_once() {
        let (_tmp, dir, _) = scene();
        let err = dir
            .write_new(Path::new("src/a.rs"), b"x", None)
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.ends_with("src/a.rs: File exists (os error 17)")
                && std::error::Error::source(&err).is_none(),
            "{text}"
        );
    }

    #[test]
    fn the_folder_lock_keeps_a_writer_alone_and_lets_checks_share() {
        let (tmp, dir, _) = scene();
        let writing = dir.lock(true).unwrap().expect("the folder exists");
        for exclusive in [true, false] {
            let err = dir.lock(exclusive).unwrap_err();
            assert!(
                matches!(err, Error::Busy { exclusive: e, .. } if e == exclusive),
                "{err:?}"
            );
        }
        drop(writing);
        let checking = dir.lock(false).unwrap().unwrap();
        let checking_too = dir.lock(false).unwrap().unwrap();
        let err = dir.lock(true).unwrap_err().to_string();
        assert!(
            err.contains("another operator-gen run is writing the crate folder")
                && err.contains("crate (or checking it); try again when it finishes"),
            "{err}"
        );
        drop((checking, checking_too));
        assert!(dir.lock(true).unwrap().is_some());
        // Nothing is left behind, and a folder that is not there yet is not locked.
        assert_eq!(
            dir.entries().unwrap(),
            vec![("src".to_owned(), Kind::Folder)]
        );
        assert!(
            CrateDir::new(tmp.path().join("none"))
                .lock(true)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_named_file_outside_is_read_through_links_when_regular() {
        let (tmp, _dir, secret) = scene();
        let link = tmp.path().join("link");
        symlink(&secret, &link).unwrap();
        assert_eq!(
            read_regular(&link, 100).unwrap().as_deref(),
            Some(&b"TOKEN=hunter2"[..])
        );
        assert_eq!(read_regular(&tmp.path().join("none"), 100).unwrap(), None);
    }
}
