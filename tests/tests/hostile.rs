//! Hostile and malformed CRDs end in a clear error or in correct code, never in a panic or in
//! code that does something other than the schema says. The `Code` cases are also compiled
//! by the compile test.

use operator_gen_tests::{Expect, generate_hostile, hostile_cases};

#[test]
fn every_hostile_case_ends_as_expected() {
    let dir = tempfile_dir();
    for (name, bytes, expect) in hostile_cases() {
        let outcome = std::panic::catch_unwind(|| generate_hostile(name, &bytes, &dir));
        let result = outcome.unwrap_or_else(|_| panic!("{name}: the generator panicked"));
        match (expect, result) {
            (Expect::Code, Ok(generated)) => check_code(name, &generated),
            (Expect::Code, Err(e)) => panic!("{name}: expected code, got: {e}"),
            (Expect::Error(text), Ok(_)) => {
                panic!("{name}: expected an error mentioning {text:?}, got code")
            }
            (Expect::Error(text), Err(e)) => {
                let message = e.to_string();
                assert!(
                    message.contains(text),
                    "{name}: error does not mention {text:?}: {message}"
                );
                assert!(
                    message.contains(&format!("{name}.yaml")),
                    "{name}: error does not name the file: {message}"
                );
                assert!(!message.contains("panicked"), "{name}: {message}");
            }
        }
    }
}

/// No text from the CRD may reach Rust outside a string literal or a doc attribute: every
/// rendered Rust file parses, and its only functions and macros are the generator's own.
fn check_code(name: &str, generated: &operator_gen::Generated) {
    let types = generated
        .plan
        .files
        .iter()
        .find(|f| f.path.ends_with("src/types.rs"))
        .expect("types.rs");
    let file = syn::parse_file(&types.contents)
        .unwrap_or_else(|e| panic!("{name}: types.rs does not parse: {e}"));
    let text = quote::ToTokens::to_token_stream(&file).to_string();
    // Property names may become identifiers (`quote_fn_evil_…`); they must never become items
    // or calls, which in token text are `fn name` and `name !`.
    let outside_literals = strip_literals(&text);
    for forbidden in ["fn evil", "fn indented", "fn main", "panic !"] {
        assert!(
            !outside_literals.contains(forbidden),
            "{name}: `{forbidden}` reached code in types.rs"
        );
    }
}

/// The token text with string literals blanked out.
fn strip_literals(tokens: &str) -> String {
    let mut out = String::with_capacity(tokens.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in tokens.chars() {
        match (in_string, escaped, c) {
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (true, _, _) => escaped = false,
            (false, _, '"') => in_string = true,
            (false, _, c) => out.push(c),
        }
    }
    out
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile-inputs");
    std::fs::create_dir_all(&dir).expect("creating the hostile input folder");
    dir
}

#[test]
fn keyword_and_colliding_properties_keep_their_json_names() {
    let (name, bytes, _) = hostile_cases()
        .into_iter()
        .find(|(n, ..)| *n == "keyword-and-colliding-properties")
        .unwrap();
    let generated = generate_hostile(name, &bytes, &tempfile_dir()).unwrap();
    let types = &generated
        .plan
        .files
        .iter()
        .find(|f| f.path.ends_with("src/types.rs"))
        .unwrap()
        .contents;
    let file = syn::parse_file(types).unwrap();
    let spec = find_struct(&file.items, "KeywordsSpec").expect("the spec struct");
    let mut json_names: Vec<String> = spec.fields.iter().map(json_name).collect();
    json_names.sort();
    let mut expected = vec![
        "type",
        "self",
        "Self",
        "crate",
        "fn",
        "match",
        "async",
        "fooBar",
        "foo_bar",
        "foo-bar",
        "FooBar",
        "a\"b",
        "quote\")] fn evil() {} #[serde(rename = \"x",
    ];
    expected.sort();
    assert_eq!(json_names, expected);
}

fn find_struct<'a>(items: &'a [syn::Item], name: &str) -> Option<&'a syn::ItemStruct> {
    items.iter().find_map(|item| match item {
        syn::Item::Struct(s) if s.ident == name => Some(s),
        syn::Item::Mod(m) => m
            .content
            .as_ref()
            .and_then(|(_, items)| find_struct(items, name)),
        _ => None,
    })
}

/// The JSON name serde uses for a field: its `rename`, else the identifier without `r#`.
fn json_name(field: &syn::Field) -> String {
    let mut renamed = None;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") {
                let value: syn::LitStr = meta.value()?.parse()?;
                renamed = Some(value.value());
            } else if meta.input.peek(syn::Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            }
            Ok(())
        });
    }
    let ident = field.ident.as_ref().expect("a named field").to_string();
    renamed.unwrap_or_else(|| ident.trim_start_matches("r#").to_owned())
}
