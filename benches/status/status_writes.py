#!/usr/bin/env python3
"""The apiserver's CPU per MiniCluster status write, by how it is written (`make bench-status`).

Runs against the e2e control plane (KUBECONFIG; the MiniCluster CRD installed, no operator):
one MiniCluster per variant, then per round each variant writes its status N times in a row
(readyBrokers and Ready's message alternate, so every write changes the object), and the
kube-apiserver's CPU (utime + stime from /proc) over those writes is divided by N. Rounds
alternate the variants' order. Variants: server-side apply of the status the operator writes
for a running cluster of size 2 (five conditions, four of them False: nothing is wrong),
the same with only `Ready`, and a JSON merge patch of the five. The figures tell what a
change to the status's shape or to how it is written would save before it is made.
N (default 400) and ROUNDS (default 3) from the environment.
"""

import http.client
import json
import os
import socket
import subprocess
import sys
import time

N = int(os.environ.get("N", "400"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
NS = "bench-status"
GROUP = "/apis/flux-framework.org/v1alpha2"
BASE = f"{GROUP}/namespaces/{NS}/miniclusters"
AT = "2026-01-01T00:00:00Z"


def apiserver_pid():
    out = subprocess.run(["pgrep", "-f", "kube-apiserver"], capture_output=True, text=True)
    pids = out.stdout.split()
    if len(pids) != 1:
        sys.exit(f"want one kube-apiserver process on this machine, found {pids}")
    return pids[0]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    """Requests through `kubectl proxy` over one kept-alive connection."""

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def send(self, method, path, body=None, ctype="application/json", ok=(200, 201)):
        data = None if body is None else json.dumps(body)
        self.conn.request(method, path, body=data, headers={"Content-Type": ctype})
        response = self.conn.getresponse()
        payload = response.read()
        if response.status not in ok:
            sys.exit(f"{method} {path}: {response.status} {payload[:400]!r}")
        if response.status == 404 or not payload:
            return None
        return json.loads(payload)


def condition(type_, status, reason, message):
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": AT, "observedGeneration": 1}


def status(i, only_ready):
    ready = 1 + i % 2
    conditions = [condition("Ready", "True" if ready == 2 else "False",
                            "BrokersReady" if ready == 2 else "BrokersNotReady",
                            f"{ready} of 2 broker pods ready")]
    if not only_ready:
        conditions += [
            condition("Suspended", "False", "JobSetRunning", "the JobSet may run pods"),
            condition("Resizing", "False", "Stable", "2 broker pods for size 2"),
            condition("Unsupported", "False", "AllSupported", ""),
            condition("InvalidSpec", "False", "Valid", ""),
        ]
    return {"observedGeneration": 1, "phase": "Running", "size": 2,
            "selector": "flux-framework.org/minicluster=m", "maximumSize": 2,
            "readyBrokers": ready, "jobSet": "m", "curveSecret": "m-curve",
            "leadBroker": "m-lead-0-0", "startTime": AT, "leadReadyTime": AT, "readyTime": AT,
            "instance": {"leadPod": "m-0", "leadContainerRestarts": 0, "restarts": 0},
            "conditions": conditions}


def apply(api, name, i, only_ready):
    body = {"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
            "metadata": {"name": name}, "status": status(i, only_ready)}
    api.send("PATCH", f"{BASE}/{name}/status?fieldManager=flux-operator&force=true", body,
             "application/apply-patch+yaml")


def merge(api, name, i):
    api.send("PATCH", f"{BASE}/{name}/status?fieldManager=flux-operator",
             {"status": status(i, False)}, "application/merge-patch+json")


VARIANTS = {
    "apply, five conditions (as now)": lambda api, name, i: apply(api, name, i, False),
    "apply, Ready only": lambda api, name, i: apply(api, name, i, True),
    "merge patch, five conditions": merge,
}


def create(api, name):
    api.send("DELETE", f"{BASE}/{name}", ok=(200, 202, 404))
    while api.send("GET", f"{BASE}/{name}", ok=(200, 404)) is not None:
        time.sleep(0.2)
    api.send("POST", BASE, {
        "apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {"size": 2, "containers": [{"image": "rockylinux:9", "command": "sleep infinity"}]},
    })


def spread(xs):
    xs = sorted(xs)
    return f"{xs[0]:.2f} / {xs[len(xs) // 2]:.2f} / {xs[-1]:.2f}"


def main():
    pid = apiserver_pid()
    port = free_port()
    proxy = subprocess.Popen(["kubectl", "proxy", f"--port={port}"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        api = Api(port)
        api.send("POST", "/api/v1/namespaces",
                 {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                 ok=(201, 409))
        names = {v: f"m{k}" for k, v in enumerate(VARIANTS)}
        for name in names.values():
            create(api, name)
        per_write = {v: [] for v in VARIANTS}
        for r in range(ROUNDS):
            order = list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))
            for v in order:
                VARIANTS[v](api, names[v], 0)
                time.sleep(2)
                before, started = cpu_seconds(pid), time.monotonic()
                for i in range(1, N + 1):
                    VARIANTS[v](api, names[v], i)
                ms = (cpu_seconds(pid) - before) / N * 1000
                wall = (time.monotonic() - started) / N * 1000
                per_write[v].append(ms)
                print(f"round {r + 1}: {v:34s} {ms:6.2f} ms apiserver CPU per write"
                      f" ({wall:.2f} ms wall)", flush=True)
        sizes = {v: len(json.dumps(api.send("GET", f"{BASE}/{n}"))) for v, n in names.items()}
        api.send("DELETE", f"/api/v1/namespaces/{NS}", ok=(200, 202))
    finally:
        proxy.terminate()
    print(f"\nkube-apiserver CPU per status write, {N} writes in a row, min / median / max of"
          f" {ROUNDS} rounds; load average {os.getloadavg()[0]:.1f}\n")
    print("| written as | ms per write | the stored object, bytes of JSON |")
    print("|---|--:|--:|")
    for v, xs in per_write.items():
        print(f"| {v} | {spread(xs)} | {sizes[v]} |")


if __name__ == "__main__":
    main()
