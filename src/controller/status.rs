//! What the status reads from the newest lead pod: the reports its containers leave (restore,
//! save, the program's result). The pods' counts and Kueue's admission are observed with the
//! rest ([`super::observe`]); the status itself is built by the plan ([`super::plan`]'s status
//! decider).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ContainerStatus;

pub use super::observe::pods::BrokerPod;

use super::observe::pods::newest_lead;
use crate::api::{JobResult, RestoreStatus, SaveStatus};

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
