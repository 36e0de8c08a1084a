#!/usr/bin/env bash
# The flux view as the view images carry it: e2e/build-flux.sh's tree, copied to
# $FLUX_CACHE/<core>-<sched>/portable/opt/, made to run in any application image whose glibc
# is at least the build host's (bookworm: 2.36), with none of the image's other libraries
# and none of its Python. A view image serves application images of other releases than its
# own (the Go operator's OSU example runs its view "ubuntu:tag-focal" with an Open MPI 5
# image; here Debian trixie's): the Go operator's views are Spack builds, with their own
# libraries and Python, for the same reason. Added to the prefix /opt/software/flux:
#   lib/portable/            every shared library that an ELF file of the tree needs, from
#                            the build host, except glibc's own (which the image provides)
#   libexec/flux/python/     the build host's Python (the interpreter Flux was configured
#                            with is bin/python3 there: build-flux.sh links it to the host's,
#                            this copy holds the interpreter itself), its standard library and
#                            the modules Flux imports (cffi's backend, yaml, ply)
#   libexec/flux/flux-shell  a wrapper of the job shell (flux-shell-portable), for PMIx
# and every ELF file's RUNPATH leads to lib/portable first, ahead of the image's libraries.
# The MPI of a job is the application image's own: Flux's job shell starts its tasks with the
# image's libraries (RUNPATH is not inherited).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=lib.sh
. "$here/lib.sh"

root=$FLUX_CACHE/$FLUX_CORE_VERSION-$FLUX_SCHED_VERSION
out=$root/portable
prefix=/opt/software/flux
stamp=$( { cat "$0" "$root/.stamp" "$root/.stamp-pmix"; } | sha256sum | cut -c1-12)
if [ "$(cat "$out/.stamp" 2> /dev/null)" = "$stamp" ]; then
  exit 0
fi
command -v patchelf > /dev/null || die "patchelf is missing: run e2e/setup-host.sh"
t0=$SECONDS
rm -rf "$out" "$out.tmp"
mkdir -p "$out.tmp/opt"
cp -a "$root/opt/software" "$root/opt/view" "$out.tmp/opt/"
tree=$out.tmp$prefix
libs=$tree/lib/portable
mkdir -p "$libs"

# Python: the interpreter, its standard library without what Flux never runs, and the
# modules Flux imports from Debian's packages (Python finds the library from the
# interpreter's place: lib/python3.X and lib/python3/dist-packages beside bin/).
python=$(readlink -f /usr/bin/python3)
version=$(basename "$python")
py=$tree/libexec/flux/python
[ -L "$py/bin/python3" ] || die "$py/bin/python3 is not build-flux.sh's link to the host's Python"
rm "$py/bin/python3"
cp "$python" "$py/bin/$version"
ln -s "$version" "$py/bin/python3"
mkdir -p "$py/lib/python3/dist-packages"
cp -a "/usr/lib/$version" "$py/lib/"
rm -rf "$py/lib/$version"/{test,idlelib,tkinter,turtledemo,ensurepip,lib2to3,pydoc_data}
rm -rf "$py/lib/$version"/{config-*,site-packages,dist-packages}
for package in python3-cffi-backend python3-yaml python3-ply; do
  dpkg -L "$package" | grep '^/usr/lib/python3/dist-packages/.'
done | while IFS= read -r f; do
  if [ -f "$f" ]; then install -D -m 0644 "$f" "$py/lib/python3/dist-packages/${f#/usr/lib/python3/dist-packages/}"; fi
done

# PMIx (flux-pmix's server, in the job shell) opens its optional components (compression,
# resource managers) in a directory compiled into libpmix, where an application image with
# another PMIx release has its own (trixie's 5.0 beside the view's 4.2): they do not load
# ("undefined symbol"), and PMIx, which goes on without them, says so on every job. The job
# shell runs through a wrapper that tells PMIx not to report components that fail to load
# (moving its component path did not work here: with PMIX_MCA_mca_base_component_path set,
# PMIx 4.2 still opened the compiled-in directory). The tasks get the job's environment, not
# the shell's.
shell=$tree/libexec/flux/flux-shell
mv "$shell" "$shell-portable"
printf '%s\n' '#!/bin/sh' \
  '# Written by flux-operator e2e/portable-flux.sh: the job shell, with PMIx quiet about the' \
  '# components of another PMIx release in the application image.' \
  'PMIX_MCA_mca_base_component_show_load_errors=0' \
  'export PMIX_MCA_mca_base_component_show_load_errors' \
  "exec $prefix/libexec/flux/flux-shell-portable \"\$@\"" > "$shell"
chmod 0755 "$shell"

# The ELF files (patchelf reads only those), and the libraries they need that are not
# glibc's (libc6's files) nor the tree's own (which ldd cannot find here: they are under
# /opt/software/flux in the pods, not on this host).
mapfile -t glibc < <(dpkg -L libc6 | sed -n 's,.*/\(lib[^/]*\.so[^/]*\)$,\1,p' | sort -u)
elfs=()
while IFS= read -r -d '' f; do
  if patchelf --print-rpath "$f" > /dev/null 2>&1; then elfs+=("$f"); fi
done < <(find "$tree" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
needed=$(for f in "${elfs[@]}"; do ldd "$f" 2> /dev/null || true; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
for lib in $needed; do
  name=$(basename "$lib")
  if printf '%s\n' "${glibc[@]}" | grep -qxF "$name"; then continue; fi
  cp -L "$lib" "$libs/$name"
done
# Without debug information (a third of the tree): each pod copies the view.
strip --strip-debug "${elfs[@]}" "$libs"/*
for f in "$libs"/*; do
  patchelf --set-rpath "$prefix/lib/portable" "$f"
done
for f in "${elfs[@]}"; do
  old=$(patchelf --print-rpath "$f")
  patchelf --set-rpath "$prefix/lib/portable${old:+:$old}" "$f"
done
count=$(find "$libs" -type f | wc -l)
mv "$out.tmp" "$out"
echo "$stamp" > "$out/.stamp"
log "portable-flux: $count libraries and $version added to the view in $((SECONDS - t0))s ($(du -sh "$out" | cut -f1))"
