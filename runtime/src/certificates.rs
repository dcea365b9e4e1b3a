//! The webhooks' serving certificate, which every replica reads from one Secret in the
//! operator's namespace, so that all of them present one certificate the API server trusts.
//!
//! In the self-managed mode ([`Issuer::SelfManaged`], the default), the first replica to find
//! the Secret empty fills it with a new CA and a serving certificate signed by it. The write
//! names the `resourceVersion` it read, so of two replicas racing the second fails, reads again
//! and uses the first one's. Every replica then writes the CA into `caBundle` of the
//! operator's webhook configurations and its CRD's conversion webhook ([`CaTarget`]) wherever
//! it differs. The operator's `deploy/` creates the empty Secret, because RBAC can limit `get`
//! and `update` to one name, but not `create`.
//!
//! With cert-manager ([`Issuer::CertManager`]), cert-manager fills a Secret of its own and
//! injects the CA; replicas only read.
//!
//! To rotate a self-managed certificate, empty the Secret (`kubectl patch secret <name>
//! --type=json -p '[{"op":"remove","path":"/data"}]'`): replicas issue and serve a new one at
//! their next refresh.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, SystemTime},
};

use k8s_openapi::{
    ByteString,
    api::{admissionregistration::v1 as admissionregistration, core::v1::Secret},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};

/// How long a self-managed certificate is valid. Rotation is by emptying the Secret; the
/// long life keeps a forgotten operator from failing closed one day.
const VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// Keys of the Secrets, as cert-manager writes them.
const CERT_KEY: &str = "tls.crt";
const PRIVATE_KEY: &str = "tls.key";
const CA_KEY: &str = "ca.crt";

/// Who issues the webhooks' serving certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Issuer {
    /// The first replica issues one into the Secret and publishes its CA.
    SelfManaged,
    /// cert-manager issues it and injects the CA; replicas only read the Secret.
    CertManager,
}

/// What can keep the webhooks from a certificate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Secret could not be read or written.
    #[error("reading or writing the webhook certificate's Secret: {0}")]
    Api(#[from] kube::Error),
    /// cert-manager has not filled its Secret yet.
    #[error("Secret {0} is still empty; cert-manager fills it once the Certificate is issued")]
    NotIssued(String),
    /// A new certificate could not be made.
    #[error("issuing a self-managed certificate: {0}")]
    Issue(#[from] rcgen::Error),
    /// The Secret holds something rustls cannot serve.
    #[error("the webhook certificate's Secret holds no usable certificate and key: {0}")]
    Unusable(String),
}

/// A serving certificate, its private key and the CA that signed it, all PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Certificate {
    chain: Vec<u8>,
    key: Vec<u8>,
    ca: Vec<u8>,
}

impl std::fmt::Debug for Certificate {
    /// Never prints the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate").finish_non_exhaustive()
    }
}

impl Certificate {
    /// The certificate from the Secret's data, if it holds one.
    fn from_secret(secret: &Secret) -> Option<Self> {
        let data = secret.data.as_ref()?;
        let field = |key: &str| data.get(key).map(|b| b.0.clone()).filter(|b| !b.is_empty());
        let chain = field(CERT_KEY)?;
        let key = field(PRIVATE_KEY)?;
        // cert-manager's self-signed certificates are their own CA.
        let ca = field(CA_KEY).unwrap_or_else(|| chain.clone());
        Some(Self { chain, key, ca })
    }

    /// The Secret's data for this certificate.
    fn secret_data(&self) -> BTreeMap<String, ByteString> {
        [
            (CERT_KEY, &self.chain),
            (PRIVATE_KEY, &self.key),
            (CA_KEY, &self.ca),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), ByteString(value.clone())))
        .collect()
    }

    /// A new CA, valid from an hour ago (for clocks a little behind), and a serving certificate
    /// it signs for `names`, with `service` as its CommonName. The CA's key signs once and is
    /// dropped, so nothing can sign more.
    pub fn issue(service: &str, names: &[String]) -> Result<Self, rcgen::Error> {
        let since_epoch = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let now = rcgen::date_time_ymd(1970, 1, 1) + since_epoch;
        let validity = |params: &mut rcgen::CertificateParams| {
            params.not_before = now - Duration::from_secs(60 * 60);
            params.not_after = now + VALIDITY;
        };
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("{service} webhook CA"));
        ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
        validity(&mut ca_params);
        let ca_key = rcgen::KeyPair::generate()?;
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key)?;
        // The API server checks the names, never the CommonName alone.
        let mut params = rcgen::CertificateParams::new(names.to_vec())?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, service);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        validity(&mut params);
        let key = rcgen::KeyPair::generate()?;
        let serving = params.signed_by(&key, &ca)?;
        Ok(Self {
            chain: serving.pem().into_bytes(),
            key: key.serialize_pem().into_bytes(),
            ca: ca.pem().into_bytes(),
        })
    }

    /// When the serving certificate (the first in the chain) expires, in seconds since the
    /// Unix epoch; `None` if it cannot be read, which [`Certificate::server_config`] reports.
    pub fn expires_at(&self) -> Option<i64> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(&self.chain).ok()?;
        let certificate = pem.parse_x509().ok()?;
        Some(certificate.validity().not_after.timestamp())
    }

    /// The CA, PEM: what a test's client trusts.
    #[cfg(test)]
    pub(crate) fn ca_pem(&self) -> &[u8] {
        &self.ca
    }

    /// A rustls server configuration presenting this certificate.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, Error> {
        let unusable = |e: &dyn std::fmt::Display| Error::Unusable(e.to_string());
        let chain = CertificateDer::pem_slice_iter(&self.chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| unusable(&e))?;
        let key = PrivateKeyDer::from_pem_slice(&self.key).map_err(|e| unusable(&e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| unusable(&e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| unusable(&e))?;
        Ok(Arc::new(config))
    }
}

/// The DNS names of Service `service` in `namespace`, and loopback for an operator run outside
/// the cluster with `clientConfig.url` (as operator-gen's e2e does).
pub fn names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
    ]
}

/// Where the CA is written in the self-managed mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaTarget {
    /// Every webhook of this ValidatingWebhookConfiguration.
    Validating(String),
    /// Every webhook of this MutatingWebhookConfiguration.
    Mutating(String),
    /// The conversion webhook of this CustomResourceDefinition.
    Conversion(String),
}

/// The names an operator's certificates live under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The Service in front of the webhooks, whose DNS names the certificate carries.
    pub service: String,
    /// The operator's namespace, where both Secrets and the Service are.
    pub namespace: String,
    /// The Secret every replica serves from in the self-managed mode.
    pub secret: String,
    /// The Secret cert-manager's Certificate fills. Its own, because cert-manager writes a
    /// `kubernetes.io/tls` Secret and a Secret's type is fixed.
    pub cert_manager_secret: String,
    /// Hosts beyond loopback where the API server calls an operator run outside the cluster
    /// (`local.webhooks` in operator.yaml: a bridge address kind or minikube reach the host
    /// at), which a self-managed certificate names too.
    pub local_hosts: Vec<String>,
}

/// Reads (and in the self-managed mode fills) the Secret, and publishes the CA.
pub struct Certificates {
    client: Client,
    secrets: Api<Secret>,
    issuer: Issuer,
    names: Names,
    targets: Vec<CaTarget>,
}

impl Certificates {
    /// Certificates under `names`, issued by `issuer`, whose CA goes to `targets`.
    pub fn new(client: Client, issuer: Issuer, names: Names, targets: Vec<CaTarget>) -> Self {
        Self {
            secrets: Api::namespaced(client.clone(), &names.namespace),
            client,
            issuer,
            names,
            targets,
        }
    }

    /// The certificate in the Secret. In the self-managed mode an empty Secret, or one whose
    /// certificate is unusable, is filled first; if another replica fills it meanwhile, its
    /// certificate is the one returned.
    pub async fn current(&self) -> Result<Certificate, Error> {
        if self.issuer == Issuer::CertManager {
            let name = &self.names.cert_manager_secret;
            let secret = self.secrets.get_opt(name).await?.unwrap_or_default();
            return Certificate::from_secret(&secret).ok_or_else(|| Error::NotIssued(name.clone()));
        }
        let name = &self.names.secret;
        loop {
            let mut secret = self.secrets.get(name).await?;
            match Certificate::from_secret(&secret).map(|certificate| {
                let usable = certificate.server_config();
                (certificate, usable)
            }) {
                Some((certificate, Ok(_))) => return Ok(certificate),
                // A Secret that holds no usable certificate (truncated, edited, another tool's)
                // is filled anew, as an empty one is: left as it is, no replica could serve.
                Some((_, Err(error))) => {
                    tracing::warn!(%error, secret = %name, "the webhook certificate is unusable; issuing a new one");
                }
                None => {}
            }
            let mut dns = names(&self.names.service, &self.names.namespace);
            dns.extend(self.names.local_hosts.iter().cloned());
            let issued = Certificate::issue(&self.names.service, &dns)?;
            secret.data = Some(issued.secret_data());
            // `replace` sends the resourceVersion read above: a Secret changed since fails
            // with a conflict instead of being overwritten.
            match self
                .secrets
                .replace(name, &PostParams::default(), &secret)
                .await
            {
                Ok(_) => {
                    tracing::info!(secret = %name, "issued a self-managed webhook certificate");
                    return Ok(issued);
                }
                Err(kube::Error::Api(status)) if status.is_conflict() => continue,
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Writes the CAs of `certificates` into `caBundle` of every [`CaTarget`] where it
    /// differs (self-managed mode only; cert-manager's CA injector does it otherwise).
    /// Failures are logged: the next refresh tries again.
    pub async fn publish_ca(&self, certificates: &[&Certificate]) {
        if self.issuer != Issuer::SelfManaged {
            return;
        }
        let bundle = bundle(certificates);
        for target in &self.targets {
            match target {
                CaTarget::Validating(name) => {
                    publish::<admissionregistration::ValidatingWebhookConfiguration>(
                        &self.client,
                        name,
                        &bundle,
                    )
                    .await;
                }
                CaTarget::Mutating(name) => {
                    publish::<admissionregistration::MutatingWebhookConfiguration>(
                        &self.client,
                        name,
                        &bundle,
                    )
                    .await;
                }
                CaTarget::Conversion(name) => publish_to_crd(&self.client, name, &bundle).await,
            }
        }
    }
}

/// The CAs of `certificates`, each once, in order: the old one stays trusted while replicas
/// still serve a certificate it signed.
fn bundle(certificates: &[&Certificate]) -> ByteString {
    let mut cas: Vec<&[u8]> = certificates.iter().map(|c| c.ca.as_slice()).collect();
    cas.dedup();
    ByteString(cas.concat())
}

/// The webhooks of `configuration` whose `caBundle` is not `bundle`, as the items of a
/// strategic merge patch on `webhooks` (which merge by name).
fn stale_webhooks(
    configuration: &serde_json::Value,
    bundle: &ByteString,
) -> Vec<serde_json::Value> {
    let wanted = serde_json::to_value(bundle).unwrap_or_default();
    configuration["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|webhook| webhook["clientConfig"]["caBundle"] != wanted)
        .map(|webhook| serde_json::json!({ "name": webhook["name"], "clientConfig": { "caBundle": wanted } }))
        .collect()
}

/// Patches `caBundle` of each webhook of configuration `name` of kind `K` whose bundle differs
/// from `bundle`, so nothing else in the configuration is written.
async fn publish<K>(client: &Client, name: &str, bundle: &ByteString)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api = Api::<K>::all(client.clone());
    let kind = K::kind(&());
    let configuration = match api.get_opt(name).await {
        Ok(Some(configuration)) => serde_json::to_value(configuration).unwrap_or_default(),
        Ok(None) => {
            tracing::warn!(
                "{kind} {name} is not installed; the API server calls no such webhook of this operator"
            );
            return;
        }
        Err(error) => {
            tracing::warn!(%error, "cannot read {kind} {name}");
            return;
        }
    };
    let stale = stale_webhooks(&configuration, bundle);
    if stale.is_empty() {
        return;
    }
    let patch = Patch::Strategic(serde_json::json!({ "webhooks": stale }));
    match api.patch(name, &PatchParams::default(), &patch).await {
        Ok(_) => tracing::info!("wrote the webhook CA into {kind} {name}"),
        Err(error) => tracing::warn!(%error, "cannot write the webhook CA into {kind} {name}"),
    }
}

/// The `caBundle` a CRD's conversion webhook has now, if any.
pub fn conversion_ca_bundle(crd: &CustomResourceDefinition) -> Option<&ByteString> {
    crd.spec
        .conversion
        .as_ref()?
        .webhook
        .as_ref()?
        .client_config
        .as_ref()?
        .ca_bundle
        .as_ref()
}

/// Patches `caBundle` of CRD `name`'s conversion webhook where it differs from `bundle`: a
/// merge patch of that one field, so the rest of the CRD (the webhook's address included)
/// stays as applied.
async fn publish_to_crd(client: &Client, name: &str, bundle: &ByteString) {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let crd = match api.get_opt(name).await {
        Ok(Some(crd)) => crd,
        Ok(None) => {
            tracing::warn!("CustomResourceDefinition {name} is not installed");
            return;
        }
        Err(error) => {
            tracing::warn!(%error, "cannot read CustomResourceDefinition {name}");
            return;
        }
    };
    let converts = crd
        .spec
        .conversion
        .as_ref()
        .is_some_and(|c| c.webhook.is_some());
    if !converts {
        tracing::warn!(
            "CustomResourceDefinition {name} converts no version through this webhook; apply the CRD `crdgen` prints"
        );
        return;
    }
    if conversion_ca_bundle(&crd) == Some(bundle) {
        return;
    }
    let patch = Patch::Merge(serde_json::json!({
        "spec": { "conversion": { "webhook": { "clientConfig": { "caBundle": bundle } } } }
    }));
    match api.patch(name, &PatchParams::default(), &patch).await {
        Ok(_) => tracing::info!("wrote the webhook CA into CustomResourceDefinition {name}"),
        Err(error) => {
            tracing::warn!(%error, "cannot write the webhook CA into CustomResourceDefinition {name}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_secret_holding_an_unusable_certificate_is_filled_anew() {
        use serde_json::json;
        let corrupt = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "op-webhook-tls", "namespace": "ops", "resourceVersion": "7"},
            // "not a certificate" and "not a key", base64-encoded.
            "data": {CERT_KEY: "bm90IGEgY2VydGlmaWNhdGU=", PRIVATE_KEY: "bm90IGEga2V5"},
        });
        let (client, seen) = crate::testing::mock_api(move |request| {
            if request.method == http::Method::PUT {
                (200, request.body.clone())
            } else {
                (200, corrupt.clone())
            }
        });
        let names = Names {
            service: "op".into(),
            namespace: "ops".into(),
            secret: "op-webhook-tls".into(),
            cert_manager_secret: "op-webhook-certificate".into(),
            local_hosts: Vec::new(),
        };
        let certificates = Certificates::new(client, Issuer::SelfManaged, names, Vec::new());
        let issued = certificates.current().await.expect("a new certificate");
        assert!(issued.server_config().is_ok());
        drop(certificates);
        let seen = seen.await.expect("the mock API server");
        let put = seen
            .iter()
            .find(|s| s.method == http::Method::PUT)
            .expect("the Secret was written");
        assert_eq!(
            put.body["metadata"]["resourceVersion"], "7",
            "on condition it is unchanged"
        );
    }

    #[test]
    fn an_issued_certificate_serves_and_names_the_service_and_loopback() {
        let names = names("my-operator", "operators");
        let issued = Certificate::issue("my-operator", &names).expect("issues");
        issued.server_config().expect("rustls takes it");
        let chain = String::from_utf8(issued.chain.clone()).expect("PEM is text");
        assert!(chain.starts_with("-----BEGIN CERTIFICATE-----"), "{chain}");
        assert_ne!(
            issued.ca, issued.chain,
            "the serving certificate is signed by a CA"
        );
        let again = Certificate::issue("my-operator", &names).expect("issues");
        assert_ne!(issued, again, "each issue makes new keys");
        assert!(names.contains(&"my-operator.operators.svc".to_owned()));
        assert!(names.contains(&"127.0.0.1".to_owned()));
    }

    #[test]
    fn an_issued_certificate_expires_after_its_validity() {
        let certificate = Certificate::issue("svc", &names("svc", "ns")).expect("issued");
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after the epoch")
            .as_secs();
        let expires = certificate.expires_at().expect("a readable certificate");
        let expected = i64::try_from(now + VALIDITY.as_secs()).expect("fits");
        assert!((expires - expected).abs() < 120, "{expires} vs {expected}");
        let garbage = Certificate {
            chain: b"not a certificate".to_vec(),
            ..certificate
        };
        assert_eq!(garbage.expires_at(), None);
    }

    #[test]
    fn a_secret_is_read_back_as_the_certificate_written_into_it() {
        let issued = Certificate::issue("op", &names("op", "default")).expect("issues");
        let secret = Secret {
            data: Some(issued.secret_data()),
            ..Default::default()
        };
        assert_eq!(Certificate::from_secret(&secret), Some(issued));
        assert_eq!(
            Certificate::from_secret(&Secret::default()),
            None,
            "an empty Secret has none"
        );
        assert!(!format!("{:?}", Certificate::from_secret(&secret)).contains("PRIVATE"));
    }

    #[test]
    fn only_webhooks_with_another_bundle_are_patched() {
        let old = Certificate::issue("op", &names("op", "ns")).expect("issues");
        let new = Certificate::issue("op", &names("op", "ns")).expect("issues");
        let both = bundle(&[&new, &old]);
        assert_eq!(bundle(&[&new, &new]).0, new.ca, "one CA once");
        let current = serde_json::to_value(&both).expect("JSON");
        let configuration = serde_json::json!({ "webhooks": [
            { "name": "a.example.com", "clientConfig": { "caBundle": current } },
            { "name": "b.example.com", "clientConfig": {} },
        ]});
        let stale = stale_webhooks(&configuration, &both);
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert_eq!(stale[0]["name"], "b.example.com");
        assert_eq!(stale[0]["clientConfig"]["caBundle"], current);
    }
}
