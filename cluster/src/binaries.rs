//! The cluster's binaries: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
//! kubectl, the node's kubelet, kube-proxy, pause program and containerd, and helm beside them, built from Go modules pinned in `cluster/control-plane/modules/` by
//! `cluster/control-plane/build.sh`, once per machine, into its cache.
//!
//! A cached build is named after its component, its version and a hash of what went into it
//! (the pinned `go.mod` and `go.sum`, and `build.sh` with its flags), so a reviewed change to
//! any of them builds anew and an unchanged one never does. `build.sh` renames a build into
//! place only when it is whole.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context as _, Result, bail};
use sha2::Digest as _;

/// The Kubernetes `cargo xtask cluster up` runs unless told otherwise: the newest release the
/// Go module proxy serves.
pub const NEWEST_KUBERNETES: &str = "1.37.2";
/// The etcd every Kubernetes version here runs on: 3.6 is supported from 1.33 on.
pub const ETCD: &str = "3.6.16";
/// The container runtime of the node: containerd 2, which gives kubelet the cgroup driver
/// itself (kubelet's fallback for runtimes without that CRI call goes in 1.38).
pub const CONTAINERD: &str = "2.4.2";
/// The helm generated charts are linted, rendered and installed with: Helm 3, which most users
/// run (README's "Installing with Helm" says why not 4).
pub const HELM: &str = "3.22.0";

/// The machine's cache: `OPERATOR_GEN_CACHE`, or `/var/cache/operator-gen`. It outlives
/// checkouts, so CI on the same machine reuses what an earlier run built.
pub fn machine_cache() -> PathBuf {
    std::env::var_os("OPERATOR_GEN_CACHE")
        .map_or_else(|| PathBuf::from("/var/cache/operator-gen"), PathBuf::from)
}

/// `go` in `dir` with the environment `build.sh` builds the control plane with: Go's module
/// and build caches in the machine's cache (so one download and one compile of client-go serve
/// both), the pinned `go.sum` read-only, the machine's toolchain, no cgo. For the other Go
/// programs the project builds, such as the bench's controller-runtime peer.
pub fn go_command(dir: &Path) -> Command {
    let cache = machine_cache().join("go");
    let mut go = Command::new("go");
    go.current_dir(dir)
        .env("GOMODCACHE", cache.join("mod"))
        .env("GOCACHE", cache.join("build"))
        .env("GOFLAGS", "-mod=readonly")
        .env("CGO_ENABLED", "0");
    if std::env::var_os("GOTOOLCHAIN").is_none() {
        go.env("GOTOOLCHAIN", "local");
    }
    go
}

/// One pinned component of the control plane at one version, and where its build is cached.
#[derive(Debug)]
pub struct Component {
    name: &'static str,
    version: String,
    binaries: &'static [&'static str],
    /// `cluster/control-plane/` of the workspace: `build.sh` and `modules/`.
    control_plane: PathBuf,
    /// Its folder in the machine's cache, named by [`Component::key`] once, here: the
    /// readiness checks ask for it every half second. An error says it is not pinned.
    dir: Result<PathBuf, String>,
}

impl Component {
    pub fn kubernetes(workspace: &Path, version: &str) -> Self {
        Self::new(
            workspace,
            "kubernetes",
            version,
            &[
                "kube-apiserver",
                "kube-controller-manager",
                "kubectl",
                "kubelet",
                "kube-proxy",
                "kube-scheduler",
                "pause",
            ],
        )
    }

    pub fn containerd(workspace: &Path) -> Self {
        Self::new(
            workspace,
            "containerd",
            CONTAINERD,
            &["containerd", "containerd-shim-runc-v2", "ctr"],
        )
    }

    pub fn etcd(workspace: &Path) -> Self {
        Self::new(workspace, "etcd", ETCD, &["etcd"])
    }

    pub fn helm(workspace: &Path) -> Self {
        Self::new(workspace, "helm", HELM, &["helm"])
    }

    fn new(
        workspace: &Path,
        name: &'static str,
        version: &str,
        binaries: &'static [&'static str],
    ) -> Self {
        let control_plane = workspace.join("cluster").join("control-plane");
        let module = control_plane
            .join("modules")
            .join(format!("{name}-{version}"));
        let inputs = [
            module.join("go.mod"),
            module.join("go.sum"),
            control_plane.join("build.sh"),
        ];
        let dir = match hash_files(&inputs) {
            Ok(key) => Ok(machine_cache().join(format!("{name}-{version}-{key}"))),
            Err(error) => Err(format!(
                "{name} {version} is not pinned here (see cluster/control-plane/pin.sh): {error:#}"
            )),
        };
        Self {
            name,
            version: version.to_owned(),
            binaries,
            control_plane,
            dir,
        }
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    /// Where its binaries are cached, whether or not they are there yet. Named after the
    /// hash of everything its build reads from this repository.
    pub fn dir(&self) -> Result<&Path> {
        self.dir
            .as_deref()
            .map_err(|error| anyhow::anyhow!("{error}"))
    }

    /// Its cached binaries, built first when any is missing.
    pub fn ensure_built(&self) -> Result<PathBuf> {
        let dir = self.dir()?;
        if self.binaries.iter().all(|b| dir.join(b).is_file()) {
            return Ok(dir.to_owned());
        }
        require_go("go")?;
        let script = self.control_plane.join("build.sh");
        eprintln!(
            "building {} {} from Go modules into {} (once per machine)",
            self.name,
            self.version,
            dir.display()
        );
        let started = Instant::now();
        let status = Command::new("bash")
            .arg(&script)
            .arg(self.name)
            .arg(&self.version)
            .arg(dir)
            .arg(machine_cache().join("go"))
            .status()
            .with_context(|| format!("running {}", script.display()))?;
        if !status.success() {
            bail!(
                "building {} {} failed ({status}); {} said why above",
                self.name,
                self.version,
                script.display()
            );
        }
        eprintln!(
            "built {} {} in {:.1?}",
            self.name,
            self.version,
            started.elapsed()
        );
        self.remove_stale_builds(dir);
        Ok(dir.to_owned())
    }

    /// Removes the cached builds of this version from module files that changed since, each
    /// a few hundred megabytes that nothing will run again. A build under way elsewhere
    /// (`<dir>.partial.*`) is not one of them.
    fn remove_stale_builds(&self, current: &Path) {
        let prefix = format!("{}-{}-", self.name, self.version);
        let Ok(entries) = fs::read_dir(machine_cache()) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let stale = name.strip_prefix(&prefix).is_some_and(|key| {
                key.len() == KEY_DIGITS && key.bytes().all(|b| b.is_ascii_hexdigit())
            });
            if stale && path != current {
                let _ = fs::remove_dir_all(&path);
            }
        }
    }
}

/// The Kubernetes versions pinned here, oldest first.
pub fn pinned_kubernetes(workspace: &Path) -> Result<Vec<String>> {
    let modules = workspace.join("cluster/control-plane/modules");
    let mut versions: Vec<String> = fs::read_dir(&modules)
        .with_context(|| format!("reading {}", modules.display()))?
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_prefix("kubernetes-").map(str::to_owned)
        })
        .collect();
    versions.sort_by_key(|v| version_key(v));
    Ok(versions)
}

/// The pinned Kubernetes `wanted` names: an exact version (`1.33.13`) or a minor one
/// (`1.33`), which takes its newest pinned patch.
pub fn resolve_kubernetes(workspace: &Path, wanted: &str) -> Result<String> {
    let wanted = wanted.trim_start_matches('v');
    let pinned = pinned_kubernetes(workspace)?;
    pinned
        .iter()
        .rev()
        .find(|v| *v == wanted || v.strip_prefix(wanted).is_some_and(|r| r.starts_with('.')))
        .cloned()
        .with_context(|| {
            format!(
                "Kubernetes {wanted} is not pinned here; pinned: {}. Pin another with \
                 `cluster/control-plane/pin.sh kubernetes <version>` (it needs the Go module proxy)",
                pinned.join(", ")
            )
        })
}

/// How many hex digits of the hash name a cached build.
const KEY_DIGITS: usize = 12;

/// The first [`KEY_DIGITS`] hex digits of a SHA-256 over the files' lengths and contents, in
/// order.
fn hash_files(files: &[PathBuf]) -> Result<String> {
    let mut hash = sha2::Sha256::new();
    for file in files {
        let bytes = fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    }
    Ok(hash.finalize()[..KEY_DIGITS / 2]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn version_key(version: &str) -> Vec<u64> {
    version
        .split('.')
        .map(|part| part.parse().unwrap_or(0))
        .collect()
}

/// One clear error for a machine without Go, before any build starts.
fn require_go(go: &str) -> Result<()> {
    let found = Command::new(go).arg("version").output();
    match found {
        Ok(output) if output.status.success() => Ok(()),
        _ => bail!(
            "`{go}` was not found on PATH: `cargo xtask cluster up` builds the control plane \
             from Go modules once per machine, with Go 1.26 or newer and the Go module proxy"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This crate's folder's parent.
    fn workspace_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn newest_and_etcd_are_pinned() {
        let workspace = workspace_root();
        let pinned = pinned_kubernetes(&workspace).unwrap();
        assert_eq!(pinned.last().map(String::as_str), Some(NEWEST_KUBERNETES));
        assert!(Component::etcd(&workspace).dir().is_ok());
        assert!(Component::helm(&workspace).dir().is_ok());
        assert!(Component::containerd(&workspace).dir().is_ok());
        let unpinned = Component::kubernetes(&workspace, "1.0.0")
            .dir()
            .unwrap_err();
        assert!(
            unpinned.to_string().contains("not pinned here"),
            "{unpinned}"
        );
    }

    #[test]
    fn a_minor_version_takes_its_newest_pinned_patch() {
        let workspace = workspace_root();
        let minor = NEWEST_KUBERNETES.rsplit_once('.').unwrap().0;
        assert_eq!(
            resolve_kubernetes(&workspace, minor).unwrap(),
            NEWEST_KUBERNETES
        );
        assert_eq!(
            resolve_kubernetes(&workspace, &format!("v{NEWEST_KUBERNETES}")).unwrap(),
            NEWEST_KUBERNETES
        );
        // "1.3" is not a prefix of "1.37.2" at a dot.
        let error = resolve_kubernetes(&workspace, "1.3")
            .unwrap_err()
            .to_string();
        assert!(error.contains("not pinned here"), "{error}");
    }

    #[test]
    fn a_changed_go_sum_or_script_changes_the_cache_key() {
        let dir = std::env::temp_dir().join(format!("binaries-key-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let files = ["go.mod", "go.sum", "build.sh"].map(|name| dir.join(name));
        for file in &files {
            fs::write(file, "a").unwrap();
        }
        let first = hash_files(&files).unwrap();
        assert_eq!(hash_files(&files).unwrap(), first, "the key is stable");
        fs::write(&files[1], "b").unwrap();
        let second = hash_files(&files).unwrap();
        assert_ne!(second, first, "a changed go.sum builds anew");
        fs::write(&files[2], "flags").unwrap();
        assert_ne!(
            hash_files(&files).unwrap(),
            second,
            "a changed build.sh builds anew"
        );
        // Contents move between files: still a different key.
        fs::write(&files[0], "").unwrap();
        fs::write(&files[1], "ab").unwrap();
        let moved = hash_files(&files).unwrap();
        fs::write(&files[0], "a").unwrap();
        fs::write(&files[1], "b").unwrap();
        assert_ne!(hash_files(&files).unwrap(), moved);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_machine_without_go_is_told_what_is_missing() {
        let error = require_go("/nonexistent/go").unwrap_err().to_string();
        assert!(error.contains("Go 1.26 or newer"), "{error}");
        assert!(error.contains("Go module proxy"), "{error}");
    }

    #[test]
    fn versions_sort_by_number_not_text() {
        let mut versions = vec!["1.9.0", "1.37.2", "1.33.13", "1.33.6"];
        versions.sort_by_key(|v| version_key(v));
        assert_eq!(versions, ["1.9.0", "1.33.6", "1.33.13", "1.37.2"]);
    }
}
