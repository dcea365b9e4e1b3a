//! What the peak-memory binaries share: the process's peak and present resident set, and a
//! ConversionReview of backup-controller's Backups written as text.

/// The peak resident set of this process so far, in KiB.
///
/// # Errors
/// Where there is no `/proc/self/status` with a `VmHWM` line.
pub fn peak_kib() -> Result<u64, String> {
    status_kib("VmHWM")
}

/// The resident set of this process now, in KiB: what it kept of its peak.
///
/// # Errors
/// Where there is no `/proc/self/status` with a `VmRSS` line.
pub fn rss_kib() -> Result<u64, String> {
    status_kib("VmRSS")
}

/// The `field` line of `/proc/self/status`, in KiB.
fn status_kib(field: &str) -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("no {field} in /proc/self/status"))
}

/// One hub Backup, with the field `v1alpha1` lacks, named `index`.
fn backup(index: usize) -> String {
    format!(
        r#"{{"apiVersion":"example.com/v1","kind":"Backup","metadata":{{"name":"b{index}","namespace":"d"}},"spec":{{"message":"m","note":"n"}}}}"#
    )
}

/// A ConversionReview down to `v1alpha1` of as many Backups as fit in `bytes`, and how many;
/// written as bytes rather than built as a JSON value, so that building it costs no more than
/// the body itself.
pub fn conversion_review(bytes: usize) -> (Vec<u8>, usize) {
    let head = br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"0d1c2b3a-0000-4000-8000-000000000001","desiredAPIVersion":"example.com/v1alpha1","objects":["#;
    let tail = b"]}}";
    let mut body = Vec::with_capacity(bytes);
    body.extend_from_slice(head);
    let mut objects = 0;
    loop {
        let object = backup(objects);
        if body.len() + object.len() + 1 + tail.len() > bytes {
            break;
        }
        if objects > 0 {
            body.push(b',');
        }
        body.extend_from_slice(object.as_bytes());
        objects += 1;
    }
    body.extend_from_slice(tail);
    (body, objects)
}
