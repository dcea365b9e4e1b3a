//! What an earlier `deploy/` installed in a namespace the operator has since left.
//!
//! `kubectl apply -k` creates and updates, but never deletes: when a run moves the operator to
//! another namespace (an operator that gains sharding, or admission webhooks of a built-in
//! kind, runs in one of its own), the previous Deployment keeps running in the old one, beside
//! its ServiceAccount, Roles, RoleBindings and Service, and the Lease and webhook Secret the
//! runtime made there. The generator deletes nothing in a cluster, so it names them, read from
//! the generated `deploy/base/` files that the run replaces, before they are replaced.
//!
//! Those files are the crate folder's, and so input: each is read within the manifest cap, a
//! file that cannot be read or parsed is skipped, and a name that is not a Kubernetes name is
//! never printed.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::crate_dir::CrateDir;
use crate::naming::is_dns_subdomain;
use crate::write_plan::{Ownership, Plan, PlannedFile};

/// The folder of the generated kustomize base.
const BASE: &str = "deploy/base";

/// One object, as `kubectl delete` names it: `<resource>/<name>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Object {
    resource: String,
    name: String,
}

/// What one version of `deploy/base/` installs in the operator's namespace.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Installed {
    /// The Deployment's namespace; none when the files hold no Deployment with one.
    namespace: Option<String>,
    /// The namespaced objects in that namespace, and the Leases and Secrets its Roles name
    /// (the runtime makes those), sorted.
    objects: BTreeSet<Object>,
    /// Whether the files create that Namespace too.
    creates_namespace: bool,
}

impl Installed {
    /// What the generated `deploy/base/` files that `plan` writes install now, read from the
    /// crate folder at `out` before the plan replaces them.
    pub fn on_disk(out: &Path, plan: &Plan) -> Self {
        let dir = CrateDir::new(out);
        let texts = generated_base_files(plan).filter_map(|file| {
            let bytes = dir
                .read(&file.path, crate::limits::MAX_MANIFEST_BYTES)
                .ok()??;
            String::from_utf8(bytes).ok()
        });
        Self::from_texts(texts)
    }

    /// What the same files install once `plan` has written them.
    pub fn planned(plan: &Plan) -> Self {
        Self::from_texts(generated_base_files(plan).map(|file| file.contents.clone()))
    }

    fn from_texts(texts: impl IntoIterator<Item = String>) -> Self {
        let documents: Vec<Value> = texts
            .into_iter()
            .flat_map(|text| {
                serde_saphyr::from_multiple_with_options::<Value>(
                    &text,
                    crate::limits::yaml_options(),
                )
                .unwrap_or_default()
            })
            .collect();
        Self::from_documents(&documents)
    }

    fn from_documents(documents: &[Value]) -> Self {
        let namespace = documents
            .iter()
            .filter(|doc| doc["kind"] == "Deployment")
            .find_map(namespace_of)
            .map(str::to_owned);
        let Some(ns) = namespace.as_deref() else {
            return Self::default();
        };
        let mut objects = BTreeSet::new();
        for doc in documents.iter().filter(|doc| namespace_of(doc) == Some(ns)) {
            if let Some(object) = object_of(doc) {
                objects.insert(object);
            }
            if doc["kind"] == "Role" {
                objects.extend(made_by_the_runtime(doc));
            }
        }
        let creates_namespace = documents.iter().any(|doc| {
            doc["kind"] == "Namespace"
                && doc.pointer("/metadata/name").and_then(Value::as_str) == Some(ns)
        });
        Self {
            namespace,
            objects,
            creates_namespace,
        }
    }

    /// A note naming what `self` left in its namespace when `now` runs the operator in
    /// another, with the command that deletes it; none when the namespace did not move.
    pub fn left_behind(&self, now: &Installed) -> Option<String> {
        let (old, new) = (self.namespace.as_deref()?, now.namespace.as_deref()?);
        if old == new || self.objects.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .objects
            .iter()
            .map(|o| format!("{}/{}", o.resource, o.name))
            .collect();
        let namespace = if self.creates_namespace {
            format!(
                "; the previous deploy/ also created the Namespace {old}, which `kubectl delete \
                 namespace {old}` removes with everything still in it"
            )
        } else {
            String::new()
        };
        Some(format!(
            "the operator moved from namespace {old} to {new}, and `kubectl apply -k` deletes \
             nothing: what the previous deploy/ installed in {old} stays there, its Deployment \
             still running. Once the operator runs in {new}, delete it with `kubectl delete -n \
             {old} {}`{namespace}",
            names.join(" ")
        ))
    }
}

/// The generated YAML files of `deploy/base/` in `plan`.
fn generated_base_files(plan: &Plan) -> impl Iterator<Item = &PlannedFile> {
    plan.files
        .iter()
        .filter(|file| file.ownership == Ownership::Generated && file.path.starts_with(BASE))
        .filter(|file| file.path.extension().is_some_and(|e| e == "yaml"))
}

/// `metadata.namespace`, when it is a Kubernetes name.
fn namespace_of(doc: &Value) -> Option<&str> {
    doc.pointer("/metadata/namespace")?
        .as_str()
        .filter(|ns| is_dns_subdomain(ns))
}

/// The object `doc` describes, as `kubectl delete` names it, when its kind and name are ones
/// `kubectl` can be given.
fn object_of(doc: &Value) -> Option<Object> {
    let kind = doc["kind"].as_str()?;
    let name = doc.pointer("/metadata/name")?.as_str()?;
    let api_version = doc["apiVersion"].as_str()?;
    object(kind, api_version, name)
}

/// `<kind>.<group>/<name>` in `kubectl`'s spelling (`deployment.apps/x`), so that a kind of
/// two groups is never mistaken for the other; the core group is left out (`service/x`).
fn object(kind: &str, api_version: &str, name: &str) -> Option<Object> {
    let kind_ok = !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_alphanumeric());
    if !kind_ok || !is_dns_subdomain(name) {
        return None;
    }
    let resource = match api_version.split_once('/') {
        Some((group, _)) if is_dns_subdomain(group) => {
            format!("{}.{group}", kind.to_ascii_lowercase())
        }
        Some(_) => return None,
        None => kind.to_ascii_lowercase(),
    };
    Some(Object {
        resource,
        name: name.to_owned(),
    })
}

/// The Leases and Secrets a Role's rules grant by name: the runtime creates them (the leader
/// Lease, the webhook certificate's Secret), so no file of `deploy/` holds them.
fn made_by_the_runtime(role: &Value) -> Vec<Object> {
    let rules = role["rules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut made = Vec::new();
    for rule in rules {
        let names = rule["resourceNames"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let resources = rule["resources"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for resource in resources {
            let (kind, api_version) = match resource.as_str() {
                Some("leases") => ("Lease", "coordination.k8s.io/v1"),
                Some("secrets") => ("Secret", "v1"),
                _ => continue,
            };
            made.extend(
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .filter_map(|name| object(kind, api_version, name)),
            );
        }
    }
    made
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const RBAC: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: op, namespace: NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: op}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: op-leader-election, namespace: NS}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [op]
    verbs: [get, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: op-webhook, namespace: NS}
rules:
  - apiGroups: [""]
    resources: [secrets]
    resourceNames: [op-webhook-tls]
    verbs: [get, update]
"#;

    const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: op, namespace: NS}
"#;

    fn plan(namespace: &str, namespace_file: bool) -> Plan {
        let file = |path: &str, text: &str| PlannedFile {
            path: PathBuf::from(path),
            contents: text.replace("NS", namespace),
            ownership: Ownership::Generated,
        };
        let mut files = vec![
            file("deploy/base/rbac.yaml", RBAC),
            file("deploy/base/deployment.yaml", DEPLOYMENT),
        ];
        if namespace_file {
            let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: NS}\n";
            files.push(file("deploy/base/namespace.yaml", text));
        }
        Plan::new(files).unwrap()
    }

    fn written(out: &Path, plan: &Plan) {
        for file in &plan.files {
            std::fs::create_dir_all(out.join(&file.path).parent().unwrap()).unwrap();
            std::fs::write(out.join(&file.path), &file.contents).unwrap();
        }
    }

    #[test]
    fn a_move_names_every_object_left_in_the_old_namespace_with_its_delete_line() {
        let tmp = tempfile::tempdir().unwrap();
        written(tmp.path(), &plan("default", false));
        let next = plan("op-system", true);
        let before = Installed::on_disk(tmp.path(), &next);
        let note = before.left_behind(&Installed::planned(&next)).unwrap();
        assert!(
            note.contains(
                "`kubectl delete -n default deployment.apps/op \
                 lease.coordination.k8s.io/op role.rbac.authorization.k8s.io/op-leader-election \
                 role.rbac.authorization.k8s.io/op-webhook secret/op-webhook-tls \
                 serviceaccount/op`"
            ),
            "{note}"
        );
        assert!(
            note.contains("from namespace default to op-system"),
            "{note}"
        );
        assert!(
            !note.contains("clusterrole"),
            "cluster-scoped objects are rewritten: {note}"
        );
        assert!(!note.contains("Namespace default"), "{note}");
    }

    #[test]
    fn a_namespace_the_previous_deploy_created_is_named_with_its_own_line() {
        let tmp = tempfile::tempdir().unwrap();
        written(tmp.path(), &plan("op-system", true));
        let next = plan("elsewhere", true);
        let note = Installed::on_disk(tmp.path(), &next)
            .left_behind(&Installed::planned(&next))
            .unwrap();
        assert!(
            note.contains("`kubectl delete namespace op-system`"),
            "{note}"
        );
    }

    #[test]
    fn no_note_when_the_namespace_stays_or_nothing_was_installed() {
        let tmp = tempfile::tempdir().unwrap();
        let same = plan("op-system", true);
        assert_eq!(
            Installed::on_disk(tmp.path(), &same),
            Installed::default(),
            "a new crate has no deploy/ yet"
        );
        written(tmp.path(), &same);
        let before = Installed::on_disk(tmp.path(), &same);
        assert!(before.left_behind(&Installed::planned(&same)).is_none());
    }

    #[test]
    fn names_that_are_not_kubernetes_names_are_never_printed() {
        let hostile = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: \"op; rm -rf ~\", namespace: old}\n---\n\
                       apiVersion: v1\nkind: \"Service\\u001b[2J\"\nmetadata: {name: op, namespace: old}\n---\n\
                       apiVersion: \"evil group/v1\"\nkind: Thing\nmetadata: {name: op, namespace: old}\n---\n\
                       apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: op, namespace: old}\n";
        let before = Installed::from_texts([hostile.to_owned(), "{not: [yaml".to_owned()]);
        let now = Installed::from_texts([DEPLOYMENT.replace("NS", "new")]);
        let note = before.left_behind(&now).unwrap();
        assert!(
            note.contains("`kubectl delete -n old serviceaccount/op`"),
            "{note}"
        );
        assert!(!note.contains("rm -rf") && !note.contains('\u{1b}') && !note.contains("evil"));
    }
}
