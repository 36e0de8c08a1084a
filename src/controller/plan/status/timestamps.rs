//! The lifecycle's timestamps: each written once, when first seen, and kept after.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::JobSetState;
use crate::api::MiniClusterStatus;
use crate::controller::observe::pods::PodCounts;

/// Stamp `new` (its phase decided) with the times `old` has, or else those seen now: the
/// first pod's creation, the lead's and every broker's readiness, the JobSet's end, and the
/// teardown (the first time a finished cluster has no pod left).
pub(super) fn stamp(
    new: &mut MiniClusterStatus,
    old: &MiniClusterStatus,
    counts: &PodCounts,
    js: &JobSetState<'_>,
    all_ready: bool,
    now: Timestamp,
) {
    let kept = |t: &Option<Time>, seen: Option<Timestamp>| t.clone().or_else(|| seen.map(Time));
    new.start_time = kept(&old.start_time, counts.first_pod_at);
    new.lead_ready_time = kept(&old.lead_ready_time, counts.lead_ready_at);
    let ready_at = all_ready.then(|| counts.all_ready_at.unwrap_or(now));
    new.ready_time = kept(&old.ready_time, ready_at);
    new.completion_time = old.completion_time.clone().or_else(|| {
        js.completed
            .or(js.failed)
            .map(|c| c.last_transition_time.clone())
    });
    new.teardown_time = old.teardown_time.clone();
    let finished = new.phase.is_some_and(crate::api::Phase::is_finished);
    torn_down(new, finished, counts, now);
}

/// A finished cluster with no pod left is torn down: now, the first time it is seen so.
pub(super) fn torn_down(
    new: &mut MiniClusterStatus,
    finished: bool,
    counts: &PodCounts,
    now: Timestamp,
) {
    if finished && new.teardown_time.is_none() && counts.live == 0 {
        new.teardown_time = Some(Time(now));
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use super::*;
    use crate::api::Phase;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn each_time_is_the_first_seen_and_teardown_waits_for_the_last_pod() {
        let failed = Condition {
            type_: "Failed".into(),
            status: "True".into(),
            reason: String::new(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(at(40)),
        };
        fn js(failed: Option<&Condition>) -> JobSetState<'_> {
            JobSetState {
                exists: true,
                completed: None,
                failed,
                suspended: false,
                workers: 1,
            }
        }
        let counts = |live: i32| PodCounts {
            ready: 2,
            live,
            first_pod_at: Some(at(1)),
            lead_ready_at: Some(at(5)),
            all_ready_at: Some(at(7)),
            ..PodCounts::default()
        };
        let seen_before = MiniClusterStatus {
            start_time: Some(Time(at(0))),
            ready_time: Some(Time(at(3))),
            ..MiniClusterStatus::default()
        };
        let none = MiniClusterStatus::default();
        // (what it proves, old, JobSet failed, all ready, live pods, phase,
        //  start, lead ready, ready, completion, teardown)
        #[rustfmt::skip]
        let cases = [
            ("first seen now", &none, None, true, 2, Phase::Running, Some(1), Some(5), Some(7), None, None),
            ("kept from before", &seen_before, None, true, 2, Phase::Running, Some(0), Some(5), Some(3), None, None),
            ("not all ready: no ready time", &none, None, false, 2, Phase::Starting, Some(1), Some(5), None, None, None),
            ("failed, a pod still there", &none, Some(&failed), false, 1, Phase::Failed, Some(1), Some(5), None, Some(40), None),
            ("failed, no pod left: torn down now", &none, Some(&failed), false, 0, Phase::Failed, Some(1), Some(5), None, Some(40), Some(50)),
        ];
        for (what, old, f, all_ready, live, phase, start, lead, ready, done, down) in cases {
            let mut new = MiniClusterStatus {
                phase: Some(phase),
                ..MiniClusterStatus::default()
            };
            stamp(&mut new, old, &counts(live), &js(f), all_ready, at(50));
            let got = |t: &Option<Time>| t.as_ref().map(|t| t.0);
            assert_eq!(got(&new.start_time), start.map(at), "{what}: start");
            assert_eq!(
                got(&new.lead_ready_time),
                lead.map(at),
                "{what}: lead ready"
            );
            assert_eq!(got(&new.ready_time), ready.map(at), "{what}: ready");
            assert_eq!(
                got(&new.completion_time),
                done.map(at),
                "{what}: completion"
            );
            assert_eq!(got(&new.teardown_time), down.map(at), "{what}: teardown");
        }
    }
}
