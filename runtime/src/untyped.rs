//! A kind known by where it lives in the API, not by its fields: the primary of an operator
//! generated with `dynamic: true`, for a CRD whose schema is too large or too loose to be worth
//! Rust types.
//!
//! Its objects are [`DynamicObject`]s, their fields JSON in `data`, but the kind itself is a
//! type: [`Untyped<D>`] is a [`Resource`] whose group, version, kind, plural and scope are
//! `D`'s constants. kube's own `DynamicObject` carries them at run time instead, as an
//! `ApiResource`, so that nothing written for a typed kind (`Api::all`, `ObjectRef::from_obj`,
//! a `Controller` with its relations, the [`Lifecycle`](crate::lifecycle::Lifecycle), the
//! sharder) would take it. With the kind a type, a dynamic operator runs through all of them
//! exactly as a typed one does.
//!
//! ```
//! use kube::{Resource, core::NamespaceResourceScope};
//! use operator_gen_runtime::kinds::{Definition, Untyped};
//!
//! /// Where cert-manager's `Certificate` lives.
//! enum CertificateDefinition {}
//!
//! impl Definition for CertificateDefinition {
//!     const GROUP: &'static str = "cert-manager.io";
//!     const VERSION: &'static str = "v1";
//!     const KIND: &'static str = "Certificate";
//!     const PLURAL: &'static str = "certificates";
//!     type Scope = NamespaceResourceScope;
//! }
//!
//! type Certificate = Untyped<CertificateDefinition>;
//!
//! let certificate: Certificate = serde_json::from_value(serde_json::json!({
//!     "apiVersion": "cert-manager.io/v1",
//!     "kind": "Certificate",
//!     "metadata": {"name": "web", "namespace": "team-a"},
//!     "spec": {"secretName": "web-tls"},
//! }))?;
//! assert_eq!(Certificate::api_version(&()), "cert-manager.io/v1");
//! assert_eq!(certificate.data["spec"]["secretName"], "web-tls");
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::{
    borrow::Cow,
    fmt,
    marker::PhantomData,
    ops::{Deref, DerefMut},
};

use kube::{
    Resource,
    api::{DynamicObject, ObjectMeta},
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::run::WatchScope;

/// Where a kind lives in the API, as its CRD says: what makes an [`Untyped`] a kind.
pub trait Definition: 'static {
    /// The API group; empty for the core group.
    const GROUP: &'static str;
    /// The version the operator reads and writes.
    const VERSION: &'static str;
    /// The kind.
    const KIND: &'static str;
    /// The plural, as in the kind's URLs.
    const PLURAL: &'static str;
    /// Namespaced or cluster-scoped: `kube::core::NamespaceResourceScope` or
    /// `kube::core::ClusterResourceScope`.
    type Scope: WatchScope;
}

/// An object of the kind `D` defines, its fields untyped: a [`DynamicObject`], to which it
/// dereferences, so `obj.data` holds them as JSON. It serializes as the object itself.
pub struct Untyped<D> {
    object: DynamicObject,
    // `fn() -> D`: the object holds no `D`, so it is `Send` and `Sync` whatever `D` is.
    definition: PhantomData<fn() -> D>,
}

impl<D> Untyped<D> {
    /// The object, as kube's own untyped object.
    pub fn into_inner(self) -> DynamicObject {
        self.object
    }
}

impl<D> From<DynamicObject> for Untyped<D> {
    fn from(object: DynamicObject) -> Self {
        Self {
            object,
            definition: PhantomData,
        }
    }
}

impl<D> Deref for Untyped<D> {
    type Target = DynamicObject;

    fn deref(&self) -> &DynamicObject {
        &self.object
    }
}

impl<D> DerefMut for Untyped<D> {
    fn deref_mut(&mut self) -> &mut DynamicObject {
        &mut self.object
    }
}

impl<D> Clone for Untyped<D> {
    fn clone(&self) -> Self {
        Self::from(self.object.clone())
    }
}

impl<D> fmt::Debug for Untyped<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.object.fmt(f)
    }
}

impl<D> PartialEq for Untyped<D> {
    fn eq(&self, other: &Self) -> bool {
        self.object == other.object
    }
}

impl<D> Serialize for Untyped<D> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.object.serialize(serializer)
    }
}

impl<'de, D> Deserialize<'de> for Untyped<D> {
    fn deserialize<De: Deserializer<'de>>(deserializer: De) -> Result<Self, De::Error> {
        DynamicObject::deserialize(deserializer).map(Self::from)
    }
}

impl<D: Definition> Resource for Untyped<D> {
    type DynamicType = ();
    type Scope = D::Scope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(D::KIND)
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(D::GROUP)
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(D::VERSION)
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(D::PLURAL)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.object.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.object.metadata
    }
}

#[cfg(test)]
mod tests {
    use kube::{
        Api, ResourceExt,
        core::{ClusterResourceScope, NamespaceResourceScope},
        runtime::reflector::ObjectRef,
    };
    use serde_json::json;

    use super::*;
    use crate::testing::offline_client;

    enum Widgets {}

    impl Definition for Widgets {
        const GROUP: &'static str = "example.com";
        const VERSION: &'static str = "v1beta1";
        const KIND: &'static str = "Widget";
        const PLURAL: &'static str = "widgets";
        type Scope = NamespaceResourceScope;
    }

    enum Gadgets {}

    impl Definition for Gadgets {
        const GROUP: &'static str = "";
        const VERSION: &'static str = "v1";
        const KIND: &'static str = "Gadget";
        const PLURAL: &'static str = "gadgets";
        type Scope = ClusterResourceScope;
    }

    fn widget() -> serde_json::Value {
        json!({
            "apiVersion": "example.com/v1beta1",
            "kind": "Widget",
            "metadata": {"name": "a", "namespace": "team-a", "labels": {"tier": "web"}},
            "spec": {"size": 3, "extra": {"anything": [1, 2]}},
            "status": {"ready": true},
        })
    }

    #[test]
    fn an_untyped_object_keeps_every_field_through_a_round_trip() {
        let object: Untyped<Widgets> = serde_json::from_value(widget()).expect("a widget");
        assert_eq!(object.data["spec"]["size"], 3);
        assert_eq!(object.labels().get("tier").map(String::as_str), Some("web"));
        assert_eq!(serde_json::to_value(&object).expect("serializes"), widget());
    }

    #[tokio::test]
    async fn the_kind_and_its_urls_come_from_the_definition() {
        assert_eq!(Untyped::<Widgets>::kind(&()), "Widget");
        assert_eq!(Untyped::<Widgets>::api_version(&()), "example.com/v1beta1");
        assert_eq!(Untyped::<Gadgets>::api_version(&()), "v1");
        let client = offline_client();
        let widgets = Api::<Untyped<Widgets>>::namespaced(client.clone(), "team-a");
        assert_eq!(
            widgets.resource_url(),
            "/apis/example.com/v1beta1/namespaces/team-a/widgets"
        );
        let gadgets = Api::<Untyped<Gadgets>>::all(client);
        assert_eq!(gadgets.resource_url(), "/api/v1/gadgets");
        let object: Untyped<Widgets> = serde_json::from_value(widget()).expect("a widget");
        let reference = ObjectRef::from_obj(&object);
        assert_eq!(reference, ObjectRef::new("a").within("team-a"));
        assert_eq!(
            object.object_ref(&()).api_version.as_deref(),
            Some("example.com/v1beta1")
        );
    }
}
