//! `operator.yaml`: what the operator is about and how it relates to other objects.
//!
//! Parsing is strict: an unknown or misspelt field is an error naming its line and column,
//! because a silently ignored `watchs:` would produce an operator that quietly misses events.
//! Values are checked as they are read (durations within bounds, dependency keys known,
//! `sample` a mapping), and the file is read within the caps in [`crate::limits`].

use std::{path::Path, time::Duration};

use serde::{Deserialize, Serialize};

use crate::{
    crate_dir::{self, CrateDir},
    error::{Error, Result},
    limits::{self, MAX_MANIFEST_BYTES, YamlProblem},
    runtime_path::RuntimePath,
};

/// The whole manifest. Every field is optional: an empty manifest is an operator with no
/// relations, reconciling on changes to the primary resource only.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    /// Crate (and binary) name; defaults to `<kind>-controller`. `new` always writes one: the
    /// crate folder's name, or `--name`.
    pub name: Option<String>,
    #[serde(default)]
    pub primary: Primary,
    /// Children this operator creates and controls through an ownerReference.
    #[serde(default)]
    pub owns: Vec<Owned>,
    /// Related objects without ownerReferences, mapped back to the primary by a rule.
    #[serde(default)]
    pub watches: Vec<Watched>,
    /// Outside systems that trigger reconciles and may hold state needing cleanup.
    #[serde(default)]
    pub external: Vec<External>,
    #[serde(default)]
    pub requeue: Requeue,
    /// Where the operator watches: the whole cluster (a ClusterRole), or only the namespace
    /// it runs in (a Role), for teams that may not hold cluster-wide grants.
    #[serde(default)]
    pub scope: Scope,
    /// Filters on the primary's watch stream; defaults to `[generation, finalizers]`.
    pub predicates: Option<Vec<Predicate>>,
    /// How many reconciles run at once (default: unlimited), and how long to wait for more
    /// changes before reconciling (default: none).
    pub concurrency: Option<u16>,
    #[serde(default, with = "duration::debounce")]
    pub debounce: Option<Duration>,
    /// Extra crates your reconcile code uses, merged into the generated Cargo.toml.
    #[serde(default)]
    pub dependencies: std::collections::BTreeMap<String, DependencySpec>,
    /// Extra crates your tests use.
    #[serde(default)]
    pub dev_dependencies: std::collections::BTreeMap<String, DependencySpec>,
    /// Fields written over the least object the CRD's schema allows, which the shipped tests
    /// and `cargo xtask e2e` create: values a schema cannot give, such as a string that must
    /// match a `pattern`. A mapping; the schema check is done where the sample is built.
    #[serde(default, deserialize_with = "sample_mapping")]
    pub sample: Option<serde_json::Value>,
    /// Admission webhooks the API server calls before it stores the primary: an HTTPS server
    /// in the operator's process, hooks in `src/admission.rs`, and their configurations in
    /// `deploy/`.
    pub webhooks: Option<Webhooks>,
    /// What the operator writes into the primary's status, which for an imported CRD is
    /// usually another controller's: nothing unless asked.
    #[serde(default)]
    pub status: Status,
    /// Whether replicas can split the primaries between them (`--sharding` at run time):
    /// each holds a Lease of its own and reconciles the objects a sharder places on it, rather
    /// than one leader reconciling all. `deploy/` then runs three replicas with it on.
    #[serde(default)]
    pub sharding: bool,
    /// Where the generated crate's operator-gen-runtime comes from, when not from the copy
    /// `gen` writes into `vendor/operator-gen-runtime/` ([`crate::vendor`]).
    pub runtime: Option<Runtime>,
    /// How the cluster reaches an operator run outside it, as `cargo run` runs it.
    #[serde(default, skip_serializing_if = "Local::is_default")]
    pub local: Local,
}

/// `local:`: how the cluster reaches an operator run outside it (`cargo run`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Local {
    /// The `https://host:port` the API server calls the webhooks at; `deploy/local/` and the
    /// default `--webhook-addr` follow it ([`crate::model::local`]).
    pub webhooks: Option<String>,
}

impl Local {
    fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

/// `runtime:`: a folder holding operator-gen-runtime, shared by several crates, in place of
/// each one's vendored copy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Runtime {
    /// The runtime's folder, relative to the crate's folder (where Cargo.toml names it), such
    /// as `../../runtime`. Read from a file it must be relative; a program that builds a
    /// [`Manifest`] may give an absolute one ([`crate::vendor::RuntimePath::anywhere`]).
    pub path: RuntimePath,
}

/// `status:`: what the operator writes into its primary's status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Status {
    /// A condition of this type in `status.conditions`, `True` after a reconcile that
    /// succeeded and `False` after a permanent failure, written as this operator's own entry
    /// so that the conditions other controllers write are left alone.
    pub condition: Option<String>,
    /// Whether this operator is the controller of an imported CRD (the one its status was
    /// made for), so that the status is the operator's to write with `Context::patch_status`.
    /// Off by default: an imported CRD's status belongs to the controller it comes with.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ours: bool,
}

/// The condition a derived primary keeps when `status.condition` names none: its status is the
/// operator's own, so it always keeps one.
pub const DERIVED_CONDITION: &str = "Ready";

/// `webhooks:`: which admission webhooks the operator serves for its primary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Webhooks {
    /// `validate(new, old)` may refuse a create or an update, with a reason kubectl shows.
    #[serde(default)]
    pub validating: bool,
    /// `mutate(object)` may change an object (set defaults) before it is validated and stored.
    #[serde(default)]
    pub mutating: bool,
}

/// A dependency as in Cargo.toml: a version, or a version with features.
///
/// Only `version`, `features` and `default-features` are read; any other key (`git`, `path`,
/// a typo) is an error rather than dropped, because a dropped `git:` would silently build
/// against crates.io instead.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum DependencySpec {
    Version(String),
    #[serde(rename_all = "kebab-case")]
    Detailed {
        version: String,
        #[serde(default)]
        features: Vec<String>,
        default_features: Option<bool>,
    },
}

/// The resource the controller reconciles.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Primary {
    /// CRD source (URL, or a path relative to the manifest); `--crd` overrides it.
    pub crd: Option<String>,
    /// Kind or CRD name when the source holds several CRDs; `--kind` overrides it.
    pub kind: Option<String>,
    /// Served version; the storage version when absent. `--version` overrides it.
    pub version: Option<String>,
    /// With `crd`: reconcile its objects untyped, their fields JSON as the CRD describes them
    /// (`operator_gen_runtime::untyped::Untyped`), instead of through generated types.
    #[serde(default)]
    pub dynamic: bool,
    /// A built-in kind (`Deployment`) to reconcile as its k8s-openapi type.
    pub builtin: Option<String>,
    /// A custom resource defined in Rust, in `src/types.rs`.
    pub derive: Option<Derived>,
    /// Built-in kinds reconciled together on their metadata only.
    pub generic: Option<Vec<String>>,
}

/// `primary.derive`: the names of a custom resource defined in Rust.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Derived {
    pub kind: String,
    pub group: String,
    pub version: String,
    /// Defaults to the lowercase kind with an `s`.
    pub plural: Option<String>,
    #[serde(default)]
    pub namespaced: bool,
    /// Other versions served besides `version`, which stays the storage version (the hub).
    /// Each is a module of `src/types.rs` with conversions to and from the hub, and the API
    /// server converts between them through the operator's conversion webhook.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_served: Vec<String>,
}

/// `owns:` entry, becoming `Controller::owns`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Owned {
    /// A k8s-openapi kind (`ConfigMap`, `apps/v1 Deployment` style names are not needed) or the
    /// kind of the CRD named by `crd`.
    pub kind: String,
    /// CRD source for a custom child kind, relative to the manifest.
    pub crd: Option<String>,
}

/// `watches:` entry, becoming `Controller::watches` with a generated mapper.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Watched {
    pub kind: String,
    pub crd: Option<String>,
    /// How a related object names the primary it belongs to, written `{ label: key }`.
    pub map: MapRule,
    /// Whether the watch keeps whole objects in a cache the reconcile reads, rather than
    /// streaming what its mapping needs and keeping nothing. Off by default: a cache holds
    /// every object its selector matches in the operator's memory.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache: bool,
}

/// A rule that reads the primary's name from a related object. The primary is looked up in
/// the related object's namespace when the primary is namespaced.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum MapRule {
    /// The value of this label.
    Label(String),
    /// The value of this annotation.
    Annotation(String),
    /// A dotted path to a string field, for example `spec.ruleRef.name`.
    Field(String),
}

/// `external:` entry, becoming `Controller::reconcile_on` plus a finalizer for cleanup.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct External {
    /// A short name, used for hook and stream names (`rule-registry`).
    pub name: String,
    #[serde(default)]
    pub source: ExternalSource,
    /// Poll period for `source: poll`, as `30s`, `5m`.
    #[serde(default, with = "duration::interval")]
    pub interval: Option<Duration>,
}

/// How events from an outside system reach the controller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ExternalSource {
    /// The operator asks the outside system on a timer.
    #[default]
    Poll,
    /// The outside system pushes through a channel the user's code feeds.
    Channel,
}

/// When to reconcile again.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Requeue {
    /// Requeue after a successful reconcile; absent means wait for a change.
    #[serde(default, with = "duration::interval")]
    pub after: Option<Duration>,
    /// First delay after an error; doubles per consecutive failure.
    #[serde(default, with = "duration::backoff")]
    pub error_backoff: Option<Duration>,
    /// Cap on the error delay.
    #[serde(default, with = "duration::backoff")]
    pub error_backoff_max: Option<Duration>,
}

/// How far the operator's watches and permissions reach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Scope {
    #[default]
    Cluster,
    /// The namespace the operator runs in; every kind it touches must be namespaced.
    Namespace,
}

/// kube-runtime predicates applied to the primary stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Predicate {
    Generation,
    Finalizers,
    Labels,
    Annotations,
}

/// Where an entry of one of `operator.yaml`'s lists sits, as messages name it (`owns[2]`),
/// formatted here alone, so that loading, checking and modelling name an entry alike.
impl Owned {
    /// `owns[index]`.
    pub fn field(index: usize) -> String {
        format!("owns[{index}]")
    }
}

impl Watched {
    /// `watches[index]`.
    pub fn field(index: usize) -> String {
        format!("watches[{index}]")
    }
}

impl External {
    /// `external[index]`.
    pub fn field(index: usize) -> String {
        format!("external[{index}]")
    }
}

impl Manifest {
    /// The condition type the operator keeps in its primary's `status.conditions`, if any:
    /// `status.condition`, else [`DERIVED_CONDITION`] for a derived primary.
    pub fn own_condition(&self) -> Option<&str> {
        let derived = self.primary.derive.is_some().then_some(DERIVED_CONDITION);
        self.status.condition.as_deref().or(derived)
    }

    /// Reads and parses a manifest file, reading at most [`MAX_MANIFEST_BYTES`] so that a
    /// wrong path (`/dev/zero`, a large binary) fails at once instead of filling memory.
    ///
    /// The manifest is usually the crate folder's own, which strangers may have made, so it
    /// is read as a file of its folder ([`CrateDir`]): a link, a FIFO or a device in its place
    /// is refused, never followed or opened.
    pub fn load(path: &Path) -> Result<Self> {
        let text = Self::read_text(path)?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// The text of the manifest file at `path`, read as [`Manifest::load`] reads it:
    /// `new --manifest` copies it into the crate as it is, comments and all.
    pub fn read_text(path: &Path) -> Result<String> {
        let origin = path.display().to_string();
        let (folder, name) = match (path.parent(), path.file_name()) {
            (Some(folder), Some(name)) => (folder, Path::new(name)),
            _ => {
                return Err(Error::Manifest {
                    location: origin,
                    reason: "not a file name; name the manifest file, such as operator.yaml"
                        .to_owned(),
                });
            }
        };
        let bytes = match CrateDir::new(folder).read(name, MAX_MANIFEST_BYTES) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                return Err(Error::Manifest {
                    location: origin,
                    reason: "cannot read the manifest: no such file".to_owned(),
                });
            }
            Err(crate_dir::Error::TooLarge { .. }) => return Err(too_large(&origin)),
            Err(e) => return Err(e.into()),
        };
        let text = String::from_utf8(bytes).map_err(|e| Error::Manifest {
            location: origin.clone(),
            reason: format!(
                "not valid UTF-8 at byte {}; a manifest must be UTF-8 text",
                e.utf8_error().valid_up_to()
            ),
        })?;
        Ok(text)
    }

    /// Parses manifest text; `origin` names it in errors, which give `origin:line:column`
    /// and the field path (`requeue.errorBackoffMax`, `external[0].interval`).
    pub fn parse(origin: &str, text: &str) -> Result<Self> {
        if text.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(too_large(origin));
        }
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let mut path = None;
        let parsed = limits::with_deep_stack(|| {
            serde_saphyr::with_deserializer_from_str_with_options(
                text,
                limits::yaml_options(),
                |de| {
                    serde_path_to_error::deserialize::<_, Option<Self>>(de).map_err(|e| {
                        path = Some(e.path().to_string());
                        e.into_inner()
                    })
                },
            )
        });
        let manifest = match parsed {
            Ok(manifest) => manifest.unwrap_or_default(),
            Err(e) => return Err(parse_error(origin, path.as_deref(), &e)),
        };
        manifest.check_derived_group(origin)?;
        Ok(manifest)
    }

    /// Refuses a derived resource's group that the API server would refuse for the CRD
    /// `crdgen` prints: one without a dot, or one of Kubernetes' own (a new resource carries no
    /// `api-approved.kubernetes.io`).
    fn check_derived_group(&self, origin: &str) -> Result<()> {
        let Some(derived) = &self.primary.derive else {
            return Ok(());
        };
        match crate::crd_document::group_problem(&derived.group, false) {
            None => Ok(()),
            Some(rule) => Err(Error::Manifest {
                location: format!("{origin}: field `primary.derive.group`"),
                reason: format!(
                    "{:?} would be refused by the API server: it must be {rule}",
                    derived.group
                ),
            }),
        }
    }

    /// The predicates in force: the manifest's, or the generation+finalizers default that
    /// keeps a controller from reacting to its own status writes while still seeing deletes.
    pub fn predicates(&self) -> Vec<Predicate> {
        self.predicates
            .clone()
            .unwrap_or_else(|| vec![Predicate::Generation, Predicate::Finalizers])
    }
}

fn too_large(origin: &str) -> Error {
    Error::Limit {
        origin: origin.to_owned(),
        reason: format!(
            "larger than the {} limit for a manifest; an operator.yaml is a few KiB, so check \
             that --manifest points at one",
            limits::bytes(MAX_MANIFEST_BYTES)
        ),
    }
}

/// `origin:line:column: field `path`: reason`, or a cap named.
fn parse_error(origin: &str, path: Option<&str>, err: &serde_saphyr::Error) -> Error {
    let problem = YamlProblem::from_error(err);
    if problem.over_cap {
        return Error::Limit {
            origin: origin.to_owned(),
            reason: format!(
                "{}; an operator.yaml needs nothing near this, so check that --manifest \
                 points at one",
                problem.with_position()
            ),
        };
    }
    let location = match problem.at {
        Some((line, column)) => format!("{origin}:{line}:{column}"),
        None => origin.to_owned(),
    };
    let field = match path {
        Some(path) if !path.is_empty() && path != "." => format!("field `{path}`: "),
        _ => String::new(),
    };
    Error::Manifest {
        location,
        reason: format!(
            "{field}{}; see the manifest reference in README.md",
            problem.reason
        ),
    }
}

/// `sample:` must be a mapping of fields; a list or a string cannot be written over an object.
fn sample_mapping<'de, D: serde::Deserializer<'de>>(
    de: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    match Option::<serde_json::Value>::deserialize(de)? {
        Some(value) if !value.is_object() => Err(serde::de::Error::custom(format!(
            "must be a mapping of fields written over the least valid object, such as \
             `sample: {{ spec: {{ url: https://example.com }} }}`; found {}",
            match value {
                serde_json::Value::Array(_) => "a list",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Number(_) => "a number",
                _ => "a boolean",
            }
        ))),
        other => Ok(other),
    }
}

impl<'de> Deserialize<'de> for DependencySpec {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_any(DependencyVisitor)
    }
}

/// The keys a detailed dependency may have.
enum DependencyKey {
    Version,
    Features,
    DefaultFeatures,
}

impl<'de> Deserialize<'de> for DependencyKey {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let key = String::deserialize(de)?;
        match key.as_str() {
            "version" => Ok(Self::Version),
            "features" => Ok(Self::Features),
            "default-features" => Ok(Self::DefaultFeatures),
            other => Err(serde::de::Error::custom(format!(
                "unknown key `{other}` in a dependency; the supported keys are version, \
                 features and default-features (git and path dependencies are not supported)"
            ))),
        }
    }
}

struct DependencyVisitor;

impl<'de> serde::de::Visitor<'de> for DependencyVisitor {
    type Value = DependencySpec;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "a version in quotes, such as \"1.0\", or a mapping of version, features and \
             default-features",
        )
    }

    fn visit_str<E: serde::de::Error>(self, version: &str) -> Result<DependencySpec, E> {
        check_version(version).map_err(E::custom)?;
        Ok(DependencySpec::Version(version.to_owned()))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<DependencySpec, A::Error> {
        let (mut version, mut features, mut default_features): (_, Vec<String>, _) =
            (None, Vec::new(), None);
        // Duplicate keys are refused by the YAML reader, so each arm runs at most once.
        while let Some(key) = map.next_key()? {
            match key {
                DependencyKey::Version => version = Some(map.next_value()?),
                DependencyKey::Features => features = map.next_value()?,
                DependencyKey::DefaultFeatures => default_features = map.next_value()?,
            }
        }
        let version: String = version.ok_or_else(|| {
            serde::de::Error::custom(
                "a dependency needs a `version` (git and path dependencies are not supported)",
            )
        })?;
        check_version(&version).map_err(serde::de::Error::custom)?;
        for feature in &features {
            check_feature(feature.as_str()).map_err(serde::de::Error::custom)?;
        }
        Ok(DependencySpec::Detailed {
            version,
            features,
            default_features,
        })
    }
}

/// Checks a dependency's version as cargo reads it, a requirement such as `1`, `^0.4.2` or
/// `>=1.2, <2`, so that a bad one is named here rather than by cargo in the user's build.
fn check_version(version: &str) -> Result<(), String> {
    semver::VersionReq::parse(version).map(drop).map_err(|e| {
        format!(
            "{version:?} is not a cargo version requirement ({e}); write one such as \"1.0\" or \
             \"^0.4.2\""
        )
    })
}

/// Checks a feature name as cargo accepts one in a dependency's `features`: ASCII letters,
/// digits, `_`, `-`, `+` and `.`, starting with a letter, a digit or `_`, optionally after
/// `dep-name/`.
fn check_feature(feature: &str) -> Result<(), String> {
    let name_ok = |name: &str| {
        name.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.'))
    };
    let ok = match feature.split_once('/') {
        Some((dependency, name)) => name_ok(dependency) && name_ok(name),
        None => name_ok(feature),
    };
    if ok && feature.len() <= 64 {
        Ok(())
    } else {
        Err(format!(
            "{feature:?} is not a feature name cargo accepts: ASCII letters, digits, `_`, `-`, \
             `+` and `.`, starting with a letter, a digit or `_`"
        ))
    }
}

/// Durations written as `30s`, `5m` or `1h`, each kind within its documented bounds, because
/// an unbounded one wraps or panics in generated code (a huge backoff became 384 ms, a huge
/// interval panicked inside tokio).
mod duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    use crate::limits::{MAX_DURATION, MIN_ERROR_BACKOFF, MIN_INTERVAL};

    /// `requeue.errorBackoff`, `requeue.errorBackoffMax`.
    pub mod backoff {
        pub use super::serialize;

        pub fn deserialize<'de, D: serde::Deserializer<'de>>(
            de: D,
        ) -> Result<Option<std::time::Duration>, D::Error> {
            super::within(
                de,
                super::MIN_ERROR_BACKOFF,
                "an error backoff",
                super::MILLISECOND,
            )
        }
    }

    /// `requeue.after`, `external[].interval`.
    pub mod interval {
        pub use super::serialize;

        pub fn deserialize<'de, D: serde::Deserializer<'de>>(
            de: D,
        ) -> Result<Option<std::time::Duration>, D::Error> {
            super::within(
                de,
                super::MIN_INTERVAL,
                "a requeue or poll interval",
                super::SECOND,
            )
        }
    }

    /// `debounce`: zero means none.
    pub mod debounce {
        pub use super::serialize;

        pub fn deserialize<'de, D: serde::Deserializer<'de>>(
            de: D,
        ) -> Result<Option<std::time::Duration>, D::Error> {
            super::within(
                de,
                std::time::Duration::ZERO,
                "a debounce",
                super::MILLISECOND,
            )
        }
    }

    /// The unit generated code counts a duration in: intervals in seconds, backoffs and the
    /// debounce in milliseconds.
    const SECOND: Duration = Duration::from_secs(1);
    const MILLISECOND: Duration = Duration::from_millis(1);

    /// A duration between `min` and the cap, in whole `unit`s: a remainder below the unit
    /// would be dropped by generated code (`1s 999ms` would wait one second), so it is
    /// refused rather than rounded.
    fn within<'de, D: Deserializer<'de>>(
        de: D,
        min: Duration,
        what: &str,
        unit: Duration,
    ) -> Result<Option<Duration>, D::Error> {
        let Some(text) = Option::<String>::deserialize(de)? else {
            return Ok(None);
        };
        let value = humantime::parse_duration(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {text:?} ({e}); write it like 30s, 5m or 1h"
            ))
        })?;
        if value < min || value > MAX_DURATION {
            let format = |d: Duration| humantime::format_duration(d).to_string();
            return Err(serde::de::Error::custom(format!(
                "{text:?} is out of bounds: {what} must be between {} and {}",
                format(min),
                format(MAX_DURATION)
            )));
        }
        if value.as_nanos() % unit.as_nanos() != 0 {
            let format = |d: Duration| humantime::format_duration(d).to_string();
            let whole = unit * u32::try_from(value.as_nanos() / unit.as_nanos()).unwrap_or(0);
            return Err(serde::de::Error::custom(format!(
                "{text:?} has a part smaller than {}, and {what} is counted in whole {}s; \
                 write {} or {}",
                format(unit),
                if unit == SECOND {
                    "second"
                } else {
                    "millisecond"
                },
                format(whole.max(unit)),
                format(whole + unit)
            )));
        }
        Ok(Some(value))
    }

    pub fn serialize<S: Serializer>(value: &Option<Duration>, ser: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => ser.serialize_str(&humantime::format_duration(*d).to_string()),
            None => ser.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_manifest_parses() {
        let manifest = Manifest::parse(
            "operator.yaml",
            r#"
name: rules
primary: { crd: crd.yaml, version: v1 }
owns: [{ kind: ConfigMap }]
watches:
  - kind: Secret
    map: { label: example.com/rule }
  - kind: ConfigMap
    map: { field: data.rule }
external:
  - name: registry
    source: channel
requeue: { after: 5m, errorBackoff: 1s, errorBackoffMax: 2m }
predicates: [generation]
"#,
        )
        .unwrap();
        assert_eq!(
            manifest.watches[0].map,
            MapRule::Label("example.com/rule".into())
        );
        assert_eq!(manifest.external[0].source, ExternalSource::Channel);
        assert_eq!(manifest.requeue.after, Some(Duration::from_secs(300)));
        assert_eq!(manifest.predicates(), vec![Predicate::Generation]);
    }

    #[test]
    fn an_empty_manifest_means_no_relations() {
        for empty in ["\n", "---\n", "# nothing yet\n"] {
            assert_eq!(
                Manifest::parse("operator.yaml", empty).unwrap(),
                Manifest::default(),
                "{empty:?}"
            );
        }
        let manifest = Manifest::parse("operator.yaml", "\n").unwrap();
        assert!(
            manifest.owns.is_empty() && manifest.watches.is_empty() && manifest.external.is_empty()
        );
        assert_eq!(
            manifest.predicates(),
            vec![Predicate::Generation, Predicate::Finalizers]
        );
    }

    #[test]
    fn unknown_fields_are_reported_with_line_and_column() {
        let err = Manifest::parse("op.yaml", "owns:\n  - kind: ConfigMap\n    namespace: x\n")
            .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("op.yaml:3:5: "), "{text}");
        assert!(text.contains("unknown field `namespace`"), "{text}");
    }

    #[test]
    fn bad_durations_say_how_to_write_one() {
        let text = Manifest::parse("op.yaml", "requeue: { after: soon }")
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("op.yaml:1:") && text.contains("30s"),
            "{text}"
        );
    }

    fn error(text: &str) -> String {
        Manifest::parse("op.yaml", text).unwrap_err().to_string()
    }

    #[test]
    fn durations_outside_their_bounds_are_refused_naming_the_field_and_bounds() {
        let cases = [
            (
                "requeue: { errorBackoffMax: 100000000d }",
                "requeue.errorBackoffMax",
                "1ms",
            ),
            (
                "requeue: { errorBackoff: 0s }",
                "requeue.errorBackoff",
                "1ms",
            ),
            ("requeue: { after: 8days }", "requeue.after", "1s"),
            ("requeue: { after: 500ms }", "requeue.after", "1s"),
            (
                "external: [{ name: r, interval: 10ms }]",
                "external[0].interval",
                "1s",
            ),
            (
                "external: [{ name: r }, { name: s, interval: 99999h }]",
                "external[1].interval",
                "1s",
            ),
            ("debounce: 30days", "debounce", "0s"),
        ];
        for (text, field, min) in cases {
            let err = error(text);
            assert!(
                err.starts_with("op.yaml:1:")
                    && err.contains(&format!("field `{field}`"))
                    && err.contains(&format!("between {min} and 7days")),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn durations_at_their_bounds_are_accepted() {
        let manifest = Manifest::parse(
            "op.yaml",
            "requeue: { after: 1s, errorBackoff: 1ms, errorBackoffMax: 7days }\n\
             external: [{ name: r, interval: 7days }]\ndebounce: 0s\n",
        )
        .unwrap();
        assert_eq!(manifest.requeue.after, Some(Duration::from_secs(1)));
        assert_eq!(
            manifest.requeue.error_backoff,
            Some(Duration::from_millis(1))
        );
        assert_eq!(
            manifest.requeue.error_backoff_max,
            Some(limits::MAX_DURATION)
        );
        assert_eq!(manifest.external[0].interval, Some(limits::MAX_DURATION));
        assert_eq!(manifest.debounce, Some(Duration::ZERO));
    }

    #[test]
    fn sub_unit_remainders_are_refused_not_dropped() {
        let cases = [
            (
                "requeue: { after: 1s 999ms }",
                "requeue.after",
                "write 1s or 2s",
            ),
            (
                "external: [{ name: r, interval: 90s 1ms }]",
                "external[0].interval",
                "write 1m 30s or 1m 31s",
            ),
            (
                "requeue: { errorBackoff: 1ms 500us }",
                "requeue.errorBackoff",
                "write 1ms or 2ms",
            ),
            ("debounce: 10ms 1us", "debounce", "write 10ms or 11ms"),
        ];
        for (text, field, hint) in cases {
            let err = error(text);
            assert!(
                err.contains(&format!("field `{field}`")) && err.contains(hint),
                "{text}: {err}"
            );
        }
        let whole = Manifest::parse(
            "op.yaml",
            "requeue: { after: 1m 30s, errorBackoff: 1s 5ms }",
        )
        .unwrap();
        assert_eq!(whole.requeue.after, Some(Duration::from_secs(90)));
        assert_eq!(
            whole.requeue.error_backoff,
            Some(Duration::from_millis(1005))
        );
    }

    #[test]
    fn dependency_versions_and_features_are_checked_as_cargo_reads_them() {
        let cases = [
            (
                "dependencies: { a: 'not a version' }",
                "dependencies.a",
                "not a cargo version",
            ),
            (
                "dependencies: { a: '' }",
                "dependencies.a",
                "not a cargo version",
            ),
            (
                "devDependencies: { a: { version: '1', features: ['x y'] } }",
                "devDependencies.a",
                "not a feature name",
            ),
            (
                "dependencies: { a: { version: '1', features: ['\"]'] } }",
                "dependencies.a",
                "not a feature name",
            ),
            (
                "dependencies: { a: { version: '=1.2.3.4' } }",
                "dependencies.a",
                "not a cargo version",
            ),
        ];
        for (text, field, reason) in cases {
            let err = error(text);
            assert!(
                err.contains(&format!("field `{field}`")) && err.contains(reason),
                "{text}: {err}"
            );
        }
        let fine = "dependencies: { a: '1', b: '>=1.2, <2', c: { version: '^0.4', features: \
                    [derive, serde/std, v1_2, c++] }, d: '*' }";
        Manifest::parse("op.yaml", fine).unwrap();
    }

    #[test]
    fn dependencies_are_a_version_or_a_detailed_mapping() {
        let manifest = Manifest::parse(
            "op.yaml",
            "dependencies:\n  a: '1'\n  b: { version: '2', features: [x], default-features: false }\n\
             devDependencies: { c: { version: '3' } }\n",
        )
        .unwrap();
        assert_eq!(
            manifest.dependencies["a"],
            DependencySpec::Version("1".into())
        );
        assert_eq!(
            manifest.dependencies["b"],
            DependencySpec::Detailed {
                version: "2".into(),
                features: vec!["x".into()],
                default_features: Some(false),
            }
        );
        assert_eq!(
            manifest.dev_dependencies["c"],
            DependencySpec::Detailed {
                version: "3".into(),
                features: Vec::new(),
                default_features: None,
            }
        );
    }

    #[test]
    fn unknown_dependency_keys_are_refused_naming_the_supported_ones() {
        let cases = [
            (
                "dependencies:\n  foo: { version: '1', git: x }\n",
                "dependencies.foo.git",
                "op.yaml:2:",
            ),
            (
                "dependencies:\n  foo: { path: ../foo }\n",
                "dependencies.foo.path",
                "op.yaml:2:",
            ),
            (
                "devDependencies: { bar: { version: '1', featurs: [a] } }",
                "devDependencies.bar.featurs",
                "op.yaml:1:",
            ),
        ];
        for (text, field, at) in cases {
            let err = error(text);
            assert!(
                err.starts_with(at)
                    && err.contains(&format!("field `{field}`"))
                    && err.contains("version, features and default-features"),
                "{text}: {err}"
            );
        }
        let err = error("dependencies: { foo: { features: [a] } }");
        assert!(
            err.contains("field `dependencies.foo`") && err.contains("needs a `version`"),
            "{err}"
        );
        let err = error("dependencies: { foo: 1 }");
        assert!(
            err.contains("field `dependencies.foo`") && err.contains("in quotes"),
            "{err}"
        );
    }

    #[test]
    fn a_derived_group_the_api_server_would_refuse_is_refused() {
        for group in ["example", "widgets.k8s.io", "kubernetes.io"] {
            let text = format!("primary: {{ derive: {{ kind: W, group: {group}, version: v1 }} }}");
            let err = error(&text);
            assert!(
                err.starts_with("op.yaml: field `primary.derive.group`")
                    && err.contains("refused by the API server"),
                "{err}"
            );
        }
        Manifest::parse(
            "op.yaml",
            "primary: { derive: { kind: W, group: example.com, version: v1 } }",
        )
        .unwrap();
    }

    #[test]
    fn a_sample_must_be_a_mapping() {
        let manifest = Manifest::parse("op.yaml", "sample: { spec: { url: x } }").unwrap();
        assert_eq!(
            manifest.sample,
            Some(serde_json::json!({"spec": {"url": "x"}}))
        );
        assert_eq!(
            Manifest::parse("op.yaml", "sample: ~").unwrap().sample,
            None
        );
        for (text, found) in [("sample: [a]", "a list"), ("sample: text", "a string")] {
            let err = error(text);
            assert!(
                err.starts_with("op.yaml:1:")
                    && err.contains("field `sample`")
                    && err.contains("must be a mapping")
                    && err.contains(found),
                "{err}"
            );
        }
    }

    #[test]
    fn a_manifest_over_the_size_cap_is_refused_without_reading_it_all() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("operator.yaml");
        std::fs::write(&big, "#".repeat(MAX_MANIFEST_BYTES as usize + 1)).unwrap();
        let err = Manifest::load(&big).unwrap_err();
        assert!(matches!(err, Error::Limit { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(&big.display().to_string()) && text.contains("1 MiB limit"),
            "{text}"
        );
        // An endless file, directly or through a link in the crate, is never opened.
        let link = dir.path().join("linked.yaml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        for path in [Path::new("/dev/zero"), &link] {
            let err = Manifest::load(path).unwrap_err().to_string();
            assert!(
                err.contains(&path.display().to_string()) && err.contains("not a plain file"),
                "{err}"
            );
        }
    }

    #[test]
    fn yaml_caps_apply_to_manifests() {
        let depth = limits::MAX_YAML_DEPTH;
        let deep = format!("sample: {}{}", "{a: ".repeat(depth), "}".repeat(depth));
        let err = Manifest::parse("op.yaml", &deep).unwrap_err();
        assert!(matches!(err, Error::Limit { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.starts_with("op.yaml: ") && text.contains("depth cap"),
            "{text}"
        );
    }

    #[test]
    fn a_runtime_path_is_relative_and_named_with_its_field_when_refused() {
        let manifest = Manifest::parse("op.yaml", "runtime: { path: ../../runtime }\n").unwrap();
        assert_eq!(
            manifest.runtime.map(|r| r.path.to_string()).as_deref(),
            Some("../../runtime")
        );
        for (text, expected) in [
            ("runtime: { path: /opt/runtime }\n", "not a relative path"),
            (
                "runtime: { path: \"run\\0time\" }\n",
                "a control or hidden one",
            ),
            ("runtime: { path: '' }\n", "empty path"),
            ("runtime: { path: x, git: y }\n", "unknown field"),
        ] {
            let err = error(text);
            assert!(
                err.contains("field `runtime") && err.contains(expected),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn a_manifest_round_trips_through_its_serde_derives() {
        let manifest = Manifest::parse(
            "op.yaml",
            r#"
primary: { crd: crd.yaml }
watches: [{ kind: Secret, map: { annotation: example.com/owner } }]
external: [{ name: registry, interval: 5m }]
requeue: { after: 1h, errorBackoff: 10ms }
dependencies: { a: '1', b: { version: '2', features: [x] } }
sample: { spec: { url: x } }
runtime: { path: ../../runtime }
"#,
        )
        .unwrap();
        let yaml = serde_saphyr::to_string(&manifest).unwrap();
        assert_eq!(
            Manifest::parse("round.yaml", &yaml).unwrap(),
            manifest,
            "{yaml}"
        );
        let json = serde_json::to_value(&manifest).unwrap();
        assert_eq!(serde_json::from_value::<Manifest>(json).unwrap(), manifest);
    }
}
