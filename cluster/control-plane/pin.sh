#!/usr/bin/env bash
# Writes the Go module that pins one component of the control plane, its node, or a tool beside
# it: `pin.sh kubernetes 1.37.2`, `pin.sh etcd 3.6.16`, `pin.sh containerd 2.4.2` or
# `pin.sh helm 3.22.0` creates `modules/<component>-<version>/` with a go.mod and a go.sum, to be
# checked in. `build.sh` builds only from such a folder, with the module graph
# that go.sum fixes, so the binaries change only when a reviewed diff changes it.
#
# Why a module of our own: neither k8s.io/kubernetes nor go.etcd.io/etcd/server/v3 can be
# `go install`ed, because their go.mod replace sibling modules with local folders
# (`k8s.io/api => ./staging/src/k8s.io/api`, `go.etcd.io/etcd/api/v3 => ../api`), and a
# dependency's replaces are ignored. This module requires the component and replaces each of
# those siblings with its published release of the same version: the staging modules of
# Kubernetes 1.X.Y are published as v0.X.Y, etcd's as the same v3.X.Y. Helm's and containerd's
# go.mod replace nothing, so their modules only require them: the point is the go.sum.
#
# Each tool the build makes is a `tool` line, so that `go mod tidy` records every module its
# packages import: Kubernetes pins the control plane's three and the node's kubelet, kube-proxy
# and kube-scheduler; containerd pins the daemon, its runc shim and ctr.
#
# Needs the Go module proxy; run it by hand when moving to a new version, never from CI.
set -euo pipefail

usage="usage: pin.sh kubernetes|etcd|containerd|helm <version>"
component=${1:?$usage}
version=${2:?$usage}
version=${version#v}
here=$(cd "$(dirname "$0")" && pwd)

case "$component" in
kubernetes)
  module=k8s.io/kubernetes
  # v1.X.Y's staging modules are v0.X.Y.
  sibling_version=v0.${version#*.}
  tools=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
    k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
    k8s.io/kubernetes/cmd/kube-scheduler)
  ;;
etcd)
  module=go.etcd.io/etcd/server/v3
  sibling_version=v$version
  tools=(go.etcd.io/etcd/server/v3)
  ;;
containerd)
  module=github.com/containerd/containerd/v${version%%.*}
  sibling_version=
  tools=("$module/cmd/containerd" "$module/cmd/containerd-shim-runc-v2" "$module/cmd/ctr")
  ;;
helm)
  module=helm.sh/helm/v${version%%.*}
  sibling_version=
  tools=("$module/cmd/helm")
  ;;
*)
  echo "pin.sh: unknown component '$component' (kubernetes, etcd, containerd or helm)" >&2
  exit 2
  ;;
esac

dir=$here/modules/$component-$version
work=$(mktemp -d "${TMPDIR:-/tmp}/pin.XXXXXX")
trap 'rm -rf "$work"' EXIT

upstream_mod=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$module@v$version" |
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
[ -f "$upstream_mod" ] || { echo "pin.sh: the proxy gave no go.mod for $module@v$version" >&2; exit 1; }
go_line=$(awk '$1 == "go" { print; exit }' "$upstream_mod")
# Every local-folder replace of the upstream go.mod names a published sibling module.
siblings=$(awk '$2 == "=>" && $3 ~ /^\.\.?\// { print $1 }' "$upstream_mod" | sort -u)

{
  echo "// Pins $component $version for the control plane of \`cargo xtask cluster\`; written by"
  echo "// xtask/control-plane/pin.sh, built by xtask/control-plane/build.sh."
  echo "module operator-gen.local/control-plane/$component"
  echo
  echo "$go_line"
  echo
  echo "require $module v$version"
  if [ -n "$siblings" ]; then
    echo
    echo "replace ("
    for sibling in $siblings; do
      echo "	$sibling => $sibling $sibling_version"
    done
    echo ")"
  fi
} > "$work/go.mod"

cd "$work"
for tool in "${tools[@]}"; do
  go get -tool "$tool@v$version"
done
go mod tidy
mkdir -p "$dir"
cp go.mod go.sum "$dir/"
echo "pinned $module v$version in ${dir#"$here"/}"
