//! `cargo xtask cluster up|down|status`: a real Kubernetes control plane on loopback, without
//! containers: etcd, kube-apiserver (token auth, RBAC) and kube-controller-manager running
//! only the garbage collector and the namespace controller.
//!
//! The binaries are Kubernetes 1.37 (or an older version pinned beside it, `--kubernetes`) and
//! etcd 3.6, built once from Go modules into the machine's cache (`binaries`), so only the
//! first run on a machine pays for the build. helm is built and cached the same way, beside
//! kubectl, for the generated charts. Everything a running cluster needs (keys, etcd
//! data, logs, kubeconfigs, pids, the version it runs) lives in `target/cluster/`, which
//! `down` removes.
//!
//! The admin, in `system:masters`, comes from a static token file. An operator runs as its
//! ServiceAccount (`system:serviceaccount:<namespace>:<crate>`, in the namespace its `deploy/`
//! runs it in) with a token the API server issues, as a kubelet would get it
//! ([`service_account_kubeconfig`]), so the bindings in its generated `deploy/base/rbac.yaml`
//! are exactly what it may do.

use std::{
    fs,
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};

mod binaries;

use binaries::{Component, NEWEST_KUBERNETES};
pub use binaries::{go_command, machine_cache};

const ETCD_PORT: u16 = 23790;
const ETCD_PEER_PORT: u16 = 23800;
const API_PORT: u16 = 16443;
/// The namespace operators run in unless they have one of their own (an operator that admits a
/// built-in kind does): each crate's own is [`OperatorCrate::namespace`].
pub const OPERATOR_NAMESPACE: &str = "default";

#[derive(Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Build the control plane if it is not cached, start it and write kubeconfigs.
    Up {
        /// The Kubernetes version to run: one pinned in `xtask/control-plane/modules/`, exact
        /// (`1.33.13`) or by minor version (`1.33`). The newest pinned by default.
        #[arg(long, value_name = "VERSION")]
        kubernetes: Option<String>,
    },
    /// Stop it and remove its state.
    Down,
    /// Say whether it runs, and where its kubeconfig is.
    Status,
}

pub fn run(args: ClusterArgs) -> Result<std::process::ExitCode> {
    let workspace = crate::workspace_root();
    let cluster = Cluster::new(workspace.clone());
    match args.action {
        Action::Up { kubernetes } => {
            let cluster = match kubernetes {
                Some(wanted) => {
                    let version = binaries::resolve_kubernetes(&workspace, &wanted)?;
                    Cluster::with_kubernetes(workspace, version)
                }
                None => cluster,
            };
            let started = cluster.up()?;
            println!(
                "control plane (Kubernetes {}) up in {:.1?}; export KUBECONFIG={}",
                cluster.kubernetes.version(),
                started,
                cluster.admin_kubeconfig().display()
            );
            println!(
                "kubectl: {}\nhelm: {}",
                cluster.kubectl()?.display(),
                cluster.helm()?.display()
            );
        }
        Action::Down => {
            cluster.down()?;
            println!("control plane stopped");
        }
        Action::Status => match cluster.is_ready() {
            true => println!(
                "running Kubernetes {}: KUBECONFIG={}",
                cluster.kubernetes.version(),
                cluster.admin_kubeconfig().display()
            ),
            false => {
                println!("not running");
                return Ok(std::process::ExitCode::FAILURE);
            }
        },
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// The file in `target/cluster/` that says which Kubernetes version runs there.
const VERSION_FILE: &str = "kubernetes-version";

/// The three processes, in start order.
const COMPONENTS: [&str; 3] = ["etcd", "kube-apiserver", "kube-controller-manager"];

/// The control plane of this workspace.
pub struct Cluster {
    workspace: PathBuf,
    state: PathBuf,
    kubernetes: Component,
}

impl Cluster {
    /// The control plane that runs, at the version it was started with (`cluster up
    /// --kubernetes`), or else the newest Kubernetes pinned here.
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

    /// The control plane at a pinned Kubernetes `version` (`binaries::resolve_kubernetes`).
    fn with_kubernetes(workspace: PathBuf, version: String) -> Self {
        let state = workspace.join("target").join("cluster");
        Self {
            kubernetes: Component::kubernetes(&workspace, &version),
            workspace,
            state,
        }
    }

    /// The version `up` last started here, if its state is still there.
    fn running_version(&self) -> Option<String> {
        let text = fs::read_to_string(self.state.join(VERSION_FILE)).ok()?;
        Some(text.trim().to_owned())
    }

    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.state.join("admin.kubeconfig")
    }

    /// A kubeconfig for the ServiceAccount `name` in `namespace`, with a token this cluster
    /// issues ([`service_account_kubeconfig`]).
    pub fn operator_kubeconfig(&self, name: &str, namespace: &str) -> Result<PathBuf> {
        let path = self.state.join(format!("{name}.kubeconfig"));
        service_account_kubeconfig(
            &self.kubectl()?,
            &self.admin_kubeconfig(),
            name,
            namespace,
            &path,
        )?;
        Ok(path)
    }

    pub fn log(&self, component: &str) -> PathBuf {
        self.state.join("logs").join(format!("{component}.log"))
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

    /// Starts the control plane unless it already runs at this version; returns how long
    /// that took.
    pub fn up(&self) -> Result<Duration> {
        if !on_path("openssl") {
            bail!("`openssl` was not found on PATH: the control plane's keys are made with it");
        }
        let etcd = Component::etcd(&self.workspace).ensure_built()?;
        let bin = self.binaries()?;
        self.helm()?;
        let started = Instant::now();
        let running = self.running_version();
        if self.is_ready() && running.as_deref() == Some(self.kubernetes.version()) {
            return Ok(started.elapsed());
        }
        self.down()?;
        for dir in ["logs", "pki", "certs", "etcd"] {
            fs::create_dir_all(self.state.join(dir))?;
        }
        fs::write(self.state.join(VERSION_FILE), self.kubernetes.version())?;
        self.write_credentials()?;
        self.start_etcd(&etcd)?;
        self.start_apiserver(&bin)?;
        self.wait_ready(Duration::from_secs(90))?;
        self.start_controller_manager(&bin)?;
        Ok(started.elapsed())
    }

    /// Stops every process of the control plane and removes its state.
    pub fn down(&self) -> Result<()> {
        for component in COMPONENTS.iter().rev() {
            self.stop(component);
        }
        if self.state.exists() {
            fs::remove_dir_all(&self.state)
                .with_context(|| format!("removing {}", self.state.display()))?;
        }
        Ok(())
    }

    /// Restarts kube-apiserver, for the checks that watches and Leases survive it: killed
    /// at once, as a crash stops it (its state is etcd's), kept away for at least `away` (a
    /// check that an outage longer than a Lease moves nothing asks for one), then started and
    /// waited for. Asked to stop gracefully it kept its watches open for the whole 15 s
    /// [`Cluster::stop`] allows, in each of the e2e's seven restarts.
    pub fn restart_apiserver(&self, away: Duration) -> Result<()> {
        let bin = self.binaries()?;
        let stopped = Instant::now();
        self.stop_within("kube-apiserver", Duration::ZERO);
        wait_port_free(API_PORT, Duration::from_secs(10))?;
        std::thread::sleep(away.saturating_sub(stopped.elapsed()));
        self.start_apiserver(&bin)?;
        self.wait_ready(Duration::from_secs(90))
    }

    /// Stops `component`, letting it shut down gracefully for up to 15 s.
    fn stop(&self, component: &str) {
        self.stop_within(component, Duration::from_secs(15));
    }

    /// Stops `component`: asks it to end, kills it once `grace` has passed, and waits until
    /// it is gone, so that its ports are free for the next start.
    fn stop_within(&self, component: &str, grace: Duration) {
        let pid_file = self.state.join(format!("{component}.pid"));
        let Ok(pid) = fs::read_to_string(&pid_file) else {
            return;
        };
        let pid = pid.trim();
        let _ = Command::new("kill").args(["-TERM", pid]).status();
        let deadline = Instant::now() + grace;
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        if alive(pid) {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = fs::remove_file(pid_file);
    }

    /// Token file, service-account keys and kubeconfigs.
    fn write_credentials(&self) -> Result<()> {
        let pki = self.state.join("pki");
        let key = pki.join("sa.key");
        check(
            Command::new("openssl")
                .args(["genrsa", "-out"])
                .arg(&key)
                .arg("2048")
                .stderr(Stdio::null()),
        )?;
        check(
            Command::new("openssl")
                .args(["rsa", "-pubout", "-in"])
                .arg(&key)
                .arg("-out")
                .arg(pki.join("sa.pub"))
                .stderr(Stdio::null()),
        )?;
        let admin_token = format!("admin-{}", nonce());
        fs::write(
            pki.join("tokens.csv"),
            format!("{admin_token},admin,admin,\"system:masters\"\n"),
        )?;
        self.write_kubeconfig(
            &self.admin_kubeconfig(),
            "admin",
            &admin_token,
            OPERATOR_NAMESPACE,
        )
    }

    fn write_kubeconfig(
        &self,
        path: &Path,
        user: &str,
        token: &str,
        namespace: &str,
    ) -> Result<()> {
        // kube-apiserver signs its serving certificate into `certs/` when it first starts,
        // after this file is written; clients read it only when they connect.
        let authority = self.state.join("certs").join("apiserver.crt");
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:{API_PORT}\n    certificate-authority: {}\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: local\n  context:\n    cluster: local\n    user: {user}\n    namespace: {namespace}\ncurrent-context: local\n",
            authority.display()
        );
        fs::write(path, config).with_context(|| format!("writing {}", path.display()))
    }

    fn start_etcd(&self, bin: &Path) -> Result<()> {
        let mut command = Command::new(bin.join("etcd"));
        command
            .arg(format!("--data-dir={}", self.state.join("etcd").display()))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{ETCD_PORT}"))
            .arg(format!(
                "--advertise-client-urls=http://127.0.0.1:{ETCD_PORT}"
            ))
            .arg(format!(
                "--listen-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}"
            ))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}"
            ))
            .arg(format!(
                "--initial-cluster=default=http://127.0.0.1:{ETCD_PEER_PORT}"
            ))
            .arg("--unsafe-no-fsync");
        self.spawn("etcd", command)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", ETCD_PORT)).is_err() {
            if Instant::now() > deadline {
                bail!(
                    "etcd did not listen within 30s; see {}",
                    self.log("etcd").display()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    fn start_apiserver(&self, bin: &Path) -> Result<()> {
        let pki = self.state.join("pki");
        let mut command = Command::new(bin.join("kube-apiserver"));
        command
            .arg(format!("--etcd-servers=http://127.0.0.1:{ETCD_PORT}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={API_PORT}"))
            .arg(format!("--advertise-address={}", advertise_address()?))
            .arg(format!("--cert-dir={}", self.state.join("certs").display()))
            .arg(format!(
                "--token-auth-file={}",
                pki.join("tokens.csv").display()
            ))
            .arg("--authorization-mode=RBAC")
            .arg(format!(
                "--service-account-key-file={}",
                pki.join("sa.pub").display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                pki.join("sa.key").display()
            ))
            .arg("--service-account-issuer=https://kubernetes.default.svc")
            .arg("--service-cluster-ip-range=10.0.0.0/24")
            .arg("--enable-priority-and-fairness=false");
        self.spawn("kube-apiserver", command)
    }

    fn start_controller_manager(&self, bin: &Path) -> Result<()> {
        let mut command = Command::new(bin.join("kube-controller-manager"));
        command
            .arg(format!(
                "--kubeconfig={}",
                self.admin_kubeconfig().display()
            ))
            .arg("--controllers=garbagecollector,namespace")
            // The garbage collector's client is held to 20 requests a second by default: the
            // 1,000 children of the e2e's sharded primaries took it over a minute to remove,
            // which the next check's deletion waited out. A cluster of its own can spare more.
            .arg("--kube-api-qps=200")
            .arg("--kube-api-burst=400")
            .arg("--leader-elect=false")
            .arg("--secure-port=0");
        self.spawn("kube-controller-manager", command)
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

    /// Starts `command` in its own process group, logging to `logs/<component>.log`.
    fn spawn(&self, component: &str, mut command: Command) -> Result<()> {
        use std::os::unix::process::CommandExt;
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(component))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {component}"))?;
        fs::write(
            self.state.join(format!("{component}.pid")),
            child.id().to_string(),
        )?;
        Ok(())
    }
}

/// An operator crate of the workspace.
#[derive(Clone)]
pub struct OperatorCrate {
    /// Its package name, which is also its ServiceAccount's name.
    pub name: String,
    pub dir: PathBuf,
    /// The namespace its `deploy/` runs it in, and so its ServiceAccount's.
    pub namespace: String,
}

/// The cached helm ([`binaries::HELM`]), built first when missing: it needs no control plane,
/// so the chart checks run it without one.
pub fn helm(workspace: &Path) -> Result<PathBuf> {
    Ok(Component::helm(workspace).ensure_built()?.join("helm"))
}

/// The operator crates of the workspace: `example-operator` and every crate in `generated/`,
/// sorted by name.
pub fn operator_crates(workspace: &Path) -> Result<Vec<OperatorCrate>> {
    let mut dirs = vec![workspace.join("example-operator")];
    for entry in fs::read_dir(workspace.join("generated"))? {
        dirs.push(entry?.path());
    }
    let mut crates = Vec::new();
    for dir in dirs {
        crates.extend(operator_crate(dir)?);
    }
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(crates)
}

/// The operator crate in `dir`, if it holds one: a crate with a generated `deploy/base/`.
pub fn operator_crate(dir: PathBuf) -> Result<Option<OperatorCrate>> {
    if !dir.join("deploy/base/rbac.yaml").exists() {
        return Ok(None);
    }
    Ok(Some(OperatorCrate {
        name: package_name(&dir)?,
        namespace: deploy_namespace(&dir)?,
        dir,
    }))
}

/// The namespace of the Deployment in a crate's `deploy/base/deployment.yaml`.
pub(crate) fn deploy_namespace(dir: &Path) -> Result<String> {
    let path = dir.join("deploy/base/deployment.yaml");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let deployment: serde_json::Value =
        serde_saphyr::from_str_with_options(&text, operator_gen::limits::yaml_options())
            .with_context(|| format!("reading {}", path.display()))?;
    deployment["metadata"]["namespace"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("{} names no namespace", path.display()))
}

fn package_name(dir: &Path) -> Result<String> {
    let manifest = dir.join("Cargo.toml");
    let text =
        fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    text.lines()
        .find_map(|line| line.strip_prefix("name = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .map(str::to_owned)
        .with_context(|| format!("{} has no package name", manifest.display()))
}

/// The address kube-apiserver publishes in the `kubernetes` Endpoints, which refuses
/// loopback: this machine's own first global IPv4 address. Nothing connects to it.
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

/// Whether process `pid` runs: whether any of its threads does. A component this process
/// started (`restart_apiserver` in the e2e) stays a zombie once it ends, since nothing waits
/// for it, and `kill -0` still finds a zombie: it counts as ended. Its main thread turns
/// zombie before the others have ended, and they hold its listening socket until they do: a
/// new API server started then could not bind its port.
fn alive(pid: &str) -> bool {
    let Ok(threads) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    threads.flatten().any(|thread| {
        // `tid (comm) state …`, where comm may hold a `)`; Z is a zombie, X dead.
        fs::read_to_string(thread.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
        })
    })
}

/// Waits up to `patience` until nothing listens on `port` of loopback any more.
fn wait_port_free(port: u16, patience: Duration) -> Result<()> {
    let deadline = Instant::now() + patience;
    while std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).is_err() {
        if Instant::now() > deadline {
            bail!("127.0.0.1:{port} was still in use {patience:?} after its server was stopped");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn check(command: &mut Command) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("running {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed ({status})");
    }
    Ok(())
}

/// A value no earlier cluster used, for tokens.
fn nonce() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}{:x}", nanos, std::process::id())
}

/// Writes to `path` a kubeconfig whose user is the ServiceAccount `name` in `namespace`, on the
/// cluster of the `admin` kubeconfig, with a token the API server issues (a TokenRequest, as
/// `kubectl create token` asks for one). The namespace and the ServiceAccount are created first
/// when missing, since a token is issued only for a ServiceAccount that exists; the token lasts
/// two hours, longer than any run that uses it.
pub fn service_account_kubeconfig(
    kubectl: &Path,
    admin: &Path,
    name: &str,
    namespace: &str,
    path: &Path,
) -> Result<()> {
    let run = |args: &[&str], input: Option<String>| -> Result<Vec<u8>> {
        let mut child = Command::new(kubectl)
            .env("KUBECONFIG", admin)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("running {}", kubectl.display()))?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            std::io::Write::write_all(&mut stdin, input.as_bytes())?;
        }
        let output = child.wait_with_output()?;
        if !output.status.success() {
            bail!(
                "kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(output.stdout)
    };
    let account = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
    ]});
    // Server-side, under a manager of its own that owns only the names: a namespace or a
    // ServiceAccount made from `deploy/` or a Helm chart keeps its labels and its owners.
    run(
        &[
            "apply",
            "--server-side",
            "--field-manager=operator-gen-service-account",
            "-f",
            "-",
        ],
        Some(account.to_string()),
    )
    .with_context(|| format!("creating the ServiceAccount {namespace}/{name}"))?;
    let token = run(
        &["create", "token", name, "-n", namespace, "--duration=2h"],
        None,
    )?;
    let mut config: serde_json::Value = serde_json::from_slice(&run(
        &["config", "view", "--minify", "--raw", "-o", "json"],
        None,
    )?)
    .context("reading the admin's kubeconfig")?;
    let token = String::from_utf8_lossy(&token).trim().to_owned();
    config["users"] = serde_json::json!([{"name": name, "user": {"token": token}}]);
    config["contexts"][0]["context"]["user"] = serde_json::json!(name);
    config["contexts"][0]["context"]["namespace"] = serde_json::json!(namespace);
    fs::write(path, config.to_string()).with_context(|| format!("writing {}", path.display()))
}

/// The last `lines` lines of a log file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_is_alive_and_an_ended_one_is_not_even_unwaited() {
        let mut running = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let pid = running.id().to_string();
        assert!(alive(&pid));
        // Ended but not waited for: a zombie, which `kill -0` would still find.
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(&pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(&pid), "a zombie counts as ended");
        let zombie = fs::read_to_string(format!("/proc/{pid}/stat")).expect("not yet reaped");
        assert!(zombie.contains(") Z"), "{zombie}");
        running.wait().expect("reaped");
        assert!(!alive(&pid));
    }

    #[test]
    fn a_port_is_free_once_its_listener_is_gone_and_not_before() {
        let listener =
            std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let held = wait_port_free(port, Duration::from_millis(200));
        assert!(held.is_err(), "a port something listens on is not free");
        let closer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(listener);
        });
        wait_port_free(port, Duration::from_secs(5)).expect("free once closed");
        closer.join().expect("closed");
    }
}
