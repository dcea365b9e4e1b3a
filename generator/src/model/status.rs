//! Status: the condition the operator writes into its primary's status, when the manifest
//! asks for one (`status: { condition: <Type> }`), and always for a derived primary, whose
//! status is the operator's own (`Ready` unless the manifest names another type).
//!
//! An imported CRD's status belongs to the controller that CRD comes with (cert-manager's, for
//! a Certificate), so by default the generated operator writes none of it. Asked, it writes one
//! entry of `status.conditions`, of its own type, and leaves every other entry alone: by
//! server-side apply where the list is a map keyed by `type`, else by a patch of the whole list
//! that carries the `resourceVersion` it was computed from, which the API server refuses when
//! another writer came first.

use serde::Serialize;

use super::{Archetype, Conditions, Primary};
use crate::{error::Result, manifest, text::Text};

/// The condition the operator keeps in `status.conditions`.
#[derive(Debug, Clone, Serialize)]
pub struct OwnCondition {
    /// Its `type`, as the manifest names it.
    pub type_name: Text,
    /// What the CRD's condition items hold, and how the list merges.
    pub fields: Conditions,
}

/// The longest condition type Kubernetes accepts: a 253-character prefix, `/` and a
/// 63-character name.
const MAX_TYPE_LENGTH: usize = 316;

/// The condition `status` asks for, checked against the primary; `None` when none is asked.
pub(super) fn own_condition(
    manifest: &manifest::Manifest,
    archetype: Archetype,
    primary: &Primary,
    bad: &dyn Fn(&str, String) -> crate::Error,
) -> Result<Option<OwnCondition>> {
    const FIELD: &str = "status.condition";
    if archetype == Archetype::Derived {
        let type_name = manifest
            .own_condition()
            .unwrap_or(manifest::DERIVED_CONDITION);
        return derived_condition(type_name).map_err(|reason| bad(FIELD, reason));
    }
    let Some(type_name) = &manifest.status.condition else {
        return Ok(None);
    };
    if archetype != Archetype::Imported {
        return Err(bad(
            FIELD,
            "a condition is written for an imported CRD with generated types, or a derived one; \
             a built-in kind's status belongs to its own controller; remove `status.condition`"
                .to_owned(),
        ));
    }
    check_type_name(type_name).map_err(|reason| bad(FIELD, reason))?;
    let Some(fields) = primary
        .conditions
        .clone()
        .filter(|_| primary.status_subresource)
    else {
        return Err(bad(
            FIELD,
            format!(
                "{} has no `status.conditions` list of objects with a string `type` and `status` \
                 behind a `/status` subresource, so there is nowhere to write a condition; remove \
                 `status.condition`",
                primary.crd_name.raw()
            ),
        ));
    };
    if !fields.unfillable.is_empty() {
        return Err(bad(
            FIELD,
            format!(
                "{}'s condition items require {}, which the generated code cannot fill, so \
                 every write would be refused; write such a condition yourself with \
                 `Context::patch_status`, and remove `status.condition`",
                primary.crd_name.raw(),
                fields.unfillable.join(", ")
            ),
        ));
    }
    if let Some(allowed) = &fields.allowed_types
        && !allowed.contains(type_name)
    {
        return Err(bad(
            FIELD,
            format!(
                "{type_name:?} is not a condition type {} allows ({}); name one of those",
                primary.crd_name.raw(),
                allowed.join(", ")
            ),
        ));
    }
    Ok(Some(OwnCondition {
        type_name: Text::new(type_name.as_str()),
        fields,
    }))
}

/// Whether the primary's status is the operator's to write: a derived primary's always, an
/// imported one's when the manifest says the operator is its CRD's controller (`status.ours`),
/// which needs a `/status` subresource to write through. `bad` reports `status.ours` where
/// the status is another controller's by nature (a built-in kind's) or cannot be written.
pub(super) fn ours(
    manifest: &manifest::Manifest,
    archetype: Archetype,
    primary: &Primary,
    bad: &dyn Fn(&str, String) -> crate::Error,
) -> Result<bool> {
    const FIELD: &str = "status.ours";
    if archetype == Archetype::Derived {
        return Ok(true);
    }
    if !manifest.status.ours {
        return Ok(false);
    }
    if archetype != Archetype::Imported {
        return Err(bad(
            FIELD,
            "only an imported CRD with generated types can be this operator's own: a built-in \
             kind's status belongs to its own controller, and a derived resource's is the \
             operator's already; remove `status.ours`"
                .to_owned(),
        ));
    }
    if !primary.status_subresource || primary.status_type.is_none() {
        return Err(bad(
            FIELD,
            format!(
                "{} has no `status` behind a `/status` subresource, so there is no status to \
                 write; remove `status.ours`",
                primary.crd_name.raw()
            ),
        ));
    }
    Ok(true)
}

/// The condition `type_name` of a derived primary (`Ready` unless `status.condition` names
/// another). Its status type is the crate's own, `new` writes it with a `conditions` list of
/// `metav1.Condition`, which has every field; that list is replaced whole on each write, since
/// nothing tells the generator whether the user's `types.rs` made it a map keyed by `type`.
/// `manifest.rs` asserts at compile time that the status type still has the list.
fn derived_condition(type_name: &str) -> Result<Option<OwnCondition>, String> {
    check_type_name(type_name)?;
    Ok(Some(OwnCondition {
        type_name: Text::new(type_name),
        fields: Conditions {
            reason: true,
            message: true,
            last_transition_time: true,
            observed_generation: true,
            list_map: false,
            allowed_types: None,
            unfillable: Vec::new(),
        },
    }))
}

/// A condition type as Kubernetes checks it (`metav1.Condition`): an optional DNS-subdomain
/// prefix and `/`, then letters, digits, `-`, `_` and `.`, starting and ending with a letter
/// or digit.
fn check_type_name(name: &str) -> Result<(), String> {
    let (prefix, local) = name
        .rsplit_once('/')
        .map_or((None, name), |(p, l)| (Some(p), l));
    let local_ok = local.starts_with(|c: char| c.is_ascii_alphanumeric())
        && local.ends_with(|c: char| c.is_ascii_alphanumeric())
        && local
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && local.len() <= 63;
    let prefix_ok = prefix.is_none_or(|prefix| {
        !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|label| {
                !label.is_empty()
                    && label.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && label.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    if local_ok && prefix_ok && name.len() <= MAX_TYPE_LENGTH {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a condition type: use letters, digits, `-`, `_` and `.`, starting \
             and ending with a letter or digit (`Reconciled`), optionally after a domain and `/`"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::check_type_name;

    #[test]
    fn condition_types_are_checked_as_kubernetes_checks_them() {
        for good in [
            "Ready",
            "ConfigMapWritten",
            "example.com/Audited",
            "a_b-c.d",
        ] {
            assert_eq!(check_type_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "-Ready",
            "Ready ",
            "has space",
            "Example.com/Ready",
            "/Ready",
            "a/",
        ] {
            assert!(check_type_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_type_name(&"a".repeat(64)).is_err());
    }
}
