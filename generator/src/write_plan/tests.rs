//! The writer's guarantees, on real folders and on a disk that fails where a test says.

use std::{cell::Cell, collections::BTreeMap, io, os::unix::fs::PermissionsExt, path::Path};

use sha2::{Digest, Sha256};

use super::{
    disk::{Disk, RealDisk},
    transaction::JOURNAL,
    *,
};
use crate::crate_dir::{self, Kind};

fn generated(path: &str, body: &str) -> PlannedFile {
    let contents = format!("// {GENERATED_MARK}\n{}\n{body}", checksum_line("//", body));
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

fn write(plan: &Plan, root: &Path) -> Result<Report> {
    plan.apply(root, Mode::Write { force: false })
}

/// Every file and folder under `root`, with each file's bytes and mode: what "byte for byte
/// as it was" compares. Other modules' tests of a run that must leave the disk alone use it too.
pub(crate) fn snapshot(root: &Path) -> BTreeMap<String, (Option<Vec<u8>>, u32)> {
    let mut out = BTreeMap::new();
    if !root.exists() {
        return out;
    }
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            // Links and special files are recorded as what they are, never followed or read.
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                out.insert(name + "/", (None, mode));
                stack.push(path);
            } else if meta.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(
                    name,
                    (Some(target.into_os_string().into_encoded_bytes()), mode),
                );
            } else if meta.is_file() {
                out.insert(name, (Some(std::fs::read(&path).unwrap()), mode));
            } else {
                out.insert(name, (None, mode));
            }
        }
    }
    out
}

#[test]
fn first_run_creates_second_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::new(vec![
        generated("src/a.rs", "fn a() {}\n"),
        scaffold("src/user.rs", "// yours\n"),
    ])
    .unwrap();
    let first = write(&plan, dir.path()).unwrap();
    assert_eq!(first.changed().len(), 2);
    let mtime = std::fs::metadata(dir.path().join("src/a.rs"))
        .unwrap()
        .modified()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let second = write(&plan, dir.path()).unwrap();
    assert!(second.changed().is_empty(), "{second}");
    assert_eq!(
        second.to_string(),
        "0 created, 0 updated, 1 unchanged, 1 kept as the user's"
    );
    let again = std::fs::metadata(dir.path().join("src/a.rs")).unwrap();
    assert_eq!(again.modified().unwrap(), mtime);
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
fn hand_edits_are_refused_before_anything_is_written_and_reported_by_check() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &Plan::new(vec![generated("b.rs", "old\n")]).unwrap(),
        dir.path(),
    )
    .unwrap();
    let edited = std::fs::read_to_string(dir.path().join("b.rs")).unwrap() + "// my edit\n";
    std::fs::write(dir.path().join("b.rs"), &edited).unwrap();

    let plan = Plan::new(vec![generated("a.rs", "new\n"), generated("b.rs", "new\n")]).unwrap();
    let checked = plan.apply(dir.path(), Mode::Check).unwrap();
    assert_eq!(checked.hand_edited(), vec![Path::new("b.rs")]);
    assert!(
        checked.to_string().ends_with("1 edited by hand"),
        "{checked}"
    );
    let err = write(&plan, dir.path()).unwrap_err().to_string();
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
fn a_markdown_header_closes_each_comment_and_still_proves_the_body_untouched() {
    let body = "# Relations\n\nNone.\n";
    let line = checksum_line(MARKDOWN_COMMENT, body);
    assert!(
        line.starts_with("<!-- checksum: sha256:") && line.ends_with(" -->"),
        "{line}"
    );
    let file = format!("<!-- {GENERATED_MARK} -->\n{line}\n{body}");
    assert!(is_pristine(&file), "an untouched Markdown file is pristine");
    assert!(
        !is_pristine(&file.replace("None.", "Edited.")),
        "an edit to the body is seen"
    );
    assert!(
        !is_pristine(&file.replace(" -->\n# Relations", "\n# Relations")),
        "a checksum line that lost its close is not taken as the header"
    );
}

#[test]
fn an_outdated_but_untouched_file_is_updated() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &Plan::new(vec![generated("a.rs", "v1\n")]).unwrap(),
        dir.path(),
    )
    .unwrap();
    let report = write(
        &Plan::new(vec![generated("a.rs", "v2\n")]).unwrap(),
        dir.path(),
    )
    .unwrap();
    assert_eq!(
        report.files,
        vec![(PathBuf::from("a.rs"), Outcome::Updated)]
    );
}

#[test]
fn a_crlf_checkout_is_neither_hand_edited_nor_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::new(vec![generated("a.rs", "one\ntwo\n")]).unwrap();
    write(&plan, dir.path()).unwrap();
    let path = dir.path().join("a.rs");
    let crlf = std::fs::read_to_string(&path)
        .unwrap()
        .replace('\n', "\r\n");
    std::fs::write(&path, &crlf).unwrap();
    let report = write(&plan, dir.path()).unwrap();
    assert_eq!(report.files[0].1, Outcome::Unchanged, "{report}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        crlf,
        "left as checked out"
    );
    let newer = Plan::new(vec![generated("a.rs", "one\nthree\n")]).unwrap();
    let report = write(&newer, dir.path()).unwrap();
    assert_eq!(
        report.files[0].1,
        Outcome::Updated,
        "pristine, so updated: {report}"
    );
}

#[test]
fn a_cargo_project_not_made_here_is_refused_even_with_force() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"mine\"\n",
    )
    .unwrap();
    let plan = Plan::new(vec![generated("Cargo.toml", "[package]\n")]).unwrap();
    for mode in [
        Mode::Check,
        Mode::Write { force: false },
        Mode::Write { force: true },
    ] {
        let err = plan.apply(dir.path(), mode).unwrap_err();
        assert!(matches!(err, Error::ForeignCrate { .. }), "{err:?}");
        let message = err.to_string();
        assert!(
            message.contains("not made by operator-gen") && !message.contains("--force"),
            "{message}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("Cargo.toml")).unwrap(),
        "[package]\nname = \"mine\"\n"
    );
}

#[test]
fn new_files_take_the_umask_and_updated_files_keep_their_mode() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &Plan::new(vec![generated("a.rs", "v1\n")]).unwrap(),
        dir.path(),
    )
    .unwrap();
    std::fs::write(dir.path().join("plain"), "x").unwrap();
    let mode = |name: &str| {
        std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(
        mode("a.rs"),
        mode("plain"),
        "as any file this process creates"
    );
    std::fs::set_permissions(
        dir.path().join("a.rs"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    write(
        &Plan::new(vec![generated("a.rs", "v2\n")]).unwrap(),
        dir.path(),
    )
    .unwrap();
    assert_eq!(mode("a.rs"), 0o600);
}

#[test]
fn diff_shows_changed_generated_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let first = Plan::new(vec![
        generated("a.rs", "one\ntwo\n"),
        scaffold("u.rs", "mine\n"),
    ])
    .unwrap();
    write(&first, dir.path()).unwrap();
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

/// A disk over the folder `root` that fails its `at`-th operation, or from its `at`-th on
/// (`dies`), as a kill would stop every operation after it.
struct Faulty {
    real: RealDisk,
    at: usize,
    dies: bool,
    done: Cell<usize>,
}

impl Faulty {
    fn new(root: &Path, at: usize, dies: bool) -> Self {
        Self {
            real: RealDisk(CrateDir::new(root)),
            at,
            dies,
            done: Cell::new(0),
        }
    }

    fn step(&self) -> crate_dir::Result<()> {
        let n = self.done.get();
        self.done.set(n + 1);
        if n == self.at || (self.dies && n > self.at) {
            return Err(crate_dir::Error::Io {
                action: "injecting",
                path: PathBuf::new(),
                cause: io::Error::other(format!("injected failure at operation {n}")),
            });
        }
        Ok(())
    }
}

impl Disk for Faulty {
    fn dir(&self) -> &CrateDir {
        self.real.dir()
    }
    fn read(&self, path: &Path, max: u64) -> crate_dir::Result<Option<Vec<u8>>> {
        self.step()?;
        self.real.read(path, max)
    }
    fn kind(&self, path: &Path) -> crate_dir::Result<Option<Kind>> {
        self.real.kind(path)
    }
    fn create_dir(&self, path: &Path) -> crate_dir::Result<()> {
        self.step()?;
        self.real.create_dir(path)
    }
    fn write_new(
        &self,
        path: &Path,
        contents: &[u8],
        like: Option<&Path>,
    ) -> crate_dir::Result<()> {
        self.step()?;
        self.real.write_new(path, contents, like)
    }
    fn keep(&self, from: &Path, to: &Path) -> crate_dir::Result<()> {
        self.step()?;
        self.real.keep(from, to)
    }
    fn rename(&self, from: &Path, to: &Path) -> crate_dir::Result<()> {
        self.step()?;
        self.real.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> crate_dir::Result<()> {
        self.step()?;
        self.real.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> crate_dir::Result<()> {
        self.step()?;
        self.real.remove_dir(path)
    }
    fn create_outside_dir(&self, path: &Path) -> crate_dir::Result<()> {
        self.step()?;
        self.real.create_outside_dir(path)
    }
    fn remove_outside_dir(&self, path: &Path) -> crate_dir::Result<()> {
        self.step()?;
        self.real.remove_outside_dir(path)
    }
}

/// A folder with a file the next plan updates, one it leaves unchanged, one it does not
/// know and a vendored runtime file it no longer has, and the plan: an update, an unchanged
/// file, a new file in a new folder, a new file in an existing folder (and the removal).
fn scene() -> (tempfile::TempDir, Plan) {
    let dir = tempfile::tempdir().unwrap();
    let before = Plan::new(vec![
        generated("src/a.rs", "v1\n"),
        generated("src/same.rs", "same\n"),
        generated("vendor/operator-gen-runtime/src/gone.rs", "gone\n"),
    ])
    .unwrap();
    write(&before, dir.path()).unwrap();
    std::fs::set_permissions(
        dir.path().join("src/a.rs"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not ours").unwrap();
    let plan = Plan::new(vec![
        generated("src/a.rs", "v2\n"),
        generated("src/same.rs", "same\n"),
        generated("src/bin/tool.rs", "fn main() {}\n"),
        generated("src/b.rs", "new\n"),
    ])
    .unwrap();
    (dir, plan)
}

/// How many disk operations an undisturbed write of `plan` makes.
fn operations(plan: &Plan) -> usize {
    let (dir, _) = scene();
    let disk = Faulty::new(dir.path(), usize::MAX, false);
    plan.apply_with(&disk, Mode::Write { force: false })
        .unwrap();
    disk.done.get()
}

/// The folder after an undisturbed write of `plan` over the scene.
fn written_scene(plan: &Plan) -> BTreeMap<String, (Option<Vec<u8>>, u32)> {
    let (undisturbed, _) = scene();
    write(plan, undisturbed.path()).unwrap();
    snapshot(undisturbed.path())
}

#[test]
fn a_write_failing_at_any_operation_leaves_the_folder_as_it_was() {
    let (_, plan) = scene();
    let total = operations(&plan);
    assert!(total > 10, "the write makes {total} operations");
    let expected = written_scene(&plan);
    let mut failed = 0;
    for at in 0..total {
        let (dir, plan) = scene();
        let before = snapshot(dir.path());
        let result = plan.apply_with(
            &Faulty::new(dir.path(), at, false),
            Mode::Write { force: false },
        );
        if result.is_err() {
            failed += 1;
            assert_eq!(
                snapshot(dir.path()),
                before,
                "failing operation {at} of {total} changed the folder"
            );
        } else {
            // Only clearing leftovers after every file was in place failed: the write stands,
            // and the next run clears them.
            write(&plan, dir.path()).unwrap();
            assert_eq!(snapshot(dir.path()), expected, "operation {at} of {total}");
        }
    }
    assert!(
        failed > total / 2,
        "{failed} of {total} failures were reported"
    );
}

#[test]
fn a_write_killed_at_any_operation_is_restored_by_the_next_run() {
    let (_, plan) = scene();
    let total = operations(&plan);
    let expected = written_scene(&plan);
    for at in 0..total {
        let (dir, plan) = scene();
        let before = snapshot(dir.path());
        let killed = plan.apply_with(
            &Faulty::new(dir.path(), at, true),
            Mode::Write { force: false },
        );
        let pending = dir.path().join(JOURNAL).exists();
        if pending && killed.is_err() {
            let check = plan.apply(dir.path(), Mode::Check).unwrap_err();
            assert!(matches!(check, Error::Interrupted { .. }), "{check:?}");
            let disk = RealDisk(CrateDir::new(dir.path()));
            assert!(transaction::recover(&disk, &|p| plan.can_write(p)).unwrap());
            assert_eq!(
                snapshot(dir.path()),
                before,
                "killed at {at} of {total}: not restored"
            );
        }
        write(&plan, dir.path()).unwrap();
        assert_eq!(
            snapshot(dir.path()),
            expected,
            "killed at {at} of {total}, then rerun"
        );
    }
}

#[test]
fn a_write_into_a_new_folder_that_fails_leaves_no_folder() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("new-crate");
    let plan = Plan::new(vec![
        generated("src/a.rs", "a\n"),
        generated("Cargo.toml", "b\n"),
    ])
    .unwrap();
    let disk = Faulty::new(&root, usize::MAX, false);
    plan.apply_with(&disk, Mode::Write { force: false })
        .unwrap();
    let total = disk.done.get();
    std::fs::remove_dir_all(&root).unwrap();
    for at in 0..total {
        let result = plan.apply_with(&Faulty::new(&root, at, false), Mode::Write { force: false });
        if result.is_err() {
            assert!(
                !root.exists(),
                "failing operation {at} left {}",
                root.display()
            );
        } else {
            assert!(root.join("src/a.rs").exists() && root.join("Cargo.toml").exists());
            std::fs::remove_dir_all(&root).unwrap();
        }
    }
}

#[test]
fn a_write_into_missing_parent_folders_that_fails_leaves_none_of_them() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("a/b/crate");
    let plan = Plan::new(vec![generated("src/x.rs", "x\n")]).unwrap();
    let disk = Faulty::new(&root, usize::MAX, false);
    plan.apply_with(&disk, Mode::Write { force: false })
        .unwrap();
    let total = disk.done.get();
    std::fs::remove_dir_all(parent.path().join("a")).unwrap();
    for at in 0..total {
        let result = plan.apply_with(&Faulty::new(&root, at, false), Mode::Write { force: false });
        if result.is_err() {
            assert!(
                !parent.path().join("a").exists(),
                "failing operation {at} left a folder"
            );
        } else {
            std::fs::remove_dir_all(parent.path().join("a")).unwrap();
        }
    }
}

#[test]
fn paths_that_leave_the_output_folder_are_refused() {
    for path in ["../x.rs", "/etc/x", "a/../../x", ""] {
        assert!(Plan::new(vec![scaffold(path, "x")]).is_err(), "{path}");
    }
}

#[test]
fn a_run_after_a_kill_says_it_restored_the_folder() {
    let (dir, plan) = scene();
    let killed = plan.apply_with(
        &Faulty::new(dir.path(), 12, true),
        Mode::Write { force: false },
    );
    assert!(killed.is_err() && dir.path().join(JOURNAL).exists());
    let report = write(&plan, dir.path()).unwrap();
    assert!(
        report.recovered && report.to_string().starts_with("restored"),
        "{report}"
    );
    assert!(!write(&plan, dir.path()).unwrap().recovered);
}

#[test]
fn a_read_only_folder_fails_before_changing_anything() {
    let (dir, plan) = scene();
    let src = dir.path().join("src");
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o555)).unwrap();
    let before = snapshot(dir.path());
    let result = write(&plan, dir.path());
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o755)).unwrap();
    if nix_is_root() {
        // Root ignores directory permissions; the fault-injection tests cover this case.
        return;
    }
    assert!(result.is_err());
    let mut after = snapshot(dir.path());
    after.insert("src/".to_owned(), before["src/"].clone());
    assert_eq!(after, before);
}

/// Whether this process runs as root, which writes into read-only folders regardless.
fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// A crate written by `plan` in `dir/crate`, a file and a folder beside it (outside), and a
/// snapshot of everything in `dir` but the crate.
fn planted_scene() -> (tempfile::TempDir, PathBuf, Plan) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("crate");
    let plan = Plan::new(vec![
        generated("src/a.rs", "a\n"),
        scaffold("src/reconcile.rs", "// yours\n"),
        generated("deploy/base/rbac.yaml", "rbac\n"),
    ])
    .unwrap();
    write(&plan, &root).unwrap();
    std::fs::write(dir.path().join("beside.txt"), "TOKEN=hunter2").unwrap();
    std::fs::create_dir(dir.path().join("elsewhere")).unwrap();
    std::fs::write(dir.path().join("elsewhere/keep"), "keep").unwrap();
    (dir, root, plan)
}

/// Everything in `dir` outside its `crate` folder.
fn outside(dir: &Path) -> BTreeMap<String, (Option<Vec<u8>>, u32)> {
    snapshot(dir)
        .into_iter()
        .filter(|(name, _)| !name.starts_with("crate"))
        .collect()
}

fn plant_journal(root: &Path, journal: &serde_json::Value) {
    std::fs::write(root.join(JOURNAL), journal.to_string()).unwrap();
}

#[test]
fn a_planted_journal_that_reaches_outside_is_refused_before_anything_changes() {
    let written = hex(&Sha256::digest(b"TOKEN=hunter2"));
    let cases = [
        serde_json::json!({"committed": false, "created_dirs": [],
            "files": [{"path": "../beside.txt", "existed": false, "written": written}]}),
        serde_json::json!({"committed": false, "created_dirs": [],
            "files": [{"path": "/etc/passwd", "existed": false, "written": written}]}),
        serde_json::json!({"committed": false, "created_dirs": ["..", "../elsewhere"], "files": []}),
        serde_json::json!({"committed": true, "created_dirs": [],
            "files": [{"path": "notes/any.txt", "existed": false, "written": written}]}),
        // The user's own file, which the journal claims the interrupted run created.
        serde_json::json!({"committed": false, "created_dirs": [],
            "files": [{"path": "src/reconcile.rs", "existed": false, "written": written}]}),
        serde_json::json!({"committed": false, "created_dirs": [],
            "files": [{"path": "src/a.rs", "existed": false}]}),
    ];
    for journal in cases {
        let (dir, root, plan) = planted_scene();
        plant_journal(&root, &journal);
        let before = snapshot(dir.path());
        for mode in [Mode::Check, Mode::Write { force: true }] {
            let err = plan.apply(&root, mode).unwrap_err();
            let text = err.to_string();
            assert!(
                matches!(err, Error::Journal { .. })
                    && text.contains(".operator-gen-journal")
                    && text.contains("delete it"),
                "{journal}: {text}"
            );
        }
        assert_eq!(snapshot(dir.path()), before, "{journal}");
    }
}

#[test]
fn a_journal_through_a_link_or_as_a_link_is_refused() {
    let (dir, root, plan) = planted_scene();
    // deploy/ becomes a link to a folder outside that holds what the journal names.
    std::fs::remove_dir_all(root.join("deploy")).unwrap();
    std::fs::create_dir_all(dir.path().join("elsewhere/base")).unwrap();
    std::fs::write(dir.path().join("elsewhere/base/rbac.yaml"), "rbac\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join("deploy")).unwrap();
    let written = hex(&Sha256::digest(b"rbac\n"));
    plant_journal(
        &root,
        &serde_json::json!({"committed": false, "created_dirs": ["deploy/base"],
            "files": [{"path": "deploy/base/rbac.yaml", "existed": false, "written": written}]}),
    );
    let before = outside(dir.path());
    let err = write(&plan, &root).unwrap_err().to_string();
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(outside(dir.path()), before);

    let (dir, root, plan) = planted_scene();
    std::os::unix::fs::symlink(dir.path().join("beside.txt"), root.join(JOURNAL)).unwrap();
    let err = write(&plan, &root).unwrap_err();
    assert!(
        matches!(err, Error::Journal { .. }) && !err.to_string().contains("hunter2"),
        "{err}"
    );
}

#[test]
fn links_fifos_and_huge_files_in_the_crate_are_refused_not_followed() {
    let (dir, root, plan) = planted_scene();
    let secret = dir.path().join("beside.txt");
    let fifo = |p: &Path| {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            p,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap()
    };
    let plants: [&dyn Fn(&Path); 3] = [
        &|p| std::os::unix::fs::symlink(&secret, p).unwrap(),
        &|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
        &fifo,
    ];
    let path = "src/a.rs";
    for plant in plants {
        std::fs::remove_file(root.join(path)).unwrap();
        plant(&root.join(path));
        let before = outside(dir.path());
        for mode in [Mode::Check, Mode::Write { force: true }] {
            let err = plan.apply(&root, mode).unwrap_err().to_string();
            assert!(
                err.contains("not a plain file") && !err.contains("hunter2"),
                "{err}"
            );
        }
        let diff = plan.diff(&root).unwrap_err().to_string();
        assert!(!diff.contains("hunter2"), "{diff}");
        assert_eq!(outside(dir.path()), before);
    }
    // A linked folder: nothing is created or overwritten through it.
    std::fs::remove_file(root.join("src/a.rs")).unwrap();
    std::fs::remove_dir_all(root.join("deploy")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join("deploy")).unwrap();
    let before = outside(dir.path());
    let err = plan
        .apply(&root, Mode::Write { force: true })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("deploy") && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(outside(dir.path()), before);
}

#[test]
fn a_diff_escapes_control_characters_of_the_crates_files() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::new(vec![generated("a.rs", "one\n")]).unwrap();
    write(&plan, dir.path()).unwrap();
    std::fs::write(dir.path().join("a.rs"), "\u{1b}]0;owned\u{7}\u{202e}evil\n").unwrap();
    let diff = plan.diff(dir.path()).unwrap();
    assert!(
        !diff.contains('\u{1b}') && !diff.contains('\u{202e}') && diff.contains("\\u{1b}"),
        "{diff}"
    );
}

#[test]
fn a_plan_holding_a_file_over_the_crate_file_cap_is_refused() {
    let big = "x".repeat(MAX_CRATE_FILE_BYTES as usize + 1);
    let err = Plan::new(vec![scaffold("big.yaml", &big)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("big.yaml") && err.contains("64 MiB"), "{err}");
}

#[test]
fn a_new_crate_killed_at_any_operation_is_removed_by_the_next_run() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("new-crate");
    // Paths a plan of the generator writes: recovery outside a run knows no others.
    let plan = Plan::new(vec![
        generated("src/lib.rs", "a\n"),
        scaffold("operator.yaml", "name: a\n"),
        generated("deploy/base/rbac.yaml", "b\n"),
    ])
    .unwrap();
    let disk = Faulty::new(&root, usize::MAX, false);
    plan.apply_with(&disk, Mode::Write { force: false })
        .unwrap();
    let total = disk.done.get();
    for at in 0..total {
        std::fs::remove_dir_all(&root).unwrap();
        let killed = plan.apply_with(&Faulty::new(&root, at, true), Mode::Write { force: false });
        recover(&root, &crate::render::any_output()).unwrap();
        let left: Vec<String> = CrateDir::new(&root)
            .entries()
            .unwrap()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        // Either nothing of the new crate is left, or all of it (killed after it was in
        // place), which `new` refuses, naming `gen`.
        let complete = left == ["deploy", "operator.yaml", "src"];
        assert!(
            complete || !crate::scaffold::is_occupied(&root),
            "killed at {at} of {total} ({killed:?}): {left:?}"
        );
        std::fs::create_dir_all(&root).unwrap();
    }
}

#[test]
fn a_run_on_a_folder_another_run_holds_fails_at_once_and_the_next_one_writes() {
    let (dir, plan) = scene();
    let before = snapshot(dir.path());
    let other_run = CrateDir::new(dir.path()).lock(true).unwrap().unwrap();
    for mode in [Mode::Write { force: false }, Mode::Check] {
        let started = std::time::Instant::now();
        let err = plan.apply(dir.path(), mode).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, Error::CrateDir(crate_dir::Error::Busy { .. }))
                && text.contains(&format!(
                    "another operator-gen run is writing the crate folder {}",
                    dir.path().display()
                ))
                && text.ends_with("try again when it finishes"),
            "{text}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
    assert_eq!(snapshot(dir.path()), before);
    drop(other_run);
    write(&plan, dir.path()).unwrap();
    assert_eq!(snapshot(dir.path()), written_scene(&plan));
}

/// The real disk, where another run makes the crate folder and locks it just before this run
/// makes it: what two first runs into one new folder do.
struct Racing {
    real: RealDisk,
    other_run: std::cell::RefCell<Option<crate_dir::FolderLock>>,
}

impl Disk for Racing {
    fn dir(&self) -> &CrateDir {
        self.real.dir()
    }
    fn read(&self, path: &Path, max: u64) -> crate_dir::Result<Option<Vec<u8>>> {
        self.real.read(path, max)
    }
    fn kind(&self, path: &Path) -> crate_dir::Result<Option<Kind>> {
        self.real.kind(path)
    }
    fn create_dir(&self, path: &Path) -> crate_dir::Result<()> {
        self.real.create_dir(path)
    }
    fn write_new(
        &self,
        path: &Path,
        contents: &[u8],
        like: Option<&Path>,
    ) -> crate_dir::Result<()> {
        self.real.write_new(path, contents, like)
    }
    fn keep(&self, from: &Path, to: &Path) -> crate_dir::Result<()> {
        self.real.keep(from, to)
    }
    fn rename(&self, from: &Path, to: &Path) -> crate_dir::Result<()> {
        self.real.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> crate_dir::Result<()> {
        self.real.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> crate_dir::Result<()> {
        self.real.remove_dir(path)
    }
    fn create_outside_dir(&self, path: &Path) -> crate_dir::Result<()> {
        if path == self.dir().root() && self.other_run.borrow().is_none() {
            self.real.create_outside_dir(path).unwrap();
            *self.other_run.borrow_mut() = self.dir().lock(true).unwrap();
        }
        self.real.create_outside_dir(path)
    }
    fn remove_outside_dir(&self, path: &Path) -> crate_dir::Result<()> {
        self.real.remove_outside_dir(path)
    }
}

#[test]
fn a_new_folder_another_run_made_first_is_left_to_it() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("a/new-crate");
    let plan = Plan::new(vec![generated("src/a.rs", "a\n")]).unwrap();
    let disk = Racing {
        real: RealDisk(CrateDir::new(&root)),
        other_run: Default::default(),
    };
    let err = plan
        .apply_with(&disk, Mode::Write { force: false })
        .unwrap_err();
    assert!(
        matches!(err, Error::CrateDir(crate_dir::Error::Busy { .. })),
        "{err:?}"
    );
    // The folder is the other run's: this one neither wrote in it nor removed it.
    assert!(root.is_dir() && std::fs::read_dir(&root).unwrap().next().is_none());
    drop(disk);
    write(&plan, &root).unwrap();
    assert!(root.join("src/a.rs").is_file());
}

#[test]
fn a_file_at_a_backup_or_new_version_name_is_refused_naming_it_and_kept() {
    let fifo = |p: &Path| {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            p,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap()
    };
    type Plant<'a> = &'a dyn Fn(&Path);
    let planted: [(&str, &str, Plant); 4] = [
        // The backup of a file the write updates: a rollback would have put it in place.
        ("src/.a.rs.operator-gen-old", "a file", &|p| {
            std::fs::write(p, "planted").unwrap()
        }),
        ("src/.a.rs.operator-gen-new", "a symbolic link", &|p| {
            std::os::unix::fs::symlink("/etc/passwd", p).unwrap()
        }),
        // The new version of a file the write creates.
        ("src/.b.rs.operator-gen-new", "a FIFO", &fifo),
        ("src/bin/.tool.rs.operator-gen-old", "a folder", &|p| {
            std::fs::create_dir_all(p).unwrap()
        }),
    ];
    for (path, found, plant) in planted {
        let (dir, plan) = scene();
        std::fs::create_dir_all(dir.path().join(path).parent().unwrap()).unwrap();
        plant(&dir.path().join(path));
        let before = snapshot(dir.path());
        let err = plan
            .apply(dir.path(), Mode::Write { force: true })
            .unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, Error::InTheWay { .. })
                && text.starts_with(&format!(
                    "{} is in the way: it is {found}",
                    dir.path().join(path).display()
                ))
                && text.contains("the leftover of an interrupted run")
                && text.contains("remove it, and run again")
                && !text.contains("os error")
                && std::error::Error::source(&err).is_none(),
            "{text}"
        );
        assert_eq!(snapshot(dir.path()), before, "{path}");
        let _ = std::fs::remove_file(dir.path().join(path));
        let _ = std::fs::remove_dir(dir.path().join(path));
        write(&plan, dir.path()).unwrap();
        assert_eq!(snapshot(dir.path()), written_scene(&plan), "{path}");
    }
}
