//! Where a generated crate's operator-gen-runtime comes from: the copy of it this generator
//! embeds, written into the crate (the default), or a folder named by path.
//!
//! operator-gen-runtime is not on crates.io, and nobody holds the name there: a generated
//! Cargo.toml that named it by version alone would build whatever the first person to publish
//! that name put there. So a crate names its runtime by path, which cargo never looks up in a
//! registry: a missing folder fails the build. By default that path is
//! [`VENDOR_DIR`], in the crate itself, which `gen` fills with the runtime this generator was
//! built with ([`operator_gen_templates::RUNTIME`]) and keeps up to date like any generated
//! file: rewritten when it differs, a file edited by hand refused, and a file the runtime no
//! longer has removed. The path is relative, so Cargo.toml is the same wherever the crate is.
//!
//! A crate that shares a runtime with others (this repository's own, the test and corpus
//! workspaces that build hundreds) names it with `runtime: { path: … }` in `operator.yaml`
//! instead, and gets no copy: one runtime is compiled for all of them.

use std::{
    fmt,
    path::{Component, Path},
};

use serde::{Deserialize, Serialize};

use crate::{manifest::Manifest, text::TomlValue};

/// The vendored runtime's folder in a generated crate, which Cargo.toml names by path.
pub const VENDOR_DIR: &str = "vendor/operator-gen-runtime";

/// The runtime's crate name.
pub const RUNTIME_CRATE: &str = "operator-gen-runtime";

/// The most bytes a runtime path may have: far more than a real one needs, and a bound on what
/// a manifest can put into Cargo.toml.
pub const MAX_RUNTIME_PATH_BYTES: usize = 1024;

/// Where a generated crate's runtime comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RuntimeSource {
    /// The copy this generator embeds, written into the crate at [`VENDOR_DIR`].
    #[default]
    Vendored,
    /// The runtime's folder, as the manifest's `runtime.path` names it.
    Path(RuntimePath),
}

impl RuntimeSource {
    /// The manifest's `runtime:`, else the vendored copy.
    pub fn of(manifest: &Manifest) -> Self {
        manifest
            .runtime
            .as_ref()
            .map_or(Self::Vendored, |runtime| Self::Path(runtime.path.clone()))
    }

    /// The path Cargo.toml names the runtime by.
    pub fn path(&self) -> &str {
        match self {
            Self::Vendored => VENDOR_DIR,
            Self::Path(path) => path.as_str(),
        }
    }

    /// The dependency on the runtime with `features`, as Cargo.toml writes it: its path, and
    /// the version of the runtime this generator embeds, which cargo checks the folder against.
    pub fn dependency(&self, features: &[&str]) -> TomlValue {
        let mut entries = vec![
            ("path", toml::Value::String(self.path().to_owned())),
            (
                "version",
                toml::Value::String(operator_gen_templates::RUNTIME_VERSION.to_owned()),
            ),
        ];
        if !features.is_empty() {
            let features = features
                .iter()
                .map(|f| toml::Value::String((*f).to_owned()))
                .collect();
            entries.push(("features", toml::Value::Array(features)));
        }
        TomlValue::inline_table(&entries)
    }
}

/// A folder holding operator-gen-runtime's crate, as Cargo.toml names it: a path dependency,
/// relative to the crate's folder unless a program gave an absolute one.
///
/// It reaches Cargo.toml only through the TOML serializer ([`RuntimeSource::dependency`]).
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

/// Every file of the vendored copy, as `(path in the crate, text)`, sorted by path.
pub fn files() -> impl Iterator<Item = (String, &'static str)> {
    operator_gen_templates::RUNTIME
        .iter()
        .map(|(path, text)| (format!("{VENDOR_DIR}/{path}"), *text))
}

/// Whether `path`, relative to a crate's folder, lies in the vendored copy's folder: a file
/// there is the generator's, written, replaced and removed by it.
pub fn is_vendored(path: &Path) -> bool {
    path.starts_with(VENDOR_DIR) && path != Path::new(VENDOR_DIR)
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

    #[test]
    fn the_dependency_names_the_runtime_by_path_and_version_through_the_serializer() {
        let vendored = RuntimeSource::Vendored.dependency(&["webhooks"]);
        assert_eq!(
            vendored.as_str(),
            format!(
                "{{ path = \"vendor/operator-gen-runtime\", version = \"{}\", features = [\"webhooks\"] }}",
                env!("CARGO_PKG_VERSION")
            )
        );
        let hostile = RuntimePath::relative("x\", git = \"https://example.com").unwrap();
        let spec = RuntimeSource::Path(hostile).dependency(&[]);
        let parsed: toml::Table = format!("dep = {spec}").parse().expect("valid TOML");
        let dep = parsed["dep"].as_table().expect("a table");
        assert_eq!(
            dep["path"].as_str(),
            Some("x\", git = \"https://example.com")
        );
        assert!(dep.get("git").is_none(), "{spec}");
    }

    #[test]
    fn the_embedded_runtime_is_the_generators_own_version() {
        assert_eq!(
            operator_gen_templates::RUNTIME_VERSION,
            env!("CARGO_PKG_VERSION")
        );
        assert!(files().any(|(path, _)| path == "vendor/operator-gen-runtime/src/lib.rs"));
        assert!(is_vendored(Path::new(
            "vendor/operator-gen-runtime/src/lib.rs"
        )));
        assert!(!is_vendored(Path::new("vendor/operator-gen-runtime")));
        assert!(!is_vendored(Path::new("vendor/other/src/lib.rs")));
    }
}
