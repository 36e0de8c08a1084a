//! Flux domain knowledge: everything that turns the pods of a MiniCluster into one working
//! Flux instance. Pure functions of the resolved MiniCluster ([`crate::model::Cluster`]); the
//! render module puts the results into the ConfigMap, Secret, JobSet and Services. The layout
//! in the pod, what the entrypoints do, the companion containers and readiness are described
//! in `docs/flux-in-the-pod.md`.

pub mod command;
pub mod config;
pub mod curve;
pub mod pod;
pub mod scripts;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::model::Cluster;

use crate::model::containers::ARCHIVE_INIT;
use crate::model::mounts::{CONFIG_MOUNT, CURVE_MOUNT, KEY_MOUNT, RUN_MOUNT};
pub use pod::{
    CPU_LIMIT_FIELD, archive_check_command, companion_args, companion_command, companion_variables,
    curve_secret_mode, flux_container_command, flux_container_variables, socket_exists_command,
    view_init_command,
};

/// The key of the certificate in the CURVE Secret (and its file name).
pub const CURVE_SECRET_KEY: &str = "curve.cert";
/// The broker's directory in [`RUN_MOUNT`]: the entrypoint creates it (mode 0755, owned by
/// the user the broker runs as) because Flux refuses a `local-uri` directory that the
/// instance owner does not own, and emptyDirs are owned by root. Holds the socket
/// ([`SOCKET_PATH`]); 0755 so companions running as another user still reach the socket.
pub const BROKER_DIR: &str = "/run/flux-operator/broker";
/// The private certificate copy Flux reads (`[bootstrap] curve_cert`), in [`KEY_MOUNT`].
pub const CURVE_PRIVATE_PATH: &str = "/run/flux-operator-key/curve.cert";
/// The broker's local socket (`-Slocal-uri=local://...`), in [`BROKER_DIR`], for companions,
/// readiness probes and `flux proxy`.
pub const SOCKET_PATH: &str = "/run/flux-operator/broker/local";
/// The R file of the instance (`[resource] path`, see
/// [`config::resource_hosts`]), in [`BROKER_DIR`]: the entrypoints write it with
/// `flux R encode` before the broker starts (the ConfigMap is read-only, and the broker's
/// directory is the one place every entrypoint, root or not, can write and no secret lives).
pub const RESOURCE_PATH: &str = "/run/flux-operator/broker/R.json";
/// The TBON port of every broker.
pub const BROKER_PORT: i32 = 8050;
/// The port a follower listens on while its broker has joined the instance (`joined.py`,
/// started by `follower.sh`); the followers' readiness probe connects there.
pub const JOINED_PORT: i32 = 8051;
/// The lead pod's port of the instance's queue metrics (Prometheus' text format on
/// `/metrics`: `queue-metrics.py`, see docs/autoscaling.md), named [`QUEUE_METRICS_PORT_NAME`].
pub const QUEUE_METRICS_PORT: i32 = 8052;
/// The name of [`QUEUE_METRICS_PORT`] on the lead's Flux container, which a PodMonitor or a
/// Prometheus pod scrape selects.
pub const QUEUE_METRICS_PORT_NAME: &str = "flux-metrics";
/// The Flux container's variable holding its CPU limit in whole CPUs, rounded up (the
/// downward API's `limits.cpu` with divisor 1; the node's allocatable CPUs without a limit):
/// each broker's R lists no more cores than this ([`pod::CPU_LIMIT_FIELD`]).
pub const CPU_LIMIT_VARIABLE: &str = "FLUX_OPERATOR_CPU_LIMIT";

/// Which broker a pod runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Rank 0, pod `<mc>-lead-0-0`: runs the program.
    Lead,
    /// Ranks 1.., pods `<mc>-workers-0-<i>` (the `workers` replicated job keeps the Go
    /// operator's name).
    Follower,
}

/// The exit code of a lead's Flux container whose instance ended before its program did (its
/// broker crashed, or it was stopped): not the job's outcome, so the lead's Job starts a new
/// lead pod (`podFailurePolicy`, [`crate::model::Cluster::program_ends_cluster`]). Every other
/// exit of a lead that runs a program is the program's own: the job's outcome. (Sysexits'
/// `EX_TEMPFAIL`; a program that exits with it is reported as having exited 1.)
pub const RETRY_EXIT: i32 = 75;

/// The file in the broker directory where the wrapper of the lead's program writes the
/// program's exit code when it returns.
pub const PROGRAM_END: &str = "program-exit-code";

/// The note the lead's save puts on the jobs it cancels (`spec.archive`): the archive report
/// counts them apart. Plain text: it is also written in a shell script.
pub const SAVE_CANCEL_NOTE: &str =
    "flux-operator: still running when the instance was saved to the archive";

/// The note of the exception that ends a job that was running when an interactive cluster's
/// instance started again from the state its lead kept (its broker crashed): the job's
/// processes died with the old instance, and its end is not known. Plain text: it is also
/// written in a Python script.
pub const RESTART_NOTE: &str =
    "flux-operator: running when the lead broker ended; the instance started again without it";

/// What the archive init container ([`ARCHIVE_INIT`]) found in `spec.archive.path`, as it
/// writes it (JSON) to its termination message: the jobs the lead broker restores.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct ArchiveReport {
    /// The archive's path.
    pub archive: String,
    /// Whether the archive exists (no archive: the instance starts empty).
    pub found: bool,
    /// Active jobs (pending when saved): resumed with their ids.
    #[serde(default)]
    pub pending: i32,
    /// Jobs the save canceled because they were still running ([`SAVE_CANCEL_NOTE`]).
    #[serde(default)]
    pub canceled: i32,
    /// Other inactive jobs (ended before the save: completed, failed, canceled), kept in the
    /// job history.
    #[serde(default)]
    pub ended: i32,
    /// Pending jobs that ask for more nodes than the cluster can ever have (its maxSize),
    /// by id: not counted in `pending`.
    #[serde(default)]
    pub unfit: Vec<String>,
    /// Why the archive could not be read; the init container then fails and is retried.
    #[serde(default)]
    pub error: Option<String>,
}

impl ArchiveReport {
    /// The report in a termination message; `None` if it is not one.
    pub fn parse(message: &str) -> Option<Self> {
        serde_json::from_str(message.trim()).ok()
    }
}

/// What the lead's save at the end of the instance did, as its Flux container writes it
/// (JSON) to its termination message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct SaveReport {
    /// The archive's path.
    pub archive: String,
    /// Whether the archive was replaced by a whole dump.
    pub saved: bool,
    /// The new archive's manifest, when saved.
    #[serde(default)]
    pub manifest: Option<Manifest>,
    /// Why nothing was saved (the previous archive is unchanged).
    #[serde(default)]
    pub error: Option<String>,
}

/// An archive's manifest (`<archive>.manifest.json`), written by the save.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Manifest {
    /// The archive's SHA-256.
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: i64,
    /// The jobs in it.
    pub jobs: i32,
}

impl SaveReport {
    /// The report in a termination message; `None` if it is not one.
    pub fn parse(message: &str) -> Option<Self> {
        serde_json::from_str(message.trim()).ok()
    }
}

/// The jobs an instance held when it ended, as the lead counts them (`count-jobs.py`, from
/// the job-manager's own records) and writes them under `jobs` in its Flux container's
/// termination message (alone, or beside a [`SaveReport`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct JobsReport {
    /// Whose records were counted.
    pub source: JobsSource,
    /// Jobs not yet running (held ones too).
    pub pending: i32,
    /// Jobs running or ending: their processes die with the instance.
    pub running: i32,
    /// Inactive jobs: the job history.
    pub ended: i32,
}

/// Whose records a [`JobsReport`] counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobsSource {
    /// The state a crashed instance left in the lead's pod, read by a broker of its own:
    /// what the next run of the container starts again with.
    #[default]
    Checkpoint,
    /// The live instance, as the lead's pod was being stopped.
    Instance,
}

impl JobsReport {
    /// The report in a termination message; `None` if it has none.
    pub fn parse(message: &str) -> Option<Self> {
        #[derive(Deserialize)]
        struct Message {
            jobs: JobsReport,
        }
        let message: Message = serde_json::from_str(message.trim()).ok()?;
        Some(message.jobs)
    }
}

/// Seconds the lead broker's pod gets, after the jobs' grace, to stop the instance and write
/// the archive (`flux shutdown` with the content dump, then the atomic rename).
pub const SAVE_SECONDS: i32 = 30;
/// Seconds a follower's pod gets, after the jobs' grace, to requeue what still runs on its
/// rank and stop its broker.
pub const LEAVE_SECONDS: i32 = 15;

/// The termination grace period of a broker pod: long enough for the stop its entrypoint
/// does on SIGTERM (see the `on_sigterm` blocks of the `lead.sh.j2` and `follower.sh.j2`
/// templates). `None` keeps Kubernetes' default (30 s), for a lead without an archive.
pub fn termination_grace_seconds(cluster: &Cluster<'_>, role: Role) -> Option<i64> {
    let save = (cluster.archive.as_ref()).map(|a| a.grace_seconds + SAVE_SECONDS);
    match role {
        Role::Lead => save.map(i64::from),
        // A follower stopped with the whole cluster keeps its broker up while the lead
        // waits for the jobs to finish (they may run on this rank).
        Role::Follower => Some(i64::from(
            (cluster.drain_grace_seconds + LEAVE_SECONDS).max(save.unwrap_or(0)),
        )),
    }
}

/// Why Flux's files or a certificate cannot be made: never the spec's fault (a resolved
/// cluster always renders).
#[derive(thiserror::Error, Debug)]
pub enum Error {
    /// libzmq failed.
    #[error("libzmq: {0}")]
    Curve(String),
    /// A certificate's name its text cannot carry (the model refuses such a MiniCluster
    /// name first).
    #[error("certificate name: {0}")]
    Name(String),
    /// A built-in template failed to render (a bug).
    #[error("rendering {template}: {message}")]
    Template {
        /// Template name.
        template: String,
        /// minijinja's message.
        message: String,
    },
}

/// ConfigMap data: file name -> contents (`broker.toml`, the entrypoints, hook files,
/// `script.sh`, `batch.sh`, service wrappers, `view-init.sh`).
pub fn config_map_data(cluster: &Cluster<'_>) -> Result<BTreeMap<String, String>, Error> {
    let mut data = scripts::script_files(cluster)?;
    data.insert(
        scripts::files::BROKER_TOML.to_string(),
        config::broker_toml(cluster),
    );
    if let Some(text) = config::scheduler_toml(cluster) {
        data.insert(scripts::files::SCHEDULER_TOML.to_string(), text);
    }
    if let Some(text) = config::kvs_toml(cluster) {
        data.insert(scripts::files::KVS_TOML.to_string(), text);
    }
    Ok(data)
}
