//! Every identifier that reaches generated Rust is decided here, from names that come from a
//! CRD or a manifest: converted to the right case, stripped to ASCII, kept off keywords and
//! reserved names, and made unique where two could collide. Each comes out as a
//! [`text::Ident`](crate::text::Ident), which the Rust parser has accepted; the text itself
//! reaches generated files only through [`crate::text`]'s escaped forms.

use std::collections::BTreeSet;

use heck::{ToShoutySnakeCase, ToSnakeCase, ToUpperCamelCase};

use crate::text::Ident;

/// Rust's strict and reserved keywords, which cannot be plain identifiers.
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "Self", "static", "struct", "super", "trait", "true", "try", "type",
    "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Names cargo or the platform keep for themselves, which a package cannot take: the
/// folders of a target directory, Windows device names, and the standard crates.
const RESERVED_CRATE_NAMES: &[&str] = &[
    "deps",
    "examples",
    "build",
    "incremental",
    "debug",
    "release",
    "doc",
    "test",
    "bench",
    "std",
    "core",
    "alloc",
    "proc_macro",
    "proc-macro",
    "crdgen",
    "con",
    "prn",
    "aux",
    "nul",
    "com1",
    "com2",
    "com3",
    "com4",
    "com5",
    "com6",
    "com7",
    "com8",
    "com9",
    "lpt1",
    "lpt2",
    "lpt3",
    "lpt4",
    "lpt5",
    "lpt6",
    "lpt7",
    "lpt8",
    "lpt9",
];

/// `candidate` as an identifier. The builders below only make valid ones; should one ever
/// not be, a placeholder name is better than text the parser refused becoming code.
fn ident(candidate: &str) -> Ident {
    Ident::parse(candidate).unwrap_or_else(Ident::placeholder)
}

/// ASCII letters, digits and `_` only, every other character becoming `_`.
fn ascii_word(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `snake_case` form of `text` as an identifier: keywords get a trailing underscore and
/// anything that does not start with a letter gets a leading one.
pub fn snake_ident(text: &str) -> Ident {
    let snake = ascii_word(&text.to_snake_case());
    let snake = if snake.chars().all(|c| c == '_') {
        "unnamed".to_owned()
    } else if snake.starts_with(|c: char| c.is_ascii_alphabetic()) {
        snake
    } else {
        format!("_{snake}")
    };
    if KEYWORDS.contains(&snake.as_str()) {
        ident(&format!("{snake}_"))
    } else {
        ident(&snake)
    }
}

/// `SCREAMING_SNAKE_CASE` form of `text`, for constants.
pub fn const_ident(text: &str) -> Ident {
    let shouty = ascii_word(&text.to_shouty_snake_case());
    if shouty.starts_with(|c: char| c.is_ascii_alphabetic()) {
        ident(&shouty)
    } else {
        ident(&format!("X_{}", shouty.trim_start_matches('_')))
    }
}

/// Module names in one namespace, handed out in order: snake case, and numbered where two
/// would be the same module (versions `v1-beta` and `v1--beta`, or a related kind `V1`
/// beside version `v1`).
#[derive(Debug, Default)]
pub struct ModuleNames {
    taken: BTreeSet<String>,
}

impl ModuleNames {
    /// The module name for `name`, distinct from every one handed out before.
    pub fn name(&mut self, name: &str) -> Ident {
        let base = snake_ident(name).to_string();
        ident(&unique(base, &mut self.taken, |base, n| {
            format!("{}_{n}", base.trim_end_matches('_'))
        }))
    }
}

/// `UpperCamelCase` form of `name` in ASCII, as a type name: kopium names types after
/// properties, which may hold any character (`x²`).
pub fn type_name(name: &str) -> String {
    let camel: String = name
        .to_upper_camel_case()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    match camel.chars().next() {
        None => "Unnamed".to_owned(),
        Some(c) if c.is_ascii_alphabetic() => camel,
        Some(_) => format!("T{camel}"),
    }
}

/// `name`, or `name` with a `Resource` suffix when it would shadow a type the generated code
/// refers to (a CRD kind called `Option` or `String`) or is the keyword `Self`.
pub fn unreserved(name: &str, reserved: &[&str]) -> String {
    if name == "Self" || reserved.contains(&name) {
        format!("{name}Resource")
    } else {
        name.to_owned()
    }
}

/// A type identifier for `name`: [`type_name`], kept off `reserved`.
pub fn type_ident(name: &str, reserved: &[&str]) -> Ident {
    ident(&unreserved(&type_name(name), reserved))
}

/// Field identifiers for struct members, in order: snake case, keywords made raw (or given
/// a trailing `_` where a raw identifier is not allowed), and names that collide after case
/// conversion (`fooBar` beside `foo_bar`) numbered. Callers add a serde rename whenever the
/// identifier differs from the property name.
pub fn field_names(members: &[kopium::Member]) -> Vec<Ident> {
    let mut taken = BTreeSet::new();
    members
        .iter()
        .map(|member| {
            let base = field_ident(&member.name);
            let unique = unique(base, &mut taken, |base, n| {
                format!("{}_{n}", base.trim_end_matches('_'))
            });
            ident(&unique)
        })
        .collect()
}

/// Enum variant identifiers for string enum values: UpperCamelCase, a prefix where the value
/// does not start with a letter, and numbers for values that collide (`Foo` beside `foo`).
pub fn variant_names(members: &[kopium::Member]) -> Vec<Ident> {
    let mut taken = BTreeSet::new();
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
            ident(&unique(base, &mut taken, |base, n| format!("{base}{n}")))
        })
        .collect()
}

fn unique(
    base: String,
    taken: &mut BTreeSet<String>,
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

/// Checks a crate name, returning why not. It also names the operator's ServiceAccount,
/// roles, Lease and Deployment, so it must be a Kubernetes object name as well as a package
/// name: a lowercase DNS label, and none that Rust, cargo or the platform keep.
pub fn check_crate_name(name: &str) -> Result<(), String> {
    if !is_dns_label(name) {
        return Err(format!(
            "{name:?} is not a valid operator name: use lowercase letters, digits and `-`, starting with a letter, at most 63 characters (it names the crate and the operator's Kubernetes objects)"
        ));
    }
    if KEYWORDS.contains(&name) || RESERVED_CRATE_NAMES.contains(&name) {
        return Err(format!(
            "{name:?} is reserved (by Rust, cargo or the platform) and cannot be a crate name; choose another `name:`"
        ));
    }
    Ok(())
}

/// Checks the name of an extra dependency against what cargo accepts as a package name.
pub fn check_dependency_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let starts = name.starts_with(|c: char| c.is_ascii_alphabetic());
    if name.is_empty() || name.len() > 64 || !ok_chars || !starts {
        return Err(format!(
            "{name:?} is not a valid crate name: use ASCII letters, digits, `-` and `_`, starting with a letter, at most 64 characters"
        ));
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
            let literal: syn::LitStr = syn::parse_str(&crate::text::Text::from(text).rs()).unwrap();
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
            syn::parse_str::<syn::Ident>(snake_ident(name).as_str()).unwrap();
        }
    }

    #[test]
    fn names_are_checked() {
        assert!(check_crate_name("prometheusrule-controller").is_ok());
        assert!(check_crate_name("9lives").is_err());
        assert!(check_crate_name("a b").is_err());
        assert!(check_crate_name("My_Operator").is_err());
        for reserved in ["deps", "build", "test", "std", "crdgen", "con", "self"] {
            let err = check_crate_name(reserved).unwrap_err();
            assert!(
                err.contains("reserved") || err.contains("not a valid"),
                "{reserved}: {err}"
            );
        }
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
            syn::parse_str::<syn::Ident>(name.as_str()).unwrap_or_else(|e| panic!("{name}: {e}"));
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
    fn type_names_are_ascii_and_kept_off_keywords() {
        assert_eq!(type_name("x²"), "X");
        assert_eq!(type_name("WidgetSpecX²Y"), "WidgetSpecXy");
        assert_eq!(type_name("3d"), "T3d");
        assert_eq!(type_name("²"), "Unnamed");
        assert_eq!(type_ident("Self", &[]), "SelfResource");
        assert_eq!(type_ident("Option", &["Option"]), "OptionResource");
    }

    #[test]
    fn modules_in_one_namespace_never_collide() {
        let mut modules = ModuleNames::default();
        let names: Vec<Ident> = ["v1-beta", "v1--beta", "v1", "V1", "mod"]
            .into_iter()
            .map(|name| modules.name(name))
            .collect();
        assert_eq!(names, ["v1_beta", "v1_beta_2", "v1", "v1_2", "mod_"]);
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
