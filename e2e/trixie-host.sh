#!/usr/bin/env bash
# `e2e/trixie-host.sh CMD...`: run CMD on this machine with the trixie MPI image's files at
# $TRIXIE_ROOT, for `make bench-hpc`'s host arms: the same LAMMPS, Open MPI 5, MPICH 4.2 and
# OSU binaries as the pods run, as plain processes (no Kubernetes, no container runtime).
# CMD reaches them with `chroot "$TRIXIE_ROOT" ...`.
# The root is the image's layers from e2e/images-trixie.sh (root filesystem, OSU, LAMMPS),
# unpacked once into $E2E_CACHE/bench/trixie-root (keyed on their stamps), with the two links
# e2e/images.sh adds (/opt/lammps/examples, in.reaxc.hns). CMD runs in a mount namespace of
# its own in which that root has this machine's /dev (and /dev/shm), /proc, /sys and
# /etc/hosts, and a /tmp of its own; nothing stays mounted after it. Needs root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

if [ "${1-}" = --inside ]; then
  root=$2; shift 2
  mount --rbind /dev "$root/dev"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
  mount --bind /etc/hosts "$root/etc/hosts"
  TRIXIE_ROOT=$root exec "$@"
fi
[ $# -gt 0 ] || die "usage: $0 CMD..."

images=$E2E_CACHE/images
root=$E2E_CACHE/bench/trixie-root
layers=("$images"/trixie-{rootfs,osu,lammps}.tar)
for l in "${layers[@]}"; do
  [ -f "$l" ] || die "$l is missing: run e2e/images-trixie.sh (make images)"
done
stamp=$( { sed -n '/^# unpack:/,/^# end: unpack/p' "$0"; cat "${layers[@]/%/.stamp}"; } |
  sha256sum | cut -c1-16)
# unpack:
if [ "$(cat "$root.stamp" 2> /dev/null)" != "$stamp" ]; then
  rm -rf "$root" && mkdir -p "$root"
  for l in "${layers[@]}"; do tar -C "$root" -xf "$l"; done
  mkdir -p "$root/opt/lammps"
  ln -sfn /usr/share/lammps/examples "$root/opt/lammps/examples"
  ln -sfn in.reaxff.hns "$root/usr/share/lammps/examples/reaxff/HNS/in.reaxc.hns"
  touch "$root/etc/hosts"
  echo "$stamp" > "$root.stamp"
  log "trixie-host: unpacked the trixie image's layers into $root"
fi
# end: unpack
exec unshare --mount --propagation private -- "$0" --inside "$root" "$@"
