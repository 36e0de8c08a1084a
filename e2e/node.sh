#!/usr/bin/env bash
# node.sh start|stop: the real node of the test cluster (see e2e/README.md, "The real node").
#
#   start  this machine joins the cluster up.sh started as node $E2E_NODE_NAME, beside the
#          KWOK nodes: containerd + runc (Debian's), a bridge CNI, the kubelet and kube-proxy
#          (built with the control plane), CoreDNS for the cluster domain, and the images of
#          e2e/images.sh imported. The node is labeled and tainted
#          e2e.flux-framework.org/real-node=true: only pods that select it and tolerate the
#          taint run here (a namespace gets both with `node.sh namespace NS`), so KWOK tests
#          never land on it.
#   stop   stop all of it by the PIDs it recorded, remove the containers, mounts, network
#          devices, iptables rules and cgroups it made, and restore the kernel settings it
#          (or the kubelet) changed, from what start recorded.
#   namespace NS   make NS a real-node namespace (default node selector and toleration).
#   namespace NS two   the same for the two-node tests: its pods may land on either node.
#   lose N   the Nth node dies as in a power loss: its kubelet, containerd, shims and every
#            process of its pods killed at once (SIGKILL), and its pods' addresses silenced
#            (packets to and from them dropped, as to a machine that is gone). Its pods stay
#            in the API as they were, until the control plane's node lifecycle acts.
#   back N   the Nth node comes back after `lose`: its containerd and kubelet start again on
#            the same state, as a machine rebooted.
#
# With E2E_REAL_NODES=2 a second real node, $E2E_NODE_NAME-2, joins beside the first: its own
# containerd (root, state, socket), kubelet (root, ports, cgroup root /e2e-node-2), pod range
# (10.244.1.0/24 on bridge flux-e2e1) and images. The two bridges route to each other through
# this machine, as nodes on one network; kube-proxy and CoreDNS serve both (one kernel's
# rules; they run as processes, not pods, so losing a node does not lose them). The second
# node carries only the label e2e.flux-framework.org/two-nodes=true (the first carries it
# too) and the real node's taint: pods of the one-node tests never land on it.
#
# Traffic never leaves this machine: the bridge does not masquerade, a mangle rule drops
# anything from the pod range that is not for the bridge, the Service range is routed to the
# bridge (where nothing answers for it), and CoreDNS answers only the cluster domain
# (NXDOMAIN for anything else). Nothing else reaches in: the API server, the kubelet and
# CoreDNS listen on this machine's address for the pods, and an INPUT rule drops what comes
# to them from anywhere but this machine and the pods' bridge (the rest of the control plane
# listens on loopback only, e2e/up.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=lib.sh
. "$here/lib.sh"

pids=$E2E_STATE/pids
logs=$E2E_STATE/logs
NODES=${E2E_REAL_NODES:-1}
case "$NODES" in 1 | 2) ;; *) die "E2E_REAL_NODES=$NODES: one or two real nodes" ;; esac
# What the nodes share (kernel settings recorded, kube-proxy's and CoreDNS' configuration)
# lives in the first node's directory.
shared=$E2E_STATE/node
# Every node's pods: node N has 10.244.(N-1).0/24 on bridge flux-e2e(N-1).
PODS_CIDR=10.244.0.0/16
BRIDGES=flux-e2e+
TWO_NODES_LABEL=e2e.flux-framework.org/two-nodes

# select_node N: the Nth node's name, directory, pod range, bridge, cgroup root, and the
# suffix of its processes' pid and log files.
select_node() {
  local n=$1
  if [ "$n" = 1 ]; then
    node=$shared NODE_NAME=$E2E_NODE_NAME suffix='' cgroup_root=/
  else
    node=$E2E_STATE/node-$n NODE_NAME=$E2E_NODE_NAME-$n suffix=-$n cgroup_root=/e2e-node-$n
  fi
  POD_CIDR=10.244.$((n - 1)).0/24 BRIDGE=flux-e2e$((n - 1))
}
select_node 1
# The API server's default Service range (kwokctl sets none): the kubernetes Service is
# 10.0.0.1, kube-dns 10.0.0.10.
SERVICE_CIDR=10.0.0.0/24
DNS_IP=10.0.0.10
GUARD=FLUX-E2E-GUARD
# Directories outside $E2E_STATE that the kubelet, containerd and the CNI plugins write to
# whatever their configuration says (fixed paths); stop removes those start found missing.
HOST_DIRS=(/var/log/containers /var/lib/kubelet /var/lib/cni /run/containerd)
# Kernel settings the kubelet, kube-proxy or this script change; stop restores them.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
         kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward
         net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables
         net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
         net.netfilter.nf_conntrack_tcp_timeout_close_wait)
# The filter table's chain that forwards only what comes from or goes to the pods' bridge.
FORWARD_GUARD=FLUX-E2E-FORWARD
# The filter table's chain that keeps other machines from what listens beyond loopback.
INPUT_GUARD=FLUX-E2E-INPUT
# The filter table's chain that silences a lost node's pods (`lose`).
LOST=FLUX-E2E-LOST

kubectl() { command "$E2E_BIN/kubectl" --kubeconfig "$E2E_KUBECONFIG" --cache-dir "$E2E_STATE/kube-cache" "$@"; }
ctr() { "$E2E_BIN/ctr" --address "$node/containerd/containerd.sock" --namespace k8s.io "$@"; }

start_bg() { # NAME CMD...: detached, output to $logs/NAME.log, pid to $pids/NAME.pid (NAME
  # carries the node's suffix)
  local name=$1; shift
  nohup "$@" < /dev/null > "$logs/$name.log" 2>&1 &
  echo $! > "$pids/$name.pid"
  log "node: started $name (pid $!)"
}

# wait_for NAME TIMEOUT_SECONDS CMD...: until CMD succeeds; fail naming NAME and its log.
wait_for() {
  local name=$1 timeout=$2
  shift 2
  wait_until --alive "$pids/$name.pid" "$logs/$name.log" "$timeout" "node: $name" "$@"
  log "node: $name is ready (${waited}s)"
}

record_host() {
  local s d
  for d in "${HOST_DIRS[@]}"; do
    [ -e "$d" ] || echo "$d" >> "$shared/made-dirs"
  done
  : > "$shared/sysctls"
  for s in "${SYSCTLS[@]}"; do
    echo "$s=$(sysctl -n "$s" 2> /dev/null || echo absent)" >> "$shared/sysctls"
  done
}

# Refuses to start when the pods' or the Services' range overlaps a route the host already
# has (not ours): the node would take that network over, and stop could not give it back.
routes_free() {
  local -a taken
  mapfile -t taken < <(ip -4 route show | awk '$1 != "default" && $0 !~ / dev flux-e2e[0-9]+ / {print $1}')
  python3 - "$PODS_CIDR" "$SERVICE_CIDR" "${taken[@]}" <<'PY' || die "node: the pods' ($PODS_CIDR) or the Services' ($SERVICE_CIDR) range overlaps a route of this host; nothing was changed"
import ipaddress, sys
ours = [ipaddress.ip_network(n) for n in sys.argv[1:3]]
for route in sys.argv[3:]:
    net = ipaddress.ip_network(route, strict=False)
    for mine in ours:
        if net.overlaps(mine):
            print(f"node: host route {route} overlaps {mine}", file=sys.stderr)
            sys.exit(1)
PY
}

network_guards() { # DNS_PORT
  # What must listen beyond loopback (the API server, the kubelets, CoreDNS: the pods reach
  # them at this machine's address) answers only this machine and the pods' bridges (each
  # further node's kubelet port is added by start_node).
  local api_port
  api_port=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  api_port=${api_port##*:}
  iptables -t filter -N "$INPUT_GUARD" 2> /dev/null || iptables -t filter -F "$INPUT_GUARD"
  iptables -t filter -A "$INPUT_GUARD" -i lo -j RETURN
  iptables -t filter -A "$INPUT_GUARD" -i "$BRIDGES" -j RETURN
  iptables -t filter -A "$INPUT_GUARD" -p tcp -m multiport --dports "$api_port,$1" -j DROP
  iptables -t filter -A "$INPUT_GUARD" -p udp --dport "$1" -j DROP
  iptables -t filter -C INPUT -j "$INPUT_GUARD" 2> /dev/null || iptables -t filter -I INPUT -j "$INPUT_GUARD"
  # Forwarding is on for the pods only: what neither comes from nor goes to their bridges is
  # not forwarded (this machine is no router for anyone else while the node runs). Between
  # two nodes' bridges it is: that is the nodes' network.
  iptables -t filter -N "$FORWARD_GUARD" 2> /dev/null || iptables -t filter -F "$FORWARD_GUARD"
  iptables -t filter -A "$FORWARD_GUARD" -i "$BRIDGES" -j RETURN
  iptables -t filter -A "$FORWARD_GUARD" -o "$BRIDGES" -j RETURN
  iptables -t filter -A "$FORWARD_GUARD" -j DROP
  iptables -t filter -C FORWARD -j "$FORWARD_GUARD" 2> /dev/null || iptables -t filter -I FORWARD -j "$FORWARD_GUARD"
  # Pods reach each other (on either node), this host and the Services; nothing else.
  iptables -t mangle -N "$GUARD" 2> /dev/null || iptables -t mangle -F "$GUARD"
  iptables -t mangle -A "$GUARD" -s "$PODS_CIDR" ! -o "$BRIDGES" -j DROP
  iptables -t mangle -C FORWARD -j "$GUARD" 2> /dev/null || iptables -t mangle -I FORWARD -j "$GUARD"
  # A Service IP that has no rules (yet) goes nowhere: the Service range is routed to the
  # pods' bridge (made here; the CNI plugin adopts it), where no one answers for it. (No
  # dummy device: this kernel has none.) kube-proxy's rules rewrite Service addresses
  # before this route is used.
  bridge_up
  ip route replace "$SERVICE_CIDR" dev "$BRIDGE"
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  # A lost node's pods are silenced here (`lose`), before anything else can answer for them.
  iptables -t filter -N "$LOST" 2> /dev/null || iptables -t filter -F "$LOST"
  local chain
  for chain in FORWARD INPUT OUTPUT; do
    iptables -t filter -C "$chain" -j "$LOST" 2> /dev/null || iptables -t filter -I "$chain" -j "$LOST"
  done
}

bridge_up() { # the selected node's bridge (the CNI plugin adopts it)
  ip link add "$BRIDGE" type bridge 2> /dev/null || ip link show "$BRIDGE" > /dev/null
  ip link set "$BRIDGE" up
}

write_node_configs() { # IP KUBELET_PORT KUBELET_HEALTH_PORT: the selected node's own
  local ip=$1 kubelet_port=$2 kubelet_health=$3
  mkdir -p "$node/containerd" "$node/cni/net.d" "$node/cni/ipam" "$node/kubelet" "$node/pod-logs"
  # containerd 2 (built by e2e/build.sh): its config's version 4, nothing imported from the
  # host's /etc/containerd, no NRI socket under /var/run.
  cat > "$node/containerd/config.toml" <<EOF
version = 4
root = "$node/containerd/root"
state = "$node/containerd/state"
imports = []
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile",
                    "io.containerd.snapshotter.v1.erofs", "io.containerd.nri.v1.nri"]
[plugins."io.containerd.server.v1.grpc"]
  address = "$node/containerd/containerd.sock"
[plugins."io.containerd.server.v1.ttrpc"]
  address = "$node/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$node/containerd/opt"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"
[plugins."io.containerd.cri.v1.runtime"]
  # Root here lacks CAP_SYS_RESOURCE: the -998 score containerd gives sandboxes is refused.
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      # The shim built beside containerd, not one of the host's.
      runtime_path = "$E2E_BIN/containerd-shim-runc-v2"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$node/cni/net.d"
EOF
  cat > "$node/cni/net.d/10-flux-e2e.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "flux-e2e", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$node/cni/ipam"}}]}
EOF
  cat > "$node/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host has cgroup v1 and no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
# Each node's pods under a cgroup of its own (the first: /kubepods, as a lone node's).
cgroupRoot: $cgroup_root
containerRuntimeEndpoint: unix://$node/containerd/containerd.sock
address: $ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_health
# No one in anonymously: the API server (logs, exec, port-forward) comes with its kubelet
# client certificate, signed by the cluster's CA (e2e/up.sh); anyone else needs a token the
# API server accepts and the rights it grants (TokenReview and SubjectAccessReview).
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $KWOK_WORKDIR/clusters/$E2E_CLUSTER/pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [$DNS_IP]
# No search domains or resolver of the host's in pods: only the cluster's names resolve.
resolvConf: ""
registerWithTaints:
- {key: e2e.flux-framework.org/real-node, value: "true", effect: NoSchedule}
podLogsDir: $node/pod-logs
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 110
EOF
}

write_shared_configs() { # IP DNS_PORT READY_PORT PROXY_HEALTH PROXY_METRICS: kube-proxy's, CoreDNS'
  local ip=$1 dns_port=$2 ready_port=$3 proxy_health=$4 proxy_metrics=$5
  cat > "$shared/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $E2E_KUBECONFIG}
hostnameOverride: $E2E_NODE_NAME
mode: iptables
clusterCIDR: $PODS_CIDR
healthzBindAddress: 127.0.0.1:$proxy_health
metricsBindAddress: 127.0.0.1:$proxy_metrics
# Leave the host's conntrack table size and route_localnet alone.
conntrack: {maxPerCore: 0}
iptables: {localhostNodePorts: false}
EOF
  cat > "$shared/Corefile" <<EOF
cluster.local:$dns_port in-addr.arpa:$dns_port ip6.arpa:$dns_port {
    bind $ip
    errors
    ready 127.0.0.1:$ready_port
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $E2E_KUBECONFIG
        pods insecure
        ttl 2
    }
}
.:$dns_port {
    bind $ip
    # Nothing is forwarded: outside names do not resolve here.
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
}

dns_objects() { # IP PORT: the selector-less kube-dns Service and its EndpointSlice to CoreDNS
  cat <<EOF
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $DNS_IP
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-host
  namespace: kube-system
  labels: {kubernetes.io/service-name: kube-dns, endpointslice.kubernetes.io/managed-by: e2e.flux-framework.org}
addressType: IPv4
endpoints:
- addresses: ["$1"]
ports:
- {name: dns, port: $2, protocol: UDP}
- {name: dns-tcp, port: $2, protocol: TCP}
EOF
}

node_ready() {
  [ "$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

cgroups_made() { # the selected node's cgroup root in every hierarchy (none for the first)
  [ "$cgroup_root" != / ] || return 0
  local h
  for h in /sys/fs/cgroup/*/; do
    [ -f "$h/cgroup.procs" ] || continue
    mkdir -p "$h${cgroup_root#/}"
    # A new cpuset has no CPUs or memory nodes until given its parent's.
    if [ -f "$h/cpuset.cpus" ]; then
      cat "$h/cpuset.cpus" > "$h${cgroup_root#/}/cpuset.cpus"
      cat "$h/cpuset.mems" > "$h${cgroup_root#/}/cpuset.mems"
    fi
  done
}

start() {
  for b in kubelet kube-proxy coredns containerd containerd-shim-runc-v2 ctr; do
    [ -x "$E2E_BIN/$b" ] || die "$E2E_BIN/$b is missing: run 'make e2e-build' (e2e/build.sh)"
  done
  for t in runc iptables; do
    command -v "$t" > /dev/null || die "$t is missing: run e2e/setup-host.sh"
  done
  [ -x /usr/lib/cni/bridge ] || die "the CNI plugins are missing: run e2e/setup-host.sh"
  [ -f "$E2E_CACHE/images/images.tar" ] || die "no images: run e2e/images.sh (make images)"
  # shellcheck source=/dev/null
  . "$E2E_CACHE/images/names.env"
  mkdir -p "$shared" "$pids" "$logs"
  local ip dns_port ready_port proxy_health proxy_metrics n
  ip=$(host_ip)
  [ -n "$ip" ] || die "node: no default route, so no address for the node (ip -4 route)"
  dns_port=$(free_port 10053) ready_port=$(free_port 18181)
  proxy_health=$(free_port 10256) proxy_metrics=$(free_port 10249)
  echo "$ip" > "$shared/ip"
  trap 'log "node: start FAILED in phase \"$_phase_name\"; logs in $logs; e2e/down.sh cleans up"' ERR
  phase "real node: network"
  routes_free
  record_host
  network_guards "$dns_port"
  write_shared_configs "$ip" "$dns_port" "$ready_port" "$proxy_health" "$proxy_metrics"
  for ((n = 1; n <= NODES; n++)); do
    start_node "$n"
  done
  select_node 1
  phase "real node: kube-proxy, CoreDNS"
  start_bg kube-proxy "$E2E_BIN/kube-proxy" --config "$shared/kube-proxy.yaml" --v 1
  start_bg coredns "$E2E_BIN/coredns" -conf "$shared/Corefile"
  dns_objects "$ip" "$dns_port" | kubectl apply -f - > /dev/null
  for ((n = 1; n <= NODES; n++)); do
    select_node "$n"
    wait_for "kubelet$suffix" 60 node_ready
  done
  wait_for kube-proxy 30 curl -fsS "http://127.0.0.1:$proxy_health/healthz"
  wait_for coredns 30 curl -fsS "http://127.0.0.1:$ready_port/ready"
  phase ""
  for ((n = 1; n <= NODES; n++)); do
    select_node "$n"
    log "node: $NODE_NAME is Ready at $ip (pods $POD_CIDR), Services $SERVICE_CIDR, DNS $DNS_IP"
  done
}

# start_node N: the Nth node's bridge, containerd (the images imported) and kubelet, its
# kubelet's ports guarded; `back` starts them again on the state they left.
start_node() {
  select_node "$1"
  local ip kubelet_port kubelet_health labels
  ip=$(cat "$shared/ip")
  kubelet_port=$(free_port $((10250 + 100 * ($1 - 1))))
  kubelet_health=$(free_port $((10248 + 100 * ($1 - 1))))
  phase "real node $NODE_NAME: containerd and images"
  mkdir -p "$node"
  bridge_up
  cgroups_made
  iptables -t filter -A "$INPUT_GUARD" -p tcp --dport "$kubelet_port" -j DROP
  write_node_configs "$ip" "$kubelet_port" "$kubelet_health"
  start_bg "containerd$suffix" "$E2E_BIN/containerd" --config "$node/containerd/config.toml"
  wait_for "containerd$suffix" 30 ctr version
  if [ ! -f "$node/images-imported" ]; then
    ctr images import "$E2E_CACHE/images/images.tar" > "$logs/images-import$suffix.log" 2>&1 ||
      { tail -n 20 "$logs/images-import$suffix.log" >&2; die "node: importing the images failed"; }
    : > "$node/images-imported"
    log "node: $(ctr images ls -q | grep -vc '^sha256:') image names imported"
  fi
  phase "real node $NODE_NAME: kubelet"
  labels=e2e.flux-framework.org/real-node=true
  [ "$1" = 1 ] || labels=$TWO_NODES_LABEL=true
  [ "$NODES" = 1 ] || [ "$1" != 1 ] || labels+=",$TWO_NODES_LABEL=true"
  start_bg "kubelet$suffix" "$E2E_BIN/kubelet" --config "$node/kubelet/config.yaml" \
    --kubeconfig "$E2E_KUBECONFIG" --root-dir "$node/kubelet/root" --cert-dir "$node/kubelet/pki" \
    --hostname-override "$NODE_NAME" --node-ip "$ip" --node-labels "$labels" --v 1
}

# Every pod sandbox and container of the node's containerd, stopped and removed.
remove_containers() {
  local id
  [ -S "$node/containerd/containerd.sock" ] || return 0
  for id in $(ctr tasks ls -q 2> /dev/null); do
    ctr tasks kill -s SIGKILL "$id" > /dev/null 2>&1 || true
  done
  sleep 0.5
  for id in $(ctr tasks ls -q 2> /dev/null); do
    ctr tasks delete -f "$id" > /dev/null 2>&1 || true
  done
  for id in $(ctr containers ls -q 2> /dev/null); do
    ctr containers delete "$id" > /dev/null 2>&1 || true
  done
}

# Mounts under DIR, deepest first.
unmount_under() {
  local m
  awk -v d="$1" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
    umount "$m" 2> /dev/null || umount -l "$m" 2> /dev/null || log "node: cannot unmount $m"
  done
}

drop_chain() { # TABLE CHAIN, if it exists
  if iptables -t "$1" -F "$2" 2> /dev/null; then iptables -t "$1" -X "$2" 2> /dev/null || true; fi
}

# kill_node: the selected node's kubelet, containerd, shims and its pods' processes, at once
# (SIGKILL), as a power loss; its state directories stay.
kill_node() {
  local name pid h
  for name in "kubelet$suffix" "containerd$suffix"; do
    if [ -s "$pids/$name.pid" ]; then kill -KILL "$(cat "$pids/$name.pid")" 2> /dev/null || true; fi
  done
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $node/containerd/containerd.sock" || true); do
    kill -KILL "$pid" 2> /dev/null || true
  done
  # Every process in the node's pod cgroups (the memory hierarchy holds them all).
  h=/sys/fs/cgroup/memory${cgroup_root%/}/kubepods
  if [ -d "$h" ]; then
    find "$h" -name cgroup.procs -exec cat {} + 2> /dev/null | while read -r pid; do
      kill -KILL "$pid" 2> /dev/null || true
    done
  fi
}

lose() { # N
  [ "$NODES" -ge "$1" ] 2> /dev/null || die "usage: $0 lose N (1 to $NODES)"
  select_node "$1"
  [ -d "$node" ] || die "node: $NODE_NAME is not running"
  iptables -t filter -A "$LOST" -s "$POD_CIDR" -j DROP
  iptables -t filter -A "$LOST" -d "$POD_CIDR" -j DROP
  kill_node
  log "node: $NODE_NAME lost (its kubelet, containerd and pods killed; $POD_CIDR silenced)"
}

back() { # N
  [ "$NODES" -ge "$1" ] 2> /dev/null || die "usage: $0 back N (1 to $NODES)"
  select_node "$1"
  [ -f "$node/images-imported" ] || die "node: $NODE_NAME was never started"
  while iptables -t filter -D "$LOST" -s "$POD_CIDR" -j DROP 2> /dev/null; do :; done
  while iptables -t filter -D "$LOST" -d "$POD_CIDR" -j DROP 2> /dev/null; do :; done
  # shellcheck source=/dev/null
  . "$E2E_CACHE/images/names.env"
  start_node "$1"
  wait_for "kubelet$suffix" 60 node_ready
  phase ""
  log "node: $NODE_NAME is back"
}

# stop_node: the selected node's kubelet, containers, containerd, shims, pod network
# namespaces, bridge, mounts and cgroups.
stop_node() {
  [ -d "$node" ] || return 0
  local pid ns d
  # The kubelet first, so it restarts nothing; then every container, then containerd.
  if [ -s "$pids/kubelet$suffix.pid" ]; then
    stop_pid "kubelet$suffix" "$(cat "$pids/kubelet$suffix.pid")" 10
    rm -f "$pids/kubelet$suffix.pid"
  fi
  if [ -s "$pids/containerd$suffix.pid" ] && pid_alive "$pids/containerd$suffix.pid"; then
    remove_containers
  else
    kill_node # a lost node: nothing answers on its socket; its processes go as they went
  fi
  if [ -s "$pids/containerd$suffix.pid" ]; then
    stop_pid "containerd$suffix" "$(cat "$pids/containerd$suffix.pid")" 10
    rm -f "$pids/containerd$suffix.pid"
  fi
  # Shims of its containerd that outlived it (they name its socket on their command line).
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $node/containerd/containerd.sock" || true); do
    stop_pid containerd-shim "$pid" 5
  done
  # Network namespaces of its pods (the CNI names them cni-<uuid>; its hold its bridge's veths).
  for ns in $(ip netns list 2> /dev/null | awk '/^cni-/ {print $1}'); do
    if ip netns exec "$ns" ip -4 -o addr 2> /dev/null | grep -q " ${POD_CIDR%.*}\."; then
      ip netns delete "$ns" 2> /dev/null || true
    fi
  done
  ip link delete "$BRIDGE" 2> /dev/null || true
  # Volumes and overlay roots its kubelet and containerd mounted, then its cgroups.
  unmount_under "$node/"
  for d in /sys/fs/cgroup/*"${cgroup_root%/}"/kubepods; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2> /dev/null
  done
  if [ "$cgroup_root" != / ]; then
    for d in /sys/fs/cgroup/*"$cgroup_root"; do
      [ -d "$d" ] && rmdir "$d" 2> /dev/null
    done
  fi
  [ "$node" = "$shared" ] || rm -rf "$node"
}

stop() {
  [ -d "$shared" ] || return 0
  local name n
  for name in kube-proxy coredns; do
    if [ -s "$pids/$name.pid" ]; then stop_pid "$name" "$(cat "$pids/$name.pid")" 10; rm -f "$pids/$name.pid"; fi
  done
  # Every node that was started, the last first (E2E_REAL_NODES may differ from start's).
  for n in 2 1; do
    select_node "$n"
    stop_node
  done
  select_node 1
  # iptables: kube-proxy's rules (its own cleanup), the kubelets' chains, the guards.
  if [ -x "$E2E_BIN/kube-proxy" ] && [ -f "$shared/kube-proxy.yaml" ]; then
    "$E2E_BIN/kube-proxy" --cleanup --config "$shared/kube-proxy.yaml" > "$logs/kube-proxy-cleanup.log" 2>&1 || true
  fi
  local table chain
  for chain in INPUT OUTPUT; do
    while iptables -t filter -D "$chain" -j KUBE-FIREWALL 2> /dev/null; do :; done
  done
  while iptables -t mangle -D FORWARD -j "$GUARD" 2> /dev/null; do :; done
  while iptables -t filter -D FORWARD -j "$FORWARD_GUARD" 2> /dev/null; do :; done
  while iptables -t filter -D INPUT -j "$INPUT_GUARD" 2> /dev/null; do :; done
  for chain in FORWARD INPUT OUTPUT; do
    while iptables -t filter -D "$chain" -j "$LOST" 2> /dev/null; do :; done
  done
  for table in filter nat mangle; do
    for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-PROXY-CANARY KUBE-IPTABLES-HINT "$GUARD" "$FORWARD_GUARD" "$INPUT_GUARD" "$LOST"; do
      drop_chain "$table" "$chain"
    done
  done
  # Kernel settings, as they were.
  if [ -f "$shared/sysctls" ]; then
    while IFS='=' read -r name value; do
      [ "$value" = absent ] || sysctl -qw "$name=$value" 2> /dev/null || log "node: cannot restore $name=$value"
    done < "$shared/sysctls"
  fi
  # What the parts wrote to their fixed paths: the kubelets' links to container logs, the CNI
  # plugins' results of our network, and every such directory that did not exist before.
  find /var/log/containers -maxdepth 1 -type l -lname "$E2E_STATE/node*" -delete 2> /dev/null || true
  rm -f /var/lib/cni/results/flux-e2e-* 2> /dev/null || true
  if [ -f "$shared/made-dirs" ]; then
    local d
    while read -r d; do
      case "$d" in /var/log/containers | /var/lib/kubelet | /var/lib/cni | /run/containerd) rm -rf "$d" ;; esac
    done < "$shared/made-dirs"
  fi
  rm -rf "$shared"
  log "node: stopped and cleaned up"
}

namespace() { # NS [two]: pods of NS select the real node (either node) and tolerate its taint
  local selector=e2e.flux-framework.org/real-node=true
  [ "${2:-}" != two ] || selector=$TWO_NODES_LABEL=true
  KUBECONFIG=${KUBECONFIG:-$E2E_KUBECONFIG} command "$E2E_BIN/kubectl" annotate namespace "$1" --overwrite \
    "scheduler.alpha.kubernetes.io/node-selector=$selector" \
    'scheduler.alpha.kubernetes.io/defaultTolerations=[{"key":"e2e.flux-framework.org/real-node","operator":"Exists","effect":"NoSchedule"}]' \
    > /dev/null
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  namespace) [ -n "${2:-}" ] || die "usage: $0 namespace NS [two]"; namespace "$2" "${3:-}" ;;
  lose) lose "${2:-}" ;;
  back) back "${2:-}" ;;
  *) die "usage: $0 start|stop|namespace NS [two]|lose N|back N" ;;
esac
