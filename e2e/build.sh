#!/usr/bin/env bash
# Build every component of the offline test control plane from its Go module, at the
# versions pinned in versions.env, into a cache directory outside the clone.
# A stamp of versions, flags and Go version makes a warm machine rebuild nothing.
#
#   e2e/build.sh [COMPONENT...]     build what is stale of COMPONENT (kube kwok jobset kueue
#                                   helm coredns containerd adapter kueue-oldest; all without
#                                   one); while a background build runs, wait until it has
#                                   made these
#   e2e/build.sh --background       start the whole build detached, at idle CPU and I/O
#                                   priority, and return: `make test` and CI start it first,
#                                   so it runs on what the tiers leave idle, and each tier
#                                   waits only for the components it needs
#   e2e/build.sh --stop-background  stop a detached build (CI does on exit)
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

# split_key NAME KEY... -- COMPONENT: sets name, want (the stamp KEY makes) and component.
split_key() {
  name=$1; shift
  local key=()
  while [ "$1" != "--" ]; do key+=("$1"); shift; done
  want=$(stamp_of "${key[@]}") component=$2
}

fresh() { [ -f "$E2E_BIN/.stamp-$name" ] && [ "$(cat "$E2E_BIN/.stamp-$name")" = "$want" ]; }

# build_if_stale NAME KEY... -- COMPONENT: run build_COMPONENT (- as _) unless NAME's stamp matches KEY.
build_if_stale() {
  local name want component
  split_key "$@"
  wants || return 0
  if fresh; then
    log "build: $name is up to date"
    return 0
  fi
  local t0=$SECONDS
  log "build: $name ..."
  "build_${component//-/_}"
  echo "$want" > "$E2E_BIN/.stamp-$name"
  log "build: $name done in $((SECONDS - t0))s"
}

# fetch_if_stale NAME KEY... -- COMPONENT: download the modules build_COMPONENT will
# need, in the background of this shell, unless NAME is fresh. A failure here is the
# build's to report.
fetch_if_stale() {
  local name want component
  split_key "$@"
  wants || return 0
  fresh || { fetching=1 "build_${component//-/_}" > /dev/null 2>&1 || true; } &
}

# go_build LDFLAGS OUT PKG...: build PKG into OUT; with $fetching set, only download the
# modules that build needs (`go list -deps` loads every package's source, compiles nothing).
# The binaries are stripped (`-s -w` in every LDFLAGS), so the compiler need not write the
# debugging information the linker would drop (`-dwarf=false`): the same binaries, less of
# a cold machine's CPU. (Not in the stamps, for that reason: a warm machine's binaries are
# as good.)
go_build() {
  local ldflags=$1 out=$2
  shift 2
  if [ -n "${fetching:-}" ]; then go list -e -deps "$@" > /dev/null
  else go build -trimpath -gcflags=all=-dwarf=false -ldflags "$ldflags" -o "$out" "$@"; fi
}

build_kube() {
  # One `go build` for all mains, so they share compiled packages.
  (cd "$here/gomod" && go_build "$kube_ldflags" "$E2E_BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy)
  (cd "$here/gomod" && go_build "$etcd_ldflags" "$E2E_BIN/etcd" go.etcd.io/etcd/server/v3)
}

# build_from_module MODULE VERSION LDFLAGS OUTDIR PKG...: build the module's own
# main packages inside its directory in the module cache, so its own go.mod and
# go.sum pin every dependency exactly as upstream builds it. (`go install m@v`
# is not usable here: it asks the proxy for the module's version list to look
# for deprecations, and the proxy this machine reaches refuses that list for
# JobSet and Kueue.)
# $gotags, when set, are the build tags (comma-separated).
build_from_module() {
  local module=$1 version=$2 ldflags=$3 out=$4 dir
  shift 4
  dir=$(go_module_dir "$module" "$version")
  (cd "$dir" && GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false${gotags:+ -tags=$gotags}" \
    go_build "$ldflags" "$out" "$@")
}

build_kwok() {
  local ld="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$KUBE_VERSION"
  build_from_module sigs.k8s.io/kwok "$KWOK_VERSION" "$ld" "$E2E_BIN/" ./cmd/kwok ./cmd/kwokctl
}

build_jobset() {
  local ld="-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION -X sigs.k8s.io/jobset/pkg/version.GitCommit=$JOBSET_VERSION"
  build_from_module sigs.k8s.io/jobset "$JOBSET_VERSION" "$ld" "$E2E_BIN/jobset" .
}

# kueue_build VERSION OUT: the newest Kueue is bin/kueue, the oldest supported bin/kueue-<version>.
kueue_build() {
  local v=sigs.k8s.io/kueue/pkg/version
  local ld="-s -w -X $v.GitVersion=$1 -X $v.GitCommit=$1 -X $v.BuildDate=1970-01-01T00:00:00Z"
  build_from_module sigs.k8s.io/kueue "$1" "$ld" "$E2E_BIN/$2" ./cmd/kueue
}
build_kueue() { kueue_build "$KUEUE_VERSION" kueue; }
build_kueue_oldest() { kueue_build "$KUEUE_OLDEST_VERSION" "kueue-$KUEUE_OLDEST_VERSION"; }

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

# containerd runs the real node's pods (e2e/node.sh): 2.x for image volumes. Without the
# snapshotters that need C libraries or kernel modules this host lacks (overlayfs is used).
build_containerd() {
  local ld="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
  gotags=no_btrfs,no_devmapper,no_zfs build_from_module github.com/containerd/containerd/v2 \
    "$CONTAINERD_VERSION" "$ld" "$E2E_BIN/" ./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr
}

# prometheus-adapter serves Prometheus' series as the custom and resource metrics APIs the
# HPA reads (the real node's autoscaling tests).
build_adapter() {
  build_from_module sigs.k8s.io/prometheus-adapter "$PROMETHEUS_ADAPTER_VERSION" "-s -w" \
    "$E2E_BIN/prometheus-adapter" ./cmd/adapter
}

# The two lanes the builds run in, side by side (one `go build` leaves a core idle in its
# serial steps: loading packages, linking): each in the order the tiers of `make test`
# need them. Lane A: Kubernetes (the longest), then the real node's CoreDNS and containerd,
# then prometheus-adapter for its autoscaling tests. Lane B: what the e2e tier needs besides
# Kubernetes (kwok, JobSet, Kueue, Helm), then the oldest Kueue for the last tier.
lane_a() {
  "$1" kube "$KUBE_VERSION" "$ETCD_VERSION" "$kube_ldflags" "$(cat "$here/gomod/go.mod" "$here/gomod/go.sum")" -- kube
  "$1" coredns "$COREDNS_VERSION" module-build -- coredns
  "$1" containerd "$CONTAINERD_VERSION" module-build -- containerd
  "$1" adapter "$PROMETHEUS_ADAPTER_VERSION" module-build -- adapter
}
lane_b() {
  "$1" kwok "$KWOK_VERSION" "$KUBE_VERSION" module-build -- kwok
  "$1" jobset "$JOBSET_VERSION" module-build -- jobset
  "$1" kueue "$KUEUE_VERSION" module-build -- kueue
  "$1" helm "$HELM_VERSION" module-build -- helm
  "$1" "kueue-$KUEUE_OLDEST_VERSION" "$KUEUE_OLDEST_VERSION" module-build -- kueue-oldest
}

# each_component STEP: STEP NAME KEY... -- COMPONENT for every component wanted.
each_component() { lane_a "$1"; lane_b "$1"; }

# The components asked for, as " name name " (all when empty).
wanted=" "
wants() { [ "$wanted" = " " ] || [[ $wanted == *" $component "* ]]; }

# is_component NAME KEY... -- COMPONENT: known=1 if COMPONENT is $c; adds it to $names.
is_component() {
  names+=" ${*: -1}"
  [ "${*: -1}" != "$c" ] || known=1
}

# count_stale NAME KEY... -- COMPONENT: add 1 to $stale if the component is wanted and stale.
count_stale() {
  local name want component
  split_key "$@"
  if wants && ! fresh; then stale=$((stale + 1)); fi
}

lock=$E2E_BIN/.build.lock background_log=$E2E_CACHE/build-background.log
pidfile=$E2E_BIN/.build-background.pid

case "${1:-}" in
  --background)
    exec 9> "$lock"
    if ! flock -n 9; then log "build: already under way"; exit 0; fi
    # The detached build inherits descriptor 9, and with it the lock, until it ends.
    log "build: started in the background at idle priority (log: $background_log)"
    setsid chrt --idle 0 ionice -c 3 "$0" --locked > "$background_log" 2>&1 < /dev/null &
    exit 0 ;;
  --stop-background)
    if pid_alive "$pidfile" && grep -qa build.sh "/proc/$(cat "$pidfile")/cmdline"; then
      log "build: stopping the background build (pid $(cat "$pidfile"))"
      kill -TERM -- "-$(cat "$pidfile")" 2> /dev/null || true
    fi
    rm -f "$pidfile"
    exit 0 ;;
  --locked) # the detached build, its session's leader; descriptor 9 holds the lock
    echo $$ > "$pidfile"
    # A new session is a new autogroup where the kernel has them (sched_autogroup_enabled):
    # autogroups share the cores equally whatever their tasks' policies, so SCHED_IDLE
    # alone would still take half the cores from the tests. Nice 19 makes this group's
    # weight 15 against the others' 1024.
    echo 19 2> /dev/null > /proc/self/autogroup || true ;;
  --*) die "usage: $0 [COMPONENT... | --background | --stop-background]" ;;
  *)
    for c in "$@"; do
      known='' names=''
      each_component is_component
      [ -n "$known" ] || die "unknown component $c (one of:$names)"
      wanted+="$c "
    done
    exec 9> "$lock"
    if ! flock -n 9; then
      log "build: waiting for the background build (log: $background_log) to make: $*"
      while :; do
        stale=0
        each_component count_stale
        [ "$stale" -gt 0 ] || break
        # It ended without them: build them here (and show why they failed).
        if flock -n 9; then break; fi
        sleep 2
      done
      grep -h 'build: ' "$background_log" 2> /dev/null | sed 's/^/  background /' >&2 || true
      [ "$stale" -gt 0 ] || exit 0
    fi ;;
esac

t_all=$SECONDS
# Every stale component's modules first, all at once: downloads wait on the network, not
# on the cores the builds share.
each_component fetch_if_stale
wait
# The lanes at once; a lane stops at its first failure, the other goes on.
lane_a build_if_stale & a=$!
lane_b build_if_stale & b=$!
failed=''
wait "$a" || failed+=' A'
wait "$b" || failed+=' B'
[ -z "$failed" ] || die "build: lane$failed failed (above)"
log "build: ready in $((SECONDS - t_all))s ($E2E_BIN)"
