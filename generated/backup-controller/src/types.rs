//! The `Backup` custom resource, defined here in Rust in every version the API
//! server serves. `v1` is the storage version, the hub: every other version
//! converts to and from it, and the rest of the crate uses it.
//!
//! This file is yours: the generator created it once and never overwrites it. Change the specs
//! and status to what your resource needs, and each older version's two `From` conversions
//! with them; `src/conversion.rs` calls those when the API server converts. A conversion may
//! drop what the older version cannot hold: the conversion webhook keeps it for the object in
//! an annotation, so a round trip through an older version loses nothing. To serve another
//! version, add its module here and its name to `alsoServed` in operator.yaml.
//! `cargo run --bin crdgen` prints the CRD of every version.

pub use self::v1::*;

/// `v1`, the storage version: the hub every other version converts to and from.
pub mod v1 {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// What a `Backup` asks for. Replace the example fields with your own.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "example.com",
        version = "v1",
        kind = "Backup",
        plural = "backups"
    )]
    #[kube(namespaced)]
    #[kube(status = "BackupStatus", derive = "PartialEq")]
    pub struct BackupSpec {
        /// An example setting.
        pub message: String,
        /// An example of a field older versions lack: their conversions drop it, and the
        /// conversion webhook keeps it for them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub note: Option<String>,
    }

    /// What the operator observed; every version shares it.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct BackupStatus {
        /// The operator's `Ready` condition, written after every reconcile, and any others:
        /// each says which generation it describes, as the Kubernetes condition conventions ask.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub conditions: Vec<Condition>,
    }
}

/// `v1alpha1`, served besides the hub and converted to and from it.
pub mod v1alpha1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::v1 as hub;

    /// What a `Backup` asks for in `v1alpha1`.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "example.com",
        version = "v1alpha1",
        kind = "Backup",
        plural = "backups"
    )]
    #[kube(namespaced)]
    #[kube(status = "hub::BackupStatus", derive = "PartialEq")]
    pub struct BackupSpec {
        /// An example setting.
        pub message: String,
    }

    impl From<Backup> for hub::Backup {
        /// To the hub: what this version cannot say takes the hub's default.
        fn from(older: Backup) -> Self {
            Self {
                metadata: older.metadata,
                spec: hub::BackupSpec {
                    message: older.spec.message,
                    note: None,
                },
                status: older.status,
            }
        }
    }

    impl From<hub::Backup> for Backup {
        /// From the hub: what this version cannot say is dropped here, and kept by the
        /// conversion webhook.
        fn from(hub: hub::Backup) -> Self {
            Self {
                metadata: hub.metadata,
                spec: BackupSpec {
                    message: hub.spec.message,
                },
                status: hub.status,
            }
        }
    }
}
