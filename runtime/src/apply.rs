//! Apply-when-different: a child is written by server-side apply only when its cached copy
//! lacks a field of the desired one, and a primary's status only when the status it was read
//! with lacks one, so a reconcile that finds nothing to change writes nothing, and nothing is
//! read from the API server.

use std::fmt::Debug;

use kube::{
    Api, Resource,
    api::{Patch, PatchParams},
    runtime::reflector::{ObjectRef, Store},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

/// The label on every child an operator applies, with its field manager as the value. The
/// watches of owned kinds select on it, so the API server sends only the operator's own
/// children and their caches hold nothing else.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// What every ring's shard label key starts with; the ring's name follows. A ring is named
/// after its operator, so [`apply_owned`] copies the owner's label of the ring named like its
/// field manager to the children, which land on their owner's shard. It is here, beside
/// [`MANAGED_BY_LABEL`], because it is the other label applying a child writes; the sharding
/// labels ([`crate::sharding::Labels`]) build their keys from it, and applying needs nothing
/// of sharding.
pub const SHARD_LABEL_PREFIX: &str = "shard.operator-gen.io/";

/// Why a child was not applied.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The owner was built locally rather than read from the API server, so there is no uid
    /// for the child's ownerReference.
    #[error("the owner has no uid yet; it must be read from the API")]
    OwnerWithoutUid,
    /// The child has no `metadata.name` to apply it under.
    #[error("an owned object needs metadata.name")]
    Unnamed,
    /// The child could not be turned into JSON.
    #[error("serialization: {0}")]
    Serialization(#[from] serde_json::Error),
    /// The API server refused the apply, or could not be reached.
    #[error("kubernetes api: {0}")]
    Kube(#[from] kube::Error),
}

impl crate::metrics::Retryable for Error {
    /// The API server or the network may do better on a retry; a request that could not be
    /// built (a child that does not serialize) fails the same way every time.
    fn is_transient(&self) -> bool {
        match self {
            Self::Kube(kube::Error::BuildRequest(_) | kube::Error::SerdeError(_)) => false,
            Self::Kube(_) => true,
            Self::OwnerWithoutUid | Self::Unnamed | Self::Serialization(_) => false,
        }
    }
}

/// Whether `live` holds every field of `desired` with the same value. Fields the server adds
/// (status, defaults, `resourceVersion`) do not count as differences, and a `null` in
/// `desired` asks for nothing. Lists must match item by item.
pub fn contains(live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => desired.iter().all(|(key, value)| {
            value.is_null() || live.get(key).is_some_and(|l| contains(l, value))
        }),
        (Value::Array(live), Value::Array(desired)) => {
            live.len() == desired.len() && live.iter().zip(desired).all(|(l, d)| contains(l, d))
        }
        (live, desired) => live == desired,
    }
}

/// Server-side applies `child` through `api` as `field_manager`, with a controller
/// ownerReference to `owner` (so it is garbage-collected with it, and its changes map back to
/// it), [`MANAGED_BY_LABEL`] and, when the owner is sharded, its shard label in the ring
/// named `field_manager`. When `cache` already holds the child with every field of the
/// desired one, it returns the cached child and writes nothing.
pub async fn apply_owned<P, C>(
    api: &Api<C>,
    cache: &Store<C>,
    owner: &P,
    mut child: C,
    field_manager: &str,
) -> Result<C, Error>
where
    P: Resource<DynamicType = ()>,
    C: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
{
    let owner_ref = owner
        .controller_owner_ref(&())
        .ok_or(Error::OwnerWithoutUid)?;
    let meta = child.meta_mut();
    meta.owner_references = Some(vec![owner_ref]);
    let labels = meta.labels.get_or_insert_with(Default::default);
    labels.insert(MANAGED_BY_LABEL.to_owned(), field_manager.to_owned());
    // A sharded owner's children carry its shard, so that each replica's children caches,
    // selected by that label, hold only its own shard's children. The ring is named after the
    // operator, as its field manager is; another operator's ring is not this one's business.
    let in_ring = |key: &String| key.strip_prefix(SHARD_LABEL_PREFIX) == Some(field_manager);
    let owner_labels = owner.meta().labels.iter().flatten();
    if let Some((key, shard)) = owner_labels.into_iter().find(|(key, _)| in_ring(key)) {
        labels.insert(key.clone(), shard.clone());
    }
    let name = meta.name.clone().ok_or(Error::Unnamed)?;
    if let Some(cached) = cache.get(&ObjectRef::from_obj(&child))
        && contains(
            &serde_json::to_value(cached.as_ref())?,
            &serde_json::to_value(&child)?,
        )
    {
        return Ok(cached.as_ref().clone());
    }
    let params = PatchParams::apply(field_manager).force();
    Ok(api.patch(&name, &params, &Patch::Apply(&child)).await?)
}

/// Sets `obj`'s status to `desired` through the `/status` subresource of `api`, by a merge
/// patch, when `live` (the status `obj` was read with) lacks a field of it; returns whether it
/// wrote. A status write leaves `metadata.generation` alone, so it retriggers no controller
/// that filters on the generation.
///
/// # Errors
/// A status that does not serialize, or a write the API server refused.
pub async fn patch_status<K>(
    api: &Api<K>,
    obj: &K,
    live: &impl Serialize,
    desired: &impl Serialize,
) -> Result<bool, Error>
where
    K: Resource + Clone + Debug + DeserializeOwned,
{
    let desired = serde_json::to_value(desired)?;
    if contains(&serde_json::to_value(live)?, &desired) {
        return Ok(false);
    }
    let name = obj.meta().name.clone().ok_or(Error::Unnamed)?;
    let patch = serde_json::json!({ "status": desired });
    let params = PatchParams::default();
    api.patch_status(&name, &params, &Patch::Merge(&patch))
        .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{
        api::ObjectMeta,
        runtime::{reflector, watcher},
    };
    use serde_json::json;

    use super::*;
    use crate::testing::{assert_owned_apply, holding, mock_api};

    #[test]
    fn fields_the_server_adds_are_no_difference_but_a_changed_or_missing_one_is() {
        let live = json!({"a": 1, "b": {"c": [1, {"d": 2, "e": 3}]}, "status": {"x": 1}});
        assert!(contains(&live, &json!({"a": 1, "b": {"c": [1, {"d": 2}]}})));
        assert!(contains(&live, &json!({"a": 1, "z": null})));
        assert!(!contains(&live, &json!({"a": 2})));
        assert!(
            !contains(&live, &json!({"b": {"c": [1]}})),
            "lists match item by item"
        );
        assert!(!contains(&live, &json!({"y": 1})));
    }

    fn owner() -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("owner".to_owned()),
                namespace: Some("default".to_owned()),
                uid: Some("0b5e55ed-0000-0000-0000-000000000001".to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn child(value: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("child".to_owned()),
                namespace: Some("default".to_owned()),
                ..ObjectMeta::default()
            },
            data: Some([("key".to_owned(), value.to_owned())].into()),
            ..ConfigMap::default()
        }
    }

    #[tokio::test]
    async fn a_child_is_applied_once_owned_and_labelled_and_not_again_once_cached() {
        let (client, server) = mock_api(|seen| (200, seen.body.clone()));
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let (cache, mut writer) = reflector::store();

        let applied = apply_owned(&api, &cache, &owner(), child("1"), "my-operator").await;
        let applied = applied.expect("the apply is answered");
        writer.apply_watcher_event(&watcher::Event::Apply(applied));
        let again = apply_owned(&api, &cache, &owner(), child("1"), "my-operator").await;
        again.expect("the cached child is returned");
        let changed = apply_owned(&api, &cache, &owner(), child("2"), "my-operator").await;
        changed.expect("the changed child is applied");
        drop(api);

        let seen = server.await.expect("the mock API server ran");
        assert_eq!(
            seen.len(),
            2,
            "the unchanged child is not written: {seen:#?}"
        );
        assert_owned_apply(&seen[0], &owner(), &child("1"), "my-operator");
        assert_owned_apply(&seen[1], &owner(), &child("2"), "my-operator");
        assert_eq!(seen[1].body["data"]["key"], "2");
    }

    #[tokio::test]
    async fn a_sharded_owners_child_carries_its_shard_and_follows_it_when_it_moves() {
        let (client, server) = mock_api(|seen| (200, seen.body.clone()));
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let (cache, mut writer) = reflector::store();
        let mut owner = owner();
        let labels = owner.metadata.labels.get_or_insert_default();
        labels.insert(
            "shard.operator-gen.io/my-operator".into(),
            "replica-a".into(),
        );
        labels.insert("drain.operator-gen.io/my-operator".into(), "true".into());
        labels.insert("app".into(), "owner".into());
        labels.insert(
            "shard.operator-gen.io/other-operator".into(),
            "other-a".into(),
        );

        let applied = apply_owned(&api, &cache, &owner, child("1"), "my-operator").await;
        writer.apply_watcher_event(&watcher::Event::Apply(applied.expect("applied")));
        let labels = owner.metadata.labels.get_or_insert_default();
        labels.insert(
            "shard.operator-gen.io/my-operator".into(),
            "replica-b".into(),
        );
        let moved = apply_owned(&api, &cache, &owner, child("1"), "my-operator").await;
        moved.expect("applied again");
        drop(api);

        let seen = server.await.expect("the mock API server ran");
        let shards: Vec<&Value> = seen
            .iter()
            .map(|s| &s.body["metadata"]["labels"]["shard.operator-gen.io/my-operator"])
            .collect();
        assert_eq!(shards, [&json!("replica-a"), &json!("replica-b")]);
        let first = &seen[0].body["metadata"]["labels"];
        assert!(first.get("drain.operator-gen.io/my-operator").is_none());
        assert!(first.get("app").is_none(), "only shard labels are copied");
        assert!(
            first.get("shard.operator-gen.io/other-operator").is_none(),
            "only this operator's ring"
        );
    }

    #[test]
    fn only_what_the_api_server_may_answer_better_is_retried() {
        use crate::metrics::Retryable as _;

        let refused = kube::core::Status::failure("etcdserver: request timed out", "Timeout");
        assert!(Error::Kube(kube::Error::Api(refused.boxed())).is_transient());
        let unbuildable = kube::core::request::Error::Validation("no name".to_owned());
        assert!(!Error::Kube(kube::Error::BuildRequest(unbuildable)).is_transient());
        assert!(!Error::OwnerWithoutUid.is_transient());
        assert!(!Error::Unnamed.is_transient());
    }

    #[tokio::test]
    async fn an_owner_without_uid_or_a_child_without_name_is_refused_without_a_request() {
        let (client, server) = mock_api(|seen| (200, seen.body.clone()));
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let (cache, _writer) = reflector::store();
        let mut local = owner();
        local.metadata.uid = None;
        let refused = apply_owned(&api, &cache, &local, child("1"), "op").await;
        assert!(matches!(refused, Err(Error::OwnerWithoutUid)));
        let mut unnamed = child("1");
        unnamed.metadata.name = None;
        let refused = apply_owned(&api, &cache, &owner(), unnamed, "op").await;
        assert!(matches!(refused, Err(Error::Unnamed)));
        drop(api);
        assert!(server.await.expect("the mock API server ran").is_empty());
    }

    #[tokio::test]
    async fn a_status_is_written_once_by_merge_patch_and_not_again_when_it_holds_every_field() {
        use k8s_openapi::api::core::v1::{Pod, PodStatus};
        let pod = crate::conditions::tests::pod();
        let (client, server) = mock_api(holding(&pod));
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let desired = PodStatus {
            message: Some("scheduled".to_owned()),
            ..PodStatus::default()
        };
        let wrote = patch_status(&api, &pod, &pod.status, &desired).await;
        assert!(wrote.expect("written"));
        let mut read = pod.clone();
        read.status = Some(PodStatus {
            phase: Some("Running".to_owned()),
            ..desired.clone()
        });
        let again = patch_status(&api, &read, &read.status, &desired).await;
        assert!(
            !again.expect("nothing to write"),
            "the server's own fields are no difference"
        );
        drop((api, client));
        let seen = server.await.expect("the mock API server ran");
        assert_eq!(seen.len(), 1, "one write: {seen:#?}");
        assert_eq!(seen[0].method, http::Method::PATCH);
        assert_eq!(seen[0].path(), "/api/v1/namespaces/default/pods/web/status");
        assert_eq!(seen[0].body, json!({"status": {"message": "scheduled"}}));
    }
}
