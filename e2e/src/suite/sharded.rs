//! A generated operator run sharded (`sharding: true` in its manifest, `SHARDING` in its
//! Deployment) as pods on the real API server: two pods split [`MANY`] primaries, a third
//! joins, one is deleted at once, and the log lines of every reconcile prove that no object
//! was reconciled by two pods at once. A generic operator goes through all of that with its
//! first kind, and then places [`FEW`] objects of each other kind on the same pods.
//!
//! The intervals come from the runtime's `reconcile ended` debug line (name, namespace,
//! duration, and the line's own timestamp as the end), not from annotations, which would add
//! writes. The pods run on one node, so their timestamps share one clock; the e2e copies their
//! logs as they grow, so a deleted pod's last lines stay.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::{LEASE_SECONDS, READY, RECOVERY, Suite};

/// How many pods split the primaries first; one more joins once they have settled.
const FIRST: u64 = 2;
/// How many primaries the replicas split.
const MANY: usize = 1_000;
/// How many objects of each other kind of a generic operator the surviving replicas split.
const FEW: usize = 100;
/// The label on the primaries this check creates, so it deletes them in one request.
const MANY_LABEL: &str = "e2e.operator-gen.kube.rs/sharded";
/// How long a dead pod's objects may wait for a live shard, beyond its Lease: the sharder sees
/// the last renewal up to a renewal interval late, then deletes the Lease and writes the
/// objects' labels 16 at a time, while the pod the Deployment starts in the dead one's place
/// joins the ring and is given a share. As pods on an idle machine they took 7.4 to 13.9 s,
/// 14.6 s beside CI's corpus compile, and 27.9 s with three busy loops on the two cores: the
/// bound catches a takeover that waits for something else (the pod's deletion, a resync), not
/// a slow machine.
const MOVE_MARGIN: Duration = Duration::from_secs(40);
/// How long after an outage a takeover would have shown, had one started: an idle takeover
/// moves its objects within 14 s past the Lease.
const TAKEOVER_SHOWN: Duration = Duration::from_secs(15);
/// How long the API server stays away in the restart: twice the Lease, so that every Lease
/// would have expired had the outage counted against it.
const OUTAGE: Duration = Duration::from_secs(2 * LEASE_SECONDS);

/// Where the primaries and their children stand, as the API server lists them.
struct Placement {
    /// Primary name → its shard label.
    primaries: BTreeMap<String, Option<String>>,
    /// Primary name → the shard label of its controller-owned child.
    children: BTreeMap<String, Option<String>>,
    /// Primary name → its `resourceVersion`, which any write moves.
    versions: BTreeMap<String, String>,
    /// Every primary of the kind, in every namespace, per shard label: what the replicas'
    /// caches should hold.
    per_shard: BTreeMap<String, usize>,
}

impl Suite {
    /// Scales the Deployment to [`FIRST`] pods for the check, then back to what it asked for.
    pub(super) fn sharded(&mut self) -> Result<()> {
        let wanted = self.workload.wanted()?;
        self.workload.scale(FIRST)?;
        self.workload.wait_ready(READY)?;
        let patience = std::mem::replace(&mut self.patience, RECOVERY);
        let checked = self.shards_split_and_move();
        // While the pods still run, so that they release the finalizers.
        let deleted = self.delete_sharded();
        let others = match (&checked, &deleted) {
            (Ok(()), Ok(())) => self.other_kinds_on_the_ring(),
            _ => Ok(()),
        };
        self.patience = patience;
        self.workload.scale(wanted)?;
        self.workload.wait_ready(READY)?;
        checked.and(deleted).and(others)
    }

    /// The names of the pods running now.
    fn live(&self) -> Result<Vec<String>> {
        Ok(self.replicas()?.into_iter().map(|r| r.name).collect())
    }

    /// Places [`FEW`] objects of each of a generic operator's other kinds on the `live`
    /// replicas, which split the first kind's: every object and its child on one of them, each
    /// replica caching exactly its share, and every replica given some.
    fn other_kinds_on_the_ring(&mut self) -> Result<()> {
        let kinds: Vec<String> = self.other_kinds().cloned().collect();
        for kind in kinds {
            let first = self.swap_primary(super::Primary::builtin(&self.name, &kind)?);
            let placed = self.placed_few();
            self.swap_primary(first);
            placed.with_context(|| format!("through a {kind}"))?;
        }
        Ok(())
    }

    /// Deletes what it created whether it passed or not, while the replicas run to release
    /// the finalizers.
    fn placed_few(&mut self) -> Result<()> {
        let created = Instant::now();
        let live = self.live()?;
        let placed = self.create_many(FEW).and_then(|()| {
            self.settled_with(FEW)?;
            self.placement()
        });
        let deleted = self.delete_sharded();
        let spread = placed?.per_shard;
        println!(
            "\n    {FEW} of kind {} placed on the same shards in {:.1?}: {spread:?}",
            self.kind,
            created.elapsed()
        );
        if let Some(idle) = live.iter().find(|r| !spread.contains_key(*r)) {
            bail!("{idle} was given no {}: {spread:?}", self.kind);
        }
        deleted
    }

    /// Creates `count` primaries of this check, labelled so that one request deletes them.
    fn create_many(&self, count: usize) -> Result<()> {
        let objects: Vec<Value> = (0..count)
            .map(|index| {
                let mut object = self.primary_object(&format!("sharded-{index}"));
                object["metadata"]["labels"] = json!({ MANY_LABEL: "true" });
                object
            })
            .collect();
        self.create_all(objects)
    }

    fn shards_split_and_move(&mut self) -> Result<()> {
        let first = self.live()?;
        let created = Instant::now();
        self.create_many(MANY)?;
        self.settled_on()?;
        println!(
            "\n    {MANY} primaries created and reconciled on {} pods, children following, in {:.1?}",
            first.len(),
            created.elapsed()
        );

        let joined = Instant::now();
        self.workload.scale(FIRST + 1)?;
        self.workload.wait_ready(READY)?;
        let all = self.live()?;
        let joining = all
            .iter()
            .find(|pod| !first.contains(pod))
            .cloned()
            .context("no new pod joined")?;
        let spread = self.share_given(&joining)?;
        println!(
            "    a third pod joined; settled in {:.1?}: {spread:?}",
            joined.elapsed()
        );
        if all.iter().any(|r| spread.get(r).copied().unwrap_or(0) == 0) {
            bail!("a pod was given no primaries after joining: {spread:?}");
        }

        let sharder = self.sharder()?;
        let victim = all
            .iter()
            .find(|pod| **pod != sharder)
            .cloned()
            .context("no pod besides the sharder")?;
        let had = spread.get(&victim).copied().unwrap_or(0);
        let killed = Instant::now();
        self.workload.kill(&self.env.cluster, &victim)?;
        self.fails_reconciles = Some("a pod was killed under running reconciles");
        let bound = Duration::from_secs(LEASE_SECONDS) + MOVE_MARGIN;
        self.eventually("the deleted pod's primaries to be on live shards", || {
            let live = self.live()?;
            let placement = self.placement()?;
            Ok(placement.primaries.values().all(|shard| {
                shard
                    .as_deref()
                    .is_some_and(|s| s != victim && live.iter().any(|l| l == s))
            }))
        })?;
        let moved = killed.elapsed();
        self.settled_on()?;
        println!(
            "    {victim} deleted: its {had} primaries on live shards after {moved:.1?} (bound {bound:?}), reconciled there after {:.1?}",
            killed.elapsed()
        );
        if moved > bound {
            bail!("{victim}'s primaries took {moved:.1?} to move; the bound is {bound:?}");
        }
        self.workload.wait_ready(READY)?;
        self.restart_moves_nothing()?;
        // Leadership may have changed hands in the outage.
        let sharder = self.sharder()?;
        let cut = self
            .live()?
            .into_iter()
            .find(|pod| *pod != sharder)
            .context("no pod besides the sharder")?;
        self.renewals_cut(&cut, &sharder)?;
        self.no_overlap()
    }

    /// Refuses `victim`'s Lease renewals (by RBAC: the process runs on and keeps its watches):
    /// it stops reconciling, its reconciles in flight ended, before the sharder takes its
    /// Lease over; once its renewals are allowed again it joins anew and gets a share back.
    fn renewals_cut(&self, victim: &str, sharder: &str) -> Result<()> {
        let role = format!("{}-leader-election", self.name);
        let namespace = self.operator_namespace.clone();
        let mut cut = self.admin_json(&["get", "role", &role, "-n", &namespace, "-o", "json"])?;
        let live = self.live()?;
        let others: Vec<&str> = live
            .iter()
            .map(String::as_str)
            .filter(|r| *r != victim)
            .collect();
        let mut rules: Vec<Value> = cut["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|rule| {
                // The sharding rule: every Lease, listed and written.
                !(rule["resourceNames"].is_null()
                    && rule["verbs"]
                        .as_array()
                        .is_some_and(|v| v.contains(&json!("list"))))
            })
            .cloned()
            .collect();
        rules.extend([
            json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list", "watch"]}),
            json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": others, "verbs": ["get", "patch", "delete"]}),
            // The sharder still takes the victim's Lease over.
            json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [victim], "verbs": ["get", "delete"]}),
        ]);
        cut["rules"] = Value::Array(rules);
        cut["metadata"]
            .as_object_mut()
            .context("a Role's metadata")?
            .retain(|key, _| matches!(key.as_str(), "name" | "namespace"));
        let file = self.env.logs.join("role-renewals-cut.json");
        fs::write(&file, cut.to_string())?;
        let started = Instant::now();
        let since = now_us();
        self.admin(&["replace", "-f"], Some(&file))?;
        let fenced = self.logged_at(victim, since, "the shard's Lease went unrenewed", None);
        let taken = self.logged_at(
            sharder,
            since,
            "took over an expired shard's Lease",
            Some(("lease", victim)),
        );
        let (mut fenced_at, mut taken_at) = (None, None);
        self.eventually("the fence to close and the Lease to be taken over", || {
            fenced_at = fenced_at.or(fenced()?);
            taken_at = taken_at.or(taken()?);
            Ok(fenced_at.is_some() && taken_at.is_some())
        })?;
        let (fenced_at, taken_at) = (fenced_at.unwrap_or(0), taken_at.unwrap_or(0));
        self.settled_with_except(MANY, &[victim])?;
        let moved = started.elapsed();
        // The generated Role again, as deploy/ has it.
        self.apply_pods()?;
        let restored = Instant::now();
        let share = self.share_given(victim)?.get(victim).copied().unwrap_or(0);
        println!(
            "    {victim}'s renewals refused: it stopped reconciling {:.1} s after, its Lease was taken over at {:.1} s, its objects reconciled elsewhere at {moved:.1?}; allowed again, it held {share} primaries {:.1?} later",
            (fenced_at - since) as f64 / 1e6,
            (taken_at - since) as f64 / 1e6,
            restored.elapsed()
        );
        if fenced_at >= taken_at {
            bail!(
                "{victim} stopped reconciling {} µs after its Lease was taken over",
                fenced_at - taken_at
            );
        }
        Ok(())
    }

    /// Waits until the sharder has placed primaries on `joining`, then until they settle on
    /// `live`, and gives the primaries per shard. Settling alone is no proof of a share: a
    /// replica that holds nothing and caches nothing is settled too, before the sharder sees it.
    fn share_given(&self, joining: &str) -> Result<BTreeMap<String, usize>> {
        self.eventually(&format!("{joining} to be given primaries"), || {
            Ok(self
                .placement()?
                .per_shard
                .get(joining)
                .is_some_and(|n| *n > 0))
        })?;
        self.settled_on()?;
        Ok(self.placement()?.per_shard)
    }

    /// A reader of when `replica` first logged a message starting with `message` (with the field `field` at its value,
    /// if given) at or after `since` (µs since the epoch).
    fn logged_at<'a>(
        &'a self,
        replica: &str,
        since: i64,
        message: &'a str,
        field: Option<(&'a str, &'a str)>,
    ) -> impl Fn() -> Result<Option<i64>> + 'a {
        let replica = replica.to_owned();
        move || {
            let text: String = self
                .log_files()
                .iter()
                .filter(|(owner, _)| *owner == replica)
                .map(|(_, log)| crate::kit::logs::read_from(log, 0))
                .collect();
            Ok(text
                .lines()
                .map(crate::kit::logs::written)
                .find_map(|line| {
                    if !line.contains(message) {
                        return None;
                    }
                    let line: Value = serde_json::from_str(line).ok()?;
                    let fields = &line["fields"];
                    let said = fields["message"]
                        .as_str()
                        .is_some_and(|said| said.starts_with(message));
                    if !said || field.is_some_and(|(key, value)| fields[key] != value) {
                        return None;
                    }
                    let at = timestamp_us(&line)?;
                    (at >= since).then_some(at)
                }))
        }
    }

    /// Restarts the API server, away for twice a Lease: no primary moves or is written.
    fn restart_moves_nothing(&self) -> Result<()> {
        let before = self.placement()?;
        let away = Instant::now();
        self.env.cluster.restart_apiserver(OUTAGE)?;
        let away = away.elapsed();
        // Long enough for a takeover, had the outage started one: the Leases' renewals resume,
        // and any Lease judged expired would be taken over and its objects moved by now.
        std::thread::sleep(Duration::from_secs(2 * LEASE_SECONDS) + TAKEOVER_SHOWN);
        self.settled_on()?;
        let after = self.placement()?;
        let moved = before
            .primaries
            .iter()
            .filter(|(name, shard)| after.primaries.get(*name) != Some(*shard))
            .count();
        let written = before
            .versions
            .iter()
            .filter(|(name, version)| after.versions.get(*name) != Some(*version))
            .count();
        println!(
            "    the API server restarted, away {away:.1?} against the {LEASE_SECONDS} s Lease: {moved} primaries moved, {written} written"
        );
        if moved + written > 0 {
            bail!("an API server restart moved {moved} primaries and wrote {written}");
        }
        Ok(())
    }

    /// Waits until every primary of this check is on a pod that runs and its child carries
    /// the same label, and each pod's cache of the primary holds exactly the primaries placed
    /// on it.
    fn settled_on(&self) -> Result<()> {
        self.settled_with(MANY)
    }

    /// [`Suite::settled_on`], for `count` primaries of this check.
    fn settled_with(&self, count: usize) -> Result<()> {
        self.settled_with_except(count, &[])
    }

    /// [`Suite::settled_with`], with the pods `except` not counted as live.
    fn settled_with_except(&self, count: usize, except: &[&str]) -> Result<()> {
        let cache = format!("operator_cache_objects{{kind=\"{}\"}}", self.kind);
        let mut last = String::new();
        let settled = self.eventually("the primaries to settle on the live shards", || {
            let live: Vec<String> = self
                .live()?
                .into_iter()
                .filter(|pod| !except.contains(&pod.as_str()))
                .collect();
            let placement = self.placement()?;
            if placement.primaries.len() != count {
                last = format!("{} of {count} primaries listed", placement.primaries.len());
                return Ok(false);
            }
            let astray = placement.primaries.iter().find(|(name, shard)| {
                !shard
                    .as_deref()
                    .is_some_and(|s| live.iter().any(|l| l == s))
                    || placement.children.get(*name) != Some(*shard)
            });
            if let Some((name, shard)) = astray {
                last = format!(
                    "{name} is on {shard:?}, its child on {:?}",
                    placement.children.get(name)
                );
                return Ok(false);
            }
            for replica in &live {
                let cached = self.gauge(replica, &cache)? as usize;
                let placed = placement.per_shard.get(replica).copied().unwrap_or(0);
                if cached != placed {
                    last = format!("{replica} caches {cached} primaries, {placed} placed on it");
                    return Ok(false);
                }
            }
            Ok(true)
        });
        settled.with_context(|| format!("last seen: {last}"))
    }

    /// The placement of this check's primaries and their children, and of every primary.
    fn placement(&self) -> Result<Placement> {
        let shard_label = format!("shard.operator-gen.io/{}", self.name);
        let label = |object: &Value| {
            object["metadata"]["labels"][&shard_label]
                .as_str()
                .map(str::to_owned)
        };
        let everywhere = self.admin_json(&["get", &self.primary, "-A", "-o", "json"])?;
        let mut per_shard = BTreeMap::new();
        let mut primaries = BTreeMap::new();
        let mut uids = BTreeMap::new();
        let mut versions = BTreeMap::new();
        for item in everywhere["items"].as_array().into_iter().flatten() {
            if let Some(shard) = label(item) {
                *per_shard.entry(shard).or_insert(0) += 1;
            }
            let ours = item["metadata"]["labels"][MANY_LABEL] == "true"
                && item["metadata"]["namespace"] == self.namespace.as_str();
            if ours {
                let name = item["metadata"]["name"].as_str().unwrap_or_default();
                primaries.insert(name.to_owned(), label(item));
                let version = item["metadata"]["resourceVersion"].as_str();
                versions.insert(name.to_owned(), version.unwrap_or_default().to_owned());
                let uid = item["metadata"]["uid"].as_str().unwrap_or_default();
                uids.insert(uid.to_owned(), name.to_owned());
            }
        }
        let mut children = BTreeMap::new();
        for resource in &self.owned {
            let list = self.admin_json(&["get", resource, "-n", &self.namespace, "-o", "json"])?;
            for item in list["items"].as_array().into_iter().flatten() {
                let owner = item["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|r| r["controller"] == true)
                    .and_then(|r| uids.get(r["uid"].as_str().unwrap_or_default()));
                if let Some(owner) = owner {
                    children.insert(owner.clone(), label(item));
                }
            }
        }
        Ok(Placement {
            primaries,
            children,
            versions,
            per_shard,
        })
    }

    /// The replica that holds the operator's own Lease, and so runs the sharder.
    fn sharder(&self) -> Result<String> {
        let lease = self.operator_object("lease", &self.name)?;
        lease["spec"]["holderIdentity"]
            .as_str()
            .map(str::to_owned)
            .context("the operator's Lease has no holder")
    }

    /// Every reconcile of this check's primaries, per replica, read from the replicas' logs:
    /// no two replicas' intervals of one object overlap, and every object was reconciled.
    fn no_overlap(&self) -> Result<()> {
        // Object name → (start, end, replica), in microseconds since the epoch.
        let mut intervals: BTreeMap<String, Vec<(i64, i64, &str)>> = BTreeMap::new();
        let logs = self.log_files();
        let texts: Vec<(&str, String)> = logs
            .iter()
            .map(|(owner, log)| (owner.as_str(), crate::kit::logs::read_from(log, 0)))
            .collect();
        for (replica, text) in &texts {
            let replica = *replica;
            for line in text.lines().map(crate::kit::logs::written) {
                let Some((name, start, end)) = reconcile_interval(line, &self.namespace) else {
                    continue;
                };
                if name.starts_with("sharded-") {
                    intervals
                        .entry(name)
                        .or_default()
                        .push((start, end, replica));
                }
            }
        }
        if intervals.len() != MANY {
            bail!(
                "{} of {MANY} primaries have a reconcile in the replicas' logs",
                intervals.len()
            );
        }
        let (mut reconciles, mut handovers) = (0, 0);
        let mut by: BTreeSet<&str> = BTreeSet::new();
        for (name, list) in &mut intervals {
            list.sort();
            reconciles += list.len();
            // The latest end of each replica's reconciles of this object so far.
            let mut ended: BTreeMap<&str, i64> = BTreeMap::new();
            let mut previous: Option<&str> = None;
            for &(start, end, replica) in list.iter() {
                by.insert(replica);
                if previous.is_some_and(|p| p != replica) {
                    handovers += 1;
                }
                previous = Some(replica);
                let clash = ended
                    .iter()
                    .find(|(other, until)| **other != replica && **until > start);
                if let Some((other, until)) = clash {
                    bail!(
                        "{name} was reconciled by {other} until {until} µs and by {replica} from {start} µs: {} µs at once",
                        until - start
                    );
                }
                let latest = ended.entry(replica).or_insert(end);
                *latest = (*latest).max(end);
            }
        }
        println!(
            "    no primary reconciled by two pods at once: {reconciles} reconciles, {handovers} hand-overs, by {by:?}"
        );
        Ok(())
    }

    /// Deletes this check's primaries in one request, and waits until they and their children
    /// are gone, so that the next check's garbage collection does not queue behind theirs.
    fn delete_sharded(&self) -> Result<()> {
        let namespace = self.namespace.clone();
        let placement = self.placement()?;
        let (primaries, owners) = (placement.primaries.len(), placement.children.len());
        self.delete_labelled(MANY_LABEL)?;
        self.eventually("the sharded primaries to be deleted", || {
            let left = self.admin_json(&[
                "get",
                &self.primary,
                "-n",
                &namespace,
                "-l",
                MANY_LABEL,
                "-o",
                "json",
            ])?;
            Ok(left["items"].as_array().is_none_or(Vec::is_empty))
        })?;
        let deleted = Instant::now();
        self.eventually("their children to be garbage-collected", || {
            let children = self.children_named("sharded-")?;
            Ok(children == 0)
        })?;
        println!(
            "    {primaries} primaries deleted; {owners} children collected {:.1?} after",
            deleted.elapsed()
        );
        Ok(())
    }

    /// How many children in the namespace have a controller owner whose name starts with
    /// `prefix`.
    fn children_named(&self, prefix: &str) -> Result<usize> {
        let mut count = 0;
        for resource in &self.owned {
            let list = self.admin_json(&["get", resource, "-n", &self.namespace, "-o", "json"])?;
            count += list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|item| {
                    item["metadata"]["ownerReferences"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|r| {
                            r["controller"] == true
                                && r["name"].as_str().is_some_and(|n| n.starts_with(prefix))
                        })
                })
                .count();
        }
        Ok(count)
    }
}

/// The object name and interval (start and end, in µs since the epoch) of a `reconcile ended`
/// line of an object in `namespace`.
fn reconcile_interval(line: &str, namespace: &str) -> Option<(String, i64, i64)> {
    if !line.contains("reconcile ended") {
        return None;
    }
    let line: Value = serde_json::from_str(line).ok()?;
    let fields = &line["fields"];
    if fields["message"] != "reconcile ended" || fields["namespace"] != namespace {
        return None;
    }
    let end = timestamp_us(&line)?;
    let took = i64::try_from(fields["took_us"].as_u64()?).ok()?;
    Some((fields["name"].as_str()?.to_owned(), end - took, end))
}

/// A log line's timestamp, in µs since the epoch.
fn timestamp_us(line: &Value) -> Option<i64> {
    let at: k8s_openapi::jiff::Timestamp = line["timestamp"].as_str()?.parse().ok()?;
    Some(at.as_microsecond())
}

/// Now, in µs since the epoch, on the clock the replicas' log lines use.
fn now_us() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_microsecond()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconcile_line_gives_its_object_and_interval() {
        let line = r#"{"timestamp":"2026-11-26T17:00:01.500000Z","level":"DEBUG","fields":{"message":"reconcile ended","name":"sharded-7","namespace":"e2e","took_us":250000},"target":"operator_gen_runtime::traces"}"#;
        let (name, start, end) = reconcile_interval(line, "e2e").expect("an interval");
        assert_eq!(name, "sharded-7");
        assert_eq!(end - start, 250_000);
        assert_eq!(end % 1_000_000, 500_000);
        assert!(
            reconcile_interval(line, "other").is_none(),
            "another namespace"
        );
        assert!(reconcile_interval(r#"{"fields":{"message":"reconciled"}}"#, "e2e").is_none());
    }
}
