//! Debian's Prometheus (package `prometheus`, installed by `e2e/setup-host.sh`) run for one
//! test on loopback, and instant queries to its HTTP API.

use std::path::Path;
use std::process::{Child, Command};

use anyhow::{Context, Result};
use serde_json::Value;

use super::{free_port, http_get, spawn_logged};

pub struct Prometheus {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Prometheus with the configuration `config` returns, given the directory it runs in
    /// (for the files the configuration names: tokens, kubeconfigs, rules).
    pub fn start(config: impl FnOnce(&Path) -> Result<String>) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let port = free_port()?;
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config(dir.path())?)?;
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
        Ok(Self { child, port, dir })
    }

    /// The port of its HTTP API on loopback.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The value of an instant query's single sample, if there is one.
    pub async fn query(&self, promql: &str) -> Result<Option<f64>> {
        let json = self
            .api(&format!("/api/v1/query?query={}", encode(promql)))
            .await?;
        let result = &json["data"]["result"];
        Ok(result
            .get(0)
            .and_then(|sample| sample["value"][1].as_str())
            .and_then(|v| v.parse().ok()))
    }

    /// What `/api/v1/targets` says of the active targets (for failure messages).
    pub async fn targets(&self) -> String {
        match self.api("/api/v1/targets").await {
            Ok(json) => json["data"]["activeTargets"].to_string(),
            Err(e) => format!("no targets: {e:#}"),
        }
    }

    /// Prometheus' own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    async fn api(&self, path: &str) -> Result<Value> {
        Ok(serde_json::from_str(&http_get(self.port, path).await?)?)
    }
}

/// `promql` as a URL query value.
fn encode(promql: &str) -> String {
    promql
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
