//! Kueue's Workload API, for the Workloads' watch: the versions the operator reads, and the
//! one this cluster serves. What a Workload says of a queued MiniCluster (admitted, waiting,
//! evicted, admitted for another size) is read in [`super::observe::admission`].

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

/// The Workload API versions the operator reads, newest first: `v1beta2` (Kueue's stored
/// version since v0.16, served since v0.15), then `v1beta1` (deprecated in v0.16). What the
/// operator reads (the conditions `QuotaReserved`, `Admitted`, `Evicted` and the owner
/// reference to the JobSet) is the same in both.
pub const WORKLOAD_VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];

/// Kueue's Workload at `version` (one of [`WORKLOAD_VERSIONS`]).
pub fn workload_resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kueue.x-k8s.io", version, "Workload"),
        "workloads",
    )
}

/// The newest Workload API version this cluster serves and this operator may list where it
/// watches (`namespace`, or all namespaces); `None` when Kueue is not installed.
pub async fn served_version(client: &Client, namespace: Option<&str>) -> Option<&'static str> {
    for version in WORKLOAD_VERSIONS {
        let resource = workload_resource(version);
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        if api
            .list_metadata(&ListParams::default().limit(1))
            .await
            .is_ok()
        {
            return Some(version);
        }
    }
    None
}
