//! Where the API server calls the webhooks of an operator run outside the cluster (`cargo
//! run`): the manifest's `local.webhooks`. `deploy/local/`'s webhook configurations, `crdgen
//! --webhook-url` in the docs, the default `--webhook-addr` of the crate's settings and the
//! self-managed certificate's names all come from the one value here, so they cannot disagree.
//!
//! The value is input: it is parsed into an address and a port, refused unless it is an
//! `https://` URL with nothing but a host and a port, and rendered from what was parsed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use serde::Serialize;

use crate::{error::Result, manifest::Manifest, text::Text};

/// Where a run outside the cluster serves its webhooks unless the manifest says otherwise:
/// loopback, on the port of the runtime's default `--webhook-addr`, which the self-managed
/// certificate names. A control plane on the same machine reaches it there.
pub const LOCAL_WEBHOOK_BASE: &str = "https://127.0.0.1:8443";

/// The port of [`LOCAL_WEBHOOK_BASE`].
pub const LOCAL_WEBHOOK_PORT: u16 = 8443;

/// The longest `local.webhooks` read: a host name is at most 253 bytes.
const MAX_URL_BYTES: usize = 300;

/// The webhooks' address outside the cluster, as the templates and the e2e take it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LocalWebhooks {
    /// `https://host:port`, which `deploy/local/` and `crdgen --webhook-url` call.
    pub base: Text,
    /// What `cargo run` binds (`--webhook-addr`'s default): the URL's own address, loopback
    /// for `localhost`, and every interface for another host name, which no socket can bind.
    pub addr: Text,
    /// The URL's host when it is not loopback, which the self-managed certificate names
    /// beside loopback.
    pub host: Option<Text>,
    /// The port of `base` and `addr`.
    pub port: u16,
}

impl Default for LocalWebhooks {
    fn default() -> Self {
        Self {
            base: Text::new(LOCAL_WEBHOOK_BASE),
            addr: Text::new(format!("127.0.0.1:{LOCAL_WEBHOOK_PORT}")),
            host: None,
            port: LOCAL_WEBHOOK_PORT,
        }
    }
}

/// The `local.webhooks` of the manifest read from `origin`, as generation reads it: for what
/// checks a generated crate against its manifest (the e2e, the charts' comparison), so they
/// call where `deploy/local/` does.
pub fn of_manifest(manifest: &Manifest, origin: &str) -> Result<LocalWebhooks> {
    let bad = |field: &str, reason: String| crate::Error::Manifest {
        location: format!("{origin}: field `{field}`"),
        reason,
    };
    Ok(webhooks(manifest.local.webhooks.as_deref(), &bad)?.0)
}

/// The host of a URL, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Ip(IpAddr),
    /// A DNS name, lowercased.
    Name(String),
}

/// Reads `local.webhooks` (`None`: the default). `bad` reports a value that is no `https://`
/// URL of a host and a port; a host that is not loopback is accepted with a warning, returned
/// beside the address.
pub fn webhooks(
    value: Option<&str>,
    bad: &dyn Fn(&str, String) -> crate::Error,
) -> Result<(LocalWebhooks, Option<String>)> {
    let Some(value) = value else {
        return Ok((LocalWebhooks::default(), None));
    };
    let refuse = |reason: &str| {
        bad(
            "local.webhooks",
            format!(
                "{reason}; give the https:// URL your API server reaches this machine at, a \
                 host and a port and nothing else, such as https://127.0.0.1:46443 (the default \
                 is {LOCAL_WEBHOOK_BASE})"
            ),
        )
    };
    if value.len() > MAX_URL_BYTES {
        return Err(refuse(&format!("longer than {MAX_URL_BYTES} bytes")));
    }
    let Some(authority) = value.strip_prefix("https://") else {
        return Err(refuse(
            "not an https:// URL: the API server calls webhooks over TLS only",
        ));
    };
    let authority = authority.strip_suffix('/').unwrap_or(authority);
    if authority.contains(['/', '?', '#', '@']) {
        return Err(refuse(
            "it has a path, a query, a fragment or credentials; the webhooks' paths are the \
             operator's own",
        ));
    }
    let (host, port) = split_authority(authority).ok_or_else(|| refuse("no host and port"))?;
    let host = parse_host(host)
        .ok_or_else(|| refuse("its host is neither an IP address nor a DNS name"))?;
    let port = match port {
        None => 443,
        // Written as the number itself: `+80` and `0080` parse, and are no port a URL has.
        Some(written) => written
            .parse::<u16>()
            .ok()
            .filter(|port| *port != 0 && port.to_string() == written)
            .ok_or_else(|| refuse("its port is not a number from 1 to 65535"))?,
    };
    Ok(endpoint(host, port))
}

/// `host` and `port` of `authority` (`host`, `host:port`, `[v6]`, `[v6]:port`).
fn split_authority(authority: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match authority.split_once(':') {
        Some((host, port)) => Some((host, Some(port))),
        None => Some((authority, None)),
    }
    .filter(|(host, _)| !host.is_empty())
}

/// An IP address, or a DNS name of letters, digits and hyphens in labels of at most 63.
fn parse_host(host: &str) -> Option<Host> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(Host::Ip(ip));
    }
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    let plausible = host.len() <= 253
        && host.split('.').all(label_ok)
        // All digits and dots is a mistyped address, not a name.
        && !host.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    plausible.then(|| Host::Name(host.to_ascii_lowercase()))
}

/// The address for `host` and `port`, and the warning a host that is not loopback gets.
fn endpoint(host: Host, port: u16) -> (LocalWebhooks, Option<String>) {
    let (shown, bind, loopback) = match &host {
        Host::Ip(ip @ IpAddr::V6(_)) => (format!("[{ip}]"), *ip, ip.is_loopback()),
        Host::Ip(ip) => (ip.to_string(), *ip, ip.is_loopback()),
        Host::Name(name) if name == "localhost" => {
            (name.clone(), IpAddr::V4(Ipv4Addr::LOCALHOST), true)
        }
        Host::Name(name) => (name.clone(), IpAddr::V4(Ipv4Addr::UNSPECIFIED), false),
    };
    let addr = SocketAddr::new(bind, port);
    let base = format!("https://{shown}:{port}");
    let warning = (!loopback).then(|| {
        format!(
            "field `local.webhooks`: {base} is not loopback, so `cargo run` serves the webhooks \
             on {addr}, where anything that reaches that address can call them, and the \
             self-managed certificate names {} beside loopback (empty the webhooks' Secret \
             once after changing it, so a new certificate is issued); use the address your \
             cluster reaches this machine at (kind, minikube and k3d have one on their \
             bridge), and nothing wider",
            host_name(&host)
        )
    });
    let local = LocalWebhooks {
        base: Text::new(base),
        addr: Text::new(addr.to_string()),
        host: (!loopback).then(|| Text::new(host_name(&host))),
        port,
    };
    (local, warning)
}

/// The host as a certificate names it: an address without brackets, or the name.
fn host_name(host: &Host) -> String {
    match host {
        Host::Ip(ip) => ip.to_string(),
        Host::Name(name) => name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(field: &str, reason: String) -> crate::Error {
        crate::Error::Manifest {
            location: format!("operator.yaml: field `{field}`"),
            reason,
        }
    }

    fn read(value: &str) -> Result<(LocalWebhooks, Option<String>)> {
        webhooks(Some(value), &bad)
    }

    #[test]
    fn no_setting_is_loopback_on_the_runtimes_port() {
        let (local, warning) = webhooks(None, &bad).expect("the default");
        assert_eq!(local.base.raw(), LOCAL_WEBHOOK_BASE);
        assert_eq!(local.addr.raw(), "127.0.0.1:8443");
        assert_eq!((local.host, warning), (None, None));
    }

    #[test]
    fn a_loopback_url_is_served_on_loopback_without_a_warning() {
        for (value, base, addr) in [
            (
                "https://127.0.0.1:46443",
                "https://127.0.0.1:46443",
                "127.0.0.1:46443",
            ),
            (
                "https://localhost:46443/",
                "https://localhost:46443",
                "127.0.0.1:46443",
            ),
            ("https://[::1]:9443", "https://[::1]:9443", "[::1]:9443"),
            (
                "https://127.0.0.1",
                "https://127.0.0.1:443",
                "127.0.0.1:443",
            ),
        ] {
            let (local, warning) = read(value).expect(value);
            assert_eq!(
                (local.base.raw(), local.addr.raw()),
                (base, addr),
                "{value}"
            );
            assert_eq!((local.host, warning), (None, None), "{value}");
        }
    }

    #[test]
    fn a_bridge_address_is_accepted_with_a_warning_and_named_by_the_certificate() {
        let (local, warning) = read("https://172.18.0.1:46443").expect("an address");
        assert_eq!(local.addr.raw(), "172.18.0.1:46443");
        assert_eq!(local.host.as_ref().map(Text::raw), Some("172.18.0.1"));
        let warning = warning.expect("a warning");
        assert!(warning.contains("not loopback"), "{warning}");

        let (local, warning) = read("https://Host.Minikube.Internal:46443").expect("a name");
        assert_eq!(local.base.raw(), "https://host.minikube.internal:46443");
        assert_eq!(
            local.addr.raw(),
            "0.0.0.0:46443",
            "a name binds every interface"
        );
        assert!(warning.is_some_and(|w| w.contains("0.0.0.0:46443")));
    }

    #[test]
    fn anything_but_an_https_host_and_port_is_refused_naming_the_setting() {
        for value in [
            "http://127.0.0.1:8443",
            "127.0.0.1:8443",
            "https://127.0.0.1:8443/validate",
            "https://user@127.0.0.1:8443",
            "https://127.0.0.1:8443?x=1",
            "https://127.0.0.1:0",
            "https://127.0.0.1:65536",
            "https://127.0.0.1:+80",
            "https://127.0.0.1:0080",
            "https://",
            "https://:8443",
            "https://exa mple:8443",
            "https://-bad-.example:8443",
            "https://[::1:8443",
            "https://999.1.1.1:8443",
            "https://a\"b:8443",
        ] {
            let error = read(value).expect_err(value).to_string();
            assert!(error.contains("local.webhooks"), "{value}: {error}");
            assert!(
                error.contains("https://127.0.0.1:46443"),
                "{value}: {error}"
            );
        }
        let long = format!("https://{}.example:8443", "a".repeat(400));
        assert!(read(&long).is_err());
    }
}
