//! How a failed watch is retried: quickly, so that an operator is current again within seconds
//! of its API server coming back.
//!
//! kube's default grows to 30 s while the API server is down, so an operator could wait that
//! long after the server is back. Here the delay doubles from 500 ms to a cap of 5 s, and each
//! is drawn between half of it and all of it, so that replicas and their watches spread out
//! rather than retry in step. What that costs a struggling API server: each watch asks again at
//! most once every 2.5 s, so an operator with `n` watches sends at most `n / 2.5` requests a
//! second while the server fails them.
//!
//! A watch the API server ends with 410 Gone (its resourceVersion too old, as after a restart)
//! is listed again at once: the failure is the server's answer, not its trouble, and kube's
//! own `StreamBackoff` would wait a delay for it. [`RetryExt::retried`] tells the two apart.

use std::{
    collections::hash_map::RandomState,
    hash::{BuildHasher, Hasher},
    pin::Pin,
    task::{Context, Poll, ready},
    time::Duration,
};

use futures::Stream;
use kube::runtime::{utils::Backoff, watcher};

/// The first delay after a watch fails.
pub const FIRST: Duration = Duration::from_millis(500);

/// The longest delay between two attempts.
pub const CAP: Duration = Duration::from_secs(5);

/// The delays between a watch's retries: doubling from [`FIRST`] to [`CAP`], jittered, and
/// back to [`FIRST`] once the API server answers the watch again ([`RetryExt::retried`] resets
/// it on any event but the watcher's own `Init`).
#[derive(Debug, Default)]
pub struct WatchBackoff {
    failures: u32,
    /// The source of jitter: a fresh random key per process, hashed with a counter.
    random: RandomState,
    draws: u64,
}

impl WatchBackoff {
    /// The delay before the next attempt after `failures` failures in a row, before jitter.
    fn ceiling(failures: u32) -> Duration {
        FIRST
            .checked_mul(2u32.saturating_pow(failures))
            .map_or(CAP, |delay| delay.min(CAP))
    }

    /// A number in `[0, 1)`, different at each draw.
    fn fraction(&mut self) -> f64 {
        let mut hasher = self.random.build_hasher();
        hasher.write_u64(self.draws);
        self.draws = self.draws.wrapping_add(1);
        (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    /// Never ends: a watch is retried for as long as the operator runs.
    fn next(&mut self) -> Option<Duration> {
        let ceiling = Self::ceiling(self.failures);
        self.failures = self.failures.saturating_add(1);
        let jitter = self.fraction();
        Some(ceiling.mul_f64(0.5 + jitter / 2.0))
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// The backoff for a watch of an operator, as [`RetryExt::retried`] uses it.
pub fn watch() -> WatchBackoff {
    WatchBackoff::default()
}

/// The backoff for a kube `Controller`'s trigger streams as a whole
/// (`Controller::trigger_backoff`): none. kube's default waits, client-go style, from 800 ms
/// up to 30 s after any error of any watch, and pauses every trigger meanwhile; here each
/// watch has already waited its own delay in [`RetryExt::retried`], so the controller adds
/// nothing.
pub fn triggers() -> NoDelay {
    NoDelay
}

/// A backoff that never waits: see [`triggers`].
#[derive(Debug, Default, Clone, Copy)]
pub struct NoDelay;

impl Iterator for NoDelay {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

impl Backoff for NoDelay {
    fn reset(&mut self) {}
}

/// Whether a watch failed because its resourceVersion expired (410 Gone): the watcher lists
/// again on its next poll, which needs no wait.
pub fn expired(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchError(status) if status.code == 410)
}

/// A watch stream retried with `WatchBackoff`, and at once after a 410 Gone.
pub trait RetryExt<K>: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Sized {
    /// `watcher(api, config).retried()`: in place of kube's `.backoff(...)`.
    fn retried(self) -> Retried<Self> {
        Retried {
            inner: Box::pin(self),
            backoff: watch(),
            sleep: None,
            expired_last: false,
        }
    }
}

impl<K, S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>> RetryExt<K> for S {}

/// The stream [`RetryExt::retried`] returns: the watch's items, each error followed by a delay
/// before the next poll, except the first 410 Gone in a row.
pub struct Retried<S> {
    inner: Pin<Box<S>>,
    backoff: WatchBackoff,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether the last failure was a 410 and nothing came through since: a relist that
    /// meets another one waits, so that a server answering 410 to every list is not asked
    /// in a tight loop.
    expired_last: bool,
}

impl<K, S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>> Stream for Retried<S> {
    type Item = Result<watcher::Event<K>, watcher::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(sleep) = self.sleep.as_mut() {
            ready!(sleep.as_mut().poll(cx));
            self.sleep = None;
        }
        let item = ready!(self.inner.as_mut().poll_next(cx));
        match &item {
            // The watcher says `Init` before it asks anything, also after each failure, so
            // only what the API server answered proves it back.
            Some(Ok(watcher::Event::Init)) | None => {}
            Some(Ok(_)) => {
                self.backoff.reset();
                self.expired_last = false;
            }
            Some(Err(error)) => {
                let at_once = expired(error) && !self.expired_last;
                self.expired_last = expired(error);
                if !at_once {
                    let delay = self.backoff.next().unwrap_or(CAP);
                    self.sleep = Some(Box::pin(tokio::time::sleep(delay)));
                }
            }
        }
        Poll::Ready(item)
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    #[test]
    fn delays_double_from_half_a_second_to_a_cap_of_five_seconds_jittered() {
        let ceilings: Vec<Duration> = (0..8).map(WatchBackoff::ceiling).collect();
        let expected = [500, 1000, 2000, 4000, 5000, 5000, 5000, 5000].map(Duration::from_millis);
        assert_eq!(ceilings, expected);
        let mut backoff = watch();
        for (ceiling, delay) in expected.iter().zip(backoff.by_ref()) {
            assert!(
                delay <= *ceiling && delay >= *ceiling / 2,
                "{delay:?} for {ceiling:?}"
            );
        }
        let later: Vec<Duration> = backoff.take(100).collect();
        assert!(later.iter().all(|delay| *delay <= CAP && *delay >= CAP / 2));
        let first = later[0];
        assert!(
            later.iter().any(|delay| *delay != first),
            "jittered: {later:?}"
        );
    }

    #[test]
    fn a_reset_starts_again_from_the_first_delay() {
        let mut backoff = watch();
        backoff.by_ref().take(10).for_each(drop);
        backoff.reset();
        let delay = backoff.next().expect("never ends");
        assert!(delay <= FIRST, "{delay:?}");
    }

    fn gone() -> watcher::Error {
        let status = kube::core::Status::failure("too old resource version", "Expired");
        watcher::Error::WatchError(status.with_code(410).boxed())
    }

    fn refused() -> watcher::Error {
        watcher::Error::NoResourceVersion
    }

    type Item = Result<watcher::Event<u32>, watcher::Error>;

    fn event(n: u32) -> Item {
        Ok(watcher::Event::Apply(n))
    }

    /// How long `items`, as a watch stream, takes to read through [`RetryExt::retried`].
    async fn time_to_read(items: Vec<Item>) -> Duration {
        let started = tokio::time::Instant::now();
        let read: Vec<_> = futures::stream::iter(items).retried().collect().await;
        assert!(!read.is_empty());
        started.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn a_410_gone_is_relisted_without_a_wait() {
        assert!(expired(&gone()) && !expired(&refused()));
        let waited = time_to_read(vec![event(1), Err(gone()), event(2)]).await;
        assert_eq!(waited, Duration::ZERO, "no delay after the watch expired");
        let waited = time_to_read(vec![event(1), Err(refused()), event(2)]).await;
        assert!(waited >= FIRST / 2, "any other failure waits: {waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_410_after_a_410_waits_so_a_server_answering_only_410_is_not_hammered() {
        let relists = vec![
            Err(gone()),
            Ok(watcher::Event::Init),
            Err(gone()),
            Ok(watcher::Event::Init),
            Err(gone()),
            event(1),
        ];
        let waited = time_to_read(relists).await;
        assert!(
            waited >= FIRST / 2 && waited <= FIRST + FIRST * 2,
            "the first 410 is free, the next two wait: {waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retried_failures_wait_within_the_cap_and_reset_after_an_event() {
        // As the watcher yields them: `Init` before every list, which fails until it answers.
        let failures = (0..6).flat_map(|_| [Ok(watcher::Event::Init), Err(refused())]);
        let items: Vec<_> = failures
            .chain([event(1), Err(refused()), event(2)])
            .collect();
        let waited = time_to_read(items).await;
        let most = Duration::from_millis(500 + 1000 + 2000 + 4000 + 5000 + 5000 + 500);
        assert!(waited <= most && waited >= most / 2, "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_controller_adds_no_wait_of_its_own_to_retried_watches() {
        use kube::runtime::WatchStreamExt;
        let started = tokio::time::Instant::now();
        let items: Vec<_> = futures::stream::iter(vec![event(1), Err(gone()), event(2)])
            .retried()
            .backoff(triggers())
            .collect()
            .await;
        assert_eq!(items.len(), 3);
        assert_eq!(started.elapsed(), Duration::ZERO, "neither layer waited");
    }
}
