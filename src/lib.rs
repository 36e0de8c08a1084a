//! The Flux Operator: runs Flux Framework MiniClusters on Kubernetes as JobSets.
//!
//! - [`api`]: the `MiniCluster` types, schema and validation.
//! - [`model`]: the spec resolved, and the checks the API server cannot make.
//! - [`flux`]: Flux domain knowledge: broker config, CURVE certificate, entrypoint scripts.
//! - [`render`]: pure desired state, `MiniCluster` -> JobSet, ConfigMap, Secret, Services.
//! - [`controller`]: the thin reconciler that applies the desired state and writes status.
//! - [`metrics`]: Prometheus metrics and the HTTP endpoints.
//! - [`jobset`]: the part of JobSet's API the operator uses.

// The module docs link their private parts (the controller's files, the plan's deciders):
// `cargo doc --document-private-items` renders them for maintainers.
#![allow(rustdoc::private_intra_doc_links)]

pub mod api;
pub mod cli;
pub mod controller;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod flux;
pub mod jobset;
pub mod metrics;
pub mod model;
pub mod render;
pub mod telemetry;

/// The unit tests count their allocations with jemalloc's per-thread counters (the watch
/// caches' footprint), in the allocator the operator runs with.
#[cfg(test)]
#[global_allocator]
static TEST_ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
