//! `cargo xtask`: the project's commands, each a thin shell over the `operator-gen` library.

mod corpus;
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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Gen(args) => gen_cmd::run(args),
        Command::Corpus(args) => corpus::run(args),
        Command::New(args) => new_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
