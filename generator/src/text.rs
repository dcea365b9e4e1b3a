//! The only values a template can print: text already escaped for the place it goes.
//!
//! A CRD, a manifest and a command line are text from strangers, and a generated crate is
//! built and run on the user's machine, so none of that text may become code or
//! configuration. Rather than trusting every template to escape every value, the model
//! carries no printable raw string at all: each value is one of the types here, built in one
//! place and escaped for one output language. Each serializes into the template context as a
//! Tera *safe* string, and [`crate::render`] turns on autoescaping with an escape function
//! that refuses, so a raw string reaching `{{ }}` fails the render instead of pasting text
//! into a file (see `render::refuse_raw_text`).
//!
//! - [`Ident`], [`RustPath`]: Rust identifiers and paths, valid by construction.
//! - [`Text`]: any outside text, printed only through one of its escaped forms: `.rs` (a Rust
//!   string literal, also for `#[doc = …]`), `.comment` (one line for `//`, `///` or `#`),
//!   `.toml`, `.yaml` (each from that language's serializer), `.md` (a Markdown code span) and
//!   `.plain`, present only for inert text such as validated names.
//! - [`Code`]: Rust source the generator built and parsed; [`TomlValue`], [`YamlDocument`] and
//!   [`JsonDocument`]: output of the TOML, YAML and JSON serializers; [`Constant`]: the
//!   generator's own text; [`GoTemplate`]: the generator's own Helm actions.

use std::fmt;

use serde::{Serialize, Serializer};

/// `value` as one line of printable text: input reaches messages (a path, a field name, a
/// parser's complaint quoting the input), and a message must not be able to rewrite the
/// terminal it is printed on or pass for more than one line.
pub(crate) fn shown(value: &dyn fmt::Display) -> String {
    Text::new(value.to_string()).comment()
}

/// `path` as [`shown`] prints text, with each byte that is not UTF-8 as `\xNN`: a path is
/// bytes, and printing it lossily (`�`) would name a file that is not there.
pub fn shown_path(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        out.push_str(&Text::new(chunk.valid().to_owned()).comment());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

/// Serializes `text` as a Tera safe string: printed as it is, where a plain string would be
/// refused. Outside Tera it is an ordinary string.
fn safe<S: Serializer>(text: &str, serializer: S) -> Result<S::Ok, S::Error> {
    tera::Value::safe_string(text).serialize(serializer)
}

/// Implements `Serialize` (as a safe string), `Display` and `as_str` for a newtype over
/// `String` or `&'static str` whose content is already fit for its output language.
macro_rules! printable {
    ($type:ident) => {
        impl $type {
            /// The text as it is printed.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                safe(&self.0, serializer)
            }
        }

        impl fmt::Display for $type {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

/// A Rust identifier (possibly raw, `r#type`), checked by the Rust parser when made.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ident(String);
printable!(Ident);

impl Ident {
    /// `name` as an identifier, or `None` when the Rust parser does not take it as one.
    /// Names are decided in [`crate::naming`], which only ever asks for valid ones.
    pub fn parse(name: &str) -> Option<Self> {
        syn::parse_str::<syn::Ident>(name)
            .ok()
            .map(|_| Self(name.to_owned()))
    }

    /// A name that is always an identifier, for the case where a builder made none.
    pub(crate) fn placeholder() -> Self {
        Self("unnamed".to_owned())
    }

    /// An identifier written in the generator's own source; like [`RustPath::constant`], it
    /// cannot carry input.
    pub(crate) fn constant(name: &'static str) -> Self {
        debug_assert!(Self::parse(name).is_some(), "{name} is not an identifier");
        Self(name.to_owned())
    }
}

impl PartialEq<&str> for Ident {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// A Rust path such as `k8s_openapi::api::core::v1::ConfigMap`: identifiers joined by `::`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RustPath(String);
printable!(RustPath);

impl RustPath {
    /// `path` when every segment is an identifier (or `crate`, `self`, `super`).
    pub fn parse(path: &str) -> Option<Self> {
        let ok = path.split("::").all(|segment| {
            matches!(segment, "crate" | "self" | "super") || Ident::parse(segment).is_some()
        });
        ok.then(|| Self(path.to_owned()))
    }

    /// A path written in the generator's own source. Input is never `'static`, so this
    /// cannot carry it; a malformed constant is a generator bug that tests catch.
    pub fn constant(path: &'static str) -> Self {
        debug_assert!(Self::parse(path).is_some(), "{path} is not a Rust path");
        Self(path.to_owned())
    }

    /// This path with `ident` appended.
    pub fn join(&self, ident: &Ident) -> Self {
        Self(format!("{}::{ident}", self.0))
    }

    /// The last segment.
    pub fn last(&self) -> &str {
        self.0.rsplit("::").next().unwrap_or(&self.0)
    }
}

/// Text fixed in the generator's source: RBAC verbs, reasons, constant choices. It cannot
/// hold input, because input is never `'static`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Constant(pub &'static str);
printable!(Constant);

/// Rust source the generator assembled: items whose every piece of input was placed as an
/// identifier or an escaped literal, proven to be Rust tokens with balanced delimiters.
///
/// Balance is what makes it safe to print inside an item (`pub mod v1 { ... }`): it cannot
/// close that item early. The file it is printed in is then parsed as a whole and laid out by
/// prettyplease ([`crate::render`]), which proves it is Rust items; doing that here as well
/// would parse and format the largest file of a crate twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code(String);
printable!(Code);

impl Code {
    /// `source`, once the Rust lexer has read it whole.
    ///
    /// # Errors
    ///
    /// The lexer's error when `source` is not Rust tokens or a delimiter is left open or
    /// closed unopened.
    pub fn lexed(source: String) -> Result<Self, proc_macro2::LexError> {
        source.parse::<proc_macro2::TokenStream>()?;
        Ok(Self(source))
    }

    /// `source` the generator composed only of its own tokens and escaped literals
    /// ([`Text::rs`]), which lex whatever the input was.
    ///
    /// # Panics
    /// When `source` does not lex: a bug in the code that composed it, never input.
    pub(crate) fn composed(source: String) -> Self {
        match Self::lexed(source) {
            Ok(code) => code,
            Err(error) => panic!("the generator composed code that does not lex: {error}"),
        }
    }

    /// No code at all: what an optional piece prints when it is absent.
    pub(crate) fn empty() -> Self {
        Self(String::new())
    }

    /// `<ty>`: `ty` as the one generic argument of a type, which is Rust tokens because a
    /// [`RustPath`] is.
    pub(crate) fn type_arguments(ty: &RustPath) -> Self {
        Self(format!("<{ty}>"))
    }
}

/// A TOML value written by the TOML serializer, or a constant the generator wrote as TOML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TomlValue(String);
printable!(TomlValue);

impl TomlValue {
    /// `value` in TOML syntax (an inline table for a table).
    pub fn new(value: &toml::Value) -> Self {
        Self(value.to_string())
    }

    /// TOML the generator wrote in its own source.
    pub fn constant(toml: &'static str) -> Self {
        Self(toml.to_owned())
    }

    /// An inline table of `entries`, in their order (the serializer would sort the keys): the
    /// keys are the generator's own, each value is written by the TOML serializer.
    pub fn inline_table(entries: &[(&'static str, toml::Value)]) -> Self {
        let entries: Vec<String> = entries
            .iter()
            .map(|(key, value)| format!("{key} = {value}"))
            .collect();
        Self(format!("{{ {} }}", entries.join(", ")))
    }
}

/// A whole YAML document written by the YAML serializer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlDocument(String);
printable!(YamlDocument);

impl YamlDocument {
    /// `value` as a YAML document. Long single-line strings (CRD descriptions, patterns) stay
    /// on one line rather than being folded at 80 columns; text with line breaks becomes a
    /// literal block.
    ///
    /// A string holding a hidden character ([`is_hidden`]: bidi controls, zero-width and other
    /// characters Rust's `Debug` escapes) is written double-quoted with that character
    /// escaped, as YAML would otherwise keep it raw, where it can reorder or hide what a
    /// reviewer reads. Such a document's mappings come out with sorted keys.
    pub fn new(value: &impl Serialize) -> Result<Self, serde_saphyr::ser::Error> {
        let yaml = plain_yaml(value)?;
        if !yaml.chars().any(is_hidden) {
            return Ok(Self(yaml));
        }
        let mut value = serde_json::to_value(value)
            .map_err(|e| serde_saphyr::ser::Error::from(e.to_string()))?;
        // Each string with a hidden character is swapped for a placeholder the serializer
        // writes as a plain scalar, which is then replaced by the escaped string.
        let mut prefix = "operator-gen-hidden-".to_owned();
        while yaml.contains(&prefix) {
            prefix.push('x');
        }
        let mut swapped = Vec::new();
        swap_hidden(&mut value, &prefix, &mut swapped);
        let mut yaml = plain_yaml(&value)?;
        for (i, original) in swapped.iter().enumerate() {
            yaml = yaml.replace(&format!("{prefix}{i}z"), &yaml_escaped(original));
        }
        Ok(Self(yaml))
    }
}

impl YamlDocument {
    /// YAML the generator assembled from its own keys and comments and the serializer's
    /// values, such as a chart's commented `values.yaml`.
    pub(crate) fn assembled(yaml: String) -> Self {
        Self(yaml)
    }
}

/// A whole JSON document written by the JSON serializer, laid out two spaces deep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonDocument(String);
printable!(JsonDocument);

impl JsonDocument {
    pub fn new(value: &serde_json::Value) -> Self {
        // A `Value` always serializes.
        Self(serde_json::to_string_pretty(value).unwrap_or_default())
    }
}

/// Helm template code the generator composed: its own actions, in which text from the model
/// appears only as Go string literals (`go_template::string`). Printed into a chart, where
/// everything else from the model is a literal (`go_template::literal_context`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoTemplate(String);
printable!(GoTemplate);

impl GoTemplate {
    pub(crate) fn composed(template: String) -> Self {
        Self(template)
    }
}

fn plain_yaml(value: &impl Serialize) -> Result<String, serde_saphyr::ser::Error> {
    let mut options = serde_saphyr::SerializerOptions::default();
    options.folded_wrap_chars = usize::MAX;
    serde_saphyr::to_string_with_options(value, options)
}

/// Replaces every string (key or value) of `value` holding a hidden character with
/// `{prefix}{n}z`, pushing the original to `swapped` as the `n`th.
fn swap_hidden(value: &mut serde_json::Value, prefix: &str, swapped: &mut Vec<String>) {
    let swap = |text: String, swapped: &mut Vec<String>| {
        if !text.chars().any(is_hidden) {
            return text;
        }
        swapped.push(text);
        format!("{prefix}{}z", swapped.len() - 1)
    };
    match value {
        serde_json::Value::String(text) => *text = swap(std::mem::take(text), swapped),
        serde_json::Value::Array(items) => {
            for item in items {
                swap_hidden(item, prefix, swapped);
            }
        }
        serde_json::Value::Object(map) => {
            for (key, mut item) in std::mem::take(map) {
                swap_hidden(&mut item, prefix, swapped);
                map.insert(swap(key, swapped), item);
            }
        }
        _ => {}
    }
}

/// Whether a character is one Rust's `Debug` escapes: a control, a bidi or other format
/// character, a separator other than the space. YAML keeps these raw unless escaped.
fn is_hidden(c: char) -> bool {
    c.is_ascii_control() && !matches!(c, '\n' | '\t') || !c.is_ascii() && c.escape_debug().len() > 1
}

/// `text` as a double-quoted YAML scalar with `"`, `\\`, line breaks and every hidden
/// character escaped, on one line.
fn yaml_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if is_hidden(c) && u32::from(c) <= 0xffff => {
                out.push_str(&format!("\\u{:04X}", u32::from(c)));
            }
            c if is_hidden(c) => out.push_str(&format!("\\U{:08X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Outside text. Templates print it only through one of its escaped forms, chosen for the
/// place it goes; printing the value itself is refused at render time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Text(String);

impl Text {
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The text itself, for the generator's decisions; never for output.
    pub fn raw(&self) -> &str {
        &self.0
    }

    /// A Rust string literal with this value: quotes, backslashes, control and invisible
    /// characters escaped (the grammar of `str`'s `Debug`). Also the argument of `#[doc = …]`.
    pub fn rs(&self) -> String {
        format!("{:?}", self.0)
    }

    /// One line for a comment in any language (`//`, `///`, `//!`, `#`): control characters,
    /// line and paragraph separators and bidirectional-text controls become `\u{…}`, so the
    /// text can neither end the line nor display as something other than what it is (rustc
    /// refuses a bidirectional override in a comment outright).
    pub fn comment(&self) -> String {
        let mut out = String::with_capacity(self.0.len());
        for c in self.0.chars() {
            if is_invisible(c) {
                out.extend(c.escape_unicode());
            } else {
                out.push(c);
            }
        }
        out
    }

    /// A TOML string, from the TOML serializer.
    pub fn toml(&self) -> String {
        toml::Value::String(self.0.clone()).to_string()
    }

    /// A YAML scalar from the YAML serializer, kept on one line and double-quoted whenever it
    /// holds anything a flow collection (`[a, b]`) would read as syntax.
    pub fn yaml(&self) -> String {
        if self.0.chars().any(is_hidden) {
            return yaml_escaped(&self.0);
        }
        let plain = serde_saphyr::to_string(&self.0).unwrap_or_default();
        let plain = plain.trim_end_matches('\n');
        let quoted = plain.starts_with(['"', '\'']);
        if !plain.is_empty()
            && !plain.contains('\n')
            && (quoted || !plain.contains([',', '[', ']', '{', '}']))
        {
            return plain.to_owned();
        }
        serde_saphyr::to_string(&serde_saphyr::DoubleQuoted(self.0.as_str()))
            .map(|s| s.trim_end_matches('\n').to_owned())
            .unwrap_or_else(|_| serde_json::Value::from(self.0.as_str()).to_string())
    }

    /// A Markdown code span of the comment form: a backtick fence longer than any run of
    /// backticks inside, and `|` escaped so a table cell stays one cell.
    pub fn md(&self) -> String {
        let text = self.comment().replace('|', "\\|");
        let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
        let fence = "`".repeat(longest + 1);
        let pad = if text.starts_with('`') || text.ends_with('`') {
            " "
        } else {
            ""
        };
        format!("{fence}{pad}{text}{pad}{fence}")
    }

    /// The text itself when it is inert in every output language: ASCII letters, digits and
    /// `.`, `-`, `_`, `/`, starting with a letter or digit, as names checked against the
    /// Kubernetes and cargo rules are.
    pub fn plain(&self) -> Option<&str> {
        let inert = self.0.len() <= 253
            && self.0.starts_with(|c: char| c.is_ascii_alphanumeric())
            && self
                .0
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'));
        inert.then_some(self.0.as_str())
    }
}

/// Characters that end or reorder a line of text without showing themselves.
fn is_invisible(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{feff}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let forms = [
            self.rs(),
            self.comment(),
            self.toml(),
            self.yaml(),
            self.md(),
        ];
        Forms(&forms, self.plain()).serialize(serializer)
    }
}

/// The escaped forms of a [`Text`], as templates see them: a map whose values are safe
/// strings, so `{{ name }}` alone prints a map and is refused, and `{{ name.yaml }}` prints.
struct Forms<'a>(&'a [String; 5], Option<&'a str>);

impl Serialize for Forms<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let [rs, comment, toml, yaml, md] = self.0;
        let mut forms = serializer.serialize_struct("Forms", 6)?;
        forms.serialize_field("rs", &SafeStr(rs))?;
        forms.serialize_field("comment", &SafeStr(comment))?;
        forms.serialize_field("toml", &SafeStr(toml))?;
        forms.serialize_field("yaml", &SafeStr(yaml))?;
        forms.serialize_field("md", &SafeStr(md))?;
        match self.1 {
            Some(plain) => forms.serialize_field("plain", &SafeStr(plain))?,
            None => forms.skip_field("plain")?,
        }
        forms.end()
    }
}

/// A borrowed, already escaped string serialized as safe.
struct SafeStr<'a>(&'a str);

impl Serialize for SafeStr<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        safe(self.0, serializer)
    }
}

impl fmt::Display for Text {
    /// The comment form: safe to show a person on one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.comment())
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_path_that_is_not_utf8_is_shown_byte_for_byte() {
        use std::os::unix::ffi::OsStrExt as _;
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(b"out/\xff\xfeop\n"));
        assert_eq!(super::shown_path(path), "out/\\xff\\xfeop\\u{a}");
    }

    use super::*;

    #[test]
    fn code_that_could_close_the_item_it_is_printed_in_is_refused() {
        let items = "pub struct A;\n/// Docs.\npub enum B { C }\n";
        assert_eq!(Code::lexed(items.to_owned()).unwrap().as_str(), items);
        for unbalanced in [
            "} pub fn escaped() {",
            "pub struct A { a: u8",
            "const S: &str = \"open;",
        ] {
            assert!(Code::lexed(unbalanced.to_owned()).is_err(), "{unbalanced}");
        }
    }

    #[test]
    fn hidden_characters_are_escaped_in_yaml_and_read_back_the_same() {
        let hostile = "a\u{202e}b\u{200b}c\u{a0}d \"q\" \\ \r\u{2066}e\u{feff}";
        let scalar = Text::from(hostile).yaml();
        assert!(!scalar.chars().any(is_hidden), "{scalar}");
        assert_eq!(serde_saphyr::from_str::<String>(&scalar).unwrap(), hostile);

        let value =
            serde_json::json!({"b": [hostile, "plain"], hostile: {"k": "multi\nline\u{202e}"}});
        let document = YamlDocument::new(&value).unwrap();
        assert!(!document.as_str().chars().any(is_hidden), "{document}");
        let back: serde_json::Value = serde_saphyr::from_str(document.as_str()).unwrap();
        assert_eq!(back, value, "{document}");
        // Text without hidden characters is written as before.
        #[derive(Serialize)]
        struct Ordered {
            z: &'static str,
            a: &'static str,
        }
        let plain = Ordered {
            z: "tab\there",
            a: "caf\u{e9} \u{2019}",
        };
        let document = YamlDocument::new(&plain).unwrap();
        assert!(document.as_str().starts_with("z:"), "{document}");
    }

    const HOSTILE: &[&str] = &[
        "plain",
        "quote \" and \\ backslash",
        "\"#; panic!(); r#\"",
        "*/ \n\t\r\u{0}",
        "line\u{2028}separator\u{2029}",
        "bidi \u{202e}override",
        "`tick` ```fence",
        "{{ x }} {% if %}",
        "#![no_std]",
        "[patch.crates-io]\nkube = { path = \"/tmp\" }",
        "---\nkind: Secret",
        "]]",
        "é ✓ ²",
        "",
    ];

    #[test]
    fn the_rust_form_is_a_literal_with_the_same_value() {
        for text in HOSTILE {
            let literal: syn::LitStr = syn::parse_str(&Text::from(*text).rs()).unwrap();
            assert_eq!(literal.value(), *text);
            let doc = format!("#[doc = {}] struct S;", Text::from(*text).rs());
            syn::parse_file(&doc).unwrap();
        }
    }

    #[test]
    fn the_comment_form_stays_one_printable_line() {
        for text in HOSTILE {
            let comment = Text::from(*text).comment();
            assert!(!comment.chars().any(is_invisible), "{comment:?}");
            let file = format!("// {comment}\n/// {comment}\nstruct S;\n");
            let parsed = syn::parse_file(&file).unwrap();
            assert_eq!(parsed.items.len(), 1, "{comment:?}");
        }
        assert_eq!(Text::from("a\nb").comment(), "a\\u{a}b");
        assert_eq!(Text::from("’quoted’ é ✓").comment(), "’quoted’ é ✓");
    }

    #[test]
    fn the_toml_form_parses_back_to_the_same_string() {
        for text in HOSTILE {
            let document = format!("key = {}\nother = 1\n", Text::from(*text).toml());
            let table: toml::Table = document.parse().unwrap();
            assert_eq!(table["key"].as_str(), Some(*text));
            assert_eq!(table.len(), 2);
        }
    }

    #[test]
    fn the_yaml_form_parses_back_in_block_and_flow_position() {
        for text in HOSTILE
            .iter()
            .chain(&["yes", "null", "123", "a, b", "- x", "x: y"])
        {
            let yaml = Text::from(*text).yaml();
            assert!(!yaml.contains('\n'), "{yaml}");
            let block = format!("key: {yaml}\nother: 1\n");
            let value: serde_json::Value = serde_saphyr::from_str(&block).unwrap();
            assert_eq!(value["key"], *text, "{block}");
            let flow = format!("key: [{yaml}, z]\n");
            let value: serde_json::Value = serde_saphyr::from_str(&flow).unwrap();
            assert_eq!(value["key"][0], *text, "{flow}");
            assert_eq!(value["key"].as_array().map(Vec::len), Some(2));
        }
    }

    #[test]
    fn the_markdown_form_is_one_code_span() {
        assert_eq!(Text::from("a`b").md(), "``a`b``");
        assert_eq!(Text::from("`a").md(), "`` `a ``");
        assert_eq!(Text::from("a|b").md(), "`a\\|b`");
        assert!(!Text::from("a\nb").md().contains('\n'));
    }

    #[test]
    fn only_inert_text_has_a_plain_form() {
        assert_eq!(
            Text::from("prometheusrules.monitoring.coreos.com").plain(),
            Some("prometheusrules.monitoring.coreos.com")
        );
        for text in ["a b", "-x", "a\"", "", "x\n"] {
            assert_eq!(Text::from(text).plain(), None, "{text:?}");
        }
    }

    #[test]
    fn identifiers_and_paths_are_checked() {
        assert!(Ident::parse("config_map").is_some());
        assert!(Ident::parse("r#type").is_some());
        for bad in ["type", "a b", "x²", "", "9a", "a::b"] {
            assert!(Ident::parse(bad).is_none(), "{bad}");
        }
        assert!(RustPath::parse("crate::types::v1::Widget").is_some());
        assert!(RustPath::parse("k8s_openapi::api::core::v1::ConfigMap").is_some());
        assert!(RustPath::parse("a::b c").is_none());
        assert!(RustPath::parse("a;b").is_none());
    }
}
