//! Tests across the kinds kept in types of their own: the metadata each reads
//! ([`super::meta`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use super::jobset::ObservedJobSet;
use super::pods::BrokerPod;

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
