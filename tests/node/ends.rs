//! How a MiniCluster that runs a job ends when the job fails, on the real node: the lead's
//! pod is not restarted, its Job fails at once (`podFailurePolicy`), the JobSet fails and
//! stops every other pod, and the MiniCluster is Failed within seconds with the job's exit
//! code and its last lines of output in `status.result` and a Warning Event (issue 72).
//! Before, a failed command restarted the lead's container, whose new instance waited for
//! followers that had completed: Running for good.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::cluster::{
    apply, apply_yaml, get_json, kubectl_in, minicluster_events as events, namespace, wait_phase,
};
use crate::common::{TestNamespace, kueue_resource, unpack_go_operator, wait_for};

const MINUTE: Duration = Duration::from_secs(60);

/// A MiniCluster `name` of `size` brokers whose Flux container (image `image`) runs
/// `command`, with `extra` lines under the container and `spec` lines under the spec.
fn yaml(name: &str, size: i32, image: &str, command: &str, extra: &str, spec: &str) -> String {
    format!(
        r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: {name}
spec:
  size: {size}
{spec}  containers:
    - image: {image}
      command: {command}
{extra}"#
    )
}

/// Every pod of the test namespace (the MiniClusters' brokers).
fn all_pods(ns: &str) -> Result<Vec<Value>> {
    let list: Value = serde_json::from_str(&kubectl_in(ns, &["get", "pods", "-o", "json"])?)?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// Seconds from RFC 3339 `a` to `b`.
fn seconds_between(a: &str, b: &str) -> Result<i64> {
    let a: jiff::Timestamp = a.parse().with_context(|| format!("time {a:?}"))?;
    let b: jiff::Timestamp = b.parse().with_context(|| format!("time {b:?}"))?;
    Ok(b.as_second() - a.as_second())
}

/// MiniCluster `mc` ended Failed, and what its end says: the status's result has exit code
/// `code` (any non-zero one when `None`) and output ending with `last_line`, the Failed
/// condition is `JobFailed` and names the exit code and the `kubectl logs` command, it
/// came within 15 s of the lead's Flux container ending, no container of the cluster was
/// restarted, every pod of it has stopped, and a Warning Event says the same with the output.
/// The output in the status.
async fn failed_as_told(ns: &str, mc: &str, code: Option<i64>, last_line: &str) -> Result<String> {
    let obj = wait_phase(ns, mc, "Failed").await?;
    let status = &obj["status"];
    let result = &status["result"];
    let exit = result["exitCode"]
        .as_i64()
        .context("status.result.exitCode")?;
    match code {
        Some(code) => ensure!(exit == code, "{mc}: exit code {exit}, not {code}: {status}"),
        None => ensure!(exit != 0, "{mc}: exit code 0: {status}"),
    }
    let output = result["output"].as_str().unwrap_or_default();
    ensure!(
        output.trim_end().ends_with(last_line),
        "{mc}: the output's last line is not {last_line:?}:\n{output}"
    );
    let failed = crate::common::condition(&obj, "Failed").context("a Failed condition")?;
    ensure!(failed["reason"] == "JobFailed", "{mc}: {failed}");
    let message = failed["message"].as_str().unwrap_or_default();
    let (pod, container) = (result["pod"].as_str(), result["container"].as_str());
    let logs = format!(
        "kubectl logs {} -c {}",
        pod.unwrap_or("?"),
        container.unwrap_or("?")
    );
    ensure!(
        message.contains(&format!("exited with code {exit}")) && message.contains(&logs),
        "{mc}: {message}"
    );

    // Within 15 s of the job's end: the lead's Flux container's end, as the kubelet saw it.
    let lead = get_json(ns, &format!("pod/{}", pod.unwrap_or_default()))?;
    let flux = lead["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"].as_str() == container)
        .context("the lead's Flux container status")?;
    let ended = flux["state"]["terminated"]["finishedAt"]
        .as_str()
        .unwrap_or_default();
    let took = seconds_between(
        ended,
        failed["lastTransitionTime"].as_str().unwrap_or_default(),
    )?;
    eprintln!("{mc}: Failed {took} s after the lead's Flux container ended (exit {exit})");
    ensure!(
        (0..=15).contains(&took),
        "{mc}: Failed {took} s after the job's end"
    );

    // Nothing restarted, and every pod stops (the JobSet deletes the Jobs still active).
    let prefix = format!("{mc}-");
    let ours = |ns: &str| -> Result<Vec<Value>> {
        Ok(all_pods(ns)?
            .into_iter()
            .filter(|p| {
                p["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&prefix))
            })
            .collect())
    };
    for pod in ours(ns)? {
        for c in pod["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            ensure!(
                c["restartCount"] == 0,
                "{mc}: restarted: {}",
                pod["metadata"]["name"]
            );
        }
    }
    wait_for(&format!("{mc}'s pods to stop"), MINUTE, || async {
        let running = ours(ns)?
            .into_iter()
            .filter(|p| matches!(p["status"]["phase"].as_str(), Some("Running" | "Pending")))
            .count();
        Ok((running == 0).then_some(()))
    })
    .await?;

    let warned = events(ns, mc)?;
    let said = warned
        .iter()
        .find(|(reason, _)| reason == "Failed")
        .with_context(|| format!("{mc}: no Failed Event in {warned:?}"))?;
    ensure!(
        said.1.contains(message) && said.1.trim_end().ends_with(last_line),
        "{mc}: the Failed Event: {}",
        said.1
    );
    Ok(output.to_string())
}

#[tokio::test]
async fn a_batch_whose_job_exits_3_fails_at_sizes_1_and_3_within_seconds_with_nothing_restarted()
-> Result<()> {
    let ns = namespace("ends-batch").await?;
    let batch = "|\n        hostname\n        bash -c 'echo the solver gave up; exit 3'";
    for (mc, size) in [("batch-1", 1), ("batch-3", 3)] {
        let extra = "      batch: true\n";
        apply_yaml(&ns.name, &yaml(mc, size, "ubuntu:noble", batch, extra, ""))?;
    }
    for mc in ["batch-1", "batch-3"] {
        // The batch's jobs write their output to files; the log ends with flux job status's
        // account of the job that failed, then the entrypoint's.
        failed_as_told(&ns.name, mc, Some(3), "the job ended with exit code 3").await?;
    }
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_command_and_a_launcher_that_fail_fail_and_their_output_is_in_the_status() -> Result<()> {
    let ns = namespace("ends-modes").await?;
    let command = "bash -c 'echo no such input >&2; exit 2'";
    apply_yaml(
        &ns.name,
        &yaml("command", 2, "ubuntu:noble", command, "", ""),
    )?;
    let launcher = "bash -c 'flux run -N2 hostname && echo workflow step 2 failed && exit 5'";
    let extra = "      launcher: true\n";
    apply_yaml(
        &ns.name,
        &yaml("launcher", 2, "ubuntu:noble", launcher, extra, ""),
    )?;
    let mut outputs = Vec::new();
    for (mc, code) in [("command", 2), ("launcher", 5)] {
        let last = format!("the job ended with exit code {code}");
        outputs.push(failed_as_told(&ns.name, mc, Some(code), &last).await?);
    }
    let lines = [
        ("command", "no such input"),
        ("launcher", "workflow step 2 failed"),
    ];
    for ((mc, line), output) in lines.into_iter().zip(outputs) {
        ensure!(
            output.contains(line),
            "{mc}: {line:?} not in the output:\n{output}"
        );
    }
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn an_mpi_program_that_calls_mpi_abort_fails_the_minicluster() -> Result<()> {
    let ns = namespace("ends-mpi").await?;
    let spec = "  tasks: 4\n";
    let command = "mpi-check-openmpi abort 7";
    apply_yaml(
        &ns.name,
        &yaml("abort", 2, "mpi-apps:bookworm", command, "", spec),
    )?;
    let output = failed_as_told(&ns.name, "abort", None, "").await?;
    ensure!(output.contains("mpi-check aborting with 7"), "{output}");
    ns.cleanup().await;
    Ok(())
}

/// The Go operator's LAMMPS example (ReaxFF, size 4, tasks 2) with its input file swapped for
/// one that does not exist, so that LAMMPS fails whatever LAMMPS the image has.
#[tokio::test]
async fn the_go_operators_lammps_example_with_a_broken_input_fails_with_lammps_s_error()
-> Result<()> {
    let tmp = tempfile::tempdir()?;
    let tests = unpack_go_operator(tmp.path(), &["*/examples/tests/lammps/*"])?;
    let file = tests.join("examples/tests/lammps/minicluster.yaml");
    let text = std::fs::read_to_string(&file)?;
    ensure!(
        text.contains("-in in.reaxc.hns"),
        "the example changed:\n{text}"
    );
    std::fs::write(
        &file,
        text.replace("-in in.reaxc.hns", "-in in.missing.hns"),
    )?;
    let ns = namespace("ends-lammps").await?;
    apply(&ns.name, &file)?;
    let output = failed_as_told(&ns.name, "flux-sample", None, "").await?;
    ensure!(
        output.contains("in.missing.hns"),
        "LAMMPS names its input:\n{output}"
    );
    ns.cleanup().await;
    Ok(())
}

/// A ClusterQueue with room for one MiniCluster of 2 brokers (100m each) and its LocalQueue
/// `queue`; cluster-scoped objects go with the namespace.
fn one_at_a_time(ns: &mut TestNamespace) -> Result<()> {
    let (flavor, cq) = (ns.unique_name("flavor"), ns.unique_name("cq"));
    apply_yaml(
        &ns.name,
        &format!(
            r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {flavor}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {cq}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
    - coveredResources: [cpu, memory]
      flavors:
        - name: {flavor}
          resources:
            - {{name: cpu, nominalQuota: 200m}}
            - {{name: memory, nominalQuota: 4Gi}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: queue}}
spec: {{clusterQueue: {cq}}}
"#
        ),
    )?;
    ns.track_cluster_object(&kueue_resource("ResourceFlavor"), &flavor);
    ns.track_cluster_object(&kueue_resource("ClusterQueue"), &cq);
    Ok(())
}

fn queued(name: &str, command: &str) -> String {
    let extra = "      resources:\n        requests: {cpu: 100m}\n";
    yaml(name, 2, "ubuntu:noble", command, extra, "").replace(
        "  name: ",
        "  labels: {kueue.x-k8s.io/queue-name: queue}\n  name: ",
    )
}

#[tokio::test]
async fn a_failed_minicluster_releases_its_kueue_quota_and_the_next_one_is_admitted() -> Result<()>
{
    let mut ns = namespace("ends-kueue").await?;
    one_at_a_time(&mut ns)?;
    apply_yaml(&ns.name, &queued("first", "bash -c 'sleep 5; exit 3'"))?;
    wait_phase(&ns.name, "first", "Running").await?;
    apply_yaml(&ns.name, &queued("second", "hostname"))?;
    failed_as_told(&ns.name, "first", Some(3), "the job ended with exit code 3").await?;
    let second = wait_phase(&ns.name, "second", "Succeeded").await?;
    let first = get_json(&ns.name, "minicluster/first")?;
    let (failed_at, admitted_at) = (
        first["status"]["completionTime"]
            .as_str()
            .unwrap_or_default(),
        second["status"]["startTime"].as_str().unwrap_or_default(),
    );
    let after = seconds_between(failed_at, admitted_at)?;
    eprintln!("second admitted {after} s after first failed");
    ensure!(
        after >= 0,
        "second ran before first ended: {failed_at} vs {admitted_at}"
    );
    ns.cleanup().await;
    Ok(())
}
