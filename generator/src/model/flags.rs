//! The operator's flags, as the runtime's `clap` definitions name them: those every operator
//! takes ([`common`]), and its own beyond them, one group per feature it was generated with,
//! each a struct of the runtime's `settings` flattened into the crate's `Settings`.
//! `settings.rs` declares, imports and defaults the groups, and OPERATOR.md's table of
//! settings lists every flag, each in one loop, so a flag is added in one place. xtask's
//! `contracts` holds [`every_row`] to the runtime's definitions.

use serde::Serialize;

use super::{LocalWebhooks, Webhooks};
use crate::text::{Constant, Text};

/// One group of flags: a field of `Settings`, of a type from `operator_gen_runtime::settings`.
#[derive(Debug, Clone, Serialize)]
pub struct FlagGroup {
    /// The field, which generated code reads (`settings.webhooks.addr`).
    pub field: Constant,
    /// Its type in the runtime's `settings`, which has `Default` and `clap::Args`.
    pub ty: Constant,
    /// What the group sets, for the field's docs.
    pub doc: Constant,
    /// Its flags, as OPERATOR.md's table of settings lists them.
    pub rows: Vec<FlagRow>,
}

/// One flag, as the runtime's `clap` definition names it, in Markdown.
#[derive(Debug, Clone, Serialize)]
pub struct FlagRow {
    pub flag: Constant,
    pub variable: Constant,
    /// The runtime's default, in Markdown.
    pub default: Constant,
    /// The crate's own default, where it gives the flag one, printed in place of `default`:
    /// `--webhook-addr`'s is the manifest's `local.webhooks`.
    pub crate_default: Option<Text>,
    pub effect: Constant,
}

/// A row of OPERATOR.md's table: `--flag`, `VARIABLE`, its default and what it does.
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
        crate_default: None,
        effect: Constant(effect),
    }
}

/// The flags every operator takes, the runtime's `settings::Common`, as the table of
/// settings lists them after `RUST_LOG`.
pub fn common() -> Vec<FlagRow> {
    vec![
        row(
            "--log-format",
            "LOG_FORMAT",
            "`pretty`",
            "`json` for one JSON object per line",
        ),
        row(
            "--metrics-addr",
            "METRICS_ADDR",
            "`127.0.0.1:8080`",
            "`/metrics`, `/healthz`, `/readyz`; the Deployments set `0.0.0.0:8080`, where the \
             kubelet's probes and Prometheus reach a pod",
        ),
        row(
            "--leader-election",
            "LEADER_ELECTION",
            "off",
            "`true` to take a Lease before reconciling (`true` or `false` only)",
        ),
        row(
            "--pod-name",
            "POD_NAME",
            "none",
            "this replica's name in the Lease and in Events",
        ),
        row(
            "--lease-seconds",
            "LEASE_SECONDS",
            "15",
            "how long a leader holds the Lease without renewing it: how long the operator may \
             go without a leader when one dies; renewed a third of it (at least 2 s) before it \
             would expire",
        ),
        row(
            "--initial-list",
            "INITIAL_LIST",
            "`streaming`",
            "how every watch lists what exists when it starts: `streaming` (one object at a \
             time, the lower peak) or `paged` (500 a page); a server that refuses streaming \
             lists (Kubernetes 1.33 by default) is listed in pages anyway",
        ),
    ]
}

/// The flags of the runtime's `settings::Webhooks`, `--webhook-addr` defaulting to `local`.
fn webhook_rows(local: &LocalWebhooks) -> Vec<FlagRow> {
    vec![
        FlagRow {
            crate_default: Some(local.addr.clone()),
            ..row(
                "--webhook-addr",
                "WEBHOOK_ADDR",
                "`127.0.0.1:8443`",
                "the webhooks, over HTTPS (`local.webhooks` in operator.yaml sets the default); \
                 the Deployments set `0.0.0.0:8443`, where the Service reaches a pod",
            )
        },
        row(
            "--webhook-certs",
            "WEBHOOK_CERTS",
            "`self-managed`",
            "`cert-manager` when cert-manager issues the certificate",
        ),
    ]
}

/// The flags of the runtime's `settings::Conversion`.
fn conversion_rows() -> Vec<FlagRow> {
    vec![row(
        "--conversion-max-bytes",
        "CONVERSION_MAX_BYTES",
        "`33554432` (32 MiB)",
        "the largest ConversionReview read: a list read in an older version is one review; two \
         are converted at once",
    )]
}

/// The flags of the runtime's `settings::Sharding`.
fn sharding_rows() -> Vec<FlagRow> {
    vec![row(
        "--sharding",
        "SHARDING",
        "off",
        "`true` to split the primaries between the replicas, each named by `--pod-name` (see \
         Sharding above)",
    )]
}

/// Every flag the table of settings can list, the common ones and every group's: what a test
/// holds to the runtime's `clap` definitions (xtask's `contracts`).
pub fn every_row() -> Vec<FlagRow> {
    let local = LocalWebhooks::default();
    [
        common(),
        webhook_rows(&local),
        conversion_rows(),
        sharding_rows(),
    ]
    .concat()
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
        webhooks.map(|webhooks| {
            group(
                "webhooks",
                "Webhooks",
                "Where the webhooks are served, and who issues their certificate.",
                webhook_rows(&webhooks.local),
            )
        }),
        webhooks.and_then(|w| w.conversion.as_ref()).map(|_| {
            group(
                "conversion",
                "Conversion",
                "The largest ConversionReview the conversion webhook reads.",
                conversion_rows(),
            )
        }),
        sharding.then(|| {
            group(
                "sharding",
                "Sharding",
                "Whether the replicas split the primaries between them.",
                sharding_rows(),
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
