#!/usr/bin/env bash
# What an interactive cluster's kept state costs (`make bench-state`; not part of `make test`).
#
# The lead of an interactive MiniCluster runs its broker with a statedir it keeps in the pod
# (`-Sstatedir`, SQLite with its write-ahead log) and a KVS checkpoint every second (kvs.toml),
# where every other Flux instance uses a temporary statedir (SQLite without journal or sync).
# This runs the same work on real Flux (e2e/build-flux.sh's build, as host processes), one
# broker each, both ways, interleaved round by round: BENCH_JOBS jobs (`true`) submitted at
# once and waited for. It prints each round's seconds and the ratio kept / temporary, then
# min / median / max, and the size of the kept state at the end.
#
# Environment: BENCH_JOBS (default 500), BENCH_ROUNDS (default 5).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=lib.sh
. "$here/lib.sh"

jobs=${BENCH_JOBS:-500}
rounds=${BENCH_ROUNDS:-5}
tree=$FLUX_CACHE/$FLUX_CORE_VERSION-$FLUX_SCHED_VERSION/opt
[ -x "$tree/software/flux/bin/flux" ] || die "no Flux at $tree: run e2e/build-flux.sh (make flux-build)"
[ "$(id -u)" = 0 ] || die "needs root: Flux's install prefix /opt is bound in a private mount namespace"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The work, as the instance's initial program: the jobs submitted at once and waited for;
# prints the seconds they took.
cat >"$work/jobs.sh" <<'JOBS'
t0=$(date +%s.%N)
flux submit --cc=1-"$BENCH_N" --quiet --wait true
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
JOBS
# In a private mount namespace with the build at /opt (its compiled-in prefix): a broker
# with config directory $2 and broker options $3..., running jobs.sh.
cat >"$work/in-namespace.sh" <<'NS'
mount --make-rprivate /
mount --bind "$1" /opt
export PATH=/opt/view/bin:$PATH
config=$2
shift 2
exec flux start -o --config-path="$config" "$@" bash "$BENCH_WORK/jobs.sh"
NS

# One run: `kept` (a statedir of its own and the checkpoint period, as an interactive
# cluster's lead) or `temporary` (Flux's default). Prints the seconds the jobs took; when
# kept, leaves the statedir's size in KiB in the run's directory.
run_once() {
  local how=$1 dir=$work/$1-$2
  mkdir -p "$dir/state" "$dir/config"
  local opts=()
  if [ "$how" = kept ]; then
    printf '[kvs]\ncheckpoint-period = "1s"\n' >"$dir/config/kvs.toml"
    opts=(-Sstatedir="$dir/state")
  fi
  BENCH_N=$jobs BENCH_WORK=$work unshare --mount bash -euo pipefail "$work/in-namespace.sh" \
    "$tree" "$dir/config" "${opts[@]}"
  if [ "$how" = kept ]; then
    du -sk "$dir/state" | cut -f1 >"$dir/size"
  fi
}

stats() { # min / median / max of the numbers on stdin
  sort -g | awk '{ v[NR] = $1 } END { printf "%.2f / %.2f / %.2f", v[1], v[int((NR + 1) / 2)], v[NR] }'
}

log "bench-state: $jobs jobs per run, $rounds rounds, one broker, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %10s %10s %7s\n' round kept temporary ratio
for f in kept temporary ratio; do : >"$work/$f"; done
for r in $(seq "$rounds"); do
  # Alternate which goes first, so a drift in the machine's load falls on both.
  if [ $((r % 2)) = 1 ]; then order="kept temporary"; else order="temporary kept"; fi
  for how in $order; do
    run_once "$how" "$r" | tail -n1 >"$work/$how-$r.s"
  done
  k=$(cat "$work/kept-$r.s") t=$(cat "$work/temporary-$r.s")
  ratio=$(awk -v k="$k" -v t="$t" 'BEGIN { printf "%.3f", k / t }')
  echo "$k" >>"$work/kept"
  echo "$t" >>"$work/temporary"
  echo "$ratio" >>"$work/ratio"
  printf '%-6s %10.2f %10.2f %7.2f\n' "$r" "$k" "$t" "$ratio"
done
echo
echo "seconds for $jobs jobs, min / median / max of $rounds rounds:"
echo "  kept state:      $(stats <"$work/kept")"
echo "  temporary state: $(stats <"$work/temporary")"
echo "  ratio per round: $(stats <"$work/ratio")"
echo "  kept state on disk after the last round: $(cat "$work/kept-$rounds/size") KiB"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
