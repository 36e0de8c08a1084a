#!/usr/bin/env bash
# The layers of the Debian trixie (13) MPI image, for e2e/images.sh (which tags it
# mpi-apps:trixie and with the names of the Go operator's LAMMPS and OSU images), in
# $E2E_CACHE/images:
#   trixie-rootfs.tar   a trixie root filesystem (mmdebstrap, from Debian's packages) with
#                       bash and coreutils, Open MPI 5.0 (libopenmpi40, openmpi-bin, PMIx 5),
#                       MPICH 4.2 (libmpich12) and LAMMPS 20250204 (REAXFF among its
#                       packages, Open MPI 5) with two of its examples (melt, reaxff/HNS).
#                       No Flux: the flux view (e2e/portable-flux.sh) brings its own.
#   trixie-osu.tar      OSU Micro-Benchmarks (../shared/vendor) built against trixie's Open
#                       MPI 5 in a throwaway trixie root filesystem with its compilers,
#                       installed in /opt/osu-benchmark/build.openmpi, where the Go
#                       operator's OSU image has them.
# Each keyed on a stamp of its part of this script, so a warm machine rebuilds nothing.
# Needs root (mmdebstrap, chroot).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=lib.sh
. "$here/lib.sh"

out=$E2E_CACHE/images
vendor=${FLUX_VENDOR_DIR:-$here/../../shared/vendor}
suite="deb http://deb.debian.org/debian trixie main"
mkdir -p "$out"
command -v mmdebstrap > /dev/null || die "mmdebstrap is missing: run e2e/setup-host.sh"
part_stamp() { sed -n "/^# $1:/,/^# end: $1/p" "$0" | sha256sum | cut -c1-16; }

# rootfs:
# Run-time libraries only (Debian's mpich package would bring MPICH's compilers); of
# LAMMPS' examples and potentials only those the tests and the Go operator's test run;
# without GCC's compiler proper, which libkim-api2 (a LAMMPS dependency) pulls in.
packages=(bash coreutils procps hostname util-linux findutils grep sed gawk tar gzip
  ca-certificates libopenmpi40 openmpi-bin libmpich12 lammps lammps-examples)
rootfs=$out/trixie-rootfs.tar
stamp=$(part_stamp rootfs)
if [ "$(cat "$rootfs.stamp" 2> /dev/null)" != "$stamp" ]; then
  t0=$SECONDS
  log "images: building the trixie root filesystem (${packages[*]})"
  share=/usr/share/lammps
  mmdebstrap --variant=minbase --format=tar --include="$(IFS=,; echo "${packages[*]}")" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt="path-exclude=$share/examples/*" --dpkgopt="path-exclude=$share/potentials/*" \
    --dpkgopt='path-exclude=/usr/lib/gcc/*' --dpkgopt='path-exclude=/usr/bin/x86_64-linux-gnu-lto-dump-*' \
    --dpkgopt="path-include=$share/examples/melt/*" \
    --dpkgopt="path-include=$share/examples/reaxff" \
    --dpkgopt="path-include=$share/examples/reaxff/HNS/*" \
    trixie "$rootfs.tmp" "$suite" > "$out/mmdebstrap-trixie.log" 2>&1 ||
    { tail -n 20 "$out/mmdebstrap-trixie.log" >&2; die "mmdebstrap trixie failed (log: $out/mmdebstrap-trixie.log)"; }
  mv "$rootfs.tmp" "$rootfs"
  echo "$stamp" > "$rootfs.stamp"
  log "images: trixie root filesystem built in $((SECONDS - t0))s ($(du -h "$rootfs" | cut -f1))"
fi
# end: rootfs

# osu:
osu=$out/trixie-osu.tar
archive=osu-micro-benchmarks-$OSU_VERSION.tar.gz
stamp=$( { part_stamp osu; echo "$OSU_VERSION"; } | sha256sum | cut -c1-16)
if [ "$(cat "$osu.stamp" 2> /dev/null)" != "$stamp" ]; then
  t0=$SECONDS
  [ -f "$vendor/$archive" ] || die "$vendor/$archive is missing (see ../shared/vendor/README.md)"
  (cd "$vendor" && grep " $archive\$" SHA256SUMS | sha256sum -c --quiet -) ||
    die "$vendor/$archive does not match SHA256SUMS"
  build=$out/trixie-build
  rm -rf "$build"
  log "images: building OSU Micro-Benchmarks $OSU_VERSION against trixie's Open MPI 5"
  mmdebstrap --variant=minbase --include=gcc,g++,make,autoconf,automake,libtool,libopenmpi-dev \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    trixie "$build" "$suite" > "$out/mmdebstrap-trixie-build.log" 2>&1 ||
    { tail -n 20 "$out/mmdebstrap-trixie-build.log" >&2; die "mmdebstrap trixie failed (log: $out/mmdebstrap-trixie-build.log)"; }
  mkdir -p "$build/src"
  tar -C "$build/src" --strip-components=1 -xzf "$vendor/$archive"
  dest=/opt/osu-benchmark/build.openmpi
  chroot "$build" sh -ec "cd /src
    autoreconf -fi
    ./configure CC=mpicc CXX=mpicxx --prefix=$dest
    make -j$(nproc)
    make install" > "$out/osu-build.log" 2>&1 ||
    { tail -n 30 "$out/osu-build.log" >&2; die "OSU build failed (log: $out/osu-build.log)"; }
  tar -C "$build" --owner=0 --group=0 --numeric-owner --sort=name -cf "$osu.tmp" "${dest#/}"
  rm -rf "$build"
  mv "$osu.tmp" "$osu"
  echo "$stamp" > "$osu.stamp"
  log "images: OSU Micro-Benchmarks built in $((SECONDS - t0))s"
fi
# end: osu
