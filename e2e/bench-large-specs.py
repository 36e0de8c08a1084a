#!/usr/bin/env python3
"""The operator's memory with many MiniClusters at the spec's bounds (issue 31).

The operator keeps every MiniCluster in its watch cache (and the ConfigMaps it renders from
them, which hold the same programs). With the CRD's bounds a spec's programs are at most
262144 characters (src/api/bounds.rs). This creates, in one namespace of the running test
cluster (`make up`), suspended MiniClusters whose programs fill that bound, and reads the
operator's resident memory (VmRSS, VmHWM from /proc) at each step; the operator is the
release binary run as a host process, as the chart runs it but watching that namespace.
It runs ROUNDS rounds (a fresh operator and namespace each) and prints each round's figures
and the min/median/max per step, against the chart's memory limit (256 MiB).

    e2e/bench-large-specs.py [STEPS] [ROUNDS]     (default 100,200,300 and 3)

With BENCH_SPEC=whole each spec also fills its environment until its JobSet is near the
bound on the spec as a whole (1 MiB, src/render/mod.rs): the largest MiniCluster the
operator renders.
Needs KUBECONFIG of the test cluster and the release build (make operator-build).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

CACHE = os.path.expanduser("~/.cache/flux-operator-rs")
KUBECTL = os.path.join(CACHE, "bin/kubectl")
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(CACHE, "target"))
OPERATOR = os.path.join(TARGET, "release/flux-operator")
LIMIT_MIB = 256
PROGRAM = 65536  # one hook at its bound; four fill the spec's 262144
WHOLE = os.environ.get("BENCH_SPEC") == "whole"
# 4096-character values (each field's bound); 110 of them, in both pod templates, bring
# the JobSet to about 0.9 MiB.
ENVIRONMENT = {f"V{i}": "x" * 4096 for i in range(110)} if WHOLE else {}


def kubectl(*args, stdin=None):
    return subprocess.run([KUBECTL, *args], input=stdin, text=True, check=True,
                          capture_output=True).stdout


def minicluster(name):
    hook = "#" + "x" * (PROGRAM - 1)
    return {
        "apiVersion": "flux-framework.org/v1alpha2",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {
            "size": 2,
            "suspend": True,
            "containers": [{
                "image": "ubuntu:noble",
                "command": "true",
                "commands": {"init": hook, "pre": hook, "post": hook, "workerPre": hook[:-16]},
                "environment": ENVIRONMENT,
            }],
        },
    }


def memory_mib(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def wait_ready(port, proc):
    for _ in range(300):
        if proc.poll() is not None:
            sys.exit(f"the operator exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("the operator did not become ready")


def created_jobsets(ns):
    out = kubectl("get", "jobsets.jobset.x-k8s.io", "-n", ns, "-o", "name")
    return len(out.split())


def one_round(round_no, steps):
    ns = f"bench-large-{round_no}-{int(time.time())}"
    kubectl("create", "namespace", ns)
    port = 18400 + round_no
    log = open(os.path.join(tempfile.gettempdir(), f"{ns}-operator.log"), "w")
    proc = subprocess.Popen(
        [OPERATOR, "run", "--namespace", ns, "--leader-election=false", "--log-format", "text",
         "--metrics-addr", f"127.0.0.1:{port}", "--metrics-insecure-loopback",
         "--cluster-domain", "cluster.local"],
        stdout=log, stderr=subprocess.STDOUT)
    figures = {}
    try:
        wait_ready(port, proc)
        time.sleep(2)
        figures[0] = memory_mib(proc.pid)
        made = 0
        for step in steps:
            batch = {"apiVersion": "v1", "kind": "List",
                     "items": [minicluster(f"large-{i}") for i in range(made, step)]}
            for start in range(0, len(batch["items"]), 10):
                part = dict(batch, items=batch["items"][start:start + 10])
                kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=json.dumps(part))
            made = step
            deadline = time.time() + 600
            while created_jobsets(ns) < made and time.time() < deadline:
                time.sleep(2)
            time.sleep(5)
            figures[step] = memory_mib(proc.pid)
            rss, hwm = figures[step]
            print(f"round {round_no}: {step} MiniClusters: RSS {rss:.0f} MiB, peak {hwm:.0f} MiB",
                  flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        kubectl("delete", "namespace", ns, "--wait=false")
    return figures


def main():
    steps = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "100,200,300").split(",")]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    crds = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../crds")
    kubectl("apply", "--server-side", "--force-conflicts", "-k", crds)
    kubectl("wait", "--for=condition=Established", "crd/miniclusters.flux-framework.org")
    load = os.getloadavg()[0]
    results = [one_round(r, steps) for r in range(1, rounds + 1)]
    what = "262144 characters of programs"
    if WHOLE:
        what += f" and {len(ENVIRONMENT)} environment values of 4096"
    print(f"\nMiniClusters with {what} each (suspended), one namespace;"
          f" {rounds} rounds; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print("| MiniClusters | RSS min / median / max, MiB | peak RSS min / median / max, MiB | chart limit |")
    print("|--:|--:|--:|--:|")
    for step in [0, *steps]:
        rss = [r[step][0] for r in results]
        hwm = [r[step][1] for r in results]
        fmt = lambda xs: f"{min(xs):.0f} / {statistics.median(xs):.0f} / {max(xs):.0f}"
        print(f"| {step} | {fmt(rss)} | {fmt(hwm)} | {LIMIT_MIB} MiB |")


if __name__ == "__main__":
    main()
