//! A user's monitoring stack beside the test cluster, for the real node's queue-metrics and
//! autoscaling tests and the autoscaling benchmark: Debian's Prometheus running the shipped
//! `flux-miniclusters` scrape job, and prometheus-adapter (built from its Go module by
//! `e2e/build.sh adapter`) registered as the metrics APIs the HPA controller reads.

use std::path::PathBuf;
use std::process::{Child, Command};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::cluster::{apply_yaml, bin, get_json, kubectl, kubectl_in, node_name, root};
use crate::common::{Prometheus, free_port, spawn_logged};

/// Prometheus with the shipped `flux-miniclusters` job (every second) over the pods of one
/// namespace. Debian builds its Prometheus without Kubernetes discovery, so the job reads a
/// file of targets instead (`file_sd_configs`), which [`QueueScraper::discover`] writes with
/// what Kubernetes discovery would find: [`discovered`].
pub struct QueueScraper {
    pub prometheus: Prometheus,
    targets: PathBuf,
    ns: String,
}

impl QueueScraper {
    /// Prometheus scraping the pods of `ns` as they are now.
    pub fn start(ns: &str) -> Result<Self> {
        let mut targets = PathBuf::new();
        let prometheus = Prometheus::start(|dir| {
            targets = dir.join("targets.json");
            std::fs::write(&targets, "[]")?;
            scrape_config(&targets)
        })?;
        let scraper = Self {
            prometheus,
            targets,
            ns: ns.to_string(),
        };
        scraper.discover()?;
        Ok(scraper)
    }

    /// The targets again, from the namespace's pods now (Prometheus sees the file change).
    pub fn discover(&self) -> Result<()> {
        let partial = self.targets.with_extension("partial");
        std::fs::write(&partial, Value::Array(discovered(&self.ns)?).to_string())?;
        Ok(std::fs::rename(partial, &self.targets)?)
    }
}

/// The shipped job, with its Kubernetes discovery replaced by the file `targets`.
fn scrape_config(targets: &std::path::Path) -> Result<String> {
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
    job.insert(
        "file_sd_configs".into(),
        json!([{ "files": [targets], "refresh_interval": "1s" }]),
    );
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

/// The aggregated APIs the adapter serves, by group (cluster-scoped: one test at a time
/// registers them).
pub const CUSTOM_METRICS: &str = "custom.metrics.k8s.io";
pub const RESOURCE_METRICS: &str = "metrics.k8s.io";

/// prometheus-adapter on this host, registered as the metrics APIs of `groups` for as long
/// as it lives: APIServices whose Service (in the test's namespace) has the adapter's
/// address as its one endpoint. Dropped: the APIServices go first (an unavailable
/// aggregated API would stall every namespace deletion), then the process.
pub struct Adapter {
    child: Child,
    groups: Vec<&'static str>,
    dir: tempfile::TempDir,
}

impl Adapter {
    /// The adapter with the rules `config` (its `--config` file), reading `prometheus_port`.
    pub fn start(
        ns: &str,
        prometheus_port: u16,
        config: &str,
        groups: &[&'static str],
    ) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let port = free_port()?;
        let ip = node_ip()?;
        let kubeconfig = std::env::var("KUBECONFIG")?;
        let log = std::fs::File::create(dir.path().join("adapter.log"))?;
        let rules = dir.path().join("rules.yaml");
        std::fs::write(&rules, config)?;
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
            .arg(format!("--config={}", rules.display()))
            .arg("--metrics-relist-interval=5s");
        let child = spawn_logged(&mut command, log)
            .context("starting prometheus-adapter (e2e/build.sh adapter)")?;
        let adapter = Self {
            child,
            groups: groups.to_vec(),
            dir,
        };
        apply_yaml(ns, &registration(ns, &ip, port, groups))?;
        Ok(adapter)
    }
}

impl Adapter {
    /// Its log and what the API server says of its APIServices (for a failed wait).
    pub fn debug(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("adapter.log")).unwrap_or_default();
        let log: Vec<&str> = (log.lines())
            .filter(|l| !l.contains("configmap_cafile_content"))
            .collect();
        let services = kubectl(["get", "apiservices", "-o", "wide"]).unwrap_or_default();
        format!("{services}\nadapter log:\n{}", log.join("\n"))
    }
}

impl Drop for Adapter {
    fn drop(&mut self) {
        for group in &self.groups {
            let name = format!("v1beta1.{group}");
            let _ = kubectl(["delete", "apiservice", &name, "--ignore-not-found"]);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The real node's address, where the API server reaches processes of this host.
pub fn node_ip() -> Result<String> {
    let node = get_json("default", &format!("node/{}", node_name()))?;
    let addresses = node["status"]["addresses"].clone();
    (addresses.as_array().into_iter().flatten())
        .find(|a| a["type"] == "InternalIP")
        .and_then(|a| a["address"].as_str().map(str::to_string))
        .context("the real node has no InternalIP")
}

/// The Service, its endpoint (this host) and an APIService per group, of the adapter.
fn registration(ns: &str, ip: &str, port: u16, groups: &[&str]) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: prometheus-adapter\nspec:\n  \
         ports: [{{name: https, port: 443, targetPort: {port}}}]\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  \
         name: prometheus-adapter\n  labels: {{kubernetes.io/service-name: prometheus-adapter}}\n\
         addressType: IPv4\nendpoints: [{{addresses: [\"{ip}\"]}}]\n\
         ports: [{{name: https, port: {port}, protocol: TCP}}]\n"
    );
    for group in groups {
        yaml += &format!(
            "---\napiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  \
             name: v1beta1.{group}\nspec:\n  group: {group}\n  version: v1beta1\n  \
             service: {{namespace: {ns}, name: prometheus-adapter, port: 443}}\n  \
             insecureSkipTLSVerify: true\n  groupPriorityMinimum: 100\n  versionPriority: 100\n"
        );
    }
    yaml
}

/// prometheus-adapter with the shipped rules (`manifests/autoscaling/adapter-rules.yaml`),
/// reading `scraper`'s Prometheus, as the custom metrics API.
pub fn queue_adapter(ns: &str, scraper: &QueueScraper) -> Result<Adapter> {
    let rules = std::fs::read_to_string(root().join("manifests/autoscaling/adapter-rules.yaml"))?;
    Adapter::start(ns, scraper.prometheus.port(), &rules, &[CUSTOM_METRICS])
}

/// `manifests/autoscaling/hpa.yaml` with its scale-down window (300 s) and period cut to
/// 15 s, so that a shrink is seen within a test or a benchmark round; the rest as shipped.
pub fn queue_hpa() -> Result<String> {
    let text = std::fs::read_to_string(root().join("manifests/autoscaling/hpa.yaml"))?;
    let mut hpa: Value = serde_norway::from_str(&text)?;
    let down = &mut hpa["spec"]["behavior"]["scaleDown"];
    anyhow::ensure!(down["stabilizationWindowSeconds"] == 300, "{down}");
    down["stabilizationWindowSeconds"] = 15.into();
    down["policies"][0]["periodSeconds"] = 15.into();
    Ok(serde_norway::to_string(&hpa)?)
}

/// The Events of the namespace's HPAs (`kubectl get events`): what they did, and why.
pub fn hpa_events(ns: &str) -> Result<String> {
    kubectl_in(
        ns,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=HorizontalPodAutoscaler",
        ],
    )
}
