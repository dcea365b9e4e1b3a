//! Where a CRD comes from: an HTTP(S) URL, a file, or stdin, read into memory with limits.

use std::{fmt, io::Read, path::PathBuf, time::Duration};

use crate::error::{Error, Result};

/// The largest CRD accepted from any source. The largest real CRDs are under 2 MiB; 16 MiB
/// leaves room while keeping a hostile or mistaken input from exhausting memory.
pub const MAX_CRD_BYTES: u64 = 16 * 1024 * 1024;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_REDIRECTS: u32 = 5;

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
            Self::Url(url) => fetch(url),
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

fn fetch(url: &str) -> Result<Vec<u8>> {
    let target = raw_github_url(url);
    let fail = |reason: String| Error::Fetch {
        url: target.clone(),
        reason,
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_recv_body(Some(READ_TIMEOUT))
        .timeout_recv_response(Some(READ_TIMEOUT))
        .max_redirects(MAX_REDIRECTS)
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
        .limit(MAX_CRD_BYTES)
        .read_to_vec()
        .map_err(|e| fail(e.to_string()))
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
        assert_eq!(CrdSource::parse("crd.yaml"), CrdSource::File("crd.yaml".into()));
    }

    #[test]
    fn oversized_input_is_refused() {
        let big = std::io::repeat(b'a').take(MAX_CRD_BYTES + 10);
        let err = read_capped(big, "big.yaml").unwrap_err().to_string();
        assert!(err.contains("big.yaml") && err.contains("limit"), "{err}");
    }
}
