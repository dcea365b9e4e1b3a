//! The `operator-gen` command line: `gen` regenerates an operator crate from its CRD and
//! `operator.yaml`, `new` starts one, `image` builds its container image from its binary, and
//! `kubeconfig` lets a run outside the cluster act as its ServiceAccount ([`kubeconfig`]).
//!
//! Each subcommand's arguments are defined once, in [`generate::GenArgs`] and [`scaffold::NewArgs`],
//! and run by [`generate::run`] and [`scaffold::run`]. The installed binary (`src/main.rs`) and the
//! operator-gen repository's `cargo xtask gen/new` both parse them as [`Command`] and run it;
//! they differ only in the [`Shell`] they pass: its name, which the output
//! repeats in the commands it suggests, and the crate `gen` writes when `--out` is not given.
//! After a write, both bring the Cargo.lock of a crate that has its own into step with the
//! Cargo.toml just written, or give it a first one ([`lockfile`]); `gen --check` fails while it
//! is out of step.

pub mod generate;
pub mod image;
pub mod kubeconfig;
pub mod lockfile;
pub mod scaffold;

use std::path::PathBuf;

/// The subcommands, as every program that offers them parses them.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Command {
    /// Generate (or regenerate) an operator crate from a CRD and its operator.yaml. Run with
    /// no flags inside a generated crate to bring it up to date.
    Gen(generate::GenArgs),
    /// Start a new operator crate: for an imported CRD, a built-in kind, a resource you
    /// define in Rust, or several kinds' metadata.
    New(scaffold::NewArgs),
    /// Build an operator's container image from its binary, with no container engine: a
    /// tarball that `kind load image-archive`, `ctr images import`, `podman load` and `docker
    /// load` take, tagged as the crate's Deployment names it.
    Image(image::ImageArgs),
    /// Write a kubeconfig whose user is the operator's ServiceAccount, with a token the API
    /// server issues (a TokenRequest): `cargo run` with it does what deploy/'s RBAC allows the
    /// pods, and no more.
    Kubeconfig(kubeconfig::KubeconfigArgs),
}

impl Command {
    /// Runs the subcommand as `shell` offers it.
    pub fn run(self, shell: &Shell) -> anyhow::Result<std::process::ExitCode> {
        match self {
            Self::Gen(args) => generate::run(args, shell),
            Self::New(args) => scaffold::run(args, shell),
            Self::Image(args) => image::run(args),
            Self::Kubeconfig(args) => kubeconfig::run(args),
        }
    }
}

/// What differs between the programs that offer these subcommands.
#[derive(Debug, Clone)]
pub struct Shell {
    /// The command as a user types it (`operator-gen`, `cargo xtask`).
    pub name: &'static str,
    /// The crate `gen` writes without `--out`.
    pub default_out: PathBuf,
}

impl Shell {
    /// The installed `operator-gen` binary: without `--out`, `gen` works on the current folder.
    pub fn installed() -> Self {
        Self {
            name: "operator-gen",
            default_out: PathBuf::from("."),
        }
    }
}

/// The exit code of a subcommand's `result`, printing its error as one line.
pub fn exit_code(result: anyhow::Result<std::process::ExitCode>) -> std::process::ExitCode {
    result.unwrap_or_else(|error| {
        eprintln!("error: {}", shown(&format!("{error:#}")));
        std::process::ExitCode::FAILURE
    })
}

pub use operator_gen::text::shown_path;

/// `value` as one printable line, for echoing paths and names a person typed (or a CRD
/// holds) back to their terminal.
pub fn shown(value: &dyn std::fmt::Display) -> String {
    operator_gen::text::Text::new(value.to_string()).comment()
}
