//! The phase: what the JobSet says first (finished, suspended), then the pods.

use crate::api::Phase;

use super::JobSetState;

/// The phase, from the JobSet, whether every broker is ready (and not suspended), how many
/// broker pods have not finished, the phase before, and whether the lead broker's pod was
/// lost with its node (the instance is gone: Starting, until a new lead's instance is up).
pub(super) fn of(
    js: &JobSetState<'_>,
    all_ready: bool,
    live: i32,
    old: Option<Phase>,
    lead_lost: bool,
) -> Phase {
    if js.completed.is_some() {
        Phase::Succeeded
    } else if js.failed.is_some() {
        Phase::Failed
    } else if js.suspended {
        Phase::Suspended
    } else if all_ready {
        Phase::Running
    } else if lead_lost {
        Phase::Starting
    } else if old == Some(Phase::Running) {
        // A running cluster stays Running while brokers come and go (a resize, a follower
        // restarting, the lead finishing before JobSet marks it Completed): the Ready and
        // Resizing conditions say what is going on. Starting is the first bring-up, or the
        // instance after its lead was lost with its node.
        Phase::Running
    } else if live > 0 {
        Phase::Starting
    } else {
        Phase::Pending
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;

    /// A JobSet condition that is true (what `JobSetState` reads of one).
    fn true_condition() -> Condition {
        Condition {
            type_: "Completed".into(),
            status: "True".into(),
            reason: String::new(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn the_jobset_decides_first_then_the_pods_and_running_stays_running() {
        let done = true_condition();
        let js = |completed: bool, failed: bool, suspended: bool| JobSetState {
            exists: true,
            completed: completed.then_some(&done),
            failed: failed.then_some(&done),
            suspended,
            workers: 1,
        };
        use Phase::*;
        // (what it proves, JobSet completed/failed/suspended, all ready, live pods, old, phase)
        let cases = [
            (
                "completed wins",
                (true, true, true),
                true,
                2,
                Some(Running),
                Succeeded,
            ),
            (
                "failed",
                (false, true, false),
                false,
                1,
                Some(Running),
                Failed,
            ),
            (
                "suspended, even if running before",
                (false, false, true),
                false,
                0,
                Some(Running),
                Suspended,
            ),
            (
                "every broker ready",
                (false, false, false),
                true,
                2,
                None,
                Running,
            ),
            (
                "running stays running while brokers change",
                (false, false, false),
                false,
                1,
                Some(Running),
                Running,
            ),
            (
                "some pods: starting",
                (false, false, false),
                false,
                1,
                Some(Pending),
                Starting,
            ),
            (
                "no pods yet: pending",
                (false, false, false),
                false,
                0,
                None,
                Pending,
            ),
        ];
        for (what, (c, f, s), all_ready, live, old, want) in cases {
            assert_eq!(
                of(&js(c, f, s), all_ready, live, old, false),
                want,
                "{what}"
            );
        }
    }

    #[test]
    fn a_lead_lost_with_its_node_is_not_running_unless_the_jobset_decided() {
        let done = true_condition();
        let js = |completed: bool, suspended: bool| JobSetState {
            exists: true,
            completed: completed.then_some(&done),
            failed: None,
            suspended,
            workers: 1,
        };
        use Phase::*;
        // (what it proves, JobSet completed, suspended, old phase, phase)
        let cases = [
            (
                "running: its instance is gone, Starting",
                false,
                false,
                Some(Running),
                Starting,
            ),
            (
                "never up: still Starting",
                false,
                false,
                Some(Starting),
                Starting,
            ),
            (
                "completed before: stays Succeeded",
                true,
                false,
                Some(Running),
                Succeeded,
            ),
            (
                "suspended: Suspended",
                false,
                true,
                Some(Running),
                Suspended,
            ),
        ];
        for (what, completed, suspended, old, want) in cases {
            assert_eq!(
                of(&js(completed, suspended), false, 2, old, true),
                want,
                "{what}"
            );
        }
        // Its replacement's instance up, the lost pod still Terminating: Running again.
        assert_eq!(
            of(&js(false, false), true, 3, Some(Starting), true),
            Running
        );
    }
}
