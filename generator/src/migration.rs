//! What a crate made by an older operator-gen should change, because the layout it was made
//! with has moved on. These are notes for the user; the generator never moves or deletes
//! files, since the ones that matter here are the user's.
//!
//! Its Dockerfile too is the user's, written once: one written before the build image was
//! pinned and the build `--locked` gets a note saying what to change ([`dockerfile_changes`]).

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

/// The user's Dockerfile, written once and never rewritten.
const DOCKERFILE: &str = "Dockerfile";

/// The user's values for the Helm chart, written once and never rewritten.
const CHART_VALUES: &str = "deploy/values.yaml";

/// Notes on the crate in `out`: one per layout change it has not taken yet.
pub fn notes(out: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    let changes = dockerfile_changes(out);
    if !changes.is_empty() {
        notes.push(format!(
            "{DOCKERFILE} (yours) differs from the one new crates get: it {}",
            changes.join("; it ")
        ));
    }
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
    for (file, image) in moving_images(out) {
        notes.push(format!(
            "{file} (yours) names the image {}, whose tag `latest` makes the kubelet pull it \
             at every start: an image loaded into the node (kind load, `ctr images import`, \
             what `operator-gen image` builds) then never starts. Name a tag that does not \
             move, such as the crate's version ({}), or set the pull policy to IfNotPresent",
            crate::text::Text::new(image).comment(),
            crate::model::CRATE_VERSION,
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

/// What the user's Dockerfile should change to build what Cargo.lock names with a compiler
/// that does not move: each a clause saying what it does and what to change. The file is the
/// user's and may be anything, so it is only scanned, within the manifest cap; a file that
/// cannot be read gets no note.
fn dockerfile_changes(out: &Path) -> Vec<String> {
    let read = CrateDir::new(out).read(Path::new(DOCKERFILE), crate::limits::MAX_MANIFEST_BYTES);
    let Ok(Some(bytes)) = read else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut changes = Vec::new();
    for image in text
        .lines()
        .filter_map(from_image)
        .filter(|i| is_moving_rust(i))
    {
        changes.push(format!(
            "builds from `{}`, a tag that moves with every Rust release: pin it, as in `FROM {} AS build`",
            crate::text::Text::new(image.to_owned()).comment(),
            crate::model::BUILDER_IMAGE
        ));
    }
    let builds = text.contains("cargo build");
    if builds && !text.contains("--locked") && !text.contains("--frozen") {
        changes.push(
            "runs `cargo build` without `--locked`, so the image may build other versions than \
             Cargo.lock names: build with `cargo build --locked --release`"
                .to_owned(),
        );
    }
    if text.contains("patch.crates-io.operator-gen-runtime") {
        changes.push(
            "patches operator-gen-runtime in through the RUNTIME build argument, which Cargo.toml \
             now names by path: remove the argument and the `--config` it adds"
                .to_owned(),
        );
    }
    changes
}

/// The image of a `FROM` line, its flags (`--platform=…`) skipped; `None` for other lines.
fn from_image(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if !first.eq_ignore_ascii_case("FROM") {
        return None;
    }
    words.find(|word| !word.starts_with("--"))
}

/// Whether `image` is the Rust image by a tag that moves: anything but an exact release
/// (`rust:1.95.0-alpine3.22`) or a digest. An image named through a build argument is not
/// judged.
fn is_moving_rust(image: &str) -> bool {
    if image.contains("@sha256:") || image.contains('$') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    let (name, tag) = last.split_once(':').unwrap_or((last, "latest"));
    if !name.eq_ignore_ascii_case("rust") {
        return false;
    }
    let release = tag.split('-').next().unwrap_or_default();
    let parts: Vec<&str> = release.split('.').collect();
    let exact = parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    !exact
}

/// The images of the user's Deployment patch and chart values that are tagged `latest` (or
/// not tagged, which means `latest`) with no pull policy beside them, by file: files an older
/// operator-gen wrote with `<crate>:latest`, which the kubelet pulls at every start.
fn moving_images(out: &Path) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    if let Some(patch) = document(out, DEPLOYMENT_PATCH) {
        let containers = patch.pointer("/spec/template/spec/containers");
        for container in containers.and_then(|c| c.as_array()).into_iter().flatten() {
            let image = container["image"].as_str().unwrap_or_default();
            if is_latest(image) && container.get("imagePullPolicy").is_none() {
                found.push((DEPLOYMENT_PATCH, image.to_owned()));
            }
        }
    }
    if let Some(values) = document(out, CHART_VALUES) {
        let image = &values["image"];
        let latest = image["tag"].as_str() == Some("latest");
        if latest && image.get("pullPolicy").is_none() {
            let repository = image["repository"].as_str().unwrap_or_default();
            found.push((CHART_VALUES, format!("{repository}:latest")));
        }
    }
    found
}

/// Whether the image reference `image` is tagged `latest`, or not tagged and not pinned by
/// digest, which container runtimes read as `latest`.
fn is_latest(image: &str) -> bool {
    if image.is_empty() || image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
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
    document(out, relative)?
        .pointer("/metadata/namespace")?
        .as_str()
        .map(str::to_owned)
}

/// The YAML document at `relative`, read within the manifest caps; none for a file that is
/// missing, unreadable or not one document.
fn document(out: &Path, relative: &str) -> Option<serde_json::Value> {
    let bytes = CrateDir::new(out)
        .read(Path::new(relative), crate::limits::MAX_MANIFEST_BYTES)
        .ok()??;
    let text = std::str::from_utf8(&bytes).ok()?;
    serde_saphyr::from_str_with_options(text, crate::limits::yaml_options()).ok()
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
    fn an_image_tagged_latest_in_the_users_files_is_told_it_never_starts_when_loaded() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("deploy")).unwrap();
        let patch = |image: &str, policy: &str| {
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\nspec:\n  template:\n    spec:\n      containers:\n        - name: operator\n          image: {image}\n{policy}"
            )
        };
        for (image, policy, noted) in [
            ("op:latest", "", true),
            ("registry.local:5000/op", "", true),
            ("op:0.1.0", "", false),
            (
                "op:latest",
                "          imagePullPolicy: IfNotPresent\n",
                false,
            ),
            ("op@sha256:abcd", "", false),
        ] {
            std::fs::write(tmp.path().join(DEPLOYMENT_PATCH), patch(image, policy)).unwrap();
            let notes = notes(tmp.path());
            assert_eq!(
                notes.len(),
                usize::from(noted),
                "{image} {policy}: {notes:?}"
            );
            if noted {
                assert!(notes[0].starts_with(DEPLOYMENT_PATCH), "{notes:?}");
                assert!(notes[0].contains(crate::model::CRATE_VERSION), "{notes:?}");
            }
        }
        std::fs::remove_file(tmp.path().join(DEPLOYMENT_PATCH)).unwrap();
        std::fs::write(
            tmp.path().join(CHART_VALUES),
            "image:\n  repository: op\n  tag: latest\n",
        )
        .unwrap();
        let notes = notes(tmp.path());
        assert!(
            notes.len() == 1 && notes[0].contains("op:latest"),
            "{notes:?}"
        );
        std::fs::write(
            tmp.path().join(CHART_VALUES),
            "image:\n  repository: op\n  tag: latest\n  pullPolicy: IfNotPresent\n",
        )
        .unwrap();
        assert!(super::notes(tmp.path()).is_empty());
    }

    #[test]
    fn an_overlay_that_is_not_a_file_gets_no_note() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(OVERLAY)).unwrap();
        assert!(notes(tmp.path()).is_empty());
    }

    #[test]
    fn a_dockerfile_on_a_moving_tag_or_unlocked_is_told_what_to_change() {
        let tmp = tempfile::tempdir().unwrap();
        let dockerfile = tmp.path().join(DOCKERFILE);
        let old = "FROM rust:1-alpine AS build\nARG RUNTIME=\nRUN if [ -n \"$RUNTIME\" ]; then set -- \
                   --config \"patch.crates-io.operator-gen-runtime.path=x\"; fi \\\n    && cargo build \
                   --release \"$@\" --bin op\nFROM scratch\n";
        std::fs::write(&dockerfile, old).unwrap();
        let notes = notes(tmp.path());
        assert_eq!(notes.len(), 1, "{notes:?}");
        let note = &notes[0];
        assert!(
            note.starts_with(
                "Dockerfile (yours) differs from the one new crates get: it builds from \
                 `rust:1-alpine`"
            ) && note.contains(&format!("`FROM {} AS build`", crate::model::BUILDER_IMAGE))
                && note.contains("; it runs `cargo build` without `--locked`")
                && note.contains("`cargo build --locked --release`")
                && note.contains("RUNTIME build argument"),
            "{note}"
        );
        for moving in [
            "rust",
            "rust:alpine",
            "rust:1.95-alpine",
            "docker.io/library/rust:latest",
        ] {
            assert!(is_moving_rust(moving), "{moving}");
        }
        for pinned in [
            "rust:1.95.0-alpine3.22",
            "rust:1.95.0",
            "rust:1-alpine@sha256:0123",
            "alpine:3",
            "${BUILDER}",
        ] {
            assert!(!is_moving_rust(pinned), "{pinned}");
        }
        assert_eq!(
            from_image("FROM --platform=$BUILDPLATFORM rust:1 AS b"),
            Some("rust:1")
        );
        let current = "FROM rust:1.95.0-alpine3.22 AS build\nRUN cargo build --locked --release\n";
        std::fs::write(&dockerfile, current).unwrap();
        assert!(super::notes(tmp.path()).is_empty());
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
