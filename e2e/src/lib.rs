//! The e2e: every operator crate of the workspace (`example-operator` and each crate in
//! `generated/`) deployed as its users deploy it, as pods on the real node of
//! `operator-gen-cluster`, from the image `operator-gen image` builds, and checked through the
//! API server, its Service and its pods.
//!
//! Where things are: [`kit`] is what any such test needs (kubectl, an operator's pods, a local
//! process, their logs and images); `suite` holds one crate's checks, each saying how the
//! operator must run for it; `runner` makes them libtest trials, so one check runs by name;
//! `sharding` drives the runtime's sharding protocol in process, which a process proves
//! better than pods (its replicas' reconciles recorded on one clock); [`artifacts`] finds the
//! workspace's executables in the build that `cargo test --workspace` made.
//!
//! `cargo xtask e2e [filter]` runs it; it is not a test target, so `cargo test --workspace`,
//! which runs before any cluster is up, leaves it out. The phase lines it prints
//! (`phase build-operators: …`) are what `.ci/run` waits for, and its last line is
//! `N passed, N failed`.

pub mod artifacts;
pub mod kit;
mod runner;
mod runtime_log;
mod sharding;
mod suite;

use std::{
    fs,
    path::Path,
    process::ExitCode,
    sync::{Arc, Mutex},
    time::Instant,
};

use anyhow::Result;
use operator_gen_cluster::{Cluster, Shape};

use crate::{
    artifacts::Artifacts,
    kit::Kubectl,
    runner::{Plan, Runner},
    suite::{Deployed, Env, Suite},
};

/// `cargo xtask e2e`'s arguments: libtest's (a filter, `--exact`, `--skip`, `--list`).
#[derive(clap::Args, Debug)]
pub struct E2eArgs {
    #[command(flatten)]
    pub tests: libtest_mimic::Arguments,
}

/// Runs the e2e on the cluster of the workspace at `workspace`, started with a node when it
/// does not run so.
///
/// # Errors
///
/// The cluster, the build or Prometheus could not be had; a check's failure is a failed
/// trial, not an error.
pub fn run(workspace: &Path, args: E2eArgs) -> Result<ExitCode> {
    let mut tests = args.tests;
    // One cluster, one crate at a time: trials share its state.
    tests.test_threads = Some(1);
    let crates = operator_gen_cluster::operator_crates(workspace)?;
    let mut plans = Vec::new();
    for operator in crates
        .iter()
        .filter(|c| suite::HELM_CRATES.contains(&c.name.as_str()))
    {
        plans.push(Plan {
            operator: operator.clone(),
            deployed: Deployed::Chart,
            checks: vec![suite::HELM_CHECK],
        });
    }
    for operator in &crates {
        plans.push(Plan {
            operator: operator.clone(),
            deployed: Deployed::Kustomize,
            checks: Suite::checks(operator)?,
        });
    }
    if tests.list {
        let runner = Arc::new(Mutex::new(Runner::new(
            plans,
            Box::new(|_| unreachable_env()),
        )));
        let _listed = libtest_mimic::run(&tests, Runner::trials(&runner));
        return Ok(ExitCode::SUCCESS);
    }

    let cluster = Arc::new(Cluster::new(workspace.to_owned()));
    let started = Instant::now();
    let kubectl = cluster.kubectl()?;
    println!("phase build-control-plane: {:.1?}", started.elapsed());
    let took = cluster.up(Shape::WithNode)?;
    println!("phase start-control-plane: {took:.1?}");
    let started = Instant::now();
    let artifacts = Arc::new(Artifacts::build(workspace)?);
    println!("phase build-operators: {:.1?}", started.elapsed());
    let started = Instant::now();
    let prometheus = suite::install_prometheus(workspace)?;
    println!("phase install-prometheus: {:.1?}", started.elapsed());

    let logs = workspace.join("target/e2e");
    if logs.exists() {
        fs::remove_dir_all(&logs)?;
    }
    let admin = Kubectl::new(kubectl, cluster.admin_kubeconfig());
    let make_env = {
        let (workspace, admin, cluster) =
            (workspace.to_owned(), admin.clone(), Arc::clone(&cluster));
        let (prometheus, artifacts, logs) =
            (prometheus.clone(), Arc::clone(&artifacts), logs.clone());
        move |folder: &str| Env {
            kubectl: admin.clone(),
            workspace: workspace.clone(),
            logs: logs.join(folder),
            cluster: Arc::clone(&cluster),
            prometheus: prometheus.clone(),
            artifacts: Arc::clone(&artifacts),
        }
    };
    let sharding_env = make_env("operator-gen-runtime");
    let runner = Arc::new(Mutex::new(Runner::new(plans, Box::new(make_env))));
    runner
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .set_sharding_env(sharding_env);
    let started = Instant::now();
    let conclusion = libtest_mimic::run(&tests, Runner::trials(&runner));
    {
        let mut runner = runner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        runner.finish();
        runner.print_timings();
    }
    println!("phase tests: {:.1?}", started.elapsed());
    println!(
        "{} passed, {} failed",
        conclusion.num_passed, conclusion.num_failed
    );
    Ok(if conclusion.num_failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `--list` makes no suite.
fn unreachable_env() -> Env {
    panic!("--list runs no trial")
}
