//! operator-gen turns a CustomResourceDefinition and an `operator.yaml` manifest into a
//! kube-rs operator crate.
//!
//! The pipeline runs one way, each stage a module: [`crd_source`] reads bytes (URL, file,
//! stdin), [`crd_document`] finds the CRD and version in them, [`manifest`] parses the
//! relations, [`model`] analyzes both into a typed model (running kopium through
//! [`rust_types`] and deciding every name in [`naming`]), [`render`] turns the model into a
//! [`write_plan::Plan`] through the Tera templates in `templates/`, and
//! [`write_plan`] is the only code that writes to disk. [`record`] keeps what a crate needs to
//! regenerate from its own folder: the manifest a first run leaves, and the primary a later run
//! must match; [`migration`] tells crates made by an older generator what to move, `leftovers`
//! names what an earlier `deploy/` left in a namespace the operator has moved out of, and
//! [`user_types`] refuses a run whose code the user's own `src/types.rs` could not hold; [`vendor`]
//! says where a crate's runtime comes from, and holds the copy of it a crate carries. Text from the inputs reaches files only
//! as [`text`]'s escaped values, which [`render`] enforces. [`generate`] strings them together,
//! [`job::Job`] is the command-line view of a run, and [`scaffold`] starts a new crate
//! (its manifest, then a first run). [`k8s_catalog`], [`schema_path`] and [`schema_sample`]
//! answer questions about built-in kinds, field paths and least valid objects for the model,
//! and [`schema_check`] checks a value (the manifest's `sample:`) against a CRD schema as the
//! API server would, and [`cel`] evaluates the CRD's CEL rules on the sample, so that a refused
//! sample names its rule before any API server sees it.
//! Every input comes from strangers and is read within the caps in [`limits`].

pub mod cel;
pub mod crate_dir;
pub mod crd_document;
pub mod crd_source;
pub mod error;
pub mod go_template;
pub mod job;
pub mod k8s_catalog;
mod leftovers;
pub mod limits;
pub mod manifest;
pub mod migration;
pub mod model;
pub mod naming;
mod parallel;
pub mod record;
pub mod render;
mod runtime_path;
pub mod rust_types;
pub mod scaffold;
pub mod schema_check;
pub mod schema_path;
pub mod schema_sample;
mod schema_tree;
pub mod text;
pub mod user_types;
pub mod vendor;
pub mod write_plan;

use std::path::{Path, PathBuf};

use crate::{crd_document::SelectedCrd, model::RelatedCrd};
pub use crate::{
    crd_document::Selection,
    crd_source::CrdSource,
    error::{Error, Result},
    job::Job,
    manifest::Manifest,
    write_plan::{Mode, Outcome, Plan, Report},
};

/// One generation job, as the command line describes it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The manifest, and the file it came from (relative `crd:` paths resolve against it).
    pub manifest: Manifest,
    pub manifest_path: Option<PathBuf>,
    /// Overrides `primary.crd` in the manifest.
    pub crd: Option<CrdSource>,
    /// Overrides `primary.kind` / `primary.version` in the manifest.
    pub selection: Selection,
    /// Which flags the command line gave, for the regenerate command in generated headers.
    pub flags: model::CommandFlags,
    /// Accept plain `http://` CRD URLs (`--allow-http`), from the command line and the
    /// manifest alike, and redirects from https to http. Off by default: a CRD fetched
    /// without TLS can be altered on the way, and generated code follows it.
    pub allow_http: bool,
}

/// What a generation produced before it touched disk.
#[derive(Debug, Clone)]
pub struct Generated {
    pub plan: Plan,
    pub operator: model::Operator,
    /// Where the primary's CRD came from, a path or URL as typed, when the primary is a CRD:
    /// the command's report names it.
    pub origin: Option<String>,
    /// Things the generator worked around and a person should know: the command prints them.
    pub warnings: Vec<String>,
}

impl Request {
    pub(crate) fn manifest_origin(&self) -> String {
        self.manifest_path.as_ref().map_or_else(
            || "operator.yaml (defaults)".to_owned(),
            |p| p.display().to_string(),
        )
    }

    /// Resolves a `crd:` value from the manifest against the manifest's folder. A path is a
    /// [`CrdSource::Named`] file, `-` included: a manifest never reads stdin.
    fn manifest_source(&self, value: &str) -> CrdSource {
        match CrdSource::parse(value) {
            CrdSource::Url(url) => CrdSource::Url(url),
            _ => CrdSource::Named {
                folder: self
                    .manifest_path
                    .as_deref()
                    .and_then(Path::parent)
                    .unwrap_or(Path::new(""))
                    .to_owned(),
                path: PathBuf::from(value),
            },
        }
    }

    /// `error`, which came from input that the manifest's `field` named, said as being
    /// about that field, so the person knows which line of their manifest to look at.
    fn in_field(&self, field: &str, error: Error) -> Error {
        Error::Manifest {
            location: format!("{}: field `{field}`", self.manifest_origin()),
            reason: error.to_string(),
        }
    }

    /// Which manifest field, if any, an error loading the primary CRD is about: the source
    /// when it could not be read or parsed, the kind or version when selection failed, and
    /// none when the command line gave the value instead.
    fn primary_field(&self, error: &Error) -> Option<&'static str> {
        let primary = &self.manifest.primary;
        match error {
            Error::NoSuchCrd { .. } | Error::Ambiguous { .. } => {
                (self.selection.crd.is_none() && primary.kind.is_some()).then_some("primary.kind")
            }
            Error::NoSuchVersion { .. } => (self.selection.version.is_none()
                && primary.version.is_some())
            .then_some("primary.version"),
            _ => self.crd.is_none().then_some("primary.crd"),
        }
    }

    fn primary_source(&self) -> Result<CrdSource> {
        if let Some(source) = &self.crd {
            return Ok(source.clone());
        }
        match &self.manifest.primary.crd {
            Some(value) => Ok(self.manifest_source(value)),
            None => Err(Error::Manifest {
                location: self.manifest_origin(),
                reason:
                    "no CRD given: pass --crd <url|file|-> or set `primary.crd` in the manifest"
                        .to_owned(),
            }),
        }
    }
}

/// Loads a source and selects one CRD version from it; `allow_http` as in
/// [`Request::allow_http`].
pub fn load(source: &CrdSource, selection: &Selection, allow_http: bool) -> Result<SelectedCrd> {
    let origin = source.to_string();
    let bytes = source.read_with(allow_http)?;
    let crds = crd_document::parse_all(&origin, &bytes).map_err(|e| source.unquoted(e))?;
    crd_document::select(&origin, crds, selection)
}

/// Reads every input the request names and renders the crate in memory.
///
/// Runs on a thread of its own with a large stack ([`limits::with_deep_stack`]): every stage
/// walks the input recursively, and the caps bound how deep, not how much stack a build's
/// frames take.
pub fn generate(request: &Request) -> Result<Generated> {
    limits::with_deep_stack(|| generate_here(request))
}

fn generate_here(request: &Request) -> Result<Generated> {
    let manifest = &request.manifest;
    let input = primary_input(request)?;
    let named = manifest
        .owns
        .iter()
        .enumerate()
        .map(|(i, o)| (manifest::Owned::field(i), &o.kind, &o.crd))
        .chain(
            manifest
                .watches
                .iter()
                .enumerate()
                .map(|(i, w)| (manifest::Watched::field(i), &w.kind, &w.crd)),
        );
    let mut related = Vec::new();
    for (field, kind, crd) in named {
        if let Some(value) = crd {
            let selection = Selection {
                crd: Some(kind.clone()),
                version: None,
            };
            let selected = load(
                &request.manifest_source(value),
                &selection,
                request.allow_http,
            )
            .map_err(|e| request.in_field(&field, e))?;
            related.push(RelatedCrd { field, selected });
        }
    }
    let model::Analysis {
        operator,
        origin,
        warnings,
    } = model::analyze(
        &request.manifest_origin(),
        manifest,
        &input,
        &related,
        request.flags,
    )?;
    let plan = render::render(&operator)?;
    Ok(Generated {
        plan,
        operator,
        origin,
        warnings,
    })
}

/// Resolves the manifest's `primary` (and the command line's overrides) to one archetype.
fn primary_input(request: &Request) -> Result<model::PrimaryInput> {
    let primary = &request.manifest.primary;
    let bad = |field: &str, reason: String| Error::Manifest {
        location: format!("{}: field `primary.{field}`", request.manifest_origin()),
        reason,
    };
    let has_crd = request.crd.is_some() || primary.crd.is_some();
    let chosen = [
        has_crd,
        primary.builtin.is_some(),
        primary.derive.is_some(),
        primary.generic.is_some(),
    ];
    if chosen.iter().filter(|c| **c).count() > 1 {
        return Err(bad(
            "crd",
            "give one of `crd`, `builtin`, `derive` and `generic`".to_owned(),
        ));
    }
    if primary.dynamic && !has_crd {
        return Err(bad(
            "dynamic",
            "a dynamic operator needs `crd:` to describe its resource".to_owned(),
        ));
    }
    let builtin = |field: &str, kind: &str| {
        k8s_catalog::find(kind).ok_or_else(|| {
            let known: Vec<&str> = k8s_catalog::all().iter().map(|k| k.kind).collect();
            bad(
                field,
                format!(
                    "unknown built-in kind {kind:?}; known kinds: {}",
                    known.join(", ")
                ),
            )
        })
    };
    if let Some(kind) = &primary.builtin {
        return Ok(model::PrimaryInput::Builtin(builtin("builtin", kind)?));
    }
    if let Some(derived) = &primary.derive {
        return Ok(model::PrimaryInput::Derived(derived.clone()));
    }
    if let Some(kinds) = &primary.generic {
        if kinds.is_empty() {
            return Err(bad("generic", "list at least one built-in kind".to_owned()));
        }
        let kinds = kinds
            .iter()
            .map(|k| builtin("generic", k))
            .collect::<Result<Vec<_>>>()?;
        return Ok(model::PrimaryInput::Generic(kinds));
    }
    let selection = Selection {
        crd: request
            .selection
            .crd
            .clone()
            .or_else(|| primary.kind.clone()),
        version: request
            .selection
            .version
            .clone()
            .or_else(|| primary.version.clone()),
    };
    let selected = load(&request.primary_source()?, &selection, request.allow_http).map_err(
        |e| match request.primary_field(&e) {
            Some(field) => request.in_field(field, e),
            None => e,
        },
    )?;
    Ok(model::PrimaryInput::Crd {
        selected: Box::new(selected),
        dynamic: primary.dynamic,
    })
}

/// Removes `.` and `dir/..` pairs without touching the filesystem, so paths in messages read
/// `crds/x.yaml` rather than `generated/op/../../crds/x.yaml`.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
