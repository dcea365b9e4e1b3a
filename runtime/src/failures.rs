//! Failed reconciles: consecutive failures counted per object, and the per-object exponential
//! backoff they give. A transient error (the API server, the network) is retried after a delay
//! that doubles with each failure of the same object; a permanent one waits for the object to
//! change. One object failing never slows the others.

use std::{
    collections::HashMap,
    fmt::Display,
    hash::Hash,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use kube::runtime::controller::Action;

use crate::metrics::{Metrics, Retryable};

/// Per-object exponential backoff: `base` after the first failure, doubled per consecutive
/// failure, capped at `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub base: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Backoff {
    /// The delay before retry number `failures` (counting from 1).
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.saturating_sub(1));
        self.base.saturating_mul(factor).min(self.max)
    }
}

/// Consecutive failures per object, and what to do after each.
pub struct Failures<Key> {
    backoff: Backoff,
    counts: Mutex<HashMap<Key, u32>>,
}

impl<Key: Clone + Display + Eq + Hash> Failures<Key> {
    /// No failures yet; retries wait as `backoff` says.
    pub fn new(backoff: Backoff) -> Self {
        Self {
            backoff,
            counts: Mutex::default(),
        }
    }

    /// Records the outcome of a reconcile of `key`; returns its consecutive failures. A success
    /// forgets the object, so the map holds only objects that are failing.
    pub fn record(&self, key: &Key, success: bool) -> u32 {
        let mut counts = self.lock();
        if success {
            counts.remove(key);
            0
        } else {
            let count = counts.entry(key.clone()).or_default();
            *count = count.saturating_add(1);
            *count
        }
    }

    /// Consecutive failures of `key` so far.
    pub fn count(&self, key: &Key) -> u32 {
        self.lock().get(key).copied().unwrap_or(0)
    }

    /// What to do after `key` failed with `error`, once the failure is recorded: a transient
    /// error is retried after the backoff's delay for the failures so far, a permanent one
    /// waits for a change.
    pub fn retry_action<E: Retryable + Display>(&self, key: &Key, error: &E) -> Action {
        if !error.is_transient() {
            tracing::warn!(object = %key, %error, "permanent error; waiting for a change");
            return Action::await_change();
        }
        let delay = self.backoff.delay(self.count(key));
        tracing::warn!(object = %key, %error, ?delay, "transient error; retrying");
        Action::requeue(delay)
    }

    /// The counts, also after a panic elsewhere poisoned the lock: each is whole after every
    /// operation.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, u32>> {
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Every reconcile's outcome, kept where it is read: the failures per key, which the backoff
/// reads, and the metrics. The [`Lifecycle`](crate::lifecycle::Lifecycle) records every
/// reconcile in one.
pub struct Outcomes<Key> {
    failures: Failures<Key>,
    metrics: Arc<Metrics>,
}

impl<Key: Clone + Display + Eq + Hash> Outcomes<Key> {
    /// No outcomes yet; reconciles are counted in `metrics`, and retried after `backoff`.
    pub fn new(metrics: Arc<Metrics>, backoff: Backoff) -> Self {
        Self {
            failures: Failures::new(backoff),
            metrics,
        }
    }

    /// The metrics every reconcile is counted in.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Records a reconcile of `key` that started at `started` and ended with `result`.
    pub fn record<E: Retryable>(&self, key: &Key, started: Instant, result: &Result<Action, E>) {
        self.failures.record(key, result.is_ok());
        self.metrics.observe(started, result.as_ref().err());
    }

    /// Consecutive failed reconciles of `key` so far.
    pub fn failure_count(&self, key: &Key) -> u32 {
        self.failures.count(key)
    }

    /// What to do after a reconcile of `key` failed with `error`: see
    /// [`Failures::retry_action`].
    pub fn retry_action<E: Retryable + Display>(&self, key: &Key, error: &E) -> Action {
        self.failures.retry_action(key, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BACKOFF: Backoff = Backoff {
        base: Duration::from_millis(500),
        max: Duration::from_secs(60),
    };

    struct Failure(bool);

    impl Retryable for Failure {
        fn is_transient(&self) -> bool {
            self.0
        }
    }

    impl Display for Failure {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(if self.0 {
                "the registry is down"
            } else {
                "invalid spec"
            })
        }
    }

    #[test]
    fn the_delay_doubles_from_base_and_stops_at_max() {
        assert_eq!(BACKOFF.delay(1), BACKOFF.base);
        assert_eq!(BACKOFF.delay(2), BACKOFF.base * 2);
        assert_eq!(BACKOFF.delay(3), BACKOFF.base * 4);
        assert_eq!(BACKOFF.delay(u32::MAX), BACKOFF.max);
        assert!((1..64).all(|n| BACKOFF.delay(n) <= BACKOFF.delay(n + 1)));
    }

    #[test]
    fn transient_errors_back_off_per_object_and_a_success_resets() {
        let failures = Failures::new(BACKOFF);
        let (object, other) = ("ns/a", "ns/b");
        let transient = Failure(true);
        let delays: Vec<Action> = (0..4)
            .map(|_| {
                failures.record(&object, false);
                failures.retry_action(&object, &transient)
            })
            .collect();
        let expected: Vec<Action> = (1..=4).map(|n| Action::requeue(BACKOFF.delay(n))).collect();
        assert_eq!(delays, expected);
        assert_eq!(failures.count(&object), 4);
        failures.record(&other, false);
        let first = Action::requeue(BACKOFF.base);
        assert_eq!(
            failures.retry_action(&other, &transient),
            first,
            "per object"
        );
        assert_eq!(failures.record(&object, true), 0);
        assert_eq!(failures.count(&object), 0);
        failures.record(&object, false);
        assert_eq!(
            failures.retry_action(&object, &transient),
            first,
            "reset by a success"
        );
        let permanent = Failure(false);
        assert_eq!(
            failures.retry_action(&object, &permanent),
            Action::await_change()
        );
    }

    #[test]
    fn a_recorded_reconcile_is_counted_in_the_metrics_and_its_failures_back_off() {
        let metrics = Arc::new(Metrics::new(crate::metrics::ReadyWhen::WatchesListed(1)));
        let outcomes = Outcomes::new(Arc::clone(&metrics), BACKOFF);
        let object = "Widget/ns/a";
        for _ in 0..2 {
            let failed: Result<Action, Failure> = Err(Failure(true));
            outcomes.record(&object, Instant::now(), &failed);
            let action = outcomes.retry_action(&object, &Failure(true));
            assert_eq!(
                action,
                Action::requeue(BACKOFF.delay(outcomes.failure_count(&object)))
            );
        }
        assert_eq!(outcomes.failure_count(&object), 2);
        let done: Result<Action, Failure> = Ok(Action::await_change());
        outcomes.record(&object, Instant::now(), &done);
        assert_eq!(outcomes.failure_count(&object), 0, "reset by a success");
        let rendered = metrics.render();
        let reconciles = rendered
            .lines()
            .find(|line| line.starts_with("operator_reconciles_total"));
        assert_eq!(
            reconciles,
            Some("operator_reconciles_total 3"),
            "{rendered}"
        );
    }
}
