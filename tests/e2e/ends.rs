//! How a MiniCluster that runs a job ends, with the real Job and JobSet controllers (issue
//! 72): its lead pod's Flux container exits with the job's code, and the lead Job's
//! `podFailurePolicy` tells a failed job (the Job, the JobSet and the MiniCluster fail at
//! once) from the retry code 75 of a broker that ended before its job (a new lead pod).
//! The KWOK pods end as the annotations say (`e2e/stages/pod-fail-after.yaml`).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use flux_operator::api::{MiniCluster, Phase, condition, reason};

use crate::common::{EXIT_CODE, FAIL_AFTER, TestNamespace, pod_phase, wait_for};
use crate::operator::{Setup, hello, pods_of_role, setup, wait_phase};

const TIMEOUT: Duration = Duration::from_secs(90);

/// The lead pod's Flux container exits with `code` a second from now.
async fn lead_exits(ns: &TestNamespace, mc: &str, code: i32) -> Result<String> {
    let pods: Api<Pod> = ns.api();
    let lead = live_lead(ns, mc).await?.context("a live lead pod")?;
    let patch =
        json!({"metadata": {"annotations": {FAIL_AFTER: "1s", EXIT_CODE: code.to_string()}}});
    pods.patch(&lead, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(lead)
}

/// The lead pod that has not ended, if any.
async fn live_lead(ns: &TestNamespace, mc: &str) -> Result<Option<String>> {
    Ok(pods_of_role(ns, mc, "lead")
        .await?
        .into_iter()
        .find(|p| {
            matches!(pod_phase(p), "Running" | "Pending") && p.metadata.deletion_timestamp.is_none()
        })
        .map(|p| p.name_any()))
}

#[tokio::test]
async fn a_lead_that_exits_75_is_replaced_and_one_that_exits_3_fails_the_minicluster_at_once()
-> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("ends").await?;
    let name = mcs
        .create(&PostParams::default(), &hello(&ns.name, 2)?)
        .await?
        .name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;

    // The retry code: the Job replaces the lead pod (Flux's instance ended before its job);
    // the MiniCluster is not failed and has no result.
    let first = lead_exits(&ns, &name, 75).await?;
    let second = wait_for("a new lead pod", TIMEOUT, || async {
        Ok(live_lead(&ns, &name).await?.filter(|p| *p != first))
    })
    .await?;
    let mc = mcs.get(&name).await?;
    let status = mc.status.clone().unwrap_or_default();
    ensure!(status.phase != Some(Phase::Failed), "{status:?}");
    ensure!(status.result.is_none(), "{status:?}");

    // The job's own failure: Failed, with the exit code, at once (the Job's backoffLimit of
    // 6 is not spent).
    lead_exits(&ns, &name, 3).await?;
    let failed: MiniCluster = wait_phase(&mcs, &name, Phase::Failed).await?;
    let status = failed.status.clone().unwrap_or_default();
    let result = status.result.clone().context("status.result")?;
    ensure!(
        (result.exit_code, result.pod.as_str()) == (3, second.as_str()),
        "{result:?}"
    );
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == condition::FAILED)
        .context("a Failed condition")?;
    ensure!(c.reason == reason::JOB_FAILED, "{c:?}");
    ensure!(c.message.contains("exited with code 3"), "{c:?}");
    let warned = crate::lifecycle::warnings(&ns, &name, "Failed").await?;
    ensure!(
        warned.iter().any(|w| w.contains("exited with code 3")),
        "{warned:?}"
    );
    // `kubectl get -o wide` shows the exit code.
    let out = std::process::Command::new(crate::operator::kubectl())
        .args(["get", "minicluster", &name, "-n", &ns.name, "-o", "wide"])
        .output()?;
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let exit = lines
        .first()
        .and_then(|h| h.iter().position(|c| *c == "EXIT"));
    let shown = exit.and_then(|i| lines.get(1)?.get(i).copied());
    ensure!(shown == Some("3"), "the EXIT column: {table}");
    // The JobSet stops the followers' Job: no broker pod is left running.
    let pods: Api<Pod> = ns.api();
    wait_for("every broker pod stopped", TIMEOUT, || async {
        let list = pods.list(&Default::default()).await?;
        let running = list
            .items
            .iter()
            .filter(|p| pod_phase(p) == "Running")
            .count();
        Ok((running == 0).then_some(()))
    })
    .await?;
    ns.cleanup().await;
    Ok(())
}
