//! One generation job as a command line states it, shared by `cargo xtask gen` and the tests
//! that check checked-in crates for drift, so both build the same request and the same
//! regenerate command.

use std::path::{Path, PathBuf};

use crate::{CrdSource, Generated, Manifest, Mode, Report, Request, Result, Selection};

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

    fn manifest_path(&self) -> Option<PathBuf> {
        self.manifest.clone().or_else(|| {
            let beside = self.out.join("operator.yaml");
            beside.exists().then_some(beside)
        })
    }

    /// Reads the manifest and assembles the request.
    pub fn request(&self) -> Result<Request> {
        let manifest_path = self.manifest_path();
        let manifest = match &manifest_path {
            Some(path) => Manifest::load(path)?,
            None => Manifest::default(),
        };
        Ok(Request {
            manifest,
            manifest_path,
            crd: self.crd.as_deref().map(CrdSource::parse),
            selection: Selection {
                crd: self.kind.clone(),
                version: self.version.clone(),
            },
            flags: crate::model::CommandFlags {
                crd: self.crd.is_some(),
                kind: self.kind.is_some(),
                version: self.version.is_some(),
                manifest: self.manifest.is_some(),
                allow_http: self.allow_http,
            },
            allow_http: self.allow_http,
        })
    }

    /// Generates and applies the plan to `out` in `mode`.
    pub fn run(&self, mode: Mode) -> Result<(Generated, Report)> {
        let generated = crate::generate(&self.request()?)?;
        let report = generated.plan.apply(&self.out, mode)?;
        Ok((generated, report))
    }
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
}
