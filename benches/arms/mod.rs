//! What the real-node benchmarks share (`node.rs`, `hpc.rs`): the two operators as arms,
//! each started fresh beside the cluster for one run, the CRD each needs, and how a run
//! finds its lead pod.

use std::process::{Child, Command};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::cluster::{kubectl_in, root};
use crate::common::{GO_CRD, Operator, http_get, spawn_logged, swap_minicluster_crd, wait_for};
use flux_operator::model::certificate::Certificate;

/// How long any one step of a run may take.
pub const LIMIT: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Arm {
    Operator,
    Go,
}

impl Arm {
    pub fn title(self) -> &'static str {
        match self {
            Arm::Operator => "operator",
            Arm::Go => "Go operator",
        }
    }

    /// Where the lead broker listens, and the name prefix of MiniCluster MC's lead pod.
    pub fn socket_and_lead(self, mc: &str) -> (&'static str, String) {
        match self {
            Arm::Operator => ("/run/flux-operator/broker/local", format!("{mc}-lead-0-0-")),
            Arm::Go => ("/mnt/flux/config/run/flux/local", format!("{mc}-0-")),
        }
    }
}

/// An operator process, killed when dropped.
pub enum Running {
    /// Held for its `Drop`, which kills it.
    Ours(#[allow(dead_code)] Operator),
    Go(Child),
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Go(child) = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub struct Bench {
    pub client: kube::Client,
    pub go_dir: std::path::PathBuf,
    pub crd: Option<Arm>,
}

impl Bench {
    /// Install ARM's MiniCluster CRD, replacing the other one (no operator runs meanwhile).
    pub async fn use_crd(&mut self, arm: Arm) -> Result<()> {
        if self.crd == Some(arm) {
            return Ok(());
        }
        let file = match arm {
            Arm::Operator => root().join("crds/flux-framework.org_miniclusters.yaml"),
            Arm::Go => self.go_dir.join("src").join(GO_CRD),
        };
        swap_minicluster_crd(&self.client, &file, root(), arm == Arm::Operator).await?;
        self.crd = Some(arm);
        Ok(())
    }

    pub async fn start(&self, arm: Arm, ns: &str) -> Result<Running> {
        match arm {
            Arm::Operator => {
                let op = Operator::start(ns)?;
                wait_for("the operator ready", LIMIT, || async {
                    Ok(http_get(op.metrics_port, "/readyz").await.ok().map(drop))
                })
                .await?;
                Ok(Running::Ours(op))
            }
            Arm::Go => {
                let log = std::env::temp_dir().join(format!("go-operator-{ns}.log"));
                let out = std::fs::File::create(&log)?;
                // It watches every namespace: if this bench is killed (no Drop), a manager left
                // behind would reconcile the next run's MiniClusters beside the operator under
                // test (it happened: a second Job of every size). `setpriv --pdeathsig` makes
                // the kernel kill it with the bench.
                let mut manager = Command::new("setpriv");
                manager
                    .args(["--pdeathsig", "KILL", "--"])
                    .arg(self.go_dir.join("bin/manager"))
                    .args(["--metrics-bind-address=0", "--health-probe-bind-address=0"])
                    .arg("-zap-devel=false");
                let child = spawn_logged(&mut manager, out).context("starting the Go operator")?;
                let running = Running::Go(child);
                // controller-runtime starts its workers once its caches have synced.
                wait_for("the Go operator's workers", LIMIT, || async {
                    let text = std::fs::read_to_string(&log)?;
                    Ok(text.contains("Starting workers").then_some(()))
                })
                .await?;
                Ok(running)
            }
        }
    }
}

/// Adds `flux.curveCert` to a MiniCluster's `flux:` section (the last in YAML): the Go
/// operator's build here has no CURVE generator (CGO off).
pub fn push_go_certificate(yaml: &mut String, name: &str) -> Result<()> {
    let cert = Certificate::generate(name)?.to_text();
    yaml.push_str("    curveCert: |\n");
    for line in cert.lines() {
        yaml.push_str(&format!("      {line}\n"));
    }
    Ok(())
}

pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub fn pods(ns: &str) -> Result<Vec<Value>> {
    let list: Value = serde_json::from_str(&kubectl_in(ns, &["get", "pods", "-o", "json"])?)?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// Seconds from deleting MiniCluster `mc` of namespace `ns` until every pod of the namespace
/// is gone (the teardown figure).
pub async fn delete_and_time(ns: &str, mc: &str) -> Result<f64> {
    let t1 = std::time::Instant::now();
    kubectl_in(ns, &["delete", "minicluster", mc, "--wait=false"])?;
    wait_for("every pod gone", LIMIT, || async {
        Ok(pods(ns)?.is_empty().then_some(()))
    })
    .await?;
    Ok(t1.elapsed().as_secs_f64())
}

/// The lead pod, once its main container runs.
pub async fn running_lead(ns: &str, prefix: &str, container: &str) -> Result<String> {
    wait_for("the lead container running", LIMIT, || async {
        Ok(pods(ns)?.into_iter().find_map(|p| {
            let name = p["metadata"]["name"].as_str()?;
            let running = p["status"]["containerStatuses"]
                .as_array()?
                .iter()
                .any(|c| c["name"] == container && c["state"]["running"].is_object());
            (name.starts_with(prefix) && running).then(|| name.to_string())
        }))
    })
    .await
}

/// min / median / max of V, two decimals ("-" when empty).
pub fn stats(v: &[f64]) -> String {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match (s.first(), s.last()) {
        (Some(min), Some(max)) => format!("{min:.2} / {:.2} / {max:.2}", s[s.len() / 2]),
        _ => "-".into(),
    }
}

/// The machine's load average line, as the tables print it.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}
