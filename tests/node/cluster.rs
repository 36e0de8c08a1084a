//! What the real-node tests share: `kubectl` and `helm` as a user runs them, the operator
//! installed once by its chart, and namespaces whose pods land on the real node.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::core::ApiResource;
use serde_json::Value;

use crate::common::{TestNamespace, sum_samples, wait_for};

/// Where the operator is installed (the chart's documented `helm install` namespace).
pub const OPERATOR_NAMESPACE: &str = "flux-operator";
/// The ServiceAccount the tests read `/metrics` as (the chart's `metrics.readers`).
const METRICS_READER: &str = "metrics-reader";
/// How long a MiniCluster of real brokers may take to reach a phase on this machine.
pub const PHASE_TIMEOUT: Duration = Duration::from_secs(240);

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The harness's cache (`~/.cache/flux-operator-rs`, as the Makefile sets it).
fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache"))
        .join("flux-operator-rs")
}

/// The test cluster's state directory (`E2E_STATE`).
pub fn state_dir() -> PathBuf {
    std::env::var_os("E2E_STATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("cluster"))
}

pub fn bin(name: &str) -> PathBuf {
    std::env::var_os("E2E_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("bin"))
        .join(name)
}

fn run(mut cmd: Command) -> Result<String> {
    let what = format!("{cmd:?}");
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().with_context(|| format!("running {what}"))?;
    ensure!(
        status.success(),
        "{what} failed ({status}): {}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    Ok(String::from_utf8(stdout)?)
}

/// `kubectl ARGS...` against the test cluster; its standard output.
pub fn kubectl<I, S>(args: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = Command::new(bin("kubectl"));
    cmd.args(args);
    run(cmd)
}

/// `kubectl -n NS ...`.
pub fn kubectl_in(ns: &str, args: &[&str]) -> Result<String> {
    kubectl(["-n", ns].iter().chain(args))
}

/// `kubectl get -o json` of one object.
pub fn get_json(ns: &str, what: &str) -> Result<Value> {
    Ok(serde_json::from_str(&kubectl_in(
        ns,
        &["get", what, "-o", "json"],
    )?)?)
}

/// The operator, installed once for the whole tier as a user installs it: `helm install`
/// of `charts/flux-operator` with the image built by `e2e/images.sh`, then `kubectl rollout
/// status`, which returns once the kubelet's readiness probe has passed.
pub fn installed_operator() -> Result<()> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| install().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn install() -> Result<()> {
    if kubectl(["get", "namespace", OPERATOR_NAMESPACE]).is_err() {
        kubectl(["create", "namespace", OPERATOR_NAMESPACE])?;
    }
    on_real_node(OPERATOR_NAMESPACE)?;
    if kubectl_in(
        OPERATOR_NAMESPACE,
        &["get", "serviceaccount", METRICS_READER],
    )
    .is_err()
    {
        kubectl_in(
            OPERATOR_NAMESPACE,
            &["create", "serviceaccount", METRICS_READER],
        )?;
    }
    let mut helm = Command::new(bin("helm"));
    helm.args(["upgrade", "--install", "flux-operator"])
        .arg(root().join("charts/flux-operator"))
        .args([
            "--namespace",
            OPERATOR_NAMESPACE,
            "--set",
            "image.pullPolicy=IfNotPresent",
            "--set",
            &format!("metrics.readers[0].name={METRICS_READER}"),
            "--set",
            &format!("metrics.readers[0].namespace={OPERATOR_NAMESPACE}"),
        ]);
    run(helm)?;
    kubectl_in(
        OPERATOR_NAMESPACE,
        &[
            "rollout",
            "status",
            "deployment/flux-operator",
            "--timeout=180s",
        ],
    )?;
    Ok(())
}

/// The real node's name (`E2E_NODE_NAME`, as `e2e/node.sh` names it).
pub fn node_name() -> String {
    std::env::var("E2E_NODE_NAME").unwrap_or_else(|_| "e2e-real-node".into())
}

/// `e2e/node.sh ARGS`: the real nodes' harness (`namespace`, `lose`, `back`).
pub fn node_sh(args: &[&str]) -> Result<()> {
    let mut cmd = Command::new(root().join("e2e/node.sh"));
    cmd.args(args);
    run(cmd).map(drop)
}

/// Pods of NS select the real node and tolerate its taint (`e2e/node.sh namespace`).
pub fn on_real_node(ns: &str) -> Result<()> {
    node_sh(&["namespace", ns])
}

/// The Events about MiniCluster `mc`: their reasons and messages.
pub fn minicluster_events(ns: &str, mc: &str) -> Result<Vec<(String, String)>> {
    let selector = format!("involvedObject.kind=MiniCluster,involvedObject.name={mc}");
    let list: Value = serde_json::from_str(&kubectl_in(
        ns,
        &["get", "events", "--field-selector", &selector, "-o", "json"],
    )?)?;
    let text = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_string();
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (text(e, "reason"), text(e, "message")))
        .collect())
}

/// A fresh test namespace whose pods run on the real node, with the operator installed.
pub async fn namespace(test: &str) -> Result<TestNamespace> {
    installed_operator()?;
    let ns = TestNamespace::create(test).await?;
    on_real_node(&ns.name)?;
    Ok(ns)
}

/// `kubectl apply -f FILE` into NS.
pub fn apply(ns: &str, file: &Path) -> Result<()> {
    kubectl_in(ns, &["apply", "-f", &file.to_string_lossy()]).map(drop)
}

/// `kubectl apply -f` of a manifest given as text, into NS.
pub fn apply_yaml(ns: &str, yaml: &str) -> Result<()> {
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), yaml)?;
    apply(ns, file.path())
}

/// An example of this repository, `examples/<name>.yaml`.
pub fn example(name: &str) -> PathBuf {
    root().join(format!("examples/{name}.yaml"))
}

/// Wait until the MiniCluster reports PHASE (`kubectl get minicluster`); fail early if it
/// reports Failed instead, with its status.
pub async fn wait_phase(ns: &str, mc: &str, phase: &str) -> Result<Value> {
    wait_for(
        &format!("MiniCluster {ns}/{mc} to be {phase}"),
        PHASE_TIMEOUT,
        || async {
            let obj = get_json(ns, &format!("minicluster/{mc}"))?;
            let now = obj["status"]["phase"].as_str().unwrap_or_default();
            if now == "Failed" && phase != "Failed" {
                bail!("it failed: {}", obj["status"]);
            }
            Ok((now == phase).then_some(obj))
        },
    )
    .await
}

/// The pods of a MiniCluster with ROLE (`lead` or `workers`), by the operator's labels.
pub fn pods(ns: &str, mc: &str, role: &str) -> Result<Vec<Value>> {
    let selector = format!("flux-framework.org/minicluster={mc},flux-framework.org/role={role}");
    let list: Value = serde_json::from_str(&kubectl_in(
        ns,
        &["get", "pods", "-l", &selector, "-o", "json"],
    )?)?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// The lead broker's pod name (the label selector the README documents).
pub fn lead_pod(ns: &str, mc: &str) -> Result<String> {
    let leads = pods(ns, mc, "lead")?;
    ensure!(
        leads.len() == 1,
        "expected one lead pod, found {}",
        leads.len()
    );
    Ok(leads[0]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

/// Shell that puts Flux on PATH in a broker container, as the README tells users: this
/// operator's `flux-view.sh` from its ConfigMap (there whether the view is copied or an image
/// volume), else the copied view's `bin` (the Go operator's pods).
pub const FLUX_ON_PATH: &str = "view=/etc/flux-operator/config/flux-view.sh; \
    if [ -r \"$view\" ]; then . \"$view\"; else PATH=$PATH:/mnt/flux/view/bin; fi";

/// `kubectl exec POD -c CONTAINER -- CMD...` with Flux's commands on PATH ([`FLUX_ON_PATH`]),
/// talking to the local broker.
pub fn flux_exec(ns: &str, pod: &str, container: &str, flux_args: &str) -> Result<String> {
    let script = format!(
        "{FLUX_ON_PATH}; export FLUX_URI=local:///run/flux-operator/broker/local; {flux_args}"
    );
    kubectl_in(
        ns,
        &["exec", pod, "-c", container, "--", "bash", "-c", &script],
    )
}

/// The lead broker of MiniCluster `mc`, asked with Flux's commands through `kubectl exec`.
pub struct Lead {
    ns: String,
    pod: String,
    mc: String,
}

impl Lead {
    /// The lead pod of `mc` in `ns` (by its labels).
    pub fn of(ns: &str, mc: &str) -> Result<Self> {
        Ok(Self {
            ns: ns.to_string(),
            pod: lead_pod(ns, mc)?,
            mc: mc.to_string(),
        })
    }

    /// `flux ARGS` in the Flux container (named after the MiniCluster); its output, trimmed.
    pub fn flux(&self, args: &str) -> Result<String> {
        Ok(
            flux_exec(&self.ns, &self.pod, &self.mc, &format!("flux {args}"))?
                .trim()
                .to_string(),
        )
    }

    /// `flux submit ARGS`: the new job ids, one per line, spelled as `{id.f58plain}` spells
    /// them (ASCII `f`; `kubectl exec` may print Flux's `ƒ`).
    pub fn submit(&self, args: &str) -> Result<String> {
        Ok(self.flux(&format!("submit {args}"))?.replace('ƒ', "f"))
    }

    /// Three jobs, one in each state a restart treats apart: one completed (waited for),
    /// one running (`sleep 600`, waited for) and one held (pending). Their ids, in that
    /// order.
    pub async fn completed_running_held(&self) -> Result<(String, String, String)> {
        let minute = Duration::from_secs(60);
        let done = self.submit("true")?;
        self.wait(&format!("jobs -no {{result}} {done}"), "COMPLETED", minute)
            .await?;
        let running = self.submit("sleep 600")?;
        let held = self.submit("--urgency=hold true")?;
        self.wait(&format!("jobs -no {{state}} {running}"), "RUN", minute)
            .await?;
        Ok((done, running, held))
    }

    /// Every job of the instance: id (ASCII `f`) -> `state result`.
    pub fn jobs(&self) -> Result<std::collections::BTreeMap<String, String>> {
        Ok(self
            .flux("jobs -a -no '{id.f58plain} {state} {result}'")?
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(id, rest)| (id.to_string(), rest.trim().to_string()))
            .collect())
    }

    /// Until `flux ARGS` prints WANT.
    pub async fn wait(&self, args: &str, want: &str, timeout: Duration) -> Result<()> {
        wait_for(&format!("flux {args} to say {want}"), timeout, || async {
            Ok((self.flux(args)? == want).then_some(()))
        })
        .await
    }
}

/// The installed operator's pods (`kubectl get pods -l app.kubernetes.io/name=flux-operator`).
pub fn operator_pods() -> Result<Vec<Value>> {
    let list: Value = serde_json::from_str(&kubectl_in(
        OPERATOR_NAMESPACE,
        &[
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/name=flux-operator",
            "-o",
            "json",
        ],
    )?)?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// The installed operator's `/metrics`, read as a scraper does: over HTTPS with the token of
/// an account the chart lets read it (the API server's proxy cannot carry a token).
pub fn operator_metrics() -> Result<String> {
    pod_metrics("service/flux-operator-metrics")
}

/// `/metrics` of TARGET (`pod/<name>` or `service/<name>` in the operator's namespace), through
/// `kubectl port-forward` and `curl` with the reader's token (given on standard input, never
/// on a command line).
pub fn pod_metrics(target: &str) -> Result<String> {
    use std::io::{BufRead, Write};
    let token = kubectl_in(OPERATOR_NAMESPACE, &["create", "token", METRICS_READER])?;
    let mut forward = Command::new(bin("kubectl"))
        .args(["-n", OPERATOR_NAMESPACE, "port-forward", target, ":metrics"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("kubectl port-forward")?;
    let result = (|| {
        // Kept open until the request is done: kubectl writes a line per connection, and
        // a closed pipe would end it mid-request.
        let mut output =
            std::io::BufReader::new(forward.stdout.take().context("port-forward output")?);
        let mut line = String::new();
        output.read_line(&mut line)?;
        // "Forwarding from 127.0.0.1:PORT -> 8080"
        let port = line
            .split_whitespace()
            .nth(2)
            .and_then(|a| a.rsplit(':').next())
            .with_context(|| format!("port-forward said {line:?}"))?
            .to_string();
        let mut curl = Command::new("curl")
            .args(["-sSfk", "--max-time", "10", "-H", "@-"])
            .arg(format!("https://127.0.0.1:{port}/metrics"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .context("curl")?;
        curl.stdin
            .take()
            .context("curl stdin")?
            .write_all(format!("Authorization: Bearer {}\n", token.trim()).as_bytes())?;
        let out = curl.wait_with_output()?;
        ensure!(
            out.status.success(),
            "curl /metrics of {target}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        drop(output);
        Ok(String::from_utf8(out.stdout)?)
    })();
    let _ = forward.kill();
    let _ = forward.wait();
    result
}

/// The count and sum of `flux_operator_minicluster_<NAME>_seconds` for NAMESPACE (0 if none).
pub fn observed(metrics: &str, name: &str, namespace: &str) -> (f64, f64) {
    let value = |part: &str| {
        let metric = format!("flux_operator_minicluster_{name}_seconds_{part}");
        sum_samples(metrics, &metric, &[("namespace", namespace)]).unwrap_or(0.0)
    };
    (value("count"), value("sum"))
}

/// A PersistentVolumeClaim CLAIM in the test namespace, bound to a hostPath volume of the real
/// node in a fresh directory under the cluster's state directory (removed by `make down`);
/// the volume goes with the namespace. The directory, as the test process sees it.
pub fn claim_on_the_node(ns: &mut TestNamespace, claim: &str) -> Result<PathBuf> {
    let pv = ns.unique_name(claim);
    let dir = state_dir().join("volumes").join(&pv);
    let yaml = format!(
        r#"
apiVersion: v1
kind: PersistentVolume
metadata:
  name: {pv}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef: {{namespace: {ns}, name: {claim}}}
  hostPath: {{path: {dir}, type: DirectoryOrCreate}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {claim}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: {pv}
  resources: {{requests: {{storage: 1Gi}}}}
"#,
        ns = ns.name,
        dir = dir.display(),
    );
    apply_yaml(&ns.name, &yaml)?;
    ns.track_cluster_object(&ApiResource::erase::<PersistentVolume>(&()), &pv);
    Ok(dir)
}
