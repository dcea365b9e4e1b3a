//! Log lines, for people or for log pipelines, filtered by `RUST_LOG` (default `info`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::settings::LogFormat;

/// Starts logging to standard output in `format`, filtered by `RUST_LOG` (default `info`).
///
/// Pretty lines are coloured only when standard output is a terminal: redirected to a file or
/// read by `kubectl logs`, escape codes would be noise.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let subscriber = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Json => subscriber.json().init(),
        LogFormat::Pretty => subscriber
            .with_ansi(colours(format, std::io::stdout().is_terminal()))
            .init(),
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
