//! Kubernetes Events for what a user wants to see in `kubectl describe minicluster`,
//! derived from the change between the old status and the new one (pure).
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
    let mut notes: Vec<Note> = created(old, new).into_iter().collect();
    let instance_restarted = instance_note(old, new);
    // Conditions that hold the cluster or say something is wrong: a Warning each time one
    // turns true or says something new.
    for (type_, reason, action) in [
        (condition::INVALID_SPEC, "InvalidSpec", "Validate"),
        (condition::BLOCKED, "Blocked", "Apply"),
        (condition::DEGRADED, "Degraded", "Reconcile"),
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
    // Phases: each change has its Event, but a new cluster's first phase (Pending): Created,
    // or the Warning that holds it, already says what happened.
    if old.phase != new.phase
        && old.phase.is_some()
        && let Some(phase) = new.phase
    {
        notes.push(phase_note(mc, phase));
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

/// A new cluster: one Event for what was made (the certificate's Secret is made with the
/// JobSet, and is in the status too).
fn created(old: &MiniClusterStatus, new: &MiniClusterStatus) -> Option<Note> {
    if !old.job_set.is_empty() || new.job_set.is_empty() {
        return None;
    }
    let message = if old.curve_secret.is_empty() && !new.curve_secret.is_empty() {
        format!(
            "Created JobSet {}; the brokers' CURVE certificate is in Secret {} (made once, \
             never replaced)",
            new.job_set, new.curve_secret
        )
    } else {
        format!("Created JobSet {}", new.job_set)
    };
    Some(Note::normal("Created", "CreateJobSet", message))
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

/// The Event of a change to `phase`.
fn phase_note(mc: &MiniCluster, phase: Phase) -> Note {
    match phase {
        Phase::Running => Note::normal(
            "Running",
            "Reconcile",
            format!("All {} brokers are ready", mc.spec.size),
        ),
        Phase::Succeeded => Note::normal(
            "Succeeded",
            "Reconcile",
            "The lead broker finished".to_string(),
        ),
        Phase::Failed => Note::warning("Failed", "Reconcile", "The cluster failed".to_string()),
        Phase::Suspended => Note::normal(
            "Suspended",
            "Reconcile",
            "The cluster is suspended".to_string(),
        ),
        Phase::Starting => Note::normal(
            "Starting",
            "Reconcile",
            "Broker pods are starting".to_string(),
        ),
        Phase::Pending => Note::normal(
            "Pending",
            "Reconcile",
            "Waiting for broker pods".to_string(),
        ),
    }
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
    fn a_new_cluster_gets_one_event_and_each_later_phase_one() {
        let none = status(None, "", "");
        let created = status(Some(Phase::Pending), "m", "m-curve");
        let running = status(Some(Phase::Running), "m", "m-curve");
        // (what it proves, old status, new status, the Events' reasons)
        let cases = [
            (
                "created: the JobSet and the certificate in one Event, no Pending of its own",
                &none,
                &created,
                vec!["Created"],
            ),
            (
                "held before anything was made: no Event for the first phase",
                &none,
                &status(Some(Phase::Pending), "", ""),
                vec![],
            ),
            ("all brokers ready", &created, &running, vec!["Running"]),
            (
                "the JobSet made again: Pending again is a change",
                &running,
                &created,
                vec!["Pending"],
            ),
            ("nothing changed", &running, &running, vec![]),
        ];
        for (what, old, new, want) in cases {
            let notes = transitions(&mc(), old, new);
            let reasons: Vec<&str> = notes.iter().map(|n| n.reason).collect();
            assert_eq!(reasons, want, "{what}");
        }
        let notes = transitions(&mc(), &none, &created);
        assert_eq!(
            notes[0].message,
            "Created JobSet m; the brokers' CURVE certificate is in Secret m-curve (made once, \
             never replaced)"
        );
        // A status of an older operator without curveSecret: the Event says only the JobSet.
        let notes = transitions(&mc(), &none, &status(Some(Phase::Pending), "m", ""));
        assert_eq!(notes[0].message, "Created JobSet m");
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
