//! One insta snapshot per generated file per fixture, named `{fixture}@{path}`.
//! Review changes with `cargo insta review`; a snapshot changes only when output does.
//!
//! The vendored runtime is no fixture's own output: its files are the runtime's, the same in
//! every crate, so they are not snapshotted; one test proves the copy is the runtime.

use operator_gen::vendor::{self, VENDOR_DIR};
use operator_gen_tests::{fixtures, generate_fixture};

fn snapshot_fixture(name: &str) {
    let generated = generate_fixture(name).unwrap_or_else(|e| panic!("fixture {name}: {e}"));
    for file in generated
        .plan
        .files
        .iter()
        .filter(|file| !vendor::is_vendored(&file.path))
    {
        let snapshot = format!("{name}@{}", file.path.display());
        insta::with_settings!({ snapshot_suffix => "", prepend_module_to_snapshot => false, omit_expression => true }, {
            insta::assert_snapshot!(snapshot, file.contents);
        });
    }
}

#[test]
fn prometheusrule_owns_watches_external() {
    snapshot_fixture("prometheusrule-owns-watches-external");
}

#[test]
fn prometheusrule_sharded_watches() {
    snapshot_fixture("prometheusrule-sharded-watches");
}

#[test]
fn certificate_dynamic_relations_sharded() {
    snapshot_fixture("certificate-dynamic-relations-sharded");
}

#[test]
fn workloads_generic_relations() {
    snapshot_fixture("workloads-generic-relations");
}

#[test]
fn certificate_owns_secret_watches_crd() {
    snapshot_fixture("certificate-owns-secret-watches-crd");
}

#[test]
fn crossplane_provider_cluster_no_relations() {
    snapshot_fixture("crossplane-provider-cluster-no-relations");
}

#[test]
fn issuer_watches_certificates_selectable() {
    snapshot_fixture("issuer-watches-certificates-selectable");
}

#[test]
fn ptpoperatorconfig_singleton() {
    snapshot_fixture("ptpoperatorconfig-singleton");
}

#[test]
fn ratelimitpolicy_reference_kinds() {
    snapshot_fixture("ratelimitpolicy-reference-kinds");
}

#[test]
fn osie_no_storage_version() {
    snapshot_fixture("osie-no-storage-version");
}

#[test]
fn imagepolicy_v1beta2_field_channel() {
    snapshot_fixture("imagepolicy-v1beta2-field-channel");
}

#[test]
fn prometheusrule_namespace_scope() {
    snapshot_fixture("prometheusrule-namespace-scope");
}

#[test]
fn provider_cluster_validating_webhook() {
    snapshot_fixture("provider-cluster-validating-webhook");
}

#[test]
fn certificate_mutating_webhook() {
    snapshot_fixture("certificate-mutating-webhook");
}

#[test]
fn deployment_builtin_webhooks() {
    snapshot_fixture("deployment-builtin-webhooks");
}

#[test]
fn backup_derived_webhooks() {
    snapshot_fixture("backup-derived-webhooks");
}

#[test]
fn database_derived_conversion() {
    snapshot_fixture("database-derived-conversion");
}

#[test]
fn every_fixture_has_a_snapshot_test() {
    let source = include_str!("snapshots.rs");
    for name in fixtures() {
        assert!(
            source.contains(&format!("snapshot_fixture(\"{name}\")")),
            "fixture {name} has no snapshot test here"
        );
    }
}

#[test]
fn generation_is_deterministic() {
    for name in fixtures() {
        let first = generate_fixture(&name).unwrap().plan;
        let second = generate_fixture(&name).unwrap().plan;
        assert_eq!(first, second, "fixture {name} rendered differently twice");
    }
}

/// `line` without its string literals and its trailing `//` comment: what layout checks read.
fn code_of(line: &str) -> String {
    let mut code = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        match (in_string, c) {
            (true, '\\') => {
                chars.next();
            }
            (true, '"') => in_string = false,
            (true, _) => {}
            (false, '"') => {
                in_string = true;
                code.push_str("\"\"");
            }
            (false, '/') if chars.peek() == Some(&'/') => break,
            (false, _) => code.push(c),
        }
    }
    code
}

#[test]
fn rendered_rust_has_no_glued_lines_or_cramped_lists() {
    for name in fixtures() {
        let generated = generate_fixture(&name).unwrap_or_else(|e| panic!("fixture {name}: {e}"));
        for file in &generated.plan.files {
            if file.path.extension().is_none_or(|e| e != "rs") || vendor::is_vendored(&file.path) {
                continue;
            }
            for (number, line) in file.contents.lines().enumerate() {
                let trimmed = line.trim_start();
                let at = || format!("{name}: {}:{}: {line}", file.path.display(), number + 1);
                assert!(
                    trimmed.starts_with("//") || !line.contains("///"),
                    "a doc comment glued to code: {}",
                    at()
                );
                let code = code_of(line);
                let cramped = code.as_bytes().windows(2).any(|pair| {
                    matches!(pair[0], b',' | b';')
                        && (pair[1].is_ascii_alphanumeric()
                            || matches!(pair[1], b'_' | b'&' | b'('))
                });
                assert!(!cramped, "no space after `,` or `;`: {}", at());
            }
        }
    }
}

/// The table named `key` below `value`, for what a Cargo.toml says.
fn table<'a>(value: &'a toml::Value, key: &str) -> &'a toml::Table {
    value
        .get(key)
        .and_then(toml::Value::as_table)
        .unwrap_or_else(|| panic!("no table {key} in {value}"))
}

/// Every key below `value`, at any depth.
fn keys(value: &toml::Value, found: &mut Vec<String>) {
    match value {
        toml::Value::Table(table) => {
            for (key, value) in table {
                found.push(key.clone());
                keys(value, found);
            }
        }
        toml::Value::Array(values) => values.iter().for_each(|v| keys(v, found)),
        _ => {}
    }
}

#[test]
fn the_vendored_runtime_is_the_embedded_one_and_a_standalone_crate() {
    let generated = generate_fixture("provider-cluster-validating-webhook").expect("generates");
    let vendored: std::collections::BTreeMap<String, _> = generated
        .plan
        .files
        .iter()
        .filter(|file| vendor::is_vendored(&file.path))
        .map(|file| (file.path.display().to_string(), file))
        .collect();
    let embedded: std::collections::BTreeMap<String, &str> = vendor::files().collect();
    assert_eq!(
        vendored.keys().collect::<Vec<_>>(),
        embedded.keys().collect::<Vec<_>>()
    );
    for (file, (path, text)) in vendored.values().zip(&embedded) {
        assert_eq!(
            file.ownership,
            operator_gen::write_plan::Ownership::Generated,
            "{path}"
        );
        let mut lines = file.contents.splitn(4, '\n');
        let mark = lines.next().unwrap_or_default();
        assert!(
            mark.contains(operator_gen::write_plan::GENERATED_MARK)
                && mark.contains("A copy of operator-gen-runtime"),
            "{path}: {mark}"
        );
        let checksum = lines.nth(1).unwrap_or_default();
        assert!(checksum.contains("checksum: sha256:"), "{path}: {checksum}");
        assert!(
            lines.next() == Some(*text),
            "{path} is not the embedded runtime's"
        );
    }

    let manifest = embedded[&format!("{VENDOR_DIR}/Cargo.toml")];
    let manifest: toml::Value = toml::from_str(manifest).expect("the copy's Cargo.toml parses");
    let package = table(&manifest, "package");
    assert_eq!(package["name"].as_str(), Some("operator-gen-runtime"));
    let version = package["version"].as_str().expect("a version");
    assert!(
        package["edition"].is_str() && package["license"].is_str(),
        "{package:?}"
    );
    let mut all = Vec::new();
    keys(&manifest, &mut all);
    assert!(
        !all.iter()
            .any(|key| key == "workspace" || key.contains("dev-dependencies")),
        "the copy inherits nothing from a workspace, and needs no dev-dependencies: {all:?}"
    );
    assert!(table(&manifest, "features").contains_key("webhooks"));

    // The crate names the copy by path, with the version cargo checks it against.
    let crate_toml = generated
        .plan
        .files
        .iter()
        .find(|file| file.path.as_os_str() == "Cargo.toml")
        .expect("a Cargo.toml");
    let crate_toml: toml::Value = toml::from_str(&crate_toml.contents).expect("parses");
    for section in ["dependencies", "dev-dependencies"] {
        let runtime = &table(&crate_toml, section)["operator-gen-runtime"];
        assert_eq!(runtime["path"].as_str(), Some(VENDOR_DIR), "{section}");
        assert_eq!(runtime["version"].as_str(), Some(version), "{section}");
    }
}
