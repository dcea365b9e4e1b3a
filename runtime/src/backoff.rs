//! How a failed watch is retried: quickly, so that an operator is current again within seconds
//! of its API server coming back.
//!
//! kube's default grows to 30 s while the API server is down, so an operator could wait that
//! long after the server is back. Here the delay doubles from 500 ms to a cap of 5 s, and each
//! is drawn between half of it and all of it, so that replicas and their watches spread out
//! rather than retry in step. What that costs a struggling API server: each watch asks again at
//! most once every 2.5 s, so an operator with `n` watches sends at most `n / 2.5` requests a
//! second while the server fails them.

use std::{
    collections::hash_map::RandomState,
    hash::{BuildHasher, Hasher},
    time::Duration,
};

use kube::runtime::utils::Backoff;

/// The first delay after a watch fails.
pub const FIRST: Duration = Duration::from_millis(500);

/// The longest delay between two attempts.
pub const CAP: Duration = Duration::from_secs(5);

/// The delays between a watch's retries: doubling from [`FIRST`] to [`CAP`], jittered, and
/// back to [`FIRST`] once the watch yields anything again (kube's `StreamBackoff` resets it).
///
/// ```
/// use operator_gen_runtime::backoff::{CAP, WatchBackoff};
///
/// let delays: Vec<_> = WatchBackoff::default().take(10).collect();
/// assert!(delays.iter().all(|delay| *delay <= CAP));
/// ```
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

/// The backoff for every watch of an operator: `watcher(...).backoff(backoff::watch())`.
pub fn watch() -> WatchBackoff {
    WatchBackoff::default()
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use kube::runtime::WatchStreamExt;

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

    #[tokio::test(start_paused = true)]
    async fn a_stream_of_failures_is_retried_within_the_cap_and_recovers_at_once() {
        let failures = (0..6).map(|_| Err::<u32, &str>("the API server is down"));
        let stream = futures::stream::iter(failures.chain([Ok(1), Err("again"), Ok(2)]));
        let started = tokio::time::Instant::now();
        let items: Vec<_> = stream.backoff(watch()).collect().await;
        let waited = started.elapsed();
        assert_eq!(items.len(), 9);
        // Six failures wait at most 0.5 + 1 + 2 + 4 + 5 + 5 s, and the failure after a
        // success at most the first delay again.
        let most = Duration::from_millis(500 + 1000 + 2000 + 4000 + 5000 + 5000 + 500);
        assert!(waited <= most, "{waited:?}");
        assert!(waited >= most / 2, "{waited:?}");
    }
}
