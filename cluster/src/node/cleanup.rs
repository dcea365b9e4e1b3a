//! Taking the node apart, whatever state a run left it in: a clean `down`, or one after a
//! killed run whose pods, shims and mounts are still there. Each step finds what is the
//! node's by where it lives (its cgroups, its folders, its bridge), never by a name another
//! program could have, and a step that finds nothing does nothing.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use super::host;
use crate::network::BRIDGE;

/// Kills every process in the node's cgroups (the pods' containers and sandboxes) and the
/// shims that started them (`run` is the node's socket folder, which each shim names), then
/// waits, for up to five seconds, until the cgroups are empty. The shims go second: a killed
/// container stays a zombie, listed in its cgroup, until its shim is gone and it is reaped.
pub fn kill_pods(run: &Path) {
    let pods = || -> Vec<String> {
        host::cgroup_roots()
            .iter()
            .flat_map(|root| procs_below(root))
            .collect()
    };
    for pid in pods() {
        kill(&pid);
    }
    for pid in shims(run) {
        kill(&pid);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = pods();
        if left.is_empty() || Instant::now() > deadline {
            return;
        }
        for pid in left {
            kill(&pid);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGKILL to `pid`; one that has gone already is no error.
fn kill(pid: &str) {
    let Some(pid) = pid.parse().ok().and_then(rustix::process::Pid::from_raw) else {
        return;
    };
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
}

/// Kills every process of the pod with `uid` at once, as a crash would end them: the
/// processes in its cgroup (`pod<uid>`, under the node's) in every hierarchy. How many it killed.
pub fn crash_pod(uid: &str) -> usize {
    let name = format!("pod{uid}");
    let mut pids: Vec<String> = host::cgroup_roots()
        .iter()
        .flat_map(|root| folders_below(root))
        .filter(|dir| dir.file_name().is_some_and(|n| n == name.as_str()))
        .flat_map(|pod| procs_below(&pod))
        .collect();
    pids.sort();
    pids.dedup();
    for pid in &pids {
        kill(pid);
    }
    pids.len()
}

/// The pids in `cgroup` and every cgroup below it.
fn procs_below(cgroup: &Path) -> Vec<String> {
    folders_below(cgroup)
        .iter()
        .filter_map(|dir| fs::read_to_string(dir.join("cgroup.procs")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `root` and every folder below it, when it is one; none when it is not.
fn folders_below(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        stack.extend(
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
        found.push(dir);
    }
    found
}

/// The pids of containerd's runc shims that serve the node's containerd: they run outside the
/// pods' cgroups, and each names the node's socket folder (`run`) on its command line.
fn shims(run: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let needle = run.as_os_str().as_encoded_bytes();
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            let is_shim = fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| {
                exe.file_name()
                    .is_some_and(|name| name == "containerd-shim-runc-v2")
            });
            is_shim
                && fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|cmdline| cmdline.windows(needle.len()).any(|w| w == needle))
        })
        .collect()
}

/// Every mount point at or below one of `folders`, deepest first, as `/proc/self/mountinfo`
/// lists them.
pub fn mounts_below(folders: &[&Path]) -> Vec<PathBuf> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut mounts: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|point| PathBuf::from(unescape(point)))
        .filter(|point| folders.iter().any(|folder| point.starts_with(folder)))
        .collect();
    mounts.sort_by_key(|point| std::cmp::Reverse(point.components().count()));
    mounts.dedup();
    mounts
}

/// A mountinfo field with its octal escapes (`\040` for a space) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let octal = bytes.get(index + 1..index + 4).filter(|digits| {
            bytes[index] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d))
        });
        match octal {
            Some(digits) => {
                let value = digits.iter().fold(0u32, |n, d| n * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                index += 4;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Unmounts every mount at or below `folders` (the pods' volumes, root file systems, network
/// namespaces and shared memory), lazily when one is still busy.
pub fn unmount_below(folders: &[&Path]) {
    for _ in 0..3 {
        let mounts = mounts_below(folders);
        if mounts.is_empty() {
            return;
        }
        for point in mounts {
            if rustix::mount::unmount(&point, rustix::mount::UnmountFlags::empty()).is_err() {
                let _ = rustix::mount::unmount(&point, rustix::mount::UnmountFlags::DETACH);
            }
        }
    }
}

/// Deletes the pods' veths left on the bridge, then the bridge, which takes its address and
/// the Service range's route with it.
pub fn remove_bridge() {
    if !Path::new("/sys/class/net").join(BRIDGE).exists() {
        return;
    }
    let ports = Path::new("/sys/class/net").join(BRIDGE).join("brif");
    if let Ok(entries) = fs::read_dir(ports) {
        for entry in entries.flatten() {
            let _ = Command::new("ip")
                .args(["link", "del"])
                .arg(entry.file_name())
                .stderr(Stdio::null())
                .status();
        }
    }
    let _ = Command::new("ip").args(["link", "del", BRIDGE]).status();
}

/// Removes the node's cgroups, deepest first, in every hierarchy.
pub fn remove_cgroups() {
    for root in host::cgroup_roots() {
        let mut dirs = folders_below(&root);
        dirs.sort_by_key(|dir| std::cmp::Reverse(dir.components().count()));
        for dir in dirs {
            let _ = fs::remove_dir(dir);
        }
    }
}

/// The ids of the pods' sandboxes containerd knows, from its state: the names of the CNI
/// cache files the node left in a `/var/lib/cni` it did not create.
pub fn sandbox_ids(run: &Path) -> Vec<String> {
    let sandboxes = run.join("containerd/io.containerd.grpc.v1.cri/sandboxes");
    fs::read_dir(sandboxes)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes what the node left in machine-wide folders: each folder it created whole, and
/// inside folders that were there before, only its own CNI cache files and shim sockets.
pub fn remove_machine_paths(record: &host::Record, sandboxes: &[String]) {
    let mut created = record.created.clone();
    // A folder before its parent: a created parent takes its children with it.
    created.sort_by_key(|path| path.components().count());
    for path in &created {
        if path.exists() {
            let _ = fs::remove_dir_all(path);
        }
    }
    let results = Path::new("/var/lib/cni/results");
    if let Ok(entries) = fs::read_dir(results) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if sandboxes.iter().any(|id| name.contains(id.as_str())) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    let sockets = Path::new("/run/containerd/s");
    if let Ok(entries) = fs::read_dir(sockets) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !record.shim_sockets.contains(&name) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    let socket = Path::new("/var/lib/kubelet/device-plugins/kubelet.sock");
    if socket.exists() {
        let _ = fs::remove_file(socket);
    }
}

/// What of the node is still on the machine: its bridge, its folders, mounts below them, its
/// cgroups, shims of its containerd, and iptables chains of Kubernetes' or its own.
pub fn left_behind(folders: &[&Path]) -> anyhow::Result<Vec<String>> {
    let mut left = Vec::new();
    if Path::new("/sys/class/net").join(BRIDGE).exists() {
        left.push(format!("the bridge {BRIDGE}"));
    }
    for folder in folders.iter().filter(|folder| folder.exists()) {
        left.push(format!("the folder {}", folder.display()));
    }
    for point in mounts_below(folders) {
        left.push(format!("the mount {}", point.display()));
    }
    for root in host::cgroup_roots().iter().filter(|root| root.exists()) {
        left.push(format!("the cgroup {}", root.display()));
    }
    if let Some(run) = folders.last() {
        for pid in shims(run) {
            left.push(format!("containerd's shim, pid {pid}"));
        }
    }
    for chain in super::netfilter::kubernetes_chains()? {
        left.push(format!("the iptables chain {chain}"));
    }
    Ok(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_unescaped_as_the_kernel_escapes_them() {
        assert_eq!(unescape(r"/a\040b\011c\134d"), "/a b\tc\\d");
        assert_eq!(unescape(r"/plain\0x"), r"/plain\0x");
    }

    #[test]
    fn mounts_below_a_folder_come_deepest_first_and_nothing_else_comes() {
        // /proc is mounted on every Linux; /proc/sys or another may be mounted below it.
        let mounts = mounts_below(&[Path::new("/proc")]);
        assert!(mounts.iter().all(|m| m.starts_with("/proc")), "{mounts:?}");
        let depths: Vec<usize> = mounts.iter().map(|m| m.components().count()).collect();
        assert!(depths.windows(2).all(|w| w[0] >= w[1]), "{mounts:?}");
        assert!(mounts_below(&[Path::new("/nonexistent-node-folder")]).is_empty());
    }

    #[test]
    fn the_processes_of_a_cgroup_tree_are_all_found() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        fs::create_dir_all(dir.path().join("a/b")).expect("folders");
        fs::write(dir.path().join("cgroup.procs"), "1\n2\n").expect("written");
        fs::write(dir.path().join("a/b/cgroup.procs"), "3\n").expect("written");
        let mut pids = procs_below(dir.path());
        pids.sort();
        assert_eq!(pids, ["1", "2", "3"]);
    }
}
