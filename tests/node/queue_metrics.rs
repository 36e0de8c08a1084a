//! The queue metrics of a MiniCluster on the real node, scraped as a user's Prometheus
//! scrapes them: Debian's Prometheus with the `flux-miniclusters` job of
//! `manifests/prometheus/prometheus.yml` (of the pods' ports, the lead pod's flux-metrics
//! kept, the MiniCluster's name as a label), over the pod network.

use std::time::Duration;

use anyhow::Result;

use crate::cluster::{Lead, apply_yaml, kubectl_in, namespace, wait_phase};
use crate::common::{Prometheus, wait_for};
use crate::monitoring::QueueScraper;

const MC: &str = "queue";
const YAML: &str = r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: queue
spec:
  size: 2
  maxSize: 3
  interactive: true
  flux:
    scheduler:
      # A job larger than the cluster waits for a grow (fcfs would refuse it).
      queuePolicy: easy
  containers:
    - image: ubuntu:noble
"#;

/// The value of `query` in Prometheus once it is `want`.
async fn wait_value(prometheus: &Prometheus, query: &str, want: f64) -> Result<()> {
    let found = wait_for(
        &format!("{query} = {want} in Prometheus"),
        Duration::from_secs(120),
        || async { Ok(prometheus.query(query).await?.filter(|v| *v == want)) },
    )
    .await;
    if found.is_err() {
        eprintln!(
            "targets: {}\nlog:\n{}",
            prometheus.targets().await,
            prometheus.log()
        );
    }
    found.map(drop)
}

#[tokio::test]
async fn prometheus_finds_the_lead_pod_and_scrapes_its_queue_through_a_grow() -> Result<()> {
    let ns = namespace("queue-metrics").await?;
    apply_yaml(&ns.name, YAML)?;
    wait_phase(&ns.name, MC, "Running").await?;
    let scraper = QueueScraper::start(&ns.name)?;
    let prometheus = &scraper.prometheus;
    let of = |metric: &str, state: &str| {
        let labels = format!("namespace=\"{}\",minicluster=\"{MC}\"", ns.name);
        match state {
            "" => format!("{metric}{{{labels}}}"),
            s => format!("{metric}{{{labels},state=\"{s}\"}}"),
        }
    };
    wait_value(prometheus, &of("flux_nodes", "up"), 2.0).await?;
    wait_value(prometheus, &of("flux_nodes", "down"), 1.0).await?;

    // A job for three nodes waits on a cluster of two: the queue wants size 3.
    let lead = Lead::of(&ns.name, MC)?;
    let job = lead.submit("-N3 true")?;
    wait_value(prometheus, &of("flux_jobs", "waiting"), 1.0).await?;
    wait_value(prometheus, &of("flux_nodes_wanted", ""), 3.0).await?;

    // Grown by hand (what an HPA on flux_nodes_wanted would do): it runs, and the queue empties.
    kubectl_in(
        &ns.name,
        &["scale", &format!("minicluster/{MC}"), "--replicas=3"],
    )?;
    lead.wait(
        &format!("jobs -no {{result}} {job}"),
        "COMPLETED",
        Duration::from_secs(180),
    )
    .await?;
    wait_value(prometheus, &of("flux_nodes", "up"), 3.0).await?;
    wait_value(prometheus, &of("flux_jobs", "waiting"), 0.0).await?;
    wait_value(prometheus, &of("flux_nodes_wanted", ""), 1.0).await?;
    ns.cleanup().await;
    Ok(())
}
