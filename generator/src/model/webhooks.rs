//! Admission webhooks: which ones the operator serves, what they match, and the names of the
//! objects in `deploy/` that wire them to the API server.
//!
//! Every name here derives from the checked crate name, so two operators never share a
//! webhook configuration, a Secret or a role, and the operator's RBAC can name each object.

use serde::Serialize;

use super::{Archetype, Primary};
use crate::{
    error::Result,
    manifest,
    text::{Constant, Text},
};

/// The webhooks of one operator, for the templates.
#[derive(Debug, Clone, Serialize)]
pub struct Webhooks {
    /// `validate(new, old)` is served on `/validate`.
    pub validating: Option<Webhook>,
    /// `mutate(object)` is served on `/mutate`.
    pub mutating: Option<Webhook>,
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
    bad: &dyn Fn(&str, String) -> crate::Error,
) -> Result<Option<Webhooks>> {
    let Some(asked) = manifest.filter(|w| w.validating || w.mutating) else {
        return Ok(None);
    };
    if matches!(archetype, Archetype::Dynamic | Archetype::Generic) {
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
