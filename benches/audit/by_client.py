#!/usr/bin/env python3
"""The API server's requests by client, verb and resource, per namespace, from its audit log.

The apiserver's own metrics count requests by verb and resource only; its audit log (a cluster
started with E2E_AUDIT=1, e2e/up.sh and benches/audit/policy.yaml) names the client of each
one (its user agent). Each benchmark run has a namespace of its own, so a namespace's rows
are one run's requests, whoever made them:

    benches/audit/by_client.py AUDIT_LOG [--per N] [--min COUNT] [--teardown] [NAMESPACE ...]

With no namespace, every namespace in the log; with two, a third table of the second minus
the first (the operator's run against the bare JobSet's, say). `--per N` divides by N (the
run's MiniClusters). Requests that name no namespace (cluster-scoped, or a list across
namespaces) are left out, except a namespace object's own, which counts in that namespace.
A namespace's requests end with its delete (the run's teardown after it), unless --teardown.
"""

import argparse
import collections
import json
import re
import sys


def client(agent):
    """A short name of a user agent: its product, and for Kubernetes' own components the
    controller the request came from where the agent names it
    (`kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc/job-controller`)."""
    if not agent:
        return "?"
    product = agent.split("/", 1)[0]
    tail = re.search(r"kubernetes/[0-9a-f]+/(.+)$", agent)
    if tail:
        product += ":" + tail.group(1).rsplit(":", 1)[-1]
    return product


def key(event):
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "?")
    if ref.get("apiGroup"):
        resource += "." + ref["apiGroup"]
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    return client(event.get("userAgent")), event.get("verb", "?"), resource


def namespace_of(event):
    ref = event.get("objectRef") or {}
    if ref.get("namespace"):
        return ref["namespace"]
    if ref.get("resource") == "namespaces" and ref.get("name"):
        return ref["name"]
    return None


def read(path, teardown):
    """Requests by namespace and key; without `teardown`, those of a namespace end with the
    delete of the namespace (the benchmark deletes a run's namespace after its idle window:
    what the garbage collector does then is the teardown's, not the run's)."""
    counts = collections.defaultdict(collections.Counter)
    deleted = set()
    with open(path, encoding="utf-8") as log:
        for line in log:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut off as the log was read
            if event.get("stage") != "ResponseComplete":
                continue
            ns = namespace_of(event)
            if not ns or (ns in deleted and not teardown):
                continue
            counts[ns][key(event)] += 1
            ref = event.get("objectRef") or {}
            if event.get("verb") == "delete" and ref.get("resource") == "namespaces":
                deleted.add(ns)
    return counts


def table(title, rows, per, least):
    print(f"\n{title}")
    print(f"| client | verb | resource | {'per MiniCluster' if per != 1 else 'requests'} |")
    print("|---|---|---|--:|")
    total = 0
    for (who, verb, resource), n in sorted(rows.items(), key=lambda kv: (-abs(kv[1]), kv[0])):
        total += n
        if abs(n) >= least:
            print(f"| {who} | {verb} | {resource} | {n / per:.2f} |")
    print(f"| all | | | {total / per:.2f} |")


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("log")
    args.add_argument("namespaces", nargs="*")
    args.add_argument("--per", type=float, default=1.0)
    args.add_argument("--min", type=int, default=1, help="leave out rows below this count")
    args.add_argument("--teardown", action="store_true", help="count requests after the namespace's delete too")
    opts = args.parse_intermixed_args()
    counts = read(opts.log, opts.teardown)
    names = opts.namespaces or sorted(counts)
    for ns in names:
        if ns not in counts:
            sys.exit(f"no request in namespace {ns} in {opts.log}")
        table(f"namespace {ns}", counts[ns], opts.per, opts.min)
    if len(names) == 2:
        first, second = counts[names[0]], counts[names[1]]
        diff = {k: second[k] - first[k] for k in set(first) | set(second)}
        table(f"{names[1]} minus {names[0]}", {k: v for k, v in diff.items() if v}, opts.per, opts.min)


if __name__ == "__main__":
    main()
