#!/usr/bin/env bash
# Remove the network namespaces the real-Flux tier's pod emulator (tests/flux/kubelet.rs)
# left behind when its test process died before tearing them down: fo<pid>-<n>-* whose
# <pid> no longer runs. Namespaces of a run still going are kept.
set -euo pipefail
ip netns list | awk '{print $1}' | { grep -E '^fo[0-9]+-[0-9]+-' || true; } | while read -r ns; do
  pid=${ns#fo}; pid=${pid%%-*}
  if [ ! -d "/proc/$pid" ]; then
    for p in $(ip netns pids "$ns"); do kill -9 "$p" 2> /dev/null || true; done
    ip netns del "$ns" || true
  fi
done
