//! One insta snapshot per generated file per fixture, named `{fixture}@{path}`.
//! Review changes with `cargo insta review`; a snapshot changes only when output does.

use operator_gen_tests::{fixtures, generate_fixture};

fn snapshot_fixture(name: &str) {
    let generated = generate_fixture(name).unwrap_or_else(|e| panic!("fixture {name}: {e}"));
    for file in &generated.plan.files {
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
            if file.path.extension().is_none_or(|e| e != "rs") {
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
