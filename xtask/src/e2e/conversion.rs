//! The conversion webhook of a derived operator served in several versions, on the real API
//! server.
//!
//! A derived crate's CRD is what its `crdgen` prints. It is installed with the conversion
//! webhook's `clientConfig.url` on loopback instead of the Service; the operator writes its CA
//! into the CRD's `caBundle` with only its generated RBAC, and the API server then converts
//! every read and write of an older version through it.

use std::{fs, path::PathBuf, process::Command};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::{Suite, webhooks::WEBHOOK_PORT};

/// The annotation the generated conversion keeps the hub's own fields in.
const HUB_FIELDS: &str = "conversion.operator-gen.kube.rs/hub-fields";

/// A field only the hub of a crate in this workspace has, for the check that it survives.
struct HubOnly {
    pointer: &'static str,
    value: &'static str,
}

fn hub_only(name: &str) -> Option<HubOnly> {
    (name == "backup-controller").then_some(HubOnly {
        pointer: "/spec/note",
        value: "kept through every older version",
    })
}

/// The CRD a derived crate's `crdgen` prints, with its conversion webhook (if any) called on
/// loopback, written where the suite's logs go. `crdgen` was built with the operators.
pub(super) fn derived_crd(workspace: &std::path::Path, logs: &std::path::Path) -> Result<PathBuf> {
    let binary = workspace.join("target/debug/crdgen");
    let output = Command::new(&binary)
        .output()
        .with_context(|| format!("running {}", binary.display()))?;
    if !output.status.success() {
        bail!("crdgen failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let text = String::from_utf8(output.stdout).context("crdgen printed no UTF-8")?;
    let mut crd: Value =
        serde_saphyr::from_str_with_options(&text, operator_gen::limits::yaml_options())
            .context("reading the CRD crdgen printed")?;
    if let Some(config) = crd.pointer_mut("/spec/conversion/webhook/clientConfig") {
        let path = config["service"]["path"]
            .as_str()
            .context("a conversion webhook without a service path")?
            .to_owned();
        *config = json!({"url": format!("https://127.0.0.1:{WEBHOOK_PORT}{path}")});
    }
    fs::create_dir_all(logs)?;
    let path = logs.join("crd.json");
    fs::write(&path, crd.to_string())?;
    Ok(path)
}

impl Suite {
    /// The versions served besides the storage version, from the manifest.
    pub(super) fn older_versions(&self) -> Vec<String> {
        self.manifest
            .primary
            .derive
            .as_ref()
            .map(|d| d.also_served.clone())
            .unwrap_or_default()
    }

    /// kubectl's name for the primary's resource in `version`: `backups.v1alpha1.example.com`.
    fn resource_in(&self, version: &str) -> String {
        let (plural, group) = self
            .primary
            .split_once('.')
            .unwrap_or((self.primary.as_str(), ""));
        format!("{plural}.{version}.{group}")
    }

    fn group(&self) -> &str {
        self.api_version
            .split_once('/')
            .map_or("", |(group, _)| group)
    }

    /// The storage version's name.
    fn hub_version(&self) -> &str {
        self.api_version
            .split_once('/')
            .map_or(self.api_version.as_str(), |(_, version)| version)
    }

    /// An object created as each older version reads as the hub and back unchanged. The first
    /// is named `first`, which the deletion check deletes.
    pub(super) fn older_reads_as_hub(&mut self) -> Result<()> {
        for (index, older) in self.older_versions().iter().enumerate() {
            let name = if index == 0 {
                "first".to_owned()
            } else {
                format!("created-as-{older}")
            };
            let mut object = self.primary_object(&name);
            object["apiVersion"] = json!(format!("{}/{older}", self.group()));
            self.apply_json(&object)?;
            let hub = self.get_json(&self.resource_in(self.hub_version()), &name)?;
            if hub["apiVersion"] != json!(self.api_version) {
                bail!("read as the hub, {name} came back as {}", hub["apiVersion"]);
            }
            let again = self.get_json(&self.resource_in(older), &name)?;
            if again["spec"] != object["spec"] {
                bail!(
                    "created as {older} with spec {}, read back as {older} with {}",
                    object["spec"],
                    again["spec"]
                );
            }
            if again["metadata"]["annotations"].get(HUB_FIELDS).is_some() {
                bail!("{name} lost nothing, yet carries {HUB_FIELDS}: {again}");
            }
        }
        Ok(())
    }

    /// A field only the hub has survives a client that reads an older version, edits it and
    /// writes it back.
    pub(super) fn hub_fields_survive(&mut self) -> Result<()> {
        let Some(case) = hub_only(&self.name) else {
            self.skipped = Some("no field only this operator's hub has is known here");
            return Ok(());
        };
        let name = "hub-fields";
        let mut object = self.primary_object(name);
        set_pointer(&mut object, case.pointer, json!(case.value))?;
        self.apply_json(&object)?;
        for older in self.older_versions() {
            let resource = self.resource_in(&older);
            let mut read = self.get_json(&resource, name)?;
            if read.pointer(case.pointer).is_some() {
                bail!(
                    "{older} has {} too, so nothing is kept for it",
                    case.pointer
                );
            }
            if read["metadata"]["annotations"].get(HUB_FIELDS).is_none() {
                bail!(
                    "read as {older}, the object does not keep {}: {read}",
                    case.pointer
                );
            }
            read["metadata"]["labels"] = json!({"edited-as": older});
            let path = self.env.logs.join(format!("edited-as-{older}.json"));
            fs::write(&path, read.to_string())?;
            self.admin(&["replace", "-f"], Some(&path))?;
            let hub = self.get_json(&self.resource_in(self.hub_version()), name)?;
            if hub["metadata"]["labels"]["edited-as"] != json!(older) {
                bail!("the edit made as {older} was not stored: {hub}");
            }
            if hub.pointer(case.pointer) != Some(&json!(case.value)) {
                bail!(
                    "written back as {older}, the hub lost {}: {hub}",
                    case.pointer
                );
            }
            if hub["metadata"]["annotations"].get(HUB_FIELDS).is_some() {
                bail!("the hub stores the annotation {HUB_FIELDS}: {hub}");
            }
        }
        Ok(())
    }

    /// A list in every served version holds every object, each in that version.
    pub(super) fn lists_in_every_version(&mut self) -> Result<()> {
        let versions: Vec<String> = std::iter::once(self.hub_version().to_owned())
            .chain(self.older_versions())
            .collect();
        let namespace = self.namespace.clone();
        let mut counts = Vec::new();
        for version in &versions {
            let list = self.admin_json(&[
                "get",
                &self.resource_in(version),
                "-n",
                &namespace,
                "-o",
                "json",
            ])?;
            let items = list["items"].as_array().cloned().unwrap_or_default();
            let expected = json!(format!("{}/{version}", self.group()));
            if let Some(other) = items.iter().find(|i| i["apiVersion"] != expected) {
                bail!(
                    "listed as {version}, an item came as {}",
                    other["apiVersion"]
                );
            }
            counts.push(items.len());
        }
        if counts.iter().any(|&n| n != counts[0]) || counts[0] < versions.len() {
            bail!("lists in {versions:?} held {counts:?} objects");
        }
        Ok(())
    }

    /// The CRD `crdgen` printed goes with the suite that installed it: its conversion webhook
    /// calls a port that later suites reuse.
    pub(super) fn remove_derived_crd(&self) -> Result<()> {
        if let Some(crd) = &self.derived_crd {
            self.admin(&["delete", "--ignore-not-found", "-f"], Some(crd))?;
        }
        Ok(())
    }
}

/// Sets `value` at the JSON pointer `pointer`, creating objects on the way.
fn set_pointer(object: &mut Value, pointer: &str, value: Value) -> Result<()> {
    let mut target = object;
    let keys: Vec<&str> = pointer.split('/').skip(1).collect();
    let (last, parents) = keys.split_last().context("an empty pointer")?;
    for key in parents {
        target = &mut target[*key];
    }
    target[*last] = value;
    Ok(())
}
