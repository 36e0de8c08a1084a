//! The conditions of the status: the one helper that writes them ([`Conditions`]), those read
//! from the JobSet, the pods and Kueue ([`observed`]), and those that say what the other
//! deciders found ([`found`]).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::{Decided, JobSetState};
use crate::api::{
    JobResult, MiniCluster, MiniClusterStatus, Phase, RestoreStatus, condition, reason,
};
use crate::controller::instance::Restart;
use crate::controller::observe::admission::Admission;
use crate::controller::observe::pods::{LostBroker, PodCounts};

/// The one way the status's conditions are written: each true or false with its reason and
/// message, stamped with the MiniCluster's generation; a condition's transition time moves
/// only when its status does.
pub(in crate::controller) struct Conditions<'a> {
    list: &'a mut Vec<Condition>,
    generation: Option<i64>,
    now: Timestamp,
}

impl<'a> Conditions<'a> {
    /// The conditions in `list`, written for `generation` at `now`.
    pub fn of(list: &'a mut Vec<Condition>, generation: Option<i64>, now: Timestamp) -> Self {
        Self {
            list,
            generation,
            now,
        }
    }

    /// Set (or update) a condition.
    pub fn set(&mut self, type_: &str, on: bool, reason: &str, message: &str) {
        let status = if on { "True" } else { "False" };
        let reason = if reason.is_empty() { "Unknown" } else { reason };
        let now = Time(self.now);
        match self.list.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => {
                if c.status != status {
                    c.last_transition_time = now;
                }
                c.status = status.to_string();
                c.reason = reason.to_string();
                c.message = message.to_string();
                c.observed_generation = self.generation;
            }
            None => self.list.push(Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message: message.to_string(),
                observed_generation: self.generation,
                last_transition_time: now,
            }),
        }
    }

    /// A condition that may have been set before is now false, `Resolved` (not added if it
    /// never was).
    pub fn clear(&mut self, type_: &str) {
        if self.list.iter().any(|c| c.type_ == type_) {
            self.set(type_, false, reason::RESOLVED, "");
        }
    }
}

/// What the observed conditions are written from.
pub(super) struct Observation<'a> {
    pub mc: &'a MiniCluster,
    /// How the lead's program ended, once the cluster has finished.
    pub result: Option<&'a JobResult>,
    pub jobset: &'a JobSetState<'a>,
    pub counts: &'a PodCounts,
    pub phase: Phase,
    /// Every broker's pod ready, and not suspended.
    pub all_ready: bool,
    /// Kueue's verdict, if the JobSet is queued.
    pub admission: Option<&'a Admission>,
    /// Every broker was ready once: from then on, more or fewer pods is a resize.
    pub was_ready: bool,
    /// The broker pods lost with their node.
    pub lost: &'a [LostBroker],
}

/// The conditions read from the JobSet, the pods and Kueue: `Ready`, `Suspended`,
/// `Admitted`, `Resizing`, `BrokersLost`, and `Succeeded` or `Failed`.
pub(super) fn observed(c: &mut Conditions<'_>, o: &Observation<'_>) {
    ready(c, o);
    lost(c, o);
    suspended(c, o);
    if let Some(a) = o.admission {
        c.set(condition::ADMITTED, a.admitted, &a.reason, &a.message);
    }
    resizing(c, o);
    if let Some(done) = o.jobset.completed {
        c.set(
            condition::SUCCEEDED,
            true,
            reason::LEAD_BROKER_COMPLETED,
            &done.message,
        );
    }
    if let Some(failed) = o.jobset.failed {
        match o.result.filter(|r| r.exit_code != 0) {
            Some(r) => c.set(
                condition::FAILED,
                true,
                reason::JOB_FAILED,
                &job_failed_message(r),
            ),
            None => c.set(condition::FAILED, true, &failed.reason, &failed.message),
        }
    }
}

/// The `Failed` message of a job that failed: its exit code, and where its output is.
fn job_failed_message(r: &JobResult) -> String {
    let reason = if r.reason.is_empty() {
        String::new()
    } else {
        format!(" ({})", r.reason)
    };
    format!(
        "the job exited with code {}{reason} in the lead broker's pod; its output: {}",
        r.exit_code,
        r.logs_command()
    )
}

fn ready(c: &mut Conditions<'_>, o: &Observation<'_>) {
    let why = if o.all_ready {
        reason::BROKERS_READY
    } else {
        reason::BROKERS_NOT_READY
    };
    let message = format!("{} of {} broker pods ready", o.counts.ready, o.mc.spec.size);
    c.set(
        condition::READY,
        o.all_ready && !o.phase.is_finished(),
        why,
        &message,
    );
}

/// `BrokersLost` while broker pods are lost with their node (which, their ranks, since when,
/// what follows); over (`Resolved`) once none is: their node came back, or they were
/// replaced.
fn lost(c: &mut Conditions<'_>, o: &Observation<'_>) {
    // Over once every broker is ready again (replacements up, the lost pods' ghosts left
    // Terminating until their node answers or is deleted), or the cluster finished.
    if o.lost.is_empty() || o.all_ready || o.phase.is_finished() {
        c.clear(condition::BROKERS_LOST);
        return;
    }
    let lead = o.lost.iter().any(|b| b.rank == Some(0));
    let pods = o.lost.iter().map(lost_one).collect::<Vec<_>>().join(", ");
    let evicting = o.lost.iter().any(|b| b.evicted);
    let next = if evicting {
        "the control plane is deleting them (their toleration of the node's taint ran out); \
         their Jobs replace them once they have ended, which a pod of a node that does not \
         answer never does by itself: when the node comes back, is deleted, or is declared \
         out of service (kubectl taint nodes NODE \
         node.kubernetes.io/out-of-service=nodeshutdown:NoExecute)"
    } else {
        "the control plane evicts them once their toleration of the node's taint runs out \
         (node.kubernetes.io/unreachable: 300 s unless spec.pod.tolerations sets one)"
    };
    let (why, message) = if lead {
        (
            reason::LEAD_BROKER_LOST,
            format!(
                "broker pods lost with their node (it stopped answering): {pods}; the lead \
                 broker was one, and the Flux instance with it: its jobs are lost (an \
                 archive holds only what a lead saved when it stopped); {next}"
            ),
        )
    } else {
        (
            reason::FOLLOWERS_LOST,
            format!(
                "broker pods lost with their node (it stopped answering): {pods}; the \
                 instance goes on without their ranks, and Flux fails the jobs that ran on \
                 them (an exec exception: node failure); {next}"
            ),
        )
    };
    c.set(condition::BROKERS_LOST, true, why, &message);
}

/// One lost broker as the message names it: its pod, rank and since when.
fn lost_one(b: &LostBroker) -> String {
    let rank = b.rank.map(|r| format!(" (rank {r})")).unwrap_or_default();
    let since = b.since.map(|t| format!(" since {t}")).unwrap_or_default();
    format!("{}{rank}{since}", b.pod)
}

fn suspended(c: &mut Conditions<'_>, o: &Observation<'_>) {
    let (why, message) = if o.jobset.suspended {
        let message = match o.admission {
            Some(a) if !a.admitted => format!("waiting for Kueue admission: {}", a.message),
            _ if o.mc.spec.suspend => "spec.suspend is true".to_string(),
            _ => "the JobSet is suspended".to_string(),
        };
        (reason::JOBSET_SUSPENDED, message)
    } else {
        (
            reason::JOBSET_RUNNING,
            "the JobSet may run pods".to_string(),
        )
    };
    c.set(condition::SUSPENDED, o.jobset.suspended, why, &message);
}

fn resizing(c: &mut Conditions<'_>, o: &Observation<'_>) {
    let (counts, size) = (o.counts, o.mc.spec.size);
    let resizing = o.jobset.exists
        && !o.phase.is_finished()
        && !o.jobset.suspended
        && counts.live != size
        && o.was_ready
        // Pods lost with their node are no resize: `BrokersLost` says what happens.
        && o.lost.is_empty();
    let draining = resizing && counts.stopping > 0;
    let (why, message) = if draining {
        let message = format!(
            "{} broker pods for size {size}; {} stopping: their ranks are drained and their \
             jobs have up to {}s to finish (spec.drainGracePeriodSeconds)",
            counts.live,
            counts.stopping,
            o.mc.drain_grace_seconds()
        );
        (reason::BROKERS_DRAINING, message)
    } else if o.phase.is_finished() {
        // Its pods stop as it ends: a count of them would read like a resize under way.
        let message = format!("the MiniCluster has finished ({})", o.phase.as_str());
        (reason::STABLE, message)
    } else {
        let why = if resizing {
            reason::BROKERS_CHANGING
        } else {
            reason::STABLE
        };
        (why, format!("{} broker pods for size {size}", counts.live))
    };
    c.set(condition::RESIZING, resizing, why, &message);
}

/// The conditions that say what the other deciders found: `Unsupported`, `InvalidSpec`
/// (false: the plan goes on), `Blocked` (over), `Degraded`, `Restored` (the archive the lead
/// pod read or refused), and `Restarted` (a new instance: its JobSet made again, or its lead
/// broker restarted; over once it is up).
pub(super) fn found(
    new: &mut MiniClusterStatus,
    mc: &MiniCluster,
    decided: &Decided<'_>,
    restart: Option<&Restart>,
    now: Timestamp,
) {
    let mut c = Conditions::of(&mut new.conditions, mc.metadata.generation, now);
    let unsupported = crate::model::unsupported(mc);
    let why = if unsupported.is_empty() {
        reason::ALL_SUPPORTED
    } else {
        reason::FIELDS_IGNORED
    };
    let message = super::super::join(&unsupported);
    c.set(
        condition::UNSUPPORTED,
        !unsupported.is_empty(),
        why,
        &message,
    );
    c.set(condition::INVALID_SPEC, false, reason::VALID, "");
    c.clear(condition::BLOCKED);
    if decided.degraded.is_empty() {
        c.clear(condition::DEGRADED);
    } else {
        let message = decided.degraded.join("; ");
        c.set(
            condition::DEGRADED,
            true,
            reason::OWNED_OBJECT_DELETED,
            &message,
        );
    }
    restored(&mut c, new.restore.as_ref());
    if let Some(restart) = restart {
        c.set(condition::RESTARTED, true, restart.reason, &restart.message);
    }
    if let Some(message) = &decided.restarted {
        c.set(condition::RESTARTED, true, reason::JOBSET_DELETED, message);
        return;
    }
    if let Some((why, message)) = restart_over(new) {
        let mut c = Conditions::of(&mut new.conditions, mc.metadata.generation, now);
        c.set(condition::RESTARTED, false, why, &message);
    }
}

/// `Restored`, once a lead pod reported the archive it found: read (what its broker restores)
/// or refused (why, as the pod said: a bound of `spec.archive.restoreLimits` by its path).
pub(super) fn restored(c: &mut Conditions<'_>, restore: Option<&RestoreStatus>) {
    let Some(r) = restore else { return };
    if r.error.is_empty() {
        let message = format!(
            "lead pod {} restores archive {}: {} pending jobs, {} canceled by the save, {} \
             ended before it",
            r.pod, r.archive, r.pending_jobs, r.canceled_jobs, r.ended_jobs
        );
        c.set(condition::RESTORED, true, reason::ARCHIVE_READ, &message);
    } else {
        let message = format!(
            "lead pod {} refused archive {}: {}",
            r.pod, r.archive, r.error
        );
        c.set(
            condition::RESTORED,
            false,
            reason::ARCHIVE_REFUSED,
            &message,
        );
    }
}

/// A `Restarted` cluster whose new instance is up (every broker ready) or finished: the
/// restart is over, and the condition says so (its transition time: when), keeping what
/// happened.
pub(super) fn restart_over(new: &MiniClusterStatus) -> Option<(&'static str, String)> {
    let is = |type_: &str| {
        new.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    let restarted = new
        .conditions
        .iter()
        .find(|c| c.type_ == condition::RESTARTED && c.status == "True")?;
    let (why, outcome) = if is(condition::READY) {
        (reason::NEW_INSTANCE_UP, "the new instance is up")
    } else if new.phase.is_some_and(Phase::is_finished) {
        (
            reason::NEW_INSTANCE_FINISHED,
            "the new instance has finished",
        )
    } else {
        return None;
    };
    Some((why, format!("{}; {outcome}", restarted.message)))
}
