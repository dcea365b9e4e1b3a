//! Whether the folder `--out` names may be written as a crate: a folder that is not, and
//! holds other files, would silently become one.

use std::path::{Path, PathBuf};

use super::{GENERATED_MARK, transaction::JOURNAL};
use crate::{
    crate_dir::{CrateDir, Kind, MANIFEST, SAVED_CRD},
    error::{Error, Result},
    limits::MAX_CRATE_FILE_BYTES,
};

/// How many of the files in the way an error names.
const NAMED: usize = 8;

/// Refuses an `--out` that cannot be a crate folder: `/`, the user's home folder, and a
/// folder holding files other than a crate's own.
///
/// A folder is accepted when it does not exist yet, when operator-gen made it (its
/// Cargo.toml opens with the generated header), or when it holds only what a crate starts
/// from: `operator.yaml` and the `crd.yaml` beside it (the manifest-first flow), a fresh
/// repository's `.git`, `.gitignore`, `.gitattributes`, README and LICENSE files, and the
/// journal of an interrupted run. A folder with a Cargo.toml operator-gen did not make is
/// refused as [`Error::ForeignCrate`].
pub fn check_out(root: &Path) -> Result<()> {
    if let Some(reason) = special_folder(root) {
        return Err(unfit(root, reason.to_owned()));
    }
    let dir = CrateDir::new(root);
    match dir.read(Path::new("Cargo.toml"), MAX_CRATE_FILE_BYTES)? {
        Some(bytes) if opens_with_mark(&bytes) => return Ok(()),
        Some(_) => {
            return Err(Error::ForeignCrate {
                dir: root.to_owned(),
            });
        }
        None => {}
    }
    let in_the_way: Vec<String> = dir
        .entries()?
        .into_iter()
        .filter(|(name, kind)| !starts_a_crate(name, *kind))
        .map(|(name, kind)| match kind {
            Kind::Folder => format!("{name}/"),
            _ => name,
        })
        .collect();
    if in_the_way.is_empty() {
        return Ok(());
    }
    let mut named = in_the_way[..in_the_way.len().min(NAMED)].join(", ");
    if in_the_way.len() > NAMED {
        named.push_str(&format!(" and {} more", in_the_way.len() - NAMED));
    }
    Err(unfit(
        root,
        format!("holds files that are not a crate's own ({named})"),
    ))
}

fn unfit(root: &Path, reason: String) -> Error {
    Error::UnfitOut {
        dir: root.to_owned(),
        reason,
    }
}

/// Why `root` is a folder no crate may be written into, if it is one: the root folder or
/// the home folder, compared as the OS resolves them.
fn special_folder(root: &Path) -> Option<&'static str> {
    let resolved = resolved(root)?;
    if resolved.parent().is_none() {
        return Some("is the root folder");
    }
    let home = std::env::var_os("HOME").and_then(|home| resolved_dir(Path::new(&home)));
    (home.as_deref() == Some(resolved.as_path())).then_some("is your home folder")
}

fn resolved(root: &Path) -> Option<PathBuf> {
    let root = if root.as_os_str().is_empty() {
        Path::new(".")
    } else {
        root
    };
    resolved_dir(root)
}

fn resolved_dir(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// Whether a Cargo.toml is one operator-gen generated: its first line carries the mark.
pub(super) fn opens_with_mark(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(512)];
    String::from_utf8_lossy(head)
        .lines()
        .next()
        .is_some_and(|line| line.contains(GENERATED_MARK))
}

/// Whether an entry of a folder that is not a crate yet may stay when it becomes one.
fn starts_a_crate(name: &str, kind: Kind) -> bool {
    let upper = name.to_ascii_uppercase();
    let file = kind == Kind::File;
    match name {
        ".git" => true,
        ".gitignore" | ".gitattributes" => file,
        _ if name == MANIFEST || name == SAVED_CRD || name == JOURNAL => file,
        // Leftovers of an interrupted run, which the journal lists.
        _ if name.starts_with('.')
            && (name.ends_with(".operator-gen-new") || name.ends_with(".operator-gen-old")) =>
        {
            file
        }
        _ => {
            file && ["README", "LICENSE", "LICENCE", "COPYING"]
                .iter()
                .any(|p| upper.starts_with(p))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_holding_other_files_is_refused_naming_them() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("home-like");
        std::fs::create_dir_all(root.join("Documents")).unwrap();
        std::fs::write(root.join(".bashrc"), "").unwrap();
        std::fs::write(root.join(MANIFEST), "").unwrap();
        let err = check_out(&root).unwrap_err().to_string();
        assert!(
            err.contains("not a crate's own (.bashrc, Documents/)") && err.contains("--out"),
            "{err}"
        );
    }

    #[test]
    fn an_empty_manifest_first_or_fresh_repository_folder_is_accepted() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(check_out(&tmp.path().join("new")).is_ok());
        assert!(check_out(tmp.path()).is_ok());
        for name in [
            MANIFEST,
            SAVED_CRD,
            ".gitignore",
            "README.md",
            "LICENSE-MIT",
        ] {
            std::fs::write(tmp.path().join(name), "").unwrap();
        }
        std::fs::create_dir(tmp.path().join(".git")).unwrap();
        assert!(check_out(tmp.path()).is_ok());
        // Once operator-gen made it, the crate holds what its user puts there.
        std::fs::create_dir(tmp.path().join("src")).unwrap();
        assert!(check_out(tmp.path()).is_err());
        std::fs::write(
            tmp.path().join("Cargo.toml"),
            format!("# {GENERATED_MARK}\n"),
        )
        .unwrap();
        assert!(check_out(tmp.path()).is_ok());
        std::fs::write(tmp.path().join("Cargo.toml"), "[package]\n").unwrap();
        let err = check_out(tmp.path()).unwrap_err();
        assert!(matches!(err, Error::ForeignCrate { .. }), "{err:?}");
    }

    #[test]
    fn the_root_and_the_home_folder_are_refused() {
        let err = check_out(Path::new("/")).unwrap_err().to_string();
        assert!(err.contains("is the root folder"), "{err}");
        if let Some(home) = std::env::var_os("HOME").filter(|h| Path::new(h).is_dir()) {
            let err = check_out(Path::new(&home)).unwrap_err().to_string();
            assert!(err.contains("is your home folder"), "{err}");
        }
    }
}
