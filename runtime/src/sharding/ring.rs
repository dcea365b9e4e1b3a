//! Consistent hashing: which live shard each object belongs to.

use std::collections::BTreeSet;

use xxhash_rust::xxh64::Xxh64;

/// How many points each shard takes on the ring, as in the reference design: three shards
/// each took between 30% and 38% of 10,000 names, ten between 8% and 12%.
pub const VIRTUAL_NODES: u32 = 100;

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

/// Consistent hashing over a set of shards: `VIRTUAL_NODES` points per shard on a 64-bit
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharding::fixtures::{key, names};

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
}
