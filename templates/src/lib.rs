//! The Tera templates that `operator-gen` renders an operator crate from, and the source of
//! the runtime a generated crate carries a copy of.
//!
//! The `.tera` files sit at the top of this folder, where a reader of the repository looks for
//! them; this crate only embeds them, so that the generator, which depends on it, packages and
//! installs without reaching outside its own package. Which template becomes which file, and
//! what a template may print, is the generator's business (`operator_gen::render`).
//!
//! [`RUNTIME`] is operator-gen-runtime as this crate was built with it (`build.rs` reads it
//! through the links in `runtime/`): what `operator_gen::vendor` writes into a crate's
//! `vendor/operator-gen-runtime/`.

/// Every template, by its path in this folder (`deploy/base/rbac.yaml.tera`), with its text,
/// sorted by path: every `.tera` file here, as `build.rs` finds them. Templates whose name
/// starts with `_` are partials that others include.
pub const FILES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/templates.rs"));

/// operator-gen-runtime's source as a crate's vendored copy holds it, by path in the copy,
/// sorted: `Cargo.toml` (the runtime's own, with the fields it inherits from this workspace
/// written out and without its dev-dependencies), `README.md`, and every `.rs` file of `src/`.
pub const RUNTIME: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/runtime.rs"));

/// The version of the runtime in [`RUNTIME`], from its Cargo.toml.
pub const RUNTIME_VERSION: &str = include!(concat!(env!("OUT_DIR"), "/runtime-version.rs"));

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Collects the `.tera` files under `dir`, as paths relative to `root`.
    fn tera_files(root: &Path, dir: &Path, found: &mut Vec<String>) {
        let entries = std::fs::read_dir(dir).expect("the templates folder is readable");
        for entry in entries.map(|e| e.expect("a readable entry").path()) {
            if entry.is_dir() {
                tera_files(root, &entry, found);
            } else if entry.extension().is_some_and(|e| e == "tera") {
                let relative = entry.strip_prefix(root).expect("under the root");
                found.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }

    #[test]
    fn every_tera_file_in_the_folder_is_embedded_and_nothing_else() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut on_disk = Vec::new();
        tera_files(root, root, &mut on_disk);
        on_disk.sort();
        let mut embedded: Vec<String> = FILES.iter().map(|(name, _)| (*name).to_owned()).collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
    }

    /// `.rs` files below `dir`, as paths relative to `root` with `/` separators.
    fn rust_files(root: &Path, dir: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("the runtime's src/ is readable") {
            let entry = entry.expect("a readable entry").path();
            if entry.is_dir() {
                rust_files(root, &entry, found);
            } else if entry.extension().is_some_and(|e| e == "rs") {
                let relative = entry.strip_prefix(root).expect("under the root");
                found.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }

    #[test]
    fn the_runtime_is_embedded_as_it_is_on_disk_file_for_file() {
        let runtime = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime");
        let mut on_disk = Vec::new();
        rust_files(&runtime, &runtime.join("src"), &mut on_disk);
        on_disk.sort();
        let embedded: Vec<&str> = RUNTIME
            .iter()
            .map(|(path, _)| *path)
            .filter(|path| path.starts_with("src/"))
            .collect();
        assert_eq!(embedded, on_disk);
        for (path, text) in RUNTIME.iter().filter(|(path, _)| *path != "Cargo.toml") {
            let file = std::fs::read_to_string(runtime.join(path)).expect("the runtime's file");
            assert!(file == *text, "{path} differs from the runtime's");
        }
        let mut sorted: Vec<&str> = RUNTIME.iter().map(|(path, _)| *path).collect();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            RUNTIME.iter().map(|(path, _)| *path).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_runtimes_manifest_is_standalone_and_leaves_out_the_dev_dependencies() {
        let manifest = RUNTIME
            .iter()
            .find(|(path, _)| *path == "Cargo.toml")
            .map(|(_, text)| *text)
            .expect("the runtime's Cargo.toml is embedded");
        assert!(
            manifest.contains("name = \"operator-gen-runtime\""),
            "{manifest}"
        );
        assert!(manifest.contains("edition = \"2024\""), "{manifest}");
        assert!(!manifest.contains("workspace"), "{manifest}");
        assert!(!manifest.contains("[dev-dependencies]"), "{manifest}");
        assert!(
            manifest.contains("[features]") && manifest.contains("test-util"),
            "{manifest}"
        );
        assert!(manifest.contains(&format!("version = \"{RUNTIME_VERSION}\"")));
    }

    #[test]
    fn a_template_is_found_by_its_path_and_a_missing_one_is_not() {
        let found = |name: &str| FILES.iter().find(|(file, _)| *file == name).map(|f| f.1);
        let rbac = found("deploy/base/rbac.yaml.tera").expect("the RBAC template is embedded");
        assert!(rbac.contains("ClusterRole"), "{rbac}");
        assert_eq!(found("deploy/missing.tera"), None);
    }
}
