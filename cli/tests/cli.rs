//! The installed `operator-gen` binary, run as a user runs it: from any folder.

use std::{
    path::Path,
    process::{Command, Output},
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

/// Runs `operator-gen new <name>` in `folder` on the PrometheusRule CRD this repository
/// bundles, asserting that it succeeds; returns what it printed.
fn new_crate(folder: &Path, name: &str) -> String {
    let crd = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crds/monitoring.coreos.com/prometheusrules.yaml");
    let crd = crd.to_str().expect("a UTF-8 path");
    let created = operator_gen(folder, &["new", name, "--crd", crd]);
    assert!(created.status.success(), "{}", text(&created));
    text(&created)
}

#[test]
fn every_subcommand_explains_itself() {
    let here = std::env::temp_dir();
    for args in [&["--help"][..], &["gen", "--help"], &["new", "--help"]] {
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
