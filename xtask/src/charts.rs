//! `cargo xtask charts [FOLDER…]`: every generated crate's Helm chart, checked with the real
//! helm (3.22, built from its pinned Go module like the control plane, `cluster::helm`).
//!
//! The crates are the workspace's operator crates, the folders given (a corpus batch), and with
//! `--scaffold` a batch of `operator-gen new`, one crate of each archetype, and of the snapshot
//! fixtures. For each crate,
//! `helm lint --strict`, then the chart's objects against kustomize's
//! (`kubectl kustomize`, the kubectl of the control plane), object by object, in each mode both
//! offer:
//! - the default values against `deploy/base/`;
//! - every monitoring value on against `deploy/base/` and `deploy/monitoring/`;
//! - cert-manager's certificates against `deploy/cert-manager/`, for a crate with webhooks.
//!
//! Then the chart rendered into another namespace than its crate's, against its own objects
//! moved there: nothing of it may name the crate's namespace.
//!
//! The only differences allowed are Helm's: the Namespace object, which `helm install
//! --create-namespace` creates rather than the chart, and the annotation that keeps the CRD on
//! `helm uninstall` (set aside on both sides: a CRD that a Helm chart publishes may carry it).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, ExitCode},
    sync::Mutex,
};

use anyhow::{Context as _, Result, bail};
use clap::Args;
use serde_json::{Value, json};

use operator_gen_cluster::{self as cluster, Cluster, OperatorCrate};

#[derive(Args)]
pub struct ChartsArgs {
    /// Folders of operator crates, each searched two levels deep (a corpus batch's
    /// `target/corpus-compile`, say); the workspace's operator crates when none is given.
    folders: Vec<PathBuf>,
    /// Also `operator-gen new` one crate of every archetype, and generate every snapshot
    /// fixture, into `target/charts-scaffold`, and check those.
    #[arg(long)]
    scaffold: bool,
}

pub fn run(args: ChartsArgs) -> Result<ExitCode> {
    let workspace = crate::workspace_root();
    let tools = Tools {
        helm: cluster::helm(&workspace)?,
        kubectl: Cluster::new(workspace.clone()).kubectl()?,
    };
    let mut crates = match args.folders.is_empty() {
        true => cluster::operator_crates(&workspace)?,
        false => crates_in(&args.folders)?,
    };
    if args.scaffold {
        crates.extend(scaffold_batch(&workspace.join("target/charts-scaffold"))?);
    }
    if crates.is_empty() {
        bail!("no operator crate (a crate with a generated deploy/base/) in the folders given");
    }
    let failures = Mutex::new(Vec::new());
    let compared = Mutex::new(0usize);
    let next = Mutex::new(crates.iter());
    // Two at a time: each check is a few short helm and kubectl processes.
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while let Some(operator) = next.lock().map(|mut it| it.next()).ok().flatten() {
                    match check(&tools, operator) {
                        Ok(modes) => *compared.lock().expect("no panic holds it") += modes,
                        Err(error) => failures
                            .lock()
                            .expect("no panic holds it")
                            .push(format!("{}: {error:#}", operator.dir.display())),
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().expect("no panic held it");
    for failure in &failures {
        eprintln!("{failure}\n");
    }
    println!(
        "charts: {} linted with `helm lint --strict`, {} modes compared with kustomize's \
         objects, every value set and a wrong one refused in each; {} failed",
        crates.len(),
        compared.into_inner().expect("no panic held it"),
        failures.len()
    );
    Ok(match failures.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    })
}

struct Tools {
    helm: PathBuf,
    kubectl: PathBuf,
}

/// The operator crates in `folders` and their subfolders, two levels deep.
fn crates_in(folders: &[PathBuf]) -> Result<Vec<OperatorCrate>> {
    let mut crates = Vec::new();
    let mut dirs: Vec<PathBuf> = folders.to_vec();
    for _ in 0..3 {
        let mut deeper = Vec::new();
        for dir in dirs {
            if dir.join("deploy/chart/Chart.yaml").is_file() {
                crates.extend(cluster::operator_crate(dir)?);
                continue;
            }
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                // A folder given must be there; one found below it may be gone (a build's).
                Err(error) if folders.contains(&dir) => {
                    return Err(error).with_context(|| format!("reading {}", dir.display()));
                }
                Err(_) => continue,
            };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    deeper.push(entry.path());
                }
            }
        }
        dirs = deeper;
    }
    crates.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(crates)
}

/// The scaffold batch, into `root`, emptied first: `operator-gen new` of every archetype
/// (`operator_gen_tests::archetypes`, as the scaffold test makes them), and every snapshot
/// fixture of `tests/fixtures/`, whose manifests cover webhooks, conversion, sharding and the
/// relations.
fn scaffold_batch(root: &Path) -> Result<Vec<OperatorCrate>> {
    use operator_gen::{
        Mode as WriteMode,
        scaffold::{NewOperator, create},
    };
    if root.exists() {
        std::fs::remove_dir_all(root).with_context(|| format!("emptying {}", root.display()))?;
    }
    let mut crates = Vec::new();
    for (name, primary) in operator_gen_tests::archetypes() {
        let dir = root.join("new").join(name);
        let new = NewOperator {
            dir: dir.clone(),
            name: Some(format!("{name}-operator")),
            primary,
            allow_http: false,
            runtime: None,
        };
        create(&new).with_context(|| format!("operator-gen new {name}"))?;
        crates.extend(cluster::operator_crate(dir)?);
    }
    for fixture in operator_gen_tests::fixtures() {
        let dir = root.join("fixtures").join(&fixture);
        let generated = operator_gen_tests::generate_fixture(&fixture)
            .with_context(|| format!("generating the fixture {fixture}"))?;
        generated
            .plan
            .apply(&dir, WriteMode::Write { force: true })
            .with_context(|| format!("writing the fixture {fixture}"))?;
        // The manifest beside what it generated, as in every crate: the checks read it.
        let manifest = operator_gen_tests::fixture_request(&fixture)?
            .manifest_path
            .context("a fixture's manifest path")?;
        std::fs::copy(&manifest, dir.join("operator.yaml"))
            .with_context(|| format!("copying {}", manifest.display()))?;
        crates.extend(cluster::operator_crate(dir)?);
    }
    Ok(crates)
}

/// One crate's chart: linted, then compared in every mode; how many modes were compared.
fn check(tools: &Tools, operator: &OperatorCrate) -> Result<usize> {
    let chart = operator.dir.join("deploy/chart");
    // `--strict` fails on a warning as on an error, saying which.
    run_tool(
        Command::new(&tools.helm)
            .arg("lint")
            .arg("--strict")
            .arg(&chart)
            .args(["--namespace", &operator.namespace]),
    )?;
    let mut modes = vec![
        Mode {
            name: "default values",
            values: Vec::new(),
            kustomize: &["deploy/base"],
            without: &[],
        },
        Mode {
            name: "monitoring on",
            values: ["serviceMonitor", "prometheusRule", "dashboard"]
                .map(|toggle| format!("monitoring.{toggle}=true"))
                .to_vec(),
            kustomize: &["deploy/base", "deploy/monitoring"],
            without: &[],
        },
    ];
    if operator.dir.join("deploy/cert-manager").is_dir() {
        modes.push(Mode {
            name: "cert-manager's certificates",
            values: vec!["webhooks.certificates=cert-manager".to_owned()],
            kustomize: &["deploy/cert-manager"],
            without: &[],
        });
    }
    let base_webhooks = std::fs::read_to_string(operator.dir.join("deploy/base/webhooks.yaml"));
    if base_webhooks.is_ok_and(|text| text.contains("WebhookConfiguration")) {
        modes.push(Mode {
            name: "the webhooks on loopback",
            // Where deploy/local/ has the configurations call.
            values: vec![format!(
                "webhooks.url={}",
                local_webhooks(operator)?.base.raw()
            )],
            kustomize: &["deploy/local"],
            // deploy/local/ leaves out the workload, which the chart installs whatever it calls.
            without: &["Deployment", "Service", "PodDisruptionBudget"],
        });
    }
    for mode in &modes {
        let helm = helm_objects(tools, operator, &mode.values)?;
        let mut kustomize = BTreeMap::new();
        for dir in mode.kustomize {
            let built = run_tool(
                Command::new(&tools.kubectl)
                    .arg("kustomize")
                    .arg(operator.dir.join(dir)),
            )?;
            for (key, object) in
                objects(&built).with_context(|| format!("reading kustomize's {dir}"))?
            {
                if kustomize.insert(key.clone(), object).is_some() {
                    bail!("{key} is in more than one of {}", mode.kustomize.join(", "));
                }
            }
        }
        // `helm install --create-namespace` makes the namespace; the chart holds none.
        kustomize.retain(|key, _| key.kind != "Namespace");
        // A CRD published by a Helm chart may carry Helm's annotations already.
        for object in kustomize.values_mut() {
            without_helms_annotations(object);
        }
        let helm: BTreeMap<ObjectKey, Value> = helm
            .into_iter()
            .filter(|(key, _)| !mode.without.contains(&key.kind.as_str()))
            .collect();
        let differences = differences(&kustomize, &helm);
        if !differences.is_empty() {
            bail!(
                "with {}, `helm template` differs from `kubectl kustomize {}`:\n  {}",
                mode.name,
                mode.kustomize.join(" + "),
                differences.join("\n  ")
            );
        }
    }
    every_value_reaches_the_deployment(tools, operator)?;
    bad_values_are_refused(tools, operator)?;
    follows_the_release_namespace(tools, operator)?;
    Ok(modes.len())
}

/// With every value changed from its default, each reaches the Deployment as it should: the
/// branches the modes above never render.
fn every_value_reaches_the_deployment(tools: &Tools, operator: &OperatorCrate) -> Result<()> {
    let defaults = chart_defaults(operator)?;
    let mut values = vec![
        "replicas=0",
        "leaderElection=false",
        "metricsPort=9090",
        "logFormat=pretty",
        "logLevel=debug",
        "image.repository=registry.example/operator",
        // Digits, which `--set` reads as an integer.
        "image.tag=20260611",
        "image.pullPolicy=Always",
        "resources.limits.memory=1Gi",
    ];
    let has = |key: &str| !defaults[key].is_null();
    if has("sharding") {
        values.push("sharding=false");
    }
    if has("crds") {
        values.push("crds.install=false");
    }
    let values: Vec<String> = values.into_iter().map(str::to_owned).collect();
    let objects = helm_objects(tools, operator, &values)?;
    if objects
        .keys()
        .any(|key| key.kind == "CustomResourceDefinition")
    {
        bail!("with crds.install=false the chart still installs the CRD");
    }
    // A budget over fewer than two replicas would let no drain evict one.
    for replicas in ["replicas=0", "replicas=1"] {
        let few = helm_objects(tools, operator, &[replicas.to_owned()])?;
        if few.keys().any(|key| key.kind == "PodDisruptionBudget") {
            bail!("with {replicas} the chart still installs a PodDisruptionBudget");
        }
    }
    let deployment = objects
        .iter()
        .find(|(key, _)| key.kind == "Deployment")
        .map(|(_, object)| object)
        .context("the chart installs no Deployment")?;
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let env = |name: &str| {
        container["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|var| var["name"] == name)
            .map(|var| var["value"].clone())
    };
    let port = container["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|port| port["name"] == "http")
        .map(|port| port["containerPort"].clone());
    let found = [
        ("replicas", deployment["spec"]["replicas"].clone(), json!(0)),
        (
            "image",
            container["image"].clone(),
            json!("registry.example/operator:20260611"),
        ),
        (
            "LEADER_ELECTION",
            env("LEADER_ELECTION").into(),
            json!("false"),
        ),
        ("SHARDING", env("SHARDING").into(), Value::Null),
        (
            "METRICS_ADDR",
            env("METRICS_ADDR").into(),
            json!("0.0.0.0:9090"),
        ),
        ("the http port", port.into(), json!(9090)),
        (
            "imagePullPolicy",
            container["imagePullPolicy"].clone(),
            json!("Always"),
        ),
        ("LOG_FORMAT", env("LOG_FORMAT").into(), json!("pretty")),
        ("RUST_LOG", env("RUST_LOG").into(), json!("debug")),
        (
            "the memory limit",
            container["resources"]["limits"]["memory"].clone(),
            json!("1Gi"),
        ),
        (
            "the requests, left at their defaults",
            container["resources"]["requests"].clone(),
            defaults["resources"]["requests"].clone(),
        ),
    ];
    for (what, got, wanted) in found {
        if got != wanted {
            bail!(
                "with {} set, {what} is {got}, not {wanted}",
                values.join(", ")
            );
        }
    }
    Ok(())
}

/// Where the crate's `deploy/local/` calls its webhooks: its manifest's `local.webhooks`.
fn local_webhooks(operator: &OperatorCrate) -> Result<operator_gen::model::LocalWebhooks> {
    let path = operator.dir.join("operator.yaml");
    let manifest = operator_gen::manifest::Manifest::load(&path)?;
    Ok(operator_gen::model::local::of_manifest(
        &manifest,
        &path.display().to_string(),
    )?)
}

/// Values of the wrong type, or that the chart does not have, are refused by helm itself,
/// naming the value.
fn bad_values_are_refused(tools: &Tools, operator: &OperatorCrate) -> Result<()> {
    let defaults = chart_defaults(operator)?;
    let mut bad = vec![
        ("replicas=abc", "/replicas"),
        ("replicsa=3", "replicsa"),
        ("logFormat=xml", "/logFormat"),
        ("resources.limit.memory=1Gi", "limit"),
    ];
    if !defaults["webhooks"]["url"].is_null() {
        bad.push(("webhooks.url=http://127.0.0.1:8443", "/webhooks/url"));
    }
    for (value, named) in bad {
        let values = vec![value.to_owned()];
        match helm_objects(tools, operator, &values) {
            Ok(_) => bail!("helm accepted --set {value}"),
            Err(error) if format!("{error:#}").contains(named) => {}
            Err(error) => bail!("--set {value} was refused without naming {named}: {error:#}"),
        }
    }
    Ok(())
}

/// The chart's `values.yaml`, as helm reads it.
fn chart_defaults(operator: &OperatorCrate) -> Result<Value> {
    let path = operator.dir.join("deploy/chart/values.yaml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("reading {}", path.display()))
}

/// One way to install a chart, and the kustomize folders that install the same.
struct Mode {
    name: &'static str,
    values: Vec<String>,
    kustomize: &'static [&'static str],
    /// Kinds of the chart's objects those folders leave out.
    without: &'static [&'static str],
}

/// A namespace no generated crate runs in, which a chart is installed into by the checks.
const ELSEWHERE: &str = "operator-gen-elsewhere";

/// Installed into another namespace than its crate's, with everything namespaced rendered
/// (monitoring on, cert-manager's certificate), the chart's objects are the same ones moved:
/// every name of the crate's namespace, in metadata, RBAC subjects, the webhooks' Service,
/// exclusion and bookkeeping condition, and the certificate's DNS names, is the release's.
fn follows_the_release_namespace(tools: &Tools, operator: &OperatorCrate) -> Result<()> {
    let mut values: Vec<String> = ["serviceMonitor", "prometheusRule", "dashboard"]
        .map(|toggle| format!("monitoring.{toggle}=true"))
        .to_vec();
    if operator.dir.join("deploy/cert-manager").is_dir() {
        values.push("webhooks.certificates=cert-manager".to_owned());
    }
    let own = operator.namespace.as_str();
    let moved: BTreeMap<ObjectKey, Value> = helm_objects(tools, operator, &values)?
        .into_iter()
        .map(|(key, object)| match key.kind.as_str() {
            // A CRD is cluster-wide, and its schema's text is not a namespace.
            "CustomResourceDefinition" => (key, object),
            _ => (
                ObjectKey {
                    namespace: match key.namespace == own {
                        true => ELSEWHERE.to_owned(),
                        false => key.namespace,
                    },
                    ..key
                },
                moved(object, own, ELSEWHERE),
            ),
        })
        .collect();
    let elsewhere = helm_objects_in(tools, operator, ELSEWHERE, &values)?;
    let differences = differences(&moved, &elsewhere);
    if !differences.is_empty() {
        bail!(
            "installed in namespace {ELSEWHERE}, the chart's objects are not its objects in \
             {own} moved there:\n  {}",
            differences.join("\n  ")
        );
    }
    Ok(())
}

/// `object` with every string that names namespace `from` naming `to` instead.
fn moved(object: Value, from: &str, to: &str) -> Value {
    moved_at(object, from, to, false)
}

/// `value` moved; `whole` when it is where a namespace is named by itself: a `namespace`
/// field, or a `namespaceSelector`. Elsewhere a text that is the namespace's name may be
/// another name (an operator in a namespace of its own shares its name).
fn moved_at(value: Value, from: &str, to: &str, whole: bool) -> Value {
    match value {
        Value::String(text) if whole && text == from => Value::String(to.to_owned()),
        Value::String(text) => Value::String(in_namespace(&text, from, to)),
        Value::Array(items) => items
            .into_iter()
            .map(|item| moved_at(item, from, to, whole))
            .collect(),
        Value::Object(fields) => fields
            .into_iter()
            .map(|(key, value)| {
                let whole = whole || key == "namespace" || key == "namespaceSelector";
                let value = moved_at(value, from, to, whole);
                (key, value)
            })
            .collect(),
        other => other,
    }
}

/// `text` with namespace `from` replaced by `to` where it names it inside a text: a Service's
/// DNS name (`<service>.<from>.svc`), `<from>/<name>`, or a ServiceAccount's user
/// (`system:serviceaccount:<from>:<name>`). Other words that happen to spell it stay.
fn in_namespace(text: &str, from: &str, to: &str) -> String {
    let text = text
        .replace(&format!(".{from}.svc"), &format!(".{to}.svc"))
        .replace(&format!(":{from}:"), &format!(":{to}:"));
    match text.strip_prefix(&format!("{from}/")) {
        Some(rest) => format!("{to}/{rest}"),
        None => text,
    }
}

/// The release name the checks render with: a chart's objects do not depend on it (a crate's
/// own name may be longer than helm allows a release's).
const RELEASE: &str = "release";

/// The objects `helm template` renders with `values` set.
fn helm_objects(
    tools: &Tools,
    operator: &OperatorCrate,
    values: &[String],
) -> Result<BTreeMap<ObjectKey, Value>> {
    helm_objects_in(tools, operator, &operator.namespace, values)
}

/// The objects `helm template` renders with `values` set, into `namespace`.
fn helm_objects_in(
    tools: &Tools,
    operator: &OperatorCrate,
    namespace: &str,
    values: &[String],
) -> Result<BTreeMap<ObjectKey, Value>> {
    let mut template = Command::new(&tools.helm);
    template
        .arg("template")
        .arg(RELEASE)
        .arg(operator.dir.join("deploy/chart"))
        .args(["--namespace", namespace]);
    for value in values {
        template.args(["--set", value]);
    }
    let rendered = run_tool(&mut template)?;
    let mut objects = objects(&rendered).context("reading `helm template`'s output")?;
    for object in objects.values_mut() {
        without_helms_annotations(object);
    }
    Ok(objects)
}

/// The annotations only Helm reads, which kustomize's objects do not carry.
const HELM_ANNOTATIONS: &[&str] = &["helm.sh/resource-policy"];

fn without_helms_annotations(object: &mut Value) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    {
        for annotation in HELM_ANNOTATIONS {
            annotations.remove(*annotation);
        }
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
    }
}

/// What names an object in a set of manifests.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ObjectKey {
    api_version: String,
    kind: String,
    namespace: String,
    name: String,
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}/{}",
            self.api_version, self.kind, self.namespace, self.name
        )
    }
}

/// The objects of a multi-document YAML stream, by their keys.
fn objects(yaml: &str) -> Result<BTreeMap<ObjectKey, Value>> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple_with_options(yaml, operator_gen::limits::yaml_options())?;
    let mut objects = BTreeMap::new();
    for object in documents.into_iter().filter(|d| !d.is_null()) {
        let text = |path: &[&str]| {
            let mut value = &object;
            for key in path {
                value = &value[*key];
            }
            value.as_str().unwrap_or_default().to_owned()
        };
        let key = ObjectKey {
            api_version: text(&["apiVersion"]),
            kind: text(&["kind"]),
            namespace: text(&["metadata", "namespace"]),
            name: text(&["metadata", "name"]),
        };
        if objects.insert(key.clone(), object).is_some() {
            bail!("{key} is there twice");
        }
    }
    Ok(objects)
}

/// What differs between kustomize's objects and Helm's, one line each: an object only one has,
/// or the first field at which an object both have differs.
fn differences(
    kustomize: &BTreeMap<ObjectKey, Value>,
    helm: &BTreeMap<ObjectKey, Value>,
) -> Vec<String> {
    let mut differences = Vec::new();
    for (key, object) in kustomize {
        match helm.get(key) {
            None => differences.push(format!("{key}: only kustomize has it")),
            Some(theirs) => {
                if let Some(path) = first_difference(object, theirs, String::new()) {
                    differences.push(format!("{key}: differs at {path}"));
                }
            }
        }
    }
    for key in helm.keys().filter(|key| !kustomize.contains_key(*key)) {
        differences.push(format!("{key}: only the chart has it"));
    }
    differences
}

/// The path of the first field at which `a` and `b` differ, if any.
fn first_difference(a: &Value, b: &Value, path: String) -> Option<String> {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter()
                .find_map(|key| match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => first_difference(x, y, format!("{path}.{key}")),
                    _ => Some(format!("{path}.{key}")),
                })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(x, y, format!("{path}[{i}]"))),
        // kustomize writes a whole float (`10.0`, as a CRD's schema types it) as `10`.
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => None,
        _ if a == b => None,
        _ => Some(match path.is_empty() {
            true => ".".to_owned(),
            false => path,
        }),
    }
}

/// Runs a helm or kubectl command; its standard output, or an error with what it said.
fn run_tool(command: &mut Command) -> Result<String> {
    let output = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "{command:?} failed ({}):\n{}{}",
            output.status,
            stdout,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: &str, name: &str) -> ObjectKey {
        ObjectKey {
            api_version: "v1".to_owned(),
            kind: kind.to_owned(),
            namespace: "ns".to_owned(),
            name: name.to_owned(),
        }
    }

    #[test]
    fn only_texts_that_name_the_namespace_move_with_it() {
        let cases = [
            (
                "op.default.svc.cluster.local",
                "op.elsewhere.svc.cluster.local",
            ),
            ("default/op-webhook", "elsewhere/op-webhook"),
            (
                "x == 'system:serviceaccount:default:op'",
                "x == 'system:serviceaccount:elsewhere:op'",
            ),
            ("default", "default"),
            ("the default interval", "the default interval"),
            ("a/default/b", "a/default/b"),
        ];
        for (text, wanted) in cases {
            assert_eq!(in_namespace(text, "default", "elsewhere"), wanted, "{text}");
        }
        let object = json!({
            "metadata": {"name": "op", "namespace": "op"},
            "subjects": [{"name": "op", "namespace": "op"}],
            "namespaceSelector": {"matchExpressions": [{"key": "k", "values": ["op"]}]},
            "n": 3,
        });
        assert_eq!(
            moved(object, "op", "elsewhere"),
            json!({
                "metadata": {"name": "op", "namespace": "elsewhere"},
                "subjects": [{"name": "op", "namespace": "elsewhere"}],
                "namespaceSelector": {"matchExpressions": [{"key": "k", "values": ["elsewhere"]}]},
                "n": 3,
            })
        );
    }

    #[test]
    fn objects_are_keyed_by_kind_namespace_and_name_and_a_repeat_is_an_error() {
        let yaml = "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns}\n---\n# only a comment\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: a, namespace: ns}\n";
        let found = objects(yaml).unwrap();
        assert_eq!(
            found.keys().cloned().collect::<Vec<_>>(),
            [key("Secret", "a"), key("Service", "a")]
        );
        let twice = format!(
            "{yaml}---\napiVersion: v1\nkind: Secret\nmetadata: {{name: a, namespace: ns}}\n"
        );
        assert!(
            objects(&twice)
                .unwrap_err()
                .to_string()
                .contains("there twice")
        );
    }

    #[test]
    fn a_difference_names_the_first_field_and_each_object_only_one_side_has() {
        let a = serde_json::json!({"spec": {"replicas": 2, "ports": [{"port": 80}]}});
        let b = serde_json::json!({"spec": {"replicas": 2, "ports": [{"port": 81}]}});
        assert_eq!(
            first_difference(&a, &b, String::new()).as_deref(),
            Some(".spec.ports[0].port")
        );
        assert_eq!(first_difference(&a, &a, String::new()), None);
        let (whole, float) = (
            serde_json::json!({"maximum": 10}),
            serde_json::json!({"maximum": 10.0}),
        );
        assert_eq!(first_difference(&whole, &float, String::new()), None);
        let kustomize = BTreeMap::from([
            (key("Service", "a"), a.clone()),
            (key("Secret", "s"), a.clone()),
        ]);
        let helm = BTreeMap::from([(key("Service", "a"), b), (key("ConfigMap", "c"), a)]);
        let found = differences(&kustomize, &helm);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(
            found
                .iter()
                .any(|d| d.ends_with("Secret ns/s: only kustomize has it"))
        );
        assert!(
            found
                .iter()
                .any(|d| d.ends_with("ConfigMap ns/c: only the chart has it"))
        );
    }

    #[test]
    fn only_helms_own_annotations_are_dropped() {
        let mut crd =
            serde_json::json!({"metadata": {"annotations": {"helm.sh/resource-policy": "keep"}}});
        without_helms_annotations(&mut crd);
        assert_eq!(crd, serde_json::json!({"metadata": {}}));
        let mut other = serde_json::json!({"metadata": {"annotations": {"helm.sh/resource-policy": "keep", "a": "b"}}});
        without_helms_annotations(&mut other);
        assert_eq!(
            other,
            serde_json::json!({"metadata": {"annotations": {"a": "b"}}})
        );
    }
}
