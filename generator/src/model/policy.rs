//! How the controller runs: requeue and backoff, concurrency and debounce, the predicates on
//! the primary's stream, and how far its watches reach.

use serde::Serialize;

use super::{Primary, relations::Resolved};
use crate::{
    error::{Error, Result},
    manifest::{self, Manifest},
    text::{Constant, Text},
};

/// Reconciles at once unless `concurrency:` says otherwise. kube's own default is unlimited;
/// but each reconcile that writes holds an HTTP/1.1 connection to the API server, so 10,000
/// new objects opened about 10,000 connections and peaked at 15 KiB of heap per object
/// (`cargo xtask bench allocations`). 64 is what `cargo xtask bench runtime`'s floor keeps in
/// flight, well under the API server's default of 200 mutating requests at once.
pub const DEFAULT_CONCURRENCY: u16 = 64;

#[derive(Debug, Clone, Serialize)]
pub struct Requeue {
    pub after_secs: Option<u64>,
    /// `Controller::with_config` settings; zero concurrency means unlimited, as in kube.
    pub concurrency: u16,
    pub debounce_ms: u64,
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
}

/// The requeue and backoff settings, with the manifest's durations (bounded when it was
/// read) in the units the generated constants use.
pub(super) fn requeue(manifest: &Manifest, bad: &dyn Fn(&str, String) -> Error) -> Result<Requeue> {
    let millis = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let backoff_base = manifest
        .requeue
        .error_backoff
        .unwrap_or(std::time::Duration::from_secs(1));
    let backoff_max = manifest
        .requeue
        .error_backoff_max
        .unwrap_or(std::time::Duration::from_secs(300));
    if backoff_max < backoff_base {
        return Err(bad(
            "requeue.errorBackoffMax",
            "must not be shorter than requeue.errorBackoff".to_owned(),
        ));
    }
    Ok(Requeue {
        after_secs: manifest.requeue.after.map(|d| d.as_secs().max(1)),
        concurrency: manifest.concurrency.unwrap_or(DEFAULT_CONCURRENCY),
        debounce_ms: manifest.debounce.map_or(0, millis),
        backoff_base_ms: millis(backoff_base).max(1),
        backoff_max_ms: millis(backoff_max).max(1),
    })
}

/// The predicates in force, as paths of `kube::runtime::predicates` functions
/// (`predicates::generation`).
///
/// A sharded operator's primaries also pass on a change of labels, when any predicate
/// filters them: the sharder asks a replica to let an object go by a label, which changes
/// neither its generation nor its finalizers.
pub(super) fn predicates(manifest: &Manifest, sharding: bool) -> Vec<Constant> {
    let mut predicates = manifest.predicates();
    if sharding && !predicates.is_empty() && !predicates.contains(&manifest::Predicate::Labels) {
        predicates.push(manifest::Predicate::Labels);
    }
    predicates
        .iter()
        .map(|p| match p {
            manifest::Predicate::Generation => "predicates::generation",
            manifest::Predicate::Finalizers => "predicates::finalizers",
            manifest::Predicate::Labels => "predicates::labels",
            manifest::Predicate::Annotations => "predicates::annotations",
        })
        .map(Constant)
        .collect()
}

/// The manifest's `scope`, refused where it cannot work: a namespace-scoped operator cannot
/// watch a cluster-scoped kind.
pub(super) fn scope(
    manifest: &Manifest,
    primary: &Primary,
    relations: &Resolved,
    bad: &dyn Fn(&str, String) -> Error,
) -> Result<manifest::Scope> {
    if manifest.scope != manifest::Scope::Namespace {
        return Ok(manifest.scope);
    }
    // A generic operator's primaries are its kinds.
    let primaries: Vec<(&Text, bool)> = match primary.kinds.as_slice() {
        [] => vec![(&primary.kind, primary.namespaced)],
        kinds => kinds.iter().map(|k| (&k.kind, k.namespaced)).collect(),
    };
    let kinds = primaries
        .into_iter()
        .chain(relations.owns.iter().map(|o| (&o.kind, o.namespaced)))
        .chain(
            relations
                .watches
                .iter()
                .map(|w| (&w.related.kind, w.related.namespaced)),
        );
    let mut cluster_scoped = kinds.filter(|(_, namespaced)| !namespaced);
    if let Some((kind, _)) = cluster_scoped.next() {
        return Err(bad(
            "scope",
            format!(
                "{kind} is cluster-scoped, so a namespace-scoped operator cannot watch it; \
                 use `scope: cluster` or drop it from the manifest"
            ),
        ));
    }
    Ok(manifest.scope)
}
