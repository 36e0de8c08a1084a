//! An object's metadata as the kinds kept in types of their own read it
//! ([`super::pods::BrokerPod`], [`super::jobset::ObservedJobSet`]): every field of
//! `ObjectMeta` but `managedFields`, skipped unread ([`metadata_without_managed_fields`]).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

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
