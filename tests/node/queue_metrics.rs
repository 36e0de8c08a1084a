//! The queue metrics of a MiniCluster on the real node, scraped as a user's Prometheus
//! scrapes them: Debian's Prometheus with the `flux-miniclusters` job of
//! `manifests/prometheus/prometheus.yml` (of the pods' ports, the lead pod's flux-metrics
//! kept, the MiniCluster's name as a label), over the pod network.

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::cluster::{Lead, apply_yaml, kubectl_in, namespace, wait_phase};
use crate::common::{Prometheus, wait_for};

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

/// The shipped `flux-miniclusters` scrape job, every second, over what Kubernetes discovery
/// finds in `ns`. Debian builds its Prometheus without Kubernetes discovery, so the test
/// gives the job the targets that discovery would: [`discovered`].
pub fn scrape_config(ns: &str) -> Result<String> {
    let path = format!(
        "{}/manifests/prometheus/prometheus.yml",
        env!("CARGO_MANIFEST_DIR")
    );
    let shipped: Value = serde_norway::from_str(&std::fs::read_to_string(&path)?)?;
    let mut job = (shipped["scrape_configs"].as_array().into_iter().flatten())
        .find(|j| j["job_name"] == "flux-miniclusters")
        .cloned()
        .context("no job flux-miniclusters in manifests/prometheus/prometheus.yml")?;
    assert_eq!(job["kubernetes_sd_configs"], json!([{ "role": "pod" }]));
    let job = job.as_object_mut().context("a scrape job is a map")?;
    job.remove("kubernetes_sd_configs");
    job.insert("scrape_interval".into(), json!("1s"));
    job.insert("static_configs".into(), Value::Array(discovered(ns)?));
    Ok(serde_norway::to_string(
        &json!({ "scrape_configs": [job] }),
    )?)
}

/// The targets of Prometheus' Kubernetes discovery (role `pod`) for the pods of `ns`: one
/// per declared container port, one per container without ports, each with the
/// `__meta_kubernetes_*` labels the job's relabelling reads.
fn discovered(ns: &str) -> Result<Vec<Value>> {
    let pods: Value = serde_json::from_str(&kubectl_in(ns, &["get", "pods", "-o", "json"])?)?;
    let mut targets = Vec::new();
    for pod in pods["items"].as_array().into_iter().flatten() {
        let ip = pod["status"]["podIP"].as_str().unwrap_or_default();
        let mut labels = json!({
            "__meta_kubernetes_namespace": ns,
            "__meta_kubernetes_pod_name": pod["metadata"]["name"],
            "__meta_kubernetes_pod_phase": pod["status"]["phase"],
        });
        for (key, value) in pod["metadata"]["labels"].as_object().into_iter().flatten() {
            let key: String = (key.chars())
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            labels[format!("__meta_kubernetes_pod_label_{key}")] = value.clone();
        }
        for container in pod["spec"]["containers"].as_array().into_iter().flatten() {
            let ports = container["ports"].as_array().cloned().unwrap_or_default();
            if ports.is_empty() {
                targets.push(json!({ "targets": [ip], "labels": labels }));
            }
            for port in ports {
                let mut labels = labels.clone();
                labels["__meta_kubernetes_pod_container_port_name"] =
                    json!(port["name"].as_str().unwrap_or_default());
                let address = format!("{ip}:{}", port["containerPort"]);
                targets.push(json!({ "targets": [address], "labels": labels }));
            }
        }
    }
    Ok(targets)
}

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
    let config = scrape_config(&ns.name)?;
    let prometheus = Prometheus::start(|_| Ok(config))?;
    let of = |metric: &str, state: &str| {
        let labels = format!("namespace=\"{}\",minicluster=\"{MC}\"", ns.name);
        match state {
            "" => format!("{metric}{{{labels}}}"),
            s => format!("{metric}{{{labels},state=\"{s}\"}}"),
        }
    };
    wait_value(&prometheus, &of("flux_nodes", "up"), 2.0).await?;
    wait_value(&prometheus, &of("flux_nodes", "down"), 1.0).await?;

    // A job for three nodes waits on a cluster of two: the queue wants size 3.
    let lead = Lead::of(&ns.name, MC)?;
    let job = lead.submit("-N3 true")?;
    wait_value(&prometheus, &of("flux_jobs", "waiting"), 1.0).await?;
    wait_value(&prometheus, &of("flux_nodes_wanted", ""), 3.0).await?;

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
    wait_value(&prometheus, &of("flux_nodes", "up"), 3.0).await?;
    wait_value(&prometheus, &of("flux_jobs", "waiting"), 0.0).await?;
    wait_value(&prometheus, &of("flux_nodes_wanted", ""), 1.0).await?;
    ns.cleanup().await;
    Ok(())
}
