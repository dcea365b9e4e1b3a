//! Every fixture's crate, every case of the grid of manifests (`grid_cases`), and every
//! hostile input that must give code, compiles warning-free
//! and passes the tests it ships with, in one batched `cargo test`, then passes
//! `cargo clippy --all-targets -D warnings`. The shipped tests
//! reconcile a sample built from the CRD's schema, so a hostile schema whose sample does not
//! fit its generated types fails here.
//!
//! The fixtures are written as members of one throwaway workspace, with this workspace's
//! Cargo.lock, so that dependencies resolve to the versions CI already uses and are checked
//! once for all of them.

use std::path::Path;

use operator_gen::Mode;
use operator_gen_tests::{
    Expect, cargo_test_batch, fixture_request, fixtures, generate_grid, generate_hostile,
    grid_cases, hostile_cases, shared_runtime, sharing_runtime,
};

#[test]
fn every_fixture_crate_compiles_without_warnings_passes_clippy_and_its_own_tests() {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-fixtures");
    let members = scratch.join("crates");
    if members.exists() {
        std::fs::remove_dir_all(&members).expect("clearing old fixture crates");
    }
    let mut names = Vec::new();
    for name in fixtures() {
        // Every crate names the one runtime of this repository, so the batch compiles it once.
        let generated = fixture_request(&name)
            .and_then(|mut request| {
                request.manifest = sharing_runtime(request.manifest);
                operator_gen::generate(&request)
            })
            .unwrap_or_else(|e| panic!("fixture {name}: {e}"));
        let dir = members.join(&name);
        generated
            .plan
            .apply(&dir, Mode::Write { force: false })
            .expect("writing the fixture crate");
        names.push(name);
    }
    for (name, manifest) in grid_cases() {
        let generated =
            generate_grid(&manifest).unwrap_or_else(|e| panic!("grid case {name}: {e}"));
        generated
            .plan
            .apply(&members.join(&name), Mode::Write { force: false })
            .expect("writing the grid crate");
        names.push(name);
    }
    let inputs = scratch.join("hostile-inputs");
    std::fs::create_dir_all(&inputs).expect("creating the hostile input folder");
    for (case, bytes, expect) in hostile_cases() {
        if expect == Expect::Code {
            let generated = generate_hostile(case, &bytes, &inputs, Some(shared_runtime()))
                .unwrap_or_else(|e| panic!("hostile {case}: {e}"));
            let name = format!("hostile-{case}");
            generated
                .plan
                .apply(&members.join(&name), Mode::Write { force: false })
                .expect("writing the crate");
            names.push(name);
        }
    }
    let members: Vec<String> = names.iter().map(|n| format!("crates/{n}")).collect();
    if let Err(output) = cargo_test_batch(&scratch, &members) {
        panic!(
            "fixture crates in {} fail to build or test:\n{output}",
            scratch.display()
        );
    }
}
