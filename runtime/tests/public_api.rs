//! The runtime's public surface, pinned. Whatever is public on the day the crate is published
//! can only change with a breaking release, so every public item (its path, its kind and its
//! signature) is listed in `public-api.txt`, and this test fails when the source says
//! otherwise: a change to the surface shows in that file's diff, where reviewers see it.
//!
//! The list is read from the source with syn, because rustdoc's JSON output needs a nightly
//! toolchain. It follows the module tree from `lib.rs`: public modules, public items in them,
//! `pub use` re-exports resolved to the items they name (with their fields, variants and
//! methods), `#[macro_export]` macros, and the features and `#[doc(hidden)]` marks they carry.
//!
//! `UPDATE_PUBLIC_API=1 cargo test -p operator-gen-runtime --test public_api` writes the list.

use std::{
    collections::BTreeSet,
    fmt::Write as _,
    path::{Path, PathBuf},
};

use quote::ToTokens;
use syn::{Attribute, Fields, ImplItem, Item, TraitItem, UseTree, Visibility};

/// A module of the crate: where it is, its items, and the marks it passes to them.
struct Module {
    path: Vec<String>,
    items: Vec<Item>,
    /// Reachable from outside the crate: every module on its path is `pub`.
    public: bool,
    /// The `#[cfg]`s and `#[doc(hidden)]` of the module and the modules around it.
    marks: Vec<String>,
}

/// Every module of the crate, parsed from `src/`.
struct Crate {
    modules: Vec<Module>,
}

impl Crate {
    fn load(src: &Path) -> Self {
        let mut modules = Vec::new();
        let root = parse(&src.join("lib.rs"));
        collect(
            &mut modules,
            Vec::new(),
            root.items,
            src.to_path_buf(),
            true,
            Vec::new(),
        );
        Self { modules }
    }

    fn module(&self, path: &[String]) -> Option<&Module> {
        self.modules.iter().find(|module| module.path == path)
    }

    /// The public surface, one line per item, sorted.
    fn surface(&self) -> BTreeSet<String> {
        let mut lines = BTreeSet::new();
        for module in self.modules.iter().filter(|module| module.public) {
            if !module.path.is_empty() {
                lines.insert(line("mod", &module.path.join("::"), "", &module.marks));
            }
            for item in &module.items {
                if !matches!(visibility(item), Some(Visibility::Public(_))) {
                    continue;
                }
                match item {
                    Item::Use(use_item) => {
                        for (name, target) in leaves(&use_item.tree, Vec::new()) {
                            self.re_export(&mut lines, module, &name, &target, &use_item.attrs);
                        }
                    }
                    Item::Mod(_) => {}
                    item => {
                        let name = ident(item).unwrap_or_default();
                        let at = joined(&module.path, &name);
                        let marks = with_marks(&module.marks, attrs(item));
                        self.describe(&mut lines, module, item, &at, &marks);
                    }
                }
            }
        }
        for module in &self.modules {
            for item in &module.items {
                if let Item::Macro(mac) = item
                    && mac
                        .attrs
                        .iter()
                        .any(|attr| attr.path().is_ident("macro_export"))
                    && let Some(name) = &mac.ident
                {
                    let marks = with_marks(&module.marks, &mac.attrs);
                    lines.insert(line("macro", &name.to_string(), "", &marks));
                }
            }
        }
        lines
    }

    /// A `pub use` of `target` as `name` in `module`: the item it names, listed where the
    /// re-export puts it, or the outside path it names.
    fn re_export(
        &self,
        lines: &mut BTreeSet<String>,
        module: &Module,
        name: &str,
        target: &[String],
        attrs: &[Attribute],
    ) {
        let at = joined(&module.path, name);
        let marks = with_marks(&module.marks, attrs);
        match self.resolve(&module.path, target) {
            Some((defined_in, item)) => self.describe(lines, defined_in, item, &at, &marks),
            None => {
                lines.insert(line("use", &at, &target.join("::"), &marks));
            }
        }
    }

    /// The item `target` names from inside `from`, and the module that defines it; `None`
    /// for a path outside the crate.
    fn resolve<'c>(&'c self, from: &[String], target: &[String]) -> Option<(&'c Module, &'c Item)> {
        let (name, module_path) = target.split_last()?;
        let mut path = match module_path.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("self") => from.to_vec(),
            Some("super") => from[..from.len().saturating_sub(1)].to_vec(),
            Some(first) => {
                let mut child = from.to_vec();
                child.push(first.to_owned());
                self.module(&child)?;
                from.to_vec()
            }
            None => from.to_vec(),
        };
        let skip = usize::from(matches!(
            module_path.first().map(String::as_str),
            Some("crate" | "self" | "super")
        ));
        for segment in &module_path[skip..] {
            match segment.as_str() {
                "super" => {
                    path.pop();
                }
                segment => path.push(segment.to_owned()),
            }
        }
        let module = self.module(&path)?;
        for item in &module.items {
            if let Item::Use(use_item) = item {
                for (leaf, next) in leaves(&use_item.tree, Vec::new()) {
                    if &leaf == name {
                        return self.resolve(&module.path, &next);
                    }
                }
            } else if ident(item).as_deref() == Some(name) && !matches!(item, Item::Mod(_)) {
                return Some((module, item));
            }
        }
        None
    }

    /// Lists `item`, defined in `defined_in`, as `at`: its kind and signature, then its
    /// fields, variants, trait items and methods.
    fn describe(
        &self,
        lines: &mut BTreeSet<String>,
        defined_in: &Module,
        item: &Item,
        at: &str,
        marks: &[String],
    ) {
        match item {
            Item::Struct(item) => {
                lines.insert(line("struct", at, &generics(&item.generics), marks));
                for field in public_fields(&item.fields) {
                    lines.insert(line(
                        "field",
                        &format!("{at}::{}", field.0),
                        &field.1,
                        marks,
                    ));
                }
                self.methods(lines, defined_in, &item.ident.to_string(), at, marks);
            }
            Item::Enum(item) => {
                lines.insert(line("enum", at, &generics(&item.generics), marks));
                for variant in &item.variants {
                    let fields = tokens(&variant.fields);
                    lines.insert(line(
                        "variant",
                        &format!("{at}::{}", variant.ident),
                        &fields,
                        &with_marks(marks, &variant.attrs),
                    ));
                }
                self.methods(lines, defined_in, &item.ident.to_string(), at, marks);
            }
            Item::Trait(item) => {
                let header = format!("{}{}", generics(&item.generics), supertraits(item));
                lines.insert(line("trait", at, &header, marks));
                for trait_item in &item.items {
                    let (kind, name, detail) = match trait_item {
                        TraitItem::Fn(f) => {
                            let at = format!("{at}::{}", f.sig.ident);
                            lines.insert(fn_line(&at, &f.sig, marks));
                            continue;
                        }
                        TraitItem::Type(t) => ("type", t.ident.to_string(), tokens(&t.bounds)),
                        TraitItem::Const(c) => ("const", c.ident.to_string(), tokens(&c.ty)),
                        _ => continue,
                    };
                    lines.insert(line(kind, &format!("{at}::{name}"), &detail, marks));
                }
            }
            Item::Fn(item) => {
                lines.insert(fn_line(at, &item.sig, marks));
            }
            Item::Type(item) => {
                lines.insert(line("type", at, &tokens(&item.ty), marks));
            }
            Item::Const(item) => {
                lines.insert(line("const", at, &tokens(&item.ty), marks));
            }
            Item::Static(item) => {
                lines.insert(line("static", at, &tokens(&item.ty), marks));
            }
            other => {
                lines.insert(line("item", at, &tokens(other), marks));
            }
        }
    }

    /// The public methods and trait implementations of the type `name`, from the impls in
    /// the module that defines it and in the modules under it.
    fn methods(
        &self,
        lines: &mut BTreeSet<String>,
        defined_in: &Module,
        name: &str,
        at: &str,
        marks: &[String],
    ) {
        let under = |module: &&Module| module.path.starts_with(&defined_in.path);
        for module in self.modules.iter().filter(under) {
            for item in &module.items {
                let Item::Impl(block) = item else { continue };
                let syn::Type::Path(self_ty) = &*block.self_ty else {
                    continue;
                };
                if self_ty
                    .path
                    .segments
                    .last()
                    .map(|s| s.ident.to_string())
                    .as_deref()
                    != Some(name)
                {
                    continue;
                }
                let marks = with_marks(marks, &block.attrs);
                if let Some((_, trait_path, _)) = &block.trait_ {
                    let detail = format!("{}{}", generics(&block.generics), tokens(trait_path));
                    lines.insert(line("impl", at, &detail, &marks));
                    continue;
                }
                for impl_item in &block.items {
                    match impl_item {
                        ImplItem::Fn(f) if matches!(f.vis, Visibility::Public(_)) => {
                            let marks = with_marks(&marks, &f.attrs);
                            let at = format!("{at}::{}", f.sig.ident);
                            lines.insert(fn_line(&at, &f.sig, &marks));
                        }
                        ImplItem::Const(c) if matches!(c.vis, Visibility::Public(_)) => {
                            let marks = with_marks(&marks, &c.attrs);
                            let at = format!("{at}::{}", c.ident);
                            lines.insert(line("const", &at, &tokens(&c.ty), &marks));
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

/// Reads the modules of `items`, the module at `path` whose children live in `dir`.
fn collect(
    modules: &mut Vec<Module>,
    path: Vec<String>,
    items: Vec<Item>,
    dir: PathBuf,
    public: bool,
    marks: Vec<String>,
) {
    for item in &items {
        let Item::Mod(module) = item else { continue };
        let name = module.ident.to_string();
        let mut child = path.clone();
        child.push(name.clone());
        let child_public = public && matches!(module.vis, Visibility::Public(_));
        let child_marks = with_marks(&marks, &module.attrs);
        let (child_items, child_dir) = match &module.content {
            Some((_, items)) => (items.clone(), dir.join(&name)),
            None => {
                let file = dir.join(format!("{name}.rs"));
                let file = if file.exists() {
                    file
                } else {
                    dir.join(&name).join("mod.rs")
                };
                (parse(&file).items, dir.join(&name))
            }
        };
        collect(
            modules,
            child,
            child_items,
            child_dir,
            child_public,
            child_marks,
        );
    }
    modules.push(Module {
        path,
        items,
        public,
        marks,
    });
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|error| panic!("reading {}: {error}", file.display()));
    syn::parse_file(&text).unwrap_or_else(|error| panic!("parsing {}: {error}", file.display()))
}

/// Each name a `use` tree brings in, with the path it names.
fn leaves(tree: &UseTree, prefix: Vec<String>) -> Vec<(String, Vec<String>)> {
    let with = |segment: String| {
        let mut path = prefix.clone();
        path.push(segment);
        path
    };
    match tree {
        UseTree::Path(path) => leaves(&path.tree, with(path.ident.to_string())),
        UseTree::Name(name) => {
            let name = name.ident.to_string();
            if name == "self" {
                let last = prefix.last().cloned().unwrap_or_default();
                vec![(last, prefix)]
            } else {
                vec![(name.clone(), with(name))]
            }
        }
        UseTree::Rename(rename) => {
            vec![(rename.rename.to_string(), with(rename.ident.to_string()))]
        }
        UseTree::Glob(_) => panic!(
            "`pub use {}::*`: name what a public module re-exports, so the surface is read \
             from the source",
            prefix.join("::")
        ),
        UseTree::Group(group) => group
            .items
            .iter()
            .flat_map(|tree| leaves(tree, prefix.clone()))
            .collect(),
    }
}

fn visibility(item: &Item) -> Option<&Visibility> {
    Some(match item {
        Item::Const(item) => &item.vis,
        Item::Enum(item) => &item.vis,
        Item::Fn(item) => &item.vis,
        Item::Mod(item) => &item.vis,
        Item::Static(item) => &item.vis,
        Item::Struct(item) => &item.vis,
        Item::Trait(item) => &item.vis,
        Item::Type(item) => &item.vis,
        Item::Union(item) => &item.vis,
        Item::Use(item) => &item.vis,
        _ => return None,
    })
}

fn attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(item) => &item.attrs,
        Item::Enum(item) => &item.attrs,
        Item::Fn(item) => &item.attrs,
        Item::Static(item) => &item.attrs,
        Item::Struct(item) => &item.attrs,
        Item::Trait(item) => &item.attrs,
        Item::Type(item) => &item.attrs,
        Item::Union(item) => &item.attrs,
        _ => &[],
    }
}

fn ident(item: &Item) -> Option<String> {
    Some(match item {
        Item::Const(item) => item.ident.to_string(),
        Item::Enum(item) => item.ident.to_string(),
        Item::Fn(item) => item.sig.ident.to_string(),
        Item::Mod(item) => item.ident.to_string(),
        Item::Static(item) => item.ident.to_string(),
        Item::Struct(item) => item.ident.to_string(),
        Item::Trait(item) => item.ident.to_string(),
        Item::Type(item) => item.ident.to_string(),
        Item::Union(item) => item.ident.to_string(),
        Item::Macro(item) => item.ident.as_ref()?.to_string(),
        _ => return None,
    })
}

/// The marks around an item and its own: `#[cfg(..)]`s, and `#[doc(hidden)]`.
fn with_marks(around: &[String], attrs: &[Attribute]) -> Vec<String> {
    let mut marks = around.to_vec();
    for attr in attrs {
        let mark = if attr.path().is_ident("cfg") {
            Some(tokens(attr))
        } else if attr.path().is_ident("doc") && tokens(&attr.meta).contains("hidden") {
            Some("#[doc(hidden)]".to_owned())
        } else {
            None
        };
        if let Some(mark) = mark
            && !marks.contains(&mark)
        {
            marks.push(mark);
        }
    }
    marks
}

fn public_fields(fields: &Fields) -> Vec<(String, String)> {
    fields
        .iter()
        .enumerate()
        .filter(|(_, field)| matches!(field.vis, Visibility::Public(_)))
        .map(|(i, field)| {
            let name = field
                .ident
                .as_ref()
                .map_or_else(|| i.to_string(), ToString::to_string);
            (name, tokens(&field.ty))
        })
        .collect()
}

fn generics(generics: &syn::Generics) -> String {
    let mut text = tokens(generics);
    if let Some(clause) = &generics.where_clause {
        let _ = write!(text, " {}", tokens(clause).trim_end_matches(','));
    }
    text
}

fn supertraits(item: &syn::ItemTrait) -> String {
    if item.supertraits.is_empty() {
        String::new()
    } else {
        format!(": {}", tokens(&item.supertraits))
    }
}

/// Tokens as one line, with the spaces proc-macro2 puts around punctuation taken out where
/// Rust is written without them.
fn tokens<T: ToTokens>(node: &T) -> String {
    let text = node.to_token_stream().to_string();
    let mut text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" : ", ": "),
        (" ,", ","),
        ("( ", "("),
        (" )", ")"),
        (",)", ")"),
        (" <", "<"),
        ("< ", "<"),
        (" >", ">"),
        ("& ", "&"),
        (" ;", ";"),
        ("# [", "#["),
        ("' ", "'"),
        ("[ ", "["),
        (" ]", "]"),
        ("! (", "!("),
    ] {
        text = text.replace(from, to);
    }
    // A call or a path's parentheses follow a name without a space; `= ()` keeps its own.
    let mut joined = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let before = joined.chars().last();
        if c == ' '
            && chars.peek() == Some(&'(')
            && before.is_some_and(|b| b.is_alphanumeric() || b == '_')
        {
            continue;
        }
        joined.push(c);
    }
    joined
        .replace("->", " -> ")
        .replace("  ", " ")
        .replace(",>", ">")
}

/// A function as `fn path<generics>(inputs) -> output where ..`, `async` when it is.
fn fn_line(at: &str, sig: &syn::Signature, marks: &[String]) -> String {
    let kind = if sig.asyncness.is_some() {
        "async fn"
    } else {
        "fn"
    };
    let output = match &sig.output {
        syn::ReturnType::Default => String::new(),
        syn::ReturnType::Type(_, ty) => format!(" -> {}", tokens(ty)),
    };
    let at = format!(
        "{at}{}({}){output}",
        tokens(&sig.generics),
        tokens(&sig.inputs).trim_end_matches(',')
    );
    let clause = sig
        .generics
        .where_clause
        .as_ref()
        .map(tokens)
        .unwrap_or_default();
    let clause = clause.trim_end_matches(',');
    line(kind, &at, clause, marks)
}

fn joined(path: &[String], name: &str) -> String {
    path.iter()
        .map(String::as_str)
        .chain([name])
        .collect::<Vec<_>>()
        .join("::")
}

fn line(kind: &str, at: &str, detail: &str, marks: &[String]) -> String {
    let mut text = format!("{kind} {at}");
    if !detail.is_empty() {
        let _ = write!(text, " {detail}");
    }
    for mark in marks {
        let _ = write!(text, " {mark}");
    }
    text
}

#[test]
fn the_public_surface_is_the_one_public_api_txt_lists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let surface = Crate::load(&root.join("src")).surface();
    let listed = root.join("public-api.txt");
    let text: String = surface.iter().map(|line| format!("{line}\n")).collect();
    if std::env::var_os("UPDATE_PUBLIC_API").is_some() {
        std::fs::write(&listed, &text).expect("writing public-api.txt");
        return;
    }
    let pinned = std::fs::read_to_string(&listed).unwrap_or_default();
    let pinned: BTreeSet<String> = pinned.lines().map(str::to_owned).collect();
    let added: Vec<_> = surface.difference(&pinned).collect();
    let removed: Vec<_> = pinned.difference(&surface).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the runtime's public surface changed; if that is meant, write the list with \
         `UPDATE_PUBLIC_API=1 cargo test -p operator-gen-runtime --test public_api` and review \
         its diff\nadded:\n{added:#?}\nremoved:\n{removed:#?}"
    );
}

#[test]
fn a_re_export_of_a_private_item_is_listed_where_it_is_exported_with_its_methods() {
    let dir = std::env::temp_dir().join(format!("public-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    std::fs::write(
        dir.join("lib.rs"),
        "mod inner;\npub mod outer { pub use crate::inner::Thing as Renamed; }\n\
         pub(crate) fn hidden_fn() {}\npub fn shown() {}\n",
    )
    .expect("lib.rs");
    std::fs::write(
        dir.join("inner.rs"),
        "pub struct Thing { pub field: u8, private: u8 }\n\
         impl Thing { pub fn method(&self) -> u8 { 0 } fn private(&self) {} }\n\
         pub struct NotExported;\n",
    )
    .expect("inner.rs");
    let surface = Crate::load(&dir).surface();
    std::fs::remove_dir_all(&dir).expect("cleaning up");
    let expected: BTreeSet<String> = [
        "fn shown()",
        "mod outer",
        "struct outer::Renamed",
        "field outer::Renamed::field u8",
        "fn outer::Renamed::method(&self) -> u8",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(surface, expected);
}
