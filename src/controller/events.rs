//! Kubernetes Events for what a user wants to see in `kubectl describe minicluster`,
//! derived from the change between the old status and the new one (pure).
//!
//! Events are for what a user must look at or would not see otherwise: every condition that
//! turns true (Warnings), the cluster's end, a step off the way up (Pending again, Suspended),
//! saves, restores and cleanup. The way up of a new cluster (its objects made, its brokers
//! starting, then all ready) has none: the status says it, with the JobSet and Secret named
//! and the times (`startTime`, `readyTime`, `Ready`'s transition), as JobSet's and Kueue's
//! controllers leave their normal path to the status. Each Event is a write the API server
//! stores: at a thousand clusters, those two per cluster were two of the operator's five
//! requests per cluster beyond the bare JobSet's (docs/benchmarks.md, "Many MiniClusters").
//!
//! Deriving them from state, not from actions, makes them survive a crash: the executor
//! publishes a plan's Events before it writes the status, so if the operator dies in between
//! (or between an action and its Event) the next run sees the same transition again and
//! publishes it again. At least once, never lost.

use kube::runtime::events::EventType;

use crate::api::{MiniCluster, MiniClusterStatus, Phase, RestoreStatus, SaveStatus, condition};

/// One Event to publish about the MiniCluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: &'static str,
    pub action: &'static str,
    pub message: String,
}

impl Note {
    fn normal(reason: &'static str, action: &'static str, message: String) -> Self {
        Self {
            warning: false,
            reason,
            action,
            message,
        }
    }

    fn warning(reason: &'static str, action: &'static str, message: String) -> Self {
        Self {
            warning: true,
            reason,
            action,
            message,
        }
    }

    /// The Event type.
    pub fn type_(&self) -> EventType {
        if self.warning {
            EventType::Warning
        } else {
            EventType::Normal
        }
    }
}

/// A Warning that an owned object someone deleted was made again, published by the executor
/// when its create succeeds. Unlike the others it comes from an action, not a status
/// transition: a crash between the create and the Event loses it (the object is back).
/// `action` names the kind (`RecreateService`).
pub fn recreated(action: &'static str, message: &str) -> Note {
    Note::warning("Recreated", action, message.to_string())
}

/// The Events for the transitions from `old` to `new`.
pub fn transitions(
    mc: &MiniCluster,
    old: &MiniClusterStatus,
    new: &MiniClusterStatus,
) -> Vec<Note> {
    let mut notes = Vec::new();
    let instance_restarted = instance_note(old, new);
    // Conditions that hold the cluster or say something is wrong: a Warning each time one
    // turns true or says something new.
    for (type_, reason, action) in [
        (condition::INVALID_SPEC, "InvalidSpec", "Validate"),
        (condition::BLOCKED, "Blocked", "Apply"),
        (condition::DEGRADED, "Degraded", "Reconcile"),
        (condition::BROKERS_LOST, "BrokersLost", "Reconcile"),
        (condition::RESTARTED, "Restarted", "CreateJobSet"),
        (condition::UNSUPPORTED, "Unsupported", "Validate"),
    ] {
        if type_ == condition::RESTARTED && instance_restarted.is_some() {
            continue; // the InstanceRestarted Event below says it
        }
        if let Some(message) = turned_true(old, new, type_) {
            notes.push(Note::warning(reason, action, message.to_string()));
        }
    }
    notes.extend(instance_restarted);
    // Phases: each change off the way up has its Event; a new cluster's first phase
    // (Pending) and the way up (Starting, Running) are the status's.
    if old.phase != new.phase
        && old.phase.is_some()
        && let Some(note) = new.phase.and_then(|p| phase_note(p, new))
    {
        notes.push(note);
    }
    if let Some(r) = &new.restore
        && old.restore.as_ref() != Some(r)
    {
        notes.push(restore_note(r));
        if !r.unfit_jobs.is_empty() {
            notes.push(Note::warning(
                "RestoredJobsCannotRun",
                "Restore",
                format!(
                    "{} pending jobs of archive {} ask for more nodes than this cluster can ever \
                     have (spec.maxSize): {}; they are not counted as resumed, and Fluxion \
                     fails them as unsatisfiable",
                    r.unfit_jobs.len(),
                    r.archive,
                    r.unfit_jobs.join(", ")
                ),
            ));
        }
    }
    if let Some(s) = &new.last_save
        && old.last_save.as_ref() != Some(s)
    {
        notes.push(save_note(s));
    }
    if mc.spec.cleanup
        && new.phase.is_some_and(Phase::is_finished)
        && !old.phase.is_some_and(Phase::is_finished)
    {
        notes.push(Note::normal(
            "Cleanup",
            "Delete",
            "Deleting the finished MiniCluster (spec.cleanup)".to_string(),
        ));
    }
    notes
}

/// A Warning each time a new Flux instance replaced the running one (its lead's Flux
/// container restarted or its pod was replaced; `status.instance.restarts` went up), with
/// the `Restarted` condition's account of it, also when the new instance was already up
/// by the time it was seen (the condition is then False again).
fn instance_note(old: &MiniClusterStatus, new: &MiniClusterStatus) -> Option<Note> {
    let count = |s: &MiniClusterStatus| s.instance.as_ref().map_or(0, |i| i.restarts);
    if count(new) <= count(old) {
        return None;
    }
    let message = new
        .conditions
        .iter()
        .find(|c| c.type_ == condition::RESTARTED)
        .map_or_else(
            || "a new Flux instance replaced the running one".to_string(),
            |c| c.message.clone(),
        );
    Some(Note::warning("InstanceRestarted", "Reconcile", message))
}

/// The Event of a change to `phase`, if it has one: the way up (Starting, Running) has none.
/// The end says how the job ended (`new.result`), with a failed job's last lines of output.
fn phase_note(phase: Phase, new: &MiniClusterStatus) -> Option<Note> {
    let note = match phase {
        Phase::Starting | Phase::Running => return None,
        Phase::Succeeded => Note::normal(
            "Succeeded",
            "Reconcile",
            match &new.result {
                Some(r) => format!(
                    "The job succeeded (exit code 0; its output: {})",
                    r.logs_command()
                ),
                None => "The lead broker finished".to_string(),
            },
        ),
        Phase::Failed => Note::warning("Failed", "Reconcile", failed_message(new)),
        Phase::Suspended => Note::normal(
            "Suspended",
            "Reconcile",
            "The cluster is suspended".to_string(),
        ),
        Phase::Pending => Note::normal(
            "Pending",
            "Reconcile",
            "Waiting for broker pods".to_string(),
        ),
    };
    Some(note)
}

/// The `Failed` Event's message: the `Failed` condition's (a failed job's exit code and
/// where its output is, or JobSet's reason), then the job's last lines of output.
fn failed_message(new: &MiniClusterStatus) -> String {
    let why = new
        .conditions
        .iter()
        .find(|c| c.type_ == condition::FAILED && c.status == "True")
        .map(|c| c.message.as_str())
        .filter(|m| !m.is_empty());
    let mut message = match why {
        Some(why) => format!("The cluster failed: {why}"),
        None => "The cluster failed".to_string(),
    };
    if let Some(r) = new.result.as_ref().filter(|r| !r.output.is_empty()) {
        message.push_str("; the output ends with:\n");
        let room = MAX_NOTE.saturating_sub(message.len());
        message.push_str(last_bytes(r.output.trim_end(), room));
    }
    message
}

/// The longest an Event's note may be (events.k8s.io/v1 refuses longer).
const MAX_NOTE: usize = 1024;

/// The end of `text`, at most `n` bytes of it, starting on a character.
fn last_bytes(text: &str, n: usize) -> &str {
    let mut start = text.len().saturating_sub(n);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The Event of a save the lead pod reported: what the archive holds now, or why it was not
/// replaced.
fn save_note(s: &SaveStatus) -> Note {
    if s.saved {
        Note::normal(
            "Saved",
            "Save",
            format!(
                "Lead pod {} saved the instance to {}: {} jobs, {} bytes (its manifest: {}.manifest.json)",
                s.pod, s.archive, s.jobs, s.bytes, s.archive
            ),
        )
    } else {
        Note::warning(
            "SaveFailed",
            "Save",
            format!(
                "Lead pod {} could not save to {}: {}",
                s.pod, s.archive, s.error
            ),
        )
    }
}

/// The Event of a restore the lead pod reported: what it restores, or why it cannot.
fn restore_note(r: &RestoreStatus) -> Note {
    if r.error.is_empty() {
        Note::normal(
            "Restored",
            "Restore",
            format!(
                "Lead pod {} restores archive {}: {} pending jobs (resumed with their ids), \
                 {} canceled by the save (still running then), {} ended before it",
                r.pod, r.archive, r.pending_jobs, r.canceled_jobs, r.ended_jobs
            ),
        )
    } else {
        Note::warning(
            "RestoreFailed",
            "Restore",
            format!(
                "Lead pod {} cannot read archive {}: {}. The pod waits (its flux-archive \
                 init container is retried); the archive is left as it is",
                r.pod, r.archive, r.error
            ),
        )
    }
}

/// The condition's message if it is true in `new` and was not (or said otherwise) in `old`.
fn turned_true<'a>(
    old: &MiniClusterStatus,
    new: &'a MiniClusterStatus,
    type_: &str,
) -> Option<&'a str> {
    let find = |s: &MiniClusterStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
            .map(|c| c.message.clone())
    };
    let now = new
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")?;
    (find(old).as_deref() != Some(now.message.as_str())).then_some(now.message.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RestoreStatus;

    fn mc() -> MiniCluster {
        crate::fixtures::m()
            .namespace("n")
            .container("x", "")
            .build()
    }

    fn with_restore(restore: Option<RestoreStatus>) -> MiniClusterStatus {
        MiniClusterStatus {
            restore,
            ..Default::default()
        }
    }

    fn status(phase: Option<Phase>, job_set: &str, curve_secret: &str) -> MiniClusterStatus {
        MiniClusterStatus {
            phase,
            job_set: job_set.into(),
            curve_secret: curve_secret.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_way_up_has_no_event_and_each_step_off_it_one() {
        let none = status(None, "", "");
        let at = |phase| status(Some(phase), "m", "m-curve");
        let created = at(Phase::Pending);
        // (what it proves, old status, new status, the Events' reasons)
        let cases = [
            (
                "created: the status names the JobSet and Secret",
                &none,
                &created,
                vec![],
            ),
            (
                "held before anything was made: no Event for the first phase",
                &none,
                &status(Some(Phase::Pending), "", ""),
                vec![],
            ),
            ("brokers starting", &created, &at(Phase::Starting), vec![]),
            ("all brokers ready", &created, &at(Phase::Running), vec![]),
            (
                "resumed after a suspension",
                &at(Phase::Suspended),
                &at(Phase::Running),
                vec![],
            ),
            (
                "the JobSet made again: Pending again is a step back",
                &at(Phase::Running),
                &created,
                vec!["Pending"],
            ),
            (
                "suspended",
                &at(Phase::Running),
                &at(Phase::Suspended),
                vec!["Suspended"],
            ),
            (
                "finished",
                &at(Phase::Running),
                &at(Phase::Succeeded),
                vec!["Succeeded"],
            ),
            (
                "failed",
                &at(Phase::Running),
                &at(Phase::Failed),
                vec!["Failed"],
            ),
            (
                "nothing changed",
                &at(Phase::Running),
                &at(Phase::Running),
                vec![],
            ),
        ];
        for (what, old, new, want) in cases {
            let notes = transitions(&mc(), old, new);
            let reasons: Vec<&str> = notes.iter().map(|n| n.reason).collect();
            assert_eq!(reasons, want, "{what}");
        }
        let failed = transitions(&mc(), &at(Phase::Running), &at(Phase::Failed));
        assert!(failed[0].warning, "a failure is a Warning");
    }

    #[test]
    fn a_restore_is_announced_once_per_lead_pod_and_a_failed_one_as_a_warning() {
        let read = RestoreStatus {
            unfit_jobs: Vec::new(),
            archive: "/state/flux.tgz".into(),
            pod: "m-lead-0-0-a".into(),
            pending_jobs: 7,
            canceled_jobs: 3,
            ended_jobs: 0,
            error: String::new(),
        };
        let notes = transitions(
            &mc(),
            &with_restore(None),
            &with_restore(Some(read.clone())),
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!((notes[0].reason, notes[0].warning), ("Restored", false));
        assert!(
            notes[0].message.contains("m-lead-0-0-a restores archive /state/flux.tgz: 7 pending jobs (resumed with their ids), 3 canceled by the save"),
            "{}",
            notes[0].message
        );
        // Unchanged: nothing again.
        let same = with_restore(Some(read.clone()));
        assert!(transitions(&mc(), &same, &same).is_empty());
        // A new lead pod restores again: announced again.
        let again = RestoreStatus {
            pod: "m-lead-0-0-b".into(),
            ..read.clone()
        };
        assert_eq!(
            transitions(&mc(), &same, &with_restore(Some(again))).len(),
            1
        );
        // Jobs that can never fit: a Warning naming them.
        let unfit = RestoreStatus {
            unfit_jobs: vec!["f2a".into(), "f2b".into()],
            ..read.clone()
        };
        let notes = transitions(&mc(), &with_restore(None), &with_restore(Some(unfit)));
        let reasons: Vec<_> = notes.iter().map(|n| (n.reason, n.warning)).collect();
        assert_eq!(
            reasons,
            [("Restored", false), ("RestoredJobsCannotRun", true)]
        );
        assert!(
            notes[1].message.contains("2 pending jobs") && notes[1].message.contains("f2a, f2b")
        );
        // An unreadable archive: a Warning that says why.
        let failed = RestoreStatus {
            error: "not a gzip file".into(),
            ..read
        };
        let notes = transitions(&mc(), &with_restore(None), &with_restore(Some(failed)));
        assert_eq!((notes[0].reason, notes[0].warning), ("RestoreFailed", true));
        assert!(
            notes[0].message.contains("not a gzip file"),
            "{}",
            notes[0].message
        );
    }

    #[test]
    fn a_save_is_announced_once_and_a_failed_one_as_a_warning() {
        let with = |save: Option<SaveStatus>| MiniClusterStatus {
            last_save: save,
            ..Default::default()
        };
        let saved = SaveStatus {
            archive: "/state/f.tar".into(),
            pod: "m-lead-0-0-a".into(),
            saved: true,
            jobs: 12,
            bytes: 28672,
            sha256: "ab".into(),
            error: String::new(),
        };
        let notes = transitions(&mc(), &with(None), &with(Some(saved.clone())));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!((notes[0].reason, notes[0].warning), ("Saved", false));
        assert!(
            notes[0]
                .message
                .contains("saved the instance to /state/f.tar: 12 jobs, 28672 bytes"),
            "{}",
            notes[0].message
        );
        let same = with(Some(saved.clone()));
        assert!(transitions(&mc(), &same, &same).is_empty());
        let failed = SaveStatus {
            saved: false,
            error: "the dump Flux wrote is not whole; the archive is unchanged".into(),
            ..SaveStatus::default()
        };
        let notes = transitions(&mc(), &same, &with(Some(failed)));
        assert_eq!((notes[0].reason, notes[0].warning), ("SaveFailed", true));
        assert!(
            notes[0].message.contains("not whole"),
            "{}",
            notes[0].message
        );
    }
}
