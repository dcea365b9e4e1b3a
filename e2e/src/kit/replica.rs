//! One replica of an operator under test, wherever it runs, by the address of its endpoints:
//! a pod's IP (the host reaches the bridge), or loopback for a process on this machine.

use std::{
    io::{Read as _, Write as _},
    net::{IpAddr, TcpStream},
    time::Duration,
};

use anyhow::{Context as _, Result};

/// The port of `/metrics`, `/healthz` and `/readyz` in a pod, as the generated Deployment names
/// it (`http`).
pub const POD_METRICS_PORT: u16 = 8080;
/// The port of the webhooks in a pod (`webhook`).
pub const POD_WEBHOOK_PORT: u16 = 8443;

/// Where one replica's endpoints are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// Its pod's name, or the name the e2e gave its process.
    pub name: String,
    pub host: IpAddr,
    pub metrics_port: u16,
    pub webhook_port: u16,
}

impl Replica {
    /// The whole HTTP response to `GET path` on its metrics port.
    pub fn http_get(&self, path: &str) -> Result<String> {
        let address = (self.host, self.metrics_port);
        let mut stream = TcpStream::connect_timeout(&address.into(), Duration::from_secs(5))
            .with_context(|| {
                format!(
                    "connecting to {} at {}:{}",
                    self.name, self.host, self.metrics_port
                )
            })?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
        let mut text = String::new();
        stream.read_to_string(&mut text)?;
        Ok(text)
    }

    /// The value of the unlabelled (or fully labelled) series `name` in its metrics.
    pub fn gauge(&self, name: &str) -> Result<f64> {
        let text = self.http_get("/metrics")?;
        series(&text, name).with_context(|| format!("no {name} in {}'s metrics", self.name))
    }

    /// `operator_reconciles_total`.
    pub fn reconciles(&self) -> Result<u64> {
        Ok(self.gauge("operator_reconciles_total")? as u64)
    }

    /// Whether its `/readyz` answers 200.
    pub fn ready(&self) -> Result<bool> {
        let response = self.http_get("/readyz")?;
        Ok(response.split_whitespace().nth(1) == Some("200"))
    }
}

/// The value of the series `name` (with its labels, when it has any) in a Prometheus text
/// exposition.
pub fn series(text: &str, name: &str) -> Option<f64> {
    let prefix = format!("{name} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_is_found_by_its_whole_name_and_labels() {
        let text = "# TYPE x counter\nx_total 3\nx 1\ny{kind=\"a\"} 2.5\n";
        assert_eq!(series(text, "x"), Some(1.0));
        assert_eq!(series(text, "x_total"), Some(3.0));
        assert_eq!(series(text, "y{kind=\"a\"}"), Some(2.5));
        assert_eq!(series(text, "y"), None);
    }
}
