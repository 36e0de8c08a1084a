#!/usr/bin/env bash
# Build real Flux (flux-core and Fluxion) for the real-Flux test tier, laid out as a flux
# view image lays it out, in $FLUX_CACHE/<core>-<sched>/:
#   opt/software/flux/   the install prefix, flux-core and Fluxion (compiled-in paths point
#                        to /opt/software/flux)
#   opt/view/            a symlink farm into /opt/software/flux (bin/, lib/, ...)
#   opt-core/            the same for flux-core alone (a Flux without Fluxion)
#   portable/opt/        opt/ with the libraries and the Python it needs beyond glibc, for
#                        the view images (e2e/portable-flux.sh)
# The pod emulator (tests/flux) binds opt/ (or opt-core/) at /opt in the flux view init
# container, whose script (render's view-init.sh) copies /opt/view and /opt/software into
# the pods, exactly as it does with the real images.
#
# Sources come from ../shared/vendor (checked against its SHA256SUMS) when present, else
# from the projects' GitHub releases. The result is cached outside the clone, keyed on the
# versions and this script, so a warm machine rebuilds nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=lib.sh
. "$here/lib.sh"

vendor=${FLUX_VENDOR_DIR:-$here/../../shared/vendor}
root=$FLUX_CACHE/$FLUX_CORE_VERSION-$FLUX_SCHED_VERSION
work=$FLUX_CACHE/build
# Three stages, each stamped with what defines it (this script and its versions), so a
# change to the Fluxion step does not rebuild flux-core, and one to flux-pmix's rebuilds
# flux-pmix alone.
stamp_core=$({ sed -n '/^# stage: core/,/^# end: core/p' "$0"; echo "$FLUX_CORE_VERSION"; } | sha256sum | cut -c1-12)
stamp_pmix=$({ sed -n '/^# stage: pmix/,/^# end: pmix/p' "$0"; echo "$FLUX_PMIX_VERSION"; } | sha256sum | cut -c1-12)
stamp_all=$({ sed '/^# stage: pmix/,/^# end: pmix/d' "$0"; echo "$FLUX_CORE_VERSION $FLUX_SCHED_VERSION"; } | sha256sum | cut -c1-12)
if [ "$(cat "$root/.stamp" 2> /dev/null)" = "$stamp_all" ] &&
  [ "$(cat "$root/.stamp-pmix" 2> /dev/null)" = "$stamp_pmix" ]; then
  log "build-flux: flux-core $FLUX_CORE_VERSION + flux-sched $FLUX_SCHED_VERSION + flux-pmix $FLUX_PMIX_VERSION is up to date ($root)"
  exec "$here/portable-flux.sh"
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "build-flux: needs root (it builds in a private mount namespace with /opt bound to the cache)" >&2
  exit 1
fi

# fetch NAME TAG ARCHIVE: the source archive, from shared/vendor or the release page.
fetch() {
  local name=$1 tag=$2 archive=$3 out=$src/$3
  if [ -f "$vendor/$archive" ]; then
    (cd "$vendor" && grep " $archive\$" SHA256SUMS | sha256sum -c --quiet -) \
      || { echo "build-flux: $vendor/$archive does not match SHA256SUMS" >&2; exit 1; }
    cp "$vendor/$archive" "$out"
  else
    log "build-flux: $archive not in $vendor, downloading the $tag release of $name"
    curl -fsSL -o "$out" "https://github.com/flux-framework/$name/releases/download/$tag/$name-${tag#v}.tar.gz"
  fi
}

# in_opt SCRIPT LOG: run SCRIPT in a private mount namespace where /opt is the cache's opt/,
# so the install prefix /opt/software/flux is real while building (Fluxion's CMake finds
# flux-core there) and nothing is written to the host's /opt.
in_opt() {
  local script=$1
  if ! unshare --mount bash -euo pipefail -c "mount --make-rprivate /; mount --bind '$root/opt' /opt; $script"; then
    echo "build-flux: build failed; logs in $work:" >&2
    local last
    last=$(find "$work" -name '*.log' -printf '%T@ %p\n' | sort -n | tail -n 1 | cut -d' ' -f2)
    tail -n 30 "$last" >&2
    exit 1
  fi
}

# Debian's python3 (with python3-cffi, -yaml, -ply, -jsonschema), not a pyenv shim on PATH:
# the brokers run Flux's Python commands with the interpreter configure found.
export PYTHON=/usr/bin/python3
jobs=$(nproc)
t0=$SECONDS
src=$work/src
rm -rf "$work"
mkdir -p "$src"

# stage: core
if [ "$(cat "$root/.stamp-core" 2> /dev/null)" != "$stamp_core" ]; then
  rm -rf "$root"
  mkdir -p "$root/opt/software" "$root/opt/view" "$root/opt-core/software" "$root/opt-core/view"
  fetch flux-core "v$FLUX_CORE_VERSION" "flux-core-$FLUX_CORE_VERSION.tar.gz"
  tar -C "$src" -xzf "$src/flux-core-$FLUX_CORE_VERSION.tar.gz"
  d=$src/flux-core-$FLUX_CORE_VERSION
  echo "$FLUX_CORE_VERSION" > "$d/.tarball-version"
  # Flux runs its Python commands with the interpreter it was configured with, a path compiled
  # in: one of the prefix's own, here a link to the host's python3, which the portable stage
  # replaces with a Python of the view's own.
  flux_python=/opt/software/flux/libexec/flux/python/bin/python3
  in_opt "mkdir -p '$(dirname "$flux_python")'
    ln -s '$(readlink -f "$PYTHON")' '$flux_python'
    cd '$d'
    FLUX_VERSION=$FLUX_CORE_VERSION ./autogen.sh > '$work/autogen.log' 2>&1
    ./configure --prefix=/opt/software/flux --disable-docs PYTHON=$flux_python > '$work/configure-core.log' 2>&1
    make -j$jobs > '$work/make-core.log' 2>&1
    make install > '$work/install-core.log' 2>&1
    # The flux-core-only tree (a Flux without Fluxion): a copy of the prefix and a view whose
    # links point into /opt/software/flux, as they do where opt-core/ is bound at /opt.
    cp -a /opt/software/flux '$root/opt-core/software/'
    cp -rs /opt/software/flux/. '$root/opt-core/view/'"
  echo "$stamp_core" > "$root/.stamp-core"
  log "build-flux: flux-core $FLUX_CORE_VERSION built in $((SECONDS - t0))s"
fi
# end: core

# Fluxion into the same prefix, then the view: every file of the prefix as a symlink,
# directories real (as a Spack view).
if [ "$(cat "$root/.stamp" 2> /dev/null)" != "$stamp_all" ]; then
  t1=$SECONDS
  fetch flux-sched "v$FLUX_SCHED_VERSION" "flux-sched-$FLUX_SCHED_VERSION.tar.gz"
  tar -C "$src" -xzf "$src/flux-sched-$FLUX_SCHED_VERSION.tar.gz"
  d=$src/flux-sched-$FLUX_SCHED_VERSION
  echo "$FLUX_SCHED_VERSION" > "$d/flux-sched.ver"
  in_opt "cd '$d'
    cmake -B build -DCMAKE_INSTALL_PREFIX=/opt/software/flux -DCMAKE_BUILD_TYPE=Release \
      -DBUILD_TESTING=OFF > '$work/cmake-sched.log' 2>&1
    cmake --build build -j$jobs > '$work/make-sched.log' 2>&1
    cmake --install build > '$work/install-sched.log' 2>&1
    rm -rf /opt/view && mkdir /opt/view && cp -rs /opt/software/flux/. /opt/view/
    /opt/view/bin/flux version"
  echo "$stamp_all" > "$root/.stamp"
  log "build-flux: flux-sched $FLUX_SCHED_VERSION built in $((SECONDS - t1))s"
fi

# stage: pmix
# flux-pmix into the same prefix (its job shell plugin, lib/flux/shell/plugins/pmix.so:
# `-o pmi=pmix`), built against Debian's libpmix-dev, then its files into the view. Its
# configure takes the version from `git describe`, and the archive is a `git archive` tree:
# a throwaway repository with the release's tag gives it one. And the view's rc file for
# `-o mpi=openmpi@5` (the Go operator's OSU example writes `-ompi=openmpi@5`): Open MPI 5
# speaks PMIx only, so that option selects flux-pmix's server unless the job chose a PMI.
if [ "$(cat "$root/.stamp-pmix" 2> /dev/null)" != "$stamp_pmix" ]; then
  t2=$SECONDS
  fetch flux-pmix "v$FLUX_PMIX_VERSION" "flux-pmix-$FLUX_PMIX_VERSION.tar.gz"
  tar -C "$src" -xzf "$src/flux-pmix-$FLUX_PMIX_VERSION.tar.gz"
  d=$src/flux-pmix-$FLUX_PMIX_VERSION
  git -C "$d" init -q
  git -C "$d" add -A
  git -C "$d" -c user.name=build-flux -c user.email=build-flux@localhost commit -qm "v$FLUX_PMIX_VERSION"
  git -C "$d" -c user.name=build-flux -c user.email=build-flux@localhost tag -a "v$FLUX_PMIX_VERSION" -m "v$FLUX_PMIX_VERSION"
  rc=/opt/software/flux/etc/flux/shell/lua.d/mpi/openmpi@5.lua
  in_opt "cd '$d'
    ./autogen.sh > '$work/autogen-pmix.log' 2>&1
    PKG_CONFIG_PATH=/opt/software/flux/lib/pkgconfig ./configure --prefix=/opt/software/flux \
      > '$work/configure-pmix.log' 2>&1
    make -j$jobs > '$work/make-pmix.log' 2>&1
    make install > '$work/install-pmix.log' 2>&1
    printf '%s\n' '-- Written by flux-operator e2e/build-flux.sh: -o mpi=openmpi@5 selects flux-pmix.' \
      '-- Open MPI 5 finds its peers through PMIx only; a job that names a PMI keeps it.' \
      '-- The plugin reads the option when it is loaded, which the initrc did before this' \
      '-- file: it is loaded again (a plugin of the same name replaces the first).' \
      'if shell.options.pmi == nil then' \
      '    shell.options.pmi = \"pmix\"' \
      '    plugin.load { file = \"pmix.so\", conf = {} }' \
      'end' > '$rc'
    printf '%s\n' '-- Written by flux-operator e2e/build-flux.sh: every job gets PMIx beside PMI-1.' \
      '-- Open MPI 5 finds its peers through PMIx only, and an Open MPI 5 application run as' \
      '-- the Go operator runs it (no option) must find them; MPICH and Open MPI 4.1 keep' \
      '-- using PMI-1 or take PMIx (docs/mpi.md). A job that names a PMI keeps it.' \
      '-- An MPICH built with both (4.1 and later, e.g. PyPI'\\''s) refuses to guess when both' \
      '-- are served (\"Found both env vars PMI_SIZE and PMIX_NAMESPACE\"): it is told to' \
      '-- take PMI-1, as with Flux'\\''s own default, unless the job said otherwise.' \
      'if shell.options.pmi == nil then' \
      '    shell.options.pmi = \"simple,pmix\"' \
      '    plugin.load { file = \"pmix.so\", conf = {} }' \
      '    if shell.getenv (\"MPIR_CVAR_PMI_VERSION\") == nil then' \
      '        shell.setenv (\"MPIR_CVAR_PMI_VERSION\", \"1\")' \
      '    end' \
      'end' > /opt/software/flux/etc/flux/shell/lua.d/pmix.lua
    cp -rsn /opt/software/flux/. /opt/view/
    test -L /opt/view/lib/flux/shell/plugins/pmix.so"
  echo "$stamp_pmix" > "$root/.stamp-pmix"
  log "build-flux: flux-pmix $FLUX_PMIX_VERSION built in $((SECONDS - t2))s"
fi
# end: pmix
rm -rf "$work"
"$here/portable-flux.sh"
log "build-flux: flux-core $FLUX_CORE_VERSION + flux-sched $FLUX_SCHED_VERSION + flux-pmix $FLUX_PMIX_VERSION ready in $((SECONDS - t0))s ($root)"
