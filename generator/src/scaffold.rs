//! Starting a new operator crate: its `operator.yaml` (and a copy of a local CRD), then a
//! first generation. After that, the crate is regenerated like any other.

use std::path::{Path, PathBuf};

use crate::{
    CrdSource, Generated, Job, Mode, Report, Selection, crd_document,
    error::{Error, Result},
    manifest::Derived,
    write_plan::{Ownership, Plan, PlannedFile},
};

/// Which archetype of primary object the new operator reconciles.
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

/// What `cargo xtask new` was asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOperator {
    pub dir: PathBuf,
    /// Crate name; defaults to the folder's name.
    pub name: Option<String>,
    pub primary: NewPrimary,
}

/// Creates the crate. Refuses a folder that exists and is not empty, so it never overwrites.
pub fn create(new: &NewOperator) -> Result<(Generated, Report)> {
    if is_occupied(&new.dir) {
        return Err(Error::Occupied {
            dir: new.dir.clone(),
        });
    }
    let name = new.name.clone().unwrap_or_else(|| {
        new.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "operator".to_owned())
    });
    crate::naming::check_crate_name(&name).map_err(|reason| Error::Manifest {
        location: "--name".to_owned(),
        reason,
    })?;

    let mut files = Vec::new();
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
                        origin,
                        reason: "not UTF-8".to_owned(),
                    })?;
                    files.push(PlannedFile {
                        path: "crd.yaml".into(),
                        contents: text,
                        ownership: Ownership::Scaffold,
                    });
                    "crd.yaml".to_owned()
                }
            };
            let mut lines = vec![format!("  crd: {}", yaml_string(&crd))];
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
            lines.join("\n")
        }
        NewPrimary::Generic(kinds) => {
            let kinds: Vec<String> = kinds.iter().map(|k| yaml_string(k)).collect();
            format!("  generic: [{}]", kinds.join(", "))
        }
    };
    let manifest = format!(
        "# The operator's manifest: see \"Manifest reference\" in operator-gen's README.
# Edit it and run `cargo xtask gen --out {dir}` to regenerate the generated files.
name: {name}
primary:
{primary}
# owns: [{{ kind: ConfigMap }}]
# watches: [{{ kind: Secret, map: {{ label: example.com/owner }} }}]
# external: [{{ name: registry, source: poll, interval: 1m }}]
",
        dir = new.dir.display(),
        name = yaml_string(&name),
    );
    files.push(PlannedFile {
        path: "operator.yaml".into(),
        contents: manifest,
        ownership: Ownership::Scaffold,
    });
    let inputs = Plan::new(files)?;

    // Generate in memory before writing anything, so bad input leaves no folder behind.
    let job = Job::new(&new.dir);
    let staging = tempfile::tempdir().map_err(|source| Error::Write {
        path: new.dir.clone(),
        source,
    })?;
    inputs.apply(staging.path(), Mode::Write { force: false })?;
    let staged = Job {
        manifest: Some(staging.path().join("operator.yaml")),
        ..job.clone()
    };
    let mut request = staged.request()?;
    // The manifest is the crate's own `operator.yaml`, though it was read from staging.
    request.flags.manifest = false;
    let generated = crate::generate(&request)?;

    inputs.apply(&new.dir, Mode::Write { force: false })?;
    let report = generated
        .plan
        .apply(&new.dir, Mode::Write { force: false })?;
    Ok((generated, report))
}

/// `text` as a YAML scalar, from the YAML serializer.
fn yaml_string(text: &str) -> String {
    crate::text::Text::from(text).yaml()
}

/// Whether `dir` is a folder `create` would refuse.
pub fn is_occupied(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|mut entries| entries.next().is_some())
        .unwrap_or(false)
}
