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

use kube::runtime::watcher::{self, InitialListStrategy, ListSemantic};

/// Where `/metrics`, `/healthz` and `/readyz` are served unless told otherwise: loopback, so
/// that `cargo run` on a laptop serves nothing to the network it is on. A pod is reached on its
/// own address, so the generated Deployments set `METRICS_ADDR=0.0.0.0:8080`.
pub const METRICS_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

/// Seconds a leader holds the Lease without renewing it before another replica may take it,
/// unless `--lease-seconds` says otherwise.
pub const LEASE_SECONDS: u64 = 15;

/// How many seconds before its Lease would expire a leader renews it: a third of the Lease, and
/// at least 2 s, so that a short Lease is not lost to one slow request; always less than the
/// Lease, as kube-lease-manager requires. It is here, beside the flag whose range keeps it so
/// ([`Common::lease_seconds`]), because both the election and each shard's own Lease
/// ([`crate::sharding::Member`]) renew by it.
pub(crate) fn renewal_margin(lease_seconds: u64) -> u64 {
    (lease_seconds / 3)
        .max(2)
        .min(lease_seconds.saturating_sub(1))
        .max(1)
}

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
        default_value_t = LEASE_SECONDS,
        value_parser = clap::value_parser!(u64).range(3..=3600),
    )]
    pub lease_seconds: u64,
    /// How every watch lists the objects that exist when it starts: `streaming` (one watch
    /// that sends them, then follows their changes) or `paged` (lists of 500, then a watch).
    ///
    /// Streaming is the default because it peaks lower: example-operator starting over 10,000
    /// converged primaries and their children peaked at 66 MiB streaming against 69 MiB paged
    /// (median of 3 runs each, `cargo xtask bench lists`), and converging 10,000 new ones at
    /// 64 MiB either way. A server that refuses streaming lists (its `WatchList` feature gate
    /// off, as by default on Kubernetes 1.33) is listed in pages anyway, after one refused
    /// request per watch and a warning; `paged` skips that request.
    #[arg(long, env = "INITIAL_LIST", value_enum, default_value_t = InitialList::default())]
    pub initial_list: InitialList,
}

impl Default for Common {
    /// Every setting at its default, whatever the environment says.
    fn default() -> Self {
        Self {
            log_format: LogFormat::Pretty,
            metrics_addr: METRICS_ADDR,
            leader_election: false,
            pod_name: None,
            lease_seconds: LEASE_SECONDS,
            initial_list: InitialList::default(),
        }
    }
}

/// An operator's settings, as the runtime reads them: a generated crate's `Settings`, or
/// [`Common`] alone.
pub trait Flags: Send + Sync + 'static {
    /// The settings the environment gives, without flags: what a context built in a test runs
    /// with. A variable that does not parse leaves every setting at its default here; the
    /// binary refuses it instead.
    fn from_env() -> Self;

    /// The flags every operator takes, among these.
    fn common(&self) -> &Common;
}

/// `T`'s settings at clap's defaults, as `--help` documents them (a default a crate gives a
/// flag with `mut_arg` included), with no flag given and no environment variable read: what a
/// test runs with, whatever the machine's environment says.
///
/// # Panics
///
/// When a flag of `T` has no default: every flag of a generated `Settings` has one, and its
/// own tests call this.
pub fn defaults<T: clap::Parser>() -> T {
    let command = T::command().mut_args(|arg| arg.env(None::<&'static str>));
    let name = command.get_name().to_owned();
    let matches = command
        .try_get_matches_from([name])
        .unwrap_or_else(|error| panic!("a flag without a default: {error}"));
    T::from_arg_matches(&matches).unwrap_or_else(|error| panic!("{error}"))
}

/// The common flags alone, as the runtime's own tests run a context: at their defaults.
impl Flags for Common {
    fn from_env() -> Self {
        Self::default()
    }

    fn common(&self) -> &Common {
        self
    }
}

/// Where the webhooks are served unless told otherwise: loopback, where an API server on the
/// same machine reaches an operator run outside a pod ([`METRICS_ADDR`] says why). The
/// generated Deployments set `WEBHOOK_ADDR=0.0.0.0:8443`, where the Service reaches it.
#[cfg(feature = "webhooks")]
pub const WEBHOOK_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8443);

/// The clap id of `--webhook-addr`, to which a generated crate's `Settings` gives its own
/// default with `mut_arg`: the address its operator.yaml's `local.webhooks` has
/// `deploy/local/` call.
#[cfg(feature = "webhooks")]
pub const WEBHOOK_ADDR_ARG: &str = "webhook-addr";

/// The flags of an operator with webhooks (feature `webhooks`): where they are served, and who
/// issues their certificate.
#[cfg(feature = "webhooks")]
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Webhooks {
    /// The address the webhooks are served on, over HTTPS.
    #[arg(
        id = WEBHOOK_ADDR_ARG,
        long = "webhook-addr",
        env = "WEBHOOK_ADDR",
        default_value_t = WEBHOOK_ADDR
    )]
    pub addr: SocketAddr,
    /// Who issues the webhooks' certificate: this operator (`self-managed`), or cert-manager
    /// (`cert-manager`, as a generated `deploy/cert-manager/` sets).
    #[arg(
        long = "webhook-certs",
        env = "WEBHOOK_CERTS",
        value_enum,
        default_value_t = crate::certificates::Issuer::SelfManaged
    )]
    pub certs: crate::certificates::Issuer,
}

#[cfg(feature = "webhooks")]
impl Default for Webhooks {
    /// Every setting at its default, whatever the environment says.
    fn default() -> Self {
        Self {
            addr: WEBHOOK_ADDR,
            certs: crate::certificates::Issuer::SelfManaged,
        }
    }
}

/// The flag of an operator generated with `sharding: true` (feature `sharding`).
#[cfg(feature = "sharding")]
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct Sharding {
    /// Split the primaries between the replicas (`SHARDING=true`): each holds a Lease of its
    /// own, named by `--pod-name`, and reconciles the objects placed on it; the replica that
    /// leads the operator's Lease also places them, whatever `--leader-election` says.
    #[arg(long = "sharding", env = "SHARDING")]
    pub on: bool,
}

/// The largest ConversionReview read unless told otherwise. The API server converts a whole
/// list in one review, unpaginated, so this bounds which lists can be read in another version;
/// the webhooks hold at most two such bodies at once (`conversion::Conversions`), and convert
/// their objects one at a time. 32 MiB, twice over, stays well inside a generated
/// Deployment's 256 MiB.
#[cfg(feature = "webhooks")]
pub const CONVERSION_MAX_BYTES: usize = 32 * 1024 * 1024;

/// The flags of an operator with a conversion webhook (feature `webhooks`).
#[cfg(feature = "webhooks")]
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Conversion {
    /// The largest ConversionReview read, in bytes: a list read in another version than the
    /// stored one is one review. Raise it with the memory limit.
    #[arg(
        long = "conversion-max-bytes",
        env = "CONVERSION_MAX_BYTES",
        default_value_t = CONVERSION_MAX_BYTES
    )]
    pub max_bytes: usize,
}

#[cfg(feature = "webhooks")]
impl Default for Conversion {
    /// The default cap, whatever the environment says.
    fn default() -> Self {
        Self {
            max_bytes: CONVERSION_MAX_BYTES,
        }
    }
}

/// How a watch lists the objects that exist when it starts, before it follows their changes
/// (`--initial-list`): one setting for every watch of an operator, the primaries', the owned
/// children's, the watched kinds' and, with `--sharding`, the sharder's.
///
/// Non-exhaustive: the API server may gain ways of listing, and a new one is no breaking change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum InitialList {
    /// One watch that first sends every object as an event, from the API server's watch
    /// cache, then a bookmark that ends the list, and goes on with their changes
    /// (`sendInitialEvents`, Kubernetes' streaming lists; kube's
    /// `watcher::Config::streaming_lists`). Served by default from Kubernetes 1.34 on, and on
    /// 1.32; where a server refuses it, the watch lists in pages instead.
    #[default]
    Streaming,
    /// Lists of 500 objects a page of the most recent state (kube's `ListSemantic::MostRecent`,
    /// a consistent read, which current servers answer from their watch cache), then a watch
    /// from the list's resourceVersion: what every server serves.
    Paged,
    /// Lists in pages from the watch cache at whatever state it holds (kube's
    /// `ListSemantic::Any`, `resourceVersion=0`). Left out of `--help`: against `paged` it
    /// made no difference to either process's memory or to the time to list, and it may list
    /// an older state than the operator has seen; `cargo xtask bench lists` measures it.
    #[value(hide = true)]
    PagedAny,
}

impl InitialList {
    /// `config` listing as this initial list does, whatever it said before; its selectors and
    /// the rest unchanged.
    pub(crate) fn applied(self, config: watcher::Config) -> watcher::Config {
        let config = watcher::Config {
            initial_list_strategy: InitialListStrategy::ListWatch,
            list_semantic: ListSemantic::MostRecent,
            ..config
        };
        match self {
            Self::Streaming => config.streaming_lists(),
            Self::Paged => config,
            Self::PagedAny => config.any_semantic(),
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
            assert_eq!(flags.common.lease_seconds, LEASE_SECONDS);
        }
        if std::env::var_os("INITIAL_LIST").is_none() {
            assert_eq!(flags.common.initial_list, InitialList::Streaming);
        }
    }

    #[test]
    fn watches_stream_their_initial_list_unless_told_to_page() {
        assert_eq!(Common::default().initial_list, InitialList::Streaming);
        let flags = Flags::try_parse_from(["operator", "--initial-list", "paged"]).expect("valid");
        assert_eq!(flags.common.initial_list, InitialList::Paged);
        let flags = Flags::try_parse_from(["operator", "--initial-list", "streaming"]);
        assert_eq!(
            flags.expect("valid").common.initial_list,
            InitialList::Streaming
        );
        // Kept for the bench, not offered.
        let flags = Flags::try_parse_from(["operator", "--initial-list", "paged-any"]);
        assert_eq!(
            flags.expect("valid").common.initial_list,
            InitialList::PagedAny
        );
        let help = Flags::try_parse_from(["operator", "--help"])
            .expect_err("help")
            .to_string();
        assert!(help.contains("--initial-list"), "{help}");
        assert!(!help.contains("paged-any"), "{help}");
        let error = Flags::try_parse_from(["operator", "--initial-list", "all-at-once"])
            .expect_err("no such initial list");
        let error = error.to_string();
        assert!(
            error.contains("--initial-list") && error.contains("streaming"),
            "{error}"
        );
    }

    #[test]
    fn an_initial_list_replaces_what_a_config_said_of_it_and_keeps_the_rest() {
        use kube::runtime::watcher::{Config, InitialListStrategy, ListSemantic};

        let said = Config::default()
            .labels("app=web")
            .fields("metadata.namespace=ops")
            .page_size(50)
            .timeout(30);
        let streaming = InitialList::Streaming.applied(said.clone().any_semantic());
        assert_eq!(
            streaming.initial_list_strategy,
            InitialListStrategy::StreamingList
        );
        let paged = InitialList::Paged.applied(said.clone().streaming_lists().any_semantic());
        assert_eq!(paged.initial_list_strategy, InitialListStrategy::ListWatch);
        assert_eq!(paged.list_semantic, ListSemantic::MostRecent);
        let any = InitialList::PagedAny.applied(said.clone().streaming_lists());
        assert_eq!(any.initial_list_strategy, InitialListStrategy::ListWatch);
        assert_eq!(any.list_semantic, ListSemantic::Any);
        for config in [streaming, paged, any] {
            assert_eq!(config.label_selector.as_deref(), Some("app=web"));
            assert_eq!(
                config.field_selector.as_deref(),
                Some("metadata.namespace=ops")
            );
            assert_eq!((config.page_size, config.timeout), (Some(50), Some(30)));
        }
    }

    #[cfg(feature = "sharding")]
    #[test]
    fn sharding_is_off_unless_the_flag_turns_it_on() {
        #[derive(Debug, Parser)]
        struct Sharded {
            #[command(flatten)]
            sharding: Sharding,
        }
        let flags = Sharded::try_parse_from(["operator", "--sharding"]).expect("valid flags");
        assert!(flags.sharding.on);
        assert!(!Sharding::default().on);
        if std::env::var_os("SHARDING").is_none() {
            let flags = Sharded::try_parse_from(["operator"]).expect("no flags");
            assert!(!flags.sharding.on);
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

    #[cfg(feature = "webhooks")]
    #[test]
    fn a_crate_gives_webhook_addr_its_own_default_which_defaults_reads_past_the_environment() {
        #[derive(Debug, Parser)]
        #[command(mut_arg(WEBHOOK_ADDR_ARG, |arg| arg.default_value("127.0.0.1:46443")))]
        struct Local {
            #[command(flatten)]
            common: Common,
            #[command(flatten)]
            webhooks: Webhooks,
        }
        let local = SocketAddr::from(([127, 0, 0, 1], 46443));
        assert_eq!(defaults::<Local>().webhooks.addr, local);
        assert_eq!(defaults::<Local>().common, Common::default());
        let help = <Local as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        assert!(help.contains("[default: 127.0.0.1:46443]"), "{help}");
        let given = Local::try_parse_from(["operator", "--webhook-addr", "127.0.0.1:9443"])
            .expect("valid flags");
        assert_eq!(
            given.webhooks.addr,
            SocketAddr::from(([127, 0, 0, 1], 9443))
        );
    }

    #[cfg(feature = "webhooks")]
    #[test]
    fn the_webhooks_flags_keep_their_names_and_defaults() {
        use crate::certificates::Issuer;

        #[derive(Debug, Parser)]
        struct WithWebhooks {
            #[command(flatten)]
            webhooks: Webhooks,
            #[command(flatten)]
            conversion: Conversion,
        }
        let flags = WithWebhooks::try_parse_from([
            "operator",
            "--webhook-addr",
            "127.0.0.1:9443",
            "--webhook-certs",
            "cert-manager",
            "--conversion-max-bytes",
            "1048576",
        ])
        .expect("valid flags");
        assert_eq!(
            flags.webhooks.addr,
            SocketAddr::from(([127, 0, 0, 1], 9443))
        );
        assert_eq!(flags.webhooks.certs, Issuer::CertManager);
        assert_eq!(flags.conversion.max_bytes, 1024 * 1024);
        assert_eq!(Webhooks::default().addr, WEBHOOK_ADDR);
        assert_eq!(Webhooks::default().certs, Issuer::SelfManaged);
        assert_eq!(Conversion::default().max_bytes, CONVERSION_MAX_BYTES);
        if std::env::var_os("WEBHOOK_CERTS").is_none() {
            let flags = WithWebhooks::try_parse_from(["operator"]).expect("no flags");
            assert_eq!(flags.webhooks.certs, Issuer::SelfManaged);
        }
    }

    #[test]
    fn a_leader_renews_a_third_of_the_lease_early_and_at_least_two_seconds_early() {
        assert_eq!(super::renewal_margin(15), 5);
        assert_eq!(super::renewal_margin(5), 2);
        assert_eq!(
            super::renewal_margin(3),
            2,
            "a short Lease keeps two seconds"
        );
        assert!((3..=3600).all(|lease| (1..lease).contains(&super::renewal_margin(lease))));
    }
}
