//! The folder a generated crate's Cargo.toml names operator-gen-runtime by, checked where it
//! is made: from a manifest's `runtime.path` ([`crate::manifest::Runtime`]), or from a program
//! that generates crates.
//!
//! It is its own module because the manifest reads it, `new` and [`crate::record`] write it
//! into an `operator.yaml`, and [`crate::vendor`] turns it into Cargo.toml's dependency: each
//! of them takes the one checked type, and none reaches into another for it.

use std::{
    fmt,
    path::{Component, Path},
};

use serde::{Deserialize, Serialize};

/// The most bytes a runtime path may have: far more than a real one needs, and a bound on what
/// a manifest can put into Cargo.toml.
pub const MAX_RUNTIME_PATH_BYTES: usize = 1024;

/// A folder holding operator-gen-runtime's crate, as Cargo.toml names it: a path dependency,
/// relative to the crate's folder unless a program gave an absolute one.
///
/// It reaches Cargo.toml only through the TOML serializer
/// ([`crate::vendor::RuntimeSource::dependency`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct RuntimePath(String);

impl RuntimePath {
    /// `path` as a manifest may give it: relative, so the Cargo.toml it is written into is the
    /// same on every machine, with no control characters, and within
    /// [`MAX_RUNTIME_PATH_BYTES`].
    ///
    /// # Errors
    ///
    /// Why `path` is refused, said for the person who wrote it.
    pub fn relative(path: &str) -> Result<Self, String> {
        let checked = Self::anywhere(path)?;
        let rooted = Path::new(path).has_root()
            || path.starts_with(['/', '\\'])
            || matches!(
                Path::new(path).components().next(),
                Some(Component::Prefix(_))
            )
            || path.as_bytes().get(1) == Some(&b':');
        if rooted {
            return Err(format!(
                "{path:?} is not a relative path; name the runtime's folder relative to the \
                 crate's (such as ../operator-gen/runtime), so that Cargo.toml is the same on \
                 every machine"
            ));
        }
        Ok(checked)
    }

    /// `path` as a program generating crates may give it, absolute or relative: the test and
    /// corpus workspaces name this repository's runtime where it is. Still with no control
    /// characters, and within [`MAX_RUNTIME_PATH_BYTES`].
    ///
    /// # Errors
    ///
    /// Why `path` is refused.
    pub fn anywhere(path: &str) -> Result<Self, String> {
        if path.is_empty() {
            return Err("an empty path; name the runtime's folder".to_owned());
        }
        if path.len() > MAX_RUNTIME_PATH_BYTES {
            return Err(format!(
                "a path of {} bytes, over the {MAX_RUNTIME_PATH_BYTES}-byte cap on a runtime path",
                path.len()
            ));
        }
        // Controls, and what Rust's `Debug` escapes (bidi and other format characters, line
        // separators): Cargo.toml keeps them raw, where they would hide or reorder the path.
        let hidden = |c: char| c.is_control() || !c.is_ascii() && c.escape_debug().len() > 1;
        if let Some(c) = path.chars().find(|c| hidden(*c)) {
            return Err(format!(
                "{path:?} holds the character {c:?}, a control or hidden one, which no folder \
                 name needs"
            ));
        }
        Ok(Self(path.to_owned()))
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RuntimePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RuntimePath {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let path = String::deserialize(de)?;
        Self::relative(&path).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_path_must_be_relative_printable_and_short() {
        assert_eq!(
            RuntimePath::relative("../../runtime").unwrap().as_str(),
            "../../runtime"
        );
        for rooted in [
            "/opt/runtime",
            "\\\\server\\share",
            "C:\\runtime",
            "c:/runtime",
        ] {
            let err = RuntimePath::relative(rooted).unwrap_err();
            assert!(err.contains("not a relative path"), "{rooted}: {err}");
        }
        assert!(RuntimePath::anywhere("/opt/runtime").is_ok());
        assert!(RuntimePath::relative("").is_err());
        for hidden in [
            "run\0time",
            "run\ntime",
            "run\u{1b}[2Jtime",
            "run\u{202e}time",
            "a\u{2028}b",
        ] {
            let err = RuntimePath::relative(hidden).unwrap_err();
            assert!(err.contains("a control or hidden one"), "{err}");
        }
        assert!(RuntimePath::relative("../rüntime/ß").is_ok());
        let long = "a/".repeat(MAX_RUNTIME_PATH_BYTES);
        assert!(RuntimePath::anywhere(&long).unwrap_err().contains("cap"));
    }
}
