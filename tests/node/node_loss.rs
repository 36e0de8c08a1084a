//! A node lost under a running MiniCluster, on two real nodes (`E2E_REAL_NODES=2`, `make
//! test-two-nodes`): the second node's kubelet, containerd and pods killed at once and its pods'
//! addresses silenced (`e2e/node.sh lose 2`), as a power loss. What a user sees, and when: Flux's
//! view of the ranks and jobs, the MiniCluster's status and Events, the pods replaced, the node
//! back. The operator runs on the first node, which is never lost.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::cluster::{Lead, apply_yaml, get_json, kubectl, kubectl_in, lead_pod, node_name, pods};
use crate::common::{TestNamespace, wait_for};

const MINUTE: Duration = Duration::from_secs(60);
/// The taint an admin puts on a node known dead, so its pods are deleted (Kubernetes'
/// non-graceful node shutdown).
const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute";
/// How long the test's pods tolerate their node's `unreachable` and `not-ready` taints before
/// the control plane evicts them (the knob `spec.pod.tolerations` gives users; 300 s unset).
const TOLERATION_SECONDS: u64 = 30;

/// The second node's name (`e2e/node.sh`: the first's, then `-2`).
fn second_node() -> String {
    format!("{}-2", node_name())
}

/// `e2e/node.sh ARGS`.
fn node_sh(args: &[&str]) -> Result<()> {
    let out = Command::new(crate::cluster::root().join("e2e/node.sh"))
        .args(args)
        .output()
        .context("e2e/node.sh")?;
    ensure!(
        out.status.success(),
        "e2e/node.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// While it lives, the two nodes may be changed; dropped, both schedulable and the second
/// back (a failed test leaves no node lost or cordoned for the next).
#[derive(Default)]
pub struct Nodes {
    lost: bool,
    out_of_service: bool,
}

impl Nodes {
    fn cordon(&self, node: &str, on: bool) -> Result<()> {
        kubectl([if on { "cordon" } else { "uncordon" }, node]).map(drop)
    }

    fn lose_second(&mut self) -> Result<()> {
        self.lost = true;
        node_sh(&["lose", "2"])
    }

    fn second_back(&mut self) -> Result<()> {
        if self.out_of_service {
            kubectl([
                "taint",
                "nodes",
                &second_node(),
                "node.kubernetes.io/out-of-service-",
            ])?;
            self.out_of_service = false;
        }
        node_sh(&["back", "2"])?;
        self.lost = false;
        Ok(())
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        if (self.lost || self.out_of_service)
            && let Err(e) = self.second_back()
        {
            eprintln!("node_loss: the second node could not be brought back: {e:#}");
        }
        for node in [node_name(), second_node()] {
            let _ = self.cordon(&node, false);
        }
    }
}

/// An interactive MiniCluster of two whose pods tolerate a lost node for
/// `toleration` seconds.
pub fn yaml(mc: &str, toleration: u64) -> String {
    let toleration = |key: &str| {
        format!(
            "      - {{key: node.kubernetes.io/{key}, operator: Exists, effect: NoExecute, \
             tolerationSeconds: {toleration}}}\n"
        )
    };
    format!(
        "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: {mc}
spec:
  size: 2
  interactive: true
  pod:
    tolerations:
{}{}      - {{key: e2e.flux-framework.org/real-node, operator: Exists, effect: NoSchedule}}
  containers:
    - image: ubuntu:noble
",
        toleration("unreachable"),
        toleration("not-ready")
    )
}

/// The node a pod runs on.
fn node_of(pod: &Value) -> String {
    pod["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Until MiniCluster `mc` reports `n` ready brokers.
async fn ready_brokers(ns: &str, mc: &str, n: i64, timeout: Duration) -> Result<()> {
    wait_for(&format!("{n} brokers ready"), timeout, || async {
        let obj = get_json(ns, &format!("minicluster/{mc}"))?;
        Ok((obj["status"]["readyBrokers"] == n).then_some(()))
    })
    .await
}

/// Which node a MiniCluster of two gets its lead on; the follower goes on the other.
#[derive(Clone, Copy, PartialEq)]
pub enum LeadOn {
    First,
    Second,
}

/// A MiniCluster of two (`manifest`, applied) whose lead and follower run on different
/// nodes, the lead on `lead_on`: made with the other node cordoned (both brokers on the
/// lead's), then its follower's pod deleted with the lead's node cordoned, so that its
/// replacement starts on the other (the scheduler alone might put either broker on either
/// node).
pub async fn placed(
    ns: &str,
    mc: &str,
    nodes: &Nodes,
    manifest: &str,
    lead_on: LeadOn,
) -> Result<()> {
    let (mut here, mut there) = (node_name(), second_node());
    if lead_on == LeadOn::Second {
        std::mem::swap(&mut here, &mut there);
    }
    nodes.cordon(&there, true)?;
    apply_yaml(ns, manifest)?;
    ready_brokers(ns, mc, 2, 3 * MINUTE).await?;
    nodes.cordon(&there, false)?;
    nodes.cordon(&here, true)?;
    let follower = pods(ns, mc, "workers")?[0]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    kubectl_in(ns, &["delete", "pod", &follower, "--wait=false"])?;
    wait_for("the follower on the other node", 3 * MINUTE, || async {
        let moved = pods(ns, mc, "workers")?
            .iter()
            .any(|p| node_of(p) == there && p["metadata"]["name"] != follower.as_str());
        Ok(moved.then_some(()))
    })
    .await?;
    ready_brokers(ns, mc, 2, 3 * MINUTE).await?;
    nodes.cordon(&here, false)?;
    let lead = pods(ns, mc, "lead")?;
    let followers = pods(ns, mc, "workers")?;
    ensure!(
        node_of(&lead[0]) == here && followers.len() == 1 && node_of(&followers[0]) == there,
        "lead on {}, followers on {:?}",
        node_of(&lead[0]),
        followers.iter().map(node_of).collect::<Vec<_>>()
    );
    Ok(())
}

/// The MiniCluster's condition TYPE, when present: (status, reason, message).
fn condition(ns: &str, mc: &str, type_: &str) -> Result<Option<(String, String, String)>> {
    let obj = get_json(ns, &format!("minicluster/{mc}"))?;
    let found = obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("status"), s("reason"), s("message"))
        });
    Ok(found)
}

/// The Events about MiniCluster `mc` with REASON: their messages.
fn events(ns: &str, mc: &str, reason: &str) -> Result<Vec<String>> {
    let selector =
        format!("involvedObject.kind=MiniCluster,involvedObject.name={mc},reason={reason}");
    let list: Value = serde_json::from_str(&kubectl_in(
        ns,
        &["get", "events", "--field-selector", &selector, "-o", "json"],
    )?)?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect())
}

#[tokio::test]
async fn a_follower_s_node_lost_the_instance_goes_on_the_broker_is_named_and_its_job_ends()
-> Result<()> {
    let ns = two_node_namespace("node-loss-follower").await?;
    let mut nodes = Nodes::default();
    let mc = "lossy";
    placed(
        &ns.name,
        mc,
        &nodes,
        &yaml(mc, TOLERATION_SECONDS),
        LeadOn::First,
    )
    .await?;
    let lead = Lead::of(&ns.name, mc)?;
    // A job on both ranks (Fluxion gives each job whole nodes here).
    let both = lead.submit("-N2 sleep 600")?;
    lead.wait(&format!("jobs -no {{state}} {both}"), "RUN", MINUTE)
        .await?;

    let lost_at = Instant::now();
    nodes.lose_second()?;
    // Flux: the job that ran on rank 1 ended by its fatal exception ("node failure on
    // <host> (rank 1)": its shell there unreachable), rank 1 is down,
    // and the instance goes on: a new job runs on the lead's rank.
    lead.wait(
        &format!("jobs -no {{state}} {both}"),
        "INACTIVE",
        2 * MINUTE,
    )
    .await?;
    let flux_ended = lost_at.elapsed();
    let exception = lead.flux(&format!(
        "jobs -no '{{result}} {{exception.type}}: {{exception.note}}' {both}"
    ))?;
    ensure!(
        exception.starts_with("FAILED exec: node failure on") && exception.contains("rank 1"),
        "the job on the lost rank: {exception}"
    );
    lead.wait("resource list -s down -no {ranks}", "1", MINUTE)
        .await?;
    let after = lead.submit("-N1 hostname")?;
    lead.wait(&format!("jobs -no {{result}} {after}"), "COMPLETED", MINUTE)
        .await?;
    ensure!(
        lead.flux(&format!("jobs -no {{ranks}} {after}"))? == "0",
        "the new job ran on the lead's rank"
    );
    // Kubernetes: the node NotReady, then the status and an Event name the lost broker.
    let second = second_node();
    wait_for("the lost node to be NotReady", 3 * MINUTE, || async {
        let ready = kubectl([
            "get",
            "node",
            &second,
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
        ])?;
        Ok((ready.trim() != "True").then_some(()))
    })
    .await?;
    let not_ready = lost_at.elapsed();
    let (status, reason, message) = wait_for("BrokersLost", 2 * MINUTE, || async {
        Ok(condition(&ns.name, mc, "BrokersLost")?.filter(|c| c.0 == "True"))
    })
    .await?;
    let reported = lost_at.elapsed();
    ensure!(
        status == "True" && reason == "FollowersLost" && message.contains("(rank 1)"),
        "BrokersLost: {reason}: {message}"
    );
    let obj = get_json(&ns.name, &format!("minicluster/{mc}"))?;
    ensure!(
        obj["status"]["phase"] == "Running",
        "phase: {}",
        obj["status"]["phase"]
    );
    let warned = events(&ns.name, mc, "BrokersLost")?;
    ensure!(
        warned.iter().any(|m| m.contains("(rank 1)")),
        "a BrokersLost Event naming rank 1: {warned:?}"
    );
    // The control plane evicts the pod after its toleration, and says so.
    wait_for("the eviction in BrokersLost", 2 * MINUTE, || async {
        let c = condition(&ns.name, mc, "BrokersLost")?;
        Ok(c.filter(|c| c.2.contains("out-of-service")).map(drop))
    })
    .await?;
    let evicted = lost_at.elapsed();
    // The pod of a node that does not answer never ends by itself, so its Job does not
    // replace it: at most one broker per rank. Declared out of service, as an admin does
    // for a dead node, it is deleted; the replacement starts on the surviving node and
    // rejoins.
    tokio::time::sleep(Duration::from_secs(10)).await;
    ensure!(
        pods(&ns.name, mc, "workers")?.len() == 1,
        "no replacement beside the lost pod"
    );
    kubectl(["taint", "nodes", &second, OUT_OF_SERVICE])?;
    nodes.out_of_service = true;
    ready_brokers(&ns.name, mc, 2, 3 * MINUTE).await?;
    let whole = lost_at.elapsed();
    let followers = pods(&ns.name, mc, "workers")?;
    ensure!(
        followers
            .iter()
            .any(|p| node_of(p) == node_name() && p["metadata"]["deletionTimestamp"].is_null()),
        "a replacement follower on the surviving node"
    );
    lead.wait("resource list -s up -no {ranks}", "0-1", MINUTE)
        .await?;
    ensure!(
        pods(&ns.name, mc, "workers")?.len() == 1,
        "one follower: the lost one is gone"
    );
    let c = condition(&ns.name, mc, "BrokersLost")?;
    ensure!(
        c.as_ref().is_some_and(|c| c.0 == "False"),
        "BrokersLost over once the instance is whole: {c:?}"
    );
    // The node back: nothing of the lost pod runs again on it.
    nodes.second_back()?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    ensure!(
        pods(&ns.name, mc, "workers")?.len() == 1,
        "one follower after the node came back"
    );
    lead.wait("resource list -s up -no {ranks}", "0-1", MINUTE)
        .await?;
    println!(
        "node loss, a follower's node: Flux ended its job at {:.0?}, node NotReady at {:.0?}, \
         BrokersLost at {:.0?}, evicted at {:.0?} (tolerations {TOLERATION_SECONDS} s), \
         whole again at {:.0?} (declared out of service 10 s after the eviction)",
        flux_ended, not_ready, reported, evicted, whole
    );
    drop(nodes);
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_node_back_before_its_pods_are_evicted_restarts_its_broker_in_the_same_pod_and_nothing_runs_twice()
-> Result<()> {
    let ns = two_node_namespace("node-loss-back").await?;
    let mut nodes = Nodes::default();
    let mc = "blink";
    // Tolerations long enough for the node to come back first.
    placed(&ns.name, mc, &nodes, &yaml(mc, 300), LeadOn::First).await?;
    let follower = pods(&ns.name, mc, "workers")?[0]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let lead = Lead::of(&ns.name, mc)?;
    let both = lead.submit("-N2 sleep 600")?;
    lead.wait(&format!("jobs -no {{state}} {both}"), "RUN", MINUTE)
        .await?;
    let lost_at = Instant::now();
    nodes.lose_second()?;
    wait_for("BrokersLost", 2 * MINUTE, || async {
        Ok(condition(&ns.name, mc, "BrokersLost")?.filter(|c| c.0 == "True"))
    })
    .await?;
    let reported = lost_at.elapsed();
    nodes.second_back()?;
    // The kubelet back on the same state restarts the pod's containers (their processes
    // died with the node): the same pod, the broker back on rank 1.
    ready_brokers(&ns.name, mc, 2, 3 * MINUTE).await?;
    let whole = lost_at.elapsed();
    let followers = pods(&ns.name, mc, "workers")?;
    ensure!(
        followers.len() == 1 && followers[0]["metadata"]["name"] == follower.as_str(),
        "the same follower pod, no second: {:?}",
        followers
            .iter()
            .map(|p| p["metadata"]["name"].clone())
            .collect::<Vec<_>>()
    );
    lead.wait("resource list -s up -no {ranks}", "0-1", MINUTE)
        .await?;
    let c = condition(&ns.name, mc, "BrokersLost")?;
    ensure!(
        c.as_ref().is_some_and(|c| c.0 == "False"),
        "BrokersLost over: {c:?}"
    );
    // The job on the lost rank ended once; nothing ran it again.
    let jobs = lead.jobs()?;
    ensure!(
        jobs.len() == 1 && jobs.get(&both).is_some_and(|s| s == "INACTIVE FAILED"),
        "the one job, failed once: {jobs:?}"
    );
    ensure!(pods(&ns.name, mc, "lead")?.len() == 1, "one lead");
    println!(
        "node loss, the node back before eviction: BrokersLost at {reported:.0?}, whole again \
         at {whole:.0?}"
    );
    drop(nodes);
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn the_lead_s_node_lost_the_instance_is_reported_lost_and_a_new_one_starts_once_the_node_is_out_of_service()
-> Result<()> {
    let ns = two_node_namespace("node-loss-lead").await?;
    let mut nodes = Nodes::default();
    let mc = "headless";
    placed(
        &ns.name,
        mc,
        &nodes,
        &yaml(mc, TOLERATION_SECONDS),
        LeadOn::Second,
    )
    .await?;
    let lead = Lead::of(&ns.name, mc)?;
    let both = lead.submit("-N2 sleep 600")?;
    lead.wait(&format!("jobs -no {{state}} {both}"), "RUN", MINUTE)
        .await?;
    let old_lead = lead_pod(&ns.name, mc)?;
    let lost_at = Instant::now();
    nodes.lose_second()?;
    // The status: the instance lost with its lead (Starting, not Ready), and why.
    let (_, reason, message) = wait_for("BrokersLost", 2 * MINUTE, || async {
        Ok(condition(&ns.name, mc, "BrokersLost")?.filter(|c| c.0 == "True"))
    })
    .await?;
    let reported = lost_at.elapsed();
    ensure!(
        reason == "LeadBrokerLost" && message.contains("(rank 0)"),
        "BrokersLost: {reason}: {message}"
    );
    let obj = get_json(&ns.name, &format!("minicluster/{mc}"))?;
    ensure!(
        obj["status"]["phase"] == "Starting",
        "phase: {}",
        obj["status"]["phase"]
    );
    let ready = condition(&ns.name, mc, "Ready")?;
    ensure!(
        ready.as_ref().is_some_and(|c| c.0 == "False"),
        "Ready: {ready:?}"
    );
    ensure!(
        events(&ns.name, mc, "BrokersLost")?
            .iter()
            .any(|m| m.contains("(rank 0)")),
        "a BrokersLost Event naming rank 0"
    );
    // Evicted after the toleration; the node declared out of service: a new lead on the
    // surviving node, a new instance.
    wait_for("the eviction in BrokersLost", 2 * MINUTE, || async {
        let c = condition(&ns.name, mc, "BrokersLost")?;
        Ok(c.filter(|c| c.2.contains("out-of-service")).map(drop))
    })
    .await?;
    kubectl(["taint", "nodes", &second_node(), OUT_OF_SERVICE])?;
    nodes.out_of_service = true;
    wait_phase_running(&ns.name, mc).await?;
    ready_brokers(&ns.name, mc, 2, 3 * MINUTE).await?;
    let whole = lost_at.elapsed();
    let new_lead = lead_pod(&ns.name, mc)?;
    ensure!(new_lead != old_lead, "a new lead pod");
    let leads = pods(&ns.name, mc, "lead")?;
    ensure!(
        leads.len() == 1 && node_of(&leads[0]) == node_name(),
        "one lead, on the surviving node"
    );
    let obj = get_json(&ns.name, &format!("minicluster/{mc}"))?;
    let instance = &obj["status"]["instance"];
    println!("the lost lead's instance, as the status reports it: {instance}");
    ensure!(instance["restarts"] == 1, "one restart: {instance}");
    let lead = Lead::of(&ns.name, mc)?;
    let jobs = lead.jobs()?;
    ensure!(
        jobs.is_empty(),
        "the new instance has none of the old one's jobs: {jobs:?}"
    );
    nodes.second_back()?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    ensure!(
        pods(&ns.name, mc, "lead")?.len() == 1,
        "one lead after the node came back"
    );
    println!(
        "node loss, the lead's node: BrokersLost at {reported:.0?}, a new instance whole at \
         {whole:.0?} (tolerations {TOLERATION_SECONDS} s, then out of service)"
    );
    drop(nodes);
    ns.cleanup().await;
    Ok(())
}

/// Until MiniCluster `mc` is Running again.
async fn wait_phase_running(ns: &str, mc: &str) -> Result<()> {
    wait_for("Running", 3 * MINUTE, || async {
        let obj = get_json(ns, &format!("minicluster/{mc}"))?;
        Ok((obj["status"]["phase"] == "Running").then_some(()))
    })
    .await
}

/// A fresh namespace whose pods may land on either real node, with the operator installed.
pub async fn two_node_namespace(test: &str) -> Result<TestNamespace> {
    crate::cluster::installed_operator()?;
    let ns = TestNamespace::create(test).await?;
    node_sh(&["namespace", &ns.name, "two"])?;
    Ok(ns)
}
