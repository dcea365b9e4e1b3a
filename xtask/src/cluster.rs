//! `cargo xtask cluster up|down|status`: the workspace's cluster (`operator-gen-cluster`), a
//! control plane with one node by default.

use anyhow::Result;
use clap::{Args, Subcommand};
use operator_gen_cluster::{Cluster, Shape, binaries};

#[derive(Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Build the cluster if it is not cached, start it and write kubeconfigs: a control plane
    /// and one node, where operators run as pods.
    Up {
        /// The Kubernetes version to run: one pinned in `cluster/control-plane/modules/`,
        /// exact (`1.33.13`) or by minor version (`1.33`). The newest pinned by default.
        #[arg(long, value_name = "VERSION")]
        kubernetes: Option<String>,
        /// A control plane without a node (no kubelet, kube-proxy, scheduler or containerd, and
        /// only the garbage collector and namespace controllers): no root needed, and an API
        /// server that sees only its clients' writes, as the bench wants.
        #[arg(long)]
        no_node: bool,
    },
    /// Stop it, take its node apart, and remove its state.
    Down,
    /// Say whether it runs, with or without a node, and where its kubeconfig is.
    Status,
}

pub fn run(args: ClusterArgs) -> Result<std::process::ExitCode> {
    let workspace = crate::workspace_root();
    match args.action {
        Action::Up {
            kubernetes,
            no_node,
        } => {
            let cluster = match kubernetes {
                Some(wanted) => {
                    let version = binaries::resolve_kubernetes(&workspace, &wanted)?;
                    Cluster::with_kubernetes(workspace, version)
                }
                None => Cluster::new(workspace),
            };
            let shape = if no_node {
                Shape::ControlPlaneOnly
            } else {
                Shape::WithNode
            };
            let started = cluster.up(shape)?;
            let what = match shape {
                Shape::WithNode => "control plane and node",
                Shape::ControlPlaneOnly => "control plane (no node)",
            };
            println!(
                "{what} (Kubernetes {}) up in {started:.1?}; export KUBECONFIG={}",
                cluster.version(),
                cluster.admin_kubeconfig().display()
            );
            println!(
                "kubectl: {}\nhelm: {}",
                cluster.kubectl()?.display(),
                cluster.helm()?.display()
            );
        }
        Action::Down => {
            Cluster::new(workspace).down()?;
            println!("cluster stopped; its node, if it had one, taken apart");
        }
        Action::Status => {
            let cluster = Cluster::new(workspace);
            if !cluster.is_ready() {
                println!("not running");
                return Ok(std::process::ExitCode::FAILURE);
            }
            let node = if cluster.has_node() {
                "with a node"
            } else {
                "without a node"
            };
            println!(
                "running Kubernetes {} {node}: KUBECONFIG={}",
                cluster.version(),
                cluster.admin_kubeconfig().display()
            );
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}
