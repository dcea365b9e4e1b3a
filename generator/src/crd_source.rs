//! Where a CRD comes from: an HTTPS URL, a file, or stdin, read into memory within the caps
//! in [`crate::limits`].

use std::{
    fmt,
    io::Read,
    path::{Component, Path, PathBuf},
    time::Duration,
};

use crate::{
    crate_dir::{self, CrateDir},
    error::{Error, Result},
    limits::{self, MAX_CRD_BYTES},
};

/// Limits on an HTTP fetch. The defaults are the caps in [`crate::limits`]; tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// The whole fetch, end to end: connecting, every redirect and the entire body.
    pub deadline: Duration,
    pub connect_timeout: Duration,
    /// Longest wait for any one read of the response head or body.
    pub read_timeout: Duration,
    /// Most body bytes accepted, counted after decompression.
    pub max_bytes: u64,
    pub max_redirects: u32,
}

impl Default for FetchLimits {
    fn default() -> Self {
        Self {
            deadline: limits::FETCH_DEADLINE,
            connect_timeout: limits::CONNECT_TIMEOUT,
            read_timeout: limits::READ_TIMEOUT,
            max_bytes: MAX_CRD_BYTES,
            max_redirects: limits::MAX_REDIRECTS,
        }
    }
}

/// A place to read a CRD from, as a user names it on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrdSource {
    /// An `http://` or `https://` URL.
    Url(String),
    /// A local file named on the command line: read as the user named it, whatever it is
    /// (`--crd <(curl …)` is a pipe).
    File(PathBuf),
    /// A file a manifest in `folder` names, `path` as the manifest writes it. A manifest is a
    /// stranger's, so a path that stays inside `folder` is read as a file of it
    /// ([`CrateDir`]: no link followed), and any other only when it is a regular file.
    /// Errors about a file outside `folder` never quote it ([`CrdSource::unquoted`]).
    Named { folder: PathBuf, path: PathBuf },
    /// Standard input, named `-`.
    Stdin,
    /// Bytes already read (and capped) from the source named `origin`, for a second use
    /// within one run: stdin cannot be read twice.
    Read { origin: String, bytes: Vec<u8> },
}

impl CrdSource {
    /// Interprets a command-line argument; anything that is not a URL or `-` is a path.
    pub fn parse(arg: &str) -> Self {
        if arg == "-" {
            Self::Stdin
        } else if arg.starts_with("https://") || arg.starts_with("http://") {
            Self::Url(arg.to_owned())
        } else {
            Self::File(PathBuf::from(arg))
        }
    }

    /// Reads the whole source within [`MAX_CRD_BYTES`], refusing plain `http://`.
    pub fn read(&self) -> Result<Vec<u8>> {
        self.read_with(false)
    }

    /// Reads the whole source within [`MAX_CRD_BYTES`]. `allow_http` (`--allow-http`) also
    /// accepts plain `http://` URLs and redirects to them, which by default are refused
    /// because a CRD fetched without TLS can be altered on the way, and generated code
    /// follows what it says.
    pub fn read_with(&self, allow_http: bool) -> Result<Vec<u8>> {
        match self {
            Self::Url(url) => {
                refuse_user_info(url)?;
                fetch(url, &FetchLimits::default(), allow_http)
            }
            Self::Named { folder, path } => self.read_named(folder, path),
            Self::File(path) => {
                let file = std::fs::File::open(path).map_err(|e| self.read_error(e))?;
                read_capped(file, &self.to_string(), MAX_CRD_BYTES)
            }
            Self::Stdin => read_capped(std::io::stdin().lock(), "stdin", MAX_CRD_BYTES),
            Self::Read { bytes, .. } => Ok(bytes.clone()),
        }
    }

    /// Reads a file a manifest in `folder` names; see [`CrdSource::Named`].
    fn read_named(&self, folder: &Path, path: &Path) -> Result<Vec<u8>> {
        let read = match inside(path) {
            Some(relative) => CrateDir::new(folder).read(&relative, MAX_CRD_BYTES),
            None => crate_dir::read_regular(&folder.join(path), MAX_CRD_BYTES),
        };
        match read {
            Ok(Some(bytes)) => Ok(bytes),
            Ok(None) => Err(Error::Read {
                origin: self.to_string(),
                reason: "no such file".to_owned(),
            }),
            Err(crate_dir::Error::TooLarge { max, .. }) => Err(too_large(&self.to_string(), max)),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether an error about this source may quote its text: not for a file a manifest
    /// names outside its folder, which may be any file of the user's.
    fn quotable(&self) -> bool {
        match self {
            Self::Named { path, .. } => inside(path).is_some(),
            _ => true,
        }
    }

    /// `error`, about the text of this source, with that text left out when it may not be
    /// quoted ([`CrdSource::quotable`]): a manifest that names a secret as its CRD gets an
    /// error that says so without showing any of it. Caps name only themselves, and stay.
    pub fn unquoted(&self, error: Error) -> Error {
        if self.quotable() || matches!(error, Error::Limit { .. }) {
            return error;
        }
        Error::NotACrd {
            origin: self.to_string(),
            reason: "is not a CRD operator-gen can read; the reason is not shown, because the \
                     manifest names this file outside its folder and its text may be anything: \
                     pass it with --crd to see why"
                .to_owned(),
        }
    }

    fn read_error(&self, e: std::io::Error) -> Error {
        Error::Read {
            origin: self.to_string(),
            reason: e.to_string(),
        }
    }
}

impl fmt::Display for CrdSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(url) => f.write_str(url),
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Named { folder, path } => {
                write!(f, "{}", crate::normalize(&folder.join(path)).display())
            }
            Self::Stdin => f.write_str("stdin"),
            Self::Read { origin, .. } => f.write_str(origin),
        }
    }
}

/// `path` as a plain path inside the folder it is relative to (`.` and `dir/..` resolved
/// by name), or `None` when it is absolute or leaves the folder.
pub(crate) fn inside(path: &Path) -> Option<PathBuf> {
    if !path.is_relative() {
        return None;
    }
    let normal = crate::normalize(path);
    let plain = normal.components().next().is_some()
        && normal
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    plain.then_some(normal)
}

/// Refuses a URL with user-info (`https://user:token@host/`): it would be recorded in
/// `operator.yaml` and printed. The error shows the URL with the user-info masked.
fn refuse_user_info(url: &str) -> Result<()> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(());
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return Ok(());
    };
    Err(Error::Fetch {
        url: format!("{scheme}://***@{}", &rest[at + 1..]),
        reason: "the URL carries credentials, which operator-gen would record in operator.yaml \
                 and print; use a URL without them (a public raw link, or download the file \
                 and pass it with --crd <file>)"
            .to_owned(),
    })
}

fn too_large(origin: &str, max: u64) -> Error {
    Error::Limit {
        origin: origin.to_owned(),
        reason: format!(
            "larger than the {} limit for a CRD; check that this is a single CRD file",
            limits::bytes(max)
        ),
    }
}

/// Reads at most `max` bytes ([`limits::read_at_most`]) and fails if there are more.
fn read_capped(reader: impl Read, origin: &str, max: u64) -> Result<Vec<u8>> {
    let bytes = limits::read_at_most(reader, max).map_err(|e| Error::Read {
        origin: origin.to_owned(),
        reason: e.to_string(),
    })?;
    bytes.ok_or_else(|| too_large(origin, max))
}

/// Rewrites a GitHub `blob/` page link to the raw file it shows, so users can paste the link
/// from their browser. Other URLs pass through unchanged.
pub fn raw_github_url(url: &str) -> String {
    let Some(rest) = url.strip_prefix("https://github.com/") else {
        return url.to_owned();
    };
    let parts: Vec<&str> = rest.splitn(4, '/').collect();
    match parts.as_slice() {
        [owner, repo, "blob", path] => {
            format!("https://raw.githubusercontent.com/{owner}/{repo}/{path}")
        }
        _ => url.to_owned(),
    }
}

/// Fetches `url` (after [`raw_github_url`]) within `limits`, following redirects.
///
/// Only `https://` is used unless `allow_http` is set, for the URL and for every redirect:
/// a CRD fetched without TLS can be altered on the way, and generated code follows it.
pub fn fetch(url: &str, limits: &FetchLimits, allow_http: bool) -> Result<Vec<u8>> {
    fetch_over(url, limits, allow_http, ureq::tls::TlsConfig::default())
}

/// [`fetch`] with a TLS configuration, so tests can talk to a loopback HTTPS server.
fn fetch_over(
    url: &str,
    limits: &FetchLimits,
    allow_http: bool,
    tls: ureq::tls::TlsConfig,
) -> Result<Vec<u8>> {
    let target = raw_github_url(url);
    let fail = |reason: String| Error::Fetch {
        url: target.clone(),
        reason,
    };
    if !allow_http && !target.starts_with("https://") {
        return Err(fail(format!(
            "plain http is refused, because a CRD fetched without TLS can be altered on the \
             way; use {}, or pass --allow-http if you trust the network",
            https_hint(&target)
        )));
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .https_only(!allow_http)
        .timeout_global(Some(limits.deadline))
        .timeout_connect(Some(limits.connect_timeout))
        .timeout_per_read(Some(limits.read_timeout))
        .max_redirects(limits.max_redirects)
        .http_status_as_error(false)
        .tls_config(tls)
        .build()
        .into();
    let explain = |e: ureq::Error| explain_fetch_error(&target, limits, e);
    let response = agent.get(&target).call().map_err(explain)?;
    let status = response.status();
    if !status.is_success() {
        return Err(fail(format!(
            "the server answered HTTP {status}; check that the URL points at a CRD file"
        )));
    }
    // ureq's own body limit counts the bytes on the wire, before gzip is undone: a small
    // compressed body could still inflate without bound. The cap is on what comes out.
    let bytes = limits::read_at_most(response.into_body().into_reader(), limits.max_bytes)
        .map_err(|e| explain(ureq::Error::from(e)))?;
    bytes.ok_or_else(|| Error::Limit {
        origin: target.clone(),
        reason: format!(
            "the body is larger than the {} limit for a CRD (counted after \
             decompression); check that the URL points at a single CRD file",
            limits::bytes(limits.max_bytes)
        ),
    })
}

/// What to use instead of a plain-http URL: the same URL over https, if it has that form.
fn https_hint(url: &str) -> String {
    url.strip_prefix("http://").map_or_else(
        || "an https:// URL".to_owned(),
        |rest| format!("https://{rest} if the host serves it"),
    )
}

/// Names the cap a failed fetch ran into, or says what else went wrong.
fn explain_fetch_error(url: &str, limits: &FetchLimits, e: ureq::Error) -> Error {
    let human = |d: Duration| humantime::format_duration(d).to_string();
    let limit = |reason: String| Error::Limit {
        origin: url.to_owned(),
        reason,
    };
    match e {
        ureq::Error::Timeout(ureq::Timeout::Global) => limit(format!(
            "the fetch took longer than its {} deadline (connecting, redirects and the whole \
             body together); download the file and pass it with --crd <file> if the host is slow",
            human(limits.deadline)
        )),
        ureq::Error::Timeout(ureq::Timeout::Connect) => limit(format!(
            "could not connect within the {} connect timeout; check the host name and your network",
            human(limits.connect_timeout)
        )),
        ureq::Error::Timeout(ureq::Timeout::PerRead) => limit(format!(
            "the server sent nothing for {} (the per-read timeout); try again, or download the \
             file and pass it with --crd <file>",
            human(limits.read_timeout)
        )),
        ureq::Error::Timeout(other) => limit(format!("the fetch timed out ({other})")),
        ureq::Error::TooManyRedirects => limit(format!(
            "more than {} redirects; point --crd at the final URL",
            limits.max_redirects
        )),
        ureq::Error::RequireHttpsOnly(to) => Error::Fetch {
            url: url.to_owned(),
            reason: format!(
                "a redirect leads to plain http ({to}), which is refused because a CRD \
                 fetched without TLS can be altered on the way; pass --allow-http if you trust \
                 the network"
            ),
        },
        other => Error::Fetch {
            url: url.to_owned(),
            reason: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{BufRead, BufReader, Write},
        time::{Duration, Instant},
    };

    use super::*;

    #[test]
    fn github_blob_links_become_raw_links() {
        assert_eq!(
            raw_github_url("https://github.com/o/r/blob/main/a/b.yaml"),
            "https://raw.githubusercontent.com/o/r/main/a/b.yaml"
        );
        assert_eq!(
            raw_github_url("https://github.com/o/r/tree/main/a"),
            "https://github.com/o/r/tree/main/a"
        );
        assert_eq!(
            raw_github_url("http://127.0.0.1:8080/x.yaml"),
            "http://127.0.0.1:8080/x.yaml"
        );
    }

    #[test]
    fn arguments_are_classified() {
        assert_eq!(CrdSource::parse("-"), CrdSource::Stdin);
        assert_eq!(
            CrdSource::parse("http://h/x"),
            CrdSource::Url("http://h/x".into())
        );
        assert_eq!(
            CrdSource::parse("crd.yaml"),
            CrdSource::File("crd.yaml".into())
        );
    }

    /// Reads a request head and returns its path.
    fn request_path(reader: &mut impl BufRead) -> String {
        let mut request_line = String::new();
        let _ = reader.read_line(&mut request_line);
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) <= 2 {
                break;
            }
        }
        request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("/")
            .to_owned()
    }

    /// A gzip body that inflates to `mib` MiB of zeros, built from one compressed MiB
    /// repeated (gzip allows several members in a row), so it is quick to make.
    fn gzip_bomb(mib: usize) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&vec![0u8; 1024 * 1024]).unwrap();
        encoder.finish().unwrap().repeat(mib)
    }

    /// A loopback HTTP server with one behaviour per path, serving until the test ends.
    fn serve() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                std::thread::spawn(move || {
                    let Ok(read_half) = stream.try_clone() else {
                        return;
                    };
                    let path = request_path(&mut BufReader::new(read_half));
                    let crd = crate::crd_document::tests::CRD.as_bytes().to_vec();
                    let (status, extra, body) = match path.as_str() {
                        "/crd.yaml" => ("200 OK", "", crd),
                        "/moved" => ("302 Found", "Location: /crd.yaml\r\n", Vec::new()),
                        "/text" => (
                            "200 OK",
                            "",
                            b"<html><body>not a CRD</body></html>".to_vec(),
                        ),
                        "/big" => ("200 OK", "", vec![b'#'; 4096]),
                        "/bomb" => ("200 OK", "Content-Encoding: gzip\r\n", gzip_bomb(1024)),
                        "/slow" => {
                            std::thread::sleep(Duration::from_secs(5));
                            return;
                        }
                        "/trickle" => {
                            // A valid response of 200 bytes, one every 50 ms (10 s in all): no
                            // single read waits long, so only a deadline on the whole fetch
                            // ends it sooner.
                            let head = "HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n";
                            let _ = stream.write_all(head.as_bytes());
                            for _ in 0..200 {
                                std::thread::sleep(Duration::from_millis(50));
                                if stream.write_all(b"#").is_err() {
                                    break;
                                }
                            }
                            return;
                        }
                        _ => ("404 Not Found", "", b"no such file".to_vec()),
                    };
                    let head = format!(
                        "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream
                        .write_all(head.as_bytes())
                        .and_then(|()| stream.write_all(&body));
                });
            }
        });
        base
    }

    #[test]
    fn urls_are_fetched_through_redirects_and_failures_are_named() {
        let base = serve();
        let selected = crate::load(
            &CrdSource::Url(format!("{base}/moved")),
            &Default::default(),
            true,
        )
        .unwrap();
        assert_eq!(selected.crd.spec.names.kind, "Widget");

        let err = crate::load(
            &CrdSource::Url(format!("{base}/gone.yaml")),
            &Default::default(),
            true,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("/gone.yaml") && text.contains("HTTP 404"),
            "{text}"
        );

        let err = crate::load(
            &CrdSource::Url(format!("{base}/text")),
            &Default::default(),
            true,
        )
        .unwrap_err();
        assert!(err.to_string().contains("/text"), "{err}");
        assert!(
            matches!(err, Error::NotACrd { .. } | Error::Syntax { .. }),
            "{err:?}"
        );

        let small = FetchLimits {
            max_bytes: 1024,
            ..FetchLimits::default()
        };
        let err = fetch(&format!("{base}/big"), &small, true).unwrap_err();
        assert!(matches!(err, Error::Limit { .. }), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("/big") && err.contains("1 KiB"), "{err}");

        let impatient = FetchLimits {
            read_timeout: Duration::from_millis(300),
            ..FetchLimits::default()
        };
        let err = fetch(&format!("{base}/slow"), &impatient, true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/slow") && err.contains("per-read timeout"),
            "{err}"
        );
    }

    /// The peak resident memory of this process so far, where the OS reports it.
    fn peak_memory() -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }

    #[test]
    fn a_gzip_body_is_capped_after_decompression_quickly() {
        let base = serve();
        let started = Instant::now();
        // 1 MiB on the wire, 1 GiB once inflated: reading stops at the 16 MiB cap.
        let err = fetch(&format!("{base}/bomb"), &FetchLimits::default(), true).unwrap_err();
        let elapsed = started.elapsed();
        // Reading the inflated body before checking its size peaks above 1 GiB; capped, the
        // whole test process (other tests included) stays far below half that.
        if let Some(peak) = peak_memory() {
            assert!(peak < 512 * 1024 * 1024, "peak memory {} MiB", peak >> 20);
        }
        assert!(matches!(err, Error::Limit { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("/bomb")
                && text.contains("16 MiB")
                && text.contains("after decompression"),
            "{text}"
        );
        // Inflating the whole GiB takes far longer than this even in an optimised build.
        assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    }

    #[test]
    fn a_trickling_body_is_cut_off_by_the_deadline() {
        let base = serve();
        let hurried = FetchLimits {
            deadline: Duration::from_secs(1),
            ..FetchLimits::default()
        };
        let started = Instant::now();
        let err = fetch(&format!("{base}/trickle"), &hurried, true).unwrap_err();
        let elapsed = started.elapsed();
        assert!(matches!(err, Error::Limit { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("/trickle") && text.contains("1s deadline"),
            "{text}"
        );
        // The whole body takes 10 s; per-read timeouts never fire on it.
        assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    }

    #[test]
    fn plain_http_is_refused_without_the_switch() {
        let base = serve();
        for source in [
            CrdSource::Url(format!("{base}/crd.yaml")),
            CrdSource::parse(&format!("{base}/crd.yaml")),
        ] {
            let err = source.read().unwrap_err();
            assert!(matches!(err, Error::Fetch { .. }), "{err:?}");
            let text = err.to_string();
            assert!(
                text.contains("/crd.yaml")
                    && text.contains("without TLS")
                    && text.contains("--allow-http"),
                "{text}"
            );
        }
        assert!(
            CrdSource::Url(format!("{base}/crd.yaml"))
                .read_with(true)
                .is_ok()
        );
    }

    /// A self-signed certificate for 127.0.0.1, only ever used by the loopback server below
    /// (the client in that test does not verify certificates).
    const TEST_CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBmDCCAT6gAwIBAgIUReyh7GMkmsdcghjQUIzNFcUZdQ0wCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyMjEzMzgxNFoYDzIxMjYxMDI5
MTMzODE0WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQOZ43r05p+cOBusGcYKp6tByRiYgMaQbPVQz85Vuko1/QkrEGbUqbb
RGoRoXyRRMw6fA1HbpJbLHu7diaIvF8do2wwajAdBgNVHQ4EFgQUW1L1ePpMEhpT
iKYEMiBjKtMn2q8wHwYDVR0jBBgwFoAUW1L1ePpMEhpTiKYEMiBjKtMn2q8wGgYD
VR0RBBMwEYcEfwAAAYIJbG9jYWxob3N0MAwGA1UdEwEB/wQCMAAwCgYIKoZIzj0E
AwIDSAAwRQIgBSzdi80xk/YPpVKV47fBperkOWTsBaAsl9AZUe9gLAACIQCaqcZU
8ZFKnKaY3tVQHy6JQWeLTaVBre1Z5Ow6D9LPqw==
-----END CERTIFICATE-----
";
    const TEST_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgL3n5U4HL0t2CA0Lh
kwLWl5pGe9BLi1oSr7sUHODboMehRANCAAQOZ43r05p+cOBusGcYKp6tByRiYgMa
QbPVQz85Vuko1/QkrEGbUqbbRGoRoXyRRMw6fA1HbpJbLHu7diaIvF8d
-----END PRIVATE KEY-----
";

    /// A loopback HTTPS server that answers every request with a redirect to `location`.
    fn serve_tls_redirect(location: String) -> String {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
        let cert = CertificateDer::from_pem_slice(TEST_CERT.as_bytes()).unwrap();
        let key = PrivateKeyDer::from_pem_slice(TEST_KEY.as_bytes()).unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
        let config = std::sync::Arc::new(config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("https://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (config, location) = (config.clone(), location.clone());
                std::thread::spawn(move || {
                    let Ok(connection) = rustls::ServerConnection::new(config) else {
                        return;
                    };
                    let mut tls = BufReader::new(rustls::StreamOwned::new(connection, stream));
                    request_path(&mut tls);
                    let head = format!(
                        "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    let tls = tls.get_mut();
                    let _ = tls.write_all(head.as_bytes()).and_then(|()| tls.flush());
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                });
            }
        });
        base
    }

    #[test]
    fn a_redirect_from_https_to_http_is_refused_without_the_switch() {
        let plain = serve();
        let secure = serve_tls_redirect(format!("{plain}/crd.yaml"));
        let tls = || {
            ureq::tls::TlsConfig::builder()
                .disable_verification(true)
                .build()
        };
        let url = format!("{secure}/crd.yaml");
        let err = fetch_over(&url, &FetchLimits::default(), false, tls()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&url)
                && text.contains(&format!("{plain}/crd.yaml"))
                && text.contains("without TLS")
                && text.contains("--allow-http"),
            "{text}"
        );
        // The same redirect is followed with the switch, so the refusal above is the policy.
        let bytes = fetch_over(&url, &FetchLimits::default(), true, tls()).unwrap();
        assert!(String::from_utf8_lossy(&bytes).contains("kind: CustomResourceDefinition"));
    }

    #[test]
    fn a_url_with_credentials_is_refused_without_showing_them() {
        for url in [
            "https://user:t0ken-x@example.com/crd.yaml",
            "http://t0ken-x@example.com:8080/a@b.yaml",
        ] {
            let err = CrdSource::Url(url.to_owned()).read_with(true).unwrap_err();
            let text = err.to_string();
            assert!(
                !text.contains("t0ken-x")
                    && text.contains("***@example.com")
                    && text.contains("without them"),
                "{text}"
            );
        }
        // An `@` after the host is part of the path, not user-info.
        assert!(refuse_user_info("https://example.com/a@b.yaml").is_ok());
    }

    #[test]
    fn a_file_a_manifest_names_is_read_only_when_regular_and_never_quoted_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let folder = tmp.path().join("crate");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(tmp.path().join("secret.env"), "TOKEN=s3cr3t\n").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret.env"), folder.join("crd.yaml")).unwrap();
        let named = |path: &str| CrdSource::Named {
            folder: folder.clone(),
            path: PathBuf::from(path),
        };
        let inside = crate::load(&named("crd.yaml"), &Default::default(), false).unwrap_err();
        assert!(inside.to_string().contains("symbolic link"), "{inside}");
        let outside = crate::load(&named("../secret.env"), &Default::default(), false);
        let text = outside.unwrap_err().to_string();
        assert!(
            text.contains("secret.env") && text.contains("not shown") && !text.contains("s3cr3t"),
            "{text}"
        );
        let device = named("/dev/zero").read().unwrap_err().to_string();
        assert!(device.contains("character device"), "{device}");
    }

    #[test]
    fn oversized_input_is_refused() {
        let big = std::io::repeat(b'a').take(MAX_CRD_BYTES + 10);
        let err = read_capped(big, "big.yaml", MAX_CRD_BYTES).unwrap_err();
        assert!(matches!(err, Error::Limit { .. }), "{err:?}");
        let err = err.to_string();
        assert!(
            err.contains("big.yaml") && err.contains("16 MiB limit"),
            "{err}"
        );
    }
}
