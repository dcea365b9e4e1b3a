//! The injection property: no text from a CRD, a manifest or the command line becomes code or
//! configuration.
//!
//! Every string leaf and every map key of an input CRD, a related CRD and a manifest is
//! replaced, one at a time, by payloads built to break out of each output language (quotes,
//! backticks, line breaks, comment and raw-string terminators, template and attribute
//! syntax, a TOML table header, a YAML document marker), and by a benign twin. The payload
//! run must either be refused, with an error that names the field, or produce files with the
//! same shape as the twin's:
//!
//! - Rust: the same tokens once string literals, identifiers (which may differ only by
//!   sanitizing), doc attributes and serde renames are set aside, so no payload byte is
//!   code;
//! - TOML and YAML: the same keys, once the replaced key itself is set aside;
//! - Markdown and Dockerfiles: the same lines, each of the same kind.
//!
//! Command-line paths are covered separately: files are byte-identical whatever the paths.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use operator_gen::{Generated, Job, Mode};
use proc_macro2::{Delimiter, TokenStream, TokenTree};
use serde_json::Value;

/// The fragments of the payloads, each aimed at one way out of one output language.
const FRAGMENTS: &[&str] = &[
    "\"",
    "'",
    "`",
    "\n",
    "\r",
    "\u{2028}",
    "*/",
    "\"#",
    "]]",
    "{{ x }}",
    "{% if x %}",
    "#![no_std]",
    "\n[patch.crates-io]\nkube = { path = \"/tmp\" }\n",
    "\n---\nkind: Secret\n",
];

/// Every fragment in one string, and each on its own after an ordinary word.
fn payloads() -> Vec<String> {
    let mut payloads = vec![format!("qz{}", FRAGMENTS.concat())];
    payloads.extend(FRAGMENTS.iter().map(|f| format!("qz{f}qz")));
    payloads
}

/// A benign value standing in for a payload: a word that still needs a serde rename and
/// sanitizing, as every payload does, and sorts where the payloads sort (they all start
/// with `qz`), so a replaced map key keeps its place among its siblings.
const TWIN: &str = "qz-Benign";

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.probe.example.com
  annotations: { note: an annotation }
spec:
  group: probe.example.com
  scope: Namespaced
  names: { kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList, shortNames: [gd], categories: [all] }
  versions:
    - name: v1beta1
      served: true
      storage: false
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: { type: object, properties: { mode: { type: string } } }
    - name: v1
      served: true
      storage: true
      subresources: { status: {} }
      additionalPrinterColumns:
        - { name: Mode, type: string, jsonPath: .spec.mode, description: the mode }
      schema:
        openAPIV3Schema:
          type: object
          description: A gadget.
          properties:
            spec:
              type: object
              description: What the gadget should be.
              required: [mode]
              properties:
                mode: { type: string, enum: [fast, slow], default: fast, description: How fast. }
                label: { type: string, pattern: "^[a-z]+$", maxLength: 10, x-kubernetes-validations: [{ rule: "self != ''", message: not empty }] }
                size: { type: integer, format: int32, minimum: 1 }
                since: { type: string, format: date-time }
                tags: { type: object, additionalProperties: { type: string } }
                parts:
                  type: array
                  x-kubernetes-list-type: map
                  x-kubernetes-list-map-keys: [name]
                  items: { type: object, required: [name], properties: { name: { type: string } } }
            status:
              type: object
              properties:
                conditions:
                  type: array
                  items:
                    type: object
                    required: [type, status]
                    properties:
                      type: { type: string }
                      status: { type: string }
                      reason: { type: string }
                      message: { type: string }
                      lastTransitionTime: { type: string, format: date-time }
                      observedGeneration: { type: integer, format: int64 }
"#;

const RELATED_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: widgets.parts.example.com }
spec:
  group: parts.example.com
  scope: Namespaced
  names: { kind: Widget, plural: widgets }
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: { type: object, properties: { gadget: { type: string, description: Its gadget. } } }
"#;

const MANIFEST: &str = r#"
name: gadget-operator
primary: { crd: gadget.yaml, kind: Gadget, version: v1 }
owns:
  - { kind: ConfigMap }
  - { kind: Widget, crd: widget.yaml }
watches:
  - { kind: Secret, map: { label: example.com/gadget } }
  - { kind: Service, map: { annotation: example.com/gadget } }
  - { kind: ConfigMap, map: { field: data.gadget } }
external:
  - { name: registry, source: poll, interval: 30s }
  - { name: hook, source: channel }
status: { condition: Audited }
requeue: { after: 5m, errorBackoff: 1s, errorBackoffMax: 2m }
predicates: [generation, finalizers]
concurrency: 2
debounce: 1s
sample: { spec: { mode: slow, label: abc } }
webhooks: { validating: true, mutating: true }
local: { webhooks: "https://127.0.0.1:46443" }
sharding: true
dependencies:
  anyhow: "1"
  reqwest: { version: "0.12", features: [json], default-features: false }
devDependencies: { pretty_assertions: "1" }
runtime: { path: ../operator-gen/runtime }
"#;

/// A resource defined in Rust and served in three versions, with both admission webhooks, the
/// relations its skeleton shows (a cached watch among them), a condition of its own and a
/// sample: its names reach the types, the conversion webhook, crdgen, the skeleton, the
/// shipped tests, the docs and the RBAC of that CRD.
const DERIVED_MANIFEST: &str = r#"
name: backup-operator
primary:
  derive: { kind: Backup, group: backup.example.com, version: v2, plural: backups, namespaced: true, alsoServed: [v1beta1, v1alpha1] }
owns:
  - { kind: ConfigMap }
watches:
  - { kind: Secret, map: { label: example.com/backup }, cache: true }
external:
  - { name: registry, source: poll, interval: 30s }
  - { name: hook, source: channel }
status: { condition: Available }
sample: { spec: { message: example } }
webhooks: { validating: true, mutating: true }
runtime: { path: ../operator-gen/runtime }
"#;

/// The primary CRD as a dynamic primary, with relations and both admission webhooks.
const DYNAMIC_MANIFEST: &str = r#"
name: gadget-operator
primary: { crd: gadget.yaml, kind: Gadget, version: v1, dynamic: true }
owns:
  - { kind: ConfigMap }
watches:
  - { kind: Secret, map: { label: example.com/gadget } }
external:
  - { name: registry, source: poll, interval: 30s }
webhooks: { validating: true, mutating: true }
sharding: true
runtime: { path: ../operator-gen/runtime }
"#;

/// Built-in kinds reconciled on their metadata, each with every relation, both admission
/// webhooks, whose rules name every kind, and sharding, which joins every kind to one ring.
const GENERIC_MANIFEST: &str = r#"
name: workloads-operator
primary: { generic: [Deployment, StatefulSet] }
owns:
  - { kind: ConfigMap }
watches:
  - { kind: Secret, map: { label: example.com/workload } }
  - { kind: Service, map: { annotation: example.com/workload } }
external:
  - { name: inventory, source: channel }
  - { name: registry, source: poll, interval: 30s }
requeue: { after: 5m, errorBackoff: 1s, errorBackoffMax: 2m }
webhooks: { validating: true, mutating: true }
sharding: true
sample:
  Deployment: { spec: { selector: { matchLabels: { app: web } } } }
  StatefulSet: { spec: { serviceName: web } }
runtime: { path: ../operator-gen/runtime }
"#;

/// One step of a path into a document.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// A string leaf, or a map key, of a document.
#[derive(Debug, Clone)]
struct Leaf {
    path: Vec<Step>,
    /// The map key at the end of `path` is replaced, rather than the value there.
    key: bool,
}

impl Leaf {
    /// The path as `spec.versions[1].name`.
    fn dotted(&self) -> String {
        let mut out = String::new();
        for step in &self.path {
            match step {
                Step::Key(key) if out.is_empty() => out.push_str(key),
                Step::Key(key) => {
                    out.push('.');
                    out.push_str(key);
                }
                Step::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    /// Names an error may use for this place: the path, its last key, the key before it.
    fn names(&self) -> Vec<String> {
        let keys: Vec<&String> = self
            .path
            .iter()
            .filter_map(|s| match s {
                Step::Key(k) => Some(k),
                Step::Index(_) => None,
            })
            .collect();
        let mut names = vec![self.dotted()];
        names.extend(keys.iter().rev().take(2).map(|k| (*k).clone()));
        names
    }
}

fn leaves(value: &Value, path: &mut Vec<Step>, out: &mut Vec<Leaf>) {
    match value {
        Value::String(_) => out.push(Leaf {
            path: path.clone(),
            key: false,
        }),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Step::Index(i));
                leaves(item, path, out);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                path.push(Step::Key(key.clone()));
                out.push(Leaf {
                    path: path.clone(),
                    key: true,
                });
                leaves(item, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// `document` with the leaf replaced by `text`.
fn replaced(document: &Value, leaf: &Leaf, text: &str) -> Value {
    let mut document = document.clone();
    let (last, parents) = leaf.path.split_last().expect("a leaf has a path");
    let mut node = &mut document;
    for step in parents {
        node = match step {
            Step::Key(k) => &mut node[k.as_str()],
            Step::Index(i) => &mut node[*i],
        };
    }
    match (last, leaf.key) {
        (Step::Key(k), true) => {
            let map = node.as_object_mut().expect("a key's parent is a map");
            let value = map.remove(k).unwrap_or(Value::Null);
            map.insert(text.to_owned(), value);
        }
        (Step::Key(k), false) => node[k.as_str()] = Value::from(text),
        (Step::Index(i), _) => node[*i] = Value::from(text),
    }
    document
}

fn parse_yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).expect("the base documents parse")
}

/// Which input a leaf belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    Crd,
    RelatedCrd,
    Manifest,
    /// The manifest of a derived primary; the CRDs are then unused.
    DerivedManifest,
    /// The primary CRD, read as a dynamic primary: its names reach `types.rs` untyped.
    DynamicCrd,
    /// The manifest of a generic primary, with every relation.
    GenericManifest,
}

/// Generates from the three inputs, written into `dir` as `gen --manifest` would read them.
fn generate(
    dir: &Path,
    crd: &Value,
    related: &Value,
    manifest: &Value,
) -> operator_gen::Result<Generated> {
    let write = |name: &str, value: &Value| {
        let text = serde_saphyr::to_string(value).expect("documents serialize");
        std::fs::write(dir.join(name), text).expect("writing an input");
    };
    write("gadget.yaml", crd);
    write("widget.yaml", related);
    write("operator.yaml", manifest);
    let job = Job {
        manifest: Some(dir.join("operator.yaml")),
        ..Job::new(dir.join("out"))
    };
    operator_gen::generate(&job.request()?)
}

/// The shape of a generated file: what must not change when only escaped text does.
fn shape(path: &Path, contents: &str, replaced_key: Option<&str>) -> Vec<String> {
    let name = path.to_string_lossy();
    if path.starts_with("deploy/chart/templates") {
        return helm_template_shape(contents);
    }
    if name.ends_with(".rs") {
        let file = syn::parse_file(contents).unwrap_or_else(|e| panic!("{name} is not Rust: {e}"));
        let mut out = Vec::new();
        rust_skeleton(quote::ToTokens::into_token_stream(file), &mut out);
        out
    } else if name.ends_with(".toml") {
        let table: toml::Table = contents.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut keys = BTreeSet::new();
        key_paths(
            &serde_json::to_value(table).unwrap_or_default(),
            "",
            replaced_key,
            &mut keys,
        );
        keys.into_iter().collect()
    } else if name.ends_with(".yaml") {
        let documents: Vec<Value> = serde_saphyr::from_str_multiple(contents)
            .unwrap_or_else(|e| panic!("{name} is not YAML: {e}"));
        let mut keys = BTreeSet::new();
        for (i, document) in documents.iter().enumerate() {
            key_paths(document, &format!("{i}"), replaced_key, &mut keys);
        }
        keys.into_iter().collect()
    } else {
        // Markdown and Dockerfile: one entry per line, saying what kind of line it is.
        contents.split('\n').map(line_kind).collect()
    }
}

/// The shape of a file Helm renders as a Go template (`deploy/chart/templates/`): its actions,
/// in order and verbatim, save the one that prints a literal `{{` (what escaped text holds),
/// and its YAML document markers. It is not YAML until Helm renders it; its YAML comes from
/// the same templates and escaping as the kustomize base's, whose shape is judged as YAML, and
/// `cargo xtask charts` renders it with helm. What a payload could add here is an action.
fn helm_template_shape(contents: &str) -> Vec<String> {
    const LITERAL_OPEN: &str = r#"{{ "{{" }}"#;
    let mut shape: Vec<String> = go_actions(contents)
        .into_iter()
        .filter(|action| action != LITERAL_OPEN)
        .map(|action| format!("action {action}"))
        .collect();
    shape.extend(
        contents
            .split('\n')
            .enumerate()
            .filter(|(_, line)| line.starts_with("---"))
            .map(|(i, _)| format!("document at line {i}")),
    );
    shape
}

/// The actions of a Go template, as `text/template`'s lexer finds them: from `{{` to the first
/// `}}` outside a quoted or raw string.
fn go_actions(template: &str) -> Vec<String> {
    let mut actions = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let action = &rest[start..];
        let mut chars = action.char_indices().skip(2);
        let mut end = action.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    while let Some((_, c)) = chars.next() {
                        match c {
                            '\\' => {
                                chars.next();
                            }
                            '"' => break,
                            _ => {}
                        }
                    }
                }
                '`' => {
                    for (_, c) in chars.by_ref() {
                        if c == '`' {
                            break;
                        }
                    }
                }
                '}' if action[i..].starts_with("}}") => {
                    end = i + 2;
                    break;
                }
                _ => {}
            }
        }
        actions.push(action[..end].to_owned());
        rest = &action[end..];
    }
    actions
}

#[test]
fn a_go_templates_actions_end_at_the_first_close_outside_a_string() {
    let template = r#"a {{ "{{" }} b {{- if eq .Values.x "}}" }}c{{ end }} {{ `}}` }}"#;
    assert_eq!(
        go_actions(template),
        [
            r#"{{ "{{" }}"#,
            r#"{{- if eq .Values.x "}}" }}"#,
            "{{ end }}",
            "{{ `}}` }}"
        ]
    );
    let shape = helm_template_shape("x: {{ \"{{\" }} y }}\n{{- end }}\n---\n");
    assert_eq!(shape, ["action {{- end }}", "document at line 2"]);
}

/// Tokens with string literals, identifiers, doc attributes and serde renames set aside:
/// what is left is code that only the generator wrote.
fn rust_skeleton(tokens: TokenStream, out: &mut Vec<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        if let TokenTree::Punct(p) = &tokens[i]
            && p.as_char() == '#'
        {
            let bang = matches!(tokens.get(i + 1), Some(TokenTree::Punct(b)) if b.as_char() == '!');
            let group = tokens.get(i + 1 + usize::from(bang));
            if let Some(TokenTree::Group(g)) = group
                && g.delimiter() == Delimiter::Bracket
                && is_doc_or_rename(&g.stream())
            {
                i += 2 + usize::from(bang);
                continue;
            }
        }
        match &tokens[i] {
            TokenTree::Literal(_) => out.push("L".to_owned()),
            TokenTree::Ident(ident) => {
                let text = ident.to_string();
                let keyword = syn::parse_str::<syn::Ident>(&text).is_err();
                out.push(if keyword { text } else { "I".to_owned() });
            }
            // A trailing comma is layout: the printer adds one when it breaks a list.
            TokenTree::Punct(p) if p.as_char() == '>' && out.last().is_some_and(|t| t == ",") => {
                out.pop();
                out.push(">".to_owned());
            }
            TokenTree::Punct(p) => out.push(p.as_char().to_string()),
            TokenTree::Group(g) => {
                out.push(format!("{:?}(", g.delimiter()));
                rust_skeleton(g.stream(), out);
                if out.last().is_some_and(|t| t == ",") {
                    out.pop();
                }
                out.push(")".to_owned());
            }
        }
        i += 1;
    }
}

/// `doc = "…"`, or `serde(rename = "…")`: attributes that carry only escaped text.
fn is_doc_or_rename(attribute: &TokenStream) -> bool {
    let tokens: Vec<String> = attribute
        .clone()
        .into_iter()
        .map(|t| t.to_string())
        .collect();
    let literal = |t: &String| t.starts_with('"') || t.starts_with("r\"") || t.starts_with("r#");
    match tokens.as_slice() {
        [doc, eq, lit] => doc == "doc" && eq == "=" && literal(lit),
        [serde, _group] if serde == "serde" => {
            let inner: Vec<String> = attribute
                .clone()
                .into_iter()
                .nth(1)
                .map(|g| match g {
                    TokenTree::Group(g) => g.stream().into_iter().map(|t| t.to_string()).collect(),
                    _ => Vec::new(),
                })
                .unwrap_or_default();
            matches!(inner.as_slice(), [rename, eq, lit] if rename == "rename" && eq == "=" && literal(lit))
        }
        _ => false,
    }
}

fn key_paths(value: &Value, at: &str, replaced_key: Option<&str>, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                let key = if Some(key.as_str()) == replaced_key {
                    "<replaced>"
                } else {
                    key
                };
                let path = format!("{at}.{key}");
                out.insert(path.clone());
                key_paths(item, &path, replaced_key, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                key_paths(item, &format!("{at}[{i}]"), replaced_key, out);
            }
        }
        _ => {}
    }
}

fn line_kind(line: &str) -> String {
    let trimmed = line.trim_start();
    let word: String = trimmed
        .chars()
        .take_while(|c| c.is_ascii_uppercase())
        .collect();
    let kind = match trimmed.chars().next() {
        None => "blank".to_owned(),
        Some('#') => format!(
            "heading{}",
            trimmed.chars().take_while(|c| *c == '#').count()
        ),
        Some('|') => format!("row{}", trimmed.matches(" | ").count()),
        Some('-') => "item".to_owned(),
        _ if trimmed.starts_with("```") => "fence".to_owned(),
        _ if !word.is_empty() => format!("instruction {word}"),
        _ => "text".to_owned(),
    };
    format!("{kind} {}", line.len() - trimmed.len())
}

/// Whether `message` is one line of printable text, so it cannot rewrite a terminal.
fn is_printable(message: &str) -> bool {
    !message
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202e}'))
}

/// Compares a payload run with its twin; returns what is wrong, if anything.
fn judge(
    leaf: &Leaf,
    payload: &str,
    twin: &operator_gen::Result<Generated>,
    attacked: &operator_gen::Result<Generated>,
) -> Option<String> {
    let place = leaf.dotted();
    match (twin, attacked) {
        (_, Err(error)) => {
            let message = error.to_string();
            if !is_printable(&message) {
                return Some(format!(
                    "{place}: the error holds control characters: {message:?}"
                ));
            }
            if message.contains("bug in operator-gen") || message.contains("panicked") {
                return Some(format!("{place}: refused as a generator bug: {message}"));
            }
            // The field replaced, or the manifest field whose value no longer fits it.
            let named = leaf
                .names()
                .iter()
                .any(|name| message.contains(name.as_str()))
                || message.contains("field `");
            (!named).then(|| format!("{place}: refused without naming the field: {message}"))
        }
        (Err(error), Ok(_)) => Some(format!(
            "{place}: the payload gave code where the benign twin was refused ({error})"
        )),
        (Ok(twin), Ok(attacked)) => {
            let replaced_key = leaf.key.then_some(());
            let paths = |g: &Generated| {
                g.plan
                    .files
                    .iter()
                    .map(|f| f.path.clone())
                    .collect::<Vec<PathBuf>>()
            };
            if paths(twin) != paths(attacked) {
                return Some(format!("{place}: the payload changed the set of files"));
            }
            for (a, b) in twin.plan.files.iter().zip(&attacked.plan.files) {
                let twin_shape = shape(&a.path, &a.contents, replaced_key.map(|()| TWIN));
                let attacked_shape = shape(&b.path, &b.contents, replaced_key.map(|()| payload));
                if twin_shape != attacked_shape {
                    let first = twin_shape
                        .iter()
                        .zip(&attacked_shape)
                        .position(|(x, y)| x != y)
                        .unwrap_or(twin_shape.len().min(attacked_shape.len()));
                    let around = |shape: &[String]| {
                        shape[first.saturating_sub(12)..(first + 4).min(shape.len())].join(" ")
                    };
                    return Some(format!(
                        "{place}: {} differs in shape from the twin's with {payload:?}: `{}` vs `{}`",
                        b.path.display(),
                        around(&twin_shape),
                        around(&attacked_shape)
                    ));
                }
            }
            None
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("injection")
        .join(name);
    std::fs::create_dir_all(&dir).expect("creating a scratch folder");
    dir
}

/// Runs every payload at every leaf of `input`, on `threads` threads.
fn attack(input: Input) -> Vec<String> {
    let documents = [
        parse_yaml(CRD),
        parse_yaml(RELATED_CRD),
        parse_yaml(MANIFEST),
        parse_yaml(DERIVED_MANIFEST),
        parse_yaml(DYNAMIC_MANIFEST),
        parse_yaml(GENERIC_MANIFEST),
    ];
    let (target, manifest) = match input {
        Input::Crd => (0, 2),
        Input::RelatedCrd => (1, 2),
        Input::Manifest => (2, 2),
        Input::DerivedManifest => (3, 3),
        Input::DynamicCrd => (0, 4),
        Input::GenericManifest => (5, 5),
    };
    let mut all = Vec::new();
    leaves(&documents[target], &mut Vec::new(), &mut all);
    let payloads = payloads();
    let threads = 2;
    let chunks: Vec<Vec<Leaf>> = (0..threads)
        .map(|t| all.iter().skip(t).step_by(threads).cloned().collect())
        .collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .enumerate()
            .map(|(t, leaves)| {
                let documents = &documents;
                let payloads = &payloads;
                scope.spawn(move || {
                    let dir = scratch(&format!("{input:?}-{t}"));
                    let mut problems = Vec::new();
                    let run = |text: &str, leaf: &Leaf| {
                        let mut inputs = documents.clone();
                        inputs[target] = replaced(&documents[target], leaf, text);
                        generate(&dir, &inputs[0], &inputs[1], &inputs[manifest])
                    };
                    for leaf in &leaves {
                        let twin = run(TWIN, leaf);
                        for payload in payloads {
                            let attacked = run(payload, leaf);
                            problems.extend(judge(leaf, payload, &twin, &attacked));
                        }
                    }
                    problems
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("an attack thread finished"))
            .collect()
    })
}

fn assert_no_problems(input: Input) {
    let problems = attack(input);
    assert!(
        problems.is_empty(),
        "{} of the payload runs on the {input:?} broke the injection property:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn no_crd_text_becomes_code_or_configuration() {
    assert_no_problems(Input::Crd);
}

#[test]
fn no_related_crd_text_becomes_code_or_configuration() {
    assert_no_problems(Input::RelatedCrd);
}

#[test]
fn no_manifest_text_becomes_code_or_configuration() {
    assert_no_problems(Input::Manifest);
}

#[test]
fn no_derived_manifest_text_becomes_code_or_configuration() {
    assert_no_problems(Input::DerivedManifest);
}

#[test]
fn no_dynamic_crd_text_becomes_code_or_configuration() {
    assert_no_problems(Input::DynamicCrd);
}

#[test]
fn no_generic_manifest_text_becomes_code_or_configuration() {
    assert_no_problems(Input::GenericManifest);
}

#[test]
fn the_base_inputs_generate_and_every_leaf_is_visited() {
    let dir = scratch("base");
    let generated = generate(
        &dir,
        &parse_yaml(CRD),
        &parse_yaml(RELATED_CRD),
        &parse_yaml(MANIFEST),
    )
    .expect("the base inputs generate");
    assert!(
        generated
            .plan
            .files
            .iter()
            .any(|f| f.path.ends_with("src/controller.rs"))
    );
    let derived = generate(
        &dir,
        &parse_yaml(CRD),
        &parse_yaml(RELATED_CRD),
        &parse_yaml(DERIVED_MANIFEST),
    )
    .expect("the derived manifest generates");
    for file in ["src/conversion.rs", "src/admission.rs", "src/bin/crdgen.rs"] {
        assert!(
            derived.plan.files.iter().any(|f| f.path.ends_with(file)),
            "the derived manifest renders {file}"
        );
    }
    for (manifest, file) in [
        (DYNAMIC_MANIFEST, "src/admission.rs"),
        (GENERIC_MANIFEST, "src/controller.rs"),
    ] {
        let generated = generate(
            &dir,
            &parse_yaml(CRD),
            &parse_yaml(RELATED_CRD),
            &parse_yaml(manifest),
        )
        .unwrap_or_else(|e| panic!("{manifest} generates: {e}"));
        assert!(generated.plan.files.iter().any(|f| f.path.ends_with(file)));
    }
    let mut found = Vec::new();
    leaves(&parse_yaml(MANIFEST), &mut Vec::new(), &mut found);
    let dotted: Vec<String> = found.iter().map(Leaf::dotted).collect();
    for expected in [
        "name",
        "watches[2].map.field",
        "dependencies.reqwest.features[0]",
        "sample.spec.label",
        "runtime.path",
    ] {
        assert!(
            dotted.contains(&expected.to_owned()),
            "{expected} not visited: {dotted:?}"
        );
    }
}

#[test]
fn files_are_the_same_whatever_the_paths_on_the_command_line() {
    let payload_dir = payloads()[0].replace(['/', '\0'], "_");
    let base = parse_yaml(MANIFEST);
    let run = |dir: &Path, out: PathBuf| {
        std::fs::create_dir_all(dir).expect("creating the input folder");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.join(name), text).expect("writing an input")
        };
        write("gadget.yaml", CRD);
        write("widget.yaml", RELATED_CRD);
        write(
            "operator.yaml",
            &serde_saphyr::to_string(&base).expect("serializes"),
        );
        let job = Job {
            crd: Some(dir.join("gadget.yaml").display().to_string()),
            manifest: Some(dir.join("operator.yaml")),
            ..Job::new(out)
        };
        operator_gen::generate(&job.request().expect("a request")).expect("generates")
    };
    let plain_dir = scratch("paths-plain");
    let hostile_dir = scratch("paths-hostile").join(payload_dir);
    let plain = run(&plain_dir, plain_dir.join("out"));
    let slashed = run(
        &plain_dir,
        PathBuf::from(format!("{}/", plain_dir.join("out").display())),
    );
    let relative = run(&plain_dir, PathBuf::from("out"));
    let hostile = run(&hostile_dir, hostile_dir.join("out\n[patch]"));
    for other in [&slashed, &relative, &hostile] {
        assert_eq!(
            plain.plan, other.plan,
            "generated files depend on the paths typed"
        );
    }
    for file in &hostile.plan.files {
        assert!(
            is_printable(&file.contents.replace(['\n', '\t'], " ")),
            "{} holds control characters",
            file.path.display()
        );
    }
}

/// A first `gen --crd` writes the CRD's path into a new `operator.yaml`: whatever the path
/// holds stays one scalar there, the manifest gains no key, and it leads back to the CRD, so a
/// run with no flags finds the crate current.
#[test]
fn a_first_run_records_a_hostile_crd_path_as_one_scalar_that_leads_back() {
    for (i, payload) in payloads().iter().enumerate() {
        let folder = payload.replace(['/', '\0'], "_");
        let root = scratch(&format!("first-run-{i}"));
        std::fs::remove_dir_all(&root).expect("clearing an earlier run");
        let inputs = root.join(&folder);
        std::fs::create_dir_all(&inputs).expect("creating the input folder");
        std::fs::write(inputs.join("gadget.yaml"), CRD).expect("writing the CRD");
        let out = root.join("out");
        let first = Job {
            crd: Some(inputs.join("gadget.yaml").display().to_string()),
            ..Job::new(&out)
        };
        first
            .run(Mode::Write { force: false })
            .unwrap_or_else(|e| panic!("payload {payload:?}: {e}"));

        let text = std::fs::read_to_string(out.join("operator.yaml")).expect("recorded");
        let manifest = parse_yaml(&text);
        let keys = |value: &Value| -> Vec<String> {
            value
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        };
        assert_eq!(keys(&manifest), ["name", "primary"], "{text}");
        assert_eq!(
            keys(&manifest["primary"]),
            ["crd", "kind", "version"],
            "{text}"
        );
        assert_eq!(
            manifest["primary"]["crd"],
            Value::String(format!("../{folder}/gadget.yaml")),
            "{text}"
        );
        let (_, report) = Job::new(&out)
            .run(Mode::Check)
            .unwrap_or_else(|e| panic!("payload {payload:?}: {e}"));
        assert!(
            report.changed().is_empty(),
            "payload {payload:?}: {report:?}"
        );
    }
}

/// The same shape as the twin's in every file, or a printable refusal; `None` when so.
fn compare(
    place: &str,
    payload: &str,
    twin: &operator_gen::Result<Generated>,
    attacked: &operator_gen::Result<Generated>,
) -> Option<String> {
    let twin = twin
        .as_ref()
        .map_err(|e| format!("{place}: the twin was refused: {e}"));
    let twin = match twin {
        Ok(twin) => twin,
        Err(problem) => return Some(problem),
    };
    let attacked = match attacked {
        Ok(attacked) => attacked,
        Err(error) => {
            let message = error.to_string();
            return (!is_printable(&message) || message.contains("bug in operator-gen"))
                .then(|| format!("{place}: refused badly with {payload:?}: {message:?}"));
        }
    };
    for (a, b) in twin.plan.files.iter().zip(&attacked.plan.files) {
        if shape(&a.path, &a.contents, Some(TWIN)) != shape(&b.path, &b.contents, Some(payload)) {
            return Some(format!(
                "{place}: {} differs in shape from the twin's with {payload:?}",
                b.path.display()
            ));
        }
    }
    None
}

/// Values the generator reads out of other values, which the one-leaf-at-a-time attack cannot
/// reach whole: the name a CEL rule pins (`self.metadata.name == '…'`, printed as the sample's
/// name), and a field path that is at once a property key, a `selectableFields` path and a
/// manifest field (printed as a watch's field selector). Each is the payload in every place at
/// once, and the files must keep the twin's shape.
#[test]
fn a_pinned_sample_name_and_a_field_selector_stay_escaped() {
    let dir = scratch("read-out-of-values");
    let cel_string = |text: &str| {
        text.replace('\\', "\\\\")
            .replace('\'', "\\'")
            .replace('\n', "\\n")
            .replace('\r', "\\r")
            .replace('\t', "\\t")
    };
    let pinned = |name: &str| {
        let mut crd = parse_yaml(CRD);
        let rule = format!("self.metadata.name == '{}'", cel_string(name));
        // versions[1] is v1, the manifest's.
        crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] =
            serde_json::json!([{ "rule": rule }]);
        // The name is the generator's choice only where the manifest gives no `sample:`.
        let mut manifest = parse_yaml(MANIFEST);
        if let Some(fields) = manifest.as_object_mut() {
            fields.remove("sample");
        }
        generate(&dir, &crd, &parse_yaml(RELATED_CRD), &manifest)
    };
    let selected = |key: &str| {
        let mut related = parse_yaml(RELATED_CRD);
        let version = &mut related["spec"]["versions"][0];
        version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] =
            serde_json::json!({ key: { "type": "string" } });
        version["selectableFields"] = serde_json::json!([{ "jsonPath": format!(".spec.{key}") }]);
        let mut manifest = parse_yaml(MANIFEST);
        manifest["watches"] = serde_json::json!([
            { "kind": "Widget", "crd": "widget.yaml", "map": { "field": format!("spec.{key}") } }
        ]);
        generate(&dir, &parse_yaml(CRD), &related, &manifest)
    };
    let twin_name = pinned(TWIN);
    let twin_field = selected(TWIN);
    let printed = |generated: &operator_gen::Result<Generated>, file: &str, text: &str| {
        generated.as_ref().is_ok_and(|g| {
            g.plan
                .files
                .iter()
                .any(|f| f.path.ends_with(file) && f.contents.contains(text))
        })
    };
    assert!(
        printed(
            &twin_name,
            "src/manifest.rs",
            &format!("{TWIN:?}, namespace")
        ),
        "the twin's pinned name is the sample's"
    );
    assert!(
        printed(
            &twin_field,
            "src/controller.rs",
            &format!(".fields(\"spec.{TWIN}!=\")")
        ),
        "the twin's watch carries its field selector"
    );
    let (mut problems, mut generated) = (Vec::new(), [0, 0]);
    for payload in payloads() {
        let attacked = [pinned(&payload), selected(&payload)];
        let twins = [
            ("a pinned name", &twin_name),
            ("a selectable field", &twin_field),
        ];
        for (i, (place, twin)) in twins.into_iter().enumerate() {
            generated[i] += usize::from(attacked[i].is_ok());
            problems.extend(compare(place, &payload, twin, &attacked[i]));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        generated.iter().all(|&n| n > 0),
        "some payloads must get through to be printed, not only be refused: {generated:?}"
    );
}
