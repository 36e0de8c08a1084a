//! What the status reads from the lead's pods, the followers' Job and Kueue: pod counts and
//! readiness times, the newest lead pod, and the reports its containers leave (restore,
//! save). The status itself is built by the plan ([`super::plan`]'s status decider).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ContainerStatus;

pub use super::watches::kept::{BrokerPod, FollowersJob};

use crate::api::{LEAD_JOB, ROLE_LABEL, RestoreStatus, SaveStatus};

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

/// Count ready and live pods and find the readiness timestamps: the lead's pods one by one,
/// the followers' as their Job counts them. A ready follower's readiness time is not known
/// (its pod is not watched), so with any follower ready `all_ready_at` is `None`: the status
/// then stamps the time it first sees them all ready.
pub fn count_pods(pods: &[Arc<BrokerPod>], followers: Option<&FollowersJob>) -> PodCounts {
    let mut counts = count_each(pods);
    let Some(job) = followers.and_then(|j| j.status.as_ref()) else {
        return counts;
    };
    let (active, ready, terminating) = (
        job.active.unwrap_or(0).max(0),
        job.ready.unwrap_or(0).max(0),
        job.terminating.unwrap_or(0).max(0),
    );
    counts.live += active + terminating;
    counts.stopping += terminating;
    counts.ready += ready;
    if ready > 0 {
        counts.all_ready_at = None;
    }
    counts
}

/// [`count_pods`] of pods seen one by one.
fn count_each(pods: &[Arc<BrokerPod>]) -> PodCounts {
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

/// What the newest lead pod's save reported: the termination message its Flux container
/// (`container`) left when it ended (this run's, or the last one's after a restart).
pub fn lead_save(pods: &[Arc<BrokerPod>], container: &str) -> Option<SaveStatus> {
    let lead = newest_lead(pods)?;
    let status = lead
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == container)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::watches::kept::FollowersJobStatus;

    fn lead(ready_at: Option<&str>, terminating: bool) -> Arc<BrokerPod> {
        let mut pod: BrokerPod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "m-lead-0-0", "namespace": "ns",
                "creationTimestamp": "2026-01-01T00:00:01Z",
                "labels": {ROLE_LABEL: LEAD_JOB}},
            "status": {"phase": "Running", "conditions": ready_at.map(|t| vec![serde_json::json!(
                {"type": "Ready", "status": "True", "lastTransitionTime": t})])}
        }))
        .unwrap();
        if terminating {
            pod.metadata.deletion_timestamp = pod.metadata.creation_timestamp.clone();
        }
        Arc::new(pod)
    }

    fn job(active: i32, ready: i32, terminating: i32) -> FollowersJob {
        FollowersJob {
            status: Some(FollowersJobStatus {
                active: Some(active),
                ready: Some(ready),
                terminating: Some(terminating),
            }),
            ..FollowersJob::default()
        }
    }

    #[test]
    fn the_lead_is_counted_by_its_pod_and_the_followers_by_their_jobs_counts() {
        let t = |s: &str| Some(s.parse::<Timestamp>().unwrap());
        let ready = lead(Some("2026-01-01T00:00:05Z"), false);
        let pending = lead(None, false);
        let leaving = lead(Some("2026-01-01T00:00:05Z"), true);
        let no_status = FollowersJob::default();
        // (what it proves, lead pod, followers' Job, (ready, live, stopping), all ready at)
        #[rustfmt::skip]
        let cases = [
            ("a lead alone: its own readiness time", &ready, None, (1, 1, 0), t("2026-01-01T00:00:05Z")),
            ("a Job not counted yet counts nothing", &ready, Some(&no_status), (1, 1, 0), t("2026-01-01T00:00:05Z")),
            ("followers pending", &ready, Some(&job(3, 0, 0)), (1, 4, 0), t("2026-01-01T00:00:05Z")),
            ("followers ready: when is not known", &ready, Some(&job(3, 3, 0)), (4, 4, 0), None),
            ("followers leaving (a shrink) are live and stopping", &ready, Some(&job(2, 2, 1)), (3, 4, 1), None),
            ("a pending lead is live, not ready", &pending, Some(&job(1, 1, 0)), (1, 2, 0), None),
            ("a lead being deleted is stopping, not ready", &leaving, Some(&job(1, 0, 0)), (0, 2, 1), None),
        ];
        for (what, lead, followers, (r, live, stopping), at) in cases {
            let counts = count_pods(std::slice::from_ref(lead), followers);
            assert_eq!(
                (counts.ready, counts.live, counts.stopping),
                (r, live, stopping),
                "{what}"
            );
            assert_eq!(counts.all_ready_at, at, "{what}");
            assert_eq!(counts.first_pod_at, t("2026-01-01T00:00:01Z"), "{what}");
        }
    }
}
