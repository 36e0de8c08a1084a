//! The watches keep every object trimmed ([`crate::controller::observe`]): what they keep
//! still answers what each reader reads (the plan, the status, the triggers, the instance),
//! and a change of what they drop alone says nothing new ([`super::kept::Kept`]).

use std::sync::Arc;

use crate::api::{MiniCluster, NAME_LABEL, ROLE_LABEL};
use crate::controller::observe::jobset::{ObservedJobSet, trim_jobset};
use crate::controller::observe::pods::{BrokerPod, trim_pod};
use crate::controller::watches::kept::Kept;
use crate::jobset::JobSet;

fn rendered() -> (MiniCluster, JobSet) {
    let mut mc = crate::fixtures::with_command("m", 3, "app");
    mc.spec.max_size = Some(5);
    mc.metadata.uid = Some("uid".into());
    let js = crate::render::jobset(&crate::fixtures::cluster(&mc), "m-config");
    (mc, js)
}

#[test]
fn a_jobset_read_back_and_trimmed_still_answers_what_the_reconciler_reads() {
    let (mc, full) = rendered();
    let json = serde_json::to_value(&full).expect("serializes");
    let mut watched: ObservedJobSet = serde_json::from_value(json).expect("reads back");
    trim_jobset(&mut watched);
    let mut made = ObservedJobSet::from(&full);
    assert_eq!(
        crate::controller::plan::config_map_of(&made).as_deref(),
        Some("m-config")
    );
    trim_jobset(&mut made);
    assert_eq!(watched, made, "the watch and a create see the same");
    assert_eq!(
        crate::controller::plan::config_map_of(&watched).as_deref(),
        Some("m-config")
    );
    for rj in &watched.spec.replicated_jobs {
        let pod = rj
            .template
            .spec
            .as_ref()
            .and_then(|j| j.template.spec.as_ref());
        assert_eq!(pod.map(|p| p.volumes.len()), Some(1), "{rj:?}");
    }
    let change = crate::render::jobset::change(&crate::fixtures::cluster(&mc), None)
        .expect("an elastic change");
    assert!(!crate::controller::plan::jobset::needs(&change, &watched));
    let grown = crate::render::jobset::change(
        &crate::fixtures::cluster(&MiniCluster {
            spec: crate::api::MiniClusterSpec {
                size: 4,
                ..mc.spec.clone()
            },
            ..mc.clone()
        }),
        None,
    )
    .expect("an elastic change");
    assert!(crate::controller::plan::jobset::needs(&grown, &watched));
}

#[test]
fn a_jobset_whose_job_counts_alone_changed_is_kept_the_same() {
    let (_, full) = rendered();
    let with_status = |version: &str, ready: i32, completed: &str| {
        let mut js = ObservedJobSet::from(&full);
        js.metadata.resource_version = Some(version.into());
        js.status = serde_json::from_value(serde_json::json!({
            "conditions": [{"type": "Completed", "status": completed,
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                            "reason": "AllJobsCompleted", "message": "jobs completed"}],
            "restarts": ready,
            "terminalState": (completed == "True").then_some("Completed"),
            "replicatedJobsStatus": [{"name": "lead", "ready": ready, "active": 1}],
        }))
        .expect("a status");
        trim_jobset(&mut js);
        js
    };
    let stored = with_status("1", 0, "False");
    let mut counted = with_status("2", 1, "False");
    assert!(counted.same_as(&stored), "Jobs ready: {counted:?}");
    let mut completed = with_status("3", 1, "True");
    assert!(!completed.same_as(&stored), "completed: {completed:?}");
    assert!(completed.condition_true("Completed"));
}

#[test]
fn a_trimmed_pod_still_answers_what_the_reconciler_reads() {
    let t = |s: &str| format!("2026-01-01T00:00:0{s}Z");
    let pod: BrokerPod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "m-lead-0-0-x", "namespace": "ns", "uid": "u",
            "creationTimestamp": t("1"),
            "labels": {NAME_LABEL: "m", ROLE_LABEL: "lead", "jobset.sigs.k8s.io/jobset-name": "m",
                "batch.kubernetes.io/job-completion-index": "0"},
            "annotations": {"jobset.sigs.k8s.io/jobset-name": "m"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "m-lead-0",
                "uid": "j", "controller": true}],
            "finalizers": ["batch.kubernetes.io/job-tracking"]},
        "spec": {"containers": [{"name": "app", "image": "x"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": t("2")},
            {"type": "Ready", "status": "True", "lastTransitionTime": t("5"),
                "message": "all containers ready"}],
            "initContainerStatuses": [
                {"name": "flux-view", "image": "v", "imageID": "", "ready": true,
                    "restartCount": 0},
                {"name": crate::model::containers::ARCHIVE_INIT, "image": "v", "imageID": "", "ready": true,
                    "restartCount": 0, "state": {"terminated": {"exitCode": 0,
                    "message": "{\"found\": true, \"archive\": \"/a\", \"pending\": 2}"}}}],
            "containerStatuses": [{"name": "m", "image": "x", "imageID": "", "ready": true,
                "restartCount": 2, "lastState": {"terminated": {"exitCode": 137,
                "reason": "OOMKilled", "message": "long", "containerID": "c"}}}]},
    }))
    .expect("a pod");
    let mut trimmed = pod.clone();
    trim_pod(&mut trimmed);
    let counts =
        |p: &BrokerPod| crate::controller::observe::pods::count_pods(&[Arc::new(p.clone())]);
    assert_eq!(counts(&trimmed), counts(&pod));
    assert_eq!((counts(&pod).ready, counts(&pod).live), (1, 1));
    let restore = |p: &BrokerPod| crate::controller::status::lead_restore(&[Arc::new(p.clone())]);
    assert!(restore(&pod).is_some());
    assert_eq!(restore(&trimmed), restore(&pod));
    assert_eq!(
        super::super::trigger::by_label(&trimmed.metadata),
        super::super::trigger::by_label(&pod.metadata)
    );
    let labels = trimmed.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels.len(), 2, "{labels:?}");
    let status = trimmed.status.as_ref().expect("a status");
    assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
    let mc = crate::fixtures::m().build();
    let seen = |p: &BrokerPod| crate::controller::instance::lead_seen(&mc, &[Arc::new(p.clone())]);
    assert_eq!(seen(&pod).map(|s| s.restarts), Some(2));
    assert_eq!(seen(&trimmed), seen(&pod));
    let kept = serde_json::to_string(&status.container_statuses).expect("serializes");
    assert!(!kept.contains("\"c\""), "{kept}");
    assert!(trimmed.metadata.annotations.is_none());
}
