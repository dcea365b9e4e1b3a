//! `cargo xtask gen`: generate an operator crate, or check that a generated one is current.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Instant,
};

use anyhow::Context as _;
use operator_gen::{CrdSource, Manifest, Mode, Request, Selection};

/// Where `cargo xtask gen` writes when given no arguments: the checked-in example crate,
/// whose operator.yaml points at the PrometheusRule CRD bundled in `crds/`.
pub const DEFAULT_OUT: &str = "generated/prometheusrule-controller";

#[derive(clap::Args, Debug, Clone, Default)]
pub struct GenArgs {
    /// CRD source: an http(s) URL, a file, or `-` for stdin. Overrides `primary.crd`.
    #[arg(long)]
    pub crd: Option<String>,
    /// Kind or CRD name to pick when the source holds several CRDs.
    #[arg(long)]
    pub kind: Option<String>,
    /// Served version to generate for; the storage version by default.
    #[arg(long)]
    pub version: Option<String>,
    /// The operator manifest; `<out>/operator.yaml` when present, else no relations.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Output crate directory.
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    /// Write nothing; exit non-zero when a file would change.
    #[arg(long)]
    pub check: bool,
    /// Overwrite generated files even when they were edited by hand.
    #[arg(long, conflicts_with = "check")]
    pub force: bool,
}

impl GenArgs {
    /// The command line that reproduces this run, quoted in generated headers. Built from the
    /// arguments rather than taken from argv so it is the same however the run was started.
    pub fn command(&self) -> String {
        let mut command = String::from("cargo xtask gen");
        let mut push = |flag: &str, value: Option<String>| {
            if let Some(value) = value {
                command.push_str(&format!(" --{flag} {value}"));
            }
        };
        push("crd", self.crd.clone());
        push("kind", self.kind.clone());
        push("version", self.version.clone());
        push(
            "manifest",
            self.manifest.as_ref().map(|p| p.display().to_string()),
        );
        push(
            "out",
            (self.out != Path::new(DEFAULT_OUT)).then(|| self.out.display().to_string()),
        );
        command
    }

    fn manifest_path(&self) -> Option<PathBuf> {
        self.manifest.clone().or_else(|| {
            let beside = self.out.join("operator.yaml");
            beside.exists().then_some(beside)
        })
    }
}

pub fn run(args: GenArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let manifest_path = args.manifest_path();
    let manifest = match &manifest_path {
        Some(path) => Manifest::load(path)?,
        None => Manifest::default(),
    };
    let request = Request {
        manifest,
        manifest_path,
        crd: args.crd.as_deref().map(CrdSource::parse),
        selection: Selection {
            crd: args.kind.clone(),
            version: args.version.clone(),
        },
        command: args.command(),
    };
    let generated = operator_gen::generate(&request)?;
    let mode = if args.check {
        Mode::Check
    } else {
        Mode::Write { force: args.force }
    };
    let report = generated
        .plan
        .apply(&args.out, mode)
        .with_context(|| format!("generating into {}", args.out.display()))?;
    let primary = &generated.operator.primary;
    let version_note = if primary.version_defaulted {
        "storage version"
    } else {
        "as requested"
    };
    let mut out = format!(
        "{} {} from {} ({}, version {} [{version_note}]) in {} ms: {report}\n",
        if args.check { "checked" } else { "generated" },
        args.out.display(),
        primary.origin,
        primary.crd_name,
        primary.version,
        started.elapsed().as_millis(),
    );
    let verb = if args.check { "would change" } else { "wrote" };
    for path in report.changed() {
        out.push_str(&format!("  {verb} {}\n", path.display()));
    }
    // A closed pipe (`| head`) is no reason to fail, let alone panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
    if args.check && !report.changed().is_empty() {
        eprintln!(
            "{} is out of date: run `{}` and commit the result",
            args.out.display(),
            args.command()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
