//! What the watch caches keep of each object: only what the reconciler reads (see
//! [`crate::controller::index`]), so a cluster of thousands of pods costs this process
//! little memory.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, PodCondition, Service,
};
use kube::api::{DynamicObject, PartialObjectMeta};

use crate::api::{MiniCluster, MiniClusterStatus, NAME_LABEL, ROLE_LABEL};
use crate::jobset::{JOBSET_UID_LABEL, ObservedJobSet};

use super::kept::BrokerPod;

/// A broker pod as the reconciler reads it ([`crate::controller::status::count_pods`],
/// [`crate::controller::status::lead_restore`], [`crate::controller::trigger::by_label`]): its name, namespace,
/// UID, the name and role labels, its creation and deletion times; of its status the phase,
/// the Ready condition, the archive init container's state and, of a lead pod, its
/// containers' restart counts ([`crate::controller::instance::lead_seen`]). The rest (JobSet's
/// and the Job controller's labels and annotations, every other condition and container
/// status) is never read; the spec is not even deserialized ([`BrokerPod`] has none).
pub fn trim_pod(pod: &mut BrokerPod) {
    let lead = crate::controller::status::is_lead(pod);
    let meta = &mut pod.metadata;
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|k, _| k == NAME_LABEL || k == ROLE_LABEL || k == JOBSET_UID_LABEL);
    }
    meta.annotations = None;
    // The controller alone: whose pod it is (`crate::jobset::made_for_jobset`).
    if let Some(owners) = meta.owner_references.as_mut() {
        owners.retain(|o| o.controller == Some(true));
    }
    meta.finalizers = None;
    meta.generate_name = None;
    let Some(status) = pod.status.as_mut() else {
        return;
    };
    let ready: Vec<_> = status
        .conditions
        .take()
        .into_iter()
        .flatten()
        .filter(|c| c.type_ == "Ready")
        .map(|c| PodCondition {
            type_: c.type_,
            status: c.status,
            last_transition_time: c.last_transition_time,
            ..PodCondition::default()
        })
        .collect();
    status.conditions = Some(ready);
    let archive: Vec<_> = status
        .init_container_statuses
        .take()
        .into_iter()
        .flatten()
        .filter(|c| c.name == crate::model::containers::ARCHIVE_INIT)
        .collect();
    status.init_container_statuses = (!archive.is_empty()).then_some(archive);
    let restarts = status.container_statuses.take().filter(|_| lead);
    status.container_statuses =
        restarts.map(|cs| cs.into_iter().map(trim_container_status).collect());
}

/// A lead pod's container as [`crate::controller::instance::lead_seen`] and
/// [`crate::controller::status::lead_save`] read it: its name, restart count, and how it ended (this
/// run and the last) with its termination message.
fn trim_container_status(c: ContainerStatus) -> ContainerStatus {
    let ended = |s: Option<ContainerState>| {
        s.and_then(|s| s.terminated).map(|t| ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: t.exit_code,
                reason: t.reason,
                finished_at: t.finished_at,
                message: t.message,
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        })
    };
    ContainerStatus {
        name: c.name,
        restart_count: c.restart_count,
        state: ended(c.state),
        last_state: ended(c.last_state),
        ..ContainerStatus::default()
    }
}

/// A services Job as the reconciler reads it: metadata, `spec.suspend` and status (its pod
/// template is never read).
pub fn trim_job(job: &mut Job) {
    if let Some(spec) = job.spec.as_mut() {
        spec.template = Default::default();
    }
}

/// A JobSet as the reconciler reads it ([`ObservedJobSet`]: its pod templates were never
/// deserialized), keeping of its pods' volumes only the one that mounts the broker config
/// ([`crate::controller::plan::config_map_of`]), and of its status only the conditions: the
/// counts of ready and active Jobs, which JobSet updates as the pods come up, and its own
/// restarts are never read (the pods tell), so a change of them alone wakes no reconcile.
pub fn trim_jobset(js: &mut ObservedJobSet) {
    let pods = (js.spec.replicated_jobs.iter_mut())
        .filter_map(|r| r.template.spec.as_mut()?.template.spec.as_mut());
    for pod in pods {
        pod.volumes
            .retain(|v| v.name == crate::model::mounts::CONFIG_VOLUME);
    }
    if let Some(status) = js.status.as_mut() {
        status.replicated_jobs_status = Vec::new();
        status.restarts = 0;
        status.terminal_state = None;
    }
}

/// The annotation `kubectl apply` (client-side) keeps a copy of the whole applied object in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A MiniCluster as the controller keeps it: all of it but the copy of itself that
/// `kubectl apply` keeps in an annotation ([`LAST_APPLIED`]), which nothing here reads. A
/// status that is only the CRD's default (no reconcile wrote one,
/// [`MiniClusterStatus::is_unwritten`]) is kept as none, as the API server stores it.
pub fn trim_minicluster(mc: &mut MiniCluster) {
    if let Some(annotations) = mc.metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
    if mc
        .status
        .as_ref()
        .is_some_and(MiniClusterStatus::is_unwritten)
    {
        mc.status = None;
    }
}

/// A Kueue Workload as the reconciler reads it ([`crate::controller::kueue::admission_of`]):
/// metadata (its owner, the JobSet), the conditions, and each pod set's name and count; the
/// pod sets' templates, a copy of every pod template, dropped.
pub fn trim_workload(wl: &mut DynamicObject) {
    let conditions = wl.data["status"]["conditions"].take();
    let pod_sets: Option<Vec<serde_json::Value>> =
        wl.data["spec"]["podSets"].as_array().map(|sets| {
            sets.iter()
                .map(|s| serde_json::json!({"name": s["name"], "count": s["count"]}))
                .collect()
        });
    wl.data = serde_json::json!({"status": {"conditions": conditions}});
    if let Some(pod_sets) = pod_sets {
        wl.data["spec"] = serde_json::json!({"podSets": pod_sets});
    }
}

/// A Service as the reconciler reads it: its name, owners, deletion, the name label and the
/// applied annotation (a `kubectl apply` annotation, other labels and annotations of Services
/// the operator did not make are never read).
pub fn trim_service(svc: &mut PartialObjectMeta<Service>) {
    let meta = &mut svc.metadata;
    meta.labels = meta
        .labels
        .take()
        .map(|mut l| {
            l.retain(|k, _| k == NAME_LABEL);
            l
        })
        .filter(|l| !l.is_empty());
    meta.annotations = meta
        .annotations
        .take()
        .map(|mut a| {
            a.retain(|k, _| k == crate::render::APPLIED_ANNOTATION);
            a
        })
        .filter(|a| !a.is_empty());
    meta.finalizers = None;
    meta.creation_timestamp = None;
    meta.generate_name = None;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::ResourceExt;

    use super::*;
    use crate::controller::kueue;
    use crate::controller::watches::kept::Kept;
    use crate::jobset::JobSet;

    #[test]
    fn a_status_that_is_only_the_crds_default_is_kept_as_none_and_a_written_one_whole() {
        let mut mc = crate::fixtures::with_command("m", 2, "app");
        mc.status = Some(
            serde_json::from_value(serde_json::json!({
                "phase": "Pending", "readyBrokers": 0, "maximumSize": 0, "size": 0
            }))
            .unwrap(),
        );
        trim_minicluster(&mut mc);
        assert_eq!(
            mc.status, None,
            "the API server's default for an absent status"
        );
        let written = MiniClusterStatus {
            job_set: "m".into(),
            ..MiniClusterStatus::unwritten()
        };
        mc.status = Some(written.clone());
        trim_minicluster(&mut mc);
        assert_eq!(mc.status, Some(written), "a status a reconcile wrote");
    }

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
        let counts = |p: &BrokerPod| crate::controller::status::count_pods(&[Arc::new(p.clone())]);
        assert_eq!(counts(&trimmed), counts(&pod));
        assert_eq!((counts(&pod).ready, counts(&pod).live), (1, 1));
        let restore =
            |p: &BrokerPod| crate::controller::status::lead_restore(&[Arc::new(p.clone())]);
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
        let seen =
            |p: &BrokerPod| crate::controller::instance::lead_seen(&mc, &[Arc::new(p.clone())]);
        assert_eq!(seen(&pod).map(|s| s.restarts), Some(2));
        assert_eq!(seen(&trimmed), seen(&pod));
        let kept = serde_json::to_string(&status.container_statuses).expect("serializes");
        assert!(!kept.contains("\"c\""), "{kept}");
        assert!(trimmed.metadata.annotations.is_none());
    }

    #[test]
    fn a_kept_minicluster_has_no_copy_of_itself_and_every_other_annotation() {
        let mut mc = crate::fixtures::m().build();
        let applied = serde_json::to_string(&mc).expect("serializes");
        mc.metadata.annotations = Some(
            [
                (LAST_APPLIED.to_string(), applied),
                ("team".to_string(), "a".to_string()),
            ]
            .into(),
        );
        let mut kept = mc.clone();
        trim_minicluster(&mut kept);
        assert_eq!(kept.spec, mc.spec);
        assert_eq!(
            kept.metadata.annotations,
            Some([("team".to_string(), "a".to_string())].into())
        );
    }

    #[test]
    fn a_trimmed_workload_keeps_its_owner_admission_and_pod_counts() {
        let mut wl: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "ownerReferences": [
                {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "m", "uid": "u"}]},
            "spec": {"podSets": [{"name": "lead", "count": 1, "template": {"spec": {"containers": []}}}]},
            "status": {"conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted",
                "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .expect("a Workload");
        let before = kueue::admission_from(&wl.data);
        trim_workload(&mut wl);
        assert_eq!(
            wl.data["spec"],
            serde_json::json!({"podSets": [{"name": "lead", "count": 1}]}),
            "the pod sets' names and counts kept, their templates dropped"
        );
        assert_eq!(wl.owner_references().len(), 1);
        let after = kueue::admission_from(&wl.data);
        assert!(after.admitted);
        assert_eq!(
            (before.reason, before.admitted_at),
            (after.reason, after.admitted_at)
        );
        // A Workload with no pod sets read keeps none: not an empty list, which would match
        // no JobSet's counts.
        wl.data["spec"] = serde_json::json!({});
        trim_workload(&mut wl);
        assert_eq!(wl.data.get("spec"), None);
    }
}
