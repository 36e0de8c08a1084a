#!/usr/bin/env bash
# Self-test of the harness itself, without Rust: the simulated nodes are Ready
# and the annotation-driven pod stages do what e2e/README.md says.
# Run against a cluster from up.sh: `e2e/run-tests.sh e2e/smoke.sh`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
kubectl() { command "$E2E_BIN/kubectl" --kubeconfig "${KUBECONFIG:-$E2E_KUBECONFIG}" "$@"; }

ns=e2e-smoke-$RANDOM
kubectl create namespace "$ns" > /dev/null
trap 'kubectl delete namespace "$ns" --wait=false > /dev/null 2>&1 || true' EXIT

ready=$(kubectl get nodes -l type=kwok -o json |
  jq '[.items[] | select(.status.conditions[] | select(.type == "Ready" and .status == "True"))] | length')
[ "$ready" -ge 4 ] || die "expected 4 Ready simulated nodes, found $ready"
log "smoke: $ready simulated nodes Ready"

pod() { # name annotations-json
  jq -n --arg name "$1" --argjson ann "$2" '{
    apiVersion: "v1", kind: "Pod", metadata: {name: $name, annotations: $ann},
    spec: {restartPolicy: "Never", containers: [{name: "main", image: "busybox"}]}}'
}
# The ServiceAccount admission plugin rejects pods until the namespace's
# default ServiceAccount exists.
for _ in $(seq 50); do kubectl -n "$ns" get serviceaccount default > /dev/null 2>&1 && break; sleep 0.2; done
{
  pod runs '{}'
  pod completes '{"e2e.flux-framework.org/complete-after": "2s"}'
  pod fails '{"e2e.flux-framework.org/fail-after": "2s", "e2e.flux-framework.org/exit-code": "3"}'
} | kubectl -n "$ns" apply -f - > /dev/null

kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded pod/completes --timeout=60s > /dev/null
kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Failed pod/fails --timeout=60s > /dev/null
code=$(kubectl -n "$ns" get pod fails -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')
[ "$code" = 3 ] || die "failed pod has exit code '$code', expected 3"
phase=$(kubectl -n "$ns" get pod runs -o jsonpath='{.status.phase}/{.spec.nodeName}')
[[ $phase == Running/kwok-node-* ]] || die "plain pod is '$phase', expected Running on a kwok node"
log "smoke: pod stages OK (complete-after, fail-after with exit code, plain pod keeps running)"
echo "1 passed, 0 failed"
