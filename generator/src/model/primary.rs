//! The primary resource, the one the operator reconciles, for each archetype: its names,
//! its types modules, its status and conditions, and the sample the shipped tests create.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray,
};
use serde::Serialize;

use super::{Archetype, TypesModule, relations::Related};
use crate::{
    cel,
    crd_document::SelectedCrd,
    error::{Error, Result},
    k8s_catalog, manifest, naming, rust_types, schema_check, schema_sample,
    text::{Code, Ident, Text},
};

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

/// The primary resource's names and facts.
#[derive(Debug, Clone, Serialize)]
pub struct Primary {
    pub kind: Text,
    pub group: Text,
    pub version: Text,
    pub plural: Text,
    /// `group/version`, or the version alone for the core group.
    pub api_version: Text,
    /// The CRD's name, `plural.group`.
    pub crd_name: Text,
    pub rust_type: Ident,
    /// The `#[kube(…)]` arguments a derived primary's types repeat in every version, after
    /// group, version, kind and plural: `root = "…"` when the kind itself cannot name a Rust
    /// type (`Self`; kube-derive names the root type after the kind), and `namespaced`.
    pub kube_args: Code,
    pub namespaced: bool,
    /// A derived primary's spec struct, which kube-derive builds the root type from; decided
    /// here, so that no template composes it.
    pub spec_type: Option<Ident>,
    pub status_type: Option<Ident>,
    /// Whether status is written through the `/status` subresource, which is what makes a
    /// status write leave `metadata.generation` alone and so not retrigger a reconcile.
    pub status_subresource: bool,
    /// The fields of `status.conditions[]` this CRD declares, when it has conditions the
    /// controller can record its outcome in (a `/status` subresource and items with `type`
    /// and `status`).
    pub conditions: Option<Conditions>,
    /// The smallest valid body of the primary (everything but `apiVersion`, `kind` and
    /// `metadata`) as JSON, when the generator knows the schema.
    pub sample: Option<Text>,
    /// The name every sample takes, when the CRD's rules pin it (a singleton's
    /// `self.metadata.name == 'cluster'`); otherwise the caller names it.
    pub sample_name: Option<Text>,
    /// Whether the sample built from the schema still breaks a CEL rule of the CRD, which only
    /// `sample:` values in `operator.yaml` can mend (the warnings name each): the cluster test
    /// says so.
    pub sample_breaks_rules: bool,
    /// Where the sample built from the schema was cut short, when its least object is larger
    /// than the generator builds a sample to: the API server would refuse it, and the cluster
    /// test says so.
    pub sample_cut_at: Option<Text>,
    /// Whether the version is the CRD's storage version, a fact about the CRD that generated
    /// docs state.
    pub storage_version: bool,
    /// The kinds reconciled: a generic primary's list, or a built-in primary's one kind, for
    /// `types.rs` to re-export; empty otherwise.
    pub kinds: Vec<Related>,
    /// A generic primary's sample body of each kind `sample:` gives one for, by kind: the
    /// objects its cluster test creates.
    #[serde(skip)]
    pub kind_samples: BTreeMap<String, Text>,
}

/// Which optional fields a CRD's condition items declare; `type` and `status` always exist.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Conditions {
    pub reason: bool,
    pub message: bool,
    pub last_transition_time: bool,
    pub observed_generation: bool,
    /// The list is a map keyed by `type` (`x-kubernetes-list-type: map`), so server-side
    /// apply gives each entry its own owner; otherwise the list is replaced whole.
    pub list_map: bool,
    /// The condition types the CRD allows, when its `type` is an enum.
    #[serde(skip)]
    pub allowed_types: Option<Vec<String>>,
    /// Fields a condition item requires that the generated code cannot fill (a
    /// `lastUpdateTime`, say): a written entry without them would be refused.
    #[serde(skip)]
    pub unfillable: Vec<String>,
}

/// The primary's facts, its types modules and the archetype-specific parts of the model.
pub(super) struct PrimaryFacts {
    pub primary: Primary,
    pub archetype: Archetype,
    pub versions: Vec<TypesModule>,
    pub selected_module: Option<Ident>,
    pub uses_chrono: bool,
    pub warnings: Vec<String>,
    /// Where the CRD came from, a path or URL as typed, when the primary is a CRD.
    pub origin: Option<String>,
}

impl PrimaryFacts {
    fn plain(primary: Primary, archetype: Archetype) -> Self {
        Self {
            primary,
            archetype,
            versions: Vec::new(),
            selected_module: None,
            uses_chrono: false,
            warnings: Vec::new(),
            origin: None,
        }
    }
}

/// Names of a resource, as the API server knows it.
struct Names<'a> {
    kind: &'a str,
    group: &'a str,
    version: &'a str,
    plural: &'a str,
    namespaced: bool,
}

impl Names<'_> {
    /// `group/version`, or the version alone for the core group.
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn primary(&self, rust_type: Ident) -> Primary {
        let api_version = self.api_version();
        let crd_name = if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        };
        Primary {
            kind: Text::from(self.kind),
            group: Text::from(self.group),
            version: Text::from(self.version),
            plural: Text::from(self.plural),
            api_version: Text::new(api_version),
            crd_name: Text::new(crd_name),
            rust_type,
            kube_args: Code::empty(),
            namespaced: self.namespaced,
            spec_type: None,
            status_type: None,
            status_subresource: false,
            conditions: None,
            sample: None,
            sample_name: None,
            sample_breaks_rules: false,
            sample_cut_at: None,
            storage_version: false,
            kinds: Vec::new(),
            kind_samples: BTreeMap::new(),
        }
    }
}

/// The primary's facts for `input`. `sample` is the manifest's `sample:`; `modules` names the
/// types modules, which related kinds share.
pub(super) fn facts(
    manifest_origin: &str,
    input: &PrimaryInput,
    sample: Option<&serde_json::Value>,
    modules: &mut naming::ModuleNames,
) -> Result<PrimaryFacts> {
    let facts = match input {
        PrimaryInput::Crd { selected, dynamic } => {
            imported(manifest_origin, selected, *dynamic, sample, modules)?
        }
        PrimaryInput::Builtin(b) => given_sample(manifest_origin, builtin(b), sample)?,
        PrimaryInput::Derived(d) => {
            given_sample(manifest_origin, derived(manifest_origin, d)?, sample)?
        }
        PrimaryInput::Generic(kinds) => generic(manifest_origin, kinds, sample)?,
    };
    Ok(facts)
}

/// A built-in or derived primary with the manifest's `sample:` as its sample's body. There is
/// no CRD schema to build one from or check it against: the types are k8s-openapi's or the
/// user's, and the shipped test that round-trips the sample through them says where it does
/// not fit.
fn given_sample(
    manifest_origin: &str,
    mut facts: PrimaryFacts,
    sample: Option<&serde_json::Value>,
) -> Result<PrimaryFacts> {
    if let Some(sample) = sample {
        facts.primary.sample = Some(given_body(manifest_origin, "sample", sample)?);
    }
    Ok(facts)
}

/// The body of a sample that `field` of the manifest gives: the fields beside `metadata`, as
/// JSON.
fn given_body(manifest_origin: &str, field: &str, sample: &serde_json::Value) -> Result<Text> {
    let refused = |reason: &str| Error::Manifest {
        location: format!("{manifest_origin}: field `{field}`"),
        reason: reason.to_owned(),
    };
    let Some(body) = sample.as_object() else {
        return Err(refused(
            "write the sample's fields beside `metadata` as a mapping: `sample: { spec: { … } }`",
        ));
    };
    if let Some(reserved) = ["apiVersion", "kind", "metadata"]
        .into_iter()
        .find(|f| body.contains_key(*f))
    {
        return Err(refused(&format!(
            "`{reserved}` is the operator's to set on the sample; give only the fields beside it"
        )));
    }
    Ok(Text::new(sample.to_string()))
}

fn imported(
    manifest_origin: &str,
    selected: &SelectedCrd,
    dynamic: bool,
    sample: Option<&serde_json::Value>,
    modules: &mut naming::ModuleNames,
) -> Result<PrimaryFacts> {
    let crd = &selected.crd;
    let version = selected.version();
    let names = Names {
        kind: &crd.spec.names.kind,
        group: &crd.spec.group,
        version: &version.name,
        plural: &crd.spec.names.plural,
        namespaced: crd.spec.scope == "Namespaced",
    };
    if dynamic {
        // types.rs defines the kind's `Definition` beside it.
        let kind = naming::type_ident(&crd.spec.names.kind, &["Definition"]);
        let mut primary = names.primary(kind);
        primary.crd_name = Text::from(selected.name());
        primary.storage_version = version.storage;
        let mut warnings = selected.warnings.clone();
        if let Some(sample) =
            schema_sample(manifest_origin, selected, &names, sample, &mut warnings)?
        {
            sample.fill(&mut primary);
        }
        let mut facts = PrimaryFacts::plain(primary, Archetype::Dynamic);
        facts.origin = Some(selected.origin.clone());
        facts.warnings = warnings;
        return Ok(facts);
    }
    // The selected version first, then every other served one, each on a core of its own.
    let others = crd
        .spec
        .versions
        .iter()
        .enumerate()
        .filter(|&(index, v)| v.served && index != selected.version_index)
        .map(|(index, _)| index);
    let indices: Vec<usize> = std::iter::once(selected.version_index)
        .chain(others)
        .collect();
    let mut generated = crate::parallel::map(&indices, |&index| {
        rust_types::generate_version(selected, index)
    })
    .into_iter();
    let types = generated
        .next()
        .unwrap_or_else(|| rust_types::generate(selected))?;
    let mut by_index = BTreeMap::new();
    for (&index, other) in indices.iter().skip(1).zip(generated) {
        by_index.insert(index, other?);
    }
    let mut versions = Vec::new();
    let mut selected_module = None;
    let mut uses_chrono = types.uses_chrono;
    let mut warnings = selected.warnings.clone();
    warnings.extend(types.warnings.iter().cloned());
    for (index, served) in crd
        .spec
        .versions
        .iter()
        .enumerate()
        .filter(|(_, v)| v.served)
    {
        let module = modules.name(&served.name);
        let code = if index == selected.version_index {
            selected_module = Some(module.clone());
            types.code.clone()
        } else {
            let Some(other) = by_index.remove(&index) else {
                continue;
            };
            uses_chrono |= other.uses_chrono;
            warnings.extend(other.warnings);
            other.code
        };
        versions.push(TypesModule { module, code });
    }
    let mut primary = names.primary(types.root.clone());
    primary.crd_name = Text::from(selected.name());
    primary.status_type = types.status.clone();
    primary.status_subresource = version
        .subresources
        .as_ref()
        .is_some_and(|s| s.status.is_some());
    if let Some(schema) = selected.schema()
        && primary.status_subresource
        && primary.status_type.is_some()
    {
        primary.conditions = conditions(schema);
    }
    if let Some(sample) = schema_sample(manifest_origin, selected, &names, sample, &mut warnings)? {
        sample.fill(&mut primary);
    }
    primary.storage_version = version.storage;
    Ok(PrimaryFacts {
        primary,
        archetype: Archetype::Imported,
        versions,
        selected_module,
        uses_chrono,
        warnings,
        origin: Some(selected.origin.clone()),
    })
}

/// The selected version's sample, when its CRD has a schema: the least body the schema allows
/// with the manifest's `sample:` written over it, checked against the CRD's CEL rules, whose
/// warnings join `warnings`.
fn schema_sample(
    manifest_origin: &str,
    selected: &SelectedCrd,
    names: &Names<'_>,
    sample: Option<&serde_json::Value>,
    warnings: &mut Vec<String>,
) -> Result<Option<Sample>> {
    let Some(schema) = selected.schema() else {
        return Ok(None);
    };
    let sampled = sample_body(manifest_origin, schema, sample)?;
    let mut checked = check_sample_rules(
        manifest_origin,
        schema,
        sampled.body,
        names,
        sample.is_some(),
    )?;
    if let Some(field) = sampled.cut_at {
        checked.warnings.push(format!(
            "{manifest_origin}: the least `{}` the CRD's schema allows is larger than the {} KiB \
             operator-gen builds a sample to, so the sample is cut short at `{}` and the API \
             server would refuse it: the shipped cluster test is ignored",
            names.kind,
            schema_sample::MAX_SAMPLE_BYTES / 1024,
            field.escape_debug()
        ));
        checked.cut_at = Some(field);
    }
    warnings.extend(checked.warnings.iter().cloned());
    Ok(Some(checked))
}

/// A sample as [`check_sample_rules`] left it.
struct Sample {
    body: serde_json::Value,
    /// The name the CRD's rules pin, when they pin one.
    name: Option<String>,
    warnings: Vec<String>,
    breaks_rules: bool,
    /// Where the sample was cut short ([`schema_sample::Sampled::cut_at`]).
    cut_at: Option<String>,
}

impl Sample {
    /// Writes the sample into the primary's model.
    fn fill(self, primary: &mut Primary) {
        primary.sample = Some(Text::new(self.body.to_string()));
        primary.sample_name = self.name.map(Text::new);
        primary.sample_breaks_rules = self.breaks_rules;
        primary.sample_cut_at = self.cut_at.map(Text::new);
    }
}

/// The least body the schema allows with the manifest's `sample:` written over it, refused
/// naming the field when it does not fit the schema: the shipped tests and the end-to-end
/// run create it, and a sample the API server rejects would only fail there.
fn sample_body(
    manifest_origin: &str,
    schema: &JSONSchemaProps,
    overlay: Option<&serde_json::Value>,
) -> Result<schema_sample::Sampled> {
    let sampled = schema_sample::sample_with(schema, overlay);
    if overlay.is_some()
        && let Err(problems) = schema_check::check(schema, &sampled.body)
    {
        let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return Err(Error::Manifest {
            location: format!("{manifest_origin}: field `sample`"),
            reason: format!(
                "does not fit the CRD's schema: {}; give values the schema accepts",
                listed.join("; ")
            ),
        });
    }
    Ok(sampled)
}

/// The name the shipped tests give the sample, which rules on `metadata` see.
const SAMPLE_NAME: &str = "sample";

/// Evaluates the CRD's CEL rules on the sample as the shipped tests create it, and returns
/// the sample with a warning for each rule that could not be checked.
///
/// The least object often breaks a rule of its own CRD: one that pins a value (a singleton's
/// name, the kinds a reference may name) or asks for one of several optional fields. The
/// sample built from the schema then takes, a change at a time, the first change at the
/// rule's field that mends that rule, breaks no other and still fits the schema: first what
/// the rule itself asks for ([`schema_sample::kept_variations`]), then
/// [`schema_sample::variations`]. The sample is the generator's own invention, so a rule it
/// still breaks is a warning naming the rule, and the crate is written with its cluster test
/// saying it needs `sample:` values; a sample `operator.yaml` gives is never changed, and one
/// that breaks a rule is refused, naming it.
fn check_sample_rules(
    manifest_origin: &str,
    schema: &JSONSchemaProps,
    body: serde_json::Value,
    names: &Names,
    from_manifest: bool,
) -> Result<Sample> {
    if !cel::has_rules(schema) {
        return Ok(Sample {
            body,
            name: None,
            warnings: Vec::new(),
            breaks_rules: false,
            cut_at: None,
        });
    }
    let mut object = body;
    object["apiVersion"] = serde_json::Value::from(names.api_version());
    object["kind"] = serde_json::Value::from(names.kind);
    object["metadata"] = serde_json::json!({"name": SAMPLE_NAME});
    if names.namespaced {
        object["metadata"]["namespace"] = serde_json::Value::from("default");
    }
    let schema_json = serde_json::to_value(schema).map_err(|e| Error::Manifest {
        location: format!("{manifest_origin}: field `sample`"),
        reason: format!("the CRD's schema could not be read for its CEL rules: {e}"),
    })?;
    let mut checked = cel::check(&schema_json, &object);
    // A change may not make the sample fit the schema less well than it did.
    let misfits = |object: &serde_json::Value| {
        schema_check::check(schema, object)
            .err()
            .map_or(0, |p| p.len())
    };
    let mut fit = misfits(&object);
    // Each round mends the first broken rule that one change can mend; a rule none can is
    // passed over, so that the rules after it still get their turn.
    for _ in 0..MAX_SAMPLE_MENDS {
        if from_manifest {
            break;
        }
        let mended = checked.broken.iter().find_map(|broken| {
            let asked = schema_sample::kept_variations(schema, &object, &broken.path, &broken.rule);
            let generic = schema_sample::variations(schema, &object, &broken.path, &broken.rule);
            asked
                .into_iter()
                .chain(generic)
                .filter(|candidate| misfits(candidate) <= fit)
                .map(|candidate| {
                    let again = cel::check(&schema_json, &candidate);
                    (candidate, again)
                })
                .find(|(_, again)| {
                    again.broken.len() < checked.broken.len() && !again.broken.contains(broken)
                })
        });
        let Some((candidate, again)) = mended else {
            break;
        };
        fit = misfits(&candidate);
        object = candidate;
        checked = again;
    }
    let location = format!("{manifest_origin}: field `sample`");
    let listed: Vec<String> = checked.broken.iter().map(ToString::to_string).collect();
    if from_manifest && !listed.is_empty() {
        return Err(Error::Manifest {
            location,
            reason: format!(
                "the sample with `sample:` written over it breaks {}; give `sample:` values that \
                 satisfy it",
                listed.join("; ")
            ),
        });
    }
    let mut warnings: Vec<String> = listed
        .iter()
        .map(|broken| {
            format!(
                "{location}: the sample built from the CRD's schema breaks {broken}, and no value \
                 the rule or the schema gives keeps it; the crate is written anyway, but the API \
                 server will refuse the sample until you give `sample:` values in operator.yaml \
                 that satisfy the rule (README: \"sample:\"), and tests/cluster.rs says so"
            )
        })
        .collect();
    let name = object
        .pointer("/metadata/name")
        .and_then(serde_json::Value::as_str)
        .filter(|name| *name != SAMPLE_NAME)
        .map(str::to_owned);
    if let serde_json::Value::Object(fields) = &mut object {
        for meta in ["apiVersion", "kind", "metadata"] {
            fields.remove(meta);
        }
    }
    warnings.extend(
        checked
            .warnings
            .into_iter()
            .map(|warning| format!("{location}: {warning}")),
    );
    Ok(Sample {
        body: object,
        name,
        warnings,
        breaks_rules: !listed.is_empty(),
        cut_at: None,
    })
}

/// How many changes a sample built from the schema may take to meet the CEL rules.
const MAX_SAMPLE_MENDS: usize = 8;

fn builtin(b: &k8s_catalog::BuiltinKind) -> PrimaryFacts {
    let names = Names {
        kind: b.kind,
        group: b.group,
        version: b.version,
        plural: b.plural,
        namespaced: b.namespaced,
    };
    let mut facts = PrimaryFacts::plain(
        names.primary(naming::type_ident(b.kind, &[])),
        Archetype::Builtin,
    );
    facts.primary.kinds = vec![Related::builtin(b)];
    facts
}

fn derived(manifest_origin: &str, d: &manifest::Derived) -> Result<PrimaryFacts> {
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
    let names = Names {
        kind: &d.kind,
        group: &d.group,
        version: &d.version,
        plural: &plural,
        namespaced: d.namespaced,
    };
    let root = naming::type_ident(&d.kind, &[]);
    let mut primary = names.primary(root.clone());
    primary.kube_args = kube_args((root.as_str() != d.kind).then_some(&root), d.namespaced);
    primary.spec_type = Some(naming::type_ident(&format!("{root}Spec"), &[]));
    primary.status_type = Some(naming::type_ident(&format!("{root}Status"), &[]));
    primary.status_subresource = true;
    Ok(PrimaryFacts::plain(primary, Archetype::Derived))
}

/// The `#[kube(…)]` arguments of [`Primary::kube_args`]: `root` named when it is not the kind.
fn kube_args(root: Option<&Ident>, namespaced: bool) -> Code {
    let root = root.map(|root| format!(", root = {}", Text::from(root.as_str()).rs()));
    let namespaced = if namespaced { ", namespaced" } else { "" };
    Code::composed(format!("{}{namespaced}", root.unwrap_or_default()))
}

/// A generic primary over `kinds`. Its `sample:` is a mapping by kind (`sample: { Deployment:
/// { spec: … } }`): one object of each kind is what the cluster test creates, and a kind it
/// does not name gets an empty one.
fn generic(
    manifest_origin: &str,
    kinds: &[k8s_catalog::BuiltinKind],
    sample: Option<&serde_json::Value>,
) -> Result<PrimaryFacts> {
    let names: Vec<&str> = kinds.iter().map(|k| k.kind).collect();
    let joined = names.join(", ");
    let mut primary = Names {
        kind: &joined,
        group: "",
        version: "",
        plural: "",
        namespaced: true,
    }
    .primary(naming::type_ident("PartialObjectMeta", &[]));
    primary.crd_name = Text::new(joined.clone());
    let mut related: Vec<Related> = kinds.iter().map(Related::builtin).collect();
    related.sort_by(|a, b| a.rust_name.cmp(&b.rust_name));
    related.dedup_by(|a, b| a.rust_name == b.rust_name);
    let mut facts = PrimaryFacts::plain(primary, Archetype::Generic);
    facts.primary.kinds = related;
    facts.primary.kind_samples = generic_samples(manifest_origin, kinds, sample)?;
    Ok(facts)
}

/// The sample body of each of `kinds` that a generic primary's `sample:` gives.
fn generic_samples(
    manifest_origin: &str,
    kinds: &[k8s_catalog::BuiltinKind],
    sample: Option<&serde_json::Value>,
) -> Result<BTreeMap<String, Text>> {
    let Some(sample) = sample else {
        return Ok(BTreeMap::new());
    };
    let by_kind = sample.as_object().ok_or_else(|| Error::Manifest {
        location: format!("{manifest_origin}: field `sample`"),
        reason: "a generic operator's samples are given by kind: \
                 `sample: { Deployment: { spec: { … } } }`"
            .to_owned(),
    })?;
    let mut samples = BTreeMap::new();
    for (kind, body) in by_kind {
        if !kinds.iter().any(|k| k.kind == kind.as_str()) {
            return Err(Error::Manifest {
                location: format!("{manifest_origin}: field `sample`"),
                reason: format!(
                    "a generic operator's samples are given by the kinds it reconciles ({}); \
                     a key of `sample` is none of them",
                    kinds.iter().map(|k| k.kind).collect::<Vec<_>>().join(", ")
                ),
            });
        }
        let field = format!("sample.{kind}");
        samples.insert(kind.clone(), given_body(manifest_origin, &field, body)?);
    }
    Ok(samples)
}

/// The condition fields of `schema`'s `status.conditions`, when its items are objects with
/// string `type` and `status` (the shape of `metav1.Condition` and its many look-alikes).
pub(super) fn conditions(schema: &JSONSchemaProps) -> Option<Conditions> {
    let property = |s: &JSONSchemaProps, name: &str| s.properties.as_ref()?.get(name).cloned();
    let list = property(&property(schema, "status")?, "conditions")?;
    let Some(JSONSchemaPropsOrArray::Schema(item)) = &list.items else {
        return None;
    };
    let is = |name: &str, type_: &str| {
        property(item, name).is_some_and(|p| p.type_.as_deref() == Some(type_))
    };
    let list_map = list.x_kubernetes_list_type.as_deref() == Some("map")
        && list.x_kubernetes_list_map_keys.as_deref() == Some(&["type".to_owned()][..]);
    let allowed_types = property(item, "type").and_then(|type_| {
        let values = type_.enum_?;
        Some(
            values
                .into_iter()
                .filter_map(|v| v.0.as_str().map(str::to_owned))
                .collect(),
        )
    });
    let fields = Conditions {
        reason: is("reason", "string"),
        message: is("message", "string"),
        last_transition_time: is("lastTransitionTime", "string"),
        observed_generation: is("observedGeneration", "integer"),
        list_map,
        allowed_types,
        unfillable: Vec::new(),
    };
    let fillable = |name: &str| match name {
        "type" | "status" => true,
        "reason" => fields.reason,
        "message" => fields.message,
        "lastTransitionTime" => fields.last_transition_time,
        "observedGeneration" => fields.observed_generation,
        _ => false,
    };
    let unfillable = item
        .required
        .iter()
        .flatten()
        .filter(|name| !fillable(name))
        .cloned()
        .collect();
    let shaped =
        list.type_.as_deref() == Some("array") && is("type", "string") && is("status", "string");
    shaped.then_some(Conditions {
        unfillable,
        ..fields
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_args_name_a_root_only_when_the_kind_cannot_be_one_and_scope_a_namespaced_kind() {
        let root = naming::type_ident("SelfResource", &[]);
        let args = |root, namespaced| kube_args(root, namespaced).as_str().to_owned();
        assert_eq!(args(None, false), "");
        assert_eq!(args(None, true), ", namespaced");
        assert_eq!(
            args(Some(&root), true),
            r#", root = "SelfResource", namespaced"#
        );
        assert_eq!(args(Some(&root), false), r#", root = "SelfResource""#);
    }
}
