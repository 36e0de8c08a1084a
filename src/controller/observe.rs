//! Lifecycle durations, from API timestamps. Each duration is observed
//! when the status field that records its moment first appears, so it counts once (the
//! reconciler reads the MiniCluster fresh, and the status survives operator restarts).

use jiff::Timestamp;

use super::status;
use crate::api::{MiniCluster, MiniClusterStatus, condition};
use crate::jobset::JobSet;
use crate::metrics::Metrics;

pub(super) fn seconds_between(from: &Timestamp, to: &Timestamp) -> f64 {
    (to.as_millisecond() - from.as_millisecond()) as f64 / 1000.0
}

/// Record each lifecycle duration the first time its status timestamp appears.
pub(super) fn observe_durations(
    mc: &MiniCluster,
    metrics: &Metrics,
    ns: &str,
    old: &MiniClusterStatus,
    new: &MiniClusterStatus,
    jobset: Option<&JobSet>,
    admission: Option<&status::Admission>,
) {
    let Some(created) = mc.metadata.creation_timestamp.as_ref().map(|t| t.0) else {
        return;
    };
    if old.job_set.is_empty()
        && !new.job_set.is_empty()
        && let Some(js_created) = jobset.and_then(|j| j.metadata.creation_timestamp.as_ref())
    {
        Metrics::observe(
            &metrics.jobset_created,
            ns,
            seconds_between(&created, &js_created.0),
        );
    }
    if old.lead_ready_time.is_none()
        && let Some(t) = &new.lead_ready_time
    {
        Metrics::observe(&metrics.lead_ready, ns, seconds_between(&created, &t.0));
    }
    let admitted_at = admission.and_then(|a| a.admitted_at);
    if old.ready_time.is_none()
        && let Some(up) = &new.ready_time
    {
        Metrics::observe(&metrics.cluster_up, ns, seconds_between(&created, &up.0));
        if let Some(at) = admitted_at {
            Metrics::observe(&metrics.admission_to_up, ns, seconds_between(&at, &up.0));
        }
    }
    let was_admitted = old
        .conditions
        .iter()
        .any(|c| c.type_ == condition::ADMITTED && c.status == "True");
    // The first admission only: a readmission after an eviction is not time spent queued
    // since creation.
    if !was_admitted
        && old.start_time.is_none()
        && let Some(at) = admitted_at
    {
        Metrics::observe(&metrics.admission_wait, ns, seconds_between(&created, &at));
    }
    if old.teardown_time.is_none()
        && let (Some(done), Some(gone)) = (&new.completion_time, &new.teardown_time)
    {
        Metrics::observe(&metrics.teardown, ns, seconds_between(&done.0, &gone.0));
    }
}
