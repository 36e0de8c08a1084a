#!/usr/bin/env bash
# Build the Kubeflow MPI Operator's controller (v2beta1 MPIJobs) from its Go module, for the
# HPC benchmark's fourth arm (`make bench-hpc`, benches/hpc.rs). Comparison only: the module
# comes from the Go module proxy into the Go module cache, is built in $E2E_CACHE, and
# nothing of it enters this repository.
#
#   $E2E_CACHE/mpi-operator/<version>/src/               the module's tree (its CRD is read from here:
#                                                        manifests/base/kubeflow.org_mpijobs.yaml)
#   $E2E_CACHE/mpi-operator/<version>/bin/mpi-operator   `go build ./cmd/mpi-operator`
#
# A stamp of the version and the Go version makes a warm machine rebuild nothing.
# Prints the tree's directory on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

version=${MPI_OPERATOR_VERSION:-v0.6.0}
module=github.com/kubeflow/mpi-operator
dir=$E2E_CACHE/mpi-operator/$version
want=$(printf '%s\n' "$module@$version" "$(go env GOVERSION)" CGO_ENABLED=0 | sha256sum | cut -c1-16)
if [ -x "$dir/bin/mpi-operator" ] && [ "$(cat "$dir/.stamp" 2> /dev/null)" = "$want" ]; then
  log "build-mpi-operator: $version is up to date ($dir/bin/mpi-operator)"
  echo "$dir"
  exit 0
fi

t0=$(now_ms)
log "build-mpi-operator: downloading $module@$version from the Go module proxy"
src=$(GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "$module@$version" | jq -r .Dir)
[ -d "$src" ] || die "build-mpi-operator: $module@$version was not downloaded"
rm -rf "$dir"
mkdir -p "$dir/bin"
cp -R "$src" "$dir/src"
chmod -R u+w "$dir/src"
log "build-mpi-operator: go build ./cmd/mpi-operator (modules from the proxy, as its go.sum pins them)"
(cd "$dir/src" && CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" \
  go build -trimpath -o "$dir/bin/mpi-operator" ./cmd/mpi-operator)
echo "$want" > "$dir/.stamp"
t=$(( $(now_ms) - t0 ))
log "build-mpi-operator: built in $((t / 1000)).$(printf '%03d' $((t % 1000)))s ($dir/bin/mpi-operator)"
echo "$dir"
