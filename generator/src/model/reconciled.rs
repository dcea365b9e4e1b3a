//! The kinds a generated operator reconciles. Each has a controller of its own in every term
//! of one leader election, and all of them share one metrics registry, the children's caches
//! and the watches of related kinds. A typed primary is the one kind. A generic operator
//! reconciles each of its kinds, on their metadata.
//!
//! The generated items are generic over the kind only in a generic operator. A typed
//! operator's hooks take `Arc<Primary>` and `Arc<Context>`, as hand-written code would. The
//! templates print these generic parameters from here, so every file spells them the same way.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Archetype, Related};
use crate::text::{Code, Constant, Ident, RustPath, Text};

/// The kinds reconciled, and how the generated items name them.
#[derive(Debug, Clone, Serialize)]
pub struct Reconciled {
    /// Whether the generated items are generic over the kind (`K`).
    pub generic: bool,
    /// The generic parameters of an item over every kind: `<K: Kind>`, or none.
    pub params: Constant,
    /// The arguments that name the kind in such an item: `<K>`, or none.
    pub args: Constant,
    /// What a module outside `controller.rs` imports from it to name the primary:
    /// `{Kind, Primary}`, or `Primary`.
    pub imports: Constant,
    /// One entry per kind, each with its own controller.
    pub kinds: Vec<ReconciledKind>,
}

/// One kind reconciled.
#[derive(Debug, Clone, Serialize)]
pub struct ReconciledKind {
    /// Its context's field in the generated `Contexts`: `primary`, or the kind's snake-case
    /// name.
    pub ident: Ident,
    /// The kind as the argument of `Primary` and `Context`: `<crate::types::Deployment>`, or
    /// none. The path is whole, so that no file imports the kinds by name.
    pub args: Code,
    /// A generic operator's kind, as the API names it: for the docs of its sample.
    pub kind: Option<Text>,
    /// The body of this kind's sample that `sample:` in `operator.yaml` gives a generic
    /// operator (`sample.Deployment`); none where it gives none, and the sample is empty.
    pub sample: Option<Text>,
}

impl Reconciled {
    /// The kinds an operator of `archetype` reconciles: `kinds` for a generic one, otherwise
    /// its typed primary alone.
    /// `samples` are a generic operator's sample bodies, by kind.
    pub(super) fn new(
        archetype: Archetype,
        kinds: &[Related],
        samples: &BTreeMap<String, Text>,
    ) -> Self {
        if archetype != Archetype::Generic {
            return Self {
                generic: false,
                params: Constant(""),
                args: Constant(""),
                imports: Constant("Primary"),
                kinds: vec![ReconciledKind {
                    ident: Ident::constant("primary"),
                    args: Code::empty(),
                    kind: None,
                    sample: None,
                }],
            };
        }
        let kinds = kinds
            .iter()
            .map(|kind| ReconciledKind {
                ident: kind.ident.clone(),
                args: Code::type_arguments(
                    &RustPath::constant("crate::types").join(&kind.rust_name),
                ),
                kind: Some(kind.kind.clone()),
                sample: samples.get(kind.kind.raw()).cloned(),
            })
            .collect();
        Self {
            generic: true,
            params: Constant("<K: Kind>"),
            args: Constant("<K>"),
            imports: Constant("{Kind, Primary}"),
            kinds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s_catalog;

    fn builtin(kind: &str) -> Related {
        Related::builtin(&k8s_catalog::find(kind).expect("a built-in kind"))
    }

    #[test]
    fn a_typed_primary_is_one_kind_and_nothing_is_generic() {
        let reconciled = Reconciled::new(Archetype::Imported, &[], &BTreeMap::new());
        assert!(!reconciled.generic);
        assert_eq!(reconciled.kinds.len(), 1);
        assert_eq!(reconciled.kinds[0].ident, "primary");
        let printed = [reconciled.params, reconciled.args];
        assert!(printed.iter().all(|c| c.as_str().is_empty()));
        assert!(reconciled.kinds[0].args.as_str().is_empty());
    }

    #[test]
    fn a_generic_operator_reconciles_each_kind_named_as_a_type_argument() {
        let kinds = [builtin("Deployment"), builtin("ConfigMap")];
        let samples = BTreeMap::from([("Deployment".to_owned(), Text::new("{\"spec\":{}}"))]);
        let reconciled = Reconciled::new(Archetype::Generic, &kinds, &samples);
        assert!(reconciled.generic);
        let named: Vec<(&str, &str)> = reconciled
            .kinds
            .iter()
            .map(|kind| (kind.ident.as_str(), kind.args.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("deployment", "<crate::types::Deployment>"),
                ("config_map", "<crate::types::ConfigMap>")
            ]
        );
        let samples: Vec<Option<&str>> = reconciled
            .kinds
            .iter()
            .map(|kind| kind.sample.as_ref().map(Text::raw))
            .collect();
        assert_eq!(
            samples,
            [Some("{\"spec\":{}}"), None],
            "each kind has the sample given for it"
        );
        assert_eq!(reconciled.params.as_str(), "<K: Kind>");
        assert_eq!(reconciled.args.as_str(), "<K>");
    }
}
