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
//!
//! The model itself is nested the same way, one part per concern, each built by one call of
//! [`analyze`]: [`Crate`], the [`Primary`], [`Relations`], [`Controller`], [`Tests`],
//! [`Deploy`], [`Webhooks`] and [`Types`]. What only the command prints (warnings, where the
//! CRD came from) is beside the model, in [`Analysis`].

pub mod chart;
mod dependencies;
pub mod flags;
pub mod local;
mod modules;
mod monitoring;
mod policy;
mod primary;
mod rbac;
mod reconciled;
mod relations;
mod status;
mod webhooks;

use serde::Serialize;

pub use self::{
    dependencies::Dependency,
    flags::{FlagGroup, FlagRow},
    local::{LOCAL_WEBHOOK_BASE, LOCAL_WEBHOOK_PORT, LocalWebhooks},
    modules::Module,
    monitoring::{Alert, Monitoring, runtime_series},
    policy::Requeue,
    primary::{Conditions, Primary, PrimaryInput},
    rbac::Rule,
    reconciled::{Reconciled, ReconciledKind},
    relations::{External, Import, Related, RelatedCrd, TestChild, Watched},
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

/// Everything needed to render one operator crate, by concern. Templates reach each part by
/// its name (`crate.name`, `relations.owns`, `controller.finalizer`, …).
#[derive(Debug, Clone, Serialize)]
pub struct Operator {
    /// The crate: its name, description and dependencies.
    #[serde(rename = "crate")]
    pub krate: Crate,
    pub archetype: Archetype,
    pub primary: Primary,
    pub relations: Relations,
    pub controller: Controller,
    pub tests: Tests,
    pub deploy: Deploy,
    /// `deploy/chart/`: the Helm chart's values and the CRD it installs.
    pub chart: chart::Chart,
    /// The webhooks the operator serves: admission webhooks when the manifest asks for any,
    /// and the conversion webhook of a derived resource served in several versions.
    pub webhooks: Option<Webhooks>,
    /// The flags every operator takes, from the runtime's `settings::Common`.
    pub common_flags: Vec<FlagRow>,
    /// `Settings`' flags beyond the common ones, a group per feature.
    pub flags: Vec<FlagGroup>,
    pub types: Types,
}

/// The generated crate itself.
#[derive(Debug, Clone, Serialize)]
pub struct Crate {
    /// The crate (and binary, ServiceAccount, field manager) name, checked against cargo's
    /// rules and Kubernetes' name rules.
    pub name: Text,
    /// The crate name as a Rust path segment (`prometheusrule_controller`).
    pub ident: Ident,
    /// Its version, [`CRATE_VERSION`], which also tags its image.
    pub version: Constant,
    /// The package description.
    pub description: Text,
    pub provenance: Provenance,
    pub dependencies: Vec<Dependency>,
    pub dev_dependencies: Vec<Dependency>,
    /// The library's modules, in `lib.rs`'s order, with who owns each.
    pub modules: Vec<Module>,
    /// Where the runtime comes from: vendored, the render adds the copy's files to the plan.
    /// No template prints it; the dependencies above name its path.
    #[serde(skip)]
    pub runtime: crate::vendor::RuntimeSource,
}

/// The relations `operator.yaml` declares, as `controller.rs` wires them.
#[derive(Debug, Clone, Serialize)]
pub struct Relations {
    pub owns: Vec<Related>,
    pub watches: Vec<Watched>,
    pub external: Vec<External>,
    /// `use` lines of `manifest.rs`'s `related` module, sorted and unique.
    pub imports: Vec<Import>,
    /// Whether some watch streams metadata only.
    pub watches_metadata: bool,
    /// Whether some watch keeps whole objects in a cache the reconcile reads.
    pub watches_cached: bool,
}

/// How the controller runs and what every reconcile goes through.
#[derive(Debug, Clone, Serialize)]
pub struct Controller {
    /// Primary-stream predicates, as paths of `kube::runtime::predicates` functions.
    pub predicates: Vec<Constant>,
    pub requeue: Requeue,
    /// True when cleanup hooks run behind a finalizer (any external relation).
    pub finalizer: bool,
    /// The finalizer's name, `<group>/<crate>`.
    pub finalizer_name: Text,
    /// The condition the operator writes into the primary's `status.conditions`, when the
    /// manifest asks for one.
    pub condition: Option<OwnCondition>,
    /// Whether the primary's status is the operator's to write (`status.ours`, or a derived
    /// primary): the skeleton shows `patch_status`, and the RBAC grants it.
    pub status_ours: bool,
    /// How many watches must list before the operator is ready: each primary kind's, one per
    /// owned kind and one per watched kind (a generic operator's kinds share those two).
    pub watches_to_list: usize,
    /// Whether the operator can run sharded (`sharding: true`): replicas split the primaries
    /// by the labels a sharder writes, with the wiring in `operator_gen_runtime::sharding`.
    pub sharding: bool,
    /// The labels the sharder writes on a primary, named after the crate (the ring), for the
    /// README: the shard that reconciles it, and a request to let it go.
    pub shard_label: Text,
    pub drain_label: Text,
    /// Whether the operator watches only its own namespace, granted by a Role rather than a
    /// ClusterRole.
    pub namespace_scoped: bool,
    /// Whether it leaves its own workload alone: an operator of built-in kinds, of which its
    /// own workload is (`operator_gen_runtime::run::Options::leaves_own_workload`).
    pub leaves_own_workload: bool,
    /// The kinds reconciled, a controller each, and how generated items name them.
    pub reconciled: Reconciled,
}

/// The tests that come with the crate.
#[derive(Debug, Clone, Serialize)]
pub struct Tests {
    /// Whether `manifest::sample` exists, the object the shipped tests reconcile.
    pub sample: bool,
    /// Every owned kind, as the shipped tests apply it as a child; none when no shipped test
    /// applies children (no sample to own them).
    pub children: Vec<TestChild>,
}

/// `src/types.rs`: the primary's types and the related custom kinds'.
#[derive(Debug, Clone, Serialize)]
pub struct Types {
    /// Types of every served version of the primary, one module each; the module of the
    /// version the operator uses is re-exported.
    pub versions: Vec<TypesModule>,
    pub selected_module: Option<Ident>,
    /// One module per related custom kind, holding the version the manifest selected.
    pub related: Vec<TypesModule>,
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

/// `deploy/`: where and under which names the operator runs, with what rights, and its own
/// monitoring.
#[derive(Debug, Clone, Serialize)]
pub struct Deploy {
    /// Namespace of the operator's Deployment, ServiceAccount and Lease.
    pub namespace: Text,
    /// Whether `deploy/` creates that namespace, the operator's own (see
    /// [`Webhooks::exempt_label`]), rather than using `default`.
    pub own_namespace: bool,
    /// The image `deploy/base/deployment.yaml` runs, `<crate>:<version>`: a tag that does not
    /// move, so the kubelet's default pull policy for it is IfNotPresent and an image loaded
    /// into the node starts.
    pub image: Text,
    /// The image the Dockerfile builds the operator in ([`BUILDER_IMAGE`]).
    pub builder_image: Constant,
    /// The Role and RoleBinding for the operator's Lease, `<crate>-leader-election`.
    pub leader_election_role: Text,
    /// The least-privilege rules the generated code needs, one per resource.
    pub rbac: Vec<Rule>,
    /// The operator's own monitoring, in `deploy/monitoring/`.
    pub monitoring: Monitoring,
    /// The CRD as loaded, for `deploy/base/crd.yaml` (imported and dynamic operators).
    pub crd_yaml: Option<YamlDocument>,
}

/// The version of every crate the generator writes (Cargo.toml's `version`), and so the tag of
/// its image.
pub const CRATE_VERSION: &str = "0.1.0";

/// The image a generated Dockerfile builds the operator in: one Rust release on one Alpine
/// release, by exact version. A moving tag (`rust:1-alpine`) would build the same Dockerfile
/// with another compiler, and another C library, from one day to the next. Bumped by hand, to
/// the Rust this repository is tested with and an Alpine the Rust images are published for.
pub const BUILDER_IMAGE: &str = "rust:1.95.0-alpine3.22";

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
    let crate_name = crate_name(manifest, &facts.primary, &bad)?;
    let resolved = relations::resolve(manifest, related_crds, &facts.primary, &mut modules, &bad)?;
    check_sharding(manifest, &facts.primary, &resolved, &bad)?;
    let scope = policy::scope(manifest, &facts.primary, &resolved, &bad)?;
    let (namespace, own_namespace) =
        deploy_namespace(manifest, facts.archetype, &crate_name, scope, &bad)?;
    let also_served = manifest
        .primary
        .derive
        .as_ref()
        .map_or(&[][..], |d| d.also_served.as_slice());
    let (local, local_warning) = local::webhooks(manifest.local.webhooks.as_deref(), &bad)?;
    let webhooks = webhooks::resolve(
        (manifest.webhooks, local),
        facts.archetype,
        &crate_name,
        &namespace,
        &facts.primary,
        also_served,
        &bad,
    )?;
    let controller = controller(manifest, &facts, &resolved, &crate_name, scope, &bad)?;
    let krate = krate(
        manifest,
        flags,
        &facts,
        &resolved,
        crate_name,
        webhooks.as_ref(),
        &bad,
    )?;
    let rbac = rbac_rules(&facts, &resolved, &controller);
    let deploy = deploy(
        input,
        rbac,
        &krate.name,
        Text::new(namespace),
        own_namespace,
        webhooks.is_some(),
    )?;
    let chart = chart::chart(
        krate.name.raw(),
        deploy.namespace.raw(),
        deploy.own_namespace,
        chart::Features {
            sharding: controller.sharding,
            webhooks: webhooks.is_some(),
            admission: webhooks
                .as_ref()
                .is_some_and(|w| !w.configurations.is_empty()),
            crd: deploy.crd_yaml.is_some(),
        },
        match input {
            PrimaryInput::Crd { selected, .. } => Some(&selected.crd),
            _ => None,
        },
    )
    .map_err(|e| Error::Template {
        template: "deploy/chart/templates/crd.yaml".to_owned(),
        reason: e.to_string(),
    })?;
    let sample = facts.primary.sample.is_some() || facts.archetype == Archetype::Builtin;
    // The children are applied by the tests of the sample, or of each generic kind's.
    let tests_apply_children = sample || facts.archetype == Archetype::Generic;
    let tests = Tests {
        sample,
        children: match tests_apply_children {
            true => resolved.test_children,
            false => Vec::new(),
        },
    };
    let mut warnings = facts.warnings;
    warnings.extend(resolved.warnings);
    // The address matters only to an operator with webhooks.
    warnings.extend(
        local_warning
            .filter(|_| webhooks.is_some())
            .map(|warning| format!("{manifest_origin}: {warning}")),
    );
    warnings.extend(relations::tenant_filled_caches(
        manifest_origin,
        manifest.scope,
        &resolved.watches,
    ));
    if let Some(webhooks) = webhooks.as_ref().filter(|w| w.fails_open) {
        let kinds: Vec<&str> = webhooks
            .rules
            .iter()
            .filter(|rule| rule.scope.0 == "Cluster")
            .map(|rule| rule.resource.raw())
            .collect();
        warnings.push(format!(
            "{manifest_origin}: field `webhooks`: the admission webhooks gate cluster-scoped \
             {}, so they fail open (`failurePolicy: Ignore`): while the operator is down, writes \
             of every kind they gate are stored unchecked rather than refused cluster-wide, \
             its own RBAC included. To fail closed on namespaced kinds, give them an operator \
             of their own",
            kinds.join(", ")
        ));
    }
    let operator = Operator {
        krate,
        archetype: facts.archetype,
        primary: facts.primary,
        relations: Relations {
            watches_metadata: resolved.watches.iter().any(|w| w.metadata_only),
            watches_cached: resolved.watches.iter().any(|w| w.cached),
            owns: resolved.owns,
            watches: resolved.watches,
            external: resolved.external,
            imports: resolved.imports,
        },
        common_flags: flags::common(),
        flags: flags::groups(webhooks.as_ref(), controller.sharding),
        controller,
        tests,
        deploy,
        chart,
        webhooks,
        types: Types {
            versions: facts.versions,
            selected_module: facts.selected_module,
            related: resolved.types,
        },
    };
    Ok(Analysis {
        operator,
        origin: facts.origin,
        warnings,
    })
}

/// Refuses sharding where the sharder and an owner would both label one object: the sharder
/// places each primary by its own key, and an owned child takes its owner's shard when it is
/// applied, so a kind that is both would be relabelled by the two in turn for ever.
fn check_sharding(
    manifest: &Manifest,
    primary: &Primary,
    resolved: &relations::Resolved,
    bad: &dyn Fn(&str, String) -> Error,
) -> Result<()> {
    if !manifest.sharding {
        return Ok(());
    }
    let leases =
        |group: &Text, kind: &Text| group.raw() == "coordination.k8s.io" && kind.raw() == "Lease";
    let sharded_leases = match primary.kinds.as_slice() {
        [] => leases(&primary.group, &primary.kind),
        kinds => kinds.iter().any(|kind| leases(&kind.group, &kind.kind)),
    };
    if sharded_leases {
        return Err(bad(
            "sharding",
            "the replicas' ring is made of Leases, and a sharded operator of Leases would label \
             every Lease in its scope with a shard, the ring's own and other operators' leader \
             elections included; drop `sharding:` for an operator of Leases"
                .to_owned(),
        ));
    }
    let is_primary = |owned: &relations::Related| match primary.kinds.as_slice() {
        [] => owned.group == primary.group && owned.kind == primary.kind,
        kinds => kinds
            .iter()
            .any(|kind| kind.group == owned.group && kind.kind == owned.kind),
    };
    match resolved.owns.iter().find(|owned| is_primary(owned)) {
        Some(owned) => Err(bad(
            "sharding",
            format!(
                "{} is both a primary and owned: the sharder would place each one by its own \
                 name while its owner's shard follows it when applied, and the two would \
                 relabel it in turn; drop `sharding:`, or own another kind",
                owned.kind.raw()
            ),
        )),
        None => Ok(()),
    }
}

/// The crate's name: the manifest's, or one made from the primary's kind.
fn crate_name(
    manifest: &Manifest,
    primary: &Primary,
    bad: &dyn Fn(&str, String) -> Error,
) -> Result<String> {
    let crate_name = match &manifest.name {
        Some(name) => name.clone(),
        None => {
            naming::default_crate_name(primary.kind.raw().split(',').next().unwrap_or("operator"))
        }
    };
    naming::check_crate_name(&crate_name).map_err(|reason| bad("name", reason))?;
    Ok(crate_name)
}

/// The namespace `deploy/` runs the operator in, and whether it is the operator's own, named
/// after it. An operator with admission webhooks for a built-in kind runs in one, exempt from
/// them. So does a sharded one: its ring is the Leases with the ring's label in that
/// namespace, so whoever can create a Lease there can join it, and in a namespace of its own
/// that is only its replicas and the cluster's admins.
fn deploy_namespace(
    manifest: &Manifest,
    archetype: Archetype,
    crate_name: &str,
    scope: manifest::Scope,
    bad: &dyn Fn(&str, String) -> Error,
) -> Result<(String, bool)> {
    let exempt = webhooks::needs_own_namespace(manifest.webhooks, archetype);
    if !exempt && !manifest.sharding {
        return Ok((DEPLOY_NAMESPACE.to_owned(), false));
    }
    if is_reserved_namespace(crate_name) {
        let why = if exempt {
            "an operator with admission webhooks for a built-in kind"
        } else {
            "a sharded operator"
        };
        return Err(bad(
            "name",
            format!(
                "{why} runs in a namespace of its own, named after it, and {crate_name:?} is \
                 Kubernetes' own; choose another `name:`"
            ),
        ));
    }
    if exempt && scope == manifest::Scope::Namespace {
        return Err(bad(
            "scope",
            "an operator with admission webhooks for a built-in kind runs in a namespace of its \
             own, exempt from those webhooks, so with `scope: namespace` it would watch only \
             objects its webhooks never see; use `scope: cluster` or drop `webhooks:`"
                .to_owned(),
        ));
    }
    Ok((crate_name.to_owned(), true))
}

/// How the controller runs: `operator.yaml`'s policy, its finalizer and its condition.
fn controller(
    manifest: &Manifest,
    facts: &primary::PrimaryFacts,
    resolved: &relations::Resolved,
    crate_name: &str,
    scope: manifest::Scope,
    bad: &dyn Fn(&str, String) -> Error,
) -> Result<Controller> {
    let primary = &facts.primary;
    Ok(Controller {
        predicates: policy::predicates(manifest, manifest.sharding),
        requeue: policy::requeue(manifest, bad)?,
        finalizer: !resolved.external.is_empty(),
        finalizer_name: Text::new(format!(
            "{}/{crate_name}",
            finalizer_group(facts.archetype, primary)
        )),
        condition: status::own_condition(manifest, facts.archetype, primary, bad)?,
        status_ours: status::ours(manifest, facts.archetype, primary, bad)?,
        // Each kind's controller lists its primaries and its children.
        watches_to_list: primary.kinds.len().max(1) + resolved.owns.len() + resolved.watches.len(),
        sharding: manifest.sharding,
        shard_label: Text::new(format!("shard.operator-gen.io/{crate_name}")),
        drain_label: Text::new(format!("drain.operator-gen.io/{crate_name}")),
        namespace_scoped: scope == manifest::Scope::Namespace,
        leaves_own_workload: matches!(facts.archetype, Archetype::Builtin | Archetype::Generic),
        reconciled: Reconciled::new(facts.archetype, &primary.kinds, &primary.kind_samples),
    })
}

/// The crate: its names, description, provenance and dependencies.
fn krate(
    manifest: &Manifest,
    flags: CommandFlags,
    facts: &primary::PrimaryFacts,
    resolved: &relations::Resolved,
    name: String,
    webhooks: Option<&Webhooks>,
    bad: &dyn Fn(&str, String) -> Error,
) -> Result<Crate> {
    let uses_chrono = facts.uses_chrono || resolved.uses_chrono;
    let (dependencies, dev_dependencies) = dependencies::tables(
        manifest,
        &name,
        facts.archetype,
        uses_chrono,
        webhooks.is_some(),
        bad,
    )?;
    Ok(Crate {
        ident: naming::snake_ident(&name),
        version: Constant(CRATE_VERSION),
        description: description(facts.archetype, &facts.primary),
        provenance: provenance(flags, &facts.primary),
        name: Text::new(name),
        dependencies,
        dev_dependencies,
        modules: modules::of(facts.archetype, webhooks),
        runtime: crate::vendor::RuntimeSource::of(manifest),
    })
}

/// The least-privilege rules the generated code needs.
fn rbac_rules(
    facts: &primary::PrimaryFacts,
    resolved: &relations::Resolved,
    controller: &Controller,
) -> Vec<Rule> {
    // The status is written where it is the operator's, or where it keeps a condition there:
    // an imported CRD's status is otherwise its own controller's.
    rbac::rules(
        facts.archetype,
        &facts.primary,
        resolved,
        controller.finalizer,
        controller.status_ours || controller.condition.is_some(),
        controller.sharding,
    )
}

/// `deploy/`: the names, the RBAC, the CRD and the monitoring.
fn deploy(
    input: &PrimaryInput,
    rbac: Vec<Rule>,
    crate_name: &Text,
    namespace: Text,
    own_namespace: bool,
    webhooks: bool,
) -> Result<Deploy> {
    let crd_yaml = match input {
        PrimaryInput::Crd { selected, .. } => Some(YamlDocument::new(&selected.crd).map_err(
            |e| Error::Template {
                template: "deploy/base/crd.yaml".to_owned(),
                reason: e.to_string(),
            },
        )?),
        _ => None,
    };
    let name = crate_name.raw();
    let monitoring = monitoring::monitoring(name, webhooks).map_err(|e| Error::Template {
        template: "deploy/monitoring/dashboard.yaml".to_owned(),
        reason: e.to_string(),
    })?;
    Ok(Deploy {
        namespace,
        own_namespace,
        image: Text::new(format!("{name}:{CRATE_VERSION}")),
        builder_image: Constant(BUILDER_IMAGE),
        leader_election_role: Text::new(format!("{name}-leader-election")),
        rbac,
        monitoring,
        crd_yaml,
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
