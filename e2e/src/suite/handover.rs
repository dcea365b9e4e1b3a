//! The operator handed from its kustomize install to its Helm chart and back with the commands
//! its OPERATOR.md gives, run as a user pastes them: each line through `sh`, in the crate's
//! folder, with the cluster's kubectl and helm first on `PATH`, in the namespace the lines name.
//!
//! It runs for the crate a user went through this with: an imported CRD whose controller the
//! operator is, run in `default` ([`HANDED_OVER`]). `deploy/local/` applied as for a local run,
//! a primary created, the objects handed to the release, whose pods reconcile that primary;
//! then the CRD changed as an older chart would have written it, the release uninstalled, and
//! `deploy/` applied again. A plain `kubectl apply --server-side` conflicts there, OPERATOR.md's
//! command does not, and the primary is still the one created before.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::{READY, Suite};
use crate::kit::Workload;

/// The crate handed over: the one the user tried it with.
pub(crate) const HANDED_OVER: &str = "prometheusrule-controller";

/// The primary that must outlive the switches.
const HANDED_OVER_PRIMARY: &str = "handed-over";
/// OPERATOR.md's section that holds the commands.
const SECTION: &str = "### Switching between kustomize and Helm";
/// The paragraphs whose code blocks are run, in this order.
const FROM_LOCAL: &str = "From `deploy/local/` to Helm:";
const BACK: &str = "Back from Helm to `deploy/`:";
/// What a user applied for a local run, before any of it (OPERATOR.md's "On your machine").
const LOCAL_RUN: &str = "kubectl apply --server-side -k deploy/local/";

impl Suite {
    pub(super) fn handed_to_helm_and_back(&mut self) -> Result<()> {
        let operator_md = self.dir.join("OPERATOR.md");
        let text = fs::read_to_string(&operator_md)
            .with_context(|| format!("reading {}", operator_md.display()))?;
        let to_helm = commands_under(&text, FROM_LOCAL)?;
        let back = commands_under(&text, BACK)?;
        let pods = Workload::new(
            self.env.kubectl.clone(),
            &self.deploy_namespace,
            &self.name,
            &self.env.cluster.node_folders().pod_logs,
        );
        let handed = self.hand_over(&to_helm, &back, &pods);
        // Whatever happened, the suite's own install is put back as it was: Stopped.
        let restored = self.remove_handed_over(&pods);
        handed.and(restored)
    }

    fn hand_over(&mut self, to_helm: &[String], back: &[String], pods: &Workload) -> Result<()> {
        self.load_image(&self.chart_image()?)?;
        self.as_pasted(LOCAL_RUN)?;
        let uid = self.create_primary(HANDED_OVER_PRIMARY)?;
        for command in to_helm {
            self.as_pasted(command)?;
        }
        pods.wait_ready(READY)
            .context("the release's pods, after the hand-over to Helm")?;
        // The release's pods reconcile what was created before they ran.
        self.wait_child(&uid, None)?;
        self.crd_changed_by_helm()?;
        let [uninstall, apply @ ..] = back else {
            bail!("OPERATOR.md's {BACK:?} block is empty");
        };
        if !uninstall.starts_with("helm uninstall ") {
            bail!("OPERATOR.md's {BACK:?} block starts with {uninstall:?}, not `helm uninstall`");
        }
        self.as_pasted(uninstall)?;
        // A server dry run: it finds the conflicts, and writes nothing the commands after it
        // would otherwise have to.
        match self.as_pasted("kubectl apply --server-side --dry-run=server -k deploy/") {
            Err(refused) if format!("{refused:#}").contains(r#"conflict with "helm""#) => {}
            Err(other) => return Err(other.context("a plain apply after `helm uninstall`")),
            Ok(_) => bail!(
                "a plain `kubectl apply --server-side -k deploy/` after `helm uninstall` took a \
                 CRD helm had changed without a conflict: the case OPERATOR.md's command is \
                 for was not made"
            ),
        }
        for command in apply {
            self.as_pasted(command)?;
        }
        pods.wait_ready(READY)
            .context("the pods of deploy/, back from Helm")?;
        if self.uid(HANDED_OVER_PRIMARY)? != uid {
            bail!("the primary created before the hand-over is not the one there after it");
        }
        println!(
            "\n{}: handed from deploy/local/ to its chart and back to deploy/ by OPERATOR.md's \
             {} commands, in namespace {}; the primary stayed",
            self.name,
            to_helm.len() + back.len(),
            self.deploy_namespace
        );
        self.delete_primary(HANDED_OVER_PRIMARY)
    }

    /// Writes a field of the CRD that `deploy/` also sets, as helm's field manager: what a
    /// chart holding an older CRD leaves behind.
    fn crd_changed_by_helm(&self) -> Result<()> {
        let patch = json!([{
            "op": "add",
            "path": "/spec/versions/0/schema/openAPIV3Schema/description",
            "value": "as an older chart had it",
        }]);
        self.admin(
            &[
                "patch",
                "crd",
                &self.primary,
                "--field-manager",
                "helm",
                "--type",
                "json",
                "-p",
                &patch.to_string(),
            ],
            None,
        )
    }

    /// `command` as a user pastes it into a shell in the crate's folder; its output.
    fn as_pasted(&self, command: &str) -> Result<String> {
        let helm = operator_gen_cluster::helm(&self.env.workspace)?;
        let mut dirs: Vec<PathBuf> = [self.env.kubectl.bin(), helm.as_path()]
            .iter()
            .filter_map(|bin| bin.parent().map(Path::to_path_buf))
            .collect();
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let path = std::env::join_paths(dirs)?;
        let output = Command::new("sh")
            .args(["-c", command])
            .current_dir(&self.dir)
            .env("PATH", path)
            .env("KUBECONFIG", self.env.kubectl.kubeconfig())
            .output()
            .with_context(|| format!("running `{command}` through sh"))?;
        if !output.status.success() {
            bail!(
                "`{command}` in {}: {}",
                self.dir.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Takes away what the pasted commands installed but the CRD, which the suite's own
    /// install shares, then applies the suite's `deploy/local/` again, whose cluster-wide RBAC
    /// has the same names.
    fn remove_handed_over(&mut self, pods: &Workload) -> Result<()> {
        let uninstall = format!(
            "helm uninstall {} --namespace {} --ignore-not-found",
            self.name, self.deploy_namespace
        );
        if let Err(failed) = self.as_pasted(&uninstall) {
            eprintln!("{}: {failed:#}", self.name);
        }
        // A check that failed midway left its primary, which no operator may be left to
        // release.
        if self.admin_found(&[
            "get",
            self.primary.as_str(),
            HANDED_OVER_PRIMARY,
            "-n",
            self.namespace.as_str(),
            "--ignore-not-found",
            "-o",
            "name",
        ])? {
            let primary = self.primary.clone();
            self.merge_patch(
                &primary,
                HANDED_OVER_PRIMARY,
                r#"{"metadata":{"finalizers":null}}"#,
            )?;
            self.delete_primary(HANDED_OVER_PRIMARY)?;
        }
        let namespace = self.deploy_namespace.clone();
        let deployment = self.admin_found(&[
            "get",
            "deployment",
            self.name.as_str(),
            "-n",
            namespace.as_str(),
            "--ignore-not-found",
            "-o",
            "name",
        ])?;
        if deployment {
            pods.stop(&self.env.cluster, READY)?;
        }
        let built = self.env.kubectl.kustomize(&self.dir.join("deploy"))?;
        let objects: Vec<Value> =
            serde_saphyr::from_multiple_with_options(&built, operator_gen::limits::yaml_options())
                .context("reading `kubectl kustomize deploy/`")?;
        let mut delete = vec![
            "delete".to_owned(),
            "--ignore-not-found".to_owned(),
            "--wait=false".to_owned(),
            "-n".to_owned(),
            namespace,
        ];
        delete.extend(
            objects
                .iter()
                .filter(|o| o["kind"] != "CustomResourceDefinition")
                .filter_map(|o| {
                    Some(format!(
                        "{}/{}",
                        o["kind"].as_str()?,
                        o["metadata"]["name"].as_str()?
                    ))
                }),
        );
        delete.push(format!("lease/{}", self.name));
        let delete: Vec<&str> = delete.iter().map(String::as_str).collect();
        self.admin(&delete, None)?;
        self.install_local()
    }
}

/// The lines of the `sh` block that follows the paragraph `lead` in OPERATOR.md's [`SECTION`].
fn commands_under(text: &str, lead: &str) -> Result<Vec<String>> {
    let section = text
        .split_once(SECTION)
        .map(|(_, rest)| rest)
        .with_context(|| format!("OPERATOR.md has no {SECTION:?}"))?;
    let section = section
        .find("\n## ")
        .into_iter()
        .chain(section.find("\n### "))
        .min()
        .map_or(section, |end| &section[..end]);
    let after = section
        .split_once(&format!("\n{lead}\n"))
        .map(|(_, rest)| rest)
        .with_context(|| format!("OPERATOR.md's {SECTION:?} has no paragraph {lead:?}"))?;
    let block = after
        .trim_start()
        .strip_prefix("```sh\n")
        .and_then(|block| block.split_once("```"))
        .map(|(block, _)| block)
        .with_context(|| format!("no sh block follows {lead:?} in OPERATOR.md"))?;
    Ok(block.lines().map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_are_the_block_under_their_paragraph_in_the_section() {
        let text = format!(
            "## Run\n\n{FROM_LOCAL}\n\n```sh\nelsewhere\n```\n\n{SECTION}\n\nWords.\n\n\
             {FROM_LOCAL}\n\n```sh\nkubectl label x\nhelm install y\n```\n\n{BACK}\n\n\
             ```sh\nhelm uninstall y\n```\n\n### Sharding\n\n{BACK}\n\n```sh\nlater\n```\n"
        );
        assert_eq!(
            commands_under(&text, FROM_LOCAL).unwrap(),
            ["kubectl label x", "helm install y"]
        );
        assert_eq!(commands_under(&text, BACK).unwrap(), ["helm uninstall y"]);
        let without = text.replace(SECTION, "### Other");
        let missing = commands_under(&without, BACK).unwrap_err().to_string();
        assert!(missing.contains("has no"), "{missing}");
    }
}
