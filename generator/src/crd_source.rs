//! Where a CRD comes from: an HTTP(S) URL, a file, or stdin, read into memory with limits.

use std::{fmt, io::Read, path::PathBuf, time::Duration};

use crate::error::{Error, Result};

/// The largest CRD accepted from any source. The largest real CRDs are under 2 MiB; 16 MiB
/// leaves room while keeping a hostile or mistaken input from exhausting memory.
pub const MAX_CRD_BYTES: u64 = 16 * 1024 * 1024;

/// Limits on an HTTP fetch. The defaults suit a CRD on a public host; tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    pub connect_timeout: Duration,
    /// Longest wait for the response, and for each read of its body.
    pub read_timeout: Duration,
    pub max_bytes: u64,
    pub max_redirects: u32,
}

impl Default for FetchLimits {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            max_bytes: MAX_CRD_BYTES,
            max_redirects: 5,
        }
    }
}

/// A place to read a CRD from, as a user names it on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrdSource {
    /// An `http://` or `https://` URL.
    Url(String),
    /// A local file.
    File(PathBuf),
    /// Standard input, named `-`.
    Stdin,
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

    /// Reads the whole source, enforcing [`MAX_CRD_BYTES`].
    pub fn read(&self) -> Result<Vec<u8>> {
        match self {
            Self::Url(url) => fetch(url, &FetchLimits::default()),
            Self::File(path) => {
                let file = std::fs::File::open(path).map_err(|e| self.read_error(e))?;
                read_capped(file, &self.to_string())
            }
            Self::Stdin => read_capped(std::io::stdin().lock(), "stdin"),
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
            Self::Stdin => f.write_str("stdin"),
        }
    }
}

fn read_capped(reader: impl Read, origin: &str) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_CRD_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::Read {
            origin: origin.to_owned(),
            reason: e.to_string(),
        })?;
    if bytes.len() as u64 > MAX_CRD_BYTES {
        return Err(Error::Read {
            origin: origin.to_owned(),
            reason: format!(
                "larger than the {} MiB limit for a CRD; check that this is a single CRD file",
                MAX_CRD_BYTES / (1024 * 1024)
            ),
        });
    }
    Ok(bytes)
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
pub fn fetch(url: &str, limits: &FetchLimits) -> Result<Vec<u8>> {
    let target = raw_github_url(url);
    let fail = |reason: String| Error::Fetch {
        url: target.clone(),
        reason,
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(limits.connect_timeout))
        .timeout_recv_response(Some(limits.read_timeout))
        .timeout_per_read(Some(limits.read_timeout))
        .max_redirects(limits.max_redirects)
        .http_status_as_error(false)
        .build()
        .into();
    let response = agent.get(&target).call().map_err(|e| fail(e.to_string()))?;
    let status = response.status();
    if !status.is_success() {
        return Err(fail(format!(
            "the server answered HTTP {status}; check that the URL points at a CRD file"
        )));
    }
    response
        .into_body()
        .with_config()
        .limit(limits.max_bytes)
        .read_to_vec()
        .map_err(|e| {
            fail(format!(
                "{e} (a CRD may be at most {} bytes)",
                limits.max_bytes
            ))
        })
}

#[cfg(test)]
mod tests {
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

    /// A loopback HTTP server with one behaviour per path, serving until the test ends.
    fn serve() -> String {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                std::thread::spawn(move || {
                    let mut request_line = String::new();
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    reader.read_line(&mut request_line).unwrap();
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) <= 2 {
                            break;
                        }
                    }
                    let path = request_line
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or("/")
                        .to_owned();
                    let (status, extra, body) = match path.as_str() {
                        "/crd.yaml" => ("200 OK", "", crate::crd_document::tests::CRD.to_owned()),
                        "/moved" => ("302 Found", "Location: /crd.yaml\r\n", String::new()),
                        "/text" => (
                            "200 OK",
                            "",
                            "<html><body>not a CRD</body></html>".to_owned(),
                        ),
                        "/big" => ("200 OK", "", "#".repeat(4096)),
                        "/slow" => {
                            std::thread::sleep(std::time::Duration::from_secs(5));
                            return;
                        }
                        _ => ("404 Not Found", "", "no such file".to_owned()),
                    };
                    let head = format!(
                        "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream
                        .write_all(head.as_bytes())
                        .and_then(|()| stream.write_all(body.as_bytes()));
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
        )
        .unwrap();
        assert_eq!(selected.crd.spec.names.kind, "Widget");

        let err = crate::load(
            &CrdSource::Url(format!("{base}/gone.yaml")),
            &Default::default(),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("/gone.yaml") && text.contains("HTTP 404"),
            "{text}"
        );

        let err =
            crate::load(&CrdSource::Url(format!("{base}/text")), &Default::default()).unwrap_err();
        assert!(err.to_string().contains("/text"), "{err}");
        assert!(
            matches!(err, Error::NotACrd { .. } | Error::Syntax { .. }),
            "{err:?}"
        );

        let small = FetchLimits {
            max_bytes: 1024,
            ..FetchLimits::default()
        };
        let err = fetch(&format!("{base}/big"), &small)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/big") && err.contains("1024"), "{err}");

        let impatient = FetchLimits {
            read_timeout: std::time::Duration::from_millis(300),
            ..FetchLimits::default()
        };
        let err = fetch(&format!("{base}/slow"), &impatient)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/slow") && err.to_lowercase().contains("timeout"),
            "{err}"
        );
    }

    #[test]
    fn oversized_input_is_refused() {
        let big = std::io::repeat(b'a').take(MAX_CRD_BYTES + 10);
        let err = read_capped(big, "big.yaml").unwrap_err().to_string();
        assert!(err.contains("big.yaml") && err.contains("limit"), "{err}");
    }
}
