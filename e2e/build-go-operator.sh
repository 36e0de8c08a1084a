#!/usr/bin/env bash
# Build the Go Flux Operator's manager from its source archive in ../shared/vendor, for the
# side-by-side benchmark (`make bench`, benches/operators.rs). Comparison only: the archive
# is extracted into the cache, outside the clone, and nothing of it enters this repository.
#
#   $E2E_CACHE/go-operator/<commit>/src/          the archive's tree (its CRD is read from here)
#   $E2E_CACHE/go-operator/<commit>/bin/manager   `go build` at its root (CGO off: its
#                                                 certificate generator stays the stub it is)
#
# Its Go dependencies come from the Go module proxy, pinned by its own go.mod and go.sum.
# A stamp of the archive's checksum and the Go version makes a warm machine rebuild nothing.
# Prints the tree's directory on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

vendor=${GO_OPERATOR_VENDOR_DIR:-$here/../../shared/vendor}
archive=${GO_OPERATOR_ARCHIVE:-flux-operator-0d75cef8.tar.gz}
commit=${archive#flux-operator-}; commit=${commit%.tar.gz}
dir=$E2E_CACHE/go-operator/$commit

[ -f "$vendor/$archive" ] || die "$vendor/$archive is missing (see ../shared/vendor/README.md)"
(cd "$vendor" && grep " $archive\$" SHA256SUMS | sha256sum -c --quiet -) \
  || die "$vendor/$archive does not match $vendor/SHA256SUMS"
want=$(printf '%s\n' "$(sha256sum < "$vendor/$archive")" "$(go env GOVERSION)" CGO_ENABLED=0 | sha256sum | cut -c1-16)
if [ -x "$dir/bin/manager" ] && [ "$(cat "$dir/.stamp" 2> /dev/null)" = "$want" ]; then
  log "build-go-operator: $commit is up to date ($dir/bin/manager)"
  echo "$dir"
  exit 0
fi

t0=$(now_ms)
log "build-go-operator: extracting $archive into $dir/src"
rm -rf "$dir"
mkdir -p "$dir/src" "$dir/bin"
tar -xzf "$vendor/$archive" -C "$dir/src" --strip-components=1
log "build-go-operator: go build (modules from the proxy, as its go.sum pins them)"
# GOTOOLCHAIN=local: never fetch another Go toolchain for a module that asks for one.
(cd "$dir/src" && CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" \
  go build -trimpath -o "$dir/bin/manager" .)
echo "$want" > "$dir/.stamp"
t=$(( $(now_ms) - t0 ))
log "build-go-operator: built in $((t / 1000)).$(printf '%03d' $((t % 1000)))s ($dir/bin/manager)"
echo "$dir"
