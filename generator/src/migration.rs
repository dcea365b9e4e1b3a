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

/// The user's kustomize overlay, written once and never rewritten.
const OVERLAY: &str = "deploy/kustomization.yaml";

/// The user's patch of the generated Deployment, and the Deployment it patches.
const DEPLOYMENT_PATCH: &str = "deploy/deployment-patch.yaml";
const BASE_DEPLOYMENT: &str = "deploy/base/deployment.yaml";

/// Fields of a Kustomization that kustomize v5 deprecates, which operator-gen wrote into
/// overlays while its own test cluster ran an old kubectl (kustomize v2.0.3), and what replaces
/// each.
const DEPRECATED_KUSTOMIZE: &[(&str, &str)] = &[
    ("bases", "list its entries under `resources:`"),
    (
        "patchesStrategicMerge",
        "list each file under `patches:` as `- path: <file>`",
    ),
];

/// Notes on the crate in `out`: one per layout change it has not taken yet.
pub fn notes(out: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    let deprecated = deprecated_overlay_fields(out);
    if !deprecated.is_empty() {
        let changes: Vec<String> = deprecated
            .iter()
            .map(|(field, change)| format!("for `{field}:`, {change}"))
            .collect();
        notes.push(format!(
            "{OVERLAY} uses {}, which current kustomize deprecates: {} (`kustomize edit fix` \
             in deploy/ does this); deploy/local/ now installs the base without the Deployment",
            deprecated
                .iter()
                .map(|(field, _)| format!("`{field}:`"))
                .collect::<Vec<_>>()
                .join(" and "),
            changes.join("; "),
        ));
    }
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
    if let Some((patched, base)) = patch_in_another_namespace(out) {
        notes.push(format!(
            "{DEPLOYMENT_PATCH} patches the Deployment in namespace {patched:?}, but \
             {BASE_DEPLOYMENT} now runs it in {base:?}, and kustomize matches a patch by \
             namespace too, so `kubectl kustomize deploy/` fails: set `metadata.namespace: \
             {base}` in {DEPLOYMENT_PATCH}"
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

/// The deprecated top-level fields the user's overlay still has. The file is the user's and
/// may be anything, so it is only scanned, within the manifest cap, for keys at the start of a
/// line; a file that cannot be read gets no note.
fn deprecated_overlay_fields(out: &Path) -> Vec<(&'static str, &'static str)> {
    let read = CrateDir::new(out).read(Path::new(OVERLAY), crate::limits::MAX_MANIFEST_BYTES);
    let Ok(Some(bytes)) = read else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    DEPRECATED_KUSTOMIZE
        .iter()
        .copied()
        .filter(|(field, _)| {
            text.lines().any(|line| {
                line.strip_prefix(field)
                    .is_some_and(|rest| rest.trim_start().starts_with(':'))
            })
        })
        .collect()
}

/// The namespaces of the user's Deployment patch and of the generated Deployment, when both
/// name one and they differ: the base moved (an operator that gained admission webhooks of a
/// built-in kind runs in a namespace of its own), and the patch, written once, did not.
fn patch_in_another_namespace(out: &Path) -> Option<(String, String)> {
    let patched = metadata_namespace(out, DEPLOYMENT_PATCH)?;
    let base = metadata_namespace(out, BASE_DEPLOYMENT)?;
    (patched != base).then_some((patched, base))
}

/// `metadata.namespace` of the YAML document at `relative`, read within the manifest caps; a
/// file that is missing, unreadable or not such a document gives none, and so no note.
fn metadata_namespace(out: &Path, relative: &str) -> Option<String> {
    let bytes = CrateDir::new(out)
        .read(Path::new(relative), crate::limits::MAX_MANIFEST_BYTES)
        .ok()??;
    let text = std::str::from_utf8(&bytes).ok()?;
    let document: serde_json::Value =
        serde_saphyr::from_str_with_options(text, crate::limits::yaml_options()).ok()?;
    document
        .pointer("/metadata/namespace")?
        .as_str()
        .map(str::to_owned)
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
    fn an_overlay_in_kustomize_v2_syntax_is_told_what_replaces_each_field() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("deploy")).unwrap();
        let overlay = tmp.path().join(OVERLAY);
        std::fs::write(
            &overlay,
            "resources:\n  - base\npatches:\n  - path: p.yaml\n",
        )
        .unwrap();
        assert!(
            notes(tmp.path()).is_empty(),
            "the current syntax needs no note"
        );
        std::fs::write(
            &overlay,
            "# bases: in a comment\nbases:\n  - base\npatchesStrategicMerge :\n  - p.yaml\n",
        )
        .unwrap();
        let notes = notes(tmp.path());
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "deploy/kustomization.yaml uses `bases:` and `patchesStrategicMerge:`"
            ) && notes[0].contains("under `resources:`")
                && notes[0].contains("`- path: <file>`"),
            "{notes:?}"
        );
        std::fs::write(&overlay, "bases:\n  - base\n").unwrap();
        let only_bases = super::notes(tmp.path());
        assert!(
            only_bases[0].contains("uses `bases:`, which") && !only_bases[0].contains("path:"),
            "{only_bases:?}"
        );
    }

    #[test]
    fn a_deployment_patch_left_in_the_old_namespace_is_told_the_new_one() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("deploy/base")).unwrap();
        let deployment = |namespace: &str| {
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\n  namespace: {namespace}\n"
            )
        };
        std::fs::write(tmp.path().join(BASE_DEPLOYMENT), deployment("op")).unwrap();
        std::fs::write(tmp.path().join(DEPLOYMENT_PATCH), deployment("op")).unwrap();
        assert!(
            notes(tmp.path()).is_empty(),
            "the same namespace needs no note"
        );
        std::fs::write(tmp.path().join(DEPLOYMENT_PATCH), deployment("default")).unwrap();
        let notes = notes(tmp.path());
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("in namespace \"default\"")
                && notes[0]
                    .ends_with("set `metadata.namespace: op` in deploy/deployment-patch.yaml"),
            "{notes:?}"
        );
        std::fs::write(tmp.path().join(DEPLOYMENT_PATCH), "{ not: [yaml").unwrap();
        assert!(
            super::notes(tmp.path()).is_empty(),
            "a patch that does not parse gets no note"
        );
    }

    #[test]
    fn an_overlay_that_is_not_a_file_gets_no_note() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(OVERLAY)).unwrap();
        assert!(notes(tmp.path()).is_empty());
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
