//! The flags every operator takes. Each has an environment variable as its fallback, so
//! `--help` documents them all and `deploy/` can set them either way.
//!
//! A generated crate's `Settings` flattens [`Common`] beside its own flags (the Lease's
//! namespace, whose default is where its `deploy/` installs it, and the webhooks' flags):
//!
//! ```
//! use clap::Parser;
//! use operator_gen_runtime::settings::{Common, LogFormat};
//!
//! #[derive(Parser)]
//! struct Settings {
//!     #[command(flatten)]
//!     common: Common,
//!     #[arg(long, env = "POD_NAMESPACE", default_value = "my-operator")]
//!     pod_namespace: String,
//! }
//!
//! let settings = Settings::try_parse_from(["my-operator", "--log-format", "json"]).unwrap();
//! assert_eq!(settings.common.log_format, LogFormat::Json);
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Where `/metrics`, `/healthz` and `/readyz` are served unless told otherwise.
pub const METRICS_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8080);

/// The settings of logging, telemetry and leader election; the log filter itself is
/// `RUST_LOG` (default `info`).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Common {
    /// Log lines for people (`pretty`) or one JSON object per line for log pipelines (`json`).
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty)]
    pub log_format: LogFormat,
    /// The address `/metrics`, `/healthz` and `/readyz` are served on.
    #[arg(long, env = "METRICS_ADDR", default_value_t = METRICS_ADDR)]
    pub metrics_addr: SocketAddr,
    /// Take a Lease before reconciling, so that of several replicas one reconciles
    /// (`LEADER_ELECTION=true` or `false`).
    #[arg(long, env = "LEADER_ELECTION")]
    pub leader_election: bool,
    /// This replica's name, in the Lease and in the Events it publishes.
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Seconds a leader holds the Lease without renewing it before another replica may take
    /// it: how long the operator may go without a leader when one dies. A leader renews it a
    /// third of it (at least 2 s) before it would expire.
    #[arg(
        long,
        env = "LEASE_SECONDS",
        default_value_t = crate::leader::LEASE_SECONDS,
        value_parser = clap::value_parser!(u64).range(3..=3600),
    )]
    pub lease_seconds: u64,
}

impl Default for Common {
    /// Every setting at its default, whatever the environment says.
    fn default() -> Self {
        Self {
            log_format: LogFormat::Pretty,
            metrics_addr: METRICS_ADDR,
            leader_election: false,
            pod_name: None,
            lease_seconds: crate::leader::LEASE_SECONDS,
        }
    }
}

/// The format of log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For people: coloured when written to a terminal.
    Pretty,
    /// One JSON object per line, for log pipelines.
    Json,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        common: Common,
    }

    #[test]
    fn flags_override_and_defaults_fill_in() {
        let flags = Flags::try_parse_from([
            "operator",
            "--metrics-addr",
            "127.0.0.1:9000",
            "--leader-election",
            "--log-format",
            "json",
            "--pod-name",
            "operator-0",
            "--lease-seconds",
            "5",
        ])
        .expect("valid flags");
        assert_eq!(
            flags.common.metrics_addr,
            SocketAddr::from(([127, 0, 0, 1], 9000))
        );
        assert!(flags.common.leader_election);
        assert_eq!(flags.common.log_format, LogFormat::Json);
        assert_eq!(flags.common.pod_name.as_deref(), Some("operator-0"));
        assert_eq!(flags.common.lease_seconds, 5);
    }

    #[test]
    fn no_flags_give_the_defaults() {
        let flags = Flags::try_parse_from(["operator"]).expect("no flags");
        // The environment may set these in a test run; only what no variable names is compared.
        if std::env::var_os("METRICS_ADDR").is_none() {
            assert_eq!(flags.common.metrics_addr, Common::default().metrics_addr);
        }
        if std::env::var_os("LEADER_ELECTION").is_none() {
            assert!(!flags.common.leader_election);
        }
        if std::env::var_os("LEASE_SECONDS").is_none() {
            assert_eq!(flags.common.lease_seconds, crate::leader::LEASE_SECONDS);
        }
    }

    #[test]
    fn a_lease_too_short_to_renew_is_refused_with_the_flag_named() {
        let error = Flags::try_parse_from(["operator", "--lease-seconds", "1"])
            .expect_err("renewing at a third of a second is no lease");
        assert!(error.to_string().contains("--lease-seconds"), "{error}");
    }

    #[test]
    fn a_bad_address_is_refused_with_the_flag_named() {
        let error = Flags::try_parse_from(["operator", "--metrics-addr", "nowhere"])
            .expect_err("not an address");
        assert!(error.to_string().contains("--metrics-addr"), "{error}");
    }
}
