//! What runs on this machine rather than in a pod: the crate's own cluster test, which runs its
//! controller in its own process against `deploy/local/`, as `cargo test` does on a developer's
//! machine.

use std::process::Command;

use anyhow::{Result, bail};

use super::Suite;

impl Suite {
    /// The integration test that ships in the crate (`tests/cluster.rs`), run with the
    /// Deployment scaled to none (two controllers would both reconcile) and `deploy/local/`
    /// applied, so that the API server calls the webhooks its controller serves at the crate's
    /// default `--webhook-addr`.
    pub(super) fn shipped_cluster_test(&mut self) -> Result<()> {
        let output = Command::new(self.env.artifacts.test(&self.dir, "cluster")?)
            // It needs a cluster, so it is `#[ignore]`d in a plain `cargo test`.
            .args(["--ignored", "--quiet"])
            // Where `cargo test` runs it.
            .current_dir(&self.dir)
            .env("KUBECONFIG", self.env.kubectl.kubeconfig())
            // Where the crate's own settings serve them by default, which is where
            // `deploy/local/` has the API server call them (`local.webhooks`).
            .env_remove("WEBHOOK_ADDR")
            .env("POD_NAMESPACE", &self.operator_namespace)
            .output()?;
        let text = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() || !text.contains("1 passed") {
            bail!(
                "cargo test ended with {}: {text}{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }
}
