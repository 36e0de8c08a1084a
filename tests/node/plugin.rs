//! `kubectl flux` (issue 34), the plugin built from this repository, against real brokers:
//! what a user types, run as kubectl runs a plugin (`kubectl-flux` with the user's arguments,
//! the test cluster's kubeconfig from `$KUBECONFIG`).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use anyhow::{Context, Result, ensure};

use crate::cluster::{apply_yaml, kubectl_in, namespace, state_dir};

/// An interactive MiniCluster of two brokers (the README's `examples/interactive.yaml`,
/// named `mc`), plus `extra` lines of its spec.
fn interactive(mc: &str, extra: &str) -> String {
    format!(
        r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: {mc}
spec:
  size: 2
  interactive: true
  containers:
    - image: ubuntu:noble
{extra}"#
    )
}

/// The `kubectl` the tests use (the harness's, as `cluster.rs` runs it); the plugin runs it
/// through `$KUBECTL`.
fn kubectl_binary() -> PathBuf {
    std::env::var_os("E2E_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            state_dir()
                .parent()
                .map(|cache| cache.join("bin"))
                .unwrap_or_default()
        })
        .join("kubectl")
}

/// `kubectl flux -n NS ARGS...` with STDIN (none: an empty standard input); its output and
/// exit status, whatever they are.
fn kubectl_flux(ns: &str, args: &[&str], stdin: Option<&str>) -> Result<Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-flux"))
        .args(["-n", ns])
        .args(args)
        .env("KUBECTL", kubectl_binary())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running kubectl-flux")?;
    let mut input = child.stdin.take().context("kubectl-flux's stdin")?;
    if let Some(text) = stdin {
        input.write_all(text.as_bytes())?;
    }
    drop(input);
    Ok(child.wait_with_output()?)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `kubectl flux ARGS` that must succeed; its standard output.
fn ok(ns: &str, args: &[&str], stdin: Option<&str>) -> Result<String> {
    let out = kubectl_flux(ns, args, stdin)?;
    ensure!(
        out.status.success(),
        "kubectl flux {args:?}: {}\n{}{}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    Ok(stdout(&out))
}

/// Words a shell would split, quote, expand or glob: each must reach the job as it is.
const HOSTILE: [&str; 10] = [
    "two words",
    "it's",
    "say \"hi\"",
    "$HOME",
    "*",
    "line one\nline two",
    "ƒlux ünïcode ✓ 日本",
    "`id`; $(id) && echo no",
    "  leading and trailing  ",
    "back\\slash",
];

#[tokio::test]
async fn kubectl_flux_run_gives_the_job_every_hostile_argument_unchanged_and_returns_its_exit_code()
-> Result<()> {
    let ns = namespace("plugin-run").await?;
    let mc = "plugin-run";
    apply_yaml(&ns.name, &interactive(mc, ""))?;

    // `wait` returns once every broker is up.
    let waited = ok(&ns.name, &["wait", mc, "--timeout", "4m"], None)?;
    ensure!(
        waited.contains(&format!(
            "MiniCluster {}/{mc} is up: 2/2 brokers ready",
            ns.name
        )),
        "wait said {waited:?}"
    );

    // The job's argv, one per line, exactly as printf prints the same words here.
    let mut args = vec!["run", mc, "--", "printf", "%s\\n"];
    args.extend(HOSTILE);
    let remote = ok(&ns.name, &args, None)?;
    let local = Command::new("printf").arg("%s\\n").args(HOSTILE).output()?;
    assert_eq!(remote, stdout(&local), "the same words run directly");
    let expected: String = HOSTILE.iter().map(|w| format!("{w}\n")).collect();
    assert_eq!(remote, expected);

    // Flux's options after the MiniCluster are Flux's, even ones spelled like the plugin's
    // (`-n`), with or without `--`.
    let hosts = ok(&ns.name, &["run", mc, "-N2", "-n", "2", "hostname"], None)?;
    assert_eq!(hosts.lines().count(), 2, "a task on each broker: {hosts}");

    // The exit code is the job's.
    for (command, code) in [(&["false"][..], 1), (&["sh", "-c", "exit 3"], 3)] {
        let mut args = vec!["run", mc, "--"];
        args.extend(command);
        let out = kubectl_flux(&ns.name, &args, None)?;
        assert_eq!(
            out.status.code(),
            Some(code),
            "{command:?}: {}",
            stderr(&out)
        );
    }

    let _ = kubectl_in(&ns.name, &["delete", "minicluster", mc, "--wait=false"]);
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn kubectl_flux_submit_then_attach_returns_the_job_output_and_shell_runs_a_scripted_session()
-> Result<()> {
    let ns = namespace("plugin-shell").await?;
    let mc = "plugin-shell";
    apply_yaml(&ns.name, &interactive(mc, ""))?;
    ok(&ns.name, &["wait", mc, "--timeout", "4m"], None)?;

    // submit prints the job's id; attach waits for the job and prints its output.
    let id = ok(
        &ns.name,
        &[
            "submit",
            mc,
            "sh",
            "-c",
            "printf 'attached: %s\\n' \"$1\"",
            "sh",
            "a 'quoted' $word",
        ],
        None,
    )?;
    let id = id.trim();
    ensure!(!id.is_empty(), "submit printed no job id");
    let attached = ok(&ns.name, &["attach", mc, id], None)?;
    assert_eq!(attached, "attached: a 'quoted' $word\n");

    // A shell fed a script on standard input (no terminal): Flux on PATH, FLUX_URI at the
    // lead broker, the shell's exit code returned. (`flux run` forwards its standard input to
    // the job: without `</dev/null` it would take the rest of the script.)
    let script = "flux resource list -s up -no {nnodes}\n\
                  echo \"uri=$FLUX_URI\"\n\
                  flux run -N2 -n2 hostname </dev/null | wc -l\n\
                  exit 7\n";
    let out = kubectl_flux(&ns.name, &["shell", mc], Some(script))?;
    assert_eq!(
        stdout(&out),
        "2\nuri=local:///run/flux-operator/broker/local\n2\n",
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(7));

    // The README's recipe without the plugin: the arguments through `"$@"`, one with a space.
    let job = format!("job/{mc}-lead-0");
    let recipe = kubectl_in(
        &ns.name,
        &[
            "exec",
            &job,
            "-c",
            mc,
            "--",
            "bash",
            "-c",
            ". /mnt/flux/flux-view.sh && exec flux \"$@\"",
            "flux",
            "jobs",
            "-a",
            "-no",
            "{name} {result}",
        ],
    )?;
    ensure!(
        recipe.lines().any(|l| l == "sh COMPLETED"),
        "the submitted job in `flux jobs`:\n{recipe}"
    );

    // Any other flux command passes through.
    assert_eq!(ok(&ns.name, &["getattr", mc, "size"], None)?.trim(), "2");

    // The list: size, ready brokers, phase and the queue's counts (the job above completed).
    let list = ok(&ns.name, &["list"], None)?;
    let row: Vec<&str> = list
        .lines()
        .find(|l| l.split_whitespace().next() == Some(mc))
        .with_context(|| format!("{mc} in the list:\n{list}"))?
        .split_whitespace()
        .collect();
    assert_eq!(row[..4], [mc, "2", "2", "Running"], "{list}");
    let completed: u32 = row[6].parse().with_context(|| list.clone())?;
    ensure!(completed >= 1, "the jobs above count as completed:\n{list}");

    let _ = kubectl_in(&ns.name, &["delete", "minicluster", mc, "--wait=false"]);
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn kubectl_flux_says_clearly_when_the_minicluster_is_missing_or_has_no_socket() -> Result<()>
{
    let ns = namespace("plugin-errors").await?;
    let out = kubectl_flux(&ns.name, &["jobs", "nowhere"], None)?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        format!(
            "error: MiniCluster {0}/nowhere not found (kubectl get miniclusters -n {0})",
            ns.name
        )
    );
    let out = kubectl_flux(&ns.name, &["wait", "nowhere", "--timeout", "5s"], None)?;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));

    // Refused from the spec alone, before any pod is looked at.
    let mc = "no-socket";
    apply_yaml(
        &ns.name,
        &interactive(mc, "  flux:\n    disableSocket: true\n"),
    )?;
    let out = kubectl_flux(&ns.name, &["run", mc, "--", "true"], None)?;
    assert_eq!(out.status.code(), Some(1));
    ensure!(
        stderr(&out).contains("sets spec.flux.disableSocket"),
        "{}",
        stderr(&out)
    );

    let _ = kubectl_in(&ns.name, &["delete", "minicluster", mc, "--wait=false"]);
    ns.cleanup().await;
    Ok(())
}

/// `kubectl flux wait` right after `kubectl scale` waits for the new size: it returns only
/// once every broker of it is ready, as the status and Flux both say.
#[tokio::test]
async fn kubectl_flux_wait_after_a_scale_up_returns_only_when_the_new_size_is_ready() -> Result<()>
{
    let ns = namespace("plugin-wait").await?;
    let mc = "grow";
    apply_yaml(
        &ns.name,
        &interactive(mc, "").replace("  size: 2\n", "  size: 2\n  maxSize: 4\n"),
    )?;
    ok(&ns.name, &["wait", mc, "--timeout", "4m"], None)?;
    kubectl_in(
        &ns.name,
        &["scale", &format!("minicluster/{mc}"), "--replicas=4"],
    )?;
    let said = ok(&ns.name, &["wait", mc, "--timeout", "4m"], None)?;
    ensure!(said.contains("4/4 brokers ready"), "{said}");
    let status = crate::cluster::get_json(&ns.name, &format!("minicluster/{mc}"))?;
    ensure!(
        status["status"]["readyBrokers"] == 4,
        "{}",
        status["status"]
    );
    let lead = crate::cluster::Lead::of(&ns.name, mc)?;
    lead.wait(
        "resource list -s up -no {nnodes}",
        "4",
        std::time::Duration::from_secs(10),
    )
    .await?;
    ns.cleanup().await;
    Ok(())
}

/// A pod made by hand with the lead's labels, newer than the lead and ready (what the plugin
/// once took for the lead: the newest ready pod with those labels), is not where
/// `kubectl flux` runs: the MiniCluster's own JobSet made the lead, and only its pods count.
/// The look-alike answers as a lead would (its container has the MiniCluster's name and a
/// `flux-view.sh` where the plugin looks for one), so a command run there would succeed and
/// print its host name.
#[tokio::test]
async fn kubectl_flux_runs_in_the_minicluster_s_own_lead_not_in_a_newer_look_alike() -> Result<()> {
    let ns = namespace("plugin-look-alike").await?;
    let mc = "plugin-owner";
    apply_yaml(&ns.name, &interactive(mc, ""))?;
    ok(&ns.name, &["wait", mc, "--timeout", "4m"], None)?;
    let lead = &crate::cluster::pods(&ns.name, mc, "lead")?[0];
    let lead_host = lead["spec"]["hostname"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    ensure!(
        !lead_host.is_empty(),
        "the lead pod has a host name: {lead}"
    );

    let mut labels = lead["metadata"]["labels"].clone();
    if let Some(map) = labels.as_object_mut() {
        // Not the Job's selector labels: with those the Job controller adopts the pod.
        map.retain(|k, _| {
            !k.starts_with("batch.kubernetes.io/") && k != "controller-uid" && k != "job-name"
        });
    }
    let look_alike = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": format!("{mc}-look-alike"), "labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": mc,
                "image": "ubuntu:noble",
                "command": ["sh", "-c", "mkdir -p /etc/flux-operator/config && \
                    : > /etc/flux-operator/config/flux-view.sh && exec sleep infinity"],
            }],
        },
    });
    apply_yaml(&ns.name, &look_alike.to_string())?;
    kubectl_in(
        &ns.name,
        &[
            "wait",
            "--for=condition=Ready",
            "--timeout=2m",
            &format!("pod/{mc}-look-alike"),
        ],
    )?;

    let out = kubectl_flux(&ns.name, &["shell", mc], Some("hostname\n"))?;
    assert_eq!(stdout(&out).trim(), lead_host, "{}", stderr(&out));
    assert_eq!(ok(&ns.name, &["getattr", mc, "size"], None)?.trim(), "2");

    let _ = kubectl_in(&ns.name, &["delete", "minicluster", mc, "--wait=false"]);
    ns.cleanup().await;
    Ok(())
}
