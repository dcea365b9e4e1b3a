//! The sharder's state: the live shards and, for every object of the kinds it places, where
//! its labels place it. Events go in; the label writes that they call for come out. The
//! watches that feed it and the writes it returns are the caller's, so all of its judgement
//! is tested here.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use serde_json::Value;
use tokio::time::Instant;

#[cfg(test)]
use super::Assignment;
use super::{Decision, Labels, Membership, ObjectKey, Placement, Ring};

/// A label write the sharder asks for: a merge patch of one object's metadata, conditional
/// on the `resourceVersion` it was decided on.
#[derive(Debug, Clone, PartialEq)]
pub struct Relabel {
    /// The object's kind: its index among the sharder's kinds.
    pub kind: usize,
    /// The object's namespace; `None` when it is cluster-scoped.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The merge patch.
    pub patch: Value,
}

/// What the sharder keeps of an object: only its placement and version, so its memory per
/// object is a name and a few short strings, whatever the object holds.
#[derive(Debug, Clone)]
struct Tracked {
    placement: Placement,
    resource_version: String,
}

/// An object the sharder tracks: its kind (an index among the sharder's kinds), namespace and
/// name.
pub type ObjectId = (usize, Option<String>, String);

/// The sharder of one ring: the objects of each of its kinds are placed on the same shards.
#[derive(Debug)]
pub struct Sharder {
    labels: Labels,
    /// Each kind's API group and kind, which the ring hashes with an object's name.
    kinds: Vec<(String, String)>,
    membership: Membership,
    /// The ring over the shards that were live at the last [`Sharder::refresh`].
    ring: Ring,
    objects: BTreeMap<ObjectId, Tracked>,
}

impl Sharder {
    /// The sharder of the objects of `kinds` (each a group and a kind, known afterwards by its
    /// index here), placing them with `labels`.
    pub fn new(labels: Labels, kinds: &[(&str, &str)]) -> Self {
        Self {
            labels,
            kinds: kinds
                .iter()
                .map(|(group, kind)| ((*group).to_owned(), (*kind).to_owned()))
                .collect(),
            membership: Membership::default(),
            ring: Ring::default(),
            objects: BTreeMap::new(),
        }
    }

    /// A shard's Lease as the watch saw it at `now`; whether it was renewed since last seen.
    pub fn lease_applied(&mut self, lease: &Lease, now: Instant) -> bool {
        self.membership.observe(lease, now)
    }

    /// A shard's Lease was deleted: the replica stopped and let its objects go.
    pub fn lease_deleted(&mut self, lease: &str) {
        self.membership.forget(lease);
    }

    /// The Leases' watch, which failed at `failed_at`, is back: every Lease live then starts
    /// afresh (see [`Membership::resync`]).
    pub fn resync(&mut self, failed_at: Instant, now: Instant) {
        self.membership.resync(failed_at, now);
    }

    /// How long the Leases' watch may stay silent while every replica renews (see
    /// [`Membership::silence_limit`]).
    pub fn silence_limit(&self) -> Option<Duration> {
        self.membership.silence_limit()
    }

    /// The shards on the ring since the last [`Sharder::refresh`].
    #[cfg(test)]
    pub fn shards(&self) -> &[String] {
        self.ring.shards()
    }

    /// How many objects the sharder tracks.
    #[cfg(test)]
    pub fn objects(&self) -> usize {
        self.objects.len()
    }

    /// When a live shard's Lease would next stop being live unless renewed: when to look
    /// again without a new event.
    pub fn next_check(&self, now: Instant) -> Option<Instant> {
        self.membership.next_expiry(now)
    }

    /// Takes the shards whose Leases are held as the ring; when they changed, the writes that
    /// move every object the change concerns.
    pub fn refresh(&mut self) -> Vec<Relabel> {
        let live = self.membership.members();
        if live == self.ring.shards() {
            return Vec::new();
        }
        tracing::info!(shards = ?live, "shards changed");
        self.ring = Ring::new(live);
        self.pending()
    }

    /// The shards whose Leases expired by `now`, with the Lease version to take each over at:
    /// the caller deletes each Lease on that condition, and the shard leaves the ring when the
    /// deletion is seen.
    pub fn takeovers(&self, now: Instant) -> Vec<(String, String)> {
        self.membership
            .expired(now)
            .into_iter()
            .map(|(name, version)| (name.to_owned(), version.to_owned()))
            .collect()
    }

    /// The writes every tracked object needs on the current ring: after a change of the ring,
    /// or to retry writes that failed.
    pub fn pending(&self) -> Vec<Relabel> {
        self.objects
            .iter()
            .filter_map(|((kind, namespace, name), tracked)| {
                self.relabel(*kind, namespace.as_deref(), name, tracked)
            })
            .collect()
    }

    /// Keeps only the Leases for which `listed` holds: after a relist, those not listed were
    /// deleted while the watch was away.
    pub fn retain_leases(&mut self, listed: impl Fn(&str) -> bool) {
        self.membership.retain(listed);
    }

    /// Keeps only the objects for which `listed` holds: after a relist of a kind, those of it
    /// not listed were deleted while its watch was away.
    pub fn retain_objects(&mut self, listed: impl Fn(&ObjectId) -> bool) {
        self.objects.retain(|key, _| listed(key));
    }

    /// An object of `kind` as its watch saw it; the write that places it, if it needs one.
    pub fn object_applied(&mut self, kind: usize, meta: &ObjectMeta) -> Option<Relabel> {
        let name = meta.name.clone()?;
        let tracked = Tracked {
            placement: self
                .labels
                .placement(meta.labels.as_ref().unwrap_or(&BTreeMap::new())),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
        };
        let relabel = self.relabel(kind, meta.namespace.as_deref(), &name, &tracked);
        self.objects
            .insert((kind, meta.namespace.clone(), name), tracked);
        relabel
    }

    /// An object of `kind` was deleted.
    pub fn object_deleted(&mut self, kind: usize, meta: &ObjectMeta) {
        if let Some(name) = &meta.name {
            self.objects
                .remove(&(kind, meta.namespace.clone(), name.clone()));
        }
    }

    /// The key the ring places an object of `kind` by.
    fn key<'a>(&'a self, kind: usize, namespace: Option<&'a str>, name: &'a str) -> ObjectKey<'a> {
        let (group, kind) = self
            .kinds
            .get(kind)
            .map_or(("", ""), |(group, kind)| (group.as_str(), kind.as_str()));
        ObjectKey {
            group,
            kind,
            namespace,
            name,
        }
    }

    /// The write that `tracked`, of `kind`, needs on the current ring, if any.
    fn relabel(
        &self,
        kind: usize,
        namespace: Option<&str>,
        name: &str,
        tracked: &Tracked,
    ) -> Option<Relabel> {
        let key = self.key(kind, namespace, name);
        let shards = self.ring.shards();
        let live = |shard: &str| shards.binary_search_by(|s| s.as_str().cmp(shard)).is_ok();
        let decision = Decision::for_object(&tracked.placement, &key, &self.ring, live);
        let patch = decision.patch(&self.labels, &tracked.resource_version)?;
        Some(Relabel {
            kind,
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            patch,
        })
    }

    /// Where the ring puts an object of `kind`, for tests.
    #[cfg(test)]
    pub fn shard_for(&self, kind: usize, namespace: Option<&str>, name: &str) -> Option<&str> {
        self.ring.shard_for(&self.key(kind, namespace, name))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::sharding::fixtures::{lease, names};

    const SHARD: &str = "shard.operator-gen.io/op";
    const DRAIN: &str = "drain.operator-gen.io/op";
    /// The sharder's kinds, by index.
    const WIDGET: usize = 0;
    const GADGET: usize = 1;

    fn sharder() -> Sharder {
        let kinds = [("example.com", "Widget"), ("example.com", "Gadget")];
        Sharder::new(Labels::new("op").expect("a DNS label"), &kinds)
    }

    /// Widget `name` at `version`, labelled `labels`.
    fn widget(name: &str, version: u32, labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            resource_version: Some(version.to_string()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    /// Carries out `relabels` on `objects` as the API server would, bumping their versions,
    /// and feeds the results back as the watch would.
    fn apply(
        sharder: &mut Sharder,
        objects: &mut BTreeMap<String, ObjectMeta>,
        relabels: Vec<Relabel>,
    ) {
        for relabel in relabels {
            let object = objects.get_mut(&relabel.name).expect("a known object");
            let version: u32 = object
                .resource_version
                .as_deref()
                .unwrap_or("0")
                .parse()
                .expect("a number");
            assert_eq!(
                relabel.patch["metadata"]["resourceVersion"],
                version.to_string(),
                "written from the version last seen"
            );
            let labels = object.labels.get_or_insert_default();
            for (key, value) in relabel.patch["metadata"]["labels"]
                .as_object()
                .expect("labels")
            {
                match value.as_str() {
                    Some(value) => labels.insert(key.clone(), value.to_owned()),
                    None => labels.remove(key),
                };
            }
            object.resource_version = Some((version + 1).to_string());
            assert_eq!(
                sharder.object_applied(WIDGET, object),
                None,
                "settled once written"
            );
        }
    }

    /// `count` new widgets, seen by `sharder` and placed as it asked.
    fn placed(sharder: &mut Sharder, count: usize) -> BTreeMap<String, ObjectMeta> {
        let mut objects: BTreeMap<String, ObjectMeta> = names(count)
            .into_iter()
            .map(|name| (name.clone(), widget(&name, 1, &[])))
            .collect();
        let first: Vec<Relabel> = objects
            .values()
            .filter_map(|object| sharder.object_applied(WIDGET, object))
            .collect();
        apply(sharder, &mut objects, first);
        objects
    }

    fn shard_of(object: &ObjectMeta) -> Option<&str> {
        object.labels.as_ref()?.get(SHARD).map(String::as_str)
    }

    #[test]
    fn objects_seen_before_any_shard_is_live_are_assigned_once_one_is() {
        let now = Instant::now();
        let mut sharder = sharder();
        assert_eq!(sharder.object_applied(WIDGET, &widget("a", 1, &[])), None);
        sharder.lease_applied(&lease("op-1", 100), now);
        let relabels = sharder.refresh();
        assert_eq!(
            relabels,
            [Relabel {
                kind: WIDGET,
                namespace: Some("default".into()),
                name: "a".into(),
                patch: json!({"metadata": {"resourceVersion": "1", "labels": {SHARD: "op-1", DRAIN: null}}}),
            }]
        );
        assert!(sharder.refresh().is_empty(), "the ring did not change");
    }

    #[test]
    fn a_shard_that_joins_gets_its_objects_only_through_a_drain() {
        let now = Instant::now();
        let mut sharder = sharder();
        sharder.lease_applied(&lease("op-1", 100), now);
        sharder.refresh();
        let mut objects = placed(&mut sharder, 300);
        assert!(objects.values().all(|o| shard_of(o) == Some("op-1")));

        sharder.lease_applied(&lease("op-2", 100), now);
        let drains = sharder.refresh();
        let moving: Vec<String> = objects
            .keys()
            .filter(|name| sharder.shard_for(WIDGET, Some("default"), name) == Some("op-2"))
            .cloned()
            .collect();
        assert!(!moving.is_empty());
        let drained: Vec<&str> = drains.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(drained, moving, "exactly the objects that move are drained");
        assert!(
            drains
                .iter()
                .all(|r| r.patch["metadata"]["labels"].get(SHARD).is_none()
                    && r.patch["metadata"]["labels"][DRAIN] == "true")
        );
        apply(&mut sharder, &mut objects, drains);
        // Draining objects stay with op-1 until op-1 acknowledges.
        assert!(
            moving
                .iter()
                .all(|name| shard_of(&objects[name]) == Some("op-1"))
        );

        // op-1 acknowledges each in a reconcile: both labels go, and the sharder assigns.
        for name in &moving {
            let object = objects.get_mut(name).expect("known");
            object.labels = Some(BTreeMap::new());
            object.resource_version = Some("10".into());
            let relabel = sharder.object_applied(WIDGET, object).expect("assigned");
            assert_eq!(relabel.patch["metadata"]["labels"][SHARD], "op-2");
        }
    }

    #[test]
    fn a_shard_whose_lease_expires_loses_its_objects_without_a_drain() {
        let start = Instant::now();
        let mut sharder = sharder();
        sharder.lease_applied(&lease("op-1", 100), start);
        sharder.lease_applied(&lease("op-2", 100), start);
        sharder.refresh();
        let mut objects = placed(&mut sharder, 100);
        let of_2 = objects
            .values()
            .filter(|o| shard_of(o) == Some("op-2"))
            .count();
        assert!(of_2 > 0);

        // op-1 renews; op-2 does not.
        let later = start + Duration::from_secs(6);
        sharder.lease_applied(&lease("op-1", 106), later);
        assert_eq!(
            sharder.next_check(later),
            Some(start + Duration::from_secs(10))
        );
        let expired = start + Duration::from_secs(10);
        assert!(
            sharder.refresh().is_empty(),
            "nothing moves before the takeover"
        );
        assert!(
            sharder.takeovers(expired).is_empty(),
            "not before the server is seen to take another renewal"
        );
        let renewed = expired + Duration::from_secs(1);
        sharder.lease_applied(&lease("op-1", 111), renewed);
        let takeovers = sharder.takeovers(renewed);
        assert_eq!(takeovers, [("op-2".to_owned(), String::new())]);
        // The sharder deleted op-2's Lease on that condition, and its watch saw it go.
        sharder.lease_deleted("op-2");
        let moves = sharder.refresh();
        assert_eq!(sharder.shards(), ["op-1"]);
        assert_eq!(moves.len(), of_2);
        apply(&mut sharder, &mut objects, moves);
        assert!(objects.values().all(|o| shard_of(o) == Some("op-1")));
    }

    #[test]
    fn an_outage_longer_than_a_lease_moves_nothing() {
        let start = Instant::now();
        let mut sharder = sharder();
        sharder.lease_applied(&lease("op-1", 100), start);
        sharder.lease_applied(&lease("op-2", 100), start);
        sharder.refresh();
        for name in names(50) {
            sharder.object_applied(WIDGET, &widget(&name, 1, &[]));
        }
        // The watch failed for 60 s, then listed both Leases again, unrenewed.
        let back = start + Duration::from_secs(60);
        sharder.resync(start + Duration::from_secs(1), back);
        sharder.lease_applied(&lease("op-1", 100), back);
        sharder.lease_applied(&lease("op-2", 100), back);
        assert!(sharder.refresh().is_empty());
        assert_eq!(sharder.shards(), ["op-1", "op-2"]);
    }

    #[test]
    fn a_deleted_object_is_forgotten() {
        let now = Instant::now();
        let mut sharder = sharder();
        let object = widget("a", 1, &[]);
        sharder.object_applied(WIDGET, &object);
        sharder.object_deleted(WIDGET, &object);
        assert_eq!(sharder.objects(), 0);
        sharder.lease_applied(&lease("op-1", 100), now);
        assert!(sharder.refresh().is_empty());
    }

    #[test]
    fn what_a_relist_no_longer_shows_is_forgotten() {
        let now = Instant::now();
        let mut sharder = sharder();
        sharder.lease_applied(&lease("op-1", 100), now);
        sharder.lease_applied(&lease("op-2", 100), now);
        sharder.object_applied(WIDGET, &widget("a", 1, &[]));
        sharder.object_applied(WIDGET, &widget("b", 1, &[]));
        sharder.retain_leases(|name| name == "op-1");
        sharder.retain_objects(|(_, _, name)| name == "b");
        sharder.refresh();
        assert_eq!(sharder.shards(), ["op-1"]);
        let pending: Vec<String> = sharder.pending().into_iter().map(|r| r.name).collect();
        assert_eq!(pending, ["b"]);
    }

    #[test]
    fn a_stopped_replicas_objects_move_at_once() {
        let now = Instant::now();
        let mut sharder = sharder();
        sharder.lease_applied(&lease("op-1", 100), now);
        sharder.lease_applied(&lease("op-2", 100), now);
        sharder.refresh();
        sharder.object_applied(WIDGET, &widget("a", 3, &[(SHARD, "op-2")]));
        sharder.object_applied(WIDGET, &widget("b", 3, &[(SHARD, "op-1")]));
        sharder.lease_deleted("op-2");
        let moves = sharder.refresh();
        assert_eq!(moves.len(), 1);
        assert_eq!(moves[0].name, "a");
        assert_eq!(moves[0].patch["metadata"]["labels"][SHARD], "op-1");
    }

    #[test]
    fn objects_of_each_kind_are_placed_on_one_ring_each_by_its_own_key() {
        let now = Instant::now();
        let mut sharder = sharder();
        for shard in ["op-1", "op-2", "op-3"] {
            sharder.lease_applied(&lease(shard, 100), now);
        }
        sharder.refresh();
        let names = names(100);
        let placed = |sharder: &mut Sharder, kind| -> Vec<String> {
            names
                .iter()
                .map(|name| {
                    let relabel = sharder.object_applied(kind, &widget(name, 1, &[]));
                    let relabel = relabel.expect("placed");
                    assert_eq!(relabel.kind, kind, "written as the kind it was seen as");
                    let shard = &relabel.patch["metadata"]["labels"][SHARD];
                    shard.as_str().expect("a shard").to_owned()
                })
                .collect()
        };
        let widgets = placed(&mut sharder, WIDGET);
        let gadgets = placed(&mut sharder, GADGET);
        assert_eq!(
            sharder.objects(),
            200,
            "a widget and a gadget of one name are two"
        );
        assert_ne!(widgets, gadgets, "the kind is part of the key");
        for shard in ["op-1", "op-2", "op-3"] {
            assert!(
                gadgets.iter().any(|s| s == shard),
                "{shard} holds gadgets too"
            );
        }
        sharder.object_deleted(GADGET, &widget(&names[0], 1, &[]));
        assert_eq!(sharder.objects(), 199, "only the gadget is gone");
        sharder.retain_objects(|(kind, _, _)| *kind == WIDGET);
        let pending = sharder.pending();
        assert!(pending.iter().all(|relabel| relabel.kind == WIDGET));
        assert_eq!(pending.len(), 100, "the widgets were seen, never written");
    }
}
