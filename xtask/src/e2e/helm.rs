//! An operator installed with its Helm chart (`deploy/chart/`) by the real helm, on the real
//! API server: for example-operator, the sharded generic crate and the crate with conversion,
//! before any crate's kustomize run.
//!
//! The chart goes in as a user installs it, with its webhook configurations calling loopback
//! rather than the Service (`webhooks.url`, as `deploy/local/` has it for a local run: no pod
//! runs here), and the operator runs as a local process with a token of the ServiceAccount the chart
//! installed, so only the chart's RBAC is what it may do. Its checks pass under that; `helm
//! upgrade` changes the replicas, which reach the Deployment; `helm uninstall` removes every
//! object of the release but the CRD, which is kept with its objects.

use std::collections::BTreeSet;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::Suite;
use operator_gen_cluster as cluster;

/// The crates installed with their charts: one with admission webhooks and a CRD it was given,
/// the sharded generic one, and the one whose CRD converts between versions.
pub(super) const HELM_CRATES: &[&str] = &[
    "example-operator",
    "workloads-generic-controller",
    "backup-controller",
];

/// What the check proves, as the e2e prints it.
pub(super) const CHECK: &str = "its Helm chart installs it, its checks pass under the chart's \
    ServiceAccount, an upgrade's replicas reach the Deployment, and uninstalling leaves only \
    the CRD and its objects";

/// The replicas `helm upgrade` sets: neither chart default (2, or 3 when sharded).
const UPGRADED_REPLICAS: u64 = 4;

impl Suite {
    pub(super) fn helm_lifecycle(&mut self) -> Result<()> {
        let installed = self.helm_install();
        let checked = installed.and_then(|()| self.helm_checks());
        self.stop_all();
        let upgraded = checked.and_then(|()| self.helm_upgrade());
        let manifest = self.helm(&["get", "manifest", &self.name]);
        let uninstalled = self.helm(&["uninstall", &self.name]);
        let verified = upgraded.and_then(|()| {
            uninstalled?;
            self.only_the_crd_and_its_objects_left(&manifest?)
        });
        // Whatever happened, the kustomize run after this starts from what it expects.
        let cleaned = self.after_helm();
        verified.and(cleaned)
    }

    /// `helm install`, its webhooks calling loopback, and a token of the chart's
    /// ServiceAccount for the operator.
    fn helm_install(&mut self) -> Result<()> {
        // The ServiceAccount `Suite::new` made for the kustomize run: Helm installs only
        // objects no one else made, so the chart's own replaces it until the run.
        self.admin(
            &[
                "delete",
                "serviceaccount",
                &self.name,
                "-n",
                &self.operator_namespace,
                "--ignore-not-found",
            ],
            None,
        )?;
        if let Some(crd) = &self.derived_crd {
            // A derived CRD is crdgen's output, which the chart cannot hold (its README says
            // to apply it first).
            self.admin(&["apply", "--server-side", "-f"], Some(crd))?;
        }
        let chart = self.dir.join("deploy/chart");
        let chart = chart.to_str().context("a UTF-8 path")?;
        let mut install = vec!["install", self.name.as_str(), chart];
        // A CRD someone else installed (prometheus-operator's, say) is theirs: the chart
        // leaves it alone, as its `crds.install` says a user would.
        let crd_elsewhere = self.crd_path.is_some()
            && self.derived_crd.is_none()
            && self.admin(&["get", "crd", &self.primary], None).is_ok();
        if crd_elsewhere {
            install.extend(["--set", "crds.install=false"]);
        }
        // No pod runs here, so the API server calls the webhooks where the local run serves
        // them, as `deploy/local/` has it: the chart's value for that.
        let loopback = format!("webhooks.url={}", operator_gen::model::LOCAL_WEBHOOK_BASE);
        if self.has_admission() {
            install.extend(["--set", &loopback]);
        }
        self.helm(&install)?;
        if self.crd_path.is_some() {
            self.wait_established()?;
        }
        self.kubeconfig = self
            .env
            .operator_kubeconfig(&self.name, &self.operator_namespace)?;
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}});
        self.apply_json(&namespace)
    }

    /// The checks this operator's kind of crate is about, run under the chart's objects.
    fn helm_checks(&mut self) -> Result<()> {
        self.start("main", false)?;
        if !self.owned.is_empty() {
            self.child_appears()?;
        }
        if self.has_admission() {
            self.validating_refuses()?;
        }
        if !self.older_versions().is_empty() {
            self.older_reads_as_hub()?;
        }
        let primaries = self.primary_names()?;
        if primaries.is_empty() {
            bail!("the checks left no {} to outlive the release", self.kind);
        }
        Ok(())
    }

    /// `helm upgrade` with one value changed: the replicas reach the Deployment.
    fn helm_upgrade(&mut self) -> Result<()> {
        let chart = self.dir.join("deploy/chart");
        let chart = chart.to_str().context("a UTF-8 path")?;
        let replicas = format!("replicas={UPGRADED_REPLICAS}");
        self.helm(&[
            "upgrade",
            &self.name,
            chart,
            "--reuse-values",
            "--set",
            &replicas,
        ])?;
        let deployment = self.operator_object("deployment", &self.name)?;
        match deployment["spec"]["replicas"].as_u64() {
            Some(UPGRADED_REPLICAS) => Ok(()),
            other => {
                bail!("after `helm upgrade --set {replicas}` the Deployment has {other:?} replicas")
            }
        }
    }

    /// After `helm uninstall`, none of the release's objects (`manifest`, from `helm get
    /// manifest`) is there but the CRD, and the primaries the checks created still are.
    fn only_the_crd_and_its_objects_left(&self, manifest: &str) -> Result<()> {
        let objects: Vec<Value> = serde_saphyr::from_multiple_with_options(
            manifest,
            operator_gen::limits::yaml_options(),
        )
        .context("reading `helm get manifest`")?;
        let mut left = Vec::new();
        let mut kinds = BTreeSet::new();
        for object in objects.iter().filter(|o| !o.is_null()) {
            let kind = object["kind"].as_str().unwrap_or_default();
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            kinds.insert(kind.to_owned());
            let mut get = vec!["get", kind, name, "--ignore-not-found", "-o", "json"];
            if let Some(namespace) = object["metadata"]["namespace"].as_str() {
                get.extend(["-n", namespace]);
            }
            let found = self.admin_found(&get)?;
            let kept = kind == "CustomResourceDefinition";
            match (found, kept) {
                (true, false) => left.push(format!("{kind} {name}")),
                (false, true) => {
                    bail!("`helm uninstall` deleted the CRD {name}, and every object of it")
                }
                _ => {}
            }
        }
        if !left.is_empty() {
            bail!("`helm uninstall` left {}", left.join(", "));
        }
        for wanted in ["Deployment", "ServiceAccount", "Service"] {
            if !kinds.contains(wanted) {
                bail!("the release held no {wanted}: {kinds:?}");
            }
        }
        if self.primary_names()?.is_empty() {
            bail!("the {} objects did not outlive the release", self.kind);
        }
        Ok(())
    }

    /// Leaves the cluster as the kustomize run expects it: the primaries the checks made gone
    /// (their finalizers dropped, as no operator runs to remove them), the ServiceAccount and
    /// its token back, and no release even when a step above failed.
    fn after_helm(&mut self) -> Result<()> {
        let _ = self.helm(&["uninstall", &self.name, "--ignore-not-found"]);
        for name in self.primary_names()? {
            self.merge_patch(&self.primary, &name, r#"{"metadata":{"finalizers":null}}"#)?;
            self.delete_primary(&name)?;
        }
        self.kubeconfig = self
            .env
            .operator_kubeconfig(&self.name, &self.operator_namespace)?;
        Ok(())
    }

    /// The primaries in the suite's namespace, by name.
    fn primary_names(&self) -> Result<Vec<String>> {
        let exists = self.admin_output(&["get", "namespace", &self.namespace, "-o", "name"])?;
        if exists.trim().is_empty() {
            return Ok(Vec::new());
        }
        let list = self.admin_json(&["get", &self.primary, "-n", &self.namespace, "-o", "json"])?;
        Ok(list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item["metadata"]["name"].as_str().map(str::to_owned))
            .collect())
    }

    /// `helm` with the admin's kubeconfig, in the operator's namespace; its output.
    fn helm(&self, args: &[&str]) -> Result<String> {
        let helm = cluster::helm(&self.env.workspace)?;
        let output = std::process::Command::new(&helm)
            .env("KUBECONFIG", &self.env.admin)
            .args(args)
            .args(["--namespace", &self.operator_namespace])
            .output()
            .with_context(|| format!("running {}", helm.display()))?;
        if !output.status.success() {
            bail!(
                "helm {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}
