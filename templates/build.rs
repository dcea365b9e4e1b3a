//! Embeds the templates, each `.tera` file of this folder by its path in it, into
//! `$OUT_DIR/templates.rs`, so that which templates exist is the folder's business and the
//! generator's table (`operator_gen::render`) is the only one written by hand.
//!
//! Embeds operator-gen-runtime's source, which a generated crate carries a copy of in
//! `vendor/operator-gen-runtime/`, so that the installed command writes the exact runtime it
//! was built with.
//!
//! The source is read through `runtime/` in this folder: links to the repository's `runtime/`
//! (its `src/`, `Cargo.toml` as `package.toml` and `README.md`) and to the workspace's
//! `Cargo.toml` (as `workspace.toml`, for the fields the runtime inherits). Links rather than
//! `../runtime` because `cargo package` follows them into this crate's own package, which must
//! build from its packaged files alone; a `Cargo.toml` in that folder would make cargo leave it
//! out as another package.
//!
//! What is written to `$OUT_DIR/runtime.rs` is one table, `(path in the copy, text)`, sorted by
//! path so that the embedded copy, and every crate written from it, is the same from run to
//! run: the runtime's Cargo.toml made standalone ([`standalone_manifest`]), its README, and
//! every `.rs` file of its `src/`.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    embed_templates(&here, &out);
    let runtime = here.join("runtime");
    let src = runtime.join("src");
    // Both the links and what they lead to: an edit in ../runtime changes the files behind the
    // link, and cargo looks at the folder named here for files newer than the last build.
    for watched in [
        &src,
        &runtime.join("package.toml"),
        &runtime.join("README.md"),
        &runtime.join("workspace.toml"),
    ] {
        println!("cargo::rerun-if-changed={}", watched.display());
        if let Ok(real) = std::fs::canonicalize(watched) {
            println!("cargo::rerun-if-changed={}", real.display());
        }
    }

    let mut sources = Vec::new();
    files_ending(&src, &src, ".rs", &[], &mut sources);
    sources.sort();
    assert!(
        sources.iter().any(|(path, _)| path == "lib.rs"),
        "{} holds no lib.rs: templates/runtime/src must lead to the runtime's src/",
        src.display()
    );

    let package = read(&runtime.join("package.toml"));
    let workspace = read(&runtime.join("workspace.toml"));
    let manifest = standalone_manifest(&package, &workspace);
    let manifest_path = out.join("runtime-Cargo.toml");
    std::fs::write(&manifest_path, &manifest).expect("writing into OUT_DIR");
    let version = package_field(&package, "version")
        .unwrap_or_else(|| panic!("the runtime's Cargo.toml has no `version`"));

    let mut table = String::from("&[\n");
    let mut entry = |name: &str, file: &Path| {
        let file = file.to_str().expect("a UTF-8 path to the runtime");
        writeln!(table, "    ({name:?}, include_str!({file:?})),").expect("writing a String");
    };
    entry("Cargo.toml", &manifest_path);
    entry("README.md", &runtime.join("README.md"));
    for (relative, file) in &sources {
        entry(&format!("src/{relative}"), file);
    }
    table.push(']');
    std::fs::write(out.join("runtime.rs"), table).expect("writing into OUT_DIR");
    std::fs::write(out.join("runtime-version.rs"), format!("{version:?}"))
        .expect("writing into OUT_DIR");
}

/// Writes the table of every `.tera` file below `here` (but not the runtime's folder, which
/// holds none), `(path with / separators, text)`, sorted by path.
fn embed_templates(here: &Path, out: &Path) {
    println!("cargo::rerun-if-changed={}", here.display());
    let mut templates = Vec::new();
    files_ending(here, here, ".tera", &["runtime", "src"], &mut templates);
    templates.sort();
    let mut table = String::from("&[\n");
    for (name, file) in &templates {
        let file = file.to_str().expect("a UTF-8 path to the templates");
        writeln!(table, "    ({name:?}, include_str!({file:?})),").expect("writing a String");
    }
    table.push(']');
    std::fs::write(out.join("templates.rs"), table).expect("writing into OUT_DIR");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every file below `dir` whose name ends with `suffix`, as its path relative to `root` with
/// `/` separators and the file itself; the folders `skipped` directly below `root` are not
/// entered.
fn files_ending(
    root: &Path,
    dir: &Path,
    suffix: &str,
    skipped: &[&str],
    found: &mut Vec<(String, PathBuf)>,
) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a readable entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if !(dir == root && skipped.contains(&name)) {
                files_ending(root, &path, suffix, skipped, found);
            }
        } else if name.ends_with(suffix) {
            let relative = path.strip_prefix(root).expect("below the root");
            let parts: Vec<&str> = relative
                .components()
                .map(|c| c.as_os_str().to_str().expect("a UTF-8 file name"))
                .collect();
            found.push((parts.join("/"), path));
        }
    }
}

/// The runtime's Cargo.toml as a crate outside this workspace can build it: each
/// `<field>.workspace = true` replaced by the workspace's value, and the dev-dependencies,
/// which only the runtime's own tests use, left out. Comments and everything else stay as they
/// are. Anything else inherited from the workspace stops the build, naming it: the copy would
/// not build.
fn standalone_manifest(package: &str, workspace: &str) -> String {
    let mut out = String::with_capacity(package.len());
    let mut dev = false;
    for line in package.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            let table = trimmed.trim_start_matches('[').trim_end_matches(']').trim();
            dev = table == "dev-dependencies"
                || table.starts_with("dev-dependencies.")
                || table.ends_with(".dev-dependencies")
                || table.contains(".dev-dependencies.");
        }
        if dev {
            continue;
        }
        if let Some(field) = trimmed.strip_suffix(".workspace = true") {
            let value = workspace_package_field(workspace, field).unwrap_or_else(|| {
                panic!("the runtime inherits `{field}` from the workspace, which has no such [workspace.package] field")
            });
            writeln!(out, "{field} = {value}").expect("writing a String");
            continue;
        }
        let code = trimmed.split('#').next().unwrap_or_default();
        assert!(
            !code.contains("workspace"),
            "the runtime's Cargo.toml line {line:?} names the workspace, which its vendored copy \
             cannot: teach templates/build.rs to resolve it"
        );
        out.push_str(line);
        out.push('\n');
    }
    // The dev-dependencies were last; the blank line before them stays otherwise.
    let kept = out.trim_end().len();
    out.truncate(kept);
    out.push('\n');
    out
}

/// The value of `field` in the `[package]` table, as written (quotes included).
fn package_field(package: &str, field: &str) -> Option<String> {
    table_field(package, "package", field).map(|value| value.trim_matches('"').to_owned())
}

/// The value of `field` in `[workspace.package]`, as written (quotes included).
fn workspace_package_field(workspace: &str, field: &str) -> Option<String> {
    table_field(workspace, "workspace.package", field)
}

/// The value of a `field = value` line in the table `[table]` of a TOML text, as written.
fn table_field(text: &str, table: &str, field: &str) -> Option<String> {
    let mut inside = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == format!("[{table}]");
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((key, value)) = trimmed.split_once('=')
            && key.trim() == field
        {
            return Some(value.trim().to_owned());
        }
    }
    None
}
