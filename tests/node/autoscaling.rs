//! A MiniCluster sized by a HorizontalPodAutoscaler on its own queue, through the standard
//! path on the real node: Debian's Prometheus scrapes the lead's queue metrics (the shipped
//! `flux-miniclusters` job), prometheus-adapter (built from its Go module) serves them as
//! `custom.metrics.k8s.io` with `manifests/autoscaling/adapter-rules.yaml`, and the control
//! plane's HPA controller scales the MiniCluster of `examples/autoscaling.yaml` through its
//! scale subresource, as `manifests/autoscaling/hpa.yaml` asks.

use std::process::{Child, Command};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::cluster::{
    Lead, apply_yaml, bin, get_json, kubectl, kubectl_in, namespace, node_name, root, wait_phase,
};
use crate::common::{Prometheus, free_port, spawn_logged, wait_for};
use crate::queue_metrics::scrape_config;

const MC: &str = "autoscaling";
/// The aggregated API the adapter serves (cluster-scoped: one test at a time uses it).
const API_SERVICE: &str = "v1beta1.custom.metrics.k8s.io";

/// prometheus-adapter on this host, registered as the custom metrics API for as long as it
/// lives: an APIService whose Service (in the test's namespace) has the adapter's address
/// as its one endpoint. Dropped: the APIService goes first (an unavailable aggregated API
/// would stall every namespace deletion), then the process.
struct Adapter {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Adapter {
    fn start(ns: &str, prometheus_port: u16) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let port = free_port()?;
        let ip = node_ip()?;
        let kubeconfig = std::env::var("KUBECONFIG")?;
        let log = std::fs::File::create(dir.path().join("adapter.log"))?;
        let mut command = Command::new(bin("prometheus-adapter"));
        command
            .arg(format!("--bind-address={ip}"))
            .arg(format!("--secure-port={port}"))
            .arg(format!("--cert-dir={}", dir.path().display()))
            .arg(format!("--lister-kubeconfig={kubeconfig}"))
            .arg(format!("--authentication-kubeconfig={kubeconfig}"))
            .arg(format!("--authorization-kubeconfig={kubeconfig}"))
            .arg(format!(
                "--prometheus-url=http://127.0.0.1:{prometheus_port}/"
            ))
            .arg(format!(
                "--config={}",
                root()
                    .join("manifests/autoscaling/adapter-rules.yaml")
                    .display()
            ))
            .arg("--metrics-relist-interval=5s");
        let child = spawn_logged(&mut command, log)
            .context("starting prometheus-adapter (e2e/build.sh adapter)")?;
        let adapter = Self { child, _dir: dir };
        apply_yaml(ns, &registration(ns, &ip, port))?;
        Ok(adapter)
    }
}

impl Drop for Adapter {
    fn drop(&mut self) {
        let _ = kubectl(["delete", "apiservice", API_SERVICE, "--ignore-not-found"]);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The real node's address, where the API server reaches processes of this host.
fn node_ip() -> Result<String> {
    let node = get_json("default", &format!("node/{}", node_name()))?;
    let addresses = node["status"]["addresses"].clone();
    (addresses.as_array().into_iter().flatten())
        .find(|a| a["type"] == "InternalIP")
        .and_then(|a| a["address"].as_str().map(str::to_string))
        .context("the real node has no InternalIP")
}

/// The Service, its endpoint (this host) and the APIService of the adapter.
fn registration(ns: &str, ip: &str, port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: prometheus-adapter\nspec:\n  \
         ports: [{{name: https, port: 443, targetPort: {port}}}]\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  \
         name: prometheus-adapter\n  labels: {{kubernetes.io/service-name: prometheus-adapter}}\n\
         addressType: IPv4\nendpoints: [{{addresses: [\"{ip}\"]}}]\n\
         ports: [{{name: https, port: {port}, protocol: TCP}}]\n---\n\
         apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {API_SERVICE}\n\
         spec:\n  group: custom.metrics.k8s.io\n  version: v1beta1\n  \
         service: {{namespace: {ns}, name: prometheus-adapter, port: 443}}\n  \
         insecureSkipTLSVerify: true\n  groupPriorityMinimum: 100\n  versionPriority: 100\n"
    )
}

/// `manifests/autoscaling/hpa.yaml` with its scale-down window and period cut to 15 s, so
/// the shrink is seen within the test (the behaviour is otherwise the shipped one).
fn hpa() -> Result<String> {
    let text = std::fs::read_to_string(root().join("manifests/autoscaling/hpa.yaml"))?;
    let mut hpa: Value = serde_norway::from_str(&text)?;
    let down = &mut hpa["spec"]["behavior"]["scaleDown"];
    ensure!(down["stabilizationWindowSeconds"] == 300, "{down}");
    down["stabilizationWindowSeconds"] = 15.into();
    down["policies"][0]["periodSeconds"] = 15.into();
    Ok(serde_norway::to_string(&hpa)?)
}

/// The MiniCluster's `spec.size`, once it is `want`.
async fn wait_size(ns: &str, want: i64) -> Result<()> {
    wait_for(
        &format!("the HPA to set {MC}'s size to {want}"),
        Duration::from_secs(180),
        || async {
            let mc = get_json(ns, &format!("minicluster/{MC}"))?;
            Ok((mc["spec"]["size"] == want).then_some(()))
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
    let config = scrape_config(&ns.name)?;
    let prometheus = Prometheus::start(|_| Ok(config))?;
    let adapter = Adapter::start(&ns.name, prometheus.port())?;
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
    apply_yaml(&ns.name, &hpa()?)?;

    // Four jobs of a whole node each on two nodes: two run, two wait, the queue wants 4.
    let lead = Lead::of(&ns.name, MC)?;
    let jobs = lead.submit("--cc=1-4 -N1 --exclusive sleep 20")?;
    let jobs: Vec<&str> = jobs.lines().collect();
    ensure!(jobs.len() == 4, "{jobs:?}");
    wait_size(&ns.name, 4).await?;
    for job in &jobs {
        lead.wait(
            &format!("jobs -no {{result}} {job}"),
            "COMPLETED",
            Duration::from_secs(180),
        )
        .await?;
    }
    // The queue is empty: back to the HPA's minimum, each job run exactly once.
    wait_size(&ns.name, 2).await?;
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
    let events = kubectl_in(
        &ns.name,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=HorizontalPodAutoscaler",
        ],
    )?;
    ensure!(
        events.contains("New size: 4") && events.contains("New size: 2"),
        "the HPA's own events name both changes:\n{events}\n{hpa}"
    );
    drop(adapter);
    ns.cleanup().await;
    Ok(())
}
