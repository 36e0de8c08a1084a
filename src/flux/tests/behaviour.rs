//! Runs the generated entrypoints under bash (and the companion wrapper under sh) with a
//! stand-in `flux` first on PATH (`fake-flux.sh`), in a temporary directory laid out like the
//! pod. The stand-in records every call; the tests assert the exact `flux` invocations, their
//! order, and that user strings arrive byte-for-byte.
//!
//! This checks the scripts' decisions (which commands, which arguments, which order, which
//! exit status), not a Flux run: no broker starts here.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::api::{MiniCluster, MiniClusterContainer};

use crate::fixtures::with_command;

const FAKE_FLUX: &str = include_str!("fake-flux.sh");
const CERT: &str = "metadata\n    name = \"mc\"\ncurve\n    public-key = \"stand-in\"\n";

/// A pod's filesystem in a temporary directory.
struct Pod {
    _dir: tempfile::TempDir,
    root: PathBuf,
    config: PathBuf,
    curve: PathBuf,
    run: PathBuf,
    key: PathBuf,
    view: PathBuf,
    bin: PathBuf,
    log: PathBuf,
    rcs: PathBuf,
    /// The entrypoints write R and the Flux container has no CPU limit: its cores are the
    /// node's shared pool, so `flux start` gets the broker's initrc that binds no task.
    shared_cores: bool,
}

fn s(x: &str) -> String {
    x.to_string()
}

fn strs(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|x| x.to_string()).collect()
}

fn write_exec(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

impl Pod {
    fn new(mc: &MiniCluster) -> Pod {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let pod = Pod {
            config: root.join("config"),
            curve: root.join("curve"),
            run: root.join("run"),
            key: root.join("key"),
            view: root.join("view"),
            bin: root.join("bin"),
            log: root.join("flux.log"),
            rcs: root.join("start-rcs"),
            shared_cores: {
                let cluster = crate::fixtures::cluster(mc);
                mc.spec.flux.broker_config.is_empty() && !cluster.flux.cpu_limited
            },
            root,
            _dir: dir,
        };
        for d in [&pod.config, &pod.curve, &pod.view, &pod.bin] {
            std::fs::create_dir_all(d).unwrap();
        }
        for (name, text) in crate::flux::config_map_data(&crate::fixtures::cluster(mc)).unwrap() {
            std::fs::write(pod.config.join(name), text).unwrap();
        }
        // As the kubelet may leave it with fsGroup: group-readable.
        let cert = pod.curve.join("curve.cert");
        std::fs::write(&cert, CERT).unwrap();
        std::fs::set_permissions(&cert, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_exec(&pod.bin.join("flux"), FAKE_FLUX);
        pod
    }

    fn command(&self, shell: &str, script: &str, env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(shell);
        cmd.arg(self.config.join(script))
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()))
            .env("HOME", "/home/fake-home")
            .env("LC_ALL", "C.UTF-8")
            .env("FLUX_OPERATOR_CONFIG_DIR", &self.config)
            .env("FLUX_OPERATOR_STATE_DIR", self.run.join("state"))
            .env("FLUX_OPERATOR_CURVE_DIR", &self.curve)
            .env("FLUX_OPERATOR_RUN_DIR", &self.run)
            .env("FLUX_OPERATOR_KEY_DIR", &self.key)
            .env("FLUX_OPERATOR_VIEW", &self.view)
            .env("FLUX_OPERATOR_RETRY_SECONDS", "0")
            // The kubelet's /dev/termination-log, a file of this pod's.
            .env(
                "FLUX_OPERATOR_TERMINATION_LOG",
                self.root.join("termination-log"),
            )
            .env("FAKE_FLUX_LOG", &self.log)
            .env("FAKE_FLUX_START_RCS", &self.rcs)
            .current_dir(&self.root);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    fn run(&self, script: &str, env: &[(&str, &str)]) -> Output {
        self.command("bash", script, env).output().unwrap()
    }

    /// The recorded calls, in order (each without the leading `flux`).
    fn calls(&self) -> Vec<Vec<String>> {
        let Ok(bytes) = std::fs::read(&self.log) else {
            return Vec::new();
        };
        let mut fields = bytes
            .split(|b| *b == 0)
            .map(|f| String::from_utf8(f.to_vec()).unwrap());
        let mut out = Vec::new();
        while let Some(count) = fields.next() {
            if count.is_empty() {
                break;
            }
            let n: usize = count.parse().unwrap();
            out.push((0..n).map(|_| fields.next().unwrap()).collect());
        }
        out
    }

    /// Calls other than `env` records.
    fn all_flux_calls(&self) -> Vec<Vec<String>> {
        self.calls().into_iter().filter(|c| c[0] != "env").collect()
    }

    /// [`Pod::all_flux_calls`] without the `flux R` calls every entrypoint makes before its
    /// broker, `flux config builtin` (see `brokers_write_r_for_every_host_before_starting`),
    /// and `flux python .../joined.py`, which a follower starts in the background beside
    /// each broker (its readiness; the stand-in's exits at once, and it may be stopped before
    /// it records, so the tests do not count it).
    fn flux_calls(&self) -> Vec<Vec<String>> {
        let joined = |c: &[String]| c[0] == "python" && c[1].ends_with("/joined.py");
        self.all_flux_calls()
            .into_iter()
            .filter(|c| c[0] != "R" && c[0] != "config" && !joined(c))
            .collect()
    }

    /// The `flux R encode --hosts=...` call that wrote R, checked to come before any other
    /// call but the other `flux R` calls (`--local | decode`, whose order is the pipe's).
    fn r_written(&self) -> Vec<String> {
        let calls = self.all_flux_calls();
        let first_other = calls.iter().position(|c| c[0] != "R" && c[0] != "config");
        let before = &calls[..first_other.unwrap_or(calls.len())];
        let written = before
            .iter()
            .filter(|c| c.len() > 2 && c[2].starts_with("--hosts="));
        let written: Vec<_> = written.collect();
        assert_eq!(
            written.len(),
            1,
            "one R written before the broker: {calls:?}"
        );
        written[0].clone()
    }

    /// The `env` records as name -> value.
    fn env_seen(&self) -> BTreeMap<String, String> {
        self.calls()
            .into_iter()
            .filter(|c| c[0] == "env")
            .map(|c| (c[1].clone(), c[2].clone()))
            .collect()
    }

    fn config_dir(&self) -> String {
        self.config.display().to_string()
    }

    /// The lead's program as `flux start` gets it: the wrapper that records its end, then
    /// `words`.
    fn program(&self, words: &[String]) -> Vec<String> {
        let mut v = strs(&crate::flux::scripts::PROGRAM_WRAPPER);
        v.push(format!(
            "{}/broker/{}",
            self.run.display(),
            crate::flux::PROGRAM_END
        ));
        v.extend(words.iter().cloned());
        v
    }

    /// `flux start -o --config DIR` with the default broker options, then `extra`.
    fn start(&self, extra: &[&str]) -> Vec<String> {
        let mut v = strs(&["start", "-o", "--config"]);
        v.push(self.config_dir());
        v.extend(strs(&["-Slog-stderr-level=6", "-Slog-stderr-mode=local"]));
        v.push(format!(
            "-Slocal-uri=local://{}/broker/local",
            self.run.display()
        ));
        v.extend(self.initrc_arg());
        v.extend(strs(extra));
        v
    }

    /// `-Sconf.shell_initrc=` of the broker's initrc, with the node's shared cores.
    fn initrc_arg(&self) -> Option<String> {
        self.shared_cores.then(|| {
            format!(
                "-Sconf.shell_initrc={}/broker/shell/initrc.lua",
                self.run.display()
            )
        })
    }
}

fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn with_tail(mut head: Vec<String>, tail: &[String]) -> Vec<String> {
    head.extend_from_slice(tail);
    head
}

#[test]
fn single_command_submits_and_waits() {
    let mut mc = with_command("mc", 4, "hostname -f");
    mc.spec.tasks = 4;
    let pod = Pod::new(&mc);
    let out = pod.run("lead.sh", &[]);
    assert_ok(&out);
    let submit = strs(&[
        "submit", "-N4", "-n4", "--quiet", "--watch", "hostname", "-f",
    ]);
    let mut program = vec![s("flux")];
    program.extend(submit.clone());
    let program = pod.program(&program);
    assert_eq!(
        pod.flux_calls(),
        vec![pod.start(&[]).into_iter().chain(program).collect(), submit]
    );
}

/// (what, the cluster, the stand-in's environment, the lead's exit code, what it says)
type ExitCase<'a> = (
    &'a str,
    &'a MiniCluster,
    &'a [(&'a str, &'a str)],
    i32,
    &'a str,
);

/// The lead's exit in every mode that runs a program: the program's exit code when it
/// ended (the job's outcome, final), 75 when the broker ended before its program did (a
/// retry), and 1 for a program that itself exited 75.
#[test]
fn the_lead_exits_with_its_job_s_code_and_75_when_its_broker_ended_before_the_job() {
    let code = |mc: &MiniCluster, env: &[(&str, &str)]| {
        let out = Pod::new(mc).run("lead.sh", env);
        (out.status.code(), stderr(&out))
    };
    let submit = with_command("mc", 2, "hostname");
    let mut batch = with_command("mc", 2, "hostname\nfalse");
    batch.spec.containers[0].batch = true;
    let mut launcher = with_command("mc", 2, "flux my-workflow");
    launcher.spec.containers[0].launcher = true;
    // (what, cluster, environment, exit code, what the entrypoint says)
    let cases: [ExitCase<'_>; 7] = [
        (
            "a job that succeeds",
            &submit,
            &[],
            0,
            "the job ended with exit code 0",
        ),
        (
            "a job that fails",
            &submit,
            &[("FAKE_FLUX_RC_submit", "3")],
            3,
            "exit code 3",
        ),
        (
            "a batch whose job fails",
            &batch,
            &[("FAKE_FLUX_RC_job", "4")],
            4,
            "exit code 4",
        ),
        (
            "a launcher that fails",
            &launcher,
            &[("FAKE_FLUX_RC_my_workflow", "2")],
            2,
            "exit code 2",
        ),
        (
            "a crashed broker",
            &submit,
            &[("FAKE_FLUX_START_CRASH", "137")],
            75,
            "exiting 75",
        ),
        (
            "a crashed batch broker",
            &batch,
            &[("FAKE_FLUX_START_CRASH", "1")],
            75,
            "exiting 75",
        ),
        (
            "a job that exits 75",
            &submit,
            &[("FAKE_FLUX_RC_submit", "75")],
            1,
            "exiting 1",
        ),
    ];
    for (what, mc, env, want, says) in cases {
        let (got, err) = code(mc, env);
        assert_eq!(got, Some(want), "{what}:\n{err}");
        assert!(err.contains(says), "{what}: {says:?} not in\n{err}");
    }
    // An interactive lead runs no program: its broker's status is its own.
    let mut interactive = with_command("mc", 2, "");
    interactive.spec.interactive = true;
    let (got, err) = code(&interactive, &[("FAKE_FLUX_START_CRASH", "137")]);
    assert_eq!(got, Some(137), "{err}");
}

#[test]
fn tasks_decide_n_and_big_n() {
    use crate::flux::scripts::node_task_flags;
    assert_eq!(node_task_flags(4, 1), ["-n1"]);
    assert_eq!(node_task_flags(4, 3), ["-n3"]);
    assert_eq!(node_task_flags(4, 4), ["-N4", "-n4"]);
    assert_eq!(node_task_flags(4, 16), ["-N4", "-n16"]);
    assert_eq!(node_task_flags(4, 0), ["-N4"]);
    use crate::flux::scripts::batch_flags;
    assert_eq!(batch_flags(3, 1), ["-N3"]);
    assert_eq!(batch_flags(3, 0), ["-N3"]);
    assert_eq!(batch_flags(3, 3), ["-N3", "-n3"]);
    assert_eq!(batch_flags(3, 12), ["-N3", "-n12"]);
    for (tasks, flags) in [(0, vec!["-N3"]), (2, vec!["-n2"]), (6, vec!["-N3", "-n6"])] {
        let mut mc = with_command("mc", 3, "true");
        mc.spec.tasks = tasks;
        let pod = Pod::new(&mc);
        assert_ok(&pod.run("lead.sh", &[]));
        let mut want = vec![s("submit")];
        want.extend(strs(&flags));
        want.extend(strs(&["--quiet", "--watch", "true"]));
        assert_eq!(pod.flux_calls()[1], want, "tasks {tasks}");
    }
}

/// Commands with quotes, `$`, backticks, globs, newlines, unicode, a trailing backslash and a
/// leading dash, with the exact argv Flux must receive after `--watch`.
fn quoting_corpus() -> Vec<(&'static str, Vec<String>)> {
    let shell = |c: &str| vec![s("bash"), s("-c"), s(c)];
    vec![
        (
            r#"printf '%s\n' "it's" 'say "hi"'"#,
            strs(&["printf", "%s\\n", "it's", "say \"hi\""]),
        ),
        (r#"echo "it's $HOME""#, shell(r#"echo "it's $HOME""#)),
        (
            "bash -c 'echo $HOME; ls *.txt'",
            strs(&["bash", "-c", "echo $HOME; ls *.txt"]),
        ),
        ("echo 'unbalanced", shell("echo 'unbalanced")),
        ("echo $HOME ${USER:-x}", shell("echo $HOME ${USER:-x}")),
        ("echo `hostname` $(date)", shell("echo `hostname` $(date)")),
        ("ls *.txt ?.log [ab].c", shell("ls *.txt ?.log [ab].c")),
        (
            "echo one\necho 'two\nlines'\n",
            shell("echo one\necho 'two\nlines'\n"),
        ),
        ("echo trailing\\", shell("echo trailing\\")),
        ("FOO=bar env", shell("FOO=bar env")),
        (
            "cd /tmp && ls -la; echo done &",
            shell("cd /tmp && ls -la; echo done &"),
        ),
        ("echo {a,b} ~ # comment", shell("echo {a,b} ~ # comment")),
        (
            "echo héllo wörld 🚀 日本",
            strs(&["echo", "héllo", "wörld", "🚀", "日本"]),
        ),
        ("-n leading dash", strs(&["-n", "leading", "dash"])),
        (
            r#"echo "double quoted" 'single quoted' mixed"'"quote"#,
            strs(&["echo", "double quoted", "single quoted", "mixed'quote"]),
        ),
        ("echo '' x\ty", strs(&["echo", "", "x", "y"])),
        (
            "  python3   -m  http.server --bind=0.0.0.0  ",
            strs(&["python3", "-m", "http.server", "--bind=0.0.0.0"]),
        ),
    ]
}

#[test]
fn quoting_corpus_reaches_flux_unchanged() {
    for (command, argv) in quoting_corpus() {
        let mc = with_command("mc", 2, command);
        let pod = Pod::new(&mc);
        let out = pod.run("lead.sh", &[]);
        assert_ok(&out);
        let calls = pod.flux_calls();
        assert_eq!(calls.len(), 2, "{command:?}: {calls:?}");
        let submit = with_tail(strs(&["submit", "-n1", "--quiet", "--watch"]), &argv);
        assert_eq!(calls[1], submit, "command {command:?}");
        // The same argv is the tail of the initial program given to flux start.
        assert!(calls[0].ends_with(&argv), "{command:?}: {:?}", calls[0]);
    }
}

#[test]
fn environment_values_are_data() {
    let values = [
        "it's \"quoted\"",
        "$HOME ${X} $(id) `id`",
        "*.txt ?",
        "two\nlines\n",
        "héllo 🚀",
        "trailing\\",
        "-n",
        "",
    ];
    let mut mc = with_command("mc", 2, "true");
    for (i, v) in values.iter().enumerate() {
        mc.spec
            .flux
            .environment
            .insert(format!("V{i}"), v.to_string());
    }
    let pod = Pod::new(&mc);
    let names: Vec<String> = (0..values.len()).map(|i| format!("V{i}")).collect();
    assert_ok(&pod.run("lead.sh", &[("FAKE_FLUX_SHOW_ENV", &names.join(" "))]));
    let seen = pod.env_seen();
    for (i, v) in values.iter().enumerate() {
        assert_eq!(seen[&format!("V{i}")], *v, "flux.environment V{i}");
    }
}

#[test]
fn submit_command_and_option_flags() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.tasks = 2;
    mc.spec.flux.submit_command = "flux run".into();
    mc.spec.flux.option_flags = "-o cpu-affinity=per-task --setattr='x=a b'".into();
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("lead.sh", &[]));
    let run = strs(&[
        "run",
        "-N2",
        "-n2",
        "-o",
        "cpu-affinity=per-task",
        "--setattr=x=a b",
        "hostname",
    ]);
    assert_eq!(pod.flux_calls()[1], run);

    mc.spec.flux.submit_command = "flux submit --cc=1-2".into();
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("lead.sh", &[]));
    let submit = strs(&[
        "submit",
        "--cc=1-2",
        "-N2",
        "-n2",
        "-o",
        "cpu-affinity=per-task",
        "--setattr=x=a b",
        "--quiet",
        "--watch",
        "hostname",
    ]);
    assert_eq!(pod.flux_calls()[1], submit);
}

#[test]
fn batch_submits_each_line_and_waits_for_all() {
    let mut mc = with_command("mc", 3, "");
    let pod0 = Pod::new(&mc); // only for a logs path inside a temporary directory
    let logs = pod0.root.join("logs").display().to_string();
    mc.spec.containers[0].command =
        "hostname\n\n  echo 'a b' | wc -c\n# a comment\nsleep 1\n".into();
    mc.spec.containers[0].batch = true;
    mc.spec.containers[0].logs = logs.clone();
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("lead.sh", &[]));
    let batch_file = format!("{}/batch.sh", pod.config_dir());
    let batch = vec![
        s("batch"),
        s("-N3"),
        s("--flags=waitable"),
        format!("--output={logs}/flux-batch-{{{{id}}}}.out"),
        batch_file.clone(),
    ];
    let job = |i: usize, argv: &[&str]| {
        with_tail(
            vec![
                s("submit"),
                s("--flags=waitable"),
                format!("--output={logs}/job-{i}.out"),
                format!("--error={logs}/job-{i}.err"),
            ],
            &strs(argv),
        )
    };
    let program: Vec<String> = strs(&[
        "bash",
        "-c",
        r#"id=$(flux batch "$@") && printf '%s\n' "$id" && flux job status -v "$id""#,
        "flux-batch",
    ])
    .into_iter()
    .chain(batch[1..].to_vec())
    .collect();
    assert_eq!(
        pod.flux_calls(),
        vec![
            with_tail(pod.start(&[]), &pod.program(&program)),
            batch,
            job(0, &["hostname"]),
            job(1, &["bash", "-c", "  echo 'a b' | wc -c"]),
            job(2, &["sleep", "1"]),
            // The batch script waits for its jobs, and the lead for the batch job: each
            // exits with the largest exit code of what it waited for.
            strs(&["job", "status", "-v", "fake-job", "fake-job", "fake-job"]),
            strs(&["job", "status", "-v", "fake-batch"]),
        ]
    );
    assert!(Path::new(&logs).is_dir(), "the logs directory is created");
}

#[test]
fn batch_raw_runs_the_script_verbatim() {
    let mut mc = with_command(
        "mc",
        2,
        "flux submit -N2 hostname\nflux submit echo \"$HOME\"\nflux queue idle\n",
    );
    mc.spec.tasks = 0;
    mc.spec.containers[0].batch = true;
    mc.spec.containers[0].batch_raw = true;
    let pod0 = Pod::new(&mc);
    let logs = pod0.root.join("logs").display().to_string();
    mc.spec.containers[0].logs = logs.clone();
    let pod = Pod::new(&mc);
    let script = std::fs::read_to_string(pod.config.join("batch.sh")).unwrap();
    assert_eq!(
        script,
        format!("#!/bin/bash\n{}", mc.spec.containers[0].command)
    );
    assert_ok(&pod.run("lead.sh", &[]));
    let calls = pod.flux_calls();
    assert_eq!(calls[1][..2], strs(&["batch", "-N2"]));
    assert_eq!(
        calls[2..],
        [
            strs(&["submit", "-N2", "hostname"]),
            strs(&["submit", "echo", "/home/fake-home"]),
            strs(&["queue", "idle"]),
            strs(&["job", "status", "-v", "fake-batch"]),
        ]
    );
}

#[test]
fn launcher_is_the_initial_program() {
    let mut mc = with_command("mc", 2, "flux workflow-tool --jobs 'two words'");
    mc.spec.containers[0].launcher = true;
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("lead.sh", &[]));
    let tool = strs(&["workflow-tool", "--jobs", "two words"]);
    let program = pod.program(&with_tail(vec![s("flux")], &tool));
    assert_eq!(
        pod.flux_calls(),
        vec![with_tail(pod.start(&[]), &program), tool]
    );
}

#[test]
fn interactive_or_no_command_keeps_the_lead_up() {
    let mut interactive = with_command("mc", 2, "hostname");
    interactive.spec.interactive = true;
    for mc in [
        interactive,
        with_command("mc", 2, ""),
        with_command("mc", 2, "  \n"),
    ] {
        let pod = Pod::new(&mc);
        assert_ok(&pod.run("lead.sh", &[]));
        let mut start = strs(&["start", "-o", "--config"]);
        start.push(pod.config_dir());
        start.extend(strs(&[
            "-Slog-stderr-level=6",
            "-Slog-stderr-mode=local",
            "-Sbroker.rc2_none=1",
        ]));
        start.push(format!(
            "-Slocal-uri=local://{}/broker/local",
            pod.run.display()
        ));
        start.extend(pod.initrc_arg());
        // The instance's state, kept in the pod across a restart of the container.
        start.push(format!("-Sstatedir={}/state/instance", pod.run.display()));
        assert_eq!(pod.flux_calls(), vec![start]);
    }
}

#[test]
fn commands_script_is_the_job() {
    let mut mc = with_command("mc", 2, "");
    mc.spec.containers[0].commands.script = "#!/bin/bash\necho \"$@\" 'quoted $x'\n".into();
    let pod = Pod::new(&mc);
    assert_eq!(
        std::fs::read_to_string(pod.config.join("script.sh")).unwrap(),
        mc.spec.containers[0].commands.script
    );
    assert_ok(&pod.run("lead.sh", &[]));
    let script = format!("{}/script.sh", pod.config_dir());
    assert_eq!(
        pod.flux_calls()[1],
        strs(&["submit", "-n1", "--quiet", "--watch", "bash", &script])
    );
}

fn hooked(mc: &mut MiniCluster) {
    let c = &mut mc.spec.containers[0].commands;
    c.init = "flux hook init".into();
    c.pre = "flux hook pre\nexport FROM_HOOK='set by pre'".into();
    c.broker_pre = "flux hook broker-pre".into();
    c.worker_pre = "flux hook worker-pre".into();
    c.post = "flux hook post \"$FROM_HOOK\"".into();
}

#[test]
fn hooks_run_in_order_around_the_broker() {
    let mut mc = with_command("mc", 2, "hostname");
    hooked(&mut mc);
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("lead.sh", &[("FAKE_FLUX_SHOW_ENV", "FROM_HOOK")]));
    let submit = strs(&["submit", "-n1", "--quiet", "--watch", "hostname"]);
    assert_eq!(
        pod.flux_calls(),
        vec![
            strs(&["hook", "init"]),
            strs(&["hook", "pre"]),
            strs(&["hook", "broker-pre"]),
            with_tail(
                pod.start(&[]),
                &pod.program(&with_tail(vec![s("flux")], &submit))
            ),
            submit,
            strs(&["hook", "post", "set by pre"]),
        ]
    );
    // A hook's exports reach the broker.
    assert_eq!(pod.env_seen()["FROM_HOOK"], "set by pre");

    let pod = Pod::new(&mc);
    pod.run("follower.sh", &[])
        .status
        .success()
        .then_some(())
        .unwrap();
    assert_eq!(
        pod.flux_calls(),
        vec![
            strs(&["hook", "init"]),
            strs(&["hook", "pre"]),
            strs(&["hook", "worker-pre"]),
            pod.start(&[]),
            strs(&["hook", "post", "set by pre"]),
        ]
    );
}

#[test]
fn strict_mode_stops_at_the_first_failing_hook() {
    let mut mc = with_command("mc", 2, "hostname");
    hooked(&mut mc);
    mc.spec.containers[0].commands.pre = "flux hook pre\nfalse\nflux hook after-false".into();
    mc.spec.logging.strict = true;
    for script in ["lead.sh", "follower.sh"] {
        let pod = Pod::new(&mc);
        let out = pod.run(script, &[]);
        assert!(!out.status.success(), "{script} must fail");
        assert_eq!(
            pod.flux_calls(),
            vec![strs(&["hook", "init"]), strs(&["hook", "pre"])],
            "{script}"
        );
    }
    // Without strict, the entrypoint goes on.
    mc.spec.logging.strict = false;
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("lead.sh", &[]));
    let calls = pod.flux_calls();
    assert_eq!(calls[2], strs(&["hook", "after-false"]));
    assert_eq!(calls[3], strs(&["hook", "broker-pre"]));
    assert_eq!(calls[4][0], "start");
}

#[test]
fn a_broken_hook_does_not_break_the_entrypoint() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.containers[0].commands.pre = "if then fi (((\n'unterminated".into();
    mc.spec.containers[0].commands.post = "flux hook post".into();
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("lead.sh", &[]));
    let calls = pod.flux_calls();
    assert_eq!(calls[0][0], "start");
    assert_eq!(calls[2], strs(&["hook", "post"]));
}

#[test]
fn the_lead_exits_with_the_jobs_status_after_post() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.containers[0].commands.post = "flux hook post".into();
    let pod = Pod::new(&mc);
    let out = pod.run("lead.sh", &[("FAKE_FLUX_RC_submit", "3")]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(pod.flux_calls().last().unwrap(), &strs(&["hook", "post"]));
}

#[test]
fn options_prefix_wrap_timed_debug_zeromq_quorum() {
    let mut mc = with_command("mc", 3, "hostname");
    mc.spec.max_size = Some(6);
    mc.spec.flux.log_level = 7;
    mc.spec.flux.wrap = "strace,-f".into();
    mc.spec.containers[0].commands.prefix = "env PREFIXED='yes it is'".into();
    mc.spec.logging.timed = true;
    mc.spec.logging.debug = true;
    mc.spec.logging.zeromq = true;
    let pod = Pod::new(&mc);
    let out = pod.run("lead.sh", &[("FAKE_FLUX_SHOW_ENV", "PREFIXED")]);
    assert_ok(&out);
    let calls = pod.flux_calls();
    let submit = strs(&["submit", "-n1", "--quiet", "--watch", "-vvv", "hostname"]);
    let mut start = strs(&["start", "--wrap=strace,-f", "-o", "--config"]);
    start.push(pod.config_dir());
    start.extend(strs(&[
        "-Slog-stderr-level=7",
        "-Slog-stderr-mode=local",
        "-Sbroker.quorum=3",
        "-Stbon.zmqdebug=1",
    ]));
    start.push(format!(
        "-Slocal-uri=local://{}/broker/local",
        pod.run.display()
    ));
    start.extend(pod.initrc_arg());
    let mut program = strs(&[
        "bash",
        "-c",
        r#"TIMEFORMAT="FLUXTIME $1 wall time %3lR"; shift; time "$@""#,
        "flux-operator-time",
        "submit",
        "flux",
    ]);
    program.extend(submit.clone());
    start.extend(pod.program(&program));
    assert_eq!(calls, vec![start, submit]);
    assert_eq!(
        pod.env_seen()["PREFIXED"],
        "yes it is",
        "commands.prefix runs before flux start"
    );
    let err = stderr(&out);
    assert!(err.contains("FLUXTIME submit wall time"), "{err}");
    assert!(err.contains("FLUXTIME flux start wall time"), "{err}");
    assert!(err.contains("+ "), "debug traces the script: {err}");

    // The follower: same broker options, no prefix, no program.
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("follower.sh", &[]));
    let mut start = strs(&["start", "--wrap=strace,-f", "-o", "--config"]);
    start.push(pod.config_dir());
    start.extend(strs(&[
        "-Slog-stderr-level=7",
        "-Slog-stderr-mode=local",
        "-Sbroker.quorum=3",
        "-Stbon.zmqdebug=1",
    ]));
    start.push(format!(
        "-Slocal-uri=local://{}/broker/local",
        pod.run.display()
    ));
    start.extend(pod.initrc_arg());
    assert_eq!(pod.flux_calls(), vec![start]);
}

#[test]
fn quiet_prints_nothing_of_its_own_and_keeps_the_output_of_post() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.logging.quiet = true;
    let c = &mut mc.spec.containers[0].commands;
    c.init = "echo init-out; echo init-err >&2".into();
    c.pre = "echo pre-out; echo pre-err >&2".into();
    c.broker_pre = "echo broker-pre-out; echo broker-pre-err >&2".into();
    c.worker_pre = "echo worker-pre-out; echo worker-pre-err >&2".into();
    c.post = "echo post-out; echo post-err >&2".into();
    // As the Go operator's templates: init's stdout, all of pre, brokerPre and workerPre
    // discarded; post's output is the application's and stays.
    let pod = Pod::new(&mc);
    let out = pod.run("lead.sh", &[]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "init-err\npost-err\n");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "post-out\n");
    assert!(pod.flux_calls()[0].contains(&s("-Slog-stderr-level=0")));
    let pod = Pod::new(&mc);
    let out = pod.run("follower.sh", &[]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "init-err\npost-err\n");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "post-out\n");
    // Not quiet: every hook's output, and the entrypoint explains itself on stderr.
    mc.spec.logging.quiet = false;
    let pod = Pod::new(&mc);
    let out = pod.run("lead.sh", &[]);
    assert!(stderr(&out).contains("flux-operator: starting the lead broker"));
    assert!(stderr(&out).contains("pre-err"));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "init-out\npre-out\nbroker-pre-out\npost-out\n"
    );
}

/// The lead's "starting the lead broker" line is the command as it runs, each word quoted
/// for a shell: a shell given the line back runs the very words flux was called with.
#[test]
fn the_lead_logs_its_start_command_quoted_so_a_shell_reads_back_the_same_words() {
    let command = r#"printf '%s\n' "it's" "a \"b\"" '$HOME' '*' 🚀"#;
    let mut mc = with_command("mc", 2, command);
    mc.spec.logging.quiet = false;
    let pod = Pod::new(&mc);
    let out = pod.run("lead.sh", &[]);
    assert_ok(&out);
    let err = stderr(&out);
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("flux-operator: starting the lead broker:"))
        .unwrap_or_else(|| panic!("no start line in:\n{err}"));
    let words = Command::new("bash")
        .args(["-c", &format!("printf '%s\\0'{line}")])
        .output()
        .expect("bash");
    let words: Vec<String> = String::from_utf8_lossy(&words.stdout)
        .split_terminator('\0')
        .map(String::from)
        .collect();
    let called = &pod.flux_calls()[0];
    assert_eq!(words[0], "flux", "{line}");
    assert_eq!(&words[1..], &called[..], "{line}");
}

#[test]
fn quiet_batch_does_not_print_the_batch_job_id() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.containers[0].batch = true;
    let loud = crate::flux::scripts::broker_script(&crate::fixtures::cluster(&mc), true).unwrap();
    mc.spec.logging.quiet = true;
    let quiet = crate::flux::scripts::broker_script(&crate::fixtures::cluster(&mc), true).unwrap();
    let loud_line =
        r#"'id=$(flux batch "$@") && printf '\''%s\n'\'' "$id" && flux job status -v "$id"'"#;
    assert!(loud.contains(loud_line), "{loud}");
    assert!(
        quiet.contains(r#"'id=$(flux batch "$@") && flux job status -v "$id"'"#),
        "{quiet}"
    );
}

#[test]
fn archive_is_restored_when_it_exists_and_dumped_beside_it() {
    let mut mc = with_command("mc", 2, "hostname");
    let pod0 = Pod::new(&mc);
    let archive = pod0.root.join("state-archive.tar").display().to_string();
    let partial = pod0
        .root
        .join(".partial-state-archive.tar")
        .display()
        .to_string();
    crate::fixtures::archive_on_host(&mut mc, &archive);
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("lead.sh", &[]));
    assert!(
        !pod.flux_calls()[0]
            .iter()
            .any(|a| a.starts_with("-Scontent.restore"))
    );
    std::fs::write(&archive, "x").unwrap();
    let pod = Pod::new(&mc);
    let out = pod.run("lead.sh", &[]);
    assert_ok(&out);
    let want = with_tail(
        pod.start(&[
            &format!("-Scontent.restore={archive}"),
            &format!("-Scontent.dump={partial}"),
        ]),
        &pod.program(&strs(&[
            "flux", "submit", "-n1", "--quiet", "--watch", "hostname",
        ])),
    );
    // After `flux R encode`: a restored archive's R is another instance's.
    assert_eq!(pod.r_written()[..2], strs(&["R", "encode"]));
    assert_eq!(pod.flux_calls()[0], want);
    // The stand-in flux wrote no dump: the archive stays as it was, and the entrypoint says so.
    assert_eq!(std::fs::read_to_string(&archive).unwrap(), "x");
    assert!(
        stderr(&out).contains("Flux wrote no dump; ") && stderr(&out).contains(" is unchanged"),
        "{}",
        stderr(&out)
    );
    // ... and its termination message, the operator's status.lastSave.
    let report = std::fs::read_to_string(pod.root.join("termination-log")).unwrap();
    let report = crate::flux::SaveReport::parse(&report).expect("a save report");
    assert_eq!(
        (report.archive.as_str(), report.saved),
        (archive.as_str(), false)
    );
    assert!(
        report
            .error
            .is_some_and(|e| e.contains("Flux wrote no dump"))
    );
    // Followers never restore nor dump; they write the same R.
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("follower.sh", &[]));
    assert_eq!(pod.r_written()[..2], strs(&["R", "encode"]));
    assert_eq!(pod.flux_calls(), vec![pod.start(&[])]);
}

#[test]
fn disable_socket_and_simple_scheduler() {
    let mut mc = with_command("mc", 2, "");
    mc.spec.flux.disable_socket = true;
    mc.spec.flux.scheduler.simple = true;
    let pod = Pod::new(&mc);
    let show = "FLUXION_QMANAGER_RC_NOOP FLUXION_RESOURCE_RC_NOOP FLUX_MODPROBE_DISABLE \
                FLUX_OPERATOR_RELEASE_QUEUES";
    assert_ok(&pod.run("lead.sh", &[("FAKE_FLUX_SHOW_ENV", show)]));
    let mut start = strs(&["start", "-o", "--config"]);
    start.push(pod.config_dir());
    start.extend(strs(&[
        "-Slog-stderr-level=6",
        "-Slog-stderr-mode=local",
        "-Sbroker.rc2_none=1",
    ]));
    start.extend(pod.initrc_arg());
    start.push(format!("-Sstatedir={}/state/instance", pod.run.display()));
    assert_eq!(pod.flux_calls(), vec![start]);
    let env = pod.env_seen();
    assert_eq!(env["FLUXION_QMANAGER_RC_NOOP"], "1");
    assert_eq!(env["FLUXION_RESOURCE_RC_NOOP"], "1");
    // Disabling a module Flux does not have is fatal in flux-modprobe (a Flux without
    // Fluxion): the choice is scheduler.toml's, by alternatives.
    assert_eq!(env["FLUX_MODPROBE_DISABLE"], "<unset>");
    assert!(pod.config.join("scheduler.toml").is_file());
    // sched-simple keeps a job that asks for more nodes than are up queued: no hold.
    assert_eq!(env["FLUX_OPERATOR_RELEASE_QUEUES"], "<unset>");
}

#[test]
fn with_fluxion_the_lead_holds_the_queues_until_the_quorum_is_up() {
    let mc = with_command("mc", 3, "hostname");
    let pod = Pod::new(&mc);
    let show = "FLUX_MODPROBE_PATH_APPEND FLUX_OPERATOR_RELEASE_QUEUES";
    assert_ok(&pod.run("lead.sh", &[("FAKE_FLUX_SHOW_ENV", show)]));
    let env = pod.env_seen();
    let modprobe = PathBuf::from(&env["FLUX_MODPROBE_PATH_APPEND"]);
    let hold = std::fs::read_to_string(modprobe.join("rc1.d/flux-operator-hold-queues.py"))
        .expect("the rc1 task that holds the queues");
    assert!(
        hold.contains("before=[\"sched-fluxion-qmanager\"]"),
        "{hold}"
    );
    assert!(hold.contains("\"nocheckpoint\": True"), "{hold}");
    let release = PathBuf::from(&env["FLUX_OPERATOR_RELEASE_QUEUES"]);
    assert_eq!(release.parent(), Some(modprobe.as_path()));
    let release = std::fs::read_to_string(&release).unwrap();
    assert!(release.contains("broker.quorum"), "{release}");

    // Followers never hold anything: the task is rank 0's.
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("follower.sh", &[("FAKE_FLUX_SHOW_ENV", show)]));
    assert_eq!(pod.env_seen()["FLUX_OPERATOR_RELEASE_QUEUES"], "<unset>");
}

#[test]
fn follower_exits_0_when_the_lead_shut_down() {
    let mc = with_command("mc", 3, "hostname");
    let pod = Pod::new(&mc);
    std::fs::write(&pod.rcs, "0\n").unwrap();
    assert_ok(&pod.run("follower.sh", &[]));
    assert_eq!(pod.flux_calls(), vec![pod.start(&[])]);

    // A failing broker is restarted until it exits 0.
    let pod = Pod::new(&mc);
    std::fs::write(&pod.rcs, "1\n137\n0\n").unwrap();
    let out = pod.run("follower.sh", &[]);
    assert_ok(&out);
    assert_eq!(
        pod.flux_calls(),
        vec![pod.start(&[]), pod.start(&[]), pod.start(&[])]
    );
    assert!(stderr(&out).contains("restarting"), "{}", stderr(&out));

    // completeWorkers: whatever the broker's status, the follower completes.
    let mut mc = mc;
    mc.spec.flux.complete_workers = true;
    let pod = Pod::new(&mc);
    std::fs::write(&pod.rcs, "5\n0\n").unwrap();
    assert_ok(&pod.run("follower.sh", &[]));
    assert_eq!(pod.flux_calls(), vec![pod.start(&[])]);
}

#[test]
fn the_certificate_copy_is_private() {
    let mc = with_command("mc", 2, "hostname");
    let pod = Pod::new(&mc);
    for script in ["lead.sh", "follower.sh", "lead.sh"] {
        // The second lead run finds the 0400 copy of the first and replaces it.
        assert_ok(&pod.run(script, &[]));
        let copy = pod.key.join("curve.cert");
        assert_eq!(std::fs::read_to_string(&copy).unwrap(), CERT);
        let mode = std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o400, "{script}");
        // The run directory is shared with the companions: only the broker's directory there,
        // and no copy of the key in it.
        let shared: Vec<_> = std::fs::read_dir(&pod.run)
            .map(|d| d.map(|e| e.unwrap().file_name()).collect())
            .unwrap_or_default();
        assert_eq!(
            shared,
            ["broker"],
            "{script}: {shared:?} in the shared run directory"
        );
        for entry in std::fs::read_dir(pod.run.join("broker")).unwrap() {
            let path = entry.unwrap().path();
            assert_ne!(
                std::fs::read_to_string(&path).ok().as_deref(),
                Some(CERT),
                "{script}: the key in {}",
                path.display()
            );
        }
    }
    std::fs::remove_file(pod.curve.join("curve.cert")).unwrap();
    let out = pod.run("lead.sh", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot read"));
}

#[test]
fn the_broker_socket_is_in_a_directory_the_brokers_user_owns() {
    use std::os::unix::fs::MetadataExt;
    let mc = with_command("mc", 2, "hostname");
    for script in ["lead.sh", "follower.sh"] {
        let pod = Pod::new(&mc);
        // A socket left by an earlier broker in this pod is removed before the start.
        std::fs::create_dir_all(pod.run.join("broker")).unwrap();
        std::fs::write(pod.run.join("broker/local"), "stale").unwrap();
        // The run directory as the kubelet makes an emptyDir: world-writable.
        std::fs::set_permissions(&pod.run, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_ok(&pod.run(script, &[]));
        let dir = std::fs::metadata(pod.run.join("broker")).unwrap();
        assert!(dir.is_dir());
        assert_eq!(
            dir.uid(),
            current_uid(),
            "{script}: owned by the broker's user"
        );
        assert_eq!(
            dir.mode() & 0o7777,
            0o755,
            "{script}: companions of other users can reach the socket"
        );
        assert!(!pod.run.join("broker/local").exists(), "{script}");
        let uri = format!("-Slocal-uri=local://{}/broker/local", pod.run.display());
        assert!(pod.flux_calls()[0].contains(&uri), "{script}");
    }
    // A broker directory owned by another user: Flux would refuse it; say so, start nothing.
    let pod = Pod::new(&mc);
    std::fs::create_dir_all(&pod.run).unwrap();
    if current_uid() == 0 {
        std::fs::create_dir(pod.run.join("broker")).unwrap();
        std::os::unix::fs::chown(pod.run.join("broker"), Some(65534), None).unwrap();
    } else {
        // Not root: "/" is a directory someone else (root) owns.
        std::os::unix::fs::symlink("/", pod.run.join("broker")).unwrap();
    }
    let out = pod.run("follower.sh", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is not owned by uid"),
        "{}",
        stderr(&out)
    );
    assert!(pod.flux_calls().is_empty());
}

/// A MiniCluster of size 2 whose Flux container has these `resources.limits`.
fn with_limits(limits: &[(&str, &str)]) -> MiniCluster {
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let mut mc = with_command("mc", 2, "hostname");
    let limits = limits
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())));
    mc.spec.containers[0].resources = Some(ResourceRequirements {
        limits: Some(limits.collect()),
        ..Default::default()
    });
    mc
}

#[test]
fn r_lists_the_cores_the_cpu_limit_allows_and_the_gpus_asked_for() {
    let cores = |pod: &Pod| pod.r_written()[4].clone();
    let gpus = |pod: &Pod| pod.r_written().get(5).cloned();
    let shared_initrc = |pod: &Pod| {
        let initrc = format!("{}/broker/shell/initrc.lua", pod.run.display());
        let start = &pod.flux_calls()[0];
        start
            .contains(&format!("-Sconf.shell_initrc={initrc}"))
            .then_some(initrc)
    };
    let mc = with_command("mc", 2, "hostname");
    // (cpuset, the spec's limits.cpu, what the downward API gives, R's cores, shared cores)
    for (cpuset, spec, limit, want, shared) in [
        ("4", None, "", "--cores=0-3", true), // no limit: the cpuset, the node's shared pool
        ("4", None, "4", "--cores=0-3", true), // no limit: the API gives allocatable CPUs
        ("4", Some("4"), "4", "--cores=0-3", false), // a limit of the cpuset's size: its own
        ("4", Some("2"), "2", "--cores=0-1", true), // a limit below it: shared cores
        ("2", Some("1"), "1", "--cores=0", true), // one core is `0`, not `0-0`
        ("1", Some("8"), "8", "--cores=0", false), // an exclusive cpuset below the limit
        ("2", Some("2"), "junk", "--cores=0-1", false), // not a count: the cpuset
    ] {
        let mc = match spec {
            Some(cpu) => with_limits(&[("cpu", cpu)]),
            None => mc.clone(),
        };
        let pod = Pod::new(&mc);
        let env = [
            ("FAKE_FLUX_CORES", cpuset),
            ("FLUX_OPERATOR_CPU_LIMIT", limit),
        ];
        assert_ok(&pod.run("follower.sh", &env));
        assert_eq!(
            cores(&pod),
            want,
            "cpuset {cpuset}, limit {spec:?} {limit:?}"
        );
        assert_eq!(gpus(&pod), None);
        let initrc = shared_initrc(&pod);
        assert_eq!(
            initrc.is_some(),
            shared,
            "cpuset {cpuset}, limit {spec:?} {limit:?}"
        );
        if let Some(initrc) = initrc {
            let text = std::fs::read_to_string(&initrc).unwrap();
            assert!(
                text.contains(r#"shell.options["cpu-affinity"] = "off""#),
                "{text}"
            );
            assert!(
                text.contains("source [==[/opt/flux/etc/flux/shell/initrc.lua]==]"),
                "{text}"
            );
            let lua_d = std::fs::read_link(pod.run.join("broker/shell/lua.d")).unwrap();
            assert_eq!(lua_d, Path::new("/opt/flux/etc/flux/shell/lua.d"));
        }
    }
    // GPUs: those the container asks for, else those a device plugin made visible.
    for (mc, env, want) in [
        (
            with_limits(&[("nvidia.com/gpu", "2")]),
            vec![],
            Some("--gpus=0-1"),
        ),
        (
            with_limits(&[("amd.com/gpu", "1")]),
            vec![],
            Some("--gpus=0"),
        ),
        (
            mc.clone(),
            vec![("CUDA_VISIBLE_DEVICES", "3,5")],
            Some("--gpus=0-1"),
        ),
        (mc.clone(), vec![("NVIDIA_VISIBLE_DEVICES", "all")], None),
        (mc.clone(), vec![("CUDA_VISIBLE_DEVICES", "")], None),
    ] {
        let pod = Pod::new(&mc);
        assert_ok(&pod.run("lead.sh", &env));
        assert_eq!(gpus(&pod).as_deref(), want, "{env:?}");
    }
}

#[test]
fn brokers_write_r_for_every_host_before_starting() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.max_size = Some(4);
    for script in ["lead.sh", "follower.sh"] {
        let pod = Pod::new(&mc);
        assert_ok(&pod.run(script, &[]));
        // The stand-in counts 2 cores in the cpuset; no CPU limit, no GPU.
        assert_eq!(
            pod.r_written(),
            strs(&[
                "R",
                "encode",
                "--hosts=mc-lead-0-0,mc-workers-0-[0-2]",
                "--ranks=0-3",
                "--cores=0-1",
            ]),
            "{script}"
        );
        assert_eq!(
            pod.flux_calls()[0][0],
            "start",
            "{script}: R is written before the broker starts"
        );
        // Where broker.toml's [resource] path points (relative to the run directory).
        let r = pod.run.join("broker/R.json");
        assert!(r.is_file(), "{script}");
        assert!(!pod.run.join("broker/R.json.new").exists(), "{script}");
        // No R: the broker would fail in rc1, so the entrypoint stops first.
        let pod = Pod::new(&mc);
        let out = pod.run(script, &[("FAKE_FLUX_RC_R", "1")]);
        assert_eq!(out.status.code(), Some(1), "{script}");
        assert!(stderr(&out).contains("flux R encode"), "{script}");
        assert!(pod.flux_calls().is_empty(), "{script}: no broker without R");
    }
    // A fixed size too (a rank that leaves and comes back takes work again).
    let pod = Pod::new(&with_command("mc", 2, "hostname"));
    assert_ok(&pod.run("lead.sh", &[]));
    assert_eq!(
        pod.r_written(),
        strs(&[
            "R",
            "encode",
            "--hosts=mc-lead-0-0,mc-workers-0-0",
            "--ranks=0-1",
            "--cores=0-1",
        ])
    );
    // The user's broker config decides: no R.
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.flux.broker_config = "[bootstrap]\ncurve_cert = \"/x\"\n".into();
    let pod = Pod::new(&mc);
    assert_ok(&pod.run("lead.sh", &[]));
    assert!(pod.all_flux_calls().iter().all(|c| c[0] != "R"));
    assert!(!pod.run.join("broker/R.json").exists());
}

/// The uid this test runs as.
fn current_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::metadata(dir.path()).unwrap().uid()
}

#[test]
fn the_view_puts_flux_on_path_and_python_path() {
    let mc = with_command("mc", 2, "hostname");
    let pod = Pod::new(&mc);
    // Flux only in the view: the stand-in moves from bin/ to view/view/bin/.
    let view_bin = pod.view.join("view/bin");
    std::fs::create_dir_all(&view_bin).unwrap();
    std::fs::rename(pod.bin.join("flux"), view_bin.join("flux")).unwrap();
    let site = pod.view.join("view/lib/python3.11/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    assert_ok(&pod.run("lead.sh", &[("FAKE_FLUX_SHOW_ENV", "PYTHONPATH")]));
    assert_eq!(pod.flux_calls().len(), 2);
    assert_eq!(pod.env_seen()["PYTHONPATH"], site.display().to_string());
    // No flux anywhere: a clear error, 127.
    let out = pod.run("lead.sh", &[("FLUX_OPERATOR_VIEW", "")]);
    assert_eq!(out.status.code(), Some(127));
    assert!(stderr(&out).contains("flux is not on PATH"));
}

/// A view image mounted as an image volume: its /opt is the view's directory, where `view`
/// links to the view, relatively or (as a Spack view does) to an absolute /opt/... path that
/// the container does not have. The entrypoint finds Flux and its bindings there either way.
#[test]
fn the_view_is_found_through_the_images_view_link_relative_or_absolute() {
    let mc = with_command("mc", 2, "hostname");
    // The view's root as the entrypoint names it: through the link when it resolves.
    for (link, root_seen) in [
        ("views/._view/abc", "view"),
        ("/opt/views/._view/abc", "views/._view/abc"),
    ] {
        let pod = Pod::new(&mc);
        let root = pod.view.join("views/._view/abc");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::rename(pod.bin.join("flux"), root.join("bin/flux")).unwrap();
        let site = "lib/python3.12/site-packages";
        std::fs::create_dir_all(root.join(site)).unwrap();
        std::os::unix::fs::symlink(link, pod.view.join("view")).unwrap();
        assert_ok(&pod.run("lead.sh", &[("FAKE_FLUX_SHOW_ENV", "PYTHONPATH")]));
        assert_eq!(pod.flux_calls().len(), 2, "{link}");
        let seen = pod.view.join(root_seen).join(site);
        assert_eq!(
            pod.env_seen()["PYTHONPATH"],
            seen.display().to_string(),
            "{link}"
        );
    }
}

#[test]
fn python_path_from_the_spec() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.flux.container.python_path = "/opt/py path/site".into();
    let pod = Pod::new(&mc);
    assert_ok(&pod.run(
        "lead.sh",
        &[("FAKE_FLUX_SHOW_ENV", "PYTHONPATH"), ("PYTHONPATH", "/pre")],
    ));
    assert_eq!(pod.env_seen()["PYTHONPATH"], "/pre:/opt/py path/site");
}

/// A MiniCluster whose second container `api` does not run Flux: it runs `command` beside
/// the broker, with `commands.init` and `servicePre` hooks calling the stand-in flux.
fn with_companion(command: &str) -> MiniCluster {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.containers[0].run_flux = true;
    let mut side = MiniClusterContainer {
        name: "api".into(),
        command: command.into(),
        ..Default::default()
    };
    side.commands.init = "flux hook svc-init".into();
    side.commands.service_pre = "flux hook svc-pre".into();
    mc.spec.containers.push(side);
    mc
}

#[test]
fn companion_waits_for_the_socket_then_runs_its_command_and_post() {
    // `$fluxsocket` is the Go operator's name for the broker's URI.
    let command = r#"flux hook service "$FLUX_URI" "$fluxsocket" 'it'"'"'s $HOME' "$HOME""#;
    let mut mc = with_companion(command);
    // The Go operator's REST API examples start their server on the lead only, by the pod's
    // Job index: here JOB_COMPLETION_INDEX is the broker rank too (follower index + 1).
    mc.spec.containers[1].commands.post = r#"flux hook post "$JOB_COMPLETION_INDEX""#.into();
    let pod = Pod::new(&mc);
    std::fs::create_dir_all(pod.run.join("broker")).unwrap();
    let socket = pod.run.join("broker/local");
    let uptime = pod.root.join("uptime");
    let uptime_env = uptime.display().to_string();
    let env = [
        ("FAKE_FLUX_UPTIME", uptime_env.as_str()),
        ("FLUX_OPERATOR_ROLE", "worker"),
        ("JOB_COMPLETION_INDEX", "2"),
    ];
    let mut child = pod
        .command("sh", "container.api.sh", &env)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let wait = || std::thread::sleep(std::time::Duration::from_millis(1500));
    wait();
    assert!(
        child.try_wait().unwrap().is_none(),
        "the companion must wait for the broker socket"
    );
    assert_eq!(pod.flux_calls(), vec![strs(&["hook", "svc-init"])]);
    // The socket exists, the broker has not joined yet (lines as flux-core 0.88 prints them).
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::fs::write(
        &uptime,
        " 10:00:01 join 1.2s,  owner root,  depth 0,  size 4\n",
    )
    .unwrap();
    wait();
    assert!(
        child.try_wait().unwrap().is_none(),
        "the companion must wait for the broker to join"
    );
    // `flux uptime` failing (the lead's services not up yet) keeps it waiting too.
    std::fs::write(&uptime, "").unwrap();
    wait();
    assert!(child.try_wait().unwrap().is_none());
    let asked = pod.flux_calls().iter().filter(|c| c[0] == "uptime").count();
    assert!((2..=5).contains(&asked), "about once a second: {asked}");
    std::fs::write(
        &uptime,
        " 10:00:04 run 2.5s,  owner root,  depth 0,  size 4,  2 offline\n",
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    let uri = format!("local://{}", socket.display());
    let calls: Vec<_> = pod
        .flux_calls()
        .into_iter()
        .filter(|c| c[0] != "uptime")
        .collect();
    assert_eq!(
        calls,
        vec![
            strs(&["hook", "svc-init"]),
            strs(&["hook", "svc-pre"]),
            strs(&[
                "hook",
                "service",
                &uri,
                &uri,
                "it's $HOME",
                "/home/fake-home"
            ]),
            strs(&["hook", "post", "3"]),
        ]
    );
}

#[test]
fn companion_exits_with_the_commands_status_after_post_and_runs_bash_where_there_is_one() {
    // The Go examples' hooks are bash (`[[ ]]`, `source`): the wrapper runs them with bash.
    let mut mc = with_companion(r#"[[ -n "$BASH_VERSION" ]] && flux hook in-bash; exit 3"#);
    mc.spec.flux.no_wait_socket = true;
    mc.spec.containers[1].commands.post = "flux hook post".into();
    let pod = Pod::new(&mc);
    let out = pod.run("container.api.sh", &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let calls = pod.flux_calls();
    assert_eq!(
        calls[calls.len() - 2..],
        [strs(&["hook", "in-bash"]), strs(&["hook", "post"])]
    );

    // An image without bash: POSIX sh runs it all.
    let only = pod.root.join("only-sh");
    std::fs::create_dir_all(&only).unwrap();
    for tool in ["sleep", "cat"] {
        std::os::unix::fs::symlink(format!("/bin/{tool}"), only.join(tool)).unwrap();
    }
    let mut mc = with_companion(r#"flux hook "${BASH_VERSION:-no-bash}""#);
    mc.spec.flux.no_wait_socket = true;
    let pod = Pod::new(&mc);
    let path = format!("{}:{}", pod.bin.display(), only.display());
    let status = pod
        .command("/bin/sh", "container.api.sh", &[("PATH", &path)])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        pod.flux_calls().last().unwrap(),
        &strs(&["hook", "no-bash"])
    );
}

#[test]
fn companion_without_waiting() {
    let mut mc = with_companion("flux hook service");
    mc.spec.flux.no_wait_socket = true;
    let pod = Pod::new(&mc);
    assert!(
        pod.command("sh", "container.api.sh", &[])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(
        pod.flux_calls().last().unwrap(),
        &strs(&["hook", "service"])
    );
    let mut mc = with_companion("flux hook service");
    mc.spec.flux.disable_socket = true;
    let pod = Pod::new(&mc);
    assert!(
        pod.command("sh", "container.api.sh", &[])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(pod.flux_calls().len(), 3);
}

#[test]
fn a_service_runs_at_once_in_its_own_pod() {
    // spec.services run in the services pod: no broker to wait for, no view, no FLUX_URI.
    let mut mc = with_command("mc", 2, "hostname");
    let mut svc = MiniClusterContainer {
        name: "web".into(),
        command: r#"flux hook service "${FLUX_URI:-none}" "${fluxsocket:-none}""#.into(),
        ..Default::default()
    };
    svc.commands.init = "flux hook init".into();
    svc.commands.service_pre = "flux hook pre".into();
    svc.commands.post = "flux hook post".into();
    mc.spec.services.push(svc);
    let pod = Pod::new(&mc);
    let out = pod.run("service.web.sh", &[]);
    assert_ok(&out);
    assert_eq!(
        pod.flux_calls(),
        vec![
            strs(&["hook", "init"]),
            strs(&["hook", "pre"]),
            strs(&["hook", "service", "none", "none"]),
            strs(&["hook", "post"]),
        ]
    );
}

#[test]
fn every_example_renders_and_runs() {
    for (name, mut mc) in super::examples() {
        // Logs of batch examples go to the test's directory, not the host's.
        let pod0 = Pod::new(&mc);
        if mc.spec.containers[0].batch {
            mc.spec.containers[0].logs = pod0.root.join("logs").display().to_string();
        }
        let pod = Pod::new(&mc);
        assert_ok(&pod.run("lead.sh", &[]));
        assert_eq!(pod.flux_calls()[0][0], "start", "{name}");
        let pod = Pod::new(&mc);
        assert_ok(&pod.run("follower.sh", &[]));
        let calls = pod.flux_calls();
        assert_eq!(calls.len(), 1, "{name}: {calls:?}");
        assert_eq!(calls[0][..4], pod.start(&[])[..4]);
        assert!(
            calls[0][4..].iter().all(|a| a.starts_with("-S")),
            "{name}: a follower has no program: {calls:?}"
        );
    }
}

#[test]
fn a_followers_job_completion_index_is_its_rank_as_in_the_go_operator() {
    let mc = with_command("mc", 3, "hostname");
    let pod = Pod::new(&mc);
    let show = [
        ("FAKE_FLUX_SHOW_ENV", "JOB_COMPLETION_INDEX"),
        ("JOB_COMPLETION_INDEX", "1"),
    ];
    assert_ok(&pod.run("follower.sh", &show));
    assert_eq!(pod.env_seen()["JOB_COMPLETION_INDEX"], "2");
    let pod = Pod::new(&mc);
    assert_ok(&pod.run(
        "lead.sh",
        &[
            ("FAKE_FLUX_SHOW_ENV", "JOB_COMPLETION_INDEX"),
            ("JOB_COMPLETION_INDEX", "0"),
        ],
    ));
    assert_eq!(pod.env_seen()["JOB_COMPLETION_INDEX"], "0");
}

/// `flux-view.sh`, sourced by sh as a person's shell would, sets what it says for any mount
/// path, quotes and `$` included: nothing in the path is run or expanded.
#[test]
fn flux_view_sh_puts_flux_on_path_and_points_at_the_broker_for_any_mount_path() {
    for (mount, python) in [("/mnt/flux", ""), ("/mnt/it's $HOME `id`", "/opt/py's")] {
        let mut mc = with_command("mc", 2, "hostname");
        mc.spec.flux.container.mount_path = mount.into();
        mc.spec.flux.container.python_path = python.into();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("flux-view.sh");
        std::fs::write(
            &file,
            crate::flux::scripts::shell_environment(&crate::fixtures::cluster(&mc))
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        let out = Command::new("sh")
            .arg("-c")
            .arg(r#". "$1" && printf '%s\n' "$PATH" "${PYTHONPATH:-}" "$FLUX_URI" "$fluxsocket""#)
            .arg("sh")
            .arg(&file)
            .env("PATH", "/usr/bin:/bin")
            .env_remove("PYTHONPATH")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let lines: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        let uri = format!("local://{}", crate::flux::SOCKET_PATH);
        assert_eq!(
            lines,
            [
                format!("/usr/bin:/bin:{mount}/view/bin"),
                python.to_string(),
                uri.clone(),
                uri
            ],
            "{mount}"
        );
    }
}

/// Pieces of text that break scripts that take it as code: quotes, newlines, expansions,
/// backticks, leading dashes, template syntax, unicode, control characters.
const HOSTILE: &[&str] = &[
    "'",
    "\"",
    "\n",
    "\r",
    "\t",
    " ",
    "$(id)",
    "`id`",
    "${X}",
    "$HOME",
    "-rf",
    "--",
    "-n",
    "\\",
    "*",
    "?",
    "[a]",
    ";",
    "&&",
    "|",
    "#",
    "!",
    "~",
    "%s",
    "{{ x }}",
    "{% if x %}",
    "é🚀",
    "\u{7f}",
    "\u{1b}[0m",
];

/// A hostile text: 1 to 5 pieces of [`HOSTILE`] or plain words, now and then very long.
fn hostile_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let piece = prop_oneof![
        3 => proptest::sample::select(HOSTILE).prop_map(String::from),
        1 => "[a-z]{1,6}",
        1 => "[a-z]{1,6}".prop_map(|w| w.repeat(700)),
    ];
    proptest::collection::vec(piece, 1..5).prop_map(|p| p.concat())
}

/// A runner of `cases` cases from a fixed seed ([`crate::fixtures::fixed_proptest_config`]).
fn hostile_runner(cases: u32) -> proptest::test_runner::TestRunner {
    proptest::test_runner::TestRunner::new(crate::fixtures::fixed_proptest_config(cases, 31))
}

/// Every field that reaches a script holds `texts[i]`, in a cluster with a companion.
fn with_hostile_fields(texts: &[String]) -> MiniCluster {
    let mut mc = with_command("mc", 2, &texts[0]);
    let c = &mut mc.spec.containers[0];
    c.name = "app".into();
    c.working_dir = format!("/w/{}", texts[1]);
    c.batch = texts[2].len().is_multiple_of(2);
    c.logs = texts[2].clone();
    c.environment.insert("V".into(), texts[3].clone());
    let k = &mut c.commands;
    (k.init, k.pre, k.broker_pre, k.worker_pre) = (
        texts[4].clone(),
        texts[5].clone(),
        texts[6].clone(),
        texts[7].clone(),
    );
    (k.post, k.prefix) = (texts[8].clone(), texts[9].clone());
    let mut companion = c.clone();
    companion.name = "side".into();
    companion.run_flux = false;
    companion.commands.service_pre = texts[10].clone();
    companion.commands.prefix = String::new();
    mc.spec.containers[0].run_flux = true;
    mc.spec.containers.push(companion);
    let flux = &mut mc.spec.flux;
    (flux.wrap, flux.option_flags, flux.submit_command) =
        (texts[11].clone(), texts[12].clone(), texts[13].clone());
    flux.environment.insert("W".into(), texts[14].clone());
    flux.container.python_path = texts[15].clone();
    mc
}

/// A script of the operator's own, not a file holding the user's program (a hook, the
/// script, the batch lines, a companion's hook: `<prefix>.<name>.<hook>.sh`).
fn operator_script(name: &str) -> bool {
    use crate::flux::scripts::files::{BATCH, SCRIPT};
    name.ends_with(".sh")
        && !name.starts_with("hook-")
        && name != SCRIPT
        && name != BATCH
        && name.split('.').count() != 4
}

/// Whatever text the fields hold, what is accepted renders scripts bash can read whole:
/// user strings are data in them, never code of the script.
#[test]
fn every_rendered_script_parses_whatever_text_the_fields_hold() {
    use proptest::prelude::*;
    let accepted = std::cell::Cell::new(0);
    let strategy = proptest::collection::vec(hostile_text(), 16);
    let result = hostile_runner(48).run(&strategy, |texts| {
        let mc = with_hostile_fields(&texts);
        if !crate::model::validate(&mc).is_empty() {
            return Ok(()); // refused, naming its fields (model tests)
        }
        accepted.set(accepted.get() + 1);
        let files = crate::flux::config_map_data(&crate::fixtures::cluster(&mc)).unwrap();
        for (name, text) in files.iter().filter(|(n, _)| operator_script(n)) {
            let out = Command::new("bash")
                .args(["-n", "-c", text])
                .output()
                .unwrap();
            prop_assert!(
                out.status.success(),
                "{name} does not parse: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    });
    result.unwrap();
    assert!(
        accepted.get() > 10,
        "only {} specs accepted",
        accepted.get()
    );
}

/// Words written quoted as a shell writes them (`'...'`, a `'` as `'\''`), whatever they
/// hold, reach the command as exactly those words: given to `flux submit` as they are, or
/// as the text `bash -c` runs (which, run here, prints exactly those words).
#[test]
fn quoted_words_reach_the_command_unchanged_whatever_they_hold() {
    use proptest::prelude::*;
    let quote = |w: &str| format!("'{}'", w.replace('\'', r"'\''"));
    let strategy = proptest::collection::vec(hostile_text(), 1..4);
    let result = hostile_runner(24).run(&strategy, |words| {
        let head = [s("printf"), s("%s\\0")];
        let command = head
            .iter()
            .chain(&words)
            .map(|w| quote(w))
            .collect::<Vec<_>>()
            .join(" ");
        let mc = with_command("mc", 2, &command);
        prop_assume!(crate::model::validate(&mc).is_empty());
        let pod = Pod::new(&mc);
        let out = pod.run("lead.sh", &[]);
        prop_assert!(out.status.success(), "{}", stderr(&out));
        let submit = &pod.flux_calls()[1];
        let argv = &submit[submit.iter().position(|w| w == "--watch").unwrap() + 1..];
        let received: Vec<String> = if argv[0] == "bash" && argv[1] == "-c" {
            let out = Command::new("bash").args(&argv[1..3]).output().unwrap();
            let text = String::from_utf8(out.stdout).unwrap();
            text.split_terminator('\0').map(String::from).collect()
        } else {
            prop_assert_eq!(&argv[..2], &head[..]);
            argv[2..].to_vec()
        };
        prop_assert_eq!(received, words, "{:?}", command);
        Ok(())
    });
    result.unwrap();
}
