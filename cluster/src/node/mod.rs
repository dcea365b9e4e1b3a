//! The cluster's one node: containerd (2.x, built from its pinned Go module) with Debian's runc
//! and CNI plugins, the kubelet and kube-proxy (from the pinned Kubernetes module), on a bridge
//! of its own. Pods run from images imported from tarballs; nothing is pulled.
//!
//! `up` checks the machine ([`host::requirements`]), claims it ([`host::claim`]) and records
//! what it finds ([`host::Record`]), makes the bridge and the rules that keep pod traffic on
//! the machine ([`netfilter`]), writes the configurations ([`config`]) and starts the three
//! processes. `down` takes it all apart ([`cleanup`]) and writes back what the record says.

mod cleanup;
mod config;
mod host;
mod netfilter;

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

pub use host::Cgroups;

use crate::{
    network::{BRIDGE, BRIDGE_ADDRESS, NODE_NAME, POD_PREFIX, RUN_DIR, SERVICE_RANGE},
    pki::{Identity, Pki},
    processes::{self, Processes},
};

/// How long `down` lets each of the node's processes end before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The node's processes, in start order.
const PROCESSES: [&str; 3] = ["containerd", "kubelet", "kube-proxy"];

/// Where the node keeps its state.
#[derive(Debug, Clone)]
pub struct Folders {
    /// `node/` in the cluster's state: images, snapshots, the kubelet's pods, logs.
    pub state: PathBuf,
    /// [`RUN_DIR`]: containerd's sockets and task state, runc's, and the record.
    pub run: PathBuf,
    pub containerd_root: PathBuf,
    pub registries: PathBuf,
    pub cni_config: PathBuf,
    pub kubelet_root: PathBuf,
    /// The pods' logs (`<namespace>_<pod>_<uid>/<container>/<n>.log`), which the e2e reads.
    pub pod_logs: PathBuf,
}

impl Folders {
    pub fn new(state: &Path, run: &Path) -> Self {
        Self {
            state: state.to_owned(),
            run: run.to_owned(),
            containerd_root: state.join("containerd"),
            registries: state.join("registries"),
            cni_config: state.join("cni"),
            kubelet_root: state.join("kubelet"),
            pod_logs: state.join("pod-logs"),
        }
    }

    pub fn containerd_socket(&self) -> PathBuf {
        self.run.join("containerd.sock")
    }

    fn resolv_conf(&self) -> PathBuf {
        self.state.join("resolv.conf")
    }
}

/// The binaries a node runs.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The pinned Kubernetes build: kubelet, kube-proxy, and the pause program.
    pub kubernetes: PathBuf,
    /// The pinned containerd build: containerd, its shim and ctr.
    pub containerd: PathBuf,
    /// The Kubernetes version, which names the sandbox image.
    pub version: String,
}

/// The node of the cluster whose state folder holds `node/`.
#[derive(Debug, Clone)]
pub struct Node {
    folders: Folders,
    processes: Processes,
    /// The cluster's state folder, whose kubeconfigs the node's processes use.
    cluster_state: PathBuf,
    /// The checkout that owns the node.
    owner: PathBuf,
}

impl Node {
    pub fn new(owner: &Path, cluster_state: &Path) -> Self {
        Self {
            folders: Folders::new(&cluster_state.join("node"), Path::new(RUN_DIR)),
            processes: Processes::new(cluster_state.to_owned()),
            cluster_state: cluster_state.to_owned(),
            owner: owner.to_owned(),
        }
    }

    pub fn folders(&self) -> &Folders {
        &self.folders
    }

    /// Checks the machine, claims it, records it and makes the node's network: the bridge,
    /// whose address the API server then listens on, the Service range's route and the rules
    /// that keep pod traffic on the machine.
    pub fn prepare(&self, control_plane: &Path) -> Result<Cgroups> {
        let cgroups = host::requirements(control_plane)?;
        match host::claim(&self.owner)? {
            host::Claim::Free => {}
            host::Claim::Leftover => {
                self.stop()?;
                host::claim(&self.owner)?;
            }
            host::Claim::Abandoned(owner) => {
                eprintln!(
                    "taking apart the node that {} left on this machine: nothing of it runs",
                    owner.display()
                );
                Self::new(&owner, &crate::state_folder(&owner)).stop()?;
                host::claim(&self.owner)?;
            }
        }
        host::Record::take(&self.owner)
            .and_then(|record| record.save())
            .context("recording the machine's state")?;
        ip(&["link", "add", BRIDGE, "type", "bridge"])
            .context("making the node's bridge: the kernel needs bridge support (CONFIG_BRIDGE)")?;
        let address = format!("{BRIDGE_ADDRESS}/{POD_PREFIX}");
        ip(&["addr", "add", &address, "dev", BRIDGE])?;
        ip(&["link", "set", BRIDGE, "up"])?;
        // A ClusterIP no rule translates must not follow the default route off the machine.
        let source = BRIDGE_ADDRESS.to_string();
        ip(&["route", "add", SERVICE_RANGE, "dev", BRIDGE, "src", &source])?;
        netfilter::keep_pods_on_the_machine()?;
        // Replies between two pods on the bridge pass conntrack only so: a Service's.
        host::write_sysctl("net.bridge.bridge-nf-call-iptables", "1")?;
        Ok(cgroups)
    }

    /// Starts containerd, imports the sandbox image, then starts the kubelet and kube-proxy.
    pub fn start(&self, binaries: &Binaries, pki: &Pki, cgroups: Cgroups) -> Result<()> {
        for folder in [
            &self.folders.state,
            &self.folders.run,
            &self.folders.registries.join("_default"),
            &self.folders.cni_config,
            &self.folders.pod_logs,
        ] {
            fs::create_dir_all(folder).with_context(|| format!("making {}", folder.display()))?;
        }
        make_cgroups(cgroups)?;
        let sandbox = format!("localhost/operator-gen/pause:{}", binaries.version);
        let runc = Path::new("/usr/sbin/runc");
        let configs = [
            (
                self.folders.state.join("containerd.toml"),
                config::containerd(&self.folders, &sandbox, runc),
            ),
            (
                self.folders.registries.join("_default/hosts.toml"),
                config::closed_registry(),
            ),
            (
                self.folders.cni_config.join("10-operator-gen.conflist"),
                config::cni(&self.folders),
            ),
            (
                self.folders.state.join("kubelet.json"),
                config::kubelet(&self.folders, pki, cgroups == Cgroups::V1),
            ),
            (
                self.folders.state.join("kube-proxy.json"),
                config::kube_proxy(&self.kubeconfig(Identity::Proxy)),
            ),
            (self.folders.resolv_conf(), String::new()),
        ];
        for (path, text) in configs {
            fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        self.start_containerd(&binaries.containerd)?;
        self.import_pause(binaries, &sandbox)
            .context("building and importing the sandbox image")?;
        let mut kubelet = Command::new(binaries.kubernetes.join("kubelet"));
        kubelet
            .arg(format!(
                "--config={}",
                self.folders.state.join("kubelet.json").display()
            ))
            .arg(format!(
                "--kubeconfig={}",
                self.kubeconfig(Identity::Kubelet).display()
            ))
            .arg(format!("--hostname-override={NODE_NAME}"))
            .arg(format!("--node-ip={BRIDGE_ADDRESS}"))
            .arg(format!(
                "--root-dir={}",
                self.folders.kubelet_root.display()
            ));
        self.processes.spawn("kubelet", kubelet)?;
        let mut proxy = Command::new(binaries.kubernetes.join("kube-proxy"));
        proxy.arg(format!(
            "--config={}",
            self.folders.state.join("kube-proxy.json").display()
        ));
        self.processes.spawn("kube-proxy", proxy)
    }

    fn kubeconfig(&self, identity: Identity) -> PathBuf {
        self.cluster_state
            .join(format!("{}.kubeconfig", identity.file_name()))
    }

    fn start_containerd(&self, bin: &Path) -> Result<()> {
        let mut containerd = Command::new(bin.join("containerd"));
        // The shim is found on PATH, beside the daemon that starts it.
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![bin.to_owned()];
        dirs.extend(std::env::split_paths(&path));
        containerd
            .arg("--config")
            .arg(self.folders.state.join("containerd.toml"))
            .env("PATH", std::env::join_paths(dirs)?);
        self.processes.spawn("containerd", containerd)?;
        let socket = self.folders.containerd_socket();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !socket.exists() {
            if Instant::now() > deadline || !self.processes.running("containerd") {
                bail!(
                    "containerd did not open {} within 30 s; its log ends:\n{}",
                    socket.display(),
                    processes::tail(&self.processes.log("containerd"), 20)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Builds the sandbox image from the module's own pause program and imports it.
    fn import_pause(&self, binaries: &Binaries, reference: &str) -> Result<()> {
        let mut recipe = operator_gen_image::Recipe::new(
            operator_gen_image::Reference::parse(reference)?,
            binaries.kubernetes.join("pause"),
        )?;
        recipe.entrypoint = "/pause".to_owned();
        // The user of Kubernetes' own pause image.
        recipe.user = "65535:65535".to_owned();
        recipe.ports.clear();
        let image = operator_gen_image::build(&recipe)?;
        let tar = self.folders.state.join("pause.tar");
        image.write(&tar)?;
        self.import(&binaries.containerd, &tar)
    }

    /// Imports the image tarball `tar` into the node's containerd, where the kubelet finds it.
    pub fn import(&self, containerd_bin: &Path, tar: &Path) -> Result<()> {
        let mut ctr = Command::new(containerd_bin.join("ctr"));
        ctr.arg("--address")
            .arg(self.folders.containerd_socket())
            .args(["--namespace", "k8s.io", "images", "import"])
            .arg(tar);
        let what = format!("containerd's import of the image {}", tar.display());
        processes::checked(&mut ctr, &what, None).map(drop)
    }

    /// Waits until the node reports Ready, and says why not when it does not.
    pub fn wait_ready(&self, kubectl: &Path, admin: &Path, patience: Duration) -> Result<()> {
        let deadline = Instant::now() + patience;
        loop {
            let output = Command::new(kubectl)
                .env("KUBECONFIG", admin)
                .args([
                    "get",
                    "node",
                    NODE_NAME,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
                ])
                .output()?;
            if String::from_utf8_lossy(&output.stdout).trim() == "True" {
                return Ok(());
            }
            for name in PROCESSES {
                if !self.processes.running(name) {
                    bail!(
                        "{name} exited before the node was Ready; its log ends:\n{}",
                        processes::tail(&self.processes.log(name), 20)
                    );
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "the node was not Ready within {patience:?}; the kubelet's log ends:\n{}",
                    processes::tail(&self.processes.log("kubelet"), 20)
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Kills every process of the pod with `uid` at once; how many.
    pub fn crash_pod(&self, uid: &str) -> usize {
        cleanup::crash_pod(uid)
    }

    /// Whether a node of this checkout is on the machine, running or left by a killed run.
    pub fn is_here(&self) -> bool {
        host::Record::load().is_some_and(|record| record.owner == self.owner)
    }

    /// Takes the node apart, if it is this checkout's: its processes, the pods' processes and
    /// mounts, the bridge and its veths, the iptables rules, the cgroups, the machine-wide
    /// folders it created, and the kernel settings it changed; then looks for anything of it
    /// left.
    ///
    /// # Errors
    ///
    /// What is still there after every step ran, each named.
    pub fn stop(&self) -> Result<()> {
        let Some(record) = host::Record::load().filter(|r| r.owner == self.owner) else {
            return Ok(());
        };
        for name in ["kubelet", "kube-proxy"] {
            self.processes.stop(name, STOP_GRACE);
        }
        let sandboxes = cleanup::sandbox_ids(&self.folders.run);
        cleanup::kill_pods(&self.folders.run);
        self.processes.stop("containerd", STOP_GRACE);
        cleanup::unmount_below(&[&self.folders.state, &self.folders.run]);
        cleanup::remove_bridge();
        if let Err(error) = netfilter::remove(&record.tables) {
            eprintln!("removing the node's iptables rules: {error:#}");
        }
        cleanup::remove_cgroups();
        cleanup::remove_machine_paths(&record, &sandboxes);
        record.restore_sysctls();
        let _ = fs::remove_dir_all(&self.folders.run);
        let _ = fs::remove_dir_all(&self.folders.state);
        let left = cleanup::left_behind(&[&self.folders.state, &self.folders.run])?;
        if !left.is_empty() {
            bail!("taking the node apart left {}", left.join(", "));
        }
        Ok(())
    }
}

/// The node's cgroup in every hierarchy, which the kubelet's `cgroupRoot` names; in v1's
/// cpuset, with its parent's CPUs and memory nodes, without which no task may join it.
fn make_cgroups(cgroups: Cgroups) -> Result<()> {
    for root in host::cgroup_roots() {
        fs::create_dir_all(&root)
            .with_context(|| format!("making the cgroup {}", root.display()))?;
        if cgroups == Cgroups::V1 && root.parent().is_some_and(|p| p.ends_with("cpuset")) {
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let parent = root.parent().map(|p| p.join(file)).unwrap_or_default();
                fs::write(root.join(file), fs::read(&parent)?)
                    .with_context(|| format!("copying {}", parent.display()))?;
            }
        }
        if cgroups == Cgroups::V2 {
            // The controllers the kubelet's pods are limited by, for the cgroups below.
            let _ = fs::write(root.join("cgroup.subtree_control"), "+cpu +memory +pids");
        }
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<()> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .context("running ip")?;
    if !output.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}
