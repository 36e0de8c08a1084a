//! What the status reads from the pods and from Kueue: pod counts and readiness times, the
//! newest lead pod, and the reports its containers leave (restore, save). The status itself
//! is built by the plan ([`super::plan`]'s status decider).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ContainerStatus;

pub use super::watches::kept::BrokerPod;

use crate::api::{JobResult, LEAD_JOB, ROLE_LABEL, RestoreStatus, SaveStatus};

/// Kueue's verdict on the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    /// Whether the Workload is admitted.
    pub admitted: bool,
    /// The reason of the Workload's Admitted (or QuotaReserved) condition.
    pub reason: String,
    /// Its message.
    pub message: String,
    /// When Kueue admitted it (the Workload's Admitted condition).
    pub admitted_at: Option<Timestamp>,
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

/// The termination message a container left: its current run's, or else its last one's.
fn termination_message(c: &ContainerStatus) -> Option<String> {
    [c.state.as_ref(), c.last_state.as_ref()]
        .into_iter()
        .flatten()
        .find_map(|s| s.terminated.as_ref()?.message.clone())
}

/// What the newest lead pod restored: the report its archive init container
/// ([`flux::ARCHIVE_INIT`](crate::model::containers::ARCHIVE_INIT)) left as its termination message (the
/// current run's, or the last failed one's while the kubelet retries it). `None` when no lead
/// pod has reported yet, or it found no archive.
pub fn lead_restore(pods: &[Arc<BrokerPod>]) -> Option<RestoreStatus> {
    let lead = newest_lead(pods)?;
    let init = lead
        .status
        .as_ref()?
        .init_container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == crate::model::containers::ARCHIVE_INIT)?;
    let message = termination_message(init)?;
    let report = crate::flux::ArchiveReport::parse(&message).filter(|r| r.found)?;
    Some(RestoreStatus {
        archive: report.archive,
        pod: lead.metadata.name.clone().unwrap_or_default(),
        pending_jobs: report.pending,
        unfit_jobs: report.unfit,
        canceled_jobs: report.canceled,
        ended_jobs: report.ended,
        error: report.error.unwrap_or_default(),
    })
}

/// The newest lead pod and the status of its container `container` (its Flux container).
fn lead_container<'a>(
    pods: &'a [Arc<BrokerPod>],
    container: &str,
) -> Option<(&'a BrokerPod, &'a ContainerStatus)> {
    let lead = newest_lead(pods)?;
    let status = (lead.status.as_ref()?.container_statuses.as_ref()?)
        .iter()
        .find(|c| c.name == container)?;
    Some((lead, status))
}

/// What the newest lead pod's save reported: the termination message its Flux container
/// (`container`) left when it ended (this run's, or the last one's after a restart).
pub fn lead_save(pods: &[Arc<BrokerPod>], container: &str) -> Option<SaveStatus> {
    let (lead, status) = lead_container(pods, container)?;
    let message = termination_message(status)?;
    let report = crate::flux::SaveReport::parse(&message)?;
    let manifest = report.manifest.unwrap_or_default();
    Some(SaveStatus {
        archive: report.archive,
        pod: lead.metadata.name.clone().unwrap_or_default(),
        saved: report.saved,
        jobs: manifest.jobs,
        bytes: manifest.bytes,
        sha256: manifest.sha256,
        error: report.error.unwrap_or_default(),
    })
}

/// How the newest lead pod's program ended: its Flux container (`container`) terminated, in
/// its current run, with the program's exit code (not [`RETRY_EXIT`](crate::flux::RETRY_EXIT),
/// which is a broker that ended before its job did), and the log's last lines the kubelet
/// kept as its termination message when it failed (a save's report is not output). `None`
/// while the container runs, or when the cluster runs no program.
pub fn lead_result(pods: &[Arc<BrokerPod>], container: &str) -> Option<JobResult> {
    let (lead, status) = lead_container(pods, container)?;
    let ended = status.state.as_ref()?.terminated.as_ref()?;
    if ended.exit_code == crate::flux::RETRY_EXIT {
        return None;
    }
    let message = ended.message.clone().unwrap_or_default();
    let output = if ended.exit_code == 0 || crate::flux::SaveReport::parse(&message).is_some() {
        String::new()
    } else {
        message
    };
    // The kubelet's reason says more than the code only when it is not the plain one.
    let reason = (ended.reason.as_deref())
        .filter(|r| !matches!(*r, "Error" | "Completed"))
        .unwrap_or_default()
        .to_string();
    Some(JobResult {
        exit_code: ended.exit_code,
        reason,
        pod: lead.metadata.name.clone().unwrap_or_default(),
        container: container.to_string(),
        output,
    })
}
