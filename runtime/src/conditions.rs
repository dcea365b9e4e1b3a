//! An operator's own condition in `status.conditions`: `True` after a reconcile that
//! succeeded, `False` with the error after a permanent failure, written only when it changed.
//!
//! The entries other controllers write stay theirs. Where the CRD keeps the list as a map keyed
//! by `type` (`x-kubernetes-list-type: map`), the entry is written alone by server-side apply.
//! Otherwise the list is replaced whole, so the write carries the `resourceVersion` the other
//! entries were read at, and the API server refuses one that would drop a newer entry (409);
//! the reconcile is then retried from the newer object.

use std::{collections::HashSet, fmt::Debug, sync::Mutex};

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Api, Resource, ResourceExt as _,
    api::{Patch, PatchParams},
    runtime::reflector::ObjectRef,
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use crate::metrics::Retryable;

/// The message of the condition after a reconcile that succeeded.
pub const SUCCEEDED: &str = "the last reconcile succeeded";

/// The longest message the API server keeps in a condition.
const MESSAGE_LIMIT: usize = 32768;

/// An operator's condition as the CRD's schema allows it: the `type` it keeps, which of the
/// optional fields the schema has, and how the list is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The condition's `type`.
    pub type_name: &'static str,
    /// The schema has `reason`.
    pub reason: bool,
    /// The schema has `message`.
    pub message: bool,
    /// The schema has `observedGeneration`.
    pub observed_generation: bool,
    /// The schema has `lastTransitionTime`.
    pub last_transition_time: bool,
    /// `status.conditions` is a list map keyed by `type`, so one entry can be applied alone.
    pub list_map: bool,
}

/// A reconcile's outcome, as the condition records it.
#[derive(Debug, Clone, Copy)]
pub struct Outcome<'a> {
    /// Whether the condition is `True`.
    pub ok: bool,
    /// A CamelCase reason.
    pub reason: &'a str,
    /// What happened, for people.
    pub message: &'a str,
    /// The object's `metadata.generation` the outcome is for.
    pub generation: Option<i64>,
}

impl Spec {
    /// The entry that records `outcome`, or `None` when `conditions` already say it.
    /// `lastTransitionTime` moves to `now` only when the status flips.
    pub(crate) fn entry(
        &self,
        outcome: &Outcome<'_>,
        conditions: &[Value],
        now: Value,
    ) -> Option<Value> {
        let status = if outcome.ok { "True" } else { "False" };
        let mut condition = json!({ "type": self.type_name, "status": status });
        if self.reason {
            condition["reason"] = outcome.reason.into();
        }
        if self.message {
            let message: String = outcome.message.chars().take(MESSAGE_LIMIT).collect();
            condition["message"] = message.into();
        }
        if let (true, Some(generation)) = (self.observed_generation, outcome.generation) {
            condition["observedGeneration"] = generation.into();
        }
        let previous = conditions.iter().find(|c| c["type"] == self.type_name);
        if previous.is_some_and(|old| crate::apply::contains(old, &condition)) {
            return None;
        }
        if self.last_transition_time {
            condition["lastTransitionTime"] = match previous {
                Some(old) if old["status"] == status && !old["lastTransitionTime"].is_null() => {
                    old["lastTransitionTime"].clone()
                }
                _ => now,
            };
        }
        Some(condition)
    }
}

/// `conditions` with `entry` in place of the one of its type, or added: every other entry as
/// it was, in its place.
pub fn with_entry(conditions: &[Value], entry: Value) -> Vec<Value> {
    let mut conditions = conditions.to_vec();
    match conditions.iter().position(|c| c["type"] == entry["type"]) {
        Some(i) => conditions[i] = entry,
        None => conditions.push(entry),
    }
    conditions
}

/// Why the condition was not written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object could not be turned into JSON.
    #[error("serialization: {0}")]
    Serialization(#[from] serde_json::Error),
    /// The API server refused the write (a newer list of conditions, for one), or could not be
    /// reached.
    #[error("kubernetes api: {0}")]
    Kube(#[from] kube::Error),
}

impl Retryable for Error {
    fn is_transient(&self) -> bool {
        matches!(self, Self::Kube(_))
    }
}

/// One operator's condition on objects of kind `K`: writes it when it changed, remembers
/// which objects a hook set it on during the reconcile in flight (so the reconcile's own
/// outcome does not overwrite it), and the last write error.
pub struct Conditions<K: Resource<DynamicType = ()>> {
    spec: Spec,
    field_manager: String,
    set_by_hook: Mutex<HashSet<ObjectRef<K>>>,
    last_error: Mutex<Option<String>>,
}

impl<K> Conditions<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
{
    /// The condition `spec` describes, written as `field_manager`.
    pub fn new(spec: Spec, field_manager: impl Into<String>) -> Self {
        Self {
            spec,
            field_manager: field_manager.into(),
            set_by_hook: Mutex::default(),
            last_error: Mutex::default(),
        }
    }

    /// Starts a reconcile of `obj`: whatever a hook set outside a reconcile of it is no part
    /// of this one.
    pub fn begin(&self, obj: &ObjectRef<K>) {
        lock(&self.set_by_hook).remove(obj);
    }

    /// Sets the condition on `obj` from a reconcile hook, in place of the outcome the
    /// reconcile would record: the condition is written once. `message` may be empty, as the
    /// condition conventions allow.
    /// Returns whether it wrote.
    pub async fn set(
        &self,
        api: &Api<K>,
        obj: &K,
        ok: bool,
        reason: &str,
        message: &str,
    ) -> Result<bool, Error> {
        lock(&self.set_by_hook).insert(ObjectRef::from_obj(obj));
        let generation = obj.meta().generation;
        let outcome = Outcome {
            ok,
            reason,
            message,
            generation,
        };
        self.write(api, obj, &outcome).await
    }

    /// Notes that a hook wrote `status` over `obj`'s (`Context::patch_status`): when it set
    /// this condition's entry to something `obj` did not have, the hook set the condition, as
    /// [`Conditions::set`] would, and the reconcile's outcome does not overwrite it. A status
    /// copied from `obj` with other fields changed carries the old entry as it was, and leaves
    /// the condition to the outcome. Returns whether the hook set it.
    pub fn note_status(&self, obj: &K, status: &Value) -> bool {
        let entry = |conditions: &Value| {
            conditions
                .as_array()
                .and_then(|list| list.iter().find(|c| c["type"] == self.spec.type_name))
                .cloned()
        };
        let written = entry(&status["conditions"]);
        let live = serde_json::to_value(obj).ok();
        let before = live
            .as_ref()
            .and_then(|live| live.pointer("/status/conditions"));
        let set = written.is_some() && written != before.and_then(entry);
        if set {
            lock(&self.set_by_hook).insert(ObjectRef::from_obj(obj));
        }
        set
    }

    /// Records a reconcile's outcome, unless a hook set the condition during it. A transient
    /// error leaves the condition as it is, because it is retried soon, and an object being
    /// deleted is left alone. The caller fails the reconcile when this fails, so it is retried
    /// until the condition says what happened.
    pub async fn record<T, E>(
        &self,
        api: &Api<K>,
        obj: &K,
        result: &Result<T, E>,
    ) -> Result<(), Error>
    where
        E: Retryable + ToString,
    {
        let set_by_hook = lock(&self.set_by_hook).remove(&ObjectRef::from_obj(obj));
        if set_by_hook || obj.meta().deletion_timestamp.is_some() {
            return Ok(());
        }
        let generation = obj.meta().generation;
        let message;
        let outcome = match result {
            Ok(_) => Outcome {
                ok: true,
                reason: "Reconciled",
                message: SUCCEEDED,
                generation,
            },
            Err(error) if !error.is_transient() => {
                message = error.to_string();
                Outcome {
                    ok: false,
                    reason: "PermanentError",
                    message: &message,
                    generation,
                }
            }
            Err(_) => return Ok(()),
        };
        self.write(api, obj, &outcome).await.map(drop)
    }

    /// The last error of a condition write, for a test that waits for the condition in vain.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }

    /// Writes `outcome` unless `obj`'s conditions already say it; whether it wrote.
    async fn write(&self, api: &Api<K>, obj: &K, outcome: &Outcome<'_>) -> Result<bool, Error> {
        let live = serde_json::to_value(obj)?;
        let conditions = live
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let now = serde_json::to_value(Time(Timestamp::now()))?;
        let Some(entry) = self.spec.entry(outcome, conditions, now) else {
            return Ok(false);
        };
        let name = obj.name_any();
        let written = if self.spec.list_map {
            // This one entry, by server-side apply: the API server merges it into the list by
            // `type`, and every other entry stays as its own manager wrote it.
            let patch = json!({
                "apiVersion": K::api_version(&()),
                "kind": K::kind(&()),
                "metadata": { "name": name },
                "status": { "conditions": [entry] },
            });
            let params = PatchParams::apply(&self.field_manager).force();
            api.patch_status(&name, &params, &Patch::Apply(&patch))
                .await
        } else {
            let patch = json!({
                "metadata": { "resourceVersion": obj.resource_version() },
                "status": { "conditions": with_entry(conditions, entry) },
            });
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
        };
        if let Err(error) = &written {
            *lock(&self.last_error) = Some(error.to_string());
        }
        written?;
        Ok(true)
    }
}

/// The guarded value, also after a panic elsewhere poisoned the lock: the sets and strings
/// here are whole after every operation.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ObjectMeta;

    use super::*;
    use crate::testing::{at, conflict, mock_api};

    /// A condition with every optional field, its list replaced whole.
    pub(crate) const ALL_FIELDS: Spec = Spec {
        type_name: "Reconciled",
        reason: true,
        message: true,
        observed_generation: true,
        last_transition_time: true,
        list_map: false,
    };

    const OK: Outcome<'static> = Outcome {
        ok: true,
        reason: "Reconciled",
        message: SUCCEEDED,
        generation: Some(1),
    };

    const FAILED: Outcome<'static> = Outcome {
        ok: false,
        reason: "PermanentError",
        message: "bad",
        generation: Some(1),
    };

    fn day(d: u8) -> Value {
        json!(format!("2026-01-0{d}T00:00:00Z"))
    }

    #[test]
    fn an_entry_changes_only_with_the_outcome_and_its_time_only_with_a_flip() {
        let foreign = json!({"type": "Ready", "status": "Unknown"});
        let first = ALL_FIELDS.entry(&OK, std::slice::from_ref(&foreign), day(1));
        let first = first.expect("a first outcome is recorded");
        assert_eq!(first["type"], "Reconciled");
        assert_eq!(first["observedGeneration"], 1);
        assert_eq!(first["lastTransitionTime"], day(1));
        let both = vec![foreign.clone(), first.clone()];
        assert_eq!(
            ALL_FIELDS.entry(&OK, &both, day(2)),
            None,
            "no change, no write"
        );
        let flipped = ALL_FIELDS.entry(&FAILED, &both, day(2)).expect("a flip");
        assert_eq!(flipped["status"], "False");
        assert_eq!(
            flipped["lastTransitionTime"],
            day(2),
            "a flip moves the time"
        );
        let replaced = with_entry(&both, flipped.clone());
        assert_eq!(
            replaced,
            vec![foreign, flipped.clone()],
            "others are kept, in their place"
        );
        let worse = Outcome {
            message: "worse",
            ..FAILED
        };
        let reworded = ALL_FIELDS
            .entry(&worse, &[flipped], day(3))
            .expect("recorded");
        assert_eq!(reworded["lastTransitionTime"], day(2), "no flip, same time");
        let newer = Outcome {
            generation: Some(2),
            ..OK
        };
        assert!(
            ALL_FIELDS.entry(&newer, &[first], day(3)).is_some(),
            "a new generation is news"
        );
    }

    #[test]
    fn only_the_fields_the_schema_has_are_written() {
        let bare = Spec {
            type_name: "Synced",
            reason: false,
            message: false,
            observed_generation: false,
            last_transition_time: false,
            list_map: false,
        };
        let entry = bare.entry(&OK, &[], day(1)).expect("recorded");
        assert_eq!(entry, json!({"type": "Synced", "status": "True"}));
        let long = "x".repeat(MESSAGE_LIMIT + 10);
        let long = Outcome {
            message: &long,
            ..FAILED
        };
        let entry = ALL_FIELDS.entry(&long, &[], day(1)).expect("recorded");
        let message = entry["message"].as_str().unwrap_or_default();
        assert_eq!(
            message.len(),
            MESSAGE_LIMIT,
            "cut to what the API server keeps"
        );
    }

    /// The Pod `default/web` as the API server would return it: at version 41, generation 3.
    pub(crate) fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web".to_owned()),
                namespace: Some("default".to_owned()),
                uid: Some("0b5e55ed-5a3e-4c1e-9e2b-5a3a1e000001".to_owned()),
                resource_version: Some("41".to_owned()),
                generation: Some(3),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    /// An error as a generated operator's, transient or not.
    #[derive(Debug)]
    struct Failure(bool);

    impl Retryable for Failure {
        fn is_transient(&self) -> bool {
            self.0
        }
    }

    impl std::fmt::Display for Failure {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the spec names no target")
        }
    }

    #[tokio::test]
    async fn a_list_is_written_whole_guarded_by_the_version_its_entries_were_read_at() {
        let (client, server) = mock_api(|seen| (200, seen.body.clone()));
        let api: Api<Pod> = Api::namespaced(client, "default");
        let conditions = Conditions::<Pod>::new(ALL_FIELDS, "my-operator");
        let mut pod = pod();
        let foreign = json!([{"type": "Ready", "status": "True"}]);
        pod.status = serde_json::from_value(json!({"conditions": foreign})).ok();
        let ok: Result<(), Failure> = Ok(());
        conditions.record(&api, &pod, &ok).await.expect("written");
        let transient: Result<(), Failure> = Err(Failure(true));
        conditions
            .record(&api, &pod, &transient)
            .await
            .expect("nothing to write");
        let permanent: Result<(), Failure> = Err(Failure(false));
        conditions
            .record(&api, &pod, &permanent)
            .await
            .expect("written");
        drop(api);

        let seen = server.await.expect("the mock API server ran");
        let writes = at(&seen, "/api/v1/namespaces/default/pods/web/status");
        assert_eq!(
            writes.len(),
            2,
            "a transient error writes nothing: {seen:#?}"
        );
        for write in &writes {
            assert_eq!(write.method, http::Method::PATCH);
            assert_eq!(write.body["metadata"]["resourceVersion"], "41");
            let list = &write.body["status"]["conditions"];
            assert_eq!(list[0]["type"], "Ready", "the other entry kept, first");
        }
        let first = &writes[0].body["status"]["conditions"][1];
        assert_eq!(first["status"], "True");
        assert_eq!(first["message"], SUCCEEDED);
        assert_eq!(first["observedGeneration"], 3);
        let second = &writes[1].body["status"]["conditions"][1];
        assert_eq!(second["status"], "False");
        assert_eq!(second["reason"], "PermanentError");
        assert_eq!(second["message"], "the spec names no target");
    }

    #[tokio::test]
    async fn a_list_map_entry_is_applied_alone_as_the_field_manager() {
        let (client, server) = mock_api(|seen| (200, seen.body.clone()));
        let api: Api<Pod> = Api::namespaced(client, "default");
        let spec = Spec {
            list_map: true,
            ..ALL_FIELDS
        };
        let conditions = Conditions::<Pod>::new(spec, "my-operator");
        let wrote = conditions.set(&api, &pod(), false, "Waiting", "").await;
        assert!(wrote.expect("written"), "a first condition is written");
        drop(api);

        let seen = server.await.expect("the mock API server ran");
        assert_eq!(seen.len(), 1);
        let query = seen[0].uri.query().unwrap_or_default();
        assert!(query.contains("fieldManager=my-operator") && query.contains("force=true"));
        assert_eq!(seen[0].body["kind"], "Pod");
        let entries = seen[0].body["status"]["conditions"].as_array().cloned();
        let entries = entries.unwrap_or_default();
        assert_eq!(entries.len(), 1, "this operator's own entry alone");
        assert_eq!(
            entries[0]["message"], "",
            "an empty message is written as given, as the condition conventions allow"
        );
    }

    #[tokio::test]
    async fn a_condition_a_hook_set_or_a_deletion_is_not_overwritten_by_the_outcome() {
        let (client, server) = mock_api(|seen| (200, seen.body.clone()));
        let api: Api<Pod> = Api::namespaced(client, "default");
        let conditions = Conditions::<Pod>::new(ALL_FIELDS, "my-operator");
        let ok: Result<(), Failure> = Ok(());
        conditions
            .set(&api, &pod(), false, "Waiting", "the issuer is not ready")
            .await
            .expect("set");
        conditions
            .record(&api, &pod(), &ok)
            .await
            .expect("left alone");
        let mut deleted = pod();
        let epoch = Time(Timestamp::UNIX_EPOCH);
        deleted.metadata.deletion_timestamp = Some(epoch);
        conditions
            .record(&api, &deleted, &ok)
            .await
            .expect("left alone");
        drop(api);

        let seen = server.await.expect("the mock API server ran");
        assert_eq!(seen.len(), 1, "the hook's write alone: {seen:#?}");
        assert_eq!(seen[0].body["status"]["conditions"][0]["reason"], "Waiting");
    }

    #[tokio::test]
    async fn a_status_a_hook_wrote_with_the_condition_in_it_takes_the_outcomes_place() {
        let (client, server) = mock_api(|seen| (200, seen.body.clone()));
        let api: Api<Pod> = Api::namespaced(client, "default");
        let conditions = Conditions::<Pod>::new(ALL_FIELDS, "my-operator");
        let ok: Result<(), Failure> = Ok(());
        let others = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        assert!(
            !conditions.note_status(&pod(), &others),
            "not this condition"
        );
        let entry = json!({"type": "Reconciled", "status": "True", "reason": "Reconciled"});
        let mut read = pod();
        read.status = serde_json::from_value(json!({"conditions": [entry]})).ok();
        let copied = json!({"conditions": [entry], "phase": "Running"});
        assert!(
            !conditions.note_status(&read, &copied),
            "a status copied with its entry as read leaves the condition to the outcome"
        );
        let ours = json!({"conditions": [{"type": "Reconciled", "status": "True"}]});
        assert!(conditions.note_status(&pod(), &ours));
        conditions
            .record(&api, &pod(), &ok)
            .await
            .expect("left alone");
        conditions.begin(&ObjectRef::from_obj(&pod()));
        conditions.record(&api, &pod(), &ok).await.expect("written");
        drop(api);

        let seen = server.await.expect("the mock API server ran");
        assert_eq!(
            seen.len(),
            1,
            "the next reconcile's outcome alone: {seen:#?}"
        );
        assert_eq!(
            seen[0].body["status"]["conditions"][0]["message"],
            SUCCEEDED
        );
    }

    #[tokio::test]
    async fn a_refused_write_is_a_transient_error_and_kept_for_tests() {
        let (client, server) = mock_api(|_| (409, conflict()));
        let api: Api<Pod> = Api::namespaced(client, "default");
        let conditions = Conditions::<Pod>::new(ALL_FIELDS, "my-operator");
        let ok: Result<(), Failure> = Ok(());
        let error = conditions
            .record(&api, &pod(), &ok)
            .await
            .expect_err("refused");
        assert!(error.is_transient(), "retried: {error}");
        let kept = conditions.last_error().unwrap_or_default();
        assert!(kept.contains("modified"), "{kept}");
        drop(api);
        let _ = server.await;
    }
}
