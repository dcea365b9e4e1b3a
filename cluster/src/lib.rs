//! A real Kubernetes on this machine, without containers around it: etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler, and one node (containerd, the kubelet,
//! kube-proxy) whose pods run from images imported from tarballs. `cargo xtask cluster` is its
//! command line; the e2e, the corpus and the bench use it as a library.
//!
//! Where things are: [`binaries`] builds the pinned Go modules once per machine into its
//! cache; [`network`] holds every address, port and name the cluster takes; `pki` makes its
//! credentials; `control_plane` and `node` hold the processes' flags and configurations;
//! `processes` starts and stops them; [`operators`] finds the workspace's operator crates.
//!
//! Everything a running cluster needs that is its own (keys, etcd's data, logs, kubeconfigs,
//! pids, the node's images and pods) lives in `target/cluster/`, which `down` removes; the
//! node's sockets and its record of the machine live in [`network::RUN_DIR`].
//!
//! The admin, in `system:masters`, and each component have a static token. An operator runs
//! as its ServiceAccount, in a pod with the token the kubelet projects, or outside with one
//! the API server issues ([`service_account_kubeconfig`]), so the bindings in its generated
//! `deploy/base/rbac.yaml` are exactly what it may do.

pub mod binaries;
mod control_plane;
mod kubectl;
pub mod network;
mod node;
pub mod operators;
mod pki;
mod processes;

use std::{
    fs,
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

pub use binaries::{Component, NEWEST_KUBERNETES, go_command, machine_cache};
pub use kubectl::Kubectl;
pub use node::Folders as NodeFolders;
pub use operators::{OperatorCrate, deploy_namespace, operator_crate, operator_crates};
pub use processes::{alive, checked, tail};

use control_plane::Layout;
use network::{API_PORT, ETCD_PORT};
use node::Node;
use pki::{Identity, Pki};
use processes::Processes;

/// The namespace operators run in unless they have one of their own (an operator that admits a
/// built-in kind does): each crate's own is [`OperatorCrate::namespace`].
pub const OPERATOR_NAMESPACE: &str = "default";

/// The file in `target/cluster/` that says which Kubernetes version runs there.
const VERSION_FILE: &str = "kubernetes-version";
/// The file in `target/cluster/` that says a node runs beside the control plane.
const NODE_FILE: &str = "node-name";

/// How long `down` lets a process end on SIGTERM before it is killed: the API server would
/// keep its watches open for a quarter of a minute.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// The control plane's processes, in start order.
const CONTROL_PLANE: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// What `up` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The control plane and a node, where operators run as pods.
    WithNode,
    /// The control plane alone, on loopback, with only the garbage collector and the namespace
    /// controller: what the bench measures on, so that its write counts are its own.
    ControlPlaneOnly,
}

/// The cluster of this workspace.
pub struct Cluster {
    workspace: PathBuf,
    state: PathBuf,
    kubernetes: Component,
}

impl Cluster {
    /// The cluster that runs, at the version it was started with (`cluster up --kubernetes`),
    /// or else the newest Kubernetes pinned here.
    pub fn new(workspace: PathBuf) -> Self {
        let newest = Self::with_kubernetes(workspace, NEWEST_KUBERNETES.to_owned());
        match newest.running_version() {
            Some(running) if running != NEWEST_KUBERNETES => {
                let older = Self::with_kubernetes(newest.workspace.clone(), running);
                if older.is_ready() { older } else { newest }
            }
            _ => newest,
        }
    }

    /// The cluster at a pinned Kubernetes `version` (`binaries::resolve_kubernetes`).
    pub fn with_kubernetes(workspace: PathBuf, version: String) -> Self {
        let state = state_folder(&workspace);
        Self {
            kubernetes: Component::kubernetes(&workspace, &version),
            workspace,
            state,
        }
    }

    pub fn version(&self) -> &str {
        self.kubernetes.version()
    }

    /// The version `up` last started here, if its state is still there.
    fn running_version(&self) -> Option<String> {
        let text = fs::read_to_string(self.state.join(VERSION_FILE)).ok()?;
        Some(text.trim().to_owned())
    }

    /// Whether the running cluster has a node.
    pub fn has_node(&self) -> bool {
        self.state.join(NODE_FILE).exists()
    }

    fn shape(&self) -> Shape {
        if self.has_node() {
            Shape::WithNode
        } else {
            Shape::ControlPlaneOnly
        }
    }

    fn pki(&self) -> Pki {
        Pki::new(self.state.join("pki"))
    }

    fn processes(&self) -> Processes {
        Processes::new(self.state.clone())
    }

    fn node(&self) -> Node {
        Node::new(&self.workspace, &self.state)
    }

    /// The pid of the control plane's or the node's process `name` (`kube-apiserver`), if it
    /// runs: for a bench that samples its memory.
    pub fn pid(&self, name: &str) -> Option<String> {
        self.processes().pid(name)
    }

    /// Where the node keeps its pods' logs and images.
    pub fn node_folders(&self) -> NodeFolders {
        self.node().folders().clone()
    }

    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.kubeconfig(Identity::Admin)
    }

    fn kubeconfig(&self, identity: Identity) -> PathBuf {
        self.state
            .join(format!("{}.kubeconfig", identity.file_name()))
    }

    /// A kubeconfig for the ServiceAccount `name` in `namespace`, with a token this cluster
    /// issues ([`service_account_kubeconfig`]).
    pub fn operator_kubeconfig(&self, name: &str, namespace: &str) -> Result<PathBuf> {
        let path = self.state.join(format!("{name}.kubeconfig"));
        service_account_kubeconfig(&self.admin()?, name, namespace, &path)?;
        Ok(path)
    }

    /// kubectl as the cluster's admin.
    pub fn admin(&self) -> Result<Kubectl> {
        Ok(Kubectl::new(self.kubectl()?, self.admin_kubeconfig()))
    }

    pub fn log(&self, component: &str) -> PathBuf {
        self.processes().log(component)
    }

    /// The cached Kubernetes binaries, built first when missing.
    pub fn binaries(&self) -> Result<PathBuf> {
        self.kubernetes.ensure_built()
    }

    pub fn kubectl(&self) -> Result<PathBuf> {
        Ok(self.binaries()?.join("kubectl"))
    }

    /// The cached helm, built first when missing.
    pub fn helm(&self) -> Result<PathBuf> {
        helm(&self.workspace)
    }

    /// Imports the image tarball `tar` into the node's containerd.
    pub fn import_image(&self, tar: &Path) -> Result<()> {
        if !self.has_node() {
            bail!("the cluster runs without a node, so it runs no image: `cargo xtask cluster up`");
        }
        let containerd = Component::containerd(&self.workspace).ensure_built()?;
        self.node().import(&containerd, tar)
    }

    /// Kills every process of the pod with `uid` on the node at once, as a crash ends them,
    /// without the kubelet's grace period; how many it killed.
    pub fn crash_pod(&self, uid: &str) -> usize {
        self.node().crash_pod(uid)
    }

    /// Whether the API server answers `/readyz`.
    pub fn is_ready(&self) -> bool {
        // Only asks: `status` must not start a build.
        let Ok(bin) = self.kubernetes.dir() else {
            return false;
        };
        Command::new(bin.join("kubectl"))
            .args(["get", "--raw", "/readyz", "--request-timeout=2s"])
            .env("KUBECONFIG", self.admin_kubeconfig())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Starts the cluster in `shape` unless it already runs so at this version; returns how
    /// long that took.
    pub fn up(&self, shape: Shape) -> Result<Duration> {
        if !on_path("openssl") {
            bail!("`openssl` was not found on PATH: the cluster's keys are made with it");
        }
        let etcd = Component::etcd(&self.workspace).ensure_built()?;
        let bin = self.binaries()?;
        let containerd = match shape {
            Shape::WithNode => Some(Component::containerd(&self.workspace).ensure_built()?),
            Shape::ControlPlaneOnly => None,
        };
        self.helm()?;
        let started = Instant::now();
        let running = self.running_version();
        if self.is_ready()
            && running.as_deref() == Some(self.kubernetes.version())
            && self.shape() == shape
        {
            return Ok(started.elapsed());
        }
        self.down()?;
        for dir in ["logs", "pki", "etcd"] {
            let dir = self.state.join(dir);
            fs::create_dir_all(&dir).with_context(|| format!("making {}", dir.display()))?;
        }
        let node = self.node();
        let cgroups = match shape {
            Shape::WithNode => Some(
                node.prepare(&self.workspace.join("cluster/control-plane"))
                    .inspect_err(|_| {
                        let _ = node.stop();
                    })?,
            ),
            Shape::ControlPlaneOnly => None,
        };
        let started_up = self.start(shape, &etcd, &bin, containerd.as_deref(), cgroups);
        if started_up.is_err() {
            // A node half made is taken apart at once: its bridge and rules are machine-wide.
            let _ = self.down();
        }
        started_up?;
        Ok(started.elapsed())
    }

    fn start(
        &self,
        shape: Shape,
        etcd: &Path,
        bin: &Path,
        containerd: Option<&Path>,
        cgroups: Option<node::Cgroups>,
    ) -> Result<()> {
        fs::write(self.state.join(VERSION_FILE), self.kubernetes.version())?;
        let pki = self.pki();
        let layout = Layout {
            state: &self.state,
            pki: &pki,
            node: shape == Shape::WithNode,
        };
        pki.write(layout.api_address(), &nonce())
            .context("making the cluster's credentials")?;
        let server = format!("https://{}:{API_PORT}", layout.api_address());
        for identity in Identity::ALL {
            pki::write_kubeconfig(
                &self.kubeconfig(identity),
                &server,
                &pki.path("ca.crt"),
                identity.file_name(),
                &pki.token(identity)?,
                OPERATOR_NAMESPACE,
            )?;
        }
        let processes = self.processes();
        processes.spawn("etcd", control_plane::etcd(etcd, &layout))?;
        wait_listening(("127.0.0.1", ETCD_PORT), "etcd", &self.log("etcd"))?;
        processes.spawn(
            "kube-apiserver",
            control_plane::apiserver(bin, &layout, &advertise_address()?),
        )?;
        self.wait_ready(Duration::from_secs(90))?;
        processes.spawn(
            "kube-controller-manager",
            control_plane::controller_manager(bin, &layout),
        )?;
        let (Some(containerd), Some(cgroups)) = (containerd, cgroups) else {
            return Ok(());
        };
        fs::write(self.state.join(NODE_FILE), network::NODE_NAME)?;
        processes.spawn("kube-scheduler", control_plane::scheduler(bin, &layout))?;
        let node = self.node();
        let binaries = node::Binaries {
            kubernetes: bin.to_owned(),
            containerd: containerd.to_owned(),
            version: self.kubernetes.version().to_owned(),
        };
        node.start(&binaries, &pki, cgroups)?;
        node.wait_ready(
            &bin.join("kubectl"),
            &self.admin_kubeconfig(),
            Duration::from_secs(90),
        )
    }

    /// Stops every process of the cluster, takes its node apart and removes its state.
    pub fn down(&self) -> Result<()> {
        let node = self.node();
        let stopped = if node.is_here() { node.stop() } else { Ok(()) };
        let processes = self.processes();
        for component in CONTROL_PLANE.iter().rev() {
            // Their state goes with them: nothing is gained by letting them finish requests.
            processes.stop(component, STOP_GRACE);
        }
        if self.state.exists() {
            fs::remove_dir_all(&self.state)
                .with_context(|| format!("removing {}", self.state.display()))?;
        }
        stopped
    }

    /// Restarts kube-apiserver, for the checks that watches and Leases survive it: killed
    /// at once, as a crash stops it (its state is etcd's), kept away for at least `away` (a
    /// check that an outage longer than a Lease moves nothing asks for one), then started and
    /// waited for. Asked to stop gracefully it kept its watches open for the whole 15 s
    /// `down` allows, in each of the e2e's seven restarts.
    pub fn restart_apiserver(&self, away: Duration) -> Result<()> {
        let bin = self.binaries()?;
        let pki = self.pki();
        let layout = Layout {
            state: &self.state,
            pki: &pki,
            node: self.has_node(),
        };
        let stopped = Instant::now();
        let processes = self.processes();
        processes.stop("kube-apiserver", Duration::ZERO);
        processes::wait_port_free(layout.api_address(), API_PORT, Duration::from_secs(10))?;
        std::thread::sleep(away.saturating_sub(stopped.elapsed()));
        processes.spawn(
            "kube-apiserver",
            control_plane::apiserver(&bin, &layout, &advertise_address()?),
        )?;
        self.wait_ready(Duration::from_secs(90))
    }

    fn wait_ready(&self, patience: Duration) -> Result<()> {
        let deadline = Instant::now() + patience;
        while !self.is_ready() {
            if Instant::now() > deadline {
                bail!(
                    "kube-apiserver was not ready within {patience:?}; its log ends:\n{}",
                    tail(&self.log("kube-apiserver"), 20)
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(())
    }
}

/// Waits up to 30 s until `address` accepts a connection.
/// Where the cluster of the checkout `workspace` keeps its state: certificates, logs, pid
/// files and the node's folders.
fn state_folder(workspace: &Path) -> PathBuf {
    workspace.join("target").join("cluster")
}

fn wait_listening(address: (&str, u16), what: &str, log: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(address).is_err() {
        if Instant::now() > deadline {
            bail!("{what} did not listen within 30s; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// The cached helm ([`binaries::HELM`]), built first when missing: it needs no control plane,
/// so the chart checks run it without one.
pub fn helm(workspace: &Path) -> Result<PathBuf> {
    Ok(Component::helm(workspace).ensure_built()?.join("helm"))
}

/// The address kube-apiserver publishes in the `kubernetes` Endpoints without a node, which
/// refuses loopback: this machine's own first global IPv4 address. Nothing connects to it.
fn advertise_address() -> Result<String> {
    if let Ok(address) = std::env::var("OPERATOR_GEN_ADVERTISE_ADDRESS") {
        return Ok(address);
    }
    let output = Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .context("running `ip` to find this machine's address")?;
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .skip_while(|word| *word != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .map(str::to_owned)
        .context(
            "this machine has no global IPv4 address for kube-apiserver to advertise; \
             set OPERATOR_GEN_ADVERTISE_ADDRESS to one of its addresses",
        )
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

/// A value no earlier cluster used, for tokens.
fn nonce() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}{:x}", nanos, std::process::id())
}

/// Writes to `path` a kubeconfig whose user is the ServiceAccount `name` in `namespace`, on the
/// cluster of `admin`'s kubeconfig, with a token the API server issues (a TokenRequest), as
/// `operator-gen kubeconfig` writes it for a developer. The namespace and the ServiceAccount are created first
/// when missing, since a token is issued only for a ServiceAccount that exists; the token lasts
/// two hours, longer than any run that uses it.
pub fn service_account_kubeconfig(
    admin: &Kubectl,
    name: &str,
    namespace: &str,
    path: &Path,
) -> Result<()> {
    let account = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
    ]});
    // Server-side, under a manager of its own that owns only the names: a namespace or a
    // ServiceAccount made from `deploy/` or a Helm chart keeps its labels and its owners.
    admin
        .stdout_with_input(
            &[
                "apply",
                "--server-side",
                "--field-manager=operator-gen-service-account",
                "-f",
                "-",
            ],
            Some(account.to_string().as_bytes()),
        )
        .with_context(|| format!("creating the ServiceAccount {namespace}/{name}"))?;
    let account = operator_gen_cli::kubeconfig::ServiceAccount {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    };
    operator_gen_cli::kubeconfig::write_for(&|args| admin.command(args), &account, "2h", path)
}
