//! `cargo xtask new` for every object archetype, and the rules of regenerating a crate a user
//! has made their own: user files kept byte for byte, drift caught by `--check`, hand edits
//! to generated files refused, and a new relation that leaves the user's code compiling.

use std::path::{Path, PathBuf};

use operator_gen::{
    Error, Job, Mode,
    manifest::Derived,
    scaffold::{FromManifest, NewOperator, NewPrimary, create, create_from_manifest},
};
use operator_gen_tests::{cargo_test_batch, runtime_from, shared_crd};

fn imported(dir: &Path) -> NewOperator {
    NewOperator {
        dir: dir.to_owned(),
        name: Some("rules-operator".to_owned()),
        primary: NewPrimary::Crd {
            source: shared_crd("monitoring.coreos.com/prometheusrules.yaml"),
            kind: None,
            version: None,
            dynamic: false,
        },
        allow_http: false,
        runtime: None,
    }
}

/// A folder outside this workspace, as users create operators: cargo would otherwise take
/// the crates for members of this repository's workspace.
fn outside_workspace(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join("operator-gen-tests").join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("clearing an old test folder");
    }
    std::fs::create_dir_all(dir.parent().expect("a parent")).expect("creating the test folder");
    dir
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `file` in `dir`, parsed as YAML.
fn yaml(dir: &Path, file: &str) -> serde_json::Value {
    serde_saphyr::from_str(&read(dir.join(file))).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The generated kustomize base lists every object file beside it, and the user's overlay
/// builds on it with a patch that names the base's own Deployment, so kustomize applies it.
fn assert_overlay_patches_the_base(dir: &Path) {
    let base = yaml(dir, "deploy/base/kustomization.yaml");
    let mut listed: Vec<&str> = base["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r.as_str())
        .collect();
    listed.sort();
    let mut beside: Vec<String> = std::fs::read_dir(dir.join("deploy/base"))
        .expect("deploy/base")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name != "kustomization.yaml")
        .collect();
    beside.sort();
    assert_eq!(listed, beside, "{}", dir.display());

    let overlay = yaml(dir, "deploy/kustomization.yaml");
    assert_eq!(overlay["resources"], serde_json::json!(["base"]));
    let patches = overlay["patches"].as_array().expect("patches");
    let deployment = yaml(dir, "deploy/base/deployment.yaml");
    for patch in patches {
        let path = patch["path"].as_str().expect("a patch file");
        let patch = yaml(&dir.join("deploy"), path);
        for field in [
            "/apiVersion",
            "/kind",
            "/metadata/name",
            "/metadata/namespace",
        ] {
            assert_eq!(patch.pointer(field), deployment.pointer(field), "{field}");
        }
    }
}

/// Builds every archetype, plus an imported operator whose manifest gained an `owns` after the
/// user edited its reconcile, and runs their tests, all in one cargo invocation.
#[test]
fn every_archetype_builds_and_passes_its_tests_and_survives_a_new_relation() {
    let root = outside_workspace("archetypes");
    let archetypes = operator_gen_tests::archetypes();
    let mut members = Vec::new();
    for (name, primary) in archetypes {
        let dir = root.join(name);
        let new = NewOperator {
            dir: dir.clone(),
            name: Some(format!("{name}-operator")),
            primary,
            allow_http: false,
            // One runtime for the batch, not a vendored copy compiled per crate.
            runtime: Some(runtime_from(&dir)),
        };
        create(&new).unwrap_or_else(|e| panic!("new {name}: {e}"));
        assert!(
            !dir.join("vendor").exists(),
            "{name}: a shared runtime is not vendored"
        );
        assert!(dir.join("operator.yaml").exists() && dir.join("src/reconcile.rs").exists());
        assert_overlay_patches_the_base(&dir);
        members.push(name.to_owned());
    }
    assert!(
        root.join("derived/src/bin/crdgen.rs").exists(),
        "a derived operator has crdgen"
    );
    assert!(
        root.join("derived-versions/src/conversion.rs").exists()
            && !root.join("derived/src/conversion.rs").exists(),
        "only a derived operator served in several versions has a conversion webhook"
    );

    // A user edits the reconcile, then adds an owned ConfigMap to the manifest, and moves from
    // the vendored runtime to a shared one, which removes the copy.
    let evolved = root.join("evolved");
    create(&imported(&evolved)).expect("new imported operator");
    assert!(
        evolved
            .join("vendor/operator-gen-runtime/src/lib.rs")
            .exists()
    );
    let reconcile = evolved.join("src/reconcile.rs");
    let edited = read(reconcile.clone()).replace("reconciling", "reconciling, as the user wrote");
    std::fs::write(&reconcile, &edited).expect("editing reconcile.rs");
    let manifest = read(evolved.join("operator.yaml"))
        + "owns:\n  - kind: ConfigMap\n"
        + &format!("runtime:\n  path: {:?}\n", runtime_from(&evolved).as_str());
    std::fs::write(evolved.join("operator.yaml"), manifest).expect("adding a relation");
    let (_, report) = Job::new(&evolved)
        .run(Mode::Write { force: false })
        .expect("regenerating");
    assert!(
        report.changed().contains(&Path::new("src/controller.rs")),
        "{report}"
    );
    assert!(
        report
            .changed()
            .contains(&Path::new("vendor/operator-gen-runtime/src/lib.rs"))
            && !evolved.join("vendor").exists(),
        "the vendored copy is removed, folders and all: {report}"
    );
    assert_eq!(read(reconcile), edited, "the user's reconcile is untouched");
    assert!(read(evolved.join("src/controller.rs")).contains(".owns_stream("));
    members.push("evolved".to_owned());

    // A crate started from a manifest written first: its first skeleton already shows the
    // relations, and the local CRD the manifest names is copied in at the path it names.
    let started = root.join("from-manifest");
    let written = root.join("written-first");
    std::fs::create_dir_all(written.join("crds")).expect("the manifest's folder");
    let crd = shared_crd("monitoring.coreos.com/prometheusrules.yaml");
    std::fs::copy(&crd, written.join("crds/rules.yaml")).expect("the CRD beside the manifest");
    let monitors = shared_crd("monitoring.coreos.com/servicemonitors.yaml");
    std::fs::copy(&monitors, written.join("crds/monitors.yaml")).expect("a child's CRD");
    let manifest = format!(
        "# written before the crate\nname: rules-from-manifest\nprimary:\n  crd: crds/rules.yaml\n\
         owns:\n  - kind: ConfigMap\n  - kind: ServiceMonitor\n    crd: crds/monitors.yaml\n\
         watches:\n  - kind: Secret\n    map: {{ label: example.com/rule }}\n\
         runtime:\n  path: {:?}\n",
        runtime_from(&started).as_str()
    );
    std::fs::write(written.join("rules.yaml"), &manifest).expect("writing the manifest");
    create_from_manifest(&FromManifest {
        dir: started.clone(),
        manifest: written.join("rules.yaml"),
        allow_http: false,
    })
    .expect("new --manifest");
    assert_eq!(
        read(started.join("operator.yaml")),
        manifest,
        "copied as it is"
    );
    assert_eq!(
        read(started.join("crds/rules.yaml")),
        read(PathBuf::from(&crd))
    );
    assert_eq!(
        read(started.join("crds/monitors.yaml")),
        read(PathBuf::from(&monitors))
    );
    let tests = read(started.join("src/manifest.rs"));
    assert!(
        tests.contains("(&live_sample(), service_monitor_child()).await")
            && tests.contains("(&live_sample(), config_map_child()).await"),
        "the shipped tests apply a child of every owned kind, custom ones too:\n{tests}"
    );
    let skeleton = read(started.join("src/reconcile.rs"));
    assert!(
        skeleton.contains("ctx.apply_owned(&obj, config_map)")
            && skeleton.contains("// Watched Secret"),
        "{skeleton}"
    );
    let (_, report) = Job::new(&started)
        .run(Mode::Check)
        .expect("checking the new crate");
    assert!(
        report.changed().is_empty(),
        "it regenerates from its own folder: {report}"
    );
    members.push("from-manifest".to_owned());

    if let Err(output) = cargo_test_batch(&root, &members) {
        panic!(
            "scaffolded operators in {} do not build or pass their tests:\n{output}",
            root.display()
        );
    }
}

#[test]
fn regeneration_keeps_user_files_byte_for_byte() {
    let dir = outside_workspace("keeps-user-files");
    create(&imported(&dir)).expect("new operator");
    let user_files = ["src/reconcile.rs", "README.md", "operator.yaml"];
    for file in user_files {
        let mut text = read(dir.join(file));
        let comment = if file.ends_with(".rs") { "//" } else { "#" };
        text.push_str(&format!("\n{comment} the user's own line\n"));
        std::fs::write(dir.join(file), text).expect("editing a user file");
    }
    let before: Vec<Vec<u8>> = user_files
        .iter()
        .map(|f| std::fs::read(dir.join(f)).unwrap())
        .collect();
    let (_, report) = Job::new(&dir)
        .run(Mode::Write { force: false })
        .expect("regenerating");
    assert!(
        report.changed().is_empty(),
        "nothing changed, so nothing is written: {report}"
    );
    let after: Vec<Vec<u8>> = user_files
        .iter()
        .map(|f| std::fs::read(dir.join(f)).unwrap())
        .collect();
    assert_eq!(before, after);
}

#[test]
fn check_catches_drift_and_diff_shows_it_without_writing() {
    let dir = outside_workspace("check-drift");
    create(&imported(&dir)).expect("new operator");
    let manifest = read(dir.join("operator.yaml")) + "owns:\n  - kind: Secret\n";
    std::fs::write(dir.join("operator.yaml"), manifest).expect("adding a relation");
    let controller_before = read(dir.join("src/controller.rs"));

    let job = Job::new(&dir);
    let (generated, report) = job.run(Mode::Check).expect("checking");
    assert!(
        report.changed().contains(&Path::new("src/controller.rs")),
        "{report}"
    );
    let diff = generated.plan.diff(&dir).expect("diffing");
    assert!(
        diff.contains("+        .owns_stream(") && diff.contains("--- a/src/controller.rs"),
        "{diff}"
    );
    assert_eq!(
        read(dir.join("src/controller.rs")),
        controller_before,
        "check mode writes nothing"
    );
}

#[test]
fn a_hand_edited_generated_file_is_refused_until_forced() {
    let dir = outside_workspace("hand-edited");
    create(&imported(&dir)).expect("new operator");
    let controller = dir.join("src/controller.rs");
    let edited = read(controller.clone()) + "\n// a quick fix made in the wrong file\n";
    std::fs::write(&controller, &edited).expect("editing a generated file");

    let err = Job::new(&dir)
        .run(Mode::Write { force: false })
        .expect_err("the edit is refused");
    assert!(matches!(err, Error::HandEdited { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("src/controller.rs") && message.contains("--force"),
        "{message}"
    );
    assert!(
        message.contains("src/reconcile.rs"),
        "it says where the logic belongs: {message}"
    );
    assert_eq!(
        read(controller.clone()),
        edited,
        "a refused run writes nothing"
    );

    Job::new(&dir)
        .run(Mode::Write { force: true })
        .expect("forced regeneration");
    assert!(!read(controller).contains("quick fix"));
}

#[test]
fn new_refuses_a_folder_with_files_in_it() {
    let dir = outside_workspace("occupied");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let err = create(&imported(&dir))
        .expect_err("an occupied folder is refused")
        .to_string();
    assert!(
        err.contains("not empty") && err.contains("`gen --out "),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "nothing was written"
    );
}

#[test]
fn new_with_a_bad_crd_leaves_nothing_behind() {
    let dir = outside_workspace("bad-crd");
    let input = std::env::temp_dir().join("operator-gen-tests/not-a-crd.yaml");
    std::fs::write(&input, "apiVersion: v1\nkind: ConfigMap\n").unwrap();
    let new = NewOperator {
        dir: dir.clone(),
        name: None,
        primary: NewPrimary::Crd {
            source: input.display().to_string(),
            kind: None,
            version: None,
            dynamic: false,
        },
        allow_http: false,
        runtime: None,
    };
    let err = create(&new).expect_err("not a CRD").to_string();
    assert!(err.contains("\"ConfigMap\""), "{err}");
    assert!(!dir.exists(), "no half-made crate is left");
}

#[test]
fn new_names_the_flag_that_holds_a_bad_value_and_writes_nothing() {
    let dir = outside_workspace("bad-flags");
    let derived = |kind: &str, group: &str, version: &str| NewOperator {
        dir: dir.clone(),
        name: Some("backup-operator".to_owned()),
        primary: NewPrimary::Derived(Derived {
            kind: kind.to_owned(),
            group: group.to_owned(),
            version: version.to_owned(),
            plural: None,
            namespaced: true,
            also_served: Vec::new(),
        }),
        allow_http: false,
        runtime: None,
    };
    // `--also <version>` on a derived operator.
    let also = |mut new: NewOperator, version: &str| {
        if let NewPrimary::Derived(d) = &mut new.primary {
            d.also_served = vec![version.to_owned()];
        }
        new
    };
    let builtin = NewOperator {
        primary: NewPrimary::Builtin("Deploymint".to_owned()),
        ..derived("Backup", "example.com", "v1")
    };
    let cases = [
        (derived("Bad Kind", "example.com", "v1"), "--derive"),
        (derived("Backup", "Example_com", "v1"), "--group"),
        (derived("Backup", "example.com", "V 1"), "--api-version"),
        (also(derived("Backup", "example.com", "v1"), "v2"), "--also"),
        (
            also(derived("Backup", "example.com", "v1"), "kube"),
            "--also",
        ),
        (
            also(derived("Backup", "example.com", "stable"), "v1"),
            "--api-version",
        ),
        (builtin, "--kind"),
    ];
    for (new, flag) in cases {
        let err = create(&new)
            .expect_err("a bad value is refused")
            .to_string();
        assert!(
            err.starts_with(flag) && !err.contains("operator.yaml"),
            "{flag}: {err}"
        );
        assert!(!dir.exists(), "{flag}: nothing is written");
    }
}

#[test]
fn new_from_a_manifest_refuses_a_crd_outside_its_folder_and_writes_nothing() {
    let root = outside_workspace("manifest-outside");
    let written = root.join("manifests");
    std::fs::create_dir_all(&written).unwrap();
    std::fs::copy(
        shared_crd("monitoring.coreos.com/prometheusrules.yaml"),
        root.join("rules.yaml"),
    )
    .unwrap();
    let cases = [
        ("primary:\n  crd: ../rules.yaml\n", "field `primary.crd`"),
        (
            "primary:\n  builtin: Deployment\nowns:\n  - kind: PrometheusRule\n    crd: /etc/passwd\n",
            "field `owns[0].crd`",
        ),
        ("owns:\n  - kind: ConfigMap\n", "field `primary`"),
    ];
    for (text, field) in cases {
        std::fs::write(written.join("operator.yaml"), text).unwrap();
        let dir = root.join("crate");
        let err = create_from_manifest(&FromManifest {
            dir: dir.clone(),
            manifest: written.join("operator.yaml"),
            allow_http: false,
        })
        .expect_err("refused")
        .to_string();
        assert!(
            err.contains(field) && err.contains("operator.yaml"),
            "{text}: {err}"
        );
        assert!(
            !err.contains("root:"),
            "nothing of the file is quoted: {err}"
        );
        assert!(!dir.exists(), "{text}: nothing is written");
    }
}
