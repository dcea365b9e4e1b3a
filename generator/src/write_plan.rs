//! The plan of files to write, and the only code that touches the output directory.
//!
//! The whole plan is checked against what is on disk before anything is written, so a run
//! that must refuse (a hand-edited generated file) refuses without having written half.
//! Each file is written atomically (temporary file, then rename), and a file whose content
//! is unchanged is not touched at all, so its mtime stays and cargo rebuilds nothing.

use std::{
    fmt,
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

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
}

/// What a run does on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Write changes. With `force`, hand-edited generated files are overwritten.
    Write { force: bool },
    /// Write nothing; report what would change.
    Check,
}

/// What happened (or would happen) to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Created,
    Updated,
    Unchanged,
    /// A scaffold file that exists already and belongs to the user.
    KeptUser,
}

/// The per-file outcomes of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub files: Vec<(PathBuf, Outcome)>,
}

impl Report {
    /// Whether anything was, or in check mode would be, created or updated.
    pub fn changed(&self) -> Vec<&Path> {
        self.files
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Created | Outcome::Updated))
            .map(|(p, _)| p.as_path())
            .collect()
    }

    fn count(&self, outcome: Outcome) -> usize {
        self.files.iter().filter(|(_, o)| *o == outcome).count()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} created, {} updated, {} unchanged, {} kept as the user's",
            self.count(Outcome::Created),
            self.count(Outcome::Updated),
            self.count(Outcome::Unchanged),
            self.count(Outcome::KeptUser)
        )
    }
}

const CHECKSUM_MARK: &str = "checksum: sha256:";

/// The header line that carries a generated file's checksum, in the file's comment syntax.
pub fn checksum_line(comment: &str, body: &str) -> String {
    format!(
        "{comment} {CHECKSUM_MARK}{}",
        hex(&Sha256::digest(body.as_bytes()))
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether an existing generated file still has the body its checksum line records.
/// A file without a checksum line (an old or foreign file) counts as edited.
fn is_pristine(existing: &str) -> bool {
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
    /// Builds a plan, refusing two files at one path.
    pub fn new(mut files: Vec<PlannedFile>) -> Result<Self> {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        if let Some(pair) = files.windows(2).find(|pair| pair[0].path == pair[1].path) {
            return Err(Error::Template {
                template: pair[0].path.display().to_string(),
                reason: "two templates render to the same path".to_owned(),
            });
        }
        Ok(Self { files })
    }

    /// Compares the plan with `root` and, in write mode, brings `root` in line with it.
    pub fn apply(&self, root: &Path, mode: Mode) -> Result<Report> {
        let mut outcomes = Vec::with_capacity(self.files.len());
        for file in &self.files {
            let path = root.join(&file.path);
            let existing = read_existing(&path)?;
            let outcome = match (&existing, file.ownership) {
                (None, _) => Outcome::Created,
                (Some(_), Ownership::Scaffold) => Outcome::KeptUser,
                (Some(bytes), Ownership::Generated) if bytes == file.contents.as_bytes() => {
                    Outcome::Unchanged
                }
                (Some(bytes), Ownership::Generated) => {
                    let pristine = std::str::from_utf8(bytes).is_ok_and(is_pristine);
                    if !pristine && mode == (Mode::Write { force: false }) {
                        return Err(Error::HandEdited { path });
                    }
                    Outcome::Updated
                }
            };
            outcomes.push((file.path.clone(), outcome));
        }
        if let Mode::Write { .. } = mode {
            for (file, (_, outcome)) in self.files.iter().zip(&outcomes) {
                if matches!(outcome, Outcome::Created | Outcome::Updated) {
                    write_atomically(&root.join(&file.path), &file.contents)?;
                }
            }
        }
        Ok(Report { files: outcomes })
    }
}

impl Plan {
    /// Unified diffs of what [`Plan::apply`] would change under `root`: generated files that
    /// differ, and files that do not exist yet. User-owned files that exist are never shown,
    /// because they are never written.
    pub fn diff(&self, root: &Path) -> Result<String> {
        let mut out = String::new();
        for file in &self.files {
            let existing = read_existing(&root.join(&file.path))?;
            let existing = existing.as_deref().map(String::from_utf8_lossy);
            let old = match (&existing, file.ownership) {
                (Some(_), Ownership::Scaffold) => continue,
                (Some(text), Ownership::Generated) if *text == file.contents => continue,
                (Some(text), Ownership::Generated) => text.as_ref(),
                (None, _) => "",
            };
            let name = file.path.display().to_string();
            let diff = similar::TextDiff::from_lines(old, file.contents.as_str());
            out.push_str(
                &diff
                    .unified_diff()
                    .context_radius(3)
                    .header(&format!("a/{name}"), &format!("b/{name}"))
                    .to_string(),
            );
        }
        Ok(out)
    }
}

/// The file at `path`, or `None` when there is none yet.
fn read_existing(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Write {
            path: path.to_owned(),
            source,
        }),
    }
}

fn write_atomically(path: &Path, contents: &str) -> Result<()> {
    let fail = |source| Error::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    std::io::Write::write_all(&mut temp, contents.as_bytes()).map_err(fail)?;
    temp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generated(path: &str, body: &str) -> PlannedFile {
        let contents = format!("// @generated\n{}\n{body}", checksum_line("//", body));
        PlannedFile {
            path: path.into(),
            contents,
            ownership: Ownership::Generated,
        }
    }

    fn scaffold(path: &str, body: &str) -> PlannedFile {
        PlannedFile {
            path: path.into(),
            contents: body.into(),
            ownership: Ownership::Scaffold,
        }
    }

    #[test]
    fn first_run_creates_second_run_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan::new(vec![
            generated("src/a.rs", "fn a() {}\n"),
            scaffold("src/user.rs", "// yours\n"),
        ])
        .unwrap();
        let first = plan
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap();
        assert_eq!(first.changed().len(), 2);
        let mtime = std::fs::metadata(dir.path().join("src/a.rs"))
            .unwrap()
            .modified()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = plan
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap();
        assert!(second.changed().is_empty(), "{second}");
        assert_eq!(
            second.to_string(),
            "0 created, 0 updated, 1 unchanged, 1 kept as the user's"
        );
        assert_eq!(
            std::fs::metadata(dir.path().join("src/a.rs"))
                .unwrap()
                .modified()
                .unwrap(),
            mtime
        );
    }

    #[test]
    fn user_files_are_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/user.rs"), "my code").unwrap();
        let plan = Plan::new(vec![scaffold("src/user.rs", "template")]).unwrap();
        plan.apply(dir.path(), Mode::Write { force: true }).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("src/user.rs")).unwrap(),
            "my code"
        );
    }

    #[test]
    fn check_mode_reports_without_writing() {
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan::new(vec![generated("a.rs", "x\n")]).unwrap();
        let report = plan.apply(dir.path(), Mode::Check).unwrap();
        assert_eq!(report.changed(), vec![Path::new("a.rs")]);
        assert!(!dir.path().join("a.rs").exists());
    }

    #[test]
    fn hand_edits_are_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        Plan::new(vec![generated("b.rs", "old\n")])
            .unwrap()
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap();
        let edited = std::fs::read_to_string(dir.path().join("b.rs")).unwrap() + "// my edit\n";
        std::fs::write(dir.path().join("b.rs"), &edited).unwrap();

        let plan = Plan::new(vec![generated("a.rs", "new\n"), generated("b.rs", "new\n")]).unwrap();
        let err = plan
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap_err()
            .to_string();
        assert!(err.contains("b.rs") && err.contains("--force"), "{err}");
        assert!(
            !dir.path().join("a.rs").exists(),
            "nothing is written when the run refuses"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("b.rs")).unwrap(),
            edited
        );

        plan.apply(dir.path(), Mode::Write { force: true }).unwrap();
        assert!(
            std::fs::read_to_string(dir.path().join("b.rs"))
                .unwrap()
                .ends_with("new\n")
        );
    }

    #[test]
    fn an_outdated_but_untouched_file_is_updated() {
        let dir = tempfile::tempdir().unwrap();
        Plan::new(vec![generated("a.rs", "v1\n")])
            .unwrap()
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap();
        let report = Plan::new(vec![generated("a.rs", "v2\n")])
            .unwrap()
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap();
        assert_eq!(
            report.files,
            vec![(PathBuf::from("a.rs"), Outcome::Updated)]
        );
    }

    #[test]
    fn diff_shows_changed_generated_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let first = Plan::new(vec![
            generated("a.rs", "one\ntwo\n"),
            scaffold("u.rs", "mine\n"),
        ])
        .unwrap();
        first
            .apply(dir.path(), Mode::Write { force: false })
            .unwrap();
        assert_eq!(first.diff(dir.path()).unwrap(), "");
        let second = Plan::new(vec![
            generated("a.rs", "one\nthree\n"),
            scaffold("u.rs", "template\n"),
        ])
        .unwrap();
        let diff = second.diff(dir.path()).unwrap();
        assert!(
            diff.contains("--- a/a.rs") && diff.contains("-two") && diff.contains("+three"),
            "{diff}"
        );
        assert!(!diff.contains("u.rs"), "{diff}");
    }

    #[test]
    fn duplicate_paths_are_refused() {
        assert!(Plan::new(vec![scaffold("a", "1"), scaffold("a", "2")]).is_err());
    }
}
