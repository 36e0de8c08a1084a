//! What a restart did with the old Flux instance's jobs (`status.instance.lastRestart`),
//! counted from Flux's own records, never estimated: the count the crashed instance's lead
//! made of the state the new instance starts from (a restart in the same pod), the count the
//! old lead made as its pod stopped (a replaced pod without an archive), or the archive the
//! new lead restored. What no record holds is said in `uncounted`. Pure.

use super::observe::lead_end::LeadEnd;
use crate::api::{CountedFrom, RestartJobs, RestoreStatus};
use crate::flux::{JobsReport, JobsSource};

/// What a new instance starts from, besides nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Keeps<'a> {
    /// `spec.archive.path`, which a new lead restores.
    pub archive: Option<&'a str>,
    /// The lead keeps the instance's state in its pod ([`crate::model::containers::keeps_state`]):
    /// a restart of its container in the same pod starts the same instance again.
    pub state_in_pod: bool,
}

/// How the new instance replaced the old one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How<'a> {
    /// The lead's Flux container restarted in its pod.
    SamePod,
    /// The lead pod `old` was replaced.
    NewPod {
        /// The old lead pod.
        old: &'a str,
    },
}

/// What the records say, as the status reads them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Evidence<'a> {
    /// The count the crashed run of the lead's Flux container left in its last termination
    /// message (a restart in the same pod).
    pub crashed_run: Option<JobsReport>,
    /// How the last lead pod that ended ended (a replaced pod: the old one's, if it is).
    pub old_lead: Option<&'a LeadEnd>,
    /// What the newest lead pod restored (`spec.archive`).
    pub restore: Option<&'a RestoreStatus>,
}

/// The count when the restart is seen: `pod` is the new instance's lead pod.
pub fn at_restart(
    how: How<'_>,
    pod: &str,
    keeps: Keeps<'_>,
    evidence: Evidence<'_>,
) -> RestartJobs {
    let start = RestartJobs {
        pod: pod.to_string(),
        ..RestartJobs::default()
    };
    match how {
        How::SamePod => in_the_same_pod(start, keeps, evidence.crashed_run),
        How::NewPod { old } => in_a_new_pod(start, old, keeps, evidence),
    }
}

/// The lead's Flux container restarted in its pod: the crashed run counted the state it
/// left (an interactive lead keeps it), or counted its live instance as it was stopped.
fn in_the_same_pod(
    start: RestartJobs,
    keeps: Keeps<'_>,
    crashed_run: Option<JobsReport>,
) -> RestartJobs {
    let uncounted = match (crashed_run, keeps.state_in_pod, keeps.archive) {
        (Some(report), true, _) => {
            return RestartJobs {
                uncounted: after_checkpoint(),
                ..counted(start, report)
            };
        }
        (None, true, _) => "the crashed instance's state could not be counted".to_string(),
        (_, false, Some(_)) => "the new instance restored spec.archive.path in the same pod, \
                                which counts nothing"
            .to_string(),
        (Some(report), false, None) => return counted(start, report),
        (None, false, None) => gone_uncounted(),
    };
    RestartJobs { uncounted, ..start }
}

/// The lead pod `old` was replaced: the archive the new lead restores counts, or else the
/// count the old lead made as its pod stopped.
fn in_a_new_pod(
    start: RestartJobs,
    old: &str,
    keeps: Keeps<'_>,
    evidence: Evidence<'_>,
) -> RestartJobs {
    let old_lead = evidence.old_lead.filter(|e| e.pod == old);
    if keeps.archive.is_some() {
        let uncounted = if old_lead.is_some_and(|e| e.saved) {
            String::new()
        } else {
            format!(
                "what {old} did after the archive was last saved is not in it and is not counted"
            )
        };
        return later(RestartJobs { uncounted, ..start }, keeps, evidence);
    }
    match old_lead.and_then(|e| e.jobs) {
        Some(report) => counted(start, report),
        None => RestartJobs {
            uncounted: gone_uncounted(),
            ..start
        },
    }
}

/// The count after the restart was seen: a replaced lead's archive is counted once the new
/// lead pod has read it.
pub fn later(last: RestartJobs, keeps: Keeps<'_>, evidence: Evidence<'_>) -> RestartJobs {
    let restored = evidence
        .restore
        .filter(|r| r.pod == last.pod && r.error.is_empty());
    match restored {
        Some(r) if last.counted_from.is_none() && keeps.archive.is_some() => RestartJobs {
            counted_from: Some(CountedFrom::Archive),
            kept: r.ended_jobs,
            resumed: r.pending_jobs,
            lost: r.canceled_jobs,
            failed: i32::try_from(r.unfit_jobs.len()).unwrap_or(i32::MAX),
            forgotten: 0,
            ..last
        },
        _ => last,
    }
}

/// The counts of a lead's own report: after a crash, of the state the new instance
/// starts from; as its pod stopped, of the instance the new one has no record of.
fn counted(start: RestartJobs, report: JobsReport) -> RestartJobs {
    match report.source {
        JobsSource::Checkpoint => RestartJobs {
            counted_from: Some(CountedFrom::Checkpoint),
            kept: report.ended,
            resumed: report.pending,
            lost: report.running,
            ..start
        },
        JobsSource::Instance => RestartJobs {
            counted_from: Some(CountedFrom::StoppedInstance),
            lost: report.running,
            forgotten: report.pending + report.ended,
            ..start
        },
    }
}

/// What a count of the checkpoint cannot hold.
fn after_checkpoint() -> String {
    format!(
        "jobs submitted or ended in the last {} before the crash were not yet in the \
         checkpoint: the new instance has no record of them, and they are not counted",
        crate::flux::config::KVS_CHECKPOINT_PERIOD
    )
}

/// The old instance ended without a count.
fn gone_uncounted() -> String {
    "the old instance ended before it could count its jobs (its broker or its node was \
     lost): they are gone, and not counted"
        .to_string()
}

/// The count in words, for the `Restarted` condition and the Event. `restores_archive`: a
/// new lead pod restores `spec.archive`, which it may not have read yet.
pub fn summary(jobs: &RestartJobs, restores_archive: bool) -> String {
    let source = match jobs.counted_from {
        Some(CountedFrom::Checkpoint) => "counted from the state it left",
        Some(CountedFrom::Archive) => "counted from the archive",
        Some(CountedFrom::StoppedInstance) => "counted as its pod stopped",
        None if restores_archive => {
            let mut words = "the old instance's jobs are counted once the new lead has read \
                             the archive (status.instance.lastRestart)"
                .to_string();
            if !jobs.uncounted.is_empty() {
                words.push_str(&format!("; {}", jobs.uncounted));
            }
            return words;
        }
        None => return format!("the old instance's jobs: {}", jobs.uncounted),
    };
    let mut words = format!(
        "the old instance's jobs ({source}): {} kept, {} resumed, {} lost, {} failed, {} \
         forgotten",
        jobs.kept, jobs.resumed, jobs.lost, jobs.failed, jobs.forgotten
    );
    if !jobs.uncounted.is_empty() {
        words.push_str(&format!("; {}", jobs.uncounted));
    }
    words
}

#[cfg(test)]
mod tests;
