#!/usr/bin/env bash
# run-tests.sh COMMAND [ARGS...]: start the test cluster (e2e/up.sh), run COMMAND
# with KUBECONFIG pointing at it, and always stop the cluster (e2e/down.sh),
# whether COMMAND passes, fails or is interrupted. Exits with COMMAND's status
# (or up.sh's, if the cluster did not come up).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
[ $# -gt 0 ] || die "usage: $0 COMMAND [ARGS...]"

# shellcheck disable=SC2317  # called through the traps
teardown() {
  local rc=$?
  trap - EXIT INT TERM
  "$here/down.sh" || log "down.sh reported a problem"
  # The real node changes this machine (kernel settings, routes, links, iptables): after
  # down, all of it must be as it was before up.
  if [ -n "$host_before" ] && ! "$here/host-state.sh" --compare "$host_before" <("$here/host-state.sh" /dev/stdout); then
    [ "$rc" -ne 0 ] || rc=1
  fi
  exit "$rc"
}
host_before=""
if [ "${E2E_REAL_NODE:-}" = 1 ]; then
  host_before=$(mktemp)
  "$here/host-state.sh" "$host_before"
fi
trap teardown EXIT
# On INT/TERM, stop the command too, then tear down (through the EXIT trap).
child=""
# shellcheck disable=SC2317  # called through the traps
interrupted() {
  if [ -n "$child" ]; then kill -TERM "$child" 2> /dev/null || true; fi
  exit "$1"
}
trap 'interrupted 130' INT
trap 'interrupted 143' TERM

"$here/up.sh" > /dev/null
export KUBECONFIG=$E2E_KUBECONFIG
log "running: $*"
# In the background + wait, so a signal is handled at once, not when it ends.
set +e
"$@" &
child=$!
wait "$child"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  log "command failed (exit $rc); controller logs will be kept in $E2E_LAST_LOGS"
fi
exit "$rc"
