//! The admission webhooks of an operator that has them, on the real API server, which calls
//! them through the operator's Service as in every cluster: the pods fill the empty Secret with
//! their self-managed certificate and write the CA into both configurations, with only their
//! generated RBAC. For a local run, `deploy/local/` points the configurations at loopback
//! instead. cert-manager cannot run here, so its overlay is checked by a server dry run
//! against cert-manager's CRDs.

use std::{fs, path::PathBuf};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::Suite;

/// What an operator's own hooks refuse and default, for the checks that need to know.
pub(super) struct HookCase {
    /// Turns the sample into an object `validate` refuses.
    pub make_invalid: fn(&mut Value),
    /// Part of the refusal `kubectl` must print.
    pub refusal: &'static str,
    /// A JSON pointer into the stored object, and the value `mutate` defaults there.
    pub defaulted: (&'static str, &'static str),
    /// Whether the refusal names the kind the hooks received the object as: a generic
    /// operator's hooks are handed each kind as itself, which this proves.
    pub names_kind: bool,
}

/// The hooks of the operators in this workspace that have any.
pub(super) fn hook_case(name: &str) -> Option<HookCase> {
    match name {
        "example-operator" => Some(HookCase {
            make_invalid: |body| {
                if let Some(rule) = body
                    .pointer_mut("/spec/groups/0/rules/0")
                    .and_then(Value::as_object_mut)
                {
                    rule.remove("alert");
                    rule.remove("record");
                }
            },
            refusal: "neither `alert` nor `record`",
            defaulted: ("/spec/groups/0/interval", "1m"),
            names_kind: false,
        }),
        "deployment-guard" => Some(HookCase {
            make_invalid: |body| {
                if let Some(image) = body.pointer_mut("/spec/template/spec/containers/0/image") {
                    *image = json!("nginx");
                }
            },
            refusal: "not pinned",
            defaulted: (
                "/metadata/annotations/deployment-guard.example.com~1owner",
                "unowned",
            ),
            names_kind: false,
        }),
        "workloads-generic-controller" => Some(HookCase {
            make_invalid: |body| body["metadata"]["annotations"][OWNER] = json!(" "),
            refusal: "names no owner",
            defaulted: (
                "/metadata/annotations/workloads.example.com~1owner",
                "unowned",
            ),
            names_kind: true,
        }),
        _ => None,
    }
}

/// The annotation workloads-generic-controller's hooks default and check.
const OWNER: &str = "workloads.example.com/owner";

/// The object label that once let any object past the webhooks; it must exempt nothing now.
const OLD_SKIP_LABEL: &str = "operator-gen.kube.rs/skip-webhooks";

/// The cert-manager CRDs the overlay's Certificate and Issuer need, from the real CRDs.
fn cert_manager_crds(suite: &Suite) -> Vec<PathBuf> {
    let folder = suite.env.workspace.join("../shared/crds/cert-manager.io");
    ["certificates.yaml", "issuers.yaml"]
        .map(|file| folder.join(file))
        .to_vec()
}

impl Suite {
    /// Whether the operator serves any webhook, and so has their Secret and HTTPS server.
    pub(super) fn has_webhooks(&self) -> bool {
        self.dir.join("deploy/base/webhooks.yaml").exists()
    }

    /// Where `deploy/local/` has the API server call a run outside the cluster, and where that
    /// run serves the webhooks unless told otherwise: the crate's `local.webhooks`, read as
    /// the generator reads it. One replica at a time holds its port.
    pub(super) fn local_webhooks(&self) -> Result<operator_gen::model::LocalWebhooks> {
        let origin = format!("{}/operator.yaml", self.dir.display());
        Ok(operator_gen::model::local::of_manifest(
            &self.manifest,
            &origin,
        )?)
    }

    /// Whether it serves admission webhooks, which refuse creates while no replica answers.
    pub(super) fn has_admission(&self) -> bool {
        self.manifest
            .webhooks
            .is_some_and(|w| w.validating || w.mutating)
    }

    /// Checks that each webhook configuration `built` (`deploy/local/`, as kustomize built it)
    /// installs calls loopback, where a local run serves it, and not the Service.
    pub(super) fn check_local_webhooks(&self, built: &str) -> Result<()> {
        let objects: Vec<Value> = serde_saphyr::from_str_multiple_with_options(
            built,
            operator_gen::limits::yaml_options(),
        )
        .context("reading what deploy/local/ builds")?;
        let local = format!("{}/", self.local_webhooks()?.base.raw());
        let webhooks = objects.iter().filter_map(|o| o["webhooks"].as_array());
        for webhook in webhooks.flatten() {
            let config = &webhook["clientConfig"];
            let on_loopback = config["url"]
                .as_str()
                .is_some_and(|url| url.starts_with(&local));
            if !on_loopback || !config["service"].is_null() {
                bail!(
                    "deploy/local/'s webhook {} calls {config}, not {local}",
                    webhook["name"]
                );
            }
        }
        let configurations = objects.iter().filter(|o| o["webhooks"].is_array()).count();
        if self.has_admission() && configurations == 0 {
            bail!("deploy/local/ installs no webhook configuration:\n{built}");
        }
        Ok(())
    }

    /// cert-manager's CRDs, which [`Suite::cert_manager_overlay`] installed, go too.
    pub(super) fn remove_cert_manager_crds(&self) -> Result<()> {
        for crd in cert_manager_crds(self) {
            self.admin(&["delete", "--ignore-not-found", "-f"], Some(&crd))?;
        }
        Ok(())
    }

    pub(super) fn validating_refuses(&mut self) -> Result<()> {
        let Some(case) = hook_case(&self.name) else {
            self.skipped = Some("no object this operator's validate() refuses is known here");
            return Ok(());
        };
        let mut object = self.primary_object("refused");
        (case.make_invalid)(&mut object);
        let error = match self.try_apply_json(&object)? {
            Ok(()) => bail!("the API server stored an object validate() refuses: {object}"),
            Err(error) => error,
        };
        if !error.contains(case.refusal) {
            bail!(
                "the refusal does not give the hook's reason ({}): {error}",
                case.refusal
            );
        }
        if case.names_kind && !error.contains(&format!("{} \"refused\"", self.kind)) {
            bail!(
                "the hooks did not receive the object as a {}: {error}",
                self.kind
            );
        }
        if self.find(&self.primary, "refused")?.is_some() {
            bail!("the refused object was stored");
        }
        Ok(())
    }

    /// An object that carries the label that once skipped the webhooks is still validated:
    /// whoever creates an object chooses its labels.
    pub(super) fn labelled_still_validated(&mut self) -> Result<()> {
        let Some(case) = hook_case(&self.name) else {
            self.skipped = Some("no object this operator's validate() refuses is known here");
            return Ok(());
        };
        let mut object = self.primary_object("labelled");
        (case.make_invalid)(&mut object);
        object["metadata"]["labels"] = json!({ OLD_SKIP_LABEL: self.name });
        match self.try_apply_json(&object)? {
            Ok(()) => bail!("a labelled object that validate() refuses was stored: {object}"),
            Err(error) if error.contains(case.refusal) => Ok(()),
            Err(error) => bail!("refused, but not by the hook: {error}"),
        }
    }

    /// The label `deploy/base/namespace.yaml` sets on the operator's own namespace, which
    /// exempts a namespace from its webhooks.
    fn exempt_label(&self) -> Result<String> {
        let path = self.dir.join("deploy/base/namespace.yaml");
        let text = fs::read_to_string(&path)?;
        let namespace: Value =
            serde_saphyr::from_str_with_options(&text, operator_gen::limits::yaml_options())
                .with_context(|| format!("reading {}", path.display()))?;
        let labels = namespace["metadata"]["labels"]
            .as_object()
            .with_context(|| format!("{} labels nothing", path.display()))?;
        match labels.keys().collect::<Vec<_>>().as_slice() {
            [label] => Ok((*label).clone()),
            other => bail!("{} sets {} labels, not one", path.display(), other.len()),
        }
    }

    /// The webhooks leave alone the operator's own namespace, and `kube-system` once it is
    /// labelled as the crate's README says; the label on an object is not enough.
    pub(super) fn exempt_namespaces_left_alone(&mut self) -> Result<()> {
        let Some(case) = hook_case(&self.name) else {
            self.skipped = Some("no object this operator's validate() refuses is known here");
            return Ok(());
        };
        let label = self.exempt_label()?;
        let namespaces = [self.operator_namespace.clone(), "kube-system".to_owned()];
        let labelled = format!("{label}=true");
        self.admin(&["label", "namespace", "kube-system", &labelled], None)?;
        let stored = namespaces
            .iter()
            .map(|namespace| {
                let mut object = self.primary_object("exempt");
                object["metadata"]["namespace"] = json!(namespace);
                (case.make_invalid)(&mut object);
                let stored = self.try_apply_json(&object)?;
                self.admin(
                    &[
                        "delete",
                        &self.primary,
                        "exempt",
                        "-n",
                        namespace,
                        "--ignore-not-found",
                    ],
                    None,
                )?;
                Ok((namespace, stored))
            })
            .collect::<Result<Vec<_>>>();
        self.admin(
            &["label", "namespace", "kube-system", &format!("{label}-")],
            None,
        )?;
        for (namespace, stored) in stored? {
            if let Err(refusal) = stored {
                bail!("in {namespace}, which is exempt, an object was refused: {refusal}");
            }
        }
        Ok(())
    }

    pub(super) fn mutating_defaults(&mut self) -> Result<()> {
        let Some(case) = hook_case(&self.name) else {
            self.skipped = Some("no default this operator's mutate() sets is known here");
            return Ok(());
        };
        let (pointer, value) = case.defaulted;
        let object = self.primary_object("defaulted");
        if object.pointer(pointer).is_some() {
            bail!("the sample already sets {pointer}, so no default can show");
        }
        self.apply_json(&object)?;
        let stored = self.get_json(&self.primary.clone(), "defaulted")?;
        match stored.pointer(pointer) {
            Some(stored) if stored == value => Ok(()),
            other => bail!("stored {pointer} is {other:?}, not the default {value:?}"),
        }
    }

    /// A generic operator's one webhook of each configuration matches every kind: each other
    /// kind is refused and defaulted as the first is, which only a review that reaches the
    /// hooks as its own kind can be.
    pub(super) fn other_kinds_admitted(&mut self) -> Result<()> {
        if hook_case(&self.name).is_none() {
            self.skipped = Some("no object this operator's hooks refuse or default is known here");
            return Ok(());
        }
        self.through_other_kinds("defaulted", |suite| {
            suite
                .validating_refuses()
                .and_then(|()| suite.mutating_defaults())
        })
    }

    /// With no pod answering (the Deployment scaled to none), a create is refused
    /// (`failurePolicy: Fail`); scaled back, the same create is stored.
    pub(super) fn fails_closed(&mut self) -> Result<()> {
        let replicas = self.workload.wanted()?;
        self.workload.stop(&self.env.cluster, super::READY)?;
        let object = self.primary_object("while-webhooks-down");
        let refused = self.try_apply_json(&object);
        self.workload.scale(replicas)?;
        self.workload.wait_ready(super::READY)?;
        match refused? {
            Ok(()) => bail!("a create was stored while no webhook answered"),
            Err(error) if error.contains("failed calling webhook") => {}
            Err(error) => bail!("refused, but not for the webhook: {error}"),
        }
        self.apply_json(&object)?;
        self.uid("while-webhooks-down").map(drop)
    }

    /// cert-manager's mode builds and passes a server dry run with cert-manager's own CRDs
    /// installed (cert-manager itself cannot run here), over the configurations the pods'
    /// `deploy/` installed.
    pub(super) fn cert_manager_overlay(&mut self) -> Result<()> {
        for crd in cert_manager_crds(self) {
            self.admin(&["delete", "--ignore-not-found", "-f"], Some(&crd))?;
            self.admin(&["apply", "--server-side", "-f"], Some(&crd))?;
        }
        for crd in ["certificates.cert-manager.io", "issuers.cert-manager.io"] {
            self.admin(
                &[
                    "wait",
                    "--for=condition=Established",
                    "--timeout=60s",
                    &format!("crd/{crd}"),
                ],
                None,
            )?;
        }
        let overlay = self.dir.join("deploy/cert-manager");
        let built = self.env.kubectl.kustomize(&overlay)?;
        for kind in ["Certificate", "Issuer"] {
            if !built.lines().any(|line| line == format!("kind: {kind}")) {
                bail!("{} builds no {kind}", overlay.display());
            }
        }
        // The overlay deletes the base's cluster role for caBundle and its binding: nothing may
        // be left blank in their place (an empty document or name), which a dry run accepts.
        if built
            .lines()
            .any(|line| line.trim() == "{}" || line.trim_end().ends_with("name: \"\""))
        {
            bail!("{} blanks a name:\n{built}", overlay.display());
        }
        self.admin(&["apply", "--dry-run=server", "-k"], Some(&overlay))
    }
}
