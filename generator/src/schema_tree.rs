//! How a CRD's schema nests: the schemas directly below one, and what a whole tree declares.
//! Read by the loader's caps (`crd_document`), the type generator (`rust_types`) and the CEL
//! checks (`cel`), so none of them reaches into another for it.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// Every property `schema` declares, in nested objects, items, map values and alternatives.
pub(crate) fn count_properties(schema: &JSONSchemaProps) -> usize {
    schema.properties.as_ref().map_or(0, |p| p.len())
        + subschemas(schema).map(count_properties).sum::<usize>()
}

/// The schemas directly below `schema`: its properties, items, map values and `oneOf`,
/// `anyOf` and `allOf` alternatives (not `not`, which describes what a value must not be).
pub(crate) fn subschemas(schema: &JSONSchemaProps) -> impl Iterator<Item = &JSONSchemaProps> {
    let properties = schema.properties.iter().flat_map(|p| p.values());
    let items = match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => vec![item.as_ref()],
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.iter().collect(),
        None => Vec::new(),
    };
    let values = match &schema.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(value)) => Some(value.as_ref()),
        _ => None,
    };
    let alternatives = [&schema.one_of, &schema.any_of, &schema.all_of]
        .into_iter()
        .flatten()
        .flatten();
    properties.chain(items).chain(values).chain(alternatives)
}
