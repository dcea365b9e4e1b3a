//! Unit tests of `analyze`: inline CRDs and manifests, asserting on the model.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;

use super::{primary::conditions, *};
use crate::{
    crd_document::{Selection, parse_all, select, tests::CRD},
    k8s_catalog,
};

fn analyze_with(manifest: &str) -> Result<Operator> {
    let with_spec = "schema: { openAPIV3Schema: { type: object, properties: { spec: { type: object, \
                     properties: { size: { type: integer } } } } } }";
    analyze_crd(
        &CRD.replace("schema: { openAPIV3Schema: { type: object } }", with_spec),
        manifest,
    )
}

/// `manifest` with the CRD `crd` as its primary, with generated types.
fn analyze_crd(crd: &str, manifest: &str) -> Result<Operator> {
    analyze_crd_warned(crd, manifest).map(|analysis| analysis.operator)
}

/// [`analyze_crd`], with the warnings the command would print.
fn analyze_crd_warned(crd: &str, manifest: &str) -> Result<Analysis> {
    let primary = select(
        "w.yaml",
        parse_all("w.yaml", crd.as_bytes())?,
        &Selection::default(),
    )?;
    let manifest = Manifest::parse("operator.yaml", manifest)?;
    let input = PrimaryInput::Crd {
        selected: Box::new(primary),
        dynamic: false,
    };
    analyze(
        "operator.yaml",
        &manifest,
        &input,
        &[],
        CommandFlags::default(),
    )
}

fn error_of(manifest: &str) -> String {
    analyze_with(manifest)
        .expect_err("the manifest should be refused")
        .to_string()
}

#[test]
fn relations_become_resolved_names() {
    let operator = analyze_with(
        "owns: [{kind: configmap}]\nwatches: [{kind: Secret, map: {field: metadata.name}}]\nexternal: [{name: rule-registry}]",
    )
    .unwrap();
    assert_eq!(operator.krate.name.raw(), "widget-controller");
    assert_eq!(operator.krate.ident.as_str(), "widget_controller");
    assert_eq!(
        operator.relations.owns[0].rust_path.as_str(),
        "k8s_openapi::api::core::v1::ConfigMap"
    );
    assert_eq!(operator.relations.watches[0].key.raw(), "/metadata/name");
    assert_eq!(
        operator.relations.external[0].hook.as_str(),
        "poll_rule_registry"
    );
    assert_eq!(
        operator.controller.finalizer_name.raw(),
        "example.com/widget-controller"
    );
    assert!(operator.controller.finalizer);
}

#[test]
fn a_kind_owned_and_watched_gets_one_name_per_relation() {
    let operator = analyze_with(
        "owns: [{kind: ConfigMap}]\nwatches: [{kind: ConfigMap, map: {label: example.com/w}}]",
    )
    .unwrap();
    assert_eq!(operator.relations.owns[0].ident.as_str(), "config_map");
    assert_eq!(
        operator.relations.watches[0].related.ident.as_str(),
        "config_map_watched"
    );
    // One import serves both relations.
    assert_eq!(operator.relations.imports.len(), 1);
}

#[test]
fn rbac_grants_what_each_relation_uses_and_no_more() {
    let rules = |manifest: &str| -> Vec<(String, String, String)> {
        analyze_with(manifest)
            .unwrap()
            .deploy
            .rbac
            .into_iter()
            .map(|r| {
                let verbs: Vec<&str> = r.verbs.iter().map(|v| v.0).collect();
                (
                    r.api_group.raw().to_owned(),
                    r.resource.raw().to_owned(),
                    verbs.join(","),
                )
            })
            .collect()
    };
    let rule = |group: &str, resource: &str, verbs: &str| {
        (group.to_owned(), resource.to_owned(), verbs.to_owned())
    };
    let primary = rule("example.com", "widgets", "list,watch");
    let events = rule("events.k8s.io", "events", "create,patch");
    let configmaps = rule("", "configmaps", "list,watch,create,patch");
    let blocking = rule("example.com", "widgets/finalizers", "update");
    assert_eq!(rules(""), vec![events.clone(), primary.clone()]);
    assert_eq!(
        rules("owns: [{kind: ConfigMap}]"),
        vec![configmaps, events.clone(), primary.clone(), blocking]
    );
    assert_eq!(
        rules("watches: [{kind: Deployment, map: {label: a}}]"),
        vec![
            rule("apps", "deployments", "list,watch"),
            events.clone(),
            primary
        ]
    );
    assert_eq!(
        rules("external: [{name: registry}]"),
        vec![events, rule("example.com", "widgets", "list,watch,patch")],
        "the finalizer patches the primary's own metadata, not a subresource"
    );
    let all: Vec<_> = [
        "",
        "owns: [{kind: ConfigMap}]",
        "external: [{name: registry}]",
    ]
    .into_iter()
    .flat_map(rules)
    .collect();
    assert!(
        all.iter()
            .all(|(_, _, verbs)| !verbs.contains("get") && !verbs.contains("delete")),
        "reads come from caches and children go with their owner: {all:?}"
    );
}

#[test]
fn rbac_says_what_listing_secrets_reads() {
    let operator =
        analyze_with("watches: [{kind: Secret, map: {label: a}}]").expect("a valid manifest");
    let secrets = operator
        .deploy
        .rbac
        .iter()
        .find(|r| r.resource.raw() == "secrets")
        .expect("a rule for the watched Secrets");
    assert!(
        secrets.reason.0.contains("every Secret in scope"),
        "{}",
        secrets.reason.0
    );
    let operator = analyze_with("owns: [{kind: Secret}]").expect("a valid manifest");
    let owned = operator
        .deploy
        .rbac
        .iter()
        .find(|r| r.resource.raw() == "secrets")
        .expect("a rule for the owned Secrets");
    assert!(
        owned.reason.0.contains("every Secret in scope"),
        "{}",
        owned.reason.0
    );
}

#[test]
fn namespace_scope_takes_a_role_and_refuses_cluster_scoped_kinds() {
    let operator = analyze_with("scope: namespace\nowns: [{kind: ConfigMap}]").unwrap();
    assert!(operator.controller.namespace_scoped);
    assert!(!analyze_with("").unwrap().controller.namespace_scoped);
    let err = error_of("scope: namespace\nwatches: [{kind: ClusterRole, map: {label: a}}]");
    assert!(
        err.contains("field `scope`") && err.contains("ClusterRole is cluster-scoped"),
        "{err}"
    );
}

#[test]
fn conditions_are_recorded_only_behind_a_status_subresource() {
    let condition = |extra: &str| {
        format!(
            "{{type: object, properties: {{type: {{type: string}}, status: {{type: string}}{extra}}}}}"
        )
    };
    let schema = |item: &str| -> JSONSchemaProps {
        serde_saphyr::from_str(&format!(
            "{{type: object, properties: {{status: {{type: object, properties: \
             {{conditions: {{type: array, items: {item}}}}}}}}}}}"
        ))
        .unwrap()
    };
    let full = condition(
        ", reason: {type: string}, lastTransitionTime: {type: string}, observedGeneration: {type: integer}",
    );
    assert_eq!(
        conditions(&schema(&full)),
        Some(Conditions {
            reason: true,
            message: false,
            last_transition_time: true,
            observed_generation: true,
            ..Conditions::default()
        })
    );
    assert_eq!(
        conditions(&schema(&condition(""))),
        Some(Conditions::default())
    );
    let no_status = "{type: object, properties: {type: {type: string}}}";
    assert_eq!(conditions(&schema(no_status)), None);
    // The test CRD has neither a status nor a /status subresource.
    let operator = analyze_with("").unwrap();
    assert!(!operator.primary.status_subresource && operator.primary.conditions.is_none());
    assert!(
        !operator
            .deploy
            .rbac
            .iter()
            .any(|r| r.resource.raw().ends_with("/status"))
    );
}

#[test]
fn the_manifest_sample_is_written_over_the_schema_sample() {
    let operator = analyze_with("sample: {spec: {size: 3}}").unwrap();
    let sample = |operator: Operator| operator.primary.sample.map(|s| s.raw().to_owned());
    assert_eq!(sample(operator).as_deref(), Some(r#"{"spec":{"size":3}}"#));
    let least = sample(analyze_with("").unwrap());
    assert_eq!(least.as_deref(), Some(r#"{"spec":{}}"#));
}

#[test]
fn an_unknown_kind_is_named_with_its_field() {
    let err = error_of("owns: [{kind: ConfigMap}, {kind: Widgetz}]");
    assert!(
        err.contains("owns[1].kind") && err.contains("\"Widgetz\"") && err.contains("crd:"),
        "{err}"
    );
}

#[test]
fn a_field_path_missing_from_the_schema_is_refused() {
    let err = error_of("watches: [{kind: ConfigMap, map: {field: spec.target}}]");
    assert!(
        err.contains("watches[0].map.field") && err.contains("has no field `spec`"),
        "{err}"
    );
    let err = error_of("watches: [{kind: Secret, map: {field: metadata.generation}}]");
    assert!(err.contains("string field"), "{err}");
    assert!(analyze_with("watches: [{kind: ConfigMap, map: {field: data.policy}}]").is_ok());
}

#[test]
fn a_field_rule_on_bytes_or_a_write_only_field_is_refused_pointing_at_metadata() {
    let bytes = "cannot name the primary: the field holds bytes (`format: byte`), which the API \
                 server sends base64-encoded";
    let cases = [
        ("Secret", "data.owner", bytes),
        ("ConfigMap", "binaryData.owner", bytes),
        ("Secret", "stringData.owner", "is write-only"),
    ];
    for (kind, path, says) in cases {
        let err = error_of(&format!(
            "watches: [{{kind: {kind}, map: {{field: {path}}}}}]"
        ));
        assert!(
            err.starts_with("operator.yaml: field `watches[0].map.field`: ")
                && err.contains(&format!("\"{path}\" of {kind} {says}"))
                && err.contains("label or an annotation")
                && err.contains("streams metadata only"),
            "{err}"
        );
    }
    // A label on the Secret is the way, and its watch never sees the Secret's data.
    let operator = analyze_with("watches: [{kind: Secret, map: {label: example.com/owner}}]")
        .expect("a valid manifest");
    assert!(operator.relations.watches[0].metadata_only);
}

#[test]
fn a_cached_watch_streams_whole_objects_into_a_cache_only_when_its_selector_narrows_them() {
    let operator =
        analyze_with("watches: [{kind: Secret, map: {label: example.com/owner}, cache: true}]")
            .expect("a label selects what is cached");
    let watched = &operator.relations.watches[0];
    assert!(watched.cached && !watched.metadata_only);
    assert!(operator.relations.watches_cached && !operator.relations.watches_metadata);
    for map in ["{annotation: example.com/owner}", "{field: data.owner}"] {
        let err = error_of(&format!(
            "watches: [{{kind: ConfigMap, map: {map}, cache: true}}]"
        ));
        assert!(
            err.starts_with("operator.yaml: field `watches[0].cache`: ")
                && err.contains("every ConfigMap in reach")
                && err.contains("Map it by label"),
            "{err}"
        );
    }
    let uncached = analyze_with("watches: [{kind: Secret, map: {label: example.com/owner}}]")
        .expect("a valid manifest");
    assert!(!uncached.relations.watches[0].cached && !uncached.relations.watches_cached);
}

#[test]
fn a_cluster_wide_cache_of_a_kind_tenants_create_is_warned_of_with_both_fixes() {
    let warnings = |manifest: &str| {
        analyze_crd_warned(CRD, manifest)
            .expect("a valid manifest")
            .warnings
    };
    let cached = warnings(
        "watches: [{kind: Deployment, map: {label: a.io/x}, cache: true}, \
         {kind: Secret, map: {label: example.com/owner}, cache: true}, \
         {kind: ConfigMap, map: {label: a.io/y}, cache: true}]",
    );
    let warned: Vec<_> = cached
        .iter()
        .filter(|w| w.contains("caches every"))
        .collect();
    assert_eq!(
        warned.len(),
        2,
        "the Secret's and the ConfigMap's: {cached:#?}"
    );
    assert!(
        warned[1].starts_with("operator.yaml: field `watches[2].cache`: ")
            && warned[1].contains("every ConfigMap in the cluster"),
        "{}",
        warned[1]
    );
    let warning = warned[0];
    assert!(
        warning.starts_with("operator.yaml: field `watches[1].cache`: ")
            && warning.contains("every Secret in the cluster")
            && warning.contains("\"example.com/owner\"")
            && warning.contains("`scope: namespace`")
            && warning.contains("leave `cache` out"),
        "{warning}"
    );
    for quiet in [
        "watches: [{kind: ConfigMap, map: {label: example.com/owner}}]",
        "scope: namespace\nwatches: [{kind: ConfigMap, map: {label: example.com/owner}, cache: true}]",
    ] {
        let warnings = warnings(quiet);
        assert!(
            !warnings.iter().any(|w| w.contains("caches every")),
            "{quiet}: {warnings:#?}"
        );
    }
}

#[test]
fn bad_names_and_keys_are_refused() {
    assert!(error_of("name: 9lives").contains("field `name`"));
    assert!(
        error_of("watches: [{kind: Secret, map: {label: 'not a key'}}]").contains("watches[0].map")
    );
    assert!(error_of("external: [{name: Registry}]").contains("external[0].name"));
    assert!(error_of("external: [{name: a}, {name: a}]").contains("used twice"));
    assert!(error_of("owns: [{kind: Secret}, {kind: secret}]").contains("owned twice"));
    assert!(error_of("dependencies: {kube: '5'}").contains("already a dependency"));
    let shadow = error_of("devDependencies: {tokio: {version: '1', features: [full]}}");
    assert!(
        shadow.contains("field `devDependencies.tokio`")
            && shadow.contains("dependency of the generated code"),
        "{shadow}"
    );
}

#[test]
fn extra_dependencies_are_quoted_as_toml() {
    let operator = analyze_with(
        "dependencies: {serde_yaml: '0.9', reqwest: {version: '0.13', default-features: false, features: [json]}}",
    )
    .unwrap();
    let spec = |name: &str| {
        operator
            .krate
            .dependencies
            .iter()
            .find(|d| d.name.raw() == name)
            .unwrap()
            .spec
            .to_string()
    };
    assert_eq!(spec("serde_yaml"), "\"0.9\"");
    assert_eq!(
        spec("reqwest"),
        "{ default-features = false, features = [\"json\"], version = \"0.13\" }"
    );
}

#[test]
fn a_namespaced_primary_cannot_own_a_cluster_scoped_kind() {
    let err = error_of("owns: [{kind: ClusterRole}]");
    assert!(
        err.contains("owns[0].kind") && err.contains("cluster-scoped"),
        "{err}"
    );
}

#[test]
fn a_crate_name_taken_by_a_dependency_or_cargo_is_refused() {
    for name in [
        "kube",
        "serde-json",
        "tokio",
        "tracing-subscriber",
        "deps",
        "build",
    ] {
        let err = error_of(&format!("name: {name}"));
        assert!(err.contains("field `name`"), "{name}: {err}");
    }
    let err = error_of("name: my-op\ndependencies: {my_op: '1'}");
    assert!(err.contains("field `name`"), "{err}");
}

#[test]
fn headers_name_flags_but_no_paths() {
    let flags = CommandFlags {
        crd: true,
        kind: true,
        version: false,
        manifest: true,
        allow_http: false,
    };
    let crd = CRD.replace(
        "schema: { openAPIV3Schema: { type: object } }",
        "schema: { openAPIV3Schema: { type: object, properties: { spec: { type: object } } } }",
    );
    let primary = select(
        "w.yaml",
        parse_all("w.yaml", crd.as_bytes()).unwrap(),
        &Selection::default(),
    )
    .unwrap();
    let input = PrimaryInput::Crd {
        selected: Box::new(primary),
        dynamic: false,
    };
    let operator = analyze(
        "/tmp/x/operator.yaml",
        &Manifest::default(),
        &input,
        &[],
        flags,
    )
    .unwrap()
    .operator;
    assert_eq!(
        operator.krate.provenance.regenerate.raw(),
        "operator-gen gen --crd <CRD> --kind Widget --manifest <operator.yaml>"
    );
}

#[test]
fn a_sample_that_does_not_fit_the_schema_is_refused() {
    let err = error_of("sample: {spec: {size: three}}");
    assert!(
        err.contains("field `sample`") && err.contains("spec.size") && err.contains("integer"),
        "{err}"
    );
    let err = error_of("sample: {spec: {sise: 3}}");
    assert!(err.contains("spec.sise"), "{err}");
}

#[test]
fn a_related_kind_never_shares_a_module_with_a_version() {
    let related_crd = CRD
        .replace("widgets.example.com", "v1s.other.example.com")
        .replace("group: example.com", "group: other.example.com")
        .replace("Widget", "V1")
        .replace("plural: widgets", "plural: v1s")
        .replace("singular: widget", "singular: v1")
        .replace("listKind: WidgetList", "listKind: V1List");
    let related = select(
        "v1.yaml",
        parse_all("v1.yaml", related_crd.as_bytes()).unwrap(),
        &Selection::default(),
    )
    .unwrap();
    let primary = select(
        "w.yaml",
        parse_all("w.yaml", CRD.as_bytes()).unwrap(),
        &Selection::default(),
    )
    .unwrap();
    let manifest = Manifest::parse(
        "operator.yaml",
        "watches: [{kind: V1, crd: v1.yaml, map: {label: example.com/widget}}]",
    )
    .unwrap();
    let input = PrimaryInput::Crd {
        selected: Box::new(primary),
        dynamic: false,
    };
    let related = [RelatedCrd {
        field: "watches[0]".to_owned(),
        selected: related,
    }];
    let operator = analyze(
        "operator.yaml",
        &manifest,
        &input,
        &related,
        CommandFlags::default(),
    )
    .unwrap()
    .operator;
    let modules: Vec<&str> = operator
        .types
        .versions
        .iter()
        .chain(&operator.types.related)
        .map(|m| m.module.as_str())
        .collect();
    assert_eq!(modules, ["v1alpha1", "v1", "v1_2"]);
    assert_eq!(
        operator.relations.watches[0].related.rust_path.as_str(),
        "crate::types::v1_2::V1"
    );
}

#[test]
fn webhooks_match_only_the_primary_and_are_named_after_the_crate() {
    let operator = analyze_with("name: widgets\nwebhooks: { validating: true }").unwrap();
    let webhooks = operator.webhooks.expect("webhooks asked for");
    let validating = webhooks.validating.expect("validating asked for");
    assert_eq!(
        validating.name.raw(),
        "validate.widgets.operator-gen.kube.rs"
    );
    assert_eq!(validating.path.0, "/validate");
    assert!(webhooks.mutating.is_none(), "mutating was not asked for");
    let rules: Vec<_> = webhooks.rules.iter().map(rule).collect();
    let primary = (operator.primary.group.raw(), operator.primary.version.raw());
    assert_eq!(rules, [(primary.0, primary.1, "widgets", "Namespaced")]);
    assert_eq!(webhooks.secret.raw(), "widgets-webhook-tls");
    assert_eq!(webhooks.inject_ca_from.raw(), "default/widgets-webhook");
    let features = |name: &str| {
        let dependency = operator
            .krate
            .dependencies
            .iter()
            .find(|d| d.name.raw() == name)
            .unwrap_or_else(|| panic!("{name} is a dependency"));
        format!("{:?}", dependency.spec)
    };
    assert!(features("kube").contains("admission"));
    assert!(features("axum").contains("json"));
    assert_eq!(
        operator
            .krate
            .dependencies
            .iter()
            .filter(|d| d.name.raw() == "kube")
            .count(),
        1,
        "one kube entry, with the admission feature"
    );
}

#[test]
fn webhooks_that_are_all_off_generate_nothing() {
    let operator = analyze_with("webhooks: { validating: false, mutating: false }").unwrap();
    assert!(operator.webhooks.is_none());
    let operator = analyze_with("").unwrap();
    assert!(operator.webhooks.is_none());
    assert!(
        !operator
            .krate
            .dependencies
            .iter()
            .any(|d| d.name.raw() == "rcgen")
    );
}

/// `manifest` with the CRD as a dynamic (untyped) primary.
fn analyze_dynamic(manifest: &str) -> Result<Operator> {
    let primary = select(
        "w.yaml",
        parse_all("w.yaml", CRD.as_bytes())?,
        &Selection::default(),
    )?;
    let manifest = Manifest::parse("operator.yaml", manifest)?;
    let input = PrimaryInput::Crd {
        selected: Box::new(primary),
        dynamic: true,
    };
    analyze(
        "operator.yaml",
        &manifest,
        &input,
        &[],
        CommandFlags::default(),
    )
    .map(|analysis| analysis.operator)
}

/// A webhook rule as `(group, version, resource, scope)`.
fn rule(rule: &webhooks::Rule) -> (&str, &str, &str, &str) {
    let names = (rule.group.raw(), rule.version.raw(), rule.resource.raw());
    (names.0, names.1, names.2, rule.scope.0)
}

#[test]
fn webhooks_on_a_dynamic_primary_receive_it_and_on_a_generic_one_match_each_kind() {
    let operator = analyze_dynamic("webhooks: { mutating: true }").expect("a dynamic primary");
    let webhooks = operator.webhooks.expect("webhooks");
    assert!(webhooks.mutating.is_some() && webhooks.validating.is_none());
    assert!(
        webhooks.exempt_label.is_none(),
        "a custom kind gates nothing of the operator's"
    );
    let kinds = ["Deployment", "Namespace"].map(|k| k8s_catalog::find(k).expect("built in"));
    let manifest = Manifest::parse("operator.yaml", "webhooks: { validating: true }").unwrap();
    let input = PrimaryInput::Generic(kinds.to_vec());
    let analysis = analyze(
        "operator.yaml",
        &manifest,
        &input,
        &[],
        CommandFlags::default(),
    )
    .expect("a generic operator admits each of its kinds");
    let webhooks = analysis.operator.webhooks.expect("webhooks");
    let rules: Vec<_> = webhooks.rules.iter().map(rule).collect();
    assert_eq!(
        rules,
        [
            ("apps", "v1", "deployments", "Namespaced"),
            ("", "v1", "namespaces", "Cluster"),
        ]
    );
    let exempt = webhooks
        .exempt_label
        .expect("built-in kinds gate the operator's own");
    assert!(exempt.raw().starts_with("skip-webhooks."), "{exempt}");
    assert!(error_of("webhooks: { validatng: true }").contains("validatng"));
}

/// Analyzes a derived primary `Backup` (example.com/v1) that also serves `also_served`.
fn analyze_derived(also_served: &str) -> Result<Operator> {
    analyze_derived_with(also_served, "")
}

/// `analyze_derived`, with `extra` lines in its manifest.
fn analyze_derived_with(also_served: &str, extra: &str) -> Result<Operator> {
    let text = format!(
        "primary:\n  derive: {{ kind: Backup, group: example.com, version: v1, alsoServed: {also_served} }}\n{extra}"
    );
    let manifest = Manifest::parse("operator.yaml", &text)?;
    let derived = manifest.primary.derive.clone().expect("a derived primary");
    analyze(
        "operator.yaml",
        &manifest,
        &PrimaryInput::Derived(derived),
        &[],
        CommandFlags::default(),
    )
    .map(|analysis| analysis.operator)
}

#[test]
fn versions_also_served_convert_through_the_storage_version() {
    let operator = analyze_derived("[v1beta1, v1alpha1]").unwrap();
    let webhooks = operator
        .webhooks
        .expect("a conversion webhook needs the HTTPS server");
    assert!(
        webhooks.configurations.is_empty(),
        "no admission webhook was asked for"
    );
    let conversion = webhooks.conversion.expect("a conversion");
    assert_eq!(conversion.hub.name.raw(), "v1");
    assert_eq!(conversion.hub.api_version.raw(), "example.com/v1");
    let spokes: Vec<&str> = conversion.spokes.iter().map(|v| v.name.raw()).collect();
    assert_eq!(spokes, ["v1beta1", "v1alpha1"], "in the manifest's order");
    assert_eq!(conversion.crd.raw(), "backups.example.com");

    let single = analyze_derived("[]").unwrap();
    assert!(single.webhooks.is_none(), "one version needs no webhook");
}

#[test]
fn versions_also_served_must_be_new_distinct_version_names() {
    for (also_served, expected) in [
        ("[v1]", "is `version` itself"),
        ("[v1alpha1, v1alpha1]", "listed twice"),
        ("[v2]", "ranks above \"v1\""),
        ("[kube]", "not a version name"),
        ("[V1Beta1]", "not a version name"),
        ("[1alpha1]", "not a version name"),
        ("[\"v1\\\"); evil\"]", "not a version name"),
        ("[a1, a2, a3, a4, a5, a6, a7, a8, a9]", "at most 8"),
    ] {
        let err = analyze_derived(also_served)
            .expect_err(also_served)
            .to_string();
        assert!(
            err.contains("primary.derive.alsoServed"),
            "{also_served}: {err}"
        );
        assert!(err.contains(expected), "{also_served}: {err}");
    }
}

/// `manifest` for the built-in kind Deployment.
fn analyze_builtin(manifest: &str) -> Result<Operator> {
    let manifest = Manifest::parse("operator.yaml", manifest)?;
    let deployment = crate::k8s_catalog::find("Deployment").expect("Deployment is built in");
    analyze(
        "operator.yaml",
        &manifest,
        &PrimaryInput::Builtin(deployment),
        &[],
        CommandFlags::default(),
    )
    .map(|analysis| analysis.operator)
}

#[test]
fn admitting_a_builtin_kind_runs_in_an_exempt_namespace_of_its_own() {
    let operator = analyze_builtin(
        "name: guard\nprimary: { builtin: Deployment }\nwebhooks: { validating: true }",
    )
    .unwrap();
    assert!(operator.deploy.own_namespace);
    assert_eq!(operator.deploy.namespace.raw(), "guard");
    let webhooks = operator.webhooks.expect("webhooks asked for");
    assert_eq!(
        webhooks.exempt_label.as_ref().map(Text::raw),
        Some("skip-webhooks.operator-gen.kube.rs/guard")
    );
    assert_eq!(webhooks.inject_ca_from.raw(), "guard/guard-webhook");
    assert!(
        webhooks
            .dns_names
            .iter()
            .any(|n| n.raw() == "guard.guard.svc")
    );

    // A custom primary is never one of the operator's own objects: nothing is exempt.
    let operator = analyze_with("name: widgets\nwebhooks: { validating: true }").unwrap();
    assert!(!operator.deploy.own_namespace);
    assert_eq!(operator.deploy.namespace.raw(), "default");
    assert!(operator.webhooks.expect("asked for").exempt_label.is_none());
    // Nor is an operator of a built-in kind that admits nothing.
    let operator = analyze_builtin("name: guard\nprimary: { builtin: Deployment }").unwrap();
    assert!(!operator.deploy.own_namespace);
}

#[test]
fn an_exempt_namespace_that_would_be_kubernetes_own_or_watched_is_refused() {
    for name in ["default", "kube-system", "kube-public"] {
        let error = analyze_builtin(&format!(
            "name: {name}\nprimary: {{ builtin: Deployment }}\nwebhooks: {{ mutating: true }}"
        ))
        .expect_err("Kubernetes' own namespace")
        .to_string();
        assert!(error.contains("field `name`"), "{error}");
    }
    let error = analyze_builtin(
        "name: guard\nprimary: { builtin: Deployment }\nscope: namespace\nwebhooks: { validating: true }",
    )
    .expect_err("its own namespace is exempt")
    .to_string();
    assert!(error.contains("field `scope`"), "{error}");
}

/// `manifest` for a CRD whose `status.conditions` is `conditions`, behind a `/status`
/// subresource.
fn analyze_with_conditions(conditions: &str, manifest: &str) -> Result<Operator> {
    let schema = format!(
        "schema: {{ openAPIV3Schema: {{ type: object, properties: {{ spec: {{ type: object }}, \
         status: {{ type: object, properties: {{ conditions: {conditions} }} }} }} }} }}\n      \
         subresources: {{ status: {{}} }}"
    );
    analyze_crd(
        &CRD.replace("schema: { openAPIV3Schema: { type: object } }", &schema),
        manifest,
    )
}

/// Condition items with every field the generated code fills, `required` as given.
fn condition_items(required: &str, list: &str) -> String {
    format!(
        "{{ type: array, {list} items: {{ type: object, required: [{required}], properties: {{ \
         type: {{ type: string }}, status: {{ type: string }}, reason: {{ type: string }}, \
         message: {{ type: string }}, lastTransitionTime: {{ type: string, format: date-time }}, \
         observedGeneration: {{ type: integer }} }} }} }}"
    )
}

#[test]
fn an_imported_crds_status_is_left_alone_unless_a_condition_is_asked_for() {
    let items = condition_items("type, status", "");
    let operator = analyze_with_conditions(&items, "").unwrap();
    assert!(
        operator.controller.condition.is_none(),
        "nothing asked, nothing written"
    );

    let operator = analyze_with_conditions(&items, "status: { condition: Audited }").unwrap();
    let condition = operator.controller.condition.expect("asked for");
    assert_eq!(condition.type_name.raw(), "Audited");
    assert!(!condition.fields.list_map, "a list replaced whole");
    assert!(
        operator
            .deploy
            .rbac
            .iter()
            .any(|r| r.resource.raw() == "widgets/status")
    );

    let map = condition_items(
        "type, status",
        "x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [type],",
    );
    let operator = analyze_with_conditions(&map, "status: { condition: Audited }").unwrap();
    assert!(
        operator
            .controller
            .condition
            .expect("asked for")
            .fields
            .list_map,
        "one entry applied"
    );
}

#[test]
fn an_imported_status_is_patched_only_where_it_is_the_operators_or_keeps_its_condition() {
    let items = condition_items("type, status", "");
    let patches_status = |operator: &Operator| {
        operator
            .deploy
            .rbac
            .iter()
            .any(|r| r.resource.raw() == "widgets/status")
    };
    let theirs = analyze_with_conditions(&items, "").unwrap();
    assert!(!theirs.controller.status_ours);
    assert!(!patches_status(&theirs), "another controller's status");
    let ours = analyze_with_conditions(&items, "status: { ours: true }").unwrap();
    assert!(ours.controller.status_ours && ours.controller.condition.is_none());
    assert!(
        patches_status(&ours),
        "the operator is the CRD's controller"
    );

    let error = analyze_crd(CRD, "status: { ours: true }")
        .expect_err("no /status subresource to write through")
        .to_string();
    assert!(error.contains("field `status.ours`"), "{error}");
    let error = analyze_builtin("primary: { builtin: Deployment }\nstatus: { ours: true }")
        .expect_err("a built-in kind's status is its controller's")
        .to_string();
    assert!(error.contains("field `status.ours`"), "{error}");
}

#[test]
fn a_derived_primary_keeps_ready_through_the_lifecycle_unless_the_manifest_names_another() {
    let condition = |extra: &str| analyze_derived_with("[]", extra).map(|o| o.controller.condition);
    let ready = condition("")
        .unwrap()
        .expect("a derived status is the operator's own");
    assert_eq!(ready.type_name.raw(), "Ready");
    let fields = ready.fields;
    assert!(
        fields.reason
            && fields.message
            && fields.last_transition_time
            && fields.observed_generation
    );
    assert!(
        !fields.list_map,
        "the user's types.rs may keep the list either way"
    );
    let named = condition("status: { condition: Available }")
        .unwrap()
        .expect("named");
    assert_eq!(named.type_name.raw(), "Available");
    let error = condition("status: { condition: not a type }")
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("field `status.condition`") && error.contains("not a condition type"),
        "{error}"
    );
}

#[test]
fn a_condition_that_cannot_be_written_is_refused_naming_the_field() {
    let items = condition_items("type, status", "");
    let refused = |conditions: &str, manifest: &str, expected: &str| {
        let error = analyze_with_conditions(conditions, manifest)
            .expect_err("refused")
            .to_string();
        assert!(error.contains("field `status.condition`"), "{error}");
        assert!(error.contains(expected), "{expected}: {error}");
    };
    refused(
        &items,
        "status: { condition: not a type }",
        "not a condition type",
    );
    let unfillable = condition_items("type, status, lastUpdateTime", "");
    refused(
        &unfillable,
        "status: { condition: Audited }",
        "lastUpdateTime",
    );
    let enumerated = items.replace(
        "type: { type: string }",
        "type: { type: string, enum: [Accepted] }",
    );
    refused(&enumerated, "status: { condition: Audited }", "Accepted");
    let untyped = "{ type: array, items: { type: string } }";
    refused(
        untyped,
        "status: { condition: Audited }",
        "no `status.conditions`",
    );
    let error = analyze_builtin("primary: { builtin: Deployment }\nstatus: { condition: Audited }")
        .expect_err("a built-in kind's status is its controller's")
        .to_string();
    assert!(error.contains("field `status.condition`"), "{error}");
}

/// `analyze_with`'s CRD, with CEL rules on its spec: one the least sample breaks, one
/// kube-cel cannot compile and a transition rule.
fn analyze_with_rules(manifest: &str) -> Result<Analysis> {
    let with_rules = "schema: { openAPIV3Schema: { type: object, properties: { spec: { type: object, \
                      x-kubernetes-validations: [{rule: 'self.size > 0', message: 'size must be positive'}, \
                      {rule: 'self.size >', message: 'unparsable'}, {rule: 'self.size >= oldSelf.size'}], \
                      required: [size], properties: { size: { type: integer } } } } } }";
    analyze_crd_warned(
        &CRD.replace("schema: { openAPIV3Schema: { type: object } }", with_rules),
        manifest,
    )
}

#[test]
fn a_sample_built_from_the_schema_takes_the_value_a_cel_rule_asks_for() {
    // The least sample has size 0; the rule asks for more, and gets the least it allows.
    let analysis = analyze_with_rules("").expect("the built sample is mended");
    let sample = analysis.operator.primary.sample.map(|s| s.raw().to_owned());
    assert_eq!(sample.as_deref(), Some(r#"{"spec":{"size":1}}"#));
    assert!(!analysis.operator.primary.sample_breaks_rules);
}

#[test]
fn a_singleton_rule_pins_the_name_every_sample_takes() {
    let singleton = "schema: { openAPIV3Schema: { type: object, \
                     x-kubernetes-validations: [{rule: \"self.metadata.name == 'cluster'\"}], \
                     properties: { spec: { type: object } } } }";
    let crd = CRD.replace("schema: { openAPIV3Schema: { type: object } }", singleton);
    let operator = analyze_crd(&crd, "").unwrap();
    let name = operator.primary.sample_name.map(|n| n.raw().to_owned());
    assert_eq!(name.as_deref(), Some("cluster"));
    let sample = operator.primary.sample.map(|s| s.raw().to_owned());
    assert_eq!(
        sample.as_deref(),
        Some(r#"{"spec":{}}"#),
        "metadata stays out of the body"
    );
}

#[test]
fn a_least_object_over_the_sample_cap_is_a_warning_and_its_cluster_test_is_ignored() {
    let huge = "schema: { openAPIV3Schema: { type: object, properties: { spec: { type: object, \
                required: [names], properties: { names: { type: array, minItems: 1000, \
                items: { type: array, minItems: 1000, items: { type: string, minLength: 1000 } } } } } } } }";
    let crd = CRD.replace("schema: { openAPIV3Schema: { type: object } }", huge);
    let analysis = analyze_crd_warned(&crd, "").expect("a warning, not an error");
    let cut_at = analysis
        .operator
        .primary
        .sample_cut_at
        .as_ref()
        .map(Text::raw);
    assert_eq!(cut_at, Some("spec.names[]"));
    let warned = analysis.warnings.iter().any(|w| {
        w.contains("cut short at `spec.names[]`") && w.contains("cluster test is ignored")
    });
    assert!(warned, "{:#?}", analysis.warnings);
    let plan = crate::render::render(&analysis.operator).expect("rendered");
    let test = plan
        .files
        .iter()
        .find(|f| f.path == std::path::Path::new("tests/cluster.rs"))
        .expect("a cluster test");
    assert!(
        test.contents
            .contains("#[ignore = \"the CRD's least object is over the size"),
        "{}",
        test.contents
    );
}

#[test]
fn a_rule_the_built_sample_cannot_keep_is_a_warning_and_the_crate_is_still_made() {
    let odd = "schema: { openAPIV3Schema: { type: object, properties: { spec: { type: object, \
               x-kubernetes-validations: [{rule: 'self.size % 7 == 3', message: 'size must be 3 mod 7'}], \
               required: [size], properties: { size: { type: integer } } } } } }";
    let crd = CRD.replace("schema: { openAPIV3Schema: { type: object } }", odd);
    let analysis = analyze_crd_warned(&crd, "").expect("a warning, not an error");
    assert!(analysis.operator.primary.sample_breaks_rules);
    let warning = analysis
        .warnings
        .iter()
        .find(|w| w.contains("`self.size % 7 == 3`"))
        .expect("a warning naming the rule");
    assert!(
        warning.contains("field `sample`")
            && warning.contains("at `spec`")
            && warning.contains("size must be 3 mod 7")
            && warning.contains("give `sample:` values in operator.yaml"),
        "{warning}"
    );
}

#[test]
fn a_manifest_sample_that_breaks_a_cel_rule_is_refused_naming_the_rule_and_field() {
    let err = analyze_with_rules("sample: {spec: {size: -1}}")
        .expect_err("the manifest's sample breaks the rule")
        .to_string();
    assert!(
        err.contains("field `sample`")
            && err.contains("with `sample:` written over it")
            && err.contains("`self.size > 0`")
            && err.contains("at `spec`")
            && err.contains("size must be positive"),
        "{err}"
    );
    // A sample that satisfies it passes; the rule kube-cel cannot compile is a warning, and
    // the transition rule is skipped, as on a create.
    let analysis = analyze_with_rules("sample: {spec: {size: 2}}").unwrap();
    let cel: Vec<&String> = analysis
        .warnings
        .iter()
        .filter(|w| w.contains("CEL rule"))
        .collect();
    assert_eq!(cel.len(), 1, "{:?}", analysis.warnings);
    assert!(
        cel[0].contains("`self.size >`") && cel[0].contains("cannot be compiled"),
        "{}",
        cel[0]
    );
}

#[test]
fn a_sample_built_from_the_schema_takes_the_field_a_cel_rule_asks_for() {
    let one_of = "schema: { openAPIV3Schema: { type: object, properties: { spec: { type: object, \
                  x-kubernetes-validations: [{rule: 'has(self.chart) != has(self.chartRef)', \
                  message: 'one of chart and chartRef'}], \
                  properties: { chart: { type: string, pattern: '^[a-z]+/[a-z]+$' }, chartRef: { type: string } } } } } }";
    let crd = CRD.replace("schema: { openAPIV3Schema: { type: object } }", one_of);
    let operator = analyze_crd(&crd, "").unwrap();
    let sample = operator.primary.sample.map(|s| s.raw().to_owned());
    assert_eq!(sample.as_deref(), Some(r#"{"spec":{"chart":"a/a"}}"#));
    // A sample the manifest gives is its author's: it is refused, never mended.
    let err = analyze_crd(&crd, "sample: {spec: {}}")
        .unwrap_err()
        .to_string();
    assert!(err.contains("one of chart and chartRef"), "{err}");
}

#[test]
fn sharding_grants_the_primary_patch_and_lets_label_changes_through() {
    let operator = analyze_with("sharding: true").expect("a valid manifest");
    assert!(operator.controller.sharding);
    let primary = operator
        .deploy
        .rbac
        .iter()
        .find(|r| r.resource.raw() == "widgets")
        .expect("a rule for the primary");
    let verbs: Vec<&str> = primary.verbs.iter().map(|v| v.0).collect();
    assert_eq!(verbs, ["list", "watch", "patch"]);
    assert!(
        primary.reason.0.contains("shard and drain labels"),
        "{primary:?}"
    );
    // The drain label changes neither generation nor finalizers.
    let predicates: Vec<&str> = operator.controller.predicates.iter().map(|p| p.0).collect();
    assert_eq!(
        predicates,
        [
            "predicates::generation",
            "predicates::finalizers",
            "predicates::labels"
        ]
    );
    let unfiltered = analyze_with("sharding: true\npredicates: []").expect("a valid manifest");
    assert!(
        unfiltered.controller.predicates.is_empty(),
        "nothing to let through"
    );
    let plain = analyze_with("").expect("a valid manifest");
    assert!(!plain.controller.sharding);
    assert_eq!(plain.controller.predicates.len(), 2);
}

#[test]
fn a_dynamic_primary_takes_relations_and_sharding_as_a_typed_one_does() {
    let manifest = "owns: [{kind: ConfigMap}]\nwatches: [{kind: Secret, map: {label: example.com/widget}}]\nsharding: true";
    let operator = analyze_dynamic(manifest).expect("relations on a dynamic primary");
    assert_eq!(operator.archetype, Archetype::Dynamic);
    assert_eq!(operator.relations.owns.len(), 1);
    assert_eq!(operator.relations.watches.len(), 1);
    assert!(operator.controller.sharding);
    assert_eq!(operator.primary.rust_type.as_str(), "Widget");
    assert!(
        operator.primary.sample.is_some(),
        "its sample comes from the CRD's schema"
    );
}

#[test]
fn a_generic_primary_takes_relations_a_namespace_scope_and_sharding() {
    let generic = |manifest: &str| analyze_generic(&["Deployment", "ConfigMap"], manifest);
    let sharded = generic("sharding: true")
        .expect("one ring for every kind")
        .operator;
    assert!(sharded.controller.sharding);
    let patched: Vec<&str> = sharded
        .deploy
        .rbac
        .iter()
        .filter(|rule| rule.verbs.iter().any(|verb| verb.0 == "patch"))
        .map(|rule| rule.resource.raw())
        .filter(|resource| *resource != "events")
        .collect();
    assert_eq!(
        patched,
        ["configmaps", "deployments"],
        "each kind's labels are written"
    );
    let twice = generic("sharding: true\nowns: [{kind: ConfigMap}]").expect_err("placed twice");
    let error = twice.to_string();
    assert!(error.contains("field `sharding`"), "{error}");
    assert!(
        error.contains("ConfigMap is both a primary and owned"),
        "{error}"
    );

    let related = generic(
        "owns: [{kind: Secret}]\nwatches: [{kind: ConfigMap, map: {label: example.com/owner}}]\n\
         external: [{name: registry}]",
    );
    let operator = related.expect("relations on a generic primary").operator;
    assert_eq!(operator.relations.owns.len(), 1);
    assert!(operator.controller.finalizer);
    assert_eq!(
        operator.controller.watches_to_list, 4,
        "each of the two kinds lists its primaries, the one shared watch its children, and the \
         one shared watch of ConfigMaps those that name a primary"
    );
    let scoped = generic("scope: namespace").expect("both kinds are namespaced");
    assert!(scoped.operator.controller.namespace_scoped);
    let error = analyze_generic(&["Deployment", "Node"], "scope: namespace")
        .expect_err("a Node is cluster-scoped")
        .to_string();
    assert!(
        error.contains("field `scope`") && error.contains("Node"),
        "{error}"
    );
}

#[test]
fn a_generic_primarys_samples_are_given_by_kind_and_a_kind_it_does_not_reconcile_is_refused() {
    let generic = |manifest: &str| analyze_generic(&["Deployment", "ConfigMap"], manifest);
    let given = generic("sample: { Deployment: { spec: { replicas: 0 } } }")
        .expect("a Deployment's sample")
        .operator;
    let samples: Vec<(&str, Option<&str>)> = given
        .controller
        .reconciled
        .kinds
        .iter()
        .map(|kind| (kind.ident.as_str(), kind.sample.as_ref().map(Text::raw)))
        .collect();
    assert_eq!(
        samples,
        [
            ("config_map", None),
            ("deployment", Some(r#"{"spec":{"replicas":0}}"#))
        ]
    );
    for (manifest, field, says) in [
        (
            "sample: { Secret: {} }",
            "field `sample`",
            "Deployment, ConfigMap",
        ),
        (
            "sample: { spec: {} }",
            "field `sample`",
            "kinds it reconciles",
        ),
        (
            "sample: { Deployment: [1] }",
            "field `sample.Deployment`",
            "as a mapping",
        ),
        (
            "sample: { ConfigMap: { metadata: {} } }",
            "field `sample.ConfigMap`",
            "`metadata` is the operator's",
        ),
    ] {
        let error = generic(manifest).expect_err(manifest).to_string();
        assert!(
            error.contains(field) && error.contains(says),
            "{manifest}: {error}"
        );
    }
}

#[test]
fn related_kinds_are_named_only_inside_the_manifests_related_module() {
    // Every relation, sharding and the default predicates: what imports the most.
    let operator = analyze_with(
        "owns: [{kind: ConfigMap}]\nwatches: [{kind: Secret, map: {label: example.com/w}}]\n\
         external: [{name: rule-registry, source: channel}]\nsharding: true",
    )
    .unwrap();
    let plan = crate::render::render(&operator).unwrap();
    let mut top = Vec::new();
    let mut related = Vec::new();
    for path in ["src/controller.rs", "src/manifest.rs"] {
        let rendered = plan
            .files
            .iter()
            .find(|f| f.path == std::path::Path::new(path))
            .unwrap_or_else(|| panic!("{path} is rendered"));
        let file = syn::parse_file(&rendered.contents).unwrap();
        for item in &file.items {
            match item {
                syn::Item::Use(used) => use_names(&used.tree, &mut top),
                syn::Item::Mod(module) if module.ident == "related" => {
                    let (_, items) = module.content.as_ref().expect("an inline module");
                    for item in items {
                        let syn::Item::Use(used) = item else {
                            panic!("only `pub use` lines in `related`");
                        };
                        use_names(&used.tree, &mut related);
                    }
                }
                _ => {}
            }
        }
    }
    related.sort();
    assert_eq!(related, ["ConfigMap", "Secret"]);
    let leaked: Vec<&String> = top.iter().filter(|name| related.contains(name)).collect();
    assert!(
        leaked.is_empty(),
        "imported beside the generated modules' own names: {leaked:?}"
    );
}

/// The names a `use` tree brings into scope (its aliases where it renames).
fn use_names(tree: &syn::UseTree, names: &mut Vec<String>) {
    match tree {
        syn::UseTree::Path(path) => use_names(&path.tree, names),
        syn::UseTree::Name(name) => names.push(name.ident.to_string()),
        syn::UseTree::Rename(rename) => names.push(rename.rename.to_string()),
        syn::UseTree::Group(group) => group.items.iter().for_each(|t| use_names(t, names)),
        syn::UseTree::Glob(_) => {}
    }
}

/// An analysis of a generic operator of the built-in `kinds`, with `manifest`.
fn analyze_generic(kinds: &[&str], manifest: &str) -> Result<Analysis> {
    let kinds: Vec<_> = kinds
        .iter()
        .map(|k| k8s_catalog::find(k).expect("built in"))
        .collect();
    let manifest = Manifest::parse("operator.yaml", manifest).expect("a manifest");
    let input = PrimaryInput::Generic(kinds);
    analyze(
        "operator.yaml",
        &manifest,
        &input,
        &[],
        CommandFlags::default(),
    )
}

#[test]
fn a_sharded_operator_runs_in_a_namespace_of_its_own_where_only_its_replicas_make_leases() {
    let sharded = analyze_with("sharding: true").expect("a valid manifest");
    assert!(sharded.deploy.own_namespace);
    assert_eq!(sharded.deploy.namespace.raw(), sharded.krate.name.raw());
    assert!(
        sharded.webhooks.is_none(),
        "no exemption label without webhooks"
    );
    let plain = analyze_with("").expect("a valid manifest");
    assert!(!plain.deploy.own_namespace);
    assert_eq!(plain.deploy.namespace.raw(), "default");
}

#[test]
fn sharding_an_operator_of_leases_is_refused_naming_the_field() {
    let error = analyze_generic(&["Lease", "ConfigMap"], "sharding: true")
        .expect_err("the ring is made of Leases")
        .to_string();
    assert!(error.contains("field `sharding`"), "{error}");
    assert!(error.contains("drop `sharding:`"), "{error}");
    assert!(analyze_generic(&["Lease"], "").is_ok());
}

#[test]
fn webhooks_on_a_cluster_scoped_built_in_kind_fail_open_with_a_warning_and_others_fail_closed() {
    let webhooks = "webhooks: {validating: true}";
    let cluster = analyze_generic(&["ClusterRole", "ConfigMap"], webhooks).expect("valid");
    let hooks = cluster.operator.webhooks.as_ref().expect("webhooks");
    assert!(hooks.fails_open);
    assert_eq!(hooks.configurations[0].failure_policy.0, "Ignore");
    let warned = cluster.warnings.join("\n");
    assert!(
        warned.contains("field `webhooks`") && warned.contains("clusterroles"),
        "{warned}"
    );
    let namespaced = analyze_generic(&["ConfigMap"], webhooks).expect("valid");
    let hooks = namespaced.operator.webhooks.as_ref().expect("webhooks");
    assert_eq!(hooks.configurations[0].failure_policy.0, "Fail");
    assert!(namespaced.warnings.is_empty(), "{:?}", namespaced.warnings);
    let own = analyze_with(webhooks).expect("a valid manifest");
    let hooks = own.webhooks.as_ref().expect("webhooks");
    assert!(
        !hooks.fails_open,
        "the operator's own custom resource fails closed"
    );
}
