//! Text for Helm's templates, which are Go templates: every file under a chart's `templates/`
//! is parsed by `text/template` before its YAML is, so a `{{` anywhere in it, a CRD's
//! description or a Grafana legend included, starts an action.
//!
//! The chart renders the same Tera templates as the kustomize base, from the same model, with
//! every printable value of the model made a Go template literal first ([`literal_context`]):
//! nothing from a CRD, a manifest or a command line can become template syntax. The only
//! actions in a chart are the generator's own: its templates' text, and the conditions of
//! [`crate::model::chart::HelmHooks`], added after the escaping.

use tera::Value;

use crate::text::GoTemplate;

/// The action that prints `{{`: what a literal `{{` becomes.
const OPEN: &str = r#"{{ "{{" }}"#;

/// The action that prints `{`: what a `{` that ends a literal becomes.
const BRACE: &str = r#"{{ "{" }}"#;

/// `text` as Go template text that prints exactly `text`. Only `{{` opens an action (Helm
/// keeps Go's default delimiters), so each is replaced, left to right, by an action printing
/// it; a `}}` outside an action is plain text. A `{` that ends the text is printed by an
/// action too, so that a literal never ends in `{`: printed before another literal, or before
/// a `{` of its template, it cannot make a `{{`. (No template prints a `{` just before a
/// value, which a literal could not guard against.)
pub fn literal(text: &str) -> String {
    let escaped = text.replace("{{", OPEN);
    match escaped.strip_suffix('{') {
        Some(rest) => format!("{rest}{BRACE}"),
        None => escaped,
    }
}

/// `text` as a Go string literal, for an argument of an action (`fail "…"`): Go's escapes for
/// the quote, the backslash and control characters.
pub fn string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Text that names the operator's namespace inside it, such as a Service's DNS name or its
/// ServiceAccount's user name: what comes before the namespace and what comes after. `deploy/`
/// prints it with the namespace the generator chose; a chart with its release's, so that the
/// chart installs into any namespace (`helm install --namespace`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AroundNamespace {
    before: String,
    after: String,
}

impl AroundNamespace {
    /// Text that is the namespace and nothing else.
    pub fn alone() -> Self {
        Self::new("", "")
    }

    pub fn new(before: impl Into<String>, after: impl Into<String>) -> Self {
        Self {
            before: before.into(),
            after: after.into(),
        }
    }

    /// The text with `namespace` in its place.
    pub fn with(&self, namespace: &str) -> String {
        format!("{}{namespace}{}", self.before, self.after)
    }

    /// The action that prints the text with the release's namespace in its place, as one
    /// quoted YAML scalar. The text around it reaches the action only as Go string literals.
    pub fn in_release(&self) -> GoTemplate {
        let mut operands = Vec::new();
        if !self.before.is_empty() {
            operands.push(string(&self.before));
        }
        operands.push(".Release.Namespace".to_owned());
        if !self.after.is_empty() {
            operands.push(string(&self.after));
        }
        let printed = match operands.len() {
            1 => ".Release.Namespace".to_owned(),
            // Go's `print` adds no space between operands of which one is a string.
            _ => format!("print {}", operands.join(" ")),
        };
        GoTemplate::composed(format!("{{{{ {printed} | quote }}}}"))
    }
}

/// A template context with every printable (safe) string made a [`literal`]. Strings that are
/// not safe stay as they are: no template can print them (see [`crate::text`]).
pub fn literal_context(value: &Value) -> Value {
    if let Some(text) = value.as_str() {
        return match value.is_safe() {
            true => Value::safe_string(&literal(text)),
            false => value.clone(),
        };
    }
    if let Some(items) = value.as_array() {
        return Value::from(items.iter().map(literal_context).collect::<Vec<_>>());
    }
    if let Some(map) = value.as_map() {
        return Value::from(
            map.iter()
                .map(|(key, value)| (key.clone(), literal_context(value)))
                .collect::<std::collections::HashMap<_, _>>(),
        );
    }
    value.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_opening_delimiter_becomes_an_action_that_prints_it() {
        assert_eq!(literal("plain }} text"), "plain }} text");
        assert_eq!(literal("{{ .Values.x }}"), r#"{{ "{{" }} .Values.x }}"#);
        assert_eq!(literal("{{{"), r#"{{ "{{" }}{{ "{" }}"#);
        assert_eq!(literal("{{"), r#"{{ "{{" }}"#);
        assert_eq!(literal("{{{{-"), r#"{{ "{{" }}{{ "{{" }}-"#);
        assert_eq!(literal("a{b"), "a{b");
    }

    #[test]
    fn a_literal_never_ends_in_a_brace_that_could_join_the_next_into_an_action() {
        assert_eq!(literal("{"), r#"{{ "{" }}"#);
        assert_eq!(literal("x{"), r#"x{{ "{" }}"#);
        assert_eq!(literal("{x"), "{x");
        // Side by side, or before a `{` of the template, the only `{{` are the escaping
        // actions' own.
        for joined in [
            format!("{}{}", literal("a{"), literal("{b")),
            format!("{}{{", literal("a{")),
            format!("{}{}", literal("{"), literal("{")),
        ] {
            let unescaped = joined.replace(OPEN, "").replace(BRACE, "");
            assert!(!unescaped.contains("{{"), "{joined}");
        }
    }

    #[test]
    fn a_go_string_escapes_its_quote_backslash_and_control_characters() {
        assert_eq!(string("plain"), r#""plain""#);
        assert_eq!(string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(string("a\nb\u{1b}"), r#""a\nb\u001b""#);
    }

    #[test]
    fn text_around_the_namespace_prints_the_generators_or_the_releases() {
        let dns = AroundNamespace::new("op.", ".svc");
        assert_eq!(dns.with("ns"), "op.ns.svc");
        assert_eq!(
            dns.in_release().as_str(),
            r#"{{ print "op." .Release.Namespace ".svc" | quote }}"#
        );
        assert_eq!(
            AroundNamespace::alone().in_release().as_str(),
            "{{ .Release.Namespace | quote }}"
        );
        let hostile = AroundNamespace::new("\"}} {{ evil }}", "");
        assert_eq!(
            hostile.in_release().as_str(),
            r#"{{ print "\"}} {{ evil }}" .Release.Namespace | quote }}"#
        );
    }

    #[test]
    fn a_context_escapes_safe_strings_at_every_depth_and_nothing_else() {
        let context = Value::from(std::collections::HashMap::from([
            ("safe", Value::safe_string("{{ x }}")),
            ("raw", Value::from("{{ y }}")),
            (
                "nested",
                Value::from(vec![Value::from(std::collections::HashMap::from([(
                    "deep",
                    Value::safe_string("a{{b"),
                )]))]),
            ),
            ("number", Value::from(3)),
        ]));
        let escaped = literal_context(&context);
        let map = escaped.as_map().unwrap();
        let get = |key: &str| {
            map.iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        assert_eq!(get("safe").as_str(), Some(r#"{{ "{{" }} x }}"#));
        assert!(get("safe").is_safe());
        assert_eq!(get("raw").as_str(), Some("{{ y }}"));
        assert!(!get("raw").is_safe());
        let deep = get("nested").as_array().unwrap()[0]
            .as_map()
            .unwrap()
            .clone();
        assert_eq!(
            deep.values().next().unwrap().as_str(),
            Some(r#"a{{ "{{" }}b"#)
        );
        assert_eq!(get("number").as_i64(), Some(3));
    }
}
