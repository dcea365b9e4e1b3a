//! Which generated structs derive `Default`, and the constructor of each one that cannot.
//!
//! Users build these types by hand: a child's spec in a reconcile, an object in a test. Without
//! `Default`, a literal of a struct with forty optional fields spells out forty `None`s.
//!
//! A struct derives `Default` when every field has a default that means "not set": an
//! `Option`, a string, a number, a bool, a list or a map, a field that deserializes to its
//! default when absent, or another struct that derives it. An enum, a free-form
//! `serde_json::Value`, an `IntOrString` and a time have no such value, so a struct that
//! requires one gets `new`, taking each field the schema requires, instead; an enum never
//! derives it.

use std::collections::{BTreeMap, BTreeSet};

use kopium::Container;

use super::{has_default, rewrite_type, strip_option};
use crate::{naming, text::Ident};

/// One field of a struct, as the emitter writes it.
struct Field {
    pub ident: Ident,
    /// The Rust type, as written.
    pub ty: String,
    /// Whether it is written `#[serde(default)]`, so an absent value deserializes to its
    /// default.
    pub serde_default: bool,
}

impl Field {
    /// The fields of `container`, named and typed as the emitter writes them.
    fn of(container: &Container, names: &BTreeMap<String, String>) -> Vec<Field> {
        container
            .members
            .iter()
            .zip(naming::field_names(&container.members))
            .map(|(member, ident)| {
                let ty = rewrite_type(&member.type_, names, &mut BTreeSet::new());
                let serde_default = strip_option(&ty).is_none()
                    && member.serde_annot.iter().any(|a| a == "default")
                    && has_default(&ty);
                Field {
                    ident,
                    ty,
                    serde_default,
                }
            })
            .collect()
    }

    /// Whether a value of the struct must be given this field: it is neither optional nor
    /// defaulted on the way in.
    fn required(&self) -> bool {
        strip_option(&self.ty).is_none() && !self.serde_default
    }
}

/// The structs that derive `Default`, by final name, and every struct's fields.
pub(super) struct Defaults {
    derived: BTreeSet<String>,
    fields: BTreeMap<String, Vec<Field>>,
}

impl Defaults {
    /// Decides for every struct of `containers`. A struct's answer depends on the structs its
    /// fields hold, which may hold it in turn (through a `Vec` or a `Box`), so every struct
    /// starts as deriving it and loses that until nothing changes.
    pub fn of(containers: &[Container], names: &BTreeMap<String, String>) -> Self {
        let fields: BTreeMap<String, Vec<Field>> = containers
            .iter()
            .filter(|c| c.level > 0 && !c.is_enum)
            .filter_map(|c| Some((names.get(&c.name)?.clone(), Field::of(c, names))))
            .collect();
        let mut derived: BTreeSet<String> = fields.keys().cloned().collect();
        loop {
            let next: BTreeSet<String> = derived
                .iter()
                .filter(|name| {
                    fields[name.as_str()]
                        .iter()
                        .all(|f| !f.required() || unset_by_default(&f.ty, &derived))
                })
                .cloned()
                .collect();
            if next.len() == derived.len() {
                return Self { derived, fields };
            }
            derived = next;
        }
    }

    /// Whether the struct `name` derives `Default`.
    pub fn derives(&self, name: &str) -> bool {
        self.derived.contains(name)
    }

    /// `impl <name> { pub fn new(…) }` for a struct that cannot derive `Default`: it takes
    /// each required field, and starts every other one unset. Empty for one that derives it.
    pub fn constructor(&self, name: &str) -> String {
        match self.fields.get(name) {
            Some(fields) if !self.derives(name) => constructor(name, fields),
            _ => String::new(),
        }
    }
}

/// `impl <name> { pub fn new(…) }`, taking each required field of `fields`.
fn constructor(name: &str, fields: &[Field]) -> String {
    let required: Vec<&Field> = fields.iter().filter(|f| f.required()).collect();
    let parameters: Vec<String> = required
        .iter()
        .map(|f| format!("{}: {}", f.ident, f.ty))
        .collect();
    let values: Vec<String> = fields
        .iter()
        .map(|f| match (f.required(), strip_option(&f.ty)) {
            (true, _) => f.ident.to_string(),
            (false, Some(_)) => format!("{}: None", f.ident),
            (false, None) => format!("{}: Default::default()", f.ident),
        })
        .collect();
    // clippy's limit on a function's parameters: a schema may require more fields.
    let allow = if parameters.len() > 7 {
        "    #[allow(clippy::too_many_arguments)]\n"
    } else {
        ""
    };
    format!(
        "impl {name} {{\n    #[doc = \" The fields the schema requires; every other field starts unset.\"]\n\
         {allow}    pub fn new({}) -> Self {{\n        Self {{ {} }}\n    }}\n}}\n",
        parameters.join(", "),
        values.join(", "),
    )
}

/// Whether `ty`'s `Default` means "not set", given the structs that derive it.
fn unset_by_default(ty: &str, derived: &BTreeSet<String>) -> bool {
    if strip_option(ty).is_some() {
        return true;
    }
    let (head, inner) = match ty.split_once('<') {
        Some((head, rest)) => (head, rest.strip_suffix('>')),
        None => (ty, None),
    };
    match head {
        "String" | "bool" | "Vec" | "BTreeMap" | "HashMap" => true,
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "f32" | "f64" => true,
        "Box" => inner.is_some_and(|inner| unset_by_default(inner, derived)),
        other => derived.contains(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, ty: &str) -> Field {
        Field {
            ident: naming::snake_ident(name),
            ty: ty.to_owned(),
            serde_default: false,
        }
    }

    #[test]
    fn only_types_whose_default_is_unset_let_a_struct_derive_it() {
        let derived = BTreeSet::from(["Inner".to_owned()]);
        for ty in [
            "Option<Mode>",
            "String",
            "Vec<Mode>",
            "BTreeMap<String, serde_json::Value>",
            "Box<Inner>",
            "Inner",
            "i64",
        ] {
            assert!(unset_by_default(ty, &derived), "{ty}");
        }
        for ty in [
            "Mode",
            "serde_json::Value",
            "IntOrString",
            "DateTime<Utc>",
            "Box<Mode>",
            "Other",
        ] {
            assert!(!unset_by_default(ty, &derived), "{ty}");
        }
    }

    #[test]
    fn a_constructor_takes_the_required_fields_and_starts_the_rest_unset() {
        let mut defaulted = field("labels", "BTreeMap<String, String>");
        defaulted.serde_default = true;
        let fields = [
            field("mode", "Mode"),
            field("name", "String"),
            field("note", "Option<String>"),
            defaulted,
        ];
        let code = constructor("Rule", &fields);
        assert!(
            code.contains("pub fn new(mode: Mode, name: String) -> Self")
                && code.contains("Self { mode, name, note: None, labels: Default::default() }"),
            "{code}"
        );
        assert!(!code.contains("too_many_arguments"), "{code}");
        let many: Vec<Field> = (0..8).map(|i| field(&format!("f{i}"), "Mode")).collect();
        assert!(constructor("Wide", &many).contains("clippy::too_many_arguments"));
    }
}
