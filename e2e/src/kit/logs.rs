//! The operators' logs, read as files: a process's own (`target/e2e/<crate>/<replica>.log`),
//! or a pod's, which the kubelet writes under the node's pod-logs folder in the CRI format
//! (`<time> <stream> <F|P> <line>`). Every check reads lines the runtime logged as JSON, so
//! both kinds give the same lines.

use std::{
    collections::BTreeMap,
    fs,
    io::{Read as _, Seek as _, SeekFrom, Write as _},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

/// What the runtime's error policy logs for every failed reconcile
/// (`operator_gen_runtime::failures::Failures::retry_action`), and nothing else logs: a check
/// whose scenario caused none on purpose fails when one did. A reconcile that fails and is
/// retried still converges, so the checks' outcomes alone never showed it.
pub const FAILED_RECONCILE: &[&str] = &[
    "transient error; retrying",
    "permanent error; waiting for a change",
];

/// The line the program wrote, without the CRI prefix the kubelet adds to a pod's.
pub fn written(line: &str) -> &str {
    let mut parts = line.splitn(4, ' ');
    let (Some(time), Some(stream), Some(tag), Some(rest)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return line;
    };
    let cri =
        time.ends_with('Z') && matches!(stream, "stdout" | "stderr") && matches!(tag, "F" | "P");
    if cri { rest } else { line }
}

/// The `*.log` files in `dir`, sorted; none when it does not exist yet.
pub fn in_folder(dir: &Path) -> Vec<PathBuf> {
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

/// The logs of the pods whose names start with `<deployment>-` in `namespace`, below the
/// node's pod-logs folder: `<namespace>_<pod>_<uid>/<container>/<restart>.log`, and the pod
/// each belongs to.
pub fn of_pods(pod_logs: &Path, namespace: &str, deployment: &str) -> Vec<(String, PathBuf)> {
    let prefix = format!("{namespace}_{deployment}-");
    let mut logs = Vec::new();
    for entry in fs::read_dir(pod_logs).into_iter().flatten().flatten() {
        let folder = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = folder.strip_prefix(&prefix) else {
            continue;
        };
        let Some((pod, _uid)) = rest.rsplit_once('_') else {
            continue;
        };
        let pod = format!("{deployment}-{pod}");
        for container in fs::read_dir(entry.path()).into_iter().flatten().flatten() {
            for log in in_folder(&container.path()) {
                logs.push((pod.clone(), log));
            }
        }
    }
    logs.sort();
    logs
}

/// The text of `log` from byte `from` on. A byte that is no UTF-8 (a line the runtime
/// split inside a character, or one cut short as the read caught it) becomes U+FFFD rather
/// than hiding every line after it.
pub fn read_from(log: &Path, from: u64) -> String {
    String::from_utf8_lossy(&bytes_from(log, from)).into_owned()
}

/// The bytes of `log` from byte `from` on; none when it cannot be read.
fn bytes_from(log: &Path, from: u64) -> Vec<u8> {
    let Ok(mut file) = fs::File::open(log) else {
        return Vec::new();
    };
    if file.seek(SeekFrom::Start(from)).is_err() {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    bytes
}

/// The file's identity on its file system, which a rename keeps.
fn inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt as _;
    fs::metadata(path).ok().map(|meta| meta.ino())
}

/// The file in `log`'s folder that holds the inode `inode` now: `log` itself, or the name the
/// kubelet renamed it to when it rotated it (`0.log.<time>`, compressed later to `.gz`).
fn holding(log: &Path, inode_was: u64) -> Option<PathBuf> {
    let folder = log.parent()?;
    let name = log.file_name()?.to_string_lossy().into_owned();
    fs::read_dir(folder)
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&name))
        })
        .find(|path| inode(path) == Some(inode_was))
}

/// How far each of a set of logs had grown at a moment.
#[derive(Debug, Default, Clone)]
pub struct Marks(BTreeMap<PathBuf, u64>);

impl Marks {
    /// The length of each of `logs` now; a log started later is read from its start.
    pub fn take(logs: &[PathBuf]) -> Self {
        Self(
            logs.iter()
                .filter_map(|log| Some((log.clone(), fs::metadata(log).ok()?.len())))
                .collect(),
        )
    }

    /// Every line of `logs` written since these marks that holds one of `needles`, each
    /// after the name of the log's file.
    pub fn lines_since(&self, logs: &[(String, PathBuf)], needles: &[&str]) -> Vec<String> {
        let mut found = Vec::new();
        for (owner, log) in logs {
            let from = self.0.get(log).copied().unwrap_or(0);
            for line in read_from(log, from)
                .lines()
                .filter(|l| needles.iter().any(|n| l.contains(n)))
            {
                found.push(format!("{owner}: {}", written(line)));
            }
        }
        found
    }
}

/// Copies a Deployment's pods' logs out of the node as they grow, every tenth of a second and
/// on demand, into a folder of the e2e's (`<pod>/<container>-<file>`): the kubelet removes a
/// deleted pod's logs with it, and the checks of a killed pod read what it logged last.
#[derive(Debug)]
pub struct Collector {
    state: Arc<Mutex<Copies>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Copies {
    pod_logs: PathBuf,
    namespace: String,
    deployment: String,
    into: PathBuf,
    /// Each source log's copy and how far it is copied.
    copied: BTreeMap<PathBuf, LogCopy>,
}

/// One container log's copy: the pod it is of, where it is copied to, and the source file
/// (by inode, since the kubelet rotates a log by renaming it) and how many of its bytes.
#[derive(Debug)]
struct LogCopy {
    pod: String,
    to: PathBuf,
    inode: Option<u64>,
    copied: u64,
}

impl LogCopy {
    /// Appends what `log` has past what is copied. Once the kubelet has rotated it (past
    /// `containerLogMaxSize`), the rest of the renamed file goes first, then the new one's.
    fn follow(&mut self, log: &Path) {
        let now = inode(log);
        if let (Some(was), Some(_)) = (self.inode, now)
            && self.inode != now
        {
            if let Some(rotated) = holding(log, was)
                && !self.append(&bytes_from(&rotated, self.copied))
            {
                return;
            }
            self.copied = 0;
        }
        self.inode = now.or(self.inode);
        let _ = self.append(&bytes_from(log, self.copied));
    }

    /// Appends `new` to the copy; whether it was written.
    fn append(&mut self, new: &[u8]) -> bool {
        if new.is_empty() {
            return true;
        }
        if let Some(parent) = self.to.parent() {
            let _ = fs::create_dir_all(parent);
        }
        let appended = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.to)
            .and_then(|mut copy| copy.write_all(new));
        if appended.is_ok() {
            self.copied += new.len() as u64;
        }
        appended.is_ok()
    }
}

impl Copies {
    fn copy(&mut self) {
        for (pod, log) in of_pods(&self.pod_logs, &self.namespace, &self.deployment) {
            let container = log
                .parent()
                .and_then(Path::file_name)
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let file = log
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let to = self.into.join(&pod).join(format!("{container}-{file}"));
            self.copied
                .entry(log.clone())
                .or_insert_with(|| LogCopy {
                    pod,
                    to,
                    inode: None,
                    copied: 0,
                })
                .follow(&log);
        }
    }
}

impl Collector {
    /// Starts copying the logs of `deployment`'s pods in `namespace` from the node's
    /// `pod_logs` into `into`.
    pub fn start(pod_logs: &Path, namespace: &str, deployment: &str, into: PathBuf) -> Self {
        let state = Arc::new(Mutex::new(Copies {
            pod_logs: pod_logs.to_owned(),
            namespace: namespace.to_owned(),
            deployment: deployment.to_owned(),
            into,
            copied: BTreeMap::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (state, stop) = (Arc::clone(&state), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    state.lock().unwrap_or_else(PoisonError::into_inner).copy();
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Self {
            state,
            stop,
            thread: Some(thread),
        }
    }

    /// Copies what the logs have now.
    pub fn copy_now(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .copy();
    }

    /// The copies, each with the pod it is of.
    pub fn files(&self) -> Vec<(String, PathBuf)> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .copied
            .values()
            .map(|copy| (copy.pod.clone(), copy.to.clone()))
            .collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_line_loses_the_kubelets_prefix_and_a_processs_keeps_all() {
        let json = r#"{"timestamp":"2026-12-01T22:30:40Z","fields":{"message":"m"}}"#;
        let cri = format!("2026-12-01T22:30:40.696050123Z stdout F {json}");
        assert_eq!(written(&cri), json);
        assert_eq!(written(json), json);
        assert_eq!(written("a b c d"), "a b c d");
    }

    #[test]
    fn a_pods_logs_are_found_by_namespace_and_deployment() {
        let dir = tempfile::tempdir().expect("a folder");
        let pod = dir.path().join("ns_op-5c8c-9sf8j_uid-1/operator");
        let other = dir.path().join("ns_other-5c8c-x_uid-2/operator");
        for folder in [&pod, &other] {
            fs::create_dir_all(folder).expect("folders");
            fs::write(folder.join("0.log"), "x\n").expect("written");
        }
        let found = of_pods(dir.path(), "ns", "op");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "op-5c8c-9sf8j");
    }

    #[test]
    fn a_pods_log_is_copied_as_it_grows_and_stays_once_the_pod_is_gone() {
        let node = tempfile::tempdir().expect("a folder");
        let into = tempfile::tempdir().expect("a folder");
        let container = node.path().join("ns_op-a-1_uid/operator");
        fs::create_dir_all(&container).expect("folders");
        fs::write(container.join("0.log"), "one\n").expect("written");
        let collector = Collector::start(node.path(), "ns", "op", into.path().to_owned());
        collector.copy_now();
        append(&container.join("0.log"), b"two\n");
        collector.copy_now();
        fs::remove_dir_all(node.path().join("ns_op-a-1_uid")).expect("the pod is gone");
        collector.copy_now();
        assert_eq!(
            only_copy(&collector),
            ("op-a-1".to_owned(), "one\ntwo\n".to_owned())
        );
    }

    fn append(log: &Path, bytes: &[u8]) {
        let mut file = fs::OpenOptions::new().append(true).open(log).expect("open");
        file.write_all(bytes).expect("appended");
    }

    /// The collector's one copy: its pod, and what it holds.
    fn only_copy(collector: &Collector) -> (String, String) {
        let files = collector.files();
        let [(pod, copy)] = files.as_slice() else {
            panic!("one copy: {files:?}");
        };
        (pod.clone(), fs::read_to_string(copy).expect("the copy"))
    }

    #[test]
    fn a_rotated_log_is_copied_to_its_end_then_the_new_one_from_its_start() {
        let node = tempfile::tempdir().expect("a folder");
        let into = tempfile::tempdir().expect("a folder");
        let container = node.path().join("ns_op-a-1_uid/operator");
        fs::create_dir_all(&container).expect("folders");
        let log = container.join("0.log");
        fs::write(&log, "one\n").expect("written");
        let collector = Collector::start(node.path(), "ns", "op", into.path().to_owned());
        collector.copy_now();
        append(&log, b"two\n");
        // As the kubelet rotates: a rename, then a new file the runtime writes on.
        fs::rename(&log, container.join("0.log.20261202-041946")).expect("renamed");
        fs::write(&log, "3\n").expect("a new log");
        collector.copy_now();
        assert_eq!(only_copy(&collector).1, "one\ntwo\n3\n");
    }

    #[test]
    fn a_byte_that_is_no_utf8_hides_no_line_after_it() {
        let dir = tempfile::tempdir().expect("a folder");
        let log = dir.path().join("a.log");
        fs::write(&log, b"cut \xc2\nfailed after it\n").expect("written");
        let logs = [("a".to_owned(), log)];
        assert_eq!(
            Marks::default().lines_since(&logs, &["failed"]),
            ["a: failed after it"]
        );
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
    fn only_lines_written_after_the_marks_are_found() {
        let dir = tempfile::tempdir().expect("a folder");
        let log = dir.path().join("a.log");
        fs::write(&log, "failed once\n").expect("written");
        let marks = Marks::take(std::slice::from_ref(&log));
        append(&log, b"fine\nfailed again\n");
        let logs = [("a".to_owned(), log)];
        assert_eq!(marks.lines_since(&logs, &["failed"]), ["a: failed again"]);
        assert_eq!(Marks::default().lines_since(&logs, &["failed"]).len(), 2);
    }
}
