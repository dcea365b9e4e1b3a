//! The modules of a generated crate's library, and who owns each: `lib.rs` declares them and
//! its docs and the crate's README list them from here, so neither spells out which
//! modules an operator has. `render`'s table of files decides the same thing once more, by
//! the files it writes; a test there holds the two to each other.

use serde::Serialize;

use super::{Archetype, Webhooks};
use crate::text::Constant;

/// One module of `src/`.
#[derive(Debug, Clone, Serialize)]
pub struct Module {
    /// Its name, a Rust identifier fixed in this file.
    pub name: Constant,
    /// What it holds, for `lib.rs`'s docs and README's layout.
    pub what: Constant,
    /// Whether the generator rewrites it: otherwise it is the user's, written once.
    pub generated: bool,
}

/// The modules of an operator of `archetype` with `webhooks`, in `lib.rs`'s order.
pub(super) fn of(archetype: Archetype, webhooks: Option<&Webhooks>) -> Vec<Module> {
    let admission = webhooks.is_some_and(|w| !w.configurations.is_empty());
    let conversion = webhooks.is_some_and(|w| w.conversion.is_some());
    let module = |name, what, generated| Module {
        name: Constant(name),
        what: Constant(what),
        generated,
    };
    let types = match (archetype, conversion) {
        (Archetype::Derived, true) => {
            "the resource's Rust types: a module per version, and each older version's \
             conversions to and from the hub"
        }
        (Archetype::Derived, false) => "the resource's Rust types",
        (Archetype::Imported, _) => "Rust types for the CRD, from kopium",
        (Archetype::Dynamic, _) => "the kind as its CRD places it in the API, its fields untyped",
        (Archetype::Builtin | Archetype::Generic, _) => "the k8s-openapi kinds it works on",
    };
    [
        admission.then(|| {
            module(
                "admission",
                "the admission hooks: `validate` and `mutate`",
                false,
            )
        }),
        webhooks.map(|_| module("certificates", "the webhooks' certificate", true)),
        Some(module(
            "controller",
            "the `Reconciler` hooks, the relations, the run loop",
            true,
        )),
        conversion.then(|| {
            module(
                "conversion",
                "the conversion webhook: every version to and from the hub, losing nothing",
                true,
            )
        }),
        Some(module(
            "error",
            "the runtime's error type, transient or permanent",
            true,
        )),
        Some(module(
            "manifest",
            "the operator as `operator.yaml` describes it: primary, related kinds, finalizer, \
             backoff, context",
            true,
        )),
        Some(module(
            "reconcile",
            "the reconcile logic: the `Reconciler` hooks",
            false,
        )),
        Some(module(
            "settings",
            "flags and their environment variables",
            true,
        )),
        Some(module("types", types, archetype != Archetype::Derived)),
        webhooks.map(|_| module("webhook", "the webhooks' HTTPS server", true)),
    ]
    .into_iter()
    .flatten()
    .collect()
}
