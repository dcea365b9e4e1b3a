//! `cargo xtask bench webhook-memory`: the resident memory of a webhook server answering the
//! largest reviews it reads, alone and 8 at once (`webhook-server-peak`, in release), against
//! the Deployment's limit. It fails when a peak reaches the limit, or when what the server
//! keeps resident once the answers are sent is over [`KEPT_MIB`]: freed memory that glibc's
//! arenas keep would leave the next burst that much nearer the limit.

use anyhow::Result;

use super::{
    Row,
    peak_tools::{MEMORY_LIMIT_MIB, build_peak_tools, tool_report},
};

/// What a webhook server may keep resident after its answers: it starts at about 5 MiB.
const KEPT_MIB: f64 = 64.0;

const MIB: usize = 1024 * 1024;

/// The reviews: a way `webhook-server-peak` sends, the body's bytes, and what it is. Each is
/// sent alone, then 8 at once.
const REVIEWS: &[(&str, usize, &str)] = &[
    (
        "mutate-minimal",
        7 * MIB + MIB / 5,
        "CREATE of 580,000 rules `{\"expr\":\"1\"}` to `/mutate` (the hardening round's worst case)",
    ),
    (
        "validate-minimal",
        7 * MIB + MIB / 5,
        "the same CREATE to `/validate`",
    ),
    (
        "admission",
        7_700_000,
        "UPDATE of a PrometheusRule of small rules to `/validate`",
    ),
    (
        "admission",
        3_000_000,
        "UPDATE of about the largest the API server sends (a 1.5 MiB object and the old one)",
    ),
    (
        "conversion",
        33_000_000,
        "ConversionReview of Backups, over `--conversion-max-bytes`' 32 MiB default",
    ),
];

/// How many at once, after alone: a burst, as a rollout's creates send them.
const AT_ONCE: usize = 8;

/// One run of `webhook-server-peak`, as it reports itself.
#[derive(serde::Deserialize)]
struct Report {
    body_bytes: u64,
    answers: std::collections::BTreeMap<String, usize>,
    peak_kib: u64,
    rss_after_kib: u64,
}

/// The rows, and each case that reached the limit or kept too much, said in a line.
pub(super) fn rows(workspace: &std::path::Path) -> Result<(Vec<Row>, Vec<String>)> {
    build_peak_tools(workspace)?;
    let mib = |kib: u64| kib as f64 / 1024.0;
    let (mut rows, mut over) = (Vec::new(), Vec::new());
    let cases = REVIEWS
        .iter()
        .flat_map(|&(way, bytes, case)| [(way, bytes, 1, case), (way, bytes, AT_ONCE, case)]);
    for (way, bytes, at_once, case) in cases {
        let (size, count) = (bytes.to_string(), at_once.to_string());
        let report: Report = tool_report(workspace, "webhook-server-peak", &[way, &size, &count])?;
        let (peak, kept) = (mib(report.peak_kib), mib(report.rss_after_kib));
        let command = format!("target/release/webhook-server-peak {way} {bytes} {at_once}");
        if peak >= MEMORY_LIMIT_MIB {
            over.push(format!(
                "`{command}` peaked at {peak:.0} MiB, over the Deployment's {MEMORY_LIMIT_MIB:.0} MiB"
            ));
        }
        if kept > KEPT_MIB {
            over.push(format!(
                "`{command}` kept {kept:.0} MiB resident after its answers, over {KEPT_MIB:.0} MiB"
            ));
        }
        rows.push(Row {
            figure: format!(
                "peak RSS of the webhook server, {}: {:.1} MiB {case}; answers {:?}",
                if at_once == 1 {
                    "alone".to_owned()
                } else {
                    format!("{at_once} at once")
                },
                report.body_bytes as f64 / MIB as f64,
                report.answers
            ),
            ours: format!("{peak:.0} MiB peak, {kept:.0} MiB kept after"),
            floor: format!(
                "the Deployment's {MEMORY_LIMIT_MIB:.0} MiB limit; {KEPT_MIB:.0} MiB kept"
            ),
            ratio: format!("{:.2}× of the limit", peak / MEMORY_LIMIT_MIB),
            command: format!("cargo xtask bench webhook-memory (`{command}`)"),
        });
    }
    Ok((rows, over))
}
