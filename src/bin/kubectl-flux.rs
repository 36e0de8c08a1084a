//! `kubectl flux`: a kubectl plugin that runs Flux's commands in a MiniCluster's instance.
//!
//! It finds the MiniCluster, checks that its instance can be reached (Running, a ready lead
//! broker pod, a broker socket), and runs `kubectl exec` in the lead pod's Flux container with
//! an argument vector, never a command line: a fixed POSIX `sh -c` script sources the flux
//! view's `flux-view.sh` (Flux on `PATH`, `FLUX_URI` at the lead broker's socket) and then
//! `exec flux "$@"`, so every argument reaches Flux exactly as it was typed. Output streams
//! through, standard input is passed where the command reads it, and the exit code is
//! Flux's. See docs/kubectl-flux.md.

use std::ffi::{OsStr, OsString};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ListParams, PartialObjectMeta};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};

use flux_operator::api::{LEAD_JOB, MiniCluster, NAME_LABEL, Phase, ROLE_LABEL, condition};
use flux_operator::flux::SOCKET_PATH;
use flux_operator::jobset::{JobSet, made_for_jobset};
use flux_operator::model::containers::flux_container_name;

/// The exit code of the plugin's own errors (MiniCluster not found, not running, ...);
/// clap's usage errors exit 2. Any other code is Flux's (or kubectl's, if the exec failed).
const PLUGIN_ERROR: u8 = 1;

/// The script `kubectl exec` runs in the lead pod's Flux container, with `$0` = `kubectl-flux`,
/// `$1` = the flux view's directory (empty without a view), `$2` = the lead broker's URI,
/// `$3` = `flux` or `shell`, then the arguments. POSIX sh; the arguments are only ever
/// expanded as `"$@"`, so none is split, globbed or expanded.
///
/// A view mounted as an image volume is read-only and has no `flux-view.sh`: the operator's
/// ConfigMap has it (since the image volume came; older pods have it in the view only).
const REMOTE_SCRIPT: &str = r#"if [ -n "$1" ]; then
  env_file="$1/flux-view.sh"
  [ -r "$env_file" ] || env_file=/etc/flux-operator/config/flux-view.sh
  if [ ! -r "$env_file" ]; then
    printf 'kubectl-flux: %s/flux-view.sh is missing in this container\n' "$1" >&2
    exit 127
  fi
  . "$env_file"
else
  FLUX_URI=$2
  fluxsocket=$2
  export FLUX_URI fluxsocket
fi
what=$3
shift 3
if [ "$what" = shell ]; then
  if command -v bash >/dev/null 2>&1; then exec bash "$@"; fi
  exec sh "$@"
fi
exec flux "$@""#;

/// The name the remote script runs under (`$0`: what its own messages say).
const REMOTE_NAME: &str = "kubectl-flux";

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-flux",
    bin_name = "kubectl flux",
    version,
    about = "Run Flux commands in a MiniCluster's instance, every argument passed unchanged",
    after_help = "\
Everything after <MINICLUSTER> is Flux's, unchanged (no shell re-splitting): put the plugin's
own options (-n, --context, --kubeconfig) before it. A `--` right after <MINICLUSTER> is
optional and dropped; any later `--` is passed to Flux.

  kubectl flux run -n team mc -- -N2 printf '%s\\n' 'two words' '$HOME' '*'
  kubectl flux submit mc --watch hostname
  kubectl flux resource mc list
  kubectl flux uptime mc          (any other flux command passes through)
  kubectl flux shell mc

The exit code is Flux's; the plugin's own errors exit 1 (usage errors 2).
See docs/kubectl-flux.md."
)]
struct Cli {
    #[command(flatten)]
    kube: KubeArgs,
    #[command(subcommand)]
    command: Cmd,
}

/// kubectl's connection options, passed on to `kubectl exec` too.
#[derive(Args, Debug, Clone, Default, PartialEq)]
struct KubeArgs {
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long, global = true, value_name = "NAME")]
    context: Option<String>,
    /// The MiniCluster's namespace (default: the context's namespace).
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    namespace: Option<String>,
}

#[derive(Subcommand, Debug, PartialEq)]
enum Cmd {
    /// `flux run`: run a job, output streamed, exit code the job's.
    Run(FluxArgs),
    /// `flux submit`: queue a job, print its id.
    Submit(FluxArgs),
    /// `flux alloc`: a sub-instance running a command.
    Alloc(FluxArgs),
    /// `flux batch`: a batch script (a file in the pod, or standard input).
    Batch(FluxArgs),
    /// `flux jobs`: the instance's jobs.
    Jobs(FluxArgs),
    /// `flux job attach`: a job's output (and standard input).
    Attach(FluxArgs),
    /// `flux cancel`: cancel jobs.
    Cancel(FluxArgs),
    /// `flux resource`: e.g. `kubectl flux resource mc list`.
    Resource(FluxArgs),
    /// `flux queue`: e.g. `kubectl flux queue mc status`.
    Queue(FluxArgs),
    /// `flux dmesg`: the lead broker's log.
    Dmesg(FluxArgs),
    /// A shell in the instance: Flux on PATH, FLUX_URI set (a TTY when standard input is one;
    /// otherwise the shell reads its commands from standard input).
    Shell(ShellArgs),
    /// Wait until all the MiniCluster's brokers are up, or say why they are not.
    Wait(WaitArgs),
    /// MiniClusters with their size, ready brokers, phase and job counts.
    List(ListArgs),
    /// Any other flux command: `kubectl flux <command> <MINICLUSTER> [--] [ARGS...]`.
    #[command(external_subcommand)]
    Other(Vec<OsString>),
}

/// `<MINICLUSTER> [--] [FLUX ARGS...]`.
#[derive(Args, Debug, PartialEq)]
struct FluxArgs {
    /// The MiniCluster.
    #[arg(value_name = "MINICLUSTER")]
    mc: String,
    /// Flux's arguments, passed unchanged.
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    args: Vec<OsString>,
}

#[derive(Args, Debug, PartialEq)]
struct ShellArgs {
    /// The MiniCluster.
    #[arg(value_name = "MINICLUSTER")]
    mc: String,
}

#[derive(Args, Debug, PartialEq)]
struct WaitArgs {
    /// The MiniCluster.
    #[arg(value_name = "MINICLUSTER")]
    mc: String,
    /// How long to wait: `90s`, `5m`, `1h` or seconds.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    timeout: Duration,
}

#[derive(Args, Debug, PartialEq)]
struct ListArgs {
    /// MiniClusters of every namespace.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Leave out the job counts (one `kubectl exec` per running MiniCluster).
    #[arg(long)]
    no_jobs: bool,
}

/// One Flux command to run in the lead pod: `flux <verb> <args...>`.
#[derive(Debug, PartialEq)]
struct FluxCommand {
    mc: String,
    argv: Vec<OsString>,
}

impl FluxCommand {
    fn new(verb: &[&str], FluxArgs { mc, args }: FluxArgs) -> Self {
        let mut argv: Vec<OsString> = verb.iter().map(OsString::from).collect();
        argv.extend(args);
        Self { mc, argv }
    }

    /// A pass-through command from clap's external subcommand: `[verb, mc, args...]`.
    fn other(words: Vec<OsString>) -> Result<Self, Usage> {
        let mut words = words.into_iter();
        let verb = words.next().ok_or(Usage::NoCommand)?;
        let mc = words
            .next()
            .ok_or_else(|| Usage::NoMiniCluster(verb.to_string_lossy().into_owned()))?;
        let mc = mc
            .into_string()
            .map_err(|mc| Usage::BadMiniCluster(mc.to_string_lossy().into_owned()))?;
        if mc.starts_with('-') {
            return Err(Usage::OptionAfterCommand {
                verb: verb.to_string_lossy().into_owned(),
                option: mc,
            });
        }
        let mut argv = vec![verb];
        argv.extend(drop_leading_separator(words.collect()));
        Ok(Self { mc, argv })
    }

    /// Whether Flux reads standard input for this command (then `kubectl exec -i`).
    fn reads_stdin(&self) -> bool {
        let verb = self.argv.first().map(OsString::as_os_str);
        // These only print or change state: no input to give them.
        let no_input = ["jobs", "cancel", "resource", "queue", "dmesg"];
        !verb.is_some_and(|v| no_input.iter().any(|n| OsStr::new(n) == v))
    }
}

/// The plugin's options that take a value (as kubectl spells them).
const VALUE_OPTIONS: [&str; 4] = ["--kubeconfig", "--context", "--namespace", "-n"];
/// The plugin's own commands: everything else names a Flux command.
const OWN_COMMANDS: [&str; 4] = ["shell", "wait", "list", "help"];

/// Whether `word` is one of the plugin's options with its value in it (`--context=x`, `-nx`).
fn is_inline_option(word: &str) -> bool {
    VALUE_OPTIONS
        .iter()
        .filter(|o| o.starts_with("--"))
        .any(|o| word.starts_with(&format!("{o}=")))
        || (word.starts_with("-n") && word.len() > 2 && !word.starts_with("--"))
}

/// The command line as clap gets it: for a Flux command, everything after the MiniCluster is
/// Flux's. clap alone would still take a `-n` or `--context` there as the plugin's (`run mc -n
/// 4 hostname` would pick namespace `4`), so the words after the MiniCluster are put behind a
/// `--` (one the user gave right after the MiniCluster is dropped first), and the plugin's
/// options between the command and the MiniCluster are moved before the command.
fn split_flux_args(argv: Vec<OsString>) -> Vec<OsString> {
    let text = |i: usize| argv.get(i).and_then(|w| w.to_str());
    // Before the command: the plugin's options, with their values.
    let mut i = 1;
    let verb = loop {
        match text(i) {
            None if i >= argv.len() => return argv,
            Some("--") => return argv,
            Some(o) if VALUE_OPTIONS.contains(&o) => i += 2,
            Some(o) if o.starts_with('-') => i += 1,
            _ => break i,
        }
    };
    if text(verb).is_some_and(|v| OWN_COMMANDS.contains(&v)) {
        return argv;
    }
    // Between the command and the MiniCluster: only the plugin's options.
    let mut moved = Vec::new();
    let mut j = verb + 1;
    loop {
        match text(j) {
            Some(o) if VALUE_OPTIONS.contains(&o) && j + 1 < argv.len() => {
                moved.extend_from_slice(&argv[j..j + 2]);
                j += 2;
            }
            Some(o) if is_inline_option(o) => {
                moved.push(argv[j].clone());
                j += 1;
            }
            _ => break,
        }
    }
    let mut out: Vec<OsString> = argv[..verb].to_vec();
    out.extend(moved);
    out.push(argv[verb].clone());
    let Some(mc) = argv.get(j) else {
        return out;
    };
    if mc.to_str().is_some_and(|m| m.starts_with('-')) {
        // Not a MiniCluster: clap (or [`FluxCommand::other`]) says what is wrong.
        out.extend_from_slice(&argv[j..]);
        return out;
    }
    out.push(mc.clone());
    let rest = drop_leading_separator(argv[j + 1..].to_vec());
    if !rest.is_empty() {
        out.push("--".into());
        out.extend(rest);
    }
    out
}

/// clap keeps a `--` that follows the first trailing value; one given right after the
/// MiniCluster is the plugin's separator (clap drops it in that place, the external
/// subcommand does not).
fn drop_leading_separator(mut args: Vec<OsString>) -> Vec<OsString> {
    if args.first().is_some_and(|a| a == "--") {
        args.remove(0);
    }
    args
}

/// A command line the plugin cannot use.
#[derive(Debug, PartialEq, thiserror::Error)]
enum Usage {
    #[error("no command given (see `kubectl flux --help`)")]
    NoCommand,
    #[error(
        "`kubectl flux {0}` needs a MiniCluster: kubectl flux {0} <MINICLUSTER> [--] [ARGS...]"
    )]
    NoMiniCluster(String),
    #[error("{0:?} is not a MiniCluster name")]
    BadMiniCluster(String),
    #[error(
        "`kubectl flux {verb} {option}`: {option} is not an option of kubectl flux; the MiniCluster comes right after the command (kubectl flux [-n NS] {verb} <MINICLUSTER> [--] [ARGS...])"
    )]
    OptionAfterCommand { verb: String, option: String },
}

/// Why a MiniCluster's instance cannot be reached.
#[derive(Debug, PartialEq, thiserror::Error)]
enum Refusal {
    #[error("MiniCluster {0} not found (kubectl get miniclusters -n {1})")]
    NotFound(String, String),
    #[error(
        "MiniCluster {0} sets spec.flux.disableSocket: its brokers have no local socket, so there is no instance to run Flux commands in from outside"
    )]
    NoSocket(String),
    #[error("MiniCluster {name} is {phase}{why}")]
    NotRunning {
        name: String,
        phase: String,
        why: String,
    },
    #[error("MiniCluster {name} has no ready lead broker pod ({found}){why}")]
    NoLead {
        name: String,
        found: String,
        why: String,
    },
    #[error("the lead pod {pod} has no container {container}")]
    NoContainer { pod: String, container: String },
}

/// Where and how to reach the instance.
#[derive(Debug, Clone, PartialEq)]
struct Target {
    namespace: String,
    pod: String,
    container: String,
    /// The flux view's directory (`spec.flux.container.mountPath`), `None` without a view.
    view: Option<String>,
    /// The lead broker's URI (used only without a view; `flux-view.sh` sets the same).
    uri: String,
}

/// The `kubectl` to run: `$KUBECTL`, else `kubectl` on PATH.
fn kubectl() -> OsString {
    std::env::var_os("KUBECTL")
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| "kubectl".into())
}

/// `kubectl`'s arguments for `what` (`flux` or `shell`) with `args` in the target.
fn exec_args(
    kube: &KubeArgs,
    target: &Target,
    stdin: bool,
    tty: bool,
    what: &str,
    args: &[OsString],
) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    if let Some(file) = &kube.kubeconfig {
        out.push("--kubeconfig".into());
        out.push(file.into());
    }
    if let Some(context) = &kube.context {
        out.push("--context".into());
        out.push(context.into());
    }
    out.extend(["-n".into(), (&target.namespace).into(), "exec".into()]);
    if stdin {
        out.push("-i".into());
    }
    if tty {
        out.push("-t".into());
    }
    out.extend([
        (&target.pod).into(),
        "-c".into(),
        (&target.container).into(),
        "--".into(),
        "/bin/sh".into(),
        "-c".into(),
        REMOTE_SCRIPT.into(),
        REMOTE_NAME.into(),
        target.view.clone().unwrap_or_default().into(),
        (&target.uri).into(),
        what.into(),
    ]);
    out.extend(args.iter().cloned());
    out
}

/// Whether the MiniCluster's instance can be reached, before looking at its pods.
fn check_reachable(mc: &MiniCluster) -> Result<(), Refusal> {
    let name = qualified(mc);
    // An archive keeps the socket even with disableSocket (the save needs it).
    if mc.spec.flux.disable_socket && !mc.has_archive() {
        return Err(Refusal::NoSocket(name));
    }
    let phase = mc.status.as_ref().and_then(|s| s.phase);
    match phase {
        // Starting: the lead may be up while followers start (a grow, a replaced follower);
        // the lead pod's readiness decides.
        Some(Phase::Running | Phase::Starting) => Ok(()),
        Some(other) => Err(Refusal::NotRunning {
            name,
            phase: other.as_str().to_string(),
            why: why_not(mc),
        }),
        None => Err(Refusal::NotRunning {
            name,
            phase: "without a status yet".into(),
            why: " (is the operator running?)".into(),
        }),
    }
}

/// The conditions that explain a MiniCluster that is not up, as ` (Type: message; ...)`.
fn why_not(mc: &MiniCluster) -> String {
    let conditions = mc
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let telling = [
        condition::INVALID_SPEC,
        condition::BLOCKED,
        condition::FAILED,
        condition::SUCCEEDED,
        condition::SUSPENDED,
        condition::DEGRADED,
    ];
    let mut parts: Vec<String> = conditions
        .iter()
        .filter(|c| c.status == "True" && telling.contains(&c.type_.as_str()))
        .map(describe)
        .collect();
    if parts.is_empty() {
        parts.extend(
            conditions
                .iter()
                .filter(|c| c.type_ == condition::READY && c.status != "True")
                .map(describe),
        );
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

fn describe(c: &Condition) -> String {
    let mut out = format!("{}={}", c.type_, c.status);
    if !c.reason.is_empty() {
        out.push_str(&format!(" {}", c.reason));
    }
    if !c.message.is_empty() {
        out.push_str(&format!(": {}", c.message));
    }
    out
}

fn qualified(mc: &MiniCluster) -> String {
    format!("{}/{}", mc.namespace_or_default(), mc.name())
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Unknown")
}

/// The lead pod to run in: of the lead pods (by label), the newest that is Running, ready and
/// not being deleted.
fn choose_lead<'a>(mc: &MiniCluster, pods: &'a [Pod]) -> Result<&'a Pod, Refusal> {
    let usable = pods.iter().filter(|p| {
        p.metadata.deletion_timestamp.is_none() && pod_phase(p) == "Running" && pod_ready(p)
    });
    usable
        .max_by(|a, b| {
            let created = |p: &Pod| p.metadata.creation_timestamp.clone().map(|t| t.0);
            created(a)
                .cmp(&created(b))
                .then_with(|| a.name_any().cmp(&b.name_any()))
        })
        .ok_or_else(|| Refusal::NoLead {
            name: qualified(mc),
            found: if pods.is_empty() {
                "no lead pod".into()
            } else {
                pods.iter()
                    .map(|p| {
                        let state = if p.metadata.deletion_timestamp.is_some() {
                            "terminating".to_string()
                        } else if pod_phase(p) == "Running" {
                            "Running, not ready".to_string()
                        } else {
                            pod_phase(p).to_string()
                        };
                        format!("{} {state}", p.name_any())
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            why: why_not(mc),
        })
}

/// Where to run Flux commands for `mc`, given its lead pods.
fn target(mc: &MiniCluster, pods: &[Pod]) -> Result<Target, Refusal> {
    check_reachable(mc)?;
    let pod = choose_lead(mc, pods)?;
    let container = flux_container_name(mc).to_string();
    let has_container = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.containers.iter().any(|c| c.name == container));
    if !has_container {
        return Err(Refusal::NoContainer {
            pod: pod.name_any(),
            container,
        });
    }
    let view = &mc.spec.flux.container;
    Ok(Target {
        namespace: mc.namespace_or_default().to_string(),
        pod: pod.name_any(),
        container,
        view: (!view.disable).then(|| view.mount_path.clone()),
        uri: format!("local://{SOCKET_PATH}"),
    })
}

/// The uid of `mc`'s own JobSet among `jobsets` (its name and namespace, `mc` its
/// controller): `None` while it has none.
fn own_jobset_uid(mc: &MiniCluster, jobsets: &[PartialObjectMeta<JobSet>]) -> Option<String> {
    jobsets
        .iter()
        .find(|js| {
            js.metadata.name.as_deref() == Some(mc.name())
                && js.metadata.namespace.as_deref() == Some(mc.namespace_or_default())
                && js
                    .owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && Some(&o.uid) == mc.metadata.uid.as_ref())
        })
        .and_then(|js| js.metadata.uid.clone())
}

/// The pods among `pods` that `mc`'s own JobSet made: not those of an earlier MiniCluster
/// of the same name, nor pods made with its labels by hand.
fn own_pods(mc: &MiniCluster, jobsets: &[PartialObjectMeta<JobSet>], pods: &[Pod]) -> Vec<Pod> {
    let Some(uid) = own_jobset_uid(mc, jobsets) else {
        return Vec::new();
    };
    pods.iter()
        .filter(|p| {
            p.namespace().as_deref() == Some(mc.namespace_or_default())
                && p.labels().get(NAME_LABEL).map(String::as_str) == Some(mc.name())
                && made_for_jobset(&p.metadata, &uid)
        })
        .cloned()
        .collect()
}

/// The label selector of a MiniCluster's lead pods (`mc` empty: of every MiniCluster).
fn lead_selector(mc: &str) -> String {
    if mc.is_empty() {
        format!("{NAME_LABEL},{ROLE_LABEL}={LEAD_JOB}")
    } else {
        format!("{NAME_LABEL}={mc},{ROLE_LABEL}={LEAD_JOB}")
    }
}

/// A duration: `90s`, `5m`, `1h`, `500ms` or plain seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 90s, 5m, 1h)"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

/// Where a MiniCluster stands for `kubectl flux wait`.
#[derive(Debug, PartialEq)]
enum Progress {
    /// Every broker is up.
    Up(String),
    /// Not yet: what it is doing.
    Waiting(String),
    /// It will not come up without a change: why.
    Never(String),
}

fn progress(mc: &MiniCluster) -> Progress {
    let status = mc.status.clone().unwrap_or_default();
    let brokers = format!("{}/{} brokers ready", status.ready_brokers, mc.spec.size);
    // Up means the size asked now: a status written for an older spec (a scale the operator
    // has not seen yet), or a Running cluster with fewer brokers ready, is not up.
    let generation = mc.metadata.generation;
    let current = |g: Option<i64>| generation.is_none() || g == generation;
    let ready = current(status.observed_generation)
        && status.ready_brokers >= mc.spec.size
        && status.conditions.iter().any(|c| {
            c.type_ == condition::READY && c.status == "True" && current(c.observed_generation)
        });
    let phase = status.phase;
    if ready && !phase.is_some_and(Phase::is_finished) {
        return Progress::Up(brokers);
    }
    let is_true = |t: &str| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == t && c.status == "True")
    };
    let phase_text = phase.map_or("without a status yet", Phase::as_str);
    if phase.is_some_and(Phase::is_finished) || is_true(condition::INVALID_SPEC) {
        return Progress::Never(format!("{phase_text}, {brokers}{}", why_not(mc)));
    }
    Progress::Waiting(format!("{phase_text}, {brokers}{}", why_not(mc)))
}

/// `X running, Y completed, Z failed, W pending, ...` from `flux jobs --stats-only`.
#[derive(Debug, Clone, Default, PartialEq)]
struct JobCounts {
    pending: u64,
    running: u64,
    completed: u64,
    failed: u64,
}

fn parse_stats(text: &str) -> Option<JobCounts> {
    let mut counts = JobCounts::default();
    let mut seen = 0;
    for part in text.trim().split(',') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(n) = n.parse() else { continue };
        let slot = match what {
            "pending" => &mut counts.pending,
            "running" => &mut counts.running,
            "completed" => &mut counts.completed,
            "failed" => &mut counts.failed,
            _ => continue,
        };
        *slot = n;
        seen += 1;
    }
    (seen == 4).then_some(counts)
}

/// A table with columns padded to their widest cell, as kubectl prints one.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] - cell.chars().count() + 3;
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The exit code of a finished `kubectl` (128 + the signal that ended it, as shells report).
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(PLUGIN_ERROR),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(PLUGIN_ERROR),
        (None, None) => PLUGIN_ERROR,
    }
}

/// The client and the namespace the kubeconfig (and the plugin's options) choose.
async fn connect(kube: &KubeArgs) -> Result<(Client, String)> {
    let options = KubeConfigOptions {
        context: kube.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &kube.kubeconfig {
        Some(file) => {
            let kubeconfig = Kubeconfig::read_from(file)
                .with_context(|| format!("reading the kubeconfig {}", file.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None if kube.context.is_some() => Config::from_kubeconfig(&options).await?,
        None => Config::infer()
            .await
            .context("no kubeconfig ($KUBECONFIG, ~/.kube/config) and not in a cluster")?,
    };
    let namespace = kube
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    Ok((Client::try_from(config)?, namespace))
}

/// The MiniCluster and where its instance is reached.
async fn find(client: &Client, namespace: &str, name: &str) -> Result<Target> {
    let mcs: Api<MiniCluster> = Api::namespaced(client.clone(), namespace);
    let mc = mcs
        .get_opt(name)
        .await
        .with_context(|| format!("reading MiniCluster {namespace}/{name}"))?
        .ok_or_else(|| Refusal::NotFound(format!("{namespace}/{name}"), namespace.to_string()))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let leads = pods
        .list(&ListParams::default().labels(&lead_selector(name)))
        .await
        .with_context(|| format!("listing the lead pods of MiniCluster {namespace}/{name}"))?;
    let jobsets: Api<JobSet> = Api::namespaced(client.clone(), namespace);
    let jobset = jobsets
        .get_metadata_opt(name)
        .await
        .with_context(|| format!("reading the JobSet of MiniCluster {namespace}/{name}"))?;
    let leads = own_pods(&mc, &Vec::from_iter(jobset), &leads.items);
    Ok(target(&mc, &leads)?)
}

/// `kubectl exec` with the terminal's standard streams; its exit code.
fn exec(
    kube: &KubeArgs,
    target: &Target,
    stdin: bool,
    tty: bool,
    what: &str,
    args: &[OsString],
) -> Result<u8> {
    // SIGINT (^C) goes to kubectl too, which ends the remote command; the plugin stays to
    // return kubectl's exit code. The handler is installed once this exists.
    let _interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("handling SIGINT")?;
    let mut cmd = Command::new(kubectl());
    cmd.args(exec_args(kube, target, stdin, tty, what, args));
    if !stdin {
        cmd.stdin(Stdio::null());
    }
    let status = cmd
        .status()
        .with_context(|| format!("running {:?} (set $KUBECTL to choose one)", kubectl()))?;
    Ok(exit_code(status))
}

async fn run_flux(kube: &KubeArgs, command: FluxCommand) -> Result<u8> {
    let (client, namespace) = connect(kube).await?;
    let target = find(&client, &namespace, &command.mc).await?;
    exec(
        kube,
        &target,
        command.reads_stdin(),
        false,
        "flux",
        &command.argv,
    )
}

async fn shell(kube: &KubeArgs, mc: &str) -> Result<u8> {
    let (client, namespace) = connect(kube).await?;
    let target = find(&client, &namespace, mc).await?;
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    // With a terminal, an interactive shell; without, a shell reading its script from stdin.
    let mode = if tty { "-i" } else { "-s" };
    exec(kube, &target, true, tty, "shell", &[mode.into()])
}

async fn wait(kube: &KubeArgs, args: WaitArgs) -> Result<u8> {
    let (client, namespace) = connect(kube).await?;
    let mcs: Api<MiniCluster> = Api::namespaced(client, &namespace);
    let name = format!("{namespace}/{}", args.mc);
    let start = Instant::now();
    let mut said = String::new();
    loop {
        let mc = mcs
            .get_opt(&args.mc)
            .await
            .with_context(|| format!("reading MiniCluster {name}"))?
            .ok_or_else(|| Refusal::NotFound(name.clone(), namespace.clone()))?;
        match progress(&mc) {
            Progress::Up(brokers) => {
                println!("MiniCluster {name} is up: {brokers}");
                return Ok(0);
            }
            Progress::Never(why) => {
                eprintln!("error: MiniCluster {name} will not come up: {why}");
                return Ok(PLUGIN_ERROR);
            }
            Progress::Waiting(now) => {
                if start.elapsed() >= args.timeout {
                    eprintln!(
                        "error: timed out after {:?} waiting for MiniCluster {name}: {now}",
                        args.timeout
                    );
                    return Ok(PLUGIN_ERROR);
                }
                if now != said {
                    eprintln!("waiting for MiniCluster {name}: {now}");
                    said = now;
                }
            }
        }
        let left = args.timeout.saturating_sub(start.elapsed());
        tokio::time::sleep(left.min(Duration::from_secs(2))).await;
    }
}

async fn list(kube: &KubeArgs, args: ListArgs) -> Result<u8> {
    let (client, namespace) = connect(kube).await?;
    let (mcs, pods, jobsets): (Api<MiniCluster>, Api<Pod>, Api<JobSet>) = if args.all_namespaces {
        (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client),
        )
    } else {
        (
            Api::namespaced(client.clone(), &namespace),
            Api::namespaced(client.clone(), &namespace),
            Api::namespaced(client, &namespace),
        )
    };
    let mut items = mcs
        .list(&ListParams::default())
        .await
        .context("listing MiniClusters")?
        .items;
    items.sort_by_key(qualified);
    if items.is_empty() {
        if args.all_namespaces {
            eprintln!("No MiniClusters found.");
        } else {
            eprintln!("No MiniClusters found in namespace {namespace}.");
        }
        return Ok(0);
    }
    let counts = if args.no_jobs {
        vec![None; items.len()]
    } else {
        let leads = pods
            .list(&ListParams::default().labels(&lead_selector("")))
            .await
            .context("listing lead pods")?
            .items;
        let jobsets = jobsets
            .list_metadata(&ListParams::default().labels(NAME_LABEL))
            .await
            .context("listing the MiniClusters' JobSets")?
            .items;
        job_counts(kube, &items, &jobsets, &leads)
    };
    let mut header = vec!["NAME", "SIZE", "READY", "PHASE"];
    if args.all_namespaces {
        header.insert(0, "NAMESPACE");
    }
    if !args.no_jobs {
        header.extend(["PENDING", "RUNNING", "COMPLETED", "FAILED"]);
    }
    let mut rows = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
    for (mc, counts) in items.iter().zip(counts) {
        let status = mc.status.clone().unwrap_or_default();
        let mut row = vec![
            mc.name().to_string(),
            mc.spec.size.to_string(),
            status.ready_brokers.to_string(),
            status.phase.map_or("", Phase::as_str).to_string(),
        ];
        if args.all_namespaces {
            row.insert(0, mc.namespace_or_default().to_string());
        }
        if !args.no_jobs {
            match counts {
                Some(c) => {
                    row.extend([c.pending, c.running, c.completed, c.failed].map(|n| n.to_string()))
                }
                None => row.extend(["-"; 4].map(String::from)),
            }
        }
        rows.push(row);
    }
    print!("{}", table(&rows));
    Ok(0)
}

/// `flux jobs --stats-only` in the lead pod of each reachable MiniCluster, a few at a time
/// (one `kubectl exec` each); `None` where it is not reachable or did not answer.
fn job_counts(
    kube: &KubeArgs,
    items: &[MiniCluster],
    jobsets: &[PartialObjectMeta<JobSet>],
    leads: &[Pod],
) -> Vec<Option<JobCounts>> {
    const AT_ONCE: usize = 8;
    let targets: Vec<Option<Target>> = items
        .iter()
        .map(|mc| target(mc, &own_pods(mc, jobsets, leads)).ok())
        .collect();
    let mut out = Vec::with_capacity(items.len());
    for chunk in targets.chunks(AT_ONCE) {
        let children: Vec<_> = chunk
            .iter()
            .map(|t| {
                t.as_ref().and_then(|t| {
                    Command::new(kubectl())
                        .args(exec_args(
                            kube,
                            t,
                            false,
                            false,
                            "flux",
                            &["jobs".into(), "--stats-only".into()],
                        ))
                        .stdin(Stdio::null())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::null())
                        .spawn()
                        .ok()
                })
            })
            .collect();
        for child in children {
            // `--stats-only` exits 1 when no job is active: read the counts either way.
            out.push(
                child
                    .and_then(|c| c.wait_with_output().ok())
                    .and_then(|o| parse_stats(&String::from_utf8_lossy(&o.stdout))),
            );
        }
    }
    out
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(split_flux_args(std::env::args_os().collect()));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(PLUGIN_ERROR);
        }
    };
    let kube = cli.kube;
    let result = runtime.block_on(async {
        match cli.command {
            Cmd::Run(a) => run_flux(&kube, FluxCommand::new(&["run"], a)).await,
            Cmd::Submit(a) => run_flux(&kube, FluxCommand::new(&["submit"], a)).await,
            Cmd::Alloc(a) => run_flux(&kube, FluxCommand::new(&["alloc"], a)).await,
            Cmd::Batch(a) => run_flux(&kube, FluxCommand::new(&["batch"], a)).await,
            Cmd::Jobs(a) => run_flux(&kube, FluxCommand::new(&["jobs"], a)).await,
            Cmd::Attach(a) => run_flux(&kube, FluxCommand::new(&["job", "attach"], a)).await,
            Cmd::Cancel(a) => run_flux(&kube, FluxCommand::new(&["cancel"], a)).await,
            Cmd::Resource(a) => run_flux(&kube, FluxCommand::new(&["resource"], a)).await,
            Cmd::Queue(a) => run_flux(&kube, FluxCommand::new(&["queue"], a)).await,
            Cmd::Dmesg(a) => run_flux(&kube, FluxCommand::new(&["dmesg"], a)).await,
            Cmd::Shell(a) => shell(&kube, &a.mc).await,
            Cmd::Wait(a) => wait(&kube, a).await,
            Cmd::List(a) => list(&kube, a).await,
            Cmd::Other(words) => run_flux(&kube, FluxCommand::other(words)?).await,
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(PLUGIN_ERROR)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flux_operator::jobset::JOBSET_UID_LABEL;
    use serde_json::json;

    /// Arguments a shell would mangle: spaces, both quotes, `$`, a glob, a newline, unicode,
    /// an empty word, a leading dash and a `--`.
    fn hostile() -> Vec<OsString> {
        [
            "two words",
            "it's",
            "say \"hi\"",
            "$HOME",
            "*",
            "line one\nline two",
            "ƒlux ünïcode ✓",
            "",
            "-n",
            "--",
            "`id`; $(id)",
        ]
        .map(OsString::from)
        .to_vec()
    }

    fn minicluster(spec: serde_json::Value, status: serde_json::Value) -> MiniCluster {
        let mut obj = json!({
            "apiVersion": "flux-framework.org/v1alpha2",
            "kind": "MiniCluster",
            "metadata": {"name": "demo", "namespace": "team"},
            "spec": {"size": 2, "containers": [{"image": "ubuntu:noble"}]},
        });
        for (k, v) in spec.as_object().cloned().unwrap_or_default() {
            obj["spec"][k] = v;
        }
        if !status.is_null() {
            obj["status"] = status;
        }
        serde_json::from_value(obj).expect("a test MiniCluster")
    }

    fn running() -> serde_json::Value {
        json!({"phase": "Running", "readyBrokers": 2,
               "conditions": [cond("Ready", "True", "AllBrokersReady", "")]})
    }

    fn cond(type_: &str, status: &str, reason: &str, message: &str) -> serde_json::Value {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": "2026-01-01T00:00:00Z"})
    }

    fn pod(name: &str, created: &str, phase: &str, ready: bool, container: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "team", "creationTimestamp": created,
                         "labels": {NAME_LABEL: "demo", ROLE_LABEL: LEAD_JOB}},
            "spec": {"containers": [{"name": container, "image": "ubuntu:noble"}]},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .expect("a test pod")
    }

    fn parse(args: &[&str]) -> Cli {
        let argv = std::iter::once("kubectl-flux").chain(args.iter().copied());
        Cli::try_parse_from(split_flux_args(argv.map(OsString::from).collect()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    fn words(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn everything_after_the_minicluster_is_flux_s_with_or_without_a_separator() {
        for line in [
            &["run", "demo", "--", "-N2", "hostname"][..],
            &["run", "demo", "-N2", "hostname"],
        ] {
            let Cmd::Run(a) = parse(line).command else {
                panic!("{line:?} is a run")
            };
            assert_eq!(a.mc, "demo");
            assert_eq!(a.args, words(&["-N2", "hostname"]), "{line:?}");
        }
    }

    #[test]
    fn plugin_options_before_the_minicluster_are_the_plugin_s_and_after_it_flux_s() {
        let cli = parse(&[
            "-n",
            "team",
            "--context",
            "ctx",
            "run",
            "--kubeconfig",
            "/k",
            "demo",
            "-n",
            "4",
            "--context",
            "x",
            "hostname",
        ]);
        assert_eq!(
            cli.kube,
            KubeArgs {
                kubeconfig: Some("/k".into()),
                context: Some("ctx".into()),
                namespace: Some("team".into()),
            }
        );
        let Cmd::Run(a) = cli.command else { panic!() };
        assert_eq!(a.args, words(&["-n", "4", "--context", "x", "hostname"]));
    }

    #[test]
    fn plugin_options_between_the_command_and_the_minicluster_are_the_plugin_s() {
        let cli = parse(&["uptime", "-n", "team", "--context=ctx", "demo", "-n", "x"]);
        assert_eq!(cli.kube.namespace.as_deref(), Some("team"));
        assert_eq!(cli.kube.context.as_deref(), Some("ctx"));
        let Cmd::Other(w) = cli.command else { panic!() };
        assert_eq!(
            FluxCommand::other(w).unwrap().argv,
            words(&["uptime", "-n", "x"])
        );
        let cli = parse(&["run", "-nteam", "demo", "--", "--", "x"]);
        assert_eq!(cli.kube.namespace.as_deref(), Some("team"));
        let Cmd::Run(a) = cli.command else { panic!() };
        assert_eq!(a.args, words(&["--", "x"]), "a second `--` is Flux's");
    }

    #[test]
    fn help_after_the_minicluster_is_flux_s_and_before_it_the_plugin_s() {
        let Cmd::Run(a) = parse(&["run", "demo", "--help"]).command else {
            panic!()
        };
        assert_eq!(a.args, words(&["--help"]));
        let argv = ["kubectl-flux", "run", "--help"]
            .map(OsString::from)
            .to_vec();
        let err = Cli::try_parse_from(split_flux_args(argv)).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp);
    }

    #[test]
    fn a_later_separator_and_hostile_words_reach_flux_unchanged() {
        let mut line = vec![
            "submit".to_string(),
            "demo".into(),
            "--".into(),
            "-N1".into(),
        ];
        line.extend(hostile().iter().map(|w| w.to_string_lossy().into_owned()));
        let line: Vec<&str> = line.iter().map(String::as_str).collect();
        let Cmd::Submit(a) = parse(&line).command else {
            panic!()
        };
        let mut want = words(&["-N1"]);
        want.extend(hostile());
        assert_eq!(a.args, want);
        let command = FluxCommand::new(&["submit"], a);
        assert_eq!(command.argv[0], "submit");
        assert_eq!(command.argv[1..], want[..]);
    }

    #[test]
    fn attach_is_flux_job_attach() {
        let Cmd::Attach(a) = parse(&["attach", "demo", "ƒ2x"]).command else {
            panic!()
        };
        assert_eq!(
            FluxCommand::new(&["job", "attach"], a).argv,
            words(&["job", "attach", "ƒ2x"])
        );
    }

    #[test]
    fn any_other_flux_command_passes_through_with_its_arguments() {
        let Cmd::Other(w) = parse(&["-n", "team", "uptime", "demo"]).command else {
            panic!("uptime is passed through")
        };
        let c = FluxCommand::other(w).unwrap();
        assert_eq!((c.mc.as_str(), c.argv), ("demo", words(&["uptime"])));
        let Cmd::Other(w) = parse(&["getattr", "demo", "--", "size", "-x"]).command else {
            panic!()
        };
        assert_eq!(
            FluxCommand::other(w).unwrap().argv,
            words(&["getattr", "size", "-x"])
        );
        let Cmd::Other(w) = parse(&["kvs", "demo", "get", "--", "a b"]).command else {
            panic!()
        };
        assert_eq!(
            FluxCommand::other(w).unwrap().argv,
            words(&["kvs", "get", "--", "a b"])
        );
    }

    #[test]
    fn a_pass_through_command_needs_its_minicluster_first() {
        let Cmd::Other(w) = parse(&["uptime"]).command else {
            panic!()
        };
        assert_eq!(
            FluxCommand::other(w),
            Err(Usage::NoMiniCluster("uptime".into()))
        );
        let Cmd::Other(w) = parse(&["uptime", "--all", "demo"]).command else {
            panic!()
        };
        let err = FluxCommand::other(w).unwrap_err();
        assert!(
            err.to_string()
                .contains("--all is not an option of kubectl flux"),
            "{err}"
        );
    }

    #[test]
    fn a_known_command_without_its_minicluster_is_a_usage_error() {
        let err = Cli::try_parse_from(["kubectl-flux", "run"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("MINICLUSTER"), "{err}");
    }

    #[test]
    fn wait_and_list_take_their_options() {
        let Cmd::Wait(w) = parse(&["wait", "demo", "--timeout", "90s"]).command else {
            panic!()
        };
        assert_eq!(w.timeout, Duration::from_secs(90));
        let Cmd::Wait(w) = parse(&["wait", "demo"]).command else {
            panic!()
        };
        assert_eq!(w.timeout, Duration::from_secs(300));
        let Cmd::List(l) = parse(&["list", "-A", "--no-jobs"]).command else {
            panic!()
        };
        assert!(l.all_namespaces && l.no_jobs);
    }

    fn target_for_tests() -> Target {
        Target {
            namespace: "team".into(),
            pod: "demo-lead-0-0-abcde".into(),
            container: "demo".into(),
            view: Some("/mnt/flux".into()),
            uri: format!("local://{SOCKET_PATH}"),
        }
    }

    #[test]
    fn kubectl_exec_gets_each_argument_as_its_own_word_after_a_fixed_script() {
        let kube = KubeArgs {
            kubeconfig: Some("/my kube/config".into()),
            context: Some("ctx".into()),
            namespace: Some("ignored: the target's namespace is used".into()),
        };
        let args = exec_args(&kube, &target_for_tests(), true, false, "flux", &hostile());
        let mut want = words(&[
            "--kubeconfig",
            "/my kube/config",
            "--context",
            "ctx",
            "-n",
            "team",
            "exec",
            "-i",
            "demo-lead-0-0-abcde",
            "-c",
            "demo",
            "--",
            "/bin/sh",
            "-c",
            REMOTE_SCRIPT,
            "kubectl-flux",
            "/mnt/flux",
            "local:///run/flux-operator/broker/local",
            "flux",
        ]);
        want.extend(hostile());
        assert_eq!(args, want);
    }

    #[test]
    fn only_a_shell_on_a_terminal_gets_a_tty_and_only_readers_get_stdin() {
        let t = target_for_tests();
        let args = exec_args(
            &KubeArgs::default(),
            &t,
            true,
            true,
            "shell",
            &["-i".into()],
        );
        assert_eq!(args[..5], words(&["-n", "team", "exec", "-i", "-t"])[..]);
        let args = exec_args(&KubeArgs::default(), &t, false, false, "flux", &[]);
        assert_eq!(
            args[..4],
            words(&["-n", "team", "exec", "demo-lead-0-0-abcde"])[..]
        );
        let reads = |verb: &[&str]| {
            FluxCommand::new(
                verb,
                FluxArgs {
                    mc: "demo".into(),
                    args: vec![],
                },
            )
            .reads_stdin()
        };
        for verb in [
            &["run"][..],
            &["submit"],
            &["alloc"],
            &["batch"],
            &["job", "attach"],
            &["kvs"],
        ] {
            assert!(reads(verb), "{verb:?} gets stdin");
        }
        for verb in ["jobs", "cancel", "resource", "queue", "dmesg"] {
            assert!(!reads(&[verb]), "{verb} does not read stdin");
        }
    }

    /// The remote script run here by /bin/sh against a fake view whose `flux` prints its
    /// arguments one per line and then `FLUX_URI`: every word arrives unchanged.
    #[test]
    fn the_remote_script_hands_flux_every_argument_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let view = dir.path().join("view with space");
        std::fs::create_dir_all(view.join("view/bin")).unwrap();
        let flux = view.join("view/bin/flux");
        std::fs::write(
            &flux,
            "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\nprintf 'uri=%s\\n' \"$FLUX_URI\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&flux, std::fs::Permissions::from_mode(0o755)).unwrap();
        // As src/flux/scripts.rs writes it: PATH, then FLUX_URI and fluxsocket.
        std::fs::write(
            view.join("flux-view.sh"),
            format!(
                "PATH=\"${{PATH:+$PATH:}}\"'{}'\nexport PATH\nFLUX_URI=local://{SOCKET_PATH}\nfluxsocket=$FLUX_URI\nexport FLUX_URI fluxsocket\n",
                view.join("view/bin").display()
            ),
        )
        .unwrap();
        let run = |view: &str, uri: &str| {
            let out = Command::new("/bin/sh")
                .arg("-c")
                .arg(REMOTE_SCRIPT)
                .arg(REMOTE_NAME)
                .args([view, uri, "flux"])
                .args(hostile())
                .env("PATH", format!("{}:/usr/bin:/bin", view_bin(view, &flux)))
                .env_remove("FLUX_URI")
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        fn view_bin(view: &str, flux: &std::path::Path) -> String {
            // Without a view, `flux` must already be on PATH (the image has Flux).
            if view.is_empty() {
                flux.parent().unwrap().display().to_string()
            } else {
                "/nonexistent".into()
            }
        }
        let want: String = hostile()
            .iter()
            .map(|a| format!("[{}]\n", a.to_string_lossy()))
            .collect();
        let out = run(&view.display().to_string(), "local:///unused");
        assert_eq!(out, format!("{want}uri=local://{SOCKET_PATH}\n"));
        // No view (spec.flux.container.disable): FLUX_URI from the plugin.
        let out = run("", "local:///the/socket");
        assert_eq!(out, format!("{want}uri=local:///the/socket\n"));
    }

    /// The ConfigMap's copy the remote script falls back to is where the operator mounts it.
    #[test]
    fn the_remote_script_falls_back_to_the_config_maps_flux_view_sh() {
        let file = format!(
            "{}/flux-view.sh",
            flux_operator::model::mounts::CONFIG_MOUNT
        );
        assert!(REMOTE_SCRIPT.contains(&format!("env_file={file}\n")));
    }

    #[test]
    fn the_remote_script_says_so_when_the_view_has_no_flux_view_sh() {
        let out = Command::new("/bin/sh")
            .args([
                "-c",
                REMOTE_SCRIPT,
                REMOTE_NAME,
                "/nonexistent",
                "x",
                "flux",
                "jobs",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(127));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("/nonexistent/flux-view.sh is missing")
        );
    }

    #[test]
    fn the_remote_shell_reads_a_script_from_stdin_with_flux_uri_set() {
        use std::io::Write;
        let mut child = Command::new("/bin/sh")
            .args([
                "-c",
                REMOTE_SCRIPT,
                REMOTE_NAME,
                "",
                "local:///s",
                "shell",
                "-s",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"echo \"uri=$FLUX_URI\"\nexit 4\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "uri=local:///s\n");
        assert_eq!(out.status.code(), Some(4));
    }

    #[test]
    fn the_lead_is_the_newest_running_ready_pod_not_being_deleted() {
        let mc = minicluster(json!({}), running());
        let mut gone = pod(
            "demo-lead-0-0-zzzzz",
            "2026-01-01T00:09:00Z",
            "Running",
            true,
            "demo",
        );
        gone.metadata.deletion_timestamp = gone.metadata.creation_timestamp.clone();
        let pods = [
            pod(
                "demo-lead-0-0-old00",
                "2026-01-01T00:00:00Z",
                "Running",
                true,
                "demo",
            ),
            pod(
                "demo-lead-0-0-new00",
                "2026-01-01T00:05:00Z",
                "Running",
                true,
                "demo",
            ),
            pod(
                "demo-lead-0-0-notrd",
                "2026-01-01T00:06:00Z",
                "Running",
                false,
                "demo",
            ),
            pod(
                "demo-lead-0-0-pendg",
                "2026-01-01T00:07:00Z",
                "Pending",
                false,
                "demo",
            ),
            gone,
        ];
        assert_eq!(
            choose_lead(&mc, &pods).unwrap().name_any(),
            "demo-lead-0-0-new00"
        );
    }

    #[test]
    fn no_ready_lead_pod_is_an_error_naming_the_pods_seen() {
        let mc = minicluster(json!({}), running());
        let pods = [pod(
            "demo-lead-0-0-notrd",
            "2026-01-01T00:06:00Z",
            "Running",
            false,
            "demo",
        )];
        let err = choose_lead(&mc, &pods).unwrap_err().to_string();
        assert_eq!(
            err,
            "MiniCluster team/demo has no ready lead broker pod (demo-lead-0-0-notrd Running, not ready)"
        );
        let err = choose_lead(&mc, &[]).unwrap_err().to_string();
        assert!(err.contains("(no lead pod)"), "{err}");
    }

    #[test]
    fn the_target_is_the_flux_container_and_the_view_s_mount_path() {
        let pods = [pod(
            "demo-lead-0-0-a",
            "2026-01-01T00:00:00Z",
            "Running",
            true,
            "demo",
        )];
        let t = target(&minicluster(json!({}), running()), &pods).unwrap();
        assert_eq!(
            t,
            Target {
                namespace: "team".into(),
                pod: "demo-lead-0-0-a".into(),
                container: "demo".into(),
                view: Some("/mnt/flux".into()),
                uri: "local:///run/flux-operator/broker/local".into(),
            }
        );
        // A named Flux container among others, a view elsewhere, or none.
        let spec = json!({
            "containers": [{"name": "side", "image": "x"},
                           {"name": "app", "image": "y", "runFlux": true}],
            "flux": {"container": {"mountPath": "/opt/my view"}},
        });
        let mut p = pod(
            "demo-lead-0-0-b",
            "2026-01-01T00:00:00Z",
            "Running",
            true,
            "app",
        );
        let t = target(&minicluster(spec, running()), std::slice::from_ref(&p)).unwrap();
        assert_eq!(
            (t.container.as_str(), t.view),
            ("app", Some("/opt/my view".into()))
        );
        let spec = json!({"flux": {"container": {"disable": true}}});
        p.spec.as_mut().unwrap().containers[0].name = "demo".into();
        let t = target(&minicluster(spec, running()), &[p]).unwrap();
        assert_eq!(t.view, None);
    }

    #[test]
    fn a_lead_pod_without_the_flux_container_is_an_error() {
        let pods = [pod(
            "demo-lead-0-0-a",
            "2026-01-01T00:00:00Z",
            "Running",
            true,
            "other",
        )];
        let err = target(&minicluster(json!({}), running()), &pods).unwrap_err();
        assert_eq!(
            err,
            Refusal::NoContainer {
                pod: "demo-lead-0-0-a".into(),
                container: "demo".into()
            }
        );
    }

    #[test]
    fn disable_socket_is_refused_unless_an_archive_keeps_the_socket() {
        let mc = minicluster(json!({"flux": {"disableSocket": true}}), running());
        assert_eq!(
            check_reachable(&mc),
            Err(Refusal::NoSocket("team/demo".into()))
        );
        assert!(
            check_reachable(&mc)
                .unwrap_err()
                .to_string()
                .contains("spec.flux.disableSocket")
        );
        let mc = minicluster(
            json!({"flux": {"disableSocket": true}, "archive": {"path": "/state/a.tar"}}),
            running(),
        );
        assert_eq!(check_reachable(&mc), Ok(()));
    }

    #[test]
    fn a_finished_or_unseen_minicluster_is_not_running_and_says_why() {
        let status = json!({"phase": "Failed", "conditions": [
            cond("Ready", "False", "NotAllReady", "0/2"),
            cond("Failed", "True", "BackoffLimitExceeded", "the lead broker failed")]});
        let err = check_reachable(&minicluster(json!({}), status)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "MiniCluster team/demo is Failed (Failed=True BackoffLimitExceeded: the lead broker failed)"
        );
        let err = check_reachable(&minicluster(json!({}), json!(null))).unwrap_err();
        assert!(err.to_string().contains("without a status yet"), "{err}");
        let starting = json!({"phase": "Starting", "readyBrokers": 1});
        assert_eq!(check_reachable(&minicluster(json!({}), starting)), Ok(()));
    }

    #[test]
    fn wait_ends_when_ready_and_gives_up_only_when_it_cannot_come_up() {
        assert_eq!(
            progress(&minicluster(json!({}), running())),
            Progress::Up("2/2 brokers ready".into())
        );
        let starting = json!({"phase": "Starting", "readyBrokers": 1, "conditions": [
            cond("Ready", "False", "BrokersStarting", "1 of 2 brokers ready")]});
        assert_eq!(
            progress(&minicluster(json!({}), starting)),
            Progress::Waiting(
                "Starting, 1/2 brokers ready (Ready=False BrokersStarting: 1 of 2 brokers ready)"
                    .into()
            )
        );
        let suspended = json!({"phase": "Suspended", "conditions": [
            cond("Suspended", "True", "WaitingForAdmission", "queue q")]});
        assert!(
            matches!(progress(&minicluster(json!({}), suspended)), Progress::Waiting(w) if w.contains("WaitingForAdmission"))
        );
        let invalid = json!({"phase": "Pending", "conditions": [
            cond("InvalidSpec", "True", "Invalid", "spec.x: bad")]});
        assert!(
            matches!(progress(&minicluster(json!({}), invalid)), Progress::Never(w) if w.contains("spec.x: bad"))
        );
        // Scaled from 2 to 4: until the operator has seen the new generation and 4 brokers
        // are ready, the cluster is not up, though it is Running with Ready true for 2.
        let scaled = |status: serde_json::Value| {
            let mut mc = minicluster(json!({"size": 4}), status);
            mc.metadata.generation = Some(3);
            mc
        };
        let seen = |generation: i64, ready: i32| {
            json!({"phase": "Running", "readyBrokers": ready, "observedGeneration": generation,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "BrokersReady",
                   "message": "", "observedGeneration": generation,
                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
        };
        assert!(matches!(
            progress(&scaled(seen(2, 2))),
            Progress::Waiting(w) if w.starts_with("Running, 2/4 brokers ready")
        ));
        assert!(matches!(
            progress(&scaled(seen(3, 2))),
            Progress::Waiting(_)
        ));
        assert_eq!(
            progress(&scaled(seen(3, 4))),
            Progress::Up("4/4 brokers ready".into())
        );
        let done = json!({"phase": "Succeeded"});
        assert!(matches!(
            progress(&minicluster(json!({}), done)),
            Progress::Never(_)
        ));
    }

    #[test]
    fn job_counts_are_read_from_flux_jobs_stats_only() {
        assert_eq!(
            parse_stats("1 running, 7 completed, 2 failed, 3 pending, 0 inactive purged\n"),
            Some(JobCounts {
                pending: 3,
                running: 1,
                completed: 7,
                failed: 2
            })
        );
        assert_eq!(parse_stats(""), None);
        assert_eq!(parse_stats("flux-jobs: error retrieving job stats"), None);
    }

    #[test]
    fn durations_in_kubectl_s_units() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("12"), Ok(Duration::from_secs(12)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn the_list_is_a_padded_table() {
        let rows = [words(&["NAME", "SIZE"]), words(&["interactive", "2"])].map(|r| {
            r.iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        });
        assert_eq!(table(&rows), "NAME          SIZE\ninteractive   2\n");
    }

    #[test]
    fn a_minicluster_s_pods_are_its_own_jobset_s_not_those_with_its_labels() {
        let mut mc = minicluster(json!({}), serde_json::Value::Null);
        mc.metadata.namespace = Some("ns".into());
        mc.metadata.uid = Some("mc-uid".into());
        let jobset = |uid: &str, owner: &str| -> PartialObjectMeta<JobSet> {
            serde_json::from_value(json!({
                "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": "demo", "namespace": "ns", "uid": uid,
                    "ownerReferences": [{"apiVersion": "flux-framework.org/v1alpha2",
                        "kind": "MiniCluster", "name": "demo", "uid": owner, "controller": true}]}
            }))
            .unwrap()
        };
        let pod = |name: &str, jobset_uid: Option<&str>| -> Pod {
            let mut labels = json!({NAME_LABEL: "demo", ROLE_LABEL: LEAD_JOB});
            let mut owners = json!([]);
            if let Some(uid) = jobset_uid {
                labels[JOBSET_UID_LABEL] = json!(uid);
                owners = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "demo-lead-0",
                    "uid": "job", "controller": true}]);
            }
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns",
                "labels": labels, "ownerReferences": owners}}))
            .unwrap()
        };
        let pods = [
            pod("new", Some("js-uid")),
            pod("of-the-deleted-one", Some("old-js-uid")),
            pod("by-hand", None),
        ];
        let names = |jobsets: &[PartialObjectMeta<JobSet>]| -> Vec<String> {
            own_pods(&mc, jobsets, &pods)
                .iter()
                .map(|p| p.name_any())
                .collect()
        };
        assert_eq!(names(&[jobset("js-uid", "mc-uid")]), ["new"]);
        // A JobSet of that name that this MiniCluster does not control: none is its.
        assert!(names(&[jobset("js-uid", "another-mc")]).is_empty());
        assert!(names(&[]).is_empty(), "no JobSet, no pods");
    }

    #[test]
    fn lead_pods_are_selected_by_the_operator_s_labels() {
        assert_eq!(
            lead_selector("demo"),
            "flux-framework.org/minicluster=demo,flux-framework.org/role=lead"
        );
        assert_eq!(
            lead_selector(""),
            "flux-framework.org/minicluster,flux-framework.org/role=lead"
        );
    }

    #[test]
    fn the_exit_code_is_the_command_s_or_128_plus_its_signal() {
        let status = |script: &str| {
            Command::new("/bin/sh")
                .args(["-c", script])
                .status()
                .unwrap()
        };
        assert_eq!(exit_code(status("exit 3")), 3);
        assert_eq!(exit_code(status("exit 0")), 0);
        assert_eq!(exit_code(status("kill -9 $$")), 137);
    }
}
