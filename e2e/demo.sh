#!/usr/bin/env bash
# The local demo (README's main command): start the offline control plane, run the
# operator, apply examples/hello-world.yaml and watch it come up, finish, and show the
# cluster-up and teardown metrics. Everything is stopped at the end, also on failure.
#
# Pods are simulated by KWOK: no container runs, so nothing inside them calls Flux. When
# the four brokers are ready, the demo marks the lead broker's pod finished (exit 0), as
# its `flux start` would when the job ends; what the operator and JobSet do from there is
# real.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

operator_pid=""
# shellcheck disable=SC2317  # called through the EXIT trap
finish() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$operator_pid" ]; then
    kill "$operator_pid" 2>/dev/null || true
    wait "$operator_pid" 2>/dev/null || true
  fi
  "$here/down.sh" >/dev/null 2>&1 || log "down.sh reported a problem"
  [ "$rc" -eq 0 ] || log "demo failed (exit $rc); operator log: $E2E_CACHE/demo-operator.log"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "building the operator"
(cd "$root" && cargo build --quiet --bin flux-operator)
operator_bin="${CARGO_TARGET_DIR:-$root/target}/debug/flux-operator"

say "starting the offline control plane (etcd, kube-apiserver, KWOK nodes, JobSet, Kueue)"
"$here/up.sh" >/dev/null
export KUBECONFIG=$E2E_KUBECONFIG
k() { "$E2E_BIN/kubectl" "$@"; }
k get nodes

say "installing the MiniCluster CRD and starting the operator"
k apply --server-side -f "$root/crds/flux-framework.org_miniclusters.yaml" >/dev/null
k wait --for=condition=Established crd/miniclusters.flux-framework.org --timeout=30s >/dev/null
metrics_port=${DEMO_METRICS_PORT:-18080}
"$operator_bin" run --cluster-domain cluster.local --log-format text \
  --lease-namespace default --metrics-addr "127.0.0.1:$metrics_port" \
  >"$E2E_CACHE/demo-operator.log" 2>&1 &
operator_pid=$!

say "kubectl apply -f examples/hello-world.yaml"
k apply -f "$root/examples/hello-world.yaml"

wait_phase() { # phase timeout-seconds
  local deadline=$((SECONDS + $2)) phase=""
  while [ $SECONDS -lt $deadline ]; do
    phase=$(k get minicluster hello-world -o jsonpath='{.status.phase}' 2>/dev/null || true)
    [ "$phase" = "$1" ] && return 0
    sleep 1
  done
  log "MiniCluster did not reach $1 (last phase: ${phase:-none})"
  return 1
}

wait_phase Running 120
say "the cluster is up"
k get minicluster hello-world
k get jobset,pods -l flux-framework.org/minicluster=hello-world -o wide
echo
echo "broker config (every broker reads it; its rank is its host name's place in [bootstrap] hosts):"
k get configmap hello-world-flux -o jsonpath='{.data.broker\.toml}'

say "the lead broker's job finishes (KWOK marks its pod Succeeded)"
lead=$(k get pods -l flux-framework.org/minicluster=hello-world,flux-framework.org/role=lead -o name)
k annotate "$lead" e2e.flux-framework.org/complete-after=1s >/dev/null
wait_phase Succeeded 120
k get minicluster hello-world
k get events --field-selector involvedObject.kind=MiniCluster --sort-by=.metadata.creationTimestamp

say "metrics (http://127.0.0.1:$metrics_port/metrics)"
deadline=$((SECONDS + 60))
until curl -fsS "http://127.0.0.1:$metrics_port/metrics" | grep -q '^flux_operator_minicluster_teardown_seconds_count'; do
  [ $SECONDS -lt $deadline ] || { log "no teardown observation"; exit 1; }
  sleep 1
done
metrics=$(curl -fsS "http://127.0.0.1:$metrics_port/metrics")
grep -E '^flux_operator_minicluster_(up|teardown|jobset_created|lead_ready)_seconds_(count|sum)|^flux_operator_miniclusters' <<<"$metrics"
echo
echo "measured on the operator's clock between the moments it saw each transition (sub-second):"
for m in jobset_created lead_ready up teardown; do
  awk -v n="$m" -v m="flux_operator_minicluster_${m}_seconds" '
    index($0, m "_sum{") == 1 { sum = $NF }
    index($0, m "_count{") == 1 { count = $NF }
    END { if (count > 0) printf "  %-16s %.3f s (mean of %d)\n", n, sum / count, count }' <<<"$metrics"
done
echo "cluster-up histogram (cumulative counts per upper bound, seconds):"
grep -E '^flux_operator_minicluster_up_seconds_bucket' <<<"$metrics" |
  sed -E 's/.*le="([^"]+)".* ([0-9]+)$/  le=\1 \2/' | tr '\n' ' '
echo

say "done: hello-world reached Succeeded"
