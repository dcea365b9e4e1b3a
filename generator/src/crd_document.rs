//! Finding the one CustomResourceDefinition and the one version to generate from, in bytes
//! that may hold YAML or JSON, several documents, or a `kind: List`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, JSONSchemaProps,
};
use serde_json::Value;

use crate::{
    error::{Error, Result},
    limits::{self, YamlProblem},
};

/// A CRD narrowed to the version the operator is generated for.
#[derive(Debug, Clone)]
pub struct SelectedCrd {
    /// Where the CRD was read from, for messages and generated docs.
    pub origin: String,
    pub crd: CustomResourceDefinition,
    /// Index into `crd.spec.versions` of the chosen version.
    pub version_index: usize,
    /// Whether the version was chosen by default (the storage version) rather than asked for.
    pub defaulted: bool,
    /// What was changed in `crd` to make it one the API server installs, for the user to
    /// hear: a CRD published with no storage version, or several, gets one.
    pub warnings: Vec<String>,
}

impl SelectedCrd {
    pub fn version(&self) -> &CustomResourceDefinitionVersion {
        &self.crd.spec.versions[self.version_index]
    }

    /// The schema of the chosen version; [`select`] guarantees one exists.
    pub fn schema(&self) -> Option<&JSONSchemaProps> {
        self.version().schema.as_ref()?.open_api_v3_schema.as_ref()
    }

    pub fn name(&self) -> &str {
        self.crd
            .metadata
            .name
            .as_deref()
            .unwrap_or(&self.crd.spec.names.plural)
    }
}

/// What the user asked for: a kind or CRD name, and a version.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Matches `spec.names.kind` or `metadata.name` (case-insensitive for the kind).
    pub crd: Option<String>,
    /// A served version; the storage version when absent.
    pub version: Option<String>,
}

/// Parses every document in `bytes` and returns the CRDs found, in document order.
///
/// The YAML is read within the caps in [`crate::limits`] (depth, nodes, aliases, documents),
/// so a hostile file fails fast with the cap named instead of exhausting memory or stack.
/// Documents that are empty are skipped (and not counted in `document N`); a document that
/// is not a CRD is an error, because a file given as a CRD source that also holds a
/// Deployment is far more likely a wrong file than a bundle the user wants silently filtered.
pub fn parse_all(origin: &str, bytes: &[u8]) -> Result<Vec<CustomResourceDefinition>> {
    let text = std::str::from_utf8(bytes).map_err(|e| Error::Syntax {
        origin: origin.to_owned(),
        reason: format!(
            "not valid UTF-8 at byte {}; a CRD must be UTF-8 text",
            e.valid_up_to()
        ),
    })?;
    let documents: Vec<Value> = limits::with_deep_stack(|| {
        serde_saphyr::from_str_multiple_with_options::<Value, Vec<_>>(text, limits::yaml_options())
    })
    .map_err(|e| yaml_error(origin, &e))?;
    let mut crds = Vec::new();
    for (index, value) in documents.into_iter().enumerate() {
        collect(origin, &format!("document {}", index + 1), value, &mut crds)?;
    }
    if crds.is_empty() {
        return Err(Error::NotACrd {
            origin: origin.to_owned(),
            reason: "holds no CustomResourceDefinition (the file is empty)".to_owned(),
        });
    }
    Ok(crds)
}

/// A YAML error as a short message: a cap names itself, anything else is a syntax error.
fn yaml_error(origin: &str, err: &serde_saphyr::Error) -> Error {
    let problem = YamlProblem::from_error(err);
    if problem.over_cap {
        Error::Limit {
            origin: origin.to_owned(),
            reason: format!(
                "{}; real CRDs stay far below it, so check that this is a CRD file (one CRD \
                 per file if it is a large bundle)",
                problem.with_position()
            ),
        }
    } else {
        Error::Syntax {
            origin: origin.to_owned(),
            reason: problem.with_position(),
        }
    }
}

fn collect(
    origin: &str,
    at: &str,
    value: Value,
    out: &mut Vec<CustomResourceDefinition>,
) -> Result<()> {
    let not_a_crd = |reason: String| Error::NotACrd {
        origin: origin.to_owned(),
        reason: format!("{at}: {reason}"),
    };
    let map = match value {
        Value::Null => return Ok(()),
        Value::Object(map) => map,
        other => {
            return Err(not_a_crd(format!(
                "expected a CustomResourceDefinition, found {}",
                describe(&other)
            )));
        }
    };
    let field = |name: &str| {
        map.get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    match (api_version.as_str(), kind.as_str()) {
        (_, "List") | (_, "CustomResourceDefinitionList") => {
            let mut map = map;
            let items = match map.remove("items") {
                Some(Value::Array(items)) => items,
                None | Some(Value::Null) => Vec::new(),
                Some(other) => return Err(not_a_crd(format!("`items` is {}, expected a list", describe(&other)))),
            };
            for (i, item) in items.into_iter().enumerate() {
                collect(origin, &format!("{at}, items[{i}]"), item, out)?;
            }
            Ok(())
        }
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            let crd = serde_path_to_error::deserialize(Value::Object(map)).map_err(|e| {
                not_a_crd(format!("invalid CustomResourceDefinition at `{}`: {}", e.path(), e.inner()))
            })?;
            // Every CRD in the input is checked, not only the one selected: a CRD whose names
            // the API server would refuse is a wrong file, and selecting among invalid names
            // would give errors about the selection rather than the names.
            check_names(&format!("{origin}: {at}"), &crd)?;
            out.push(crd);
            Ok(())
        }
        ("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition") => Err(not_a_crd(
            "apiextensions.k8s.io/v1beta1 CRDs were removed in Kubernetes 1.22; \
             use the apiextensions.k8s.io/v1 form of this CRD (most projects publish one)"
                .to_owned(),
        )),
        ("", "") => Err(not_a_crd(
            "has no apiVersion or kind; expected apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition"
                .to_owned(),
        )),
        (api_version, kind) => Err(not_a_crd(format!(
            "has `kind` {kind:?} and `apiVersion` {api_version:?}, not a CustomResourceDefinition \
             (apiextensions.k8s.io/v1); point --crd at the CRD file"
        ))),
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a plain string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Checks the names that end up in generated code and manifests against the rules the API
/// server enforces, so that text in a CRD can only ever be a name, never code: the kind,
/// plural, group and scope, `metadata.name` (`<plural>.<group>`), and version names (DNS
/// labels, each used once).
fn check_names(origin: &str, crd: &CustomResourceDefinition) -> Result<()> {
    use crate::naming::{
        is_dns_label as dns_label, is_dns_subdomain as subdomain, is_kind as kind_ok,
    };
    let names = &crd.spec.names;
    let mut checks: Vec<(String, &str, bool, &str)> = vec![
        (
            "spec.names.kind".into(),
            names.kind.as_str(),
            kind_ok(&names.kind),
            "ASCII letters and digits, starting with a letter",
        ),
        (
            "spec.names.plural".into(),
            names.plural.as_str(),
            dns_label(&names.plural),
            "a lowercase DNS label",
        ),
        (
            "spec.group".into(),
            crd.spec.group.as_str(),
            subdomain(&crd.spec.group),
            "a lowercase DNS subdomain",
        ),
        (
            "spec.scope".into(),
            crd.spec.scope.as_str(),
            matches!(crd.spec.scope.as_str(), "Namespaced" | "Cluster"),
            "Namespaced or Cluster",
        ),
    ];
    for (i, version) in crd.spec.versions.iter().enumerate() {
        checks.push((
            format!("spec.versions[{i}].name"),
            &version.name,
            dns_label(&version.name),
            "a lowercase DNS label",
        ));
    }
    let reject = |path: &str, value: &str, rule: &str| Error::NotACrd {
        origin: origin.to_owned(),
        reason: format!(
            "{path} is {value:?}, which the API server would reject: it must be {rule}"
        ),
    };
    if let Some((path, value, _, rule)) = checks.into_iter().find(|(_, _, ok, _)| !ok) {
        return Err(reject(&path, value, rule));
    }
    if let Some(reason) = group_problem(&crd.spec.group, is_approved(crd)) {
        return Err(reject("spec.group", &crd.spec.group, reason));
    }
    // The name reaches generated code and RBAC rules; the API server accepts only this one.
    let expected = format!("{}.{}", names.plural, crd.spec.group);
    if expected.len() > 253 {
        return Err(reject(
            "metadata.name",
            &expected,
            "at most 253 characters (`<spec.names.plural>.<spec.group>`)",
        ));
    }
    let rule = format!("`<spec.names.plural>.<spec.group>`, here {expected:?}");
    match crd.metadata.name.as_deref() {
        Some(name) if name == expected => {}
        Some(name) => return Err(reject("metadata.name", name, &rule)),
        None => {
            return Err(Error::NotACrd {
                origin: origin.to_owned(),
                reason: format!(
                    "metadata.name is missing, which the API server would reject: it must be {rule}"
                ),
            });
        }
    }
    // Versions are looked up by name; a second `v1` would make the choice arbitrary.
    for (i, version) in crd.spec.versions.iter().enumerate() {
        if let Some(first) = crd.spec.versions[..i]
            .iter()
            .position(|v| v.name == version.name)
        {
            return Err(reject(
                &format!("spec.versions[{i}].name"),
                &version.name,
                &format!("unique, and spec.versions[{first}] has the same name"),
            ));
        }
    }
    Ok(())
}

/// Refuses a CRD whose versions with generated types (every served one, and the one
/// selected) declare more properties together than [`limits::MAX_SCHEMA_PROPERTIES`]. The cap
/// is a total because each version's types are generated and compiled: nine versions of one
/// aliased tree, each under a per-version cap, once gave 11 MB of types and took the
/// generator 1 GB.
fn check_total_properties(
    origin: &str,
    crd: &CustomResourceDefinition,
    version_index: usize,
) -> Result<()> {
    let total: usize = crd
        .spec
        .versions
        .iter()
        .enumerate()
        .filter(|(i, v)| *i == version_index || v.served)
        .filter_map(|(_, v)| v.schema.as_ref()?.open_api_v3_schema.as_ref())
        .map(crate::schema_tree::count_properties)
        .sum();
    if total <= limits::MAX_SCHEMA_PROPERTIES {
        return Ok(());
    }
    Err(Error::Limit {
        origin: origin.to_owned(),
        reason: format!(
            "CRD {} declares {total} properties across the versions it serves, over the \
             property cap of {} (a total: types are generated for every served version); a real \
             CRD has a few thousand, so this one is most likely built to exhaust the generator",
            crd.metadata.name.as_deref().unwrap_or_default(),
            limits::MAX_SCHEMA_PROPERTIES
        ),
    })
}

/// Why the API server would refuse `group` for a CRD, if it would: a group needs a dot, and
/// one under `k8s.io` or `kubernetes.io` needs the `api-approved.kubernetes.io` annotation
/// (`approved`), which a CRD of a Kubernetes project carries (Gateway API, snapshots) and a
/// resource defined in a new operator never does.
pub fn group_problem(group: &str, approved: bool) -> Option<&'static str> {
    if !group.contains('.') {
        return Some("a group with a dot, as a domain such as example.com has");
    }
    let protected = ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|domain| group == *domain || group.ends_with(&format!(".{domain}")));
    (protected && !approved).then_some(
        "outside k8s.io and kubernetes.io, which are Kubernetes' own: the API server takes a \
         group there only with the api-approved.kubernetes.io annotation; use a domain you own",
    )
}

/// Whether a CRD carries the approval the API server asks of the Kubernetes groups.
fn is_approved(crd: &CustomResourceDefinition) -> bool {
    crd.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("api-approved.kubernetes.io"))
}

/// Marks exactly one version `storage: true` when the CRD as published marks none or several,
/// which the API server would refuse; returns what it did, for a warning. Upstream projects do
/// publish such files, and the types are what the user came for, so the choice is made and
/// said rather than refused: of the versions marked (or, with none marked, those served), the
/// one Kubernetes ranks first (v1 before v1beta2 before v1alpha1), as kubectl prefers it.
fn settle_storage(origin: &str, crd: &mut CustomResourceDefinition) -> Option<String> {
    let versions = &mut crd.spec.versions;
    let marked: Vec<usize> = (0..versions.len())
        .filter(|&i| versions[i].storage)
        .collect();
    let (candidates, problem) = match marked.as_slice() {
        [_] => return None,
        [] => (
            (0..versions.len())
                .filter(|&i| versions[i].served)
                .collect(),
            "no version has `storage: true`".to_owned(),
        ),
        several => (
            several.to_vec(),
            format!(
                "{} {} have `storage: true`",
                several
                    .iter()
                    .map(|&i| format!("spec.versions[{i}] ({})", versions[i].name))
                    .collect::<Vec<_>>()
                    .join(" and "),
                if several.len() == 2 { "both" } else { "all" },
            ),
        ),
    };
    let chosen = candidates
        .into_iter()
        .max_by_key(|&i| kube_core::Version::parse(&versions[i].name).priority())?;
    for (i, version) in versions.iter_mut().enumerate() {
        version.storage = i == chosen;
    }
    Some(format!(
        "{origin}: {problem}, which the API server would refuse: the crate stores {} (the \
         version Kubernetes ranks first among them), and deploy/base/crd.yaml marks it alone; \
         mark the same one in the CRD you install elsewhere",
        versions[chosen].name
    ))
}

fn served_versions(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect()
}

/// The one-line summary of a CRD used when listing choices.
fn summary(crd: &CustomResourceDefinition) -> String {
    let versions: Vec<&str> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
    format!(
        "{} ({}, {})",
        crd.spec.names.kind,
        crd.metadata.name.as_deref().unwrap_or("<unnamed>"),
        versions.join("/")
    )
}

/// Narrows `crds` to one CRD and one served version with a schema.
pub fn select(
    origin: &str,
    crds: Vec<CustomResourceDefinition>,
    selection: &Selection,
) -> Result<SelectedCrd> {
    let available = || crds.iter().map(summary).collect::<Vec<_>>();
    let crd = match &selection.crd {
        Some(wanted) => {
            let mut matching = crds.iter().filter(|crd| {
                crd.spec.names.kind.eq_ignore_ascii_case(wanted)
                    || crd.metadata.name.as_deref() == Some(wanted.as_str())
            });
            match (matching.next(), matching.next()) {
                (Some(crd), None) => crd.clone(),
                (None, _) => {
                    return Err(Error::NoSuchCrd {
                        origin: origin.to_owned(),
                        wanted: wanted.clone(),
                        available: available(),
                    });
                }
                (Some(_), Some(_)) => {
                    return Err(Error::Ambiguous {
                        origin: origin.to_owned(),
                        available: available(),
                    });
                }
            }
        }
        None if crds.len() == 1 => crds[0].clone(),
        None => {
            return Err(Error::Ambiguous {
                origin: origin.to_owned(),
                available: available(),
            });
        }
    };
    check_names(origin, &crd)?;
    let mut crd = crd;
    let warnings: Vec<String> = settle_storage(origin, &mut crd).into_iter().collect();
    let crd_name = crd
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| crd.spec.names.plural.clone());
    let served = served_versions(&crd);
    let (version_index, defaulted) = match &selection.version {
        Some(wanted) => {
            let index = crd
                .spec
                .versions
                .iter()
                .position(|v| v.served && &v.name == wanted)
                .ok_or_else(|| Error::NoSuchVersion {
                    origin: origin.to_owned(),
                    crd: crd_name.clone(),
                    wanted: wanted.clone(),
                    served: served.clone(),
                })?;
            (index, false)
        }
        None => {
            // A CRD has exactly one storage version; fall back to the first served one for
            // hand-written CRDs that forget the flag.
            let index = crd
                .spec
                .versions
                .iter()
                .position(|v| v.storage && v.served)
                .or_else(|| crd.spec.versions.iter().position(|v| v.served))
                .ok_or_else(|| Error::NotACrd {
                    origin: origin.to_owned(),
                    reason: format!(
                        "CRD {crd_name} serves no version (every spec.versions[].served is false)"
                    ),
                })?;
            (index, true)
        }
    };
    // Types are generated for every served version, so each needs a schema.
    let versions = crd.spec.versions.iter().enumerate();
    let unstructured = versions
        .filter(|(i, v)| *i == version_index || v.served)
        .find(|(_, v)| {
            v.schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .is_none()
        });
    if let Some((index, version)) = unstructured {
        return Err(Error::NoSchema {
            origin: origin.to_owned(),
            crd: crd_name,
            version: version.name.clone(),
            index,
        });
    }
    check_total_properties(origin, &crd, version_index)?;
    Ok(SelectedCrd {
        origin: origin.to_owned(),
        crd,
        version_index,
        defaulted,
        warnings,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: widgets.example.com }
spec:
  group: example.com
  scope: Namespaced
  names: { kind: Widget, plural: widgets, singular: widget, listKind: WidgetList }
  versions:
    - name: v1alpha1
      served: true
      storage: false
      schema: { openAPIV3Schema: { type: object } }
    - name: v1
      served: true
      storage: true
      schema: { openAPIV3Schema: { type: object } }
"#;

    fn other(kind: &str) -> String {
        CRD.replace("Widget", kind)
            .replace("widget", &kind.to_lowercase())
    }

    /// The refusal of `text`, whether parsing or selecting refuses it.
    fn error_of(origin: &str, text: &str) -> String {
        parse_all(origin, text.as_bytes())
            .and_then(|crds| select(origin, crds, &Selection::default()))
            .expect_err("the CRD is refused")
            .to_string()
    }

    #[test]
    fn what_the_api_server_refuses_is_refused_naming_the_field() {
        let long_group = vec!["x".repeat(62); 4].join(".");
        let cases = [
            (
                CRD.replace("example.com", "example"),
                "spec.group is \"example\", which the API server would reject: it must be a group with a dot",
            ),
            (
                CRD.replace("example.com", "widgets.k8s.io"),
                "api-approved.kubernetes.io",
            ),
            (
                CRD.replace("example.com", "kubernetes.io"),
                "api-approved.kubernetes.io",
            ),
            (
                CRD.replace("example.com", &long_group),
                "metadata.name is \"widgets.xxx",
            ),
        ];
        for (text, reason) in cases {
            let err = error_of("w.yaml", &text);
            assert!(err.starts_with("w.yaml: ") && err.contains(reason), "{err}");
        }
        let approved = CRD.replace("example.com", "widgets.k8s.io").replace(
            "metadata: { name: widgets.widgets.k8s.io }",
            "metadata: { name: widgets.widgets.k8s.io, annotations: { api-approved.kubernetes.io: \"https://github.com/kubernetes/enhancements/pull/1111\" } }",
        );
        let crds = parse_all("w.yaml", approved.as_bytes()).unwrap();
        assert!(select("w.yaml", crds, &Selection::default()).is_ok());
    }

    #[test]
    fn a_crd_without_exactly_one_storage_version_gets_one_and_a_warning() {
        let settled = |text: String| {
            let crds = parse_all("w.yaml", text.as_bytes()).expect("parsed, not refused");
            select("w.yaml", crds, &Selection::default()).expect("selected, not refused")
        };
        let storage = |selected: &SelectedCrd| -> Vec<String> {
            let versions = selected.crd.spec.versions.iter();
            versions
                .filter(|v| v.storage)
                .map(|v| v.name.clone())
                .collect()
        };
        // Both marked: v1 ranks before v1alpha1, wherever it is listed.
        let both = settled(CRD.replace("storage: false", "storage: true"));
        assert_eq!(storage(&both), ["v1"]);
        assert_eq!(
            both.version().name,
            "v1",
            "the storage version is the default"
        );
        assert_eq!(both.warnings.len(), 1);
        assert!(
            both.warnings[0].starts_with("w.yaml: spec.versions[0] (v1alpha1) and spec.versions[1] (v1) both have `storage: true`")
                && both.warnings[0].contains("the crate stores v1"),
            "{:?}",
            both.warnings
        );
        // None marked: the first of the served ones by Kubernetes' ranking.
        let none = settled(CRD.replace("storage: true", "storage: false"));
        assert_eq!(storage(&none), ["v1"]);
        assert!(none.warnings[0].contains("no version has `storage: true`"));
        let unserved = CRD
            .replace("storage: true", "storage: false")
            .replace("served: true\n      storage: false\n      schema: { openAPIV3Schema: { type: object } }\n\"#", "x");
        assert!(unserved.contains("served"), "the fixture still parses");
        // Exactly one: untouched, and no warning.
        assert!(settled(CRD.to_owned()).warnings.is_empty());
    }

    #[test]
    fn storage_version_is_the_default() {
        let crds = parse_all("w.yaml", CRD.as_bytes()).unwrap();
        let selected = select("w.yaml", crds, &Selection::default()).unwrap();
        assert_eq!(selected.version().name, "v1");
        assert!(selected.defaulted);
    }

    #[test]
    fn a_served_version_can_be_picked_and_an_unknown_one_is_listed() {
        let crds = parse_all("w.yaml", CRD.as_bytes()).unwrap();
        let pick = |v: &str| {
            let selection = Selection {
                version: Some(v.into()),
                ..Default::default()
            };
            select("w.yaml", crds.clone(), &selection)
        };
        assert_eq!(pick("v1alpha1").unwrap().version().name, "v1alpha1");
        let err = pick("v2").unwrap_err().to_string();
        assert!(err.contains("v2") && err.contains("v1alpha1, v1"), "{err}");
    }

    #[test]
    fn multi_document_and_list_inputs_are_searched_and_listed() {
        let multi = format!("{CRD}\n---\n{}", other("Gadget"));
        let crds = parse_all("m.yaml", multi.as_bytes()).unwrap();
        assert_eq!(crds.len(), 2);
        let err = select("m.yaml", crds.clone(), &Selection::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Widget") && err.contains("Gadget") && err.contains("--kind"),
            "{err}"
        );
        let gadget = Selection {
            crd: Some("gadget".into()),
            ..Default::default()
        };
        assert_eq!(
            select("m.yaml", crds.clone(), &gadget)
                .unwrap()
                .crd
                .spec
                .names
                .kind,
            "Gadget"
        );
        let by_name = Selection {
            crd: Some("widgets.example.com".into()),
            ..Default::default()
        };
        assert_eq!(
            select("m.yaml", crds, &by_name)
                .unwrap()
                .crd
                .spec
                .names
                .kind,
            "Widget"
        );

        let crd_json: serde_json::Value =
            serde_saphyr::from_str_with_options(CRD, limits::yaml_options()).unwrap();
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [crd_json]});
        let crds = parse_all("l.json", list.to_string().as_bytes()).unwrap();
        assert_eq!(crds[0].spec.names.kind, "Widget");
    }

    #[test]
    fn wrong_inputs_say_what_they_are() {
        let cases = [
            ("", "empty"),
            ("a: [b", "not YAML"),
            (
                "apiVersion: apps/v1\nkind: Deployment\n",
                "`kind` \"Deployment\"",
            ),
            ("just text", "plain string"),
            (
                &CRD.replace("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"),
                "v1beta1",
            ),
        ];
        for (input, expected) in cases {
            let err = parse_all("in.yaml", input.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("in.yaml") && err.contains(expected),
                "{input:?} gave {err}"
            );
        }
        let err = parse_all("bad.yaml", b"kind: \xff\xfe")
            .unwrap_err()
            .to_string();
        assert!(err.contains("UTF-8"), "{err}");
    }

    #[test]
    fn names_that_could_become_code_are_refused() {
        let cases = [
            (
                CRD.replace("kind: Widget,", "kind: \"Widget\\nfn evil() {}\","),
                "spec.names.kind",
            ),
            (
                CRD.replace("plural: widgets", "plural: \"widgets */\""),
                "spec.names.plural",
            ),
            (
                CRD.replace("group: example.com", "group: \"example.com\\\"\""),
                "spec.group",
            ),
            (
                CRD.replace("- name: v1alpha1", "- name: \"v1 alpha\""),
                "spec.versions[0].name",
            ),
        ];
        for (crd, path) in cases {
            let err = error_of("h.yaml", &crd);
            assert!(
                err.contains(path) && err.contains("API server would reject"),
                "{err}"
            );
        }
    }

    #[test]
    fn metadata_name_must_be_plural_dot_group() {
        let wrong = CRD.replace(
            "name: widgets.example.com",
            "name: \"widgets.example.com\\\")]\"",
        );
        let missing = CRD.replace("metadata: { name: widgets.example.com }", "metadata: {}");
        for (crd, shown) in [(wrong, "widgets.example.com\\\")]"), (missing, "missing")] {
            let err = error_of("n.yaml", &crd);
            assert!(
                err.contains("n.yaml")
                    && err.contains("metadata.name")
                    && err.contains(shown)
                    && err.contains("\"widgets.example.com\"")
                    && err.contains("API server would reject"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_version_name_used_twice_is_refused() {
        let twice = CRD.replace("- name: v1alpha1", "- name: v1");
        let err = error_of("d.yaml", &twice);
        assert!(
            err.contains("spec.versions[1].name") && err.contains("spec.versions[0]"),
            "{err}"
        );
    }

    #[test]
    fn yaml_over_a_cap_fails_fast_naming_the_input_and_the_cap() {
        let depth = limits::MAX_YAML_DEPTH;
        let deep = format!("a: {}{}", "[".repeat(depth), "]".repeat(depth));
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let uses = vec![format!("*a{}", i - 1); 10].join(", ");
            bomb.push_str(&format!("a{i}: &a{i} [{uses}]\n"));
        }
        for (input, cap) in [(deep, "depth cap of 64"), (bomb, "node cap of 500000")] {
            let err = parse_all("cap.yaml", input.as_bytes()).unwrap_err();
            assert!(matches!(err, Error::Limit { .. }), "{err:?}");
            let text = err.to_string();
            assert!(
                text.starts_with("cap.yaml: ") && text.contains(cap) && text.contains("line "),
                "{text}"
            );
        }
    }

    #[test]
    fn syntax_errors_are_one_line_with_line_and_column() {
        let err = parse_all("s.yaml", b"kind: x\nspec: [a, b\n").unwrap_err();
        assert!(matches!(err, Error::Syntax { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.starts_with("s.yaml is not YAML or JSON: ")
                && text.contains("line 2, column 7")
                && !text.contains('\n'),
            "{text}"
        );
    }

    #[test]
    fn a_version_without_schema_is_refused_with_its_path() {
        let no_schema = CRD.replace(
            "      schema: { openAPIV3Schema: { type: object } }\n    - name: v1\n",
            "    - name: v1\n",
        );
        let no_schema = no_schema.replace(
            "      storage: true\n      schema: { openAPIV3Schema: { type: object } }\n",
            "      storage: true\n",
        );
        let err = error_of("s.yaml", &no_schema);
        assert!(
            err.contains("spec.versions[0].schema.openAPIV3Schema"),
            "{err}"
        );
    }
}
