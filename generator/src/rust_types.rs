//! The kopium stage: a CRD version's schema becomes Rust types.
//!
//! kopium's analyzer walks the schema into containers and members; this module lays them out
//! as Rust itself instead of using kopium's string printer, because every name that comes out
//! must be decided by [`crate::naming`] (keywords, case collisions, kinds called `Option`,
//! serde renames as escaped literals) and CRDs that kopium cannot give a root type to (a
//! schemaless spec, no spec at all) still need one. The result is lexed here, then parsed with
//! syn and laid out by prettyplease with the rest of `src/types.rs` when it is rendered, so
//! output that is not valid Rust fails in the generator, not in a user's build.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kopium::{Container, MapType};

mod defaults;
use defaults::Defaults;

use crate::{
    crd_document::SelectedCrd,
    error::{Error, Result},
    naming,
    schema_tree::count_properties,
    text::{Code, Ident, Text},
};

/// Generated types for one CRD version, with the facts the rest of the pipeline needs.
#[derive(Debug, Clone)]
pub struct RustTypes {
    /// Rust items, laid out when the file that holds them is formatted.
    pub code: Code,
    /// Name of the root type, the one that implements `kube::Resource`.
    pub root: Ident,
    /// Name of the status type, when the root carries a typed status.
    pub status: Option<Ident>,
    /// Whether the types use chrono (kopium maps `type: date` to chrono types).
    pub uses_chrono: bool,
    /// Schema shapes that were worked around, with their JSON paths, for the person running
    /// the generator.
    pub warnings: Vec<String>,
}

/// Generates the types of the selected version of `selected`.
pub fn generate(selected: &SelectedCrd) -> Result<RustTypes> {
    generate_version(selected, selected.version_index)
}

/// Generates the types of `selected.crd.spec.versions[index]`.
pub fn generate_version(selected: &SelectedCrd, index: usize) -> Result<RustTypes> {
    let crd = &selected.crd;
    let version = &crd.spec.versions[index];
    let fail = |reason: String| Error::Kopium {
        origin: selected.origin.clone(),
        crd: selected.name().to_owned(),
        version: version.name.clone(),
        reason,
    };
    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.clone())
        .ok_or_else(|| fail("this version has no openAPIV3Schema".to_owned()))?;
    let kind = crd.spec.names.kind.clone();
    let config = kopium::Config {
        no_condition: false,
        no_object_reference: false,
        map: MapType::BTreeMap,
        relaxed: false,
    };
    let properties = count_properties(&schema);
    if properties > crate::limits::MAX_SCHEMA_PROPERTIES {
        return Err(Error::Limit {
            origin: selected.origin.clone(),
            reason: format!(
                "CRD {} version {} declares {properties} properties, over the property cap of {}; a real CRD has a few thousand, so this one is most likely built to exhaust the generator",
                selected.name(),
                version.name,
                crate::limits::MAX_SCHEMA_PROPERTIES
            ),
        });
    }
    let mut warnings = Vec::new();
    let schema = normalize(schema, &mut warnings);
    let warnings = warnings
        .into_iter()
        .map(|w| {
            format!(
                "{}: {} {}: {w}",
                selected.origin,
                selected.name(),
                version.name
            )
        })
        .collect();
    // kopium is a library working on untrusted input; a panic in it must become an error
    // naming the CRD, not a crash of the generator.
    let analyzed = std::panic::catch_unwind(|| kopium::analyze(schema, &kind, config))
        .map_err(|_| fail("kopium panicked on this schema".to_owned()))?
        .map_err(|e| fail(format!("{e:#}")))?;
    let containers = analyzed.output();
    let facts = Facts {
        kind: &kind,
        group: &crd.spec.group,
        version: &version.name,
        plural: &crd.spec.names.plural,
        namespaced: crd.spec.scope == "Namespaced",
    };
    let emitted = emit(&containers, &facts);
    let code = Code::lexed(emitted.code).map_err(|e| Error::InvalidRust {
        file: format!("types for {} {}", selected.name(), version.name),
        reason: e.to_string(),
    })?;
    Ok(RustTypes {
        code,
        root: naming::type_ident(&emitted.root, &[]),
        status: emitted.status.map(|s| naming::type_ident(&s, &[])),
        uses_chrono: emitted.uses_chrono,
        warnings,
    })
}

/// Rewrites schema shapes kopium's analyzer rejects, or would turn into wrong code, into
/// equivalent ones it accepts. `warnings` collects what a person should know, by JSON path.
///
/// - `enum` on a non-string type (a boolean enum): the type alone says what the field holds.
/// - non-string values in a string enum (`null` beside `nullable: true`): dropped from the enum.
/// - untyped properties, array items or map values listing `oneOf`/`anyOf` alternatives: any
///   JSON value.
/// - a `type` that OpenAPI does not have (kopium would name a Rust type after it): any JSON
///   value, with a warning, rather than failing the whole CRD.
fn normalize(mut schema: JSONSchemaProps, warnings: &mut Vec<String>) -> JSONSchemaProps {
    normalize_in_place(&mut schema, "", warnings);
    schema
}

/// The `type` values of OpenAPI v3 that a structural schema may use, and `date`, which
/// real CRDs use and kopium maps to chrono types.
const KNOWN_TYPES: &[&str] = &[
    "object", "array", "string", "integer", "number", "boolean", "date",
];

fn normalize_in_place(schema: &mut JSONSchemaProps, path: &str, warnings: &mut Vec<String>) {
    // kopium gives up on a `date` with a format it has no type for; it is text.
    let odd_date = !matches!(schema.format.as_deref(), None | Some("date" | "date-time"));
    if schema.type_.as_deref() == Some("date") && odd_date {
        schema.format = None;
    }
    if let Some(values) = &mut schema.enum_ {
        if schema.type_.as_deref() == Some("string") {
            values.retain(|v| v.0.is_string());
        } else {
            schema.enum_ = None;
        }
    }
    for (name, child) in schema.properties.iter_mut().flat_map(|p| p.iter_mut()) {
        normalize_element(child, &format!("{path}.{name}"), warnings);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &mut schema.items {
        normalize_element(items, &format!("{path}[]"), warnings);
    }
    if let Some(JSONSchemaPropsOrArray::Schemas(items)) = &mut schema.items {
        for (i, item) in items.iter_mut().enumerate() {
            normalize_in_place(item, &format!("{path}[{i}]"), warnings);
        }
    }
    for list in [&mut schema.one_of, &mut schema.any_of, &mut schema.all_of]
        .into_iter()
        .flatten()
    {
        for alternative in list.iter_mut() {
            normalize_in_place(alternative, path, warnings);
        }
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &mut schema.additional_properties {
        normalize_element(values, &format!("{path}.*"), warnings);
    }
}

/// Properties, array items and map values: an untyped schema that only lists `oneOf`/`anyOf`
/// alternatives (a string or an object) can hold any JSON value, which is what it becomes;
/// so does a schema whose `type` is not one OpenAPI knows.
fn normalize_element(element: &mut JSONSchemaProps, path: &str, warnings: &mut Vec<String>) {
    let untyped_alternatives = element.type_.is_none()
        && element.properties.is_none()
        && element.x_kubernetes_int_or_string.is_none()
        && (element.one_of.is_some() || element.any_of.is_some());
    let unknown_type = element
        .type_
        .as_deref()
        .filter(|t| !KNOWN_TYPES.contains(t));
    if let Some(unknown) = unknown_type {
        warnings.push(format!(
            "`{}` has type {:?}, which OpenAPI does not define; it is typed as any JSON value (serde_json::Value)",
            path.trim_start_matches('.'),
            Text::from(unknown).comment(),
        ));
    }
    if untyped_alternatives || unknown_type.is_some() {
        *element = JSONSchemaProps {
            description: element.description.clone(),
            x_kubernetes_preserve_unknown_fields: Some(true),
            ..JSONSchemaProps::default()
        };
    } else {
        normalize_in_place(element, path, warnings);
    }
}

/// What the root type is made of.
struct Facts<'a> {
    kind: &'a str,
    group: &'a str,
    version: &'a str,
    plural: &'a str,
    namespaced: bool,
}

struct Emitted {
    code: String,
    root: String,
    status: Option<String>,
    uses_chrono: bool,
}

/// A Rust string literal with the value `text`.
fn lit(text: &str) -> String {
    Text::from(text).rs()
}

/// Types that emitted code refers to by their short name, which a generated type must not
/// take. Generated types that would are renamed with a suffix.
const RESERVED: &[&str] = &[
    "Option",
    "Some",
    "None",
    "Result",
    "Ok",
    "Err",
    "String",
    "Vec",
    "Box",
    "BTreeMap",
    "HashMap",
    "Value",
    "ObjectMeta",
    "TypeMeta",
    "Condition",
    "IntOrString",
    "ObjectReference",
    "DateTime",
    "Utc",
    "NaiveDate",
    "Serialize",
    "Deserialize",
    "CustomResource",
    "Clone",
    "Debug",
    "PartialEq",
    "Default",
    "Send",
    "Sync",
    "Sized",
    "Copy",
    "Eq",
    "Fn",
    "Resource",
    "Cow",
];

/// Names of types from outside that members may use, and the import each needs.
const EXTERNAL_TYPES: &[(&str, Option<&str>)] = &[
    ("Option", None),
    ("Vec", None),
    ("String", None),
    ("Box", None),
    ("bool", None),
    ("i8", None),
    ("i16", None),
    ("i32", None),
    ("i64", None),
    ("u8", None),
    ("u16", None),
    ("u32", None),
    ("u64", None),
    ("f32", None),
    ("f64", None),
    ("BTreeMap", Some("std::collections::BTreeMap")),
    ("HashMap", Some("std::collections::HashMap")),
    (
        "IntOrString",
        Some("k8s_openapi::apimachinery::pkg::util::intstr::IntOrString"),
    ),
    (
        "Condition",
        Some("k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition"),
    ),
    (
        "ObjectReference",
        Some("k8s_openapi::api::core::v1::ObjectReference"),
    ),
    ("DateTime", Some("chrono::DateTime")),
    ("Utc", Some("chrono::Utc")),
    ("NaiveDate", Some("chrono::NaiveDate")),
];

/// Lays the analyzed containers out as Rust source (unformatted).
fn emit(containers: &[Container], facts: &Facts) -> Emitted {
    let names = container_names(containers, facts.kind);
    let root_name = naming::unreserved(&naming::type_name(facts.kind), RESERVED);
    let mut imports = BTreeSet::new();
    let mut items = Vec::new();

    let root = containers.iter().find(|c| c.level == 0);
    let root_members: Vec<&kopium::Member> =
        root.map(|r| r.members.iter().collect()).unwrap_or_default();
    let member_type = |name: &str| {
        root_members
            .iter()
            .find(|m| m.name == name)
            .map(|m| rewrite_type(&m.type_, &names, &mut BTreeSet::new()))
    };
    let spec_container = member_type("spec")
        .and_then(|t| strip_option(&t).map(str::to_owned).or(Some(t)))
        .filter(|t| {
            containers
                .iter()
                .any(|c| c.level == 1 && names.get(&c.name) == Some(t))
        });
    let status = member_type("status")
        .map(|t| strip_option(&t).map(str::to_owned).unwrap_or(t))
        .filter(|t| {
            containers
                .iter()
                .any(|c| names.get(&c.name) == Some(t) && !c.members.is_empty())
        });
    let standard_root = root_members.iter().all(|m| {
        matches!(
            m.name.as_str(),
            "apiVersion" | "kind" | "metadata" | "spec" | "status"
        )
    });

    let derive_root = spec_container.is_some() && standard_root;
    let defaults = Defaults::of(containers, &names);
    for container in containers.iter().filter(|c| c.level > 0) {
        let name = &names[&container.name];
        let is_spec = derive_root && spec_container.as_deref() == Some(name.as_str());
        let mut item = docs(container.docs.as_deref(), "");
        let default = if defaults.derives(name) {
            ", Default"
        } else {
            ""
        };
        if is_spec {
            item.push_str(&format!(
                "#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq{default})]\n",
            ));
            let root_default = defaults.derives(name);
            item.push_str(&kube_attributes(
                facts,
                &root_name,
                status.as_deref(),
                root_default,
            ));
            imports.insert("kube::CustomResource");
        } else {
            item.push_str(&format!(
                "#[derive(Serialize, Deserialize, Clone, Debug, PartialEq{default})]\n"
            ));
        }
        imports.insert("serde::{Deserialize, Serialize}");
        if container.is_enum {
            item.push_str(&format!("pub enum {name} {{\n"));
            for (member, variant) in container
                .members
                .iter()
                .zip(naming::variant_names(&container.members))
            {
                item.push_str(&docs(member.docs.as_deref(), "    "));
                if variant.as_str() != member.name {
                    item.push_str(&format!("    #[serde(rename = {})]\n", lit(&member.name)));
                }
                item.push_str(&format!("    {variant},\n"));
            }
        } else {
            item.push_str(&format!("pub struct {name} {{\n"));
            for (member, field) in container
                .members
                .iter()
                .zip(naming::field_names(&container.members))
            {
                item.push_str(&field_code(member, &field, &names, &mut imports));
            }
        }
        item.push_str("}\n");
        if !container.is_enum {
            item.push_str(&defaults.constructor(name));
        }
        items.push(item);
    }

    if !derive_root {
        items.push(handwritten_root(
            facts,
            &root_name,
            root,
            &names,
            &mut imports,
        ));
    }

    let uses_chrono = imports.iter().any(|i| i.starts_with("chrono::"));
    let mut code = String::new();
    for import in &imports {
        code.push_str(&format!("use {import};\n"));
    }
    for item in items {
        code.push('\n');
        code.push_str(&item);
    }
    let status = if derive_root || root_members.iter().any(|m| m.name == "status") {
        status
    } else {
        None
    };
    Emitted {
        code,
        root: root_name,
        status,
        uses_chrono,
    }
}

/// Final names of the containers: kopium's `{Kind}Spec{Field}` loses its `Spec` where that
/// stays unique (`PrometheusRuleGroups`), and no name is reserved or taken twice.
fn container_names(containers: &[Container], kind: &str) -> BTreeMap<String, String> {
    let kind_name = naming::type_name(kind);
    let spec_prefix = format!("{kind_name}Spec");
    let originals: BTreeSet<&str> = containers.iter().map(|c| c.name.as_str()).collect();
    let mut taken: BTreeSet<String> = BTreeSet::from([naming::unreserved(&kind_name, RESERVED)]);
    let mut names = BTreeMap::new();
    for container in containers.iter().filter(|c| c.level > 0) {
        let original = naming::type_name(&container.name);
        let trimmed = match original.strip_prefix(&spec_prefix) {
            Some(rest) if !rest.is_empty() => format!("{kind_name}{rest}"),
            _ => original.clone(),
        };
        let wanted = if trimmed != original && originals.contains(trimmed.as_str()) {
            original
        } else {
            trimmed
        };
        let mut name = naming::unreserved(&wanted, RESERVED);
        let mut n = 2;
        while taken.contains(&name) {
            name = format!("{wanted}{n}");
            n += 1;
        }
        taken.insert(name.clone());
        names.insert(container.name.clone(), name);
    }
    names
}

/// The root's `#[kube]` attributes. `default`: the spec derives `Default`, so the root does
/// too (its status is an `Option`).
fn kube_attributes(facts: &Facts, root_name: &str, status: Option<&str>, default: bool) -> String {
    let mut attrs = format!(
        "#[kube(group = {}, version = {}, kind = {}, plural = {}",
        lit(facts.group),
        lit(facts.version),
        lit(facts.kind),
        lit(facts.plural)
    );
    if root_name != facts.kind {
        attrs.push_str(&format!(", root = {}", lit(root_name)));
    }
    attrs.push_str(")]\n");
    if facts.namespaced {
        attrs.push_str("#[kube(namespaced)]\n");
    }
    if let Some(status) = status {
        attrs.push_str(&format!("#[kube(status = {})]\n", lit(status)));
    }
    attrs.push_str("#[kube(schema = \"disabled\", derive = \"PartialEq\"");
    if default {
        attrs.push_str(", derive = \"Default\"");
    }
    attrs.push_str(")]\n");
    attrs
}

/// The root type for a CRD whose spec is missing, schemaless or joined by other top-level
/// fields, which `#[derive(CustomResource)]` cannot express: the real top-level fields and a
/// hand-written `kube::Resource` impl.
fn handwritten_root(
    facts: &Facts,
    root_name: &str,
    root: Option<&Container>,
    names: &BTreeMap<String, String>,
    imports: &mut BTreeSet<&'static str>,
) -> String {
    let members: Vec<&kopium::Member> = root
        .map(|r| {
            r.members
                .iter()
                .filter(|m| !matches!(m.name.as_str(), "apiVersion" | "kind" | "metadata"))
                .collect()
        })
        .unwrap_or_default();
    let mut code = docs(root.and_then(|r| r.docs.as_deref()), "");
    code.push_str("#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]\n");
    code.push_str(&format!("pub struct {root_name} {{\n"));
    code.push_str(
        "    /// `apiVersion` and `kind`; set by [`Self::new`], needed for server-side apply.\n",
    );
    code.push_str("    #[serde(flatten, default)]\n    pub types: Option<kube::core::TypeMeta>,\n");
    code.push_str("    #[serde(default)]\n    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,\n");
    let owned: Vec<kopium::Member> = members.iter().map(|m| copy_member(m)).collect();
    let fields = naming::field_names(&owned);
    for (member, field) in owned.iter().zip(&fields) {
        code.push_str(&field_code(member, field, names, imports));
    }
    code.push_str("}\n\n");
    let all_optional = owned.iter().all(|m| strip_option(&m.type_).is_some());
    if all_optional {
        code.push_str(&format!("impl {root_name} {{\n"));
        code.push_str("    /// An object called `name`, with `apiVersion` and `kind` set.\n");
        code.push_str("    pub fn new(name: &str) -> Self {\n        Self {\n");
        code.push_str(&format!(
            "            types: Some(kube::core::TypeMeta {{ api_version: {}.to_owned(), kind: {}.to_owned() }}),\n",
            lit(&format!("{}/{}", facts.group, facts.version)),
            lit(facts.kind)
        ));
        code.push_str("            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta { name: Some(name.to_owned()), ..Default::default() },\n");
        for field in &fields {
            code.push_str(&format!("            {field}: None,\n"));
        }
        code.push_str("        }\n    }\n}\n\n");
    }
    let scope = if facts.namespaced {
        "NamespaceResourceScope"
    } else {
        "ClusterResourceScope"
    };
    code.push_str(&format!(
        "impl kube::Resource for {root_name} {{
    type DynamicType = ();
    type Scope = k8s_openapi::{scope};

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {{
        {}.into()
    }}

    fn group(_: &()) -> std::borrow::Cow<'_, str> {{
        {}.into()
    }}

    fn version(_: &()) -> std::borrow::Cow<'_, str> {{
        {}.into()
    }}

    fn plural(_: &()) -> std::borrow::Cow<'_, str> {{
        {}.into()
    }}

    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {{
        &self.metadata
    }}

    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {{
        &mut self.metadata
    }}
}}
",
        lit(facts.kind),
        lit(facts.group),
        lit(facts.version),
        lit(facts.plural)
    ));
    imports.insert("serde::{Deserialize, Serialize}");
    code
}

fn copy_member(member: &kopium::Member) -> kopium::Member {
    kopium::Member {
        name: member.name.clone(),
        type_: member.type_.clone(),
        serde_annot: member.serde_annot.clone(),
        extra_annot: Vec::new(),
        docs: member.docs.clone(),
    }
}

/// One struct field: docs, serde attributes decided here (never copied from kopium, whose
/// rename strings are not escaped), and the type with container names resolved.
fn field_code(
    member: &kopium::Member,
    field: &Ident,
    names: &BTreeMap<String, String>,
    imports: &mut BTreeSet<&'static str>,
) -> String {
    let mut used = BTreeSet::new();
    let ty = rewrite_type(&member.type_, names, &mut used);
    for name in used {
        if let Some((_, Some(path))) = EXTERNAL_TYPES.iter().find(|(n, _)| *n == name) {
            imports.insert(path);
        }
    }
    let mut serde = Vec::new();
    if field.as_str().trim_start_matches("r#") != member.name {
        serde.push(format!("rename = {}", lit(&member.name)));
    }
    if strip_option(&ty).is_some() {
        serde.push("default".to_owned());
        serde.push("skip_serializing_if = \"Option::is_none\"".to_owned());
    } else if member.serde_annot.iter().any(|a| a == "default") && has_default(&ty) {
        serde.push("default".to_owned());
    }
    let mut code = docs(member.docs.as_deref(), "    ");
    if !serde.is_empty() {
        code.push_str(&format!("    #[serde({})]\n", serde.join(", ")));
    }
    code.push_str(&format!("    pub {field}: {ty},\n"));
    code
}

/// Doc comments as `#[doc]` attributes holding escaped literals, one per line. prettyplease
/// prints them back as `///` lines, so each line is also kept free of anything that would
/// end or disguise a comment line (a carriage return, a line separator, a bidi override).
/// A description is prose about the API, so a fenced block in it is marked `text`
/// ([`prose_fences`]).
fn docs(text: Option<&str>, indent: &str) -> String {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return String::new();
    };
    indent_list_continuations(prose_fences(text))
        .iter()
        .map(|line| {
            let line = Text::from(line.trim_end()).comment();
            format!("{indent}#[doc = {}]\n", lit(&format!(" {line}")))
        })
        .collect()
}

/// A Markdown code fence: its character, its length and its info string, when `line` is one.
fn fence(line: &str) -> Option<(char, usize, &str)> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let mark = trimmed.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let length = trimmed.chars().take_while(|&c| c == mark).count();
    (length >= 3).then(|| (mark, length, trimmed[length..].trim()))
}

/// Whether rustdoc reads a block with this info string as Rust: when every tag is one of
/// its own (`rust`, `ignore`, `no_run`, an edition, ...), or there is none.
fn is_rust_block(info: &str) -> bool {
    const RUSTDOC_TAGS: &[&str] = &[
        "rust",
        "ignore",
        "should_panic",
        "no_run",
        "compile_fail",
        "test_harness",
        "standalone_crate",
        "edition2015",
        "edition2018",
        "edition2021",
        "edition2024",
    ];
    info.split([',', ' ', '\t'])
        .filter(|tag| !tag.is_empty())
        .all(|tag| RUSTDOC_TAGS.contains(&tag) || tag.starts_with("ignore-"))
}

/// `text`'s lines, with each fenced block that rustdoc would take for Rust (no language, or
/// `rust`) opened as `text` instead: a CRD's description is not this crate's code, and
/// clippy lints Rust blocks in docs (rustdoc would also test them).
fn prose_fences(text: &str) -> Vec<String> {
    let mut open: Option<(char, usize)> = None;
    text.lines()
        .map(|line| {
            let Some((mark, length, info)) = fence(line) else {
                return line.to_owned();
            };
            match open {
                None => {
                    open = Some((mark, length));
                    let rust = is_rust_block(info);
                    if rust {
                        let indent = &line[..line.len() - line.trim_start().len()];
                        return format!("{indent}{}text", mark.to_string().repeat(length));
                    }
                }
                Some((opened, opened_length))
                    if mark == opened && length >= opened_length && info.is_empty() =>
                {
                    open = None;
                }
                Some(_) => {}
            }
            line.to_owned()
        })
        .collect()
}

/// `lines` with each line that continues a list item (`* item` then `more of it`) indented
/// under the item's text, as rustdoc's Markdown reads it either way but clippy's
/// `doc_lazy_continuation` asks of the code: CRD descriptions, written for Go doc comments,
/// often wrap list items at the margin. A blank line ends the item; fenced blocks are left
/// alone.
fn indent_list_continuations(lines: Vec<String>) -> Vec<String> {
    let mut item: Option<usize> = None;
    let mut fenced = false;
    lines
        .into_iter()
        .map(|line| {
            if fence(&line).is_some() {
                fenced = !fenced;
                item = None;
                return line;
            }
            if fenced || line.trim().is_empty() {
                item = None;
                return line;
            }
            if let Some(width) = list_item_width(&line) {
                item = Some(width);
                return line;
            }
            let indent = line.len() - line.trim_start().len();
            match item {
                Some(width) if indent < width => format!("{}{line}", " ".repeat(width - indent)),
                _ => line,
            }
        })
        .collect()
}

/// Where the text of a Markdown list item starts (`* a` at 2, `  10. a` at 6), when `line`
/// opens one.
fn list_item_width(line: &str) -> Option<usize> {
    let indent = line.len() - line.trim_start().len();
    let rest = &line[indent..];
    // `* * *` and `---` are thematic breaks, which Markdown reads before list items.
    let marks: String = rest.chars().filter(|c| !c.is_whitespace()).collect();
    if marks.len() >= 3
        && ["*", "-", "_"]
            .iter()
            .any(|m| marks.replace(m, "").is_empty())
    {
        return None;
    }
    let marker = if rest.starts_with(['*', '-', '+']) {
        1
    } else {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        let after = rest[digits..].chars().next();
        if digits == 0 || digits > 9 || !matches!(after, Some('.' | ')')) {
            return None;
        }
        digits + 1
    };
    rest[marker..]
        .starts_with(' ')
        .then_some(indent + marker + 1)
}

/// `Option<T>`'s `T`, if `ty` is an option.
fn strip_option(ty: &str) -> Option<&str> {
    ty.strip_prefix("Option<")
        .and_then(|rest| rest.strip_suffix('>'))
}

/// Whether `ty` implements `Default`, so `#[serde(default)]` compiles on it.
fn has_default(ty: &str) -> bool {
    let head = ty.split('<').next().unwrap_or(ty);
    matches!(
        head,
        "String"
            | "Vec"
            | "BTreeMap"
            | "HashMap"
            | "bool"
            | "serde_json::Value"
            | "i32"
            | "i64"
            | "u32"
            | "u64"
            | "f32"
            | "f64"
    )
}

/// Rewrites a kopium type string: container names become their final names, references to
/// types kopium never emitted (nested maps it cannot follow, a type it guessed from a name)
/// become `serde_json::Value`, and every external name used is recorded in `used`.
///
/// kopium's type strings are `Name` or `Name<T, …>`, where a name may hold any character
/// kopium took from a property (`x²`), so they are read by [`KopiumType`] rather than by the
/// Rust parser, and written out again from known names only.
fn rewrite_type(ty: &str, names: &BTreeMap<String, String>, used: &mut BTreeSet<String>) -> String {
    match KopiumType::parse(ty) {
        Some(parsed) => parsed.rewrite(names, used),
        None => "serde_json::Value".to_owned(),
    }
}

/// A kopium type string, parsed.
struct KopiumType<'a> {
    name: &'a str,
    arguments: Vec<KopiumType<'a>>,
}

impl<'a> KopiumType<'a> {
    fn parse(text: &'a str) -> Option<Self> {
        let (parsed, rest) = Self::parse_prefix(text)?;
        rest.trim().is_empty().then_some(parsed)
    }

    /// One type from the start of `text`, and what follows it.
    fn parse_prefix(text: &'a str) -> Option<(Self, &'a str)> {
        let end = text.find(['<', '>', ',']).unwrap_or(text.len());
        let name = text[..end].trim();
        if name.is_empty() {
            return None;
        }
        let mut rest = &text[end..];
        let mut arguments = Vec::new();
        if let Some(inner) = rest.strip_prefix('<') {
            rest = inner;
            loop {
                let (argument, after) = Self::parse_prefix(rest)?;
                arguments.push(argument);
                let after = after.trim_start();
                if let Some(next) = after.strip_prefix(',') {
                    rest = next;
                } else {
                    rest = after.strip_prefix('>')?;
                    break;
                }
            }
        }
        Some((Self { name, arguments }, rest))
    }

    fn rewrite(&self, names: &BTreeMap<String, String>, used: &mut BTreeSet<String>) -> String {
        let name = if let Some(name) = names.get(self.name) {
            name.clone()
        } else if self.name == "serde_json::Value" {
            return self.name.to_owned();
        } else if EXTERNAL_TYPES.iter().any(|(n, _)| *n == self.name) {
            used.insert(self.name.to_owned());
            self.name.to_owned()
        } else {
            return "serde_json::Value".to_owned();
        };
        if self.arguments.is_empty() {
            return name;
        }
        let arguments: Vec<String> = self
            .arguments
            .iter()
            .map(|argument| argument.rewrite(names, used))
            .collect();
        format!("{name}<{}>", arguments.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd_document::{Selection, parse_all, select};

    /// The types as they read in `src/types.rs`: parsed and laid out by prettyplease.
    fn formatted(types: &RustTypes) -> String {
        prettyplease::unparse(&syn::parse_file(types.code.as_str()).unwrap())
    }

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
        assert_eq!(
            types.status.as_ref().map(Ident::as_str),
            Some("WidgetStatus")
        );
        assert!(types.uses_chrono);
        assert!(
            formatted(&types).contains("/// The desired widget."),
            "docs kept:\n{}",
            types.code
        );
    }

    #[test]
    fn structs_derive_default_unless_they_require_an_enum_which_gets_a_constructor() {
        let crd = CRD.replace(
            "                size: { type: integer }\n",
            "                size: { type: integer }
                rule:
                  type: object
                  required: [mode, name]
                  properties:
                    mode: { type: string, enum: [Fast, Slow] }
                    name: { type: string }
                    labels: { type: object, additionalProperties: { type: string } }
                    note: { type: string }
                limits:
                  type: object
                  required: [count]
                  properties:
                    count: { type: integer }
",
        );
        let code = formatted(&types_for(&crd).unwrap());
        let derives = |name: &str| {
            let at = code.find(&format!("pub struct {name} ")).expect(name);
            let derive = code[..at].rfind("#[derive(").expect("a derive");
            code[derive..at].contains("Default")
        };
        assert!(derives("WidgetSpec") && derives("WidgetLimits"), "{code}");
        assert!(!derives("WidgetRule"), "{code}");
        assert!(
            code.contains("pub fn new(mode: WidgetRuleMode, name: String) -> Self"),
            "{code}"
        );
        assert!(
            code.contains("derive = \"Default\""),
            "the root too: {code}"
        );
        let enum_at = code.find("pub enum WidgetRuleMode").expect("the enum");
        let derive = code[..enum_at].rfind("#[derive(").expect("its derive");
        assert!(!code[derive..enum_at].contains("Default"), "{code}");
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

    #[test]
    fn a_schemaless_spec_gets_a_handwritten_root() {
        let schemaless = CRD.replace(
            "            spec:\n              type: object\n",
            "            spec:\n              x-kubernetes-preserve-unknown-fields: true\n              type: object\n",
        );
        let schemaless = schemaless.replace(
            "              properties:\n                size: { type: integer }\n                since: { type: date, format: date-time }\n",
            "",
        );
        let types = types_for(&schemaless).unwrap();
        assert_eq!(types.root, "Widget");
        assert!(
            formatted(&types).contains("impl kube::Resource for Widget"),
            "{}",
            types.code
        );
        // A schemaless `type: object` is a map of anything; the status stays typed.
        assert!(
            formatted(&types).contains("pub spec: Option<BTreeMap<String, serde_json::Value>>"),
            "{}",
            types.code
        );
        assert!(
            formatted(&types).contains("pub status: Option<WidgetStatus>"),
            "{}",
            types.code
        );
        assert_eq!(
            types.status.as_ref().map(Ident::as_str),
            Some("WidgetStatus")
        );
    }

    #[test]
    fn a_nested_spec_does_not_collide_with_the_root_spec() {
        let nested = CRD.replace(
            "                size: { type: integer }\n",
            "                size: { type: integer }\n                spec: { type: object, properties: { image: { type: string } } }\n",
        );
        let types = types_for(&nested).unwrap();
        assert!(
            formatted(&types).contains("pub struct WidgetSpec {"),
            "{}",
            types.code
        );
        assert!(
            formatted(&types).contains("pub struct WidgetSpecSpec {"),
            "{}",
            types.code
        );
    }

    #[test]
    fn a_type_openapi_does_not_have_becomes_any_value_with_a_warning_naming_its_path() {
        let odd = CRD.replace(
            "                size: { type: integer }\n",
            "                size: { type: integer }\n                shape: { type: object, properties: { corner: { type: \"curve\\nfn x() {}\" } } }\n",
        );
        let types = types_for(&odd).unwrap();
        assert!(
            formatted(&types).contains("pub corner: Option<serde_json::Value>"),
            "{}",
            types.code
        );
        assert_eq!(types.warnings.len(), 1, "{:?}", types.warnings);
        let warning = &types.warnings[0];
        assert!(
            warning.contains("`spec.shape.corner`") && warning.contains("serde_json::Value"),
            "{warning}"
        );
        assert!(!warning.contains('\n'), "{warning}");
    }

    #[test]
    fn boolean_enums_and_untyped_map_values_are_accepted() {
        let odd = CRD.replace(
            "                size: { type: integer }\n",
            "                enabled: { type: boolean, enum: [true] }\n                headers: { type: object, additionalProperties: { oneOf: [{ type: string }, { type: object }] } }\n",
        );
        let types = types_for(&odd).unwrap();
        assert!(
            formatted(&types).contains("pub enabled: Option<bool>"),
            "{}",
            types.code
        );
        assert!(
            formatted(&types).contains("pub headers: Option<BTreeMap<String, serde_json::Value>>"),
            "{}",
            types.code
        );
    }

    #[test]
    fn fenced_blocks_in_descriptions_are_text_not_rust() {
        let text = "Example:\n```\nfn main() {}\n```\n~~~yaml\nkey: value\n~~~\n  ```rust,ignore\nx\n  ```";
        assert_eq!(
            prose_fences(text),
            [
                "Example:",
                "```text",
                "fn main() {}",
                "```",
                "~~~yaml",
                "key: value",
                "~~~",
                "  ```text",
                "x",
                "  ```"
            ]
        );
        assert_eq!(
            prose_fences("    ```\nindented code"),
            ["    ```", "indented code"]
        );
        assert_eq!(prose_fences("```no_run\nx\n```")[0], "```text");
        let lines = |text: &str| text.lines().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(
            indent_list_continuations(lines(
                "Either:\n* Gateway: a listener.\nits name.\n\nafter\n10. ten\nmore\n-not a list"
            )),
            lines(
                "Either:\n* Gateway: a listener.\n  its name.\n\nafter\n10. ten\n    more\n    -not a list"
            )
        );
        assert_eq!(
            indent_list_continuations(lines("```text\n* a\nb\n```\n* c\n  d")),
            lines("```text\n* a\nb\n```\n* c\n  d"),
            "fenced lines and continuations already indented stay as they are"
        );
        assert_eq!(
            indent_list_continuations(lines("* * * * *\n| | minute")),
            lines("* * * * *\n| | minute"),
            "a thematic break opens no list item"
        );
        assert_eq!(prose_fences("```ignore edition2021\nx\n```")[0], "```text");
        assert_eq!(prose_fences("```json\n{}\n```")[0], "```json");
    }
}
