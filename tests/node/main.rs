//! The real-node tier: the whole product as a user runs it. A test cluster from `e2e/` whose
//! real node is this machine (kubelet, containerd, bridge CNI, kube-proxy, CoreDNS; see
//! `e2e/node.sh`), the operator installed by its Helm chart and running in a pod there under
//! its own ServiceAccount, and MiniClusters whose pods run real Flux from the flux view image
//! built from `../shared/vendor`. Every assertion is what a user would check with `kubectl`
//! (logs, exec, get) and Flux's own commands.
//!
//! Run with `make test-node` (a fresh cluster, torn down after), or `make up` then
//! `make test-node-running`. One test at a time: each runs real brokers on two cores.
//!
//! Keep this file a list of modules.

#[path = "../common/mod.rs"]
mod common;

mod cluster;

mod across_nodes;
mod archive;
mod autoscaling;
mod elastic;
mod ends;
mod failure;
mod go_examples;
mod image_volume;
mod installed;
mod interactive;
mod kueue;
mod monitoring;
mod mpi;
mod network;
mod node_loss;
mod nonroot;
mod plugin;
mod queue_metrics;
mod resources;
mod restart;
mod services;
