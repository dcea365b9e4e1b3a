//! Webhooks: the admission webhooks the operator serves and what they match, the conversion
//! webhook of a derived resource served in several versions, and the names of the objects in
//! `deploy/` that wire them to the API server. All of them share one HTTPS server and one
//! certificate.
//!
//! Every name here derives from the checked crate name, so two operators never share a
//! webhook configuration, a Secret or a role, and the operator's RBAC can name each object.

use serde::Serialize;

use super::{Archetype, Primary};
use crate::{
    error::Result,
    manifest, naming,
    text::{Constant, Ident, Text},
};

/// The most versions a derived resource may also serve: each is a module, two conversions and
/// a round-trip test, and a long list is more likely a mistake than an API's history.
pub const MAX_ALSO_SERVED: usize = 8;

/// The webhooks of one operator, for the templates.
#[derive(Debug, Clone, Serialize)]
pub struct Webhooks {
    /// `validate(new, old)` is served on `/validate`.
    pub validating: Option<Webhook>,
    /// `mutate(object)` is served on `/mutate`.
    pub mutating: Option<Webhook>,
    /// The CRD's conversion webhook, served on `/convert`, for a derived resource served in
    /// several versions.
    pub conversion: Option<Conversion>,
    /// One configuration per webhook, validating first: what deploy/, RBAC and the CA
    /// publishing loop over.
    pub configurations: Vec<Configuration>,
    /// Both configurations (validating and mutating) are named after the crate.
    pub configuration: Text,
    /// The Secret holding the self-managed serving certificate, which every replica reads.
    pub secret: Text,
    /// The Secret cert-manager's Certificate writes, read instead in that mode.
    pub cert_manager_secret: Text,
    /// The role that lets the operator fill that Secret, and the cluster role that lets it
    /// write the CA into its own webhook configurations.
    pub role: Text,
    /// The cert-manager Certificate and Issuer of `deploy/cert-manager/`.
    pub certificate: Text,
    pub issuer: Text,
    /// The Service's DNS names, which the cert-manager Certificate is issued for.
    pub dns_names: Vec<Text>,
    /// `<namespace>/<certificate>`, for cert-manager's CA injector.
    pub inject_ca_from: Text,
    /// What the configurations match: the primary's group, version and resource.
    pub group: Text,
    pub version: Text,
    pub resource: Text,
    /// `Namespaced` or `Cluster`, as `rules[].scope` spells it.
    pub scope: Constant,
}

/// A webhook configuration object and its one webhook.
#[derive(Debug, Clone, Serialize)]
pub struct Configuration {
    /// `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration`, also the
    /// k8s-openapi type's name.
    pub kind: Constant,
    /// The kind's resource, for RBAC.
    pub resource: Constant,
    pub webhook: Webhook,
    pub mutating: bool,
}

/// The versions of a derived resource and the CRD whose conversion webhook converts them.
#[derive(Debug, Clone, Serialize)]
pub struct Conversion {
    /// The storage version, which every other version converts to and from.
    pub hub: Version,
    /// The other served versions, in the manifest's order.
    pub spokes: Vec<Version>,
    /// The CRD, `plural.group`, whose `caBundle` the operator writes.
    pub crd: Text,
    /// The path the webhook is served on.
    pub path: Constant,
}

/// One served version and the module of `src/types.rs` that defines it.
#[derive(Debug, Clone, Serialize)]
pub struct Version {
    pub name: Text,
    pub module: Ident,
    /// `group/version`.
    pub api_version: Text,
}

/// One webhook of a configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Webhook {
    /// Its name in the configuration, a qualified name: `validate.<crate>.operator-gen.kube.rs`.
    pub name: Text,
    /// The path it is served on, `/validate` or `/mutate`.
    pub path: Constant,
}

/// The webhooks `manifest` asks for, or `None`; `bad` reports a manifest that asks for them
/// on an archetype whose objects the generated code cannot type.
pub(super) fn resolve(
    manifest: Option<manifest::Webhooks>,
    archetype: Archetype,
    crate_name: &str,
    namespace: &str,
    primary: &Primary,
    also_served: &[String],
    bad: &dyn Fn(&str, String) -> crate::Error,
) -> Result<Option<Webhooks>> {
    let conversion = conversion(primary, also_served, bad)?;
    let asked = manifest
        .filter(|w| w.validating || w.mutating)
        .unwrap_or_default();
    if !asked.validating && !asked.mutating && conversion.is_none() {
        return Ok(None);
    }
    if (asked.validating || asked.mutating)
        && matches!(archetype, Archetype::Dynamic | Archetype::Generic)
    {
        return Err(bad(
            "webhooks",
            "admission webhooks are generated for typed primaries (a CRD with generated types, a \
             built-in kind or a derived resource), whose hooks receive the typed object; remove \
             `webhooks:` or drop `dynamic:`/`generic:`"
                .to_owned(),
        ));
    }
    let webhook = |asked: bool, verb: &str, path: &'static str| {
        asked.then(|| Webhook {
            name: Text::new(format!("{verb}.{crate_name}.operator-gen.kube.rs")),
            path: Constant(path),
        })
    };
    let validating = webhook(asked.validating, "validate", "/validate");
    let mutating = webhook(asked.mutating, "mutate", "/mutate");
    let configuration = |webhook: &Option<Webhook>, mutating: bool| {
        let (kind, resource) = if mutating {
            (
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
            )
        } else {
            (
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
            )
        };
        webhook.clone().map(|webhook| Configuration {
            kind: Constant(kind),
            resource: Constant(resource),
            webhook,
            mutating,
        })
    };
    let configurations = [
        configuration(&validating, false),
        configuration(&mutating, true),
    ]
    .into_iter()
    .flatten()
    .collect();
    Ok(Some(Webhooks {
        validating,
        mutating,
        conversion,
        configurations,
        configuration: Text::new(crate_name),
        secret: Text::new(format!("{crate_name}-webhook-tls")),
        cert_manager_secret: Text::new(format!("{crate_name}-webhook-certificate")),
        role: Text::new(format!("{crate_name}-webhook")),
        certificate: Text::new(format!("{crate_name}-webhook")),
        dns_names: vec![
            Text::new(format!("{crate_name}.{namespace}.svc")),
            Text::new(format!("{crate_name}.{namespace}.svc.cluster.local")),
        ],
        inject_ca_from: Text::new(format!("{namespace}/{crate_name}-webhook")),
        issuer: Text::new(format!("{crate_name}-selfsigned")),
        group: primary.group.clone(),
        version: primary.version.clone(),
        resource: primary.plural.clone(),
        scope: Constant(if primary.namespaced {
            "Namespaced"
        } else {
            "Cluster"
        }),
    }))
}

/// The conversion of a derived resource that also serves `also_served`, or `None` when it
/// serves one version. Each extra version must be a DNS-1035 label, as the API server requires
/// of version names, distinct from the others and from the storage version.
fn conversion(
    primary: &Primary,
    also_served: &[String],
    bad: &dyn Fn(&str, String) -> crate::Error,
) -> Result<Option<Conversion>> {
    const FIELD: &str = "primary.derive.alsoServed";
    if also_served.is_empty() {
        return Ok(None);
    }
    if also_served.len() > MAX_ALSO_SERVED {
        return Err(bad(
            FIELD,
            format!(
                "{} versions listed; at most {MAX_ALSO_SERVED} are served besides `version`",
                also_served.len()
            ),
        ));
    }
    let version = |name: &str| Version {
        name: Text::new(name),
        module: naming::snake_ident(name),
        api_version: Text::new(format!("{}/{name}", primary.group.raw())),
    };
    let hub = version(primary.version.raw());
    let mut spokes: Vec<Version> = Vec::new();
    for name in also_served {
        if !naming::is_dns_label(name) {
            return Err(bad(
                FIELD,
                format!(
                    "{name:?} is not a version name: a lowercase DNS label starting with a letter, such as v1alpha1"
                ),
            ));
        }
        let taken = std::iter::once(&hub)
            .chain(&spokes)
            .any(|v| v.name.raw() == name || v.module == version(name).module);
        if taken {
            return Err(bad(
                FIELD,
                format!(
                    "{name:?} is listed twice or is `version` itself (the storage version, always served)"
                ),
            ));
        }
        spokes.push(version(name));
    }
    Ok(Some(Conversion {
        hub,
        spokes,
        crd: primary.crd_name.clone(),
        path: Constant("/convert"),
    }))
}
