//! The plan of files to write, and the only code that touches the output directory.
//!
//! # Guarantees
//!
//! - The whole plan is checked against what is on disk before anything is written, so a run
//!   that must refuse (a hand-edited generated file, a folder holding someone else's Cargo
//!   project) refuses without having written anything.
//! - A file whose content is unchanged is not touched, so its mtime stays and cargo rebuilds
//!   nothing. A checkout with CRLF line endings counts as unchanged.
//! - The vendored runtime's folder is the generator's alone: a file there that the plan does
//!   not hold is removed in the same change ([`stale`]), unless it was edited by hand, which
//!   is refused like any generated file.
//! - Two runs never write one folder at once: a write holds an exclusive lock on it, a check
//!   a shared one, and a run that cannot take its lock fails at once, naming the folder
//!   ([`lock`]).
//! - A run that fails at any point leaves the folder byte for byte as it was. Every file is
//!   first staged beside its target, the old file is kept as a backup, and a journal listing
//!   all of it is written before the first rename; a failure rolls back what was renamed.
//!   A kill between two renames leaves the journal, and the next run restores the previous
//!   state from it before doing anything else ([`transaction`]).
//! - New files get the process umask's mode (0644 as usual); an updated file keeps its own.
//! - Nothing below the folder is followed or opened unless it is a plain folder or a regular
//!   file, and every read is capped ([`crate::crate_dir`]); a journal is trusted only for what
//!   the write it describes could have done ([`transaction`]).

mod disk;
mod folder;
mod lock;
mod stale;
mod transaction;

pub use self::folder::check_out;

use std::{
    borrow::Cow,
    collections::BTreeSet,
    fmt,
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};

use self::disk::{Disk, RealDisk};
use crate::{
    crate_dir::{CrateDir, MANIFEST, SAVED_CRD},
    error::{Error, Result},
    limits::{self, MAX_CRATE_FILE_BYTES},
};

/// Who owns a file once it exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ownership {
    /// Rewritten on every run; opens with a header carrying a checksum of its body.
    Generated,
    /// Written once for the user to edit, and never overwritten.
    Scaffold,
}

/// One file of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// Path relative to the output directory.
    pub path: PathBuf,
    pub contents: String,
    pub ownership: Ownership,
}

/// Every file a run produces, sorted by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub files: Vec<PlannedFile>,
    /// What else a run of the generator may have written into a crate folder, which its
    /// maker names: a journal that a killed run left naming only these and `files` is
    /// trusted, and one naming anything else was not left by a write.
    may_write: BTreeSet<PathBuf>,
}

/// What a run does on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Write changes. With `force`, hand-edited generated files are overwritten.
    Write { force: bool },
    /// Write nothing; report what would change.
    Check,
}

/// Whether `name`, in a crate folder, is only the journal a killed run was writing.
pub fn is_staged_journal(name: &str) -> bool {
    transaction::is_staged_journal(name)
}

/// Restores the folder at `root` if an interrupted write left it half done, and says whether
/// it did. `new` runs this first, so that a `new` killed part-way is removed by the next one.
///
/// `plan` names what a run may write (see [`Plan::may_also_write`]).
pub fn recover(root: &Path, plan: &Plan) -> Result<bool> {
    let disk = RealDisk(CrateDir::new(root));
    let _lock = lock::take(&disk, Mode::Write { force: false }, false)?;
    transaction::recover(&disk, &|path| plan.can_write(path))
}

/// What happened (or would happen) to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Created,
    Updated,
    Unchanged,
    /// A scaffold file that exists already and belongs to the user.
    KeptUser,
    /// A generated file edited by hand: a write without `--force` refuses it, so check mode
    /// reports it as a change that needs a decision.
    HandEdited,
    /// A file of the generator's own folders (the vendored runtime) that the plan no longer
    /// has: removed. One edited by hand is [`Outcome::HandEdited`], and removed with `--force`.
    Removed,
}

/// The per-file outcomes of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub files: Vec<(PathBuf, Outcome)>,
    /// Whether the run first restored the folder an interrupted run had left.
    pub recovered: bool,
}

impl Report {
    /// Files that were, or in check mode would be, created or updated.
    pub fn changed(&self) -> Vec<&Path> {
        self.files
            .iter()
            .filter(|(_, o)| {
                matches!(
                    o,
                    Outcome::Created | Outcome::Updated | Outcome::HandEdited | Outcome::Removed
                )
            })
            .map(|(p, _)| p.as_path())
            .collect()
    }

    /// Files that were, or in check mode would be, removed.
    pub fn removed(&self) -> Vec<&Path> {
        self.files
            .iter()
            .filter(|(_, o)| *o == Outcome::Removed)
            .map(|(p, _)| p.as_path())
            .collect()
    }

    /// Generated files edited by hand, which a write refuses without `--force`.
    pub fn hand_edited(&self) -> Vec<&Path> {
        self.files
            .iter()
            .filter(|(_, o)| *o == Outcome::HandEdited)
            .map(|(p, _)| p.as_path())
            .collect()
    }

    fn count(&self, outcome: Outcome) -> usize {
        self.files.iter().filter(|(_, o)| *o == outcome).count()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.recovered {
            f.write_str("restored the folder an interrupted run left, then ")?;
        }
        write!(
            f,
            "{} created, {} updated, {} unchanged, {} kept as the user's",
            self.count(Outcome::Created),
            self.count(Outcome::Updated),
            self.count(Outcome::Unchanged),
            self.count(Outcome::KeptUser)
        )?;
        if self.count(Outcome::Removed) > 0 {
            write!(f, ", {} removed", self.count(Outcome::Removed))?;
        }
        match self.count(Outcome::HandEdited) {
            0 => Ok(()),
            n => write!(f, ", {n} edited by hand"),
        }
    }
}

const CHECKSUM_MARK: &str = "checksum: sha256:";

/// What every generated file's first line says, and what marks a folder as made by
/// operator-gen.
pub const GENERATED_MARK: &str = "@generated by operator-gen";

/// The opening of a Markdown (HTML) comment, which unlike a line comment needs closing.
pub const MARKDOWN_COMMENT: &str = "<!--";

/// What a JSON file's checksum line opens with: JSON has no comments, so the checksum is the
/// value of a key of its object that JSON Schema ignores.
pub const JSON_CHECKSUM_COMMENT: &str = "  \"x-operator-gen-checksum\": \"";

/// What ends a header line that opens with `comment`: ` -->` in Markdown, the string and the
/// entry in JSON, nothing elsewhere.
pub fn comment_close(comment: &str) -> &'static str {
    match comment {
        MARKDOWN_COMMENT => " -->",
        JSON_CHECKSUM_COMMENT => "\",",
        _ => "",
    }
}

/// The header line that carries a generated file's checksum, in the file's comment syntax.
pub fn checksum_line(comment: &str, body: &str) -> String {
    format!(
        "{comment} {CHECKSUM_MARK}{}{}",
        hex(&Sha256::digest(body.as_bytes())),
        comment_close(comment)
    )
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `text` with CRLF line endings turned into LF, as git writes files on a Windows checkout.
fn lf(text: &[u8]) -> Cow<'_, [u8]> {
    if !text.windows(2).any(|w| w == b"\r\n") {
        return Cow::Borrowed(text);
    }
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.iter().peekable();
    while let Some(&b) = bytes.next() {
        if b == b'\r' && bytes.peek() == Some(&&b'\n') {
            continue;
        }
        out.push(b);
    }
    Cow::Owned(out)
}

/// Whether an existing generated file still has the body its checksum line records, line
/// endings aside. A file without a checksum line (an old or foreign file) counts as edited.
pub(crate) fn is_pristine(existing: &str) -> bool {
    let mut offset = 0;
    for line in existing.split_inclusive('\n') {
        offset += line.len();
        if let Some((comment, _)) = line.split_once(CHECKSUM_MARK) {
            let body = &existing[offset..];
            return line.trim_end() == checksum_line(comment.trim_end(), body);
        }
        if offset > 2048 {
            break;
        }
    }
    false
}

impl Plan {
    /// Builds a plan, refusing two files at one path, any path that would leave the
    /// output folder (absolute, or through `..`), and any file larger than
    /// [`MAX_CRATE_FILE_BYTES`], the most the writer reads back.
    pub fn new(mut files: Vec<PlannedFile>) -> Result<Self> {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        if let Some(file) = files.iter().find(|f| !transaction::is_plain(&f.path)) {
            return Err(Error::Template {
                template: file.path.display().to_string(),
                reason: "renders to a path outside the output folder".to_owned(),
            });
        }
        if let Some(file) = files
            .iter()
            .find(|f| f.contents.len() as u64 > MAX_CRATE_FILE_BYTES)
        {
            return Err(Error::Limit {
                origin: file.path.display().to_string(),
                reason: format!(
                    "the generated file would be larger than the {} cap on a file in a crate; \
                     generate from a smaller CRD (fewer versions, or fewer properties)",
                    limits::bytes(MAX_CRATE_FILE_BYTES)
                ),
            });
        }
        if let Some(pair) = files.windows(2).find(|pair| pair[0].path == pair[1].path) {
            return Err(Error::Template {
                template: pair[0].path.display().to_string(),
                reason: "two templates render to the same path".to_owned(),
            });
        }
        Ok(Self {
            files,
            may_write: BTreeSet::new(),
        })
    }

    /// The same plan, which may also have written `paths` (relative to the crate folder) in
    /// an earlier run: every file the plan's maker can produce, whether this run does or not.
    #[must_use]
    pub fn may_also_write<P: Into<PathBuf>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.may_write.extend(paths.into_iter().map(Into::into));
        self
    }

    /// This plan with `other`'s files added; two files at one path are refused.
    pub fn merged(self, other: Plan) -> Result<Self> {
        let mut files = self.files;
        files.extend(other.files);
        let may_write = self.may_write.into_iter().chain(other.may_write);
        Ok(Self::new(files)?.may_also_write(may_write))
    }

    /// Compares the plan with `root` and, in write mode, brings `root` in line with it.
    pub fn apply(&self, root: &Path, mode: Mode) -> Result<Report> {
        self.apply_with(&RealDisk(CrateDir::new(root)), mode)
    }

    /// Whether a plan can write `path`: one of this plan's files, one its maker says it may
    /// write, or the crate's manifest and saved CRD. A journal naming anything else was not
    /// left by a write.
    fn can_write(&self, path: &Path) -> bool {
        self.files.iter().any(|f| f.path == path)
            || self.may_write.contains(path)
            // Any file of the vendored runtime's folder, which the write also removes.
            || crate::vendor::is_vendored(path)
            || [MANIFEST, SAVED_CRD].iter().any(|name| Path::new(name) == path)
    }

    fn apply_with(&self, disk: &dyn Disk, mode: Mode) -> Result<Report> {
        // Held to the end of the run: a second run on the folder fails at once, rather than
        // racing this one on its files.
        let held = lock::take(disk, mode, !self.files.is_empty())?;
        let result = self.apply_locked(disk, mode);
        if result.is_err() {
            held.unmake(disk);
        }
        result
    }

    fn apply_locked(&self, disk: &dyn Disk, mode: Mode) -> Result<Report> {
        refuse_foreign_crate(disk)?;
        let writable = |path: &Path| self.can_write(path);
        let recovered = match mode {
            Mode::Check => {
                transaction::refuse_pending(disk, &writable)?;
                false
            }
            Mode::Write { .. } => transaction::recover(disk, &writable)?,
        };
        let mut outcomes = Vec::with_capacity(self.files.len());
        for file in &self.files {
            let existing = read_existing(disk, &file.path)?;
            let outcome = outcome(file, existing.as_deref());
            if outcome == Outcome::HandEdited && mode == (Mode::Write { force: false }) {
                return Err(Error::HandEdited {
                    path: disk.dir().path(&file.path),
                });
            }
            outcomes.push((file.path.clone(), outcome));
        }
        let stale = stale::files(disk, &self.files)?;
        for path in &stale {
            let existing = read_existing(disk, path)?;
            let pristine = existing
                .as_deref()
                .is_some_and(|bytes| std::str::from_utf8(&lf(bytes)).is_ok_and(is_pristine));
            if !pristine && mode == (Mode::Write { force: false }) {
                return Err(Error::NotGenerated {
                    path: disk.dir().path(path),
                });
            }
            let outcome = if pristine {
                Outcome::Removed
            } else {
                Outcome::HandEdited
            };
            outcomes.push((path.clone(), outcome));
        }
        if let Mode::Write { .. } = mode {
            let changes: Vec<&PlannedFile> = self
                .files
                .iter()
                .zip(&outcomes)
                .filter(|(_, (_, o))| {
                    matches!(o, Outcome::Created | Outcome::Updated | Outcome::HandEdited)
                })
                .map(|(file, _)| file)
                .collect();
            let removals: Vec<&Path> = stale.iter().map(PathBuf::as_path).collect();
            transaction::write(disk, &changes, &removals)?;
            stale::prune(disk);
        }
        Ok(Report {
            files: outcomes,
            recovered,
        })
    }

    /// Unified diffs of what [`Plan::apply`] would change under `root`: generated files that
    /// differ, files that do not exist yet, and files of its own folders it would remove. User-owned files that exist are never shown,
    /// because they are never written. Control characters of the folder's files are
    /// escaped, so a file cannot rewrite the terminal the diff is printed on, and each diff
    /// gives up on a minimal result after [`DIFF_DEADLINE`].
    pub fn diff(&self, root: &Path) -> Result<String> {
        let disk = RealDisk(CrateDir::new(root));
        let mut out = String::new();
        for file in &self.files {
            let existing = read_existing(&disk, &file.path)?;
            let existing = existing
                .as_deref()
                .map(|bytes| String::from_utf8_lossy(&lf(bytes)).into_owned());
            let old = match (&existing, file.ownership) {
                (Some(_), Ownership::Scaffold) => continue,
                (Some(text), Ownership::Generated) if *text == file.contents => continue,
                (Some(text), Ownership::Generated) => text.as_str(),
                (None, _) => "",
            };
            out.push_str(&unified_diff(&file.path, old, &file.contents));
        }
        for path in stale::files(&disk, &self.files)? {
            let existing = read_existing(&disk, &path)?.unwrap_or_default();
            out.push_str(&unified_diff(
                &path,
                &String::from_utf8_lossy(&lf(&existing)),
                "",
            ));
        }
        Ok(out)
    }
}

/// The unified diff of `path` from `old` to `new`, printable.
fn unified_diff(path: &Path, old: &str, new: &str) -> String {
    let name = path.display().to_string();
    let diff = similar::TextDiff::configure()
        .timeout(DIFF_DEADLINE)
        .diff_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string();
    printable_lines(&text)
}

/// What applying `file` over `existing` does.
fn outcome(file: &PlannedFile, existing: Option<&[u8]>) -> Outcome {
    let Some(bytes) = existing else {
        return Outcome::Created;
    };
    if file.ownership == Ownership::Scaffold {
        return Outcome::KeptUser;
    }
    let bytes = lf(bytes);
    if *bytes == *file.contents.as_bytes() {
        return Outcome::Unchanged;
    }
    if std::str::from_utf8(&bytes).is_ok_and(is_pristine) {
        Outcome::Updated
    } else {
        Outcome::HandEdited
    }
}

/// How long one file's diff may look for a minimal result before it settles for a larger
/// one: a hostile file of many distinct lines cannot hold `--diff` for long.
pub const DIFF_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

/// `text` with every control character but the line feeds escaped (`\u{1b}`), and the line
/// and paragraph separators and bidi controls too, as [`crate::text::Text::comment`] does:
/// what a diff prints comes from the crate folder's files.
fn printable_lines(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| match line.strip_suffix('\n') {
            Some(body) => crate::text::Text::new(body.to_owned()).comment() + "\n",
            None => crate::text::Text::new(line.to_owned()).comment(),
        })
        .collect()
}

/// Refuses a folder that holds a Cargo project operator-gen did not make: its Cargo.toml
/// would be overwritten, and `--force` is for generated files edited by hand, not for this.
fn refuse_foreign_crate(disk: &dyn Disk) -> Result<()> {
    let Some(bytes) = read_existing(disk, Path::new("Cargo.toml"))? else {
        return Ok(());
    };
    if folder::opens_with_mark(&bytes) {
        Ok(())
    } else {
        Err(Error::ForeignCrate {
            dir: disk.dir().root().to_owned(),
        })
    }
}

/// The file at `path` below the folder, or `None` when there is none yet.
fn read_existing(disk: &dyn Disk, path: &Path) -> Result<Option<Vec<u8>>> {
    Ok(disk.read(path, MAX_CRATE_FILE_BYTES)?)
}

#[cfg(test)]
pub(crate) mod tests;
