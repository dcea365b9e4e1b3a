//! One generation job as a command line states it, shared by `cargo xtask gen` and the tests
//! that check checked-in crates for drift, so both build the same request and the same
//! regenerate command.

use std::path::{Path, PathBuf};

use crate::{
    CrdSource, Generated, Manifest, Mode, Plan, Report, Request, Result, Selection,
    crate_dir::CrateDir, leftovers::Installed, record,
};

/// The crate `cargo xtask gen` writes when given no arguments.
pub const DEFAULT_OUT: &str = "generated/prometheusrule-controller";

/// Arguments of a generation run. Paths are relative to the directory the run starts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// CRD source; overrides `primary.crd` in the manifest.
    pub crd: Option<String>,
    /// Kind or CRD name to pick from a source holding several.
    pub kind: Option<String>,
    /// Served version; the storage version when absent.
    pub version: Option<String>,
    /// The manifest; `<out>/operator.yaml` when absent and present there.
    pub manifest: Option<PathBuf>,
    pub out: PathBuf,
    /// `--allow-http`: accept plain-http CRD URLs; see [`Request::allow_http`].
    pub allow_http: bool,
}

impl Default for Job {
    fn default() -> Self {
        Self::new(DEFAULT_OUT)
    }
}

impl Job {
    /// A job regenerating the crate at `out` from its own `operator.yaml`.
    pub fn new(out: impl Into<PathBuf>) -> Self {
        Self {
            crd: None,
            kind: None,
            version: None,
            manifest: None,
            out: out.into(),
            allow_http: false,
        }
    }

    /// The command line that reproduces this job, for messages to the person who ran it. It is
    /// built from the job rather than taken from argv. Generated files name only the flags,
    /// never their paths ([`crate::model::CommandFlags`]).
    pub fn command(&self) -> String {
        self.command_as("cargo xtask", Path::new(DEFAULT_OUT))
    }

    /// [`Job::command`] for `program` (`operator-gen`), whose `gen` writes `default_out`
    /// when given no `--out`.
    pub fn command_as(&self, program: &str, default_out: &Path) -> String {
        let mut command = format!("{program} gen");
        let manifest = self.manifest.as_ref().map(|p| p.display().to_string());
        let out = (self.out != default_out).then(|| self.out.display().to_string());
        let flags = [
            ("crd", &self.crd),
            ("kind", &self.kind),
            ("version", &self.version),
            ("manifest", &manifest),
            ("out", &out),
        ];
        for (flag, value) in flags {
            if let Some(value) = value {
                command.push_str(&format!(" --{flag} {value}"));
            }
        }
        // Rerunning without it would refuse the same http URL, so it is part of the command.
        if self.allow_http {
            command.push_str(" --allow-http");
        }
        command
    }

    /// `--manifest`, else the crate's own `operator.yaml` when anything is there: a link or a
    /// FIFO in its place is then refused when it is read, rather than skipped.
    fn manifest_path(&self) -> Result<Option<PathBuf>> {
        if let Some(manifest) = &self.manifest {
            return Ok(Some(manifest.clone()));
        }
        let present = CrateDir::new(&self.out).exists(Path::new(record::MANIFEST))?;
        Ok(present.then(|| self.out.join(record::MANIFEST)))
    }

    /// Whether `--manifest` names another file than the crate's own `operator.yaml`, so a
    /// later run in the crate's folder needs it again.
    fn manifest_elsewhere(&self) -> bool {
        self.manifest
            .as_deref()
            .is_some_and(|m| !same_file_name(m, &self.out.join(record::MANIFEST)))
    }

    /// Whether `--crd` names another CRD source than the manifest at `manifest_path` records:
    /// the same URL, or a path to the same file, is no override, so repeating the command
    /// that recorded it leaves the headers as a plain `gen` writes them. Stdin always is one.
    fn crd_overrides(&self, manifest: &Manifest, manifest_path: Option<&Path>) -> bool {
        let Some(given) = &self.crd else {
            return false;
        };
        let Some(recorded) = &manifest.primary.crd else {
            return true;
        };
        match (CrdSource::parse(given), CrdSource::parse(recorded)) {
            (CrdSource::Url(given), CrdSource::Url(recorded)) => given != recorded,
            (CrdSource::File(given), CrdSource::File(recorded)) => {
                let folder = manifest_path
                    .and_then(Path::parent)
                    .unwrap_or(Path::new(""));
                !same_file_name(&given, &folder.join(recorded))
            }
            _ => true,
        }
    }

    /// Reads the manifest and assembles the request.
    pub fn request(&self) -> Result<Request> {
        let manifest_path = self.manifest_path()?;
        let manifest = match &manifest_path {
            Some(path) => Manifest::load(path)?,
            None => Manifest::default(),
        };
        let mut crd = self.crd.as_deref().map(CrdSource::parse);
        // A CRD given to a crate with no manifest yet is recorded in a new one, where a later
        // run in the crate's folder finds it, so the regenerate command leaves it out.
        let recorded = crd.is_some() && manifest_path.is_none();
        if recorded && crd == Some(CrdSource::Stdin) {
            // Read now: the run both generates from it and saves it beside the manifest.
            let bytes = CrdSource::Stdin.read()?;
            crd = Some(CrdSource::Read {
                origin: CrdSource::Stdin.to_string(),
                bytes,
            });
        }
        // A flag whose value the manifest records already is no override.
        let flags = crate::model::CommandFlags {
            crd: !recorded && self.crd_overrides(&manifest, manifest_path.as_deref()),
            kind: !recorded && overrides(&self.kind, &manifest.primary.kind),
            version: !recorded && overrides(&self.version, &manifest.primary.version),
            manifest: self.manifest_elsewhere(),
            allow_http: self.allow_http,
        };
        Ok(Request {
            manifest,
            manifest_path,
            crd,
            selection: Selection {
                crd: self.kind.clone(),
                version: self.version.clone(),
            },
            flags,
            allow_http: self.allow_http,
        })
    }

    /// Generates, and applies the plan to `out` in `mode`, with the files that record the
    /// run's inputs when the crate has none yet. A crate generated for another primary is
    /// refused unless `mode` forces it, and an `out` that cannot be a crate folder always
    /// ([`crate::write_plan::check_out`]).
    pub fn run(&self, mode: Mode) -> Result<(Generated, Report)> {
        crate::write_plan::check_out(&self.out)?;
        let request = self.request()?;
        let mut generated = crate::generate(&request)?;
        // Only a primary from outside the crate's own manifest can be another operator's; an
        // edit of that manifest (a kind added to `generic:`) is the user's deliberate change.
        if self.crd.is_some() || self.kind.is_some() || request.flags.manifest {
            record::check_primary(&self.out, &generated.operator, mode)?;
        }
        if request.manifest_path.is_none()
            && let Some(source) = &request.crd
        {
            let files = record::first_manifest(
                source,
                &self.out,
                self.kind.as_deref(),
                &generated.operator,
            )?;
            generated.plan = generated.plan.merged(Plan::new(files)?)?;
        }
        // Before anything is written: code that would not build with the user's own files.
        crate::user_types::check_versions(&self.out, &generated.operator)?;
        let installed = Installed::on_disk(&self.out, &generated.plan);
        let report = generated.plan.apply(&self.out, mode)?;
        let left = installed.left_behind(&Installed::planned(&generated.plan));
        generated.warnings.extend(left);
        if mode == (Mode::Write { force: true }) && request.flags.crd && !request.flags.manifest {
            generated.warnings.push(
                "--force replaced the generated files, but operator.yaml (yours) still names the \
                 CRD it had in `primary.crd`, so a plain `operator-gen gen` would go back to it: \
                 edit `primary.crd` (and `kind`, `version`) there"
                    .to_owned(),
            );
        }
        generated
            .warnings
            .extend(crate::migration::notes(&self.out));
        Ok((generated, report))
    }
}

/// Whether two paths name the same file, by name (`.` and `dir/..` resolved, relative to
/// the current folder), without touching the filesystem.
fn same_file_name(a: &Path, b: &Path) -> bool {
    match (std::path::absolute(a), std::path::absolute(b)) {
        (Ok(a), Ok(b)) => crate::normalize(&a) == crate::normalize(&b),
        _ => false,
    }
}

/// Whether a flag's value says something the manifest does not record.
fn overrides(given: &Option<String>, recorded: &Option<String>) -> bool {
    given.is_some() && given != recorded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_names_only_what_differs_from_the_defaults() {
        assert_eq!(Job::default().command(), "cargo xtask gen");
        let job = Job {
            crd: Some("-".into()),
            version: Some("v1".into()),
            ..Job::new("ops/widget")
        };
        assert_eq!(
            job.command(),
            "cargo xtask gen --crd - --version v1 --out ops/widget"
        );
    }

    #[test]
    fn another_program_is_named_with_its_own_default_folder_left_out() {
        let here = Job::new(".");
        assert_eq!(
            here.command_as("operator-gen", Path::new(".")),
            "operator-gen gen"
        );
        let elsewhere = Job::new("ops/widget");
        assert_eq!(
            elsewhere.command_as("operator-gen", Path::new(".")),
            "operator-gen gen --out ops/widget"
        );
    }

    #[test]
    fn allowing_http_is_part_of_the_command_and_the_request() {
        let job = Job {
            crd: Some("http://127.0.0.1:8080/crd.yaml".into()),
            allow_http: true,
            ..Job::default()
        };
        assert_eq!(
            job.command(),
            "cargo xtask gen --crd http://127.0.0.1:8080/crd.yaml --allow-http"
        );
        assert!(job.request().unwrap().allow_http);
        assert!(!Job::default().request().unwrap().allow_http);
    }

    /// A CRD file in `dir`, `widgets.example.com` or, with `kind`, another CRD.
    fn crd_file(dir: &Path, kind: &str) -> PathBuf {
        let path = dir.join(format!("{}.yaml", kind.to_lowercase()));
        let text = crate::crd_document::tests::CRD
            .replace("Widget", kind)
            .replace("widget", &kind.to_lowercase());
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A crate in `dir/widget` made by a first `gen --crd widget.yaml`, and that job.
    fn widget_crate(dir: &Path) -> (PathBuf, Job) {
        let out = dir.join("widget");
        let job = Job {
            crd: Some(crd_file(dir, "Widget").display().to_string()),
            ..Job::new(&out)
        };
        job.run(Mode::Write { force: false }).unwrap();
        (out, job)
    }

    #[test]
    fn a_run_that_moves_the_namespace_names_what_the_old_one_still_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let (out, _) = widget_crate(tmp.path());
        let manifest = out.join("operator.yaml");
        let sharded = std::fs::read_to_string(&manifest).unwrap() + "sharding: true\n";
        std::fs::write(&manifest, sharded).unwrap();

        let (generated, _) = Job::new(&out).run(Mode::Write { force: false }).unwrap();
        let note = generated
            .warnings
            .iter()
            .find(|w| w.contains("kubectl delete -n default"))
            .unwrap_or_else(|| panic!("{:?}", generated.warnings));
        for object in [
            "deployment.apps/widget",
            "serviceaccount/widget",
            "lease.coordination.k8s.io/widget",
        ] {
            assert!(note.contains(object), "{note}");
        }
        let (again, _) = Job::new(&out).run(Mode::Write { force: false }).unwrap();
        assert!(
            !again.warnings.iter().any(|w| w.contains("kubectl delete")),
            "said once, by the run that moved it: {:?}",
            again.warnings
        );
    }

    #[test]
    fn a_first_run_records_its_crd_and_then_regenerates_with_no_flags() {
        let tmp = tempfile::tempdir().unwrap();
        let crd = crd_file(tmp.path(), "Widget");
        let out = tmp.path().join("ops/widget");
        let job = Job {
            crd: Some(crd.display().to_string()),
            version: Some("v1alpha1".into()),
            ..Job::new(&out)
        };
        job.run(Mode::Write { force: false }).unwrap();

        let manifest = Manifest::load(&out.join("operator.yaml")).unwrap();
        assert_eq!(manifest.primary.crd.as_deref(), Some("../../widget.yaml"));
        assert_eq!(manifest.primary.kind.as_deref(), Some("Widget"));
        assert_eq!(manifest.primary.version.as_deref(), Some("v1alpha1"));
        let controller = std::fs::read_to_string(out.join("src/controller.rs")).unwrap();
        assert!(
            controller.contains("Regenerate with `operator-gen gen` in this crate's folder."),
            "{}",
            controller.lines().take(3).collect::<Vec<_>>().join("\n")
        );

        let (_, report) = Job::new(&out).run(Mode::Check).unwrap();
        assert!(report.changed().is_empty(), "{report:?}");
    }

    #[test]
    fn a_run_over_a_crate_with_a_manifest_leaves_the_manifest_and_names_its_overrides() {
        let tmp = tempfile::tempdir().unwrap();
        let (out, first) = widget_crate(tmp.path());
        let manifest = std::fs::read(out.join("operator.yaml")).unwrap();

        let again = Job {
            version: Some("v1alpha1".into()),
            ..first
        };
        let (generated, _) = again.run(Mode::Write { force: false }).unwrap();
        assert_eq!(std::fs::read(out.join("operator.yaml")).unwrap(), manifest);
        assert_eq!(
            generated.operator.krate.provenance.regenerate.raw(),
            "operator-gen gen --version v1alpha1",
            "the same --crd as recorded is no override"
        );
    }

    #[test]
    fn repeating_a_command_writes_nothing_in_any_order() {
        let tmp = tempfile::tempdir().unwrap();
        let (out, first) = widget_crate(tmp.path());
        let repeated = || first.clone();
        let plain = || Job::new(&out);
        // Every flag given, each equal to what the manifest records.
        let flagged = || Job {
            version: Some("v1".into()),
            kind: Some("Widget".into()),
            ..first.clone()
        };
        let orders: [&[&dyn Fn() -> Job]; 3] = [
            &[&repeated, &plain, &repeated, &flagged],
            &[&plain, &repeated, &plain],
            &[&flagged, &repeated, &flagged],
        ];
        for order in orders {
            for job in order {
                let (generated, report) = job().run(Mode::Write { force: false }).unwrap();
                assert!(
                    report.changed().is_empty(),
                    "{job:?}: {report}",
                    job = job()
                );
                assert_eq!(
                    generated.operator.krate.provenance.regenerate.raw(),
                    "operator-gen gen"
                );
            }
        }
    }

    #[test]
    fn a_crate_generated_for_one_crd_is_not_replaced_by_another_without_force() {
        let tmp = tempfile::tempdir().unwrap();
        let (out, _) = widget_crate(tmp.path());
        let before = std::fs::read(out.join("src/controller.rs")).unwrap();

        // The manifest the first run wrote names the kind Widget, which --kind overrides.
        let gadget = Job {
            crd: Some(crd_file(tmp.path(), "Gadget").display().to_string()),
            kind: Some("Gadget".into()),
            ..Job::new(&out)
        };
        for mode in [Mode::Check, Mode::Write { force: false }] {
            let err = gadget.run(mode).unwrap_err().to_string();
            assert!(
                err.contains("generated for widgets.example.com")
                    && err.contains("one for gadgets.example.com")
                    && err.contains("--force"),
                "{err}"
            );
        }
        assert_eq!(
            std::fs::read(out.join("src/controller.rs")).unwrap(),
            before
        );

        let (forced, _) = gadget.run(Mode::Write { force: true }).unwrap();
        assert!(
            forced.warnings.iter().any(|w| w.contains("still names")),
            "{:?}",
            forced.warnings
        );
        let cargo = std::fs::read_to_string(out.join("Cargo.toml")).unwrap();
        assert!(
            cargo.contains("primary = \"gadgets.example.com\""),
            "{cargo}"
        );
    }

    #[test]
    fn an_edit_of_the_crates_own_manifest_may_change_its_primary() {
        let tmp = tempfile::tempdir().unwrap();
        let (out, _) = widget_crate(tmp.path());
        crd_file(tmp.path(), "Gadget");
        let manifest = out.join("operator.yaml");
        let edited = std::fs::read_to_string(&manifest)
            .unwrap()
            .replace("widget.yaml", "gadget.yaml")
            .replace("kind: Widget", "kind: Gadget");
        std::fs::write(&manifest, edited).unwrap();

        let (generated, _) = Job::new(&out).run(Mode::Write { force: false }).unwrap();
        assert_eq!(
            generated.operator.primary.crd_name.raw(),
            "gadgets.example.com"
        );
    }
}
