#!/usr/bin/env bash
# Builds one component of the control plane or its node from its pinned Go module into "$3":
# `build.sh kubernetes 1.37.2 <dir>` gives kube-apiserver, kube-controller-manager, kubectl,
# kubelet, kube-proxy and kube-scheduler, `build.sh etcd 3.6.16 <dir>` gives etcd,
# `build.sh containerd 2.4.2 <dir>` gives containerd, its runc shim and ctr, and
# `build.sh helm 3.22.0 <dir>` gives helm. The module is `modules/<component>-<version>/`
# beside this script (see pin.sh); its go.sum fixes every module that goes in, and
# `-mod=readonly` refuses a build that would change it.
#
# `cargo xtask cluster` calls this when its cache lacks the binaries, and names "$3" after
# the version and a hash of the module files and this script, so a changed go.sum or flag
# builds anew. The binaries are built into a sibling folder and renamed into place when all
# are there: a build that fails or is stopped leaves no half-filled "$3". Go's module and
# build caches live under "$4" (the machine's cache), so a second version or a rebuild
# reuses what the first one downloaded and compiled.
#
# Needs `go` (1.26 or newer) and the Go module proxy; nothing else, and not root.
set -euo pipefail

usage="usage: build.sh kubernetes|etcd|containerd|helm <version> <output dir> <go cache dir>"
component=${1:?$usage}
version=${2:?$usage}
out=${3:?$usage}
go_cache=${4:?$usage}
here=$(cd "$(dirname "$0")" && pwd)
module_dir=$here/modules/$component-$version

fail() {
  echo "build.sh: $*" >&2
  exit 1
}

command -v go >/dev/null ||
  fail "no \`go\` on PATH: the control plane is built from Go modules with Go 1.26 or newer"
[ -f "$module_dir/go.mod" ] && [ -f "$module_dir/go.sum" ] ||
  fail "no pinned module for $component $version in $module_dir; pin one with \`xtask/control-plane/pin.sh $component $version\`"

export GOMODCACHE=$go_cache/mod GOCACHE=$go_cache/build
export GOFLAGS=-mod=readonly GOTOOLCHAIN=${GOTOOLCHAIN:-local} CGO_ENABLED=0
mkdir -p "$GOMODCACHE" "$GOCACHE" "$(dirname "$out")"
cd "$module_dir"

echo "build.sh: downloading the modules of $component $version (${module_dir#"$here"/})" >&2
go mod download ||
  fail "downloading the modules of $component $version (${module_dir#"$here"/}) failed: is the Go module proxy reachable (\`go env GOPROXY\`)?"

partial=$(mktemp -d "$out.partial.XXXXXX")
trap 'rm -rf "$partial"' EXIT

build() {
  local binary=$1 package=$2
  shift 2
  echo "build.sh: building $binary ($package)" >&2
  go build -trimpath "$@" -o "$partial/$binary" "$package" ||
    fail "building $binary from $package (${module_dir#"$here"/}) failed"
}

case "$component" in
kubernetes)
  # What hack/lib/version.sh stamps into a release, so `/version` and `kubectl version`
  # report this version; the build date is the release's own (the time in the proxy's
  # .info file), the same on every machine.
  minor=${version#*.}
  minor=${minor%%.*}
  info=$(go mod download -json "k8s.io/kubernetes@v$version" |
    sed -n 's/^[[:space:]]*"Info": "\(.*\)",*$/\1/p')
  released=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info")
  ldflags="-s -w"
  # The proxy does not say which commit a release is, so gitCommit stays empty rather
  # than upstream's unexpanded placeholder.
  for stamp in "gitVersion=v$version" "gitMajor=1" "gitMinor=$minor" "gitTreeState=clean" \
    "buildDate=$released" "gitCommit="; do
    ldflags+=" -X k8s.io/component-base/version.$stamp -X k8s.io/client-go/pkg/version.$stamp"
  done
  for binary in kube-apiserver kube-controller-manager kubectl kubelet kube-proxy kube-scheduler; do
    build "$binary" "k8s.io/kubernetes/cmd/$binary" -ldflags "$ldflags"
  done
  # The node's sandbox (pause) image runs this program: the module's own C source, built
  # static here with the machine's gcc, so that no image is pulled for it.
  command -v gcc >/dev/null || fail "no \`gcc\` on PATH: the node's pause program is built from build/pause/linux/pause.c"
  pause_source=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
  echo "build.sh: building pause ($pause_source)" >&2
  gcc -Os -Wall -Werror -static -DVERSION="v$version" -o "$partial/pause" "$pause_source" ||
    fail "building pause from $pause_source failed: gcc -static needs the C library's static archive (Debian's libc6-dev)"
  strip "$partial/pause"
  ;;
containerd)
  # No cgo, and none of the snapshotters that need it or kernel modules this node does not use:
  # overlayfs is the node's. The version is stamped as its Makefile does.
  module=github.com/containerd/containerd/v${version%%.*}
  ldflags="-s -w -X $module/version.Version=v$version -X $module/version.Revision= -X $module/version.Package=$module"
  tags="no_btrfs no_devmapper no_zfs no_aufs netgo osusergo"
  for binary in containerd containerd-shim-runc-v2 ctr; do
    build "$binary" "$module/cmd/$binary" -tags "$tags" -ldflags "$ldflags"
  done
  ;;
etcd)
  build etcd go.etcd.io/etcd/server/v3 -ldflags "-s -w"
  ;;
helm)
  # What helm's Makefile stamps into a release: its version, and the Kubernetes version its
  # client-go is for, which `helm template` and `helm lint` assume when no cluster is asked
  # (unstamped, that is 1.20, and a chart's `kubeVersion: >= 1.33` would fail there).
  major=${version%%.*}
  client_go=$(go list -m -f '{{.Version}}' k8s.io/client-go)
  client_go_minor=${client_go#v0.}
  client_go_minor=${client_go_minor%%.*}
  ldflags="-s -w -X helm.sh/helm/v$major/internal/version.version=v$version"
  ldflags+=" -X helm.sh/helm/v$major/internal/version.metadata= -X helm.sh/helm/v$major/internal/version.gitTreeState=clean"
  for package in pkg/lint/rules pkg/chartutil; do
    ldflags+=" -X helm.sh/helm/v$major/$package.k8sVersionMajor=1"
    ldflags+=" -X helm.sh/helm/v$major/$package.k8sVersionMinor=$client_go_minor"
  done
  build helm "helm.sh/helm/v$major/cmd/helm" -ldflags "$ldflags"
  ;;
*)
  fail "unknown component '$component' (kubernetes, etcd, containerd or helm)"
  ;;
esac

chmod 0755 "$partial" "$partial"/*
rm -rf "$out"
mv -T "$partial" "$out"
trap - EXIT
echo "build.sh: built $component $version into $out" >&2
