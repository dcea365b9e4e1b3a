//! The reconciles an operator under test failed, read from its processes' logs: a check whose
//! scenario caused none on purpose fails when one did. A reconcile that fails and is retried
//! still converges, so the checks' outcomes alone never showed it.

use std::{
    collections::BTreeMap,
    fs,
    io::{Read as _, Seek as _, SeekFrom},
    path::{Path, PathBuf},
};

/// What the runtime's error policy logs for every failed reconcile
/// (`operator_gen_runtime::failures::Failures::retry_action`), and nothing else logs.
const FAILED_RECONCILE: &[&str] = &[
    "transient error; retrying",
    "permanent error; waiting for a change",
];

/// How far each process's log had grown when a check started.
#[derive(Debug, Default)]
pub(super) struct Marks(BTreeMap<PathBuf, u64>);

impl Marks {
    /// The length of every `*.log` in `dir` now; a log started later is read from its start.
    pub(super) fn take(dir: &Path) -> Self {
        let lengths = logs(dir)
            .into_iter()
            .filter_map(|log| Some((log.clone(), fs::metadata(&log).ok()?.len())))
            .collect();
        Self(lengths)
    }

    /// Every line logged in `dir` since these marks that says a reconcile failed, each after
    /// the name of the log it is in.
    pub(super) fn failed_since(&self, dir: &Path) -> Vec<String> {
        let mut failed = Vec::new();
        for log in logs(dir) {
            let from = self.0.get(&log).copied().unwrap_or(0);
            let name = log.file_stem().unwrap_or_default().to_string_lossy();
            let text = read_from(&log, from);
            for line in text
                .lines()
                .filter(|l| FAILED_RECONCILE.iter().any(|f| l.contains(f)))
            {
                failed.push(format!("{name}: {line}"));
            }
        }
        failed
    }
}

/// The `*.log` files in `dir`, sorted; none when it does not exist yet.
fn logs(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

/// What `log` holds from byte `from` on, lossily; nothing when it cannot be read.
fn read_from(log: &Path, from: u64) -> String {
    let mut bytes = Vec::new();
    let read = fs::File::open(log).and_then(|mut file| {
        file.seek(SeekFrom::Start(from))?;
        file.read_to_end(&mut bytes)
    });
    match read {
        Ok(_) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn append(path: &Path, text: &str) {
        let mut file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("a log in the scratch folder");
        file.write_all(text.as_bytes()).expect("written");
    }

    #[test]
    fn only_failed_reconciles_logged_after_the_marks_are_found_in_every_log() {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let first = dir.path().join("operator-0.log");
        append(&first, "WARN transient error; retrying object=a\n");
        let marks = Marks::take(dir.path());
        append(&first, "INFO reconciling\nWARN a watch failed; retrying\n");
        append(
            &first,
            "WARN permanent error; waiting for a change object=b\n",
        );
        // A process started after the marks: all of its log is new.
        append(
            &dir.path().join("operator-1.log"),
            "WARN transient error; retrying object=c\n",
        );
        append(&dir.path().join("notes.txt"), "transient error; retrying\n");
        assert_eq!(
            marks.failed_since(dir.path()),
            [
                "operator-0: WARN permanent error; waiting for a change object=b",
                "operator-1: WARN transient error; retrying object=c",
            ]
        );
        assert!(Marks::take(dir.path()).failed_since(dir.path()).is_empty());
    }

    #[test]
    fn every_line_looked_for_is_one_the_runtimes_error_policy_logs() {
        // Were the runtime to reword one, no failed reconcile would be found again, and every
        // check would pass for want of looking.
        let policy = include_str!("../../../runtime/src/failures.rs");
        for line in FAILED_RECONCILE {
            assert!(
                policy.contains(&format!("\"{line}\")")),
                "runtime/src/failures.rs no longer logs {line:?}"
            );
        }
    }

    #[test]
    fn a_folder_not_made_yet_has_no_failures() {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let missing = dir.path().join("later");
        assert!(Marks::take(&missing).failed_since(&missing).is_empty());
    }
}
