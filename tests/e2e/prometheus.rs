//! Debian's Prometheus scrapes the operator on loopback, loads the recording rules from
//! `manifests/prometheus/rules.yml`, and its HTTP API returns the cluster-up histogram after
//! a MiniCluster became Ready.

use std::process::{Child, Command};
use std::time::Duration;

use anyhow::{Context, Result};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::Value;

use flux_operator::api::{MiniCluster, Phase};

use crate::common::{Operator, TestNamespace, free_port, http_get, spawn_logged, wait_for};
use crate::operator::{hello, install_crd, wait_phase};

struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target_port: u16) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let port = free_port()?;
        let rules = format!(
            "{}/manifests/prometheus/rules.yml",
            env!("CARGO_MANIFEST_DIR")
        );
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {rules}\n\
             scrape_configs:\n  - job_name: flux-operator\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config)?;
        let log = std::fs::File::create(dir.path().join("prometheus.log"))?;
        let mut command = Command::new("prometheus");
        command
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"));
        let child = spawn_logged(&mut command, log)
            .context("starting prometheus (Debian package `prometheus`)")?;
        Ok(Self {
            child,
            port,
            _dir: dir,
        })
    }

    /// The value of an instant query's single sample, if there is one.
    async fn query(&self, promql: &str) -> Result<Option<f64>> {
        let encoded: String = promql
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let body = http_get(self.port, &format!("/api/v1/query?query={encoded}")).await?;
        let json: Value = serde_json::from_str(&body)?;
        let result = &json["data"]["result"];
        Ok(result
            .get(0)
            .and_then(|sample| sample["value"][1].as_str())
            .and_then(|v| v.parse().ok()))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn prometheus_scrapes_the_cluster_up_histogram() -> Result<()> {
    let ns = TestNamespace::create("prometheus").await?;
    install_crd(&ns.client).await?;
    let operator = Operator::start(&ns.name)?;
    let prometheus = Prometheus::start(operator.metrics_port)?;

    let mcs: Api<MiniCluster> = ns.api();
    let mc = hello(&ns.name, 3)?;
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;

    let selector = format!("{{namespace=\"{}\"}}", ns.name);
    let count = wait_for(
        "cluster-up count in Prometheus",
        Duration::from_secs(60),
        || async {
            prometheus
                .query(&format!(
                    "flux_operator_minicluster_up_seconds_count{selector}"
                ))
                .await
        },
    )
    .await?;
    assert_eq!(count, 1.0);
    let sum = prometheus
        .query(&format!(
            "flux_operator_minicluster_up_seconds_sum{selector}"
        ))
        .await?
        .context("cluster-up sum")?;
    assert!(
        (0.0..120.0).contains(&sum),
        "cluster-up took {sum}s (API timestamps have one-second resolution, so 0 is possible)"
    );
    // The recording rule from manifests/prometheus/rules.yml is evaluated too.
    let mean = wait_for(
        "recorded mean cluster-up time",
        Duration::from_secs(60),
        || async {
            prometheus
                .query(&format!(
                    "namespace:flux_operator_minicluster_up_seconds:mean{selector}"
                ))
                .await
        },
    )
    .await?;
    assert!(
        (mean - sum).abs() < 1e-6,
        "mean {mean} of one observation is its sum {sum}"
    );
    ns.cleanup().await;
    Ok(())
}
