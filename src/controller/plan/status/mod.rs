//! The status decider: the whole new status of a cluster the plan goes on with, from the
//! status the last reconcile wrote, what the other deciders found, the JobSet, the pods and
//! Kueue. One builder, [`status`], in three parts: the [`phase`], the lifecycle's
//! [`timestamps`], and the [`conditions`] (with [`Conditions`], the one way a condition is
//! written). A held cluster's status is [`super::hold`]'s.

mod conditions;
mod phase;
#[cfg(test)]
mod tests;
mod timestamps;

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

pub(in crate::controller) use conditions::Conditions;

use super::Inputs;
use crate::api::{JobResult, MiniCluster, MiniClusterStatus, Phase, WORKERS_JOB};
use crate::controller::observe::admission::Admission;
use crate::controller::observe::jobset::ObservedJobSet;
use crate::controller::observe::pods::{BrokerPod, count_pods, lost_brokers};
use crate::controller::status::{lead_restore, lead_result, lead_save};
use crate::controller::{instance, restart_jobs};
use crate::render;

/// What the other deciders decided that the status says.
#[derive(Debug, Default)]
pub(super) struct Decided<'a> {
    /// The JobSet the status is computed from (there, or being created).
    pub jobset: Option<&'a ObservedJobSet>,
    /// The certificate Secret's name, once made.
    pub curve_secret: String,
    /// Why the cluster is Degraded (empty: it is not).
    pub degraded: Vec<String>,
    /// The JobSet was made again after a deletion: the `Restarted` message.
    pub restarted: Option<String>,
}

/// What the status reads of the JobSet.
pub(super) struct JobSetState<'a> {
    /// There is one.
    exists: bool,
    /// Its `Completed` condition, when true.
    completed: Option<&'a Condition>,
    /// Its `Failed` condition, when true.
    failed: Option<&'a Condition>,
    /// It is suspended (by `spec.suspend`, or by Kueue until admitted).
    suspended: bool,
    /// Its followers' Job's parallelism.
    workers: i32,
}

impl<'a> JobSetState<'a> {
    fn of(js: Option<&'a ObservedJobSet>) -> Self {
        let true_ = |type_| js?.condition(type_).filter(|c| c.status == "True");
        let workers = js
            .and_then(|j| {
                j.spec
                    .replicated_jobs
                    .iter()
                    .find(|r| r.name == WORKERS_JOB)
            })
            .and_then(|r| r.template.spec.as_ref()?.parallelism);
        Self {
            exists: js.is_some(),
            completed: true_("Completed"),
            failed: true_("Failed"),
            suspended: js.is_some_and(|j| j.spec.suspend == Some(true)),
            workers: workers.unwrap_or(0),
        }
    }

    /// The size it runs: the lead and its followers (0 without a JobSet).
    fn size(&self) -> i32 {
        if self.exists {
            1 + self.workers.max(0)
        } else {
            0
        }
    }
}

/// The whole new status.
pub(super) fn status(input: &Inputs<'_>, mut decided: Decided<'_>) -> MiniClusterStatus {
    let (mc, pods, now) = (input.mc, &input.observed.pods, input.now);
    let old = of_this_instance(input.old, decided.restarted.is_some());
    let admission = input.observed.admission.as_ref();
    let mut new = observed(mc, &old, decided.jobset, pods, admission, now);
    new.curve_secret = std::mem::take(&mut decided.curve_secret);
    let keeps = restart_jobs::Keeps {
        archive: Some(mc.spec.archive.path.as_str()).filter(|p| !p.is_empty()),
        state_in_pod: crate::model::containers::keeps_state(mc),
    };
    let suspended = JobSetState::of(decided.jobset).suspended;
    let seen = instance::lead_seen(mc, pods);
    let evidence = restart_jobs::Evidence {
        crashed_run: seen.as_ref().and_then(|s| s.counted),
        old_lead: input.observed.lead_end.as_ref(),
        restore: new.restore.as_ref(),
    };
    let (instance, restart) = instance::next(
        old.instance.as_ref(),
        seen.as_ref(),
        suspended,
        keeps,
        evidence,
    );
    new.instance = instance;
    conditions::found(&mut new, mc, &decided, restart.as_ref(), now);
    new
}

/// The status to write: `new`, unless no status was written yet (`old` is the API server's
/// default, `phase: Pending`) and `new` says no more than that: Pending, no condition true,
/// no broker seen. Then nothing is written yet, and the API server goes on showing Pending.
/// A new cluster whose objects are made and whose JobSet has no pods yet costs no status
/// write; its first status says what happened next (its brokers starting or all ready,
/// suspended, queued, a condition true). Names and counts the unwritten status lacks
/// (`jobSet`, `curveSecret`, `observedGeneration`) are the MiniCluster's name plus a fixed
/// suffix, or come with that first write.
pub(super) fn to_write(old: &MiniClusterStatus, new: MiniClusterStatus) -> MiniClusterStatus {
    if old.is_unwritten() && only_pending(&new) {
        old.clone()
    } else {
        new
    }
}

/// Whether `status` says only that the cluster is Pending and nothing is wrong (Pending has
/// no live broker pod, so none ready: [`phase::of`]).
fn only_pending(status: &MiniClusterStatus) -> bool {
    status.phase == Some(Phase::Pending)
        && status.conditions.iter().all(|c| c.status != "True")
        && status.instance.is_none()
        && status.restore.is_none()
        && status.last_save.is_none()
        && status.start_time.is_none()
}

/// The status the last reconcile wrote, as the new status starts from it: when the JobSet
/// was made again (`restarted`), a new Flux instance, whose lifecycle starts again and whose
/// first lead pod is not a replacement (`Restarted` already says why it is new).
fn of_this_instance(old: &MiniClusterStatus, restarted: bool) -> MiniClusterStatus {
    let mut old = old.clone();
    if restarted {
        old.phase = None;
        old.start_time = None;
        old.lead_ready_time = None;
        old.ready_time = None;
        if let Some(instance) = old.instance.as_mut() {
            instance.lead_pod.clear();
        }
    }
    old
}

/// The status read from the JobSet, the pods and Kueue, keeping what `old` saw first.
fn observed(
    mc: &MiniCluster,
    old: &MiniClusterStatus,
    jobset: Option<&ObservedJobSet>,
    pods: &[Arc<BrokerPod>],
    admission: Option<&Admission>,
    now: Timestamp,
) -> MiniClusterStatus {
    let counts = count_pods(pods);
    let lost = lost_brokers(pods);
    if jobset.is_none() && old.completion_time.is_some() {
        // Finished, and its JobSet is gone (ttlSecondsAfterFinished): it stays finished.
        let mut new = old.clone();
        timestamps::torn_down(&mut new, true, &counts, now);
        new.ready_brokers = 0;
        return new;
    }
    let js = JobSetState::of(jobset);
    let all_ready = counts.ready >= mc.spec.size && !js.suspended;
    let lead_lost = lost.iter().any(|b| b.rank == Some(0));
    let phase = phase::of(&js, all_ready, counts.live, old.phase, lead_lost);
    let container = crate::model::containers::flux_container_name(mc);
    let mut new = MiniClusterStatus {
        observed_generation: mc.metadata.generation,
        phase: Some(phase),
        size: js.size(),
        selector: render::pod_selector(mc),
        maximum_size: mc.max_size(),
        ready_brokers: if phase.is_finished() { 0 } else { counts.ready },
        job_set: jobset
            .and_then(|j| j.metadata.name.clone())
            .unwrap_or_default(),
        curve_secret: old.curve_secret.clone(),
        lead_broker: crate::flux::config::lead_hostname(mc),
        // Stamped below.
        start_time: None,
        lead_ready_time: None,
        ready_time: None,
        completion_time: None,
        teardown_time: None,
        restore: lead_restore(pods).or_else(|| old.restore.clone()),
        last_save: lead_save(pods, container).or_else(|| old.last_save.clone()),
        result: job_result(mc, old, phase, pods, container),
        instance: old.instance.clone(),
        conditions: old.conditions.clone(),
    };
    timestamps::stamp(&mut new, old, &counts, &js, all_ready, now);
    let observation = conditions::Observation {
        mc,
        result: new.result.as_ref(),
        jobset: &js,
        counts: &counts,
        phase,
        all_ready,
        admission,
        was_ready: old.ready_time.is_some(),
        lost: &lost,
    };
    let generation = mc.metadata.generation;
    conditions::observed(
        &mut Conditions::of(&mut new.conditions, generation, now),
        &observation,
    );
    new
}

/// The job's result: the first one seen once the cluster has finished, kept from then on. A
/// cluster that runs no program (interactive) has none.
fn job_result(
    mc: &MiniCluster,
    old: &MiniClusterStatus,
    phase: Phase,
    pods: &[Arc<BrokerPod>],
    container: &str,
) -> Option<JobResult> {
    let runs_program = crate::model::containers::mode(mc).is_ok_and(|m| m.runs_program());
    if !runs_program || !phase.is_finished() {
        return None;
    }
    old.result.clone().or_else(|| lead_result(pods, container))
}
