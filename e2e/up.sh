#!/usr/bin/env bash
# Start the offline test control plane (see e2e/README.md):
#   etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok,
#   started by `kwokctl --runtime binary` from the binaries build.sh made;
#   4 simulated Nodes; the vendored JobSet and Kueue CRDs; the JobSet and Kueue
#   controllers run out of cluster, their webhooks served on 127.0.0.1 with a
#   self-signed CA and registered by URL + caBundle.
# E2E_KUEUE_VERSION picks the Kueue: KUEUE_VERSION (default) or KUEUE_OLDEST_VERSION (the
# oldest release the README claims, for make test-kueue-oldest).
# With E2E_REAL_NODE=1 (make up, the real-node tests, the demo), this machine joins as a
# real node too (e2e/node.sh): kubelet, containerd, bridge CNI, kube-proxy, CoreDNS.
# Prints how long each phase took, writes $E2E_STATE/kubeconfig and
# $E2E_STATE/env, and ends by printing `export KUBECONFIG=...`.
# Everything it starts is recorded by PID; e2e/down.sh stops it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=lib.sh
. "$here/lib.sh"

NODES=${E2E_NODES:-4}
REAL_NODE=${E2E_REAL_NODE:-0}
pids=$E2E_STATE/pids
logs=$E2E_STATE/logs
certs=$E2E_STATE/certs
vendor=$root/vendor-crds
KUEUE=${E2E_KUEUE_VERSION:-$KUEUE_VERSION}
case $KUEUE in
  "$KUEUE_VERSION") kueue_bin=kueue kueue_crds=$vendor/kueue ;;
  "$KUEUE_OLDEST_VERSION") kueue_bin=kueue-$KUEUE kueue_crds=$vendor/kueue-$KUEUE ;;
  *) die "E2E_KUEUE_VERSION=$KUEUE: not one of KUEUE_VERSION or KUEUE_OLDEST_VERSION in versions.env" ;;
esac

# Our binaries first: kwokctl shells out to `kubectl`, and must not fetch one.
export PATH=$E2E_BIN:$PATH
# (its discovery cache goes to the state directory, not ~/.kube)
kubectl() { command "$E2E_BIN/kubectl" --kubeconfig "$E2E_KUBECONFIG" --cache-dir "$E2E_STATE/kube-cache" "$@"; }

on_exit() {
  local rc=$?
  [ "$rc" -ne 0 ] || return 0
  log "up.sh FAILED (exit $rc) in phase '$_phase_name'; logs are in $logs and $KWOK_WORKDIR/clusters/$E2E_CLUSTER/logs"
  for f in "$logs"/*.log; do
    [ -f "$f" ] || continue
    log "--- last lines of $f"
    tail -n 15 "$f" >&2 || true
  done
  log "run e2e/down.sh to clean up"
}
trap on_exit EXIT

t_start=$(now_ms)

phase "preflight"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl jobset "$kueue_bin"; do
  [ -x "$E2E_BIN/$b" ] || die "$E2E_BIN/$b is missing: run 'make e2e-build' (e2e/build.sh) first"
done
for t in jq openssl curl; do
  command -v "$t" > /dev/null || die "$t is missing: run e2e/setup-host.sh"
done
for f in "$vendor/jobset/webhook-manifests.yaml" "$kueue_crds/webhook-manifests.yaml"; do
  [ -f "$f" ] || die "$f is missing: run 'make vendor-crds'"
done
if [ -d "$E2E_STATE" ]; then
  log "a previous cluster state exists in $E2E_STATE: tearing it down first"
  "$here/down.sh"
fi
mkdir -p "$E2E_STATE" "$pids" "$logs" "$certs" "$KWOK_WORKDIR"

phase "assemble kwok stages"
node_ip=$(host_ip)
node_ip=${node_ip:-127.0.0.1}
# The control plane listens on loopback only; with a real node the API server listens on
# every address (its pods reach it at this machine's), behind e2e/node.sh's INPUT guard.
api_bind=127.0.0.1
[ "$REAL_NODE" != 1 ] || api_bind=0.0.0.0
# A stages file holding any Stage replaces all of kwok's default stages, so it
# carries the node and pod basics from the kwok module itself, minus the default
# pod-complete (it would finish every Job pod at once) and the default pod-delete (see
# e2e/stages/pod-delete.yaml), plus e2e/stages/*.yaml.
kwok_dir=$(go_module_dir sigs.k8s.io/kwok "$KWOK_VERSION")
stages=$E2E_STATE/kwok-stages.yaml
{
  for f in node/fast/node-initialize.yaml \
           node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml; do
    [ -f "$kwok_dir/kustomize/stage/$f" ] || die "kwok stage $f not found in $kwok_dir"
    echo "---"
    cat "$kwok_dir/kustomize/stage/$f"
  done
  for f in "$here"/stages/*.yaml; do
    echo "---"
    cat "$f"
  done
  # kwok manages only the simulated nodes (their annotation), never a real kubelet's node;
  # the API server reaches kubelets by IP, serves the kubernetes Service's IP and this
  # machine's in its certificate (for in-cluster clients), and applies a namespace's
  # default node selector and tolerations (how tests put pods on the real node).
  # One controller-manager and one scheduler: no leader election. Under a heavy load (a
  # thousand pods on two busy cores) renewing the lease can miss its 10 s deadline, and the
  # loser exits; nothing restarts it here, so Jobs and pods would stop making progress.
  # Two real nodes (the node-loss tests): the node lifecycle controller as Kubernetes
  # ships it (a node not heard from for 50 s is NotReady, checked every 5 s), not kwokctl's
  # 3m20s; kwok renews its simulated nodes' leases as a kubelet does (a 40 s lease).
  node_monitor='' kwok_lease=''
  if [ "${E2E_REAL_NODES:-1}" = 2 ]; then
    node_monitor=$'  - key: node-monitor-grace-period\n    value: 50s\n  - key: node-monitor-period\n    value: 5s'
    kwok_lease=$'  - key: node-lease-duration-seconds\n    value: "40"'
  fi
  cat <<EOF
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: 127.0.0.1
  kubeApiserverCertSANs: ["10.0.0.1", "$node_ip"]
componentsPatches:
- name: kwok-controller
  extraArgs:
  - key: manage-all-nodes
    value: "false"
  - key: manage-nodes-with-annotation-selector
    value: kwok.x-k8s.io/node=fake
$kwok_lease
- name: kube-apiserver
  extraArgs:
  - key: bind-address
    value: $api_bind
  - key: advertise-address
    value: $node_ip
  - key: kubelet-preferred-address-types
    value: InternalIP,Hostname
  - key: enable-admission-plugins
    value: PodNodeSelector,PodTolerationRestriction
  # Aggregated APIs (prometheus-adapter's custom metrics, in the autoscaling tests) are
  # reached at their Service's endpoints, not its cluster IP: the adapter runs on this
  # host, and the API server's own traffic does not pass kube-proxy's rules.
  - key: enable-aggregator-routing
    value: "true"
  # The real node's kubelet takes no anonymous requests: the API server shows it the
  # cluster's admin certificate (signed by the cluster's CA, which the kubelet trusts).
  - key: kubelet-client-certificate
    value: $KWOK_WORKDIR/clusters/$E2E_CLUSTER/pki/admin.crt
  - key: kubelet-client-key
    value: $KWOK_WORKDIR/clusters/$E2E_CLUSTER/pki/admin.key
- name: kube-controller-manager
  extraArgs:
  - key: leader-elect
    value: "false"
$node_monitor
- name: kube-scheduler
  extraArgs:
  - key: leader-elect
    value: "false"
EOF
} > "$stages"

phase "kwokctl create cluster (etcd, apiserver, controller-manager, scheduler, kwok)"
# E2E_AUDIT=1: the API server logs every request's metadata (benches/audit/policy.yaml) to
# $KWOK_WORKDIR/clusters/$E2E_CLUSTER/logs/audit.log, for benches/audit/by_client.py.
audit=()
[ "${E2E_AUDIT:-0}" != 1 ] || audit=(--kube-audit-policy "$root/benches/audit/policy.yaml")
# The *-binary flags point at local files, so kwokctl downloads nothing.
KWOK_KUBECTL_BINARY=$E2E_BIN/kubectl KWOK_KUBE_VERSION=$KUBE_VERSION \
"$E2E_BIN/kwokctl" create cluster \
  --name "$E2E_CLUSTER" \
  --runtime binary \
  --config "$stages" \
  --etcd-binary "$E2E_BIN/etcd" \
  --kube-apiserver-binary "$E2E_BIN/kube-apiserver" \
  --kube-controller-manager-binary "$E2E_BIN/kube-controller-manager" \
  --kube-scheduler-binary "$E2E_BIN/kube-scheduler" \
  --kwok-controller-binary "$E2E_BIN/kwok" \
  --kube-authorization=true \
  --kube-admission=true \
  --disable-qps-limits \
  "${audit[@]}" \
  --quiet-pull \
  --kubeconfig "$E2E_STATE/kwokctl-kubeconfig" \
  --wait 3m \
  > "$logs/kwokctl-create.log" 2>&1 || { cat "$logs/kwokctl-create.log" >&2; false; }
# A self-contained kubeconfig (certificates embedded) for tests and tools.
command "$E2E_BIN/kubectl" --kubeconfig "$E2E_STATE/kwokctl-kubeconfig" --cache-dir "$E2E_STATE/kube-cache" \
  config view --raw --flatten --minify --context "kwok-$E2E_CLUSTER" > "$E2E_KUBECONFIG"
chmod 600 "$E2E_KUBECONFIG"
kubectl get --raw /readyz > /dev/null

phase "simulated nodes"
for ((i = 0; i < NODES; i++)); do
  cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: kwok-node-$i
    topology.kubernetes.io/zone: e2e-zone-$((i % 2))
    e2e.flux-framework.org/node: "true"
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110", ephemeral-storage: 100Gi}
  capacity: {cpu: "16", memory: 64Gi, pods: "110", ephemeral-storage: 100Gi}
  nodeInfo:
    architecture: amd64
    operatingSystem: linux
    kubeletVersion: $KUBE_VERSION
EOF
done | kubectl apply -f - > /dev/null
kubectl wait --for=condition=Ready node -l type=kwok --timeout=60s > /dev/null

phase "webhook certificates"
# One CA and one serving certificate (IP SAN 127.0.0.1) for both controllers.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
  -subj "/CN=$E2E_CLUSTER-webhook-ca" -keyout "$certs/ca.key" -out "$certs/ca.crt" 2> /dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -subj "/CN=127.0.0.1" -keyout "$certs/tls.key" -out "$certs/tls.csr" 2> /dev/null
printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
  'extendedKeyUsage=serverAuth' 'subjectAltName=IP:127.0.0.1,DNS:localhost' > "$certs/ext.cnf"
openssl x509 -req -in "$certs/tls.csr" -CA "$certs/ca.crt" -CAkey "$certs/ca.key" -CAcreateserial \
  -days 30 -extfile "$certs/ext.cnf" -out "$certs/tls.crt" 2> /dev/null
chmod 600 "$certs"/*.key
ca_bundle=$(base64 -w0 < "$certs/ca.crt")
# Kueue v0.15 reads its metrics serving certificate from a fixed path when its
# internal cert management is off (/etc/kueue/metrics/certs). Kueue runs in a mount
# namespace of its own where /etc is an overlay whose upper layer lives in this
# cluster's state: each cluster's Kueue sees its own certificate, the host's /etc is
# never written, and two test clusters can run side by side.
mkdir -p "$E2E_STATE/kueue-etc/upper" "$E2E_STATE/kueue-etc/work"
command -v unshare > /dev/null || die "unshare is missing: run e2e/setup-host.sh"

jobset_webhook=$(free_port 19443) jobset_metrics=$(free_port 19080) jobset_health=$(free_port 19090)
kueue_webhook=$(free_port 19543) kueue_metrics=$(free_port 19180) kueue_health=$(free_port 19190)
cat > "$E2E_STATE/ports.env" <<EOF
JOBSET_WEBHOOK_PORT=$jobset_webhook
JOBSET_METRICS_PORT=$jobset_metrics
JOBSET_HEALTH_PORT=$jobset_health
KUEUE_WEBHOOK_PORT=$kueue_webhook
KUEUE_METRICS_PORT=$kueue_metrics
KUEUE_HEALTH_PORT=$kueue_health
EOF

phase "CRDs"
# Server-side apply: Kueue's Workload CRD is too big for the last-applied annotation.
crd_files=()
for f in "$vendor"/jobset/*_*.yaml "$kueue_crds"/*_*.yaml; do crd_files+=(-f "$f"); done
kubectl apply --server-side --force-conflicts "${crd_files[@]}" > /dev/null
kubectl create namespace kueue-system --dry-run=client -o yaml | kubectl apply -f - > /dev/null
# Kueue serves v1beta1 and v1beta2 of some APIs; point their conversion at it.
conversion_patch=$(jq -cn --arg url "https://127.0.0.1:$kueue_webhook/convert" --arg ca "$ca_bundle" \
  '{spec: {conversion: {strategy: "Webhook", webhook: {conversionReviewVersions: ["v1"],
     clientConfig: {url: $url, caBundle: $ca}}}}}')
grep -v '^#' "$kueue_crds/conversion-webhook-crds.txt" | while read -r crd; do
  [ -n "$crd" ] && kubectl patch crd "$crd" --type merge -p "$conversion_patch" > /dev/null
done
# The controllers look their APIs up in discovery when they start.
kubectl wait --for=condition=Established crd --all --timeout=60s > /dev/null
for gv in jobset.x-k8s.io/v1alpha2 kueue.x-k8s.io/v1beta1 kueue.x-k8s.io/v1beta2; do
  for ((i = 0; ; i++)); do
    kubectl get --raw "/apis/$gv" 2> /dev/null | grep -q '"kind":"' && break
    [ "$i" -lt 100 ] || die "API $gv is not served"
    sleep 0.1
  done
done

phase "start JobSet and Kueue"
cat > "$E2E_STATE/jobset-config.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
webhook:
  host: 127.0.0.1
  port: $jobset_webhook
  certDir: $certs
metrics:
  bindAddress: 127.0.0.1:$jobset_metrics
  certDir: $certs
health:
  healthProbeBindAddress: 127.0.0.1:$jobset_health
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
featureGates:
  ElasticJobSet: true
EOF

cat > "$E2E_STATE/kueue-config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
manageJobsWithoutQueueName: false
webhook:
  host: 127.0.0.1
  port: $kueue_webhook
  certDir: $certs
metrics:
  bindAddress: 127.0.0.1:$kueue_metrics
health:
  healthProbeBindAddress: 127.0.0.1:$kueue_health
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
integrations:
  frameworks:
  - batch/job
  - jobset.x-k8s.io/jobset
featureGates:
  # Its aggregated API server wants in-cluster certificates and a Service.
  VisibilityOnDemand: false
EOF

# start_bg NAME CMD...: run CMD detached, output to $logs/NAME.log, pid to $pids/NAME.pid.
start_bg() {
  local name=$1; shift
  nohup "$@" < /dev/null > "$logs/$name.log" 2>&1 &
  echo $! > "$pids/$name.pid"
  log "started $name (pid $!)"
}
start_bg jobset "$E2E_BIN/jobset" --config "$E2E_STATE/jobset-config.yaml" \
  --kubeconfig "$E2E_KUBECONFIG" --zap-devel=false
# (the shell execs Kueue, so the recorded pid is Kueue's own)
# shellcheck disable=SC2016 # expanded by the inner shell
start_bg kueue unshare --mount --propagation private sh -euc '
  mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc
  mkdir -p /etc/kueue/metrics/certs
  ln -sfn "$2/tls.crt" /etc/kueue/metrics/certs/tls.crt
  ln -sfn "$2/tls.key" /etc/kueue/metrics/certs/tls.key
  shift 2
  exec "$@"' kueue-etc "$E2E_STATE/kueue-etc" "$certs" \
  "$E2E_BIN/$kueue_bin" --config "$E2E_STATE/kueue-config.yaml" \
  --kubeconfig "$E2E_KUBECONFIG" --zap-devel=false

# wait_ready NAME URL TIMEOUT_SECONDS
wait_ready() {
  local name=$1 url=$2 timeout=$3
  wait_until --alive "$pids/$name.pid" "$logs/$name.log" "$timeout" "$name ($url)" \
    curl -fsS -o /dev/null "$url"
  log "$name is ready ($url, ${waited}s)"
}
wait_ready jobset "http://127.0.0.1:$jobset_health/readyz" 120
wait_ready kueue "http://127.0.0.1:$kueue_health/readyz" 120

phase "register webhooks"
# register_webhooks PREFIX PORT MANIFESTS: the module's webhook configurations,
# renamed PREFIX-<name>, each clientConfig turned from the in-cluster Service
# into https://127.0.0.1:PORT<path> with our CA.
register_webhooks() {
  kubectl create --dry-run=client --validate=false -o json -f "$3" |
    jq -s --arg prefix "$1" --arg base "https://127.0.0.1:$2" --arg ca "$ca_bundle" '
      { apiVersion: "v1", kind: "List",
        items: [ .[] | (if .kind == "List" then .items[] else . end)
                 | select(.kind | endswith("WebhookConfiguration"))
                 | .metadata = { name: ($prefix + "-" + .metadata.name),
                                 labels: { "app.kubernetes.io/part-of": "flux-operator-e2e" } }
                 | .webhooks |= map(.clientConfig = { url: ($base + .clientConfig.service.path),
                                                      caBundle: $ca }) ] }' |
    kubectl apply -f - > /dev/null
}
register_webhooks jobset "$jobset_webhook" "$vendor/jobset/webhook-manifests.yaml"
register_webhooks kueue "$kueue_webhook" "$kueue_crds/webhook-manifests.yaml"

phase "smoke check"
# Server-side dry runs go through the real admission chain and conversion:
# they fail if a webhook is unreachable or its certificate is wrong.
# dry_run MANIFEST: retried for 10 s while the webhooks come up, each try given the manifest
# anew (a here-document is read once: a retry from it got nothing, "no objects passed to
# create"); the last try's error is shown.
dry_run() {
  local i
  for ((i = 0; i < 50; i++)); do
    kubectl create --dry-run=server -f - <<< "$1" > /dev/null 2>&1 && return 0
    sleep 0.2
  done
  kubectl create --dry-run=server -f - <<< "$1"
}
dry_run "$(cat <<'EOF'
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: e2e-smoke, namespace: default}
spec:
  replicatedJobs:
  - name: w
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: busybox}]
EOF
)"
dry_run "$(cat <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: e2e-smoke}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: "1"}]
EOF
)"

if [ "$REAL_NODE" = 1 ]; then
  phase "real node (e2e/node.sh)"
  "$here/node.sh" start
fi

phase ""
cat > "$E2E_STATE/env" <<EOF
export KUBECONFIG=$E2E_KUBECONFIG
export E2E_STATE=$E2E_STATE
export PATH=$E2E_BIN:\$PATH
EOF
t_total=$(( $(now_ms) - t_start ))
nodes_desc="$NODES simulated nodes"
if [ "$REAL_NODE" = 1 ] && [ "${E2E_REAL_NODES:-1}" = 2 ]; then
  nodes_desc+=" + real nodes $E2E_NODE_NAME and $E2E_NODE_NAME-2"
elif [ "$REAL_NODE" = 1 ]; then
  nodes_desc+=" + real node $E2E_NODE_NAME"
fi
log "cluster '$E2E_CLUSTER' is up in $((t_total / 1000)).$(printf '%03d' $((t_total % 1000)))s: $nodes_desc, JobSet $JOBSET_VERSION, Kueue $KUEUE, Kubernetes $KUBE_VERSION"
log "state: $E2E_STATE (logs in $logs); stop it with e2e/down.sh"
echo "export KUBECONFIG=$E2E_KUBECONFIG"
