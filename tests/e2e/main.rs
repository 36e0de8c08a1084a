//! End-to-end tests against the offline test control plane from `e2e/`
//! (real kube-apiserver, etcd, controller-manager, scheduler, kwok nodes, and the
//! JobSet and Kueue controllers with their webhooks). Run with `make test`, or
//! `make up` then `make test-e2e-running`. Each test gets its own namespace
//! from `common::TestNamespace`.
//!
//! Keep this file a list of modules.

#[path = "../common/mod.rs"]
mod common;

mod conformance;
mod elastic;
mod ends;
mod health;
mod helm;
mod installed;
mod jobset;
mod kueue;
mod lifecycle;
mod operator;
mod placement;
mod pod_security;
mod prometheus;
mod queued;
mod quota;
mod reliability;
mod restart;
