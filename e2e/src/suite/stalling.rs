//! Clients that stall a webhook server as an attacker with network access to its Service would:
//! each completes the TLS handshake, sends the head of a POST and a few bytes of its body, and
//! sends nothing more. They need no credentials and trust any certificate. The e2e holds them
//! open while the API server asks the operator for conversions, and opens another as soon as
//! the server drops one.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use anyhow::{Context as _, Result};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::{CryptoProvider, ring},
    pki_types::{CertificateDer, ServerName, UnixTime},
};

/// `count` stalled clients of `https://<address><path>`, kept open (reopened when the server
/// drops one) until [`Stalling::stop`].
pub(super) struct Stalling {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<usize>>>,
}

impl Stalling {
    pub(super) fn start(address: SocketAddr, path: &str, count: usize) -> Result<Self> {
        let config = Arc::new(client_config()?);
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             content-length: 1048576\r\n\r\n{{\"apiVersion\"",
            address.ip()
        );
        // Opened here, so that a server that cannot be reached fails the check at once.
        let mut open = (0..count)
            .map(|_| stall(address, &config, &head))
            .collect::<Result<Vec<_>>>()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut dropped = 0;
            while !stopping.load(Ordering::SeqCst) {
                for client in &mut open {
                    if dropped_by_server(client) {
                        dropped += 1;
                        *client = stall(address, &config, &head)?;
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(dropped)
        });
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// Closes the clients; how many times the server dropped one.
    pub(super) fn stop(mut self) -> Result<usize> {
        self.stop.store(true, Ordering::SeqCst);
        let thread = self.thread.take().context("stopped twice")?;
        thread
            .join()
            .map_err(|_| anyhow::anyhow!("the stalling clients panicked"))?
    }
}

impl Drop for Stalling {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

type Client = StreamOwned<ClientConnection, TcpStream>;

/// How long the handshake and the head may take: a loaded node answers a handshake in more
/// than the polls' 10 ms, and a poll's timeout during the handshake read as a failure.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// A client that sent `head` and stalls.
fn stall(address: SocketAddr, config: &Arc<ClientConfig>, head: &str) -> Result<Client> {
    let tcp = TcpStream::connect(address).context("connecting to the webhooks")?;
    tcp.set_read_timeout(Some(HANDSHAKE))?;
    let name = ServerName::IpAddress(address.ip().into());
    let connection = ClientConnection::new(Arc::clone(config), name)?;
    let mut client = StreamOwned::new(connection, tcp);
    // The handshake happens on this first write.
    client
        .write_all(head.as_bytes())
        .context("sending the head of a POST")?;
    client.flush()?;
    // From here on the client only polls whether the server dropped it.
    client
        .sock
        .set_read_timeout(Some(Duration::from_millis(10)))?;
    Ok(client)
}

/// Whether the server closed `client` (or answered it, which closes it too).
fn dropped_by_server(client: &mut Client) -> bool {
    let mut buffer = [0; 1024];
    match client.read(&mut buffer) {
        Ok(0) => true,
        Ok(_) => true,
        Err(error) => !matches!(
            error.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// TLS that trusts any certificate: these clients are the attacker, not the API server.
fn client_config() -> Result<ClientConfig> {
    let provider = Arc::new(ring::default_provider());
    let verifier = Arc::new(AnyCertificate(Arc::clone(&provider)));
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
