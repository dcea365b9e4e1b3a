//! An operator installed with its Helm chart (`deploy/chart/`) by the real helm, on the real
//! API server: example-operator and the sharded generic crate, before any crate's kustomize
//! run.
//!
//! The chart goes in as a user installs it, with its defaults, into the namespace its README
//! names, or for example-operator into one its generator never chose ([`ELSEWHERE`]), made
//! first with the restricted Pod Security profile, as the e2e enforces on every operator's
//! namespace. Its pods run the image its values name: only the chart's RBAC is what they may
//! do. Its checks pass under that; `helm upgrade` changes the replicas, which
//! reach the Deployment and its pods; `helm uninstall` removes every object of the release but
//! the CRD, which is kept with its objects.

use std::collections::BTreeSet;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::Suite;

/// The crates installed with their charts: one with admission webhooks and a CRD it was given,
/// and the sharded generic one.
pub(crate) const HELM_CRATES: &[&str] = &["example-operator", "workloads-generic-controller"];

/// The crate whose chart is installed into another namespace than the one its manifest gives,
/// as `helm install --namespace` lets a user: its RBAC, webhooks' Service and certificate,
/// Lease and shards all follow the release. The other stays where its README says.
const ELSEWHERE: &str = "example-operator";

/// The check of an install with the chart.
pub(crate) const CHECK: super::Check = super::check(
    "its Helm chart installs it and its pods become Ready, its checks pass under the chart's \
     ServiceAccount, an upgrade's replicas reach the pods, and uninstalling leaves only the CRD \
     and its objects",
    super::Mode::AsItIs,
    Suite::helm_lifecycle,
);

/// The replicas `helm upgrade` sets: neither chart default (2, or 3 when sharded).
const UPGRADED_REPLICAS: u64 = 4;

impl Suite {
    pub(super) fn helm_lifecycle(&mut self) -> Result<()> {
        let own = self.operator_namespace.clone();
        if self.name == ELSEWHERE {
            self.set_operator_namespace(format!("{}-elsewhere", self.name));
        }
        let lifecycle = self.helm_install_to_uninstall();
        self.set_operator_namespace(own);
        lifecycle
    }

    /// The namespace the operator runs in from here on, for the suite and its pod watcher.
    fn set_operator_namespace(&mut self, namespace: String) {
        self.workload.namespace.clone_from(&namespace);
        self.operator_namespace = namespace;
    }

    fn helm_install_to_uninstall(&mut self) -> Result<()> {
        let installed = self.helm_install();
        let checked = installed.and_then(|()| self.helm_checks());
        let upgraded = checked.and_then(|()| self.helm_upgrade());
        let manifest = self.helm(&["get", "manifest", &self.name]);
        let uninstalled = self.helm(&["uninstall", &self.name]);
        // Helm deletes the Deployment and then, without waiting for its pods to stop, their
        // RBAC and ServiceAccount: the pods' last reconciles are refused.
        self.fails_reconciles = Some("helm uninstall takes the RBAC away while the pods stop");
        let verified = upgraded.and_then(|()| {
            uninstalled?;
            self.only_the_crd_and_its_objects_left(&manifest?)
        });
        // Whatever happened, the kustomize run after this starts from what it expects.
        let cleaned = self.after_helm();
        verified.and(cleaned)
    }

    /// `helm install` with the chart's defaults, and every pod Ready.
    fn helm_install(&mut self) -> Result<()> {
        let chart = self.dir.join("deploy/chart");
        let chart = chart.to_str().context("a UTF-8 path")?;
        let mut install = vec!["install", self.name.as_str(), chart, "--wait=false"];
        // A CRD someone else installed (prometheus-operator's, say) is theirs: the chart
        // leaves it alone, as its `crds.install` says a user would.
        let crd_elsewhere = self.crd_path.is_some()
            && self.derived_crd.is_none()
            && self.admin(&["get", "crd", &self.primary], None).is_ok();
        if crd_elsewhere {
            install.extend(["--set", "crds.install=false"]);
        }
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": self.operator_namespace,
            "labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/warn": "restricted",
            },
        }});
        self.apply_json(&namespace)?;
        self.load_image(&self.chart_image()?)?;
        self.helm(&install)?;
        if self.crd_path.is_some() {
            self.wait_established()?;
        }
        let ready = self.workload.wait_ready(super::READY)?;
        println!(
            "\n{}: {ready}/{ready} pods Ready from the chart, in namespace {}",
            self.name, self.operator_namespace
        );
        self.start_collecting();
        self.after_install()
    }

    /// The image the chart's default values name: `<repository>:<tag>`.
    pub(super) fn chart_image(&self) -> Result<String> {
        let path = self.dir.join("deploy/chart/values.yaml");
        let text = std::fs::read_to_string(&path)?;
        let values: Value =
            serde_saphyr::from_str_with_options(&text, operator_gen::limits::yaml_options())
                .with_context(|| format!("reading {}", path.display()))?;
        let image = &values["image"];
        match (image["repository"].as_str(), image["tag"].as_str()) {
            (Some(repository), Some(tag)) => Ok(format!("{repository}:{tag}")),
            _ => bail!("{} names no image.repository and image.tag", path.display()),
        }
    }

    /// The checks this operator's kind of crate is about, run under the chart's objects.
    fn helm_checks(&mut self) -> Result<()> {
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
            Some(UPGRADED_REPLICAS) => {}
            other => {
                bail!("after `helm upgrade --set {replicas}` the Deployment has {other:?} replicas")
            }
        }
        let ready = self.workload.wait_ready(super::READY)?;
        println!(
            "\n{}: {ready}/{ready} pods Ready after `helm upgrade --set {replicas}`",
            self.name
        );
        Ok(())
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
    /// (their finalizers dropped, as no operator runs to remove them), no release even when a
    /// step above failed, and the namespace gone.
    fn after_helm(&mut self) -> Result<()> {
        let _ = self.helm(&["uninstall", &self.name, "--ignore-not-found"]);
        for name in self.primary_names()? {
            self.merge_patch(&self.primary, &name, r#"{"metadata":{"finalizers":null}}"#)?;
            self.delete_primary(&name)?;
        }
        let namespace = self.namespace.clone();
        self.admin(
            &["delete", "namespace", &namespace, "--ignore-not-found"],
            None,
        )?;
        let own = self.operator_namespace.clone();
        self.admin(&["delete", "namespace", &own, "--ignore-not-found"], None)
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
        let helm = operator_gen_cluster::helm(&self.env.workspace)?;
        let output = std::process::Command::new(&helm)
            .env("KUBECONFIG", self.env.kubectl.kubeconfig())
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
