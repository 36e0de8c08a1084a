//! What one MiniCluster costs the watch caches, in bytes held: each kind deserialized from
//! the JSON the API server sends, trimmed as its watch trims it ([`crate::controller::observe`]) and kept in
//! a reflector store, counted by jemalloc's per-thread allocation counters (this test
//! thread's own allocations only, whatever other tests run beside it).

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::Resource;
use kube::api::PartialObjectMeta;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::api::MiniCluster;
use crate::controller::observe::jobset::{self, ObservedJobSet};
use crate::controller::observe::pods::{self, BrokerPod};
use crate::controller::observe::trim;

/// Bytes this thread holds now (allocated less freed).
fn held() -> i64 {
    let allocated = tikv_jemalloc_ctl::thread::allocatedp::mib()
        .and_then(|m| m.read())
        .expect("jemalloc's stats")
        .get();
    let freed = tikv_jemalloc_ctl::thread::deallocatedp::mib()
        .and_then(|m| m.read())
        .expect("jemalloc's stats")
        .get();
    allocated as i64 - freed as i64
}

/// Bytes per object that a store holds of `count` objects made by `json` (the API server's
/// JSON of object `i`), deserialized, stripped of managed fields and trimmed as the watch does.
fn per_object<K>(count: usize, json: impl Fn(usize) -> Value, trim: fn(&mut K)) -> i64
where
    K: Resource + Clone + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    let texts: Vec<String> = (0..count).map(|i| json(i).to_string()).collect();
    let mut writer = Writer::<K>::default();
    let store = writer.as_reader();
    let before = held();
    for text in &texts {
        let mut obj: K = serde_json::from_str(text).expect("deserializes");
        obj.meta_mut().managed_fields = None;
        trim(&mut obj);
        writer.apply_watcher_event(&watcher::Event::Apply(obj));
    }
    let after = held();
    assert_eq!(store.len(), count);
    drop(writer);
    (after - before) / count as i64
}

fn meta(kind: &str, name: String, extra: Value) -> Value {
    let mut meta = json!({
        "name": name, "namespace": "benchmark", "uid": format!("0b6a6b1e-{kind}-{name}"),
        "resourceVersion": "123456", "generation": 1,
        "creationTimestamp": "2026-11-28T12:00:00Z",
        "labels": {crate::api::NAME_LABEL: "mc"},
        "ownerReferences": [{"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
            "name": "mc", "uid": "0b6a6b1e-aaaa-bbbb-cccc-000000000000",
            "controller": true, "blockOwnerDeletion": true}],
        "managedFields": [{"manager": "flux-operator", "operation": "Apply",
            "apiVersion": "v1", "time": "2026-11-28T12:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {}, "f:ownerReferences": {}}}}],
    });
    merge(&mut meta, extra);
    meta
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

fn minicluster(i: usize) -> MiniCluster {
    let mut mc = crate::fixtures::m()
        .name(&format!("mc-{i}"))
        .size(2)
        .build();
    mc.metadata.namespace = Some("benchmark".into());
    mc.metadata.uid = Some(format!("0b6a6b1e-aaaa-bbbb-cccc-{i:012}"));
    mc
}

fn rendered(i: usize) -> crate::render::Desired {
    let mc = minicluster(i);
    crate::render::desired(&crate::fixtures::cluster(&mc)).expect("renders")
}

/// A MiniCluster as the API server returns it while it runs: the spec with the CRD's
/// defaults, the status the operator wrote.
fn minicluster_json(i: usize) -> Value {
    let mc = minicluster(i);
    let mut value = serde_json::to_value(&mc).expect("serializes");
    let status = json!({
        "phase": "Running", "size": 2, "maximumSize": 2, "selector": "flux-framework.org/minicluster=mc",
        "jobSet": format!("mc-{i}"), "observedGeneration": 1,
        "conditions": (["Created", "Ready", "Suspended", "Resizing", "Succeeded"].iter().map(|t| json!({
            "type": t, "status": "False", "reason": "Running", "message": "all 2 brokers are ready",
            "lastTransitionTime": "2026-11-28T12:00:01Z", "observedGeneration": 1})).collect::<Vec<_>>()),
    });
    merge(
        &mut value,
        json!({"metadata": meta("mc", format!("mc-{i}"), json!({})), "status": status}),
    );
    value
}

fn jobset_json(i: usize) -> Value {
    let mut value = serde_json::to_value(rendered(i).jobset).expect("serializes");
    merge(
        &mut value,
        json!({"metadata": meta("js", format!("mc-{i}"), json!({}))}),
    );
    merge(
        &mut value,
        json!({"status": {"replicatedJobsStatus": [
        {"name": "lead", "ready": 1, "active": 1, "succeeded": 0, "failed": 0, "suspended": 0},
        {"name": "workers", "ready": 1, "active": 1, "succeeded": 0, "failed": 0, "suspended": 0}],
        "terminalState": "", "restarts": 0}}),
    );
    value
}

/// A broker pod as the API server returns it once Ready: the rendered template with what
/// JobSet, the Job controller, the scheduler and the kubelet add.
fn pod_json(i: usize) -> Value {
    let js = rendered(i / 2).jobset;
    let role = i % 2;
    let template = js.spec.replicated_jobs[role]
        .template
        .spec
        .clone()
        .expect("a job");
    let mut pod = serde_json::to_value(template.template).expect("serializes");
    let job = format!("mc-{}-{}-0", i / 2, js.spec.replicated_jobs[role].name);
    let labels = json!({
        "batch.kubernetes.io/controller-uid": "5e3c2d7e-1111-2222-3333-444444444444",
        "batch.kubernetes.io/job-completion-index": "0", "batch.kubernetes.io/job-name": job,
        "controller-uid": "5e3c2d7e-1111-2222-3333-444444444444", "job-name": job,
        "jobset.sigs.k8s.io/job-index": "0", "jobset.sigs.k8s.io/job-key": "0123456789abcdef0123456789abcdef01234567",
        "jobset.sigs.k8s.io/jobset-name": format!("mc-{}", i / 2),
        "jobset.sigs.k8s.io/jobset-uid": "5e3c2d7e-1111-2222-3333-555555555555",
        "jobset.sigs.k8s.io/replicatedjob-name": js.spec.replicated_jobs[role].name,
        "jobset.sigs.k8s.io/replicatedjob-replicas": "1", "jobset.sigs.k8s.io/restart-attempt": "0",
    });
    merge(
        &mut pod,
        json!({"metadata": meta("pod", format!("{job}-x7k2p"), json!({
        "labels": labels.clone(), "annotations": labels, "generateName": format!("{job}-"),
        "finalizers": ["batch.kubernetes.io/job-tracking"],
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
            "uid": "5e3c2d7e-1111-2222-3333-444444444444", "controller": true, "blockOwnerDeletion": true}]}))}),
    );
    let condition = |t: &str| {
        json!({"type": t, "status": "True", "lastProbeTime": null,
        "lastTransitionTime": "2026-11-28T12:00:03Z"})
    };
    let container = |name: &str| {
        json!({"name": name, "image": "docker.io/library/app:latest",
        "imageID": "docker.io/library/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "containerID": "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "ready": true, "restartCount": 0, "started": true,
        "state": {"running": {"startedAt": "2026-11-28T12:00:02Z"}}})
    };
    merge(
        &mut pod,
        json!({"spec": {"nodeName": "kwok-node-3", "serviceAccountName": "default",
        "schedulerName": "default-scheduler", "priority": 0, "enableServiceLinks": true,
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Running", "hostIP": "10.0.0.3", "hostIPs": [{"ip": "10.0.0.3"}],
            "podIP": "10.244.3.17", "podIPs": [{"ip": "10.244.3.17"}], "qosClass": "BestEffort",
            "startTime": "2026-11-28T12:00:01Z",
            "conditions": (["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                "PodScheduled"].into_iter().map(condition).collect::<Vec<_>>()),
            "initContainerStatuses": [container("flux-view")],
            "containerStatuses": [container("mc")]}}),
    );
    pod
}

fn owned_json(kind: &str, i: usize) -> Value {
    json!({"metadata": meta(kind, format!("mc-{i}-{kind}"), json!({
        "annotations": {crate::render::APPLIED_ANNOTATION: "0123456789"}}))})
}

/// The budget: what the caches hold of one MiniCluster of two brokers, in bytes. At
/// 1000 MiniClusters this is most of the operator's memory above its idle footprint
/// (docs/benchmarks.md); a whole `Pod` or JobSet kept would be 8 KiB more.
const BUDGET: i64 = 21 * 1024;

#[test]
fn a_minicluster_of_two_brokers_costs_the_watch_caches_at_most_21_kib() {
    let n = 200;
    let mc = per_object::<MiniCluster>(n, minicluster_json, trim::trim_minicluster);
    let js = per_object::<ObservedJobSet>(n, jobset_json, jobset::trim_jobset);
    let pod = per_object::<BrokerPod>(n, pod_json, pods::trim_pod);
    let secret = per_object::<PartialObjectMeta<Secret>>(n, |i| owned_json("secret", i), |_| {});
    let cm = per_object::<PartialObjectMeta<ConfigMap>>(n, |i| owned_json("cm", i), |_| {});
    let svc =
        per_object::<PartialObjectMeta<Service>>(n, |i| owned_json("svc", i), trim::trim_service);
    let total = mc + js + 2 * pod + secret + cm + svc;
    eprintln!(
        "bytes held per MiniCluster of two brokers: MiniCluster {mc}, JobSet {js}, pods 2 x {pod}, \
         Secret {secret}, ConfigMap {cm}, Service {svc}: {total}"
    );
    assert!(pod < 2560, "a broker pod: {pod} bytes");
    assert!(js < 3072, "a JobSet: {js} bytes");
    assert!(
        total <= BUDGET,
        "{total} bytes, over the budget of {BUDGET}"
    );
}
