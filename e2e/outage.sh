#!/usr/bin/env bash
# An API server outage, as a user's cluster meets one: kube-apiserver dies for 20 s and
# starts again (its watch cache rebuilt, so resumed watches can get "410 too old resource
# version"). Then a new MiniCluster must get its first reconcile within seconds: before the
# per-watch bounded backoff (src/controller/index.rs) it waited about 3 minutes behind the
# controller's shared one. And every watch lists again (a re-list: issue 37), which must
# leave the running cluster's objects as they were (the same UIDs). Run through e2e/run-tests.sh (`make test-outage`); it has the
# cluster to itself, so the outage disturbs no other test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
kubeconfig=${KUBECONFIG:-$E2E_KUBECONFIG}
kubectl() { command "$E2E_BIN/kubectl" --kubeconfig "$kubeconfig" "$@"; }
operator=${FLUX_OPERATOR_BIN:-${CARGO_TARGET_DIR:-$E2E_CACHE/target}/debug/flux-operator}
[ -x "$operator" ] || die "$operator is missing: cargo build first"
downtime=${OUTAGE_SECONDS:-20}
limit_ms=${OUTAGE_FIRST_RECONCILE_LIMIT_MS:-20000}

ns=e2e-outage-$RANDOM
kubectl create namespace "$ns" > /dev/null
"$operator" crd | kubectl apply --server-side -f - > /dev/null
"$operator" immutable-policy | kubectl apply --server-side -f - > /dev/null
port=$(free_port 18480)
WATCH_NAMESPACE=$ns "$operator" run --cluster-domain cluster.local --leader-election=false \
  --metrics-addr "127.0.0.1:$port" --metrics-insecure-loopback --log-format text > "$E2E_STATE/logs/outage-operator.log" 2>&1 &
op=$!
cleanup() {
  kill "$op" 2> /dev/null || true
  kubectl delete namespace "$ns" --wait=false > /dev/null 2>&1 || true
}
trap cleanup EXIT

minicluster() {
  printf '%s\n' "apiVersion: flux-framework.org/v1alpha2" "kind: MiniCluster" \
    "metadata: {name: $1, namespace: $ns}" \
    "spec: {size: 2, containers: [{image: rockylinux:9, command: hostname}]}" | kubectl apply -f - > /dev/null
}
has_status() { [ -n "$(kubectl -n "$ns" get minicluster "$1" -o 'jsonpath={.status.phase}')" ]; }
owned_uids() { # MC: kind/name=uid of what the operator made for MC, one a line
  kubectl -n "$ns" get jobsets,secrets,configmaps -l "flux-framework.org/minicluster=$1" \
    -o 'jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.uid}{"\n"}{end}' | sort
}
has_jobset() { kubectl -n "$ns" get jobset "$1" > /dev/null; }
lists() { grep -c 'listed.*watch="miniclusters"' "$E2E_STATE/logs/outage-operator.log" || true; }

wait_until 60 "the operator's /readyz" curl -fsS "http://127.0.0.1:$port/readyz"
minicluster before
wait_until 60 "the first MiniCluster's status" has_status before
wait_until 60 "the first MiniCluster's JobSet" has_jobset before
owned_before=$(owned_uids before)
lists_before=$(lists)
log "outage: operator up, a MiniCluster reconciled; stopping kube-apiserver for ${downtime}s"

pidfile=$KWOK_WORKDIR/clusters/$E2E_CLUSTER/pids/kube-apiserver.pid
pid=$(cat "$pidfile")
[[ $(readlink "/proc/$pid/exe") == */kube-apiserver ]] || die "pid $pid is not kube-apiserver"
mapfile -d '' args < "/proc/$pid/cmdline"
cwd=$(readlink "/proc/$pid/cwd")
kill -KILL "$pid" # a crash: no graceful shutdown that waits for open watches
wait_until 30 "kube-apiserver to stop" bash -c "! kill -0 $pid"
sleep "$downtime"
# Started again as kwokctl started it; the pid file is updated so down.sh stops this one.
(cd "$cwd" && exec setsid nohup "${args[@]}" >> "$cwd/logs/kube-apiserver.log" 2>&1 < /dev/null) &
echo $! > "$pidfile"
wait_until 60 "kube-apiserver to be ready again" kubectl get --raw /readyz
log "outage: kube-apiserver back after ${downtime}s down"

t0=$(now_ms)
minicluster after
wait_until 300 "the new MiniCluster's first reconcile" has_status after
took=$(($(now_ms) - t0))
log "outage: first reconcile of a MiniCluster created after the outage took ${took} ms (limit ${limit_ms} ms)"
[ "$took" -le "$limit_ms" ] || die "the first reconcile after an API server outage took ${took} ms"

relisted() { [ "$(lists)" -gt "$lists_before" ]; }
wait_until 60 "the MiniCluster watch to list again" relisted
owned_after=$(owned_uids before)
[ "$owned_after" = "$owned_before" ] ||
  die "the outage and re-list replaced objects of a live MiniCluster: before
$owned_before
after
$owned_after"
log "outage: the watches listed again; the live MiniCluster's $(wc -l <<< "$owned_before") objects kept their UIDs"
