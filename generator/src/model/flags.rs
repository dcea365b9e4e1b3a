//! The operator's own flags beyond the ones every operator takes: one group per feature it
//! was generated with, each a struct of the runtime's `settings` flattened into the crate's
//! `Settings`. `settings.rs` declares, imports and defaults them, and README's table of
//! settings lists their flags, each in one loop, so a group is added in one place.

use serde::Serialize;

use super::Webhooks;
use crate::text::Constant;

/// One group of flags: a field of `Settings`, of a type from `operator_gen_runtime::settings`.
#[derive(Debug, Clone, Serialize)]
pub struct FlagGroup {
    /// The field, which generated code reads (`settings.webhooks.addr`).
    pub field: Constant,
    /// Its type in the runtime's `settings`, which has `Default` and `clap::Args`.
    pub ty: Constant,
    /// What the group sets, for the field's docs.
    pub doc: Constant,
    /// Its flags, as README's table of settings lists them.
    pub rows: Vec<FlagRow>,
}

/// One flag, as the runtime's `clap` definition names it, in Markdown.
#[derive(Debug, Clone, Serialize)]
pub struct FlagRow {
    pub flag: Constant,
    pub variable: Constant,
    pub default: Constant,
    pub effect: Constant,
}

/// A row of README's table: `--flag`, `VARIABLE`, its default and what it does.
fn row(
    flag: &'static str,
    variable: &'static str,
    default: &'static str,
    effect: &'static str,
) -> FlagRow {
    FlagRow {
        flag: Constant(flag),
        variable: Constant(variable),
        default: Constant(default),
        effect: Constant(effect),
    }
}

/// The groups of an operator with `webhooks`, sharded or not, in the order `Settings` holds
/// them.
pub(super) fn groups(webhooks: Option<&Webhooks>, sharding: bool) -> Vec<FlagGroup> {
    let group = |field, ty, doc, rows| FlagGroup {
        field: Constant(field),
        ty: Constant(ty),
        doc: Constant(doc),
        rows,
    };
    [
        webhooks.map(|_| {
            group(
                "webhooks",
                "Webhooks",
                "Where the webhooks are served, and who issues their certificate.",
                vec![
                    row(
                        "--webhook-addr",
                        "WEBHOOK_ADDR",
                        "`0.0.0.0:8443`",
                        "the webhooks, over HTTPS",
                    ),
                    row(
                        "--webhook-certs",
                        "WEBHOOK_CERTS",
                        "`self-managed`",
                        "`cert-manager` when cert-manager issues the certificate",
                    ),
                ],
            )
        }),
        webhooks.and_then(|w| w.conversion.as_ref()).map(|_| {
            group(
                "conversion",
                "Conversion",
                "The largest ConversionReview the conversion webhook reads.",
                vec![row(
                    "--conversion-max-bytes",
                    "CONVERSION_MAX_BYTES",
                    "`33554432` (32 MiB)",
                    "the largest ConversionReview read: a list read in an older version is one \
                     review; two are converted at once",
                )],
            )
        }),
        sharding.then(|| {
            group(
                "sharding",
                "Sharding",
                "Whether the replicas split the primaries between them.",
                vec![row(
                    "--sharding",
                    "SHARDING",
                    "off",
                    "`true` to split the primaries between the replicas, each named by \
                     `--pod-name` (see Sharding above)",
                )],
            )
        }),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_without_webhooks_or_sharding_takes_only_the_common_flags() {
        assert!(groups(None, false).is_empty());
        let sharded: Vec<&str> = groups(None, true).iter().map(|g| g.field.0).collect();
        assert_eq!(sharded, ["sharding"]);
    }
}
