//! A MiniCluster sized by a HorizontalPodAutoscaler on its own queue, through the standard
//! path on the real node: Debian's Prometheus scrapes the lead's queue metrics (the shipped
//! `flux-miniclusters` job), prometheus-adapter (built from its Go module) serves them as
//! `custom.metrics.k8s.io` with `manifests/autoscaling/adapter-rules.yaml`, and the control
//! plane's HPA controller scales the MiniCluster of `examples/autoscaling.yaml` through its
//! scale subresource, as `manifests/autoscaling/hpa.yaml` asks.

use std::time::Duration;

use anyhow::{Result, ensure};

use crate::cluster::{
    Lead, apply_yaml, get_json, kubectl, kubectl_in, namespace, node_name, root, state_dir,
    wait_phase,
};
use crate::common::{Prometheus, unpack_go_operator, wait_for};
use crate::monitoring::{
    Adapter, QueueScraper, RESOURCE_METRICS, hpa_events, node_ip, queue_adapter, queue_hpa,
};

const MC: &str = "autoscaling";

/// MiniCluster `mc`'s `spec.size`, once the HPA has set it to `want`.
async fn wait_size(ns: &str, mc: &str, want: i64) -> Result<()> {
    wait_for(
        &format!("the HPA to set {mc}'s size to {want}"),
        Duration::from_secs(180),
        || async {
            let obj = get_json(ns, &format!("minicluster/{mc}"))?;
            Ok((obj["spec"]["size"] == want).then_some(()))
        },
    )
    .await
}

#[tokio::test]
async fn an_hpa_on_the_queue_grows_for_waiting_jobs_and_shrinks_back_without_losing_one()
-> Result<()> {
    let ns = namespace("autoscaling").await?;
    let example = std::fs::read_to_string(root().join("examples/autoscaling.yaml"))?;
    apply_yaml(&ns.name, &example)?;
    wait_phase(&ns.name, MC, "Running").await?;
    let scraper = QueueScraper::start(&ns.name)?;
    let adapter = queue_adapter(&ns.name, &scraper)?;
    let path = format!(
        "/apis/custom.metrics.k8s.io/v1beta1/namespaces/{}/miniclusters.flux-framework.org/{MC}/flux_nodes_wanted",
        ns.name
    );
    wait_for(
        "the custom metrics API to serve flux_nodes_wanted",
        Duration::from_secs(120),
        || async { Ok(kubectl(["get", "--raw", &path]).ok()) },
    )
    .await?;
    apply_yaml(&ns.name, &queue_hpa()?)?;

    // Four jobs of a whole node each on two nodes: two run, two wait, the queue wants 4.
    // Each holds its node until the test releases them all (a KVS key), however long the
    // HPA takes to look: jobs that waited less than its period would run on the nodes the
    // first two free, and rightly grow nothing.
    let lead = Lead::of(&ns.name, MC)?;
    let jobs = lead.submit(
        "--cc=1-4 -N1 --exclusive bash -c 'FLUX_KVS_NAMESPACE=primary flux kvs get --waitcreate e2e.release >/dev/null'",
    )?;
    let jobs: Vec<&str> = jobs.lines().collect();
    ensure!(jobs.len() == 4, "{jobs:?}");
    wait_size(&ns.name, MC, 4).await?;
    for job in &jobs {
        lead.wait(
            &format!("jobs -no {{state}} {job}"),
            "RUN",
            Duration::from_secs(180),
        )
        .await?;
    }
    lead.flux("kvs put e2e.release=1")?;
    for job in &jobs {
        lead.wait(
            &format!("jobs -no {{result}} {job}"),
            "COMPLETED",
            Duration::from_secs(180),
        )
        .await?;
    }
    // The queue is empty: back to the HPA's minimum, each job run exactly once.
    wait_size(&ns.name, MC, 2).await?;
    lead.wait(
        "resource list -s up -no {nnodes}",
        "2",
        Duration::from_secs(120),
    )
    .await?;
    let all = lead.jobs()?;
    ensure!(
        all.len() == 4 && all.values().all(|v| v == "INACTIVE COMPLETED"),
        "every job once, completed: {all:?}"
    );
    let hpa = get_json(&ns.name, "hpa/autoscaling")?;
    let events = hpa_events(&ns.name)?;
    ensure!(
        events.contains("New size: 4") && events.contains("New size: 2"),
        "the HPA's own events name both changes:\n{events}\n{hpa}"
    );
    drop(adapter);
    ns.cleanup().await;
    Ok(())
}

/// prometheus-adapter's resource rules over the kubelet's `/metrics/resource` (what
/// metrics-server reads): the resource metrics API of the test cluster, which has no
/// metrics-server. Test infrastructure, not shipped: clusters have their own.
const RESOURCE_RULES: &str = r#"
resourceRules:
  cpu:
    containerQuery: 'sum by (<<.GroupBy>>) (rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!=""}[1m]))'
    nodeQuery: 'sum by (<<.GroupBy>>) (rate(node_cpu_usage_seconds_total{<<.LabelMatchers>>}[1m]))'
    resources:
      overrides:
        node: {resource: node}
        namespace: {resource: namespace}
        pod: {resource: pod}
    containerLabel: container
  memory:
    containerQuery: 'sum by (<<.GroupBy>>) (container_memory_working_set_bytes{<<.LabelMatchers>>,container!=""})'
    nodeQuery: 'sum by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})'
    resources:
      overrides:
        node: {resource: node}
        namespace: {resource: namespace}
        pod: {resource: pod}
    containerLabel: container
  window: 1m
"#;

/// Prometheus scraping the real node's kubelet (`/metrics/resource`) every second with the
/// cluster's admin certificate, as the API server reaches the kubelet.
fn kubelet_scrape_config() -> Result<String> {
    let node = get_json("default", &format!("node/{}", node_name()))?;
    let port = &node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"];
    let cluster = std::env::var("E2E_CLUSTER").unwrap_or_else(|_| "flux-operator-e2e".into());
    let pki = state_dir().join(format!("kwok/clusters/{cluster}/pki"));
    Ok(format!(
        "scrape_configs:\n  - job_name: kubelet\n    scrape_interval: 1s\n    scheme: https\n    \
         metrics_path: /metrics/resource\n    tls_config:\n      cert_file: {crt}\n      \
         key_file: {key}\n      insecure_skip_verify: true\n    static_configs:\n      \
         - targets: ['{ip}:{port}']\n        labels: {{node: {name}}}\n",
        crt = pki.join("admin.crt").display(),
        key = pki.join("admin.key").display(),
        ip = node_ip()?,
        name = node_name(),
    ))
}

/// The Go operator's `examples/elasticity/horizontal-autoscaler/v2-cpu`: its HPA unchanged;
/// its MiniCluster with two changes this node needs: the image this machine has
/// (`ubuntu:noble` for `rockylinux:9`) and 400m CPU per broker for 1 (4 brokers of 1 CPU do
/// not fit on 2 cores).
#[tokio::test]
async fn the_go_operators_cpu_hpa_example_grows_a_busy_minicluster_through_the_scale_subresource()
-> Result<()> {
    let tmp = tempfile::tempdir()?;
    let pattern = "*/examples/elasticity/horizontal-autoscaler/v2-cpu/*";
    let dir = unpack_go_operator(tmp.path(), &[pattern])?
        .join("examples/elasticity/horizontal-autoscaler/v2-cpu");
    let mc = std::fs::read_to_string(dir.join("minicluster.yaml"))?;
    let mc = mc
        .replace("image: rockylinux:9", "image: ubuntu:noble")
        .replace("cpu: \"1\"", "cpu: 400m");
    ensure!(mc.matches("cpu: 400m").count() == 2, "{mc}");
    let ns = namespace("autoscaling-cpu").await?;
    apply_yaml(&ns.name, &mc)?;
    wait_phase(&ns.name, "flux-sample", "Running").await?;
    let config = kubelet_scrape_config()?;
    let prometheus = Prometheus::start(|_| Ok(config))?;
    let rules = RESOURCE_RULES;
    let adapter = Adapter::start(&ns.name, prometheus.port(), rules, &[RESOURCE_METRICS])?;
    let served = wait_for(
        "the resource metrics API to serve the brokers' CPU",
        Duration::from_secs(120),
        || async {
            let pods = kubectl_in(&ns.name, &["top", "pods", "--no-headers"])?;
            Ok(Some(pods).filter(|p| p.lines().count() == 2))
        },
    )
    .await;
    if served.is_err() {
        eprintln!(
            "{}\ntargets: {}",
            adapter.debug(),
            prometheus.targets().await
        );
    }
    served?;
    crate::cluster::apply(&ns.name, &dir.join("hpa-cpu.yaml"))?;

    // Both brokers busy: far above the example's 2 % of the request, so the HPA grows the
    // cluster to its maxReplicas, 4.
    let lead = Lead::of(&ns.name, "flux-sample")?;
    lead.submit(
        "-N2 --exclusive bash -c 'end=$((SECONDS+300)); while [ $SECONDS -lt $end ]; do :; done'",
    )?;
    wait_size(&ns.name, "flux-sample", 4).await?;
    lead.wait(
        "resource list -s up -no {nnodes}",
        "4",
        Duration::from_secs(180),
    )
    .await?;
    let events = hpa_events(&ns.name)?;
    ensure!(
        events.contains("New size: 4") && events.contains("cpu resource utilization"),
        "the HPA grew it for its CPU:\n{events}"
    );
    kubectl_in(&ns.name, &["delete", "hpa", "--all"])?;
    drop(adapter);
    ns.cleanup().await;
    Ok(())
}
