//! A cluster the plan holds: its spec refused (`InvalidSpec`), or something in its way
//! (`Blocked`: a foreign object, its archive in use, the API server's refusal, also when a
//! step of a plan is stopped while it is carried out, [`IfStopped`]); or waiting, changing
//! nothing, for an object of its names to go.

use std::time::Duration;

use jiff::Timestamp;

use super::super::events;
use super::status::Conditions;
use super::{Inputs, Plan};
use crate::api::{MiniCluster, MiniClusterStatus, Phase, condition, reason};

/// How often a cluster waiting for another's archive looks again.
pub const ARCHIVE_RECHECK: Duration = Duration::from_secs(10);
/// How often a cluster held by a foreign object looks again.
pub const FOREIGN_RECHECK: Duration = Duration::from_secs(60);

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
                reason: reason::REFUSED,
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
    Conditions::of(&mut new.conditions, mc.metadata.generation, now).set(
        hold.type_,
        true,
        hold.reason,
        hold.message,
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
            reason: reason::INVALID_SPEC,
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
            reason: reason::FOREIGN_OBJECT,
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
            reason: reason::ARCHIVE_IN_USE,
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
    use super::super::tests::{Mc, Seen};
    use super::*;

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
