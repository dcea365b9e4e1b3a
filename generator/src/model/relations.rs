//! The primary's relations from `operator.yaml`: owned children, watched objects and their
//! mapping rules, external systems, and the Rust names and imports they all need.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Serialize, Serializer};

use super::{Primary, TypesModule};
use crate::{
    crd_document::SelectedCrd,
    error::{Error, Result},
    k8s_catalog,
    manifest::{self, ExternalSource, Manifest, MapRule},
    naming, rust_types,
    schema_path::{self, PathProblem},
    text::{Constant, Ident, RustPath, Text},
};

/// A CRD named by an `owns:`/`watches:` entry, loaded by the caller.
#[derive(Debug, Clone)]
pub struct RelatedCrd {
    /// The manifest field that named it (`owns[0]`), for errors.
    pub field: String,
    pub selected: SelectedCrd,
}

/// An owned or watched kind.
#[derive(Debug, Clone, Serialize)]
pub struct Related {
    pub kind: Text,
    /// Full path of the Rust type (`k8s_openapi::api::core::v1::ConfigMap`), imported once.
    pub rust_path: RustPath,
    /// The type's name as used after the import (`ConfigMap`, or an alias).
    pub rust_name: Ident,
    pub namespaced: bool,
    /// Snake-case stem for variables and functions (`config_map`).
    pub ident: Ident,
    /// API group, version and plural, for RBAC and webhook rules.
    pub group: Text,
    pub version: Text,
    pub plural: Text,
    /// A k8s-openapi kind (it has `Default`), rather than a custom one.
    pub builtin: bool,
    /// Whether the skeleton can apply an empty object of this kind as a working example.
    pub skeleton: bool,
}

impl Related {
    /// A built-in kind, as k8s-openapi names it.
    pub(super) fn builtin(b: &k8s_catalog::BuiltinKind) -> Self {
        Self {
            kind: Text::from(b.kind),
            rust_path: RustPath::constant(b.rust_path),
            rust_name: naming::type_ident(b.kind, &[]),
            namespaced: b.namespaced,
            ident: naming::snake_ident(b.kind),
            group: Text::from(b.group),
            version: Text::from(b.version),
            plural: Text::from(b.plural),
            builtin: true,
            skeleton: b.empty_object_is_valid(),
        }
    }
}

/// How a watched object names its primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    Label,
    Annotation,
    Field,
}

impl MapKind {
    fn word(self) -> &'static str {
        match self {
            Self::Label => "label",
            Self::Annotation => "annotation",
            Self::Field => "field",
        }
    }

    /// The variant of `operator_gen_runtime::triggers::NamedBy` that maps this way.
    fn named_by(self) -> &'static str {
        match self {
            Self::Label => "Label",
            Self::Annotation => "Annotation",
            Self::Field => "Field",
        }
    }
}

impl Serialize for MapKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Constant(self.word()).serialize(serializer)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Watched {
    pub related: Related,
    pub rule: MapKind,
    /// `rule` as the runtime's `triggers::NamedBy` variant.
    pub named_by: Constant,
    /// Label or annotation key, or a JSON pointer to the field.
    pub key: Text,
    /// Name of the constant holding it (`SECRET_LABEL`).
    pub key_const: Ident,
    /// The key or the dotted field path as the manifest wrote it, for docs.
    pub source: Text,
    /// Whether the mapper reads only metadata and nothing is cached, so the watch streams
    /// metadata alone: the rest of the object (a Secret's data) is never sent to the operator.
    pub metadata_only: bool,
    /// Whether the watch keeps whole objects in a cache (`cache: true`), which the reconcile
    /// reads as `ctx.cached.<ident>`.
    pub cached: bool,
    /// For a field rule on a field the CRD declares in `selectableFields`, the field selector
    /// (`spec.ruleRef.name!=`) that has the API server send only the objects naming a
    /// primary: the others are never sent, cached or mapped.
    pub field_selector: Option<Text>,
}

#[derive(Debug, Clone, Serialize)]
pub struct External {
    pub name: Text,
    /// The `Reconciler` hook that the outside system is reached through: `poll_<name>` for a
    /// polled one, `<name>_events` for one that sends.
    pub hook: Ident,
    pub channel: bool,
    pub interval_secs: u64,
    /// Whether the skeleton's implementation of `hook` (`reconcile.rs.tera`) fits on one line
    /// of rustfmt's width, where rustfmt keeps it, rather than one parameter a line.
    pub hook_on_one_line: bool,
}

/// The widest line rustfmt keeps whole (its `max_width`).
const RUSTFMT_WIDTH: usize = 100;

/// The skeleton's implementation of a hook that sends, on one line, less the hook's name.
const CHANNEL_HOOK_LINE: &str =
    "    fn (&self, sender: tokio::sync::mpsc::Sender<ObjectRef<Primary>>, ctx: Arc<Context>) {";

/// The skeleton's implementation of a polled hook, on one line, less the hook's name.
const POLL_HOOK_LINE: &str =
    "    async fn (&self, ctx: Arc<Context>) -> Result<Vec<ObjectRef<Primary>>> {";

/// One `pub use` line of controller.rs's `related` module.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Import {
    pub path: RustPath,
    /// `as` name, when the kind's Rust name is not its path's last segment.
    pub alias: Option<Ident>,
}

/// An owned kind as the shipped tests apply it: a child named `child`.
#[derive(Debug, Clone, Serialize)]
pub struct TestChild {
    pub related: Related,
    /// The test helper that builds it (`config_map_child`).
    pub function: Ident,
    /// A custom kind's body (its fields beside `metadata`), the least its schema allows, as
    /// JSON; none for a built-in kind, whose child is its `Default`.
    pub body: Option<Text>,
}

/// The relations, resolved, with what the rest of the model takes from them.
pub(super) struct Resolved {
    pub owns: Vec<Related>,
    /// Each owned kind's child in the shipped tests.
    pub test_children: Vec<TestChild>,
    pub watches: Vec<Watched>,
    pub external: Vec<External>,
    pub imports: Vec<Import>,
    /// Types modules of related custom kinds.
    pub types: Vec<TypesModule>,
    pub uses_chrono: bool,
    pub warnings: Vec<String>,
}

type Bad<'a> = &'a dyn Fn(&str, String) -> Error;

/// Resolves the manifest's relations against the catalog and the related CRDs.
pub(super) fn resolve(
    manifest: &Manifest,
    related_crds: &[RelatedCrd],
    primary: &Primary,
    modules: &mut naming::ModuleNames,
    bad: Bad,
) -> Result<Resolved> {
    let mut resolver = Resolver {
        related_crds,
        modules,
        types: Vec::new(),
        modules_by_crd: BTreeMap::new(),
        uses_chrono: false,
        warnings: Vec::new(),
        bad,
    };
    let mut owns = Vec::new();
    let mut test_children = Vec::new();
    for (i, owned) in manifest.owns.iter().enumerate() {
        let field = crate::manifest::Owned::field(i);
        let RelatedKind {
            related, schema, ..
        } = resolver.related(&field, &owned.kind, owned.crd.is_some())?;
        if owns.iter().any(|o: &Related| o.kind == related.kind) {
            return Err(bad(
                &format!("{field}.kind"),
                format!("{} is owned twice; list it once", related.kind),
            ));
        }
        if primary.namespaced && !related.namespaced {
            return Err(bad(
                &format!("{field}.kind"),
                format!(
                    "{} is cluster-scoped and {} is namespaced; Kubernetes cannot resolve an owner \
                     reference from a cluster-scoped object to a namespaced one, so watch it instead",
                    related.kind, primary.kind
                ),
            ));
        }
        test_children.push(TestChild {
            function: naming::snake_ident(&format!("{}Child", related.kind.raw())),
            body: (!related.builtin).then(|| least_body(&schema)),
            related: related.clone(),
        });
        owns.push(related);
    }
    let mut watches = Vec::new();
    for (i, watched) in manifest.watches.iter().enumerate() {
        let field = crate::manifest::Watched::field(i);
        let kind = resolver.related(&field, &watched.kind, watched.crd.is_some())?;
        let related = &kind.related;
        if watches
            .iter()
            .any(|w: &Watched| w.related.kind == related.kind)
        {
            return Err(bad(
                &format!("{field}.kind"),
                format!("{} is watched twice; list it once", related.kind),
            ));
        }
        let watch = watch(&field, kind, &watched.map, bad)?;
        watches.push(if watched.cache {
            cached(&field, watch, bad)?
        } else {
            watch
        });
    }
    let external = external(manifest, bad)?;
    distinct_watch_idents(&owns, &mut watches);
    let imports = imports(&owns, &watches).map_err(|reason| bad("owns/watches", reason))?;
    Ok(Resolved {
        owns,
        test_children,
        watches,
        external,
        imports,
        types: resolver.types,
        uses_chrono: resolver.uses_chrono,
        warnings: resolver.warnings,
    })
}

/// The least body a custom kind's `schema` allows, as JSON. A schema that does not read back
/// as one (it was one when its types were generated) gives the empty body.
fn least_body(schema: &serde_json::Value) -> Text {
    let props = serde_json::from_value(schema.clone()).unwrap_or_default();
    let body = crate::schema_sample::sample_body(&props);
    Text::new(serde_json::Value::Object(body).to_string())
}

/// A kind both owned and watched has two watches in controller.rs, one per relation, so the
/// watched one's names (its event stream, its mapper) take a `_watched` suffix.
fn distinct_watch_idents(owns: &[Related], watches: &mut [Watched]) {
    for watched in watches {
        if owns.iter().any(|o| o.ident == watched.related.ident) {
            watched.related.ident =
                naming::snake_ident(&format!("{}_watched", watched.related.ident));
        }
    }
}

/// A related kind as the resolver found it, with what its watch may use.
struct RelatedKind {
    related: Related,
    /// Its schema, for field paths.
    schema: serde_json::Value,
    /// The field paths its CRD declares in `selectableFields`, as the API server takes them
    /// in a field selector (`spec.ruleRef.name`); none for a built-in kind.
    selectable_fields: Vec<String>,
}

/// Looks related kinds up, generating types once per related CRD.
struct Resolver<'a, 'b> {
    related_crds: &'a [RelatedCrd],
    modules: &'a mut naming::ModuleNames,
    types: Vec<TypesModule>,
    /// Module of each related CRD already generated, by CRD name and version.
    modules_by_crd: BTreeMap<(String, String), (Ident, Ident)>,
    uses_chrono: bool,
    warnings: Vec<String>,
    bad: Bad<'b>,
}

impl Resolver<'_, '_> {
    /// The kind named at `field`.
    fn related(&mut self, field: &str, kind: &str, crd_given: bool) -> Result<RelatedKind> {
        if crd_given {
            let related = self
                .related_crds
                .iter()
                .find(|r| r.field == field)
                .ok_or_else(|| {
                    (self.bad)(
                        field,
                        "its `crd:` was not loaded (generator bug)".to_owned(),
                    )
                })?;
            return self.custom(&related.selected);
        }
        let builtin = k8s_catalog::find(kind).ok_or_else(|| {
            let known: Vec<&str> = k8s_catalog::all().iter().map(|k| k.kind).collect();
            (self.bad)(
                &format!("{field}.kind"),
                format!(
                    "unknown kind {kind:?}; name a built-in kind ({}) or give `crd:` with the CRD that defines it",
                    known.join(", ")
                ),
            )
        })?;
        Ok(RelatedKind {
            related: Related::builtin(&builtin),
            schema: builtin.schema(),
            selectable_fields: Vec::new(),
        })
    }

    /// A kind from a CRD: its types go in a module of their own, one per CRD and version,
    /// named apart from every other types module.
    fn custom(&mut self, selected: &SelectedCrd) -> Result<RelatedKind> {
        let crd = &selected.crd;
        let key = (selected.name().to_owned(), selected.version().name.clone());
        let (module, root) = match self.modules_by_crd.get(&key) {
            Some(known) => known.clone(),
            None => {
                let generated = rust_types::generate(selected)?;
                self.uses_chrono |= generated.uses_chrono;
                self.warnings.extend(selected.warnings.iter().cloned());
                self.warnings.extend(generated.warnings);
                let module = self.modules.name(&crd.spec.names.kind);
                self.types.push(TypesModule {
                    module: module.clone(),
                    code: generated.code,
                });
                let names = (module, generated.root);
                self.modules_by_crd.insert(key, names.clone());
                names
            }
        };
        let schema = selected
            .schema()
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or_default();
        let types = RustPath::constant("crate::types");
        let kind = &crd.spec.names.kind;
        let selectable_fields = selected
            .version()
            .selectable_fields
            .iter()
            .flatten()
            .filter_map(|f| f.json_path.strip_prefix('.').map(str::to_owned))
            .collect();
        Ok(RelatedKind {
            related: Related {
                ident: naming::snake_ident(kind),
                kind: Text::from(kind.as_str()),
                rust_path: types.join(&module).join(&root),
                rust_name: root,
                namespaced: crd.spec.scope == "Namespaced",
                group: Text::from(crd.spec.group.as_str()),
                version: Text::from(selected.version().name.as_str()),
                plural: Text::from(crd.spec.names.plural.as_str()),
                builtin: false,
                skeleton: false,
            },
            schema,
            selectable_fields,
        })
    }
}

/// A watched kind with its mapping rule, checked: a label or annotation key must be one
/// Kubernetes accepts, and a field path must lead to a string field of the kind's schema.
fn watch(field: &str, kind: RelatedKind, map: &MapRule, bad: Bad) -> Result<Watched> {
    let RelatedKind {
        related,
        schema,
        selectable_fields,
    } = kind;
    let schema = &schema;
    let (rule, key, source) = match map {
        MapRule::Label(key) | MapRule::Annotation(key) => {
            naming::check_label_key(key).map_err(|reason| bad(&format!("{field}.map"), reason))?;
            let rule = if matches!(map, MapRule::Label(_)) {
                MapKind::Label
            } else {
                MapKind::Annotation
            };
            (rule, key.clone(), key.clone())
        }
        MapRule::Field(path) => {
            let at = format!("{field}.map.field");
            let kind = &related.kind;
            check_field_path(schema, path).map_err(|problem| {
                let reason = match problem {
                    PathProblem::Missing { .. } => {
                        format!("{path:?} does not exist in {kind}: {problem}")
                    }
                    PathProblem::NotAString { .. } => {
                        format!("{path:?} of {kind} cannot name the primary: {problem}")
                    }
                    PathProblem::Bytes => format!(
                        "{path:?} of {kind} cannot name the primary: {problem}; {}",
                        name_it_in_metadata(kind)
                    ),
                };
                bad(&at, reason)
            })?;
            if is_write_only(&related, path) {
                return Err(bad(
                    &at,
                    format!(
                        "{path:?} of {kind} is write-only: the API server merges `stringData` into \
                         `data` and never returns it, so no {kind} would name its primary there; {}",
                        name_it_in_metadata(kind)
                    ),
                ));
            }
            (MapKind::Field, naming::json_pointer(path), path.clone())
        }
    };
    let suffix = if rule == MapKind::Field {
        "pointer"
    } else {
        rule.word()
    };
    let metadata_only = rule != MapKind::Field || source.starts_with("metadata.");
    // `!=` with no value: the API server leaves out objects where the field is empty or unset.
    let field_selector = (rule == MapKind::Field && selectable_fields.contains(&source))
        .then(|| Text::new(format!("{source}!=")));
    Ok(Watched {
        metadata_only,
        cached: false,
        key_const: naming::const_ident(&format!("{}_{suffix}", related.ident)),
        related,
        named_by: Constant(rule.named_by()),
        rule,
        key: Text::new(key),
        source: Text::new(source),
        field_selector,
    })
}

/// `watch` keeping whole objects in a cache, which only a watch that selects the objects
/// naming a primary may: a label rule, or a field its CRD makes selectable. Any other would
/// cache every object of its kind in reach, a cluster's every Secret say.
fn cached(field: &str, watch: Watched, bad: Bad) -> Result<Watched> {
    let selects = watch.rule == MapKind::Label || watch.field_selector.is_some();
    if !selects {
        let kind = &watch.related.kind;
        let how = match watch.rule {
            MapKind::Annotation => "an annotation cannot select what the API server sends",
            _ => "the field is not in its CRD's `selectableFields`",
        };
        return Err(bad(
            &format!("{field}.cache"),
            format!(
                "a cached watch keeps every {kind} it is sent in memory, and this one would be \
                 sent every {kind} in reach: {how}. Map it by label (`map: {{ label: \
                 example.com/owner }}`), whose selector sends only the {kind}s that name a \
                 primary, or leave `cache` out"
            ),
        ));
    }
    Ok(Watched {
        cached: true,
        metadata_only: false,
        ..watch
    })
}

/// Built-in kinds that the users of any namespace usually may create, each holding up to a
/// megabyte of data.
const TENANT_KINDS: &[&str] = &["ConfigMap", "Secret"];

/// A warning for each cached watch that tenants can fill: watching the whole cluster, a cache
/// of a kind that every namespace's users create holds whatever any of them labels with the
/// watch's key, in the operator's memory and on every restart's list. `watches` are in the
/// order of the manifest's, which `origin` names.
pub(super) fn tenant_filled_caches(
    origin: &str,
    scope: manifest::Scope,
    watches: &[Watched],
) -> Vec<String> {
    if scope == manifest::Scope::Namespace {
        return Vec::new();
    }
    watches
        .iter()
        .enumerate()
        .filter(|(_, watch)| {
            watch.cached
                && watch.related.builtin
                && watch.related.group.raw().is_empty()
                && TENANT_KINDS.contains(&watch.related.kind.raw())
        })
        .map(|(index, watch)| {
            let field = manifest::Watched::field(index);
            let kind = &watch.related.kind;
            format!(
                "{origin}: field `{field}.cache`: the operator caches every {kind} in the \
                 cluster that carries the {} {:?}, and whoever may create a {kind} in any \
                 namespace can add one: 300 labelled {kind}s of 1 MB are over the generated \
                 Deployment's 256 MiB limit. Watch the operator's own namespace only (`scope: \
                 namespace`), or leave `cache` out, so that the watch streams metadata alone \
                 and the reconcile reads the {kind}s it needs from the API server",
                watch.rule.word(),
                watch.source.raw()
            )
        })
        .collect()
}

/// What to map by instead of a field of the object's body that cannot name a primary.
fn name_it_in_metadata(kind: &Text) -> String {
    format!(
        "put the primary's name in a label or an annotation of the {kind} instead \
         (`map: {{ label: example.com/owner }}`): the watch then streams metadata only, and no \
         {kind}'s data reaches the operator"
    )
}

/// Whether `path` is a field the API server takes on writes and never returns, so a watched
/// object never holds it: a Secret's `stringData`.
fn is_write_only(related: &Related, path: &str) -> bool {
    related.builtin
        && related.kind.raw() == "Secret"
        && path.split('.').next() == Some("stringData")
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

fn external(manifest: &Manifest, bad: Bad) -> Result<Vec<External>> {
    let mut external = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, ext) in manifest.external.iter().enumerate() {
        let field = crate::manifest::External::field(i);
        naming::check_external_name(&ext.name)
            .map_err(|reason| bad(&format!("{field}.name"), reason))?;
        if !seen.insert(ext.name.clone()) {
            return Err(bad(
                &format!("{field}.name"),
                format!("{:?} is used twice", ext.name),
            ));
        }
        if ext.source == ExternalSource::Channel && ext.interval.is_some() {
            return Err(bad(
                &format!("{field}.interval"),
                "only `source: poll` has an interval".to_owned(),
            ));
        }
        let channel = ext.source == ExternalSource::Channel;
        let hook = match channel {
            true => format!("{}_events", ext.name),
            false => format!("poll_{}", ext.name),
        };
        let hook = naming::snake_ident(&hook);
        let line = if channel {
            CHANNEL_HOOK_LINE
        } else {
            POLL_HOOK_LINE
        };
        external.push(External {
            name: Text::new(ext.name.clone()),
            hook_on_one_line: line.len() + hook.as_str().len() <= RUSTFMT_WIDTH,
            hook,
            channel,
            interval_secs: ext.interval.map_or(60, |d| d.as_secs().max(1)),
        });
    }
    Ok(external)
}

/// The `pub use` lines of controller.rs's `related` module, sorted, which name each related
/// kind there by its own name: nothing else lives in that module, so no kind's name can clash
/// with one controller.rs uses. Two different kinds with one name are refused.
fn imports(owns: &[Related], watches: &[Watched]) -> Result<Vec<Import>, String> {
    let mut by_name: BTreeMap<Ident, RustPath> = BTreeMap::new();
    for related in owns.iter().chain(watches.iter().map(|w| &w.related)) {
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
    Ok(by_name
        .into_iter()
        .map(|(name, path)| Import {
            alias: (path.last() != name.as_str()).then_some(name),
            path,
        })
        .collect())
}
