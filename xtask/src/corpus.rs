//! `cargo xtask corpus [DIR]`: generate an operator for every CRD in a folder and check that
//! each compiles, in a few large batches sharing one target directory; with `--cluster`, also
//! that the real API server takes each CRD and its sample and that the answer reads back
//! through the generated types (`corpus/server.rs`), and that it judges each CEL rule the
//! sample reaches as kube-cel does (`corpus/agreement.rs`).
//!
//! One crate per CRD, grouped into throwaway workspaces of about `--batch-bytes` of generated
//! source: one workspace for everything needs more memory than a CI machine has, and one
//! check per CRD would compile the dependencies' metadata over and over. Every sample's CEL
//! rules are counted as the generator checked them ([`operator_gen::cel`]).

mod agreement;
mod server;

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{ExitCode, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use operator_gen::{
    CrdSource, Manifest, Mode, Request, Selection,
    cel::{self, Tally, breaking::Trials},
};
use serde_json::Value;
use sha2::Digest as _;

#[derive(clap::Args, Debug, Clone)]
pub struct CorpusArgs {
    /// Folder of CRDs, one per file, searched one level of subfolders deep.
    #[arg(default_value = "../shared/crds")]
    pub dir: PathBuf,
    /// Where the generated crates and their shared target directory go.
    #[arg(long, default_value = "target/corpus")]
    pub out: PathBuf,
    /// Generated source per batch; about 2 GB of memory per 2.5 MB when checking.
    #[arg(long, default_value_t = 2_500_000)]
    pub batch_bytes: u64,
    /// Only CRDs whose path contains this text.
    #[arg(long)]
    pub filter: Option<String>,
    /// Also install each CRD on the e2e control plane (started if it is not running), create
    /// its sample by server-side dry run and read the answer back through its types.
    #[arg(long)]
    pub cluster: bool,
    /// Leave the compile check to another run, without `--cluster` (CI runs that one beside
    /// the e2e, which mostly waits): the generated crates are not built here, and every
    /// generated CRD's types go to the read-back, whose program fails to build, naming its
    /// group's CRDs, when one of them does not compile.
    #[arg(long, requires = "cluster")]
    pub skip_compile: bool,
}

/// Files of the corpus operator-gen must refuse, and the refusal each must meet. A file here
/// passes when it is refused so, and fails the run when it generates, so the list cannot go
/// stale. Empty since files merged from several releases, each marking its own version as the
/// storage version (Strimzi's Kafka and KafkaTopic, Karpenter's NodePool), generate with the
/// version Kubernetes ranks first as the only storage version.
const REFUSED: &[(&str, &str)] = &[];

/// The "sample accepted" column of a sample that breaks a CEL rule the generator could not
/// keep and warned of, when the API server refuses it for those rules alone: skipped, not
/// failed, since the generated crate says so too (its cluster test is ignored).
const REFUSED_AS_WARNED: &str = "refused, as the generator warned";

/// The "installed" column of a CRD the API server refuses as published: skipped, not failed,
/// when it generated and compiled, since no operator of it can run on a real cluster.
const REFUSED_BY_SERVER: &str = "refused by the API server";

/// One CRD's way through the corpus run.
struct Entry {
    crd: String,
    crate_name: String,
    generated: Result<operator_gen::Plan, String>,
    /// The CRD as generated, the sample object, the primary's type and the types of its
    /// version, for the server phase.
    subject: Option<(Value, Value, String, String)>,
    /// Where the generator cut the sample short, its CRD's least object being over the size
    /// it builds samples to: then there is no subject, since the API server must refuse it.
    sample_cut_at: Option<String>,
    /// The sample's CEL rules, as the generator checked them, with (for `--cluster`) a
    /// variant made to break each that it reaches.
    trials: Option<Trials>,
    compiled: Option<Result<(), String>>,
    server: Option<server::Outcome>,
}

impl Entry {
    /// Bytes of Rust source in the generated crate, which is what checking costs.
    fn rust_bytes(&self) -> Option<u64> {
        let plan = self.generated.as_ref().ok()?;
        let rust = plan
            .files
            .iter()
            .filter(|f| f.path.extension().is_some_and(|e| e == "rs"));
        Some(rust.map(|f| f.contents.len() as u64).sum())
    }

    /// Whether the crate compiled, or was left unchecked for another run to compile
    /// (`--skip-compile`): either way its CRD goes on to the API server.
    fn compiled_or_unchecked(&self, skip_compile: bool) -> bool {
        match &self.compiled {
            Some(result) => result.is_ok(),
            None => skip_compile,
        }
    }
}

pub fn run(args: CorpusArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let files = crd_files(&args.dir)?;
    let files: Vec<PathBuf> = match &args.filter {
        Some(filter) => files
            .into_iter()
            .filter(|f| f.display().to_string().contains(filter.as_str()))
            .collect(),
        None => files,
    };
    if files.is_empty() {
        bail!(
            "no CRD files (*.yaml, *.yml, *.json) under {}",
            args.dir.display()
        );
    }
    for old in std::fs::read_dir(&args.out).into_iter().flatten().flatten() {
        if old.file_name().to_string_lossy().starts_with("batch-") {
            std::fs::remove_dir_all(old.path())
                .with_context(|| format!("clearing {}", old.path().display()))?;
        }
    }

    let mut entries = Vec::new();
    // The time spent looking for variants that break the samples' CEL rules.
    let mut variants_found_in = Duration::ZERO;
    for file in &files {
        let relative = file
            .strip_prefix(&args.dir)
            .unwrap_or(file)
            .display()
            .to_string();
        let crate_name = crate_name_for(&relative);
        let (generated, subject, sample_cut_at) = match generate_one(file, &crate_name) {
            Ok(generated) => {
                let primary = &generated.operator.primary;
                let cut_at = primary.sample_cut_at.as_ref().map(|at| at.raw().to_owned());
                let subject = subject_of(&generated).filter(|_| cut_at.is_none());
                (Ok(generated.plan), subject, cut_at)
            }
            Err(e) => (Err(e), None, None),
        };
        let variants_started = Instant::now();
        // Variants are only judged with `--cluster`; without, the sample's check is all.
        let trials = subject.as_ref().and_then(|(crd, object, ..)| {
            let schema = cel::version_schema(crd, object).ok()?;
            if args.cluster {
                cel::breaking::trials(schema, object).ok()
            } else {
                Some(Trials {
                    sample: cel::check(schema, object),
                    trials: Vec::new(),
                })
            }
        });
        variants_found_in += variants_started.elapsed();
        entries.push(Entry {
            crd: relative,
            crate_name,
            generated,
            subject,
            sample_cut_at,
            trials,
            compiled: None,
            server: None,
        });
    }
    let generated_in = started.elapsed();

    let workspace_lock = PathBuf::from("Cargo.lock");
    let server = if args.cluster {
        Some(server::Server::start(&args.out.join("server"))?)
    } else {
        None
    };
    let compiled_here = if args.skip_compile {
        Vec::new()
    } else {
        batches(&entries, args.batch_bytes)
    };
    for (number, batch) in compiled_here.into_iter().enumerate() {
        let workspace = args.out.join(format!("batch-{number}"));
        for &i in &batch {
            if let Ok(plan) = &entries[i].generated {
                plan.apply(
                    &workspace.join(&entries[i].crate_name),
                    Mode::Write { force: true },
                )?;
            }
        }
        let names: Vec<&str> = batch
            .iter()
            .map(|&i| entries[i].crate_name.as_str())
            .collect();
        let batch_started = Instant::now();
        let results = check_batch(
            &workspace,
            &args.out.join("target"),
            &names,
            &workspace_lock,
        )?;
        eprintln!(
            "batch {number}: {} crates checked in {:.0?}",
            names.len(),
            batch_started.elapsed()
        );
        for &i in &batch {
            let result = results
                .get(&entries[i].crate_name)
                .cloned()
                .unwrap_or(Ok(()));
            entries[i].compiled = Some(result);
        }
    }
    if let Some(server) = &server {
        // Every compiled CRD (every generated one, with `--skip-compile`), in groups of about
        // `--batch-bytes` of types: one read-back program per group.
        let mut groups: Vec<Vec<server::Subject>> = vec![Vec::new()];
        let mut size = 0;
        for entry in &entries {
            if !entry.compiled_or_unchecked(args.skip_compile) {
                continue;
            }
            let Some((crd, object, root_type, types)) = entry.subject.clone() else {
                continue;
            };
            if size + types.len() as u64 > args.batch_bytes && size > 0 {
                groups.push(Vec::new());
                size = 0;
            }
            size += types.len() as u64;
            if let Some(group) = groups.last_mut() {
                group.push(server::Subject {
                    crate_name: entry.crate_name.clone(),
                    crd,
                    object,
                    types,
                    root_type,
                    variants: entry
                        .trials
                        .as_ref()
                        .map(agreement::variants)
                        .unwrap_or_default(),
                });
            }
        }
        let mut outcomes = BTreeMap::new();
        for (number, group) in groups.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
            let server_started = Instant::now();
            outcomes.extend(server.check_batch(
                number,
                group,
                &args.out.join("target"),
                &workspace_lock,
            )?);
            eprintln!(
                "server group {number}: {} CRDs installed, samples dry-run and read back in {:.0?}",
                group.len(),
                server_started.elapsed()
            );
        }
        for entry in &mut entries {
            entry.server = outcomes.remove(&entry.crate_name);
        }
    }

    let (mut passed, mut failed, mut unserved, mut unkept, mut uncut) = (0, 0, 0, 0, 0);
    let mut rules = Tally::default();
    let mut not_kept = 0;
    let mut agreed = agreement::Tally::default();
    let mut disagreements = Vec::new();
    let outcomes = entries.iter().filter_map(|entry| entry.server.as_ref());
    let variants_took: Duration = outcomes.clone().map(|o| o.variants_took).sum();
    let variants_sent: usize = outcomes.map(|o| o.variants.len()).sum();
    if args.cluster {
        println!(
            "| CRD | generated | compiled | installed | sample accepted | read back | CEL checked | CEL agreed | first error |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    } else {
        println!("| CRD | generated | compiled | CEL checked | first error |");
        println!("| --- | --- | --- | --- | --- |");
    }
    for entry in &entries {
        let refusal = REFUSED
            .iter()
            .find(|(crd, _)| *crd == entry.crd)
            .map(|(_, reason)| *reason);
        let mut error = String::new();
        let generated = match (&entry.generated, refusal) {
            (Err(e), Some(reason)) if e.contains(reason) => {
                error.clone_from(e);
                "refused, as the API server would"
            }
            (Ok(_), Some(_)) => {
                error = "generated, but the API server refuses this CRD".to_owned();
                "failed"
            }
            (generated, _) => step(
                Some(&generated.as_ref().map(drop).map_err(Clone::clone)),
                &mut error,
            ),
        };
        let compiled = step(entry.compiled.as_ref(), &mut error);
        let outcome = entry.server.as_ref();
        let installed = match outcome.and_then(|o| o.installed.as_ref()) {
            Some(Err(reason)) => {
                error = format!("the API server refuses this CRD: {reason}");
                REFUSED_BY_SERVER
            }
            other => step(other, &mut error),
        };
        let explained = |trials: &Trials| match outcome.and_then(|o| o.sample.as_ref()) {
            Some(agreement::Verdict::Refused(refusal)) => agreement::explained(trials, refusal),
            _ => false,
        };
        let as_warned = args.cluster && entry.trials.as_ref().is_some_and(explained);
        let accepted = if as_warned {
            let rules: Vec<String> = (entry.trials.iter())
                .flat_map(|trials| &trials.sample.broken)
                .map(ToString::to_string)
                .collect();
            if error.is_empty() {
                error = format!(
                    "the sample breaks {}, as the generator warned",
                    rules.join("; ")
                );
            }
            REFUSED_AS_WARNED
        } else {
            step(outcome.and_then(|o| o.accepted.as_ref()), &mut error)
        };
        let read_back = step(outcome.and_then(|o| o.read_back.as_ref()), &mut error);
        if let Some(trials) = &entry.trials {
            not_kept += trials.sample.broken.len();
        }
        let cel = match entry.trials.as_ref().map(|trials| trials.sample.tally) {
            Some(tally) if tally.rules() > 0 => {
                rules += tally;
                format!(
                    "{} of {} evaluated, {} warned, {} skipped",
                    tally.evaluated,
                    tally.rules(),
                    tally.warned,
                    tally.skipped
                )
            }
            Some(_) => "no rules".to_owned(),
            None => "-".to_owned(),
        };
        let judged = entry.trials.as_ref().map_or_else(Vec::new, |trials| {
            let outcome = outcome.filter(|o| o.sample.is_some());
            agreement::judge(
                trials,
                outcome.and_then(|o| o.sample.as_ref()),
                outcome.map_or(&[], |o| o.variants.as_slice()),
            )
        });
        let tally = agreement::Tally::of(&judged);
        agreed += tally;
        for rule in judged {
            if let agreement::Agreement::Disagreed { kube_cel, server } = rule.agreement {
                if error.is_empty() {
                    error = format!(
                        "kube-cel and the API server disagree on CEL rule `{}` at `{}` (listed below)",
                        rule.rule.rule.replace('\n', " "),
                        rule.rule.path
                    );
                }
                disagreements.push((entry.crd.clone(), rule.rule, kube_cel, server));
            }
        }
        let generated_and_compiled =
            generated == "ok" && entry.compiled_or_unchecked(args.skip_compile);
        if generated.starts_with("refused") {
            passed += 1;
        } else if installed == REFUSED_BY_SERVER && generated_and_compiled {
            unserved += 1;
        } else if accepted == REFUSED_AS_WARNED && generated_and_compiled && tally.disagreed == 0 {
            unkept += 1;
        } else if let Some(at) = entry
            .sample_cut_at
            .as_ref()
            .filter(|_| generated_and_compiled && args.cluster)
        {
            error = format!(
                "the sample is cut short at `{at}`, as the generator warned, so it was not sent"
            );
            uncut += 1;
        } else if generated_and_compiled
            && (!args.cluster
                || (outcome.is_some_and(server::Outcome::passed) && tally.disagreed == 0))
        {
            passed += 1;
        } else {
            failed += 1;
        }
        let error = error.replace('|', "\\|");
        if args.cluster {
            println!(
                "| {} | {generated} | {compiled} | {installed} | {accepted} | {read_back} | {cel} | {} | {error} |",
                entry.crd,
                tally.column()
            );
        } else {
            println!(
                "| {} | {generated} | {compiled} | {cel} | {error} |",
                entry.crd
            );
        }
    }
    println!("CEL rules of the samples: {rules}");
    // What the generator's samples make of the rules they reach: a rule evaluated on the
    // sample is kept unless the sample breaks it (the generator warned of each such rule).
    println!(
        "CEL rules the built samples keep: {} kept, {not_kept} not kept, {} skipped (oldSelf or \
         not evaluable)",
        rules.evaluated.saturating_sub(not_kept),
        rules.skipped + rules.warned,
    );
    if args.cluster {
        println!("CEL rules judged by kube-cel and the API server: {agreed}");
        for (crd, rule, kube_cel, server) in &disagreements {
            println!(
                "- disagreement in {crd}: CEL rule `{}` at `{}`: kube-cel: {kube_cel}; API server: {server}",
                rule.rule.replace('\n', " "),
                rule.path
            );
        }
    }
    eprintln!(
        "generated in {generated_in:.1?}, generated and checked in {:.1?}",
        started.elapsed()
    );
    if args.cluster {
        eprintln!(
            "CEL agreement: variants found in {variants_found_in:.1?}; {variants_sent} variants \
             dry-run in {variants_took:.1?} summed over CRDs ({} CRDs at a time)",
            server::IN_FLIGHT
        );
    }
    if args.cluster {
        println!(
            "{passed} passed, {failed} failed, {} skipped ({unserved}: the API server refuses the CRD as published; {unkept}: the sample breaks a CEL rule, as the generator warned; {uncut}: the sample is cut short, as the generator warned)",
            unserved + unkept + uncut
        );
    } else {
        println!("{passed} passed, {failed} failed");
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A step's column: `-` when it did not run; the first failure's reason goes to `error`.
fn step(result: Option<&Result<(), String>>, error: &mut String) -> &'static str {
    match result {
        None => "-",
        Some(Ok(())) => "ok",
        Some(Err(e)) => {
            if error.is_empty() {
                e.clone_into(error);
            }
            "failed"
        }
    }
}

fn crd_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let is_crd = |p: &Path| {
        p.extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
    };
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            for inner in std::fs::read_dir(&path)? {
                let inner = inner?.path();
                if is_crd(&inner) {
                    files.push(inner);
                }
            }
        } else if is_crd(&path) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// `monitoring.coreos.com/prometheusrules.yaml` becomes `c-monitoring-coreos-com-prometheusrules`.
/// A crate name also names the operator's Kubernetes objects, so it must be a DNS label of at
/// most 63 characters: a longer one keeps its start and ends in a hash of the whole path,
/// which keeps names of different files apart.
fn crate_name_for(relative: &str) -> String {
    const MAX: usize = 63;
    let stem = relative
        .trim_end_matches(".yaml")
        .trim_end_matches(".yml")
        .trim_end_matches(".json");
    let words: Vec<String> = stem
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let name = format!("c-{}", words.join("-"));
    if name.len() <= MAX {
        return name;
    }
    let digest = sha2::Sha256::digest(relative.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let keep = name[..MAX - hash.len() - 1].trim_end_matches('-');
    format!("{keep}-{hash}")
}

/// The CRD as generated, the sample object the shipped tests create (named `sample` unless the
/// CRD's rules pin its name, in `default` when namespaced), the primary's type name and the types of its version.
fn subject_of(generated: &operator_gen::Generated) -> Option<(Value, Value, String, String)> {
    let primary = &generated.operator.primary;
    let crd_yaml = generated
        .plan
        .files
        .iter()
        .find(|f| f.path == Path::new("deploy/base/crd.yaml"))?;
    let crd: Value = serde_saphyr::from_str_with_options(
        &crd_yaml.contents,
        operator_gen::limits::yaml_options(),
    )
    .ok()?;
    let mut object: Value = serde_json::from_str(primary.sample.as_ref()?.raw()).ok()?;
    object["apiVersion"] = Value::from(primary.api_version.raw());
    object["kind"] = Value::from(primary.kind.raw());
    // The generated crate's tests name the sample `sample`, unless the CRD's rules pin its name.
    let name = primary
        .sample_name
        .as_ref()
        .map_or("sample", |name| name.raw());
    object["metadata"] = serde_json::json!({ "name": name });
    if primary.namespaced {
        object["metadata"]["namespace"] = Value::from("default");
    }
    let operator = &generated.operator;
    let selected = operator.types.selected_module.as_ref()?;
    let types = operator
        .types
        .versions
        .iter()
        .find(|module| module.module == *selected)?;
    Some((
        crd,
        object,
        primary.rust_type.as_str().to_owned(),
        types.code.as_str().to_owned(),
    ))
}

/// This repository's runtime/ folder, by its absolute path.
fn shared_runtime() -> Result<operator_gen::vendor::RuntimePath, String> {
    let runtime = std::path::absolute(Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime"))
        .map_err(|e| e.to_string())?;
    let runtime = runtime
        .to_str()
        .ok_or("the path to runtime/ is not UTF-8")?;
    operator_gen::vendor::RuntimePath::anywhere(runtime)
}

/// Generates one crate in memory.
fn generate_one(file: &Path, crate_name: &str) -> Result<operator_gen::Generated, String> {
    let request = Request {
        manifest: Manifest {
            name: Some(crate_name.to_owned()),
            // Every crate of a batch names this repository's runtime, which is then compiled
            // once for all of them, where a vendored copy each would be compiled per crate.
            runtime: Some(operator_gen::manifest::Runtime {
                path: shared_runtime()?,
            }),
            ..Manifest::default()
        },
        manifest_path: None,
        crd: Some(CrdSource::File(file.to_owned())),
        selection: Selection::default(),
        flags: operator_gen::model::CommandFlags {
            crd: true,
            ..Default::default()
        },
        allow_http: false,
    };
    operator_gen::generate(&request).map_err(|e| e.to_string())
}

/// Groups generated crates into batches of about `limit` bytes of source, keeping order.
fn batches(entries: &[Entry], limit: u64) -> Vec<Vec<usize>> {
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut size = 0;
    for (i, entry) in entries.iter().enumerate() {
        let Some(bytes) = entry.rust_bytes() else {
            continue;
        };
        if batches.is_empty() || (size + bytes > limit && size > 0) {
            batches.push(Vec::new());
            size = 0;
        }
        size += bytes;
        batches.last_mut().expect("a batch was just pushed").push(i);
    }
    batches
}

/// Checks one batch as a workspace; returns the first error of each crate that failed.
fn check_batch(
    workspace: &Path,
    target: &Path,
    names: &[&str],
    lock: &Path,
) -> anyhow::Result<BTreeMap<String, Result<(), String>>> {
    let members: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    // The members name this repository's runtime/ by path (`shared_runtime`).
    std::fs::write(
        workspace.join("Cargo.toml"),
        format!(
            "[workspace]\nresolver = \"3\"\nmembers = [{}]\n",
            members.join(", "),
        ),
    )?;
    if lock.exists() {
        std::fs::copy(lock, workspace.join("Cargo.lock"))?;
    }
    let target = std::path::absolute(target)?;
    let stderr_path = workspace.join("cargo-check.stderr");
    let stderr = std::fs::File::create(&stderr_path)?;
    let mut child = operator_gen_tests::cargo_unlinted()
        .args(["check", "--workspace", "--message-format=json", "--quiet"])
        .current_dir(workspace)
        .env("CARGO_TARGET_DIR", target)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .context("running cargo check")?;
    let mut results = BTreeMap::new();
    let stdout = child.stdout.take().context("cargo check's output")?;
    for line in BufReader::new(stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line?) else {
            continue;
        };
        if message["reason"] != "compiler-message" || message["message"]["level"] != "error" {
            continue;
        }
        let Some(package) = package_name(&message["package_id"]) else {
            continue;
        };
        let text = message["message"]["rendered"]
            .as_str()
            .unwrap_or("error")
            .lines()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        results.entry(package).or_insert(Err(text));
    }
    let status = child.wait()?;
    if !status.success() && results.is_empty() {
        // cargo itself failed (a manifest, the lock file): every crate in the batch is unproven.
        let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let reason = log
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or("cargo check failed")
            .to_owned();
        for name in names {
            results.insert((*name).to_owned(), Err(reason.clone()));
        }
    }
    Ok(results)
}

/// The package name in a cargo package id (`path+file:///…/crates/c-x#c-x@0.1.0` or older forms).
fn package_name(id: &serde_json::Value) -> Option<String> {
    let id = id.as_str()?;
    let after_hash = id.rsplit('#').next()?;
    let name = after_hash.split('@').next()?;
    if name.contains('/') || name.chars().next()?.is_ascii_digit() {
        // `…/crates/c-x#0.1.0`: the name is the last path segment.
        return id.split('#').next()?.rsplit('/').next().map(str::to_owned);
    }
    Some(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_names_are_dns_labels_and_long_ones_stay_distinct() {
        assert_eq!(
            crate_name_for("monitoring.coreos.com/prometheusrules.yaml"),
            "c-monitoring-coreos-com-prometheusrules"
        );
        let long_a = crate_name_for(
            "networking.very-long-group.example.com/verylongpluralnamesforresources.yaml",
        );
        let long_b = crate_name_for(
            "networking.very-long-group.example.com/verylongpluralnamesforresourcez.yaml",
        );
        for name in [&long_a, &long_b] {
            assert!(name.len() <= 63, "{name}");
            operator_gen::naming::check_crate_name(name).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_ne!(long_a, long_b);
        assert_eq!(crate_name_for("a..b/__c--.yaml"), "c-a-b-c");
    }
}
