//! What a webhook request may take of a replica, whoever sends it: memory for its body, time,
//! and a turn at the work that needs memory beyond the body.
//!
//! A body is read under a byte budget shared by every request of its route ([`Bodies`]): it
//! reserves its announced length (or the route's cap, when it announces none) before its first
//! byte is read, so that bodies never hold part of the budget while waiting for more of it, and
//! it must then arrive at [`MIN_RATE`] after a second's grace. A client that announces a body
//! and stalls loses its reservation within about a second; holding the budget longer costs it
//! the bandwidth of sending what it holds. Only a whole body waits for a turn ([`Turns`]), so a
//! stalled client never holds one: the turns bound the memory that decoding, hooks and
//! conversions take beyond the bodies, and the budget bounds the bodies. A request that finds
//! no turn within its deadline is refused, and the replica turns unready while requests wait
//! and none is given a turn (see [`Metrics::webhook_waits`]).

use std::{sync::Arc, time::Duration};

use axum::{
    body::{Body, Bytes},
    http::StatusCode,
    response::{IntoResponse as _, Response},
};
use futures::StreamExt as _;
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};

use crate::{metrics::Metrics, webhook_server::Outcome};

/// How fast a body must arrive, after [`GRACE`]: far below what the API server sends at, even
/// across zones, and far above a client that sends a byte now and then.
pub const MIN_RATE: u64 = 1024 * 1024;

/// How long a body may take to start arriving before [`MIN_RATE`] applies.
pub const GRACE: Duration = Duration::from_secs(1);

/// Why a request was refused before its work began.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The body is larger than the route reads.
    #[error("the body is larger than the {0} bytes this webhook reads")]
    TooLarge(usize),
    /// The body did not arrive whole in time.
    #[error("the body did not arrive whole within {0:?}")]
    Slow(Duration),
    /// No turn came free in time.
    #[error("the webhook is busy: no turn came free within {0:?}")]
    Busy(Duration),
    /// The connection failed while the body was read.
    #[error("the body could not be read: {0}")]
    Broken(String),
}

impl Refused {
    /// The answer to a request refused before its work began, with `what` (such as "the
    /// AdmissionReview was not answered") before the reason, counted as an answer of `hook`.
    /// A request refused unread has no uid to answer for, so this is an HTTP error, which the
    /// API server treats as the webhook failing.
    pub fn answer(&self, metrics: &Metrics, hook: &str, what: &str) -> Response {
        let (status, outcome) = match self {
            Refused::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, Outcome::Invalid),
            Refused::Slow(_) => (StatusCode::REQUEST_TIMEOUT, Outcome::Invalid),
            Refused::Broken(_) => (StatusCode::BAD_REQUEST, Outcome::Invalid),
            Refused::Busy(_) => (StatusCode::SERVICE_UNAVAILABLE, Outcome::Failed),
        };
        metrics.webhook_answered(hook, outcome.name());
        let reason = format!("{what}: {self}");
        tracing::warn!(%reason);
        (status, reason).into_response()
    }
}

/// Bodies read under a shared byte budget, each of at most `max_bytes`, each within a deadline.
#[derive(Clone)]
pub struct Bodies {
    budget: Arc<Semaphore>,
    max_bytes: usize,
}

/// A body read whole, holding its bytes of the budget until it is dropped.
pub struct Held {
    /// The body.
    pub bytes: Bytes,
    _budget: Option<OwnedSemaphorePermit>,
}

impl Bodies {
    /// Bodies of at most `max_bytes`, `at_once` of the largest held at a time.
    pub fn new(max_bytes: usize, at_once: usize) -> Self {
        let budget = max_bytes
            .saturating_mul(at_once.max(1))
            .min(Semaphore::MAX_PERMITS);
        Self {
            budget: Arc::new(Semaphore::new(budget)),
            max_bytes,
        }
    }

    /// Reads `body` whole by `deadline`, once the budget has room for its announced length
    /// (or the cap, when it announces none), at [`MIN_RATE`] after [`GRACE`]. A body announced
    /// or found larger than `max_bytes` is refused at once.
    pub async fn read(&self, body: Body, deadline: Instant) -> Result<Held, Refused> {
        let too_large = Refused::TooLarge(self.max_bytes);
        let reserved = match announced(&body) {
            Some(length) if length > self.max_bytes => return Err(too_large),
            Some(length) => length,
            None => self.max_bytes,
        };
        let started = Instant::now();
        let permits = u32::try_from(reserved).map_err(|_| Refused::TooLarge(self.max_bytes))?;
        let budget = Arc::clone(&self.budget).acquire_many_owned(permits);
        let held = match tokio::time::timeout_at(deadline, budget).await {
            Ok(Ok(held)) => held,
            Ok(Err(error)) => return Err(Refused::Broken(error.to_string())),
            Err(_) => return Err(Refused::Busy(deadline.saturating_duration_since(started))),
        };
        let bytes = self.read_whole(body, reserved, deadline).await?;
        Ok(Held {
            bytes,
            _budget: Some(held),
        })
    }

    /// The chunks of `body`, at most `reserved` bytes, each by the time [`MIN_RATE`] gives it.
    async fn read_whole(
        &self,
        body: Body,
        reserved: usize,
        deadline: Instant,
    ) -> Result<Bytes, Refused> {
        let mut chunks = body.into_data_stream();
        let mut bytes = Vec::with_capacity(reserved);
        let reading = Instant::now();
        loop {
            let due =
                reading + GRACE + Duration::from_secs_f64(bytes.len() as f64 / MIN_RATE as f64);
            let by = due.min(deadline);
            let next = match tokio::time::timeout_at(by, chunks.next()).await {
                Ok(next) => next,
                Err(_) => return Err(Refused::Slow(by.saturating_duration_since(reading))),
            };
            let Some(chunk) = next else {
                return Ok(Bytes::from(bytes));
            };
            let chunk = chunk.map_err(|error| Refused::Broken(error.to_string()))?;
            if bytes.len() + chunk.len() > reserved {
                return Err(Refused::TooLarge(self.max_bytes));
            }
            bytes.extend_from_slice(&chunk);
        }
    }
}

/// The length `body` announces (its `content-length`), if any.
fn announced(body: &Body) -> Option<usize> {
    use axum::body::HttpBody as _;
    body.size_hint()
        .exact()
        .map(|length| usize::try_from(length).unwrap_or(usize::MAX))
}

/// The memory that the work behind whole bodies may take at once, across every webhook of a
/// replica: decoding, hooks, conversions. With the bodies' budgets (two of the largest of each
/// route) and what an operator holds besides, it keeps the peak under the generated
/// Deployment's 256 MiB limit.
pub const WORK_BYTES: usize = 96 * 1024 * 1024;

/// Turns at the work that whole bodies lead to, each weighed by the memory it takes: small
/// reviews go on side by side, large ones one after another.
#[derive(Clone)]
pub struct Turns {
    memory: Arc<Semaphore>,
    capacity: usize,
    metrics: Arc<Metrics>,
}

impl Turns {
    /// Turns that take at most `capacity` bytes at once; waiting for them is reported to
    /// `metrics`' readiness.
    pub fn new(capacity: usize, metrics: Arc<Metrics>) -> Self {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        Self {
            memory: Arc::new(Semaphore::new(capacity)),
            capacity,
            metrics,
        }
    }

    /// A turn at work that takes `bytes` of memory (the whole capacity at most), once the
    /// capacity has room for it, or [`Refused::Busy`] at `deadline`.
    pub async fn take(
        &self,
        bytes: usize,
        deadline: Instant,
    ) -> Result<OwnedSemaphorePermit, Refused> {
        let weight = u32::try_from(bytes.clamp(1, self.capacity)).unwrap_or(u32::MAX);
        if let Ok(turn) = Arc::clone(&self.memory).try_acquire_many_owned(weight) {
            return Ok(turn);
        }
        let started = Instant::now();
        self.metrics.webhook_waits();
        let waiting = Arc::clone(&self.memory).acquire_many_owned(weight);
        let waited = tokio::time::timeout_at(deadline, waiting).await;
        self.metrics.webhook_turn_given();
        match waited {
            Ok(Ok(turn)) => Ok(turn),
            _ => Err(Refused::Busy(deadline.saturating_duration_since(started))),
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::stream;

    use super::*;
    use crate::metrics::ReadyWhen;

    /// A body that sends `first`, then nothing, ever.
    fn stalled(first: usize) -> Body {
        let head = stream::iter([Ok::<_, std::io::Error>(Bytes::from(vec![b' '; first]))]);
        Body::from_stream(head.chain(stream::pending()))
    }

    fn soon(millis: u64) -> Instant {
        Instant::now() + Duration::from_millis(millis)
    }

    #[tokio::test]
    async fn stalled_bodies_lose_their_reservations_after_the_grace_and_a_waiting_body_is_read() {
        let bodies = Bodies::new(100, 2);
        // Two clients send part of a body of no announced length, so each reserves the cap,
        // and stall: the budget is full.
        let stalled: Vec<_> = (0..2)
            .map(|_| {
                let bodies = bodies.clone();
                tokio::spawn(async move { bodies.read(stalled(10), soon(10_000)).await.err() })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let waited = Instant::now();
        let held = bodies
            .read(Body::from(vec![b'x'; 100]), soon(3_000))
            .await
            .expect("read once the stalled ones are dropped");
        assert_eq!(held.bytes.len(), 100);
        let waited = waited.elapsed();
        assert!(waited >= GRACE / 2 && waited < GRACE * 2, "{waited:?}");
        for stalled in stalled {
            let refused = stalled.await.expect("the task");
            assert!(matches!(refused, Some(Refused::Slow(_))), "{refused:?}");
        }
    }

    #[tokio::test]
    async fn a_body_over_the_cap_is_refused_before_it_is_read_whole() {
        let bodies = Bodies::new(100, 1);
        let refused = bodies.read(stalled(101), soon(1_000)).await.err();
        assert!(
            matches!(refused, Some(Refused::TooLarge(100))),
            "{refused:?}"
        );
        let refused = bodies
            .read(Body::from(vec![0; 101]), soon(1_000))
            .await
            .err();
        assert!(
            matches!(refused, Some(Refused::TooLarge(100))),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn turns_are_weighed_by_memory_and_one_that_finds_no_room_in_time_is_refused() {
        let metrics = Arc::new(Metrics::new(ReadyWhen::WebhooksServe { watches: 0 }));
        metrics.serving();
        let turns = Turns::new(100, Arc::clone(&metrics));
        let small = turns.take(10, soon(10)).await.expect("a small turn");
        let large = turns.take(1_000, soon(50)).await.err();
        assert!(
            matches!(large, Some(Refused::Busy(_))),
            "weighed as the whole capacity: {large:?}"
        );
        let beside = turns
            .take(90, soon(10))
            .await
            .expect("room beside the small one");
        assert!(
            metrics.is_ready(),
            "one request that waited a moment is no outage"
        );
        drop((small, beside));
        assert!(turns.take(1_000, soon(10)).await.is_ok());
    }
}
