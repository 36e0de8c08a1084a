//! The status decider: the whole new status, every condition, from the old status, the
//! JobSet and the pods; and the status of a plan that holds the cluster (`InvalidSpec`,
//! `Blocked`), also when a step of a plan is stopped while it is carried out ([`IfStopped`]).

use std::time::Duration;

use jiff::Timestamp;

use super::super::events;
use super::super::instance;
use super::super::status::{self, set_condition};
use super::{Inputs, Plan};
use crate::api::{MiniCluster, MiniClusterStatus, Phase, condition};
use crate::jobset::JobSet;
use crate::model;

/// How often a cluster waiting for another's archive looks again.
pub const ARCHIVE_RECHECK: Duration = Duration::from_secs(10);
/// How often a cluster held by a foreign object looks again.
pub const FOREIGN_RECHECK: Duration = Duration::from_secs(60);

/// What the other deciders found that the status says.
#[derive(Debug, Default)]
pub(super) struct Findings<'a> {
    /// The JobSet the status is computed from (there, or being created).
    pub jobset: Option<&'a JobSet>,
    /// The certificate Secret's name, once made.
    pub curve_secret: String,
    /// Why the cluster is Degraded (empty: it is not).
    pub degraded: Vec<String>,
    /// The JobSet was made again after a deletion: the `Restarted` message.
    pub restarted: Option<String>,
}

/// The whole new status.
pub(super) fn status(input: &Inputs<'_>, findings: Findings<'_>) -> MiniClusterStatus {
    let mc = input.mc;
    let now = input.now;
    let mut old = input.old.clone();
    if findings.restarted.is_some() {
        // A new Flux instance: its lifecycle starts again, and its first lead pod is not a
        // replacement (the condition below already says why it is new).
        old.phase = None;
        old.start_time = None;
        old.lead_ready_time = None;
        old.ready_time = None;
        if let Some(instance) = old.instance.as_mut() {
            instance.lead_pod.clear();
        }
    }
    let mut new = status::compute(
        mc,
        &old,
        &status::Evidence {
            jobset: findings.jobset,
            pods: &input.observed.pods,
            admission: input.observed.admission.clone(),
        },
        now,
    );
    new.curve_secret = findings.curve_secret;
    let generation = mc.metadata.generation;
    let set = |new: &mut MiniClusterStatus, type_: &str, on: bool, reason: &str, message: &str| {
        set_condition(
            &mut new.conditions,
            type_,
            on,
            reason,
            message,
            generation,
            now,
        );
    };
    let unsupported = model::unsupported(mc);
    set(
        &mut new,
        condition::UNSUPPORTED,
        !unsupported.is_empty(),
        if unsupported.is_empty() {
            "AllSupported"
        } else {
            "FieldsIgnored"
        },
        &super::join(&unsupported),
    );
    set(&mut new, condition::INVALID_SPEC, false, "Valid", "");
    clear(&mut new, condition::BLOCKED, generation, now);
    if findings.degraded.is_empty() {
        clear(&mut new, condition::DEGRADED, generation, now);
    } else {
        let message = findings.degraded.join("; ");
        set(
            &mut new,
            condition::DEGRADED,
            true,
            "OwnedObjectDeleted",
            &message,
        );
    }
    let suspended = findings
        .jobset
        .is_some_and(|j| j.spec.suspend == Some(true));
    let keeps = instance::Keeps {
        archive: Some(mc.spec.archive.path.as_str()).filter(|p| !p.is_empty()),
        state_in_pod: crate::model::containers::keeps_state(mc),
    };
    let seen = instance::lead_seen(mc, &input.observed.pods);
    let (now_instance, restart) =
        instance::next(old.instance.as_ref(), seen.as_ref(), suspended, keeps);
    new.instance = now_instance;
    if let Some(restart) = &restart {
        set(
            &mut new,
            condition::RESTARTED,
            true,
            restart.reason,
            &restart.message,
        );
    }
    if let Some(message) = &findings.restarted {
        set(
            &mut new,
            condition::RESTARTED,
            true,
            "JobSetDeleted",
            message,
        );
    } else if let Some((reason, message)) = restart_over(&new) {
        set(&mut new, condition::RESTARTED, false, reason, &message);
    }
    new
}

/// A `Restarted` cluster whose new instance is up (every broker ready) or finished: the
/// restart is over, and the condition says so (its transition time: when), keeping what
/// happened.
fn restart_over(new: &MiniClusterStatus) -> Option<(&'static str, String)> {
    let is = |type_: &str| {
        new.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    let restarted = new
        .conditions
        .iter()
        .find(|c| c.type_ == condition::RESTARTED && c.status == "True")?;
    let (reason, outcome) = if is(condition::READY) {
        ("NewInstanceUp", "the new instance is up")
    } else if new.phase.is_some_and(Phase::is_finished) {
        ("NewInstanceFinished", "the new instance has finished")
    } else {
        return None;
    };
    Some((reason, format!("{}; {outcome}", restarted.message)))
}

/// A condition that may have been set before is now false (not added if it never was).
fn clear(status: &mut MiniClusterStatus, type_: &str, generation: Option<i64>, now: Timestamp) {
    if status.conditions.iter().any(|c| c.type_ == type_) {
        set_condition(
            &mut status.conditions,
            type_,
            false,
            "Resolved",
            "",
            generation,
            now,
        );
    }
}

/// What a plan writes instead when one of its steps is stopped while it is carried out (an
/// object of one of the cluster's names turns out to be someone else's, or the API server
/// refuses a change for good): the status it started from, held. Part of the plan, so the
/// executor never decides.
#[derive(Clone, Debug)]
pub struct IfStopped {
    old: MiniClusterStatus,
    now: Timestamp,
}

impl IfStopped {
    /// For a plan from `input`.
    pub(super) fn of(input: &Inputs<'_>) -> Self {
        Self {
            old: input.old.clone(),
            now: input.now,
        }
    }

    /// An object the plan meant to create exists and belongs to something else (found when
    /// the create ran: the watches only see labelled objects): "Kind name".
    pub fn foreign(&self, mc: &MiniCluster, object: &str) -> Plan {
        foreign(mc, &self.old, object, self.now)
    }

    /// The API server refused the operator's change (invalid, or an admission webhook said
    /// no): held, `Blocked`, until the spec or the webhook changes.
    pub fn refused(&self, mc: &MiniCluster, message: &str) -> Plan {
        let message = format!("the API server refused the operator's change: {message}");
        held(
            mc,
            &self.old,
            Hold {
                type_: condition::BLOCKED,
                reason: "Refused",
                message: &message,
                requeue: None,
            },
            self.now,
        )
    }
}

/// Why a cluster is held.
pub(super) struct Hold<'a> {
    /// The condition that says so.
    pub type_: &'a str,
    /// Its reason.
    pub reason: &'a str,
    /// Its message.
    pub message: &'a str,
    /// Look again after this long.
    pub requeue: Option<Duration>,
}

/// Nothing is done: the hold's condition says why. The phase stays what it was (Pending for
/// a new cluster): a spec can be fixed and a foreign object can go, neither is final.
pub(super) fn held(
    mc: &MiniCluster,
    old: &MiniClusterStatus,
    hold: Hold<'_>,
    now: Timestamp,
) -> Plan {
    let mut new = old.clone();
    new.observed_generation = mc.metadata.generation;
    new.phase = Some(old.phase.unwrap_or(Phase::Pending));
    set_condition(
        &mut new.conditions,
        hold.type_,
        true,
        hold.reason,
        hold.message,
        mc.metadata.generation,
        now,
    );
    Plan {
        steps: Vec::new(),
        events: events::transitions(mc, old, &new),
        status: new,
        requeue: hold.requeue,
        if_stopped: IfStopped {
            old: old.clone(),
            now,
        },
    }
}

/// The spec is refused: `InvalidSpec`, with what is wrong, naming the fields.
pub(super) fn invalid(input: &Inputs<'_>, message: &str) -> Plan {
    held(
        input.mc,
        input.old,
        Hold {
            type_: condition::INVALID_SPEC,
            reason: "InvalidSpec",
            message,
            requeue: None,
        },
        input.now,
    )
}

/// An object of one of the MiniCluster's names belongs to something else. Nothing watches
/// the other object: look again now and then, in case it goes.
pub(super) fn foreign(
    mc: &MiniCluster,
    old: &MiniClusterStatus,
    object: &str,
    now: Timestamp,
) -> Plan {
    let message = format!(
        "{object} exists and is not owned by this MiniCluster; delete it or rename the MiniCluster"
    );
    held(
        mc,
        old,
        Hold {
            type_: condition::BLOCKED,
            reason: "ForeignObject",
            message: &message,
            requeue: Some(FOREIGN_RECHECK),
        },
        now,
    )
}

/// Another MiniCluster holds this one's archive ([`super::archive`]). Nothing watches the
/// other for this one: look again soon, as a user who deletes it expects this one to start.
pub(super) fn archive_in_use(input: &Inputs<'_>, other: &MiniCluster) -> Plan {
    let path = &input.mc.spec.archive.path;
    let place = crate::model::archive::place(input.mc).unwrap_or_default();
    let message = format!(
        "spec.archive.path {path:?} ({place}) is the archive of MiniCluster {other:?}, which has not finished: two clusters on one archive would both restore its jobs and the last save would win. This cluster starts when {other:?} finishes or is deleted",
        other = other.metadata.name.as_deref().unwrap_or_default()
    );
    held(
        input.mc,
        input.old,
        Hold {
            type_: condition::BLOCKED,
            reason: "ArchiveInUse",
            message: &message,
            requeue: Some(ARCHIVE_RECHECK),
        },
        input.now,
    )
}

/// An object of the MiniCluster's names is still being deleted (a MiniCluster of the same
/// name just went): wait for it, changing nothing.
pub(super) fn waiting(input: &Inputs<'_>) -> Plan {
    Plan {
        steps: Vec::new(),
        status: input.old.clone(),
        events: Vec::new(),
        requeue: Some(Duration::from_secs(2)),
        if_stopped: IfStopped::of(input),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::super::tests::{Mc, Seen, now};
    use super::*;

    fn is_true(status: &MiniClusterStatus, type_: &str) -> Option<bool> {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status == "True")
    }

    #[test]
    fn the_status_says_what_the_deciders_found_and_clears_what_was_resolved() {
        let earlier = Time(now() - jiff::SignedDuration::from_hours(1));
        let mc = Mc::new(2).running().status(|s| {
            s.start_time = Some(earlier.clone());
            for type_ in [condition::BLOCKED, condition::DEGRADED] {
                set_condition(&mut s.conditions, type_, true, "X", "x", None, now());
            }
        });
        let seen = Seen::everything(&mc, 2);
        let old = seen.mc.status.clone().unwrap_or_default();
        let spec = seen.resolve();
        let input = seen.inputs(&spec, &seen.observed, &old);
        let js = seen.observed.jobset.as_deref();
        // (what it proves, the findings, Degraded, Restarted, the phase)
        let cases = [
            (
                "all well: what held it before is resolved",
                Findings {
                    jobset: js,
                    curve_secret: "m-curve".into(),
                    ..Findings::default()
                },
                Some(false),
                None,
                Some(Phase::Running),
            ),
            (
                "something lost: Degraded",
                Findings {
                    jobset: js,
                    degraded: vec!["lost".into()],
                    ..Findings::default()
                },
                Some(true),
                None,
                Some(Phase::Running),
            ),
            (
                "the JobSet made again: Restarted, the lifecycle starts again",
                Findings {
                    jobset: js,
                    restarted: Some("again".into()),
                    ..Findings::default()
                },
                Some(false),
                Some(true),
                Some(Phase::Running),
            ),
        ];
        for (what, findings, degraded, restarted, phase) in cases {
            let restarting = findings.restarted.is_some();
            let new = status(&input, findings);
            assert_eq!(is_true(&new, condition::DEGRADED), degraded, "{what}");
            assert_eq!(is_true(&new, condition::RESTARTED), restarted, "{what}");
            assert_eq!(is_true(&new, condition::BLOCKED), Some(false), "{what}");
            assert_eq!(
                is_true(&new, condition::INVALID_SPEC),
                Some(false),
                "{what}"
            );
            assert_eq!(new.phase, phase, "{what}");
            // Restarted: taken again from the pods seen now, not kept from the old instance.
            assert_eq!(
                new.start_time == Some(earlier.clone()),
                !restarting,
                "{what}"
            );
        }
    }

    #[test]
    fn a_lead_container_restart_seen_after_its_new_instance_is_up_is_counted_and_told() {
        let mc = Mc::new(2).running().status(|s| {
            s.instance = Some(crate::api::InstanceStatus {
                lead_pod: "m-0".into(),
                ..Default::default()
            });
        });
        let mut seen = Seen::everything(&mc, 2);
        let container = match &seen.mc.spec.containers[0].name {
            n if n.is_empty() => seen.mc.metadata.name.clone().unwrap_or_default(),
            n => n.clone(),
        };
        let mut lead = (*seen.observed.pods[0]).clone();
        lead.status.as_mut().unwrap().container_statuses =
            Some(vec![k8s_openapi::api::core::v1::ContainerStatus {
                name: container,
                restart_count: 1,
                ..Default::default()
            }]);
        seen.observed.pods[0] = std::sync::Arc::new(lead);
        let old = seen.mc.status.clone().unwrap_or_default();
        let spec = seen.resolve();
        let input = seen.inputs(&spec, &seen.observed, &old);
        let new = status(
            &input,
            Findings {
                jobset: seen.observed.jobset.as_deref(),
                ..Findings::default()
            },
        );
        assert_eq!(new.instance.as_ref().map(|i| i.restarts), Some(1));
        // Every broker is ready again: the condition is over, and keeps the account.
        let restarted = new
            .conditions
            .iter()
            .find(|c| c.type_ == condition::RESTARTED)
            .expect("a Restarted condition");
        assert_eq!(
            (restarted.status.as_str(), restarted.reason.as_str()),
            ("False", "NewInstanceUp")
        );
        assert!(
            restarted
                .message
                .contains("lead broker's pod m-0 restarted")
                && restarted.message.contains("job history are gone")
                && restarted.message.ends_with("the new instance is up"),
            "{}",
            restarted.message
        );
        let notes = events::transitions(&seen.mc, &old, &new);
        let warned: Vec<_> = notes
            .iter()
            .filter(|n| n.warning)
            .map(|n| n.reason)
            .collect();
        assert_eq!(warned, ["InstanceRestarted"], "{notes:?}");
        // Seen again: nothing new.
        let input = seen.inputs(&spec, &seen.observed, &new);
        let again = status(
            &input,
            Findings {
                jobset: seen.observed.jobset.as_deref(),
                ..Findings::default()
            },
        );
        assert_eq!(again.instance, new.instance);
        assert!(
            events::transitions(&seen.mc, &new, &again)
                .iter()
                .all(|n| !n.warning)
        );
    }

    #[test]
    fn restarted_clears_once_the_new_instance_is_up_or_finished() {
        let with = |phase: Phase, conditions: &[(&str, bool)]| {
            let mut s = MiniClusterStatus {
                phase: Some(phase),
                ..MiniClusterStatus::default()
            };
            for (type_, on) in conditions {
                set_condition(&mut s.conditions, type_, *on, "X", "x", None, now());
            }
            s
        };
        let restarted = (condition::RESTARTED, true);
        // (what it proves, the new status before the check, the reason it clears with)
        let cases = [
            (
                "every broker of the new instance ready",
                with(Phase::Running, &[restarted, (condition::READY, true)]),
                Some("NewInstanceUp"),
            ),
            (
                "the new instance still coming up: still Restarted",
                with(Phase::Starting, &[restarted, (condition::READY, false)]),
                None,
            ),
            (
                "the new instance finished before all were ready",
                with(Phase::Succeeded, &[restarted, (condition::READY, false)]),
                Some("NewInstanceFinished"),
            ),
            (
                "never restarted: nothing to clear",
                with(Phase::Running, &[(condition::READY, true)]),
                None,
            ),
            (
                "cleared before: nothing more",
                with(
                    Phase::Running,
                    &[(condition::RESTARTED, false), (condition::READY, true)],
                ),
                None,
            ),
        ];
        for (what, new, reason) in cases {
            assert_eq!(restart_over(&new).map(|r| r.0), reason, "{what}");
        }
    }

    #[test]
    fn a_held_cluster_keeps_its_phase_and_a_stopped_step_holds_it_the_same_way() {
        let seen = Seen::nothing(&Mc::new(2));
        let old = MiniClusterStatus::default();
        let spec = seen.resolve();
        let input = seen.inputs(&spec, &seen.observed, &old);
        let if_stopped = IfStopped::of(&input);
        // (what it proves, the plan, the condition, the reason, the requeue)
        let cases = [
            (
                "invalid spec",
                invalid(&input, "spec.size: bad"),
                condition::INVALID_SPEC,
                "InvalidSpec",
                None,
            ),
            (
                "a foreign object found by a create",
                if_stopped.foreign(&seen.mc, "JobSet m"),
                condition::BLOCKED,
                "ForeignObject",
                Some(FOREIGN_RECHECK),
            ),
            (
                "refused by the API server",
                if_stopped.refused(&seen.mc, "denied"),
                condition::BLOCKED,
                "Refused",
                None,
            ),
        ];
        for (what, plan, type_, reason, requeue) in cases {
            assert!(plan.steps.is_empty(), "{what}");
            assert_eq!(plan.status.phase, Some(Phase::Pending), "{what}");
            let c = plan
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == type_)
                .unwrap();
            assert_eq!(
                (c.status.as_str(), c.reason.as_str()),
                ("True", reason),
                "{what}"
            );
            assert_eq!(plan.requeue, requeue, "{what}");
            let reasons: Vec<&str> = plan.events.iter().map(|e| e.reason).collect();
            assert_eq!(reasons.len(), 1, "{what}: {reasons:?}");
        }
        assert_eq!(waiting(&input).status, old, "waiting changes nothing");
    }
}
