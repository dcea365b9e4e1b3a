//! The operator crates of the workspace, as the e2e, the charts check and the bench find them:
//! `example-operator` and every crate in `generated/` with a generated `deploy/base/`.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};

/// An operator crate of the workspace.
#[derive(Debug, Clone)]
pub struct OperatorCrate {
    /// Its package name, which is also its ServiceAccount's name.
    pub name: String,
    pub dir: PathBuf,
    /// The namespace its `deploy/` runs it in, and so its ServiceAccount's.
    pub namespace: String,
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
pub fn deploy_namespace(dir: &Path) -> Result<String> {
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
