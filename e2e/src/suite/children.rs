//! What an operator does to the objects around its primary: the children it owns, the
//! watched objects that reconcile it, the cache of a watch, an external trigger, and the
//! cleanup when the primary goes.

use std::fs;

use anyhow::{Context as _, Result, bail};
use operator_gen::k8s_catalog;
use serde_json::{Value, json};

use super::{OwnedChild, Suite, label_key};

impl Suite {
    pub(super) fn child_appears(&mut self) -> Result<()> {
        let uid = self.create_primary("first")?;
        self.wait_child(&uid, None).map(drop)
    }

    pub(super) fn deleted_child_restored(&mut self) -> Result<()> {
        let owner = self.uid("first")?;
        let child = self.wait_child(&owner, None)?;
        let namespace = self.namespace.clone();
        self.admin(
            &[
                "delete",
                &child.resource,
                &child.name,
                "-n",
                &namespace,
                "--wait=false",
            ],
            None,
        )?;
        self.wait_child(&owner, Some(&child.uid)).map(drop)
    }

    /// A generic operator's kinds share one watch of each owned kind, which the first kind's
    /// controller drives: the others see their children only through it.
    pub(super) fn other_kinds_children(&mut self) -> Result<()> {
        self.through_other_kinds("first", |suite| {
            suite
                .child_appears()
                .and_then(|()| suite.deleted_child_restored())
        })
    }

    pub(super) fn edited_child_restored(&mut self) -> Result<()> {
        let owner = self.uid("first")?;
        let OwnedChild {
            resource,
            name,
            object,
            ..
        } = self.wait_child(&owner, None)?;
        let (field, original) = match object.get("data").and_then(Value::as_object) {
            Some(data) if !data.is_empty() => {
                let (key, value) = data
                    .iter()
                    .next()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .unwrap_or_default();
                (key, value)
            }
            _ => {
                self.skipped = Some("the operator's child holds no data it would restore");
                return Ok(());
            }
        };
        let patch = json!({"data": {field.clone(): "tampered"}}).to_string();
        self.merge_patch(&resource, &name, &patch)?;
        self.eventually("the edited child to be restored", || {
            let child = self.get_json(&resource, &name)?;
            Ok(child["data"][&field] == original)
        })
    }

    pub(super) fn watched_change(&mut self) -> Result<()> {
        let before = self.reconciles()?;
        self.apply_watched("watched", |_| true)?;
        self.eventually("a reconcile after the watched object changed", || {
            Ok(self.reconciles()? > before)
        })
    }

    /// The cache a watch with `cache: true` fills holds a new labelled object, whole, and
    /// forgets it once it is deleted: `operator_cache_objects{kind="watched <Kind>"}` counts
    /// one more, then one fewer.
    pub(super) fn cached_watch_follows(&mut self) -> Result<()> {
        let kind = self
            .manifest
            .watches
            .iter()
            .find(|w| w.cache && label_key(w).is_some())
            .map(|w| w.kind.clone())
            .context("no cached watch is mapped by label")?;
        let series = format!("operator_cache_objects{{kind=\"watched {kind}\"}}");
        let cached = |e2e: &Self| e2e.leader()?.gauge(&series);
        let before = cached(self)?;
        self.apply_watched("cached", |w| w.cache)?;
        self.eventually("the cache to hold the new object", || {
            Ok(cached(self)? == before + 1.0)
        })?;
        let namespace = self.namespace.clone();
        let resource = kind.to_lowercase();
        self.admin(&["delete", &resource, "cached", "-n", &namespace], None)?;
        self.eventually("the cache to let the deleted object go", || {
            Ok(cached(self)? == before)
        })
    }

    /// Applies an object `name` of the first built-in kind watched by label that `chosen`
    /// picks, labelled to name the primary `first`.
    fn apply_watched(
        &self,
        name: &str,
        chosen: impl Fn(&operator_gen::manifest::Watched) -> bool,
    ) -> Result<()> {
        let (kind, key) = self
            .manifest
            .watches
            .iter()
            .filter(|w| chosen(w))
            .find_map(|w| label_key(w).map(|k| (w.kind.clone(), k)))
            .context("no such watch is mapped by label")?;
        let Some(builtin) = k8s_catalog::find(&kind) else {
            bail!("watched kind {kind} is not built in; this check creates built-in kinds only");
        };
        let object = json!({
            "apiVersion": builtin.api_version(),
            "kind": builtin.kind,
            "metadata": {"name": name, "namespace": self.namespace, "labels": {key: "first"}},
        });
        self.apply_json(&object)
    }

    /// Run locally with its registry folder, as its README runs it: a new primary's rule
    /// reaches the registry, a trigger dropped there reconciles it again, and deleting the
    /// primary runs the cleanup (behind its finalizer) that takes the rule out.
    pub(super) fn external_trigger(&mut self) -> Result<()> {
        let registry = self.registry.clone().context("no registry to trigger")?;
        let name = "registered";
        self.create_primary(name)?;
        let file = registry.join(format!("{}.{name}.rules.yaml", self.namespace));
        self.eventually("the rule in the registry", || Ok(file.exists()))?;
        let before = self.reconciles()?;
        fs::create_dir_all(registry.join("triggers"))?;
        fs::write(
            registry
                .join("triggers")
                .join(format!("{}.{name}", self.namespace)),
            "",
        )?;
        self.eventually("a reconcile after the registry's trigger", || {
            Ok(self.reconciles()? > before)
        })?;
        self.delete_primary(name)?;
        if file.exists() {
            bail!(
                "cleanup did not remove {} from the registry",
                file.display()
            );
        }
        Ok(())
    }

    pub(super) fn deletion(&mut self) -> Result<()> {
        // Made by an earlier check where one makes it; without relations, made here.
        let uid = match self.find(&self.primary, "first")? {
            Some(_) => self.uid("first")?,
            None => self.create_primary("first")?,
        };
        let child = if self.owned.is_empty() {
            None
        } else {
            Some(self.wait_child(&uid, None)?)
        };
        if !self.manifest.external.is_empty() {
            let primary = self.get_json(&self.primary.clone(), "first")?;
            let finalizers = primary["metadata"]["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if finalizers.is_empty() {
                bail!("the primary has no finalizer before deletion: {primary}");
            }
        }
        self.delete_primary("first")?;
        if let Some(child) = child {
            self.eventually("the garbage collector to remove the child", || {
                Ok(self.find(&child.resource, &child.name)?.is_none())
            })?;
        }
        Ok(())
    }
}
