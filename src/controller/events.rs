//! Kubernetes Events for what a user wants to see in `kubectl describe minicluster`,
//! derived from the change between the old status and the new one (pure).
//!
//! Deriving them from state, not from actions, makes them survive a crash: the executor
//! publishes a plan's Events before it writes the status, so if the operator dies in between
//! (or between an action and its Event) the next run sees the same transition again and
//! publishes it again. At least once, never lost.

use kube::runtime::events::EventType;

use crate::api::{MiniCluster, MiniClusterStatus, Phase, condition};

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

/// The Events for the transitions from `old` to `new`.
pub fn transitions(
    mc: &MiniCluster,
    old: &MiniClusterStatus,
    new: &MiniClusterStatus,
) -> Vec<Note> {
    let mut notes = Vec::new();
    if old.curve_secret.is_empty() && !new.curve_secret.is_empty() {
        notes.push(Note::normal(
            "Certificate",
            "CreateSecret",
            format!(
                "The brokers' CURVE certificate is in Secret {} (made once, never replaced)",
                new.curve_secret
            ),
        ));
    }
    if old.job_set.is_empty() && !new.job_set.is_empty() {
        notes.push(Note::normal(
            "Created",
            "CreateJobSet",
            format!("Created JobSet {}", new.job_set),
        ));
    }
    // Conditions that hold the cluster or say something is wrong: a Warning each time one
    // turns true or says something new.
    for (type_, reason, action) in [
        (condition::INVALID_SPEC, "InvalidSpec", "Validate"),
        (condition::BLOCKED, "Blocked", "Apply"),
        (condition::DEGRADED, "Degraded", "Reconcile"),
        (condition::RESTARTED, "Restarted", "CreateJobSet"),
        (condition::UNSUPPORTED, "Unsupported", "Validate"),
    ] {
        if let Some(message) = turned_true(old, new, type_) {
            notes.push(Note::warning(reason, action, message.to_string()));
        }
    }
    if old.phase != new.phase
        && let Some(phase) = new.phase
    {
        let note = match phase {
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
        };
        notes.push(note);
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
