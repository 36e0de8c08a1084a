//! The JobSet decider: created once; deleted under a cluster that had not finished, created
//! again, loudly (`Restarted`: a new Flux instance, the lifecycle timestamps start again);
//! while it runs, only the followers' size and (outside Kueue) `suspend` change, and not
//! while the generated certificate's Secret is missing (the new pods would wait for it).

use std::borrow::Cow;

use super::{Inputs, Lifecycle, Step};
use crate::api::{KUEUE_QUEUE_LABEL, Phase, WORKERS_JOB};
use crate::controller::observe::jobset::ObservedJobSet;
use crate::model::Cluster;
use crate::render::jobset::Change;
use crate::render::{self, Desired};

/// What the JobSet decider decides.
#[derive(Debug, Default)]
pub(super) struct Decision<'d> {
    /// Create or update it.
    pub step: Option<Step>,
    /// The JobSet the status is computed from: the one there, or the one being created
    /// (`None`: the cluster finished and its JobSet went).
    pub for_status: Option<Cow<'d, ObservedJobSet>>,
    /// Made again after a deletion: the `Restarted` message.
    pub restarted: Option<String>,
    /// A change held because the certificate Secret is missing: why (`Degraded`).
    pub held: Option<String>,
}

/// Whether Kueue manages this JobSet (it carries a queue name).
fn is_queued(js: &ObservedJobSet) -> bool {
    js.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(KUEUE_QUEUE_LABEL))
}

/// Whether `change` would change the observed JobSet.
pub(in crate::controller) fn needs(change: &Change, observed: &ObservedJobSet) -> bool {
    let suspend_moves = change
        .suspend
        .is_some_and(|s| observed.spec.suspend.unwrap_or(false) != s);
    let followers = observed
        .spec
        .replicated_jobs
        .iter()
        .find(|r| r.name == WORKERS_JOB)
        .and_then(|r| r.template.spec.as_ref());
    let followers_move = match (change.followers, followers) {
        (Some(n), Some(job)) => job.parallelism != Some(n) || job.completions != Some(n),
        _ => false,
    };
    suspend_moves || followers_move
}

/// Decide the JobSet; `certificate_lost`: the generated certificate's Secret is gone.
pub(super) fn decide<'d>(
    input: &Inputs<'_>,
    cluster: &Cluster<'_>,
    life: &Lifecycle<'d>,
    desired: &'d Desired,
    certificate_lost: bool,
) -> Decision<'d> {
    let mc = cluster.mc;
    let old = input.old;
    let mut decision = Decision::default();
    match life.jobset {
        // Finished, and its JobSet went (ttlSecondsAfterFinished, or deleted): it stays
        // finished and never runs again.
        None if old.completion_time.is_some() => {}
        None => {
            if !old.job_set.is_empty() {
                decision.restarted = Some(format!(
                    "JobSet {} was deleted while the cluster was {}; it was recreated: a new \
                     Flux instance starts and the old instance's jobs are gone",
                    mc.name(),
                    old.phase.map_or("Pending", Phase::as_str)
                ));
            }
            decision.step = Some(Step::CreateJobSet(Box::new(desired.jobset.clone())));
            decision.for_status = Some(Cow::Owned((&desired.jobset).into()));
        }
        Some(js) => {
            decision.for_status = Some(Cow::Borrowed(js));
            if life.finished {
                return decision;
            }
            let queued = input.observed.admission.is_some() || is_queued(js);
            let suspend = (!queued).then_some(cluster.jobs.suspend);
            if let Some(change) = render::jobset::change(cluster, suspend)
                && needs(&change, js)
            {
                if certificate_lost {
                    decision.held = Some(
                        "the change to the JobSet (size or suspend) is held: its new pods would \
                         wait for the deleted certificate Secret"
                            .to_string(),
                    );
                } else {
                    decision.step = Some(Step::UpdateJobSet(change.apply(mc)));
                }
            }
        }
    }
    decision
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::super::tests::{Mc, Seen, completed, now};
    use super::*;

    #[test]
    fn a_change_is_needed_when_the_followers_count_or_suspend_differs_from_the_jobset() {
        let mc = Mc::new(3).max_size(6).0;
        let cluster = crate::fixtures::cluster(&mc);
        let made = ObservedJobSet::from(&crate::render::jobset::jobset(&cluster, "m-flux-0"));
        let change = |followers, suspend| Change { followers, suspend };
        // (what it proves, the change, whether it is needed)
        let cases = [
            ("as made: no", change(Some(2), Some(false)), false),
            (
                "Kueue owns suspend, size as made: no",
                change(Some(2), None),
                false,
            ),
            ("the followers grow", change(Some(4), Some(false)), true),
            ("the followers shrink (Kueue)", change(Some(1), None), true),
            ("suspended", change(Some(2), Some(true)), true),
            (
                "a lone lead: suspend alone, as made",
                change(None, Some(false)),
                false,
            ),
        ];
        for (what, change, needed) in cases {
            assert_eq!(needs(&change, &made), needed, "{what}");
        }
    }

    #[test]
    // Long: a table, one case per rule.
    fn the_jobset_is_made_once_made_again_loudly_and_changed_only_in_size_and_suspend() {
        let running = Mc::new(2).max_size(4).running();
        let finished = Mc::new(2).max_size(4).running().status(|s| {
            s.phase = Some(Phase::Succeeded);
            s.completion_time = Some(Time(now()));
        });
        let resized = |lost: bool| {
            let mut seen = Seen::everything(&running, 2);
            seen.mc.spec.size = 3;
            (seen, lost)
        };
        // (what it proves, what the watches hold and whether the certificate is lost, the
        // step, restarted, held)
        let finished_resized = {
            let (seen, lost) = resized(false);
            (seen.jobset(completed), lost)
        };
        #[rustfmt::skip]
        let cases = [
            ("a new cluster: created", (Seen::nothing(&Mc::new(2)), false), Some("create"), false, false),
            ("running as asked: nothing", (Seen::everything(&running, 2), false), None, false, false),
            ("resized: updated", resized(false), Some("update"), false, false),
            ("resized while the certificate is lost: held, saying why", resized(true), None, false, true),
            ("deleted under a running cluster: created again, Restarted", (Seen::everything(&running, 0).without_jobset(), false), Some("create"), true, false),
            ("finished and gone: never again", (Seen::everything(&finished, 0).without_jobset(), false), None, false, false),
            ("finished, resized: nothing changes any more", finished_resized, None, false, false),
        ];
        for (what, (seen, lost), step, restarted, held) in cases {
            let old = seen.mc.status.clone().unwrap_or_default();
            let spec = seen.resolve();
            let cluster = spec.as_ref().unwrap();
            let input = seen.inputs(&spec, &seen.observed, &old);
            let desired = render::desired(cluster).unwrap();
            let decision = decide(&input, cluster, &Lifecycle::of(&input), &desired, lost);
            let got = decision.step.as_ref().map(|s| match s {
                Step::CreateJobSet(_) => "create",
                Step::UpdateJobSet(_) => "update",
                _ => "other",
            });
            assert_eq!(got, step, "{what}");
            assert_eq!(decision.restarted.is_some(), restarted, "{what}");
            assert_eq!(decision.held.is_some(), held, "{what}");
        }
    }
}
