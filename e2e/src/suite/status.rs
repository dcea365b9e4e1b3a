//! The condition an operator keeps in its primary's status (`status.condition` in its
//! `operator.yaml`, or a derived primary's `Ready`), on the real API server: what the untouched
//! skeleton's reconcile leaves there, and, in an imported CRD, beside the conditions of the
//! controller the CRD belongs to, which the check plays.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use kube::{
    api::{Patch, PatchParams},
    runtime::{WatchStreamExt as _, watcher},
};
use serde_json::{Value, json};

use super::Suite;

/// How many reconciles write the operator's condition while the other controller writes its
/// own, at least.
const RECONCILES: u64 = 1_000;

/// The field manager of the controller the CRD belongs to, as this check plays it.
const OTHER_MANAGER: &str = "e2e-owning-controller";

/// How an operator with a condition is driven: a change of its primary's spec, so that every
/// reconcile observes a new generation and writes its condition again.
pub(super) struct StatusCase {
    /// A condition type of the CRD's own controller.
    pub other_type: &'static str,
    /// A merge patch of the spec that differs for each `round`.
    pub bump: fn(u64) -> Value,
}

/// The operators in this workspace that keep a condition.
pub(super) fn status_case(name: &str) -> Option<StatusCase> {
    (name == "targetgrouppolicy-auditor").then_some(StatusCase {
        other_type: "Accepted",
        bump: |round| json!({"spec": {"healthCheck": {"path": format!("/healthz/{round}")}}}),
    })
}

/// The entry of `type_` in `object`'s `status.conditions`.
fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

impl Suite {
    /// The condition type the operator keeps, as `operator.yaml` says.
    pub(super) fn own_condition(&self) -> Option<String> {
        self.manifest.own_condition().map(str::to_owned)
    }

    /// A new primary's condition says the reconcile succeeded, for the generation stored, with
    /// a message: what the lifecycle writes after the skeleton's reconcile, once, on the real
    /// API server's validation of the CRD's condition schema.
    pub(super) fn own_condition_reports_the_reconcile(&mut self) -> Result<()> {
        let own = self
            .own_condition()
            .context("the operator keeps no condition")?;
        let name = "reported";
        self.create_primary(name)?;
        self.eventually(
            "the operator's condition, True for the stored generation",
            || {
                let object = self.get_json(&self.primary, name)?;
                Ok(condition(&object, &own).is_some_and(|c| {
                    c["status"] == "True"
                        && c["observedGeneration"] == object["metadata"]["generation"]
                }))
            },
        )?;
        let object = self.get_json(&self.primary, name)?;
        let ours = condition(&object, &own).context("the operator's own condition")?;
        for field in ["reason", "message", "lastTransitionTime"] {
            if ours[field].as_str().is_none_or(str::is_empty) {
                bail!("the operator's condition has no {field}: {ours}");
            }
        }
        Ok(())
    }

    /// Another controller's condition survives a thousand reconciles that each write the
    /// operator's own: while the other controller writes its condition again and again, and
    /// spec changes make the operator write its own, a watch of the object never sees the
    /// other's entry go back to an older write or disappear. An operator that wrote the whole
    /// list from its cache would, now and then, put back what it last read.
    pub(super) fn others_condition_survives(&mut self) -> Result<()> {
        // Chosen only for an operator with both (`Suite::checks`).
        let own = self
            .own_condition()
            .context("the operator keeps no condition")?;
        let case = status_case(&self.name).context("no way to drive its reconciles is known")?;
        let name = "conditions";
        self.create_primary(name)?;
        self.eventually("the operator's own condition", || {
            let object = self.get_json(&self.primary, name)?;
            Ok(condition(&object, &own).is_some_and(|c| c["status"] == "True"))
        })?;
        let before = self.reconciles()?;
        let other_type = case.other_type;
        let (api_version, kind) = (self.api_version.clone(), self.kind.clone());
        let run = self.with_primaries(async |api| {
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let bumps = async {
                let deadline = Instant::now() + Duration::from_secs(240);
                let mut round = 0;
                let generation = loop {
                    round += 1;
                    let bumped = api
                        .patch(
                            name,
                            &PatchParams::default(),
                            &Patch::Merge((case.bump)(round)),
                        )
                        .await?;
                    // The controller folds changes that queue up into one reconcile, so the
                    // spec changes go on until it has reconciled as often as asked.
                    let enough = round % 50 == 0 && self.reconciles()? - before >= RECONCILES;
                    if enough || Instant::now() > deadline {
                        break bumped.metadata.generation.unwrap_or_default();
                    }
                };
                let _ = stop.send(true);
                anyhow::Ok(generation)
            };
            let theirs = async {
                let apply = PatchParams::apply(OTHER_MANAGER).force();
                let mut stopped = stopped.clone();
                let mut round = 0;
                while !*stopped.borrow_and_update() {
                    round += 1;
                    let body = json!({
                        "apiVersion": api_version,
                        "kind": kind,
                        "metadata": {"name": name},
                        "status": {"conditions": [{
                            "type": other_type,
                            "status": "True",
                            "reason": "Accepted",
                            "message": format!("{OTHER_MANAGER}, round {round}"),
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }]},
                    });
                    api.patch_status(name, &apply, &Patch::Apply(&body)).await?;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                anyhow::Ok(round)
            };
            let watched = async {
                let mut stopped = stopped.clone();
                let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
                let mut events = watcher(api.clone(), config).applied_objects().boxed();
                let (mut latest, mut regressions) = (0, Vec::new());
                loop {
                    let object = tokio::select! {
                        _ = stopped.changed() => break,
                        object = events.try_next() => object?,
                    };
                    let Some(object) = object else { break };
                    let object = serde_json::to_value(object)?;
                    let round = condition(&object, other_type).map(round_of);
                    match round {
                        Some(round) if round >= latest => latest = round,
                        seen => regressions.push((latest, seen)),
                    }
                }
                anyhow::Ok(regressions)
            };
            let (generation, written, regressions) = futures::join!(bumps, theirs, watched);
            anyhow::Ok((generation?, written?, regressions?))
        });
        let (generation, written, regressions) = run?;
        self.eventually("the operator to observe the last generation", || {
            let object = self.get_json(&self.primary, name)?;
            Ok(condition(&object, &own)
                .is_some_and(|c| c["observedGeneration"] == json!(generation)))
        })?;
        let reconciled = self.reconciles()? - before;
        if let Some((latest, seen)) = regressions.first() {
            bail!(
                "{} times the other controller's condition went back, first from its round \
                 {latest} to {seen:?} (none: gone), over {reconciled} reconciles",
                regressions.len()
            );
        }
        let object = self.get_json(&self.primary, name)?;
        let last = condition(&object, other_type).map(round_of);
        if last != Some(written) {
            bail!("the other controller last wrote round {written}, and {last:?} is stored");
        }
        let ours = condition(&object, &own).context("the operator's own condition")?;
        if ours["message"].as_str().is_none_or(str::is_empty) {
            bail!("the operator's condition says nothing of its outcome (no message): {ours}");
        }
        if reconciled < RECONCILES {
            bail!("only {reconciled} reconciles of the {RECONCILES} asked for within the deadline");
        }
        Ok(())
    }
}

/// The round a condition the other controller wrote names in its message.
fn round_of(condition: &Value) -> u64 {
    condition["message"]
        .as_str()
        .and_then(|message| message.rsplit(' ').next())
        .and_then(|round| round.parse().ok())
        .unwrap_or_default()
}
