//! Every fixture's crate, and every hostile input that must give code, compiles warning-free
//! in one batched `cargo check`.
//!
//! The fixtures are written as members of one throwaway workspace, with this workspace's
//! Cargo.lock, so that dependencies resolve to the versions CI already uses and are checked
//! once for all of them.

use std::{path::Path, process::Command};

use operator_gen::Mode;
use operator_gen_tests::{
    Expect, fixtures, generate_fixture, generate_hostile, hostile_cases, workspace_root,
};

#[test]
fn every_fixture_crate_compiles_without_warnings() {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-fixtures");
    let members = scratch.join("crates");
    if members.exists() {
        std::fs::remove_dir_all(&members).expect("clearing old fixture crates");
    }
    let mut names = Vec::new();
    for name in fixtures() {
        let generated = generate_fixture(&name).unwrap_or_else(|e| panic!("fixture {name}: {e}"));
        let dir = members.join(&name);
        generated
            .plan
            .apply(&dir, Mode::Write { force: false })
            .expect("writing the fixture crate");
        names.push(name);
    }
    let inputs = scratch.join("hostile-inputs");
    std::fs::create_dir_all(&inputs).expect("creating the hostile input folder");
    for (case, bytes, expect) in hostile_cases() {
        if expect == Expect::Code {
            let generated = generate_hostile(case, &bytes, &inputs)
                .unwrap_or_else(|e| panic!("hostile {case}: {e}"));
            let name = format!("hostile-{case}");
            generated
                .plan
                .apply(&members.join(&name), Mode::Write { force: false })
                .expect("writing the crate");
            names.push(name);
        }
    }
    let member_list: Vec<String> = names.iter().map(|n| format!("\"crates/{n}\"")).collect();
    let manifest = format!(
        "[workspace]\nresolver = \"3\"\nmembers = [{}]\n",
        member_list.join(", ")
    );
    std::fs::write(scratch.join("Cargo.toml"), manifest).expect("writing the workspace manifest");
    std::fs::copy(
        workspace_root().join("Cargo.lock"),
        scratch.join("Cargo.lock"),
    )
    .expect("copying Cargo.lock");

    let output = Command::new(env!("CARGO"))
        .args(["check", "--workspace", "--all-targets", "--quiet"])
        .current_dir(&scratch)
        .env("CARGO_TARGET_DIR", scratch.join("target"))
        .env("RUSTFLAGS", "-D warnings")
        .output()
        .expect("running cargo check");
    assert!(
        output.status.success(),
        "fixture crates in {} do not compile:\n{}",
        scratch.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}
