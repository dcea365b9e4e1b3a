//! The typed model templates render from, and [`analyze`], the stage that builds it.
//!
//! Every name, literal and decision is made here, so templates only loop, branch and print.
//! Whatever came from a CRD, a manifest or the command line is held as one of
//! [`crate::text`]'s escaped types; the rest is numbers, flags and enums. One module per
//! concern: [`primary`] (what is reconciled, per archetype), [`relations`] (owns, watches,
//! external, and the imports they need), [`policy`] (requeue, backoff, predicates),
//! [`rbac`] (least-privilege rules), [`webhooks`] (admission and conversion webhooks and their
//! objects), [`monitoring`] (the operator's ServiceMonitor, alerts and dashboard) and
//! [`dependencies`] (the generated Cargo.toml).

mod dependencies;
mod monitoring;
mod policy;
mod primary;
mod rbac;
mod relations;
mod status;
mod webhooks;

use serde::Serialize;

pub use self::{
    dependencies::Dependency,
    monitoring::{Alert, Monitoring},
    policy::Requeue,
    primary::{Conditions, Primary, PrimaryInput},
    rbac::Rule,
    relations::{External, Import, Related, RelatedCrd, Watched},
    status::OwnCondition,
    webhooks::{
        Conversion, HUB_FIELDS_ANNOTATION, Version, VersionField, Webhook, Webhooks, check_versions,
    },
};
use crate::{
    error::{Error, Result},
    manifest::{self, Manifest},
    naming,
    text::{Code, Constant, Ident, Text, YamlDocument},
};

/// Generator-wide facts that do not come from the inputs.
#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    /// How to regenerate the crate from its folder, quoted in every generated header. It names
    /// the flags a run was given but none of their paths, so it reads the same wherever the run
    /// started.
    pub regenerate: Text,
    pub generator_version: Constant,
}

/// The flags of the command line that started a run, for [`Provenance::regenerate`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommandFlags {
    /// `--crd` was given (its value, a path or URL, is not repeated).
    pub crd: bool,
    /// `--kind`, `--version`: the selected CRD's own kind and version are repeated, which are
    /// checked names, rather than whatever spelling picked them.
    pub kind: bool,
    pub version: bool,
    /// `--manifest` was given, rather than the crate's own `operator.yaml`.
    pub manifest: bool,
    /// `--allow-http` was given: a CRD comes from a plain-http URL.
    pub allow_http: bool,
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

/// Everything needed to render one operator crate.
#[derive(Debug, Clone, Serialize)]
pub struct Operator {
    /// The crate (and binary, ServiceAccount, field manager) name, checked against cargo's
    /// rules and Kubernetes' name rules.
    pub crate_name: Text,
    /// The crate name as a Rust path segment (`prometheusrule_controller`).
    pub crate_ident: Ident,
    pub archetype: Archetype,
    /// For `Generic`: the kinds reconciled; for `Builtin`: the one kind, for its import.
    pub generic_kinds: Vec<Related>,
    /// The package description.
    pub description: Text,
    pub provenance: Provenance,
    pub primary: Primary,
    pub owns: Vec<Related>,
    pub watches: Vec<Watched>,
    pub external: Vec<External>,
    /// Primary-stream predicates, as `kube::runtime::predicates` function names.
    pub predicates: Vec<Constant>,
    /// The condition the operator writes into the primary's `status.conditions`, when the
    /// manifest asks for one.
    pub condition: Option<OwnCondition>,
    /// Whether `controller::sample` exists, the object the shipped tests reconcile.
    pub has_sample: bool,
    /// The owned kind the shipped tests apply as a child: the first with a valid empty object.
    pub owned_sample: Option<Related>,
    pub requeue: Requeue,
    /// `use` lines for related kinds and what their relations need, sorted and unique.
    pub related_imports: Vec<Import>,
    /// True when cleanup hooks run behind a finalizer (any external relation).
    pub finalizer: bool,
    /// The finalizer's name, `<group>/<crate>`.
    pub finalizer_name: Text,
    /// How many caches must list before the operator is ready: the primary's and one per
    /// owned kind.
    pub cached_kinds: usize,
    /// Whether some watch streams metadata only.
    pub watches_metadata: bool,
    /// Whether the operator can run sharded (`sharding: true`): replicas split the primaries
    /// by the labels a sharder writes, with the wiring in `operator_gen_runtime::sharding`.
    pub sharding: bool,
    pub dependencies: Vec<Dependency>,
    pub dev_dependencies: Vec<Dependency>,
    /// The least-privilege rules the generated code needs, one per resource.
    pub rbac: Vec<Rule>,
    /// Whether the operator watches only its own namespace, granted by a Role rather than a
    /// ClusterRole.
    pub namespace_scoped: bool,
    /// Names of the objects in `deploy/` that are not the crate name itself.
    pub deploy: Deploy,
    /// The operator's own monitoring, in `deploy/monitoring/`.
    pub monitoring: Monitoring,
    /// The webhooks the operator serves: admission webhooks when the manifest asks for any,
    /// and the conversion webhook of a derived resource served in several versions.
    pub webhooks: Option<Webhooks>,
    /// The CRD as loaded, for `deploy/base/crd.yaml` (imported and dynamic operators).
    pub crd_yaml: Option<YamlDocument>,
    /// Whether that CRD has fields Kubernetes 1.20 does not know ([`crate::kube_1_20`]), so
    /// kubectl 1.20 must install it without validation.
    pub crd_newer_than_1_20: bool,
    /// Types of every served version of the primary, one module each; the module of the
    /// version the operator uses is re-exported.
    pub versions: Vec<TypesModule>,
    pub selected_module: Option<Ident>,
    /// One module per related custom kind, holding the version the manifest selected.
    pub related_types: Vec<TypesModule>,
}

/// What [`analyze`] found: the model the templates render, and beside it what only the
/// command prints.
#[derive(Debug, Clone)]
pub struct Analysis {
    pub operator: Operator,
    /// Where the primary's CRD came from, a path or URL as typed (so never rendered), when the
    /// primary is a CRD.
    pub origin: Option<String>,
    /// Things the generator worked around and a person should know, such as a schema type it
    /// did not recognise.
    pub warnings: Vec<String>,
}

/// Where and under which names `deploy/` runs the operator.
#[derive(Debug, Clone, Serialize)]
pub struct Deploy {
    /// Namespace of the operator's Deployment, ServiceAccount and Lease.
    pub namespace: Text,
    /// Whether `deploy/` creates that namespace, the operator's own (see
    /// [`Webhooks::exempt_label`]), rather than using `default`.
    pub own_namespace: bool,
    /// The image `deploy/base/deployment.yaml` runs, `<crate>:latest`.
    pub image: Text,
    /// The Role and RoleBinding for the operator's Lease, `<crate>-leader-election`.
    pub leader_election_role: Text,
}

/// One module of `src/types.rs`.
#[derive(Debug, Clone, Serialize)]
pub struct TypesModule {
    pub module: Ident,
    pub code: Code,
}

/// The namespace `deploy/` runs the operator in, unless it needs one of its own. An overlay
/// may move it, patching the names that spell it out (the webhooks' DNS names and CA
/// annotation).
const DEPLOY_NAMESPACE: &str = "default";

/// Namespaces an operator's own may not be: Kubernetes' own, which `deploy/` must not own.
fn is_reserved_namespace(name: &str) -> bool {
    name == DEPLOY_NAMESPACE || name.starts_with("kube-")
}

/// Builds the model. Pure: all input has been read already.
pub fn analyze(
    manifest_origin: &str,
    manifest: &Manifest,
    input: &PrimaryInput,
    related_crds: &[RelatedCrd],
    flags: CommandFlags,
) -> Result<Analysis> {
    let bad = |field: &str, reason: String| Error::Manifest {
        location: format!("{manifest_origin}: field `{field}`"),
        reason,
    };
    let mut modules = naming::ModuleNames::default();
    let facts = primary::facts(
        manifest_origin,
        input,
        manifest.sample.as_ref(),
        &mut modules,
    )?;
    let primary = &facts.primary;
    // One kind, typed or (dynamic) untyped, runs on the runtime's run loop with its relations.
    let one_kind = facts.archetype != Archetype::Generic;
    let has_relations =
        !manifest.owns.is_empty() || !manifest.watches.is_empty() || !manifest.external.is_empty();
    if !one_kind && has_relations {
        return Err(bad(
            "owns/watches/external",
            "relations are generated for an operator of one kind (a CRD, typed or dynamic, a \
             built-in kind or a derived resource); a generic operator takes none"
                .to_owned(),
        ));
    }
    let crate_name = match &manifest.name {
        Some(name) => name.clone(),
        None => {
            naming::default_crate_name(primary.kind.raw().split(',').next().unwrap_or("operator"))
        }
    };
    naming::check_crate_name(&crate_name).map_err(|reason| bad("name", reason))?;
    if manifest.sharding && !one_kind {
        return Err(bad(
            "sharding",
            "sharding is generated for an operator of one kind (a CRD, typed or dynamic, a \
             built-in kind or a derived resource), whose sharder watches that kind; drop \
             `sharding:` for a generic operator"
                .to_owned(),
        ));
    }

    let relations = relations::resolve(manifest, related_crds, primary, &mut modules, &bad)?;
    let scope = policy::scope(manifest, one_kind, &facts.primary, &relations, &bad)?;
    let requeue = policy::requeue(manifest, &bad)?;
    let uses_chrono = facts.uses_chrono || relations.uses_chrono;
    let also_served = manifest
        .primary
        .derive
        .as_ref()
        .map_or(&[][..], |d| d.also_served.as_slice());
    let own_namespace = webhooks::needs_own_namespace(manifest.webhooks, facts.archetype);
    if own_namespace && is_reserved_namespace(&crate_name) {
        return Err(bad(
            "name",
            format!(
                "an operator with admission webhooks for a built-in kind runs in a namespace \
                 of its own, named after it, and {crate_name:?} is Kubernetes' own; choose \
                 another `name:`"
            ),
        ));
    }
    if own_namespace && scope == manifest::Scope::Namespace {
        return Err(bad(
            "scope",
            "an operator with admission webhooks for a built-in kind runs in a namespace of its \
             own, exempt from those webhooks, so with `scope: namespace` it would watch only \
             objects its webhooks never see; use `scope: cluster` or drop `webhooks:`"
                .to_owned(),
        ));
    }
    let namespace = if own_namespace {
        crate_name.clone()
    } else {
        DEPLOY_NAMESPACE.to_owned()
    };
    let webhooks = webhooks::resolve(
        manifest.webhooks,
        facts.archetype,
        &crate_name,
        &namespace,
        primary,
        also_served,
        &bad,
    )?;
    let has_sample = primary.sample.is_some() || facts.archetype == Archetype::Builtin;
    let (dependencies, dev_dependencies) = dependencies::tables(
        manifest,
        &crate_name,
        facts.archetype,
        uses_chrono,
        webhooks.is_some(),
        &bad,
    )?;

    let owned_sample = relations
        .owns
        .iter()
        .find(|o| o.builtin && o.skeleton)
        .cloned();
    let status_helper = primary.status_subresource
        && primary.status_type.is_some()
        && matches!(facts.archetype, Archetype::Imported | Archetype::Derived);
    let finalizer = !relations.external.is_empty();
    let condition = status::own_condition(&manifest.status, facts.archetype, primary, &bad)?;
    let rbac = rbac::rules(
        facts.archetype,
        primary,
        &facts.generic_kinds,
        &relations,
        finalizer,
        status_helper || condition.is_some(),
        manifest.sharding,
    );
    let crd_yaml = match input {
        PrimaryInput::Crd { selected, .. } => Some(YamlDocument::new(&selected.crd).map_err(
            |e| Error::Template {
                template: "deploy/base/crd.yaml".to_owned(),
                reason: e.to_string(),
            },
        )?),
        _ => None,
    };
    let crd_newer_than_1_20 = facts.newer_than_1_20;
    let predicates = policy::predicates(manifest, manifest.sharding);
    let mut warnings = facts.warnings.clone();
    let origin = facts.origin.clone();
    warnings.extend(relations.warnings.iter().cloned());
    let monitoring =
        monitoring::monitoring(&crate_name, &namespace, webhooks.is_some()).map_err(|e| {
            Error::Template {
                template: "deploy/monitoring/dashboard.yaml".to_owned(),
                reason: e.to_string(),
            }
        })?;
    let operator = Operator {
        monitoring,
        crate_ident: naming::snake_ident(&crate_name),
        description: description(facts.archetype, primary),
        provenance: provenance(flags, primary),
        finalizer_name: Text::new(format!(
            "{}/{crate_name}",
            finalizer_group(facts.archetype, primary)
        )),
        rbac,
        namespace_scoped: scope == manifest::Scope::Namespace,
        deploy: Deploy {
            namespace: Text::new(namespace),
            own_namespace,
            image: Text::new(format!("{crate_name}:latest")),
            leader_election_role: Text::new(format!("{crate_name}-leader-election")),
        },
        crate_name: Text::new(crate_name),
        crd_yaml,
        crd_newer_than_1_20,
        webhooks,
        has_sample,
        condition,
        owned_sample,
        cached_kinds: 1 + relations.owns.len(),
        watches_metadata: relations.watches.iter().any(|w| w.metadata_only),
        sharding: manifest.sharding,
        archetype: facts.archetype,
        generic_kinds: facts.generic_kinds,
        primary: facts.primary,
        related_imports: relations.imports,
        finalizer,
        owns: relations.owns,
        watches: relations.watches,
        external: relations.external,
        predicates,
        requeue,
        dependencies,
        dev_dependencies,
        selected_module: facts.selected_module,
        versions: facts.versions,
        related_types: relations.types,
    };
    Ok(Analysis {
        operator,
        origin,
        warnings,
    })
}

/// A finalizer is named in the domain of whoever defines the resource: the CRD's group, or
/// this generator's for built-in kinds, whose groups belong to Kubernetes.
fn finalizer_group(archetype: Archetype, primary: &Primary) -> &str {
    match archetype {
        Archetype::Builtin | Archetype::Generic => "operator-gen.kube.rs",
        _ => primary.group.raw(),
    }
}

fn description(archetype: Archetype, primary: &Primary) -> Text {
    let (kind, group, version) = (
        primary.kind.raw(),
        primary.group.raw(),
        primary.version.raw(),
    );
    Text::new(match archetype {
        Archetype::Generic => format!("A kube-rs operator for the metadata of {kind}"),
        _ if group.is_empty() => format!("A kube-rs operator for {kind} ({version})"),
        _ => format!("A kube-rs operator for {kind} ({group}/{version})"),
    })
}

/// The command generated headers name, typed in the crate's folder. It names only what the
/// crate's `operator.yaml` does not record, which is nothing unless a run overrode that
/// manifest with flags; paths are replaced by what they stand for, and the kind and version
/// are the selected CRD's own, which are checked names.
fn provenance(flags: CommandFlags, primary: &Primary) -> Provenance {
    let mut command = String::from("operator-gen gen");
    if flags.crd {
        command.push_str(" --crd <CRD>");
    }
    if flags.kind {
        command.push_str(&format!(" --kind {}", primary.kind.raw()));
    }
    if flags.version {
        command.push_str(&format!(" --version {}", primary.version.raw()));
    }
    if flags.manifest {
        command.push_str(" --manifest <operator.yaml>");
    }
    if flags.allow_http {
        command.push_str(" --allow-http");
    }
    Provenance {
        regenerate: Text::new(command),
        generator_version: Constant(env!("CARGO_PKG_VERSION")),
    }
}

#[cfg(test)]
mod tests;
