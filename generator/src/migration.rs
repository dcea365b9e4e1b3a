//! What a crate made by an older operator-gen should change, because the layout it was made
//! with has moved on. These are notes for the user; the generator never moves or deletes
//! files, since the ones that matter here are the user's.

use std::path::Path;

use crate::crate_dir::{CrateDir, Kind};

/// Files of the flat `deploy/` layout that came before the kustomize base and overlay.
const FLAT_DEPLOY: &[&str] = &[
    "deploy/deployment.yaml",
    "deploy/rbac.yaml",
    "deploy/crd.yaml",
];

/// Generated modules whose code moved into operator-gen-runtime; `lib.rs` no longer declares
/// them, so they are dead files.
const MOVED_TO_RUNTIME: &[&str] = &["src/leader.rs", "src/telemetry.rs"];

/// Notes on the crate in `out`: one per layout change it has not taken yet.
pub fn notes(out: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    let flat = present(out, FLAT_DEPLOY);
    if !flat.is_empty() {
        notes.push(format!(
            "{} are from before deploy/ became a kustomize overlay of the generated deploy/base/, and \
             are no longer updated: move your changes to the Deployment into \
             deploy/deployment-patch.yaml, delete {}, then deploy with `kubectl apply -k deploy/`",
            flat.join(", "),
            it_or_them(&flat),
        ));
    }
    let moved = present(out, MOVED_TO_RUNTIME);
    if !moved.is_empty() {
        notes.push(format!(
            "the code of {} moved into the operator-gen-runtime crate, and src/lib.rs no longer \
             declares {}: delete {}",
            moved.join(", "),
            it_or_them(&moved),
            it_or_them(&moved),
        ));
    }
    notes
}

/// Which of `files` are regular files in the crate in `out`.
fn present<'a>(out: &Path, files: &[&'a str]) -> Vec<&'a str> {
    files
        .iter()
        .copied()
        .filter(|file| {
            let kind = CrateDir::new(out).kind(Path::new(file));
            matches!(kind, Ok(Some(Kind::File)))
        })
        .collect()
}

fn it_or_them(files: &[&str]) -> &'static str {
    if files.len() == 1 { "it" } else { "them" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crate_with_the_flat_deploy_layout_is_told_how_to_move() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(notes(tmp.path()).is_empty());
        std::fs::create_dir_all(tmp.path().join("deploy/base")).unwrap();
        std::fs::write(tmp.path().join("deploy/base/rbac.yaml"), "").unwrap();
        assert!(notes(tmp.path()).is_empty(), "the new layout needs no note");
        std::fs::write(tmp.path().join("deploy/deployment.yaml"), "").unwrap();
        std::fs::write(tmp.path().join("deploy/rbac.yaml"), "").unwrap();
        let notes = notes(tmp.path());
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("deploy/deployment.yaml, deploy/rbac.yaml are from before")
                && notes[0].contains("kubectl apply -k deploy/"),
            "{notes:?}"
        );
    }

    #[test]
    fn a_crate_from_before_the_runtime_is_told_to_delete_the_moved_modules() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("src")).unwrap();
        std::fs::write(tmp.path().join("src/lib.rs"), "").unwrap();
        assert!(notes(tmp.path()).is_empty());
        std::fs::write(tmp.path().join("src/telemetry.rs"), "").unwrap();
        let notes = notes(tmp.path());
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("the code of src/telemetry.rs moved")
                && notes[0].ends_with("delete it"),
            "{notes:?}"
        );
    }
}
