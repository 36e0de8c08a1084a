//! Types of their own for what a watch keeps of a kind, where the Kubernetes type would hold
//! mostly nothing: a k8s-openapi struct keeps every optional field inline, set or not (an
//! unset `Option<PodSpec>` alone is 1.5 KiB of a `Pod`'s 2.4). The watch deserializes the
//! API server's JSON straight into these (unknown fields are skipped), so the fields they
//! leave out are neither stored nor built.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{DynamicObject, PartialObjectMeta};
use serde::Deserialize;

use crate::jobset::ObservedJobSet;

/// A watched object as its store keeps it (trimmed), compared with the stored version of
/// the same object: whether this new version says nothing new to a reconcile.
pub trait Kept {
    /// The same as `stored` but for `metadata.resourceVersion` (which every write moves).
    fn same_as(&mut self, stored: &Self) -> bool;
}

/// [`Kept::same_as`] of a kind compared whole: `new` equals `stored` once it carries
/// `stored`'s `resourceVersion` (put back after).
fn same_but_version<K: Resource + PartialEq>(new: &mut K, stored: &K) -> bool {
    let stored_version = stored.meta().resource_version.clone();
    let own = std::mem::replace(&mut new.meta_mut().resource_version, stored_version);
    let same = new == stored;
    new.meta_mut().resource_version = own;
    same
}

/// The kinds whose store keeps them whole, compared whole ([`same_but_version`]).
macro_rules! kept_whole {
    ($($kind:ty),*) => {$(
        impl Kept for $kind {
            fn same_as(&mut self, stored: &Self) -> bool {
                same_but_version(self, stored)
            }
        }
    )*};
}

kept_whole!(BrokerPod, ObservedJobSet, Job, DynamicObject);

/// A metadata-only watch keeps the metadata alone.
impl<K> Kept for PartialObjectMeta<K> {
    fn same_as(&mut self, stored: &Self) -> bool {
        let stored_version = stored.metadata.resource_version.clone();
        let own = std::mem::replace(&mut self.metadata.resource_version, stored_version);
        let same = self.metadata == stored.metadata;
        self.metadata.resource_version = own;
        same
    }
}

/// A broker pod as its watch keeps it: its metadata and the part of its status the
/// reconciler reads (trimmed further by [`super::trim::trim_pod`]).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct BrokerPod {
    /// The pod's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the reconciler reads of its status.
    pub status: Option<BrokerPodStatus>,
}

/// What the reconciler reads of a pod's status: field for field as in `PodStatus`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BrokerPodStatus {
    /// `Pending`, `Running`, `Succeeded`, `Failed`.
    pub phase: Option<String>,
    /// The pod's conditions (the watch keeps `Ready`).
    pub conditions: Option<Vec<PodCondition>>,
    /// Its init containers' statuses (the watch keeps the archive's).
    pub init_container_statuses: Option<Vec<ContainerStatus>>,
    /// Its containers' statuses (the watch keeps a lead pod's).
    pub container_statuses: Option<Vec<ContainerStatus>>,
}

impl k8s_openapi::Resource for BrokerPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for BrokerPod {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A whole pod as its watch would keep it (tests and fixtures build whole pods).
impl From<Pod> for BrokerPod {
    fn from(pod: Pod) -> Self {
        let mut kept = BrokerPod {
            metadata: pod.metadata,
            status: pod.status.map(|s| BrokerPodStatus {
                phase: s.phase,
                conditions: s.conditions,
                init_container_statuses: s.init_container_statuses,
                container_statuses: s.container_statuses,
            }),
        };
        super::trim::trim_pod(&mut kept);
        kept
    }
}
