//! The cluster's credentials, made with `openssl` at every `up` and removed with its state: a CA,
//! the API server's serving certificate, the kubelet's serving certificate and the API server's
//! client certificate for calling the kubelet, the ServiceAccount signing key, and one token
//! per identity (the admin, and each component as the user Kubernetes' default RBAC binds).

use std::{
    fs,
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result};

use crate::network::{BRIDGE_ADDRESS, KUBERNETES_SERVICE_IP, NODE_NAME};

/// How long the certificates are valid: longer than any run, shorter than a forgotten one.
const DAYS: &str = "7";

/// Who talks to the API server, each with a token of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// `system:masters`: the e2e, kubectl, helm.
    Admin,
    /// `system:node:<node>` in `system:nodes`, which the Node authorizer and NodeRestriction
    /// hold to its own node and pods.
    Kubelet,
    /// `system:kube-proxy`, bound to `system:node-proxier`.
    Proxy,
    /// `system:kube-scheduler`.
    Scheduler,
    /// `system:kube-controller-manager`, whose controllers then run as their own
    /// ServiceAccounts (`--use-service-account-credentials`).
    ControllerManager,
}

impl Identity {
    pub const ALL: [Self; 5] = [
        Self::Admin,
        Self::Kubelet,
        Self::Proxy,
        Self::Scheduler,
        Self::ControllerManager,
    ];

    /// The kubeconfig's file name, and the token's prefix.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Kubelet => "kubelet",
            Self::Proxy => "kube-proxy",
            Self::Scheduler => "kube-scheduler",
            Self::ControllerManager => "kube-controller-manager",
        }
    }

    /// The user name and groups of the token file's line.
    fn user(self) -> (String, &'static str) {
        match self {
            Self::Admin => ("admin".to_owned(), "system:masters"),
            Self::Kubelet => (format!("system:node:{NODE_NAME}"), "system:nodes"),
            Self::Proxy => ("system:kube-proxy".to_owned(), ""),
            Self::Scheduler => ("system:kube-scheduler".to_owned(), ""),
            Self::ControllerManager => ("system:kube-controller-manager".to_owned(), ""),
        }
    }
}

/// The credentials' folder, `pki/` of the cluster's state.
#[derive(Debug, Clone)]
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// Makes every credential. The API server's certificate names `server` (where clients
    /// reach it), loopback, the `kubernetes` Service's ClusterIP and DNS names.
    pub fn write(&self, server: Ipv4Addr, nonce: &str) -> Result<()> {
        fs::create_dir_all(&self.dir)?;
        self.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            DAYS,
            "-subj",
            "/CN=operator-gen cluster CA",
        ])?;
        let names = [
            format!("IP:{server}"),
            "IP:127.0.0.1".to_owned(),
            format!("IP:{KUBERNETES_SERVICE_IP}"),
            "DNS:localhost".to_owned(),
            "DNS:kubernetes".to_owned(),
            "DNS:kubernetes.default".to_owned(),
            "DNS:kubernetes.default.svc".to_owned(),
            "DNS:kubernetes.default.svc.cluster.local".to_owned(),
        ];
        self.sign("apiserver", "/CN=kube-apiserver", Some(&names.join(",")))?;
        // The API server's identity at the kubelet, which asks the API server (webhook
        // authorization) whether it may: system:masters may.
        self.sign(
            "apiserver-kubelet-client",
            "/CN=kube-apiserver-kubelet-client/O=system:masters",
            None,
        )?;
        self.sign(
            "kubelet",
            &format!("/CN=system:node:{NODE_NAME}/O=system:nodes"),
            Some(&format!("IP:{BRIDGE_ADDRESS},DNS:{NODE_NAME}")),
        )?;
        self.openssl(&["genrsa", "-out", "sa.key", "2048"])?;
        self.openssl(&["rsa", "-pubout", "-in", "sa.key", "-out", "sa.pub"])?;
        let mut tokens = String::new();
        for identity in Identity::ALL {
            let (user, groups) = identity.user();
            let token = format!("{}-{nonce}", identity.file_name());
            tokens.push_str(&format!("{token},{user},{user},\"{groups}\"\n"));
        }
        fs::write(self.path("tokens.csv"), tokens)?;
        Ok(())
    }

    /// The token of `identity`, as [`Pki::write`] wrote it.
    pub fn token(&self, identity: Identity) -> Result<String> {
        let tokens = fs::read_to_string(self.path("tokens.csv"))?;
        let prefix = format!("{}-", identity.file_name());
        tokens
            .lines()
            .filter_map(|line| line.split(',').next())
            .find(|token| {
                token
                    .strip_prefix(&prefix)
                    .is_some_and(|rest| !rest.contains('-'))
            })
            .map(str::to_owned)
            .with_context(|| format!("no token for {} in tokens.csv", identity.file_name()))
    }

    /// A key and a certificate the CA signs for `subject`, with `names` as its
    /// subjectAltName, usable for serving and as a client.
    fn sign(&self, name: &str, subject: &str, names: Option<&str>) -> Result<()> {
        let (key, csr, crt, ext) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.ext"),
        );
        self.openssl(&[
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", subject,
        ])?;
        let mut extensions =
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n\
             extendedKeyUsage=serverAuth,clientAuth\n"
                .to_owned();
        if let Some(names) = names {
            extensions.push_str(&format!("subjectAltName={names}\n"));
        }
        fs::write(self.path(&ext), extensions)?;
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            DAYS,
            "-extfile",
            &ext,
        ])?;
        let _ = fs::remove_file(self.path(&csr));
        Ok(())
    }

    fn openssl(&self, args: &[&str]) -> Result<()> {
        let mut openssl = Command::new("openssl");
        openssl.args(args).current_dir(&self.dir);
        let what = format!("openssl {}", args.join(" "));
        crate::processes::checked(&mut openssl, &what, None).map(drop)
    }
}

/// A kubeconfig at `path` for `user` with `token`, on the API server at `server`, trusting
/// the cluster's CA, with `namespace` as its default.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca: &Path,
    user: &str,
    token: &str,
    namespace: &str,
) -> Result<()> {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {
            "server": server,
            "certificate-authority": ca,
        }}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {
            "cluster": "local",
            "user": user,
            "namespace": namespace,
        }}],
        "current-context": "local",
    });
    fs::write(path, config.to_string()).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_identity_gets_its_own_token_and_the_certificates_chain_to_the_ca() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let pki = Pki::new(dir.path().to_owned());
        pki.write(BRIDGE_ADDRESS, "n0nce").expect("credentials");
        let tokens: Vec<String> = Identity::ALL
            .iter()
            .map(|identity| pki.token(*identity).expect("a token"))
            .collect();
        let unique: std::collections::BTreeSet<_> = tokens.iter().collect();
        assert_eq!(unique.len(), tokens.len(), "{tokens:?}");
        let lines = fs::read_to_string(pki.path("tokens.csv")).expect("written");
        assert!(
            lines.contains(&format!(
                "system:node:{NODE_NAME},system:node:{NODE_NAME},\"system:nodes\""
            )),
            "{lines}"
        );
        for certificate in [
            "apiserver.crt",
            "apiserver-kubelet-client.crt",
            "kubelet.crt",
        ] {
            let verified = Command::new("openssl")
                .args(["verify", "-CAfile", "ca.crt", certificate])
                .current_dir(dir.path())
                .output()
                .expect("openssl runs");
            assert!(verified.status.success(), "{certificate}: {verified:?}");
        }
        let text = Command::new("openssl")
            .args(["x509", "-noout", "-text", "-in", "apiserver.crt"])
            .current_dir(dir.path())
            .output()
            .expect("openssl runs");
        let text = String::from_utf8_lossy(&text.stdout);
        for name in [
            format!("IP Address:{BRIDGE_ADDRESS}"),
            format!("IP Address:{KUBERNETES_SERVICE_IP}"),
            "DNS:kubernetes.default.svc".to_owned(),
        ] {
            assert!(
                text.contains(&name),
                "the API server's certificate lacks {name}"
            );
        }
    }
}
