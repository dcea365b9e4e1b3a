//! An operator run as a process on this machine, as `cargo run` runs it for a developer:
//! against the cluster with a token of its ServiceAccount, its webhooks on loopback where
//! `deploy/local/` has the API server call them.

use std::{
    fs,
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use super::Replica;

/// A running operator process.
#[derive(Debug)]
pub struct Local {
    child: Child,
    pub replica: Replica,
    pub log: PathBuf,
}

impl Local {
    /// Starts `binary` as the replica `name`, with `env` over the process's own, its output
    /// appended to `log`, its endpoints on loopback at `metrics` and `webhook`.
    pub fn start(
        binary: &Path,
        name: &str,
        (metrics, webhook): (u16, u16),
        env: &[(String, String)],
        log: PathBuf,
    ) -> Result<Self> {
        let output = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let child = Command::new(binary)
            .env("METRICS_ADDR", format!("127.0.0.1:{metrics}"))
            .env("WEBHOOK_ADDR", format!("127.0.0.1:{webhook}"))
            .env("POD_NAME", name)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Self {
            child,
            replica: Replica {
                name: name.to_owned(),
                host: IpAddr::V4(Ipv4Addr::LOCALHOST),
                metrics_port: metrics,
                webhook_port: webhook,
            },
            log,
        })
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills it at once.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops it as the kubelet does, with SIGTERM, so that a leader hands its Lease back.
    pub fn stop_gracefully(mut self) {
        stop_gracefully(&mut self.child);
    }
}

/// Stops a process as the kubelet does, with SIGTERM, so that it hands back its Leases; kills
/// it if it has not exited within the grace period.
pub fn stop_gracefully(child: &mut Child) {
    if let Some(pid) = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}
