#!/usr/bin/env bash
# Installs what the node takes from Debian's packages, when it is missing: runc (the OCI
# runtime containerd's shim starts), the CNI plugins (bridge, host-local, portmap, loopback),
# iptables (kube-proxy's and the node's own rules, in the nf_tables backend), nftables (`down`
# deletes the tables iptables made on first use), conntrack (kube-proxy clears stale UDP
# entries with it) and skopeo (the e2e reads each image it builds with it). None of them starts a service. Needs root and Debian's package archive.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

wanted=(runc containernetworking-plugins iptables nftables conntrack skopeo)
missing=()
for package in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "node-packages.sh: installing ${missing[*]} from Debian's packages" >&2
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
