//! `cargo xtask`: the project's commands. `gen`, `new` and `corpus` are thin shells over the
//! `operator-gen` library; `cluster` runs a real control plane, `e2e` runs the operators on
//! it, and `bench` measures `gen` and a generated operator against their floors.

mod bench;
mod cluster;
mod corpus;
mod e2e;
mod gen_cmd;
mod new_cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "operator-gen project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate (or regenerate) an operator crate from a CRD and an operator.yaml.
    Gen(gen_cmd::GenArgs),
    /// Start a new operator crate for one of the object archetypes.
    New(new_cmd::NewArgs),
    /// Generate and compile-check an operator for every CRD in a folder.
    Corpus(corpus::CorpusArgs),
    /// Measure `gen` against kopium and a generated operator against the API server's floor.
    Bench(bench::BenchArgs),
    /// A real Kubernetes control plane on loopback, for `e2e`.
    Cluster(cluster::ClusterArgs),
    /// Run every operator crate against a real API server and check what it does.
    E2e(e2e::E2eArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Gen(args) => gen_cmd::run(args),
        Command::Corpus(args) => corpus::run(args),
        Command::New(args) => new_cmd::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Cluster(args) => cluster::run(args),
        Command::E2e(args) => e2e::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", shown(&format!("{error:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `value` as one printable line, for echoing paths and names a person typed (or a CRD
/// holds) back to their terminal.
fn shown(value: &dyn std::fmt::Display) -> String {
    operator_gen::text::Text::new(value.to_string()).comment()
}

/// The workspace root: xtask's own folder's parent.
fn workspace_root() -> std::path::PathBuf {
    let xtask = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_owned()
}
