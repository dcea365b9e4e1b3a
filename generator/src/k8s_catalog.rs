//! The built-in Kubernetes kinds a manifest may name, read off k8s-openapi's own types so
//! that group, version, plural and scope can never drift from the library the operator uses.

use k8s_openapi::{NamespaceResourceScope, Resource};
use serde_json::Value;

/// One built-in kind.
#[derive(Debug, Clone)]
pub struct BuiltinKind {
    pub kind: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// Path of the type (`k8s_openapi::api::core::v1::ConfigMap`), for generated `use` lines.
    pub rust_path: &'static str,
    schema: fn() -> Value,
}

impl BuiltinKind {
    /// The kind's JSON schema, used to check manifest field paths against the real type.
    /// `apiVersion` as objects of this kind write it: `v1`, `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn schema(&self) -> Value {
        (self.schema)()
    }

    /// Whether an object with only a name is accepted by the API server, so a skeleton can
    /// apply one as a working example instead of leaving a note.
    pub fn empty_object_is_valid(&self) -> bool {
        matches!(
            self.kind,
            "ConfigMap" | "Secret" | "ServiceAccount" | "Role" | "ClusterRole"
        )
    }
}

fn entry<K>(rust_path: &'static str) -> BuiltinKind
where
    K: Resource + schemars::JsonSchema + 'static,
{
    BuiltinKind {
        kind: K::KIND,
        group: K::GROUP,
        version: K::VERSION,
        plural: K::URL_PATH_SEGMENT,
        namespaced: std::any::TypeId::of::<K::Scope>()
            == std::any::TypeId::of::<NamespaceResourceScope>(),
        rust_path,
        schema: || schemars::schema_for!(K).to_value(),
    }
}

macro_rules! catalog {
    ($($module:ident :: $version:ident :: $kind:ident),* $(,)?) => {
        /// Every kind that can be owned or watched by name.
        pub fn all() -> Vec<BuiltinKind> {
            vec![$(
                entry::<k8s_openapi::api::$module::$version::$kind>(
                    concat!("k8s_openapi::api::", stringify!($module), "::", stringify!($version), "::", stringify!($kind)),
                ),
            )*]
        }
    };
}

catalog![
    apps::v1::DaemonSet,
    apps::v1::Deployment,
    apps::v1::ReplicaSet,
    apps::v1::StatefulSet,
    autoscaling::v2::HorizontalPodAutoscaler,
    batch::v1::CronJob,
    batch::v1::Job,
    coordination::v1::Lease,
    core::v1::ConfigMap,
    core::v1::Endpoints,
    core::v1::Namespace,
    core::v1::Node,
    core::v1::PersistentVolume,
    core::v1::PersistentVolumeClaim,
    core::v1::Pod,
    core::v1::Secret,
    core::v1::Service,
    core::v1::ServiceAccount,
    discovery::v1::EndpointSlice,
    networking::v1::Ingress,
    networking::v1::NetworkPolicy,
    policy::v1::PodDisruptionBudget,
    rbac::v1::ClusterRole,
    rbac::v1::ClusterRoleBinding,
    rbac::v1::Role,
    rbac::v1::RoleBinding,
    storage::v1::StorageClass,
];

/// Looks a kind up by name, case-insensitively (`configmap` finds `ConfigMap`).
pub fn find(kind: &str) -> Option<BuiltinKind> {
    all()
        .into_iter()
        .find(|k| k.kind.eq_ignore_ascii_case(kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_come_from_k8s_openapi() {
        let cm = find("configmap").unwrap();
        assert_eq!(
            (cm.kind, cm.group, cm.version, cm.plural, cm.namespaced),
            ("ConfigMap", "", "v1", "configmaps", true)
        );
        assert_eq!(cm.api_version(), "v1");
        let role = find("ClusterRole").unwrap();
        assert_eq!(role.api_version(), "rbac.authorization.k8s.io/v1");
        assert_eq!(
            (role.group, role.namespaced),
            ("rbac.authorization.k8s.io", false)
        );
        assert!(find("Widget").is_none());
    }

    #[test]
    fn kinds_are_unique() {
        let mut kinds: Vec<_> = all().iter().map(|k| k.kind).collect();
        kinds.sort();
        let before = kinds.len();
        kinds.dedup();
        assert_eq!(before, kinds.len());
    }
}
