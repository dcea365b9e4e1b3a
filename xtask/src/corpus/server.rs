//! `cargo xtask corpus --cluster`: each CRD installed on the e2e control plane, its generated
//! sample created by a server-side dry run, and the API server's answer read back through the
//! crate's generated types.
//!
//! The control plane is the e2e's (`cargo xtask cluster`, Kubernetes 1.37). Each CRD is
//! installed as published and each sample created as generated, so the API server judges
//! both whole: their schemas, defaults and CEL rules. A CRD it refuses is listed with the
//! reason it gave. While the CRD is installed, the variants of the sample made to break its
//! CEL rules are dry-run too, for the agreement of kube-cel and the API server
//! (`corpus/agreement.rs`).
//!
//! Reading back needs code, and one program per batch does it for every CRD in the batch: one
//! module per CRD holding the types of the version its crate uses, exactly as in that crate's
//! `src/types.rs`, so that only those types are compiled, never the controllers or the other
//! versions. The modules are spread over a few library crates of about equal size, because
//! type checking a crate runs on one core.

use std::{
    collections::BTreeMap,
    fs,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use futures::StreamExt as _;
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, PostParams},
};
use serde::Deserialize as _;
use serde_json::Value;

use super::agreement::{Cause, Refusal, Verdict};
use operator_gen_cluster::Cluster;

/// CustomResourceDefinitions, as the client addresses them.
fn crd_resource() -> ApiResource {
    ApiResource {
        group: "apiextensions.k8s.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "apiextensions.k8s.io/v1".to_owned(),
        kind: "CustomResourceDefinition".to_owned(),
        plural: "customresourcedefinitions".to_owned(),
    }
}

/// What the API server said, on one line.
fn reason(error: kube::Error) -> String {
    refusal(error).message
}

/// What the API server said, on one line, with the fields it named.
fn refusal(error: kube::Error) -> Refusal {
    match error {
        kube::Error::Api(status) => Refusal {
            message: status.message.replace('\n', " "),
            causes: status
                .details
                .into_iter()
                .flat_map(|details| details.causes)
                .map(|cause| Cause {
                    field: cause.field,
                    reason: cause.reason,
                    message: cause.message,
                })
                .collect(),
        },
        other => Refusal {
            message: other.to_string().replace('\n', " "),
            causes: Vec::new(),
        },
    }
}

/// One CRD as the server phase needs it.
pub(super) struct Subject {
    /// The generated crate's name, which also names its module in the read-back program.
    pub crate_name: String,
    /// The CRD as generated into `deploy/base/crd.yaml`.
    pub crd: Value,
    /// The sample object, with `apiVersion`, `kind` and `metadata`.
    pub object: Value,
    /// The types of the version the crate uses (its `src/types.rs` re-exports them), and the
    /// primary's type among them.
    pub types: String,
    pub root_type: String,
    /// Variants of the sample made to break its CEL rules, dry-run after it.
    pub variants: Vec<Value>,
}

/// What happened to one CRD on the API server.
#[derive(Default)]
pub(super) struct Outcome {
    /// `Err` holds why the API server would not serve the CRD.
    pub installed: Option<Result<(), String>>,
    pub accepted: Option<Result<(), String>>,
    pub read_back: Option<Result<(), String>>,
    /// The sample's verdict, and the variants' in their order, once the CRD was installed.
    pub sample: Option<Verdict>,
    pub variants: Vec<Verdict>,
    /// The time the variants' dry runs took, from the first sent to the last answered.
    pub variants_took: Duration,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        [&self.installed, &self.accepted, &self.read_back]
            .iter()
            .all(|step| matches!(step, Some(Ok(()))))
    }
}

/// The control plane, started if it is not running, and a client of its admin.
pub(super) struct Server {
    runtime: tokio::runtime::Runtime,
    client: Client,
    scratch: PathBuf,
}

/// CRDs are installed, and samples dry-run, this many at a time.
pub(super) const IN_FLIGHT: usize = 8;

impl Server {
    pub fn start(scratch: &Path) -> Result<Self> {
        let cluster = Cluster::new(crate::workspace_root());
        if !cluster.is_ready() {
            eprintln!("starting the control plane (cargo xtask cluster up)");
            cluster.up(operator_gen_cluster::Shape::ControlPlaneOnly)?;
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let client = runtime.block_on(crate::bench::client(&cluster.admin_kubeconfig()))?;
        fs::create_dir_all(scratch)?;
        Ok(Self {
            runtime,
            client,
            scratch: scratch.to_owned(),
        })
    }

    /// Installs, dry-runs and reads back every subject of one batch; `target` is the corpus's
    /// shared target directory and `lock` the workspace's Cargo.lock.
    pub fn check_batch(
        &self,
        number: usize,
        subjects: &[Subject],
        target: &Path,
        lock: &Path,
    ) -> Result<BTreeMap<String, Outcome>> {
        let results: Vec<(Outcome, Option<Value>)> = self.runtime.block_on(
            futures::stream::iter(subjects)
                .map(|subject| self.on_server(subject))
                .buffered(IN_FLIGHT)
                .collect(),
        );
        let mut outcomes = BTreeMap::new();
        let mut answers = Vec::new();
        for (subject, (outcome, answer)) in subjects.iter().zip(results) {
            if let Some(answer) = answer {
                answers.push((subject, answer));
            }
            outcomes.insert(subject.crate_name.clone(), outcome);
        }
        if !answers.is_empty() {
            let read = self.read_back(number, &answers, target, lock)?;
            for (name, result) in read {
                if let Some(outcome) = outcomes.get_mut(&name) {
                    outcome.read_back = Some(result);
                }
            }
        }
        Ok(outcomes)
    }

    /// Installs the subject's CRD, dry-runs its sample and removes the CRD again; the
    /// answer, when the sample was accepted.
    async fn on_server(&self, subject: &Subject) -> (Outcome, Option<Value>) {
        let mut outcome = Outcome::default();
        let installed = self.install(subject).await;
        let ok = installed.is_ok();
        outcome.installed = Some(installed);
        if !ok {
            return (outcome, None);
        }
        let answer = self.dry_run(subject, &subject.object).await;
        outcome.sample = Some(match &answer {
            Ok(_) => Verdict::Accepted,
            Err(refusal) => Verdict::Refused(refusal.clone()),
        });
        let started = Instant::now();
        let variants: Vec<Verdict> = futures::stream::iter(&subject.variants)
            .map(|variant| self.dry_run(subject, variant))
            .buffered(IN_FLIGHT)
            .map(|answer| answer.map_or_else(Verdict::Refused, |_| Verdict::Accepted))
            .collect()
            .await;
        outcome.variants_took = started.elapsed();
        outcome.variants = variants;
        let crds = Api::<DynamicObject>::all_with(self.client.clone(), &crd_resource());
        if let Some(name) = subject.crd["metadata"]["name"].as_str() {
            let _ = crds.delete(name, &DeleteParams::default()).await;
        }
        match answer {
            Ok(answer) => {
                outcome.accepted = Some(Ok(()));
                (outcome, Some(answer))
            }
            Err(refusal) => {
                outcome.accepted = Some(Err(refusal.message));
                (outcome, None)
            }
        }
    }

    /// Creates the CRD, unmodified, and waits until it is served.
    async fn install(&self, subject: &Subject) -> Result<(), String> {
        let crd = &subject.crd;
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let crds = Api::<DynamicObject>::all_with(self.client.clone(), &crd_resource());
        let object = DynamicObject::deserialize(crd).map_err(|e| e.to_string())?;
        let _ = crds.delete(&name, &DeleteParams::default()).await;
        for _ in 0..300 {
            match crds.get_opt(&name).await {
                Ok(None) => break,
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        crds.create(&PostParams::default(), &object)
            .await
            .map_err(reason)?;
        for _ in 0..300 {
            let live = crds.get(&name).await.map_err(reason)?;
            let conditions = live.data["status"]["conditions"].as_array().cloned();
            let established = conditions.into_iter().flatten().any(|condition| {
                condition["type"] == "Established" && condition["status"] == "True"
            });
            if established {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err("not Established within 30 s".to_owned())
    }

    /// The API server's answer to creating `object` (the sample, or a variant of it), by a
    /// server-side dry run.
    async fn dry_run(&self, subject: &Subject, object: &Value) -> Result<Value, Refusal> {
        let crd = &subject.crd["spec"];
        let failed = |message: String| Refusal {
            message,
            causes: Vec::new(),
        };
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let resource = ApiResource {
            group: group.to_owned(),
            version: version.to_owned(),
            api_version: api_version.to_owned(),
            kind: object["kind"].as_str().unwrap_or_default().to_owned(),
            plural: crd["names"]["plural"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        };
        let api: Api<DynamicObject> = if crd["scope"] == "Namespaced" {
            Api::namespaced_with(self.client.clone(), "default", &resource)
        } else {
            Api::all_with(self.client.clone(), &resource)
        };
        let object = DynamicObject::deserialize(object).map_err(|e| failed(e.to_string()))?;
        let params = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        // Just created, the resource may take a moment to be served.
        let mut last = String::new();
        for _ in 0..50 {
            match api.create(&params, &object).await {
                Ok(answer) => {
                    return serde_json::to_value(answer).map_err(|e| failed(e.to_string()));
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    last = status.message;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(refusal(e)),
            }
        }
        Err(failed(last))
    }

    /// Builds the batch's read-back program and has it decode each answer as its crate's
    /// primary type and encode it again; an answer that does not come back whole is named
    /// with the first place it differs.
    fn read_back(
        &self,
        number: usize,
        answers: &[(&Subject, Value)],
        target: &Path,
        lock: &Path,
    ) -> Result<BTreeMap<String, Result<(), String>>> {
        let dir = self.scratch.join(format!("readback-{number}"));
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        write_readback_workspace(&dir, answers)?;
        if lock.exists() {
            fs::copy(lock, dir.join("Cargo.lock"))?;
        }
        let status = operator_gen_tests::cargo_unlinted()
            .args(["build", "--quiet"])
            .current_dir(&dir)
            .env("CARGO_TARGET_DIR", std::path::absolute(target)?)
            .status()
            .context("building the read-back program")?;
        if !status.success() {
            let reason = "the read-back program did not build (see its errors above)".to_owned();
            return Ok(answers
                .iter()
                .map(|(s, _)| (s.crate_name.clone(), Err(reason.clone())))
                .collect());
        }
        let binary = std::path::absolute(target)?.join("debug/corpus-readback");
        let mut child = Command::new(&binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("running {}", binary.display()))?;
        {
            let mut input = child.stdin.take().context("the program's stdin")?;
            for (index, (_, answer)) in answers.iter().enumerate() {
                writeln!(input, "{index}\t{answer}")?;
            }
        }
        let output = child.wait_with_output()?;
        if !output.status.success() {
            bail!("the read-back program failed ({})", output.status);
        }
        let mut results = BTreeMap::new();
        let lines: Vec<&str> = std::str::from_utf8(&output.stdout)?.lines().collect();
        for (index, (subject, answer)) in answers.iter().enumerate() {
            let result = match lines.get(index).map(|l| l.split_once('\t')) {
                Some(Some(("ok", json))) => match serde_json::from_str::<Value>(json) {
                    Ok(again) => first_difference(answer, &again, "")
                        .map_or(Ok(()), |at| Err(format!("lost or changed at {at}"))),
                    Err(e) => Err(format!("the program printed no JSON: {e}")),
                },
                Some(Some((_, reason))) => Err(reason.to_owned()),
                _ => Err("the program gave no answer".to_owned()),
            };
            results.insert(subject.crate_name.clone(), result);
        }
        Ok(results)
    }
}

/// The first place where `read` differs from `sent`, as a JSON path; `None` when equal.
fn first_difference(sent: &Value, read: &Value, path: &str) -> Option<String> {
    match (sent, read) {
        (Value::Object(a), Value::Object(b)) => a
            .iter()
            .find_map(|(key, value)| match b.get(key) {
                Some(other) => first_difference(value, other, &format!("{path}.{key}")),
                None => Some(format!("{path}.{key} (missing)")),
            })
            .or_else(|| {
                b.keys()
                    .find(|key| !a.contains_key(*key))
                    .map(|key| format!("{path}.{key} (added)"))
            }),
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}[{i}]"))),
        (a, b) if a == b => None,
        // Numbers may come back in another form (1.0 as 1) and mean the same.
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => None,
        _ => Some(if path.is_empty() {
            ".".to_owned()
        } else {
            path.to_owned()
        }),
    }
}

/// The read-back program of one group, as a workspace: its CRDs' types are split over
/// [`READBACK_PARTS`] library crates of about equal size, which cargo compiles side by side
/// (type checking a crate runs on one core), and a binary that dispatches to them.
fn write_readback_workspace(dir: &Path, answers: &[(&Subject, Value)]) -> Result<()> {
    let sizes: Vec<usize> = answers.iter().map(|(s, _)| s.types.len()).collect();
    let assignment = split_by_size(&sizes, READBACK_PARTS);
    let parts = assignment.iter().max().map_or(0, |last| last + 1);
    let mut dispatch = Vec::new();
    let mut members = Vec::new();
    let mut dependencies = String::new();
    for part in 0..parts {
        let name = format!("readback-part-{part}");
        let mut lib = String::from(READBACK_PART_HEAD);
        let mut arms = String::new();
        let mine = assignment.iter().enumerate().filter(|(_, p)| **p == part);
        for (index, _) in mine {
            let subject = answers[index].0;
            lib.push_str(&format!("mod m{index} {{\n{}\n}}\n", subject.types));
            arms.push_str(&format!(
                "        \"{index}\" => round_trip_as::<m{index}::{}>(json),\n",
                subject.root_type
            ));
        }
        lib.push_str(&READBACK_PART_TAIL.replace("{arms}", &arms));
        fs::create_dir_all(dir.join(&name).join("src"))?;
        fs::write(dir.join(&name).join("src/lib.rs"), lib)?;
        fs::write(
            dir.join(&name).join("Cargo.toml"),
            format!("[package]\nname = \"{name}\"\n{READBACK_PACKAGE}{READBACK_DEPENDENCIES}"),
        )?;
        dispatch.push(format!("{}::round_trip", name.replace('-', "_")));
        members.push(format!("\"{name}\""));
        dependencies.push_str(&format!("{name} = {{ path = \"{name}\" }}\n"));
    }
    fs::create_dir_all(dir.join("src"))?;
    fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"corpus-readback\"\n{READBACK_PACKAGE}[dependencies]\n{dependencies}\n\
             [workspace]\nmembers = [{}]\n{READBACK_PROFILE}",
            members.join(", ")
        ),
    )?;
    fs::write(
        dir.join("src/main.rs"),
        READBACK_MAIN.replace("{parts}", &format!("[{}]", dispatch.join(", "))),
    )?;
    Ok(())
}

/// Library crates per read-back program: enough to keep two cores busy while one crate is
/// larger than the rest, few enough that loading the dependencies' metadata stays small.
const READBACK_PARTS: usize = 4;

/// Assigns each item, by size, to one of at most `parts` parts so that the largest part is
/// small: largest first, each to the part holding the least so far.
fn split_by_size(sizes: &[usize], parts: usize) -> Vec<usize> {
    let parts = parts.clamp(1, sizes.len().max(1));
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    let mut load = vec![0usize; parts];
    let mut assignment = vec![0; sizes.len()];
    for i in order {
        let (lightest, _) = load
            .iter()
            .enumerate()
            .min_by_key(|(_, l)| **l)
            .unwrap_or((0, &0));
        assignment[i] = lightest;
        load[lightest] += sizes[i];
    }
    assignment
}

const READBACK_PACKAGE: &str = "version = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n";

const READBACK_DEPENDENCIES: &str = r#"[dependencies]
chrono = { version = "0.4.42", default-features = false, features = ["serde"] }
k8s-openapi = { version = "0.29.0", features = ["latest"] }
kube = { version = "5.0.0", default-features = false, features = ["derive"] }
serde = { version = "1.0.228", features = ["derive"] }
serde_json = "1.0.145"
"#;

/// Built once and run once: no debug info to write or link.
const READBACK_PROFILE: &str = "\n[profile.dev]\ndebug = false\n";

const READBACK_PART_HEAD: &str = "//! Some of a group's generated types, one module per CRD.\n\
#![allow(dead_code, unused_imports, clippy::all)]\n\n";

const READBACK_PART_TAIL: &str = r#"
/// The answer numbered `index` decoded as its CRD's primary type and encoded again; `None`
/// when this part does not hold that CRD.
pub fn round_trip(index: &str, json: &str) -> Option<String> {
    Some(match index {
{arms}        _ => return None,
    })
}

fn round_trip_as<T: serde::de::DeserializeOwned + serde::Serialize>(json: &str) -> String {
    match serde_json::from_str::<T>(json) {
        Ok(value) => match serde_json::to_string(&value) {
            Ok(again) => format!("ok\t{again}"),
            Err(e) => format!("error\tencoding: {e}"),
        },
        Err(e) => format!("error\tdecoding: {e}"),
    }
}
"#;

const READBACK_MAIN: &str = r#"//! Reads API server answers back through generated types: one line in, `index<TAB>json`;
//! one line out, `ok<TAB>json` or `error<TAB>reason`.

fn main() {
    let parts: &[fn(&str, &str) -> Option<String>] = &{parts};
    for line in std::io::stdin().lines() {
        let line = line.expect("stdin");
        let (index, json) = line.split_once('\t').expect("index<TAB>json");
        let answer = parts
            .iter()
            .find_map(|part| part(index, json))
            .unwrap_or_else(|| "error\tno such module".to_owned());
        println!("{}", answer.replace('\n', " "));
    }
}
"#;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_largest_part_is_kept_small_and_every_item_has_one() {
        let sizes = [50, 10, 40, 30, 20, 60];
        let assignment = split_by_size(&sizes, 3);
        let mut load = [0; 3];
        for (item, part) in assignment.iter().enumerate() {
            load[*part] += sizes[item];
        }
        assert_eq!(load, [70, 70, 70]);
        assert_eq!(split_by_size(&[5, 7], 4).len(), 2);
        assert!(split_by_size(&[5, 7], 4).iter().all(|p| *p < 2));
        assert!(split_by_size(&[], 4).is_empty());
    }

    #[test]
    fn the_first_difference_is_named_by_its_path() {
        let sent = json!({"spec": {"a": [1, {"b": "x"}], "c": 2.0}, "kind": "K"});
        assert_eq!(first_difference(&sent, &sent.clone(), ""), None);
        let same_number = json!({"spec": {"a": [1, {"b": "x"}], "c": 2}, "kind": "K"});
        assert_eq!(first_difference(&sent, &same_number, ""), None);
        let lost = json!({"spec": {"a": [1, {}], "c": 2.0}, "kind": "K"});
        assert_eq!(
            first_difference(&sent, &lost, "").as_deref(),
            Some(".spec.a[1].b (missing)")
        );
        let added = json!({"spec": {"a": [1, {"b": "x"}], "c": 2.0, "d": null}, "kind": "K"});
        assert_eq!(
            first_difference(&sent, &added, "").as_deref(),
            Some(".spec.d (added)")
        );
    }
}
