//! Fixtures for the tests in `tests/tests/`: each folder in `tests/fixtures/` holds an
//! `operator.yaml` whose `primary.crd` points at a real CRD in `../shared/crds`, and is named
//! for the CRD and the relations it covers.

use std::path::{Path, PathBuf};

use operator_gen::{Generated, Manifest, Request, Selection};

/// The workspace root, where `cargo xtask` runs.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_owned()
}

/// Names of every fixture, sorted.
pub fn fixtures() -> Vec<String> {
    let dir = workspace_root().join("tests/fixtures");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| {
            entry
                .expect("a fixture entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Generates a fixture in memory. The regenerate command is written as if the fixture were
/// generated in place, so the output does not depend on where the checkout lives.
pub fn generate_fixture(name: &str) -> operator_gen::Result<Generated> {
    let manifest_path = workspace_root()
        .join("tests/fixtures")
        .join(name)
        .join("operator.yaml");
    let request = Request {
        manifest: Manifest::load(&manifest_path)?,
        manifest_path: Some(manifest_path),
        crd: None,
        selection: Selection::default(),
        command: format!("cargo xtask gen --out tests/fixtures/{name}"),
    };
    operator_gen::generate(&request)
}
