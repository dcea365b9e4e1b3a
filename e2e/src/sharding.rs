//! The runtime's sharding protocol on the real API server, before a generated operator wires it
//! in: the sharder (`sharding::run_sharder`) and in-process replicas over ConfigMaps in a
//! namespace of their own. Each replica holds its own Lease (`sharding::Member`), watches only
//! the objects labelled with its name, reconciles them only while its fence holds, and lets a
//! drained object go inside a reconcile.
//!
//! Replicas join, crash and stop while every reconcile is recorded as an interval on one clock.
//! The checks read those intervals, not annotations (which would add writes): every object
//! is reconciled by the replica the ring puts it on, no object is ever reconciled by two
//! replicas at once, a crashed replica's objects move within the Lease and a stated margin, and
//! an API server restart that outlasts the Lease moves (writes) nothing.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams},
    runtime::watcher::{self, Event, watcher},
};
use operator_gen_runtime::internals::{
    RetryExt, Shutdown, Trigger,
    sharding::{Assignment, Fence, Labels, Member, ObjectKey, Ring, run_sharder},
};
use tokio::{sync::watch, task::JoinHandle, time::Instant};

use crate::runtime_log::RuntimeLog;
use operator_gen_cluster::Cluster;

/// The ring, and the namespace its Leases and objects live in.
const RING: &str = "e2e-sharding";
/// What the names of the objects the replicas share start with.
const OBJECT_PREFIX: &str = "object-";
/// How many objects the replicas share.
const OBJECTS: usize = 200;
/// The replicas' Lease: short, so that a crash is found out in seconds.
const LEASE_SECONDS: u64 = 5;
/// How often a replica renews its Lease: the Lease less the runtime's renewal margin (2 s).
const RENEWAL_SECONDS: u64 = 3;
/// How long after a crash its objects may take to move: the Lease, then the next renewal of
/// another replica (the proof the sharder waits for that renewals were taken), plus 5 s for a
/// relabel and a reconcile each.
const CRASH_BOUND: Duration = Duration::from_secs(LEASE_SECONDS + RENEWAL_SECONDS + 5);
/// How long the API server stays away in the restart step: twice the Lease, so that every
/// Lease would have expired had the outage counted against it.
const OUTAGE: Duration = Duration::from_secs(2 * LEASE_SECONDS);
/// How long a reconcile takes here: long enough that two at once would overlap measurably.
const RECONCILE: Duration = Duration::from_millis(2);
/// How often a replica reconciles every object it holds, as requeues and children's events
/// would: a replica that kept an object it should have let go would soon overlap another.
const RESYNC: Duration = Duration::from_millis(500);
/// How long each state gets to settle.
const PATIENCE: Duration = Duration::from_secs(60);

/// The checks, in the order [`run`] makes them: the setup, each step, and the proof over all.
pub(crate) const CHECKS: [&str; 7] = [
    "sharding: 200 objects and two replicas",
    "sharding: every object is reconciled by its shard",
    "sharding: a third replica joins; objects move to it only through a drain",
    "sharding: an API server restart longer than the Lease moves nothing",
    "sharding: a crashed replica's objects move once its Lease expires",
    "sharding: a stopped replica's objects move at once",
    "sharding: no object was reconciled by two replicas at once",
];

/// One reconcile (or a drain's acknowledgement, which is one) by one replica.
#[derive(Debug, Clone)]
struct Interval {
    object: String,
    replica: String,
    /// Whether it was a drain's acknowledgement.
    acknowledged: bool,
    start: Instant,
    end: Instant,
}

type Journal = Arc<Mutex<Vec<Interval>>>;

/// The checks, in order, each with what it measured; they share one control plane.
/// With `restart`, the API server is restarted too, to prove that an outage longer than the
/// Lease moves nothing.
pub(crate) fn run(
    admin: &Path,
    restart: Option<Arc<Cluster>>,
) -> Vec<(&'static str, Result<String>)> {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return vec![("a runtime for the sharding checks", Err(error.into()))],
    };
    runtime.block_on(async {
        let client = match crate::kit::client(admin).await {
            Ok(client) => client,
            Err(error) => return vec![("a client of the API server", Err(error))],
        };
        let mut protocol = Protocol::new(client, restart, RuntimeLog::install());
        let results = protocol.checks().await;
        protocol.teardown().await;
        if let Some(log) = &protocol.log {
            // The whole log, for a failure the lines in its message do not explain.
            let _ = std::fs::write(admin.with_file_name("sharding.log"), log.since(0));
        }
        results
    })
}

/// An in-process replica: its tasks and what stops them.
struct Replica {
    trigger: Trigger,
    task: JoinHandle<()>,
}

struct Protocol {
    client: Client,
    labels: Labels,
    journal: Journal,
    replicas: BTreeMap<String, Replica>,
    sharder: Option<(Trigger, JoinHandle<()>)>,
    /// The control plane, when it is ours to restart.
    cluster: Option<Arc<Cluster>>,
    /// The runtime's log, when this process could install one.
    log: Option<RuntimeLog>,
}

impl Protocol {
    fn new(client: Client, cluster: Option<Arc<Cluster>>, log: Option<RuntimeLog>) -> Self {
        Self {
            client,
            // A constant DNS label.
            labels: Labels::new(RING).expect("the ring's name is a DNS label"),
            journal: Journal::default(),
            replicas: BTreeMap::new(),
            sharder: None,
            cluster,
            log,
        }
    }

    async fn checks(&mut self) -> Vec<(&'static str, Result<String>)> {
        let mut results = Vec::new();
        let setup = self.setup().await;
        let failed = setup.is_err();
        results.push((CHECKS[0], setup));
        if failed {
            return results;
        }
        let steps = [
            Step::Settle,
            Step::Join,
            Step::Restart,
            Step::Crash,
            Step::Stop,
        ];
        for (name, step) in CHECKS[1..].iter().zip(steps) {
            let result = self.step(step).await;
            let failed = result.is_err();
            results.push((name, result));
            if failed {
                return results;
            }
        }
        results.push((CHECKS[6], self.no_overlap()));
        results
    }

    async fn setup(&mut self) -> Result<String> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(RING.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        // A namespace left terminating by an earlier run refuses new objects: wait it out.
        let deadline = Instant::now() + PATIENCE;
        while let Some(old) = namespaces.get_opt(RING).await? {
            if old.metadata.deletion_timestamp.is_none() {
                break;
            }
            if Instant::now() > deadline {
                bail!("namespace {RING} is still terminating after {PATIENCE:?}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error).context("creating the namespace"),
        }
        let objects = self.objects();
        objects
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .context("clearing the namespace's ConfigMaps")?;
        stream::iter(0..OBJECTS)
            .map(|i| {
                let objects = objects.clone();
                async move {
                    let object = ConfigMap {
                        metadata: ObjectMeta {
                            name: Some(format!("{OBJECT_PREFIX}{i}")),
                            ..ObjectMeta::default()
                        },
                        ..ConfigMap::default()
                    };
                    objects.create(&PostParams::default(), &object).await
                }
            })
            .buffer_unordered(16)
            .try_collect::<Vec<_>>()
            .await
            .context("creating the objects")?;
        self.start_sharder();
        for name in ["replica-a", "replica-b"] {
            self.start_replica(name);
        }
        Ok(format!("{OBJECTS} ConfigMaps, Lease {LEASE_SECONDS} s"))
    }

    fn objects(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), RING)
    }

    fn start_sharder(&mut self) {
        let (shutdown, trigger) = Shutdown::manual();
        let client = self.client.clone();
        let task = tokio::spawn(async move {
            let (stop, kinds) = (shutdown.requested(), [ApiResource::erase::<ConfigMap>(&())]);
            if let Err(error) = run_sharder(client, RING, RING, Some(RING), &kinds, stop).await {
                eprintln!("the sharder stopped: {error}");
            }
        });
        self.sharder = Some((trigger, task));
    }

    fn start_replica(&mut self, name: &str) {
        let (shutdown, trigger) = Shutdown::manual();
        let task = tokio::spawn(replica(
            self.client.clone(),
            name.to_owned(),
            self.labels.clone(),
            self.journal.clone(),
            shutdown,
        ));
        self.replicas
            .insert(name.to_owned(), Replica { trigger, task });
    }

    async fn step(&mut self, step: Step) -> Result<String> {
        let started = Instant::now();
        match step {
            Step::Settle => {
                let (took, _) = self.settled(started).await?;
                Ok(format!("settled in {took:.1?}"))
            }
            Step::Join => {
                let before = self.placements().await?;
                self.start_replica("replica-c");
                let (took, after) = self.settled(started).await?;
                let moved: Vec<&String> = after
                    .iter()
                    .filter(|(object, shard)| before.get(*object) != Some(*shard))
                    .map(|(object, _)| object)
                    .collect();
                if moved.iter().any(|object| after[*object] != "replica-c") {
                    bail!("objects moved between the replicas that stayed");
                }
                self.reconciled_after(&moved, "replica-c", started)?;
                self.drained(&moved, &before, started)?;
                Ok(format!(
                    "{} objects moved to replica-c in {took:.1?}",
                    moved.len()
                ))
            }
            Step::Restart => {
                let Some(cluster) = self.cluster.clone() else {
                    return Ok("skipped: the cluster in KUBECONFIG is not ours to restart".into());
                };
                let before = self.versions().await?;
                let mark = self.note("restarting the API server");
                tokio::task::spawn_blocking(move || cluster.restart_apiserver(OUTAGE))
                    .await
                    .context("the restart's thread")??;
                let down = started.elapsed();
                let ready = Instant::now();
                self.note("the API server is ready again");
                let (took, _) = self.settled_after(ready, Some(ready)).await?;
                let after = self.versions().await?;
                let written = before
                    .iter()
                    .filter(|(o, v)| after.get(*o) != Some(*v))
                    .count();
                if written > 0 {
                    let placements = self.placements().await?;
                    let mut shards: BTreeMap<&str, usize> = BTreeMap::new();
                    for shard in placements.values() {
                        *shards.entry(shard).or_default() += 1;
                    }
                    bail!(
                        "{written} objects were written across the restart; now placed {shards:?}; what the sharder did since the restart began:\n{}",
                        self.sharder_log(mark)
                    );
                }
                Ok(format!(
                    "the API server was away {down:.1?} (Lease {LEASE_SECONDS} s); no object written, reconciled again {took:.1?} after it was ready"
                ))
            }
            Step::Crash => {
                let crashed = self
                    .replicas
                    .remove("replica-b")
                    .context("replica-b runs")?;
                // Aborted, as a killed process would be: its Lease stays until it expires.
                crashed.task.abort();
                let before = self.placements().await?;
                let (took, _) = self.settled(started).await?;
                let moved: Vec<&String> = before
                    .iter()
                    .filter(|(_, shard)| shard.as_str() == "replica-b")
                    .map(|(object, _)| object)
                    .collect();
                if took > CRASH_BOUND {
                    bail!(
                        "{} objects took {took:.1?} to move, over {CRASH_BOUND:?}",
                        moved.len()
                    );
                }
                Ok(format!(
                    "{} objects moved in {took:.1?} (Lease {LEASE_SECONDS} s, bound {CRASH_BOUND:?})",
                    moved.len()
                ))
            }
            Step::Stop => {
                let stopped = self
                    .replicas
                    .remove("replica-c")
                    .context("replica-c runs")?;
                stopped.trigger.stop();
                stopped.task.await.context("replica-c's task")?;
                let (took, _) = self.settled(started).await?;
                if took >= Duration::from_secs(LEASE_SECONDS) {
                    bail!("took {took:.1?}: as long as the Lease, so it was not handed back");
                }
                Ok(format!("moved in {took:.1?}"))
            }
        }
    }

    /// What the sharder logged since `mark`, with the checks' notes and the replicas' lost
    /// Leases; the whole log, renewals that failed included, is in `sharding.log` beside the
    /// kubeconfig.
    fn sharder_log(&self, mark: Option<usize>) -> String {
        let (Some(log), Some(mark)) = (&self.log, mark) else {
            return "(not kept)".to_owned();
        };
        log.since(mark)
            .lines()
            .filter(|line| {
                line.starts_with("----")
                    || line.contains("sharding::actor")
                    || line.contains("sharding::sharder")
                    || line.contains("taken over")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Notes `note` in the runtime's log; where the log stood before it.
    fn note(&self, note: &str) -> Option<usize> {
        let log = self.log.as_ref()?;
        let mark = log.mark();
        log.note(note);
        Some(mark)
    }

    /// Every object's resourceVersion: any write, a relabel included, changes it.
    async fn versions(&self) -> Result<BTreeMap<String, String>> {
        let list = self.objects().list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .map(|object| {
                (
                    object.name_any(),
                    object.resource_version().unwrap_or_default(),
                )
            })
            .collect())
    }

    /// Where every object's label places it.
    async fn placements(&self) -> Result<BTreeMap<String, String>> {
        let list = self.objects().list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .map(|object| {
                let shard = object.labels().get(self.labels.shard()).cloned();
                (object.name_any(), shard.unwrap_or_default())
            })
            .collect())
    }

    /// Waits until every object is placed where the ring of the running replicas puts it, none
    /// is draining, and its last reconcile was by its replica (and began after `fresh`, when
    /// given); how long that took from `since`, and the placements.
    async fn settled_after(
        &self,
        since: Instant,
        fresh: Option<Instant>,
    ) -> Result<(Duration, BTreeMap<String, String>)> {
        let ring = Ring::new(self.replicas.keys().cloned());
        let deadline = since + PATIENCE;
        loop {
            let list = self.objects().list(&ListParams::default()).await?;
            // Only the objects made here: a cluster may publish ConfigMaps of its own into
            // every namespace (kube-root-ca.crt).
            let ours: Vec<&ConfigMap> = list
                .items
                .iter()
                .filter(|o| o.name_any().starts_with(OBJECT_PREFIX))
                .collect();
            let mut wrong = 0;
            let mut placements = BTreeMap::new();
            for object in &ours {
                let name = object.name_any();
                let labels = object.labels();
                let desired = ring.shard_for(&ObjectKey {
                    group: "",
                    kind: "ConfigMap",
                    namespace: Some(RING),
                    name: &name,
                });
                let shard = labels.get(self.labels.shard()).map(String::as_str);
                if shard != desired || self.labels.drain_requested(labels) {
                    wrong += 1;
                }
                placements.insert(name, shard.unwrap_or_default().to_owned());
            }
            if wrong == 0 && ours.len() == OBJECTS && self.all_reconciled(&placements, fresh) {
                return Ok((since.elapsed(), placements));
            }
            if Instant::now() > deadline {
                bail!(
                    "after {PATIENCE:?}, {wrong} of {} objects are not where the ring puts them",
                    ours.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The same, from `since` with no demand on when the last reconciles began.
    async fn settled(&self, since: Instant) -> Result<(Duration, BTreeMap<String, String>)> {
        self.settled_after(since, None).await
    }

    /// Whether each object's last reconcile was by the replica it is placed on, and began after
    /// `fresh` when given.
    fn all_reconciled(
        &self,
        placements: &BTreeMap<String, String>,
        fresh: Option<Instant>,
    ) -> bool {
        let journal = self.journal.lock().expect("the journal's lock");
        let mut last: BTreeMap<&str, &Interval> = BTreeMap::new();
        for interval in journal.iter() {
            last.insert(&interval.object, interval);
        }
        placements.iter().all(|(object, shard)| {
            last.get(object.as_str()).is_some_and(|interval| {
                interval.replica == *shard && fresh.is_none_or(|fresh| interval.start >= fresh)
            })
        })
    }

    fn reconciled_after(&self, objects: &[&String], replica: &str, since: Instant) -> Result<()> {
        let journal = self.journal.lock().expect("the journal's lock");
        for object in objects {
            let reconciled = journal.iter().any(|interval| {
                interval.object == **object
                    && interval.replica == replica
                    && interval.start >= since
            });
            if !reconciled {
                bail!("{object} moved to {replica} but {replica} never reconciled it");
            }
        }
        Ok(())
    }

    /// Each of `objects` was let go by its replica in `before` since `since`.
    fn drained(
        &self,
        objects: &[&String],
        before: &BTreeMap<String, String>,
        since: Instant,
    ) -> Result<()> {
        let journal = self.journal.lock().expect("the journal's lock");
        for object in objects {
            let previous = &before[*object];
            let acknowledged = journal.iter().any(|interval| {
                interval.acknowledged
                    && interval.object == **object
                    && interval.replica == *previous
                    && interval.start >= since
            });
            if !acknowledged {
                bail!(
                    "{object} moved from {previous} without a drain that {previous} acknowledged"
                );
            }
        }
        Ok(())
    }

    /// Per object, the intervals of different replicas never overlap.
    fn no_overlap(&self) -> Result<String> {
        let journal = self.journal.lock().expect("the journal's lock");
        let mut by_object: BTreeMap<&str, Vec<&Interval>> = BTreeMap::new();
        for interval in journal.iter() {
            by_object
                .entry(&interval.object)
                .or_default()
                .push(interval);
        }
        let mut handovers = 0;
        for (object, intervals) in &mut by_object {
            intervals.sort_by_key(|interval| interval.start);
            for pair in intervals.windows(2) {
                let (earlier, later) = (pair[0], pair[1]);
                if earlier.replica == later.replica {
                    continue;
                }
                handovers += 1;
                if later.start < earlier.end {
                    bail!(
                        "{object}: {} began {:?} before {} ended",
                        later.replica,
                        earlier.end - later.start,
                        earlier.replica
                    );
                }
            }
        }
        Ok(format!(
            "{} reconciles, {handovers} hand-overs between replicas",
            journal.len()
        ))
    }

    async fn teardown(&mut self) {
        for (_, replica) in std::mem::take(&mut self.replicas) {
            replica.trigger.stop();
            let _ = replica.task.await;
        }
        if let Some((trigger, task)) = self.sharder.take() {
            trigger.stop();
            let _ = task.await;
        }
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let _ = namespaces.delete(RING, &DeleteParams::default()).await;
    }
}

#[derive(Clone, Copy)]
enum Step {
    Settle,
    Join,
    Restart,
    Crash,
    Stop,
}

/// A replica: holds its Lease and reconciles the objects on its shard until `shutdown`. As an
/// operator would, it stops reconciling before it hands its Lease back, so the objects that
/// then move are never reconciled by it and their next replica at once.
async fn replica(
    client: Client,
    name: String,
    labels: Labels,
    journal: Journal,
    shutdown: Shutdown,
) {
    let member = Member::new(client.clone(), RING, &name, RING, LEASE_SECONDS);
    let (fence, fenced) = watch::channel(member.fence());
    let (done, done_trigger) = Shutdown::manual();
    let holding = member.hold(&fence, done.requested());
    let working = async {
        tokio::select! {
            () = reconcile_shard(client, &name, &labels, &journal, fenced) => {}
            () = shutdown.requested() => {}
        }
        done_trigger.stop();
    };
    tokio::join!(holding, working);
}

/// Reconciles each object the replica's shard label selects, on each change and every
/// [`RESYNC`] as a requeue would, while `fence` holds; lets a drained one go instead.
async fn reconcile_shard(
    client: Client,
    name: &str,
    labels: &Labels,
    journal: &Journal,
    mut fence: watch::Receiver<Fence>,
) {
    // The sharder places objects on this replica only once it has seen its Lease renewed.
    if fence
        .wait_for(|fence| fence.holds(Instant::now()))
        .await
        .is_err()
    {
        return;
    }
    let objects: Api<ConfigMap> = Api::namespaced(client, RING);
    let config = watcher::Config::default().labels(&labels.selector(name));
    let events = watcher(objects.clone(), config).retried();
    tokio::pin!(events);
    let mut cache: BTreeMap<String, ConfigMap> = BTreeMap::new();
    let mut resync = tokio::time::interval(RESYNC);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let due: Vec<ConfigMap> = tokio::select! {
            // Changes first, as a controller's queue would take them; a resync round waits.
            biased;
            event = events.next() => match event {
                Some(Ok(Event::Apply(object) | Event::InitApply(object))) => {
                    cache.insert(object.name_any(), object.clone());
                    vec![object]
                }
                Some(Ok(Event::Delete(object))) => {
                    cache.remove(&object.name_any());
                    Vec::new()
                }
                Some(_) => Vec::new(),
                None => return,
            },
            _ = resync.tick() => cache.values().cloned().collect(),
        };
        for object in due {
            let key = object.name_any();
            if !cache.contains_key(&key) || !fence.borrow().holds(Instant::now()) {
                continue;
            }
            let start = Instant::now();
            let (acknowledged, end) = if labels.drain_requested(object.labels()) {
                let version = object.resource_version().unwrap_or_default();
                let patch = Patch::Merge(labels.acknowledge(&version));
                // The acknowledgement is the replica's last act on the object, and the API
                // server stores it before the sharder can see it and move the object on: its
                // interval ends when it is sent, not when its answer is read, which a busy
                // machine may delay past the next replica's first reconcile.
                let sent = Instant::now();
                match objects.patch(&key, &PatchParams::default(), &patch).await {
                    Ok(_) => {
                        cache.remove(&key);
                        (true, sent)
                    }
                    Err(error) => {
                        eprintln!("{name}: acknowledging a drain: {error}");
                        (false, Instant::now())
                    }
                }
            } else {
                tokio::time::sleep(RECONCILE).await;
                (false, Instant::now())
            };
            journal.lock().expect("the journal's lock").push(Interval {
                object: key,
                replica: name.to_owned(),
                acknowledged,
                start,
                end,
            });
        }
    }
}
