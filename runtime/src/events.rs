//! Kubernetes Events about reconcile outcomes: one for a failed reconcile, and one for the
//! first success after failures. A steady success publishes nothing, so an unchanged object
//! causes no writes.

use std::fmt::Display;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

use crate::metrics::Retryable;

/// The longest note published; the API server refuses an Event whose note is over 1 KiB.
const NOTE_LIMIT: usize = 1024;

/// The Event for a reconcile that ended with `result`, after failures or not; `None` for a
/// success that follows a success.
pub fn for_outcome<T, E>(result: &Result<T, E>, failed_before: bool) -> Option<Event>
where
    E: Retryable + Display,
{
    let (type_, reason, note) = match result {
        Err(error) if error.is_transient() => {
            (EventType::Warning, "ReconcileRetrying", error.to_string())
        }
        Err(error) => (EventType::Warning, "ReconcileFailed", error.to_string()),
        Ok(_) if failed_before => (
            EventType::Normal,
            "Reconciled",
            "reconciled after failures".to_owned(),
        ),
        Ok(_) => return None,
    };
    Some(Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note.chars().take(NOTE_LIMIT).collect()),
        action: "Reconcile".to_owned(),
        secondary: None,
    })
}

/// Publishes the Event for a reconcile of `reference` that ended with `result` (see
/// [`for_outcome`]). An Event that cannot be published is logged: it never fails the
/// reconcile.
pub async fn report<T, E>(
    recorder: &Recorder,
    reference: &ObjectReference,
    result: &Result<T, E>,
    failed_before: bool,
) where
    E: Retryable + Display,
{
    let Some(event) = for_outcome(result, failed_before) else {
        return;
    };
    if let Err(error) = recorder.publish(&event, reference).await {
        tracing::warn!(%error, "could not publish an event");
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::events::Reporter;

    use super::*;
    use crate::testing::mock_api;

    #[derive(Debug)]
    struct Failure(bool, String);

    impl Retryable for Failure {
        fn is_transient(&self) -> bool {
            self.0
        }
    }

    impl Display for Failure {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.1)
        }
    }

    #[test]
    fn a_failure_warns_a_recovery_is_noted_and_a_steady_success_is_silent() {
        let ok: Result<(), Failure> = Ok(());
        assert!(
            for_outcome(&ok, false).is_none(),
            "no write for an unchanged object"
        );
        let recovered = for_outcome(&ok, true).expect("an Event");
        assert_eq!(
            (recovered.type_, recovered.reason.as_str()),
            (EventType::Normal, "Reconciled")
        );
        let retrying = for_outcome(&Err::<(), _>(Failure(true, "down".into())), false);
        let retrying = retrying.expect("an Event");
        assert_eq!(retrying.reason, "ReconcileRetrying");
        assert_eq!(retrying.type_, EventType::Warning);
        let long = Failure(false, "x".repeat(5000));
        let failed = for_outcome(&Err::<(), _>(long), true).expect("an Event");
        assert_eq!(failed.reason, "ReconcileFailed");
        assert_eq!(
            failed.note.map(|n| n.len()),
            Some(NOTE_LIMIT),
            "cut to what is accepted"
        );
    }

    #[tokio::test]
    async fn a_refused_event_is_logged_and_the_reconcile_goes_on() {
        let (client, server) = mock_api(|_| (403, crate::testing::not_found()));
        let reporter = Reporter {
            controller: "my-operator".to_owned(),
            instance: None,
        };
        let recorder = Recorder::new(client, reporter);
        let reference = ObjectReference {
            kind: Some("ConfigMap".to_owned()),
            name: Some("a".to_owned()),
            namespace: Some("default".to_owned()),
            ..ObjectReference::default()
        };
        let failed: Result<(), Failure> = Err(Failure(false, "invalid spec".into()));
        report(&recorder, &reference, &failed, false).await;
        drop(recorder);
        let seen = server.await.expect("the mock API server ran");
        assert_eq!(seen.len(), 1, "one attempt: {seen:#?}");
        assert_eq!(seen[0].method, http::Method::POST);
        assert_eq!(seen[0].body["reason"], "ReconcileFailed");
    }
}
