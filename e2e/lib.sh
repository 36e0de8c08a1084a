# Shared settings for the e2e scripts (sourced, not run).
# shellcheck shell=bash
# Everything built or cached lives outside the clone so a fresh clone on the
# same machine (CI) reuses it.
E2E_CACHE=${FLUX_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flux-operator-rs}
E2E_BIN=$E2E_CACHE/bin
# Real Flux (e2e/build-flux.sh), one tree per flux-core and flux-sched version.
FLUX_CACHE=$E2E_CACHE/flux
E2E_STATE=${E2E_STATE:-$E2E_CACHE/cluster}
# Name of the kwokctl cluster; unique enough not to collide with a developer's own.
E2E_CLUSTER=${E2E_CLUSTER:-flux-operator-e2e}
# The real node (e2e/node.sh): this machine, registered under this name when E2E_REAL_NODE=1.
E2E_NODE_NAME=${E2E_NODE_NAME:-e2e-real-node}
# Where down.sh keeps a cluster's logs: last-logs for the default cluster, last-logs-<dir>
# for one whose E2E_STATE is another directory (clusters side by side keep their own).
# shellcheck disable=SC2034 # used by the scripts that source this file
if [ "$E2E_STATE" = "$E2E_CACHE/cluster" ]; then E2E_LAST_LOGS=$E2E_CACHE/last-logs
else E2E_LAST_LOGS=$E2E_CACHE/last-logs-$(basename "$E2E_STATE"); fi
# The kubeconfig the tests use (self-contained: certificates are embedded).
E2E_KUBECONFIG=$E2E_STATE/kubeconfig
# kwokctl keeps its clusters, logs and pids under $KWOK_WORKDIR/clusters/<name>.
KWOK_WORKDIR=$E2E_STATE/kwok
export FLUX_CACHE E2E_CACHE E2E_BIN E2E_STATE E2E_CLUSTER E2E_KUBECONFIG KWOK_WORKDIR E2E_NODE_NAME

# host_ip: this machine's address on the interface of its default route (empty if none):
# where pods on the real node reach the API server and CoreDNS.
host_ip() {
  local dev
  dev=$(ip -4 route show default 2> /dev/null | awk '{print $5; exit}')
  [ -n "$dev" ] || return 0
  ip -4 -o addr show dev "$dev" | awk '{split($4, a, "/"); print a[1]; exit}'
}

log() { printf '[e2e %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# mmdebstrap's options for the MPI images' root filesystems (e2e/images.sh,
# e2e/images-trixie.sh; their stamps include them): no documentation, manual pages or
# locales, and of LAMMPS' examples and potentials only the examples the tests and the Go
# operator's LAMMPS test run (melt, reaxff/HNS).
# shellcheck disable=SC2034 # read by the image scripts
MPI_ROOTFS_OPTS=(
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/lammps/examples/*'
  --dpkgopt='path-exclude=/usr/share/lammps/potentials/*'
  --dpkgopt='path-include=/usr/share/lammps/examples/melt/*'
  --dpkgopt='path-include=/usr/share/lammps/examples/reaxff'
  --dpkgopt='path-include=/usr/share/lammps/examples/reaxff/HNS/*'
)
die() { log "ERROR: $*"; exit 1; }

now_ms() { date +%s%3N; }

# phase NAME: end the previous phase (printing how long it took) and start NAME.
# phase "": end the last one.
_phase_name="" _phase_t0=0
phase() {
  local t; t=$(now_ms)
  if [ -n "$_phase_name" ]; then
    log "phase '$_phase_name' took $(( (t - _phase_t0) / 1000 )).$(printf '%03d' $(( (t - _phase_t0) % 1000 )))s"
  fi
  _phase_name=$1 _phase_t0=$t
  if [ -n "$1" ]; then log "phase '$1' ..."; fi
}

# port_in_use PORT: true if something listens on 127.0.0.1:PORT.
port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port START: print the first free loopback port at or above START that
# is not already taken by an earlier call in this shell.
_taken_ports=" "
free_port() {
  local p=$1
  while port_in_use "$p" || [[ $_taken_ports == *" $p "* ]]; do
    p=$((p + 1))
    [ "$p" -lt 65000 ] || die "no free port above $1"
  done
  _taken_ports+="$p "
  echo "$p"
}

# go_module_dir MODULE VERSION: the module's directory in the Go module cache
# (downloads it through the Go module proxy if it is not there yet).
go_module_dir() {
  local dir
  dir=$(cd "$E2E_CACHE" && go mod download -json "$1@$2" | jq -r '.Dir // empty')
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then die "cannot locate Go module $1@$2 in the module cache"; fi
  echo "$dir"
}

# alive PID: true if the process runs (a zombie waiting to be reaped does not count).
alive() {
  kill -0 "$1" 2> /dev/null || return 1
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2> /dev/null) || return 1
  [ "$state" != Z ]
}

# pid_alive PIDFILE: true if the process recorded in PIDFILE is still running.
pid_alive() {
  [ -s "$1" ] && alive "$(cat "$1")"
}

# wait_until [--alive PIDFILE LOG] SECONDS WHAT CMD...: run CMD (its output discarded) every
# 0.2 s until it succeeds; once SECONDS have passed, die naming WHAT. With --alive, die at
# once if the process of PIDFILE (when there is one) has exited, either way showing the tail
# of its LOG. The seconds it took are left in `waited`.
wait_until() {
  local pidfile="" logfile=""
  if [ "$1" = --alive ]; then
    pidfile=$2 logfile=$3
    shift 3
  fi
  local timeout=$1 what=$2 t0=$SECONDS
  shift 2
  until "$@" > /dev/null 2>&1; do
    if [ -n "$pidfile" ] && [ -f "$pidfile" ] && ! pid_alive "$pidfile"; then
      tail -n 20 "$logfile" >&2 2> /dev/null || true
      die "$what: the process exited (log: $logfile)"
    fi
    if [ $((SECONDS - t0)) -ge "$timeout" ]; then
      [ -z "$logfile" ] || tail -n 20 "$logfile" >&2 2> /dev/null || true
      die "not ready after ${timeout}s: $what${logfile:+ (log: $logfile)}"
    fi
    sleep 0.2
  done
  # shellcheck disable=SC2034 # read by the callers
  waited=$((SECONDS - t0))
}

# stop_pid NAME PID [GRACE_SECONDS]: SIGTERM, wait, then SIGKILL a single process.
stop_pid() {
  local name=$1 pid=$2 grace=${3:-10} i
  alive "$pid" || return 0
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2> /dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    alive "$pid" || return 0
    sleep 0.1
  done
  log "$name (pid $pid) ignored SIGTERM for ${grace}s, killing it"
  kill -KILL "$pid" 2> /dev/null || true
}
