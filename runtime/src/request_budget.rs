//! What a webhook request may take of a replica, whoever sends it: memory for its body, time,
//! and a turn at the work that needs memory beyond the body.
//!
//! A body is read under a byte budget shared by every request of its route ([`Bodies`]). It
//! holds only the bytes that have arrived, so a client that opens a request and sends nothing
//! holds nothing, and it must arrive at [`MIN_RATE`] after a second's grace from the request's
//! start: holding part of the budget costs a client the bandwidth of sending it. A body's
//! announced length is not reserved: a client that announced the largest body and sent one
//! byte would hold all of it for the grace, and two such requests a second would hold the
//! whole budget. When the budget is short, bodies wait for it oldest first, within their rate
//! deadline; a younger body that waits while it holds bytes an older one waits for gives them
//! up and is refused, so no two half-read bodies wait on each other. Only a whole body waits
//! for a turn ([`Turns`]), so a stalled client never holds one: the turns bound the memory
//! that decoding, hooks and conversions take beyond the bodies, and the budget bounds the
//! bodies. A request that finds no turn within its deadline is refused, and the replica turns
//! unready while requests wait and none is given a turn (see [`Metrics::webhook_waits`]).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    http::StatusCode,
    response::{IntoResponse as _, Response},
};
use futures::StreamExt as _;
use tokio::{
    sync::{Notify, OwnedSemaphorePermit, Semaphore},
    time::Instant,
};

use crate::{metrics::Metrics, webhook_server::Outcome};

/// How fast a body must arrive, after [`GRACE`]: far below what the API server sends at, even
/// across zones, and far above a client that sends a byte now and then.
pub const MIN_RATE: u64 = 1024 * 1024;

/// How long a body may take to start arriving, from the request's start, before [`MIN_RATE`]
/// applies.
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
    /// An older body needed the bytes this one held while it waited for more.
    #[error("the webhook is busy: an older request needed the {0} bytes this one had read")]
    Outwaited(usize),
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
            Refused::Busy(_) | Refused::Outwaited(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, Outcome::Failed)
            }
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
    budget: Arc<Budget>,
    max_bytes: usize,
}

/// The bytes that the bodies being read and held may take at once, given as they arrive.
struct Budget {
    ledger: Mutex<Ledger>,
    /// Woken when bytes are given back or a body starts or stops waiting.
    changed: Notify,
}

/// What is left of a [`Budget`], and who waits for it, by age.
struct Ledger {
    available: usize,
    /// The next body's place: a lower place is an older body.
    next: u64,
    /// The bodies waiting for bytes: their place, and how many they wait for.
    waiting: BTreeMap<u64, usize>,
}

/// What the ledger says to a body that asks for more bytes.
enum Answer {
    Given,
    /// Wait; `first` when the body was not waiting before, so that the younger ones holding
    /// bytes learn of it.
    Wait {
        first: bool,
    },
    /// An older body waits for more than is left, and this one holds bytes: it gives them up.
    GiveUp,
}

impl Ledger {
    /// Gives `wanted` bytes to the body at `place`, which holds `held`, if none older waits.
    fn ask(&mut self, place: u64, wanted: usize, held: usize) -> Answer {
        let older_short = self
            .waiting
            .range(..place)
            .any(|(_, &needs)| needs > self.available);
        let older = self.waiting.range(..place).next().is_some();
        if !older && wanted <= self.available {
            self.waiting.remove(&place);
            self.available -= wanted;
            Answer::Given
        } else if older_short && held > 0 {
            self.waiting.remove(&place);
            Answer::GiveUp
        } else {
            let first = self.waiting.insert(place, wanted).is_none();
            Answer::Wait { first }
        }
    }
}

impl Budget {
    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        // The ledger is left consistent at every step, so a panic elsewhere cannot spoil it.
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A body's share of the [`Budget`] while it is read: the bytes it has taken, given back, and
/// its place in line given up, when it is dropped.
struct Share {
    budget: Arc<Budget>,
    place: u64,
    held: usize,
}

impl Share {
    /// A share of nothing yet, in line behind every body before it.
    fn new(budget: &Arc<Budget>) -> Self {
        let place = {
            let mut ledger = budget.ledger();
            ledger.next += 1;
            ledger.next
        };
        Self {
            budget: Arc::clone(budget),
            place,
            held: 0,
        }
    }

    /// Takes `wanted` more bytes, waiting for them oldest body first until `by`.
    async fn grow(&mut self, wanted: usize, by: Instant) -> Result<(), Refused> {
        let started = Instant::now();
        loop {
            let changed = self.budget.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let answer = self.budget.ledger().ask(self.place, wanted, self.held);
            match answer {
                Answer::Given => {
                    self.held += wanted;
                    return Ok(());
                }
                // Dropping the share gives the bytes back and wakes the older body.
                Answer::GiveUp => return Err(Refused::Outwaited(self.held)),
                // Younger bodies that hold bytes must see that this one waits.
                Answer::Wait { first: true } => self.budget.changed.notify_waiters(),
                Answer::Wait { first: false } => {}
            }
            if tokio::time::timeout_at(by, changed).await.is_err() {
                return Err(Refused::Slow(by.saturating_duration_since(started)));
            }
        }
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut ledger = self.budget.ledger();
        ledger.available += self.held;
        ledger.waiting.remove(&self.place);
        drop(ledger);
        self.budget.changed.notify_waiters();
    }
}

/// A body read whole, holding its bytes of the budget until it is dropped.
pub struct Held {
    /// The body.
    pub bytes: Bytes,
    _share: Share,
}

impl Bodies {
    /// Bodies of at most `max_bytes`, `at_once` of the largest held at a time.
    pub fn new(max_bytes: usize, at_once: usize) -> Self {
        let ledger = Ledger {
            available: max_bytes.saturating_mul(at_once.max(1)),
            next: 0,
            waiting: BTreeMap::new(),
        };
        Self {
            budget: Arc::new(Budget {
                ledger: Mutex::new(ledger),
                changed: Notify::new(),
            }),
            max_bytes,
        }
    }

    /// Reads `body` whole by `deadline`, each chunk once the budget has room for it, at
    /// [`MIN_RATE`] after [`GRACE`] from now. A body announced or found larger than
    /// `max_bytes` is refused at once.
    pub async fn read(&self, body: Body, deadline: Instant) -> Result<Held, Refused> {
        let started = Instant::now();
        let announced = announced(&body);
        if announced.is_some_and(|length| length > self.max_bytes) {
            return Err(Refused::TooLarge(self.max_bytes));
        }
        let mut share = Share::new(&self.budget);
        let mut chunks = body.into_data_stream();
        // Capacity is address space until it is written, so the announced length costs no
        // memory before its bytes arrive.
        let mut bytes = Vec::with_capacity(announced.unwrap_or(0));
        loop {
            let due =
                started + GRACE + Duration::from_secs_f64(bytes.len() as f64 / MIN_RATE as f64);
            let by = due.min(deadline);
            let next = match tokio::time::timeout_at(by, chunks.next()).await {
                Ok(next) => next,
                Err(_) => return Err(Refused::Slow(by.saturating_duration_since(started))),
            };
            let Some(chunk) = next else {
                return Ok(Held {
                    bytes: Bytes::from(bytes),
                    _share: share,
                });
            };
            let chunk = chunk.map_err(|error| Refused::Broken(error.to_string()))?;
            if bytes.len() + chunk.len() > self.max_bytes {
                return Err(Refused::TooLarge(self.max_bytes));
            }
            if !chunk.is_empty() {
                share.grow(chunk.len(), by).await?;
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

    /// A body that sends `first`, waits `pause`, then sends `then` and ends.
    fn paused(first: usize, pause: Duration, then: usize) -> Body {
        let head = stream::iter([Ok::<_, std::io::Error>(Bytes::from(vec![b' '; first]))]);
        let tail = stream::once(async move {
            tokio::time::sleep(pause).await;
            Ok(Bytes::from(vec![b' '; then]))
        });
        Body::from_stream(head.chain(tail))
    }

    /// [`paused`], announcing its length as a `content-length` does.
    fn announced_paused(first: usize, pause: Duration, then: usize) -> Body {
        use std::{
            pin::Pin,
            task::{Context, Poll},
        };

        use hyper::body::{Frame, SizeHint};

        struct Announced {
            body: Body,
            length: u64,
        }
        impl hyper::body::Body for Announced {
            type Data = Bytes;
            type Error = axum::Error;
            fn poll_frame(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
                Pin::new(&mut self.get_mut().body).poll_frame(cx)
            }
            fn size_hint(&self) -> SizeHint {
                SizeHint::with_exact(self.length)
            }
        }
        Body::new(Announced {
            body: paused(first, pause, then),
            length: (first + then) as u64,
        })
    }

    /// Starts reading `body` from `bodies` in a task, as a request of its own.
    fn reading(bodies: &Bodies, body: Body) -> tokio::task::JoinHandle<Result<usize, Refused>> {
        let bodies = bodies.clone();
        tokio::spawn(async move {
            let held = bodies.read(body, soon(10_000)).await?;
            Ok(held.bytes.len())
        })
    }

    #[tokio::test(start_paused = true)]
    async fn requests_that_send_nothing_hold_nothing_and_a_body_beside_them_is_read_at_once() {
        let bodies = Bodies::new(100, 1);
        // Chunked requests that never send a chunk: before, each reserved the whole cap.
        let silent: Vec<_> = (0..8).map(|_| reading(&bodies, stalled(0))).collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let waited = Instant::now();
        let held = bodies
            .read(Body::from(vec![b'x'; 100]), soon(3_000))
            .await
            .expect("read beside the silent ones");
        assert_eq!(held.bytes.len(), 100);
        assert_eq!(waited.elapsed(), Duration::ZERO, "it waited for nothing");
        drop(held);
        for silent in silent {
            let refused = silent.await.expect("the task");
            assert!(matches!(refused, Err(Refused::Slow(_))), "{refused:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn stalled_bodies_hold_what_they_sent_until_the_grace_from_their_request_ends() {
        let bodies = Bodies::new(100, 1);
        let started = Instant::now();
        let stalled: Vec<_> = (0..2).map(|_| reading(&bodies, stalled(40))).collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let held = bodies
            .read(Body::from(vec![b'x'; 100]), soon(3_000))
            .await
            .expect("read once the stalled ones are dropped");
        assert_eq!(held.bytes.len(), 100);
        let waited = started.elapsed();
        assert!(
            waited >= GRACE && waited < GRACE + Duration::from_millis(50),
            "dropped a grace after they began, not a grace after they held bytes: {waited:?}"
        );
        for stalled in stalled {
            let refused = stalled.await.expect("the task");
            assert!(matches!(refused, Err(Refused::Slow(_))), "{refused:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn two_half_read_bodies_do_not_wait_on_each_other_and_the_older_is_read() {
        let bodies = Bodies::new(100, 1);
        let pause = Duration::from_millis(100);
        let started = Instant::now();
        let older = reading(&bodies, paused(50, pause, 50));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let younger = reading(&bodies, paused(50, pause, 50));
        let older = older.await.expect("the task");
        assert!(matches!(older, Ok(100)), "{older:?}");
        let younger = younger.await.expect("the task");
        assert!(
            matches!(younger, Err(Refused::Outwaited(50))),
            "{younger:?}"
        );
        assert!(started.elapsed() < GRACE, "{:?}", started.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_announces_the_largest_length_and_sends_a_byte_holds_a_byte() {
        let bodies = Bodies::new(100, 1);
        // Announces 100 bytes, sends 1, then waits out its grace.
        let announcing = reading(&bodies, announced_paused(1, GRACE * 5, 99));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let waited = Instant::now();
        let held = bodies
            .read(Body::from(vec![b'x'; 99]), soon(3_000))
            .await
            .expect("read beside the one that sent a byte");
        assert_eq!(held.bytes.len(), 99);
        assert_eq!(
            waited.elapsed(),
            Duration::ZERO,
            "its announced length was not reserved"
        );
        drop(held);
        let refused = announcing.await.expect("the task");
        assert!(matches!(refused, Err(Refused::Slow(_))), "{refused:?}");
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
