//! This machine, as the node finds it and leaves it: what it must have (root, cgroups,
//! overlayfs, a bridge, netfilter on bridges, Debian's runc, CNI plugins and iptables), the
//! one-node-per-machine claim, and the record of what `up` found, so that `down` restores the
//! kernel settings it changed and removes only the machine-wide folders it created.
//!
//! The record lives in [`RUN_DIR`], machine-wide: a second checkout's `up` finds it and is
//! refused, naming the checkout that runs the node; after a killed run (the same checkout's,
//! or another's whose processes have all ended) `up` cleans up first, from the same record.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

use super::netfilter;
use crate::network::{BRIDGE, CGROUP_ROOT, NODE_PORTS, RUN_DIR};

/// The kernel settings the node's parts change: the bridge plugin turns forwarding on,
/// kube-proxy needs bridged traffic to pass iptables, and the kubelet sets its own idea of
/// the overcommit and panic settings at start. `down` writes each back.
const SYSCTLS: [&str; 12] = [
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "net.netfilter.nf_conntrack_max",
    "net.netfilter.nf_conntrack_tcp_timeout_established",
    "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
];

/// Machine-wide folders the node's parts create whatever they are told: the kubelet's
/// device-plugin socket, containerd's CNI result cache and shim sockets, the kubelet's log
/// links, util-linux's mount table of the kubelet's mounts. Those that were not there before
/// `up` are removed by `down`.
const MACHINE_PATHS: [&str; 8] = [
    "/var/lib/kubelet",
    "/var/lib/kubelet/device-plugins",
    "/var/lib/cni",
    "/var/lib/cni/results",
    "/var/log/containers",
    "/run/containerd",
    "/run/containerd/s",
    "/run/mount",
];

/// The cgroup hierarchy this machine mounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cgroups {
    /// One folder per controller under `/sys/fs/cgroup`, as on this machine kind.
    V1,
    /// The unified hierarchy.
    V2,
}

/// The folders of `/sys/fs/cgroup` the node's pods live under, one per hierarchy.
pub fn cgroup_roots() -> Vec<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    if base.join("cgroup.controllers").exists() {
        return vec![base.join(CGROUP_ROOT)];
    }
    let Ok(entries) = fs::read_dir(base) else {
        return Vec::new();
    };
    let mut roots: Vec<PathBuf> = entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.path())
        .filter(|hierarchy| hierarchy.join("cgroup.procs").exists())
        .map(|hierarchy| hierarchy.join(CGROUP_ROOT))
        .collect();
    roots.sort();
    roots
}

/// What `up` found on the machine, for `down`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Record {
    /// The checkout whose `cargo xtask cluster up` runs the node.
    pub owner: PathBuf,
    /// Each of [`SYSCTLS`] as it was.
    pub sysctls: BTreeMap<String, String>,
    /// Which of [`MACHINE_PATHS`] did not exist.
    pub created: Vec<PathBuf>,
    /// The iptables tables that existed, by family (`iptables`, `ip6tables`).
    pub tables: BTreeMap<String, Vec<String>>,
    /// The shim sockets in `/run/containerd/s` that were there, which are not the node's.
    pub shim_sockets: Vec<String>,
}

impl Record {
    fn path() -> PathBuf {
        Path::new(RUN_DIR).join("record.json")
    }

    /// What the machine is like now, before the node touches it.
    pub fn take(owner: &Path) -> Result<Self> {
        let sysctls = SYSCTLS
            .iter()
            .filter_map(|name| Some(((*name).to_owned(), read_sysctl(name)?)))
            .collect();
        let created = MACHINE_PATHS
            .iter()
            .map(PathBuf::from)
            .filter(|path| !path.exists())
            .collect();
        let shim_sockets = fs::read_dir("/run/containerd/s")
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            owner: owner.to_owned(),
            sysctls,
            created,
            tables: netfilter::tables()?,
            shim_sockets,
        })
    }

    pub fn save(&self) -> Result<()> {
        fs::create_dir_all(RUN_DIR)?;
        fs::write(Self::path(), serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("writing {}", Self::path().display()))
    }

    /// The record a node on this machine left, if one did.
    pub fn load() -> Option<Self> {
        let bytes = fs::read(Self::path()).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes back every kernel setting the node may have changed.
    pub fn restore_sysctls(&self) {
        for (name, value) in &self.sysctls {
            if read_sysctl(name).as_ref() != Some(value) {
                let _ = fs::write(sysctl_path(name), value);
            }
        }
    }
}

fn sysctl_path(name: &str) -> PathBuf {
    Path::new("/proc/sys").join(name.replace('.', "/"))
}

fn read_sysctl(name: &str) -> Option<String> {
    fs::read_to_string(sysctl_path(name))
        .ok()
        .map(|value| value.trim().to_owned())
}

/// Sets a kernel setting, saying which when it cannot.
pub fn write_sysctl(name: &str, value: &str) -> Result<()> {
    fs::write(sysctl_path(name), value).with_context(|| format!("setting {name} to {value}"))
}

/// What the machine lacks for a node, checked before anything is touched, each with what to
/// do; the cgroup hierarchy it has when it lacks nothing.
pub fn requirements(control_plane: &Path) -> Result<Cgroups> {
    let cgroups = Facts::of_this_machine().cgroups()?;
    install_packages(control_plane)?;
    Ok(cgroups)
}

/// What a node needs of the kernel and the user, as this machine has it.
#[derive(Debug, Clone)]
struct Facts {
    root: bool,
    cgroup_v2: bool,
    cgroup_v1: bool,
    /// `/proc/filesystems`.
    filesystems: String,
    bridge_netfilter: bool,
}

impl Facts {
    fn of_this_machine() -> Self {
        Self {
            root: rustix::process::geteuid().is_root(),
            cgroup_v2: Path::new("/sys/fs/cgroup/cgroup.controllers").exists(),
            cgroup_v1: Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists(),
            filesystems: fs::read_to_string("/proc/filesystems").unwrap_or_default(),
            bridge_netfilter: Path::new("/proc/sys/net/bridge/bridge-nf-call-iptables").exists(),
        }
    }

    /// The cgroup hierarchy, or the first thing missing, with what to do.
    fn cgroups(&self) -> Result<Cgroups> {
        let instead =
            "or run `cargo xtask cluster up --no-node` for a control plane without a node";
        if !self.root {
            bail!(
                "a node needs root: the kubelet and containerd mount file systems, and the node \
                 makes a bridge, iptables rules and cgroups. Run as root, {instead}"
            );
        }
        let cgroups = if self.cgroup_v2 {
            Cgroups::V2
        } else if self.cgroup_v1 {
            Cgroups::V1
        } else {
            bail!(
                "no cgroup file system at /sys/fs/cgroup (neither v2's cgroup.controllers nor \
                 v1's memory controller): mount one, {instead}"
            );
        };
        if !self
            .filesystems
            .lines()
            .any(|line| line.ends_with("\toverlay"))
        {
            bail!(
                "the kernel has no overlay file system, which containerd's snapshotter mounts: \
                 `modprobe overlay`, {instead}"
            );
        }
        if !self.bridge_netfilter {
            bail!(
                "bridged traffic does not pass netfilter here (no \
                 /proc/sys/net/bridge/bridge-nf-call-iptables), which Services between pods \
                 need: `modprobe br_netfilter`, {instead}"
            );
        }
        Ok(cgroups)
    }
}

/// What the node takes from Debian's packages, installed by `node-packages.sh` when missing.
fn install_packages(control_plane: &Path) -> Result<()> {
    let needed = [
        "/usr/sbin/runc",
        "/usr/lib/cni/bridge",
        "/usr/lib/cni/host-local",
        "/usr/lib/cni/loopback",
        "/usr/sbin/iptables",
        "/usr/sbin/conntrack",
        "/usr/sbin/nft",
        "/usr/bin/skopeo",
    ];
    if needed.iter().all(|path| Path::new(path).exists()) {
        return Ok(());
    }
    let script = control_plane.join("node-packages.sh");
    let status = Command::new("bash")
        .arg(&script)
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    let missing: Vec<&str> = needed
        .iter()
        .copied()
        .filter(|path| !Path::new(path).exists())
        .collect();
    if !status.success() || !missing.is_empty() {
        bail!(
            "the node needs {} from Debian's packages, which {} could not install ({status}); \
             install them and run `cargo xtask cluster up` again",
            missing.join(", "),
            script.display()
        );
    }
    Ok(())
}

/// What is on the machine that another node left, or runs: the reason a node cannot start.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// Nothing: the node may start.
    Free,
    /// A node of this checkout (`owner`), whose run was killed: clean it up, then start.
    Leftover,
    /// A node of another checkout, named, of which nothing runs: no containerd answers on
    /// its socket and no port of the cluster is taken. A run killed with its machine (a
    /// session cut short, a CI job cancelled) leaves this; clean it up, then start.
    Abandoned(PathBuf),
}

/// Whether a node may start here for the checkout `owner`.
///
/// # Errors
///
/// A node of another checkout, another kubelet's or kube-proxy's cgroups or iptables chains,
/// or a port the node needs in use, each named.
pub fn claim(owner: &Path) -> Result<Claim> {
    let bridge = Path::new("/sys/class/net").join(BRIDGE).exists();
    let run = Path::new(RUN_DIR).exists();
    if bridge || run {
        return match Record::load() {
            Some(record) if record.owner == owner => Ok(Claim::Leftover),
            Some(record) if !node_runs() => Ok(Claim::Abandoned(record.owner)),
            Some(record) => bail!(
                "a node already runs on this machine, started by the checkout {}: one node per \
                 machine, since kube-proxy's iptables chains and the kubelet's device-plugin \
                 socket are machine-wide. Run `cargo xtask cluster down` there first",
                record.owner.display()
            ),
            None => bail!(
                "this machine has the node's {} but no record of who started it: remove it \
                 (`ip link del {BRIDGE}`, `rm -r {RUN_DIR}`) if no node runs",
                if bridge {
                    format!("bridge {BRIDGE}")
                } else {
                    format!("folder {RUN_DIR}")
                }
            ),
        };
    }
    for hierarchy in cgroup_roots() {
        let kubepods = hierarchy.with_file_name("kubepods");
        if kubepods.exists() {
            bail!(
                "{} exists: another kubelet runs on this machine, or left its pods' cgroups; \
                 one node per machine",
                kubepods.display()
            );
        }
    }
    let chains = netfilter::kubernetes_chains()?;
    if let Some(chain) = chains.first() {
        bail!(
            "iptables already has Kubernetes' chain {chain}: another kubelet or kube-proxy runs \
             on this machine, or left its rules; one node per machine"
        );
    }
    if let Some((port, what)) = taken_port() {
        bail!("port {port}, where {what} listens, is in use on this machine");
    }
    Ok(Claim::Free)
}

/// Whether anything of a node runs here: containerd answers on the node's socket, or a
/// port the cluster listens on is taken. Pid files cannot tell, since they live in the
/// checkout that started the node and a pid may since name another process.
fn node_runs() -> bool {
    let socket = Path::new(RUN_DIR).join("containerd.sock");
    std::os::unix::net::UnixStream::connect(socket).is_ok() || taken_port().is_some()
}

/// The first port the cluster needs that something on this machine holds, with what listens
/// there.
fn taken_port() -> Option<(u16, &'static str)> {
    NODE_PORTS
        .into_iter()
        .find(|(port, _)| std::net::TcpListener::bind(("0.0.0.0", *port)).is_err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_recorded_is_one_this_kernel_has_or_is_left_out() {
        let record = Record::take(Path::new("/checkout")).expect("a record");
        for name in record.sysctls.keys() {
            assert!(SYSCTLS.contains(&name.as_str()), "{name}");
            assert!(sysctl_path(name).exists(), "{name}");
        }
        assert!(record.sysctls.contains_key("net.ipv4.ip_forward"));
        for path in &record.created {
            assert!(
                !path.exists(),
                "{} exists, so it was not created",
                path.display()
            );
        }
    }

    #[test]
    fn each_missing_requirement_is_named_with_what_to_do() {
        let able = Facts {
            root: true,
            cgroup_v2: false,
            cgroup_v1: true,
            filesystems: "nodev\tproc\n\text4\nnodev\toverlay\n".to_owned(),
            bridge_netfilter: true,
        };
        assert_eq!(able.cgroups().expect("a node can run"), Cgroups::V1);
        let unified = Facts {
            cgroup_v2: true,
            ..able.clone()
        };
        assert_eq!(unified.cgroups().expect("a node can run"), Cgroups::V2);
        let cases = [
            (
                Facts {
                    root: false,
                    ..able.clone()
                },
                "needs root",
            ),
            (
                Facts {
                    cgroup_v1: false,
                    ..able.clone()
                },
                "no cgroup file system",
            ),
            (
                Facts {
                    filesystems: "nodev\tproc\n".to_owned(),
                    ..able.clone()
                },
                "modprobe overlay",
            ),
            (
                Facts {
                    bridge_netfilter: false,
                    ..able.clone()
                },
                "modprobe br_netfilter",
            ),
        ];
        for (facts, said) in cases {
            let error = facts.cgroups().unwrap_err().to_string();
            assert!(error.contains(said), "{error}");
            assert!(error.contains("--no-node"), "{error}");
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let record = Record {
            owner: PathBuf::from("/work/a"),
            sysctls: [("kernel.panic".to_owned(), "1".to_owned())].into(),
            created: vec![PathBuf::from("/var/lib/cni")],
            tables: [("iptables".to_owned(), vec!["filter".to_owned()])].into(),
            shim_sockets: vec!["abc".to_owned()],
        };
        let text = serde_json::to_string(&record).expect("JSON");
        let back: Record = serde_json::from_str(&text).expect("read back");
        assert_eq!(back.owner, record.owner);
        assert_eq!(back.sysctls, record.sysctls);
        assert_eq!(back.tables, record.tables);
    }

    #[test]
    fn the_cgroup_roots_are_one_per_hierarchy_named_for_the_node() {
        for root in cgroup_roots() {
            assert_eq!(root.file_name().and_then(|n| n.to_str()), Some(CGROUP_ROOT));
            assert!(root.starts_with("/sys/fs/cgroup"));
        }
    }
}
