#!/usr/bin/env bash
# Install the Debian packages the build and the tests need, only those that are
# missing (so a prepared machine does nothing and needs no network).
# Used by .ci/run and `make setup`. Go and Rust are expected to be installed.
# `e2e/setup-host.sh hpc` adds what only `make bench-hpc` needs: LAMMPS and Open MPI's
# mpirun on the host, the benchmark's floor.
set -euo pipefail

packages=(
  ca-certificates curl jq openssl  # e2e harness: webhook certificates, health checks, manifests
  shellcheck                       # lint of the e2e scripts
  prometheus                       # scrapes the operator's /metrics in the metrics e2e test
  libsodium-dev libzmq3-dev pkg-config cmake  # the zmq crate (CURVE through libzmq)
  # flux-core and Fluxion for the real-Flux tier (e2e/build-flux.sh)
  autoconf automake libtool make uuid-dev libjansson-dev liblz4-dev libarchive-dev
  libhwloc-dev libsqlite3-dev lua5.1 liblua5.1-0-dev lua-posix python3-dev python3-cffi
  python3-ply python3-setuptools python3-yaml python3-jsonschema libboost-dev libboost-graph-dev libedit-dev
  libyaml-cpp-dev g++
  iproute2 util-linux  # the pod emulator: ip netns, unshare, nsenter, setpriv
  # the real node (e2e/node.sh): runc (containerd 2 is built, e2e/build.sh), CNI plugins,
  # kube-proxy's iptables, and the Debian root filesystem the local images are made of
  # (e2e/images.sh)
  runc containernetworking-plugins iptables conntrack mmdebstrap
  # mpi-check (e2e/mpi), built with each MPI's mpicc for the MPI image (e2e/images.sh)
  libmpich-dev libopenmpi-dev
  # flux-pmix, Flux's PMIx server for Open MPI 5 (e2e/build-flux.sh)
  libpmix-dev
  # the view images' Flux, made to run on other releases' libraries (e2e/portable-flux.sh)
  patchelf
)
if [ "${1-}" = hpc ]; then
  packages+=(openmpi-bin lammps)
fi

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
