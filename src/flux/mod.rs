//! Flux domain knowledge: everything that turns the pods of a MiniCluster into one working
//! Flux instance (the contract is the project's spec `flux-runtime.md`, kept outside this
//! repository in `../shared/spec/`; what it asks is restated below). Pure functions of the
//! resolved MiniCluster ([`crate::model::Cluster`]); the render module puts the results into the ConfigMap, Secret, JobSet and
//! Services.
//!
//! # Layout in the pod
//!
//! | path | what | from |
//! |---|---|---|
//! | [`CONFIG_MOUNT`] `/etc/flux-operator/config` | `broker.toml`, `lead.sh`, `follower.sh`, `view-init.sh`, `flux-view.sh`, `container.<name>.sh`, `service.<name>.sh`, hook files, `script.sh`, `batch.sh` | the ConfigMap ([`config_map_data`]), read-only |
//! | [`CURVE_MOUNT`] `/etc/flux-operator/curve` | `curve.cert` | the CURVE Secret, read-only ([`pod::curve_secret_mode`]), Flux container only |
//! | [`KEY_MOUNT`] `/run/flux-operator-key` | `curve.cert` (private copy, 0400: [`CURVE_PRIVATE_PATH`]) | memory-backed emptyDir ([`KEY_VOLUME`](crate::render::flux_pod::KEY_VOLUME)), Flux container only |
//! | [`RUN_MOUNT`] `/run/flux-operator` | `broker/` only | emptyDir ([`RUN_VOLUME`](crate::render::flux_pod::RUN_VOLUME)), owned by root (mode 0777, or group fsGroup with setgid), shared with the containers that do not run Flux (read-only there) |
//! | [`BROKER_DIR`] `/run/flux-operator/broker` | `local` (the broker socket, [`SOCKET_PATH`]); `R.json` ([`RESOURCE_PATH`], unless `flux.brokerConfig`: [`config::resource_hosts`]) | made by the entrypoint, owned by the broker's user, mode 0755 (Flux refuses a socket directory the instance owner does not own; companions of any user can reach the socket) |
//! | `flux.container.mountPath` (`/mnt/flux`) | `view/` (Flux), `software/` (and `flux-view.sh` when copied) | emptyDir filled by the view init container, or with `imageVolume` the view image's `/opt` (subPath `opt`, where `view` may link to an absolute `/opt/...` path); read-only in the app |
//! | [`SOFTWARE_MOUNT`] `/opt/software` | the view's install tree | subPath `software` of the view volume (`opt/software` of an image volume) |
//!
//! Flux reads every `*.toml` in its config directory and merges them; the ConfigMap's are
//! `broker.toml` and, with `flux.scheduler.simple`, `scheduler.toml`
//! ([`config::scheduler_toml`]), so the directory doubles as the script directory. ConfigMap keys of the
//! containers that do not run Flux are dotted (`container.<name>.sh`, `service.<name>.sh`,
//! `<prefix>.<name>.init.sh`, `.pre.sh`, `.post.sh`, see [`scripts::files`]): container names
//! are DNS labels, which have no dots, so no two containers' files can share a key.
//!
//! Containers that do not run Flux never see the CURVE secret key: neither the Secret nor the
//! private copy's volume is mounted in them or in the view init container.
//!
//! The Flux container runs `/bin/bash <CONFIG_MOUNT>/lead.sh` (pod `<mc>-lead-0-0`, rank 0) or
//! `follower.sh` (`<mc>-workers-0-<i>`, rank i+1). Its environment ([`flux_container_variables`]):
//! `FLUX_OPERATOR_CONFIG_DIR`, `FLUX_OPERATOR_CURVE_DIR`, `FLUX_OPERATOR_KEY_DIR`,
//! `FLUX_OPERATOR_RUN_DIR`, `FLUX_OPERATOR_VIEW` (empty without a view), `FLUX_OPERATOR_ROLE`,
//! `FLUX_OPERATOR_CPU_LIMIT` ([`CPU_LIMIT_VARIABLE`], from the downward API), then the container's
//! `environment` and `secrets`. The scripts default to the same paths, and tests point the
//! variables at a temporary directory.
//!
//! # What the entrypoints do
//!
//! In order: `commands.init`; the view (its `bin` appended to `PATH`, its Python packages to
//! `PYTHONPATH`); `flux.environment` exports; the certificate copied from the Secret to a
//! private 0400 file in the key directory; the broker directory ([`BROKER_DIR`], created
//! and checked to be owned by the current user, chmod 0755); when the quorum is below the
//! R for every host written to [`RESOURCE_PATH`] (unless `flux.brokerConfig` replaces the
//! config) with `flux R encode --hosts=<all hosts> --ranks=0-<maxSize-1> --cores=... --gpus=...`
//! (broker.toml's `[resource] path`, `noverify`; the entrypoint exits 1 if it fails): each
//! host has the cores this container may use (its cpuset as hwloc sees it, at most its CPU
//! limit rounded up) and the GPUs it asks for ([`FluxContainer::gpus`](crate::model::containers::FluxContainer::gpus));
//! when the CPU limit leaves fewer cores than the cpuset holds, the cores are shared with
//! other pods, so the job shells bind no task to a core (`cpu-affinity=off` by default, from
//! an initrc passed as `-Sconf.shell_initrc`); `commands.pre`; `commands.brokerPre` (lead) or `commands.workerPre`
//! (followers); the broker; `commands.post`. The lead runs
//! `[commands.prefix] flux start [--wrap=W] -o --config DIR <options> [program]` and exits with
//! its status. Options: `-Slog-stderr-level=<logLevel>` (0 with `logging.quiet`),
//! `-Slog-stderr-mode=local`, `-Sbroker.quorum=N` ([`config::quorum`]), `-Stbon.zmqdebug=1`
//! (`logging.zeromq`), `-Slocal-uri=local://<BROKER_DIR>/local` (unless `flux.disableSocket`),
//! `-Sbroker.rc2_none=1` (interactive lead), `-Scontent.restore=<archive.path>` (when the
//! archive exists). Followers run the same `flux start` without a program; exit status 0 means
//! the lead shut the instance down and the follower exits 0; any other status restarts the
//! broker after `FLUX_OPERATOR_RETRY_SECONDS` (2 s), or with `flux.completeWorkers` exits 0.
//!
//! The lead's program by mode ([`scripts::Mode`]):
//! - single command: `flux submit -N<size> -n<tasks> <optionFlags> --quiet --watch [-vvv] CMD`
//!   (`flux.submitCommand` replaces `flux submit`; `--quiet --watch` are only added for a
//!   `flux submit` command). `-n tasks`, plus `-N size` when tasks >= size; tasks 0: `-N size`.
//! - `batch`: `bash -c 'flux batch "$@" && flux job wait --all' flux-batch -N<size>
//!   [-n<tasks> when tasks >= size] <optionFlags> --flags=waitable --output=<logs>/flux-batch-{{id}}.out <CONFIG>/batch.sh`;
//!   `batch.sh` has one `flux submit --flags=waitable --output=<logs>/job-<i>.out
//!   --error=<logs>/job-<i>.err CMD` per non-blank, non-comment line, then `flux job wait
//!   --all`. `logs` defaults to [`scripts::DEFAULT_BATCH_LOGS`] and is created on every pod.
//! - `batchRaw`: `batch.sh` is the command verbatim (`#!/bin/bash` added when it has no `#!`).
//! - `launcher`: CMD itself is the initial program.
//! - `interactive` or no command: no program, `-Sbroker.rc2_none=1`; up until `flux shutdown`.
//!
//! `commands.script` replaces `command`: `bash <CONFIG>/script.sh` as CMD (batch modes use its
//! lines). With `logging.timed` the program runs under bash's `time` (label `submit`, `batch`
//! or `launcher`) and `flux start` too (`FLUXTIME ... wall time`), with no `/usr/bin/time`.
//! `logging.strict`: errexit, nounset, pipefail (a failing hook stops the entrypoint).
//! `logging.quiet` (as in the Go operator's templates): no entrypoint messages, broker log
//! level 0, `commands.init`'s stdout and all output of `pre`, `brokerPre`, `workerPre` and
//! `servicePre` discarded, `commands.post` untouched, and in batch mode `flux batch`'s job id
//! not printed. `logging.debug`: xtrace
//! and `-vvv` on the submit command. `flux.scheduler.simple`: `scheduler.toml` selects
//! sched-simple as the `sched` and `feasibility` alternative for flux-modprobe (rc1 since 0.79),
//! which loads no Fluxion module then and is no error without Fluxion; for older rc scripts
//! the entrypoint also exports `FLUXION_QMANAGER_RC_NOOP=1 FLUXION_RESOURCE_RC_NOOP=1`
//! (ignored under flux-modprobe). Queue policy goes to `broker.toml` otherwise.
//!
//! # User strings are data
//!
//! CMD follows [`command`]: a command line without shell syntax is split into words, each its
//! own argv element; anything else is passed as `bash -c '<command exactly as written>'`.
//! Words reach the scripts only single-quoted ([`command::quote`]); `optionFlags`,
//! `submitCommand` and `commands.prefix` are split into words (never expanded). Hooks are
//! shell code by intent: each is its own file in the ConfigMap, sourced by the entrypoint, so
//! a broken hook cannot break the entrypoint's structure.
//!
//! # Companion containers
//!
//! The containers that do not run Flux ([`Companion`], named in
//! [`model::containers`](crate::model::containers)). As in the Go operator, a container of
//! `spec.containers` other than the Flux container runs beside the broker in every broker
//! pod ([`Companion::Container`]), and `spec.services` run once, in the services pod
//! `<mc>-services` ([`Companion::Service`]), which has neither a broker nor the view. A
//! wrapped one ([`is_wrapped`]) runs `/bin/sh <CONFIG>/container.<name>.sh` (or
//! `service.<name>.sh`), POSIX sh that runs itself under bash where the image has it (the Go
//! operator runs these commands with bash):
//! `commands.init`; in the broker pods `JOB_COMPLETION_INDEX` made the broker's rank (the Go
//! operator's pod index: 0 on the lead), the view's `bin` on `PATH` and its Python packages
//! on `PYTHONPATH`, `FLUX_URI` and the Go operator's `fluxsocket` set to
//! `local://<BROKER_DIR>/local`, and a wait (unless `flux.noWaitSocket`; none with
//! `flux.disableSocket`) first for the broker socket, then, polling once a second, until
//! `flux uptime` prints state `run` (the local broker has joined, finished rc1, and rank 0
//! answers; skipped when the container has no `flux`); `commands.servicePre`; the command
//! (`sh -c '<command>'`, bash where present); `commands.post`, after which it exits with the
//! command's status (without `post` the command is exec'd). With `noWrapEntrypoint`, or with
//! nothing to run, the image's entrypoint stays and [`companion_args`] gives the args.
//!
//! # Readiness
//!
//! The lead's probe (every lead; the probes are built by
//! [`render::flux_pod`](crate::render::flux_pod)): its TBON port accepts connections, or with
//! `maxSize` 1 its local socket exists ([`socket_exists_command`]). A follower's (every
//! follower): its broker has joined the instance ([`broker_joined_command`]):
//! `flux uptime` through `local://<SOCKET_PATH>` (the view's `flux`, or `PATH`'s without a
//! view) says state `run`: rc1 done and the rank in `broker.online`, so the lead counts it up;
//! a follower waiting for the lead, running rc1 or leaving is not ready. `flux uptime` also
//! asks rank 0 for its summary (about four requests per follower per second). With `flux.disableSocket` the broker has no
//! known socket path and followers get no probe (`None`).

pub mod command;
pub mod config;
pub mod curve;
pub mod pod;
pub mod scripts;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::api::MiniCluster;
use crate::api::validation::FieldError;
use crate::model::Cluster;

pub use crate::model::containers::{ARCHIVE_INIT, Companion, companions, is_wrapped};
pub use crate::model::mounts::{CONFIG_MOUNT, CURVE_MOUNT, KEY_MOUNT, RUN_MOUNT, SOFTWARE_MOUNT};
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

/// Whether the broker's socket is at [`SOCKET_PATH`]: unless `flux.disableSocket`, and
/// always with `spec.archive` (the save and the drain talk to the instance through it).
pub fn socket_known(cluster: &Cluster<'_>) -> bool {
    !cluster.mc.spec.flux.disable_socket || cluster.archive.is_some()
}

/// Which broker a pod runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Rank 0, pod `<mc>-lead-0-0`: runs the program.
    Lead,
    /// Ranks 1.., pods `<mc>-workers-0-<i>` (the `workers` replicated job keeps the Go
    /// operator's name).
    Follower,
}

/// The note the lead's save puts on the jobs it cancels (`spec.archive`): the archive report
/// counts them apart. Plain text: it is also written in a shell script.
pub const SAVE_CANCEL_NOTE: &str =
    "flux-operator: still running when the instance was saved to the archive";

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

/// Seconds the lead broker's pod gets, after the jobs' grace, to stop the instance and write
/// the archive (`flux shutdown` with the content dump, then the atomic rename).
pub const SAVE_SECONDS: i32 = 30;
/// Seconds a follower's pod gets, after the jobs' grace, to requeue what still runs on its
/// rank and stop its broker.
pub const LEAVE_SECONDS: i32 = 15;

/// The termination grace period of a broker pod: long enough for the stop its entrypoint
/// does on SIGTERM (see the `on_sigterm` blocks of the `lead.sh.j2` and `follower.sh.j2`
/// templates). `None` keeps Kubernetes' default (30 s), for a lead without an archive.
pub fn termination_grace_seconds(mc: &MiniCluster, role: Role) -> Option<i64> {
    let save = mc
        .has_archive()
        .then(|| mc.archive_grace_seconds() + SAVE_SECONDS);
    match role {
        Role::Lead => save.map(i64::from),
        // A follower stopped with the whole cluster keeps its broker up while the lead
        // waits for the jobs to finish (they may run on this rank).
        Role::Follower => Some(i64::from(
            (mc.drain_grace_seconds() + LEAVE_SECONDS).max(save.unwrap_or(0)),
        )),
    }
}

/// What the operator knows about the cluster it runs in (the model's [`Environment`](crate::model::Environment)).
pub type Context = crate::model::Environment;

/// Why Flux's files for a MiniCluster cannot be produced. Spec problems name the field.
#[derive(thiserror::Error, Debug)]
pub enum Error {
    /// A spec field is unusable (the cluster domain names `spec.network.clusterDomain` or
    /// the operator's setting; a certificate `spec.flux.curveCert`, or `metadata.name` for
    /// its name).
    #[error("{0}")]
    Spec(FieldError),
    /// libzmq failed (not a spec problem).
    #[error("libzmq: {0}")]
    Curve(String),
    /// A built-in template failed to render (a bug, not a spec problem).
    #[error("rendering {template}: {message}")]
    Template {
        /// Template name.
        template: String,
        /// minijinja's message.
        message: String,
    },
}

impl Error {
    /// The spec field at fault, when the error is about the spec.
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::Spec(e) => Some(&e.field),
            Error::Curve(_) | Error::Template { .. } => None,
        }
    }

    /// The spec's error, or (the operator's fault) the error itself.
    pub fn into_spec(self) -> Result<FieldError, Self> {
        match self {
            Error::Spec(e) => Ok(e),
            other => Err(other),
        }
    }
}

impl From<FieldError> for Error {
    fn from(e: FieldError) -> Self {
        Error::Spec(e)
    }
}

/// A spec error of `field`.
pub(crate) fn spec_error(field: impl Into<String>, message: impl Into<String>) -> Error {
    Error::Spec(FieldError::new(field, message))
}

/// ConfigMap data: file name -> contents (`broker.toml`, the entrypoints, hook files,
/// `script.sh`, `batch.sh`, service wrappers, `view-init.sh`).
pub fn config_map_data(cluster: &Cluster<'_>) -> Result<BTreeMap<String, String>, Error> {
    let mut data = scripts::script_files(cluster)?;
    data.insert(
        scripts::files::BROKER_TOML.to_string(),
        config::broker_toml(cluster)?,
    );
    if let Some(text) = config::scheduler_toml(cluster.mc) {
        data.insert(scripts::files::SCHEDULER_TOML.to_string(), text);
    }
    if let Some(text) = config::kvs_toml(cluster.mc) {
        data.insert(scripts::files::KVS_TOML.to_string(), text);
    }
    Ok(data)
}

/// The certificate text for the CURVE Secret: `flux.curveCert` when given (parsed, checked
/// with a CURVE handshake, and written back in the canonical format), otherwise a fresh
/// keypair named after the MiniCluster. The operator calls this once, when the Secret does
/// not exist yet; the certificate is never rotated while the cluster lives.
pub fn curve_certificate(mc: &MiniCluster) -> Result<curve::Certificate, Error> {
    match given_certificate(mc, true) {
        None => curve::Certificate::generate(mc.name()),
        Some(given) => given,
    }
}

/// `flux.curveCert`, parsed (`None` when the spec gives none: the operator generates one),
/// and with `verify` also checked with a CURVE handshake ([`curve::Certificate::verify`]:
/// blocking work through libzmq over loopback, so callers run it off the async threads and
/// never in the controller's pure plan).
pub fn given_certificate(
    mc: &MiniCluster,
    verify: bool,
) -> Option<Result<curve::Certificate, Error>> {
    let user = mc.spec.flux.curve_cert.as_str();
    if user.trim().is_empty() {
        return None;
    }
    Some(
        curve::Certificate::parse(user)
            .map_err(Error::Spec)
            .and_then(|cert| {
                if verify {
                    cert.verify()?;
                }
                Ok(cert)
            }),
    )
}
