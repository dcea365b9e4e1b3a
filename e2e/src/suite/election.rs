//! The operator's replicas as pods of its Deployment, when one goes: a pod killed in the
//! middle of a burst of work, the API server restarted under all of them, the leader's Lease
//! taken from it, and the leader pod deleted.

use std::{
    collections::BTreeMap,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::json;

use super::{LEASE_SECONDS, PATIENCE, READY, RECOVERY, Suite};
use crate::kit::named;

/// How many primaries the burst creates.
const BURST: usize = 30;
/// How long past its Lease a dead leader's work may wait for another pod: the next renewal
/// of a standby finds the Lease expired, then it starts its watches and reconciles.
const TAKEOVER_MARGIN: Duration = Duration::from_secs(5);

impl Suite {
    /// A burst of new primaries, and the pod that leads (or, sharded, a pod with a shard)
    /// killed while they are reconciled: every one of them gets its child.
    pub(super) fn killed_mid_burst(&mut self) -> Result<()> {
        let names: Vec<String> = (0..BURST).map(|i| format!("burst-{i}")).collect();
        let objects = names.iter().map(|name| self.primary_object(name)).collect();
        let victim = self.leader()?.name;
        self.create_all(objects)?;
        self.workload.kill(&self.env.cluster, &victim)?;
        self.fails_reconciles = Some("a pod was killed under running reconciles");
        let killed = Instant::now();
        self.patience = RECOVERY;
        let converged = names.iter().try_for_each(|name| {
            let uid = self.uid(name)?;
            self.wait_child(&uid, None).map(drop)
        });
        self.patience = PATIENCE;
        converged?;
        println!(
            "\n    {victim} killed under {BURST} new primaries: every one had its child {:.1?} later",
            killed.elapsed()
        );
        for name in &names {
            self.delete_primary(name)?;
        }
        self.workload.wait_ready(READY).map(drop)
    }

    /// The API server killed and started again under the running pods: their watches come
    /// back, a new primary gets its child, and no pod restarted.
    pub(super) fn apiserver_restart(&mut self) -> Result<()> {
        let restarts = |suite: &Self| -> Result<u64> {
            Ok(suite.workload.pods()?.iter().map(|pod| pod.restarts).sum())
        };
        let before = restarts(self)?;
        self.env.cluster.restart_apiserver(Duration::ZERO)?;
        self.fails_reconciles = Some("the API server went away under running reconciles");
        // From the first ready /readyz (restart_apiserver waits for it): the figure the
        // operator's watch backoff decides, apart from the API server's own start. The floor
        // beside it is when the operator's own ServiceAccount could first list the primary
        // from the API server's watch cache, as a watch's relist does: no backoff can beat it.
        let ready = Instant::now();
        let floor = self.cached_list_floor(ready)?;
        let uid = self.create_primary("after-restart")?;
        self.patience = RECOVERY;
        let recovered = self.wait_child(&uid, None).map(drop);
        self.patience = PATIENCE;
        if recovered.is_ok() {
            let floor = match floor.join() {
                Ok(Some(floor)) => format!("{floor:.1?}"),
                _ => "not within the patience".to_owned(),
            };
            println!(
                "\n    {}: current {:.1?} after the restarted API server was ready; floor: its ServiceAccount first listed {} from the cache at {floor}",
                self.name,
                ready.elapsed(),
                self.kind,
            );
        }
        recovered?;
        let after = restarts(self)?;
        if after != before {
            bail!(
                "the pods restarted {} times in the outage; they should have retried in process",
                after - before
            );
        }
        self.delete_primary("after-restart")
    }

    /// Polls, as the operator's ServiceAccount, a list of the primary from the API server's
    /// watch cache (`resourceVersion=0`) until one succeeds; how long after `ready` it did.
    fn cached_list_floor(
        &self,
        ready: Instant,
    ) -> Result<std::thread::JoinHandle<Option<Duration>>> {
        let plural = self.primary.split('.').next().unwrap_or_default();
        let prefix = if self.api_version.contains('/') {
            "apis"
        } else {
            "api"
        };
        // An operator scoped to its namespace may list only there.
        let namespace = match self.manifest.scope {
            operator_gen::manifest::Scope::Namespace => {
                format!("namespaces/{}/", self.operator_namespace)
            }
            operator_gen::manifest::Scope::Cluster => String::new(),
        };
        let path = format!(
            "/{prefix}/{}/{namespace}{plural}?resourceVersion=0&limit=1",
            self.api_version
        );
        let kubeconfig = self.env.logs.join("floor.kubeconfig");
        operator_gen_cluster::service_account_kubeconfig(
            &self.env.kubectl,
            &self.name,
            &self.operator_namespace,
            &kubeconfig,
        )?;
        let kubectl = self.env.kubectl.bin().to_owned();
        Ok(std::thread::spawn(move || {
            while ready.elapsed() < RECOVERY {
                let listed = Command::new(&kubectl)
                    .args(["get", "--raw", &path, "--request-timeout=5s"])
                    .env("KUBECONFIG", &kubeconfig)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                if listed {
                    return Some(ready.elapsed());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            None
        }))
    }

    /// The Deployment's two pods elect a leader on the operator's Lease: only the leader
    /// reconciles, and it survives losing the Lease.
    pub(super) fn leader_election(&mut self) -> Result<()> {
        // Counted from here, not from each pod's start: an earlier check may have moved the
        // Lease (an API server restart can outlast it), and then both pods have led once.
        let before = self.reconciles_per_replica()?;
        let uid = self.create_primary("replicated")?;
        self.wait_child(&uid, None)?;
        // The count goes up once the reconcile has returned, just after its child was written.
        let mut after = BTreeMap::new();
        let mut reconciled = Vec::new();
        self.eventually("the reconcile of the new primary to be counted", || {
            after = self.reconciles_per_replica()?;
            reconciled = after
                .iter()
                .filter(|(name, count)| **count > before.get(*name).copied().unwrap_or(0))
                .map(|(name, _)| name.clone())
                .collect();
            Ok(!reconciled.is_empty())
        })?;
        let leader = self.leader()?.name;
        if after.len() < 2 || reconciled != [leader.clone()] {
            bail!(
                "reconciles per pod went from {before:?} to {after:?}; only the leader, {leader}, should have reconciled"
            );
        }
        self.lease_taken_from_the_leader()
    }

    /// Each running replica's reconciles so far, by its name.
    fn reconciles_per_replica(&self) -> Result<BTreeMap<String, u64>> {
        self.replicas()?
            .iter()
            .map(|replica| Ok((replica.name.clone(), replica.reconciles()?)))
            .collect()
    }

    /// Takes the Lease from under the leader, as another replica would once an outage kept the
    /// leader from renewing: the leader stops reconciling, both pods campaign in process, and
    /// once the taker's hold expires one of them leads and reconciles again. (The leader's
    /// last renewal, which kube-lease-manager makes without checking the holder, may stretch
    /// the taker's hold by one [`LEASE_SECONDS`].)
    fn lease_taken_from_the_leader(&mut self) -> Result<()> {
        let leader = self.leader()?.name;
        let restarts: u64 = self.workload.pods()?.iter().map(|p| p.restarts).sum();
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let taken = json!({"spec": {
            "holderIdentity": "e2e-taker",
            "acquireTime": now,
            "renewTime": now,
            "leaseDurationSeconds": LEASE_SECONDS,
        }});
        let namespace = self.operator_namespace.clone();
        // Only what the leader logs from here on: an API server restart before this check may
        // have cost it the Lease once already, and it took it back.
        let marks = self.log_marks();
        self.admin(
            &[
                "patch",
                "lease",
                &self.name,
                "-n",
                &namespace,
                "--type",
                "merge",
                "-p",
                &taken.to_string(),
            ],
            None,
        )?;
        // Its log says so; the gauges may never show both pods standing by at once, when the
        // other takes the Lease before the leader's next renewal finds it gone.
        let from_the_leader = format!("{leader}: ");
        self.eventually("the leader to see it lost the Lease", || {
            let said = marks
                .lines_since(&self.log_files(), &["lost leadership; campaigning again"])
                .iter()
                .any(|line| line.starts_with(&from_the_leader));
            Ok(said)
        })?;
        self.eventually("one pod to lead again", || {
            let mut leading = 0;
            for replica in self.replicas()? {
                leading += usize::from(replica.gauge("operator_leader")? == 1.0);
            }
            Ok(leading == 1)
        })?;
        let now: u64 = self.workload.pods()?.iter().map(|p| p.restarts).sum();
        if now != restarts {
            bail!("a pod restarted on losing the Lease; it should have campaigned again");
        }
        let uid = self.create_primary("re-elected")?;
        self.wait_child(&uid, None)?;
        for name in ["replicated", "re-elected"] {
            self.delete_primary(name)?;
        }
        Ok(())
    }

    /// The leader pod deleted at once, as a lost node ends it, without handing its Lease
    /// back: another pod leads within the Lease and its next renewal, and reconciles.
    pub(super) fn failover(&mut self) -> Result<()> {
        let leader = self.leader()?.name;
        let killed = Instant::now();
        self.workload.kill(&self.env.cluster, &leader)?;
        self.fails_reconciles = Some("the leader was killed under running reconciles");
        let mut took = None;
        self.eventually("another pod to lead", || {
            let holder = self.workload.leader()?;
            let pods = self.workload.pods()?;
            let leads = holder.as_deref().is_some_and(|holder| {
                holder != leader && named(&pods, holder).is_ok_and(|pod| !pod.terminating)
            });
            if leads {
                took = Some(killed.elapsed());
            }
            Ok(leads)
        })?;
        let took = took.context("a new leader")?;
        let uid = self.create_primary("after-failover")?;
        self.wait_child(&uid, None)?;
        let reconciled = killed.elapsed();
        let bound = Duration::from_secs(LEASE_SECONDS) + TAKEOVER_MARGIN;
        println!(
            "\n    {leader} deleted: another pod led {took:.1?} later (bound {bound:?}), and reconciled a new primary {reconciled:.1?} after"
        );
        if took > bound {
            bail!("the new leader took {took:.1?}; the bound is {bound:?}");
        }
        self.delete_primary("after-failover")?;
        self.workload.wait_ready(READY).map(drop)
    }
}
