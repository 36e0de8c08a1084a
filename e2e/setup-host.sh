#!/usr/bin/env bash
# Install the Debian packages the build and the tests need, only those that are
# missing (so a prepared machine does nothing and needs no network).
# Used by .ci/run and `make setup`. Go and Rust are expected to be installed.
set -euo pipefail

packages=(
  ca-certificates curl jq openssl  # e2e harness: webhook certificates, health checks, manifests
  shellcheck                       # lint of the e2e scripts
  prometheus                       # scrapes the operator's /metrics in the metrics e2e test
  libsodium-dev libzmq3-dev pkg-config cmake  # the zmq crate (CURVE through libzmq)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
  echo "setup-host: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" < /dev/null
else
  echo "setup-host: all packages present" >&2
fi

for tool in go cargo; do
  command -v "$tool" > /dev/null || { echo "setup-host: $tool is not on PATH" >&2; exit 1; }
done
