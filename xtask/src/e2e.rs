//! `cargo xtask e2e`: every operator crate of the workspace (`example-operator` and each crate
//! in `generated/`) as real processes against a real API server, checked through the API.
//!
//! The cluster is the one in `KUBECONFIG` when set, else `cargo xtask cluster`'s own. Each
//! operator runs with a token the API server issues to its ServiceAccount, so the bindings in its
//! generated `deploy/base/rbac.yaml` are all it may do: a missing verb fails a check, and the rules
//! themselves are asserted to grant nothing broad. An operator with admission webhooks is
//! also checked through them (`e2e/webhooks.rs`), and a derived one served in several versions
//! through its conversion webhook (`e2e/conversion.rs`), and every one through its own
//! monitoring with a real Prometheus (`e2e/monitoring.rs`). On failure the tail of every process's log
//! is printed; the logs stay in `target/e2e/`.

use std::{
    collections::BTreeMap,
    fs,
    io::{Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    rc::Rc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use clap::Args;
use operator_gen::{Manifest, Selection, crd_document, k8s_catalog, schema_sample};
use operator_gen_cluster::{self as cluster, Cluster, OperatorCrate};
use serde_json::{Value, json};

use crate::artifacts::Artifacts;

pub(crate) mod conversion;
mod failed_reconciles;
mod helm;
mod monitoring;
mod runtime_log;
mod sharded;
mod sharding;
mod stalling;
mod status;
pub(crate) mod webhooks;

/// How long a behaviour gets to show. Leader election may need a Lease to expire.
const PATIENCE: Duration = Duration::from_secs(60);
/// How long the replicas here hold their Lease (`--lease-seconds`): a third of the 15 s
/// default, so that the checks of a taken or stopped leader wait seconds, not a quarter of a
/// minute each. They check the same hand-over, only sooner.
const LEASE_SECONDS: u64 = 5;
/// How long watches get to come back after the API server restarts. While it shuts down
/// (15s) and just after, while its RBAC caches fill and answer 403, every watcher fails a
/// few times; the runtime's backoff retries each within 5 s (kube's default grew to 30 s, and
/// up to 142 s was seen). The patience stays generous: this is a check, not a timing.
const RECOVERY: Duration = Duration::from_secs(300);

#[derive(Args)]
pub struct E2eArgs {
    /// Run only these crates (package names); all operator crates by default.
    #[arg(long = "only")]
    only: Vec<String>,
}

pub fn run(args: E2eArgs) -> Result<std::process::ExitCode> {
    let workspace = crate::workspace_root();
    let cluster = Cluster::new(workspace.clone());
    let kubectl = {
        let started = Instant::now();
        let kubectl = cluster.kubectl()?;
        println!("phase build-control-plane: {:.1?}", started.elapsed());
        kubectl
    };
    let own_cluster = std::env::var_os("KUBECONFIG").is_none();
    let admin = if own_cluster {
        let took = cluster.up(operator_gen_cluster::Shape::WithNode)?;
        println!("phase start-control-plane: {took:.1?}");
        cluster.admin_kubeconfig()
    } else {
        println!("phase start-control-plane: skipped, using the cluster in KUBECONFIG");
        PathBuf::from(std::env::var_os("KUBECONFIG").unwrap_or_default())
    };
    let crates: Vec<OperatorCrate> = cluster::operator_crates(&workspace)?
        .into_iter()
        .filter(|c| args.only.is_empty() || args.only.contains(&c.name))
        .collect();

    let started = Instant::now();
    let artifacts = Rc::new(Artifacts::build(&workspace)?);
    println!("phase build-operators: {:.1?}", started.elapsed());
    let started = Instant::now();
    let prometheus = monitoring::install(&workspace)?;
    println!("phase install-prometheus: {:.1?}", started.elapsed());

    let logs = workspace.join("target/e2e");
    if logs.exists() {
        fs::remove_dir_all(&logs)?;
    }
    let env_for = |logs: PathBuf| Env {
        kubectl: kubectl.clone(),
        admin: admin.clone(),
        workspace: workspace.clone(),
        logs,
        cluster: own_cluster.then(|| Cluster::new(workspace.clone())),
        prometheus: prometheus.clone(),
        artifacts: Rc::clone(&artifacts),
    };
    let (mut passed, mut failed) = (0, 0);
    // The charts first, before a suite leaves a CRD behind (the monitoring checks install
    // prometheus-operator's), so that a chart installs its own.
    let started = Instant::now();
    for operator in crates
        .iter()
        .filter(|c| helm::HELM_CRATES.contains(&c.name.as_str()))
    {
        let logs = logs.join(format!("{}-helm", operator.name));
        let mut suite = Suite::new(env_for(logs), operator.clone())?;
        let result = suite.timed(Suite::helm_lifecycle);
        suite.stop_all();
        let (p, f) = report(&suite, vec![(helm::CHECK, result)]);
        (passed, failed) = (passed + p, failed + f);
    }
    println!("phase helm: {:.1?}", started.elapsed());
    let started = Instant::now();
    for operator in crates {
        let name = operator.name.clone();
        let mut suite = Suite::new(env_for(logs.join(&name)), operator)?;
        let mut results = suite.run();
        results.push(("leaves nothing behind", suite.timed(Suite::teardown)));
        suite.stop_all();
        let (p, f) = report(&suite, results);
        (passed, failed) = (passed + p, failed + f);
    }
    println!("phase tests: {:.1?}", started.elapsed());
    if args.only.is_empty() || args.only.iter().any(|o| o == "operator-gen-runtime") {
        let started = Instant::now();
        let restart = own_cluster.then(|| Cluster::new(workspace.clone()));
        for (check, result) in sharding::run(&admin, restart) {
            match result {
                Ok(detail) => {
                    println!("ok   operator-gen-runtime: {check} ({detail})");
                    passed += 1;
                }
                Err(error) => {
                    println!("FAIL operator-gen-runtime: {check}: {error:#}");
                    failed += 1;
                }
            }
        }
        println!("phase sharding: {:.1?}", started.elapsed());
    }
    println!("{passed} passed, {failed} failed");
    Ok(if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// Prints each check's result for `suite`, and the log tails when one failed; how many passed
/// and how many failed.
fn report(suite: &Suite, results: Vec<(&'static str, Outcome)>) -> (usize, usize) {
    let name = &suite.name;
    let failures = results.iter().filter(|(_, r)| r.is_err()).count();
    let checked = results
        .iter()
        .filter(|(_, r)| !matches!(r, Ok(Verdict::Skipped(_))))
        .count();
    for (check, result) in results {
        match result {
            Ok(Verdict::Passed(took, None)) => println!("ok   {name}: {check} ({took:.1?})"),
            Ok(Verdict::Passed(took, Some((failed, reason)))) => println!(
                "ok   {name}: {check} ({took:.1?}; {failed} failed reconciles, as meant: {reason})"
            ),
            Ok(Verdict::Skipped(reason)) => println!("skip {name}: {check}: {reason}"),
            Err(error) => println!("FAIL {name}: {check}: {error:#}"),
        }
    }
    if failures > 0 {
        suite.print_log_tails();
    }
    (checked - failures, failures)
}

/// What every suite shares.
struct Env {
    kubectl: PathBuf,
    admin: PathBuf,
    workspace: PathBuf,
    logs: PathBuf,
    /// The control plane, when it is ours and so can be restarted.
    cluster: Option<Cluster>,
    prometheus: monitoring::Prometheus,
    /// The operators' binaries and shipped cluster tests.
    artifacts: Rc<Artifacts>,
}

/// One operator crate under test.
struct Suite {
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
    /// The CRD `crdgen` printed, which the suite installed and so removes.
    derived_crd: Option<PathBuf>,
    /// The primary's resource name for kubectl (`prometheusrules.monitoring.coreos.com`).
    primary: String,
    api_version: String,
    kind: String,
    /// The primary's body: the schema's least object with the manifest's `sample:` over it.
    body: Value,
    /// Owned built-in kinds, as kubectl resource names.
    owned: Vec<String>,
    namespace: String,
    /// The namespace the operator runs in, as its `deploy/` says.
    operator_namespace: String,
    kubeconfig: PathBuf,
    /// example-operator's outside rule registry, a folder this test can write to. A generated
    /// skeleton's poll hook returns nothing, so it has no trigger to fire.
    registry: Option<PathBuf>,
    processes: BTreeMap<String, Operator>,
    next_port: u16,
    /// How long [`Suite::eventually`] waits.
    patience: Duration,
    /// Set by a check that found nothing to check.
    skipped: Option<&'static str>,
    /// Set by a check whose scenario makes reconciles fail on purpose, saying how; any other
    /// check fails when an operator's reconcile failed while it ran.
    fails_reconciles: Option<&'static str>,
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
        let body = schema_sample::sample_with(schema, manifest.sample.as_ref());
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
    fn builtin(crate_name: &str, kind: &str) -> Result<Self> {
        let found = k8s_catalog::find(kind)
            .with_context(|| format!("{crate_name} reconciles {kind}, which is not built in"))?;
        let pods = json!({
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

/// A running operator process.
struct Operator {
    child: Child,
    metrics: u16,
    /// The port its admission webhooks listen on.
    webhook: u16,
}

/// An owned child, as found through its ownerReference.
struct OwnedChild {
    /// kubectl's name for its resource (`configmaps`).
    resource: String,
    name: String,
    uid: String,
    object: Value,
}

type Outcome = Result<Verdict>;

/// What a check that did not fail found.
enum Verdict {
    /// It passed in this time; reconciles failed as many times as its scenario meant them to,
    /// for the reason given.
    Passed(Duration, Option<(usize, &'static str)>),
    /// It found nothing to check, for this reason.
    Skipped(&'static str),
}
/// A named check of one behaviour.
type Check = (&'static str, fn(&mut Suite) -> Result<()>);

impl Suite {
    fn new(env: Env, operator: OperatorCrate) -> Result<Self> {
        let OperatorCrate {
            name,
            dir,
            namespace: operator_namespace,
        } = operator;
        let manifest = Manifest::load(&dir.join("operator.yaml"))?;
        let derived_crd = if manifest.primary.derive.is_some() {
            let crdgen = env.artifacts.bin(&dir, "crdgen")?;
            let converts = manifest
                .primary
                .derive
                .as_ref()
                .is_some_and(|derived| !derived.also_served.is_empty());
            Some(conversion::derived_crd(crdgen, converts, &name, &env.logs)?)
        } else {
            None
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
                derived_crd
                    .clone()
                    .unwrap_or_else(|| dir.join("deploy/base/crd.yaml")),
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
        fs::create_dir_all(&env.logs)?;
        let kubeconfig = env.operator_kubeconfig(&name, &operator_namespace)?;
        let registry = (name == "example-operator").then(|| env.logs.join("registry"));
        Ok(Self {
            registry,
            primary: primary.resource,
            api_version: primary.api_version,
            kind: primary.kind,
            namespace: format!("e2e-{name}"),
            operator_namespace,
            name,
            body: primary.body,
            owned,
            manifest,
            crd_path: primary.crd,
            crd_json: primary.crd_json,
            derived_crd,
            dir,
            kubeconfig,
            env,
            processes: BTreeMap::new(),
            next_port: 19100,
            patience: PATIENCE,
            skipped: None,
            fails_reconciles: None,
        })
    }

    /// Runs every check that applies to this operator, in order; a failed setup ends it.
    fn run(&mut self) -> Vec<(&'static str, Outcome)> {
        let mut results = Vec::new();
        let setup = self.timed(Self::setup);
        let ok = setup.is_ok();
        results.push((
            "installs the CRD and only the generated RBAC; deploy/ builds with kustomize",
            setup,
        ));
        if !ok {
            return results;
        }
        let owns = !self.owned.is_empty();
        let finalizer = !self.manifest.external.is_empty();
        let mut checks: Vec<Check> = vec![(
            "its monitoring: a real Prometheus scrapes it, evaluates every alert and answers every dashboard query",
            Self::monitoring,
        )];
        if self.has_admission() {
            checks.push((
                "the validating webhook refuses an invalid primary, which is not stored",
                Self::validating_refuses,
            ));
            checks.push((
                "an object labelled to skip the webhooks is validated all the same",
                Self::labelled_still_validated,
            ));
            // The operator's own namespace exempt from its webhooks (a sharded one may have a
            // namespace of its own with no exemption).
            let namespace = std::fs::read_to_string(self.dir.join("deploy/base/namespace.yaml"));
            if namespace.is_ok_and(|text| text.contains("skip-webhooks.operator-gen.kube.rs/")) {
                checks.push((
                    "the operator's own namespace and a labelled kube-system are left alone",
                    Self::exempt_namespaces_left_alone,
                ));
            }
            checks.push((
                "the mutating webhook's default is stored",
                Self::mutating_defaults,
            ));
            if self.other_kinds().next().is_some() {
                checks.push((
                    "each other kind is refused and defaulted by the same webhooks",
                    Self::other_kinds_admitted,
                ));
            }
            checks.push((
                "with no webhook answering creates fail closed; a restart restores them",
                Self::fails_closed,
            ));
        }
        if !self.older_versions().is_empty() {
            checks.push((
                "an object created as an older version reads as the hub and back, unchanged",
                Self::older_reads_as_hub,
            ));
            checks.push((
                "a field only the hub has survives an edit through an older version",
                Self::hub_fields_survive,
            ));
            checks.push((
                "listing in every served version gives the same objects",
                Self::lists_in_every_version,
            ));
            checks.push((
                "a list of 1,000 objects reads in an older version, unpaginated",
                Self::lists_many_in_an_older_version,
            ));
            checks.push((
                "conversions answer while two clients stall POSTs to the webhook",
                Self::converts_beside_stalled_clients,
            ));
        }
        if owns {
            checks.push((
                "a new primary gets its child, controller-owned",
                Self::child_appears,
            ));
            checks.push(("a deleted child is restored", Self::deleted_child_restored));
            checks.push(("an edited child is restored", Self::edited_child_restored));
            if self.other_kinds().next().is_some() {
                checks.push((
                    "each other kind's controller follows the shared watch: its child appears, and a deleted one is restored",
                    Self::other_kinds_children,
                ));
            }
        }
        if self.manifest.watches.iter().any(|w| label_key(w).is_some()) {
            checks.push((
                "a watched object's change reconciles the primary",
                Self::watched_change,
            ));
        }
        if self.manifest.watches.iter().any(|w| w.cache) {
            checks.push((
                "a cached watch holds each object it selects, and lets a deleted one go",
                Self::cached_watch_follows,
            ));
        }
        if self.registry.is_some() {
            checks.push((
                "an external trigger reconciles the primary",
                Self::external_trigger,
            ));
        }
        if owns {
            checks.push((
                "the operator killed mid-way converges on restart",
                Self::restart_converges,
            ));
            if self.env.cluster.is_some() {
                checks.push((
                    "watches recover after an API server restart",
                    Self::apiserver_restart,
                ));
            }
            checks.push((
                "two replicas: only the leader reconciles",
                Self::leader_election,
            ));
            if self.manifest.sharding {
                checks.push((
                    match self.other_kinds().next() {
                        None => "sharded: replicas split 1,000 primaries, one joins, one is killed; none reconciled by two at once",
                        Some(_) => "sharded: replicas split 1,000 primaries, one joins, one is killed; none reconciled by two at once; the other kinds split on the same replicas",
                    },
                    Self::sharded,
                ));
            }
        }
        if self.own_condition().is_some() {
            checks.push((
                "a new primary's own condition reports its reconcile, for its generation",
                Self::own_condition_reports_the_reconcile,
            ));
        }
        if self.own_condition().is_some() && status::status_case(&self.name).is_some() {
            checks.push((
                "another controller's condition survives 1,000 reconciles that write the operator's own",
                Self::others_condition_survives,
            ));
        }
        if self.dir.join("tests/cluster.rs").exists() {
            checks.push((
                "its own cluster test passes against this cluster",
                Self::shipped_cluster_test,
            ));
        }
        checks.push((
            if finalizer {
                "deletion runs cleanup, then children are garbage-collected"
            } else {
                "deletion garbage-collects the children"
            },
            Self::deletion,
        ));
        if self.has_webhooks() {
            // Last: it takes the loopback configurations away (see the check).
            checks.push((
                "the cert-manager overlay builds and passes a server dry run",
                Self::cert_manager_overlay,
            ));
        }
        for (name, check) in checks {
            results.push((name, self.timed(check)));
        }
        results
    }

    fn timed(&mut self, check: fn(&mut Self) -> Result<()>) -> Outcome {
        let started = Instant::now();
        let marks = failed_reconciles::Marks::take(&self.env.logs);
        let checked = check(self);
        // Taken whatever the outcome, so that neither reaches the next check.
        let (skipped, fails_reconciles) = (self.skipped.take(), self.fails_reconciles.take());
        checked?;
        let failed = marks.failed_since(&self.env.logs);
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
            None => Verdict::Passed(started.elapsed(), meant),
        })
    }

    /// Waits until the primary's CRD is served.
    fn wait_established(&self) -> Result<()> {
        let crd = format!("crd/{}", self.primary);
        let wait = ["wait", "--for=condition=Established", "--timeout=60s", &crd];
        self.admin(&wait, None)
    }

    fn setup(&mut self) -> Result<()> {
        if let Some(crd) = &self.crd_path {
            self.admin(&["apply", "--server-side", "-f"], Some(crd))?;
            self.wait_established()?;
        }
        assert_least_privilege(&self.dir.join("deploy/base/rbac.yaml"))?;
        self.install_local()?;
        self.check_kustomization()?;
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}});
        self.apply_json(&namespace)?;
        // What the operator's user may not do, whatever the rules say.
        let user = format!(
            "system:serviceaccount:{}:{}",
            self.operator_namespace, self.name
        );
        for forbidden in [
            ["create", "pods"],
            ["delete", self.primary.as_str()],
            // Reads come from the caches: not even the primary is fetched one by one.
            ["get", self.primary.as_str()],
            ["get", "nodes"],
        ] {
            let answer = self.admin_output(&[
                "auth",
                "can-i",
                forbidden[0],
                forbidden[1],
                "--as",
                &user,
                "-A",
            ])?;
            let [verb, resource] = forbidden;
            match answer.trim() {
                "no" => {}
                "yes" => bail!("{user} may {verb} {resource}: the generated RBAC grants too much"),
                other => bail!("kubectl auth can-i {verb} {resource} answered {other:?}"),
            }
        }
        self.start("main", false)
    }

    fn child_appears(&mut self) -> Result<()> {
        let uid = self.create_primary("first")?;
        self.wait_child(&uid, None).map(drop)
    }

    fn deleted_child_restored(&mut self) -> Result<()> {
        let owner = self.uid("first")?;
        let child = self.wait_child(&owner, None)?;
        let namespace = self.namespace.clone();
        self.admin(
            &[
                "delete",
                &child.resource,
                &child.name,
                "-n",
                &namespace,
                "--wait=false",
            ],
            None,
        )?;
        self.wait_child(&owner, Some(&child.uid)).map(drop)
    }

    /// A generic operator's kinds after the first, which the checks otherwise go through.
    fn other_kinds(&self) -> impl Iterator<Item = &String> {
        self.manifest.primary.generic.iter().flatten().skip(1)
    }

    /// A generic operator's kinds share one watch of each owned kind, which the first kind's
    /// controller drives: the others see their children only through it.
    fn other_kinds_children(&mut self) -> Result<()> {
        self.through_other_kinds("first", |suite| {
            suite
                .child_appears()
                .and_then(|()| suite.deleted_child_restored())
        })
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

    fn edited_child_restored(&mut self) -> Result<()> {
        let owner = self.uid("first")?;
        let OwnedChild {
            resource,
            name,
            object,
            ..
        } = self.wait_child(&owner, None)?;
        let (field, original) = match object.get("data").and_then(Value::as_object) {
            Some(data) if !data.is_empty() => {
                let (key, value) = data
                    .iter()
                    .next()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .unwrap_or_default();
                (key, value)
            }
            _ => {
                self.skipped = Some("the operator's child holds no data it would restore");
                return Ok(());
            }
        };
        let patch = json!({"data": {field.clone(): "tampered"}}).to_string();
        self.merge_patch(&resource, &name, &patch)?;
        self.eventually("the edited child to be restored", || {
            let child = self.get_json(&resource, &name)?;
            Ok(child["data"][&field] == original)
        })
    }

    fn watched_change(&mut self) -> Result<()> {
        let before = self.reconciles("main")?;
        self.apply_watched("watched", |_| true)?;
        self.eventually("a reconcile after the watched object changed", || {
            Ok(self.reconciles("main")? > before)
        })
    }

    /// The cache a watch with `cache: true` fills holds a new labelled object, whole, and
    /// forgets it once it is deleted: `operator_cache_objects{kind="watched <Kind>"}` counts
    /// one more, then one fewer.
    fn cached_watch_follows(&mut self) -> Result<()> {
        let kind = self
            .manifest
            .watches
            .iter()
            .find(|w| w.cache && label_key(w).is_some())
            .map(|w| w.kind.clone())
            .context("no cached watch is mapped by label")?;
        let series = format!("operator_cache_objects{{kind=\"watched {kind}\"}}");
        let cached = |e2e: &Self| e2e.gauge("main", &series);
        let before = cached(self)?;
        self.apply_watched("cached", |w| w.cache)?;
        self.eventually("the cache to hold the new object", || {
            Ok(cached(self)? == before + 1.0)
        })?;
        let namespace = self.namespace.clone();
        let resource = kind.to_lowercase();
        self.admin(&["delete", &resource, "cached", "-n", &namespace], None)?;
        self.eventually("the cache to let the deleted object go", || {
            Ok(cached(self)? == before)
        })
    }

    /// Applies an object `name` of the first built-in kind watched by label that `chosen`
    /// picks, labelled to name the primary `first`.
    fn apply_watched(
        &self,
        name: &str,
        chosen: impl Fn(&operator_gen::manifest::Watched) -> bool,
    ) -> Result<()> {
        let (kind, key) = self
            .manifest
            .watches
            .iter()
            .filter(|w| chosen(w))
            .find_map(|w| label_key(w).map(|k| (w.kind.clone(), k)))
            .context("no such watch is mapped by label")?;
        let Some(builtin) = k8s_catalog::find(&kind) else {
            bail!("watched kind {kind} is not built in; this check creates built-in kinds only");
        };
        let object = json!({
            "apiVersion": builtin.api_version(),
            "kind": builtin.kind,
            "metadata": {"name": name, "namespace": self.namespace, "labels": {key: "first"}},
        });
        self.apply_json(&object)
    }

    fn external_trigger(&mut self) -> Result<()> {
        let registry = self.registry.clone().context("no registry to trigger")?;
        let file = registry.join(format!("{}.first.rules.yaml", self.namespace));
        self.eventually("the rule in the registry", || Ok(file.exists()))?;
        let before = self.reconciles("main")?;
        fs::create_dir_all(registry.join("triggers"))?;
        fs::write(
            registry
                .join("triggers")
                .join(format!("{}.first", self.namespace)),
            "",
        )?;
        self.eventually("a reconcile after the registry's trigger", || {
            Ok(self.reconciles("main")? > before)
        })
    }

    /// A change made while the operator is down is acted on once it is back: a new primary,
    /// or, where webhooks refuse creates while no replica answers, a deleted child.
    fn restart_converges(&mut self) -> Result<()> {
        if self.has_admission() {
            let owner = self.uid("first")?;
            let child = self.wait_child(&owner, None)?;
            self.stop("main");
            let namespace = self.namespace.clone();
            self.admin(
                &["delete", &child.resource, &child.name, "-n", &namespace],
                None,
            )?;
            self.start("main", false)?;
            return self.wait_child(&owner, Some(&child.uid)).map(drop);
        }
        self.stop("main");
        let uid = self.create_primary("while-down")?;
        self.start("main", false)?;
        self.wait_child(&uid, None).map(drop)
    }

    fn apiserver_restart(&mut self) -> Result<()> {
        // As deploy/ runs it, but on the e2e's shorter Lease: with leader election, whose Lease
        // the outage outlasts. One replica keeps its Lease through the outage (nobody else
        // could take it), so this proves recovery with election on and that the process lives
        // on; a Lease taken from the leader is `lease_taken_from_the_leader`'s.
        self.stop("main");
        self.start("main", true)?;
        self.eventually("the replica to lead", || {
            Ok(self.gauge("main", "operator_leader")? == 1.0)
        })?;
        if let Some(cluster) = &self.env.cluster {
            cluster.restart_apiserver(Duration::ZERO)?;
            self.fails_reconciles = Some("the API server went away under running reconciles");
        }
        // From the first ready /readyz (restart_apiserver waits for it): the figure the
        // operator's watch backoff decides, apart from the API server's own start. The floor
        // beside it is when the operator's own ServiceAccount could first list the primary
        // from the API server's watch cache, as a watch's relist does: no backoff can beat it.
        let ready = Instant::now();
        let floor = self.cached_list_floor(ready);
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
                "     {}: current {:.1?} after the restarted API server was ready; floor: its ServiceAccount first listed {} from the cache at {floor}",
                self.name,
                ready.elapsed(),
                self.kind,
            );
        }
        recovered?;
        if !self.running("main") {
            bail!("the operator exited in the outage; it should have campaigned again in process");
        }
        self.stop_gracefully("main");
        self.start("main", false)
    }

    /// Polls, as the operator's ServiceAccount, a list of the primary from the API server's
    /// watch cache (`resourceVersion=0`) until one succeeds; how long after `ready` it did.
    fn cached_list_floor(&self, ready: Instant) -> std::thread::JoinHandle<Option<Duration>> {
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
        let kubectl = self.env.kubectl.clone();
        let kubeconfig = self.kubeconfig.clone();
        std::thread::spawn(move || {
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
        })
    }

    fn leader_election(&mut self) -> Result<()> {
        self.stop("main");
        let checked = self.two_replicas();
        self.stop("replica-a");
        self.stop("replica-b");
        // Later checks run on the usual replica, whatever happened here.
        self.start("main", false)?;
        checked
    }

    /// Two replicas with leader election: only the leader reconciles, and it survives losing
    /// the Lease.
    fn two_replicas(&mut self) -> Result<()> {
        self.start("replica-a", true)?;
        self.start("replica-b", true)?;
        let uid = self.create_primary("replicated")?;
        self.wait_child(&uid, None)?;
        let counts = [self.reconciles("replica-a")?, self.reconciles("replica-b")?];
        if counts.iter().filter(|&&n| n > 0).count() != 1 {
            bail!("reconciles per replica were {counts:?}; exactly one replica should lead");
        }
        self.lease_taken_from_the_leader()
    }

    /// Takes the Lease from under the leader, as another replica would once an outage kept the
    /// leader from renewing: the leader stops reconciling, both replicas campaign in process,
    /// and once the taker's hold expires one of them leads and reconciles again. (The leader's
    /// last renewal, which kube-lease-manager makes without checking the holder, may stretch
    /// the taker's hold by one [`LEASE_SECONDS`].)
    fn lease_taken_from_the_leader(&mut self) -> Result<()> {
        let replicas = ["replica-a", "replica-b"];
        let namespace = self.operator_namespace.clone();
        let leases = self.admin_json(&["get", "leases", "-n", &namespace, "-o", "json"])?;
        let lease = leases["items"]
            .as_array()
            .into_iter()
            .flatten()
            // The operator's own Lease (named after it: others may share the namespace, held
            // by replicas of the same names).
            .find(|lease| {
                lease["metadata"]["name"] == self.name.as_str()
                    && replicas
                        .iter()
                        .any(|r| lease["spec"]["holderIdentity"] == *r)
            })
            .context("the operator's Lease is not held by a replica")?;
        let leader = lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let lease = lease["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let taken = json!({"spec": {
            "holderIdentity": "e2e-taker",
            "acquireTime": now,
            "renewTime": now,
            "leaseDurationSeconds": LEASE_SECONDS,
        }});
        self.admin(
            &[
                "patch",
                "lease",
                &lease,
                "-n",
                &namespace,
                "--type",
                "merge",
                "-p",
                &taken.to_string(),
            ],
            None,
        )?;
        let leaders = |e2e: &Self| -> Result<usize> {
            let mut leading = 0;
            for replica in replicas {
                leading += usize::from(e2e.gauge(replica, "operator_leader")? == 1.0);
            }
            Ok(leading)
        };
        // Its log says so; the gauges may never show both replicas standing by at once, when
        // the other takes the Lease before the leader's next renewal finds it gone.
        let log = self.env.logs.join(format!("{leader}.log"));
        self.eventually("the leader to see it lost the Lease", || {
            Ok(fs::read_to_string(&log)?.contains("lost leadership; campaigning again"))
        })?;
        self.eventually("one replica to lead again", || Ok(leaders(self)? == 1))?;
        if let Some(exited) = replicas.iter().find(|r| !self.running(r)) {
            bail!("{exited} exited on losing the Lease; it should have campaigned again");
        }
        let uid = self.create_primary("re-elected")?;
        self.wait_child(&uid, None).map(drop)
    }

    /// The integration test that ships in the crate (`tests/cluster.rs`) runs its own
    /// controller, so the operator process is stopped meanwhile.
    fn shipped_cluster_test(&mut self) -> Result<()> {
        self.stop("main");
        let output = Command::new(self.env.artifacts.test(&self.dir, "cluster")?)
            // It needs a cluster, so it is `#[ignore]`d in a plain `cargo test`.
            .args(["--ignored", "--quiet"])
            // Where `cargo test` runs it.
            .current_dir(&self.dir)
            .env("KUBECONFIG", &self.env.admin)
            // Its controller serves the webhooks the installed configurations call.
            .env(
                "WEBHOOK_ADDR",
                format!("127.0.0.1:{}", webhooks::WEBHOOK_PORT),
            )
            .env("POD_NAMESPACE", &self.operator_namespace)
            .output()?;
        self.start("main", false)?;
        let text = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() || !text.contains("1 passed") {
            bail!(
                "cargo test ended with {}: {text}{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }

    fn deletion(&mut self) -> Result<()> {
        // Made by an earlier check where one makes it; without relations, made here.
        let uid = match self.find(&self.primary, "first")? {
            Some(_) => self.uid("first")?,
            None => self.create_primary("first")?,
        };
        let child = if self.owned.is_empty() {
            None
        } else {
            Some(self.wait_child(&uid, None)?)
        };
        if !self.manifest.external.is_empty() {
            let primary = self.get_json(&self.primary.clone(), "first")?;
            let finalizers = primary["metadata"]["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if finalizers.is_empty() {
                bail!("the primary has no finalizer before deletion: {primary}");
            }
        }
        let namespace = self.namespace.clone();
        self.delete_primary("first")?;
        if let Some(registry) = &self.registry {
            let file = registry.join(format!("{namespace}.first.rules.yaml"));
            if file.exists() {
                bail!(
                    "cleanup did not remove {} from the registry",
                    file.display()
                );
            }
        }
        if let Some(child) = child {
            self.eventually("the garbage collector to remove the child", || {
                Ok(self.find(&child.resource, &child.name)?.is_none())
            })?;
        }
        Ok(())
    }

    /// Deletes every primary while the operator still runs (their finalizers need it), then
    /// the namespace, so that the next operator starts on a clean cluster.
    fn teardown(&mut self) -> Result<()> {
        let namespace = self.namespace.clone();
        if self.processes.is_empty()
            && let Err(error) = self.start("main", false)
        {
            // Left behind, the configurations would refuse every change of the kind.
            if self.has_webhooks() {
                self.remove_webhooks()?;
            }
            self.remove_derived_crd()?;
            return Err(error);
        }
        let primary = self.primary.clone();
        self.admin(
            &[
                "delete",
                &primary,
                "--all",
                "-n",
                &namespace,
                "--timeout=60s",
            ],
            None,
        )?;
        self.stop_all();
        if self.has_webhooks() {
            self.remove_webhooks()?;
            self.remove_cert_manager_crds()?;
        }
        self.remove_derived_crd()?;
        if self.dir.join("deploy/base/namespace.yaml").exists() {
            let own = self.operator_namespace.clone();
            self.admin(&["delete", "namespace", &own, "--wait=false"], None)?;
        }
        self.admin(&["delete", "namespace", &namespace, "--wait=false"], None)
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
            let client = crate::bench::client(&self.env.admin).await?;
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

    /// Starts a replica of the operator, with leader election or without.
    fn start(&mut self, replica: &str, leader_election: bool) -> Result<()> {
        let election = if leader_election { "true" } else { "false" };
        self.start_with(replica, &[("LEADER_ELECTION", election)])
    }

    /// Starts a replica of the operator with the variables of `env` over the usual ones.
    fn start_with(&mut self, replica: &str, env: &[(&str, &str)]) -> Result<()> {
        let binary = self.env.artifacts.bin(&self.dir, &self.name)?.to_owned();
        let log = self.env.logs.join(format!("{replica}.log"));
        let metrics = self.next_port;
        self.next_port += 1;
        // The installed configurations call one port: the first replica running holds it.
        let webhook = if self
            .processes
            .values()
            .any(|p| p.webhook == webhooks::WEBHOOK_PORT)
        {
            self.next_port += 1;
            self.next_port - 1
        } else {
            webhooks::WEBHOOK_PORT
        };
        let output = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let mut command = Command::new(&binary);
        if let Some(registry) = &self.registry {
            fs::create_dir_all(registry)?;
            command.env("RULE_REGISTRY_DIR", registry);
        }
        let child = command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("LOG_FORMAT", "json")
            .env(
                "RUST_LOG",
                std::env::var("E2E_RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .env("METRICS_ADDR", format!("127.0.0.1:{metrics}"))
            .env("WEBHOOK_ADDR", format!("127.0.0.1:{webhook}"))
            .env("POD_NAME", replica)
            .env("POD_NAMESPACE", &self.operator_namespace)
            .env("LEASE_SECONDS", LEASE_SECONDS.to_string())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        self.processes.insert(
            replica.to_owned(),
            Operator {
                child,
                metrics,
                webhook,
            },
        );
        self.eventually("the operator's metrics endpoint", || {
            Ok(self.reconciles(replica).is_ok())
        })?;
        if self.has_webhooks() {
            // Ready once its webhooks serve the certificate whose CA they published. A replica
            // waiting to lead is ready too; one that leads waits for its watches as well.
            self.eventually("the replica's readiness", || self.ready(replica))?;
        }
        Ok(())
    }

    fn stop(&mut self, replica: &str) {
        if let Some(mut operator) = self.processes.remove(replica) {
            let _ = operator.child.kill();
            let _ = operator.child.wait();
        }
    }

    fn stop_all(&mut self) {
        let replicas: Vec<String> = self.processes.keys().cloned().collect();
        for replica in replicas {
            self.stop(&replica);
        }
    }

    fn print_log_tails(&self) {
        let mut logs: Vec<PathBuf> = fs::read_dir(&self.env.logs)
            .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        if let Some(cluster) = &self.env.cluster {
            logs.extend(["kube-apiserver", "kube-controller-manager"].map(|c| cluster.log(c)));
        }
        for log in logs
            .iter()
            .filter(|l| l.extension().is_some_and(|e| e == "log"))
        {
            println!(
                "---- {} (last 15 lines)\n{}",
                log.display(),
                cluster::tail(log, 15)
            );
        }
    }

    /// The value of an unlabelled gauge in a replica's metrics.
    fn gauge(&self, replica: &str, name: &str) -> Result<f64> {
        let text = self.http_get(replica, "/metrics")?;
        let prefix = format!("{name} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|n| n.trim().parse().ok())
            .with_context(|| format!("no {name} in the metrics"))
    }

    /// Whether a replica's process is still running.
    fn running(&mut self, replica: &str) -> bool {
        self.processes
            .get_mut(replica)
            .is_some_and(|operator| matches!(operator.child.try_wait(), Ok(None)))
    }

    /// Stops a replica as the kubelet does, with SIGTERM, so that a leader hands its Lease
    /// back; kills it if it has not exited within the grace period.
    fn stop_gracefully(&mut self, replica: &str) {
        if let Some(mut operator) = self.processes.remove(replica) {
            crate::bench::stop_gracefully(&mut operator.child);
        }
    }

    /// `operator_reconciles_total` of a running replica, from its metrics endpoint.
    fn reconciles(&self, replica: &str) -> Result<u64> {
        Ok(self.gauge(replica, "operator_reconciles_total")? as u64)
    }

    /// The metrics port of a running replica.
    fn metrics_port(&self, replica: &str) -> Result<u16> {
        Ok(self
            .processes
            .get(replica)
            .context("no such replica")?
            .metrics)
    }

    /// The whole HTTP response to `GET path` on a replica's metrics port.
    fn http_get(&self, replica: &str, path: &str) -> Result<String> {
        let operator = self.processes.get(replica).context("no such replica")?;
        let mut stream = TcpStream::connect(("127.0.0.1", operator.metrics))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
        let mut text = String::new();
        stream.read_to_string(&mut text)?;
        Ok(text)
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

    /// `deploy/` builds with the cluster's own kubectl (its kustomize) into the base's objects
    /// with the overlay's patch applied, and the API server accepts them (dry run).
    fn check_kustomization(&self) -> Result<()> {
        let deploy = self.dir.join("deploy");
        let built = self.kustomize(&deploy)?;
        let deploy = deploy.to_str().context("a UTF-8 path")?;
        // Only imported and dynamic operators have their CRD in the base.
        let crd = self.dir.join("deploy/base/crd.yaml").exists();
        let kinds = [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Service",
        ];
        let asked = self.manifest.webhooks.unwrap_or_default();
        let webhooks = [
            ("Secret", self.has_webhooks()),
            ("ValidatingWebhookConfiguration", asked.validating),
            ("MutatingWebhookConfiguration", asked.mutating),
        ];
        let webhooks = webhooks
            .iter()
            .filter(|(_, has)| *has)
            .map(|(kind, _)| *kind);
        for kind in kinds
            .into_iter()
            .chain(crd.then_some("CustomResourceDefinition"))
            .chain(webhooks)
        {
            if !built.lines().any(|line| line == format!("kind: {kind}")) {
                bail!("kubectl kustomize {deploy} gave no {kind}:\n{built}");
            }
        }
        // Server-side, as README says to deploy, by the same field manager that installed
        // `deploy/local/` just before: the API server takes the Service in place of the
        // loopback URL (a client-side apply would keep both, and be refused).
        self.admin(
            &["apply", "--server-side", "--dry-run=server", "-k"],
            Some(Path::new(deploy)),
        )
    }

    /// Installs what the operator needs to run outside the cluster, as its README tells a user
    /// to: `deploy/local/`, built by the cluster's own kubectl. It must hold the ServiceAccount
    /// and its RBAC (and the CRD and the namespace where the base has them), no Deployment or
    /// Service, and its admission webhook configurations calling the operator on loopback,
    /// where a local run serves them ([`Suite::record_local_webhooks`]).
    fn install_local(&self) -> Result<()> {
        let local = self.dir.join("deploy/local");
        let built = self.kustomize(&local)?;
        let kinds: Vec<&str> = built
            .lines()
            .filter_map(|line| line.strip_prefix("kind: "))
            .collect();
        let base = self.dir.join("deploy/base");
        let wanted = [
            ("ServiceAccount", true),
            ("CustomResourceDefinition", base.join("crd.yaml").exists()),
            ("Namespace", base.join("namespace.yaml").exists()),
        ];
        for (kind, _) in wanted.iter().filter(|(_, present)| *present) {
            if !kinds.contains(kind) {
                bail!("{} builds no {kind}:\n{built}", local.display());
            }
        }
        if let Some(kind) = ["Deployment", "Service"]
            .iter()
            .find(|kind| kinds.contains(kind))
        {
            bail!("{} still builds a {kind}:\n{built}", local.display());
        }
        if self.has_webhooks() {
            self.record_local_webhooks(&built)?;
        }
        self.admin(
            &["apply", "--server-side", "--force-conflicts", "-k"],
            Some(&local),
        )
    }

    /// `kubectl kustomize dir`: the objects it builds, as YAML.
    fn kustomize(&self, dir: &Path) -> Result<String> {
        let dir = dir.to_str().context("a UTF-8 path")?;
        let output = self.kubectl_command(&["kustomize", dir]).output()?;
        if !output.status.success() {
            bail!(
                "kubectl kustomize {dir}: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Applies `object`; the outer error is kubectl failing to run, the inner one the API
    /// server's refusal, for checks that expect one.
    fn try_apply_json(&self, object: &Value) -> Result<std::result::Result<(), String>> {
        let path = self.env.logs.join("object.json");
        fs::write(&path, object.to_string())?;
        let mut command =
            self.kubectl_command(&["apply", "--server-side", "--field-manager=e2e", "-f"]);
        let output = command.arg(&path).output()?;
        Ok(if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
        })
    }

    fn apply_json(&self, object: &Value) -> Result<()> {
        self.try_apply_json(object)?
            .map_err(|refusal| anyhow::anyhow!("kubectl apply: {refusal}"))
    }

    fn admin(&self, args: &[&str], file: Option<&Path>) -> Result<()> {
        let mut command = self.kubectl_command(args);
        if let Some(file) = file {
            command.arg(file);
        }
        let output = command.output()?;
        if !output.status.success() {
            bail!(
                "kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(())
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
        let output = self.kubectl_command(args).output()?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Whether `kubectl get … --ignore-not-found` (`args`) found the object: it prints
    /// nothing when there is none, and fails, rather than saying so, when it cannot tell.
    fn admin_found(&self, args: &[&str]) -> Result<bool> {
        let stdout = self.admin_stdout(args)?;
        Ok(!stdout.iter().all(u8::is_ascii_whitespace))
    }

    fn admin_json(&self, args: &[&str]) -> Result<Value> {
        Ok(serde_json::from_slice(&self.admin_stdout(args)?)?)
    }

    /// What `kubectl args` printed, or what it said when it failed.
    fn admin_stdout(&self, args: &[&str]) -> Result<Vec<u8>> {
        let output = self.kubectl_command(args).output()?;
        if !output.status.success() {
            bail!(
                "kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(output.stdout)
    }

    fn kubectl_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.env.kubectl);
        command.env("KUBECONFIG", &self.env.admin).args(args);
        command
    }
}

impl Env {
    /// A kubeconfig whose user is the operator's ServiceAccount, with a token the API server
    /// issues.
    fn operator_kubeconfig(&self, name: &str, namespace: &str) -> Result<PathBuf> {
        let path = self.logs.join("operator.kubeconfig");
        cluster::service_account_kubeconfig(&self.kubectl, &self.admin, name, namespace, &path)?;
        Ok(path)
    }
}

/// The label key of a `watches` entry mapped by label.
fn label_key(watched: &operator_gen::manifest::Watched) -> Option<String> {
    match &watched.map {
        operator_gen::manifest::MapRule::Label(key) => Some(key.clone()),
        _ => None,
    }
}

/// The generated rules grant no wildcard and no verb outside what an operator uses.
fn assert_least_privilege(rbac: &Path) -> Result<()> {
    let text = fs::read_to_string(rbac)?;
    let allowed = [
        "get", "list", "watch", "create", "patch", "update", "delete",
    ];
    let documents: Vec<Value> =
        serde_saphyr::from_str_multiple_with_options(&text, operator_gen::limits::yaml_options())?;
    for document in documents {
        for rule in document["rules"].as_array().into_iter().flatten() {
            for field in ["apiGroups", "resources", "verbs", "resourceNames"] {
                if rule[field]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|v| v == "*")
                {
                    bail!("{}: a rule grants `*` in {field}: {rule}", rbac.display());
                }
            }
            for verb in rule["verbs"].as_array().into_iter().flatten() {
                if !verb.as_str().is_some_and(|v| allowed.contains(&v)) {
                    bail!(
                        "{}: a rule grants {verb}, which no generated code uses",
                        rbac.display()
                    );
                }
            }
        }
    }
    Ok(())
}
