//! Who the live shards are, as the sharder sees their Leases, and a replica's own deadline.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::coordination::v1::Lease;
// Tokio's clock, which tests may pause and advance; outside them it is the monotonic clock.
use tokio::time::Instant;

use super::labels::is_label_value;

/// The longest a shard's Lease counts for, whatever duration it names: the replicas' own
/// ([`crate::settings::LEASE_SECONDS`]). The sharder cannot tell who wrote a Lease with the
/// ring's label; capped, a Lease no replica renews leaves the ring within one duration, however
/// long a duration it claims.
pub(crate) const LONGEST_LEASE: Duration = Duration::from_secs(crate::settings::LEASE_SECONDS);

/// What the sharder last saw of one shard's Lease.
#[derive(Debug, Clone, PartialEq)]
struct Observation {
    /// The Lease's version, for a takeover conditional on it.
    resource_version: String,
    holder: Option<String>,
    renewed: Option<String>,
    duration: Duration,
    /// When, on the sharder's clock, the Lease was last seen to change.
    changed: Instant,
    /// Whether the Lease has not been renewed since an outage: it is then live for two
    /// durations (see [`Membership::resync`]).
    unrenewed_since_outage: bool,
}

impl Observation {
    /// How long past `changed` the Lease is live.
    fn lifetime(&self) -> Duration {
        if self.unrenewed_since_outage {
            self.duration.saturating_mul(2)
        } else {
            self.duration
        }
    }
}

/// Which shards are live, as the sharder has seen their Leases.
///
/// A Lease counts as renewed when its renew time changes, timed on the sharder's own clock
/// (as client-go's leader election does), so no two clocks need to agree. A shard is live
/// until its Lease has gone unchanged for its duration. It is expired once the sharder has
/// also seen another Lease renewed after that: proof that the API server took renewals when
/// this one's was due, so its replica failed, not the server nor the sharder's watch. Then the
/// sharder takes the Lease over ([`Membership::expired`]), and the shard leaves the ring when
/// the Lease is gone.
///
/// An API server that was unreachable for longer than a Lease kept the replicas from renewing,
/// and must not make the sharder move every object. After such an outage,
/// [`Membership::resync`] starts every Lease's duration again, and gives it a second one for a
/// renewal that lags. A server shutting down keeps its watches open and silent while it
/// refuses the renewals: no renewal is seen then, so no Lease expires for want of news.
#[derive(Debug, Clone, Default)]
pub struct Membership {
    leases: BTreeMap<String, Observation>,
    /// When the sharder last saw a held Lease renewed (or taken): the last proof that the API
    /// server took renewals.
    last_renewal: Option<Instant>,
}

impl Membership {
    /// Records a shard's Lease as the sharder read it at `now`; the shard is the Lease's name.
    /// Whether it was renewed (or is new) since last seen.
    pub fn observe(&mut self, lease: &Lease, now: Instant) -> bool {
        // A shard's name is written as a label value; a Lease named otherwise cannot be one.
        let Some(name) = lease.metadata.name.clone().filter(|n| is_label_value(n)) else {
            return false;
        };
        let spec = lease.spec.as_ref();
        let holder = spec
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty());
        let renewed = spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.to_string());
        let seconds = spec.and_then(|s| s.lease_duration_seconds).unwrap_or(0);
        let duration = Duration::from_secs(u64::try_from(seconds).unwrap_or(0)).min(LONGEST_LEASE);
        let seen = Observation {
            resource_version: lease.metadata.resource_version.clone().unwrap_or_default(),
            holder,
            renewed,
            duration,
            changed: now,
            unrenewed_since_outage: false,
        };
        match self.leases.get_mut(&name) {
            Some(last) if last.holder == seen.holder && last.renewed == seen.renewed => {
                last.duration = seen.duration;
                last.resource_version = seen.resource_version;
                false
            }
            _ => {
                if seen.holder.is_some() {
                    self.last_renewal = Some(self.last_renewal.map_or(now, |last| last.max(now)));
                }
                self.leases.insert(name, seen);
                true
            }
        }
    }

    /// Forgets a shard whose Lease was deleted: it is gone at once.
    pub fn forget(&mut self, lease: &str) {
        self.leases.remove(lease);
    }

    /// Keeps only the Leases for which `keep` holds.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.leases.retain(|name, _| keep(name));
    }

    /// Treats every Lease that was live at `failed_at` as seen to change at `now`, and gives it
    /// two durations from then until it is renewed: after the sharder could not watch them, it
    /// cannot tell a replica that stopped renewing from one that could not reach the API server
    /// either. The second duration is for a replica whose first renewal after the outage went to
    /// a server not answering yet: it waits out its renewal's timeout and a retry, nearly a
    /// whole Lease, before it renews, while another replica may have renewed at once. A Lease
    /// already expired when the watch failed stays expired, and one seen renewed since then
    /// keeps the one duration it runs on: its replica reaches the server again.
    pub fn resync(&mut self, failed_at: Instant, now: Instant) {
        for lease in self.leases.values_mut() {
            let renewed_since = lease.changed > failed_at && !lease.unrenewed_since_outage;
            if lease.holder.is_some()
                && !renewed_since
                && failed_at.saturating_duration_since(lease.changed) < lease.lifetime()
            {
                lease.changed = now;
                lease.unrenewed_since_outage = true;
            }
        }
    }

    /// Whether `shard` is live at `now`: its Lease is held and was renewed within its
    /// duration (two, just after an outage).
    pub fn is_live(&self, shard: &str, now: Instant) -> bool {
        self.leases.get(shard).is_some_and(|lease| {
            lease.holder.is_some()
                && now.saturating_duration_since(lease.changed) < lease.lifetime()
        })
    }

    /// The live shards at `now`, by name.
    #[cfg(test)]
    pub fn live(&self, now: Instant) -> Vec<&str> {
        self.leases
            .keys()
            .filter(|shard| self.is_live(shard, now))
            .map(String::as_str)
            .collect()
    }

    /// The shards whose Lease is held, expired or not: the ring. A shard leaves it only when its
    /// Lease is deleted (by its replica, or by the sharder taking over an expired one), never
    /// on the sharder's clock alone.
    pub fn members(&self) -> Vec<&str> {
        self.leases
            .iter()
            .filter(|(_, lease)| lease.holder.is_some())
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The held Leases that expired by `now`: unrenewed for their duration, and another Lease
    /// renewed since. Each comes with the version the sharder last saw: the sharder deletes
    /// each on condition that it is still at that version, so a renewal stored in between
    /// wins, and the replica whose renewal finds its Lease gone knows it lost it.
    pub fn expired(&self, now: Instant) -> Vec<(&str, &str)> {
        self.leases
            .iter()
            .filter(|(name, lease)| {
                lease.holder.is_some()
                    && !self.is_live(name, now)
                    && self
                        .last_renewal
                        .is_some_and(|renewal| renewal >= lease.changed + lease.lifetime())
            })
            .map(|(name, lease)| (name.as_str(), lease.resource_version.as_str()))
            .collect()
    }

    /// How long the Leases' watch may stay silent while it still hears every replica: the
    /// shortest held Lease, which its replica renews within. A longer silence means nobody
    /// could renew, or the sharder could not hear them; `None` with no Lease held.
    pub fn silence_limit(&self) -> Option<Duration> {
        self.leases
            .values()
            .filter(|lease| lease.holder.is_some())
            .map(|lease| lease.duration)
            .min()
    }

    /// When the next live shard would stop being live unless renewed. It is taken over only at
    /// a later renewal of another (see [`Membership::expired`]).
    pub fn next_expiry(&self, now: Instant) -> Option<Instant> {
        self.leases
            .iter()
            .filter(|(shard, _)| self.is_live(shard, now))
            .map(|(_, lease)| lease.changed + lease.lifetime())
            .min()
    }
}

/// A replica's own deadline: it reconciles only while it holds its Lease by its own clock, and
/// stops a margin before the sharder could see the Lease expire, so that the objects moved
/// away from it are never reconciled twice at once.
///
/// The deadline runs from the moment a renewal was *sent*, which is no later than the moment
/// the API server stored it, which is no later than the moment the sharder saw it: the
/// replica's deadline comes before the sharder's by at least the margin.
#[derive(Debug, Clone)]
pub struct Fence {
    lease: Duration,
    margin: Duration,
    renewed: Option<Instant>,
}

impl Fence {
    /// The fence of a Lease held for `lease_seconds`, renewed `renewal_margin` seconds before
    /// it would expire: the fence closes halfway through that margin (at least 1 s before the
    /// end), after the renewal was due and before the Lease could expire.
    pub fn new(lease_seconds: u64, renewal_margin: u64) -> Self {
        let margin = (renewal_margin / 2).max(1).min(lease_seconds);
        Self {
            lease: Duration::from_secs(lease_seconds),
            margin: Duration::from_secs(margin),
            renewed: None,
        }
    }

    /// Records a renewal sent at `sent` that succeeded. Renewals are conditional on the Lease's
    /// version, and the sharder moves a replica's objects only after it deleted the Lease on
    /// the same condition: a renewal that succeeded proves nothing was moved, so it reopens a
    /// fence that had closed.
    pub fn renewed(&mut self, sent: Instant) {
        if self.renewed.is_none_or(|last| sent > last) {
            self.renewed = Some(sent);
        }
    }

    /// Forgets every renewal, for a replica that joins again as a new member.
    pub fn reset(&mut self) {
        self.renewed = None;
    }

    /// When this replica must have stopped reconciling, unless it renews first; `None` before
    /// its first renewal.
    pub fn deadline(&self) -> Option<Instant> {
        self.renewed
            .map(|sent| sent + self.lease.saturating_sub(self.margin))
    }

    /// Whether this replica may reconcile at `now`.
    pub fn holds(&self, now: Instant) -> bool {
        self.deadline().is_some_and(|deadline| now < deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharding::fixtures::{lease, lease_held_by};

    #[test]
    fn a_shard_is_live_until_its_lease_goes_unrenewed_for_its_duration() {
        let start = Instant::now();
        let mut members = Membership::default();
        members.observe(&lease("op-a", 100), start);
        members.observe(&lease("op-b", 100), start);
        // op-a renews at 6 s; op-b's Lease is read again, unchanged.
        let later = start + Duration::from_secs(6);
        members.observe(&lease("op-a", 106), later);
        members.observe(&lease("op-b", 100), later);
        let expired = start + Duration::from_secs(10);
        assert_eq!(members.live(expired), ["op-a"]);
        assert_eq!(
            members.next_expiry(expired),
            Some(later + Duration::from_secs(10))
        );
        assert!(members.live(later + Duration::from_secs(10)).is_empty());
    }

    #[test]
    fn a_planted_lease_that_claims_years_leaves_the_ring_once_unrenewed_for_the_replicas_duration()
    {
        let start = Instant::now();
        let mut members = Membership::default();
        let mut planted = lease("planted", 100);
        planted
            .spec
            .as_mut()
            .expect("a spec")
            .lease_duration_seconds = Some(10 * 365 * 24 * 3600);
        members.observe(&planted, start);
        members.observe(&lease("op-a", 100), start);
        let after = start + LONGEST_LEASE;
        // op-a renews; the planted Lease is never renewed.
        members.observe(&lease("op-a", 100 + 10), start + Duration::from_secs(5));
        members.observe(&lease("op-a", 100 + 15), after);
        assert_eq!(members.live(after), ["op-a"]);
        assert_eq!(
            members
                .expired(after)
                .iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>(),
            ["planted"],
            "taken over and deleted by the sharder like a failed replica's"
        );
    }

    #[test]
    fn a_lease_whose_name_cannot_be_a_label_value_is_no_shard() {
        let now = Instant::now();
        let mut members = Membership::default();
        members.observe(&lease_held_by(&"p".repeat(64), Some("p"), 100), now);
        assert!(members.live(now).is_empty());
    }

    #[test]
    fn an_expired_lease_stays_in_the_ring_until_it_is_taken_over() {
        let start = Instant::now();
        let mut members = Membership::default();
        let mut a = lease("op-a", 100);
        a.metadata.resource_version = Some("7".into());
        members.observe(&a, start);
        members.observe(&lease("op-b", 100), start);
        let expired = start + Duration::from_secs(10);
        assert!(members.expired(start).is_empty());
        assert!(
            members.expired(expired).is_empty(),
            "no renewal was seen after op-a's was due: the server may have refused them all"
        );
        members.observe(&lease("op-b", 110), expired);
        assert_eq!(members.expired(expired), [("op-a", "7")]);
        assert_eq!(
            members.members(),
            ["op-a", "op-b"],
            "until the takeover is seen"
        );
        members.forget("op-a");
        assert_eq!(members.members(), ["op-b"]);
    }

    #[test]
    fn a_released_or_deleted_lease_is_gone_at_once() {
        let start = Instant::now();
        let mut members = Membership::default();
        members.observe(&lease("op-a", 100), start);
        members.observe(&lease("op-b", 100), start);
        members.observe(&lease_held_by("op-a", None, 100), start);
        members.forget("op-b");
        assert!(members.live(start).is_empty());
        assert_eq!(members.next_expiry(start), None);
    }

    #[test]
    fn an_outage_longer_than_a_lease_expires_no_shard() {
        let start = Instant::now();
        let mut members = Membership::default();
        members.observe(&lease("op-a", 100), start);
        // The sharder could not watch for 30 s from 2 s on; nobody could renew either.
        let back = start + Duration::from_secs(30);
        members.resync(start + Duration::from_secs(2), back);
        members.observe(&lease("op-a", 100), back);
        assert_eq!(members.live(back + Duration::from_secs(19)), ["op-a"]);
        // A replica that really stopped is still found out, two durations later.
        assert!(members.live(back + Duration::from_secs(20)).is_empty());
    }

    #[test]
    fn a_lease_renewed_after_an_outage_lasts_one_duration_again() {
        let start = Instant::now();
        let mut members = Membership::default();
        members.observe(&lease("op-a", 100), start);
        let back = start + Duration::from_secs(30);
        members.resync(start + Duration::from_secs(2), back);
        assert_eq!(
            members.next_expiry(back),
            Some(back + Duration::from_secs(20))
        );
        let renewed = back + Duration::from_secs(8);
        members.observe(&lease("op-a", 138), renewed);
        assert_eq!(
            members.next_expiry(renewed),
            Some(renewed + Duration::from_secs(10))
        );
        assert!(members.live(renewed + Duration::from_secs(10)).is_empty());
    }

    #[test]
    fn a_lease_seen_renewed_since_the_outage_keeps_one_duration_through_a_later_resync() {
        let start = Instant::now();
        let mut members = Membership::default();
        for name in ["op-a", "op-b", "op-c"] {
            members.observe(&lease(name, 100), start);
        }
        let failed = start + Duration::from_secs(2);
        let back = start + Duration::from_secs(30);
        members.resync(failed, back);
        // op-b renews at once; at op-a's renewal a second later the sharder starts every Lease
        // unrenewed since the outage afresh again. op-c has not renewed: it keeps the grace.
        let renewed = back + Duration::from_secs(1);
        members.observe(&lease("op-b", 131), renewed);
        let first = back + Duration::from_secs(2);
        members.observe(&lease("op-a", 132), first);
        members.resync(failed, first);
        let one = Duration::from_secs(10);
        assert!(members.is_live("op-b", renewed + one - Duration::from_millis(1)));
        assert!(
            !members.is_live("op-b", renewed + one),
            "op-b reaches the server"
        );
        assert!(!members.is_live("op-a", first + one));
        assert!(members.is_live("op-c", first + 2 * one - Duration::from_millis(1)));
        assert!(!members.is_live("op-c", first + 2 * one));
    }

    #[test]
    fn a_replica_stops_before_the_sharder_could_see_its_lease_expire() {
        let sent = Instant::now();
        let mut fence = Fence::new(10, crate::settings::renewal_margin(10));
        assert!(!fence.holds(sent), "no renewal yet");
        fence.renewed(sent);
        // The renewal is due at 7 s; the fence closes at 9 s; the Lease ends at 10 s, from a
        // moment the sharder saw no earlier than `sent`.
        assert!(fence.holds(sent + Duration::from_secs(8)));
        assert!(!fence.holds(sent + Duration::from_secs(9)));
        let mut members = Membership::default();
        members.observe(&lease("op-a", 100), sent);
        let deadline = fence.deadline().expect("renewed");
        assert!(members.is_live("op-a", deadline));
        // An older renewal reported late does not move the deadline back.
        fence.renewed(sent - Duration::from_secs(1));
        assert_eq!(fence.deadline(), Some(deadline));
        fence.reset();
        assert!(!fence.holds(sent));
    }

    #[test]
    fn a_short_lease_still_fences_before_it_expires() {
        for lease_seconds in 3..=60 {
            let margin = crate::settings::renewal_margin(lease_seconds);
            let mut fence = Fence::new(lease_seconds, margin);
            let sent = Instant::now();
            fence.renewed(sent);
            let open = fence.deadline().expect("renewed") - sent;
            let lease = Duration::from_secs(lease_seconds);
            let due = Duration::from_secs(lease_seconds - margin);
            assert!(open < lease, "{lease_seconds} s: fence at {open:?}");
            assert!(
                open > due,
                "{lease_seconds} s: fence at {open:?}, renewal at {due:?}"
            );
        }
    }
}
