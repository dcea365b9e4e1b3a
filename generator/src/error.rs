//! The one error type of the generator, with the context a person needs to act on it.

use std::path::PathBuf;

/// Everything that can stop a generation run.
///
/// Each message names the input (file, URL or stdin), the place in it (a field, a JSON path or
/// a line and column) and what to do about it, because these end up in front of a person.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CRD source could not be read.
    #[error("could not read {origin}: {reason}")]
    Read { origin: String, reason: String },

    /// An HTTP fetch failed: a status, a timeout, a refused connection or an oversized body.
    #[error("could not fetch {url}: {reason}")]
    Fetch { url: String, reason: String },

    /// An input went over a cap in [`crate::limits`]: too large, too slow, too deeply nested,
    /// or expanding to too much; `reason` names the cap and its value.
    #[error("{origin}: {reason}")]
    Limit { origin: String, reason: String },

    /// The input is not YAML or JSON at all.
    #[error("{origin} is not YAML or JSON: {reason}")]
    Syntax { origin: String, reason: String },

    /// The input parsed, but holds nothing usable as a CustomResourceDefinition.
    #[error("{origin}: {reason}")]
    NotACrd { origin: String, reason: String },

    /// Several CRDs were found and the selection did not narrow them to one.
    #[error("{origin} holds {} CustomResourceDefinitions; pick one with --kind or by CRD name: {}", .available.len(), .available.join(", "))]
    Ambiguous {
        origin: String,
        available: Vec<String>,
    },

    /// `--kind` or a CRD name matched nothing.
    #[error("{origin} has no CustomResourceDefinition matching {wanted:?}; it holds: {}", .available.join(", "))]
    NoSuchCrd {
        origin: String,
        wanted: String,
        available: Vec<String>,
    },

    /// `--version` names a version the CRD does not serve.
    #[error("{origin}: CRD {crd} does not serve version {wanted:?}; served versions: {}", .served.join(", "))]
    NoSuchVersion {
        origin: String,
        crd: String,
        wanted: String,
        served: Vec<String>,
    },

    /// The selected version has no `schema.openAPIV3Schema`.
    #[error(
        "{origin}: CRD {crd} version {version} has no schema at spec.versions[{index}].schema.openAPIV3Schema; a structural schema is required to generate types"
    )]
    NoSchema {
        origin: String,
        crd: String,
        version: String,
        index: usize,
    },

    /// The operator manifest is malformed; `location` is `file:line:column` where known.
    #[error("{location}: {reason}")]
    Manifest { location: String, reason: String },

    /// kopium could not turn the schema into Rust.
    #[error("{origin}: kopium could not generate types for {crd} {version}: {reason}")]
    Kopium {
        origin: String,
        crd: String,
        version: String,
        reason: String,
    },

    /// Generated Rust did not parse. This is a generator bug, caught before it reaches a user's build.
    #[error(
        "generated {file} is not valid Rust ({reason}); this is a bug in operator-gen, please report it with the CRD that triggered it"
    )]
    InvalidRust { file: String, reason: String },

    /// A template failed to render. Also a generator bug.
    #[error("rendering template {template}: {reason}")]
    Template { template: String, reason: String },

    /// Writing the output failed.
    #[error("writing {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },

    /// `new` was pointed at a folder that already holds files.
    #[error("{} exists and is not empty; `new` only creates. To regenerate an existing operator run `cargo xtask gen --out {}`", .dir.display(), .dir.display())]
    Occupied { dir: PathBuf },

    /// A generated file was edited by hand, so rewriting it would lose that edit.
    #[error("{} was edited by hand since it was generated; move the change into a user-owned file (src/reconcile.rs) or rerun with --force to overwrite it", .path.display())]
    HandEdited { path: PathBuf },
}

/// The generator's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
