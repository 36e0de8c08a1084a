//! The TTL decider: `ttlSecondsAfterFinished`, counted by the operator from the completion
//! its status recorded. The JobSet is never deleted before the status says the cluster
//! finished, so a finished cluster cannot be mistaken for a deleted running one.

use std::time::Duration;

use jiff::Timestamp;

use super::super::owned::controlled_by;
use super::{Inputs, Step};
use crate::model::Cluster;

/// What the TTL decider decides.
#[derive(Debug, Default)]
pub(super) struct Decision {
    /// The deletions due.
    pub steps: Vec<Step>,
    /// Look again when the TTL is over.
    pub requeue: Option<Duration>,
}

/// Decide what the TTL deletes now, or when to look again.
pub(super) fn decide(input: &Inputs<'_>, cluster: &Cluster<'_>) -> Decision {
    let mc = cluster.mc;
    let mut decision = Decision::default();
    let (Some(ttl), Some(done)) = (
        mc.spec.ttl_seconds_after_finished,
        &input.old.completion_time,
    ) else {
        return decision;
    };
    let alive = |meta: &kube::api::ObjectMeta| meta.deletion_timestamp.is_none();
    let jobset_left = input
        .observed
        .jobset
        .as_deref()
        .is_some_and(|js| alive(&js.metadata));
    let job_left = input
        .observed
        .services_job
        .as_deref()
        .is_some_and(|j| controlled_by(j, mc) && alive(&j.metadata));
    if !(jobset_left || job_left) {
        return decision;
    }
    let expires = done
        .0
        .saturating_add(jiff::SignedDuration::from_secs(i64::from(ttl.max(0))))
        .unwrap_or(Timestamp::MAX);
    if input.now >= expires {
        let uid = |meta: &kube::api::ObjectMeta| meta.uid.clone();
        if jobset_left {
            let js = input.observed.jobset.as_deref().map(|j| &j.metadata);
            decision.steps.push(Step::DeleteJobSet(js.and_then(uid)));
        }
        if job_left {
            let job = input.observed.services_job.as_deref().map(|j| &j.metadata);
            decision
                .steps
                .push(Step::DeleteServicesJob(job.and_then(uid)));
        }
    } else {
        decision.requeue =
            Some(Duration::try_from(expires.duration_since(input.now)).unwrap_or_default());
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::super::tests::finished_with_ttl;
    use super::super::tests::now;
    use super::*;

    #[test]
    fn the_ttl_runs_from_the_recorded_completion() {
        let secs = jiff::SignedDuration::from_secs;
        // (what it proves, completion recorded, the TTL, seconds after completion, the
        // deletions, the requeue)
        let cases = [
            (
                "completion not recorded yet: nothing, even with a TTL of 0",
                false,
                Some(0),
                0,
                vec![],
                None,
            ),
            (
                "recorded, before the TTL: look again at the expiry",
                true,
                Some(30),
                10,
                vec![],
                Some(Duration::from_secs(20)),
            ),
            (
                "the TTL over: the JobSet goes, pinned to the UID seen",
                true,
                Some(30),
                30,
                vec!["DeleteJobSet(Some(\"uid-js\"))"],
                None,
            ),
            ("no TTL: it stays", true, None, 3600, vec![], None),
        ];
        for (what, recorded, ttl, after, steps, requeue) in cases {
            let mut seen = finished_with_ttl(recorded);
            seen.mc.spec.ttl_seconds_after_finished = ttl;
            let old = seen.mc.status.clone().unwrap_or_default();
            let spec = seen.resolve();
            let mut input = seen.inputs(&spec, &seen.observed, &old);
            input.now = now() + secs(after);
            let decision = decide(&input, spec.as_ref().unwrap());
            let got: Vec<String> = decision.steps.iter().map(|s| format!("{s:?}")).collect();
            assert_eq!(got, steps, "{what}");
            assert_eq!(decision.requeue, requeue, "{what}");
        }
    }
}
