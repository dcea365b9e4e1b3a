//! One operator crate under test: deployed as its user deploys it, as pods from its `deploy/`
//! (an overlay of the e2e's picks only the image's tag for a rollout and the namespace of a
//! crate that would run in `default`) or from its Helm chart, and checked through the API
//! server, the Service and the pods' own endpoints.
//!
//! Each check says how the operator must run for it ([`Mode`]): as pods (nearly all), as a
//! process on this machine from `deploy/local/` (what a process proves better: a trigger
//! from a folder on the operator's machine), or not at all (the crate's own cluster test runs
//! its own controller). The suite switches as a user switches, so one check can be run by
//! name and finds the operator as it needs it.

mod children;
mod conversion;
mod deploy;
mod election;
mod handover;
mod helm;
mod local;
mod monitoring;
mod rollout;
mod sharded;
mod stalling;
mod status;
mod webhooks;

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use operator_gen::{Manifest, Selection, crd_document, k8s_catalog, schema_sample};
use operator_gen_cluster::{Cluster, OperatorCrate};
use serde_json::{Value, json};

pub(crate) use deploy::Deployed;
pub(crate) use helm::{CHECK as HELM_CHECK, HELM_CRATES};
pub(crate) use monitoring::{Prometheus, install as install_prometheus};

use crate::{
    artifacts::Artifacts,
    kit::{Kubectl, Local, Replica, Workload, logs},
};

/// How long a behaviour gets to show. Leader election may need a Lease to expire.
const PATIENCE: Duration = Duration::from_secs(60);
/// How long pods get to become Ready after a deploy, a scale or a rollout.
const READY: Duration = Duration::from_secs(120);
/// How long the replicas here hold their Lease (`LEASE_SECONDS`, which the e2e's overlay
/// sets): a third of the 15 s default, so that the checks of a taken or stopped leader wait
/// seconds, not a quarter of a minute each. They check the same hand-over, only sooner.
const LEASE_SECONDS: u64 = 5;
/// How long watches get to come back after the API server restarts. While it shuts down
/// and just after, while its RBAC caches fill and answer 403, every watcher fails a few
/// times; the runtime's backoff retries each within 5 s. The patience stays generous: this
/// is a check, not a timing.
const RECOVERY: Duration = Duration::from_secs(300);

/// What every suite shares.
pub(crate) struct Env {
    pub kubectl: Kubectl,
    pub workspace: PathBuf,
    /// This crate's folder of logs and scratch files, `target/e2e/<crate>`.
    pub logs: PathBuf,
    pub cluster: Arc<Cluster>,
    pub prometheus: Prometheus,
    /// The operators' binaries and shipped cluster tests.
    pub artifacts: Arc<Artifacts>,
}

/// How the operator must run for a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// As pods of its Deployment, its webhooks reached through the Service.
    Pods,
    /// Its Deployment scaled to none and `deploy/local/` applied, with the operator as a
    /// process on this machine, as `cargo run` runs it.
    Local,
    /// Its Deployment scaled to none and `deploy/local/` applied, nothing running: for a test
    /// that runs its own controller.
    Stopped,
    /// However it runs: for taking it away, from whatever a failed check left.
    AsItIs,
}

/// A named check of one behaviour, and how the operator must run for it.
#[derive(Clone, Copy)]
pub(crate) struct Check {
    pub name: &'static str,
    pub mode: Mode,
    pub run: fn(&mut Suite) -> Result<()>,
}

const fn check(name: &'static str, mode: Mode, run: fn(&mut Suite) -> Result<()>) -> Check {
    Check { name, mode, run }
}

/// What a check that did not fail found.
pub(crate) enum Verdict {
    /// It passed; reconciles failed as many times as its scenario meant them to, for the
    /// reason given.
    Passed(Option<(usize, &'static str)>),
    /// It found nothing to check, for this reason.
    Skipped(&'static str),
}

/// What an operator reconciles, as the checks create it.
struct Primary {
    /// Its resource name for kubectl (`prometheusrules.monitoring.coreos.com`, `deployments.apps`).
    resource: String,
    api_version: String,
    kind: String,
    /// The body of the objects the checks create.
    body: Value,
    /// The CRD that defines it, when it is no built-in kind.
    crd: Option<PathBuf>,
    /// That CRD, as JSON, for its CEL rules.
    crd_json: Option<Value>,
}

impl Primary {
    /// A custom resource defined by the CRD at `crd`; its body is the schema's least object
    /// with the manifest's `sample:` over it.
    fn custom(crd: PathBuf, manifest: &Manifest) -> Result<Self> {
        let bytes = fs::read(&crd).with_context(|| format!("reading {}", crd.display()))?;
        let origin = crd.display().to_string();
        let crds = crd_document::parse_all(&origin, &bytes)?;
        let selected = crd_document::select(&origin, crds, &Selection::default())?;
        let schema = selected
            .schema()
            .with_context(|| format!("{origin} has no schema"))?;
        let body = schema_sample::sample_with(schema, manifest.sample.as_ref()).body;
        let spec = &selected.crd.spec;
        Ok(Self {
            resource: selected.name().to_owned(),
            api_version: format!("{}/{}", spec.group, selected.version().name),
            kind: spec.names.kind.clone(),
            body,
            crd: Some(crd),
            crd_json: Some(serde_json::to_value(&selected.crd)?),
        })
    }

    /// The built-in `kind` an operator crate reconciles, with a body the API server stores.
    /// It asks for no pod: the node would start a sandbox for each of the thousand a check
    /// creates (and refuse their image, which nothing serves).
    fn builtin(crate_name: &str, kind: &str) -> Result<Self> {
        let found = k8s_catalog::find(kind)
            .with_context(|| format!("{crate_name} reconciles {kind}, which is not built in"))?;
        let pods = json!({
            "replicas": 0,
            "selector": {"matchLabels": {"app": "e2e"}},
            "template": {
                "metadata": {"labels": {"app": "e2e"}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]},
            },
        });
        let body = match found.kind {
            "Deployment" => json!({ "spec": pods }),
            "StatefulSet" => {
                let mut spec = pods;
                spec["serviceName"] = json!("e2e");
                json!({ "spec": spec })
            }
            other => bail!("{crate_name}: the e2e knows no valid {other} to create; add one here"),
        };
        Ok(Self {
            resource: match found.group {
                "" => found.plural.to_owned(),
                group => format!("{}.{group}", found.plural),
            },
            api_version: found.api_version(),
            kind: found.kind.to_owned(),
            body,
            crd: None,
            crd_json: None,
        })
    }
}

/// An owned child, as found through its ownerReference.
struct OwnedChild {
    /// kubectl's name for its resource (`configmaps`).
    resource: String,
    name: String,
    uid: String,
    object: Value,
}

/// One operator crate under test.
pub(crate) struct Suite {
    env: Env,
    name: String,
    dir: PathBuf,
    manifest: Manifest,
    /// The CRD installed: `deploy/base/crd.yaml`, or what a derived crate's `crdgen` printed;
    /// none for a built-in kind.
    crd_path: Option<PathBuf>,
    /// That CRD as JSON, whose CEL rules every object the checks create must keep. The API
    /// server enforces them too; evaluated here first (`operator_gen::cel`), a broken rule
    /// fails the check with the object that broke it rather than with a refused write.
    crd_json: Option<Value>,
    /// The CRD `crdgen` printed, which the suite installs and so removes: calling its
    /// conversion webhook through the Service, and on loopback for a local run.
    derived_crd: Option<deploy::DerivedCrd>,
    /// The primary's resource name for kubectl (`prometheusrules.monitoring.coreos.com`).
    primary: String,
    api_version: String,
    kind: String,
    /// The primary's body: the schema's least object with the manifest's `sample:` over it.
    body: Value,
    /// Owned built-in kinds, as kubectl resource names.
    owned: Vec<String>,
    /// Where the checks create primaries.
    namespace: String,
    /// The namespace the operator runs in: its `deploy/`'s, or its own for a crate whose
    /// `deploy/` would run it in `default`.
    operator_namespace: String,
    /// The namespace its own `deploy/` names.
    deploy_namespace: String,
    /// Its Deployment and pods.
    workload: Workload,
    /// How it runs now.
    mode: Mode,
    /// Its processes on this machine, when it runs so.
    local: BTreeMap<String, Local>,
    /// The kubeconfig of its ServiceAccount, for a local run.
    kubeconfig: PathBuf,
    /// example-operator's outside rule registry, a folder this test can write to. A generated
    /// skeleton's poll hook returns nothing, so it has no trigger to fire.
    registry: Option<PathBuf>,
    next_port: u16,
    /// How long [`Suite::eventually`] waits.
    patience: Duration,
    /// Set by a check that found nothing to check.
    skipped: Option<&'static str>,
    /// Set by a check whose scenario makes reconciles fail on purpose, saying how; any other
    /// check fails when an operator's reconcile failed while it ran.
    fails_reconciles: Option<&'static str>,
    /// Copies the pods' logs out of the node as they grow, so that a deleted pod's stay.
    collector: Option<logs::Collector>,
}

impl Suite {
    pub(crate) fn new(env: Env, operator: &OperatorCrate) -> Result<Self> {
        let name = operator.name.clone();
        let dir = operator.dir.clone();
        let manifest = Manifest::load(&dir.join("operator.yaml"))?;
        fs::create_dir_all(&env.logs)?;
        // A crate whose deploy/ runs it in `default` runs in a namespace of its own here, so
        // that the restricted Pod Security profile gates only operators.
        let operator_namespace = match operator.namespace.as_str() {
            operator_gen_cluster::OPERATOR_NAMESPACE => name.clone(),
            own => own.to_owned(),
        };
        let derived_crd = match &manifest.primary.derive {
            Some(derived) => Some(deploy::DerivedCrd::print(
                env.artifacts.bin(&dir, "crdgen")?,
                !derived.also_served.is_empty(),
                &operator_namespace,
                &env.logs,
            )?),
            None => None,
        };
        // A generic operator is checked through its first kind, which runs the same
        // controller as the others.
        let builtin = manifest.primary.builtin.as_ref().or_else(|| {
            let kinds = manifest.primary.generic.as_ref();
            kinds.and_then(|kinds| kinds.first())
        });
        let primary = match builtin {
            Some(kind) => Primary::builtin(&name, kind)?,
            None => Primary::custom(
                derived_crd.as_ref().map_or_else(
                    || dir.join("deploy/base/crd.yaml"),
                    |crd| crd.service.clone(),
                ),
                &manifest,
            )?,
        };
        let owned = manifest
            .owns
            .iter()
            .filter_map(|o| k8s_catalog::find(&o.kind))
            .map(|k| {
                if k.group.is_empty() {
                    k.plural.to_owned()
                } else {
                    format!("{}.{}", k.plural, k.group)
                }
            })
            .collect();
        let registry = (name == "example-operator").then(|| env.logs.join("registry"));
        let workload = Workload::new(
            env.kubectl.clone(),
            &operator_namespace,
            &name,
            &env.cluster.node_folders().pod_logs,
        );
        Ok(Self {
            registry,
            primary: primary.resource,
            api_version: primary.api_version,
            kind: primary.kind,
            namespace: format!("e2e-{name}"),
            kubeconfig: env.logs.join("operator.kubeconfig"),
            operator_namespace,
            deploy_namespace: operator.namespace.clone(),
            name,
            body: primary.body,
            owned,
            manifest,
            crd_path: primary.crd,
            crd_json: primary.crd_json,
            derived_crd,
            dir,
            workload,
            mode: Mode::Pods,
            local: BTreeMap::new(),
            env,
            next_port: 19100,
            patience: PATIENCE,
            skipped: None,
            fails_reconciles: None,
            collector: None,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Every check that applies to the operator crate `operator` deployed with `deploy/`, in
    /// order. The first deploys it; the last takes it away.
    pub(crate) fn checks(operator: &OperatorCrate) -> Result<Vec<Check>> {
        let manifest = Manifest::load(&operator.dir.join("operator.yaml"))?;
        Ok(Facts {
            name: &operator.name,
            dir: &operator.dir,
            manifest: &manifest,
        }
        .checks())
    }
}

/// What decides which checks apply to a crate.
struct Facts<'a> {
    name: &'a str,
    dir: &'a Path,
    manifest: &'a Manifest,
}

impl Facts<'_> {
    fn has_webhooks(&self) -> bool {
        self.dir.join("deploy/base/webhooks.yaml").exists()
    }

    fn has_admission(&self) -> bool {
        self.manifest
            .webhooks
            .is_some_and(|w| w.validating || w.mutating)
    }

    fn other_kinds(&self) -> impl Iterator<Item = &String> {
        self.manifest.primary.generic.iter().flatten().skip(1)
    }

    fn older_versions(&self) -> bool {
        self.manifest
            .primary
            .derive
            .as_ref()
            .is_some_and(|d| !d.also_served.is_empty())
    }

    fn own_condition(&self) -> Option<&str> {
        self.manifest.own_condition()
    }

    fn checks(&self) -> Vec<Check> {
        use Mode::{Local, Pods, Stopped};
        let owns = self
            .manifest
            .owns
            .iter()
            .any(|o| k8s_catalog::find(&o.kind).is_some());
        let mut checks = vec![
            check(
                "deploy/ installs it with only the generated RBAC, and its pods become Ready",
                Pods,
                Suite::deploy_with_kustomize,
            ),
            check(
                "its monitoring: a real Prometheus scrapes its pods, evaluates every alert and answers every dashboard query",
                Pods,
                Suite::monitoring,
            ),
        ];
        if self.has_admission() {
            checks.extend([
                check(
                    "the validating webhook, through the Service, refuses an invalid primary, which is not stored",
                    Pods,
                    Suite::validating_refuses,
                ),
                check(
                    "an object labelled to skip the webhooks is validated all the same",
                    Pods,
                    Suite::labelled_still_validated,
                ),
            ]);
            // The operator's own namespace exempt from its webhooks (a sharded one may have a
            // namespace of its own with no exemption).
            let namespace = fs::read_to_string(self.dir.join("deploy/base/namespace.yaml"));
            if namespace.is_ok_and(|text| text.contains("skip-webhooks.operator-gen.kube.rs/")) {
                checks.push(check(
                    "the operator's own namespace and a labelled kube-system are left alone",
                    Pods,
                    Suite::exempt_namespaces_left_alone,
                ));
            }
            checks.push(check(
                "the mutating webhook's default is stored",
                Pods,
                Suite::mutating_defaults,
            ));
            if self.other_kinds().next().is_some() {
                checks.push(check(
                    "each other kind is refused and defaulted by the same webhooks",
                    Pods,
                    Suite::other_kinds_admitted,
                ));
            }
            checks.push(check(
                "with no pod answering, creates fail closed; scaled back, they are stored",
                Pods,
                Suite::fails_closed,
            ));
            checks.push(check(
                "a rolling update to a new image: every admission request answered throughout",
                Pods,
                Suite::rolling_update,
            ));
        }
        if self.older_versions() {
            checks.extend([
                check(
                    "an object created as an older version reads as the hub and back, unchanged, converted through the Service",
                    Pods,
                    Suite::older_reads_as_hub,
                ),
                check(
                    "a field only the hub has survives an edit through an older version",
                    Pods,
                    Suite::hub_fields_survive,
                ),
                check(
                    "listing in every served version gives the same objects",
                    Pods,
                    Suite::lists_in_every_version,
                ),
                check(
                    "a list of 1,000 objects reads in an older version, unpaginated",
                    Pods,
                    Suite::lists_many_in_an_older_version,
                ),
                check(
                    "conversions answer while two clients stall POSTs to a pod's webhook port",
                    Pods,
                    Suite::converts_beside_stalled_clients,
                ),
            ]);
        }
        if owns {
            checks.extend([
                check(
                    "a new primary gets its child, controller-owned",
                    Pods,
                    Suite::child_appears,
                ),
                check(
                    "a deleted child is restored",
                    Pods,
                    Suite::deleted_child_restored,
                ),
                check(
                    "an edited child is restored",
                    Pods,
                    Suite::edited_child_restored,
                ),
            ]);
            if self.other_kinds().next().is_some() {
                checks.push(check(
                    "each other kind's controller follows the shared watch: its child appears, and a deleted one is restored",
                    Pods,
                    Suite::other_kinds_children,
                ));
            }
        }
        if self.manifest.watches.iter().any(|w| label_key(w).is_some()) {
            checks.push(check(
                "a watched object's change reconciles the primary",
                Pods,
                Suite::watched_change,
            ));
        }
        if self.manifest.watches.iter().any(|w| w.cache) {
            checks.push(check(
                "a cached watch holds each object it selects, and lets a deleted one go",
                Pods,
                Suite::cached_watch_follows,
            ));
        }
        if owns {
            checks.push(check(
                "a pod killed during a burst of new primaries loses none of them",
                Pods,
                Suite::killed_mid_burst,
            ));
            checks.push(check(
                "watches recover after an API server restart",
                Pods,
                Suite::apiserver_restart,
            ));
            if self.manifest.sharding {
                checks.push(check(
                    match self.other_kinds().next() {
                        None => "sharded pods split 1,000 primaries, one joins, one is deleted and its shard moves; none reconciled by two at once",
                        Some(_) => "sharded pods split 1,000 primaries, one joins, one is deleted and its shard moves; none reconciled by two at once; the other kinds split on the same pods",
                    },
                    Pods,
                    Suite::sharded,
                ));
            } else {
                checks.extend([
                    check(
                        "two pods: only the leader reconciles, and a Lease taken from it is campaigned for again",
                        Pods,
                        Suite::leader_election,
                    ),
                    check(
                        "the leader pod deleted: another pod leads within the Lease",
                        Pods,
                        Suite::failover,
                    ),
                ]);
            }
        }
        if self.own_condition().is_some() {
            checks.push(check(
                "a new primary's own condition reports its reconcile, for its generation",
                Pods,
                Suite::own_condition_reports_the_reconcile,
            ));
        }
        if self.own_condition().is_some() && status::status_case(self.name).is_some() {
            checks.push(check(
                "another controller's condition survives 1,000 reconciles that write the operator's own",
                Pods,
                Suite::others_condition_survives,
            ));
        }
        if self.dir.join("tests/cluster.rs").exists() {
            checks.push(check(
                "its own cluster test passes with the Deployment scaled to none and deploy/local/ applied",
                Stopped,
                Suite::shipped_cluster_test,
            ));
        }
        let registry = self.name == "example-operator";
        if registry {
            checks.push(check(
                "run locally from deploy/local/, an external trigger reconciles the primary",
                Local,
                Suite::external_trigger,
            ));
        }
        if self.dir.join("tests/cluster.rs").exists() || registry {
            checks.push(check(
                "back from a local run, deploy/ brings every pod back Ready",
                Pods,
                Suite::back_in_the_cluster,
            ));
        }
        checks.push(check(
            if self.manifest.external.is_empty() {
                "deletion garbage-collects the children"
            } else {
                "deletion runs cleanup, then children are garbage-collected"
            },
            Pods,
            Suite::deletion,
        ));
        if self.has_webhooks() {
            checks.push(check(
                "the cert-manager overlay builds and passes a server dry run",
                Pods,
                Suite::cert_manager_overlay,
            ));
        }
        if self.name == handover::HANDED_OVER {
            checks.push(check(
                "handed from deploy/local/ to its chart and back to deploy/ by OPERATOR.md's commands, as pasted: its objects stay, and a CRD helm changed does not conflict",
                Stopped,
                Suite::handed_to_helm_and_back,
            ));
        }
        checks.push(check(
            "uninstalled with kubectl delete -k, it leaves nothing behind",
            Mode::AsItIs,
            Suite::teardown,
        ));
        checks
    }
}

impl Suite {
    /// Runs `check` with the operator running as it needs; whether it passed or found
    /// nothing to check.
    pub(crate) fn run(&mut self, check: &Check) -> Result<Verdict> {
        if check.mode != Mode::AsItIs {
            self.ensure(check.mode)?;
        }
        let marks = self.log_marks();
        let checked = (check.run)(self);
        // Taken whatever the outcome, so that neither reaches the next check.
        let (skipped, fails_reconciles) = (self.skipped.take(), self.fails_reconciles.take());
        checked?;
        let failed = self.failed_reconciles_since(&marks);
        let meant = match fails_reconciles {
            Some(reason) => (!failed.is_empty()).then_some((failed.len(), reason)),
            None if failed.is_empty() => None,
            None => bail!(
                "the operator's reconciles failed while this check ran, which did not make \
                 them fail on purpose:\n  {}",
                failed.join("\n  ")
            ),
        };
        Ok(match skipped {
            Some(reason) => Verdict::Skipped(reason),
            None => Verdict::Passed(meant),
        })
    }

    /// What every log of the operator (its pods' and its processes') says so far.
    fn log_files(&self) -> Vec<(String, PathBuf)> {
        let mut files: Vec<(String, PathBuf)> = logs::in_folder(&self.env.logs)
            .into_iter()
            .map(|log| {
                let owner = log
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                (owner, log)
            })
            .collect();
        if let Some(collector) = &self.collector {
            collector.copy_now();
            files.extend(collector.files());
        }
        files
    }

    fn log_marks(&self) -> logs::Marks {
        let files: Vec<PathBuf> = self.log_files().into_iter().map(|(_, f)| f).collect();
        logs::Marks::take(&files)
    }

    /// Every line logged since `marks` that says a reconcile failed.
    fn failed_reconciles_since(&self, marks: &logs::Marks) -> Vec<String> {
        marks.lines_since(&self.log_files(), logs::FAILED_RECONCILE)
    }

    /// Prints the end of every log of the operator and of the control plane, after a failure.
    pub(crate) fn print_log_tails(&self) {
        let mut files = self.log_files();
        for component in ["kube-apiserver", "kube-controller-manager", "kubelet"] {
            files.push((component.to_owned(), self.env.cluster.log(component)));
        }
        for (owner, log) in files {
            let text = logs::read_from(&log, 0);
            let lines: Vec<&str> = text.lines().map(logs::written).collect();
            println!(
                "---- {owner}: {} (last 15 lines)\n{}",
                log.display(),
                lines[lines.len().saturating_sub(15)..].join("\n")
            );
        }
    }

    /// The replicas running now: the local processes when it runs locally, else its Ready pods.
    fn replicas(&self) -> Result<Vec<Replica>> {
        if !self.local.is_empty() {
            return Ok(self.local.values().map(|l| l.replica.clone()).collect());
        }
        self.workload.replicas()
    }

    /// The replica `name`.
    fn replica(&self, name: &str) -> Result<Replica> {
        self.replicas()?
            .into_iter()
            .find(|replica| replica.name == name)
            .with_context(|| format!("no replica {name} runs"))
    }

    /// The value of an unlabelled gauge in a replica's metrics.
    fn gauge(&self, replica: &str, name: &str) -> Result<f64> {
        self.replica(replica)?.gauge(name)
    }

    /// Every running replica's reconciles, added up.
    fn reconciles(&self) -> Result<u64> {
        let mut total = 0;
        for replica in self.replicas()? {
            total += replica.reconciles()?;
        }
        Ok(total)
    }

    /// The replica that leads: the holder of the operator's Lease where there is one, else
    /// the only replica.
    fn leader(&self) -> Result<Replica> {
        let replicas = self.replicas()?;
        if let Some(holder) = self.workload.leader()?
            && let Some(leader) = replicas.iter().find(|r| r.name == holder)
        {
            return Ok(leader.clone());
        }
        match replicas.as_slice() {
            [only] => Ok(only.clone()),
            _ => bail!("no replica holds the operator's Lease among {replicas:?}"),
        }
    }

    /// A generic operator's kinds after the first, which the checks otherwise go through.
    fn other_kinds(&self) -> impl Iterator<Item = &String> {
        self.manifest.primary.generic.iter().flatten().skip(1)
    }

    /// Runs `check` as each of a generic operator's other kinds in turn, made the kind the
    /// checks create, and deletes the object `created` it leaves.
    fn through_other_kinds(
        &mut self,
        created: &str,
        check: fn(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let kinds: Vec<String> = self.other_kinds().cloned().collect();
        for kind in kinds {
            let first = self.swap_primary(Primary::builtin(&self.name, &kind)?);
            let cleaned = check(self).and_then(|()| self.delete_primary(created));
            self.swap_primary(first);
            cleaned.with_context(|| format!("through a {kind}"))?;
        }
        Ok(())
    }

    /// Makes `primary` the kind the checks create, and gives back the one they created.
    fn swap_primary(&mut self, primary: Primary) -> Primary {
        Primary {
            resource: std::mem::replace(&mut self.primary, primary.resource),
            api_version: std::mem::replace(&mut self.api_version, primary.api_version),
            kind: std::mem::replace(&mut self.kind, primary.kind),
            body: std::mem::replace(&mut self.body, primary.body),
            crd: None,
            crd_json: None,
        }
    }

    /// Runs `work` on a runtime of its own with the API of the suite's primaries, as the
    /// cluster's admin: for checks that make many requests, at once or in quick succession,
    /// where a `kubectl` per request would take the check's time.
    fn with_primaries<T>(
        &self,
        work: impl AsyncFnOnce(kube::Api<kube::api::DynamicObject>) -> Result<T>,
    ) -> Result<T> {
        let (group, version) = self
            .api_version
            .split_once('/')
            .unwrap_or(("", self.api_version.as_str()));
        let plural = self.primary.split('.').next().unwrap_or_default();
        let gvk = kube::api::GroupVersionKind::gvk(group, version, &self.kind);
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let client = crate::kit::client(self.env.kubectl.kubeconfig()).await?;
            work(kube::Api::namespaced_with(
                client,
                &self.namespace,
                &resource,
            ))
            .await
        })
    }

    /// Creates a primary named `name` from the schema's least object; returns its uid.
    fn create_primary(&self, name: &str) -> Result<String> {
        let object = self.primary_object(name);
        self.check_rules(&object)?;
        self.apply_json(&object)?;
        self.uid(name)
    }

    /// Fails when `object` breaks a CEL rule of the CRD, naming the rule, before the API server
    /// refuses it.
    fn check_rules(&self, object: &Value) -> Result<()> {
        let Some(crd) = &self.crd_json else {
            return Ok(());
        };
        let checked =
            operator_gen::cel::check_against_crd(crd, object).map_err(anyhow::Error::msg)?;
        match checked.broken.first() {
            None => Ok(()),
            Some(broken) => bail!(
                "the object to create breaks CEL rule `{}` at `{}`: {}",
                broken.rule,
                broken.path,
                broken.message
            ),
        }
    }

    /// The primary `name`, from the sample, as `kubectl apply` takes it.
    fn primary_object(&self, name: &str) -> Value {
        let mut object = self.body.clone();
        object["apiVersion"] = json!(self.api_version);
        object["kind"] = json!(self.kind);
        object["metadata"] = json!({"name": name, "namespace": self.namespace});
        object
    }

    /// Deletes the primary `name` and waits until it is gone: past the operator's cleanup,
    /// when it holds a finalizer.
    fn delete_primary(&self, name: &str) -> Result<()> {
        let delete = [
            "delete",
            &self.primary,
            name,
            "-n",
            &self.namespace,
            "--wait=false",
        ];
        self.admin(&delete, None)?;
        self.eventually("the primary to be gone", || {
            Ok(self.find(&self.primary, name)?.is_none())
        })
    }

    fn uid(&self, name: &str) -> Result<String> {
        let object = self.get_json(&self.primary, name)?;
        object["metadata"]["uid"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("{name} has no uid"))
    }

    /// Waits for a child with a controller ownerReference to `owner` (and not the one with
    /// uid `not`).
    fn wait_child(&self, owner: &str, not: Option<&str>) -> Result<OwnedChild> {
        let mut found = None;
        self.eventually("a child with a controller ownerReference", || {
            for resource in &self.owned {
                let list =
                    self.admin_json(&["get", resource, "-n", &self.namespace, "-o", "json"])?;
                let items = list["items"].as_array().cloned().unwrap_or_default();
                let child = items.into_iter().find(|item| {
                    let references = item["metadata"]["ownerReferences"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    let owned = references
                        .iter()
                        .any(|r| r["uid"] == owner && r["controller"] == true);
                    owned && not.is_none_or(|old| item["metadata"]["uid"] != old)
                });
                if let Some(object) = child {
                    let text = |field: &str| {
                        object["metadata"][field]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned()
                    };
                    found = Some(OwnedChild {
                        resource: resource.clone(),
                        name: text("name"),
                        uid: text("uid"),
                        object,
                    });
                    return Ok(true);
                }
            }
            Ok(false)
        })?;
        found.context("the child vanished")
    }

    /// Polls `done` until it says yes, for at most `self.patience`.
    fn eventually(&self, what: &str, mut done: impl FnMut() -> Result<bool>) -> Result<()> {
        let patience = self.patience;
        let deadline = Instant::now() + patience;
        let mut last_error = None;
        while Instant::now() < deadline {
            match done() {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(error) => last_error = Some(error),
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        match last_error {
            Some(error) => bail!("waited {patience:?} for {what}; last error: {error:#}"),
            None => bail!("waited {patience:?} for {what}"),
        }
    }

    fn find(&self, resource: &str, name: &str) -> Result<Option<Value>> {
        let list = self.admin_json(&[
            "get",
            resource,
            "-n",
            &self.namespace,
            "--field-selector",
            &format!("metadata.name={name}"),
            "-o",
            "json",
        ])?;
        Ok(list["items"]
            .as_array()
            .and_then(|items| items.first().cloned()))
    }

    fn get_json(&self, resource: &str, name: &str) -> Result<Value> {
        self.admin_json(&["get", resource, name, "-n", &self.namespace, "-o", "json"])
    }

    /// Applies `object`; the outer error is kubectl failing to run, the inner one the API
    /// server's refusal, for checks that expect one.
    fn try_apply_json(&self, object: &Value) -> Result<std::result::Result<(), String>> {
        self.env
            .kubectl
            .try_apply_json(object, &self.env.logs.join("object.json"))
    }

    fn apply_json(&self, object: &Value) -> Result<()> {
        self.try_apply_json(object)?
            .map_err(|refusal| anyhow::anyhow!("kubectl apply: {refusal}"))
    }

    fn admin(&self, args: &[&str], file: Option<&Path>) -> Result<()> {
        self.env.kubectl.run(args, file)
    }

    /// `kubectl patch --type=merge` of the object `resource`/`name` in the suite's namespace.
    fn merge_patch(&self, resource: &str, name: &str, patch: &str) -> Result<()> {
        let namespace = self.namespace.as_str();
        let args = [
            "patch",
            resource,
            name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            patch,
        ];
        self.admin(&args, None)
    }

    /// The object `resource`/`name` in the operator's own namespace, as JSON.
    fn operator_object(&self, resource: &str, name: &str) -> Result<Value> {
        let namespace = self.operator_namespace.as_str();
        self.admin_json(&["get", resource, name, "-n", namespace, "-o", "json"])
    }

    fn admin_output(&self, args: &[&str]) -> Result<String> {
        self.env.kubectl.output(args)
    }

    fn admin_found(&self, args: &[&str]) -> Result<bool> {
        self.env.kubectl.found(args)
    }

    fn admin_json(&self, args: &[&str]) -> Result<Value> {
        self.env.kubectl.json(args)
    }
}

/// The label key of a `watches` entry mapped by label.
fn label_key(watched: &operator_gen::manifest::Watched) -> Option<String> {
    match &watched.map {
        operator_gen::manifest::MapRule::Label(key) => Some(key.clone()),
        _ => None,
    }
}
