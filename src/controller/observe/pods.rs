//! A broker pod as its watch keeps it, and what is read of the pods.
//!
//! [`BrokerPod`] is a type of its own for what the pod watch keeps, where the Kubernetes type
//! would hold mostly nothing: a k8s-openapi struct keeps every optional field inline, set or
//! not (an unset `Option<PodSpec>` alone is 1.5 KiB of a `Pod`'s 2.4). The watch deserializes
//! the API server's JSON straight into it (unknown fields are skipped), so the fields it
//! leaves out are neither stored nor built; [`trim_pod`] drops the rest of what is never
//! read. From the pods: which is a lead's ([`is_lead`], [`newest_lead`]), and what the status
//! counts ([`count_pods`]), and which were lost with their node ([`lost_brokers`]).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use super::meta::metadata_without_managed_fields;
use crate::api::{LEAD_JOB, NAME_LABEL, ROLE_LABEL};
use crate::jobset::JOBSET_UID_LABEL;

/// The pod conditions the watch keeps.
const KEPT_CONDITIONS: [&str; 3] = ["Ready", CONTAINERS_READY, DISRUPTION_TARGET];
/// The kubelet's condition: every container of the pod is ready.
const CONTAINERS_READY: &str = "ContainersReady";
/// The condition a pod about to be deleted by the control plane carries, with why.
const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// Why a lost node's pod is deleted: its node's `NoExecute` taint outlived its toleration.
const DELETION_BY_TAINT_MANAGER: &str = "DeletionByTaintManager";

/// A broker pod as its watch keeps it: its metadata and the part of its status the
/// reconciler reads (trimmed further by [`trim_pod`]).
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
    /// The pod's conditions (the watch keeps `Ready`, `DisruptionTarget`, and
    /// `ContainersReady` where it is not `Ready`'s).
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
        trim_pod(&mut kept);
        kept
    }
}

/// A broker pod as the reconciler reads it ([`count_pods`],
/// [`crate::controller::status::lead_restore`], [`crate::controller::trigger::by_label`]): its name, namespace,
/// UID, the name and role labels, its creation and deletion times; of its status the phase,
/// the Ready and DisruptionTarget conditions (and ContainersReady where it disagrees with
/// Ready: [`lost_brokers`]), the archive init container's state and, of a lead pod, its
/// containers' restart counts ([`crate::controller::instance::lead_seen`]). The rest (JobSet's
/// and the Job controller's labels and annotations, every other condition and container
/// status) is never read; the spec is not even deserialized ([`BrokerPod`] has none).
pub fn trim_pod(pod: &mut BrokerPod) {
    let lead = is_lead(pod);
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
    let conditions = status.conditions.take().unwrap_or_default();
    // `ContainersReady` says something only where it disagrees with `Ready` (a pod the
    // node lifecycle controller marked: [`lost_brokers`]); elsewhere it is not kept.
    let status_of = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.clone())
    };
    let disagree = status_of("Ready") != status_of(CONTAINERS_READY);
    let kept: Vec<_> = conditions
        .into_iter()
        .filter(|c| KEPT_CONDITIONS.contains(&c.type_.as_str()))
        .filter(|c| c.type_ != CONTAINERS_READY || disagree)
        .map(|c| PodCondition {
            // Why a disruption: a lost node's eviction, or another.
            reason: c.reason.filter(|_| c.type_ == DISRUPTION_TARGET),
            type_: c.type_,
            status: c.status,
            last_transition_time: c.last_transition_time,
            ..PodCondition::default()
        })
        .collect();
    status.conditions = Some(kept);
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

/// Whether the pod is a lead broker's (its role label).
pub fn is_lead(pod: &BrokerPod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ROLE_LABEL))
        .is_some_and(|r| r == LEAD_JOB)
}

/// The newest lead pod: the one whose reports and restarts are the instance's now.
pub fn newest_lead(pods: &[Arc<BrokerPod>]) -> Option<&Arc<BrokerPod>> {
    pods.iter()
        .filter(|p| is_lead(p))
        .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// What the status counts of the pods: how many are ready, live and stopping, and when.
#[derive(Debug, Default, PartialEq)]
pub struct PodCounts {
    /// Pods whose Ready condition is True (and are not terminating).
    pub ready: i32,
    /// Pods not yet finished (not Succeeded or Failed).
    pub live: i32,
    /// Live pods being deleted (their brokers are leaving: a shrink, an eviction).
    pub stopping: i32,
    /// When the lead pod became Ready.
    pub lead_ready_at: Option<Timestamp>,
    /// When the last of the ready pods became Ready (valid when `ready >= size`).
    pub all_ready_at: Option<Timestamp>,
    /// Earliest pod creation.
    pub first_pod_at: Option<Timestamp>,
}

/// Count ready and live pods and find the readiness timestamps.
pub fn count_pods(pods: &[Arc<BrokerPod>]) -> PodCounts {
    let mut counts = PodCounts::default();
    for pod in pods {
        let terminating = pod.metadata.deletion_timestamp.is_some();
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
        // A terminating pod still counts: teardown ends when the pods are gone.
        if !matches!(phase, "Succeeded" | "Failed") {
            counts.live += 1;
            if terminating {
                counts.stopping += 1;
            }
        }
        if let Some(created) = &pod.metadata.creation_timestamp {
            counts.first_pod_at = Some(counts.first_pod_at.map_or(created.0, |t| t.min(created.0)));
        }
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready" && c.status == "True"));
        if let Some(ready) = ready
            && !terminating
            && phase == "Running"
        {
            counts.ready += 1;
            let at = ready.last_transition_time.as_ref().map(|t| t.0);
            if let Some(at) = at {
                counts.all_ready_at = Some(counts.all_ready_at.map_or(at, |t| t.max(at)));
                if is_lead(pod) {
                    counts.lead_ready_at = Some(at);
                }
            }
        }
    }
    counts
}

/// A broker pod whose node stopped answering ([`lost_brokers`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LostBroker {
    /// The pod's name.
    pub pod: String,
    /// Its broker's rank (0 the lead; follower `i` is rank `i + 1`), when its pod's name
    /// says.
    pub rank: Option<i32>,
    /// Since when: its Ready condition's last transition, when the node lifecycle controller
    /// marked it.
    pub since: Option<Timestamp>,
    /// The control plane is deleting it: its toleration of its node's `NoExecute` taint
    /// (`node.kubernetes.io/unreachable` or `not-ready`) ran out.
    pub evicted: bool,
}

/// The broker pods lost with their node, in the order given: pods not finished whose Ready
/// condition is False while `ContainersReady` still says True (only the node lifecycle
/// controller writes one without the other: the kubelet, which writes both, is gone), or
/// that the taint manager is deleting for their node's taint. A node that comes back writes
/// its pods' status again, and they are no longer lost.
pub fn lost_brokers(pods: &[Arc<BrokerPod>]) -> Vec<LostBroker> {
    pods.iter()
        .filter_map(|pod| {
            let status = pod.status.as_ref()?;
            if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
                return None;
            }
            let conditions = status.conditions.as_deref().unwrap_or_default();
            let condition = |type_: &str| conditions.iter().find(|c| c.type_ == type_);
            let is = |type_: &str, value: &str| condition(type_).is_some_and(|c| c.status == value);
            let evicted = condition(DISRUPTION_TARGET).is_some_and(|c| {
                c.status == "True" && c.reason.as_deref() == Some(DELETION_BY_TAINT_MANAGER)
            });
            let marked = is("Ready", "False") && is(CONTAINERS_READY, "True");
            (marked || evicted).then(|| LostBroker {
                pod: pod.metadata.name.clone().unwrap_or_default(),
                rank: rank(pod),
                since: condition("Ready")
                    .and_then(|c| c.last_transition_time.as_ref())
                    .map(|t| t.0),
                evicted,
            })
        })
        .collect()
}

/// A broker pod's rank: 0 for the lead, `i + 1` for the follower of completion index `i`,
/// read from its name as the Job controller makes it for an indexed Job
/// (`<job>-<index>-<suffix>`).
fn rank(pod: &BrokerPod) -> Option<i32> {
    if is_lead(pod) {
        return Some(0);
    }
    let name = pod.metadata.name.as_deref()?;
    let (without_suffix, _) = name.rsplit_once('-')?;
    let (_, index) = without_suffix.rsplit_once('-')?;
    index.parse::<i32>().ok().map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A broker pod as the API server sends it, through the watch's trim: `role` lead or
    /// workers (follower index 1), phase, and its conditions as (type, status, reason).
    fn pod(role: &str, phase: &str, conditions: &[(&str, &str, &str)]) -> Arc<BrokerPod> {
        let conditions: Vec<_> = conditions
            .iter()
            .map(|(t, s, r)| {
                json!({"type": t, "status": s, "reason": r,
                       "lastTransitionTime": "2026-12-07T12:00:00Z"})
            })
            .collect();
        let whole: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("m-{role}-0-1-x"), "labels": {
                ROLE_LABEL: role, "other": "x"}},
            "status": {"phase": phase, "conditions": conditions},
        }))
        .expect("a pod");
        Arc::new(BrokerPod::from(whole))
    }

    #[test]
    fn a_broker_is_lost_when_only_the_control_plane_marked_it_or_evicts_it_for_its_node() {
        let marked = [("Ready", "False", ""), ("ContainersReady", "True", "")];
        let evicted = [
            ("Ready", "False", ""),
            ("ContainersReady", "True", ""),
            ("DisruptionTarget", "True", "DeletionByTaintManager"),
        ];
        // (what it proves, the pod, lost as (rank, evicted))
        let cases = [
            (
                "ready: not lost",
                pod(
                    "lead",
                    "Running",
                    &[("Ready", "True", ""), ("ContainersReady", "True", "")],
                ),
                None,
            ),
            (
                "the kubelet says its containers are not ready (a probe, a restart): not lost",
                pod(
                    "workers",
                    "Running",
                    &[
                        ("Ready", "False", ""),
                        ("ContainersReady", "False", "ContainersNotReady"),
                    ],
                ),
                None,
            ),
            (
                "marked not ready alone: a lost follower, rank 2",
                pod("workers", "Running", &marked),
                Some((Some(2), false)),
            ),
            (
                "marked not ready alone: the lost lead, rank 0",
                pod("lead", "Running", &marked),
                Some((Some(0), false)),
            ),
            (
                "evicted for its node's taint",
                pod("workers", "Running", &evicted),
                Some((Some(2), true)),
            ),
            (
                "deleted by the taint manager before any mark",
                pod(
                    "workers",
                    "Running",
                    &[("DisruptionTarget", "True", "DeletionByTaintManager")],
                ),
                Some((Some(2), true)),
            ),
            (
                "a disruption of another kind (preempted): not lost",
                pod(
                    "workers",
                    "Running",
                    &[
                        ("Ready", "True", ""),
                        ("DisruptionTarget", "True", "PreemptionByScheduler"),
                    ],
                ),
                None,
            ),
            (
                "finished: not lost",
                pod("workers", "Succeeded", &marked),
                None,
            ),
            (
                "no conditions yet: not lost",
                pod("workers", "Pending", &[]),
                None,
            ),
        ];
        for (what, pod, want) in cases {
            let got = lost_brokers(&[pod]);
            let got = got.first().map(|b| (b.rank, b.evicted));
            assert_eq!(got, want, "{what}");
        }
        let lost = lost_brokers(&[pod("workers", "Running", &marked)]);
        assert_eq!(lost[0].pod, "m-workers-0-1-x");
        assert_eq!(lost[0].since, Some("2026-12-07T12:00:00Z".parse().unwrap()));
    }
}
