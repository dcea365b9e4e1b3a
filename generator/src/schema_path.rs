//! Checking a dotted field path (`spec.ruleRef.name`) against a JSON schema, so a manifest
//! cannot name a field that the related object does not have.

use serde_json::Value;

/// Why a path does not lead to a string field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathProblem {
    /// `segment` is not a property at `at` (the path walked so far); `known` lists what is.
    Missing {
        at: String,
        segment: String,
        known: Vec<String>,
    },
    /// The path ends at something other than a string, which cannot name an object.
    NotAString { found: String },
    /// The path ends at bytes (`format: byte`, a Secret's `data`, a ConfigMap's
    /// `binaryData`): a string in JSON, but base64-encoded, so it never equals a name.
    Bytes,
}

impl std::fmt::Display for PathProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing { at, segment, known } if known.is_empty() => {
                write!(f, "`{at}` has no field `{segment}`")
            }
            Self::Missing { at, segment, known } => {
                write!(
                    f,
                    "`{at}` has no field `{segment}`; it has: {}",
                    known.join(", ")
                )
            }
            Self::NotAString { found } => write!(
                f,
                "the field is {found}, but a mapping rule needs a string field holding the primary's name"
            ),
            Self::Bytes => f.write_str(
                "the field holds bytes (`format: byte`), which the API server sends base64-encoded, \
                 so the primary's name would be compared with base64 text and never match",
            ),
        }
    }
}

/// Follows `path` through `schema` (resolving local `$ref`s and map values) and checks that it
/// ends at a string. `root` is the whole schema document, for `$ref` lookups.
pub fn check_string_field(root: &Value, path: &str) -> Result<(), PathProblem> {
    let mut node = resolve(root, root);
    let mut walked = String::from("<object>");
    for segment in path.split('.') {
        let next = node
            .get("properties")
            .and_then(|props| props.get(segment))
            .or_else(|| node.get("additionalProperties").filter(|v| v.is_object()));
        let Some(next) = next else {
            let mut known: Vec<String> = node
                .get("properties")
                .and_then(Value::as_object)
                .map(|props| props.keys().cloned().collect())
                .unwrap_or_default();
            known.sort();
            return Err(PathProblem::Missing {
                at: walked,
                segment: segment.to_owned(),
                known,
            });
        };
        node = resolve(root, next);
        walked = if walked == "<object>" {
            segment.to_owned()
        } else {
            format!("{walked}.{segment}")
        };
    }
    if is_bytes(node) {
        return Err(PathProblem::Bytes);
    }
    match node.get("type") {
        Some(Value::String(t)) if t == "string" => Ok(()),
        Some(Value::Array(types)) if types.iter().any(|t| t == "string") => Ok(()),
        Some(other) => Err(PathProblem::NotAString {
            found: format!("of type {other}"),
        }),
        None => Err(PathProblem::NotAString {
            found: "untyped".to_owned(),
        }),
    }
}

/// Whether a schema node is bytes: a string in JSON, holding their base64 encoding.
fn is_bytes(node: &Value) -> bool {
    node.get("format").and_then(Value::as_str) == Some("byte")
}

fn resolve<'a>(root: &'a Value, mut node: &'a Value) -> &'a Value {
    // Bounded so that a self-referencing schema cannot loop forever.
    for _ in 0..32 {
        let Some(reference) = node.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let Some(target) = reference
            .strip_prefix('#')
            .and_then(|pointer| root.pointer(pointer))
        else {
            break;
        };
        node = target;
    }
    node
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn paths_follow_properties_refs_and_maps() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {"$ref": "#/$defs/Spec"},
                "metadata": {"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}}
            },
            "$defs": {"Spec": {"type": "object", "properties": {"target": {"type": ["string", "null"]}, "size": {"type": "integer"}}}}
        });
        assert_eq!(check_string_field(&schema, "spec.target"), Ok(()));
        assert_eq!(
            check_string_field(&schema, "metadata.labels.anything"),
            Ok(())
        );
        assert_eq!(
            check_string_field(&schema, "spec.nope"),
            Err(PathProblem::Missing {
                at: "spec".into(),
                segment: "nope".into(),
                known: vec!["size".into(), "target".into()]
            })
        );
        assert!(matches!(
            check_string_field(&schema, "spec.size"),
            Err(PathProblem::NotAString { .. })
        ));
    }

    #[test]
    fn builtin_kind_schemas_are_walkable() {
        let secret = crate::k8s_catalog::find("Secret").unwrap().schema();
        assert_eq!(check_string_field(&secret, "metadata.name"), Ok(()));
        assert_eq!(check_string_field(&secret, "type"), Ok(()));
        assert!(check_string_field(&secret, "spec.name").is_err());
    }

    #[test]
    fn bytes_are_told_apart_from_strings() {
        let secret = crate::k8s_catalog::find("Secret").unwrap().schema();
        assert_eq!(
            check_string_field(&secret, "data.owner"),
            Err(PathProblem::Bytes)
        );
        let config_map = crate::k8s_catalog::find("ConfigMap").unwrap().schema();
        assert_eq!(
            check_string_field(&config_map, "binaryData.owner"),
            Err(PathProblem::Bytes)
        );
        assert_eq!(check_string_field(&config_map, "data.owner"), Ok(()));
        let crd = json!({"properties": {"spec": {"properties": {"key": {"type": "string", "format": "byte"}}}}});
        assert_eq!(
            check_string_field(&crd, "spec.key"),
            Err(PathProblem::Bytes)
        );
    }
}
