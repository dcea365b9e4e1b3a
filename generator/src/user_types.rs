//! The user's `src/types.rs` of a derived crate, as far as generated code depends on it.
//!
//! The file is the user's: the generator writes it once and never again. A derived primary
//! served in several versions gets a generated `src/conversion.rs` that names one module of
//! that file per version. Adding `alsoServed` to an existing crate therefore means laying the
//! file out anew, and a run that would generate code naming a module the file lacks is
//! refused before anything is written, with the modules and what to do: a failed build must
//! never be the first sign.
//!
//! The file is input like any other in a crate folder: read within the crate file cap, and
//! only lexed (proc-macro2's lexer, which keeps its own stack for nesting rather than
//! recursing), never parsed. Only its top-level `mod` items are looked at. A file that cannot
//! be read or lexed is left to the compiler, which names the problem better.

use std::{collections::BTreeSet, path::Path};

use proc_macro2::{TokenStream, TokenTree};

use crate::{
    crate_dir::CrateDir,
    error::{Error, Result},
    limits,
    model::{Operator, Version},
};

/// The user's types, in the crate folder.
pub const TYPES: &str = "src/types.rs";

/// Refuses a run whose generated code would name version modules that the user's
/// `src/types.rs` in `out` lacks.
pub fn check_versions(out: &Path, operator: &Operator) -> Result<()> {
    let conversion = operator
        .webhooks
        .as_ref()
        .and_then(|w| w.conversion.as_ref());
    let Some(conversion) = conversion else {
        return Ok(());
    };
    let read = CrateDir::new(out).read(Path::new(TYPES), limits::MAX_CRATE_FILE_BYTES);
    let Ok(Some(bytes)) = read else {
        return Ok(());
    };
    let Some(modules) = std::str::from_utf8(&bytes).ok().and_then(top_level_modules) else {
        return Ok(());
    };
    let missing: Vec<&Version> = std::iter::once(&conversion.hub)
        .chain(&conversion.spokes)
        .filter(|version| !modules.contains(version.module.as_str()))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::UserFile {
        path: out.join(TYPES),
        reason: missing_modules(&conversion.hub, &missing),
    })
}

/// What to do about `missing`, the version modules the file lacks, of which `hub` is the
/// storage version.
fn missing_modules(hub: &Version, missing: &[&Version]) -> String {
    let named: Vec<String> = missing
        .iter()
        .map(|version| format!("`{}`", version.module.as_str()))
        .collect();
    format!(
        "has no module {}, which the generated src/conversion.rs names: operator.yaml serves \
         the resource in `primary.derive.version` ({}) and in every version of \
         `primary.derive.alsoServed`, each defined in a module of src/types.rs. Move the \
         current types into `pub mod {hub_module} {{ … }}`, with `pub use self::{hub_module}::*;` \
         above it, and give each other version a module with its own spec and `From` \
         conversions to and from the hub, as `operator-gen new --also <version>` lays them out \
         (README, \"Versions and conversion\"); or remove `alsoServed` until the modules exist",
        named.join(", "),
        hub.name.raw(),
        hub_module = hub.module.as_str(),
    )
}

/// The names of the modules `source` declares at its top level (`mod v1 { … }`, `pub mod v1;`),
/// or `None` when it does not lex as Rust.
fn top_level_modules(source: &str) -> Option<BTreeSet<String>> {
    let tokens: TokenStream = source.parse().ok()?;
    let mut modules = BTreeSet::new();
    let mut after_mod = false;
    for token in tokens {
        after_mod = match token {
            TokenTree::Ident(ident) if after_mod => {
                let name = ident.to_string();
                let name = name.strip_prefix("r#").unwrap_or(&name);
                modules.insert(name.to_owned());
                false
            }
            TokenTree::Ident(ident) => ident == "mod",
            _ => false,
        };
    }
    Some(modules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write_plan::tests::snapshot;

    const ONE_VERSION: &str =
        "primary:\n  derive: { kind: Backup, group: example.com, version: v1 }\n";
    const TWO_VERSIONS: &str = "primary:\n  derive: { kind: Backup, group: example.com, version: v1, alsoServed: [v1alpha1] }\n";

    #[test]
    fn a_run_serving_a_version_the_users_types_lack_is_refused_and_writes_nothing() {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let manifest = dir.path().join("operator.yaml");
        let write = crate::write_plan::Mode::Write { force: false };
        std::fs::write(&manifest, ONE_VERSION).expect("the manifest");
        let job = crate::job::Job::new(dir.path());
        job.run(write).expect("a crate serving one version");

        std::fs::write(&manifest, TWO_VERSIONS).expect("alsoServed added");
        let before = snapshot(dir.path());
        let error = job
            .run(write)
            .expect_err("src/types.rs has no version modules");
        let message = error.to_string();
        assert!(matches!(error, Error::UserFile { .. }), "{message}");
        for expected in [
            "src/types.rs (yours)",
            "`v1`, `v1alpha1`",
            "primary.derive.alsoServed",
        ] {
            assert!(message.contains(expected), "{expected:?} in {message}");
        }
        assert_eq!(snapshot(dir.path()), before, "the folder is as it was");

        let versions = "pub use self::v1::*;\npub mod v1 {}\npub mod v1alpha1 {}\n";
        std::fs::write(dir.path().join(TYPES), versions).expect("the user's types, laid out");
        job.run(write).expect("generates once the modules exist");
    }

    #[test]
    fn only_modules_at_the_top_level_are_found_inline_or_in_files() {
        let source = "//! Types.\npub use self::v1::*;\n#[cfg(all())]\npub mod v1 { pub mod inner {} }\n\
                      mod v1alpha1;\npub(crate) mod r#v2 {}\nmacro_rules! m { () => { mod hidden {} } }\n";
        let found = top_level_modules(source).expect("lexes");
        let found: Vec<&str> = found.iter().map(String::as_str).collect();
        assert_eq!(found, ["v1", "v1alpha1", "v2"]);
    }

    #[test]
    fn a_file_that_does_not_lex_has_no_modules_to_judge() {
        assert_eq!(top_level_modules("pub mod v1 { \"unterminated"), None);
    }

    #[test]
    fn deep_nesting_is_lexed_without_recursion() {
        let depth = 200_000;
        let source = format!("mod v1 {{ {}{} }}", "(".repeat(depth), ")".repeat(depth));
        let found = top_level_modules(&source).expect("lexes");
        assert!(found.contains("v1"));
    }
}
