//! `operator.yaml`: what the operator is about and how it relates to other objects.
//!
//! Parsing is strict: an unknown or misspelt field is an error naming its line and column,
//! because a silently ignored `watchs:` would produce an operator that quietly misses events.

use std::{path::Path, time::Duration};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The whole manifest. Every field is optional: an empty manifest is an operator with no
/// relations, reconciling on changes to the primary resource only.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    /// Crate (and binary) name; defaults to `<kind>-controller`.
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
    #[serde(default, with = "humantime_option")]
    pub debounce: Option<Duration>,
    /// Extra crates your reconcile code uses, merged into the generated Cargo.toml.
    #[serde(default)]
    pub dependencies: std::collections::BTreeMap<String, DependencySpec>,
    /// Extra crates your tests use.
    #[serde(default)]
    pub dev_dependencies: std::collections::BTreeMap<String, DependencySpec>,
    /// Fields written over the least object the CRD's schema allows, which the shipped tests
    /// and `cargo xtask e2e` create: values a schema cannot give, such as a string that must
    /// match a `pattern`.
    pub sample: Option<serde_json::Value>,
}

/// A dependency as in Cargo.toml: a version, or a version with features.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
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
    /// With `crd`: reconcile `DynamicObject`s described by the CRD instead of generated types.
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
    #[serde(with = "serde_yaml::with::singleton_map")]
    pub map: MapRule,
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
    #[serde(default, with = "humantime_option")]
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
    #[serde(default, with = "humantime_option")]
    pub after: Option<Duration>,
    /// First delay after an error; doubles per consecutive failure.
    #[serde(default, with = "humantime_option")]
    pub error_backoff: Option<Duration>,
    /// Cap on the error delay.
    #[serde(default, with = "humantime_option")]
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

impl Manifest {
    /// Reads and parses a manifest file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Manifest {
            location: path.display().to_string(),
            reason: format!("cannot read the manifest: {e}"),
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses manifest text; `origin` names it in errors.
    pub fn parse(origin: &str, text: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_yaml::from_str(text).map_err(|e| {
            let location = match e.location() {
                Some(at) => format!("{origin}:{}:{}", at.line(), at.column()),
                None => origin.to_owned(),
            };
            Error::Manifest {
                location,
                reason: format!("{e}; see the manifest reference in README.md"),
            }
        })
    }

    /// The predicates in force: the manifest's, or the generation+finalizers default that
    /// keeps a controller from reacting to its own status writes while still seeing deletes.
    pub fn predicates(&self) -> Vec<Predicate> {
        self.predicates
            .clone()
            .unwrap_or_else(|| vec![Predicate::Generation, Predicate::Finalizers])
    }
}

mod humantime_option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Option<Duration>, D::Error> {
        match Option::<String>::deserialize(de)? {
            None => Ok(None),
            Some(text) => humantime::parse_duration(&text).map(Some).map_err(|e| {
                serde::de::Error::custom(format!(
                    "invalid duration {text:?} ({e}); write it like 30s, 5m or 1h"
                ))
            }),
        }
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
}
