//! Webhooks: the admission webhooks the operator serves and what they match, the conversion
//! webhook of a derived resource served in several versions, and the names of the objects in
//! `deploy/` that wire them to the API server. All of them share one HTTPS server and one
//! certificate.
//!
//! Every name here derives from the checked crate name, so two operators never share a
//! webhook configuration, a Secret or a role, and the operator's RBAC can name each object.

use serde::Serialize;

use super::{Archetype, LocalWebhooks, Primary, Related};
use crate::{
    error::Result,
    go_template::AroundNamespace,
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
    /// What the configurations match: the primary, or each of a generic operator's kinds.
    pub rules: Vec<Rule>,
    /// The `matchConditions` expression that sends a request to the admission webhooks: any
    /// but the operator's own bookkeeping (see [`not_own_bookkeeping`]).
    pub match_condition: Text,
    /// Whether the admission webhooks fail open (`failurePolicy: Ignore`): they gate a
    /// cluster-scoped kind that is not the operator's own (see [`fails_open`]).
    pub fails_open: bool,
    /// The namespace label that exempts a namespace from the admission webhooks, for an
    /// operator of a built-in kind: `deploy/` sets it on the operator's own namespace, and
    /// a person sets it on `kube-system`. `None` when nothing is exempt: the operator's own
    /// objects are never of a custom primary's kind.
    pub exempt_label: Option<Text>,
    /// Where an operator run outside the cluster (`cargo run`) serves them, as the API server
    /// calls them there: `deploy/local/` points the webhook configurations at it, and
    /// `crdgen --webhook-url` the CRD's conversion.
    pub local: LocalWebhooks,
}

/// One kind a webhook matches, as a configuration's `rules[]` names it.
#[derive(Debug, Clone, Serialize)]
pub struct Rule {
    pub group: Text,
    pub version: Text,
    pub resource: Text,
    /// `Namespaced` or `Cluster`, as `rules[].scope` spells it.
    pub scope: Constant,
}

impl Rule {
    fn new(group: &Text, version: &Text, resource: &Text, namespaced: bool) -> Self {
        let scope = Constant(if namespaced { "Namespaced" } else { "Cluster" });
        let (group, version, resource) = (group.clone(), version.clone(), resource.clone());
        Self {
            group,
            version,
            resource,
            scope,
        }
    }
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
    /// The runtime's `admission::Hook` it serves: `Validate` or `Mutate`.
    pub hook: Constant,
    /// The runtime's `certificates::CaTarget` that keeps its `caBundle`: `Validating` or
    /// `Mutating`.
    pub ca_target: Constant,
    /// `Fail`, or `Ignore` when the webhooks fail open (see [`fails_open`]).
    pub failure_policy: Constant,
    /// Where `deploy/local/` has the API server call it: the path on [`LocalWebhooks::base`].
    pub local_url: Text,
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
    /// The annotation of an older version's object that keeps what it cannot say.
    pub annotation: Constant,
}

/// The annotation in which the conversion webhook keeps, on an object of an older version,
/// the hub's fields that version cannot hold.
pub const HUB_FIELDS_ANNOTATION: &str = "conversion.operator-gen.kube.rs/hub-fields";

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

/// Whether the operator runs in a namespace of its own, exempt from its admission webhooks by
/// a namespace label: an operator that admits built-in kinds (a built-in or generic primary).
/// Its own Deployment, pods,
/// Secret and Service are objects of kinds such webhooks may gate, and with `failurePolicy:
/// Fail` an operator that gates its own rollout can never be repaired while it is down.
/// An object label would let anyone who creates an object skip the hooks; a namespace label
/// takes the right to edit namespaces. (`matchConditions`, GA since Kubernetes 1.30, could
/// exempt the operator's own objects by name instead; that is a design choice of its own,
/// not made here.)
pub(super) fn needs_own_namespace(
    manifest: Option<manifest::Webhooks>,
    archetype: Archetype,
) -> bool {
    matches!(archetype, Archetype::Builtin | Archetype::Generic)
        && manifest.is_some_and(|w| w.validating || w.mutating)
}

/// The namespace label that exempts a namespace from `crate_name`'s admission webhooks. One
/// key per operator, so that a namespace can be exempt from one operator's webhooks and not
/// another's; the checked crate name is a valid label name.
fn exempt_label(crate_name: &str) -> Text {
    Text::new(format!("skip-webhooks.operator-gen.kube.rs/{crate_name}"))
}

/// The webhooks the operator serves: the admission webhooks the manifest asks for and the
/// conversion of versions `also_served`, or `None` when there are none, served outside the
/// cluster at `local`. `bad` reports versions that cannot be served. A generic operator's
/// webhooks match each of its kinds.
pub(super) fn resolve(
    (manifest, local): (Option<manifest::Webhooks>, LocalWebhooks),
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
    let webhook = |asked: bool, verb: &str, path: &'static str| {
        asked.then(|| Webhook {
            name: Text::new(format!("{verb}.{crate_name}.operator-gen.kube.rs")),
            path: Constant(path),
        })
    };
    let validating = webhook(asked.validating, "validate", "/validate");
    let mutating = webhook(asked.mutating, "mutate", "/mutate");
    let rules = rules(primary, archetype);
    let fails_open = fails_open(archetype, &rules);
    let failure_policy = Constant(if fails_open { "Ignore" } else { "Fail" });
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
            local_url: Text::new(format!("{}{}", local.base.raw(), webhook.path.0)),
            kind: Constant(kind),
            resource: Constant(resource),
            webhook,
            mutating,
            hook: Constant(if mutating { "Mutate" } else { "Validate" }),
            ca_target: Constant(if mutating { "Mutating" } else { "Validating" }),
            failure_policy,
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
        certificate: Text::new(certificate(crate_name)),
        dns_names: dns_names(crate_name)
            .iter()
            .map(|name| Text::new(name.with(namespace)))
            .collect(),
        inject_ca_from: Text::new(inject_ca_from(crate_name).with(namespace)),
        issuer: Text::new(format!("{crate_name}-selfsigned")),
        rules,
        match_condition: Text::new(not_own_bookkeeping(crate_name).with(namespace)),
        fails_open,
        exempt_label: needs_own_namespace(manifest, archetype).then(|| exempt_label(crate_name)),
        local,
    }))
}

/// Whether the admission webhooks of an operator whose webhooks match `rules` fail open: when
/// they gate a cluster-scoped kind that is not the operator's own custom resource (a built-in
/// or generic primary). Failing closed there, an operator that is down would refuse every
/// write of the kind cluster-wide: for `Namespace` every new namespace, for `ClusterRole` its
/// own installation's RBAC and anyone else's, and the namespace label that exempts the
/// operator's own namespace cannot exempt objects that live in none. Namespaced kinds and the
/// operator's own custom resources keep failing closed.
pub(super) fn fails_open(archetype: Archetype, rules: &[Rule]) -> bool {
    matches!(archetype, Archetype::Builtin | Archetype::Generic)
        && rules.iter().any(|rule| rule.scope.0 == "Cluster")
}

/// The `matchConditions` expression under which the API server sends a request to the
/// admission webhooks: anything but an update by the operator's own ServiceAccount that
/// changes nothing outside the object's metadata. Those are the operator's own bookkeeping:
/// its finalizer, and the shard and drain labels of a sharded operator. They must not depend on
/// its own validation: an object stored before the webhook existed, which `validate` now
/// refuses, could otherwise never take a finalizer or move off a dead shard, and while the
/// webhooks are unreachable no object could. The condition names the ServiceAccount, an
/// identity the API server authenticated, not a field manager, which any client may claim;
/// and it skips no change of the object's body, whoever makes it.
pub(crate) fn not_own_bookkeeping(service_account: &str) -> AroundNamespace {
    // The user name is one CEL string; the namespace, a DNS label, needs no escape in it.
    let before = format!(
        "!(request.userInfo.username == '{}",
        cel_escaped("system:serviceaccount:")
    );
    let after = format!(
        "{}' && request.operation == 'UPDATE' \
         && object.all(k, k == 'metadata' || (k in oldObject && object[k] == oldObject[k])) \
         && oldObject.all(k, k in object))",
        cel_escaped(&format!(":{service_account}"))
    );
    AroundNamespace::new(before, after)
}

/// The cert-manager Certificate of `deploy/cert-manager/`, and of the chart.
fn certificate(crate_name: &str) -> String {
    format!("{crate_name}-webhook")
}

/// The webhooks' Service's DNS names, which their certificate is issued for.
pub(crate) fn dns_names(crate_name: &str) -> [AroundNamespace; 2] {
    [".svc", ".svc.cluster.local"]
        .map(|suffix| AroundNamespace::new(format!("{crate_name}."), suffix))
}

/// `<namespace>/<certificate>`, which cert-manager's CA injector reads.
pub(crate) fn inject_ca_from(crate_name: &str) -> AroundNamespace {
    AroundNamespace::new("", format!("/{}", certificate(crate_name)))
}

/// `text` as a CEL string literal.
#[cfg(test)]
fn cel_string(text: &str) -> String {
    format!("'{}'", cel_escaped(text))
}

/// `text` escaped for the inside of a CEL string literal.
fn cel_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '\'' => {
                escaped.push('\\');
                escaped.push(c);
            }
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// What the admission webhooks match: a generic operator's kinds, each on its own rule, or
/// the one primary.
fn rules(primary: &Primary, archetype: Archetype) -> Vec<Rule> {
    if archetype != Archetype::Generic {
        let p = primary;
        return vec![Rule::new(&p.group, &p.version, &p.plural, p.namespaced)];
    }
    let rule = |k: &Related| Rule::new(&k.group, &k.version, &k.plural, k.namespaced);
    primary.kinds.iter().map(rule).collect()
}

/// The conversion of a derived resource that also serves `also_served`, or `None` when it
/// serves one version; the versions are checked by [`check_versions`].
fn conversion(
    primary: &Primary,
    also_served: &[String],
    bad: &dyn Fn(&str, String) -> crate::Error,
) -> Result<Option<Conversion>> {
    if also_served.is_empty() {
        return Ok(None);
    }
    let hub_name = primary.version.raw();
    check_versions(hub_name, also_served)
        .map_err(|(field, reason)| bad(field.manifest_field(), reason))?;
    let version = |name: &str| Version {
        name: Text::new(name),
        module: naming::snake_ident(name),
        api_version: Text::new(format!("{}/{name}", primary.group.raw())),
    };
    Ok(Some(Conversion {
        hub: version(hub_name),
        spokes: also_served.iter().map(|name| version(name)).collect(),
        crd: primary.crd_name.clone(),
        path: Constant("/convert"),
        annotation: Constant(HUB_FIELDS_ANNOTATION),
    }))
}

/// Which of a derived resource's version fields a [`check_versions`] failure is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionField {
    /// `primary.derive.version`, the storage version (`new --api-version`).
    Version,
    /// `primary.derive.alsoServed` (`new --also`).
    AlsoServed,
}

impl VersionField {
    pub fn manifest_field(self) -> &'static str {
        match self {
            VersionField::Version => "primary.derive.version",
            VersionField::AlsoServed => "primary.derive.alsoServed",
        }
    }
}

/// Checks the versions of a derived resource served as `hub` and `also_served`; on failure,
/// the field at fault and why. Every version is named as Kubernetes versions are (`v2`, `v1beta1`, `v1alpha2`): such
/// names are modules of `src/types.rs` that no crate name can shadow, and they have an order.
/// Each extra version ranks below the storage version, so that clients that ask for none read
/// the hub without a conversion.
pub fn check_versions(hub: &str, also_served: &[String]) -> Result<(), (VersionField, String)> {
    const FIELD: VersionField = VersionField::AlsoServed;
    if also_served.len() > MAX_ALSO_SERVED {
        return Err((
            FIELD,
            format!(
                "{} versions listed; at most {MAX_ALSO_SERVED} are served besides `version`",
                also_served.len()
            ),
        ));
    }
    let Some(hub_rank) = VersionRank::parse(hub) else {
        return Err((
            VersionField::Version,
            format!(
                "{hub:?} cannot be converted to and from other versions: name it as \
                 Kubernetes names versions (v1, v2beta1, v1alpha1)"
            ),
        ));
    };
    for (index, name) in also_served.iter().enumerate() {
        let Some(rank) = VersionRank::parse(name) else {
            return Err((
                FIELD,
                format!(
                    "{name:?} is not a version name as Kubernetes names them: v<major>, \
                     optionally followed by alpha<n> or beta<n> (v1alpha1, v2beta3)"
                ),
            ));
        };
        if name == hub || also_served[..index].contains(name) {
            return Err((
                FIELD,
                format!(
                    "{name:?} is listed twice or is `version` itself (the storage version, always served)"
                ),
            ));
        }
        if rank >= hub_rank {
            return Err((
                FIELD,
                format!(
                    "{name:?} ranks above {hub:?} in Kubernetes' version order, so clients \
                     would read it by default, each read converted; make the newest version \
                     `version` (the storage version) and list the older ones here"
                ),
            ));
        }
    }
    Ok(())
}

/// Where a version name stands in Kubernetes' order of versions: a stable version above a
/// beta above an alpha, then the larger major, then the larger minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct VersionRank {
    /// 2 for stable, 1 for beta, 0 for alpha.
    stability: u8,
    major: u32,
    minor: u32,
}

impl VersionRank {
    /// The rank of `v<major>`, `v<major>beta<minor>` or `v<major>alpha<minor>` (numbers from
    /// 1, without leading zeros); `None` for any other name.
    fn parse(name: &str) -> Option<Self> {
        let number = |digits: &str| -> Option<u32> {
            let plain = !digits.is_empty()
                && !digits.starts_with('0')
                && digits.bytes().all(|b| b.is_ascii_digit());
            plain.then(|| digits.parse().ok()).flatten()
        };
        let rest = name.strip_prefix('v')?;
        let split = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (major, tail) = rest.split_at(split);
        let major = number(major)?;
        let (stability, minor) = if tail.is_empty() {
            (2, 0)
        } else if let Some(minor) = tail.strip_prefix("beta") {
            (1, number(minor)?)
        } else {
            (0, number(tail.strip_prefix("alpha")?)?)
        };
        Some(Self {
            stability,
            major,
            minor,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn versions_rank_as_kubernetes_orders_them() {
        let ordered = [
            "v1alpha1", "v1alpha2", "v2alpha1", "v1beta1", "v1beta2", "v3beta1", "v1", "v2", "v10",
        ];
        for pair in ordered.windows(2) {
            assert!(
                VersionRank::parse(pair[0]) < VersionRank::parse(pair[1]),
                "{} < {}",
                pair[0],
                pair[1]
            );
        }
        for name in [
            "v0",
            "v01",
            "version1",
            "v1gamma1",
            "v1alpha",
            "v1beta0",
            "1",
            "v",
            "V1",
            "v99999999999",
        ] {
            assert_eq!(VersionRank::parse(name), None, "{name}");
        }
    }

    /// Whether the API server would send `request` to the webhooks, as `expression` decides.
    fn sent(expression: &str, request: &Value) -> bool {
        let program = cel::Program::compile(expression).expect("the expression parses");
        let mut context = cel::Context::default();
        for name in ["request", "object", "oldObject"] {
            let value = request.get(name).cloned().unwrap_or(Value::Null);
            context.add_variable(name, value).expect("a CEL value");
        }
        match program.execute(&context) {
            Ok(cel::Value::Bool(sent)) => sent,
            other => panic!("{expression} gave {other:?}"),
        }
    }

    fn update(username: &str, object: Value, old: Value) -> Value {
        json!({
            "request": {"userInfo": {"username": username}, "operation": "UPDATE"},
            "object": object,
            "oldObject": old,
        })
    }

    #[test]
    fn only_the_operators_own_metadata_updates_skip_its_webhooks() {
        let condition = not_own_bookkeeping("widget-operator").with("ops");
        let own = "system:serviceaccount:ops:widget-operator";
        let old = json!({"metadata": {"name": "w", "labels": {"a": "b"}}, "spec": {"size": 1}});
        let labelled = json!({"metadata": {"name": "w", "labels": {"a": "b", "shard": "s-1"}, "finalizers": ["f"]}, "spec": {"size": 1}});
        let resized = json!({"metadata": {"name": "w", "labels": {"a": "b"}}, "spec": {"size": 2}});
        let grown = json!({"metadata": {"name": "w", "labels": {"a": "b"}}, "spec": {"size": 1}, "data": {}});
        assert!(!sent(
            &condition,
            &update(own, labelled.clone(), old.clone())
        ));
        assert!(
            sent(&condition, &update(own, resized, old.clone())),
            "a body change by the operator"
        );
        assert!(
            sent(&condition, &update(own, grown, old.clone())),
            "a field added"
        );
        let emptied = json!({"metadata": {"name": "w", "labels": {"a": "b"}}});
        assert!(
            sent(&condition, &update(own, emptied, old.clone())),
            "a field removed"
        );
        let other = "system:serviceaccount:ops:someone-else";
        assert!(sent(
            &condition,
            &update(other, labelled.clone(), old.clone())
        ));
        let same_name_elsewhere = "system:serviceaccount:elsewhere:widget-operator";
        assert!(sent(
            &condition,
            &update(same_name_elsewhere, labelled.clone(), old.clone())
        ));
        let create = json!({
            "request": {"userInfo": {"username": own}, "operation": "CREATE"},
            "object": labelled,
            "oldObject": null,
        });
        assert!(sent(&condition, &create));
    }

    #[test]
    fn a_cel_string_literal_holds_any_text_as_text() {
        let text = "a'b\\c\n\" + d";
        let program = cel::Program::compile(&cel_string(text)).expect("a literal");
        let value = program.execute(&cel::Context::default()).expect("a value");
        assert_eq!(
            value,
            cel::Value::String(std::sync::Arc::new(text.to_owned()))
        );
    }
}
