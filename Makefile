# Build, test and run the offline Kubernetes test control plane (see e2e/README.md).
#
#   make setup        install missing Debian packages (e2e/setup-host.sh)
#   make e2e-build    build kube-apiserver & co., etcd, kwok, JobSet, Kueue (cached)
#   make images       the real node's images: operator, flux view, application, pause (cached)
#   make up / down    start / stop the test cluster with its real node; `up` prints
#                     `export KUBECONFIG=...`
#   make demo         the local demo: the real node, the operator installed by Helm, hello-world
#                     run by real Flux to Succeeded, its output, Events and metrics
#   make test         unit tests, the real-Flux tier, the e2e tests against a fresh cluster,
#                     the real-node tier and the demo
#   make test-kueue-oldest  the Kueue e2e tests on the oldest Kueue the README claims
#   make test-two-nodes  a cluster of two real nodes: a node lost under running MiniClusters,
#                     and MPI ranks across the nodes (~10 min; not yet in make test)
#   make test-flux    the real-Flux tier: real brokers in emulated pods (root; builds Flux)
#   make flux-build   build flux-core and Fluxion from ../shared/vendor (cached)
#   make bench        side by side on a cluster of its own: this operator, the bare JobSet
#                     it renders, the Go operator from ../shared/vendor (figures, ~15 min)
#   make bench-status the apiserver's CPU per MiniCluster status write, by the status's shape and
#                     by how it is written (apply, merge patch), on the e2e control plane
#   make bench-writes the apiserver's CPU per MiniCluster create and status write, the CRD as
#                     committed against the CRD at BASE (a git revision), on the e2e control plane
#   make bench-cel    the MiniCluster CRD's CEL rules as the apiserver runs them, per status
#                     write and per create, as they are and changed (Go, ~1 min)
#   make bench-node   this operator (the view copied, and mounted as an image volume) and the
#                     Go operator on the real node, real Flux: from kubectl apply to the first
#                     job done, and teardown (~20 min)
#   make bench-hpc    LAMMPS (LJ, ReaxFF HNS), a ping-pong and OSU in this operator's
#                     MiniCluster, the Go operator's, an MPIJob and as plain processes under
#                     mpirun (~60 min; BENCH_HPC_PROGRAMS=lj or hns-osu: one part)
#   make bench-autoscaling  an HPA on a MiniCluster's queue against scaling it by hand, on
#                     the real node: grow for waiting jobs, shrink once the queue is empty (~15 min)
#   make bench-large-specs  the operator's memory with 100-300 MiniClusters at the spec's
#                     bounds, 3 rounds (~15 min); BENCH_SPEC=whole: near the whole-spec bound
#   make lint         cargo fmt --check, clippy and the docs with warnings denied, shellcheck
#                     (CI runs it)
#   make crds         regenerate crds/ (and the Helm chart's copy) from the Rust types
#   make vendor-crds  refresh vendor-crds/ from the pinned JobSet and Kueue modules

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

# Caches live outside the clone, so a fresh clone on the same machine (CI) reuses them.
cache ?= $(or $(FLUX_OPERATOR_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/flux-operator-rs)
export CARGO_TARGET_DIR ?= $(cache)/target
export E2E_STATE ?= $(cache)/cluster
E2E_KUBECONFIG := $(E2E_STATE)/kubeconfig

# Two cores: the e2e tests share one cluster, each in its own namespace.
E2E_TEST_THREADS ?= 2
CARGO_E2E := cargo test --test e2e -- --test-threads=$(E2E_TEST_THREADS)

SCRIPTS := $(wildcard e2e/*.sh e2e/mpi/*.sh) .ci/run

.PHONY: setup e2e-build e2e-build-background e2e-tests-build up down vendor-crds test test-unit test-e2e test-e2e-harness bench-state bench-large-specs \
        test-e2e-running test-kueue-oldest test-outage test-side-by-side lint-scripts lint demo crds flux-build test-flux \
        bench bench-status bench-writes bench-cel bench-node bench-hpc bench-autoscaling bench-flux go-operator-build images operator-build test-node test-node-running \
        test-demo

setup:
	e2e/setup-host.sh

e2e-build:
	e2e/build.sh

# What each tier needs of them (`e2e/build.sh NAME...` waits for a background build of just
# these): the KWOK control plane with JobSet, Kueue and Helm; the real node adds CoreDNS and
# containerd.
# The real node's autoscaling tests also need prometheus-adapter: test-node runs them last,
# so that its build goes on behind the other tests.
GO_KWOK := kube kwok jobset kueue helm
GO_NODE := $(GO_KWOK) coredns containerd

# The same build, detached at idle CPU and I/O priority: `make test` starts it first, so it
# runs on what the tiers leave idle (downloads, waits), and each tier waits only for the
# components it needs. `e2e/build.sh --stop-background` stops it.
e2e-build-background:
	e2e/build.sh --background

up: e2e-build images
	E2E_REAL_NODE=1 e2e/up.sh

down:
	e2e/down.sh

vendor-crds: e2e-build
	e2e/vendor-crds.sh

# The README's two commands: each installs and builds what a fresh machine lacks (the Go
# components in the background while the images build).
demo: setup e2e-build-background images
	e2e/build.sh $(GO_NODE)
	e2e/demo.sh

# What needs no Go component (the first tiers, the images, the e2e tests' build) comes first.
test: setup e2e-build-background test-unit test-flux images e2e-tests-build test-e2e test-node test-demo \
      test-outage test-side-by-side test-kueue-oldest

# The operator binary the operator image carries: the release build, but the debug build
# (debug assertions on) under `make test`, whose unit and e2e tiers build it anyway; a cold
# machine's release build (linked whole: fat LTO, Cargo.toml) takes 8 to 16 minutes of the CI
# budget and would test no other code.
# `make demo`, `make up` and the benchmarks carry the release build.
OPERATOR_PROFILE ?= release
test: OPERATOR_PROFILE = dev
operator_dir = $(if $(filter dev test,$(OPERATOR_PROFILE)),debug,$(OPERATOR_PROFILE))
export OPERATOR_BIN = $(CARGO_TARGET_DIR)/$(operator_dir)/flux-operator

operator-build:
	cargo build --profile $(OPERATOR_PROFILE) --locked --bin flux-operator

# The real node's images (e2e/images.sh): no registry, one OCI archive imported by node.sh.
images: flux-build operator-build
	e2e/images.sh

# The real-node tier (tests/node): a fresh cluster whose real node runs the operator as
# installed by Helm and real Flux in its pods. One test at a time: each runs real brokers.
test-node: e2e-tests-build images
	e2e/build.sh $(GO_NODE)
	E2E_REAL_NODE=1 e2e/run-tests.sh bash -c 'cargo test --test node -- --test-threads=1 --skip autoscaling:: --skip node_loss:: --skip across_nodes:: && \
	  e2e/build.sh adapter && cargo test --test node -- --test-threads=1 autoscaling::'

# The two-node tests on a cluster of two real nodes: the second lost as in a power loss
# (e2e/node.sh lose 2) under running MiniClusters (tests/node/node_loss.rs), and MPI ranks
# on both nodes (tests/node/across_nodes.rs).
test-two-nodes: e2e-tests-build images
	e2e/build.sh $(GO_NODE)
	E2E_REAL_NODE=1 E2E_REAL_NODES=2 e2e/run-tests.sh cargo test --test node -- --test-threads=1 node_loss:: across_nodes::

# The real-node tests against a cluster that is already up (`make up`), for iterating.
test-node-running:
	KUBECONFIG=$(E2E_KUBECONFIG) cargo test --test node -- --test-threads=1 --skip node_loss:: --skip across_nodes::

# The README's first command, as a test: it must print real job output and end green.
test-demo: demo

test-unit:
	cargo test

flux-build:
	e2e/build-flux.sh

# Real Flux brokers in emulated pods (tests/flux). Two threads: each test runs a few brokers.
FLUX_TEST_THREADS ?= 2
test-flux: flux-build
	e2e/mpi/flux-tier.sh
	e2e/netns-clean.sh
	cargo test --test flux -- --test-threads=$(FLUX_TEST_THREADS)

# Real-Flux startup figures (printed, not part of `make test`): 2-16 brokers, 5 runs each.
bench-flux: flux-build
	cargo bench --bench flux_startup

# What an interactive cluster's kept state (statedir, KVS checkpoints) costs real Flux
# (e2e/bench-state.sh; root, Flux from e2e/build-flux.sh).
bench-state: flux-build
	e2e/bench-state.sh

# The operator's memory with many MiniClusters at the spec's bounds (e2e/bench-large-specs.py;
# its own cluster, KWOK nodes only, torn down after).
bench-large-specs: e2e-build operator-build
	e2e/run-tests.sh e2e/bench-large-specs.py

# The side-by-side benchmark (benches/operators.rs; not part of `make test`): its own fresh
# cluster (BENCH_STATE, BENCH_CLUSTER; 12 nodes, room for 1024 pods), always torn down by
# run-tests.sh. BENCH_SIZES, BENCH_ROUNDS, BENCH_RESIZE, BENCH_MANY, BENCH_MANY_ROUNDS,
# BENCH_IDLE, BENCH_ARMS and BENCH_WRAP pass through the environment (see benches/operators.rs).
BENCH_STATE ?= $(cache)/cluster-bench
BENCH_CLUSTER ?= flux-operator-bench
BENCH_NODES ?= 12
bench: e2e-build go-operator-build
	cargo bench --bench operators --no-run
	E2E_STATE=$(BENCH_STATE) E2E_CLUSTER=$(BENCH_CLUSTER) E2E_NODES=$(BENCH_NODES) \
	  e2e/run-tests.sh cargo bench --bench operators

# The apiserver's CPU per MiniCluster status write (benches/status; no operator): what a change
# to the status's shape or to how it is written saves, measured before it is made.
bench-status: e2e-build
	e2e/run-tests.sh sh -c 'kubectl apply -k crds/ >/dev/null && \
	  kubectl wait --for condition=established crd/miniclusters.flux-framework.org >/dev/null && \
	  python3 benches/status/status_writes.py'

# The apiserver's CPU per MiniCluster create and status apply, with the CRD at BASE and with
# the CRD as committed (benches/status/crd_writes.py, no operator): what a change to the CRD
# costs or saves each MiniCluster's two writes.
BASE ?= HEAD
bench-writes: e2e-build
	git show $(BASE):crds/flux-framework.org_miniclusters.yaml > $(cache)/miniclusters-at-base.yaml
	e2e/run-tests.sh python3 benches/status/crd_writes.py $(cache)/miniclusters-at-base.yaml \
	  crds/flux-framework.org_miniclusters.yaml

# The MiniCluster CRD's CEL rules as the apiserver runs them, per status write and per create,
# as the CRD is and with rules or defaults changed (benches/cel; Go modules from the proxy).
bench-cel:
	cd benches/cel && CRD=$(CURDIR)/crds/flux-framework.org_miniclusters.yaml \
	  MC=$(CURDIR)/benches/cel/minicluster.yaml go test -run '^$$' -bench . -benchtime 3000x -count 3

# The real-node benchmark (benches/node.rs; not part of `make test`): this operator and the Go
# operator on a fresh cluster with its real node, real Flux; BENCH_NODE_SIZES, BENCH_NODE_ROUNDS.
bench-node: e2e-build images go-operator-build
	cargo bench --bench node --no-run
	E2E_REAL_NODE=1 e2e/run-tests.sh cargo bench --bench node

# The HPC benchmark (benches/hpc.rs; not part of `make test`): LAMMPS and an MPI ping-pong in a
# MiniCluster of this operator, of the Go operator, and under mpirun on the host (its LAMMPS
# and Open MPI installed here); BENCH_HPC_ROUNDS, BENCH_HPC_STEPS.
bench-hpc: e2e-build images go-operator-build
	e2e/setup-host.sh hpc
	cargo bench --bench hpc --no-run
	E2E_REAL_NODE=1 e2e/run-tests.sh cargo bench --bench hpc

# The autoscaling benchmark (benches/autoscaling.rs; not part of `make test`): a MiniCluster
# grown and shrunk by an HPA on its queue, against scaling it by hand at once;
# BENCH_AUTOSCALING_ROUNDS.
bench-autoscaling: e2e-build images
	cargo bench --bench autoscaling --no-run
	E2E_REAL_NODE=1 e2e/run-tests.sh cargo bench --bench autoscaling

go-operator-build:
	e2e/build-go-operator.sh > /dev/null

crds:
	cargo run --quiet -- crd > crds/flux-framework.org_miniclusters.yaml
	cargo run --quiet -- immutable-policy > crds/minicluster-immutable.yaml
	cp crds/flux-framework.org_miniclusters.yaml charts/flux-operator/crds/
	cp crds/minicluster-immutable.yaml charts/flux-operator/templates/
	{ echo '{{- if .Values.podSecurity.enabled }}'; cat manifests/pod-security.yaml; echo '{{- end }}'; } \
		> charts/flux-operator/templates/pod-security.yaml

# Starts a fresh cluster, runs the e2e tests, and stops the cluster even when they fail.
# The e2e and real-node tests' build, which needs no cluster (before the Go components in
# `make test`).
e2e-tests-build:
	cargo build --test e2e --test node

test-e2e: e2e-tests-build
	e2e/build.sh $(GO_KWOK)
	e2e/run-tests.sh $(CARGO_E2E)

# The Kueue tests (admission, quota, eviction, resize, topology placement) again on a
# cluster of their own running the oldest Kueue the README claims (KUEUE_OLDEST_VERSION).
KUEUE_TESTS ?= kueue queued placement
test-kueue-oldest: e2e-tests-build
	e2e/build.sh kube kwok jobset kueue-oldest
	source e2e/versions.env && E2E_KUEUE_VERSION=$$KUEUE_OLDEST_VERSION \
	  E2E_STATE=$(cache)/cluster-kueue-oldest E2E_CLUSTER=flux-operator-kueue-oldest \
	  e2e/run-tests.sh cargo test --test e2e -- --test-threads=$(E2E_TEST_THREADS) $(KUEUE_TESTS)

# The e2e tests against a cluster that is already up (`make up`), for iterating.
test-e2e-running:
	KUBECONFIG=$(E2E_KUBECONFIG) $(CARGO_E2E)

# An API server outage (e2e/outage.sh): the first reconcile after it comes within seconds.
# The cluster to itself: the outage would disturb the other e2e tests.
test-outage:
	e2e/build.sh $(GO_KWOK)
	cargo build
	e2e/run-tests.sh e2e/outage.sh

# Two test clusters on one machine (e2e/side-by-side.sh), beside the default one.
test-side-by-side:
	e2e/build.sh $(GO_KWOK)
	e2e/run-tests.sh e2e/side-by-side.sh

# The harness on its own: lint its scripts, bring a cluster up, check nodes and
# pod stages with kubectl only, tear it down.
test-e2e-harness: lint-scripts e2e-build
	e2e/run-tests.sh e2e/smoke.sh

lint-scripts:
	shellcheck $(SCRIPTS)

# The gate CI runs before the tests: formatting, every clippy warning (Cargo.toml's [lints]
# included) on every target, and the scripts. --all-targets leaves out the tiers' targets
# (test = false, bench = false), and naming them beside it does not add them: a second run.
lint: lint-scripts
	cargo fmt --check
	cargo clippy --all-targets --locked -- -D warnings
	cargo clippy --test '*' --bench '*' --locked -- -D warnings
	RUSTDOCFLAGS='-D warnings' cargo doc --no-deps --document-private-items --locked
