//! A generated crate's sample object: the body its generator found to be the smallest the
//! schema allows, made into an object of the crate's kind with a name and a namespace. The
//! shipped tests and the e2e create it.

use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// `body` (a JSON object: the fields beside `metadata`) as a `K` named `name` in `namespace`,
/// with `K`'s `apiVersion` and `kind`.
///
/// # Errors
/// A body that is not JSON, or does not fit `K`.
pub fn object<K>(body: &str, name: &str, namespace: Option<&str>) -> serde_json::Result<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let mut object: Value = serde_json::from_str(body)?;
    object["apiVersion"] = K::api_version(&()).into();
    object["kind"] = K::kind(&()).into();
    object["metadata"] = json!({ "name": name, "namespace": namespace });
    serde_json::from_value(object)
}

/// An empty `K` named `name` in `namespace`: a built-in kind's sample. Built from `K`'s
/// default, not from a body, because some built-in kinds require fields a body would need.
pub fn empty<K>(name: &str, namespace: Option<&str>) -> K
where
    K: Resource<DynamicType = ()> + Default,
{
    let mut object = K::default();
    let meta = object.meta_mut();
    meta.name = Some(name.to_owned());
    meta.namespace = namespace.map(str::to_owned);
    object
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    use super::*;

    #[test]
    fn a_body_becomes_a_named_object_of_the_kind() {
        let map: ConfigMap =
            object(r#"{"data":{"a":"1"}}"#, "settings", Some("team-a")).expect("fits a ConfigMap");
        assert_eq!(map.metadata.name.as_deref(), Some("settings"));
        assert_eq!(map.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(map.data.unwrap_or_default()["a"], "1");
        let namespace: Namespace = object("{}", "team-b", None).expect("fits a Namespace");
        assert_eq!(namespace.metadata.namespace, None);
    }

    #[test]
    fn an_empty_object_has_only_its_name_and_namespace() {
        let map: ConfigMap = empty("settings", Some("team-a"));
        assert_eq!(map.metadata.name.as_deref(), Some("settings"));
        assert_eq!(map.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(map.data, None);
    }

    #[test]
    fn a_body_that_does_not_fit_the_kind_is_an_error() {
        let error = object::<ConfigMap>(r#"{"data":{"a":1}}"#, "settings", None);
        assert!(error.is_err(), "a number is no ConfigMap value");
        assert!(object::<ConfigMap>("{", "settings", None).is_err());
    }
}
