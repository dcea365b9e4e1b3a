//! What the sharding tests build their cases from: Leases, object keys and names.

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};

use super::ObjectKey;

/// A 10 s Lease named `name`, held by `holder`, renewed at `renewed_at` (Unix seconds).
pub fn lease_held_by(name: &str, holder: Option<&str>, renewed_at: i64) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: Some(10),
            renew_time: Some(MicroTime(
                Timestamp::from_second(renewed_at).expect("a valid time"),
            )),
            ..LeaseSpec::default()
        }),
    }
}

/// A shard's own 10 s Lease, renewed at `renewed_at` (Unix seconds).
pub fn lease(name: &str, renewed_at: i64) -> Lease {
    lease_held_by(name, Some(name), renewed_at)
}

/// The key of Widget `name` in `default`.
pub fn key(name: &str) -> ObjectKey<'_> {
    ObjectKey {
        group: "example.com",
        kind: "Widget",
        namespace: Some("default"),
        name,
    }
}

/// `count` object names.
pub fn names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("widget-{i}")).collect()
}
