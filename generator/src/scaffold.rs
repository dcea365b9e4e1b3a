//! Starting a new operator crate: its `operator.yaml` (and a copy of a local CRD) and a first
//! generation, written together as one change. After that, the crate is regenerated like
//! any other.

use std::path::{Path, PathBuf};

pub use crate::record::NewPrimary;
use crate::{
    CrdSource, Generated, Manifest, Mode, Report, Request, Selection,
    crate_dir::CrateDir,
    crd_document,
    error::{Error, Result},
    model::CommandFlags,
    record::SAVED_CRD,
    write_plan::{Ownership, Plan, PlannedFile},
};

/// What `cargo xtask new` was asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOperator {
    pub dir: PathBuf,
    /// Crate name; defaults to the folder's name.
    pub name: Option<String>,
    pub primary: NewPrimary,
    /// `--allow-http`: a plain-http CRD URL is accepted.
    pub allow_http: bool,
    /// A runtime folder the crate shares with others, recorded in its `operator.yaml` as
    /// `runtime.path`; none for the vendored copy ([`crate::vendor`]).
    pub runtime: Option<crate::vendor::RuntimePath>,
}

/// Creates the crate. Refuses a folder that exists and is not empty, so it never overwrites.
/// A `new` that was killed part-way left its journal: the folder is restored from it first
/// (which removes everything that `new` wrote), so the same command starts over, and a
/// crate that was complete but for its leftovers is refused with the command to regenerate.
pub fn create(new: &NewOperator) -> Result<(Generated, Report)> {
    make_room(&new.dir)?;
    let name = new.name.clone().unwrap_or_else(|| {
        new.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "operator".to_owned())
    });
    crate::naming::check_crate_name(&name).map_err(|reason| flag_error("--name", reason))?;
    check_flags(&new.primary)?;

    let mut files = Vec::new();
    let mut local_crd = None;
    let primary = match &new.primary {
        NewPrimary::Crd {
            source,
            kind,
            version,
            dynamic,
        } => {
            let crd = match CrdSource::parse(source) {
                CrdSource::Url(url) => url,
                local => {
                    // A local CRD is copied in, byte for byte, so the crate regenerates from
                    // anywhere; it is checked first so a bad file writes nothing.
                    let bytes = local.read()?;
                    let origin = local.to_string();
                    let crds = crd_document::parse_all(&origin, &bytes)?;
                    crd_document::select(
                        &origin,
                        crds,
                        &Selection {
                            crd: kind.clone(),
                            version: version.clone(),
                        },
                    )?;
                    let text = String::from_utf8(bytes).map_err(|_| Error::Read {
                        origin: origin.clone(),
                        reason: "not UTF-8".to_owned(),
                    })?;
                    files.push(PlannedFile {
                        path: SAVED_CRD.into(),
                        contents: text.clone(),
                        ownership: Ownership::Scaffold,
                    });
                    local_crd = Some(CrdSource::Read {
                        origin,
                        bytes: text.as_bytes().to_vec(),
                    });
                    SAVED_CRD.to_owned()
                }
            };
            NewPrimary::Crd {
                source: crd,
                kind: kind.clone(),
                version: version.clone(),
                dynamic: *dynamic,
            }
        }
        other => other.clone(),
    };
    let manifest = crate::record::manifest_text(&name, &primary, new.runtime.as_ref());
    let manifest_path = new.dir.join("operator.yaml");
    let request = Request {
        manifest: Manifest::parse(&manifest_path.display().to_string(), &manifest)?,
        manifest_path: Some(manifest_path),
        // A local CRD is read where it is now; the crate's copy holds the same bytes.
        crd: local_crd,
        selection: Selection::default(),
        // The crate regenerates from its own operator.yaml: `gen` in its folder.
        flags: CommandFlags::default(),
        allow_http: new.allow_http,
    };
    files.push(PlannedFile {
        path: "operator.yaml".into(),
        contents: manifest,
        ownership: Ownership::Scaffold,
    });
    write_new(&new.dir, files, &request)
}

/// Restores `dir` if a killed `new` left it half written, then refuses it unless it is empty
/// (or missing), so that `new` never overwrites.
fn make_room(dir: &Path) -> Result<()> {
    crate::write_plan::recover(dir, &crate::render::any_output())?;
    if is_occupied(dir) {
        return Err(Error::Occupied {
            dir: dir.to_owned(),
        });
    }
    Ok(())
}

/// Generates the crate `request` describes and writes it into `dir` with `files` (what records
/// its inputs), as one change: everything is generated in memory first, so a bad input or a
/// failed write leaves no folder behind.
fn write_new(
    dir: &Path,
    files: Vec<PlannedFile>,
    request: &Request,
) -> Result<(Generated, Report)> {
    let generated = crate::generate(request)?;
    if let Some(file) = files
        .iter()
        .find(|file| generated.plan.files.iter().any(|g| g.path == file.path))
    {
        return Err(Error::Manifest {
            location: request.manifest_origin(),
            reason: format!(
                "the new crate would keep a copy of {} where operator-gen writes a file of its \
                 own; move that file elsewhere in the manifest's folder and name it there",
                file.path.display()
            ),
        });
    }
    let plan = Plan::new(files)?.merged(generated.plan.clone())?;
    let report = plan.apply(dir, Mode::Write { force: false })?;
    Ok((generated, report))
}

/// What `new --manifest` was asked for: a crate from an `operator.yaml` written first, so that
/// its first skeleton already shows the relations, webhooks and settings it declares.
#[derive(Debug, Clone, PartialEq)]
pub struct FromManifest {
    pub dir: PathBuf,
    /// The manifest; copied into the crate as its `operator.yaml`.
    pub manifest: PathBuf,
    /// `--allow-http`: a plain-http CRD URL is accepted.
    pub allow_http: bool,
}

/// Creates the crate from its manifest, refusing a folder that is not empty as [`create`]
/// does. The manifest is copied in as it is, comments and all, and each local CRD it names
/// (`primary.crd`, and `crd:` of `owns` and `watches`) beside it at the same relative path,
/// where `gen` in the crate reads it: so each must be a file inside the manifest's folder. A
/// derived primary with no `sample:` gets the one `new --derive` writes, which the types it
/// scaffolds need.
pub fn create_from_manifest(new: &FromManifest) -> Result<(Generated, Report)> {
    make_room(&new.dir)?;
    let origin = new.manifest.display().to_string();
    let mut text = Manifest::read_text(&new.manifest)?;
    let mut manifest = Manifest::parse(&origin, &text)?;
    if manifest.primary == crate::manifest::Primary::default() {
        return Err(Error::Manifest {
            location: format!("{origin}: field `primary`"),
            reason: "a new crate needs its primary: give `crd`, `builtin`, `derive` or `generic`"
                .to_owned(),
        });
    }
    let folder = new.manifest.parent().unwrap_or(Path::new(""));
    let mut files = local_crd_copies(&origin, folder, &manifest)?;
    if manifest.primary.derive.is_some() && manifest.sample.is_none() {
        let with_sample = format!("{}\n{}", text.trim_end(), crate::record::DERIVED_SAMPLE);
        if let Ok(sampled) = Manifest::parse(&origin, &with_sample)
            && sampled.sample.is_some()
            && (Manifest {
                sample: None,
                ..sampled.clone()
            }) == manifest
        {
            (text, manifest) = (with_sample, sampled);
        }
    }
    files.push(PlannedFile {
        path: crate::record::MANIFEST.into(),
        contents: text,
        ownership: Ownership::Scaffold,
    });
    let request = Request {
        manifest,
        // Relative `crd:` paths are read where they are now; the crate's copies hold them.
        manifest_path: Some(new.manifest.clone()),
        crd: None,
        selection: Selection::default(),
        // The crate regenerates from its own operator.yaml: `gen` in its folder.
        flags: CommandFlags::default(),
        allow_http: new.allow_http,
    };
    write_new(&new.dir, files, &request)
}

/// A copy of each local CRD that `manifest` (at `origin`, in `folder`) names, at the path it
/// names: checked to be a CRD file inside the folder, so that a bad one writes nothing.
fn local_crd_copies(origin: &str, folder: &Path, manifest: &Manifest) -> Result<Vec<PlannedFile>> {
    let named = std::iter::once(("primary.crd".to_owned(), &manifest.primary.crd))
        .chain(
            manifest
                .owns
                .iter()
                .enumerate()
                .map(|(i, o)| (format!("owns[{i}].crd"), &o.crd)),
        )
        .chain(
            (manifest.watches.iter().enumerate())
                .map(|(i, w)| (format!("watches[{i}].crd"), &w.crd)),
        );
    let mut copies = std::collections::BTreeMap::new();
    for (field, value) in named {
        let Some(value) = value else { continue };
        if matches!(CrdSource::parse(value), CrdSource::Url(_)) {
            continue;
        }
        let in_field = |reason: String| Error::Manifest {
            location: format!("{origin}: field `{field}`"),
            reason,
        };
        let relative = crate::crd_source::inside(Path::new(value))
            .filter(|path| {
                let ext = path
                    .extension()
                    .and_then(|e| e.to_str())
                    .unwrap_or_default();
                matches!(ext, "yaml" | "yml" | "json")
            })
            .ok_or_else(|| {
                in_field(
                    "the new crate keeps each local CRD at the path its manifest names, so name \
                     a `.yaml`, `.yml` or `.json` file inside the manifest's folder (move the CRD \
                     there), or a URL"
                        .to_owned(),
                )
            })?;
        if copies.contains_key(&relative) {
            continue;
        }
        let source = CrdSource::Named {
            folder: folder.to_owned(),
            path: relative.clone(),
        };
        let bytes = source.read().map_err(|e| in_field(e.to_string()))?;
        crd_document::parse_all(&source.to_string(), &bytes)
            .map_err(|e| in_field(e.to_string()))?;
        let text =
            String::from_utf8(bytes).map_err(|_| in_field("the CRD is not UTF-8".to_owned()))?;
        copies.insert(relative, text);
    }
    Ok(copies
        .into_iter()
        .map(|(path, contents)| PlannedFile {
            path,
            contents,
            ownership: Ownership::Scaffold,
        })
        .collect())
}

/// An error about the value of a command-line flag of `new`.
fn flag_error(flag: &str, reason: String) -> Error {
    Error::Manifest {
        location: flag.to_owned(),
        reason,
    }
}

/// Checks the names given on the command line before they go into a manifest, so an error
/// names the flag that was given rather than a field of a file not written yet.
fn check_flags(primary: &NewPrimary) -> Result<()> {
    use crate::naming::{is_dns_label, is_dns_subdomain, is_kind};
    let builtin = |flag: &str, kind: &str| match crate::k8s_catalog::find(kind) {
        Some(_) => Ok(()),
        None => Err(flag_error(
            flag,
            format!(
                "{kind:?} is not a built-in kind this generator knows; name one such as Deployment or ConfigMap"
            ),
        )),
    };
    match primary {
        NewPrimary::Derived(d) => {
            let checks = [
                (
                    "--derive",
                    &d.kind,
                    is_kind(&d.kind),
                    "ASCII letters and digits, starting with a letter",
                ),
                (
                    "--group",
                    &d.group,
                    is_dns_subdomain(&d.group) && !d.group.is_empty(),
                    "a lowercase DNS subdomain such as example.com",
                ),
                (
                    "--api-version",
                    &d.version,
                    is_dns_label(&d.version),
                    "a lowercase DNS label such as v1",
                ),
            ];
            if let Some((flag, value, _, rule)) = checks.into_iter().find(|(_, _, ok, _)| !ok) {
                return Err(flag_error(flag, format!("{value:?} must be {rule}")));
            }
            if let Some(rule) = crd_document::group_problem(&d.group, false) {
                return Err(flag_error(
                    "--group",
                    format!(
                        "{:?} would be refused by the API server: it must be {rule}",
                        d.group
                    ),
                ));
            }
            if d.also_served.is_empty() {
                return Ok(());
            }
            crate::model::check_versions(&d.version, &d.also_served).map_err(|(field, reason)| {
                let flag = match field {
                    crate::model::VersionField::Version => "--api-version",
                    crate::model::VersionField::AlsoServed => "--also",
                };
                flag_error(flag, reason)
            })
        }
        NewPrimary::Builtin(kind) => builtin("--kind", kind),
        NewPrimary::Generic(kinds) if kinds.is_empty() => Err(flag_error(
            "--kinds",
            "list at least one built-in kind".to_owned(),
        )),
        NewPrimary::Generic(kinds) => kinds.iter().try_for_each(|kind| builtin("--kinds", kind)),
        NewPrimary::Crd { .. } => Ok(()),
    }
}

/// Whether `dir` is a folder `create` would refuse: it holds anything but the half-written
/// journal of a `new` killed before its first file.
pub fn is_occupied(dir: &Path) -> bool {
    CrateDir::new(dir)
        .entries()
        .map(|entries| {
            entries
                .iter()
                .any(|(name, _)| !crate::write_plan::is_staged_journal(name))
        })
        .unwrap_or(true)
}
