//! The installed operator restarted under a running instance (issue 37), as an admin
//! restarts it: `kubectl rollout restart` (SIGTERM, a new pod) and a forced deletion of its
//! pod (no grace: as a crash or an OOM kill ends it). The brokers' pods keep running, nothing
//! the operator made is replaced, the MiniCluster's conditions do not move, and a job
//! submitted before the restarts runs across both and finishes.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use serde_json::Value;

use crate::cluster::{
    Lead, OPERATOR_NAMESPACE, apply_yaml, get_json, kubectl_in, namespace, operator_pods,
    wait_phase,
};
use crate::common::{sum_samples, wait_for};

const MINUTE: Duration = Duration::from_secs(60);

/// `Kind/name` -> UID (and, for pods, their containers' restarts) of what the operator made
/// for `mc` and of its broker pods.
fn live(ns: &str, mc: &str) -> Result<BTreeMap<String, String>> {
    let selector = format!("flux-framework.org/minicluster={mc}");
    let list: Value = serde_json::from_str(&kubectl_in(
        ns,
        &[
            "get",
            "jobsets,secrets,configmaps,services,pods",
            "-l",
            &selector,
            "-o",
            "json",
        ],
    )?)?;
    let mut out = BTreeMap::new();
    for obj in list["items"].as_array().into_iter().flatten() {
        let restarts: i64 = obj["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["restartCount"].as_i64())
            .sum();
        out.insert(
            format!("{}/{}", obj["kind"], obj["metadata"]["name"]),
            format!("{} restarts {restarts}", obj["metadata"]["uid"]),
        );
    }
    Ok(out)
}

/// The MiniCluster's conditions, each with its transition time.
fn conditions(ns: &str, mc: &str) -> Result<Value> {
    Ok(get_json(ns, &format!("minicluster/{mc}"))?["status"]["conditions"].clone())
}

/// The installed operator's pods that are Ready and not being deleted.
fn ready_operator_pods() -> Result<Vec<String>> {
    Ok(operator_pods()?
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| {
            p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect())
}

/// Until an operator pod other than `old` is Ready and has reconciled (its own counters,
/// read through the API server's proxy to that pod), then 5 s more for anything it set off
/// to land. The new pod's name.
async fn reconciling(old: &str) -> Result<String> {
    let pod = wait_for("a new operator pod, Ready", 3 * MINUTE, || async {
        Ok(ready_operator_pods()?.into_iter().find(|p| p != old))
    })
    .await?;
    let target = format!("pod/{pod}");
    wait_for("the new operator's first reconciles", MINUTE, || async {
        let text = crate::cluster::pod_metrics(&target)?;
        let done = sum_samples(&text, "flux_operator_reconcile_duration_seconds_count", &[]);
        Ok(done.filter(|d| *d > 0.0))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(pod)
}

#[tokio::test]
async fn a_rollout_restart_and_a_forced_deletion_of_the_operator_leave_the_instance_and_its_job_running()
-> Result<()> {
    let ns = namespace("restart").await?;
    let mc = "steady";
    apply_yaml(
        &ns.name,
        &format!(
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
"#
        ),
    )?;
    wait_phase(&ns.name, mc, "Running").await?;
    let lead = Lead::of(&ns.name, mc)?;
    lead.wait("resource list -s up -no {nnodes}", "2", MINUTE)
        .await?;
    // One task on each broker, each waiting for a key in the instance's KVS (not the job's
    // own namespace, FLUX_KVS_NAMESPACE): the job runs until the test says so, across both
    // restarts.
    let job = lead.submit(
        "-N2 -n2 bash -c 'until env -u FLUX_KVS_NAMESPACE flux kvs get restart.done >/dev/null 2>&1; do sleep 1; done; echo finished'",
    )?;
    let job = job.trim().to_string();
    wait_for("the job running", MINUTE, || async {
        Ok(lead
            .jobs()?
            .get(&job)
            .filter(|s| s.starts_with("RUN"))
            .cloned())
    })
    .await?;
    // Settled: every status write of the bring-up landed.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let objects = live(&ns.name, mc)?;
    let before = conditions(&ns.name, mc)?;

    let mut operator = ready_operator_pods()?.pop().unwrap_or_default();
    for how in ["rollout restart", "forced deletion"] {
        match how {
            "rollout restart" => kubectl_in(
                OPERATOR_NAMESPACE,
                &["rollout", "restart", "deployment/flux-operator"],
            )?,
            _ => kubectl_in(
                OPERATOR_NAMESPACE,
                &[
                    "delete",
                    "pod",
                    "-l",
                    "app.kubernetes.io/name=flux-operator",
                    "--grace-period=0",
                    "--force",
                    "--wait=false",
                ],
            )?,
        };
        operator = reconciling(&operator).await?;
        assert_eq!(live(&ns.name, mc)?, objects, "after a {how}");
        assert_eq!(conditions(&ns.name, mc)?, before, "after a {how}");
        let state = lead.jobs()?.get(&job).cloned().unwrap_or_default();
        assert!(
            state.starts_with("RUN"),
            "the job still runs after a {how}: {state}"
        );
    }

    lead.flux("kvs put restart.done=1")?;
    wait_for("the job to finish", MINUTE, || async {
        Ok(lead
            .jobs()?
            .get(&job)
            .filter(|s| s.starts_with("INACTIVE"))
            .cloned())
    })
    .await
    .map(|state| assert_eq!(state, "INACTIVE COMPLETED", "the job succeeded"))?;
    let output = lead.flux(&format!("job attach {job}"))?;
    assert_eq!(
        output.lines().filter(|l| *l == "finished").count(),
        2,
        "a task on each broker finished: {output}"
    );
    lead.flux("shutdown --quiet")?;
    wait_phase(&ns.name, mc, "Succeeded").await?;
    ns.cleanup().await;
    Ok(())
}
