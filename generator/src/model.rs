//! The typed model templates render from. Building it is the `analyze` stage: every name,
//! literal and decision is made here, so templates only loop, branch and interpolate.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray,
};
use serde::Serialize;

use crate::{
    crd_document::SelectedCrd,
    error::{Error, Result},
    k8s_catalog,
    manifest::{self, ExternalSource, Manifest, MapRule},
    naming, rust_types, schema_path, schema_sample,
};

/// Dependencies of every generated crate, in one place so they are bumped together.
/// Versions are explicit because the crate must build on its own outside this workspace.
/// Operators use the newest kube (5) and k8s-openapi (0.29, `latest`), with which the Lease
/// crate for leader election works; kopium's kube 4 / k8s-openapi 0.28 stay inside the
/// generator. Each k8s-openapi version gets exactly one version feature in the workspace.
const BASE_DEPENDENCIES: &[(&str, &str)] = &[
    (
        "axum",
        r#"{ version = "0.8.9", default-features = false, features = ["http1", "tokio"] }"#,
    ),
    ("futures", r#""0.3.31""#),
    ("kube-lease-manager", r#""0.13.1""#),
    (
        "k8s-openapi",
        r#"{ version = "0.29.0", features = ["latest"] }"#,
    ),
    (
        "kube",
        r#"{ version = "5.0.0", default-features = false, features = ["client", "derive", "ring", "runtime", "rustls-tls", "unstable-runtime"] }"#,
    ),
    ("prometheus-client", r#""0.25.2""#),
    ("serde", r#"{ version = "1.0.228", features = ["derive"] }"#),
    ("serde_json", r#""1.0.145""#),
    ("thiserror", r#""2.0.17""#),
    (
        "tokio",
        r#"{ version = "1.48.0", features = ["macros", "rt-multi-thread", "signal", "sync", "time"] }"#,
    ),
    ("tracing", r#""0.1.41""#),
    (
        "tracing-subscriber",
        r#"{ version = "0.3.20", features = ["env-filter", "fmt", "json"] }"#,
    ),
];
/// Dev-dependencies of every generated crate: a mock API server for reconcile tests.
const BASE_DEV_DEPENDENCIES: &[(&str, &str)] =
    &[("http", r#""1.3.1""#), ("tower-test", r#""0.4.0""#)];
const DERIVED_DEPENDENCIES: &[(&str, &str)] = &[
    (
        "k8s-openapi",
        r#"{ version = "0.29.0", features = ["latest", "schemars"] }"#,
    ),
    ("schemars", r#""1.2.0""#),
    ("serde_yaml", r#""0.9.34""#),
];
const CHRONO: (&str, &str) = (
    "chrono",
    r#"{ version = "0.4.42", default-features = false, features = ["serde"] }"#,
);

/// Generator-wide facts that do not come from the inputs.
#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    /// The command that regenerates the crate, quoted in every generated header.
    pub command: String,
    pub generator_version: String,
}

/// Everything needed to render one operator crate.
#[derive(Debug, Clone, Serialize)]
pub struct Operator {
    pub crate_name: String,
    pub archetype: Archetype,
    /// For `Generic`: the kinds reconciled; for `Builtin`: the one kind, for its import.
    pub generic_kinds: Vec<Related>,
    /// The crate name as a Rust path segment (`prometheusrule_controller`).
    pub crate_ident: String,
    /// The package description, as a TOML string.
    pub description_toml: String,
    pub provenance: Provenance,
    pub primary: Primary,
    pub owns: Vec<Related>,
    pub watches: Vec<Watched>,
    pub external: Vec<External>,
    /// Primary-stream predicates, as `kube::runtime::predicates` function names.
    pub predicates: Vec<String>,
    /// Whether the generated code calls trait methods that need these traits in scope; decided
    /// here so a crate with fewer relations compiles without unused imports.
    pub uses_predicate_combine: bool,
    pub uses_resource_ext: bool,
    pub uses_resource: bool,
    /// Whether `Context::patch_status` is generated: the primary has a typed status behind a
    /// `/status` subresource.
    pub status_helper: bool,
    /// Whether `controller::sample` exists, the object the shipped tests reconcile.
    pub has_sample: bool,
    /// The owned kind the shipped tests apply as a child: the first with a valid empty object.
    pub owned_sample: Option<Related>,
    /// Whether any shipped test talks to a mock API server (finalizer, child or status).
    pub mock_tests: bool,
    pub requeue: Requeue,
    /// `use` paths for related kinds and what their relations need, sorted and unique.
    pub related_imports: Vec<String>,
    /// True when cleanup hooks run behind a finalizer (any external relation).
    pub finalizer: bool,
    /// Finalizer name as a Rust literal.
    pub finalizer_literal: String,
    pub field_manager_literal: String,
    /// True when some owned kind is namespaced / cluster-scoped, selecting helper variants.
    pub owns_namespaced: bool,
    pub owns_cluster: bool,
    pub dependencies: Vec<Dependency>,
    pub dev_dependencies: Vec<Dependency>,
    /// The least-privilege rules the generated code needs, one per resource.
    pub rbac: Vec<Rule>,
    /// Whether the operator watches only its own namespace, granted by a Role rather than a
    /// ClusterRole.
    pub namespace_scoped: bool,
    /// The `Api` constructor for watches: `all`, or `default_namespaced` (the namespace of
    /// the kubeconfig or, in a pod, its own).
    pub watch_api: String,
    /// Namespace of the operator's Deployment and ServiceAccount in `deploy/`.
    pub deploy_namespace: String,
    /// The CRD as loaded, for `deploy/crd.yaml` (imported and dynamic operators).
    pub crd_yaml: Option<String>,
    /// Types of every served version of the primary, one module each; the module of the
    /// version the operator uses is re-exported.
    pub versions: Vec<TypesModule>,
    pub selected_module: String,
    /// One module per related custom kind, holding the version the manifest selected.
    pub related_types: Vec<TypesModule>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Primary {
    pub kind: String,
    /// The names again as Rust literals, for code that spells them out.
    pub kind_literal: String,
    pub group_literal: String,
    pub version_literal: String,
    pub plural_literal: String,
    pub api_version_literal: String,
    pub rust_type: String,
    pub group: String,
    pub version: String,
    pub plural: String,
    pub crd_name: String,
    pub namespaced: bool,
    pub status_type: Option<String>,
    /// Whether status is written through the `/status` subresource, which is what makes a
    /// status write leave `metadata.generation` alone and so not retrigger a reconcile.
    pub status_subresource: bool,
    /// The fields of `status.conditions[]` this CRD declares, when it has conditions the
    /// controller can record its outcome in (a `/status` subresource and items with `type`
    /// and `status`).
    pub conditions: Option<Conditions>,
    /// The smallest valid body of the primary (everything but `apiVersion`, `kind` and
    /// `metadata`) as a Rust string literal of JSON, when the generator knows the schema.
    pub sample_literal: Option<String>,
    /// Where the CRD came from and whether the version was the storage default.
    pub origin: String,
    pub version_defaulted: bool,
}

/// Which optional fields a CRD's condition items declare; `type` and `status` always exist.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Conditions {
    pub reason: bool,
    pub message: bool,
    pub last_transition_time: bool,
    pub observed_generation: bool,
}

/// An owned or watched kind.
#[derive(Debug, Clone, Serialize)]
pub struct Related {
    pub kind: String,
    /// Full path of the Rust type (`k8s_openapi::api::core::v1::ConfigMap`), imported once.
    pub rust_path: String,
    /// The type's name as used after the import (`ConfigMap`).
    pub rust_name: String,
    pub namespaced: bool,
    /// Snake-case stem for variables and functions (`config_map`).
    pub ident: String,
    /// API group and plural, for RBAC rules.
    pub group: String,
    pub plural: String,
    /// A k8s-openapi kind (it has `Default`), rather than a custom one.
    pub builtin: bool,
    /// Whether the skeleton can apply an empty object of this kind as a working example.
    pub skeleton: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Watched {
    pub related: Related,
    /// `label`, `annotation` or `field`.
    pub rule: String,
    /// Label/annotation key or JSON pointer, as a Rust literal.
    pub key_literal: String,
    /// Name of the constant holding it (`SECRET_LABEL`).
    pub key_const: String,
    /// The rule as the manifest wrote it, for docs.
    pub rule_text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct External {
    pub name: String,
    pub name_literal: String,
    pub ident: String,
    pub channel: bool,
    pub interval_secs: u64,
}

/// One RBAC rule of the operator's ClusterRole.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Rule {
    pub api_group: String,
    pub resource: String,
    pub verbs: Vec<String>,
    /// Why the operator needs it, written as a YAML comment.
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Requeue {
    pub after_secs: Option<u64>,
    /// `Controller::with_config` settings; zero concurrency means unlimited, as in kube.
    pub concurrency: u16,
    pub debounce_ms: u64,
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Dependency {
    pub name: String,
    pub spec: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct TypesModule {
    pub module: String,
    pub code: String,
}

/// A CRD named by an `owns:`/`watches:` entry, loaded by the caller.
#[derive(Debug, Clone)]
pub struct RelatedCrd {
    /// The manifest field that named it (`owns[0]`), for errors.
    pub field: String,
    pub selected: SelectedCrd,
}

/// What the operator reconciles, as read from the manifest and loaded by the caller.
#[derive(Debug, Clone)]
pub enum PrimaryInput {
    /// An imported CRD, with kopium-generated types or, when `dynamic`, as `DynamicObject`.
    Crd {
        selected: Box<SelectedCrd>,
        dynamic: bool,
    },
    /// A Kubernetes kind from k8s-openapi.
    Builtin(k8s_catalog::BuiltinKind),
    /// A custom resource defined in Rust, in the user's `src/types.rs`.
    Derived(manifest::Derived),
    /// Several built-in kinds, reconciled on their metadata only.
    Generic(Vec<k8s_catalog::BuiltinKind>),
}

/// The primary's facts, the types modules and the archetype-specific parts of the model.
struct PrimaryFacts {
    primary: Primary,
    archetype: Archetype,
    versions: Vec<TypesModule>,
    selected_module: String,
    uses_chrono: bool,
    generic_kinds: Vec<Related>,
}

/// Which shape of operator is generated; see `the-object.txt` in the kube-rs docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Archetype {
    Imported,
    Builtin,
    Derived,
    Dynamic,
    Generic,
}

fn primary_facts(
    manifest_origin: &str,
    input: &PrimaryInput,
    sample_overlay: Option<&serde_json::Value>,
) -> Result<PrimaryFacts> {
    let builtin_related = |b: &k8s_catalog::BuiltinKind| Related {
        kind: b.kind.to_owned(),
        rust_path: format!("k8s_openapi::{}", b.rust_path),
        rust_name: b.kind.to_owned(),
        namespaced: b.namespaced,
        ident: naming::snake_ident(b.kind),
        group: b.group.to_owned(),
        plural: b.plural.to_owned(),
        builtin: true,
        skeleton: b.empty_object_is_valid(),
    };
    let plain = |kind: &str,
                 group: &str,
                 version: &str,
                 plural: &str,
                 namespaced: bool,
                 rust_type: String| Primary {
        kind: kind.to_owned(),
        kind_literal: naming::string_literal(kind),
        group_literal: naming::string_literal(group),
        version_literal: naming::string_literal(version),
        plural_literal: naming::string_literal(plural),
        api_version_literal: naming::string_literal(&if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        }),
        rust_type,
        group: group.to_owned(),
        version: version.to_owned(),
        plural: plural.to_owned(),
        crd_name: if group.is_empty() {
            plural.to_owned()
        } else {
            format!("{plural}.{group}")
        },
        namespaced,
        status_type: None,
        status_subresource: false,
        conditions: None,
        sample_literal: None,
        origin: String::new(),
        version_defaulted: false,
    };
    Ok(match input {
        PrimaryInput::Crd { selected, dynamic } => {
            let crd = &selected.crd;
            let version = selected.version();
            let types = if *dynamic {
                None
            } else {
                Some(rust_types::generate(selected)?)
            };
            let mut versions = Vec::new();
            if let Some(types) = &types {
                for (index, v) in crd
                    .spec
                    .versions
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.served)
                {
                    let code = if index == selected.version_index {
                        types.code.clone()
                    } else {
                        rust_types::generate_version(selected, index)?.code
                    };
                    versions.push(TypesModule {
                        module: naming::snake_ident(&v.name),
                        code,
                    });
                }
            }
            let rust_type = types
                .as_ref()
                .map_or_else(|| "DynamicObject".to_owned(), |t| t.root.clone());
            let mut primary = plain(
                &crd.spec.names.kind,
                &crd.spec.group,
                &version.name,
                &crd.spec.names.plural,
                crd.spec.scope == "Namespaced",
                rust_type,
            );
            primary.crd_name = selected.name().to_owned();
            primary.status_type = types.as_ref().and_then(|t| t.status.clone());
            primary.status_subresource = version
                .subresources
                .as_ref()
                .is_some_and(|s| s.status.is_some());
            if let Some(schema) = selected.schema().filter(|_| !*dynamic) {
                if primary.status_subresource && primary.status_type.is_some() {
                    primary.conditions = conditions(schema);
                }
                let body = schema_sample::sample_with(schema, sample_overlay);
                primary.sample_literal = Some(naming::string_literal(&body.to_string()));
            }
            primary.origin = selected.origin.clone();
            primary.version_defaulted = selected.defaulted;
            PrimaryFacts {
                primary,
                archetype: if *dynamic {
                    Archetype::Dynamic
                } else {
                    Archetype::Imported
                },
                versions,
                selected_module: naming::snake_ident(&version.name),
                uses_chrono: types.is_some_and(|t| t.uses_chrono),
                generic_kinds: Vec::new(),
            }
        }
        PrimaryInput::Builtin(b) => PrimaryFacts {
            primary: plain(
                b.kind,
                b.group,
                b.version,
                b.plural,
                b.namespaced,
                b.kind.to_owned(),
            ),
            archetype: Archetype::Builtin,
            versions: Vec::new(),
            selected_module: String::new(),
            uses_chrono: false,
            generic_kinds: vec![builtin_related(b)],
        },
        PrimaryInput::Derived(d) => {
            let plural = d
                .plural
                .clone()
                .unwrap_or_else(|| format!("{}s", d.kind.to_lowercase()));
            naming::check_kube_names(&d.kind, &d.group, &d.version, &plural).map_err(|reason| {
                Error::Manifest {
                    location: format!("{manifest_origin}: field `primary.derive`"),
                    reason,
                }
            })?;
            let mut primary = plain(
                &d.kind,
                &d.group,
                &d.version,
                &plural,
                d.namespaced,
                naming::type_name(&d.kind),
            );
            primary.status_type = Some(format!("{}Status", naming::type_name(&d.kind)));
            primary.status_subresource = true;
            PrimaryFacts {
                primary,
                archetype: Archetype::Derived,
                versions: Vec::new(),
                selected_module: String::new(),
                uses_chrono: false,
                generic_kinds: Vec::new(),
            }
        }
        PrimaryInput::Generic(kinds) => {
            let names: Vec<&str> = kinds.iter().map(|k| k.kind).collect();
            let mut primary = plain(&names.join(", "), "", "", "", true, String::new());
            primary.crd_name = names.join(", ");
            PrimaryFacts {
                primary,
                archetype: Archetype::Generic,
                versions: Vec::new(),
                selected_module: String::new(),
                uses_chrono: false,
                generic_kinds: {
                    let mut related: Vec<Related> = kinds.iter().map(builtin_related).collect();
                    related.sort_by(|a, b| a.rust_name.cmp(&b.rust_name));
                    related.dedup_by(|a, b| a.rust_name == b.rust_name);
                    related
                },
            }
        }
    })
}

/// The condition fields of `schema`'s `status.conditions`, when its items are objects with
/// string `type` and `status` (the shape of `metav1.Condition` and its many look-alikes).
fn conditions(schema: &JSONSchemaProps) -> Option<Conditions> {
    let property = |s: &JSONSchemaProps, name: &str| s.properties.as_ref()?.get(name).cloned();
    let list = property(&property(schema, "status")?, "conditions")?;
    let Some(JSONSchemaPropsOrArray::Schema(item)) = &list.items else {
        return None;
    };
    let is = |name: &str, type_: &str| {
        property(item, name).is_some_and(|p| p.type_.as_deref() == Some(type_))
    };
    (list.type_.as_deref() == Some("array") && is("type", "string") && is("status", "string")).then(
        || Conditions {
            reason: is("reason", "string"),
            message: is("message", "string"),
            last_transition_time: is("lastTransitionTime", "string"),
            observed_generation: is("observedGeneration", "integer"),
        },
    )
}

/// Builds the model. Pure: all input has been read already.
pub fn analyze(
    manifest_origin: &str,
    manifest: &Manifest,
    input: &PrimaryInput,
    related_crds: &[RelatedCrd],
    provenance: Provenance,
) -> Result<Operator> {
    let bad = |field: &str, reason: String| Error::Manifest {
        location: format!("{manifest_origin}: field `{field}`"),
        reason,
    };
    let facts = primary_facts(manifest_origin, input, manifest.sample.as_ref())?;
    if manifest.sample.is_some() && facts.primary.sample_literal.is_none() {
        return Err(bad(
            "sample",
            "a sample is built from an imported CRD's schema; this primary has none".to_owned(),
        ));
    }
    let primary = &facts.primary;
    let typed = matches!(
        facts.archetype,
        Archetype::Imported | Archetype::Builtin | Archetype::Derived
    );
    let has_relations =
        !manifest.owns.is_empty() || !manifest.watches.is_empty() || !manifest.external.is_empty();
    if !typed && has_relations {
        return Err(bad(
            "owns/watches/external",
            "relations are generated for typed primaries (a CRD, a built-in kind or a derived resource); \
             dynamic and generic operators take none"
                .to_owned(),
        ));
    }
    let crate_name = manifest.name.clone().unwrap_or_else(|| {
        naming::default_crate_name(primary.kind.split(',').next().unwrap_or("operator"))
    });
    naming::check_crate_name(&crate_name).map_err(|reason| bad("name", reason))?;
    let namespaced = primary.namespaced;

    let mut related_types = Vec::new();
    let mut uses_chrono = facts.uses_chrono;
    let mut resolve = |field: String,
                       kind: &str,
                       crd_given: bool|
     -> Result<(Related, serde_json::Value)> {
        if crd_given {
            let related = related_crds
                .iter()
                .find(|r| r.field == field)
                .ok_or_else(|| {
                    bad(
                        &field,
                        "its `crd:` was not loaded (generator bug)".to_owned(),
                    )
                })?;
            let generated = rust_types::generate(&related.selected)?;
            uses_chrono |= generated.uses_chrono;
            let module = naming::snake_ident(&related.selected.crd.spec.names.kind);
            let rust_path = format!("crate::types::{module}::{}", generated.root);
            if !related_types
                .iter()
                .any(|m: &TypesModule| m.module == module)
            {
                related_types.push(TypesModule {
                    module: module.clone(),
                    code: generated.code,
                });
            }
            let schema = related
                .selected
                .schema()
                .and_then(|s| serde_json::to_value(s).ok())
                .unwrap_or_default();
            let kind = related.selected.crd.spec.names.kind.clone();
            return Ok((
                Related {
                    ident: naming::snake_ident(&kind),
                    kind,
                    rust_path,
                    rust_name: generated.root,
                    namespaced: related.selected.crd.spec.scope == "Namespaced",
                    group: related.selected.crd.spec.group.clone(),
                    plural: related.selected.crd.spec.names.plural.clone(),
                    builtin: false,
                    skeleton: false,
                },
                schema,
            ));
        }
        let builtin = k8s_catalog::find(kind).ok_or_else(|| {
            let known: Vec<&str> = k8s_catalog::all().iter().map(|k| k.kind).collect();
            bad(&format!("{field}.kind"), format!(
                "unknown kind {kind:?}; name a built-in kind ({}) or give `crd:` with the CRD that defines it",
                known.join(", ")
            ))
        })?;
        Ok((
            Related {
                kind: builtin.kind.to_owned(),
                rust_path: format!("k8s_openapi::{}", builtin.rust_path),
                rust_name: builtin.kind.to_owned(),
                namespaced: builtin.namespaced,
                ident: naming::snake_ident(builtin.kind),
                group: builtin.group.to_owned(),
                plural: builtin.plural.to_owned(),
                builtin: true,
                skeleton: builtin.empty_object_is_valid(),
            },
            builtin.schema(),
        ))
    };

    let mut owns = Vec::new();
    for (i, owned) in manifest.owns.iter().enumerate() {
        let (related, _) = resolve(format!("owns[{i}]"), &owned.kind, owned.crd.is_some())?;
        if owns.iter().any(|o: &Related| o.kind == related.kind) {
            return Err(bad(
                &format!("owns[{i}].kind"),
                format!("{} is owned twice; list it once", related.kind),
            ));
        }
        owns.push(related);
    }

    let mut watches = Vec::new();
    for (i, watched) in manifest.watches.iter().enumerate() {
        let field = format!("watches[{i}]");
        let (related, schema) = resolve(field.clone(), &watched.kind, watched.crd.is_some())?;
        let (rule, key, rule_text) = match &watched.map {
            MapRule::Label(key) | MapRule::Annotation(key) => {
                naming::check_label_key(key)
                    .map_err(|reason| bad(&format!("{field}.map"), reason))?;
                let rule = if matches!(watched.map, MapRule::Label(_)) {
                    "label"
                } else {
                    "annotation"
                };
                (rule, key.clone(), format!("{rule} `{key}`"))
            }
            MapRule::Field(path) => {
                check_field_path(&schema, path).map_err(|problem| {
                    bad(
                        &format!("{field}.map.field"),
                        format!("{path:?} does not exist in {}: {problem}", related.kind),
                    )
                })?;
                (
                    "field",
                    naming::json_pointer(path),
                    format!("field `{path}`"),
                )
            }
        };
        if watches
            .iter()
            .any(|w: &Watched| w.related.kind == related.kind)
        {
            return Err(bad(
                &format!("{field}.kind"),
                format!("{} is watched twice; list it once", related.kind),
            ));
        }
        let suffix = if rule == "field" { "pointer" } else { rule };
        watches.push(Watched {
            key_const: format!("{}_{suffix}", related.ident).to_uppercase(),
            related,
            rule: rule.to_owned(),
            key_literal: naming::string_literal(&key),
            rule_text,
        });
    }

    let mut external = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, ext) in manifest.external.iter().enumerate() {
        naming::check_external_name(&ext.name)
            .map_err(|reason| bad(&format!("external[{i}].name"), reason))?;
        if !seen.insert(ext.name.clone()) {
            return Err(bad(
                &format!("external[{i}].name"),
                format!("{:?} is used twice", ext.name),
            ));
        }
        if ext.source == ExternalSource::Channel && ext.interval.is_some() {
            return Err(bad(
                &format!("external[{i}].interval"),
                "only `source: poll` has an interval".to_owned(),
            ));
        }
        let interval_secs = ext.interval.map_or(60, |d| d.as_secs().max(1));
        external.push(External {
            name: ext.name.clone(),
            name_literal: naming::string_literal(&ext.name),
            ident: naming::snake_ident(&ext.name),
            channel: ext.source == ExternalSource::Channel,
            interval_secs,
        });
    }

    let backoff_base = manifest
        .requeue
        .error_backoff
        .unwrap_or(std::time::Duration::from_secs(1));
    let backoff_max = manifest
        .requeue
        .error_backoff_max
        .unwrap_or(std::time::Duration::from_secs(300));
    if backoff_max < backoff_base {
        return Err(bad(
            "requeue.errorBackoffMax",
            "must not be shorter than requeue.errorBackoff".to_owned(),
        ));
    }

    let mut base = BASE_DEPENDENCIES.to_vec();
    if uses_chrono {
        base.push(CHRONO);
    }
    if facts.archetype == Archetype::Derived {
        // The CRD is derived from Rust types: schemars for the schema (with k8s-openapi's
        // schemas for Condition), serde_yaml for the crdgen binary that prints it.
        base.retain(|(name, _)| *name != "k8s-openapi");
        base.extend(DERIVED_DEPENDENCIES);
    }
    let dependencies = dependency_table(&base, &manifest.dependencies, "dependencies", &bad)?;
    let dev_dependencies = dependency_table(
        BASE_DEV_DEPENDENCIES,
        &manifest.dev_dependencies,
        "devDependencies",
        &bad,
    )?;

    let predicates: Vec<String> = manifest
        .predicates()
        .iter()
        .map(|p| match p {
            manifest::Predicate::Generation => "generation",
            manifest::Predicate::Finalizers => "finalizers",
            manifest::Predicate::Labels => "labels",
            manifest::Predicate::Annotations => "annotations",
        })
        .map(str::to_owned)
        .collect();

    let related_imports = related_imports(&mut owns, &mut watches, &external)
        .map_err(|reason| bad("owns/watches", reason))?;
    // A finalizer is named in the domain of whoever defines the resource: the CRD's group, or
    // this generator's for built-in kinds, whose groups belong to Kubernetes.
    let finalizer_group = match facts.archetype {
        Archetype::Builtin | Archetype::Generic => "operator-gen.kube.rs",
        _ => primary.group.as_str(),
    };
    let description = match facts.archetype {
        Archetype::Generic => format!("A kube-rs operator for the metadata of {}", primary.kind),
        _ if primary.group.is_empty() => format!(
            "A kube-rs operator for {} ({})",
            primary.kind, primary.version
        ),
        _ => format!(
            "A kube-rs operator for {} ({}/{})",
            primary.kind, primary.group, primary.version
        ),
    };
    let has_sample =
        facts.primary.sample_literal.is_some() || facts.archetype == Archetype::Builtin;
    let owned_sample = owns.iter().find(|o| o.builtin && o.skeleton).cloned();
    let status_helper = facts.primary.status_subresource
        && facts.primary.status_type.is_some()
        && matches!(facts.archetype, Archetype::Imported | Archetype::Derived);
    let namespace_scoped = manifest.scope == manifest::Scope::Namespace;
    if namespace_scoped && !typed {
        return Err(bad(
            "scope",
            "`scope: namespace` is generated for typed primaries only".to_owned(),
        ));
    }
    let kinds = std::iter::once((&facts.primary.kind, facts.primary.namespaced))
        .chain(owns.iter().map(|o| (&o.kind, o.namespaced)))
        .chain(
            watches
                .iter()
                .map(|w| (&w.related.kind, w.related.namespaced)),
        );
    let mut cluster_scoped = kinds.filter(|(_, namespaced)| !namespaced);
    if namespace_scoped && let Some((kind, _)) = cluster_scoped.next() {
        return Err(bad(
            "scope",
            format!(
                "{kind} is cluster-scoped, so a namespace-scoped operator cannot watch it; \
                 use `scope: cluster` or drop it from the manifest"
            ),
        ));
    }
    let rbac = rbac_rules(&facts, &owns, &watches, !external.is_empty(), status_helper);
    let crd_yaml = match input {
        PrimaryInput::Crd { selected, .. } => Some(serde_yaml::to_string(&selected.crd).map_err(
            |e| Error::Template {
                template: "deploy/crd.yaml".to_owned(),
                reason: e.to_string(),
            },
        )?),
        _ => None,
    };
    Ok(Operator {
        rbac,
        namespace_scoped,
        watch_api: if namespace_scoped {
            "default_namespaced"
        } else {
            "all"
        }
        .to_owned(),
        deploy_namespace: "default".to_owned(),
        crd_yaml,
        finalizer_literal: naming::string_literal(&format!("{finalizer_group}/{crate_name}")),
        field_manager_literal: naming::string_literal(&crate_name),
        uses_predicate_combine: predicates.len() > 1,
        uses_resource_ext: owns.iter().any(|o| o.namespaced)
            || watches.iter().any(|w| w.rule != "field" || namespaced)
            || (!external.is_empty() && namespaced)
            || status_helper,
        uses_resource: !owns.is_empty() || facts.primary.conditions.is_some(),
        has_sample,
        mock_tests: has_sample
            && (!external.is_empty()
                || facts.primary.conditions.is_some()
                || owned_sample.is_some()),
        owned_sample,
        status_helper,
        owns_namespaced: owns.iter().any(|o| o.namespaced),
        owns_cluster: owns.iter().any(|o| !o.namespaced),
        crate_ident: crate_name.replace('-', "_"),
        description_toml: naming::toml_string(&description),
        crate_name,
        provenance,
        archetype: facts.archetype,
        generic_kinds: facts.generic_kinds,
        primary: facts.primary,
        related_imports,
        finalizer: !external.is_empty(),
        owns,
        watches,
        external,
        predicates,
        requeue: Requeue {
            after_secs: manifest.requeue.after.map(|d| d.as_secs().max(1)),
            concurrency: manifest.concurrency.unwrap_or(0),
            debounce_ms: manifest.debounce.map_or(0, |d| d.as_millis() as u64),
            backoff_base_ms: backoff_base.as_millis().max(1) as u64,
            backoff_max_ms: backoff_max.as_millis() as u64,
        },
        dependencies,
        dev_dependencies,
        selected_module: facts.selected_module,
        versions: facts.versions,
        related_types,
    })
}

/// The verbs the generated code uses, per resource, and nothing more: the primary is read
/// and patched (finalizers), its status patched only where the skeleton writes it, owned
/// kinds are fully managed, watched kinds only read.
fn rbac_rules(
    facts: &PrimaryFacts,
    owns: &[Related],
    watches: &[Watched],
    finalizer: bool,
    status_helper: bool,
) -> Vec<Rule> {
    let rule = |group: &str, resource: &str, verbs: &[&str], reason: &str| Rule {
        api_group: group.to_owned(),
        resource: resource.to_owned(),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        reason: reason.to_owned(),
    };
    let primary = &facts.primary;
    let mut rules = Vec::new();
    if facts.archetype == Archetype::Generic {
        for kind in &facts.generic_kinds {
            rules.push(rule(
                &kind.group,
                &kind.plural,
                &["get", "list", "watch"],
                "reconciled kind (metadata)",
            ));
        }
    } else {
        rules.push(rule(
            &primary.group,
            &primary.plural,
            &["get", "list", "watch", "patch"],
            "primary resource",
        ));
        if status_helper {
            let status = format!("{}/status", primary.plural);
            rules.push(rule(
                &primary.group,
                &status,
                &["patch"],
                "status written only when it changed",
            ));
        }
        if facts.archetype != Archetype::Dynamic {
            rules.push(rule(
                "events.k8s.io",
                "events",
                &["create", "patch"],
                "events about reconcile outcomes",
            ));
        }
        if finalizer {
            let finalizers = format!("{}/finalizers", primary.plural);
            rules.push(rule(
                &primary.group,
                &finalizers,
                &["update"],
                "finalizer for external cleanup",
            ));
        }
    }
    let managed = ["get", "list", "watch", "create", "patch", "delete"];
    for owned in owns {
        rules.push(rule(
            &owned.group,
            &owned.plural,
            &managed,
            "owned children",
        ));
    }
    for watched in watches {
        let related = &watched.related;
        if !owns
            .iter()
            .any(|o| o.group == related.group && o.plural == related.plural)
        {
            rules.push(rule(
                &related.group,
                &related.plural,
                &["get", "list", "watch"],
                "watched objects",
            ));
        }
    }
    rules.sort();
    rules.dedup_by(|a, b| a.api_group == b.api_group && a.resource == b.resource);
    rules
}

/// Field paths into `metadata` are checked against ObjectMeta, since CRD schemas leave
/// metadata untyped; everything else against the kind's own schema.
fn check_field_path(
    schema: &serde_json::Value,
    path: &str,
) -> Result<(), schema_path::PathProblem> {
    match path.split_once('.') {
        Some(("metadata", rest)) => {
            let meta =
                schemars::schema_for!(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta)
                    .to_value();
            schema_path::check_string_field(&meta, rest)
        }
        _ => schema_path::check_string_field(schema, path),
    }
}

/// Names controller.rs defines or imports itself; a related kind with one of these names is
/// imported under an alias (`Controller` becomes `ControllerKind`).
const CONTROLLER_NAMES: &[&str] = &[
    "Action",
    "Api",
    "Arc",
    "Client",
    "Context",
    "Controller",
    "Duration",
    "Error",
    "HashMap",
    "Mutex",
    "ObjectRef",
    "Predicate",
    "PredicateConfig",
    "Primary",
    "Reconciler",
    "Resource",
    "ResourceExt",
    "Result",
    "StreamExt",
    "WatchStreamExt",
    "mpsc",
];

/// Gives each related kind the name controller.rs uses for it, and returns the `use` lines
/// that bring them in, sorted. Two different kinds with one name are refused.
fn related_imports(
    owns: &mut [Related],
    watches: &mut [Watched],
    external: &[External],
) -> Result<Vec<String>, String> {
    let mut by_name: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for related in owns
        .iter_mut()
        .chain(watches.iter_mut().map(|w| &mut w.related))
    {
        if CONTROLLER_NAMES.contains(&related.rust_name.as_str()) {
            related.rust_name = format!("{}Kind", related.rust_name);
        }
        match by_name.insert(related.rust_name.clone(), related.rust_path.clone()) {
            Some(other) if other != related.rust_path => {
                return Err(format!(
                    "two related kinds are named {}: {other} and {}",
                    related.rust_name, related.rust_path
                ));
            }
            _ => {}
        }
    }
    let mut imports: BTreeSet<String> = by_name
        .iter()
        .map(|(name, path)| {
            if path.ends_with(&format!("::{name}")) {
                path.clone()
            } else {
                format!("{path} as {name}")
            }
        })
        .collect();
    if external.iter().any(|e| e.channel) {
        imports.insert("tokio::sync::mpsc".to_owned());
    }
    Ok(imports.into_iter().collect())
}

/// Merges the manifest's extra dependencies into the generator's, sorted by name. A manifest
/// entry for a crate the generated code needs is refused, because changing its version or
/// features could break generated code in ways regeneration cannot see.
fn dependency_table(
    base: &[(&str, &str)],
    extra: &std::collections::BTreeMap<String, manifest::DependencySpec>,
    field: &str,
    bad: &dyn Fn(&str, String) -> Error,
) -> Result<Vec<Dependency>> {
    let mut table: Vec<Dependency> = base
        .iter()
        .map(|(name, spec)| Dependency {
            name: (*name).into(),
            spec: (*spec).into(),
        })
        .collect();
    for (name, spec) in extra {
        let at = format!("{field}.{name}");
        naming::check_crate_name(name).map_err(|reason| bad(&at, reason))?;
        if base.iter().any(|(base_name, _)| base_name == name) {
            return Err(bad(
                &at,
                format!("{name} is already a dependency of the generated code; remove it here"),
            ));
        }
        table.push(Dependency {
            name: name.clone(),
            spec: toml_dependency(spec),
        });
    }
    table.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(table)
}

/// A dependency spec as a TOML value, with every user-supplied string quoted.
fn toml_dependency(spec: &manifest::DependencySpec) -> String {
    let quote = naming::toml_string;
    match spec {
        manifest::DependencySpec::Version(version) => quote(version),
        manifest::DependencySpec::Detailed {
            version,
            features,
            default_features,
        } => {
            let mut parts = vec![format!("version = {}", quote(version))];
            if let Some(default_features) = default_features {
                parts.push(format!("default-features = {default_features}"));
            }
            if !features.is_empty() {
                let features: Vec<String> =
                    features.iter().map(String::as_str).map(quote).collect();
                parts.push(format!("features = [{}]", features.join(", ")));
            }
            format!("{{ {} }}", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd_document::{Selection, parse_all, select, tests::CRD};

    fn analyze_with(manifest: &str) -> Result<Operator> {
        let with_spec = "schema: { openAPIV3Schema: { type: object, properties: { spec: { type: object, \
                         properties: { size: { type: integer } } } } } }";
        let crd = CRD.replace("schema: { openAPIV3Schema: { type: object } }", with_spec);
        let primary = select(
            "w.yaml",
            parse_all("w.yaml", crd.as_bytes())?,
            &Selection::default(),
        )?;
        let manifest = Manifest::parse("operator.yaml", manifest)?;
        let provenance = Provenance {
            command: "cargo xtask gen".into(),
            generator_version: "0".into(),
        };
        let input = PrimaryInput::Crd {
            selected: Box::new(primary),
            dynamic: false,
        };
        analyze("operator.yaml", &manifest, &input, &[], provenance)
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
        assert_eq!(operator.crate_name, "widget-controller");
        assert_eq!(operator.crate_ident, "widget_controller");
        assert_eq!(
            operator.owns[0].rust_path,
            "k8s_openapi::api::core::v1::ConfigMap"
        );
        assert_eq!(operator.watches[0].key_literal, "\"/metadata/name\"");
        assert_eq!(operator.external[0].ident, "rule_registry");
        assert_eq!(
            operator.finalizer_literal,
            "\"example.com/widget-controller\""
        );
        assert!(operator.finalizer);
    }

    #[test]
    fn rbac_grants_what_each_relation_uses_and_no_more() {
        let rules = |manifest: &str| -> Vec<(String, String, String)> {
            analyze_with(manifest)
                .unwrap()
                .rbac
                .into_iter()
                .map(|r| (r.api_group, r.resource, r.verbs.join(",")))
                .collect()
        };
        let primary = (
            "example.com".to_owned(),
            "widgets".to_owned(),
            "get,list,watch,patch".to_owned(),
        );
        let events = (
            "events.k8s.io".to_owned(),
            "events".to_owned(),
            "create,patch".to_owned(),
        );
        let configmaps = (
            "".to_owned(),
            "configmaps".to_owned(),
            "get,list,watch,create,patch,delete".to_owned(),
        );
        let deployments = (
            "apps".to_owned(),
            "deployments".to_owned(),
            "get,list,watch".to_owned(),
        );
        let finalizers = (
            "example.com".to_owned(),
            "widgets/finalizers".to_owned(),
            "update".to_owned(),
        );
        assert_eq!(rules(""), vec![events.clone(), primary.clone()]);
        assert_eq!(
            rules("owns: [{kind: ConfigMap}]"),
            vec![configmaps, events.clone(), primary.clone()]
        );
        assert_eq!(
            rules("watches: [{kind: Deployment, map: {label: a}}]"),
            vec![deployments, events.clone(), primary.clone()]
        );
        assert_eq!(
            rules("external: [{name: registry}]"),
            vec![events, primary, finalizers]
        );
    }

    #[test]
    fn namespace_scope_takes_a_role_and_refuses_cluster_scoped_kinds() {
        let operator = analyze_with("scope: namespace\nowns: [{kind: ConfigMap}]").unwrap();
        assert!(operator.namespace_scoped);
        assert_eq!(operator.watch_api, "default_namespaced");
        assert_eq!(analyze_with("").unwrap().watch_api, "all");
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
            serde_yaml::from_str(&format!(
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
                .rbac
                .iter()
                .any(|r| r.resource.ends_with("/status"))
        );
    }

    #[test]
    fn the_manifest_sample_is_written_over_the_schema_sample() {
        let operator = analyze_with("sample: {spec: {size: 3}}").unwrap();
        assert_eq!(
            operator.primary.sample_literal.as_deref(),
            Some(r#""{\"spec\":{\"size\":3}}""#)
        );
        let least = analyze_with("").unwrap().primary.sample_literal;
        assert_eq!(least.as_deref(), Some(r#""{\"spec\":{}}""#));
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
    fn bad_names_and_keys_are_refused() {
        assert!(error_of("name: 9lives").contains("field `name`"));
        assert!(
            error_of("watches: [{kind: Secret, map: {label: 'not a key'}}]")
                .contains("watches[0].map")
        );
        assert!(error_of("external: [{name: Registry}]").contains("external[0].name"));
        assert!(error_of("external: [{name: a}, {name: a}]").contains("used twice"));
        assert!(error_of("owns: [{kind: Secret}, {kind: secret}]").contains("owned twice"));
        assert!(error_of("dependencies: {kube: '5'}").contains("already a dependency"));
    }

    #[test]
    fn extra_dependencies_are_quoted_as_toml() {
        let operator = analyze_with(
            "dependencies: {serde_yaml: '0.9', reqwest: {version: '0.13', default-features: false, features: [json]}}",
        )
        .unwrap();
        let spec = |name: &str| {
            operator
                .dependencies
                .iter()
                .find(|d| d.name == name)
                .unwrap()
                .spec
                .clone()
        };
        assert_eq!(spec("serde_yaml"), "\"0.9\"");
        assert_eq!(
            spec("reqwest"),
            "{ version = \"0.13\", default-features = false, features = [\"json\"] }"
        );
    }
}
