//! Deploying the operator as its user does, switching between its pods and a local run as a
//! developer does, and taking it away.
//!
//! The pods come from the crate's own `deploy/` under an overlay of the e2e's
//! (`target/e2e/<crate>/pods/`), which changes only what a cluster of its own needs: a
//! shorter Lease and the reconciles' debug lines the sharded check reads; the restricted Pod
//! Security profile on the operator's namespace; that namespace itself for a crate whose
//! `deploy/` would run it in `default`; and, for a rollout, the image's tag (as `kustomize edit
//! set image` does). The local run is `deploy/local/` under the same namespace.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use operator_gen::model::LOCAL_WEBHOOK_BASE;
use serde_json::{Value, json};

use super::{LEASE_SECONDS, Mode, READY, Suite};
use crate::kit::{Local, images, logs};

/// How the operator was installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deployed {
    /// `kubectl apply --server-side -k deploy/`.
    Kustomize,
    /// `helm install … deploy/chart`.
    Chart,
}

/// The labels that enforce the restricted Pod Security profile on a namespace, and warn and
/// audit with it.
const RESTRICTED: [(&str, &str); 3] = [
    ("pod-security.kubernetes.io/enforce", "restricted"),
    ("pod-security.kubernetes.io/warn", "restricted"),
    ("pod-security.kubernetes.io/audit", "restricted"),
];

/// The CRD a derived crate's `crdgen` prints, as the suite installs it: calling the conversion
/// webhook through the Service in the operator's namespace, and on loopback for a local run
/// (`--webhook-url`, as its README says for one).
#[derive(Debug, Clone)]
pub(crate) struct DerivedCrd {
    pub service: PathBuf,
    pub local: Option<PathBuf>,
}

impl DerivedCrd {
    /// Runs `crdgen`; for a crate that `converts`, also with `--webhook-url`. The Service's
    /// namespace is `namespace`, where the operator runs here, as a user who moves it sets it.
    pub fn print(crdgen: &Path, converts: bool, namespace: &str, logs: &Path) -> Result<Self> {
        fs::create_dir_all(logs)?;
        let mut crd = crdgen_output(crdgen, &[])?;
        if let Some(service) = crd.pointer_mut("/spec/conversion/webhook/clientConfig/service") {
            service["namespace"] = json!(namespace);
        }
        let service = logs.join("crd.json");
        fs::write(&service, crd.to_string())?;
        let local = if converts {
            let crd = crdgen_output(crdgen, &["--webhook-url", LOCAL_WEBHOOK_BASE])?;
            let config = crd.pointer("/spec/conversion/webhook/clientConfig");
            let called = config.and_then(|c| c["url"].as_str());
            if !called.is_some_and(|url| url.starts_with(LOCAL_WEBHOOK_BASE)) {
                bail!(
                    "crdgen --webhook-url {LOCAL_WEBHOOK_BASE} printed a conversion calling \
                     {config:?}"
                );
            }
            let path = logs.join("crd-local.json");
            fs::write(&path, crd.to_string())?;
            Some(path)
        } else {
            None
        };
        Ok(Self { service, local })
    }
}

/// What `crdgen args` printed, as JSON.
fn crdgen_output(crdgen: &Path, args: &[&str]) -> Result<Value> {
    let output = Command::new(crdgen)
        .args(args)
        .output()
        .with_context(|| format!("running {}", crdgen.display()))?;
    if !output.status.success() {
        bail!(
            "{} failed: {}",
            crdgen.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let text = String::from_utf8(output.stdout).context("crdgen printed no UTF-8")?;
    serde_saphyr::from_str_with_options(&text, operator_gen::limits::yaml_options())
        .context("reading the CRD crdgen printed")
}

impl Suite {
    /// The e2e's overlay of `deploy/` (`pods`) or of `deploy/local/` (`local`).
    fn overlay(&self, which: &str) -> PathBuf {
        self.env.logs.join(which)
    }

    /// Whether `deploy/` would run the operator in `default`, which the e2e moves it out of.
    fn moved_from_default(&self) -> bool {
        !self.dir.join("deploy/base/namespace.yaml").exists()
    }

    /// Writes the two overlays, the pods' running the image tagged `tag` (the one
    /// `deploy/` names when `None`).
    pub(super) fn write_overlays(&self, tag: Option<&str>) -> Result<()> {
        let deploy = self.dir.join("deploy");
        for (which, base) in [("pods", deploy.clone()), ("local", deploy.join("local"))] {
            let folder = self.overlay(which);
            fs::create_dir_all(&folder)?;
            let base = std::path::absolute(&base)?;
            let relative = pathdiff(&base, &std::path::absolute(&folder)?);
            let mut resources = vec![json!(relative)];
            let mut kustomization = json!({
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
            });
            let namespace_labels: serde_json::Map<String, Value> = RESTRICTED
                .iter()
                .map(|(k, v)| ((*k).to_owned(), json!(v)))
                .collect();
            let mut patches = Vec::new();
            if self.moved_from_default() {
                kustomization["namespace"] = json!(self.operator_namespace);
                let namespace = json!({
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": self.operator_namespace, "labels": namespace_labels},
                });
                fs::write(folder.join("namespace.json"), namespace.to_string())?;
                resources.push(json!("namespace.json"));
            } else {
                let labels = json!({"metadata": {"labels": namespace_labels}});
                patches.push(json!({
                    "target": {"kind": "Namespace", "name": self.operator_namespace},
                    "patch": format!(
                        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {}\n  labels: {}\n",
                        self.operator_namespace,
                        labels["metadata"]["labels"]
                    ),
                }));
            }
            if which == "pods" {
                let env = json!([
                    {"name": "LEASE_SECONDS", "value": LEASE_SECONDS.to_string()},
                    {"name": "RUST_LOG", "value": "info,operator_gen_runtime::traces=debug"},
                ]);
                patches.push(json!({
                    "target": {"kind": "Deployment", "name": self.name},
                    "patch": format!(
                        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  \
                         template:\n    spec:\n      containers:\n        - name: operator\n          \
                         env: {env}\n",
                        name = self.name,
                    ),
                }));
                if let Some(tag) = tag {
                    kustomization["images"] = json!([{"name": self.name, "newTag": tag}]);
                }
            }
            kustomization["resources"] = json!(resources);
            if !patches.is_empty() {
                kustomization["patches"] = json!(patches);
            }
            // JSON is YAML: kustomize reads it as its kustomization.yaml.
            fs::write(folder.join("kustomization.yaml"), kustomization.to_string())?;
        }
        Ok(())
    }

    /// The image `deploy/base/deployment.yaml` runs: `<crate>:<version>`.
    fn deployed_image(&self) -> Result<String> {
        let path = self.dir.join("deploy/base/deployment.yaml");
        let text = fs::read_to_string(&path)?;
        let deployment: Value =
            serde_saphyr::from_str_with_options(&text, operator_gen::limits::yaml_options())
                .with_context(|| format!("reading {}", path.display()))?;
        deployment["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("{} names no image", path.display()))
    }

    /// Builds the image `reference` of the operator's debug binary and loads it into the node.
    pub(super) fn load_image(&self, reference: &str) -> Result<()> {
        let binary = self.env.artifacts.bin(&self.dir, &self.name)?;
        images::build_and_load(
            &self.env.cluster,
            binary,
            reference,
            &self.env.logs.join("images"),
        )
        .map(drop)
    }

    /// The first check: the CRD, the RBAC (asserted least-privilege, and not more), the image
    /// `deploy/` names, then `kubectl apply --server-side -k` of the overlay, and every pod the
    /// Deployment asks for Ready.
    pub(super) fn deploy_with_kustomize(&mut self) -> Result<()> {
        assert_least_privilege(&self.dir.join("deploy/base/rbac.yaml"))?;
        self.check_kustomization()?;
        if let Some(crd) = &self.derived_crd {
            self.admin(&["apply", "--server-side", "-f"], Some(&crd.service))?;
            self.wait_established()?;
        }
        self.load_image(&self.deployed_image()?)?;
        self.write_overlays(None)?;
        self.apply_pods()?;
        if self.crd_path.is_some() {
            self.wait_established()?;
        }
        let ready = self.workload.wait_ready(READY)?;
        println!("\n{}: {ready}/{ready} pods Ready from deploy/", self.name);
        self.start_collecting();
        self.after_install()
    }

    /// Copies the pods' logs out of the node from now on.
    pub(super) fn start_collecting(&mut self) {
        self.collector = Some(logs::Collector::start(
            &self.env.cluster.node_folders().pod_logs,
            &self.operator_namespace,
            &self.name,
            self.env.logs.join("pods"),
        ));
    }

    /// What every install shares: the checks' namespace, and what the operator's user may not
    /// do, whatever the rules say.
    pub(super) fn after_install(&self) -> Result<()> {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}});
        self.apply_json(&namespace)?;
        let user = format!(
            "system:serviceaccount:{}:{}",
            self.operator_namespace, self.name
        );
        for forbidden in [
            ["create", "pods"],
            ["delete", self.primary.as_str()],
            // Reads come from the caches: not even the primary is fetched one by one.
            ["get", self.primary.as_str()],
            ["get", "nodes"],
        ] {
            let answer = self.admin_output(&[
                "auth",
                "can-i",
                forbidden[0],
                forbidden[1],
                "--as",
                &user,
                "-A",
            ])?;
            let [verb, resource] = forbidden;
            match answer.trim() {
                "no" => {}
                "yes" => bail!("{user} may {verb} {resource}: the generated RBAC grants too much"),
                other => bail!("kubectl auth can-i {verb} {resource} answered {other:?}"),
            }
        }
        Ok(())
    }

    /// Applies the pods' overlay. `--force-conflicts` takes back the replicas that `kubectl
    /// scale` set when the operator last ran locally, and the webhook configurations that
    /// `deploy/local/` pointed at loopback.
    pub(super) fn apply_pods(&self) -> Result<()> {
        if let Some(crd) = &self.derived_crd {
            self.admin(
                &["apply", "--server-side", "--force-conflicts", "-f"],
                Some(&crd.service),
            )?;
        }
        self.admin(
            &["apply", "--server-side", "--force-conflicts", "-k"],
            Some(&self.overlay("pods")),
        )
    }

    /// Waits until the primary's CRD is served.
    pub(super) fn wait_established(&self) -> Result<()> {
        let crd = format!("crd/{}", self.primary);
        let wait = ["wait", "--for=condition=Established", "--timeout=60s", &crd];
        self.admin(&wait, None)
    }

    /// Brings the operator to `mode`, as a developer switches between the cluster and a local
    /// run: the Deployment scaled to none and `deploy/local/` applied, or `deploy/` applied
    /// and every pod Ready.
    pub(super) fn ensure(&mut self, mode: Mode) -> Result<()> {
        if mode == self.mode || mode == Mode::AsItIs {
            return Ok(());
        }
        match mode {
            Mode::Pods => {
                self.stop_local();
                self.apply_pods()?;
                self.workload.wait_ready(READY)?;
            }
            Mode::Local | Mode::Stopped => {
                if self.mode == Mode::Pods {
                    self.workload.stop(&self.env.cluster, READY)?;
                    self.install_local()?;
                }
                self.stop_local();
                if mode == Mode::Local {
                    self.start_local("main", &[("LEADER_ELECTION", "false")])?;
                }
            }
            Mode::AsItIs => {}
        }
        self.mode = mode;
        Ok(())
    }

    /// Installs what the operator needs to run outside the cluster, as its README tells a user
    /// to: `deploy/local/` (here in the operator's namespace), built by the cluster's own
    /// kubectl. It must hold the ServiceAccount and its RBAC (and the CRD and the namespace
    /// where the base has them), no Deployment, Service or PodDisruptionBudget, and its
    /// admission webhook configurations calling the operator on loopback, where a local run
    /// serves them.
    pub(super) fn install_local(&self) -> Result<()> {
        let local = self.dir.join("deploy/local");
        let built = self.env.kubectl.kustomize(&local)?;
        let kinds: Vec<&str> = built
            .lines()
            .filter_map(|line| line.strip_prefix("kind: "))
            .collect();
        let base = self.dir.join("deploy/base");
        let wanted = [
            ("ServiceAccount", true),
            ("CustomResourceDefinition", base.join("crd.yaml").exists()),
            ("Namespace", base.join("namespace.yaml").exists()),
        ];
        for (kind, _) in wanted.iter().filter(|(_, present)| *present) {
            if !kinds.contains(kind) {
                bail!("{} builds no {kind}:\n{built}", local.display());
            }
        }
        if let Some(kind) = ["Deployment", "Service", "PodDisruptionBudget"]
            .iter()
            .find(|kind| kinds.contains(kind))
        {
            bail!("{} still builds a {kind}:\n{built}", local.display());
        }
        if self.has_webhooks() {
            self.check_local_webhooks(&built)?;
        }
        if let Some(local) = self.derived_crd.as_ref().and_then(|crd| crd.local.as_ref()) {
            self.admin(
                &["apply", "--server-side", "--force-conflicts", "-f"],
                Some(local),
            )?;
        }
        self.admin(
            &["apply", "--server-side", "--force-conflicts", "-k"],
            Some(&self.overlay("local")),
        )
    }

    /// Starts a replica of the operator on this machine, with the variables of `env` over the
    /// usual ones, and a token of its ServiceAccount.
    pub(super) fn start_local(&mut self, replica: &str, env: &[(&str, &str)]) -> Result<()> {
        if self.local.is_empty() {
            operator_gen_cluster::service_account_kubeconfig(
                &self.env.kubectl,
                &self.name,
                &self.operator_namespace,
                &self.kubeconfig,
            )?;
        }
        let binary = self.env.artifacts.bin(&self.dir, &self.name)?.to_owned();
        let metrics = self.next_port;
        self.next_port += 1;
        // The installed configurations call one port: the first replica running holds it.
        let installed = self.local_webhooks()?.port;
        let webhook = if self
            .local
            .values()
            .any(|p| p.replica.webhook_port == installed)
        {
            self.next_port += 1;
            self.next_port - 1
        } else {
            installed
        };
        let mut vars: Vec<(String, String)> = vec![
            ("KUBECONFIG".into(), self.kubeconfig.display().to_string()),
            ("LOG_FORMAT".into(), "json".into()),
            (
                "RUST_LOG".into(),
                std::env::var("E2E_RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
            ),
            ("POD_NAMESPACE".into(), self.operator_namespace.clone()),
            ("LEASE_SECONDS".into(), LEASE_SECONDS.to_string()),
        ];
        if let Some(registry) = &self.registry {
            fs::create_dir_all(registry)?;
            vars.push(("RULE_REGISTRY_DIR".into(), registry.display().to_string()));
        }
        vars.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        let log = self.env.logs.join(format!("{replica}.log"));
        let process = Local::start(&binary, replica, (metrics, webhook), &vars, log)?;
        let endpoint = process.replica.clone();
        self.local.insert(replica.to_owned(), process);
        self.eventually("the operator's metrics endpoint", || {
            Ok(endpoint.reconciles().is_ok())
        })?;
        if self.has_webhooks() {
            // Ready once its webhooks serve the certificate whose CA they published.
            self.eventually("the replica's readiness", || endpoint.ready())?;
        }
        Ok(())
    }

    /// Stops every process of a local run.
    pub(super) fn stop_local(&mut self) {
        for (_, process) in std::mem::take(&mut self.local) {
            process.kill();
        }
    }

    /// Back from a local run: `deploy/` applied again brings every pod back Ready.
    pub(super) fn back_in_the_cluster(&mut self) -> Result<()> {
        let ready = self.workload.wait_ready(READY)?;
        println!(
            "\n{}: {ready}/{ready} pods Ready from deploy/ again",
            self.name
        );
        Ok(())
    }

    /// The last check: every primary deleted while the operator runs (their finalizers need
    /// it), then `kubectl delete -k` of the overlay, which takes the workload, its RBAC, its
    /// webhooks and its CRD away; nothing of it is left, and the checks' namespace goes too.
    pub(super) fn teardown(&mut self) -> Result<()> {
        let namespace = self.namespace.clone();
        let running = match self.mode {
            Mode::Stopped => self.ensure(Mode::Pods),
            _ => Ok(()),
        };
        if running.is_ok() {
            let primary = self.primary.clone();
            self.admin(
                &[
                    "delete",
                    &primary,
                    "--all",
                    "-n",
                    &namespace,
                    "--timeout=60s",
                ],
                None,
            )?;
        }
        self.stop_local();
        let overlay = self.overlay("pods");
        if overlay.join("kustomization.yaml").exists() {
            self.admin(
                &["delete", "--ignore-not-found", "--wait=false", "-k"],
                Some(&overlay),
            )?;
        }
        if let Some(crd) = &self.derived_crd {
            self.admin(&["delete", "--ignore-not-found", "-f"], Some(&crd.service))?;
        }
        if self.has_webhooks() {
            self.remove_cert_manager_crds()?;
        }
        self.admin(&["delete", "namespace", &namespace, "--wait=false"], None)?;
        running?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = self.left_behind()?;
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "60 s after `kubectl delete -k`, these are left: {}",
                    left.join(", ")
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The operator's pods, webhook configurations and namespace that are still there.
    fn left_behind(&self) -> Result<Vec<String>> {
        let mut left: Vec<String> = self
            .workload
            .pods()?
            .into_iter()
            .map(|pod| format!("pod {}", pod.name))
            .collect();
        for kind in [
            "validatingwebhookconfiguration",
            "mutatingwebhookconfiguration",
            "clusterrolebinding",
        ] {
            if self.admin_found(&["get", kind, &self.name, "--ignore-not-found", "-o", "name"])? {
                left.push(format!("{kind} {}", self.name));
            }
        }
        if self.moved_from_default() || self.dir.join("deploy/base/namespace.yaml").exists() {
            let namespace = &self.operator_namespace;
            if self.admin_found(&[
                "get",
                "namespace",
                namespace,
                "--ignore-not-found",
                "-o",
                "name",
            ])? {
                left.push(format!("namespace {namespace}"));
            }
        }
        Ok(left)
    }

    /// `deploy/` builds with the cluster's own kubectl (its kustomize) into the base's objects
    /// with the overlay's patch applied.
    fn check_kustomization(&self) -> Result<()> {
        let deploy = self.dir.join("deploy");
        let built = self.env.kubectl.kustomize(&deploy)?;
        // Only imported and dynamic operators have their CRD in the base.
        let crd = self.dir.join("deploy/base/crd.yaml").exists();
        let kinds = [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Service",
            "PodDisruptionBudget",
        ];
        let asked = self.manifest.webhooks.unwrap_or_default();
        let webhooks = [
            ("Secret", self.has_webhooks()),
            ("ValidatingWebhookConfiguration", asked.validating),
            ("MutatingWebhookConfiguration", asked.mutating),
        ];
        let webhooks = webhooks
            .iter()
            .filter(|(_, has)| *has)
            .map(|(kind, _)| *kind);
        for kind in kinds
            .into_iter()
            .chain(crd.then_some("CustomResourceDefinition"))
            .chain(webhooks)
        {
            if !built.lines().any(|line| line == format!("kind: {kind}")) {
                bail!(
                    "kubectl kustomize {} gave no {kind}:\n{built}",
                    deploy.display()
                );
            }
        }
        Ok(())
    }
}

/// `path` relative to `from`, both absolute, as kustomize's `resources:` takes it.
fn pathdiff(path: &Path, from: &Path) -> String {
    let path: Vec<_> = path.components().collect();
    let from: Vec<_> = from.components().collect();
    let shared = path.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut relative = PathBuf::new();
    for _ in shared..from.len() {
        relative.push("..");
    }
    for component in &path[shared..] {
        relative.push(component);
    }
    relative.display().to_string()
}

/// The generated rules grant no wildcard and no verb outside what an operator uses.
fn assert_least_privilege(rbac: &Path) -> Result<()> {
    let text = fs::read_to_string(rbac)?;
    let allowed = [
        "get", "list", "watch", "create", "patch", "update", "delete",
    ];
    let documents: Vec<Value> =
        serde_saphyr::from_str_multiple_with_options(&text, operator_gen::limits::yaml_options())?;
    for document in documents {
        for rule in document["rules"].as_array().into_iter().flatten() {
            for field in ["apiGroups", "resources", "verbs", "resourceNames"] {
                if rule[field]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|v| v == "*")
                {
                    bail!("{}: a rule grants `*` in {field}: {rule}", rbac.display());
                }
            }
            for verb in rule["verbs"].as_array().into_iter().flatten() {
                if !verb.as_str().is_some_and(|v| allowed.contains(&v)) {
                    bail!(
                        "{}: a rule grants {verb}, which no generated code uses",
                        rbac.display()
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_path_climbs_to_what_both_share() {
        assert_eq!(
            pathdiff(
                Path::new("/w/generated/x/deploy"),
                Path::new("/w/target/e2e/x/pods")
            ),
            "../../../../generated/x/deploy"
        );
        assert_eq!(pathdiff(Path::new("/a/b"), Path::new("/a")), "b");
    }
}
