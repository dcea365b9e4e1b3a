//! `cargo xtask bench`: what users feel, measured against a floor in the same run.
//!
//! - `gen`: the release `operator-gen` and `cargo xtask gen`, each writing a new crate and
//!   checking against a missing one, against `kopium -f` on the same CRD (`bench/generation.rs`).
//! - `runtime`: example-operator converging N new primaries on the project's own control
//!   plane against the floor, a client that makes exactly the writes an ideal operator must
//!   (the finalizer patch and the child's server-side apply) with many requests in flight; the
//!   operator's requests per primary by verb, from its own counter and the API server's; its
//!   writes on a restart over a converged world; its peak memory per primary and child pair.
//!   Beside it, the peers doing the same job (`bench/peers.rs`): a plain kube-rs controller
//!   and kubebuilder's controller-runtime one, with its default caches and with label-selected
//!   ones: converge time, peak memory, CPU seconds, writes per primary and on a restart, in
//!   ratio rows and in one side-by-side table.
//!   Then the same with `--sharding`, as one replica and as three: converge time and peak
//!   memory per replica, the sharder's apart (`bench/sharded.rs`; `sharded` runs it alone).
//! - `lists`: example-operator's peak memory at `--memory-primaries` primaries with each
//!   initial list (`--initial-list`): a streaming list against paged lists, and paged lists
//!   from the API server's watch cache against the most recent; what the API server
//!   allocated meanwhile and its own peak beside it (`bench/lists.rs`).
//! - `build`: what building the same job costs, a generated crate against the plain kube-rs
//!   peer and controller-runtime's `go build` (`bench/build.rs`).
//! - `webhook`: example-operator's admission webhook answering a review in process, against
//!   decoding the review and encoding an answer (`bench/webhook.rs`).
//! - `conversion`: backup-controller's conversion webhook converting a page of objects in
//!   process, against relabelling them (`bench/conversion.rs`).
//! - `webhook-memory`: a webhook server's peak and kept resident memory on the largest reviews
//!   it reads, alone and 8 at once, against the Deployment's limit (`bench/webhook_memory.rs`).
//!
//! It prints one table of ratios with the command behind each row. It asserts nothing about
//! speed: those are measurements, and the README quotes a clean run. Two runs fail past a
//! bound instead: `allocations`, against its baseline, and `webhook-memory`, against the
//! Deployment's memory limit.

use std::{
    collections::BTreeMap,
    fs,
    io::{Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};
use example_operator::{
    controller::{FIELD_MANAGER, FINALIZER, MANAGED_BY_LABEL},
    reconcile::rule_config_map,
    types::PrometheusRule,
};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use operator_gen_cluster::{Cluster, deploy_namespace};
pub(crate) use operator_gen_e2e::kit::{client, stop_gracefully};
use serde_json::json;

mod allocations;
mod build;
mod conversion;
mod generation;
mod lists;
mod peak_tools;
mod peers;
mod sharded;
mod webhook;
mod webhook_memory;

/// Requests in flight for the floor and for creating primaries.
const IN_FLIGHT: usize = 64;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: Option<What>,
    /// Paired runs of each side of `gen` (at least 5).
    #[arg(long, default_value_t = 7)]
    runs: usize,
    /// Primaries the operator converges in `runtime`.
    #[arg(long, default_value_t = 1000)]
    primaries: usize,
    /// Repetitions of operator and floor in `runtime` (at least 3).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Primaries for the memory figure in `runtime`; 0 skips it.
    #[arg(long, default_value_t = 10_000)]
    memory_primaries: usize,
    /// Primaries for the sharded rows of `runtime` and `sharded`; 0 skips them in `runtime`.
    #[arg(long, default_value_t = 10_000)]
    sharded_primaries: usize,
    /// Reviews answered per round in `webhook`.
    #[arg(long, default_value_t = 2_000)]
    reviews: usize,
    /// ConversionReviews (of 100 objects each) answered per round in `conversion`.
    #[arg(long, default_value_t = 50)]
    conversions: usize,
    /// Write the `allocations` baseline from this run instead of checking against it.
    #[arg(long, global = true)]
    bless: bool,
}

#[derive(Subcommand, Clone, Copy, PartialEq, Eq)]
enum What {
    /// The release `operator-gen` and `cargo xtask gen` against `kopium -f`.
    Gen,
    /// example-operator against the API server's own floor, then sharded.
    Runtime,
    /// example-operator with `--sharding`, as one replica and as three.
    Sharded,
    /// example-operator's peak memory at `--memory-primaries` with each initial list: a
    /// streaming list against paged lists, and pages from the watch cache against the most
    /// recent, `--repeat` rounds of each.
    Lists,
    /// example-operator's admission webhook against decoding and answering alone.
    Webhook,
    /// backup-controller's conversion webhook against relabelling the objects alone.
    Conversion,
    /// A webhook server's peak and kept resident memory on the largest reviews, in release,
    /// against the Deployment's limit; fails past it.
    WebhookMemory,
    /// example-operator's heap under dhat, converging 10,000 primaries on a mock API server,
    /// against the checked-in baseline (CI runs this one; `--bless` updates the baseline).
    Allocations,
    /// What building the job costs: a generated crate against the plain kube-rs peer, cold
    /// and after a one-line edit, debug and release, with controller-runtime's `go build`.
    Build,
    /// Vets and builds the Go peer of `runtime` without running it (CI runs this, so that it
    /// cannot rot; the kube-rs peer is a workspace member, built by the tests).
    BuildPeers,
}

/// One row of the table.
struct Row {
    figure: String,
    ours: String,
    floor: String,
    ratio: String,
    command: String,
}

impl Row {
    /// A row of two wall times, ours against the floor's.
    fn times(figure: String, ours: Duration, floor: Duration, command: String) -> Self {
        Self {
            figure,
            ours: format!("{:.2} s", ours.as_secs_f64()),
            floor: format!("{:.2} s", floor.as_secs_f64()),
            ratio: format!("{:.2}×", ours.as_secs_f64() / floor.as_secs_f64()),
            command,
        }
    }

    /// A row of two peak RSS figures in bytes, ours (described as `ours`) against the floor's.
    fn peaks(figure: String, ours: (String, u64), floor: u64, command: String) -> Self {
        Self {
            figure,
            ours: ours.0,
            floor: format!("{:.0} MiB", floor as f64 / 1048576.0),
            ratio: format!("{:.2}×", ours.1 as f64 / floor.max(1) as f64),
            command,
        }
    }
}

pub fn run(args: BenchArgs) -> Result<std::process::ExitCode> {
    let workspace = crate::workspace_root();
    let mut rows = Vec::new();
    let all = args.what.is_none();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if all || args.what == Some(What::Gen) {
        rows.extend(generation::rows(&workspace, args.runs.max(5))?);
    }
    let mut side_by_side = None;
    if all || args.what == Some(What::Runtime) {
        let (runtime_rows, table) = runtime.block_on(runtime_rows(&workspace, &args))?;
        rows.extend(runtime_rows);
        side_by_side = Some(table);
    }
    if all || args.what == Some(What::Lists) {
        rows.extend(runtime.block_on(async {
            let bench = Bench::start(&workspace).await?;
            lists::rows(&bench, args.memory_primaries.max(1), args.repeat.max(3)).await
        })?);
    }
    if args.what == Some(What::Sharded) {
        rows.extend(runtime.block_on(async {
            let bench = Bench::start(&workspace).await?;
            sharded::rows(&bench, args.sharded_primaries.max(1), None).await
        })?);
    }
    if all || args.what == Some(What::Webhook) {
        rows.extend(runtime.block_on(webhook::rows(args.reviews.max(1)))?);
    }
    if all || args.what == Some(What::Conversion) {
        rows.extend(runtime.block_on(conversion::rows(args.conversions.max(1)))?);
        rows.extend(conversion::memory_rows(&workspace)?);
    }
    if args.what == Some(What::BuildPeers) {
        let built = peers::build_controller_runtime(&workspace, true)?;
        eprintln!("built {}", built.display());
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let mut build_cost = None;
    if args.what == Some(What::Build) {
        build_cost = Some(build::table(&workspace)?);
    }
    let mut over = Vec::new();
    if all || args.what == Some(What::Allocations) {
        let (allocation_rows, failures) = allocations::rows(&workspace, args.bless)?;
        rows.extend(allocation_rows);
        over = failures;
    }
    if args.what == Some(What::WebhookMemory) {
        let (memory_rows, failures) = webhook_memory::rows(&workspace)?;
        rows.extend(memory_rows);
        over.extend(failures);
    }
    println!("| figure | operator-gen | floor | ratio | command |");
    println!("| --- | --- | --- | --- | --- |");
    for row in rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            row.figure, row.ours, row.floor, row.ratio, row.command
        );
    }
    if let Some(table) = build_cost {
        println!("\nWhat building the same job costs:\n\n{table}");
    }
    if let Some(table) = side_by_side {
        let on = if Cluster::new(workspace.clone()).has_node() {
            "a control plane with a node, whose kubelet, kube-proxy and controllers write too"
        } else {
            "a control plane without a node (`cargo xtask cluster up --no-node`)"
        };
        println!("\nexample-operator beside its peers, doing the same job, on {on}:\n\n{table}");
    }
    for failure in &over {
        eprintln!("error: {failure}");
    }
    Ok(if over.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// example-operator's build and the clients the runtime bench uses.
struct Bench {
    admin: Client,
    operator_binary: PathBuf,
    /// The peers' binaries (`xtask/bench/peers/`).
    peers: peers::PeerBinaries,
    /// The namespace example-operator's `deploy/` runs it in: its ServiceAccount's, and its
    /// Leases'.
    operator_namespace: String,
    operator_kubeconfig: PathBuf,
    logs: PathBuf,
    /// The API server's pid.
    apiserver_pid: String,
}

/// The runtime rows, and the side-by-side table of example-operator, its peers and the floor.
async fn runtime_rows(workspace: &Path, args: &BenchArgs) -> Result<(Vec<Row>, String)> {
    let bench = Bench::start(workspace).await?;
    let n = args.primaries;
    let (mut operator_times, mut floor_times, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut ours = Vec::new();
    let mut peer_rounds: Vec<(peers::Peer, Vec<peers::PeerRound>)> = peers::Peer::ALL
        .iter()
        .map(|&peer| (peer, Vec::new()))
        .collect();
    for round in 0..args.repeat.max(3) {
        let measured = bench
            .operator_round(&format!("bench-op-{round}"), n)
            .await?;
        let floor = bench
            .floor_round(&format!("bench-floor-{round}"), n)
            .await?;
        let mut line = format!(
            "round {round}: operator {:.2?}, floor {:.2?}",
            measured.converged, floor
        );
        for (peer, rounds) in &mut peer_rounds {
            let measured = bench.peer_round(*peer, &round.to_string(), n).await?;
            line += &format!(", {} {:.2?}", peer.name(), measured.converged);
            rounds.push(measured);
        }
        eprintln!("{line}");
        ratios.push(measured.converged.as_secs_f64() / floor.as_secs_f64());
        operator_times.push(measured.converged);
        floor_times.push(floor);
        ours.push(measured);
    }
    // The rounds whose converge times are the medians, for the rows of one round's figures.
    ours.sort_by_key(|round| round.converged);
    let medians: Vec<(peers::Peer, peers::PeerRound)> = peer_rounds
        .into_iter()
        .map(|(peer, mut rounds)| {
            rounds.sort_by_key(|round| round.converged);
            (peer, rounds.swap_remove(rounds.len() / 2))
        })
        .collect();
    let rounds = format!(", median of {}", ours.len());
    let measured = ours.swap_remove(ours.len() / 2);
    let floor_median = median(floor_times);
    ratios.sort_by(f64::total_cmp);
    let mut rows = vec![Row {
        figure: format!("converge {n} new PrometheusRules, median of {}", ratios.len()),
        ours: format!("{:.2} s", median(operator_times).as_secs_f64()),
        floor: format!("{:.2} s", floor_median.as_secs_f64()),
        ratio: format!("{:.2}× (median of the rounds' ratios)", ratios[ratios.len() / 2]),
        command: "`cargo xtask bench runtime`: operator from process start to the last owned ConfigMap; floor: the finalizer patch and the child's apply from 64 requests in flight".to_owned(),
    }];
    let per = |count: u64| count as f64 / n as f64;
    let verbs: Vec<String> = measured
        .operator_requests
        .iter()
        .filter(|(verb, _)| !matches!(verb.as_str(), "watch" | "list"))
        .map(|(verb, count)| format!("{verb} {:.2}", per(*count)))
        .collect();
    let server: Vec<String> = measured
        .server_requests
        .iter()
        .map(|((verb, resource), count)| format!("{verb} {resource} {:.2}", per(*count)))
        .collect();
    rows.push(Row {
        figure: "API requests per new primary (beyond list and watch)".to_owned(),
        ours: verbs.join(", "),
        floor: "patch 2.00 (the finalizer, the child's apply)".to_owned(),
        ratio: String::new(),
        command: format!(
            "operator_api_requests_total on the operator; the API server's apiserver_request_total, which also counts the bench's creates and the garbage collector: {}",
            server.join(", ")
        ),
    });
    rows.push(Row {
        figure: "writes on restart of the converged world".to_owned(),
        ours: measured.restart_writes.to_string(),
        floor: "0".to_owned(),
        ratio: String::new(),
        command: "operator_api_requests_total for create, update, patch and delete after a restart, once ready".to_owned(),
    });
    let small = measured.peak_bytes;
    rows.push(Row {
        figure: format!("peak RSS at {n} primaries and children"),
        ours: format!("{:.0} MiB", small as f64 / 1048576.0),
        floor: String::new(),
        ratio: String::new(),
        command: "VmHWM of the operator process".to_owned(),
    });
    for (peer, round) in &medians {
        rows.extend(peers::rows(n, &measured, (*peer, round), &rounds));
    }
    let mut sizes = vec![peers::Size {
        n,
        ours: &measured,
        floor: floor_median,
        peers: medians.iter().map(|(peer, round)| (*peer, round)).collect(),
        rounds,
    }];
    // The unsharded round at the sharded rows' size, which they measure sharding against.
    let mut unsharded = None;
    let big_rounds = if args.memory_primaries > n {
        let big = args.memory_primaries;
        let measured = bench.operator_round("bench-memory", big).await?;
        let floor = bench.floor_round("bench-memory-floor", big).await?;
        rows.push(Row::times(
            format!("converge {big} new PrometheusRules, one round"),
            measured.converged,
            floor,
            "as above, at 10 times the size".to_owned(),
        ));
        let pair = measured.peak_bytes.saturating_sub(small) as f64 / (big - n) as f64;
        rows.push(Row {
            figure: format!("peak RSS at {big} primaries and children"),
            ours: format!("{:.0} MiB", measured.peak_bytes as f64 / 1048576.0),
            floor: String::new(),
            ratio: String::new(),
            command: "VmHWM of the operator process".to_owned(),
        });
        rows.push(Row {
            figure: "peak RSS per primary and child pair".to_owned(),
            ours: format!("{:.1} KiB", pair / 1024.0),
            floor: String::new(),
            ratio: String::new(),
            command: format!("(VmHWM at {big} − VmHWM at {n}) / {}", big - n),
        });
        let mut measured_peers = Vec::new();
        for peer in peers::Peer::ALL {
            let round = bench.peer_round(peer, "memory", big).await?;
            rows.extend(peers::rows(big, &measured, (peer, &round), ""));
            measured_peers.push((peer, round));
        }
        Some((big, measured, floor, measured_peers))
    } else {
        None
    };
    if let Some((big, measured, floor, measured_peers)) = &big_rounds {
        sizes.push(peers::Size {
            n: *big,
            ours: measured,
            floor: *floor,
            peers: measured_peers
                .iter()
                .map(|(peer, round)| (*peer, round))
                .collect(),
            rounds: String::new(),
        });
        if *big == args.sharded_primaries {
            unsharded = Some(measured);
        }
    }
    let table = peers::side_by_side(&sizes);
    if args.sharded_primaries > 0 {
        rows.extend(sharded::rows(&bench, args.sharded_primaries, unsharded).await?);
    }
    Ok((rows, table))
}

/// What one operator round measured.
struct OperatorRound {
    converged: Duration,
    /// `operator_api_requests_total` by verb, while converging.
    operator_requests: BTreeMap<String, u64>,
    /// The API server's writes by verb and resource, while converging.
    server_requests: BTreeMap<(String, String), u64>,
    restart_writes: u64,
    peak_bytes: u64,
    /// CPU seconds the operator process used converging.
    cpu_seconds: f64,
}

impl Bench {
    async fn start(workspace: &Path) -> Result<Self> {
        let cluster = Cluster::new(workspace.to_owned());
        if !cluster.is_ready() {
            cluster.up(operator_gen_cluster::Shape::ControlPlaneOnly)?;
        }
        let status = operator_gen_tests::cargo()
            .args([
                "build",
                "--release",
                "--quiet",
                "-p",
                "example-operator",
                "-p",
                "kube-rs-peer",
                "--bin",
                "example-operator",
                "--bin",
                "kube-rs-peer",
            ])
            .current_dir(workspace)
            .status()?;
        if !status.success() {
            bail!("building example-operator and the kube-rs peer failed");
        }
        let admin = client(&cluster.admin_kubeconfig()).await?;
        let kubectl = cluster.kubectl()?;
        let dir = workspace.join("example-operator");
        // The operator's own namespace first, where its deploy/ has one: its roles go in it.
        let files = [
            "deploy/base/namespace.yaml",
            "deploy/base/crd.yaml",
            "deploy/base/rbac.yaml",
        ];
        for file in files.into_iter().filter(|file| dir.join(file).exists()) {
            let status = Command::new(&kubectl)
                .env("KUBECONFIG", cluster.admin_kubeconfig())
                .args(["apply", "--server-side", "--force-conflicts", "-f"])
                .arg(dir.join(file))
                .stdout(Stdio::null())
                .status()?;
            if !status.success() {
                bail!("applying example-operator's {file} failed");
            }
        }
        // The webhooks' Secret, which deploy/ creates empty and the operator fills; not the
        // webhook configurations, which would call a Service the bench does not run.
        let webhooks = fs::read_to_string(dir.join("deploy/base/webhooks.yaml"))?;
        let documents: Vec<serde_json::Value> = serde_saphyr::from_str_multiple(&webhooks)
            .context("reading deploy/base/webhooks.yaml")?;
        for secret in documents.iter().filter(|d| d["kind"] == "Secret") {
            let secret: Secret = serde_json::from_value(secret.clone())?;
            let secrets: Api<Secret> =
                Api::namespaced(admin.clone(), &secret.namespace().unwrap_or_default());
            let params = PatchParams::apply("operator-gen-bench").force();
            secrets
                .patch(&secret.name_any(), &params, &Patch::Apply(&secret))
                .await?;
        }
        let operator_namespace = deploy_namespace(&dir)?;
        let logs = workspace.join("target/bench/runtime");
        fs::create_dir_all(&logs)?;
        Ok(Self {
            operator_kubeconfig: cluster
                .operator_kubeconfig("example-operator", &operator_namespace)?,
            operator_namespace,
            operator_binary: workspace.join("target/release/example-operator"),
            peers: peers::PeerBinaries::build(workspace)?,
            apiserver_pid: cluster
                .pid("kube-apiserver")
                .context("the API server does not run")?,
            admin,
            logs,
        })
    }

    /// A fresh namespace holding `n` primaries, none reconciled.
    async fn primaries(&self, namespace: &str, n: usize) -> Result<Api<PrometheusRule>> {
        let namespaces: Api<Namespace> = Api::all(self.admin.clone());
        self.forget(namespace).await?;
        let object =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        namespaces
            .create(&PostParams::default(), &serde_json::from_value(object)?)
            .await?;
        let rules: Api<PrometheusRule> = Api::namespaced(self.admin.clone(), namespace);
        futures::stream::iter(0..n)
            .map(|i| {
                let rules = rules.clone();
                async move {
                    let rule: PrometheusRule = serde_json::from_value(json!({
                        "apiVersion": "monitoring.coreos.com/v1",
                        "kind": "PrometheusRule",
                        "metadata": {"name": format!("rule-{i}")},
                        "spec": {"groups": [{"name": "bench.rules", "rules": [
                            {"alert": format!("Alert{i}"), "expr": "vector(1)"}
                        ]}]}
                    }))?;
                    rules.create(&PostParams::default(), &rule).await?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<()>()
            .await?;
        Ok(rules)
    }

    /// Removes a namespace of an earlier round, finalizers first so nothing waits.
    async fn forget(&self, namespace: &str) -> Result<()> {
        let namespaces: Api<Namespace> = Api::all(self.admin.clone());
        if namespaces.get_opt(namespace).await?.is_none() {
            return Ok(());
        }
        let rules: Api<PrometheusRule> = Api::namespaced(self.admin.clone(), namespace);
        let listed = rules.list(&ListParams::default()).await?;
        futures::stream::iter(listed.items)
            .map(|rule| {
                let rules = rules.clone();
                async move {
                    let patch = json!({"metadata": {"finalizers": null}});
                    rules
                        .patch(
                            &rule.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        )
                        .await
                        .map(drop)
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<()>()
            .await?;
        namespaces
            .delete(namespace, &DeleteParams::default())
            .await?;
        let started = Instant::now();
        while namespaces.get_opt(namespace).await?.is_some() {
            if started.elapsed() > Duration::from_secs(600) {
                bail!("namespace {namespace} was not deleted within 10 minutes");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(())
    }

    /// Waits until `n` of example-operator's children exist in `namespace`, counting them
    /// from a watch.
    async fn children(&self, namespace: &str, n: usize) -> Result<()> {
        self.children_of(namespace, n, FIELD_MANAGER).await
    }

    /// Waits until `n` children that `manager` manages (by the managed-by label) exist in
    /// `namespace`, counting them from a watch.
    async fn children_of(&self, namespace: &str, n: usize, manager: &str) -> Result<()> {
        let config_maps: Api<ConfigMap> = Api::namespaced(self.admin.clone(), namespace);
        let selector = format!("{MANAGED_BY_LABEL}={manager}");
        let mut names = std::collections::HashSet::new();
        let mut events = std::pin::pin!(
            watcher(config_maps, watcher::Config::default().labels(&selector)).applied_objects()
        );
        while names.len() < n {
            let Some(child) = events.try_next().await? else {
                bail!("the watch of {namespace}'s children ended");
            };
            names.insert(child.name_any());
        }
        Ok(())
    }

    async fn operator_round(&self, namespace: &str, n: usize) -> Result<OperatorRound> {
        self.primaries(namespace, n).await?;
        let before = self.server_writes().await?;
        let port = 19300;
        let started = Instant::now();
        let mut operator = self.start_operator(port, namespace, &[])?;
        let converged = self.children(namespace, n).await;
        let converged = converged.map(|()| started.elapsed());
        let result = async {
            let converged = converged?;
            // Let the reconciles the children's own events trigger finish, then count.
            self.settle(port).await?;
            let operator_requests = requests(port)?;
            let peak_bytes = peak_rss(&operator)?;
            let cpu_seconds = cpu_seconds(&operator)?;
            let server_requests = difference(&before, &self.server_writes().await?);
            stop(&mut operator);
            let mut restarted = self.start_operator(port, namespace, &[])?;
            self.settle(port).await?;
            let restart_writes = requests(port)?
                .iter()
                .filter(|(verb, _)| {
                    matches!(verb.as_str(), "create" | "update" | "patch" | "delete")
                })
                .map(|(_, count)| count)
                .sum();
            stop(&mut restarted);
            anyhow::Ok(OperatorRound {
                converged,
                operator_requests,
                server_requests,
                restart_writes,
                peak_bytes,
                cpu_seconds,
            })
        }
        .await;
        stop(&mut operator);
        self.forget(namespace).await?;
        result
    }

    /// The writes an ideal operator must make for each primary, from many requests in
    /// flight: the finalizer patch and the child's server-side apply.
    async fn floor_round(&self, namespace: &str, n: usize) -> Result<Duration> {
        let rules = self.primaries(namespace, n).await?;
        let listed = rules.list(&ListParams::default()).await?.items;
        let config_maps: Api<ConfigMap> = Api::namespaced(self.admin.clone(), namespace);
        let started = Instant::now();
        futures::stream::iter(listed)
            .map(|rule| {
                let (rules, config_maps) = (rules.clone(), config_maps.clone());
                async move {
                    let finalizer = json!({"metadata": {"finalizers": [FINALIZER]}});
                    rules
                        .patch(
                            &rule.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(&finalizer),
                        )
                        .await?;
                    let mut child = rule_config_map(&rule).map_err(|e| anyhow::anyhow!("{e}"))?;
                    let owner = rule
                        .controller_owner_ref(&())
                        .context("the rule has a uid")?;
                    child.metadata.owner_references = Some(vec![owner]);
                    child
                        .labels_mut()
                        .insert(MANAGED_BY_LABEL.to_owned(), FIELD_MANAGER.to_owned());
                    let params = PatchParams::apply(FIELD_MANAGER).force();
                    config_maps
                        .patch(&child.name_any(), &params, &Patch::Apply(&child))
                        .await?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<()>()
            .await?;
        let took = started.elapsed();
        self.forget(namespace).await?;
        Ok(took)
    }

    /// Starts example-operator with its metrics on `port`, its log in `{log}.log`, and `env`
    /// beside the bench's own variables.
    fn start_operator(&self, port: u16, log: &str, env: &[(&str, &str)]) -> Result<Child> {
        let log = fs::File::create(self.logs.join(format!("{log}.log")))?;
        Command::new(&self.operator_binary)
            .envs(env.iter().copied())
            .env("KUBECONFIG", &self.operator_kubeconfig)
            .env("RUST_LOG", "warn")
            .env("LOG_FORMAT", "json")
            .env("METRICS_ADDR", format!("127.0.0.1:{port}"))
            .env("POD_NAMESPACE", &self.operator_namespace)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.operator_binary.display()))
    }

    /// Waits until every watch of the operator on `port` has listed what exists
    /// (`operator_watches_pending` at 0; example-operator is ready as soon as its webhooks
    /// serve, before that).
    async fn listed(&self, port: u16) -> Result<()> {
        let started = Instant::now();
        loop {
            let metrics = http_get(port, "/metrics").unwrap_or_default();
            if metrics.contains("\noperator_watches_pending 0\n") {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(300) {
                bail!("the operator's watches had not listed within 5 minutes");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the operator is ready and its request count has not moved for 2 s.
    async fn settle(&self, port: u16) -> Result<()> {
        let started = Instant::now();
        let mut last = None;
        let mut still_since = Instant::now();
        loop {
            if started.elapsed() > Duration::from_secs(300) {
                bail!("the operator did not settle within 5 minutes");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
            if !is_ready(port) {
                continue;
            }
            let total: u64 = requests(port)?.values().sum();
            if last != Some(total) {
                last = Some(total);
                still_since = Instant::now();
            } else if still_since.elapsed() > Duration::from_secs(2) {
                return Ok(());
            }
        }
    }

    /// The API server's `apiserver_request_total` for writes, by verb and resource.
    async fn server_writes(&self) -> Result<BTreeMap<(String, String), u64>> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = self.admin.request_text(request).await?;
        let mut counts = BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| l.starts_with("apiserver_request_total{"))
        {
            let label = |name: &str| {
                line.split(&format!("{name}=\""))
                    .nth(1)
                    .and_then(|rest| rest.split('"').next())
                    .unwrap_or_default()
                    .to_owned()
            };
            let (verb, resource) = (label("verb"), label("resource"));
            if !matches!(verb.as_str(), "POST" | "PUT" | "PATCH" | "DELETE" | "APPLY")
                || !matches!(resource.as_str(), "prometheusrules" | "configmaps")
            {
                continue;
            }
            let count = line
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0);
            *counts.entry((verb, resource)).or_insert(0) += count as u64;
        }
        Ok(counts)
    }
}

fn stop(operator: &mut Child) {
    let _ = operator.kill();
    let _ = operator.wait();
}

/// Peak resident memory of a running process.
fn peak_rss(process: &Child) -> Result<u64> {
    let status = fs::read_to_string(format!("/proc/{}/status", process.id()))?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM")?;
    Ok(kib * 1024)
}

/// The counts that grew from `before` to `after`, by how much.
fn difference(
    before: &BTreeMap<(String, String), u64>,
    after: &BTreeMap<(String, String), u64>,
) -> BTreeMap<(String, String), u64> {
    after
        .iter()
        .map(|(key, count)| {
            let was = before.get(key).copied().unwrap_or(0);
            (key.clone(), count.saturating_sub(was))
        })
        .filter(|(_, count)| *count > 0)
        .collect()
}

/// CPU seconds a running process has used, in user and system mode.
fn cpu_seconds(process: &Child) -> Result<f64> {
    let stat = fs::read_to_string(format!("/proc/{}/stat", process.id()))?;
    // The fields after the command's name, which is in parentheses and may hold spaces:
    // state is the first, utime and stime the 12th and 13th, in clock ticks.
    let after = stat.rsplit_once(')').context("no command name in stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64> {
        let field = fields.get(i).context("a short stat")?;
        Ok(field.parse()?)
    };
    // Linux's USER_HZ, which /proc reports ticks in, is 100 on every architecture it runs on.
    Ok((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

/// `operator_api_requests_total` of the operator on `port`, by verb.
fn requests(port: u16) -> Result<BTreeMap<String, u64>> {
    let text = http_get(port, "/metrics")?;
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("operator_api_requests_total{verb=\"") else {
            continue;
        };
        let Some((verb, value)) = rest.split_once("\"} ") else {
            continue;
        };
        counts.insert(verb.to_owned(), value.trim().parse().unwrap_or(0));
    }
    Ok(counts)
}

/// Whether the operator on `port` answers ready.
fn is_ready(port: u16) -> bool {
    http_get(port, "/readyz").is_ok_and(|body| body.contains("ready") && !body.contains("still"))
}

fn http_get(port: u16, path: &str) -> Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_odd_count_is_the_middle_value() {
        let ms = |v: &[u64]| v.iter().map(|&m| Duration::from_millis(m)).collect();
        assert_eq!(median(ms(&[30, 10, 20])), Duration::from_millis(20));
        assert_eq!(median(ms(&[5, 1, 4, 2, 3])), Duration::from_millis(3));
    }
}
