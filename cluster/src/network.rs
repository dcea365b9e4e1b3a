//! Every address, port, range and name the cluster and its node take on this machine, in one
//! place: what `up` claims and `down` gives back, and what a second node would collide with.
//!
//! The node's network is one Linux bridge with a /24 of pod addresses; the Services' range
//! beside it is routed to the bridge too, so that nothing addressed to a ClusterIP follows the
//! default route off the machine. Every port listens on loopback, or on the bridge's own
//! address where pods must reach it (the API server, the kubelet), never on a wildcard.

use std::net::Ipv4Addr;

/// The node's bridge. Its name says whose it is to anyone reading `ip link`.
pub const BRIDGE: &str = "opgen0";
/// The bridge's own address: the pods' gateway, and where the API server and the kubelet
/// listen when there is a node (pods cannot reach the host's loopback).
pub const BRIDGE_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 87, 0, 1);
/// The pods' addresses, the bridge's /24.
pub const POD_RANGE: &str = "10.87.0.0/24";
/// The length of [`POD_RANGE`]'s prefix, for the bridge's address.
pub const POD_PREFIX: u8 = 24;
/// The Services' ClusterIPs.
pub const SERVICE_RANGE: &str = "10.87.1.0/24";
/// The `kubernetes` Service's ClusterIP: the first of [`SERVICE_RANGE`].
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 87, 1, 1);

/// etcd's client and peer ports, on loopback.
pub const ETCD_PORT: u16 = 23790;
pub const ETCD_PEER_PORT: u16 = 23800;
/// The API server's port: on loopback without a node, on [`BRIDGE_ADDRESS`] with one.
pub const API_PORT: u16 = 16443;
/// The kubelet's API, on [`BRIDGE_ADDRESS`] (the API server calls it for logs, exec and
/// port-forward), and its health endpoint on loopback.
pub const KUBELET_PORT: u16 = 16250;
pub const KUBELET_HEALTHZ_PORT: u16 = 16248;
/// kube-proxy's health and metrics endpoints, on loopback.
pub const PROXY_HEALTHZ_PORT: u16 = 16256;
pub const PROXY_METRICS_PORT: u16 = 16249;
/// kube-scheduler's secure port, on loopback.
pub const SCHEDULER_PORT: u16 = 16259;

/// Where containerd sends every image pull: a loopback port nothing listens on, so a pod of
/// an image that was not imported fails at once with that refusal, and no DNS query or
/// packet for a registry leaves the machine. Port 1 (tcpmux) is privileged and unused.
pub const CLOSED_REGISTRY: &str = "http://127.0.0.1:1";

/// The node's name, as `kubectl get nodes` shows it.
pub const NODE_NAME: &str = "opgen-node";

/// The CNI network's name, which containerd's CNI cache files start with.
pub const CNI_NETWORK: &str = "operator-gen";

/// The iptables chain of the node's own rules: the drop of forwarding between the bridge and
/// every other interface, in the `mangle` table, which kube-proxy's FORWARD jumps do not pass.
pub const FORWARD_CHAIN: &str = "OPERATOR-GEN-NODE";

/// The cgroup the kubelet puts every pod under (`cgroupRoot`), in each hierarchy.
pub const CGROUP_ROOT: &str = "operator-gen";

/// The folder of the node's state that must be short (containerd's sockets and task state,
/// runc's root) and machine-wide (it is how a second `up` finds a node running).
pub const RUN_DIR: &str = "/run/operator-gen";

/// Every port the cluster listens on with a node, each with what listens there, for the
/// check that none is taken before `up`.
pub const NODE_PORTS: [(u16, &str); 8] = [
    (ETCD_PORT, "etcd"),
    (ETCD_PEER_PORT, "etcd's peer port"),
    (API_PORT, "kube-apiserver"),
    (KUBELET_PORT, "the kubelet"),
    (KUBELET_HEALTHZ_PORT, "the kubelet's health endpoint"),
    (PROXY_HEALTHZ_PORT, "kube-proxy's health endpoint"),
    (PROXY_METRICS_PORT, "kube-proxy's metrics"),
    (SCHEDULER_PORT, "kube-scheduler"),
];
