#!/usr/bin/env bash
# host-state.sh FILE: write what the real node may change on this machine, normalized, to
# FILE: kernel settings (vm.*, kernel.keys.*, kernel.panic*, IPv4 forwarding and the
# all/default interface settings, bridge netfilter, conntrack), routes and rules, network
# links, the top-level cgroups, and the iptables filter, nat and mangle tables (no counters).
# host-state.sh --compare BEFORE AFTER: fails, printing the difference, unless they match.
# run-tests.sh takes one before `up` and one after `down` of the real-node tier.
set -euo pipefail

snapshot() {
  {
    echo "## sysctl"
    sysctl -a 2> /dev/null | grep -E '^(vm\.|kernel\.keys\.|kernel\.panic|net\.ipv4\.ip_forward |net\.ipv4\.conf\.(all|default)\.|net\.bridge\.|net\.netfilter\.nf_conntrack_(max|tcp_timeout))' |
      grep -Ev '^vm\.(stat_refresh|drop_caches|compact_memory) ' || true
    echo "## ip route"
    ip -4 route show table all 2> /dev/null | grep -v ' table local ' || true
    echo "## ip rule"
    ip -4 rule show
    echo "## links"
    ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
    # The nodes' cgroups (kubepods, and the second node's root) at the top of each hierarchy.
    echo "## cgroups"
    find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -type d 2> /dev/null | sort
    for table in filter nat mangle; do
      echo "## iptables $table"
      iptables-save -t "$table" 2> /dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]/[0:0]/' || true
    done
  }
}

case "${1:-}" in
--compare)
  [ $# -eq 3 ] || { echo "usage: $0 --compare BEFORE AFTER" >&2; exit 2; }
  # Settings the kernel added meanwhile (a module the node loaded) are not a change of
  # ours: only the settings BEFORE has are compared.
  python3 - "$2" "$3" <<'PY'
import sys
def sections(path):
    out, name = {}, None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("## "):
            name = line[3:]
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out
before, after = sections(sys.argv[1]), sections(sys.argv[2])
changed = []
for name, lines in before.items():
    now = after.get(name, [])
    if name == "sysctl":
        was = dict(l.split(" = ", 1) for l in lines if " = " in l)
        got = dict(l.split(" = ", 1) for l in now if " = " in l)
        for key, value in was.items():
            if got.get(key) != value:
                changed.append(f"sysctl {key}: {value!r} before, {got.get(key)!r} after")
    elif sorted(lines) != sorted(now):
        gone = sorted(set(lines) - set(now))
        new = sorted(set(now) - set(lines))
        changed.append(f"{name}: gone {gone}, new {new}")
if changed:
    print("the host is not as it was before the real node started:", file=sys.stderr)
    for c in changed:
        print("  " + c, file=sys.stderr)
    sys.exit(1)
print("host-state: the host is as it was before the real node started")
PY
  ;;
"") echo "usage: $0 FILE | --compare BEFORE AFTER" >&2; exit 2 ;;
*) snapshot > "$1" ;;
esac
