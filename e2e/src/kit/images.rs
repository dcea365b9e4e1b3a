//! The operators' images, built as a user builds them (`operator-gen image`, the same library)
//! from the debug binaries the e2e already has, checked with skopeo, and imported into the
//! node as `kind load image-archive` would.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};
use operator_gen_cluster::Cluster;
use operator_gen_image::{Recipe, Reference};
use serde_json::Value;

/// Builds the image `reference` of `binary` into `dir`, reads it back with skopeo as both an
/// OCI and a docker archive, and imports it into the node; returns the tarball.
pub fn build_and_load(
    cluster: &Cluster,
    binary: &Path,
    reference: &str,
    dir: &Path,
) -> Result<PathBuf> {
    let reference = Reference::parse(reference)?;
    let recipe = Recipe::new(reference.clone(), binary)?;
    let image = operator_gen_image::build(&recipe)?;
    std::fs::create_dir_all(dir)?;
    let tar = dir.join(format!(
        "{}-{}.tar",
        reference.repository(),
        reference.tag()
    ));
    image.write(&tar)?;
    for transport in ["oci-archive", "docker-archive"] {
        let inspected = skopeo_inspect(transport, &tar)?;
        if inspected["Architecture"] != "amd64"
            && inspected["Architecture"] != std::env::consts::ARCH
        {
            bail!(
                "skopeo reads {} as {}",
                tar.display(),
                inspected["Architecture"]
            );
        }
    }
    cluster
        .import_image(&tar)
        .with_context(|| format!("importing {reference}"))?;
    Ok(tar)
}

/// `skopeo inspect <transport>:<tar>`, as JSON.
fn skopeo_inspect(transport: &str, tar: &Path) -> Result<Value> {
    let source = format!("{transport}:{}", tar.display());
    let mut skopeo = Command::new("skopeo");
    skopeo.args(["inspect", &source]);
    // Debian's package, which `cargo xtask cluster up` installs.
    let what = format!("skopeo inspect {source}");
    let inspected = operator_gen_cluster::checked(&mut skopeo, &what, None)?;
    Ok(serde_json::from_slice(&inspected)?)
}
