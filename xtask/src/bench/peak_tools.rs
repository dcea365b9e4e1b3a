//! The release peak-memory tools of `xtask/conversion-peak` as the memory benches run them:
//! built once, each run reporting one JSON line, measured against the Deployment's limit.

use anyhow::{Context as _, Result};

/// The Deployment's memory limit in `deploy/base/deployment.yaml`.
pub(super) const MEMORY_LIMIT_MIB: f64 = 256.0;

/// Builds the peak-memory tools (`xtask/conversion-peak`) in release, as operators ship.
pub(super) fn build_peak_tools(workspace: &std::path::Path) -> Result<()> {
    let status = operator_gen_tests::cargo()
        .args(["build", "--quiet", "--release", "-p", "conversion-peak"])
        .current_dir(workspace)
        .status()?;
    if !status.success() {
        anyhow::bail!("building conversion-peak in release failed ({status})");
    }
    Ok(())
}

/// Runs `tool`, one of the peak-memory tools built by [`build_peak_tools`], with `args`, and
/// reads the JSON line it reports.
pub(super) fn tool_report<T: serde::de::DeserializeOwned>(
    workspace: &std::path::Path,
    tool: &str,
    args: &[&str],
) -> Result<T> {
    let binary = workspace.join("target/release").join(tool);
    let output = std::process::Command::new(&binary)
        .args(args)
        .output()
        .with_context(|| format!("running {}", binary.display()))?;
    if !output.status.success() {
        anyhow::bail!(
            "{tool} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    serde_json::from_slice(&output.stdout).with_context(|| format!("reading {tool}'s report"))
}
