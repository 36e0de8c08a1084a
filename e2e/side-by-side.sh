#!/usr/bin/env bash
# Two test clusters on one machine: run beside a cluster that is already up
# (`e2e/run-tests.sh e2e/side-by-side.sh`), start a second one with its own state
# directory, check both answer and each Kueue serves its own metrics certificate, stop
# the second and check the first still answers and kept its logs. Nothing of either
# may land in the host's /etc.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
first_state=$E2E_STATE
first_kubeconfig=${KUBECONFIG:-$E2E_KUBECONFIG}
second_state=$E2E_CACHE/cluster-side-by-side
second_kubeconfig=$second_state/kubeconfig
[ -s "$first_state/ports.env" ] || die "no cluster is up in $first_state: run through e2e/run-tests.sh"
[ ! -e /etc/kueue ] || die "/etc/kueue exists before the test: something wrote the host's /etc"

stop_second() { E2E_STATE=$second_state E2E_CLUSTER=flux-operator-side "$here/down.sh" > /dev/null 2>&1 || true; }
trap stop_second EXIT
E2E_STATE=$second_state E2E_CLUSTER=flux-operator-side "$here/up.sh" > /dev/null

nodes() { "$E2E_BIN/kubectl" --kubeconfig "$1" get nodes -l type=kwok -o name | wc -l; }
# The certificate Kueue serves on its metrics port, by the CA of that cluster's state.
kueue_serves_own_certificate() {
  local state=$1 port
  port=$(sed -n 's/^KUEUE_METRICS_PORT=//p' "$state/ports.env")
  # --cacert with that state's CA: the handshake fails on the other cluster's certificate.
  # Any HTTP status (401/403 without a token) proves the TLS handshake passed.
  curl -sS -o /dev/null -w '%{http_code}' --cacert "$state/certs/ca.crt" "https://127.0.0.1:$port/metrics"
}
for pair in "$first_state $first_kubeconfig" "$second_state $second_kubeconfig"; do
  read -r state kubeconfig <<< "$pair"
  n=$(nodes "$kubeconfig")
  [ "$n" -ge 4 ] || die "$state: expected at least 4 simulated nodes, found $n"
  code=$(kueue_serves_own_certificate "$state") || die "$state: Kueue's metrics TLS did not verify with its own CA"
  log "side-by-side: $state answers ($n nodes), Kueue metrics TLS verified with its own CA (HTTP $code)"
done
cmp -s "$first_state/certs/ca.crt" "$second_state/certs/ca.crt" && die "both clusters have the same CA"
[ ! -e /etc/kueue ] || die "/etc/kueue exists: up.sh wrote the host's /etc"

stop_second
trap - EXIT
[ -d "$E2E_CACHE/last-logs-cluster-side-by-side" ] || die "the second cluster's logs were not kept"
n=$(nodes "$first_kubeconfig")
[ "$n" -ge 4 ] || die "the first cluster stopped answering after the second went down"
kueue_serves_own_certificate "$first_state" > /dev/null || die "the first cluster's Kueue lost its certificate"
log "side-by-side: second cluster stopped, the first still answers and serves its own certificate"
