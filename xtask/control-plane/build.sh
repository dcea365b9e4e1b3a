#!/usr/bin/env bash
# Installs what the control plane runs on (etcd, openssl) and builds kube-apiserver,
# kube-controller-manager and kubectl 1.20.2 from Debian bookworm's `kubernetes` source
# package into "$1", the machine's cache. `cargo xtask cluster` calls it when something is
# missing; the build itself is skipped when the binaries are already there. Needs root.
#
# Why this way: no container runtime here, so kind and k3d cannot run, and only the package
# registries are reachable. Debian's source package carries the full upstream tree with
# vendor/. One vendored library, modern-go/reflect2 1.0.1, crashes kube-apiserver on the
# first custom-resource write under Go >= 1.18; Debian's 1.0.2 replaces it.
set -euo pipefail

out=${1:?usage: build.sh <output dir>}
export DEBIAN_FRONTEND=noninteractive

if ! command -v etcd >/dev/null || ! command -v openssl >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends etcd-server openssl >/dev/null
fi
if [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/kubectl" ]; then
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/k8s-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
cat > /etc/apt/sources.list.d/operator-gen-src.sources <<SRC
Types: deb-src
URIs: $mirror
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  golang-go rsync jq dpkg-dev golang-github-modern-go-reflect2-dev >/dev/null

cd "$work"
apt-get source -qq --download-only kubernetes
dpkg-source -x kubernetes_*.dsc src >/dev/null
reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
rm -rf src/vendor/github.com/modern-go/reflect2
cp -r "$reflect2" src/vendor/github.com/modern-go/reflect2

mkdir -p gopath/src/k8s.io home
ln -s "$work/src" gopath/src/k8s.io/kubernetes
cd gopath/src/k8s.io/kubernetes
env HOME="$work/home" GOPATH="$work/gopath" GOFLAGS=-mod=vendor CGO_ENABLED=0 \
  make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kubectl"

mkdir -p "$out"
for bin in kube-apiserver kube-controller-manager kubectl; do
  install -m 0755 "_output/bin/$bin" "$out/$bin.partial"
  mv "$out/$bin.partial" "$out/$bin"
done
echo "built into $out"
