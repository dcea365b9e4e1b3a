//! What a generated crate records about its inputs, so that `gen` in its folder needs no
//! flags, and so that no run replaces one operator with another unasked.
//!
//! - [`manifest_text`] writes an `operator.yaml`: `new` writes one for every crate it starts,
//!   and [`first_manifest`] writes one when `gen --crd` meets a crate that has none. It holds
//!   where the CRD comes from (a file relative to the manifest, a URL as given, stdin saved as
//!   `crd.yaml` beside it), the kind and the version. Once written it is the user's, and never
//!   overwritten.
//! - Cargo.toml's `[package.metadata.operator-gen] primary` names the CRD a crate was generated
//!   for, and [`check_primary`] refuses a run that would generate another without `--force`.

use std::path::{Component, Path, PathBuf};

use crate::{
    CrdSource, Mode,
    crate_dir::CrateDir,
    error::{Error, Result},
    limits::MAX_CRATE_FILE_BYTES,
    manifest::Derived,
    model::Operator,
    vendor::RuntimePath,
    write_plan::{Ownership, PlannedFile},
};

pub use crate::crate_dir::{MANIFEST, SAVED_CRD};

/// Which archetype of primary object a new operator reconciles, as its first `operator.yaml`
/// records it ([`manifest_text`]): what `new` was asked for ([`crate::scaffold`]), or the CRD
/// a first `gen --crd` read ([`first_manifest`]).
#[derive(Debug, Clone, PartialEq)]
pub enum NewPrimary {
    /// An imported CRD: types from kopium, or `DynamicObject` when `dynamic`.
    Crd {
        source: String,
        kind: Option<String>,
        version: Option<String>,
        dynamic: bool,
    },
    /// A k8s-openapi kind such as `Deployment`.
    Builtin(String),
    /// A custom resource defined in Rust.
    Derived(Derived),
    /// Built-in kinds reconciled on metadata only.
    Generic(Vec<String>),
}

/// The `operator.yaml` of a crate named `name` whose primary is `primary`, and whose runtime
/// is the folder `runtime` when given. Every value goes through the YAML serializer, so text
/// from a CRD or a command line stays one scalar.
pub fn manifest_text(name: &str, primary: &NewPrimary, runtime: Option<&RuntimePath>) -> String {
    let runtime = runtime
        .map(|path| format!("runtime:\n  path: {}\n", yaml_string(path.as_str())))
        .unwrap_or_default();
    format!(
        "# The operator's manifest: see \"Manifest reference\" in operator-gen's README.
# Edit it and run `operator-gen gen` in this folder to regenerate the generated files.
name: {name}
primary:
{primary}
{runtime}# owns: [{{ kind: ConfigMap }}]
# watches: [{{ kind: Secret, map: {{ label: example.com/owner }} }}]
# external: [{{ name: registry, source: poll, interval: 1m }}]
",
        name = yaml_string(name),
        primary = primary_lines(primary),
    ) + sample_lines(primary)
}

/// The sample a derived primary's shipped tests create, for the types `new` writes (a
/// required `message`): no schema gives one before those types are compiled.
pub const DERIVED_SAMPLE: &str =
    "# The object the shipped tests create: its fields beside `metadata`, which must fit
# src/types.rs. Change it with the types.
sample:
  spec:
    message: example
";

fn sample_lines(primary: &NewPrimary) -> &'static str {
    match primary {
        NewPrimary::Derived(_) => DERIVED_SAMPLE,
        _ => "",
    }
}

fn primary_lines(primary: &NewPrimary) -> String {
    match primary {
        NewPrimary::Crd {
            source,
            kind,
            version,
            dynamic,
        } => {
            let mut lines = vec![format!("  crd: {}", yaml_string(source))];
            lines.extend(kind.as_ref().map(|k| format!("  kind: {}", yaml_string(k))));
            lines.extend(
                version
                    .as_ref()
                    .map(|v| format!("  version: {}", yaml_string(v))),
            );
            if *dynamic {
                lines.push("  dynamic: true".to_owned());
            }
            lines.join("\n")
        }
        NewPrimary::Builtin(kind) => format!("  builtin: {}", yaml_string(kind)),
        NewPrimary::Derived(d) => {
            let mut lines = vec![
                "  derive:".to_owned(),
                format!("    kind: {}", yaml_string(&d.kind)),
                format!("    group: {}", yaml_string(&d.group)),
                format!("    version: {}", yaml_string(&d.version)),
            ];
            lines.extend(
                d.plural
                    .as_ref()
                    .map(|p| format!("    plural: {}", yaml_string(p))),
            );
            lines.push(format!("    namespaced: {}", d.namespaced));
            if !d.also_served.is_empty() {
                let versions: Vec<String> = d.also_served.iter().map(|v| yaml_string(v)).collect();
                lines.push(format!("    alsoServed: [{}]", versions.join(", ")));
            }
            lines.join("\n")
        }
        NewPrimary::Generic(kinds) => {
            let kinds: Vec<String> = kinds.iter().map(|k| yaml_string(k)).collect();
            format!("  generic: [{}]", kinds.join(", "))
        }
    }
}

/// `text` as a YAML scalar, from the YAML serializer.
fn yaml_string(text: &str) -> String {
    crate::text::Text::from(text).yaml()
}

/// The files that record a `gen --crd` run's inputs in `out`, which has no manifest: the
/// manifest itself, and the CRD when it came from stdin and has no other home. `source` is
/// the CRD as the run read it (stdin already read, as [`CrdSource::Read`]); `kind` is the
/// `--kind` given, which picked the CRD out of its source, else the CRD's own kind.
pub fn first_manifest(
    source: &CrdSource,
    out: &Path,
    kind: Option<&str>,
    operator: &Operator,
) -> Result<Vec<PlannedFile>> {
    let mut files = Vec::new();
    let recorded = match source {
        CrdSource::Url(url) => url.clone(),
        CrdSource::File(path) => relative_to(path, out)?,
        CrdSource::Named { folder, path } => relative_to(&folder.join(path), out)?,
        CrdSource::Stdin | CrdSource::Read { .. } => {
            files.push(saved_crd(source, out)?);
            SAVED_CRD.to_owned()
        }
    };
    let primary = &operator.primary;
    let manifest = manifest_text(
        operator.krate.name.raw(),
        &NewPrimary::Crd {
            source: recorded,
            kind: Some(kind.unwrap_or(primary.kind.raw()).to_owned()),
            version: Some(primary.version.raw().to_owned()),
            dynamic: false,
        },
        None,
    );
    files.push(PlannedFile {
        path: MANIFEST.into(),
        contents: manifest,
        ownership: Ownership::Scaffold,
    });
    Ok(files)
}

/// The CRD read from stdin, as `crd.yaml` in `out`. A `crd.yaml` already there with other
/// bytes is the user's and is kept, so the run is refused rather than record a manifest
/// that would name the wrong CRD.
fn saved_crd(source: &CrdSource, out: &Path) -> Result<PlannedFile> {
    let bytes = source.read()?;
    let origin = source.to_string();
    let text = String::from_utf8(bytes).map_err(|e| Error::Read {
        origin: origin.clone(),
        reason: format!(
            "not valid UTF-8 at byte {}; a CRD is saved as text beside operator.yaml",
            e.utf8_error().valid_up_to()
        ),
    })?;
    let path = out.join(SAVED_CRD);
    let existing = CrateDir::new(out).read(Path::new(SAVED_CRD), MAX_CRATE_FILE_BYTES)?;
    if let Some(existing) = existing
        && existing != text.as_bytes()
    {
        return Err(Error::Read {
            origin,
            reason: format!(
                "{} exists with other contents, and the CRD from stdin would be saved there; pass that file with --crd, or move it away",
                path.display()
            ),
        });
    }
    Ok(PlannedFile {
        path: SAVED_CRD.into(),
        contents: text,
        ownership: Ownership::Scaffold,
    })
}

/// `file` as a path relative to `dir`, with `/` separators, so the manifest in `dir` finds
/// it from wherever a later run starts.
fn relative_to(file: &Path, dir: &Path) -> Result<String> {
    let (file_abs, dir_abs) = (resolved(file)?, resolved(dir)?);
    let relative = pathdiff::diff_paths(&file_abs, &dir_abs).unwrap_or(file_abs);
    let parts = relative
        .components()
        .map(|c| match c {
            Component::Normal(part) => part.to_str().map(str::to_owned),
            Component::ParentDir => Some("..".to_owned()),
            Component::RootDir => Some(String::new()),
            other => other.as_os_str().to_str().map(str::to_owned),
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Error::Read {
            origin: file.display().to_string(),
            reason:
                "the path is not valid UTF-8, so operator.yaml cannot record it; rename the file"
                    .to_owned(),
        })?;
    Ok(parts.join("/"))
}

/// `path` as the OS resolves it, symlinks followed, so that a relative path between two of
/// them leads where the OS will go. A path that does not exist yet (an `--out` folder about
/// to be made) is resolved through its nearest existing ancestor.
fn resolved(path: &Path) -> Result<PathBuf> {
    let absolute = std::path::absolute(path).map_err(|e| Error::Read {
        origin: path.display().to_string(),
        reason: format!("cannot resolve the path: {e}"),
    })?;
    let mut existing = absolute.as_path();
    let mut missing = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return Ok(missing
                .iter()
                .rev()
                .fold(real, |path, name| path.join(name)));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_owned());
                existing = parent;
            }
            _ => return Ok(crate::normalize(&absolute)),
        }
    }
}

/// Refuses to write `operator` over a crate in `out` that Cargo.toml records as generated for
/// another primary, unless `mode` forces it. A crate that records none (made before the
/// record existed, or not yet made) passes.
pub fn check_primary(out: &Path, operator: &Operator, mode: Mode) -> Result<()> {
    if mode == (Mode::Write { force: true }) {
        return Ok(());
    }
    let given = operator.primary.crd_name.raw();
    match recorded_primary(out)? {
        Some(recorded) if recorded != given => Err(Error::OtherPrimary {
            dir: out.to_owned(),
            recorded,
            given: given.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// The primary `out/Cargo.toml` records. A Cargo.toml that does not parse records none: the
/// writer reports it as edited by hand.
fn recorded_primary(out: &Path) -> Result<Option<String>> {
    let Some(bytes) = CrateDir::new(out).read(Path::new("Cargo.toml"), MAX_CRATE_FILE_BYTES)?
    else {
        return Ok(None);
    };
    let Ok(table) = std::str::from_utf8(&bytes)
        .unwrap_or_default()
        .parse::<toml::Table>()
    else {
        return Ok(None);
    };
    Ok(table
        .get("package")
        .and_then(|p| p.get("metadata"))
        .and_then(|m| m.get("operator-gen"))
        .and_then(|o| o.get("primary"))
        .and_then(|p| p.as_str())
        .map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_recorded_relative_to_the_crate_with_forward_slashes() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("ops/widget");
        let crd = tmp.path().join("crds/widget.yaml");
        assert_eq!(relative_to(&crd, &out).unwrap(), "../../crds/widget.yaml");
        let inside = out.join("crd.yaml");
        assert_eq!(relative_to(&inside, &out).unwrap(), "crd.yaml");
        let dotted = tmp.path().join("ops/./widget/../widget/x.yaml");
        assert_eq!(relative_to(&dotted, &out).unwrap(), "x.yaml");
    }

    #[cfg(unix)]
    #[test]
    fn a_path_through_a_symlink_is_recorded_from_where_the_link_leads() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("real/deep")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("real/deep"), tmp.path().join("link")).unwrap();
        let crd = tmp.path().join("real/crd.yaml");
        std::fs::write(&crd, "").unwrap();
        // From link/op, the OS takes `..` to real/, not to the folder holding the link.
        let out = tmp.path().join("link/op");
        let recorded = relative_to(&crd, &out).unwrap();
        assert_eq!(recorded, "../../crd.yaml");
        std::fs::create_dir_all(&out).unwrap();
        assert!(out.join(&recorded).exists());
    }

    #[test]
    fn a_manifest_holds_hostile_values_as_single_scalars() {
        let text = manifest_text(
            "op",
            &NewPrimary::Crd {
                source: "x.yaml\nowns: [{kind: Secret}]".to_owned(),
                kind: Some("W # c".to_owned()),
                version: Some("v1".to_owned()),
                dynamic: false,
            },
            Some(&RuntimePath::relative("../rt # owns: [{kind: Secret}]").unwrap()),
        );
        let parsed = crate::Manifest::parse("operator.yaml", &text).unwrap();
        assert!(parsed.owns.is_empty(), "{text}");
        assert_eq!(
            parsed.primary.crd.as_deref(),
            Some("x.yaml\nowns: [{kind: Secret}]")
        );
        assert_eq!(parsed.primary.kind.as_deref(), Some("W # c"));
        assert_eq!(
            parsed.runtime.map(|r| r.path.to_string()).as_deref(),
            Some("../rt # owns: [{kind: Secret}]")
        );
    }

    #[test]
    fn stdin_is_saved_beside_the_manifest_unless_another_crd_yaml_is_there() {
        let tmp = tempfile::tempdir().unwrap();
        let stdin = CrdSource::Read {
            origin: "stdin".to_owned(),
            bytes: b"kind: CustomResourceDefinition\n".to_vec(),
        };
        let saved = saved_crd(&stdin, tmp.path()).unwrap();
        assert_eq!(saved.path, PathBuf::from(SAVED_CRD));
        assert_eq!(saved.ownership, Ownership::Scaffold);
        std::fs::write(tmp.path().join(SAVED_CRD), "kind: Other\n").unwrap();
        let err = saved_crd(&stdin, tmp.path()).unwrap_err().to_string();
        assert!(err.contains("crd.yaml exists with other contents"), "{err}");
        std::fs::write(
            tmp.path().join(SAVED_CRD),
            "kind: CustomResourceDefinition\n",
        )
        .unwrap();
        assert!(saved_crd(&stdin, tmp.path()).is_ok());
    }

    #[test]
    fn a_cargo_toml_records_the_primary_it_was_generated_for() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(recorded_primary(tmp.path()).unwrap(), None);
        std::fs::write(
            tmp.path().join("Cargo.toml"),
            "[package]\nname = \"x\"\n[package.metadata.operator-gen]\nprimary = \"widgets.example.com\"\n",
        )
        .unwrap();
        assert_eq!(
            recorded_primary(tmp.path()).unwrap().as_deref(),
            Some("widgets.example.com")
        );
        std::fs::write(tmp.path().join("Cargo.toml"), "[package\n").unwrap();
        assert_eq!(recorded_primary(tmp.path()).unwrap(), None);
    }
}
