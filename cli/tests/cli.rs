//! The installed `operator-gen` binary, run as a user runs it: from any folder.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

fn operator_gen(folder: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_operator-gen"))
        .args(args)
        .current_dir(folder)
        .output()
        .expect("operator-gen runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `operator-gen` run in `folder` with `stdin` as its standard input.
fn operator_gen_with_stdin(folder: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_operator-gen"))
        .args(args)
        .current_dir(folder)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("operator-gen runs");
    child
        .stdin
        .take()
        .expect("a pipe")
        .write_all(stdin)
        .expect("operator-gen reads stdin");
    child.wait_with_output().expect("operator-gen ends")
}

/// The operator-gen workspace, whose Cargo.lock and target folder a generated crate reuses.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ sits in the workspace")
        .to_owned()
}

/// The PrometheusRule CRD this repository bundles.
fn bundled_crd() -> PathBuf {
    workspace().join("crds/monitoring.coreos.com/prometheusrules.yaml")
}

/// Runs `operator-gen new <name>` in `folder` on the PrometheusRule CRD this repository
/// bundles, asserting that it succeeds; returns what it printed.
fn new_crate(folder: &Path, name: &str) -> String {
    let crd = bundled_crd();
    let crd = crd.to_str().expect("a UTF-8 path");
    let created = operator_gen(folder, &["new", name, "--crd", crd]);
    assert!(created.status.success(), "{}", text(&created));
    text(&created)
}

#[test]
fn every_subcommand_explains_itself() {
    let here = std::env::temp_dir();
    for args in [
        &["--help"][..],
        &["gen", "--help"],
        &["new", "--help"],
        &["image", "--help"],
    ] {
        let output = operator_gen(&here, args);
        assert!(output.status.success(), "{args:?}: {}", text(&output));
        assert!(
            text(&output).contains("Usage: operator-gen"),
            "{}",
            text(&output)
        );
    }
    let gen_help = text(&operator_gen(&here, &["gen", "--help"]));
    for flag in [
        "--crd",
        "--kind",
        "--version",
        "--manifest",
        "--out",
        "--check",
        "--diff",
        "--force",
        "--allow-http",
    ] {
        assert!(
            gen_help.contains(flag),
            "gen --help does not mention {flag}"
        );
    }
}

#[test]
fn a_new_crate_regenerates_from_its_own_folder_with_no_flags() {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let created = new_crate(scratch.path(), "rules-operator");
    assert!(
        created.contains("operator-gen gen --out rules-operator"),
        "{created}"
    );

    let crate_dir = scratch.path().join("rules-operator");
    let before = std::fs::read_to_string(crate_dir.join("src/controller.rs")).expect("generated");
    let checked = operator_gen(&crate_dir, &["gen", "--check"]);
    assert!(checked.status.success(), "{}", text(&checked));
    let regenerated = operator_gen(&crate_dir, &["gen"]);
    assert!(regenerated.status.success(), "{}", text(&regenerated));
    let after = std::fs::read_to_string(crate_dir.join("src/controller.rs")).expect("generated");
    assert_eq!(before, after);
}

#[test]
fn a_manifest_without_out_regenerates_its_own_folder() {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    new_crate(scratch.path(), "mine");
    // Hand-edit a generated file, then point --manifest at the crate from outside it: the
    // run must work on that crate (and refuse the edit), not on the current folder.
    let lib = scratch.path().join("mine/src/error.rs");
    let edited = std::fs::read_to_string(&lib).expect("generated") + "\n// edited\n";
    std::fs::write(&lib, edited).expect("writable");
    let run = operator_gen(scratch.path(), &["gen", "--manifest", "mine/operator.yaml"]);
    assert!(!run.status.success(), "{}", text(&run));
    assert!(text(&run).contains("edited by hand"), "{}", text(&run));
    let entries: Vec<_> = std::fs::read_dir(scratch.path())
        .expect("listable")
        .collect();
    assert_eq!(entries.len(), 1, "nothing was written beside the crate");
}

#[test]
fn a_crd_from_stdin_is_saved_beside_the_manifest_and_regenerates_with_no_flags() {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let crd = std::fs::read(bundled_crd()).expect("the bundled CRD");
    let first = operator_gen_with_stdin(
        scratch.path(),
        &["gen", "--crd", "-", "--out", "rules"],
        &crd,
    );
    assert!(first.status.success(), "{}", text(&first));

    let crate_dir = scratch.path().join("rules");
    assert_eq!(
        std::fs::read(crate_dir.join("crd.yaml")).expect("saved"),
        crd
    );
    let manifest = std::fs::read_to_string(crate_dir.join("operator.yaml")).expect("recorded");
    assert!(manifest.contains("crd: crd.yaml"), "{manifest}");
    let header = std::fs::read_to_string(crate_dir.join("src/main.rs")).expect("generated");
    assert!(
        header.contains("Regenerate with `operator-gen gen` in this crate's folder."),
        "{header}"
    );

    let again = operator_gen(&crate_dir, &["gen"]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        text(&again).contains("0 created, 0 updated"),
        "{}",
        text(&again)
    );
    let checked = operator_gen(&crate_dir, &["gen", "--check"]);
    assert!(checked.status.success(), "{}", text(&checked));
}

#[test]
fn an_edited_manifest_reaches_the_generated_code_on_the_next_run() {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    new_crate(scratch.path(), "rules");
    let crate_dir = scratch.path().join("rules");
    let manifest = crate_dir.join("operator.yaml");
    let edited =
        std::fs::read_to_string(&manifest).expect("scaffolded") + "owns: [{ kind: ConfigMap }]\n";
    std::fs::write(&manifest, edited).expect("writable");

    let stale = operator_gen(&crate_dir, &["gen", "--check"]);
    assert!(!stale.status.success(), "{}", text(&stale));
    assert!(
        text(&stale).contains("would change src/controller.rs"),
        "{}",
        text(&stale)
    );
    let run = operator_gen(&crate_dir, &["gen"]);
    assert!(run.status.success(), "{}", text(&run));
    let controller =
        std::fs::read_to_string(crate_dir.join("src/controller.rs")).expect("generated");
    assert!(
        controller.contains(".owns_stream("),
        "the owned kind is wired"
    );
    let manifest = std::fs::read_to_string(crate_dir.join("src/manifest.rs")).expect("generated");
    assert!(manifest.contains("ConfigMap"), "the owned kind is related");
    let rbac = std::fs::read_to_string(crate_dir.join("deploy/base/rbac.yaml")).expect("generated");
    assert!(rbac.contains("configmaps"), "{rbac}");
}

/// The supply-chain proof: a crate made outside the workspace, with the defaults a user gets
/// (the runtime vendored into the crate, a Cargo.lock written by the command), keeps a lock
/// in step with its Cargo.toml through the day-two changes of operator.yaml that change its
/// dependencies (webhooks, then sharding, then an owned CRD child), each checked with `cargo
/// tree --locked --offline`, and then builds with `cargo build --locked`, offline from the
/// registry cache, without any patch or flag. The lock keeps the versions this workspace is
/// tested with. It builds in the target folder the compile test shares, with the same flags,
/// so only the crate and its copy of the runtime are compiled.
#[test]
fn a_crate_made_outside_the_workspace_keeps_its_lock_in_step_and_builds_locked() {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let created = new_crate(scratch.path(), "rules");
    let crate_dir = scratch.path().join("rules");
    assert!(
        created.contains("Cargo.lock") && created.contains("cargo build --locked"),
        "{created}"
    );
    assert!(
        crate_dir
            .join("vendor/operator-gen-runtime/src/lib.rs")
            .exists()
    );
    let cargo_toml = std::fs::read_to_string(crate_dir.join("Cargo.toml")).expect("generated");
    assert!(
        cargo_toml.contains("operator-gen-runtime = { path = \"vendor/operator-gen-runtime\""),
        "{cargo_toml}"
    );
    let first_lock = std::fs::read_to_string(crate_dir.join("Cargo.lock")).expect("the lock");
    assert_locks_the_workspaces_versions(&first_lock);
    assert_tree_is_locked(&crate_dir, "after `new`");

    let owned_crd = operator_gen_tests::shared_crd("monitoring.coreos.com/servicemonitors.yaml");
    std::fs::copy(owned_crd, crate_dir.join("servicemonitors.yaml")).expect("a real CRD");
    let day_two = [
        ("webhooks", "webhooks: { validating: true }\n"),
        ("sharding", "sharding: true\n"),
        (
            "an owned CRD child",
            "owns: [{ kind: ServiceMonitor, crd: servicemonitors.yaml }]\n",
        ),
    ];
    let manifest = crate_dir.join("operator.yaml");
    for (change, line) in day_two {
        let edited = std::fs::read_to_string(&manifest).expect("scaffolded") + line;
        std::fs::write(&manifest, edited).expect("writable");
        let run = operator_gen(&crate_dir, &["gen"]);
        assert!(run.status.success(), "{change}: {}", text(&run));
        assert_tree_is_locked(&crate_dir, change);
        let checked = operator_gen(&crate_dir, &["gen", "--check"]);
        assert!(checked.status.success(), "{change}: {}", text(&checked));
    }
    let lock = std::fs::read_to_string(crate_dir.join("Cargo.lock")).expect("the lock");
    assert_ne!(lock, first_lock, "webhooks and sharding need more packages");
    assert_locks_the_workspaces_versions(&lock);

    // The first lock is out of step with what the crate needs now: `gen --check` says so, and
    // `gen` brings it back into step.
    std::fs::write(crate_dir.join("Cargo.lock"), &first_lock).expect("writable");
    let stale = operator_gen(&crate_dir, &["gen", "--check"]);
    assert!(!stale.status.success(), "{}", text(&stale));
    assert!(
        text(&stale).contains("Cargo.lock is out of step with Cargo.toml"),
        "{}",
        text(&stale)
    );
    let fitted = operator_gen(&crate_dir, &["gen"]);
    assert!(fitted.status.success(), "{}", text(&fitted));
    assert!(
        text(&fitted).contains("into step with Cargo.toml (added "),
        "{}",
        text(&fitted)
    );
    assert_eq!(
        std::fs::read_to_string(crate_dir.join("Cargo.lock")).expect("the lock"),
        lock,
        "one rule fits the lock, whichever lock it starts from"
    );

    let started = std::time::Instant::now();
    let build = operator_gen_tests::cargo()
        .args(["build", "--locked", "--offline", "--quiet"])
        .current_dir(&crate_dir)
        .env(
            "CARGO_TARGET_DIR",
            workspace().join("target/generated-crates"),
        )
        .env("CARGO_PROFILE_DEV_DEBUG", "false")
        .env("RUSTFLAGS", "-D warnings")
        .output()
        .expect("cargo runs");
    assert!(build.status.success(), "{}", text(&build));
    eprintln!(
        "cargo build --locked --offline of a crate made outside the workspace: {:.1?}",
        started.elapsed()
    );
    assert_eq!(
        std::fs::read_to_string(crate_dir.join("Cargo.lock")).expect("the lock"),
        lock,
        "a locked build changes nothing in the lock"
    );
}

/// Asserts that `cargo tree --locked --offline` resolves the crate in `crate_dir` from its lock
/// as it is.
fn assert_tree_is_locked(crate_dir: &Path, after: &str) {
    let tree = operator_gen_tests::cargo()
        .args(["tree", "--locked", "--offline", "--quiet", "--depth", "0"])
        .current_dir(crate_dir)
        .output()
        .expect("cargo runs");
    assert!(tree.status.success(), "{after}: {}", text(&tree));
}

/// Asserts that a crate's lock holds only versions this workspace's lock holds (nothing was
/// resolved anew), among them the workspace's kube, k8s-openapi, tokio, serde and axum, and
/// none of the generator's own dependencies.
fn assert_locks_the_workspaces_versions(used: &str) {
    let lock = std::fs::read_to_string(workspace().join("Cargo.lock")).expect("the lock");
    let versions = |text: &str| -> std::collections::BTreeMap<String, String> {
        let table: toml::Table = text.parse().expect("a Cargo.lock");
        table["package"]
            .as_array()
            .expect("packages")
            .iter()
            .filter(|p| p.get("source").is_some())
            .map(|p| {
                (
                    format!(
                        "{} {}",
                        p["name"].as_str().unwrap_or_default(),
                        p["version"].as_str().unwrap_or_default()
                    ),
                    p["name"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let (seeded, fitted) = (versions(&lock), versions(used));
    let new: Vec<&String> = fitted.keys().filter(|k| !seeded.contains_key(*k)).collect();
    assert!(new.is_empty(), "resolved anew rather than kept: {new:?}");
    for name in ["kube", "k8s-openapi", "tokio", "serde", "axum"] {
        let kept: Vec<&String> = fitted
            .iter()
            .filter(|(_, n)| *n == name)
            .map(|(k, _)| k)
            .collect();
        assert!(!kept.is_empty(), "{name} is not in the crate's lock");
        assert!(
            kept.iter().all(|k| seeded.contains_key(*k)),
            "{name}: {kept:?}"
        );
    }
    assert!(
        !used.contains("name = \"kopium\""),
        "the generator's own dependencies are dropped from the lock"
    );
}

#[test]
fn an_image_is_tagged_as_the_deployment_names_it_and_lists_what_the_binary_loads() {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    new_crate(scratch.path(), "imaged");
    let crate_dir = scratch.path().join("imaged");
    // Any Linux program will do: this one is dynamically linked, as a debug build is.
    let binary = env!("CARGO_BIN_EXE_operator-gen");
    let built = operator_gen(&crate_dir, &["image", "--binary", binary]);
    assert!(built.status.success(), "{}", text(&built));
    let printed = text(&built);
    assert!(printed.contains("built imaged:0.1.0"), "{printed}");
    assert!(
        printed.contains("libc.so"),
        "the libraries are listed: {printed}"
    );
    assert!(printed.contains("kind load image-archive"), "{printed}");
    let deployment = std::fs::read_to_string(crate_dir.join("deploy/base/deployment.yaml"))
        .expect("a Deployment");
    assert!(
        deployment.contains("image: imaged:0.1.0"),
        "the Deployment runs the tag the image gets: {deployment}"
    );
    let archive = crate_dir.join("target/images/imaged-0.1.0.tar");
    let bytes = std::fs::read(&archive).expect("the archive");
    let index = String::from_utf8_lossy(&bytes);
    assert!(
        index.contains("docker.io/library/imaged:0.1.0"),
        "the index names the image as the kubelet asks for it"
    );
}

#[test]
fn an_image_of_a_file_that_is_no_program_is_refused_naming_it_and_writes_nothing() {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    new_crate(scratch.path(), "refused");
    let crate_dir = scratch.path().join("refused");
    let script = scratch.path().join("operator.sh");
    std::fs::write(&script, "#!/bin/sh\n").expect("written");
    let path = script.to_str().expect("a UTF-8 path");
    let refused = operator_gen(&crate_dir, &["image", "--binary", path]);
    assert!(!refused.status.success());
    let printed = text(&refused);
    assert!(printed.contains("operator.sh"), "{printed}");
    let missing = operator_gen(&crate_dir, &["image"]);
    assert!(!missing.status.success());
    assert!(
        text(&missing).contains("target/release/refused"),
        "the default binary is named: {}",
        text(&missing)
    );
    assert!(
        !crate_dir.join("target").exists(),
        "a refused image leaves no folder behind"
    );
}
