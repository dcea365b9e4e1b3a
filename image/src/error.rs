//! What can stop an image build, each naming the file and what to do.

use std::path::PathBuf;

/// What can stop an image build.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("could not read {}: {reason}", .path.display())]
    Read { path: PathBuf, reason: String },

    /// A file is larger than what an image of an operator holds.
    #[error("{} is larger than {limit} bytes, the most an operator's image takes of one file", .path.display())]
    TooLarge { path: PathBuf, limit: u64 },

    /// The binary has no execute permission.
    #[error("{} is not executable (no x bit in its mode); pass the binary cargo built, or `chmod +x` it", .path.display())]
    NotExecutable { path: PathBuf },

    /// The file is not an ELF file at all.
    #[error("{} is not a Linux program (no ELF header): build the operator for Linux, for example with `cargo build --release` on Linux or `--target x86_64-unknown-linux-musl`", .path.display())]
    NotElf { path: PathBuf },

    /// The ELF file is malformed.
    #[error("{} is not a well-formed ELF file: {reason}", .path.display())]
    Malformed { path: PathBuf, reason: String },

    /// The ELF file is not a program: a shared library, an object file, a core dump.
    #[error("{} is {what}, not a program; pass the operator's executable (target/<profile>/<crate>)", .path.display())]
    NotAProgram { path: PathBuf, what: &'static str },

    /// The binary is built for another machine than the image is for.
    #[error("{} is built for {found}, but the image is for {wanted}: build for {wanted}, or ask for an image of {found}", .path.display())]
    WrongArchitecture {
        path: PathBuf,
        found: String,
        wanted: String,
    },

    /// The binary is for a machine the OCI format has no name for here.
    #[error("{} is built for ELF machine {machine}, which has no OCI architecture here", .path.display())]
    UnsupportedMachine { path: PathBuf, machine: u16 },

    /// This machine's architecture has no OCI name here.
    #[error(
        "this machine's architecture ({name}) has no OCI name here; pass the image's architecture"
    )]
    UnknownArchitecture { name: String },

    /// A library the binary, or one of its libraries, needs is nowhere the loader would look.
    #[error("{} needs {library}, which is in none of {}: install the package that has it, or build a static binary (for example `--target x86_64-unknown-linux-musl`)", .needed_by.display(), searched_list(.searched))]
    MissingLibrary {
        needed_by: PathBuf,
        library: String,
        searched: Vec<PathBuf>,
    },

    /// More libraries than any operator loads, or a chain of them deeper than any.
    #[error("{} loads more than {limit} shared libraries; an operator needs a handful (build it static to need none)", .path.display())]
    TooManyLibraries { path: PathBuf, limit: usize },

    /// The image's name or tag is not one a container runtime takes.
    #[error("{reference:?} is not an image reference: {reason}")]
    Reference { reference: String, reason: String },

    /// A path in the image is not absolute, or climbs out of it.
    #[error("{path:?} is not a path an image can hold: {reason}")]
    ImagePath { path: String, reason: &'static str },

    /// The archive could not be written.
    #[error("could not write {}: {reason}", .path.display())]
    Write { path: PathBuf, reason: String },

    /// An OCI document could not be made.
    #[error("the image's {document} could not be made: {reason}")]
    Document {
        document: &'static str,
        reason: String,
    },
}

/// The result of an image build.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn searched_list(searched: &[PathBuf]) -> String {
    searched
        .iter()
        .map(|dir| dir.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
