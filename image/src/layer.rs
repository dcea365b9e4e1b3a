//! The image's one layer: an uncompressed tarball of its files and the folders above them,
//! whose bytes depend only on the files' paths, contents and modes.
//!
//! Entries are sorted by path, every folder is written before what it holds, and each entry is
//! owned by root (0:0, no user or group names) with a zero mtime. The files are readable by
//! the image's non-root user; none is writable by it.

use std::collections::BTreeMap;

use sha2::{Digest as _, Sha256};

use crate::{Error, Result};

/// The largest single file the layer takes besides the binary (a CA bundle, a library).
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// One file of the layer.
#[derive(Debug, Clone)]
pub struct Entry {
    path: String,
    bytes: Vec<u8>,
    mode: u32,
}

impl Entry {
    /// A program at `path` (mode 0755).
    pub fn executable(path: &str, bytes: Vec<u8>) -> Self {
        Self::file(path, bytes, 0o755)
    }

    /// A file at `path` with permission bits `mode`, kept to what no one but root may write.
    pub fn file(path: &str, bytes: Vec<u8>, mode: u32) -> Self {
        Self {
            path: path.to_owned(),
            bytes,
            mode: mode & 0o755,
        }
    }
}

/// The layer's tarball and its digest.
#[derive(Debug)]
pub struct Layer {
    bytes: Vec<u8>,
    digest: String,
}

impl Layer {
    /// The tarball of `entries`, each under the folders its absolute path names.
    ///
    /// # Errors
    ///
    /// [`Error::ImagePath`] for a path that is not absolute, climbs with `..`, or names a file
    /// twice or a file as a folder.
    pub fn new(entries: Vec<Entry>) -> Result<Self> {
        let mut files: BTreeMap<String, Entry> = BTreeMap::new();
        let mut dirs: BTreeMap<String, ()> = BTreeMap::new();
        for entry in entries {
            let relative = relative_path(&entry.path)?;
            let mut parent = String::new();
            let components: Vec<&str> = relative.split('/').collect();
            for component in &components[..components.len() - 1] {
                parent.push_str(component);
                parent.push('/');
                dirs.insert(parent.clone(), ());
            }
            if files.insert(relative.clone(), entry).is_some() {
                return Err(Error::ImagePath {
                    path: relative,
                    reason: "two files have this path",
                });
            }
        }
        if let Some(path) = files
            .keys()
            .find(|file| dirs.contains_key(&format!("{file}/")))
        {
            return Err(Error::ImagePath {
                path: path.clone(),
                reason: "it is a file and a folder",
            });
        }
        let mut builder = tar::Builder::new(Vec::new());
        // Folders and files in one sorted order: `a/` sorts before `a/b`.
        let mut paths: Vec<(&String, Option<&Entry>)> = dirs.keys().map(|d| (d, None)).collect();
        paths.extend(files.iter().map(|(path, entry)| (path, Some(entry))));
        paths.sort_by(|a, b| a.0.cmp(b.0));
        for (path, entry) in paths {
            let mut header = tar::Header::new_ustar();
            header.set_uid(0);
            header.set_gid(0);
            header.set_mtime(0);
            let written = match entry {
                None => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_mode(0o755);
                    header.set_size(0);
                    builder.append_data(&mut header, path, std::io::empty())
                }
                Some(entry) => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_mode(entry.mode);
                    header.set_size(entry.bytes.len() as u64);
                    builder.append_data(&mut header, path, entry.bytes.as_slice())
                }
            };
            written.map_err(|error| Error::Document {
                document: "layer",
                reason: format!("{path}: {error}"),
            })?;
        }
        let bytes = builder.into_inner().map_err(|error| Error::Document {
            document: "layer",
            reason: error.to_string(),
        })?;
        let digest = digest(&bytes);
        Ok(Self { bytes, digest })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// `sha256:<hex>` of the tarball: the layer's digest and, uncompressed, its diff ID.
    pub fn digest(&self) -> &str {
        &self.digest
    }
}

/// `sha256:<hex>` of `bytes`.
pub(crate) fn digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut hex = String::with_capacity(7 + 64);
    hex.push_str("sha256:");
    for byte in hash {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// `path` without its leading `/`, refused when it is not absolute or climbs.
fn relative_path(path: &str) -> Result<String> {
    let Some(relative) = path.strip_prefix('/') else {
        return Err(Error::ImagePath {
            path: path.to_owned(),
            reason: "it is not absolute",
        });
    };
    let climbs = relative
        .split('/')
        .any(|part| matches!(part, "" | "." | ".."));
    if climbs {
        return Err(Error::ImagePath {
            path: path.to_owned(),
            reason: "it has an empty, `.` or `..` component",
        });
    }
    Ok(relative.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(layer: &Layer) -> Vec<(String, u32, u64, u64)> {
        let mut archive = tar::Archive::new(layer.bytes());
        archive
            .entries()
            .expect("entries")
            .map(|entry| {
                let entry = entry.expect("an entry");
                let header = entry.header();
                (
                    entry.path().expect("a path").display().to_string(),
                    header.mode().expect("a mode"),
                    header.uid().expect("a uid"),
                    header.mtime().expect("an mtime"),
                )
            })
            .collect()
    }

    #[test]
    fn folders_come_before_their_files_all_sorted_owned_by_root_at_time_zero() {
        let layer = Layer::new(vec![
            Entry::file("/lib/x/libc.so.6", b"c".to_vec(), 0o644),
            Entry::executable("/operator", b"op".to_vec()),
            Entry::file("/etc/ssl/certs/ca.crt", b"ca".to_vec(), 0o666),
        ])
        .expect("a layer");
        let listed = listing(&layer);
        let paths: Vec<&str> = listed.iter().map(|(p, ..)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "etc/",
                "etc/ssl/",
                "etc/ssl/certs/",
                "etc/ssl/certs/ca.crt",
                "lib/",
                "lib/x/",
                "lib/x/libc.so.6",
                "operator",
            ]
        );
        for (path, mode, uid, mtime) in &listed {
            assert_eq!((*uid, *mtime), (0, 0), "{path}");
            assert_eq!(mode & 0o022, 0, "{path} is writable by others: {mode:o}");
        }
        assert_eq!(listed[3].1, 0o644, "a world-writable mode is kept to 0644");
        assert_eq!(listed[7].1, 0o755);
    }

    #[test]
    fn the_same_files_in_any_order_give_the_same_bytes() {
        let files = || {
            vec![
                Entry::executable("/operator", vec![1; 1000]),
                Entry::file("/lib/a.so", vec![2; 10], 0o644),
            ]
        };
        let first = Layer::new(files()).expect("a layer");
        let second = Layer::new(files().into_iter().rev().collect()).expect("a layer");
        assert_eq!(first.bytes(), second.bytes());
        assert_eq!(first.digest(), second.digest());
        let changed = Layer::new(vec![Entry::executable("/operator", vec![1; 999])]).expect("ok");
        assert_ne!(changed.digest(), first.digest());
    }

    #[test]
    fn paths_that_are_relative_climb_or_collide_are_refused() {
        for path in ["operator", "/a/../b", "/a//b", "/a/./b"] {
            let error = Layer::new(vec![Entry::executable(path, vec![])]).unwrap_err();
            assert!(matches!(error, Error::ImagePath { .. }), "{path}: {error}");
        }
        let twice = Layer::new(vec![
            Entry::executable("/operator", vec![]),
            Entry::executable("/operator", vec![1]),
        ]);
        assert!(twice.is_err());
        let file_and_folder = Layer::new(vec![
            Entry::executable("/lib", vec![]),
            Entry::executable("/lib/a", vec![]),
        ]);
        assert!(file_and_folder.is_err());
    }

    #[test]
    fn the_digest_is_the_sha256_of_the_bytes() {
        assert_eq!(
            digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
