//! Log lines, for people or for log pipelines, filtered by `RUST_LOG` (default `info`); with
//! the `otlp` feature, traces too ([`crate::traces`]).

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, layer::SubscriberExt as _, util::SubscriberInitExt as _};

use crate::settings::LogFormat;

/// Logging (and tracing) while it lives: keep it until `main` returns, so the last spans are
/// sent.
#[must_use = "dropping it stops exporting spans"]
pub struct Logging {
    #[cfg(feature = "otlp")]
    _exporter: Option<crate::traces::Exporter>,
}

/// Starts logging to standard output in `format`, filtered by `RUST_LOG` (default `info`).
/// With the `otlp` feature and `OTEL_EXPORTER_OTLP_ENDPOINT` set, spans are exported too; an
/// endpoint that cannot be used is logged, and the operator runs without traces.
///
/// Pretty lines are coloured only when standard output is a terminal: redirected to a file or
/// read by `kubectl logs`, escape codes would be noise.
pub fn init(format: LogFormat) -> Logging {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    #[cfg(feature = "otlp")]
    let (exporter, failure) = match crate::traces::from_env() {
        Some(Ok(exporter)) => (Some(exporter), None),
        Some(Err(error)) => (None, Some(error)),
        None => (None, None),
    };
    #[cfg(feature = "otlp")]
    let traces = exporter.as_ref().map(|exporter| exporter.layer());
    #[cfg(not(feature = "otlp"))]
    let traces: Option<tracing_subscriber::layer::Identity> = None;
    let registry = tracing_subscriber::registry().with(filter).with(traces);
    match format {
        LogFormat::Json => registry
            .with(tracing_subscriber::fmt::layer().json())
            .init(),
        LogFormat::Pretty => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(colours(format, std::io::stdout().is_terminal())),
            )
            .init(),
    }
    #[cfg(feature = "otlp")]
    if let Some(error) = failure {
        tracing::warn!(%error, "cannot export traces to OTEL_EXPORTER_OTLP_ENDPOINT; running without");
    }
    Logging {
        #[cfg(feature = "otlp")]
        _exporter: exporter,
    }
}

/// Whether log lines in `format` carry colour codes, given whether they go to a terminal.
pub fn colours(format: LogFormat, to_terminal: bool) -> bool {
    format == LogFormat::Pretty && to_terminal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_follow_whether_output_is_a_terminal() {
        assert!(colours(LogFormat::Pretty, true));
        assert!(!colours(LogFormat::Pretty, false), "redirected pretty logs");
        assert!(!colours(LogFormat::Json, true), "JSON is never coloured");
    }
}
