//! `operator-gen`: turn a CustomResourceDefinition into a kube-rs operator crate.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use operator_gen_cli::{Shell, exit_code, generate, scaffold};

/// Turn a CustomResourceDefinition into a kube-rs operator crate, and keep it current.
#[derive(Parser)]
#[command(name = "operator-gen", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate (or regenerate) an operator crate from a CRD and its operator.yaml. Run with
    /// no flags inside a generated crate to bring it up to date.
    Gen(generate::GenArgs),
    /// Start a new operator crate: for an imported CRD, a built-in kind, a resource you
    /// define in Rust, or several kinds' metadata.
    New(scaffold::NewArgs),
}

fn main() -> ExitCode {
    let shell = Shell::installed();
    let result = match Cli::parse().command {
        Command::Gen(args) => generate::run(args, &shell),
        Command::New(args) => scaffold::run(args, &shell),
    };
    exit_code(result)
}
