//! kubectl with one kubeconfig, most often the cluster's admin's: the e2e's hands on the API
//! server, for everything a person would do with it (apply, get, patch, scale, wait,
//! kustomize).

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result};
use serde_json::Value;

use crate::processes::checked;

/// The cluster's kubectl with one kubeconfig.
#[derive(Debug, Clone)]
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    pub fn new(bin: PathBuf, kubeconfig: PathBuf) -> Self {
        Self { bin, kubeconfig }
    }

    pub fn bin(&self) -> &Path {
        &self.bin
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `kubectl args` with the kubeconfig set, not yet run.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.bin);
        command.env("KUBECONFIG", &self.kubeconfig).args(args);
        command
    }

    /// Runs `kubectl args [file]`, failing with what kubectl said when it fails.
    pub fn run(&self, args: &[&str], file: Option<&Path>) -> Result<()> {
        let mut command = self.command(args);
        if let Some(file) = file {
            command.arg(file);
        }
        checked(&mut command, &format!("kubectl {}", args.join(" ")), None).map(drop)
    }

    /// What `kubectl args` printed, or what it said when it failed.
    pub fn stdout(&self, args: &[&str]) -> Result<Vec<u8>> {
        self.stdout_with_input(args, None)
    }

    /// What `kubectl args` printed with `input` as its standard input, or what it said when it
    /// failed.
    pub fn stdout_with_input(&self, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>> {
        let what = format!("kubectl {}", args.join(" "));
        checked(&mut self.command(args), &what, input)
    }

    /// What `kubectl args` printed, whether or not it failed.
    pub fn output(&self, args: &[&str]) -> Result<String> {
        let output = self.command(args).output()?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    pub fn json(&self, args: &[&str]) -> Result<Value> {
        Ok(serde_json::from_slice(&self.stdout(args)?)?)
    }

    /// Whether `kubectl get … --ignore-not-found` (`args`) found the object: it prints
    /// nothing when there is none, and fails, rather than saying so, when it cannot tell.
    pub fn found(&self, args: &[&str]) -> Result<bool> {
        let stdout = self.stdout(args)?;
        Ok(!stdout.iter().all(u8::is_ascii_whitespace))
    }

    /// `kubectl kustomize dir`: the objects it builds, as YAML.
    pub fn kustomize(&self, dir: &Path) -> Result<String> {
        let dir = dir.to_str().context("a UTF-8 path")?;
        let built = self.stdout(&["kustomize", dir])?;
        Ok(String::from_utf8_lossy(&built).into_owned())
    }

    /// Applies `object` server-side as the field manager `e2e`, through the file `scratch`;
    /// the outer error is kubectl failing to run, the inner one the API server's refusal, for
    /// checks that expect one.
    pub fn try_apply_json(
        &self,
        object: &Value,
        scratch: &Path,
    ) -> Result<std::result::Result<(), String>> {
        fs::write(scratch, object.to_string())?;
        let mut command = self.command(&["apply", "--server-side", "--field-manager=e2e", "-f"]);
        let output = command.arg(scratch).output()?;
        Ok(if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
        })
    }
}
