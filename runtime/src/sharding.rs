//! Sharding: several replicas reconcile at once, each its own share of the objects.
//!
//! The design is the label design of timebertt/kubernetes-controller-sharding, written for
//! kube-rs:
//! - **Membership.** Each replica holds a Lease of its own, named by its pod and labelled
//!   [`RING_LABEL`]` = <operator>`. A replica is a live shard while the sharder sees its Lease
//!   renewed ([`Membership`]), and it stops reconciling before its Lease could expire
//!   ([`Fence`]).
//! - **Assignment.** One actor, the sharder (the leader of the usual election), gives every
//!   primary to a live shard by consistent hashing ([`Ring`]) and writes that shard's name as
//!   the object's [`Labels::shard`] label; children carry their owner's label, set when they
//!   are applied. Each replica watches only objects that carry its own name.
//! - **Rebalancing.** An object whose shard is still live but no longer its shard on the ring
//!   is first marked with [`Labels::drain`]. Its replica acknowledges that inside a reconcile
//!   (so never while one is in flight) by removing both labels, and only then does the sharder
//!   assign it again: no object is ever reconciled by two replicas at once. An object of a
//!   shard that is gone needs no handshake, because that replica fenced itself first.
//!
//! Everything here is a pure decision over what the API server said; the watches and writes
//! around it take the [`Assignment`] trait, so that a server-side filter (Kubernetes 1.36's
//! sharded list and watch) can replace the labels later.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::{Value, json};
use xxhash_rust::xxh64::Xxh64;

/// How many points each shard takes on the ring, as in the reference design: three shards
/// each took between 30% and 38% of 10,000 names, ten between 8% and 12%.
pub const VIRTUAL_NODES: u32 = 100;

/// The label on every shard's Lease naming the operator (the ring) it is a member of; the
/// sharder lists Leases by it.
pub const RING_LABEL: &str = "sharding.operator-gen.io/ring";

/// Why a sharding setting is unusable.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A ring's name must be a DNS label, because it becomes the name part of label keys.
    #[error(
        "sharding ring {0:?} is not a DNS label (at most 63 lower-case letters, digits and '-', \
         starting and ending with a letter or digit); name the operator so"
    )]
    RingName(String),
}

/// What identifies an object to the assignment: its group, kind, namespace and name. A child
/// is assigned with its controller owner's key, so it lands where its owner does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectKey<'a> {
    /// The API group; empty for the core group.
    pub group: &'a str,
    /// The kind.
    pub kind: &'a str,
    /// The namespace; `None` for a cluster-scoped object.
    pub namespace: Option<&'a str>,
    /// The name.
    pub name: &'a str,
}

impl ObjectKey<'_> {
    /// Where the key falls on the ring. The parts are separated by a byte that no group, kind,
    /// namespace or name may contain, so two different keys never hash the same text.
    fn point(&self) -> u64 {
        let mut hasher = Xxh64::new(0);
        for part in [
            self.group,
            self.kind,
            self.namespace.unwrap_or(""),
            self.name,
        ] {
            hasher.update(part.as_bytes());
            hasher.update(&[0]);
        }
        hasher.digest()
    }
}

/// Which shard an object belongs to. The label design implements it with a [`Ring`] over the
/// live shards; a server-side filter would implement it with the server's own assignment.
pub trait Assignment {
    /// The shard that should reconcile the object, or `None` when there is no live shard.
    fn shard_for(&self, key: &ObjectKey<'_>) -> Option<&str>;
}

/// Consistent hashing over a set of shards: [`VIRTUAL_NODES`] points per shard on a 64-bit
/// ring, and each object goes to the first point at or after its own. A shard that joins or
/// leaves moves only the objects between its points and their neighbours.
#[derive(Debug, Clone, Default)]
pub struct Ring {
    shards: Vec<String>,
    /// Each point with the index of its shard in `shards`, in ring order.
    points: Vec<(u64, usize)>,
}

impl Ring {
    /// The ring over `shards`; duplicates count once, and the order they come in does not
    /// matter.
    pub fn new<I, S>(shards: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let shards: Vec<String> = shards
            .into_iter()
            .map(Into::into)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut points: Vec<(u64, usize)> = shards
            .iter()
            .enumerate()
            .flat_map(|(index, shard)| {
                (0..VIRTUAL_NODES).map(move |node| {
                    let mut hasher = Xxh64::new(0);
                    hasher.update(shard.as_bytes());
                    hasher.update(&[0]);
                    hasher.update(&node.to_le_bytes());
                    (hasher.digest(), index)
                })
            })
            .collect();
        // Ties between shards (vanishingly rare) are broken by name, so every replica's ring
        // agrees.
        points.sort_unstable();
        Self { shards, points }
    }

    /// The shards on the ring, by name.
    pub fn shards(&self) -> &[String] {
        &self.shards
    }
}

impl Assignment for Ring {
    fn shard_for(&self, key: &ObjectKey<'_>) -> Option<&str> {
        let point = key.point();
        let at = self.points.partition_point(|&(p, _)| p < point);
        let (_, shard) = self.points.get(at).or_else(|| self.points.first())?;
        Some(&self.shards[*shard])
    }
}

/// The label keys of one ring: which shard an object belongs to, and whether it is being
/// drained from it. Keyed by the operator, so that two sharded operators that reconcile the
/// same objects do not read each other's labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    shard: String,
    drain: String,
}

impl Labels {
    /// The labels of the ring named `ring` (the operator's name).
    pub fn new(ring: &str) -> Result<Self, Error> {
        if !is_dns_label(ring) {
            return Err(Error::RingName(ring.to_owned()));
        }
        Ok(Self {
            shard: format!("shard.operator-gen.io/{ring}"),
            drain: format!("drain.operator-gen.io/{ring}"),
        })
    }

    /// The key of the label whose value names the object's shard.
    pub fn shard(&self) -> &str {
        &self.shard
    }

    /// The key of the label that asks the object's shard to let it go.
    pub fn drain(&self) -> &str {
        &self.drain
    }

    /// Whether an object with `labels` is being drained from its shard: its replica should
    /// acknowledge in its next reconcile, with [`Labels::acknowledge`], instead of reconciling.
    pub fn drain_requested(&self, labels: &BTreeMap<String, String>) -> bool {
        labels.contains_key(&self.drain)
    }

    /// The merge patch by which a replica lets go of a drained object: both labels removed,
    /// on condition that the object is still at `resource_version`.
    pub fn acknowledge(&self, resource_version: &str) -> Value {
        json!({"metadata": {
            "resourceVersion": resource_version,
            "labels": {&self.shard: null, &self.drain: null},
        }})
    }
}

/// A DNS-1123 label: what Kubernetes accepts as the name part of a label key.
fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
}

/// What the sharder does with one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: the object is where it belongs, its drain is not yet acknowledged, or no shard
    /// is live to take it.
    Keep,
    /// Give the object to this shard (and clear any drain of a shard that is gone).
    Assign(String),
    /// Ask the object's live shard to let it go.
    Drain,
}

impl Decision {
    /// What the sharder decides for an object carrying `labels`, given where `assignment` puts
    /// `key` and whether a shard is `live`.
    pub fn for_object(
        names: &Labels,
        labels: &BTreeMap<String, String>,
        key: &ObjectKey<'_>,
        assignment: &impl Assignment,
        live: impl Fn(&str) -> bool,
    ) -> Self {
        // With no live shard (every replica gone, or the sharder's view of them stale),
        // assignments stay as they are rather than being cleared.
        let Some(desired) = assignment.shard_for(key) else {
            return Self::Keep;
        };
        let current = labels.get(names.shard()).map(String::as_str);
        match current {
            None => Self::Assign(desired.to_owned()),
            Some(shard) if !live(shard) => Self::Assign(desired.to_owned()),
            Some(_) if names.drain_requested(labels) => Self::Keep,
            Some(shard) if shard == desired => Self::Keep,
            Some(_) => Self::Drain,
        }
    }

    /// The merge patch that carries the decision out, on condition that the object is still
    /// at `resource_version` (a reconcile that acknowledged a drain in between wins); `None`
    /// for [`Decision::Keep`].
    pub fn patch(&self, names: &Labels, resource_version: &str) -> Option<Value> {
        let labels = match self {
            Self::Keep => return None,
            Self::Assign(shard) => json!({names.shard(): shard, names.drain(): null}),
            Self::Drain => json!({names.drain(): "true"}),
        };
        Some(json!({"metadata": {"resourceVersion": resource_version, "labels": labels}}))
    }
}

/// What the sharder last saw of one shard's Lease.
#[derive(Debug, Clone, PartialEq)]
struct Observation {
    holder: Option<String>,
    renewed: Option<String>,
    duration: Duration,
    /// When, on the sharder's clock, the Lease was last seen to change.
    changed: Instant,
}

/// Which shards are live, as the sharder has seen their Leases.
///
/// A Lease counts as renewed when its renew time changes, timed on the sharder's own clock
/// (as client-go's leader election does), so no two clocks need to agree. A shard is live
/// until its Lease has gone unchanged for its duration. After an outage, [`Membership::resync`]
/// starts every Lease's duration again: an API server that was unreachable for longer than a
/// Lease kept the replicas from renewing, and must not make the sharder move every object.
#[derive(Debug, Clone, Default)]
pub struct Membership {
    leases: BTreeMap<String, Observation>,
}

impl Membership {
    /// Records a shard's Lease as the sharder read it at `now`; the shard is the Lease's name.
    pub fn observe(&mut self, lease: &Lease, now: Instant) {
        let Some(name) = lease.metadata.name.clone() else {
            return;
        };
        let spec = lease.spec.as_ref();
        let holder = spec
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty());
        let renewed = spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.to_string());
        let seconds = spec.and_then(|s| s.lease_duration_seconds).unwrap_or(0);
        let duration = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
        let seen = Observation {
            holder,
            renewed,
            duration,
            changed: now,
        };
        match self.leases.get_mut(&name) {
            Some(last) if last.holder == seen.holder && last.renewed == seen.renewed => {
                last.duration = seen.duration;
            }
            _ => {
                self.leases.insert(name, seen);
            }
        }
    }

    /// Forgets a shard whose Lease was deleted: it is gone at once.
    pub fn forget(&mut self, lease: &str) {
        self.leases.remove(lease);
    }

    /// Treats every Lease as seen to change at `now`: after the sharder could not watch them,
    /// it cannot tell a replica that stopped renewing from one that could not reach the API
    /// server either.
    pub fn resync(&mut self, now: Instant) {
        for lease in self.leases.values_mut() {
            lease.changed = now;
        }
    }

    /// Whether `shard` is live at `now`: its Lease is held and was renewed within its
    /// duration.
    pub fn is_live(&self, shard: &str, now: Instant) -> bool {
        self.leases.get(shard).is_some_and(|lease| {
            lease.holder.is_some() && now.saturating_duration_since(lease.changed) < lease.duration
        })
    }

    /// The live shards at `now`, by name.
    pub fn live(&self, now: Instant) -> Vec<&str> {
        self.leases
            .keys()
            .filter(|shard| self.is_live(shard, now))
            .map(String::as_str)
            .collect()
    }

    /// When the next live shard would expire unless renewed: when the sharder should look
    /// again without a new event.
    pub fn next_expiry(&self, now: Instant) -> Option<Instant> {
        self.leases
            .iter()
            .filter(|(shard, _)| self.is_live(shard, now))
            .map(|(_, lease)| lease.changed + lease.duration)
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

    /// Records a renewal that succeeded, sent at `sent`.
    pub fn renewed(&mut self, sent: Instant) {
        if self.renewed.is_none_or(|last| sent > last) {
            self.renewed = Some(sent);
        }
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
    use k8s_openapi::{
        api::coordination::v1::LeaseSpec,
        apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
        jiff::Timestamp,
    };

    use super::*;

    fn key(name: &str) -> ObjectKey<'_> {
        ObjectKey {
            group: "example.com",
            kind: "Widget",
            namespace: Some("default"),
            name,
        }
    }

    fn names(count: usize) -> Vec<String> {
        (0..count).map(|i| format!("widget-{i}")).collect()
    }

    fn assign_all<'r>(ring: &'r Ring, objects: &[String]) -> Vec<&'r str> {
        objects
            .iter()
            .map(|name| ring.shard_for(&key(name)).expect("a live shard"))
            .collect()
    }

    #[test]
    fn a_ring_is_the_same_whatever_order_its_shards_come_in() {
        let objects = names(1_000);
        let one = Ring::new(["op-a", "op-b", "op-c"]);
        let other = Ring::new(["op-c", "op-a", "op-b", "op-a"]);
        assert_eq!(other.shards(), ["op-a", "op-b", "op-c"]);
        assert_eq!(assign_all(&one, &objects), assign_all(&other, &objects));
    }

    #[test]
    fn an_empty_ring_assigns_nothing() {
        assert_eq!(Ring::default().shard_for(&key("w")), None);
    }

    #[test]
    fn three_shards_each_get_a_fair_share() {
        let objects = names(10_000);
        let ring = Ring::new(["op-a", "op-b", "op-c"]);
        let assigned = assign_all(&ring, &objects);
        for shard in ring.shards() {
            let share = assigned.iter().filter(|s| **s == shard).count();
            assert!(
                (2_500..=4_200).contains(&share),
                "{shard} got {share} of 10,000"
            );
        }
    }

    #[test]
    fn a_shard_that_leaves_moves_only_its_own_objects() {
        let objects = names(5_000);
        let before = Ring::new(["op-a", "op-b", "op-c"]);
        let after = Ring::new(["op-a", "op-c"]);
        let moved: Vec<_> = assign_all(&before, &objects)
            .into_iter()
            .zip(assign_all(&after, &objects))
            .filter(|(was, is)| was != is)
            .collect();
        assert!(!moved.is_empty());
        assert!(moved.iter().all(|(was, _)| *was == "op-b"), "{moved:?}");
    }

    #[test]
    fn a_shard_that_joins_takes_about_its_share_and_only_for_itself() {
        let objects = names(10_000);
        let before = Ring::new(["op-a", "op-b", "op-c"]);
        let after = Ring::new(["op-a", "op-b", "op-c", "op-d"]);
        let moved: Vec<_> = assign_all(&before, &objects)
            .into_iter()
            .zip(assign_all(&after, &objects))
            .filter(|(was, is)| was != is)
            .collect();
        assert!(moved.iter().all(|(_, is)| *is == "op-d"));
        assert!((1_500..=3_500).contains(&moved.len()), "{}", moved.len());
    }

    #[test]
    fn keys_differing_only_in_where_a_part_ends_fall_apart() {
        let split = |namespace, name| ObjectKey {
            group: "",
            kind: "ConfigMap",
            namespace: Some(namespace),
            name,
        };
        assert_ne!(split("ab", "c").point(), split("a", "bc").point());
        let cluster = ObjectKey {
            namespace: None,
            ..split("", "x")
        };
        assert_eq!(cluster.point(), split("", "x").point());
    }

    #[test]
    fn a_ring_name_must_be_a_dns_label() {
        for bad in ["", "-op", "op-", "Op", "op/x", "op.x", &"o".repeat(64)] {
            assert!(Labels::new(bad).is_err(), "{bad:?}");
        }
        let labels = Labels::new("my-operator").expect("a DNS label");
        assert_eq!(labels.shard(), "shard.operator-gen.io/my-operator");
        assert_eq!(labels.drain(), "drain.operator-gen.io/my-operator");
    }

    /// The sharder's decision for an object labelled `shard` (and drained when `draining`),
    /// on a ring of op-a and op-b of which `live` are live.
    fn decide(shard: Option<&str>, draining: bool, live: &[&str]) -> (Decision, String) {
        let names = Labels::new("op").expect("a DNS label");
        let ring = Ring::new(live.iter().copied());
        let mut labels = BTreeMap::new();
        if let Some(shard) = shard {
            labels.insert(names.shard().to_owned(), shard.to_owned());
        }
        if draining {
            labels.insert(names.drain().to_owned(), "true".to_owned());
        }
        let object = key("w");
        let desired = ring.shard_for(&object).unwrap_or_default().to_owned();
        let decision = Decision::for_object(&names, &labels, &object, &ring, |s| live.contains(&s));
        (decision, desired)
    }

    #[test]
    fn an_unassigned_object_goes_to_its_shard_on_the_ring() {
        let (decision, desired) = decide(None, false, &["op-a", "op-b"]);
        assert_eq!(decision, Decision::Assign(desired));
    }

    #[test]
    fn an_object_of_a_live_shard_is_drained_before_it_moves() {
        let (_, desired) = decide(None, false, &["op-a", "op-b"]);
        let other = if desired == "op-a" { "op-b" } else { "op-a" };
        assert_eq!(
            decide(Some(other), false, &["op-a", "op-b"]).0,
            Decision::Drain
        );
        // Until the shard acknowledges, the sharder waits.
        assert_eq!(
            decide(Some(other), true, &["op-a", "op-b"]).0,
            Decision::Keep
        );
        assert_eq!(
            decide(Some(&desired), false, &["op-a", "op-b"]).0,
            Decision::Keep
        );
    }

    #[test]
    fn a_drain_label_left_on_an_unassigned_object_does_not_hold_it_back() {
        let (decision, desired) = decide(None, true, &["op-a", "op-b"]);
        assert_eq!(decision, Decision::Assign(desired));
    }

    #[test]
    fn an_object_of_a_gone_shard_moves_at_once_even_while_draining() {
        for draining in [false, true] {
            let (decision, desired) = decide(Some("op-gone"), draining, &["op-a", "op-b"]);
            assert_eq!(decision, Decision::Assign(desired));
        }
    }

    #[test]
    fn with_no_live_shard_assignments_stay() {
        assert_eq!(decide(Some("op-a"), false, &[]).0, Decision::Keep);
        assert_eq!(decide(None, false, &[]).0, Decision::Keep);
    }

    #[test]
    fn patches_are_conditional_on_the_version_decided_on() {
        let names = Labels::new("op").expect("a DNS label");
        let assign = Decision::Assign("op-a".into()).patch(&names, "42");
        assert_eq!(
            assign,
            Some(json!({"metadata": {"resourceVersion": "42", "labels": {
                "shard.operator-gen.io/op": "op-a",
                "drain.operator-gen.io/op": null,
            }}}))
        );
        let drain = Decision::Drain.patch(&names, "7").expect("a patch");
        assert_eq!(
            drain["metadata"]["labels"]["drain.operator-gen.io/op"],
            "true"
        );
        assert_eq!(drain["metadata"]["resourceVersion"], "7");
        assert_eq!(Decision::Keep.patch(&names, "7"), None);
        let ack = names.acknowledge("9");
        assert_eq!(ack["metadata"]["resourceVersion"], "9");
        assert_eq!(
            ack["metadata"]["labels"]["shard.operator-gen.io/op"],
            Value::Null
        );
        assert_eq!(
            ack["metadata"]["labels"]["drain.operator-gen.io/op"],
            Value::Null
        );
    }

    fn lease(name: &str, holder: Option<&str>, renewed_at: i64) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                lease_duration_seconds: Some(10),
                renew_time: Some(MicroTime(
                    Timestamp::from_second(renewed_at).expect("a valid time"),
                )),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn a_shard_is_live_until_its_lease_goes_unrenewed_for_its_duration() {
        let start = Instant::now();
        let mut members = Membership::default();
        members.observe(&lease("op-a", Some("op-a"), 100), start);
        members.observe(&lease("op-b", Some("op-b"), 100), start);
        // op-a renews at 6 s; op-b's Lease is read again, unchanged.
        let later = start + Duration::from_secs(6);
        members.observe(&lease("op-a", Some("op-a"), 106), later);
        members.observe(&lease("op-b", Some("op-b"), 100), later);
        let expired = start + Duration::from_secs(10);
        assert_eq!(members.live(expired), ["op-a"]);
        assert_eq!(
            members.next_expiry(expired),
            Some(later + Duration::from_secs(10))
        );
        assert!(members.live(later + Duration::from_secs(10)).is_empty());
    }

    #[test]
    fn a_released_or_deleted_lease_is_gone_at_once() {
        let start = Instant::now();
        let mut members = Membership::default();
        members.observe(&lease("op-a", Some("op-a"), 100), start);
        members.observe(&lease("op-b", Some("op-b"), 100), start);
        members.observe(&lease("op-a", None, 100), start);
        members.forget("op-b");
        assert!(members.live(start).is_empty());
        assert_eq!(members.next_expiry(start), None);
    }

    #[test]
    fn an_outage_longer_than_a_lease_expires_no_shard() {
        let start = Instant::now();
        let mut members = Membership::default();
        members.observe(&lease("op-a", Some("op-a"), 100), start);
        // The sharder could not watch for 30 s; nobody could renew either.
        let back = start + Duration::from_secs(30);
        members.resync(back);
        members.observe(&lease("op-a", Some("op-a"), 100), back);
        assert_eq!(members.live(back + Duration::from_secs(9)), ["op-a"]);
        // A replica that really stopped is still found out one duration later.
        assert!(members.live(back + Duration::from_secs(10)).is_empty());
    }

    #[test]
    fn a_replica_stops_before_the_sharder_could_see_its_lease_expire() {
        let sent = Instant::now();
        let mut fence = Fence::new(10, crate::leader::renewal_margin(10));
        assert!(!fence.holds(sent), "no renewal yet");
        fence.renewed(sent);
        // The renewal is due at 7 s; the fence closes at 9 s; the Lease ends at 10 s, from a
        // moment the sharder saw no earlier than `sent`.
        assert!(fence.holds(sent + Duration::from_secs(8)));
        assert!(!fence.holds(sent + Duration::from_secs(9)));
        let mut members = Membership::default();
        members.observe(&lease("op-a", Some("op-a"), 100), sent);
        let deadline = fence.deadline().expect("renewed");
        assert!(members.is_live("op-a", deadline));
        // An older renewal reported late does not move the deadline back.
        fence.renewed(sent - Duration::from_secs(1));
        assert_eq!(fence.deadline(), Some(deadline));
    }

    #[test]
    fn a_short_lease_still_fences_before_it_expires() {
        for lease_seconds in 3..=60 {
            let margin = crate::leader::renewal_margin(lease_seconds);
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
