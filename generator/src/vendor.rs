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

use std::path::Path;

pub use crate::runtime_path::{MAX_RUNTIME_PATH_BYTES, RuntimePath};
use crate::{manifest::Manifest, text::TomlValue};

/// The vendored runtime's folder in a generated crate, which Cargo.toml names by path.
pub const VENDOR_DIR: &str = "vendor/operator-gen-runtime";

/// The runtime's crate name.
pub const RUNTIME_CRATE: &str = "operator-gen-runtime";

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
