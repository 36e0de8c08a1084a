//! The entrypoint scripts, rendered from the templates in `templates/` with minijinja.
//!
//! Every decision (mode, argv, options, which hooks exist) is made here in Rust and handed to
//! the templates as already-quoted shell words; the templates only lay the script out. The
//! two broker entrypoints share one base, `broker.sh.j2` (header, shell options, the setup of
//! `common.sh.j2`, hooks, broker options, the SIGTERM trap and the broker's wait loop):
//! `lead.sh.j2` and `follower.sh.j2` extend it and fill in its blocks with what differs. User
//! text reaches a script only through [`quote`] (commands, values) or
//! as a file of its own (hooks, scripts, batch scripts), never as raw script text.

use std::collections::BTreeMap;

use minijinja::Environment;
use serde::Serialize;

use super::command::{command_argv, quote, quote_all};
use super::config::resource_hosts;
use super::{
    ARCHIVE_INIT, BROKER_DIR, CONFIG_MOUNT, CURVE_MOUNT, CURVE_SECRET_KEY, Error, JOINED_PORT,
    KEY_MOUNT, QUEUE_METRICS_PORT, RESOURCE_PATH, RUN_MOUNT, SAVE_CANCEL_NOTE, SOCKET_PATH,
};
use crate::api::{MiniClusterContainer, RunningJobs};
use crate::model::containers::CompanionContainer;
use crate::model::containers::{Mode, program_text};
use crate::model::{Cluster, View};

/// File names in the ConfigMap (keys of its `data`).
///
/// Files of the containers that do not run Flux are `container.<name>.sh` (in
/// `spec.containers`) or `service.<name>.sh` (in `spec.services`), and
/// `<prefix>.<name>.<hook>.sh`: container names are DNS labels, so they contain no dot, and
/// the dots make every key unambiguous (a service `a-init` cannot take the key of service
/// `a`'s init hook). No fixed name starts with `container.` or `service.`.
pub mod files {
    /// The broker config.
    pub const BROKER_TOML: &str = "broker.toml";
    /// The scheduler choice of `flux.scheduler.simple` (Flux reads it with `broker.toml`).
    pub const SCHEDULER_TOML: &str = "scheduler.toml";
    /// The KVS checkpoint period of an interactive cluster (see [`kvs_toml`](crate::flux::config::kvs_toml)).
    pub const KVS_TOML: &str = "kvs.toml";
    /// The lead broker's entrypoint.
    pub const LEAD: &str = "lead.sh";
    /// The follower brokers' entrypoint.
    pub const FOLLOWER: &str = "follower.sh";
    /// What a follower's readiness probe connects to (`flux python`, a file of its own so
    /// that it is Python, not Python inside a shell string).
    pub const JOINED: &str = "joined.py";
    /// The lead's queue metrics exporter (`flux python`, started by an rc1 task that
    /// `lead.sh` writes; see [`super::super::QUEUE_METRICS_PORT`]).
    pub const QUEUE_METRICS: &str = "queue-metrics.py";
    /// What the lead counts of the instance's jobs when it ends (`flux python`, see
    /// [`JobsReport`](super::super::JobsReport)).
    pub const COUNT_JOBS: &str = "count-jobs.py";
    /// The flux view init container's script.
    pub const VIEW_INIT: &str = "view-init.sh";
    /// A person's shell environment for Flux in a broker pod (`. flux-view.sh`).
    pub const FLUX_VIEW: &str = "flux-view.sh";
    /// The archive report init container's script (`spec.archive`).
    pub const ARCHIVE_CHECK: &str = "archive-check.sh";
    /// The save of the queue before the instance stops (`spec.archive`).
    pub const SAVE: &str = "save.sh";
    /// `commands.script` of the Flux container.
    pub const SCRIPT: &str = "script.sh";
    /// The batch script (`batch` / `batchRaw`).
    pub const BATCH: &str = "batch.sh";
    /// `commands.init` of the Flux container.
    pub const HOOK_INIT: &str = "hook-init.sh";
    /// `commands.pre`.
    pub const HOOK_PRE: &str = "hook-pre.sh";
    /// `commands.brokerPre`.
    pub const HOOK_BROKER_PRE: &str = "hook-broker-pre.sh";
    /// `commands.workerPre`.
    pub const HOOK_WORKER_PRE: &str = "hook-worker-pre.sh";
    /// `commands.post`.
    pub const HOOK_POST: &str = "hook-post.sh";

    /// Entrypoint of a container that does not run Flux: `<prefix>.<name>.sh`, the prefix
    /// `container` (in `spec.containers`) or `service` (in `spec.services`).
    pub fn companion(prefix: &str, name: &str) -> String {
        format!("{prefix}.{name}.sh")
    }
    /// A hook of that container: `<prefix>.<name>.<hook>.sh` (`init`, `pre` for
    /// `servicePre`, `post`).
    pub fn companion_hook(prefix: &str, name: &str, hook: &str) -> String {
        format!("{prefix}.{name}.{hook}.sh")
    }
    /// Entrypoint of service container `name`: `service.<name>.sh`.
    pub fn service(name: &str) -> String {
        companion("service", name)
    }
    /// `commands.init` of service container `name`: `service.<name>.init.sh`.
    #[cfg(test)]
    pub fn service_init(name: &str) -> String {
        companion_hook("service", name, "init")
    }
    /// `commands.servicePre` of service container `name`: `service.<name>.pre.sh`.
    pub fn service_pre(name: &str) -> String {
        companion_hook("service", name, "pre")
    }
}

/// Output directory of batch jobs when `logs` is empty (the Go operator's default).
pub const DEFAULT_BATCH_LOGS: &str = "/tmp/fluxout";

const COMMON: &str = include_str!("templates/common.sh.j2");
const HOOK: &str = include_str!("templates/hook.sh.j2");
const VIEW: &str = include_str!("templates/view.sh.j2");
const FLUX_VIEW: &str = include_str!("templates/flux-view.sh.j2");
const BROKER: &str = include_str!("templates/broker.sh.j2");
const LEAD: &str = include_str!("templates/lead.sh.j2");
const FOLLOWER: &str = include_str!("templates/follower.sh.j2");
const JOINED: &str = include_str!("templates/joined.py");
const QUEUE_METRICS: &str = include_str!("templates/queue-metrics.py");
const COUNT_JOBS: &str = include_str!("templates/count-jobs.py");
const QUEUE_METRICS_TASK: &str = include_str!("templates/queue-metrics-task.py.j2");
const COMPANION: &str = include_str!("templates/companion.sh.j2");
const VIEW_INIT: &str = include_str!("templates/view-init.sh.j2");
const ARCHIVE_CHECK: &str = include_str!("templates/archive-check.sh.j2");
const ARCHIVE_WHOLE: &str = include_str!("templates/archive-whole.py.j2");
const SAVE: &str = include_str!("templates/save.sh.j2");
const SAVE_ON_CLEANUP: &str = include_str!("templates/save-on-cleanup.py.j2");
const HOLD_QUEUES: &str = include_str!("templates/hold-queues.py.j2");
const RESTARTED_JOBS: &str = include_str!("templates/restarted-jobs.py.j2");
const BATCH: &str = include_str!("templates/batch.sh.j2");
const RELEASE_QUEUES: &str = include_str!("templates/release-queues.py.j2");

/// `-N`/`-n` for the submitted job: `-n tasks`, plus `-N size` when tasks >= size;
/// tasks 0 means only `-N size`.
pub fn node_task_flags(size: i32, tasks: i32) -> Vec<String> {
    match tasks {
        0 => vec![format!("-N{size}")],
        t if t >= size => vec![format!("-N{size}"), format!("-n{t}")],
        t => vec![format!("-n{t}")],
    }
}

/// `-N`/`-n` for the batch job: always the whole cluster (`-N size`, whole nodes), plus
/// `-n tasks` when tasks >= size. (`-n1` alone would squeeze every line onto one core.)
pub fn batch_flags(size: i32, tasks: i32) -> Vec<String> {
    let mut flags = vec![format!("-N{size}")];
    if tasks >= size {
        flags.push(format!("-n{tasks}"));
    }
    flags
}

/// The job's argv as shell words for the generated scripts (quoted literals, or the
/// ConfigMap's `script.sh` run by bash).
fn job_words(c: &MiniClusterContainer) -> Vec<String> {
    if !c.commands.script.trim().is_empty() {
        return vec!["bash".into(), format!("\"$config_dir\"/{}", files::SCRIPT)];
    }
    command_argv(&c.command)
        .map(|argv| argv.iter().map(|w| quote(w).into_owned()).collect())
        .unwrap_or_default()
}

/// The words before the lead's program (then the file [`PROGRAM_END`](super::PROGRAM_END),
/// then the program's words): run the program, and write its exit code to the file when it
/// returns. A program killed with its broker writes nothing.
pub(crate) const PROGRAM_WRAPPER: [&str; 4] = [
    "bash",
    "-c",
    r#"rc=0; "${@:2}" || rc=$?; printf '%s\n' "$rc" >"$1"; exit "$rc""#,
    "flux-operator-program",
];

/// Lines of the initial program inside the lead's `start=( ... )` array.
fn program_lines(cluster: &Cluster<'_>) -> Vec<String> {
    let option_flags = cluster.options.option_flags.clone();
    let (label, body) = match cluster.flux.mode {
        Mode::Interactive => return Vec::new(),
        Mode::Submit => ("submit", submit_lines(cluster, option_flags)),
        Mode::Launcher => (
            "launcher",
            vec![
                "# initial program: the command itself (launcher)".into(),
                job_words(cluster.flux.spec).join(" "),
            ],
        ),
        Mode::Batch | Mode::BatchRaw => ("batch", batch_lines(cluster, option_flags)),
    };
    let mut lines = vec![
        "# the program's exit code, written to $program_end when it returns (see above)".into(),
        format!("{} \"$program_end\"", quote_all(&PROGRAM_WRAPPER)),
    ];
    if cluster.logging.timed {
        lines.push("# logging.timed: report the wall time of the program".to_string());
        lines.push(format!(
            "{} flux-operator-time {label}",
            quote_all(&[
                "bash",
                "-c",
                r#"TIMEFORMAT="FLUXTIME $1 wall time %3lR"; shift; time "$@""#
            ])
        ));
    }
    lines.extend(body);
    lines
}

/// The single command's program: `flux submit` (or `submitCommand`) and the job.
/// (The mode is `Submit` only with a program, so the job has words.)
fn submit_lines(cluster: &Cluster<'_>, option_flags: Vec<String>) -> Vec<String> {
    let submit = &cluster.options.submit;
    let mut words = submit.clone();
    words.extend(node_task_flags(cluster.sizes.size, cluster.sizes.tasks));
    words.extend(option_flags);
    // `--quiet --watch` belong to `flux submit`; `flux run` waits by itself.
    if submit.get(1).map(String::as_str) == Some("submit") {
        words.extend(["--quiet".to_string(), "--watch".to_string()]);
    }
    if cluster.logging.debug {
        words.push("-vvv".into());
    }
    vec![
        "# initial program: submit the command and wait for it".into(),
        quote_all(&words),
        job_words(cluster.flux.spec).join(" "),
    ]
}

/// The batch modes' program: `flux batch` of `batch.sh`, then wait for its jobs.
fn batch_lines(cluster: &Cluster<'_>, option_flags: Vec<String>) -> Vec<String> {
    let c = cluster.flux.spec;
    let logs = if c.logs.is_empty() {
        DEFAULT_BATCH_LOGS
    } else {
        c.logs.as_str()
    };
    // logging.quiet: the batch job's id is not printed (its jobs' output goes to
    // files anyway); errors stay on stderr.
    // `flux job status` waits for the batch job and exits with its exit code (the largest
    // of its jobs', batch.sh), so the program fails with the code of the job that failed.
    let batch = if cluster.logging.quiet {
        r#"id=$(flux batch "$@") && flux job status -v "$id""#
    } else {
        r#"id=$(flux batch "$@") && printf '%s\n' "$id" && flux job status -v "$id""#
    };
    let mut words: Vec<String> = ["bash", "-c", batch, "flux-batch"]
        .map(String::from)
        .to_vec();
    words.extend(batch_flags(cluster.sizes.size, cluster.sizes.tasks));
    words.extend(option_flags);
    words.push("--flags=waitable".into());
    words.push(format!(
        "--output={}/flux-batch-{{{{id}}}}.out",
        logs.trim_end_matches('/')
    ));
    vec![
        "# initial program: run the batch script with flux batch and wait for it".into(),
        format!("{} \"$config_dir\"/{}", quote_all(&words), files::BATCH),
    ]
}

/// The batch script (`batch.sh`) for batch modes, `None` otherwise.
pub fn batch_script(cluster: &Cluster<'_>) -> Result<Option<String>, Error> {
    let (mc, index, c) = (cluster.mc, cluster.flux.index, cluster.flux.spec);
    let text = program_text(c);
    match cluster.flux.mode {
        Mode::BatchRaw => {
            let mut script = String::new();
            if !text.starts_with("#!") {
                script.push_str("#!/bin/bash\n");
            }
            script.push_str(text);
            if !script.ends_with('\n') {
                script.push('\n');
            }
            Ok(Some(script))
        }
        Mode::Batch => {
            let logs = if c.logs.is_empty() {
                DEFAULT_BATCH_LOGS
            } else {
                c.logs.as_str()
            };
            let logs = logs.trim_end_matches('/');
            let jobs: Vec<String> = text
                .lines()
                .filter(|line| {
                    let trimmed = line.trim();
                    !trimmed.is_empty() && !trimmed.starts_with('#')
                })
                .enumerate()
                .map(|(job, line)| {
                    let argv = command_argv(line).unwrap_or_default();
                    let flags = [
                        "--flags=waitable".to_string(),
                        format!("--output={logs}/job-{job}.out"),
                        format!("--error={logs}/job-{job}.err"),
                    ];
                    format!("{} {}", quote_all(&flags), quote_all(&argv))
                })
                .collect();
            let ctx = BatchScript {
                mc: mc.name(),
                index,
                jobs,
            };
            render("batch.sh.j2", &ctx).map(Some)
        }
        _ => Ok(None),
    }
}

/// What `batch.sh.j2` reads: the MiniCluster's name, the container's index, and each
/// command line's `flux submit` (quoted).
#[derive(Serialize)]
struct BatchScript<'a> {
    mc: &'a str,
    index: usize,
    jobs: Vec<String>,
}

/// One user hook as a generated script runs it: its ConfigMap file, the field it comes
/// from, and what `logging.quiet` discards of its output ([`mute`]).
#[derive(Serialize, Clone, Debug)]
struct Hook {
    file: String,
    what: String,
    mute: &'static str,
}

/// What `logging.quiet` discards of a hook's output (a redirection for the line that runs
/// it), as the Go operator's templates do: `commands.init` its stdout; `pre`, `brokerPre`,
/// `workerPre` and `servicePre` stdout and stderr; `post` nothing, since its output is the
/// application's (results, a server's log).
fn mute(hook: &str, quiet: bool) -> &'static str {
    match hook {
        _ if !quiet => "",
        "init" => " >/dev/null",
        "post" => "",
        _ => " >/dev/null 2>&1",
    }
}

/// The hook `name` (`commands.<name>`) of the container at `field`, in ConfigMap file
/// `file`, when its text is not blank.
fn hook(field: &str, name: &str, text: &str, file: String, quiet: bool) -> Option<Hook> {
    (!text.trim().is_empty()).then(|| Hook {
        file,
        what: format!("{field}.commands.{name}"),
        mute: mute(name, quiet),
    })
}

#[derive(Serialize, Default)]
struct Hooks {
    init: Option<Hook>,
    pre: Option<Hook>,
    broker_pre: Option<Hook>,
    worker_pre: Option<Hook>,
    post: Option<Hook>,
}

/// What both broker entrypoints (`lead.sh`, `follower.sh`) are made from.
#[derive(Serialize)]
struct BrokerScript {
    mc: String,
    container: String,
    strict: bool,
    debug: bool,
    quiet: bool,
    config_mount: &'static str,
    curve_mount: &'static str,
    key_mount: &'static str,
    run_mount: &'static str,
    broker_subdir: &'static str,
    socket_name: &'static str,
    /// [`REJOIN_MARKER`].
    rejoin_marker: &'static str,
    resource: Option<ResourceFile>,
    cert_key: &'static str,
    view: Option<String>,
    python_path: Option<String>,
    flux_env: Vec<(String, String)>,
    scheduler_simple: bool,
    logs_dir: Option<String>,
    hooks: Hooks,
    broker_opts: Vec<String>,
    socket: bool,
    wrap: Option<String>,
}

/// What only the lead's entrypoint (`lead.sh`) is made from, beside [`BrokerScript`].
#[derive(Serialize)]
struct LeadScript {
    #[serde(flatten)]
    broker: BrokerScript,
    mode_help: &'static str,
    timed: bool,
    /// `commands.prefix`, quoted words.
    prefix: String,
    /// [`program_lines`].
    program: Vec<String>,
    /// [`PROGRAM_END`](super::PROGRAM_END) when the lead runs a program (not interactive).
    program_end: Option<&'static str>,
    /// [`RETRY_EXIT`](super::RETRY_EXIT).
    retry_exit: i32,
    /// `spec.archive.path`, quoted.
    archive: Option<String>,
    /// Whether the lead saves the queue before the instance stops (`spec.archive`, see
    /// [`save_script`]).
    save: bool,
    /// [`files::SAVE`].
    save_script: &'static str,
    /// Where the lead broker keeps the instance's state across a restart of its container
    /// (`statedir`; an interactive cluster only, see [`crate::model::containers::keeps_state`]).
    state_dir: Option<&'static str>,
    /// [`RESTART_NOTE`](super::RESTART_NOTE), for the rc1 task that ends the jobs that were
    /// running when the instance started again from that state.
    restart_note: &'static str,
    /// [`files::QUEUE_METRICS`] and the port it serves on ([`QUEUE_METRICS_PORT`]).
    queue_metrics_script: &'static str,
    queue_metrics_port: i32,
    /// [`files::COUNT_JOBS`].
    count_script: &'static str,
}

/// What only the followers' entrypoint (`follower.sh`) is made from, beside [`BrokerScript`].
#[derive(Serialize)]
struct FollowerScript {
    #[serde(flatten)]
    broker: BrokerScript,
    /// `spec.drainGracePeriodSeconds`.
    drain_grace: i32,
    /// `spec.flux.completeWorkers`.
    complete_workers: bool,
    /// [`files::JOINED`] and the port it listens on ([`JOINED_PORT`]).
    joined_script: &'static str,
    joined_port: i32,
}

/// The save before the instance stops (`save.sh`, `spec.archive`).
#[derive(Serialize)]
struct Save {
    mc: String,
    /// `spec.archive.path`, quoted.
    archive: String,
    quiet: bool,
    /// `spec.archive.gracePeriodSeconds`.
    grace: i32,
    /// Running jobs get the grace (`runningJobs: Finish`) or are canceled at once.
    finish: bool,
    /// `spec.archive.runningJobs` (serialized as written in the spec).
    running_jobs: RunningJobs,
    /// [`SAVE_CANCEL_NOTE`], which the archive report recognises.
    note: &'static str,
}

/// The R file the entrypoint writes when broker.toml has a `[resource]` table.
#[derive(Serialize)]
struct ResourceFile {
    /// File name in the broker directory.
    file: &'static str,
    /// `--hosts=<hostlist>`, quoted.
    hosts: String,
    /// `0-<maxSize - 1>`.
    rank_set: String,
    quorum: i32,
    ranks: i32,
    /// The GPUs of each host ([`FluxContainer::gpus`](crate::model::containers::FluxContainer::gpus)).
    gpus: u32,
    /// The Flux container has a CPU limit ([`FluxContainer::cpu_limited`](crate::model::containers::FluxContainer::cpu_limited)).
    cpu_limited: bool,
}

#[derive(Serialize, Default)]
struct CompanionHooks {
    init: Option<Hook>,
    service_pre: Option<Hook>,
    post: Option<Hook>,
}

#[derive(Serialize)]
struct CompanionScript {
    mc: String,
    name: String,
    field: String,
    /// Where it runs: every broker pod or the services pod.
    place: &'static str,
    strict: bool,
    debug: bool,
    quiet: bool,
    config_mount: &'static str,
    run_mount: &'static str,
    broker_subdir: &'static str,
    socket_name: &'static str,
    view: Option<String>,
    python_path: Option<String>,
    /// The pod has a broker whose socket is at a known path.
    socket: bool,
    wait_socket: bool,
    /// Make `JOB_COMPLETION_INDEX` the broker's rank (broker pods).
    rank: bool,
    hooks: CompanionHooks,
    /// The command, quoted for `sh -c`; `None` without one.
    command: Option<String>,
}

/// The templates, parsed once for the process (minijinja's `Environment` is `Sync`); a
/// template that extends another (`lead.sh.j2`, `follower.sh.j2` of `broker.sh.j2`) finds it
/// here by name.
fn environment() -> &'static Environment<'static> {
    static TEMPLATES: std::sync::OnceLock<Environment<'static>> = std::sync::OnceLock::new();
    TEMPLATES.get_or_init(parse_templates)
}

fn parse_templates() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()
            .expect("default delimiters are valid"),
    );
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    for (name, source) in [
        ("common.sh.j2", COMMON),
        ("hook.sh.j2", HOOK),
        ("view.sh.j2", VIEW),
        ("flux-view.sh.j2", FLUX_VIEW),
        ("broker.sh.j2", BROKER),
        ("lead.sh.j2", LEAD),
        ("follower.sh.j2", FOLLOWER),
        ("companion.sh.j2", COMPANION),
        ("view-init.sh.j2", VIEW_INIT),
        ("archive-check.sh.j2", ARCHIVE_CHECK),
        ("archive-whole.py.j2", ARCHIVE_WHOLE),
        ("save.sh.j2", SAVE),
        ("save-on-cleanup.py.j2", SAVE_ON_CLEANUP),
        ("hold-queues.py.j2", HOLD_QUEUES),
        ("restarted-jobs.py.j2", RESTARTED_JOBS),
        ("batch.sh.j2", BATCH),
        ("release-queues.py.j2", RELEASE_QUEUES),
        ("queue-metrics-task.py.j2", QUEUE_METRICS_TASK),
    ] {
        env.add_template(name, source)
            .expect("the built-in templates parse");
    }
    env
}

fn render<S: Serialize>(template: &str, ctx: &S) -> Result<String, Error> {
    let env = environment();
    env.get_template(template)
        .and_then(|t| t.render(minijinja::Value::from(minijinja::value::Serde(ctx))))
        .map_err(|e| Error::Template {
            template: template.to_string(),
            message: format!("{e:#}"),
        })
}

/// [`BROKER_DIR`] relative to [`RUN_MOUNT`] (the scripts find the run directory in
/// `FLUX_OPERATOR_RUN_DIR`).
fn broker_subdir() -> &'static str {
    BROKER_DIR
        .strip_prefix(RUN_MOUNT)
        .and_then(|rest| rest.strip_prefix('/'))
        .expect("BROKER_DIR is inside RUN_MOUNT")
}

/// The file a stopping lead leaves in each follower's broker directory (through `flux exec`)
/// when its pod goes alone: the follower's broker then ends cleanly, but the instance is not
/// finished, so the follower starts its broker again to join the lead the Job starts next.
const REJOIN_MARKER: &str = "rejoin-the-next-lead";

/// The socket's file name in [`BROKER_DIR`].
fn socket_name() -> &'static str {
    SOCKET_PATH
        .strip_prefix(BROKER_DIR)
        .and_then(|rest| rest.strip_prefix('/'))
        .expect("SOCKET_PATH is inside BROKER_DIR")
}

fn view_mount(cluster: &Cluster<'_>) -> Option<String> {
    (cluster.view.is_some()).then(|| quote(&cluster.flux_view.mount_path).into_owned())
}

/// Entrypoint of the lead broker (`lead.sh`) or of a follower (`follower.sh`).
pub fn broker_script(cluster: &Cluster<'_>, lead: bool) -> Result<String, Error> {
    let broker = broker_context(cluster, lead);
    if !lead {
        let ctx = FollowerScript {
            broker,
            drain_grace: cluster.drain_grace_seconds,
            complete_workers: cluster.options.complete_workers,
            joined_script: files::JOINED,
            joined_port: JOINED_PORT,
        };
        return render("follower.sh.j2", &ctx);
    }
    let ctx = LeadScript {
        broker,
        mode_help: mode_help(cluster.flux.mode),
        timed: cluster.logging.timed,
        prefix: quote_all(&cluster.flux.prefix),
        program: program_lines(cluster),
        program_end: (cluster.flux.mode.runs_program()).then_some(super::PROGRAM_END),
        retry_exit: super::RETRY_EXIT,
        archive: (cluster.archive.as_ref()).map(|a| quote(a.path).into_owned()),
        save: cluster.archive.is_some(),
        save_script: files::SAVE,
        state_dir: (cluster.flux.mode.keeps_state()).then_some(crate::model::mounts::STATE_MOUNT),
        restart_note: super::RESTART_NOTE,
        queue_metrics_script: files::QUEUE_METRICS,
        queue_metrics_port: QUEUE_METRICS_PORT,
        count_script: files::COUNT_JOBS,
    };
    render("lead.sh.j2", &ctx)
}

/// What the lead's script says its mode is.
fn mode_help(mode: Mode) -> &'static str {
    match mode {
        Mode::Submit => {
            "single command: flux submit the command and wait for it (spec.containers[].command)"
        }
        Mode::Batch => "batch: every command line is a job in one flux batch (batch.sh)",
        Mode::BatchRaw => {
            "batchRaw: the command is a Flux batch script, run with flux batch (batch.sh)"
        }
        Mode::Launcher => "launcher: the command is the instance's initial program",
        Mode::Interactive => "interactive: no program; the instance stays up until `flux shutdown`",
    }
}

/// The context both broker entrypoints share.
fn broker_context(cluster: &Cluster<'_>, lead: bool) -> BrokerScript {
    let (mc, c, field) = (cluster.mc, cluster.flux.spec, &cluster.flux.field);
    let (options, logging) = (&cluster.options, cluster.logging);
    let flux_env = (options.environment.iter())
        .map(|(name, value)| (name.clone(), quote(value).into_owned()))
        .collect();
    let batch = matches!(cluster.flux.mode, Mode::Batch | Mode::BatchRaw);
    let logs = if c.logs.is_empty() {
        DEFAULT_BATCH_LOGS
    } else {
        c.logs.as_str()
    };
    BrokerScript {
        mc: mc.name().to_string(),
        container: if c.name.is_empty() {
            format!("{field} (runFlux)")
        } else {
            format!("{} ({field})", c.name)
        },
        strict: logging.strict,
        debug: logging.debug,
        quiet: logging.quiet,
        config_mount: CONFIG_MOUNT,
        curve_mount: CURVE_MOUNT,
        key_mount: KEY_MOUNT,
        run_mount: RUN_MOUNT,
        broker_subdir: broker_subdir(),
        socket_name: socket_name(),
        rejoin_marker: REJOIN_MARKER,
        resource: resource_file(cluster),
        cert_key: CURVE_SECRET_KEY,
        view: view_mount(cluster),
        python_path: python_path(cluster),
        flux_env,
        scheduler_simple: options.simple_scheduler,
        logs_dir: batch.then(|| quote(logs).into_owned()),
        hooks: broker_hooks(cluster, lead),
        broker_opts: broker_options(cluster, lead),
        // The save and the drain on SIGTERM talk to the instance through the socket: an
        // archive keeps it even with `disableSocket`.
        socket: options.socket,
        wrap: (options.wrap).map(|wrap| quote(&format!("--wrap={wrap}")).into_owned()),
    }
}

/// `spec.flux.container.pythonPath`, quoted (`None` when empty).
fn python_path(cluster: &Cluster<'_>) -> Option<String> {
    let path = &cluster.flux_view.python_path;
    (!path.is_empty()).then(|| quote(path).into_owned())
}

/// The hooks of the Flux container a broker's entrypoint runs: `brokerPre` on the lead,
/// `workerPre` on the followers.
fn broker_hooks(cluster: &Cluster<'_>, lead: bool) -> Hooks {
    let (cmds, field) = (&cluster.flux.spec.commands, &cluster.flux.field);
    let quiet = cluster.logging.quiet;
    let hook = |name: &str, text: &str, file: &str| hook(field, name, text, file.into(), quiet);
    Hooks {
        init: hook("init", &cmds.init, files::HOOK_INIT),
        pre: hook("pre", &cmds.pre, files::HOOK_PRE),
        broker_pre: hook("brokerPre", &cmds.broker_pre, files::HOOK_BROKER_PRE).filter(|_| lead),
        worker_pre: hook("workerPre", &cmds.worker_pre, files::HOOK_WORKER_PRE).filter(|_| !lead),
        post: hook("post", &cmds.post, files::HOOK_POST),
    }
}

/// The `-S` options of `flux start`, quoted.
fn broker_options(cluster: &Cluster<'_>, lead: bool) -> Vec<String> {
    let logging = cluster.logging;
    let mut broker_opts = vec![
        format!("-Slog-stderr-level={}", cluster.options.log_level),
        "-Slog-stderr-mode=local".to_string(),
    ];
    if let Some(q) = cluster.sizes.quorum {
        broker_opts.push(format!("-Sbroker.quorum={q}"));
    }
    if logging.zeromq {
        broker_opts.push("-Stbon.zmqdebug=1".into());
    }
    if lead && cluster.flux.mode == Mode::Interactive {
        broker_opts.push("-Sbroker.rc2_none=1".into());
    }
    broker_opts.iter().map(|o| quote(o).into_owned()).collect()
}

/// The R file the entrypoints write (`None` with `spec.flux.brokerConfig`).
fn resource_file(cluster: &Cluster<'_>) -> Option<ResourceFile> {
    resource_hosts(cluster).map(|hosts| ResourceFile {
        file: RESOURCE_PATH
            .strip_prefix(BROKER_DIR)
            .and_then(|rest| rest.strip_prefix('/'))
            .expect("RESOURCE_PATH is inside BROKER_DIR"),
        hosts: quote(&format!("--hosts={hosts}")).into_owned(),
        // An RFC 22 idset: `0-0` is not one, so a lone lead is `0`.
        rank_set: match cluster.sizes.max_size {
            1 => "0".to_string(),
            n => format!("0-{}", n - 1),
        },
        quorum: cluster.sizes.quorum.unwrap_or(cluster.sizes.max_size),
        ranks: cluster.sizes.max_size,
        gpus: cluster.flux.gpus,
        cpu_limited: cluster.flux.cpu_limited,
    })
}

/// Entrypoint of a container that does not run Flux (POSIX sh, run by bash where the image
/// has it), `None` when it is not wrapped ([`is_wrapped`](crate::model::containers::is_wrapped)).
pub fn companion_script(
    cluster: &Cluster<'_>,
    container: &CompanionContainer<'_>,
) -> Result<Option<String>, Error> {
    if !container.wrapped {
        return Ok(None);
    }
    let (mc, c, companion) = (cluster.mc, container.spec, container.companion);
    let field = companion.field();
    let (options, logging) = (&cluster.options, cluster.logging);
    let quiet = logging.quiet;
    let prefix = companion.file_prefix();
    let hook = |name: &str, text: &str, file: &str| {
        hook(
            &field,
            name,
            text,
            files::companion_hook(prefix, &c.name, file),
            quiet,
        )
    };
    let in_broker_pods = companion.in_broker_pods();
    let ctx = CompanionScript {
        mc: mc.name().to_string(),
        name: c.name.clone(),
        field: field.clone(),
        place: if in_broker_pods {
            "every broker pod"
        } else {
            "the services pod"
        },
        strict: logging.strict,
        debug: logging.debug,
        quiet,
        config_mount: CONFIG_MOUNT,
        run_mount: RUN_MOUNT,
        broker_subdir: broker_subdir(),
        socket_name: socket_name(),
        // The services pod has neither a broker nor the view (as in the Go operator).
        view: view_mount(cluster).filter(|_| in_broker_pods),
        python_path: python_path(cluster),
        socket: in_broker_pods && !options.disable_socket,
        wait_socket: options.wait_socket,
        rank: in_broker_pods,
        hooks: CompanionHooks {
            init: hook("init", &c.commands.init, "init"),
            service_pre: hook("servicePre", &c.commands.service_pre, "pre"),
            post: hook("post", &c.commands.post, "post"),
        },
        command: (!c.command.trim().is_empty()).then(|| quote(&c.command).into_owned()),
    };
    render("companion.sh.j2", &ctx).map(Some)
}

/// The flux view init container's script (`view-init.sh`), `None` unless the view is copied.
pub fn view_init_script(cluster: &Cluster<'_>) -> Result<Option<String>, Error> {
    #[derive(Serialize)]
    struct ViewInit {
        mc: String,
        mount: String,
        config_mount: &'static str,
    }
    if cluster.view != Some(View::Copy) {
        return Ok(None);
    }
    render(
        "view-init.sh.j2",
        &ViewInit {
            mc: cluster.name().to_string(),
            mount: quote(&cluster.flux_view.mount_path).into_owned(),
            config_mount: CONFIG_MOUNT,
        },
    )
    .map(Some)
}

/// `flux-view.sh`, in the ConfigMap (and copied into the view's directory with a copied
/// view), for a person's shell in a broker pod (`kubectl exec ... -- bash`, then `.
/// /mnt/flux/flux-view.sh`): Flux's commands on PATH, its Python bindings on PYTHONPATH, and
/// `FLUX_URI`/`fluxsocket` at the pod's broker, as the Go operator's file of that name sets
/// them. Every user string in it is quoted. `None` without a view.
pub fn shell_environment(cluster: &Cluster<'_>) -> Result<Option<String>, Error> {
    #[derive(Serialize)]
    struct FluxView {
        mc: String,
        mount: String,
        python_path: Option<String>,
        socket: Option<&'static str>,
    }
    if cluster.view.is_none() {
        return Ok(None);
    }
    render(
        "flux-view.sh.j2",
        &FluxView {
            mc: cluster.name().to_string(),
            mount: quote(cluster.flux_view.mount_path.trim_end_matches('/')).into_owned(),
            python_path: python_path(cluster),
            socket: cluster.options.socket.then_some(SOCKET_PATH),
        },
    )
    .map(Some)
}

/// The save of the queue before the instance stops (`save.sh`), `None` without
/// `spec.archive`: the instance runs it as a cleanup command on every ending, and the lead's
/// entrypoint from its SIGTERM trap.
pub fn save_script(cluster: &Cluster<'_>) -> Result<Option<String>, Error> {
    let Some(archive) = &cluster.archive else {
        return Ok(None);
    };
    let mc = cluster.mc;
    render(
        "save.sh.j2",
        &Save {
            mc: mc.name().to_string(),
            archive: quote(archive.path).into_owned(),
            quiet: cluster.logging.quiet,
            grace: archive.grace_seconds,
            finish: archive.running_jobs == RunningJobs::Finish,
            running_jobs: archive.running_jobs,
            note: SAVE_CANCEL_NOTE,
        },
    )
    .map(Some)
}

/// The archive report init container's script (`archive-check.sh`), `None` without
/// `spec.archive`. It writes an [`ArchiveReport`](super::ArchiveReport) as the container's
/// termination message.
pub fn archive_check_script(cluster: &Cluster<'_>) -> Result<Option<String>, Error> {
    #[derive(Serialize)]
    struct ArchiveCheck {
        name: &'static str,
        mc: String,
        view: Option<String>,
        archive: String,
        note: String,
        max_size: i32,
        /// `spec.archive.restoreLimits`, defaults filled in.
        max_members: i64,
        max_bytes: i64,
        max_seconds: i32,
    }
    let Some(archive) = &cluster.archive else {
        return Ok(None);
    };
    let mc = cluster.mc;
    render(
        "archive-check.sh.j2",
        &ArchiveCheck {
            name: ARCHIVE_INIT,
            mc: mc.name().to_string(),
            view: view_mount(cluster),
            archive: quote(archive.path).into_owned(),
            note: quote(SAVE_CANCEL_NOTE).into_owned(),
            max_size: cluster.sizes.max_size,
            max_members: archive.limits.members,
            max_bytes: archive.limits.bytes,
            max_seconds: archive.limits.seconds,
        },
    )
    .map(Some)
}

/// A hook file: a comment naming its origin, then the user's text unchanged.
fn hook_file(origin: &str, text: &str) -> String {
    let mut out =
        format!("# {origin}, sourced by the entrypoint (generated by flux-operator)\n{text}");
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// All script and hook files of the ConfigMap (everything except `broker.toml`).
pub fn script_files(cluster: &Cluster<'_>) -> Result<BTreeMap<String, String>, Error> {
    let (c, field) = (cluster.flux.spec, &cluster.flux.field);
    let mut out = BTreeMap::new();
    out.insert(files::LEAD.to_string(), broker_script(cluster, true)?);
    // Also with maxSize 1: it costs nothing and keeps the ConfigMap's shape fixed.
    out.insert(files::FOLLOWER.to_string(), broker_script(cluster, false)?);
    if cluster.options.socket {
        out.insert(files::JOINED.to_string(), JOINED.to_string());
    }
    out.insert(files::QUEUE_METRICS.to_string(), QUEUE_METRICS.to_string());
    out.insert(files::COUNT_JOBS.to_string(), COUNT_JOBS.to_string());
    if let Some(script) = view_init_script(cluster)? {
        out.insert(files::VIEW_INIT.to_string(), script);
    }
    if let Some(text) = shell_environment(cluster)? {
        out.insert(files::FLUX_VIEW.to_string(), text);
    }
    if let Some(script) = archive_check_script(cluster)? {
        out.insert(files::ARCHIVE_CHECK.to_string(), script);
    }
    if let Some(script) = save_script(cluster)? {
        out.insert(files::SAVE.to_string(), script);
    }
    let hooks = [
        (files::HOOK_INIT, "init", &c.commands.init),
        (files::HOOK_PRE, "pre", &c.commands.pre),
        (files::HOOK_BROKER_PRE, "brokerPre", &c.commands.broker_pre),
        (files::HOOK_WORKER_PRE, "workerPre", &c.commands.worker_pre),
        (files::HOOK_POST, "post", &c.commands.post),
    ];
    for (file, name, text) in hooks {
        if !text.trim().is_empty() {
            out.insert(
                file.to_string(),
                hook_file(&format!("{field}.commands.{name}"), text),
            );
        }
    }
    if !c.commands.script.trim().is_empty() {
        out.insert(files::SCRIPT.to_string(), c.commands.script.clone());
    }
    if let Some(batch) = batch_script(cluster)? {
        out.insert(files::BATCH.to_string(), batch);
    }
    companion_files(cluster, &mut out)?;
    Ok(out)
}

/// Each wrapped companion container's script and hook files, added to `out` (the model
/// makes their names unique, so no two share a file).
fn companion_files(cluster: &Cluster<'_>, out: &mut BTreeMap<String, String>) -> Result<(), Error> {
    for container in &cluster.companions {
        let Some(script) = companion_script(cluster, container)? else {
            continue;
        };
        let (companion, c) = (container.companion, container.spec);
        let cfield = companion.field();
        let mut add = |key: String, text: String| out.insert(key, text);
        let prefix = companion.file_prefix();
        add(files::companion(prefix, &c.name), script);
        for (hook, name, text) in [
            ("init", "init", &c.commands.init),
            ("pre", "servicePre", &c.commands.service_pre),
            ("post", "post", &c.commands.post),
        ] {
            if !text.trim().is_empty() {
                add(
                    files::companion_hook(prefix, &c.name, hook),
                    hook_file(&format!("{cfield}.commands.{name}"), text),
                );
            }
        }
    }
    Ok(())
}
