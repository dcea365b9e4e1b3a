//! Hostile crate folders: a clone, a tarball or a pull request can hold links, FIFOs, planted
//! journals and manifests, and operator-gen must still touch nothing outside the folder, show
//! nothing of an outside file, and end in bounded time and memory.
//!
//! Each case copies a real generated crate, plants one thing at one path the generator
//! touches, and runs one command (`gen`, `gen --check`, `gen --diff`, `gen --force`, the
//! repeated `gen --crd`, or `new`) in a child process of this test binary with a deadline, so
//! a hang fails its case instead of blocking CI. Then it asserts that:
//!
//! - everything beside the crate is byte for byte as it was (a checksum of every file, link
//!   and folder outside it);
//! - neither the output nor any file in the crate holds a secret of an outside file, or the
//!   child's environment (`/proc/self/environ`);
//! - the run ended within [`DEADLINE`] and [`MAX_PEAK_MIB`] of memory.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use operator_gen::{
    Job, Mode,
    scaffold::{self, NewOperator, NewPrimary},
};
use operator_gen_tests::{crd_with, memory_mib};
use sha2::{Digest, Sha256};

/// Set in a child process: the command it runs, and the case folder.
const COMMAND: &str = "OPERATOR_GEN_FOLDER_COMMAND";
const FOLDER: &str = "OPERATOR_GEN_FOLDER_CASE";
/// A value only the child's environment holds: it must never reach output.
const CANARY_VAR: &str = "OPERATOR_GEN_CANARY";
const CANARY: &str = "canary-7f3e9b1c-environ";
/// What the secret file beside the crate holds.
const SECRET: &str = "OPERATOR_GEN_SECRET=s3cr3t-5d2a8c";
/// Marks the child's report on stdout.
const RESULT: &str = "hostile-folder-result: ";

/// The longest a case may run, generation included, on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(60);
/// The most memory a case's child may hold at its peak.
const MAX_PEAK_MIB: f64 = 1024.0;

/// The commands each planted folder is run under.
const COMMANDS: &[&str] = &["gen", "check", "diff", "force", "gen-crd", "new"];

/// In a child process: runs the command named in the environment on the case folder and
/// prints everything a person would see, then its peak memory.
#[test]
fn one_command_in_a_child_process() {
    let (Ok(command), Ok(folder)) = (std::env::var(COMMAND), std::env::var(FOLDER)) else {
        return;
    };
    let folder = PathBuf::from(folder);
    let out = folder.join("crate");
    let shown = run_command(&command, &folder, &out);
    println!("{shown}");
    println!("{RESULT}{}", memory_mib("VmHWM:"));
}

/// What running `command` shows: the report, warnings and diff, or the error.
fn run_command(command: &str, folder: &Path, out: &Path) -> String {
    let crd = folder.join("crd-source/widget.yaml").display().to_string();
    let job = Job::new(out);
    let result = match command {
        "gen" => job.run(Mode::Write { force: false }),
        "check" | "diff" => job.run(Mode::Check),
        "force" => job.run(Mode::Write { force: true }),
        "gen-crd" => Job {
            crd: Some(crd.clone()),
            ..job
        }
        .run(Mode::Write { force: false }),
        "new" => scaffold::create(&NewOperator {
            dir: out.to_owned(),
            name: Some("widget-controller".to_owned()),
            primary: NewPrimary::Crd {
                source: crd,
                kind: None,
                version: None,
                dynamic: false,
            },
            allow_http: false,
            runtime: None,
        }),
        other => panic!("unknown command {other}"),
    };
    match result {
        Err(error) => format!("error: {error}"),
        Ok((generated, report)) => {
            let mut shown = format!("{report}\n{}\n", generated.warnings.join("\n"));
            if command == "diff" {
                match generated.plan.diff(out) {
                    Ok(diff) => shown.push_str(&diff),
                    Err(error) => shown.push_str(&format!("error: {error}")),
                }
            }
            shown
        }
    }
}

/// One thing planted in a copy of the crate.
struct Plant {
    name: String,
    plant: Box<dyn Fn(&Path) + Sync>,
}

fn plant(name: impl Into<String>, plant: impl Fn(&Path) + Sync + 'static) -> Plant {
    Plant {
        name: name.into(),
        plant: Box::new(plant),
    }
}

/// Replaces whatever is at `path` with nothing.
fn clear(path: &Path) {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if meta.is_dir() {
            std::fs::remove_dir_all(path).expect("removing a folder");
        } else {
            std::fs::remove_file(path).expect("removing a file");
        }
    }
}

fn symlink(target: &Path, at: &Path) {
    clear(at);
    std::os::unix::fs::symlink(target, at).expect("planting a link");
}

fn mkfifo(at: &Path) {
    clear(at);
    let made = Command::new("mkfifo")
        .arg(at)
        .status()
        .expect("running mkfifo");
    assert!(made.success(), "mkfifo {}", at.display());
}

/// Files of the crate the generator reads or writes, and names it stages beside them.
const FILES: &[&str] = &[
    "Cargo.toml",
    "src/controller.rs",
    "src/reconcile.rs",
    "src/types.rs",
    "deploy/base/rbac.yaml",
    "operator.yaml",
    "crd.yaml",
    ".operator-gen-journal",
    "src/.controller.rs.operator-gen-new",
    "src/.controller.rs.operator-gen-old",
];

/// Names the generator touches only to clear them after a journal says so: with no journal, a
/// plant there is left alone, and a run with nothing to write beside it goes on (one that has
/// refuses, naming it).
const UNREAD: &[&str] = &[
    "crd.yaml",
    "src/.controller.rs.operator-gen-new",
    "src/.controller.rs.operator-gen-old",
];

/// Whether `case` must be refused, rather than merely survived: everything planted where the
/// generator reads is, and `new` refuses every planted folder. A manifest's `crd:` is not
/// read when `--crd` overrides it.
fn must_refuse(case: &str) -> bool {
    let overridden = case.starts_with("operator.yaml names") && case.ends_with(", gen-crd");
    let unread = UNREAD
        .iter()
        .any(|file| case.starts_with(&format!("{file} ")));
    case.ends_with(", new") || !overridden && !unread
}

/// Folders of the crate the generator writes into.
const FOLDERS: &[&str] = &["src", "deploy", "deploy/base"];

/// Where a planted link leads, from the case folder.
type Target = fn(&Path) -> PathBuf;

/// Every plant: links to a secret file, `/dev/zero` and `/proc/self/environ` and FIFOs at
/// every file, links to an outside folder (holding a copy of the crate's) at every folder,
/// planted journals and manifests, and a folder of someone else's files.
fn plants() -> Vec<Plant> {
    let mut plants = Vec::new();
    for file in FILES {
        let targets: [(&str, Target); 3] = [
            ("secret", |case| case.join("secret.env")),
            ("dev-zero", |_| PathBuf::from("/dev/zero")),
            ("environ", |_| PathBuf::from("/proc/self/environ")),
        ];
        for (what, target) in targets {
            plants.push(plant(format!("{file} links to {what}"), move |case| {
                symlink(&target(case), &case.join("crate").join(file))
            }));
        }
        plants.push(plant(format!("{file} is a FIFO"), move |case| {
            mkfifo(&case.join("crate").join(file))
        }));
    }
    for folder in FOLDERS {
        plants.push(plant(format!("{folder}/ links outside"), move |case| {
            let inside = case.join("crate").join(folder);
            let outside = case.join("outside/linked");
            copy_tree(&inside, &outside);
            symlink(&outside, &inside);
        }));
    }
    for (name, journal) in journals() {
        plants.push(plant(format!("journal {name}"), move |case| {
            std::fs::write(
                case.join("crate/.operator-gen-journal"),
                journal.to_string(),
            )
            .expect("planting a journal");
        }));
    }
    let manifests = [
        ("the secret beside the crate", "../secret.env"),
        ("the secret by its absolute path", "@/secret.env"),
        ("/proc/self/environ", "/proc/self/environ"),
        ("/dev/zero", "/dev/zero"),
        ("a FIFO beside the crate", "../fifo"),
        ("stdin", "-"),
        ("a link in the crate to the secret", "crd.yaml"),
    ];
    for (name, crd) in manifests {
        plants.push(plant(format!("operator.yaml names {name}"), move |case| {
            let crd = match crd.strip_prefix('@') {
                Some(path) => case
                    .join(path.trim_start_matches('/'))
                    .display()
                    .to_string(),
                None => crd.to_owned(),
            };
            let manifest = format!("name: widget-controller\nprimary:\n  crd: {crd:?}\n");
            std::fs::write(case.join("crate/operator.yaml"), manifest).expect("a manifest");
            symlink(&case.join("secret.env"), &case.join("crate/crd.yaml"));
            mkfifo(&case.join("fifo"));
        }));
    }
    plants.push(plant("a home folder's files", |case| {
        let crate_dir = case.join("crate");
        clear(&crate_dir);
        std::fs::create_dir_all(crate_dir.join("Documents")).expect("a folder");
        std::fs::write(crate_dir.join(".bashrc"), "export PATH\n").expect("a file");
        std::fs::write(crate_dir.join("operator.yaml"), "").expect("a file");
    }));
    plants
}

/// Journals a clone could plant: reaching outside by `..`, by an absolute path, by folder
/// entries, and claiming the user's own file as the interrupted run's.
fn journals() -> Vec<(&'static str, serde_json::Value)> {
    let written = hex(&Sha256::digest(SECRET.as_bytes()));
    let file = |path: &str, existed: bool| {
        serde_json::json!({"committed": false, "created_dirs": [],
            "files": [{"path": path, "existed": existed, "written": written}]})
    };
    vec![
        ("removing ../secret.env", file("../secret.env", false)),
        ("removing an absolute path", file("/tmp/x", false)),
        ("restoring over ../secret.env", file("../secret.env", true)),
        (
            "removing the user's reconcile.rs",
            file("src/reconcile.rs", false),
        ),
        (
            "removing outside folders",
            serde_json::json!({"committed": false, "created_dirs": ["..", "../outside"], "files": []}),
        ),
        (
            "of an older operator-gen",
            serde_json::json!({"committed": false, "created_dirs": ["..", "../outside"],
                "files": [{"path": "../secret.env", "existed": false}]}),
        ),
    ]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Copies the plain files and folders of `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("creating a folder");
    for entry in std::fs::read_dir(from).expect("listing a folder") {
        let entry = entry.expect("an entry");
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().expect("a file type");
        if kind.is_dir() {
            copy_tree(&source, &target);
        } else if kind.is_file() {
            std::fs::copy(&source, &target).expect("copying a file");
        }
    }
}

/// Every name below `dir` but its `crate` folder, with a checksum of what each is: a file's
/// bytes, a link's target, or its kind. Nothing is followed or opened but regular files.
fn outside(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut seen = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).expect("listing a folder") {
            let path = entry.expect("an entry").path();
            if path == dir.join("crate") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).expect("looking at a file");
            let what = if meta.is_dir() {
                stack.push(path.clone());
                "folder".to_owned()
            } else if meta.is_symlink() {
                format!(
                    "link to {}",
                    std::fs::read_link(&path).expect("a link").display()
                )
            } else if meta.is_file() {
                hex(&Sha256::digest(
                    std::fs::read(&path).expect("reading a file"),
                ))
            } else {
                "special".to_owned()
            };
            seen.insert(path, what);
        }
    }
    seen
}

/// The plain files below the crate folder, for a search for leaked text.
fn crate_text(dir: &Path) -> String {
    let mut text = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return text;
    };
    for entry in entries {
        let entry = entry.expect("an entry");
        let kind = entry.file_type().expect("a file type");
        if kind.is_dir() {
            text.push_str(&crate_text(&entry.path()));
        } else if kind.is_file() {
            let bytes = std::fs::read(entry.path()).expect("reading a file");
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    text
}

/// A case folder: the secret, an outside folder, the CRD source, and a copy of the crate.
fn scene(root: &Path, name: &str, template: &Path) -> PathBuf {
    let case = root.join(name);
    let _ = std::fs::remove_dir_all(&case);
    std::fs::create_dir_all(case.join("outside")).expect("a case folder");
    std::fs::write(case.join("secret.env"), SECRET).expect("the secret");
    std::fs::write(case.join("outside/keep.txt"), "keep").expect("an outside file");
    copy_tree(&template.join("crd-source"), &case.join("crd-source"));
    copy_tree(&template.join("crate"), &case.join("crate"));
    case
}

/// The crate every case starts from, made by `gen --crd` as a user would.
fn template(root: &Path) -> PathBuf {
    let template = root.join("template");
    let _ = std::fs::remove_dir_all(&template);
    std::fs::create_dir_all(template.join("crd-source")).expect("the template folder");
    let crd = crd_with(
        "Widget",
        "            spec:\n              type: object\n              properties:\n                size: { type: integer }\n",
    );
    let source = template.join("crd-source/widget.yaml");
    std::fs::write(&source, crd).expect("the CRD");
    let job = Job {
        crd: Some(source.display().to_string()),
        ..Job::new(template.join("crate"))
    };
    job.run(Mode::Write { force: false })
        .expect("the template crate generates");
    template
}

/// What one case did, as the parent sees it.
struct Outcome {
    case: String,
    /// Whether the run ended in an error.
    refused: bool,
    seconds: f64,
    peak_mib: f64,
    problems: Vec<String>,
}

/// Runs `command` on `case` in a child process within [`DEADLINE`]. Its output goes to
/// `log`, beside the case folder, so that a child printing much never blocks on a pipe.
fn run_case(case_name: String, case: &Path, command: &str, log: &Path) -> Outcome {
    let before = outside(case);
    let started = Instant::now();
    let file = std::fs::File::create(log).expect("creating the child's log");
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "one_command_in_a_child_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(COMMAND, command)
        .env(FOLDER, case)
        .env(CANARY_VAR, CANARY)
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("sharing the log"))
        .stderr(file)
        .spawn()
        .expect("starting a child process");
    let mut problems = Vec::new();
    let hung = loop {
        match child.try_wait().expect("waiting for the child") {
            Some(_) => break false,
            None if started.elapsed() > DEADLINE => {
                let _ = child.kill();
                break true;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let _ = child.wait();
    let text =
        String::from_utf8_lossy(&std::fs::read(log).expect("reading the child's log")).into_owned();
    if hung {
        problems.push(format!("ran past the {DEADLINE:?} deadline"));
    }
    let peak_mib = text
        .lines()
        .find_map(|l| l.strip_prefix(RESULT))
        .and_then(|v| v.trim().parse::<f64>().ok());
    match peak_mib {
        None if !hung => problems.push(format!("the child reported nothing:\n{text}")),
        Some(peak) if peak > MAX_PEAK_MIB => problems.push(format!("peaked at {peak:.0} MiB")),
        _ => {}
    }
    for (what, secret) in [
        ("the secret file", "s3cr3t-5d2a8c"),
        ("the environment", CANARY),
    ] {
        if text.contains(secret) {
            problems.push(format!("the output shows {what}:\n{text}"));
        }
        if crate_text(&case.join("crate")).contains(secret) {
            problems.push(format!("a file in the crate holds {what}"));
        }
    }
    let after = outside(case);
    if after != before {
        let changed: Vec<_> = after
            .iter()
            .filter(|(path, what)| before.get(*path) != Some(what))
            .map(|(path, _)| path.display().to_string())
            .chain(
                before
                    .keys()
                    .filter(|path| !after.contains_key(*path))
                    .map(|path| format!("{} (removed)", path.display())),
            )
            .collect();
        problems.push(format!("changed outside the crate: {}", changed.join(", ")));
    }
    Outcome {
        case: case_name,
        refused: text.contains("error: "),
        seconds,
        peak_mib: peak_mib.unwrap_or(0.0),
        problems,
    }
}

#[test]
fn no_hostile_folder_reaches_outside_leaks_or_hangs() {
    if std::env::var_os(COMMAND).is_some() {
        return;
    }
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile-folders");
    let template = template(&root);
    let plants = plants();
    let cases: Vec<(String, &Plant, &str)> = plants
        .iter()
        .flat_map(|p| {
            COMMANDS
                .iter()
                .map(move |c| (format!("{}, {c}", p.name), p, *c))
        })
        .collect();
    let started = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let outcomes = std::sync::Mutex::new(Vec::new());
    // Two at a time: the machine has two cores, and each child generates a crate.
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((name, plant, command)) = cases.get(i) else {
                        break;
                    };
                    let case = scene(&root, &format!("case-{i}"), &template);
                    (plant.plant)(&case);
                    let log = root.join(format!("case-{i}.log"));
                    let outcome = run_case(name.clone(), &case, command, &log);
                    let _ = std::fs::remove_dir_all(&case);
                    let _ = std::fs::remove_file(&log);
                    outcomes.lock().expect("no case panicked").push(outcome);
                }
            });
        }
    });
    let outcomes = outcomes.into_inner().expect("no case panicked");
    let slowest = outcomes
        .iter()
        .max_by(|a, b| a.seconds.total_cmp(&b.seconds))
        .map(|o| format!("{} ({:.1} s)", o.case, o.seconds));
    let largest = outcomes
        .iter()
        .max_by(|a, b| a.peak_mib.total_cmp(&b.peak_mib))
        .map(|o| format!("{} ({:.0} MiB)", o.case, o.peak_mib));
    eprintln!(
        "{} hostile-folder cases in {:.0} s; slowest: {}; largest: {}",
        outcomes.len(),
        started.elapsed().as_secs_f64(),
        slowest.unwrap_or_default(),
        largest.unwrap_or_default()
    );
    let mut problems: Vec<String> = outcomes
        .iter()
        .flat_map(|o| o.problems.iter().map(move |p| format!("{}: {p}", o.case)))
        .collect();
    problems.extend(
        outcomes
            .iter()
            .filter(|o| must_refuse(&o.case) && !o.refused)
            .map(|o| format!("{}: was not refused", o.case)),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(outcomes.len(), cases.len());
}

/// The planted journals are refused, not merely survived: recovery names the journal.
#[test]
fn a_planted_journal_is_refused_naming_it() {
    if std::env::var_os(COMMAND).is_some() {
        return;
    }
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile-journals");
    let template = template(&root);
    for (name, journal) in journals() {
        let case = scene(&root, "case", &template);
        std::fs::write(
            case.join("crate/.operator-gen-journal"),
            journal.to_string(),
        )
        .expect("planting a journal");
        let shown = run_command("gen", &case, &case.join("crate"));
        assert!(
            shown.starts_with("error: ")
                && shown.contains(".operator-gen-journal is not a journal"),
            "{name}: {shown}"
        );
    }
}
