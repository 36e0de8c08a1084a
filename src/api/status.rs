//! `MiniCluster.status`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::{Deserialize, Serialize};

/// Observed state of a MiniCluster. Until the operator first writes it: `phase: Pending`.
// The CRD's defaults, applied by the API server to the absent status as it reads the
// object: a new cluster is Pending from its create on, as a Pod is, and the operator writes
// the first status only when it says more (`MiniClusterStatus::is_unwritten`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = serde_json::json!({})))]
pub struct MiniClusterStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Coarse state for humans and printer columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Pending"))]
    pub phase: Option<Phase>,
    /// Current size (brokers the JobSet is asked to run): the scale subresource's status.
    #[serde(default)]
    pub size: i32,
    /// Label selector of the broker pods (the scale subresource's selector).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
    /// Largest size the broker config allows (`maxSize`).
    #[serde(default)]
    pub maximum_size: i32,
    /// Broker pods that are ready.
    #[serde(default)]
    pub ready_brokers: i32,
    /// Name of the owned JobSet.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job_set: String,
    /// Name of the Secret with the brokers' CURVE certificate (made once, never replaced).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub curve_secret: String,
    /// The lead broker (rank 0): its hostname, `<name>-lead-0-0` (the Go operator's
    /// `<name>-0`), also its DNS name in the subdomain. Its pod is named that plus a random
    /// suffix; select it by the labels `flux-framework.org/minicluster: <name>` and
    /// `flux-framework.org/role: lead`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub lead_broker: String,
    /// When the cluster's pods were first allowed to run (created unsuspended or admitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the lead broker's pod was first ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_ready_time: Option<Time>,
    /// When all `size` brokers were first ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_time: Option<Time>,
    /// When the cluster finished (Succeeded or Failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// When no broker pod was running any more after the cluster finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown_time: Option<Time>,
    /// What the lead broker restored from `spec.archive.path`, as read from the archive by
    /// its pod's `flux-archive` init container before the broker started. Absent while no
    /// lead has started from an archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreStatus>,
    /// What the lead's last save to `spec.archive.path` did, as its Flux container reported
    /// it when it ended. Absent until a lead has ended with an archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_save: Option<SaveStatus>,
    /// How the cluster's job ended (a command, a batch or a launcher): the exit code of the
    /// lead's program, and where its output is. Absent until the cluster has finished, and
    /// for an interactive cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<JobResult>,
    /// The Flux instance's lead broker as last seen, and how often the instance started
    /// again while the MiniCluster ran. Absent until a lead pod exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<InstanceStatus>,
    /// Standard conditions: Ready, Suspended, Admitted, Resizing, Succeeded, Failed,
    /// InvalidSpec, Blocked, Degraded, Restarted, Unsupported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl MiniClusterStatus {
    /// The status the API server shows of a MiniCluster no reconcile has written a status
    /// for: the CRD's defaults, applied to an absent status when it is read.
    pub fn unwritten() -> Self {
        Self {
            phase: Some(Phase::Pending),
            ..Self::default()
        }
    }

    /// Whether this is [`Self::unwritten`], or empty: no reconcile has written it.
    pub fn is_unwritten(&self) -> bool {
        *self == Self::unwritten() || *self == Self::default()
    }
}

/// The lead broker behind the Flux instance. Its pod replaced or its Flux container
/// restarted means a new instance: the old one's queue and job history are gone unless
/// `spec.archive` restores them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    /// The lead broker's pod. Empty while the cluster has no lead pod of its current run
    /// (suspended, or its JobSet made again).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub lead_pod: String,
    /// The kubelet's restart count of the Flux container in that pod.
    #[serde(default)]
    pub lead_container_restarts: i32,
    /// Times a new Flux instance replaced the running one: the lead's Flux container
    /// restarted or its pod was replaced (a suspension and its resumption do not count).
    #[serde(default)]
    pub restarts: i32,
    /// What the last of those restarts did with the old instance's jobs, counted from
    /// Flux's own records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restart: Option<RestartJobs>,
}

/// What a restart did with the old instance's jobs: each of them is counted once, by the
/// state it was in when the old instance ended.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestartJobs {
    /// The lead broker pod of the new instance.
    pub pod: String,
    /// Whose records were counted: `Checkpoint` (the state the crashed instance left in
    /// its pod, which the new one started from), `Archive` (`spec.archive` as the new lead
    /// restored it), `StoppedInstance` (the old instance, counted as its pod was stopped;
    /// the new one holds none of its jobs). Unset while or when nothing could be counted
    /// (`uncounted` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_from: Option<CountedFrom>,
    /// Jobs that had ended: in the new instance's job history with their results.
    #[serde(default)]
    pub kept: i32,
    /// Jobs that were pending: the new instance runs them, with their ids.
    #[serde(default)]
    pub resumed: i32,
    /// Jobs that were running: their processes died with the old instance. In the new
    /// instance's history they ended with an exception of type `restart` (`Checkpoint`) or
    /// were canceled by the save (`Archive`); after `StoppedInstance` they have no record.
    #[serde(default)]
    pub lost: i32,
    /// Pending jobs the new instance cannot run: they ask for more nodes than the cluster
    /// can ever have, and Fluxion fails them as unsatisfiable.
    #[serde(default)]
    pub failed: i32,
    /// Pending and ended jobs the new instance has no record of (`StoppedInstance`: no
    /// archive): never run, or their history gone.
    #[serde(default)]
    pub forgotten: i32,
    /// What the counts cannot include, or why there are none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uncounted: String,
}

/// Whose records [`RestartJobs`] counted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum CountedFrom {
    /// The state the crashed instance left in the lead's pod.
    Checkpoint,
    /// `spec.archive`, as the new lead restored it.
    Archive,
    /// The old instance itself, as its pod was stopped.
    StoppedInstance,
}

/// How the lead's program (the job of a command, batch or launcher cluster) ended.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobResult {
    /// The program's exit code: 0 when the job succeeded. A batch's is the largest of its
    /// jobs'.
    pub exit_code: i32,
    /// Why the container ended, when the kubelet knows more than an exit code: `OOMKilled`
    /// (the container passed its memory limit).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The lead broker's pod, whose log holds the job's output.
    pub pod: String,
    /// Its Flux container.
    pub container: String,
    /// The last lines of that log (at most 80 lines or 2 KiB, as the kubelet keeps them) when
    /// the job failed; empty when it succeeded, or when the container reported a save
    /// (`spec.archive`) instead.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
}

impl JobResult {
    /// Where to read the whole output.
    pub fn logs_command(&self) -> String {
        format!("kubectl logs {} -c {}", self.pod, self.container)
    }
}

/// What a lead's save at the end of its instance did.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SaveStatus {
    /// The archive (`spec.archive.path`).
    pub archive: String,
    /// The lead broker pod that saved.
    pub pod: String,
    /// Whether the archive now holds that instance's state. False: nothing was replaced, and
    /// `error` says why.
    pub saved: bool,
    /// Jobs in the saved archive (pending, canceled by the save, ended).
    #[serde(default)]
    pub jobs: i32,
    /// The saved archive's size in bytes.
    #[serde(default)]
    pub bytes: i64,
    /// Its SHA-256, as in its manifest (`<archive>.manifest.json`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sha256: String,
    /// Why the save failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// What a lead broker pod restored from the archive.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatus {
    /// The archive (`spec.archive.path`).
    pub archive: String,
    /// The lead broker pod that restored it.
    pub pod: String,
    /// Jobs pending when the archive was saved: the instance resumes them with their ids.
    #[serde(default)]
    pub pending_jobs: i32,
    /// Pending jobs that ask for more nodes than this cluster can ever have (its
    /// `maxSize`), by id: they cannot run here (Fluxion fails them as unsatisfiable), so they
    /// are not counted in `pendingJobs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfit_jobs: Vec<String>,
    /// Jobs still running when the instance was saved, canceled by the save (they are in the
    /// job history as canceled, with the reason).
    #[serde(default)]
    pub canceled_jobs: i32,
    /// Jobs that had ended before the save (completed, failed, canceled; in the job
    /// history).
    #[serde(default)]
    pub ended_jobs: i32,
    /// Why the archive could not be read (the lead pod then waits: its init container is
    /// retried). Empty when it was read.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// Coarse lifecycle phase.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum Phase {
    /// Objects are being created, or pods are not scheduled yet.
    Pending,
    /// Pods exist; not all brokers are ready.
    Starting,
    /// All `size` brokers are ready.
    Running,
    /// The lead broker finished successfully.
    Succeeded,
    /// The cluster failed.
    Failed,
    /// Held without pods (`spec.suspend` or waiting for Kueue admission).
    Suspended,
}

impl Phase {
    /// Whether the phase is final.
    pub fn is_finished(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed)
    }

    /// The phase as it appears in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Starting => "Starting",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::Suspended => "Suspended",
        }
    }
}

/// Condition types written by the operator.
pub mod condition {
    /// All `size` brokers' pods are ready.
    pub const READY: &str = "Ready";
    /// The JobSet is suspended (by `spec.suspend` or by Kueue).
    pub const SUSPENDED: &str = "Suspended";
    /// Kueue admitted the workload.
    pub const ADMITTED: &str = "Admitted";
    /// The followers Job is changing size.
    pub const RESIZING: &str = "Resizing";
    /// The lead broker finished successfully.
    pub const SUCCEEDED: &str = "Succeeded";
    /// The cluster failed.
    pub const FAILED: &str = "Failed";
    /// The spec has an error only the operator could detect; nothing is created or changed
    /// until it is fixed.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// The operator cannot make its change: an object of one of the MiniCluster's names
    /// belongs to something else (`ForeignObject`), or the API server refused the change
    /// (`Refused`). Nothing is created or changed until that goes.
    pub const BLOCKED: &str = "Blocked";
    /// An object the running cluster needs was deleted and cannot be remade as it was (the
    /// certificate Secret, the ConfigMap its brokers started with): brokers that start later
    /// cannot start or join.
    pub const DEGRADED: &str = "Degraded";
    /// The JobSet was deleted before the cluster finished and was recreated: a new Flux
    /// instance started.
    pub const RESTARTED: &str = "Restarted";
    /// The spec asks for something this operator accepts but does not do.
    pub const UNSUPPORTED: &str = "Unsupported";
    /// The lead pod read the archive it restores (`spec.archive`): true, with what it holds;
    /// false when it refused it, with why (a bound of `spec.archive.restoreLimits` by its
    /// field path, a cut or changed archive). Absent until a lead pod found an archive.
    pub const RESTORED: &str = "Restored";
    /// Broker pods were lost with their node (it stopped answering): which, their ranks, since
    /// when, and whether the control plane is evicting them. Absent until one was.
    pub const BROKERS_LOST: &str = "BrokersLost";
}

/// The reasons of the conditions the operator writes, by condition ([`condition`]).
/// `Admitted` carries Kueue's reason, and `Failed` JobSet's unless the job failed
/// ([`JOB_FAILED`](reason::JOB_FAILED)).
pub mod reason {
    /// `Ready`: every broker's pod is ready.
    pub const BROKERS_READY: &str = "BrokersReady";
    /// `Ready`: not every broker's pod is ready (yet, or any more).
    pub const BROKERS_NOT_READY: &str = "BrokersNotReady";
    /// `Suspended`: the JobSet is suspended.
    pub const JOBSET_SUSPENDED: &str = "JobSetSuspended";
    /// `Suspended` false: the JobSet may run pods.
    pub const JOBSET_RUNNING: &str = "JobSetRunning";
    /// `Resizing`: broker pods are stopping, their ranks drained.
    pub const BROKERS_DRAINING: &str = "BrokersDraining";
    /// `Resizing`: there are more or fewer broker pods than the size.
    pub const BROKERS_CHANGING: &str = "BrokersChanging";
    /// `Resizing` false: as many broker pods as the size, or finished.
    pub const STABLE: &str = "Stable";
    /// `Succeeded`: the lead broker's Job completed.
    pub const LEAD_BROKER_COMPLETED: &str = "LeadBrokerCompleted";
    /// `Failed`: the lead's program (the job) exited non-zero.
    pub const JOB_FAILED: &str = "JobFailed";
    /// `Unsupported` false.
    pub const ALL_SUPPORTED: &str = "AllSupported";
    /// `Unsupported`: fields the operator accepts and ignores.
    pub const FIELDS_IGNORED: &str = "FieldsIgnored";
    /// `InvalidSpec` false.
    pub const VALID: &str = "Valid";
    /// `InvalidSpec`: what is wrong, by field.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// `Blocked`: the API server refused the operator's change.
    pub const REFUSED: &str = "Refused";
    /// `Blocked`: an object of one of the cluster's names belongs to something else.
    pub const FOREIGN_OBJECT: &str = "ForeignObject";
    /// `Blocked`: another MiniCluster that has not finished holds the archive.
    pub const ARCHIVE_IN_USE: &str = "ArchiveInUse";
    /// `Restored`: the lead pod read the archive; its broker restores it.
    pub const ARCHIVE_READ: &str = "ArchiveRead";
    /// `Restored` (false): the lead pod refused the archive; its broker does not start.
    pub const ARCHIVE_REFUSED: &str = "ArchiveRefused";
    /// `Degraded`: an object the running cluster needs was deleted.
    pub const OWNED_OBJECT_DELETED: &str = "OwnedObjectDeleted";
    /// `Restarted`: the JobSet was deleted before the cluster finished, and made again.
    pub const JOBSET_DELETED: &str = "JobSetDeleted";
    /// `Restarted`: the lead broker's container restarted in its pod.
    pub const LEAD_BROKER_RESTARTED: &str = "LeadBrokerRestarted";
    /// `Restarted`: the lead broker's pod was replaced.
    pub const LEAD_POD_REPLACED: &str = "LeadPodReplaced";
    /// `Restarted` false: every broker of the new instance is ready.
    pub const NEW_INSTANCE_UP: &str = "NewInstanceUp";
    /// `Restarted` false: the new instance finished.
    pub const NEW_INSTANCE_FINISHED: &str = "NewInstanceFinished";
    /// `BrokersLost`: followers' pods were lost with their node; the instance goes on.
    pub const FOLLOWERS_LOST: &str = "FollowersLost";
    /// `BrokersLost`: the lead broker's pod was lost with its node, and the instance with it.
    pub const LEAD_BROKER_LOST: &str = "LeadBrokerLost";
    /// A condition that held before is over (`Blocked`, `Degraded`, `BrokersLost`).
    pub const RESOLVED: &str = "Resolved";
}
