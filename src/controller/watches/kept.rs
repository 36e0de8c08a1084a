//! Types of their own for what a watch keeps of a kind, where the Kubernetes type would hold
//! mostly nothing: a k8s-openapi struct keeps every optional field inline, set or not (an
//! unset `Option<PodSpec>` alone is 1.5 KiB of a `Pod`'s 2.4). The watch deserializes the
//! API server's JSON straight into these (unknown fields are skipped), so the fields they
//! leave out are neither stored nor built.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use kube::api::{DynamicObject, PartialObjectMeta};
use serde::{Deserialize, Deserializer};

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

/// An object's metadata as a watch of a kind of its own keeps it: every field of
/// `ObjectMeta` but `managedFields`, which is skipped unread. The API server sends every
/// manager's field set with every change (on a broker pod, the Job controller's lists each
/// field of the pod's spec), and `ObjectMeta`'s own deserializer builds each set as a JSON
/// tree, only for the watch to drop it: most of the operator's time spent reading its
/// watches went there.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaKept {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

/// `#[serde(deserialize_with)]` of a kept kind's `metadata`: see [`MetaKept`].
pub fn metadata_without_managed_fields<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<ObjectMeta, D::Error> {
    let m = MetaKept::deserialize(d)?;
    Ok(ObjectMeta {
        annotations: m.annotations,
        creation_timestamp: m.creation_timestamp,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        deletion_timestamp: m.deletion_timestamp,
        finalizers: m.finalizers,
        generate_name: m.generate_name,
        generation: m.generation,
        labels: m.labels,
        managed_fields: None,
        name: m.name,
        namespace: m.namespace,
        owner_references: m.owner_references,
        resource_version: m.resource_version,
        self_link: m.self_link,
        uid: m.uid,
    })
}

/// A broker pod as its watch keeps it: its metadata and the part of its status the
/// reconciler reads (trimmed further by [`super::trim::trim_pod`]).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct BrokerPod {
    /// The pod's metadata, without its managed fields.
    #[serde(default, deserialize_with = "metadata_without_managed_fields")]
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Every field `ObjectMeta` has, `managedFields` with a field set as the API server sends
    /// it among them.
    fn every_field() -> serde_json::Value {
        json!({
            "annotations": {"a": "1"},
            "creationTimestamp": "2026-11-29T12:00:00Z",
            "deletionGracePeriodSeconds": 30,
            "deletionTimestamp": "2026-11-29T12:01:00Z",
            "finalizers": ["f"],
            "generateName": "m-lead-0-0-",
            "generation": 2,
            "labels": {"l": "2"},
            "managedFields": [{
                "apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kube-controller-manager",
                "operation": "Update", "time": "2026-11-29T12:00:00Z",
                "fieldsV1": {"f:spec": {"f:containers": {"k:{\"name\":\"flux\"}": {".": {}}}}},
            }],
            "name": "m-lead-0-0-a",
            "namespace": "ns",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "m-lead-0",
                "uid": "u-job", "controller": true, "blockOwnerDeletion": true}],
            "resourceVersion": "7",
            "selfLink": "/x",
            "uid": "u-pod",
        })
    }

    #[test]
    fn kept_metadata_is_object_meta_but_for_its_managed_fields() {
        let whole: ObjectMeta = serde_json::from_value(every_field()).unwrap();
        assert!(
            whole.managed_fields.is_some(),
            "the input has managed fields"
        );
        let want = ObjectMeta {
            managed_fields: None,
            ..whole
        };
        for kind in ["pod", "jobset"] {
            let object = json!({"metadata": every_field(), "status": {"phase": "Running"}});
            let got = match kind {
                "pod" => {
                    serde_json::from_value::<BrokerPod>(object)
                        .unwrap()
                        .metadata
                }
                _ => {
                    serde_json::from_value::<ObservedJobSet>(object)
                        .unwrap()
                        .metadata
                }
            };
            assert_eq!(got, want, "{kind}");
        }
        // Absent or null metadata fields stay absent, as with `ObjectMeta`'s deserializer.
        let pod: BrokerPod =
            serde_json::from_value(json!({"metadata": {"name": "p", "labels": null}})).unwrap();
        assert_eq!(
            pod.metadata,
            serde_json::from_value(json!({"name": "p"})).unwrap()
        );
        let pod: BrokerPod = serde_json::from_value(json!({})).unwrap();
        assert_eq!(pod.metadata, ObjectMeta::default());
    }
}
