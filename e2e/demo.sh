#!/usr/bin/env bash
# The local demo (README's main command): a test cluster whose real node is this machine,
# the operator installed by Helm and running in a pod there, and examples/hello-world.yaml
# run by real Flux: four brokers, one job across all of them. Shows the job's output from
# `kubectl logs`, the MiniCluster reaching Succeeded, its Events and the operator's metrics.
# Everything is stopped at the end, also on failure. `make test` runs it too (test-demo).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

# shellcheck disable=SC2317  # called through the EXIT trap
finish() {
  local rc=$?
  trap - EXIT INT TERM
  [ -z "${port_forward:-}" ] || kill "$port_forward" 2> /dev/null || true
  if [ "$rc" -ne 0 ] && [ -n "${KUBECONFIG:-}" ]; then
    log "demo failed (exit $rc); the pods, and the operator's log:"
    k -n demo get pods -o wide >&2 2> /dev/null || true
    k -n flux-operator logs deployment/flux-operator --tail=30 >&2 2> /dev/null || true
  fi
  "$here/down.sh" > /dev/null 2>&1 || log "down.sh reported a problem"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
k() { "$E2E_BIN/kubectl" "$@"; }
helm() { "$E2E_BIN/helm" "$@"; }

say "starting the test cluster: control plane, KWOK nodes, and this machine as a real node"
E2E_REAL_NODE=1 "$here/up.sh" > /dev/null
export KUBECONFIG=$E2E_KUBECONFIG
k get nodes -o wide

say "helm install flux-operator charts/flux-operator (image flux-operator:dev, built here)"
# The real node is tainted so that only chosen pods land there: these two namespaces
# select it and tolerate the taint (annotations, see e2e/node.sh).
for ns in flux-operator demo; do
  k create namespace "$ns" > /dev/null
  "$here/node.sh" namespace "$ns"
done
helm install flux-operator "$root/charts/flux-operator" --namespace flux-operator \
  --set image.pullPolicy=IfNotPresent
k -n flux-operator rollout status deployment/flux-operator --timeout=120s
k -n flux-operator get pods -o wide

say "kubectl apply -f examples/hello-world.yaml"
k -n demo apply -f "$root/examples/hello-world.yaml"

# phase_is PHASE: the MiniCluster is in PHASE; a failed one ends the demo (shown on fd 3,
# the script's stderr: wait_until discards what its command prints).
exec 3>&2
phase_is() {
  local phase
  phase=$(k -n demo get minicluster hello-world -o jsonpath='{.status.phase}' 2> /dev/null || true)
  if [ "$phase" = Failed ]; then
    log "the MiniCluster failed" 2>&3
    k -n demo describe minicluster hello-world >&3 2>&3 || true
    exit 1
  fi
  [ "$phase" = "$1" ]
}
wait_phase() { # PHASE TIMEOUT_SECONDS
  wait_until "$2" "the MiniCluster to be $1" phase_is "$1"
}

wait_phase Running 180
say "the brokers are up: real pods on the real node"
k -n demo get minicluster hello-world
k -n demo get pods -o wide

wait_phase Succeeded 180
say "the job's output: kubectl logs of the lead broker's pod (its Flux container)"
lead=$(k -n demo get pods -l flux-framework.org/minicluster=hello-world,flux-framework.org/role=lead \
  -o jsonpath='{.items[0].metadata.name}')
output=$(k -n demo logs "$lead" -c hello-world)
echo "$output"
hosts=$(grep -c '^hello from ' <<< "$output" || true)
distinct=$(grep '^hello from ' <<< "$output" | sort -u | wc -l)
if [ "$hosts" -ne 4 ] || [ "$distinct" -ne 4 ]; then
  log "expected a line from each of the 4 brokers' hosts, got $hosts ($distinct distinct)"
  exit 1
fi

say "the MiniCluster reached Succeeded; its Events"
k -n demo get minicluster hello-world
k -n demo get events --field-selector involvedObject.kind=MiniCluster --sort-by=.metadata.creationTimestamp

say "the operator's metrics (HTTPS, with the token of an account bound to flux-operator-metrics-reader)"
# /metrics answers only a bearer the API server authenticates and allows `get` on /metrics;
# the API server's proxy forwards no token, so the demo reads it through a port-forward.
k -n demo create serviceaccount metrics-reader > /dev/null
k create clusterrolebinding demo-metrics-reader --clusterrole=flux-operator-metrics-reader \
  --serviceaccount=demo:metrics-reader > /dev/null
token=$(k -n demo create token metrics-reader)
metrics_port=$(free_port 18580)
k -n flux-operator port-forward service/flux-operator-metrics "$metrics_port:8080" \
  > "$E2E_STATE/logs/demo-port-forward.log" 2>&1 &
port_forward=$!
# The certificate is self-signed (-k); the token goes on standard input, not the command line.
scrape() { curl -fsSk --max-time 5 -H @- "https://127.0.0.1:$metrics_port/metrics" <<< "Authorization: Bearer $token"; }
observed_teardown() { scrape | grep -q '^flux_operator_minicluster_teardown_seconds_count'; }
wait_until 60 "a teardown observation in the operator's metrics" observed_teardown
metrics=$(scrape)
grep -E '^flux_operator_minicluster_(up|teardown)_seconds_(count|sum)' <<< "$metrics"
echo
echo "measured by the operator between the moments it saw each transition:"
for m in jobset_created lead_ready up teardown; do
  awk -v n="$m" -v m="flux_operator_minicluster_${m}_seconds" '
    index($0, m "_sum{") == 1 { sum = $NF }
    index($0, m "_count{") == 1 { count = $NF }
    END { if (count > 0) printf "  %-16s %.3f s (mean of %d)\n", n, sum / count, count }' <<< "$metrics"
done

say "done: hello-world ran on real Flux and reached Succeeded"
