//! The one error type of the generator, with the context a person needs to act on it.

use std::path::PathBuf;

use crate::text::{shown, shown_path};

/// Everything that can stop a generation run.
///
/// Each message names the input (file, URL or stdin), the place in it (a field, a JSON path or
/// a line and column) and what to do about it, because these end up in front of a person.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CRD source could not be read.
    #[error("could not read {}: {}", shown(&.origin), shown(&.reason))]
    Read { origin: String, reason: String },

    /// An HTTP fetch failed: a status, a timeout, a refused connection or an oversized body.
    #[error("could not fetch {}: {}", shown(&.url), shown(&.reason))]
    Fetch { url: String, reason: String },

    /// An input went over a cap in [`crate::limits`]: too large, too slow, too deeply nested,
    /// or expanding to too much; `reason` names the cap and its value.
    #[error("{}: {}", shown(&.origin), shown(&.reason))]
    Limit { origin: String, reason: String },

    /// The input is not YAML or JSON at all.
    #[error("{} is not YAML or JSON: {}", shown(&.origin), shown(&.reason))]
    Syntax { origin: String, reason: String },

    /// The input parsed, but holds nothing usable as a CustomResourceDefinition.
    #[error("{}: {}", shown(&.origin), shown(&.reason))]
    NotACrd { origin: String, reason: String },

    /// Several CRDs were found and the selection did not narrow them to one.
    #[error("{} holds {} CustomResourceDefinitions; pick one with --kind or by CRD name: {}", shown(&.origin), shown(&.available.len()), shown(&.available.join(", ")))]
    Ambiguous {
        origin: String,
        available: Vec<String>,
    },

    /// `--kind` or a CRD name matched nothing.
    #[error("{} has no CustomResourceDefinition matching {:?}; it holds: {}", shown(&.origin), .wanted, shown(&.available.join(", ")))]
    NoSuchCrd {
        origin: String,
        wanted: String,
        available: Vec<String>,
    },

    /// `--version` names a version the CRD does not serve.
    #[error("{}: CRD {} does not serve version {:?}; served versions: {}", shown(&.origin), shown(&.crd), .wanted, shown(&.served.join(", ")))]
    NoSuchVersion {
        origin: String,
        crd: String,
        wanted: String,
        served: Vec<String>,
    },

    /// The selected version has no `schema.openAPIV3Schema`.
    #[error("{}: CRD {} version {} has no schema at spec.versions[{}].schema.openAPIV3Schema; a structural schema is required to generate types", shown(&.origin), shown(&.crd), shown(&.version), shown(&.index))]
    NoSchema {
        origin: String,
        crd: String,
        version: String,
        index: usize,
    },

    /// The operator manifest is malformed; `location` is `file:line:column` where known.
    #[error("{}: {}", shown(&.location), shown(&.reason))]
    Manifest { location: String, reason: String },

    /// kopium could not turn the schema into Rust.
    #[error("{}: kopium could not generate types for {} {}: {}", shown(&.origin), shown(&.crd), shown(&.version), shown(&.reason))]
    Kopium {
        origin: String,
        crd: String,
        version: String,
        reason: String,
    },

    /// Generated Rust did not parse. This is a generator bug, caught before it reaches a user's build.
    #[error("generated {} is not valid Rust ({}); this is a bug in operator-gen, please report it with the CRD that triggered it", shown(&.file), shown(&.reason))]
    InvalidRust { file: String, reason: String },

    /// A template failed to render. Also a generator bug.
    #[error("rendering template {}: {}", shown(&.template), shown(&.reason))]
    Template { template: String, reason: String },

    /// Writing the output failed.
    #[error("writing {}: {}", shown_path(.path), shown(&.source))]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },

    /// `new` was pointed at a folder that already holds files.
    #[error("{} exists and is not empty; `new` only creates. To regenerate an existing operator run `gen` in its folder, or `gen --out {}`", shown_path(.dir), shown_path(.dir))]
    Occupied { dir: PathBuf },

    /// `--out` names a folder that cannot become a crate: the root folder, the home folder,
    /// or one holding files other than a crate's own.
    #[error("{} {}; point --out at a new or empty folder, or at a crate operator-gen made", shown_path(.dir), shown(&.reason))]
    UnfitOut { dir: PathBuf, reason: String },

    /// `--out` holds a Cargo project that operator-gen did not make; writing would overwrite
    /// its Cargo.toml.
    #[error("{} holds a Cargo project not made by operator-gen (its Cargo.toml has no operator-gen header); point --out at an empty folder or at a crate operator-gen generated", shown_path(.dir))]
    ForeignCrate { dir: PathBuf },

    /// `--out` holds an operator generated for another primary than this run's; writing would
    /// replace one operator's generated code with another's beside the first one's user code.
    #[error("{} holds the operator generated for {}, and this run generates one for {}; point --out at another folder, or pass --force to replace its generated files (the files you own are kept)", shown_path(.dir), shown(&.recorded), shown(&.given))]
    OtherPrimary {
        dir: PathBuf,
        recorded: String,
        given: String,
    },

    /// A file the user owns no longer fits the code the manifest asks for.
    #[error("{} (yours) {}", shown_path(.path), shown(&.reason))]
    UserFile { path: PathBuf, reason: String },

    /// A write was interrupted (killed) and left its journal; check mode cannot restore it.
    #[error("an interrupted run left {}; run the same command without --check to restore the folder first", shown_path(.journal))]
    Interrupted { journal: PathBuf },

    /// The journal of an interrupted write cannot be read, or describes a write operator-gen
    /// could not have made, so it is not used to restore the folder.
    #[error("{} is not a journal operator-gen can restore the folder from ({}); if it came with the folder (a clone, an archive), delete it; if a run of operator-gen was interrupted here, compare the folder with version control, then delete it", shown_path(.path), shown(&.reason))]
    Journal { path: PathBuf, reason: String },

    /// Something is at a name where a write keeps a file's backup or new version, and no
    /// journal accounts for it, so the write refuses it rather than removing it or taking it
    /// for its own.
    #[error("{} is in the way: it is {} where operator-gen keeps the {} of {} while it writes it, and no interrupted run's journal lists it; it is the leftover of an interrupted run, or it came with the folder (a clone, an archive). Nothing was written: look at it, remove it, and run again", shown_path(.path), .found, .role, shown_path(.target))]
    InTheWay {
        path: PathBuf,
        /// What is there: `a file`, `a symbolic link`, ...
        found: &'static str,
        /// `backup` or `new version`.
        role: &'static str,
        /// The file being written, relative to the crate folder.
        target: PathBuf,
    },

    /// Reading or writing below the crate folder failed, or met a link, a special file or a
    /// file too large to be operator-gen's; or another run is writing the folder.
    #[error(transparent)]
    CrateDir(#[from] crate::crate_dir::Error),

    /// A generated file was edited by hand, so rewriting it would lose that edit.
    #[error("{} was edited by hand since it was generated; move the change into a user-owned file (src/reconcile.rs) or rerun with --force to overwrite it", shown_path(.path))]
    HandEdited { path: PathBuf },

    /// A file in a folder whose every file the generator writes (the vendored runtime, the
    /// chart's `templates/`) that it would remove, but did not write as it is: planted there,
    /// or edited. Helm installs whatever the chart's folders hold.
    #[error("{} is in a folder whose every file operator-gen writes, and is not as it wrote it; Helm and Cargo would use it as if it were: move it out of the folder, or rerun with --force to remove it", shown_path(.path))]
    NotGenerated { path: PathBuf },
}

/// The generator's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
