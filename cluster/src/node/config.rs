//! The node's configuration files: containerd's, the CNI network's, the kubelet's and
//! kube-proxy's. Each is written whole at every `up`, from the constants of
//! [`crate::network`] and the node's folders, and says in a comment why a setting differs
//! from its default.

use std::path::Path;

use serde_json::json;

use super::Folders;
use crate::network::{
    BRIDGE, BRIDGE_ADDRESS, CGROUP_ROOT, CLOSED_REGISTRY, CNI_NETWORK, KUBELET_HEALTHZ_PORT,
    KUBELET_PORT, NODE_NAME, POD_RANGE, PROXY_HEALTHZ_PORT, PROXY_METRICS_PORT,
};

/// A TOML string for `text`: quoted and escaped by the TOML serializer.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

fn shown(path: &Path) -> String {
    toml_string(&path.display().to_string())
}

/// containerd's `config.toml` (version 3, which containerd 2 reads and migrates).
///
/// Every folder containerd, its CRI plugin and runc would otherwise put under `/var/lib`,
/// `/run/containerd`, `/opt` or `/var/run` is one of the node's; the sandbox image is the one
/// `up` built; every pull goes to [`CLOSED_REGISTRY`]; NRI, CDI and the OOM-score lowering this
/// machine's root may not do are off.
pub fn containerd(folders: &Folders, sandbox_image: &str, runc: &Path) -> String {
    format!(
        "version = 3
root = {root}
state = {state}

[grpc]
  address = {socket}

[ttrpc]
  address = {ttrpc}

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = {sandbox}
    [plugins.'io.containerd.cri.v1.images'.registry]
      # hosts.toml sends every registry to a closed loopback port: nothing is pulled.
      config_path = {registries}

  [plugins.'io.containerd.cri.v1.runtime']
    # runc cannot lower a sandbox's oom_score_adj without CAP_SYS_RESOURCE, which root in a
    # VM may lack (\"can't get final child's PID from pipe\").
    restrict_oom_score_adj = true
    # Pods' network namespaces under the node's state, not /var/run/netns.
    netns_mounts_under_state_dir = true
    enable_cdi = false
    cdi_spec_dirs = []
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = {runc}
        Root = {runc_root}
        SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['/usr/lib/cni']
      conf_dir = {cni}

  [plugins.'io.containerd.internal.v1.opt']
    path = {opt}

  [plugins.'io.containerd.image-verifier.v1.bindir']
    bin_dir = {verifiers}

  [plugins.'io.containerd.nri.v1.nri']
    disable = true
",
        root = shown(&folders.containerd_root),
        state = shown(&folders.run.join("containerd")),
        socket = shown(&folders.containerd_socket()),
        ttrpc = shown(&folders.run.join("containerd.sock.ttrpc")),
        sandbox = toml_string(sandbox_image),
        registries = shown(&folders.registries),
        runc = shown(runc),
        runc_root = shown(&folders.run.join("runc")),
        cni = shown(&folders.cni_config),
        opt = shown(&folders.state.join("containerd-opt")),
        verifiers = shown(&folders.state.join("image-verifiers")),
    )
}

/// `hosts.toml` for every registry (`_default`): the closed port, for pulls and resolves.
pub fn closed_registry() -> String {
    let server = toml_string(CLOSED_REGISTRY);
    format!(
        "# Every pull goes here, and is refused at once: images come from tarballs only.\n\
         server = {server}\n\n[host.{server}]\n  capabilities = ['pull', 'resolve']\n"
    )
}

/// The CNI network: pods on [`BRIDGE`], addresses from [`POD_RANGE`] kept in the node's
/// state, no masquerade (nothing leaves the machine to be masqueraded for), hairpin on so a
/// pod reaches itself through its Service.
pub fn cni(folders: &Folders) -> String {
    json!({
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": POD_RANGE, "gateway": BRIDGE_ADDRESS.to_string()}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": folders.state.join("cni-addresses"),
            },
        }],
    })
    .to_string()
}

/// The kubelet's `KubeletConfiguration`.
///
/// Its API authenticates every caller (client certificates of the cluster's CA, or tokens the
/// API server reviews) and asks the API server whether each may: no anonymous access, no
/// read-only port. It listens on the bridge's address, where the API server reaches it.
pub fn kubelet(folders: &Folders, pki: &crate::pki::Pki, v1_cgroups: bool) -> String {
    json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": BRIDGE_ADDRESS.to_string(),
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": true},
            "x509": {"clientCAFile": pki.path("ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": pki.path("kubelet.crt"),
        "tlsPrivateKeyFile": pki.path("kubelet.key"),
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": format!("/{CGROUP_ROOT}"),
        // The kubelet refuses cgroup v1 by default since 1.35; this machine kind has v1.
        "failCgroupV1": !v1_cgroups,
        "failSwapOn": false,
        "containerRuntimeEndpoint": format!("unix://{}", folders.containerd_socket().display()),
        "podLogsDir": folders.pod_logs,
        // No nameserver: nothing a pod asks of DNS leaves the machine. In-cluster clients
        // reach the API server at KUBERNETES_SERVICE_HOST, an address.
        "resolvConf": folders.resolv_conf(),
        "volumePluginDir": folders.state.join("volume-plugins"),
        // A nearly full disk must not evict the operators under test, nor collect their
        // imported images, which cannot be pulled back.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": false,
        "shutdownGracePeriod": "0s",
    })
    .to_string()
}

/// kube-proxy's `KubeProxyConfiguration`: iptables mode, endpoints on loopback, NodePorts only
/// on the bridge, and the machine's conntrack settings left as they are.
pub fn kube_proxy(kubeconfig: &Path) -> String {
    json!({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig},
        "mode": "iptables",
        "clusterCIDR": POD_RANGE,
        "hostnameOverride": NODE_NAME,
        "healthzBindAddress": format!("127.0.0.1:{PROXY_HEALTHZ_PORT}"),
        "metricsBindAddress": format!("127.0.0.1:{PROXY_METRICS_PORT}"),
        "nodePortAddresses": [format!("{BRIDGE_ADDRESS}/32")],
        // Zero leaves each of the machine's conntrack settings as it is.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        // NodePorts on loopback would set route_localnet on every interface.
        "iptables": {"localhostNodePorts": false},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folders() -> Folders {
        Folders::new(Path::new("/w/target/cluster/node"), Path::new("/run/x"))
    }

    #[test]
    fn containerd_reads_its_config_as_toml_with_every_folder_the_nodes() {
        let text = containerd(&folders(), "localhost/p:1", Path::new("/usr/sbin/runc"));
        let parsed: toml::Table = toml::from_str(&text).expect("TOML");
        assert_eq!(parsed["version"].as_integer(), Some(3));
        let plugins = &parsed["plugins"];
        assert_eq!(
            plugins["io.containerd.cri.v1.runtime"]["restrict_oom_score_adj"].as_bool(),
            Some(true)
        );
        for (table, key) in [
            ("io.containerd.internal.v1.opt", "path"),
            ("io.containerd.image-verifier.v1.bindir", "bin_dir"),
        ] {
            let path = plugins[table][key].as_str().expect("a path");
            assert!(
                path.starts_with("/w/target/cluster/node"),
                "{table}: {path}"
            );
        }
        assert!(
            parsed["state"]
                .as_str()
                .is_some_and(|s| s.starts_with("/run/x"))
        );
    }

    #[test]
    fn every_registry_is_the_closed_loopback_port() {
        let parsed: toml::Table = toml::from_str(&closed_registry()).expect("TOML");
        assert_eq!(parsed["server"].as_str(), Some(CLOSED_REGISTRY));
        assert!(CLOSED_REGISTRY.starts_with("http://127.0.0.1:"));
    }

    #[test]
    fn the_kubelet_lets_no_one_in_anonymously() {
        let pki = crate::pki::Pki::new("/w/pki".into());
        let config: serde_json::Value =
            serde_json::from_str(&kubelet(&folders(), &pki, true)).expect("JSON");
        assert_eq!(config["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(config["authorization"]["mode"], "Webhook");
        assert_eq!(config["readOnlyPort"], 0);
        assert_eq!(config["address"], BRIDGE_ADDRESS.to_string());
        assert_eq!(config["failCgroupV1"], false);
    }
}
