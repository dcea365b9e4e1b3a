//! The control plane's four processes and their flags: etcd, kube-apiserver,
//! kube-controller-manager and, with a node, kube-scheduler.
//!
//! Without a node, the API server listens on loopback and the controller manager runs only
//! the garbage collector and the namespace controller, so that a bench sees only its own
//! writes. With one, the API server listens on the bridge's address (pods cannot reach the
//! host's loopback), authorizes kubelets with the Node authorizer, calls the kubelet with a
//! client certificate and checks the kubelet's; the controller manager runs every controller.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::{
    network::{API_PORT, BRIDGE_ADDRESS, ETCD_PEER_PORT, ETCD_PORT, SCHEDULER_PORT, SERVICE_RANGE},
    pki::{Identity, Pki},
};

/// Where the control plane's processes keep what they need.
pub struct Layout<'a> {
    pub state: &'a Path,
    pub pki: &'a Pki,
    /// Whether a node runs beside it.
    pub node: bool,
}

impl Layout<'_> {
    /// The address the API server listens on and clients reach it at.
    pub fn api_address(&self) -> std::net::Ipv4Addr {
        if self.node {
            BRIDGE_ADDRESS
        } else {
            std::net::Ipv4Addr::LOCALHOST
        }
    }

    fn kubeconfig(&self, identity: Identity) -> PathBuf {
        self.state
            .join(format!("{}.kubeconfig", identity.file_name()))
    }

    fn pki(&self, file: &str) -> String {
        self.pki.path(file).display().to_string()
    }
}

pub fn etcd(bin: &Path, layout: &Layout<'_>) -> Command {
    let mut command = Command::new(bin.join("etcd"));
    command
        .arg(format!(
            "--data-dir={}",
            layout.state.join("etcd").display()
        ))
        .arg(format!("--listen-client-urls=http://127.0.0.1:{ETCD_PORT}"))
        .arg(format!(
            "--advertise-client-urls=http://127.0.0.1:{ETCD_PORT}"
        ))
        .arg(format!(
            "--listen-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}"
        ))
        .arg(format!(
            "--initial-advertise-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}"
        ))
        .arg(format!(
            "--initial-cluster=default=http://127.0.0.1:{ETCD_PEER_PORT}"
        ))
        .arg("--unsafe-no-fsync");
    command
}

/// kube-apiserver. Without a node it advertises `advertise` (the `kubernetes` Endpoints
/// refuse loopback; nothing connects there); with one, the bridge's address, where it
/// listens.
pub fn apiserver(bin: &Path, layout: &Layout<'_>, advertise: &str) -> Command {
    let mut command = Command::new(bin.join("kube-apiserver"));
    let address = layout.api_address();
    command
        .arg(format!("--etcd-servers=http://127.0.0.1:{ETCD_PORT}"))
        .arg(format!("--bind-address={address}"))
        .arg(format!("--secure-port={API_PORT}"))
        .arg(format!("--tls-cert-file={}", layout.pki("apiserver.crt")))
        .arg(format!(
            "--tls-private-key-file={}",
            layout.pki("apiserver.key")
        ))
        .arg(format!("--token-auth-file={}", layout.pki("tokens.csv")))
        .arg(format!(
            "--service-account-key-file={}",
            layout.pki("sa.pub")
        ))
        .arg(format!(
            "--service-account-signing-key-file={}",
            layout.pki("sa.key")
        ))
        .arg("--service-account-issuer=https://kubernetes.default.svc")
        .arg(format!("--service-cluster-ip-range={SERVICE_RANGE}"))
        .arg("--enable-priority-and-fairness=false");
    if layout.node {
        command
            .arg(format!("--advertise-address={BRIDGE_ADDRESS}"))
            .arg("--authorization-mode=Node,RBAC")
            .arg("--enable-admission-plugins=NodeRestriction")
            .arg(format!(
                "--kubelet-client-certificate={}",
                layout.pki("apiserver-kubelet-client.crt")
            ))
            .arg(format!(
                "--kubelet-client-key={}",
                layout.pki("apiserver-kubelet-client.key")
            ))
            .arg(format!(
                "--kubelet-certificate-authority={}",
                layout.pki("ca.crt")
            ))
            .arg("--kubelet-preferred-address-types=InternalIP");
    } else {
        command
            .arg(format!("--advertise-address={advertise}"))
            .arg("--authorization-mode=RBAC");
    }
    command
}

/// kube-controller-manager, as its own identity, each controller as its own ServiceAccount.
pub fn controller_manager(bin: &Path, layout: &Layout<'_>) -> Command {
    let mut command = Command::new(bin.join("kube-controller-manager"));
    let kubeconfig = layout.kubeconfig(Identity::ControllerManager);
    command
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--use-service-account-credentials")
        // Else the kube-root-ca.crt ConfigMap of every namespace, which pods verify the API
        // server with, carries no CA.
        .arg(format!("--root-ca-file={}", layout.pki("ca.crt")))
        .arg(format!(
            "--service-account-private-key-file={}",
            layout.pki("sa.key")
        ))
        // Else it creates a folder under /usr/libexec.
        .arg(format!(
            "--flex-volume-plugin-dir={}",
            layout.state.join("flex-volumes").display()
        ))
        // The garbage collector's client is held to 20 requests a second by default: the
        // 1,000 children of the e2e's sharded primaries took it over a minute to remove,
        // which the next check's deletion waited out. A cluster of its own can spare more.
        .arg("--kube-api-qps=200")
        .arg("--kube-api-burst=400")
        .arg("--leader-elect=false")
        .arg("--secure-port=0");
    if layout.node {
        // Deployments, ReplicaSets, EndpointSlices, ServiceAccounts, Nodes: all of them.
        command.arg("--controllers=*");
    } else {
        command.arg("--controllers=garbagecollector,namespace");
    }
    command
}

/// kube-scheduler, which only a node needs.
pub fn scheduler(bin: &Path, layout: &Layout<'_>) -> Command {
    let mut command = Command::new(bin.join("kube-scheduler"));
    let kubeconfig = layout.kubeconfig(Identity::Scheduler);
    command
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!(
            "--authentication-kubeconfig={}",
            kubeconfig.display()
        ))
        .arg(format!(
            "--authorization-kubeconfig={}",
            kubeconfig.display()
        ))
        .arg("--leader-elect=false")
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={SCHEDULER_PORT}"));
    command
}
