//! The checked-in generated crates are exactly what the generator produces today.

use operator_gen::{Job, Mode};
use operator_gen_tests::workspace_root;

/// Every crate generated into this repository: each folder of `generated/`, and the example.
fn checked_in_crates() -> Vec<String> {
    let root = workspace_root();
    let mut crates: Vec<String> = std::fs::read_dir(root.join("generated"))
        .expect("reading generated/")
        .map(|entry| {
            format!(
                "generated/{}",
                entry.expect("an entry").file_name().to_string_lossy()
            )
        })
        .collect();
    crates.sort();
    crates.push("example-operator".to_owned());
    crates
}

#[test]
fn checked_in_crates_match_the_generator() {
    // Jobs take paths relative to the workspace root, as `cargo xtask gen` does; every test
    // in this binary wants the same directory, so changing it is safe.
    std::env::set_current_dir(workspace_root()).expect("entering the workspace root");
    let mut stale = Vec::new();
    for dir in checked_in_crates() {
        let job = Job::new(&dir);
        let (_, report) = job
            .run(Mode::Check)
            .unwrap_or_else(|e| panic!("regenerating {dir}: {e}"));
        let changed: Vec<String> = report
            .changed()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        if !changed.is_empty() {
            stale.push(format!(
                "{dir} ({}): run `{}` and commit the result",
                changed.join(", "),
                job.command()
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "generated code is out of date:\n{}",
        stale.join("\n")
    );
}

/// The e2e runs every checked-in crate on the real API server and fails on a reconcile error
/// its scenario did not cause. So that this proves each archetype's skeleton works as `new`
/// writes it, every archetype has a checked-in crate whose `src/reconcile.rs` is, byte for
/// byte, the skeleton the generator writes for it today.
#[test]
fn every_archetype_has_a_checked_in_crate_that_runs_its_untouched_skeleton() {
    use operator_gen::model::Archetype;

    std::env::set_current_dir(workspace_root()).expect("entering the workspace root");
    let mut untouched = Vec::new();
    for dir in checked_in_crates() {
        let request = Job::new(&dir).request().expect("the crate's request");
        let generated = operator_gen::generate(&request).expect("generating");
        let skeleton = generated
            .plan
            .files
            .iter()
            .find(|file| file.path == std::path::Path::new("src/reconcile.rs"))
            .expect("every archetype has a skeleton");
        let ours = std::fs::read_to_string(format!("{dir}/src/reconcile.rs")).expect("reading");
        if ours == skeleton.contents {
            untouched.push((generated.operator.archetype, dir));
        }
    }
    for archetype in [
        Archetype::Imported,
        Archetype::Builtin,
        Archetype::Derived,
        Archetype::Dynamic,
        Archetype::Generic,
    ] {
        assert!(
            untouched.iter().any(|(a, _)| *a == archetype),
            "no checked-in {archetype:?} crate keeps the skeleton `new` writes (move its \
             src/reconcile.rs aside and run `operator-gen gen` there); untouched: {untouched:?}"
        );
    }
}

#[test]
fn the_default_job_is_the_bundled_prometheusrule_crate() {
    assert!(checked_in_crates().contains(&operator_gen::job::DEFAULT_OUT.to_owned()));
    assert_eq!(Job::default().command(), "cargo xtask gen");
}

#[test]
fn every_bundled_crd_is_the_upstream_file_byte_for_byte() {
    use sha2::{Digest, Sha256};

    let root = workspace_root();
    let provenance = std::fs::read_to_string(root.join("../shared/crds/PROVENANCE.tsv"))
        .expect("../shared/crds/PROVENANCE.tsv beside the checkout");
    let mut bundled = Vec::new();
    for group in std::fs::read_dir(root.join("crds")).expect("crds/") {
        let group = group.expect("an entry").path();
        for file in std::fs::read_dir(&group).expect("a group folder") {
            let file = file.expect("an entry").path();
            let relative = file.strip_prefix(root.join("crds")).expect("under crds/");
            bundled.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
    assert!(
        bundled.len() >= 2,
        "crds/ holds the bundled CRDs: {bundled:?}"
    );
    for bundled in bundled {
        let bytes = std::fs::read(root.join("crds").join(&bundled)).expect("the bundled CRD");
        let digest: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let recorded = provenance
            .lines()
            .find(|line| line.starts_with(&format!("{bundled}\t")))
            .and_then(|line| line.split('\t').next_back())
            .unwrap_or_else(|| panic!("crds/{bundled} is not listed in PROVENANCE.tsv"));
        assert_eq!(
            digest, recorded,
            "crds/{bundled} differs from the recorded upstream file"
        );
    }
}

/// The release profile's overrides for one version of a package (`name@version`, kopium's
/// dependencies that `cargo install` need not optimize) match a package in Cargo.lock: after
/// an update moved the version, cargo would only warn, and the install would be slow again.
#[test]
fn every_versioned_profile_override_names_a_locked_package() {
    let root = workspace_root();
    let read = |file: &str| -> toml::Table {
        let text = std::fs::read_to_string(root.join(file)).expect("reading");
        text.parse().expect("TOML")
    };
    let (manifest, lock) = (read("Cargo.toml"), read("Cargo.lock"));
    let locked: Vec<String> = lock["package"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            format!(
                "{}@{}",
                p["name"].as_str().unwrap_or(""),
                p["version"].as_str().unwrap_or("")
            )
        })
        .collect();
    let overrides = manifest["profile"]["release"]["package"]
        .as_table()
        .expect("release overrides");
    let versioned: Vec<&String> = overrides.keys().filter(|k| k.contains('@')).collect();
    assert!(!versioned.is_empty(), "{overrides:?}");
    for key in versioned {
        assert!(
            locked.contains(key),
            "Cargo.toml's [profile.release.package.\"{key}\"] names no package in Cargo.lock: \
             set it to the locked version"
        );
    }
}

#[test]
fn the_kube_rs_peer_decodes_into_example_operators_own_types() {
    let root = workspace_root();
    let read = |path: &str| {
        std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("reading {path}: {e}"))
    };
    let ours = read("example-operator/src/types.rs");
    let peer = read("xtask/bench/peers/kube-rs/src/types.rs");
    // Both from the first item on: the header and the module's doc differ by design.
    let body = |text: &str| {
        let start = text
            .find("pub use self::v1::*;")
            .expect("the re-export of v1");
        text[start..].to_owned()
    };
    assert_eq!(
        body(&peer),
        body(&ours),
        "copy example-operator/src/types.rs (from `pub use self::v1::*;` on) into the peer"
    );
}
