#!/usr/bin/env bash
# Stop everything e2e/up.sh started, by PID, and delete the kwokctl cluster.
# Idempotent and safe after a failed or partial up.sh: each step skips what
# is not there. Never kills by name, only the PIDs the harness recorded.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

if [ ! -d "$E2E_STATE" ]; then
  log "down: nothing to stop ($E2E_STATE does not exist)"
  exit 0
fi
t0=$(now_ms)

# 0. The real node (e2e/node.sh), if it was started: its containers, mounts, network and
#    kernel settings, while the API server is still there.
"$here/node.sh" stop || log "node.sh stop reported a problem"

# 1. The controllers up.sh started itself: SIGTERM both, then wait for both.
ctl_pids=()
for name in kueue jobset; do
  f=$E2E_STATE/pids/$name.pid
  if [ -s "$f" ]; then
    pid=$(cat "$f")
    if alive "$pid"; then
      kill -TERM "$pid" 2> /dev/null && ctl_pids+=("$name:$pid")
    fi
    rm -f "$f"
  fi
done
for entry in "${ctl_pids[@]}"; do
  stop_pid "${entry%%:*}" "${entry#*:}" 10
done

# 2. The control plane kwokctl started. Remember its PIDs first: `kwokctl delete`
#    removes the directory that records them.
cluster_dir=$KWOK_WORKDIR/clusters/$E2E_CLUSTER
declare -A kwok_pids=()
if [ -d "$cluster_dir/pids" ]; then
  for f in "$cluster_dir"/pids/*.pid; do
    [ -s "$f" ] || continue
    kwok_pids[$(basename "$f" .pid)]=$(cat "$f")
  done
fi
if [ -d "$cluster_dir/logs" ]; then
  mkdir -p "$E2E_STATE/logs/kwok" && cp -r "$cluster_dir/logs/." "$E2E_STATE/logs/kwok/" 2> /dev/null
fi
if [ -d "$cluster_dir" ] && [ -x "$E2E_BIN/kwokctl" ]; then
  log "deleting kwokctl cluster $E2E_CLUSTER"
  PATH=$E2E_BIN:$PATH "$E2E_BIN/kwokctl" delete cluster --name "$E2E_CLUSTER" \
    > "$E2E_STATE/kwokctl-delete.log" 2>&1 ||
    log "kwokctl delete cluster failed (see $E2E_STATE/kwokctl-delete.log); stopping its processes by PID"
fi
# Whatever kwokctl did not stop: only PIDs it recorded, and only if they still
# run one of our binaries (a PID may have been reused since).
for name in "${!kwok_pids[@]}"; do
  pid=${kwok_pids[$name]}
  if alive "$pid" && [[ $(readlink "/proc/$pid/exe" 2> /dev/null) == "$E2E_BIN"/* ]]; then
    stop_pid "$name" "$pid" 10
  fi
done

# 3. Links an older up.sh made in the host's /etc for Kueue's metrics certificate
# (today's runs Kueue with an /etc overlay of its own, in the state directory).
if [ -s "$E2E_STATE/kueue-metrics-certs-linked" ]; then
  d=$(cat "$E2E_STATE/kueue-metrics-certs-linked")
  for f in "$d/tls.crt" "$d/tls.key"; do
    if [ -L "$f" ] && [[ $(readlink "$f") == "$E2E_STATE"/* ]]; then rm -f "$f"; fi
  done
  rmdir -p "$d" 2> /dev/null || true
fi

# 4. The state directory, but keep the logs of the last run for post-mortems.
# (per cluster: E2E_LAST_LOGS, see lib.sh)
rm -rf "$E2E_LAST_LOGS"
if [ -d "$E2E_STATE/logs" ]; then mv "$E2E_STATE/logs" "$E2E_LAST_LOGS"; fi
rm -rf "$E2E_STATE"
t=$(( $(now_ms) - t0 ))
log "down: stopped in $((t / 1000)).$(printf '%03d' $((t % 1000)))s (logs of this run kept in $E2E_LAST_LOGS)"
