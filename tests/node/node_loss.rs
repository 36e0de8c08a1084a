//! A node lost under a running MiniCluster, on two real nodes (`E2E_REAL_NODES=2`, `make
//! test-two-nodes`): the second node's kubelet, containerd and pods killed at once and its pods'
//! addresses silenced (`e2e/node.sh lose 2`), as a power loss. What a user sees, and when: Flux's
//! view of the ranks and jobs, the MiniCluster's status and Events, the pods replaced, the node
//! back. The operator runs on the first node, which is never lost.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use serde_json::Value;

use crate::cluster::{
    Lead, apply_yaml, get_json, kubectl, kubectl_in, lead_pod, minicluster_events, node_name,
    node_sh, pods, wait_phase,
};
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

    /// The second node back, if it was lost or declared out of service (else nothing).
    fn second_back(&mut self) -> Result<()> {
        if !self.lost && !self.out_of_service {
            return Ok(());
        }
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

/// The messages of the Events about MiniCluster `mc` with REASON.
fn events(ns: &str, mc: &str, reason: &str) -> Result<Vec<String>> {
    Ok(minicluster_events(ns, mc)?
        .into_iter()
        .filter(|(r, _)| r == reason)
        .map(|(_, message)| message)
        .collect())
}

/// A MiniCluster of two placed across the nodes, a job on both ranks, then the second node
/// lost: what each test starts from.
struct Lost {
    ns: TestNamespace,
    nodes: Nodes,
    lead: Lead,
    /// The job on both ranks (`sleep 600`), running when the node was lost.
    job: String,
    /// The lead's and the follower's pods before the loss.
    lead_pod: String,
    follower: String,
    at: Instant,
}

impl Lost {
    /// MiniCluster `mc` (its pods tolerating the lost node for `toleration` seconds) with its
    /// lead on `lead_on`, in a fresh namespace for `test`; its job running; then the second
    /// node lost.
    async fn start(test: &str, mc: &str, toleration: u64, lead_on: LeadOn) -> Result<Self> {
        let ns = two_node_namespace(test).await?;
        let mut nodes = Nodes::default();
        placed(&ns.name, mc, &nodes, &yaml(mc, toleration), lead_on).await?;
        let name = |pod: &Value| {
            pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let follower = name(&pods(&ns.name, mc, "workers")?[0]);
        let lead_pod = lead_pod(&ns.name, mc)?;
        let lead = Lead::of(&ns.name, mc)?;
        // Fluxion gives each job whole nodes here: this one has both.
        let job = lead.submit("-N2 sleep 600")?;
        lead.wait(&format!("jobs -no {{state}} {job}"), "RUN", MINUTE)
            .await?;
        let at = Instant::now();
        nodes.lose_second()?;
        Ok(Self {
            ns,
            nodes,
            lead,
            job,
            lead_pod,
            follower,
            at,
        })
    }

    /// Until MiniCluster `mc` says `BrokersLost`: its reason and message.
    async fn reported(&self, mc: &str) -> Result<(String, String)> {
        let (_, reason, message) = wait_for("BrokersLost", 2 * MINUTE, || async {
            Ok(condition(&self.ns.name, mc, "BrokersLost")?.filter(|c| c.0 == "True"))
        })
        .await?;
        Ok((reason, message))
    }

    /// Until the pods' eviction shows in `BrokersLost` (its message names the out-of-service
    /// taint that lets their Jobs replace them).
    async fn evicted(&self, mc: &str) -> Result<()> {
        wait_for("the eviction in BrokersLost", 2 * MINUTE, || async {
            let c = condition(&self.ns.name, mc, "BrokersLost")?;
            Ok(c.filter(|c| c.2.contains("out-of-service")).map(drop))
        })
        .await
    }

    /// The second node back (if it is not yet), then the namespace deleted.
    async fn end(mut self) -> Result<()> {
        self.nodes.second_back()?;
        drop(self.nodes);
        self.ns.cleanup().await;
        Ok(())
    }
}

#[tokio::test]
async fn a_follower_s_node_lost_the_instance_goes_on_the_broker_is_named_and_its_job_ends()
-> Result<()> {
    let mc = "lossy";
    let mut lost = Lost::start("node-loss-follower", mc, TOLERATION_SECONDS, LeadOn::First).await?;
    let (ns, lead, job) = (lost.ns.name.clone(), &lost.lead, &lost.job);
    // Flux: the job that ran on rank 1 ended by its fatal exception ("node failure on
    // <host> (rank 1)": its shell there unreachable), rank 1 is down, and the instance goes
    // on: a new job runs on the lead's rank.
    lead.wait(&format!("jobs -no {{state}} {job}"), "INACTIVE", 2 * MINUTE)
        .await?;
    let flux_ended = lost.at.elapsed();
    let exception = lead.flux(&format!(
        "jobs -no '{{result}} {{exception.type}}: {{exception.note}}' {job}"
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
    let not_ready = lost.at.elapsed();
    let (reason, message) = lost.reported(mc).await?;
    let reported = lost.at.elapsed();
    ensure!(
        reason == "FollowersLost" && message.contains("(rank 1)"),
        "BrokersLost: {reason}: {message}"
    );
    let obj = get_json(&ns, &format!("minicluster/{mc}"))?;
    ensure!(
        obj["status"]["phase"] == "Running",
        "phase: {}",
        obj["status"]["phase"]
    );
    let warned = events(&ns, mc, "BrokersLost")?;
    ensure!(
        warned.iter().any(|m| m.contains("(rank 1)")),
        "a BrokersLost Event naming rank 1: {warned:?}"
    );
    // The control plane evicts the pod after its toleration, and says so. The pod of a node
    // that does not answer never ends by itself, so its Job does not replace it: at most one
    // broker per rank. Declared out of service, as an admin does for a dead node, it is
    // deleted; the replacement starts on the surviving node and rejoins.
    lost.evicted(mc).await?;
    let evicted = lost.at.elapsed();
    tokio::time::sleep(Duration::from_secs(10)).await;
    ensure!(
        pods(&ns, mc, "workers")?.len() == 1,
        "no replacement beside the lost pod"
    );
    kubectl(["taint", "nodes", &second, OUT_OF_SERVICE])?;
    lost.nodes.out_of_service = true;
    ready_brokers(&ns, mc, 2, 3 * MINUTE).await?;
    let whole = lost.at.elapsed();
    let followers = pods(&ns, mc, "workers")?;
    ensure!(
        followers.len() == 1
            && node_of(&followers[0]) == node_name()
            && followers[0]["metadata"]["name"] != lost.follower.as_str(),
        "one follower, a replacement on the surviving node (the lost one gone)"
    );
    let lead = &lost.lead;
    lead.wait("resource list -s up -no {ranks}", "0-1", MINUTE)
        .await?;
    let c = condition(&ns, mc, "BrokersLost")?;
    ensure!(
        c.as_ref().is_some_and(|c| c.0 == "False"),
        "BrokersLost over once the instance is whole: {c:?}"
    );
    // The node back: nothing of the lost pod runs again on it.
    lost.nodes.second_back()?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    ensure!(
        pods(&ns, mc, "workers")?.len() == 1,
        "one follower after the node came back"
    );
    lead.wait("resource list -s up -no {ranks}", "0-1", MINUTE)
        .await?;
    println!(
        "node loss, a follower's node: Flux ended its job at {flux_ended:.0?}, node NotReady at \
         {not_ready:.0?}, BrokersLost at {reported:.0?}, evicted at {evicted:.0?} (tolerations \
         {TOLERATION_SECONDS} s), whole again at {whole:.0?} (declared out of service 10 s after \
         the eviction)"
    );
    lost.end().await
}

#[tokio::test]
async fn a_node_back_before_its_pods_are_evicted_restarts_its_broker_in_the_same_pod_and_nothing_runs_twice()
-> Result<()> {
    let mc = "blink";
    // Tolerations long enough for the node to come back first.
    let mut lost = Lost::start("node-loss-back", mc, 300, LeadOn::First).await?;
    let ns = lost.ns.name.clone();
    lost.reported(mc).await?;
    let reported = lost.at.elapsed();
    lost.nodes.second_back()?;
    // The kubelet back on the same state restarts the pod's containers (their processes
    // died with the node): the same pod, the broker back on rank 1.
    ready_brokers(&ns, mc, 2, 3 * MINUTE).await?;
    let whole = lost.at.elapsed();
    let followers = pods(&ns, mc, "workers")?;
    ensure!(
        followers.len() == 1 && followers[0]["metadata"]["name"] == lost.follower.as_str(),
        "the same follower pod, no second: {:?}",
        followers
            .iter()
            .map(|p| p["metadata"]["name"].clone())
            .collect::<Vec<_>>()
    );
    lost.lead
        .wait("resource list -s up -no {ranks}", "0-1", MINUTE)
        .await?;
    let c = condition(&ns, mc, "BrokersLost")?;
    ensure!(
        c.as_ref().is_some_and(|c| c.0 == "False"),
        "BrokersLost over: {c:?}"
    );
    // The job on the lost rank ended once; nothing ran it again.
    let jobs = lost.lead.jobs()?;
    ensure!(
        jobs.len() == 1 && jobs.get(&lost.job).is_some_and(|s| s == "INACTIVE FAILED"),
        "the one job, failed once: {jobs:?}"
    );
    ensure!(pods(&ns, mc, "lead")?.len() == 1, "one lead");
    println!(
        "node loss, the node back before eviction: BrokersLost at {reported:.0?}, whole again \
         at {whole:.0?}"
    );
    lost.end().await
}

#[tokio::test]
async fn the_lead_s_node_lost_the_instance_is_reported_lost_and_a_new_one_starts_once_the_node_is_out_of_service()
-> Result<()> {
    let mc = "headless";
    let mut lost = Lost::start("node-loss-lead", mc, TOLERATION_SECONDS, LeadOn::Second).await?;
    let ns = lost.ns.name.clone();
    // The status: the instance lost with its lead (Starting, not Ready), and why.
    let (reason, message) = lost.reported(mc).await?;
    let reported = lost.at.elapsed();
    ensure!(
        reason == "LeadBrokerLost" && message.contains("(rank 0)"),
        "BrokersLost: {reason}: {message}"
    );
    let obj = get_json(&ns, &format!("minicluster/{mc}"))?;
    ensure!(
        obj["status"]["phase"] == "Starting",
        "phase: {}",
        obj["status"]["phase"]
    );
    let ready = condition(&ns, mc, "Ready")?;
    ensure!(
        ready.as_ref().is_some_and(|c| c.0 == "False"),
        "Ready: {ready:?}"
    );
    ensure!(
        events(&ns, mc, "BrokersLost")?
            .iter()
            .any(|m| m.contains("(rank 0)")),
        "a BrokersLost Event naming rank 0"
    );
    // Evicted after the toleration; the node declared out of service: a new lead on the
    // surviving node, a new instance.
    lost.evicted(mc).await?;
    kubectl(["taint", "nodes", &second_node(), OUT_OF_SERVICE])?;
    lost.nodes.out_of_service = true;
    wait_phase(&ns, mc, "Running").await?;
    ready_brokers(&ns, mc, 2, 3 * MINUTE).await?;
    let whole = lost.at.elapsed();
    let leads = pods(&ns, mc, "lead")?;
    ensure!(
        leads.len() == 1
            && node_of(&leads[0]) == node_name()
            && leads[0]["metadata"]["name"] != lost.lead_pod.as_str(),
        "one lead, a new one on the surviving node"
    );
    let obj = get_json(&ns, &format!("minicluster/{mc}"))?;
    let instance = &obj["status"]["instance"];
    println!("the lost lead's instance, as the status reports it: {instance}");
    ensure!(instance["restarts"] == 1, "one restart: {instance}");
    ensure!(
        instance["lastRestart"]["uncounted"]
            .as_str()
            .is_some_and(|u| u.contains("node was lost")),
        "the old instance's jobs said uncounted: {instance}"
    );
    let jobs = Lead::of(&ns, mc)?.jobs()?;
    ensure!(
        jobs.is_empty(),
        "the new instance has none of the old one's jobs: {jobs:?}"
    );
    lost.nodes.second_back()?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    ensure!(
        pods(&ns, mc, "lead")?.len() == 1,
        "one lead after the node came back"
    );
    println!(
        "node loss, the lead's node: BrokersLost at {reported:.0?}, a new instance whole at \
         {whole:.0?} (tolerations {TOLERATION_SECONDS} s, then out of service)"
    );
    lost.end().await
}

/// A fresh namespace whose pods may land on either real node, with the operator installed.
pub async fn two_node_namespace(test: &str) -> Result<TestNamespace> {
    crate::cluster::installed_operator()?;
    let ns = TestNamespace::create(test).await?;
    node_sh(&["namespace", &ns.name, "two"])?;
    Ok(ns)
}
