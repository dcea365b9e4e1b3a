//! `cargo xtask`: the project's commands. `gen` and `new` are the installable `operator-gen`
//! command's own (`operator-gen-cli`), with this repository's default crate; `corpus` is a
//! thin shell over the `operator-gen` library; `cluster` runs a real control plane, `e2e`
//! runs the operators on it, and `bench` measures `gen` and a generated operator against
//! their floors.

mod bench;
mod charts;
mod cluster;
mod contracts;
mod corpus;
mod packaging;

use clap::{Parser, Subcommand};
use operator_gen_cli::{Shell, exit_code};

/// The allocator `operator-gen` uses, so that `cargo xtask gen` runs as the installed command
/// does (see `cli/src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "operator-gen project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// `gen` and `new`, as the installed `operator-gen` offers them.
    #[command(flatten)]
    Shared(operator_gen_cli::Command),
    /// Generate and compile-check an operator for every CRD in a folder.
    Corpus(corpus::CorpusArgs),
    /// Measure `gen` against kopium and a generated operator against the API server's floor.
    Bench(bench::BenchArgs),
    /// A real Kubernetes control plane on loopback, for `e2e`.
    Cluster(cluster::ClusterArgs),
    /// Lint every operator crate's Helm chart and compare its objects with kustomize's.
    Charts(charts::ChartsArgs),
    /// Run every operator crate against a real API server and check what it does.
    E2e(operator_gen_e2e::E2eArgs),
    /// Package publishable crates, and check that their builds read only packaged files.
    Package(packaging::PackageArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Shared(shared) => shared.run(&shell()),
        Command::Corpus(args) => corpus::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Cluster(args) => cluster::run(args),
        Command::Charts(args) => charts::run(args),
        Command::E2e(args) => operator_gen_e2e::run(&workspace_root(), args),
        Command::Package(args) => packaging::run(args),
    };
    exit_code(result)
}

/// `gen` and `new` as this repository offers them: without `--out`, `gen` regenerates the
/// crate the README's main command names.
fn shell() -> Shell {
    Shell {
        name: "cargo xtask",
        default_out: operator_gen::job::DEFAULT_OUT.into(),
    }
}

/// The workspace root: xtask's own folder's parent.
fn workspace_root() -> std::path::PathBuf {
    let xtask = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_owned()
}
