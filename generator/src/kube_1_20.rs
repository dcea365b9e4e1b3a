//! What the project's own API server (kube-apiserver 1.20, from `cargo xtask cluster up`)
//! does not know in a current CRD, as warnings for `gen`.
//!
//! The CRD is still generated from whole: a newer cluster serves every field. But on 1.20,
//! kubectl's client-side validation refuses the CRD, and the API server, past it, drops what
//! it does not know without a word. A user who tries the operator on the project's cluster
//! should hear that from `gen`, not from `kubectl apply -k deploy/`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};

/// Where README tells how to install such a CRD on the project's cluster.
const README: &str = "README's \"A current CRD on the project's API server\" says how to install it there (`kubectl create --validate=false`)";

/// One warning per served version and field that kube-apiserver 1.20 drops, naming the field.
pub fn warnings(origin: &str, crd: &CustomResourceDefinition) -> Vec<String> {
    let mut warnings = Vec::new();
    for (index, version) in crd.spec.versions.iter().enumerate() {
        if !version.served {
            continue;
        }
        let at = format!(
            "{origin}: field `spec.versions[{index}]` ({})",
            version.name
        );
        if version
            .selectable_fields
            .as_ref()
            .is_some_and(|f| !f.is_empty())
        {
            warnings.push(format!(
                "{at}: `selectableFields` needs Kubernetes 1.30; the project's API server (1.20) drops it, so field selectors on it fail there. {README}"
            ));
        }
        let schema = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref());
        let rules = schema.map_or(0, count_rules);
        if rules > 0 {
            let noun = if rules == 1 { "rule" } else { "rules" };
            warnings.push(format!(
                "{at}: the schema has {rules} `x-kubernetes-validations` {noun} (CEL, Kubernetes 1.25+); the project's API server (1.20) drops them and enforces none, so do not rely on them there. {README}"
            ));
        }
    }
    warnings
}

/// The CEL rules anywhere in `schema`; the CRD's depth was capped when it was read.
fn count_rules(schema: &JSONSchemaProps) -> usize {
    schema.x_kubernetes_validations.as_ref().map_or(0, Vec::len)
        + crate::rust_types::subschemas(schema)
            .chain(schema.not.as_deref())
            .map(count_rules)
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd_document::parse_all;

    fn crd(version_extra: &str, schema: &str) -> CustomResourceDefinition {
        let text = format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
             metadata: {{ name: widgets.example.com }}\n\
             spec:\n  group: example.com\n  scope: Namespaced\n\
             \x20 names: {{ kind: Widget, plural: widgets }}\n\
             \x20 versions:\n  - name: v1\n    served: true\n    storage: true\n{version_extra}\
             \x20   schema: {{ openAPIV3Schema: {schema} }}\n"
        );
        parse_all("w.yaml", text.as_bytes())
            .expect("a valid CRD")
            .remove(0)
    }

    #[test]
    fn a_crd_that_1_20_knows_whole_gets_no_warning() {
        let plain = crd(
            "",
            "{ type: object, properties: { spec: { type: object } } }",
        );
        assert_eq!(warnings("w.yaml", &plain), Vec::<String>::new());
    }

    #[test]
    fn selectable_fields_are_named_with_the_version_and_the_way_out() {
        let selectable = crd(
            "    selectableFields: [{ jsonPath: .spec.color }]\n",
            "{ type: object, properties: { spec: { type: object, properties: { color: { type: string } } } } }",
        );
        let warnings = warnings("w.yaml", &selectable);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("w.yaml: field `spec.versions[0]` (v1): `selectableFields`")
                && warnings[0].contains("--validate=false"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn cel_rules_are_counted_at_every_depth() {
        let rule = "x-kubernetes-validations: [{ rule: 'self.size() > 0' }]";
        let nested = crd(
            "",
            &format!(
                "{{ type: object, {rule}, properties: {{ spec: {{ type: object, properties: \
                 {{ items: {{ type: array, items: {{ type: string, {rule} }} }}, \
                 labels: {{ type: object, additionalProperties: {{ type: string, {rule} }} }} }} }} }} }}"
            ),
        );
        let warnings = warnings("w.yaml", &nested);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("has 3 `x-kubernetes-validations` rules"),
            "{}",
            warnings[0]
        );
    }
}
