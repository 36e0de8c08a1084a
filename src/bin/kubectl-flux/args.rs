//! The command line: clap's types for the plugin's commands and options, and the argv
//! splitting that makes everything after the MiniCluster Flux's, unchanged.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

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
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) kube: KubeArgs,
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

/// kubectl's connection options, passed on to `kubectl exec` too.
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub(crate) struct KubeArgs {
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub(crate) context: Option<String>,
    /// The MiniCluster's namespace (default: the context's namespace).
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub(crate) namespace: Option<String>,
}

#[derive(Subcommand, Debug, PartialEq)]
pub(crate) enum Cmd {
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
pub(crate) struct FluxArgs {
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
pub(crate) struct ShellArgs {
    /// The MiniCluster.
    #[arg(value_name = "MINICLUSTER")]
    pub(crate) mc: String,
}

#[derive(Args, Debug, PartialEq)]
pub(crate) struct WaitArgs {
    /// The MiniCluster.
    #[arg(value_name = "MINICLUSTER")]
    pub(crate) mc: String,
    /// How long to wait: `90s`, `5m`, `1h` or seconds.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub(crate) timeout: Duration,
}

/// A duration: `90s`, `5m`, `1h`, `500ms` or plain seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
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

#[derive(Args, Debug, PartialEq)]
pub(crate) struct ListArgs {
    /// MiniClusters of every namespace.
    #[arg(short = 'A', long)]
    pub(crate) all_namespaces: bool,
    /// Leave out the job counts (one `kubectl exec` per running MiniCluster).
    #[arg(long)]
    pub(crate) no_jobs: bool,
}

/// One Flux command to run in the lead pod: `flux <verb> <args...>`.
#[derive(Debug, PartialEq)]
pub(crate) struct FluxCommand {
    pub(crate) mc: String,
    pub(crate) argv: Vec<OsString>,
}

impl FluxCommand {
    pub(crate) fn new(verb: &[&str], FluxArgs { mc, args }: FluxArgs) -> Self {
        let mut argv: Vec<OsString> = verb.iter().map(OsString::from).collect();
        argv.extend(args);
        Self { mc, argv }
    }

    /// A pass-through command from clap's external subcommand: `[verb, mc, args...]`.
    pub(crate) fn other(words: Vec<OsString>) -> Result<Self, Usage> {
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
    pub(crate) fn reads_stdin(&self) -> bool {
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
pub(crate) fn split_flux_args(argv: Vec<OsString>) -> Vec<OsString> {
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
pub(crate) enum Usage {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{hostile, words};

    fn parse(args: &[&str]) -> Cli {
        let argv = std::iter::once("kubectl-flux").chain(args.iter().copied());
        Cli::try_parse_from(split_flux_args(argv.map(OsString::from).collect()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
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
    fn only_readers_get_stdin() {
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
}
