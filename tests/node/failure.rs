//! A follower's pod deleted by hand under a running job, with a real kubelet and Job
//! controller: what a user sees in Flux and in `kubectl get minicluster`.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Result, ensure};

use crate::cluster::{Lead, apply_yaml, get_json, kubectl_in, namespace, pods, wait_phase};
use crate::common::wait_for;

const MC: &str = "lost";
const YAML: &str = r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: lost
spec:
  size: 3
  interactive: true
  containers:
    - image: ubuntu:noble
"#;

/// The follower pods of index `index` (`lost-workers-0-<index>-*`), by name.
fn followers_at(ns: &str, index: usize) -> Result<Vec<String>> {
    let prefix = format!("{MC}-workers-0-{index}-");
    Ok(pods(ns, MC, "workers")?
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect())
}

#[tokio::test]
async fn a_follower_pod_deleted_under_a_job_fails_that_job_and_its_replacement_takes_the_rank_back()
-> Result<()> {
    let ns = namespace("follower-lost").await?;
    apply_yaml(&ns.name, YAML)?;
    wait_phase(&ns.name, MC, "Running").await?;
    let lead = Lead::of(&ns.name, MC)?;
    let minute = Duration::from_secs(60);

    // A job on rank 2, the broker of the followers' index 1.
    let job = lead.flux("submit -N1 --requires=rank:2 sleep 600")?;
    lead.wait(&format!("jobs -no {{state}} {job}"), "RUN", minute)
        .await?;
    let victim = followers_at(&ns.name, 1)?;
    ensure!(victim.len() == 1, "{victim:?}");
    kubectl_in(&ns.name, &["delete", "pod", &victim[0], "--wait=false"])?;

    // The Job replaces the pod at once; the new broker takes rank 2 over, so Flux counts the
    // old one lost and the job on it fails with a node failure (no drain: see the README).
    lead.wait(&format!("jobs -no {{result}} {job}"), "FAILED", 2 * minute)
        .await?;
    let eventlog = lead.flux(&format!("job eventlog {job}"))?;
    ensure!(
        eventlog.contains(&format!("node failure on {MC}-workers-0-1 (rank 2)")),
        "{eventlog}"
    );

    // The replacement joins: every broker ready again, the phase never left Running, and a
    // job across all three ranks runs.
    wait_for("all three brokers ready again", 2 * minute, || async {
        let mc = get_json(&ns.name, &format!("minicluster/{MC}"))?;
        let back = followers_at(&ns.name, 1)?.iter().any(|p| p != &victim[0]);
        Ok((back && mc["status"]["readyBrokers"] == 3).then_some(mc))
    })
    .await?;
    let mc = get_json(&ns.name, &format!("minicluster/{MC}"))?;
    assert_eq!(mc["status"]["phase"], "Running", "{}", mc["status"]);
    // (A broker that has joined is up in the scheduler a moment later.)
    lead.wait("resource list -s up -no {nnodes}", "3", minute)
        .await?;
    let hosts = lead.flux("run -N3 -n3 hostname")?;
    let hosts: BTreeSet<&str> = hosts.lines().collect();
    assert_eq!(hosts.len(), 3, "{hosts:?}");
    ns.cleanup().await;
    Ok(())
}
