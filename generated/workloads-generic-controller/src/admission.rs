//! Admission hooks for Deployments and StatefulSets, which the generated webhook server
//! (`src/webhook.rs`) calls before the API server stores one. This file is the user's:
//! `operator-gen gen` never touches it.
//!
//! `mutate` gives every workload an owner annotation, `unowned` until someone says otherwise,
//! and `validate` refuses an owner annotation that names nobody, so that every stored workload
//! says who answers for it. One pair of hooks serves both kinds: each receives an object's
//! metadata only, as the `PartialObjectMeta<K>` of its kind `K`.

use kube::api::PartialObjectMeta;

use crate::controller::Kind;

/// The annotation `mutate` defaults.
pub const OWNER_ANNOTATION: &str = "workloads.example.com/owner";

/// What `mutate` writes there when a workload names no owner.
pub const UNOWNED: &str = "unowned";

/// Whether `workload` may be stored: not with an owner annotation that is blank. `old` is
/// unused, as any owner may take over from another.
pub async fn validate<K: Kind>(
    workload: &PartialObjectMeta<K>,
    old: Option<&PartialObjectMeta<K>>,
) -> Result<(), String> {
    let _ = old;
    let annotations = workload.metadata.annotations.as_ref();
    match annotations.and_then(|a| a.get(OWNER_ANNOTATION)) {
        Some(owner) if owner.trim().is_empty() => Err(format!(
            "{} {:?} names no owner: set {OWNER_ANNOTATION} to who answers for it, or leave it \
             out to have it `{UNOWNED}`",
            K::kind(&()),
            workload.metadata.name.as_deref().unwrap_or_default(),
        )),
        _ => Ok(()),
    }
}

/// Gives a workload without an owner annotation the `unowned` one.
pub async fn mutate<K: Kind>(workload: &mut PartialObjectMeta<K>) -> Result<(), String> {
    workload
        .metadata
        .annotations
        .get_or_insert_default()
        .entry(OWNER_ANNOTATION.to_owned())
        .or_insert_with(|| UNOWNED.to_owned());
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};

    use super::*;

    /// A workload of kind `K` named `name`, with `owner` as its owner annotation if any.
    fn workload<K: Kind + Default>(name: &str, owner: Option<&str>) -> PartialObjectMeta<K> {
        let mut workload = PartialObjectMeta::<K>::default();
        workload.metadata.name = Some(name.to_owned());
        if let Some(owner) = owner {
            let annotations = workload.metadata.annotations.get_or_insert_default();
            annotations.insert(OWNER_ANNOTATION.to_owned(), owner.to_owned());
        }
        workload
    }

    #[tokio::test]
    async fn a_blank_owner_is_refused_naming_the_kind_and_any_other_is_stored() {
        for owner in [None, Some("payments"), Some(UNOWNED)] {
            let deployment = workload::<Deployment>("web", owner);
            assert!(validate(&deployment, None).await.is_ok(), "{owner:?}");
        }
        let refusal = validate(&workload::<StatefulSet>("db", Some(" ")), None)
            .await
            .expect_err("a blank owner");
        assert!(refusal.starts_with("StatefulSet \"db\""), "{refusal}");
        assert!(refusal.contains("names no owner"), "{refusal}");
    }

    #[tokio::test]
    async fn an_owner_is_defaulted_and_never_replaced() {
        let mut unowned = workload::<Deployment>("web", None);
        mutate(&mut unowned).await.expect("mutate allows it");
        let annotations = unowned.metadata.annotations.unwrap_or_default();
        assert_eq!(annotations[OWNER_ANNOTATION], UNOWNED);
        let mut owned = workload::<StatefulSet>("db", Some("payments"));
        mutate(&mut owned).await.expect("mutate allows it");
        let annotations = owned.metadata.annotations.unwrap_or_default();
        assert_eq!(annotations[OWNER_ANNOTATION], "payments");
    }
}
