//! Every identifier and literal that reaches generated Rust is decided here, so that text
//! from a CRD or a manifest can never become code: names are validated or converted, and
//! strings are emitted only as escaped literals.

use heck::{ToSnakeCase, ToUpperCamelCase};

/// Rust's strict and reserved keywords, which cannot be plain identifiers.
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "Self", "static", "struct", "super", "trait", "true", "try", "type",
    "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// A Rust string literal with the same value as `text`, whatever `text` holds.
pub fn string_literal(text: &str) -> String {
    // `Debug` for `str` escapes quotes, backslashes and control characters, which is exactly
    // the grammar of a Rust string literal.
    format!("{text:?}")
}

/// A TOML basic string with the value `text`. JSON string syntax is a subset of TOML's
/// basic-string syntax, so serde_json's quoting is exact.
pub fn toml_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// `snake_case` form of `text` as a safe identifier: keywords get a trailing underscore and
/// anything that does not start with a letter gets a leading one.
pub fn snake_ident(text: &str) -> String {
    let snake: String = text
        .to_snake_case()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let snake = if snake.starts_with(|c: char| c.is_ascii_alphabetic()) {
        snake
    } else {
        format!("_{snake}")
    };
    if KEYWORDS.contains(&snake.as_str()) {
        format!("{snake}_")
    } else {
        snake
    }
}

/// `UpperCamelCase` form, as kopium names a CRD's root type.
pub fn type_name(kind: &str) -> String {
    kind.to_upper_camel_case()
}

/// `name`, or `name` with a `Resource` suffix when it would shadow a type the generated code
/// refers to (a CRD kind called `Option` or `String`).
pub fn unreserved(name: &str, reserved: &[&str]) -> String {
    if reserved.contains(&name) {
        format!("{name}Resource")
    } else {
        name.to_owned()
    }
}

/// Field identifiers for struct members, in order: snake case, keywords made raw (or given
/// a trailing `_` where a raw identifier is not allowed), and names that collide after case
/// conversion (`fooBar` beside `foo_bar`) numbered. Callers add a serde rename whenever the
/// identifier differs from the property name.
pub fn field_names(members: &[kopium::Member]) -> Vec<String> {
    let mut taken = std::collections::BTreeSet::new();
    members
        .iter()
        .map(|member| {
            let base = field_ident(&member.name);
            unique(base, &mut taken, |base, n| {
                format!("{}_{n}", base.trim_end_matches('_'))
            })
        })
        .collect()
}

/// Enum variant identifiers for string enum values: UpperCamelCase, a prefix where the value
/// does not start with a letter, and numbers for values that collide (`Foo` beside `foo`).
pub fn variant_names(members: &[kopium::Member]) -> Vec<String> {
    let mut taken = std::collections::BTreeSet::new();
    members
        .iter()
        .map(|member| {
            let camel: String = member
                .name
                .to_upper_camel_case()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .collect();
            let base = match camel.chars().next() {
                None => "Empty".to_owned(),
                Some(c) if c.is_ascii_alphabetic() => camel,
                Some(_) => format!("V{camel}"),
            };
            unique(base, &mut taken, |base, n| format!("{base}{n}"))
        })
        .collect()
}

fn unique(
    base: String,
    taken: &mut std::collections::BTreeSet<String>,
    numbered: impl Fn(&str, usize) -> String,
) -> String {
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(name.trim_start_matches("r#")) {
        name = numbered(base.trim_start_matches("r#"), n);
        n += 1;
    }
    taken.insert(name.trim_start_matches("r#").to_owned());
    name
}

/// A field identifier for a JSON property name.
fn field_ident(property: &str) -> String {
    let snake: String = property
        .to_snake_case()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let snake = if snake.is_empty() || snake.chars().all(|c| c == '_') {
        "field".to_owned()
    } else {
        snake
    };
    let snake = if snake.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{snake}")
    } else {
        snake
    };
    match snake.as_str() {
        // Keywords that cannot be raw identifiers.
        "self" | "super" | "crate" | "_" => format!("{snake}_"),
        _ if KEYWORDS.contains(&snake.as_str()) => format!("r#{snake}"),
        _ => snake,
    }
}

/// Whether `s` is a DNS-1035 label, as Kubernetes requires of versions and plurals.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && !s.ends_with('-')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Whether `s` is a DNS-1123 subdomain, as Kubernetes requires of API groups.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Whether `s` can be a kind: ASCII letters and digits, starting with a letter.
pub fn is_kind(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Checks the names of a resource defined in Rust the way the API server would.
pub fn check_kube_names(
    kind: &str,
    group: &str,
    version: &str,
    plural: &str,
) -> Result<(), String> {
    let checks = [
        (
            "kind",
            kind,
            is_kind(kind),
            "ASCII letters and digits, starting with a letter",
        ),
        (
            "group",
            group,
            is_dns_subdomain(group) && !group.is_empty(),
            "a lowercase DNS subdomain",
        ),
        (
            "version",
            version,
            is_dns_label(version),
            "a lowercase DNS label",
        ),
        (
            "plural",
            plural,
            is_dns_label(plural),
            "a lowercase DNS label",
        ),
    ];
    match checks.iter().find(|(_, _, ok, _)| !ok) {
        None => Ok(()),
        Some((field, value, _, rule)) => Err(format!("{field} {value:?} must be {rule}")),
    }
}

/// The default crate name for a primary kind: `prometheusrule-controller`.
pub fn default_crate_name(kind: &str) -> String {
    format!("{}-controller", kind.to_lowercase())
}

/// Checks a crate name against what cargo accepts, returning why not.
pub fn check_crate_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let starts = name.starts_with(|c: char| c.is_ascii_alphabetic());
    if name.is_empty() || name.len() > 64 || !ok_chars || !starts {
        return Err(format!(
            "{name:?} is not a valid crate name: use ASCII letters, digits, `-` and `_`, starting with a letter, at most 64 characters"
        ));
    }
    if KEYWORDS.contains(&name) || name == "test" {
        return Err(format!("{name:?} is reserved and cannot be a crate name"));
    }
    Ok(())
}

/// Checks an `external:` name (`rule-registry`): lowercase words joined by `-`, so that it
/// maps one-to-one onto hook names.
pub fn check_external_name(name: &str) -> Result<(), String> {
    let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name.len() <= 48;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid external name: use lowercase words joined by `-`, like `rule-registry`"
        ))
    }
}

/// Checks a label or annotation key: an optional DNS prefix and a name, as Kubernetes requires.
pub fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && part.ends_with(|c: char| c.is_ascii_alphanumeric())
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(format!(
            "{key:?} is not a valid label or annotation key (an optional DNS prefix and `/`, then up to 63 of [A-Za-z0-9-_.])"
        ))
    }
}

/// A JSON pointer (`/spec/ruleRef/name`) for a dotted field path, escaped per RFC 6901.
pub fn json_pointer(path: &str) -> String {
    path.split('.')
        .map(|segment| format!("/{}", segment.replace('~', "~0").replace('/', "~1")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_round_trip_through_the_rust_parser() {
        for text in [
            "plain",
            "quote \" and \\ backslash",
            "\"#; panic!(); r#\"",
            "*/ \n\t\u{0}",
            "é ✓",
        ] {
            let literal: syn::LitStr = syn::parse_str(&string_literal(text)).unwrap();
            assert_eq!(literal.value(), text);
        }
    }

    #[test]
    fn identifiers_are_never_keywords_or_invalid() {
        assert_eq!(snake_ident("rule-registry"), "rule_registry");
        assert_eq!(snake_ident("type"), "type_");
        assert_eq!(snake_ident("Self"), "self_");
        assert_eq!(snake_ident("3d"), "_3d");
        for name in ["ConfigMap", "self", "crate", "x-y.z"] {
            syn::parse_str::<syn::Ident>(&snake_ident(name)).unwrap();
        }
    }

    #[test]
    fn names_are_checked() {
        assert!(check_crate_name("prometheusrule-controller").is_ok());
        assert!(check_crate_name("9lives").is_err());
        assert!(check_crate_name("a b").is_err());
        assert!(check_external_name("rule-registry").is_ok());
        assert!(check_external_name("Rule_Registry").is_err());
        assert!(check_label_key("monitoring.example.com/rule").is_ok());
        assert!(check_label_key("app").is_ok());
        assert!(check_label_key("Bad Prefix/x").is_err());
        assert!(check_label_key("a/").is_err());
    }

    fn members(names: &[&str]) -> Vec<kopium::Member> {
        names
            .iter()
            .map(|n| kopium::Member {
                name: (*n).to_owned(),
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn field_names_are_valid_and_distinct() {
        let names = field_names(&members(&[
            "type", "self", "Self", "crate", "fooBar", "foo_bar", "foo-bar", "3d", "", "a b",
        ]));
        assert_eq!(
            names,
            [
                "r#type",
                "self_",
                "self_2",
                "crate_",
                "foo_bar",
                "foo_bar_2",
                "foo_bar_3",
                "_3d",
                "field",
                "a_b"
            ]
        );
        for name in names {
            syn::parse_str::<syn::Ident>(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn variant_names_are_valid_and_distinct() {
        let names = variant_names(&members(&["Foo", "foo", "FOO", "1", "", "a b", "-", "mod"]));
        assert_eq!(
            names,
            ["Foo", "Foo2", "Foo3", "V1", "Empty", "AB", "Empty2", "Mod"]
        );
    }

    #[test]
    fn pointers_escape_per_rfc6901() {
        assert_eq!(json_pointer("spec.ruleRef.name"), "/spec/ruleRef/name");
        assert_eq!(
            json_pointer("metadata.labels.a/b~c"),
            "/metadata/labels/a~1b~0c"
        );
    }
}
