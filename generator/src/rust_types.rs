//! The kopium stage: the CRD schema becomes Rust types, parsed and formatted here so that
//! output which is not valid Rust fails inside the generator rather than in a user's build.

use kopium::{Derive, TypeGenerator};
use syn::{Item, LitStr};

use crate::{
    crd_document::SelectedCrd,
    error::{Error, Result},
};

/// kopium's output for one CRD version, with the facts the rest of the pipeline needs.
#[derive(Debug, Clone)]
pub struct RustTypes {
    /// Formatted Rust source, without kopium's own banner.
    pub code: String,
    /// Name of the root type carrying `#[derive(CustomResource)]`.
    pub root: String,
    /// Name of the status type, when kopium wired one as a status subresource.
    pub status: Option<String>,
    /// Crates the types refer to beyond kube, serde and k8s-openapi.
    pub uses_chrono: bool,
}

/// Runs kopium's library on the selected version.
pub fn generate(selected: &SelectedCrd) -> Result<RustTypes> {
    let version = selected.version().name.clone();
    let fail = |reason: String| Error::Kopium {
        origin: selected.origin.clone(),
        crd: selected.name().to_owned(),
        version: version.clone(),
        reason,
    };
    let generator = TypeGenerator::builder()
        .api_version(Some(version.clone()))
        .emit_docs(true)
        .derive(Derive::all("PartialEq"))
        .build();
    let raw = generator
        .generate_rust_types_for(&selected.crd, None::<&str>)
        .map_err(|e| fail(format!("{e:#}")))?;
    let file = syn::parse_file(&raw).map_err(|e| Error::InvalidRust {
        file: format!("types for {} {version}", selected.name()),
        reason: e.to_string(),
    })?;
    let (root, status) = root_and_status(&file).ok_or_else(|| {
        fail(
            "kopium produced no root type with #[derive(CustomResource)]; the schema has no usable spec"
                .to_owned(),
        )
    })?;
    Ok(RustTypes {
        uses_chrono: uses_crate(&file, "chrono"),
        code: prettyplease::unparse(&file),
        root,
        status,
    })
}

/// Finds the struct deriving `CustomResource` and reads its `#[kube(...)]` attributes.
fn root_and_status(file: &syn::File) -> Option<(String, Option<String>)> {
    file.items.iter().find_map(|item| {
        let Item::Struct(s) = item else { return None };
        let mut is_root = false;
        let mut root_name = None;
        let mut status = None;
        for attr in &s.attrs {
            if attr.path().is_ident("derive") {
                let _ = attr.parse_nested_meta(|meta| {
                    is_root |= meta.path.is_ident("CustomResource");
                    Ok(())
                });
            } else if attr.path().is_ident("kube") {
                let _ = attr.parse_nested_meta(|meta| {
                    if meta.input.peek(syn::Token![=]) {
                        let value: LitStr = meta.value()?.parse()?;
                        if meta.path.is_ident("status") {
                            status = Some(value.value());
                        } else if meta.path.is_ident("root")
                            || (meta.path.is_ident("kind") && root_name.is_none())
                        {
                            // `root` names the Rust type when it differs from the kind.
                            root_name = Some(value.value());
                        }
                    }
                    Ok(())
                });
            }
        }
        is_root.then(|| root_name.map(|root| (root, status)))?
    })
}

/// Whether any `use` in the file (at any depth) starts with `krate`.
fn uses_crate(file: &syn::File, krate: &str) -> bool {
    fn in_items(items: &[Item], krate: &str) -> bool {
        items.iter().any(|item| match item {
            Item::Use(u) => match &u.tree {
                syn::UseTree::Path(p) => p.ident == krate,
                syn::UseTree::Name(n) => n.ident == krate,
                _ => false,
            },
            Item::Mod(m) => m
                .content
                .as_ref()
                .is_some_and(|(_, items)| in_items(items, krate)),
            _ => false,
        })
    }
    in_items(&file.items, krate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd_document::{Selection, parse_all, select};

    fn types_for(crd: &str) -> Result<RustTypes> {
        let crds = parse_all("t.yaml", crd.as_bytes())?;
        generate(&select("t.yaml", crds, &Selection::default())?)
    }

    const CRD: &str = r##"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: widgets.example.com }
spec:
  group: example.com
  scope: Namespaced
  names: { kind: Widget, plural: widgets }
  versions:
    - name: v1
      served: true
      storage: true
      subresources: { status: {} }
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              description: "The desired widget. Ends a comment */ and a raw string \"# safely."
              properties:
                size: { type: integer }
                since: { type: date, format: date-time }
            status:
              type: object
              properties:
                ready: { type: boolean }
"##;

    #[test]
    fn root_status_and_crates_are_found() {
        let types = types_for(CRD).unwrap();
        assert_eq!(types.root, "Widget");
        assert_eq!(types.status.as_deref(), Some("WidgetStatus"));
        assert!(types.uses_chrono);
        assert!(
            types.code.contains("/// The desired widget."),
            "docs kept:\n{}",
            types.code
        );
        syn::parse_file(&types.code).unwrap();
    }

    #[test]
    fn no_status_and_no_chrono_when_the_schema_has_none() {
        let plain = CRD.replace(
            "                since: { type: date, format: date-time }\n",
            "",
        );
        let plain = plain.replace("      subresources: { status: {} }\n", "");
        let plain = plain
            .split("            status:")
            .next()
            .unwrap()
            .to_owned();
        let types = types_for(&plain).unwrap();
        assert_eq!(types.status, None);
        assert!(!types.uses_chrono);
    }
}
