//! The real-Flux tier: the operator's rendered pods run real Flux brokers (flux-core and
//! Fluxion built by `e2e/build-flux.sh` from `../shared/vendor`) on this machine, each pod in
//! network, UTS, mount, IPC and PID namespaces of its own ([`kubelet`]), the way a kubelet
//! would run them. Needs root. Run with `make test-flux` (part of `make test`).
//!
//! What these tests prove that the KWOK tier cannot: that the broker config, certificate,
//! entrypoint scripts, probes and volumes the operator renders make a working Flux instance.
//! Keep this file a list of modules.

mod cluster;
mod kubelet;

mod emulator;

mod ends;
mod examples;
mod features;
mod lifecycle;
mod mpi;
// Prometheus' text format, as the other tiers read it (this tier uses a part).
#[allow(dead_code)]
#[path = "../common/metrics.rs"]
mod metrics;
mod queue_metrics;
mod state;
