//! The conversion webhook of a derived operator served in several versions, on the real API
//! server, which calls it through the operator's Service.
//!
//! A derived crate's CRD is what its `crdgen` prints. The operator's pods write their CA into
//! its `caBundle` with only their generated RBAC, and the API server then converts every read
//! and write of an older version through them.

use std::{collections::BTreeSet, fs};

use anyhow::{Context as _, Result, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use operator_gen::{Selection, crd_document, model::HUB_FIELDS_ANNOTATION, schema_sample};
use serde_json::{Value, json};

use super::Suite;

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

    /// `(group, storage version)`.
    fn group_and_hub(&self) -> (&str, &str) {
        self.api_version.split_once('/').unwrap_or(("", ""))
    }

    /// A primary named `name` as `version`: the least object of that version's schema, with
    /// the manifest's `sample:` over it.
    fn primary_in(&self, version: &str, name: &str) -> Result<Value> {
        let crd_path = self
            .crd_path
            .as_ref()
            .context("a derived crate has a CRD")?;
        let origin = crd_path.display().to_string();
        let crds = crd_document::parse_all(&origin, &fs::read(crd_path)?)?;
        let selection = Selection {
            crd: None,
            version: Some(version.to_owned()),
        };
        let selected = crd_document::select(&origin, crds, &selection)?;
        let schema = selected
            .schema()
            .with_context(|| format!("{origin} has no schema for {version}"))?;
        let mut object = schema_sample::sample_with(schema, self.manifest.sample.as_ref()).body;
        object["apiVersion"] = json!(format!("{}/{version}", self.group_and_hub().0));
        object["kind"] = json!(self.kind);
        object["metadata"] = json!({"name": name, "namespace": self.namespace});
        self.check_rules(&object)?;
        Ok(object)
    }

    /// An object created as each older version reads as the hub, and back unchanged. The
    /// first is named `first`, which the deletion check deletes.
    pub(super) fn older_reads_as_hub(&mut self) -> Result<()> {
        let hub = self.resource_in(self.group_and_hub().1);
        for (index, older) in self.older_versions().iter().enumerate() {
            let name = match index {
                0 => "first".to_owned(),
                _ => format!("created-as-{older}"),
            };
            let object = self.primary_in(older, &name)?;
            // The API server may still hold the CRD without the CA the operator just wrote.
            self.eventually("a create converted through the webhook", || {
                Ok(self.try_apply_json(&object)?.is_ok())
            })?;
            self.get_json(&hub, &name)
                .with_context(|| format!("{name}, created as {older}, read as the hub"))?;
            let again = self.get_json(&self.resource_in(older), &name)?;
            if again["spec"] != object["spec"] {
                bail!(
                    "created as {older} with spec {}, read back as {older} with {}",
                    object["spec"],
                    again["spec"]
                );
            }
            if again["metadata"]["annotations"]
                .get(HUB_FIELDS_ANNOTATION)
                .is_some()
            {
                bail!("{name} lost nothing, yet carries {HUB_FIELDS_ANNOTATION}: {again}");
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
        let hub = self.resource_in(self.group_and_hub().1);
        let mut object = self.primary_object(name);
        set_pointer(&mut object, case.pointer, json!(case.value))?;
        self.apply_json(&object)?;
        for older in self.older_versions() {
            let mut read = self.get_json(&self.resource_in(&older), name)?;
            if read.pointer(case.pointer).is_some() {
                bail!(
                    "{older} has {} too, so nothing is kept for it",
                    case.pointer
                );
            }
            if read["metadata"]["annotations"]
                .get(HUB_FIELDS_ANNOTATION)
                .is_none()
            {
                bail!(
                    "read as {older}, the object does not keep {}: {read}",
                    case.pointer
                );
            }
            read["metadata"]["labels"] = json!({"edited-as": older});
            let path = self.env.logs.join(format!("edited-as-{older}.json"));
            fs::write(&path, read.to_string())?;
            self.admin(&["replace", "-f"], Some(&path))?;
            let stored = self.get_json(&hub, name)?;
            if stored["metadata"]["labels"]["edited-as"] != json!(older) {
                bail!("the edit made as {older} was not stored: {stored}");
            }
            if stored.pointer(case.pointer) != Some(&json!(case.value)) {
                bail!(
                    "written back as {older}, the hub lost {}: {stored}",
                    case.pointer
                );
            }
            if stored["metadata"]["annotations"]
                .get(HUB_FIELDS_ANNOTATION)
                .is_some()
            {
                bail!("the hub stores the annotation {HUB_FIELDS_ANNOTATION}: {stored}");
            }
        }
        Ok(())
    }

    /// Listing in any served version gives the same objects: each converted on the way.
    pub(super) fn lists_in_every_version(&mut self) -> Result<()> {
        let hub = self.group_and_hub().1.to_owned();
        let namespace = self.namespace.clone();
        let mut listed = Vec::new();
        for version in std::iter::once(hub).chain(self.older_versions()) {
            let list = self.admin_json(&[
                "get",
                &self.resource_in(&version),
                "-n",
                &namespace,
                "-o",
                "json",
            ])?;
            let names: BTreeSet<String> = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|item| item["metadata"]["name"].as_str().map(str::to_owned))
                .collect();
            listed.push((version, names));
        }
        let (hub, names) = &listed[0];
        if !names.contains("first") {
            bail!("listed as {hub}, the objects are {names:?}, without `first`");
        }
        if let Some((version, other)) = listed.iter().find(|(_, other)| other != names) {
            bail!("listed as {hub}: {names:?}; as {version}: {other:?}");
        }
        Ok(())
    }

    /// The API server's conversions are answered while two clients hold connections to the
    /// webhook open with a POST they never finish, reopened whenever the operator drops one:
    /// a stalled body holds no conversion's turn.
    pub(super) fn converts_beside_stalled_clients(&mut self) -> Result<()> {
        let older = self
            .older_versions()
            .first()
            .cloned()
            .context("an older version")?;
        let resource = self.resource_in(&older);
        let namespace = self.namespace.clone();
        let pod = self
            .replicas()?
            .into_iter()
            .next()
            .context("no pod of the operator is Ready")?;
        let address = std::net::SocketAddr::new(pod.host, pod.webhook_port);
        let stalling = super::stalling::Stalling::start(address, "/convert", 2)?;
        std::thread::sleep(std::time::Duration::from_millis(500));
        let started = std::time::Instant::now();
        let listed = self.admin_json(&["get", &resource, "-n", &namespace, "-o", "json"]);
        let took = started.elapsed();
        let dropped = stalling.stop()?;
        let listed = listed.context("listing in an older version beside the stalled clients")?;
        if listed["items"].as_array().is_none_or(Vec::is_empty) {
            bail!("listed as {older} beside the stalled clients, no object came back: {listed}");
        }
        if took > std::time::Duration::from_secs(10) {
            bail!("a conversion beside two stalled clients took {took:?}");
        }
        println!(
            "\n    converted in {took:?} beside 2 stalled clients of {}, which it dropped {dropped} times",
            pod.name
        );
        Ok(())
    }

    /// A list of many objects read in an older version, without `limit`, is converted in one
    /// review: the API server sends the whole list, unpaginated. Every object comes back in
    /// that version.
    pub(super) fn lists_many_in_an_older_version(&mut self) -> Result<()> {
        const MANY: usize = 1_000;
        const MANY_LABEL: &str = "e2e.operator-gen.kube.rs/many";
        let older = self
            .older_versions()
            .into_iter()
            .next()
            .context("no older version")?;
        let objects: Vec<Value> = (0..MANY)
            .map(|index| {
                let mut object = self.primary_object(&format!("many-{index}"));
                object["metadata"]["labels"] = json!({ MANY_LABEL: "true" });
                object
            })
            .collect();
        self.create_all(objects)?;
        let namespace = self.namespace.clone();
        // `--chunk-size=0`: one LIST with no `limit`, as a controller's first list of an
        // older version asks for.
        let list = self.admin_json(&[
            "get",
            &self.resource_in(&older),
            "-n",
            &namespace,
            "--chunk-size=0",
            "-o",
            "json",
        ])?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let (group, _) = self.group_and_hub();
        let wanted = format!("{group}/{older}");
        let converted = items
            .iter()
            .filter(|item| {
                item["apiVersion"] == wanted
                    && item["metadata"]["name"]
                        .as_str()
                        .is_some_and(|name| name.starts_with("many-"))
            })
            .count();
        self.delete_labelled(MANY_LABEL)?;
        if converted != MANY {
            bail!(
                "listed as {older}, {converted} of {MANY} objects came back in that version ({} items in all)",
                items.len()
            );
        }
        Ok(())
    }

    /// Creates `objects`, each a primary in the hub's version, many requests at a time:
    /// `kubectl create` would send them one after another.
    /// Deletes the primaries in the test namespace that carry `label`, in one request rather
    /// than one per object, without waiting for them to go.
    pub(super) fn delete_labelled(&self, label: &str) -> Result<()> {
        self.admin(
            &[
                "delete",
                &self.primary,
                "-n",
                &self.namespace,
                "-l",
                label,
                "--wait=false",
            ],
            None,
        )
    }

    pub(super) fn create_all(&self, objects: Vec<Value>) -> Result<()> {
        self.with_primaries(async |api| {
            futures::stream::iter(objects)
                .map(|object| {
                    let api = api.clone();
                    async move {
                        let object: kube::api::DynamicObject = serde_json::from_value(object)?;
                        let params = kube::api::PostParams::default();
                        let mut tries = 0;
                        loop {
                            tries += 1;
                            match api.create(&params, &object).await {
                                Ok(_) => return Ok(()),
                                // As any client retries a 500: the API server reused a
                                // keep-alive connection to the webhook as the pod closed it
                                // idle (see issue 58); the rolling-update check counts these.
                                Err(error) if tries < 3 && webhook_connection_lost(&error) => {
                                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                                }
                                Err(error) => return Err(anyhow::Error::from(error)),
                            }
                        }
                    }
                })
                .buffer_unordered(32)
                .try_collect::<Vec<()>>()
                .await
                .map(drop)
        })
    }
}

/// Whether `error` is the API server's 500 for a webhook call whose connection was lost
/// before an answer, which a client may retry.
fn webhook_connection_lost(error: &kube::Error) -> bool {
    let text = error.to_string();
    text.contains("failed calling webhook")
        && ["connection reset by peer", "broken pipe", "EOF"]
            .iter()
            .any(|lost| text.contains(lost))
}

/// Sets `value` at the JSON pointer `pointer`, creating objects on the way.
fn set_pointer(object: &mut Value, pointer: &str, value: Value) -> Result<()> {
    let keys: Vec<&str> = pointer.split('/').skip(1).collect();
    let (last, parents) = keys.split_last().context("an empty pointer")?;
    let mut target = object;
    for key in parents {
        target = &mut target[*key];
    }
    target[*last] = value;
    Ok(())
}
