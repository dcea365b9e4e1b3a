//! `image [<crate>]`: an operator's container image, built from its binary with no container
//! engine ([`operator_gen_image`]), tagged as its generated Deployment names it.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context as _, bail};
use operator_gen::crate_dir::CrateDir;
use operator_gen_image::{Recipe, Reference, Role};

use crate::{shown, shown_path};

/// The CA bundle copied in unless told otherwise: Debian's, as rustls-native-certs reads it.
const HOST_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The largest Cargo.toml read from the crate folder.
const MAX_CARGO_TOML_BYTES: u64 = 1024 * 1024;

#[derive(clap::Args, Debug, Clone)]
pub struct ImageArgs {
    /// The operator crate; the current folder by default. Its Cargo.toml gives the image's
    /// name and its default tag: the package name and version the generated Deployment runs.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The operator's executable, built for Linux; `<crate>/target/release/<name>` by default.
    /// A static binary (`--target x86_64-unknown-linux-musl`) needs nothing else in the image;
    /// a dynamically linked one gets the loader and the libraries it needs from this machine.
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// The image's tag; the crate's version by default.
    #[arg(long)]
    pub tag: Option<String>,
    /// The image's name (`registry.example/team/op`); the package name by default.
    #[arg(long)]
    pub name: Option<String>,
    /// The tarball to write; `<crate>/target/images/<name>-<tag>.tar` by default.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The architecture the image is for (amd64, arm64, …); this machine's by default. The
    /// binary must be built for it.
    #[arg(long)]
    pub arch: Option<String>,
    /// A CA bundle to put in the image, for HTTPS to anything but the API server (whose CA
    /// comes with the ServiceAccount's token); this machine's bundle by default, when it has one.
    #[arg(long, conflicts_with = "no_ca_bundle")]
    pub ca_bundle: Option<PathBuf>,
    /// Put no CA bundle in the image.
    #[arg(long)]
    pub no_ca_bundle: bool,
}

/// The package name and version of the crate in `dir`, read from its Cargo.toml through the
/// module that reads crate folders: capped, links refused.
fn package(dir: &Path) -> anyhow::Result<(String, String)> {
    let cargo_toml = dir.join("Cargo.toml");
    let bytes = CrateDir::new(dir)
        .read(Path::new("Cargo.toml"), MAX_CARGO_TOML_BYTES)?
        .with_context(|| {
            format!(
                "{} has no Cargo.toml: pass the operator crate's folder",
                shown_path(dir)
            )
        })?;
    let text = String::from_utf8(bytes)
        .with_context(|| format!("{} is not UTF-8", shown_path(&cargo_toml)))?;
    let manifest: toml::Table = toml::from_str(&text)
        .with_context(|| format!("{} is not TOML", shown_path(&cargo_toml)))?;
    let field = |name: &str| {
        manifest
            .get("package")
            .and_then(|package| package.get(name))
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
            .with_context(|| {
                format!(
                    "{} has no package.{name}: pass the operator crate's folder",
                    shown_path(&cargo_toml)
                )
            })
    };
    Ok((field("name")?, field("version")?))
}

/// Runs `image`.
pub fn run(args: ImageArgs) -> anyhow::Result<ExitCode> {
    let (package, version) = package(&args.dir)?;
    let name = args.name.unwrap_or_else(|| package.clone());
    let tag = args.tag.unwrap_or(version);
    let reference = Reference::new(&name, &tag)?;
    let binary = args
        .binary
        .unwrap_or_else(|| args.dir.join("target/release").join(&package));
    let mut recipe = Recipe::new(reference.clone(), &binary)?;
    if let Some(arch) = &args.arch {
        recipe.architecture = operator_gen_image::program::architecture_named(arch)
            .with_context(|| format!("--arch {}: not an architecture this knows", shown(arch)))?;
    }
    recipe.ca_bundle = match (args.ca_bundle, args.no_ca_bundle) {
        (Some(bundle), _) => Some(bundle),
        (None, true) => None,
        (None, false) => Some(PathBuf::from(HOST_CA_BUNDLE)).filter(|path| path.is_file()),
    };
    let image = operator_gen_image::build(&recipe)?;
    let file_name = format!("{}-{tag}.tar", name.rsplit('/').next().unwrap_or(&name));
    let out = args
        .out
        .unwrap_or_else(|| args.dir.join("target/images").join(file_name));
    write(&image, &out)?;
    println!("built {reference} ({})", image.id());
    for content in &image.contents {
        let role = match content.role {
            Role::Binary => "the operator",
            Role::Interpreter => "its loader",
            Role::Library => "a library it loads",
            Role::CaBundle => "the CA bundle",
        };
        println!(
            "  {} <- {} ({role})",
            shown(&content.path),
            shown_path(&content.source)
        );
    }
    let out = shown_path(&out);
    println!("wrote {out}; load it where the cluster runs it:");
    println!("  kind load image-archive {out}");
    println!("  ctr --namespace k8s.io images import {out}");
    println!("  podman load --input {out}    # or docker load --input {out}");
    println!("  skopeo copy docker-archive:{out} docker://<registry>/{reference}");
    Ok(ExitCode::SUCCESS)
}

/// Writes the image to `out`, making its folder first when missing, and removing the folder
/// again should the write fail, so that a failed run leaves the disk as it was.
fn write(image: &operator_gen_image::Image, out: &Path) -> anyhow::Result<()> {
    let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) else {
        image.write(out)?;
        return Ok(());
    };
    let mut made = Vec::new();
    let mut missing = parent;
    while !missing.exists() {
        made.push(missing.to_owned());
        match missing.parent() {
            Some(up) if !up.as_os_str().is_empty() => missing = up,
            _ => break,
        }
    }
    if !made.is_empty() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("making {}", shown_path(parent)))?;
    }
    let written = image.write(out);
    if written.is_err() {
        for dir in &made {
            let _ = std::fs::remove_dir(dir);
        }
    }
    if let Err(error) = written {
        bail!(error);
    }
    Ok(())
}
