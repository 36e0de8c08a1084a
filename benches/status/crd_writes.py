#!/usr/bin/env python3
"""The apiserver's CPU per MiniCluster create and status write, by CRD (`make bench-writes`).

A MiniCluster costs the API server two writes of its own: the user's create and the
operator's status apply. Both decode, default, validate and merge the whole stored object,
so what the CRD writes into it (its defaults) and checks on it (its schema, its CEL rules)
is what they cost. This compares CRDs side by side on the e2e control plane (KUBECONFIG; no
operator): each CRD file given is installed under a group of its own
(`c<i>.bench.flux-framework.org`, nothing else changed), and per round each CRD takes N
creates of the benchmark's MiniCluster of size 2 and then N status applies of the status the
operator writes for it running (benches/status/status_writes.py), the kube-apiserver's CPU
(from /proc) divided by N for each, then a delete of all. Rounds alternate the CRDs' order;
the last lines give min / median / max and each round's ratio to the first CRD.
N (default 800) and ROUNDS (default 4) from the environment.

    crd_writes.py BASE.yaml NEW.yaml
"""

import copy
import json
import os
import subprocess
import sys
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import status_writes as sw  # noqa: E402

N = int(os.environ.get("N", "800"))
ROUNDS = int(os.environ.get("ROUNDS", "4"))
NS = "bench-writes"


def regrouped(path, group):
    """The CRD in `path`, served under `group` instead."""
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    crd = next(d for d in docs if d.get("kind") == "CustomResourceDefinition")
    crd = copy.deepcopy(crd)
    crd["metadata"] = {"name": f"{crd['spec']['names']['plural']}.{group}"}
    crd["spec"]["group"] = group
    return crd


def install(crds):
    text = yaml.safe_dump_all(crds)
    subprocess.run(["kubectl", "apply", "--server-side", "-f", "-"], input=text, text=True,
                   check=True, stdout=subprocess.DEVNULL)
    names = [f"crd/{c['metadata']['name']}" for c in crds]
    subprocess.run(["kubectl", "wait", "--for", "condition=established", *names], check=True,
                   stdout=subprocess.DEVNULL)


def minicluster(group, name):
    return {"apiVersion": f"{group}/v1alpha2", "kind": "MiniCluster", "metadata": {"name": name},
            "spec": {"size": 2,
                     "containers": [{"image": "rockylinux:9", "command": "sleep infinity"}]}}


def status_apply(group, name):
    return {"apiVersion": f"{group}/v1alpha2", "kind": "MiniCluster", "metadata": {"name": name},
            "status": sw.status(1, False)}


def one_round(api, pid, group):
    """ms of apiserver CPU per create and per status apply, and the stored object's bytes."""
    base = f"/apis/{group}/v1alpha2/namespaces/{NS}/miniclusters"
    started = sw.cpu_seconds(pid)
    for i in range(N):
        api.send("POST", base, minicluster(group, f"m{i}"))
    created = sw.cpu_seconds(pid)
    for i in range(N):
        api.send("PATCH", f"{base}/m{i}/status?fieldManager=flux-operator&force=true",
                 status_apply(group, f"m{i}"), "application/apply-patch+yaml")
    written = sw.cpu_seconds(pid)
    stored = len(json.dumps(api.send("GET", f"{base}/m0")))
    api.send("DELETE", base, ok=(200,))
    while api.send("GET", base)["items"]:
        time.sleep(0.5)
    return (created - started) / N * 1000, (written - created) / N * 1000, stored


def main():
    files = sys.argv[1:]
    if len(files) < 2:
        sys.exit(__doc__)
    crds = [regrouped(f, f"c{i}.bench.flux-framework.org") for i, f in enumerate(files)]
    groups = [c["spec"]["group"] for c in crds]
    install(crds)
    pid = sw.apiserver_pid()
    port = sw.free_port()
    proxy = subprocess.Popen(["kubectl", "proxy", f"--port={port}"], stdout=subprocess.DEVNULL)
    results = {g: [] for g in groups}
    try:
        time.sleep(1.5)
        api = sw.Api(port)
        api.send("POST", "/api/v1/namespaces",
                 {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                 ok=(201, 409))
        for r in range(ROUNDS):
            for g in (groups if r % 2 == 0 else list(reversed(groups))):
                create, status, stored = one_round(api, pid, g)
                results[g].append((create, status, stored))
                print(f"round {r + 1}: {files[groups.index(g)]}: create {create:.2f} ms,"
                      f" status apply {status:.2f} ms, stored {stored} B", flush=True)
                time.sleep(2)
        api.send("DELETE", f"/api/v1/namespaces/{NS}", ok=(200, 202))
    finally:
        proxy.terminate()
        subprocess.run(["kubectl", "delete", "--wait=false",
                        *[f"crd/{c['metadata']['name']}" for c in crds]],
                       stdout=subprocess.DEVNULL, check=False)
    print(f"\nkube-apiserver CPU per write, {N} of each per round, min / median / max of"
          f" {ROUNDS} rounds, each round's ratio to {files[0]}; load average"
          f" {os.getloadavg()[0]:.1f}\n")
    print("| CRD | create, ms | status apply, ms | both, per round / first | stored, bytes |")
    print("|---|--:|--:|--:|--:|")
    first = results[groups[0]]
    for f, g in zip(files, groups):
        rows = results[g]
        ratios = ", ".join(f"{(c + s) / (c0 + s0):.2f}" for (c, s, _), (c0, s0, _) in zip(rows, first))
        print(f"| {f} | {sw.spread([c for c, _, _ in rows])} | {sw.spread([s for _, s, _ in rows])}"
              f" | {ratios} | {rows[-1][2]} |")


if __name__ == "__main__":
    main()
