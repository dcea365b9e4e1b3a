//! The generated crate's dependencies: the generator's own, pinned in one place so they are
//! bumped together, and the extra crates a manifest asks for, written by the TOML serializer.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Archetype;
use crate::{
    error::Result,
    manifest::{DependencySpec, Manifest},
    naming,
    text::{Text, TomlValue},
    vendor::{RUNTIME_CRATE, RuntimeSource},
};

/// One `name = spec` line of Cargo.toml.
#[derive(Debug, Clone, Serialize)]
pub struct Dependency {
    /// A checked crate name; printed `.plain`.
    pub name: Text,
    pub spec: TomlValue,
}

/// Dependencies of every generated crate. Versions are explicit because the crate must build
/// on its own outside this workspace. Operators use the newest kube (5) and k8s-openapi
/// (0.29, `latest`), the versions operator-gen-runtime pins; kopium's kube 4 / k8s-openapi
/// 0.28 stay inside the generator. Each k8s-openapi version gets exactly one version feature
/// in the workspace, and the binary (this crate) is what enables it.
const BASE: &[(&str, &str)] = &[
    // clap without its default `color`: an operator's flags are read from a container's
    // environment and its errors land in a log, where color is off anyway; leaving it out
    // leaves six crates out of the build.
    (
        "clap",
        r#"{ version = "4.6.7", default-features = false, features = ["derive", "env", "error-context", "help", "std", "suggestions", "usage"] }"#,
    ),
    ("futures", r#""0.3.31""#),
    ("http", r#""1.3.1""#),
    (
        "k8s-openapi",
        r#"{ version = "0.29.0", features = ["latest"] }"#,
    ),
    (
        "kube",
        r#"{ version = "5.0.0", default-features = false, features = ["client", "derive", "ring", "runtime", "rustls-tls", "unstable-runtime"] }"#,
    ),
    ("serde", r#"{ version = "1.0.228", features = ["derive"] }"#),
    ("serde_json", r#""1.0.145""#),
    ("thiserror", r#""2.0.17""#),
    (
        "tokio",
        r#"{ version = "1.48.0", features = ["macros", "rt-multi-thread", "signal", "sync", "time"] }"#,
    ),
    ("tracing", r#""0.1.41""#),
];

/// Dev-dependencies of every generated crate, besides the runtime's `test-util` feature (the
/// mock API server, the offline client, the assertions the shipped tests make and the cluster
/// test's log tail, [`RUNTIME_DEV_FEATURES`]): tower (`ServiceExt`, to call routes), tower-test and tracing-subscriber for the
/// crate's own tests, which crates generated before the runtime held these pieces may use, so
/// regenerating keeps them.
const BASE_DEV: &[(&str, &str)] = &[
    (
        "tower",
        r#"{ version = "0.5.2", default-features = false, features = ["util"] }"#,
    ),
    // Not used by generated code: a crate's own tests may build a mock API on it, as
    // example-operator's do.
    ("tower-test", r#""0.4.0""#),
    (
        "tracing-subscriber",
        r#"{ version = "0.3.20", features = ["env-filter", "fmt"] }"#,
    ),
];

/// A derived CRD comes from Rust types: schemars for the schema (with k8s-openapi's schemas
/// for Condition), serde-saphyr for the crdgen binary that prints it.
const DERIVED: &[(&str, &str)] = &[
    (
        "k8s-openapi",
        r#"{ version = "0.29.0", features = ["latest", "schemars"] }"#,
    ),
    ("schemars", r#""1.2.0""#),
    ("serde-saphyr", r#""2.1.1""#),
];

/// Webhooks, admission or conversion: kube's AdmissionReview types, axum's JSON for the
/// routes, and the runtime's webhooks feature ([`RUNTIME_WEBHOOK_FEATURES`]).
const WEBHOOKS: &[(&str, &str)] = &[
    (
        "axum",
        r#"{ version = "0.8.9", default-features = false, features = ["http1", "json", "tokio"] }"#,
    ),
    (
        "kube",
        r#"{ version = "5.0.0", default-features = false, features = ["admission", "client", "derive", "ring", "runtime", "rustls-tls", "unstable-runtime"] }"#,
    ),
];

/// The runtime's feature with webhooks: its HTTPS server on rustls with ring (the provider
/// kube's client already uses) and the certificates, rcgen for the self-managed one.
const RUNTIME_WEBHOOKS: &str = "webhooks";

/// The runtime's feature of an operator generated with `sharding: true`: the ring, the
/// sharder and the `--sharding` flag, which no other operator builds.
const RUNTIME_SHARDING: &str = "sharding";

/// The runtime's features in the dev-dependencies: its testing kit.
const RUNTIME_DEV_FEATURES: &[&str] = &["test-util"];

const CHRONO: (&str, &str) = (
    "chrono",
    r#"{ version = "0.4.42", default-features = false, features = ["serde"] }"#,
);

/// The `[dependencies]` and `[dev-dependencies]` tables, sorted by name.
pub(super) fn tables(
    manifest: &Manifest,
    crate_name: &str,
    archetype: Archetype,
    uses_chrono: bool,
    webhooks: bool,
    bad: &dyn Fn(&str, String) -> crate::Error,
) -> Result<(Vec<Dependency>, Vec<Dependency>)> {
    let constant = |table: &[(&'static str, &'static str)]| -> Vec<(&'static str, TomlValue)> {
        table
            .iter()
            .map(|(name, spec)| (*name, TomlValue::constant(spec)))
            .collect()
    };
    let mut base = constant(BASE);
    let mut base_dev = constant(BASE_DEV);
    if uses_chrono {
        base.extend(constant(&[CHRONO]));
    }
    if archetype == Archetype::Derived {
        replace(&mut base, constant(DERIVED));
    }
    if webhooks {
        replace(&mut base, constant(WEBHOOKS));
    }
    // The runtime by path, never by version alone: the name is not claimed on crates.io
    // (`crate::vendor`).
    let runtime = RuntimeSource::of(manifest);
    let features: Vec<&str> = [
        (manifest.sharding, RUNTIME_SHARDING),
        (webhooks, RUNTIME_WEBHOOKS),
    ]
    .into_iter()
    .filter_map(|(on, feature)| on.then_some(feature))
    .collect();
    base.push((RUNTIME_CRATE, runtime.dependency(&features)));
    base_dev.push((RUNTIME_CRATE, runtime.dependency(RUNTIME_DEV_FEATURES)));
    let all_names: Vec<&str> = base
        .iter()
        .chain(&base_dev)
        .map(|(name, _)| *name)
        .chain(manifest.dependencies.keys().map(String::as_str))
        .chain(manifest.dev_dependencies.keys().map(String::as_str))
        .collect();
    if let Some(taken) = all_names.iter().find(|name| same_crate(name, crate_name)) {
        return Err(bad(
            "name",
            format!(
                "{crate_name:?} is also the name of a dependency ({taken}), and a crate cannot depend \
                 on its own name; choose another `name:`"
            ),
        ));
    }
    // Cargo merges a dev-dependency into the dependency of the same name when tests build,
    // so one would change the version or features the generated code is tested with.
    if let Some(name) = manifest
        .dev_dependencies
        .keys()
        .find(|name| base.iter().any(|(needed, _)| same_crate(needed, name)))
    {
        return Err(bad(
            &format!("devDependencies.{name}"),
            format!(
                "{name} is a dependency of the generated code, which a dev-dependency would change in tests; remove it here"
            ),
        ));
    }
    // Likewise the other way: the generated tests are built with the dev-dependency merged in.
    if let Some(name) = manifest
        .dependencies
        .keys()
        .find(|name| base_dev.iter().any(|(tested, _)| same_crate(tested, name)))
    {
        return Err(bad(
            &format!("dependencies.{name}"),
            format!(
                "{name} is a dev-dependency of the generated tests, whose version and features this one would change; remove it here"
            ),
        ));
    }
    let dependencies = table(&base, &manifest.dependencies, "dependencies", bad)?;
    let dev = table(
        &base_dev,
        &manifest.dev_dependencies,
        "devDependencies",
        bad,
    )?;
    Ok((dependencies, dev))
}

/// Adds `extra` to `base`, in place of any entry of the same name.
fn replace(base: &mut Vec<(&'static str, TomlValue)>, extra: Vec<(&'static str, TomlValue)>) {
    base.retain(|(name, _)| extra.iter().all(|(replacing, _)| replacing != name));
    base.extend(extra);
}

/// Whether two crate names name the same library (cargo treats `-` and `_` alike).
fn same_crate(a: &str, b: &str) -> bool {
    a.replace('-', "_")
        .eq_ignore_ascii_case(&b.replace('-', "_"))
}

/// Merges a manifest's extra dependencies into the generator's, sorted by name. A manifest
/// entry for a crate the generated code needs is refused, because changing its version or
/// features could break generated code in ways regeneration cannot see.
fn table(
    base: &[(&'static str, TomlValue)],
    extra: &BTreeMap<String, DependencySpec>,
    field: &str,
    bad: &dyn Fn(&str, String) -> crate::Error,
) -> Result<Vec<Dependency>> {
    let mut table: Vec<Dependency> = base
        .iter()
        .map(|(name, spec)| Dependency {
            name: Text::from(*name),
            spec: spec.clone(),
        })
        .collect();
    for (name, spec) in extra {
        let at = format!("{field}.{name}");
        naming::check_dependency_name(name).map_err(|reason| bad(&at, reason))?;
        if base
            .iter()
            .any(|(base_name, _)| same_crate(base_name, name))
        {
            return Err(bad(
                &at,
                format!("{name} is already a dependency of the generated code; remove it here"),
            ));
        }
        table.push(Dependency {
            name: Text::new(name.clone()),
            spec: TomlValue::new(&toml_value(spec)),
        });
    }
    table.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(table)
}

/// A dependency spec as a TOML value, for the TOML serializer to write.
fn toml_value(spec: &DependencySpec) -> toml::Value {
    match spec {
        DependencySpec::Version(version) => toml::Value::String(version.clone()),
        DependencySpec::Detailed {
            version,
            features,
            default_features,
        } => {
            let mut table = toml::Table::new();
            table.insert("version".to_owned(), toml::Value::String(version.clone()));
            if let Some(default_features) = default_features {
                table.insert(
                    "default-features".to_owned(),
                    toml::Value::Boolean(*default_features),
                );
            }
            if !features.is_empty() {
                let features = features.iter().cloned().map(toml::Value::String).collect();
                table.insert("features".to_owned(), toml::Value::Array(features));
            }
            toml::Value::Table(table)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec of `name` in a table of [`tables`].
    fn spec_of<'a>(table: &'a [Dependency], name: &str) -> &'a str {
        table
            .iter()
            .find(|d| d.name.raw() == name)
            .map(|d| d.spec.as_str())
            .unwrap_or_else(|| panic!("{name} is a dependency"))
    }

    fn runtime_specs(manifest: &Manifest, webhooks: bool) -> (String, String) {
        let bad = |field: &str, reason: String| crate::Error::Manifest {
            location: field.to_owned(),
            reason,
        };
        let (deps, dev) =
            tables(manifest, "op", Archetype::Builtin, false, webhooks, &bad).expect("the tables");
        (
            spec_of(&deps, RUNTIME_CRATE).to_owned(),
            spec_of(&dev, RUNTIME_CRATE).to_owned(),
        )
    }

    #[test]
    fn generated_crates_take_the_runtime_of_the_generators_version_by_path() {
        let version = env!("CARGO_PKG_VERSION");
        let (deps, dev) = runtime_specs(&Manifest::default(), false);
        assert_eq!(
            deps,
            format!("{{ path = \"vendor/operator-gen-runtime\", version = \"{version}\" }}")
        );
        assert_eq!(
            dev,
            format!(
                "{{ path = \"vendor/operator-gen-runtime\", version = \"{version}\", features = [\"test-util\"] }}"
            )
        );
        let shared = Manifest {
            runtime: Some(crate::manifest::Runtime {
                path: crate::vendor::RuntimePath::relative("../../runtime").unwrap(),
            }),
            ..Manifest::default()
        };
        let (deps, _) = runtime_specs(&shared, true);
        assert_eq!(
            deps,
            format!(
                "{{ path = \"../../runtime\", version = \"{version}\", features = [\"webhooks\"] }}"
            )
        );
    }

    #[test]
    fn only_a_sharded_operator_builds_the_runtimes_sharding() {
        let features = |manifest: &Manifest, webhooks| {
            let (deps, dev) = runtime_specs(manifest, webhooks);
            let features = |spec: &str| -> Vec<String> {
                let parsed: toml::Table = toml::from_str(&format!("spec = {spec}")).expect("TOML");
                let features = parsed["spec"]
                    .get("features")
                    .and_then(toml::Value::as_array);
                let names = features
                    .into_iter()
                    .flatten()
                    .filter_map(toml::Value::as_str);
                names.map(str::to_owned).collect()
            };
            (features(&deps), features(&dev))
        };
        let sharded = Manifest {
            sharding: true,
            ..Manifest::default()
        };
        assert_eq!(
            features(&Manifest::default(), false).0,
            Vec::<String>::new()
        );
        assert_eq!(features(&sharded, false).0, ["sharding"]);
        assert_eq!(features(&sharded, true).0, ["sharding", "webhooks"]);
        assert_eq!(
            features(&sharded, true).1,
            ["test-util"],
            "the tests add only their kit"
        );
    }

    /// The version in a spec: the string itself, or its `version` key.
    fn version(spec: &str) -> String {
        let parsed: toml::Table = toml::from_str(&format!("spec = {spec}")).expect("valid TOML");
        match &parsed["spec"] {
            toml::Value::String(version) => version.clone(),
            table => table["version"].as_str().expect("a version").to_owned(),
        }
    }

    /// DERIVED and WEBHOOKS restate a base crate to add features; a version bumped in BASE
    /// alone would build that crate twice, at two versions.
    #[test]
    fn a_crate_restated_for_features_keeps_the_base_version() {
        for (name, spec) in DERIVED.iter().chain(WEBHOOKS).chain(BASE_DEV) {
            if let Some((_, base)) = BASE.iter().find(|(base, _)| base == name) {
                assert_eq!(version(spec), version(base), "{name}");
                let features = |spec: &str| -> Vec<String> {
                    let parsed: toml::Table =
                        toml::from_str(&format!("spec = {spec}")).expect("TOML");
                    parsed["spec"]
                        .get("features")
                        .and_then(toml::Value::as_array)
                        .map(|f| {
                            f.iter()
                                .filter_map(|v| v.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default()
                };
                let kept = features(spec);
                for feature in features(base) {
                    assert!(kept.contains(&feature), "{name} drops the base's {feature}");
                }
            }
        }
    }
}
