#!/usr/bin/env bash
# Build every component of the offline test control plane from its Go module, at the
# versions pinned in versions.env, into a cache directory outside the clone.
# A stamp of versions, flags and Go version makes a warm machine rebuild nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=lib.sh
. "$here/lib.sh"

mkdir -p "$E2E_BIN"
# GOTOOLCHAIN=local: never fetch another Go toolchain for a module that asks for one.
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

kube_minor=${KUBE_VERSION#v1.}; kube_minor=${kube_minor%%.*}
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor"
  kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
etcd_ldflags="-s -w"

stamp_of() { # name, then whatever defines the build
  printf '%s\n' "$@" "$(go env GOVERSION)" | sha256sum | cut -c1-16
}

# build_if_stale NAME KEY... -- COMMAND...: run COMMAND unless NAME's stamp matches KEY.
build_if_stale() {
  local name=$1; shift
  local key=()
  while [ "$1" != "--" ]; do key+=("$1"); shift; done
  shift
  local want; want=$(stamp_of "${key[@]}")
  local stampf="$E2E_BIN/.stamp-$name"
  if [ -f "$stampf" ] && [ "$(cat "$stampf")" = "$want" ]; then
    log "build: $name is up to date"
    return 0
  fi
  local t0=$SECONDS
  log "build: $name ..."
  "$@"
  echo "$want" > "$stampf"
  log "build: $name done in $((SECONDS - t0))s"
}

build_kube() {
  # One `go build` for all mains, so they share compiled packages.
  (cd "$here/gomod" && go build -trimpath -ldflags "$kube_ldflags" -o "$E2E_BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy)
  (cd "$here/gomod" && go build -trimpath -ldflags "$etcd_ldflags" -o "$E2E_BIN/etcd" go.etcd.io/etcd/server/v3)
}

# build_from_module MODULE VERSION LDFLAGS OUTDIR PKG...: build the module's own
# main packages inside its directory in the module cache, so its own go.mod and
# go.sum pin every dependency exactly as upstream builds it. (`go install m@v`
# is not usable here: it asks the proxy for the module's version list to look
# for deprecations, and the proxy this machine reaches refuses that list for
# JobSet and Kueue.)
build_from_module() {
  local module=$1 version=$2 ldflags=$3 out=$4 dir
  shift 4
  dir=$(go_module_dir "$module" "$version")
  (cd "$dir" && GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath -ldflags "$ldflags" -o "$out" "$@")
}

build_kwok() {
  local ld="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$KUBE_VERSION"
  build_from_module sigs.k8s.io/kwok "$KWOK_VERSION" "$ld" "$E2E_BIN/" ./cmd/kwok ./cmd/kwokctl
}

build_jobset() {
  local ld="-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION -X sigs.k8s.io/jobset/pkg/version.GitCommit=$JOBSET_VERSION"
  build_from_module sigs.k8s.io/jobset "$JOBSET_VERSION" "$ld" "$E2E_BIN/jobset" .
}

# build_kueue VERSION OUT: the newest Kueue is bin/kueue, the oldest supported bin/kueue-<version>.
build_kueue() {
  local v=sigs.k8s.io/kueue/pkg/version
  local ld="-s -w -X $v.GitVersion=$1 -X $v.GitCommit=$1 -X $v.BuildDate=1970-01-01T00:00:00Z"
  build_from_module sigs.k8s.io/kueue "$1" "$ld" "$E2E_BIN/$2" ./cmd/kueue
}

build_helm() {
  local v=helm.sh/helm/v4/internal/version
  local ld="-s -w -X $v.version=$HELM_VERSION -X $v.gitCommit=$HELM_VERSION -X $v.gitTreeState=clean"
  build_from_module helm.sh/helm/v4 "$HELM_VERSION" "$ld" "$E2E_BIN/helm" ./cmd/helm
}

# CoreDNS serves the cluster domain to the real node's pods (e2e/node.sh).
build_coredns() {
  local ld="-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
  build_from_module github.com/coredns/coredns "$COREDNS_VERSION" "$ld" "$E2E_BIN/coredns" .
}

t_all=$SECONDS
build_if_stale kube "$KUBE_VERSION" "$ETCD_VERSION" "$kube_ldflags" "$(cat "$here/gomod/go.mod" "$here/gomod/go.sum")" -- build_kube
build_if_stale kwok "$KWOK_VERSION" "$KUBE_VERSION" module-build -- build_kwok
build_if_stale jobset "$JOBSET_VERSION" module-build -- build_jobset
build_if_stale kueue "$KUEUE_VERSION" module-build -- build_kueue "$KUEUE_VERSION" kueue
build_if_stale "kueue-$KUEUE_OLDEST_VERSION" "$KUEUE_OLDEST_VERSION" module-build -- \
  build_kueue "$KUEUE_OLDEST_VERSION" "kueue-$KUEUE_OLDEST_VERSION"
build_if_stale coredns "$COREDNS_VERSION" module-build -- build_coredns
build_if_stale helm "$HELM_VERSION" module-build -- build_helm
log "build: all components ready in $((SECONDS - t_all))s ($E2E_BIN)"
