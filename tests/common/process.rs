//! Processes the tests and benches start on the host: this operator's binary against the
//! test cluster with its watch limited to one namespace (the e2e tests, the real-node bench),
//! and any process with its output in a log file.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result};

use super::http::{free_port, http_get};

/// The operator binary, running for one namespace.
pub struct Operator {
    child: Child,
    pub metrics_port: u16,
    log: PathBuf,
}

impl Operator {
    pub fn start(namespace: &str) -> Result<Self> {
        Self::start_on(namespace, free_port()?)
    }

    pub fn start_on(namespace: &str, metrics_port: u16) -> Result<Self> {
        Self::launch(namespace, metrics_port, "e2e-operator")
    }

    /// Another replica, with its own identity in the leader election.
    pub fn start_as(namespace: &str, identity: &str) -> Result<Self> {
        Self::launch(namespace, free_port()?, identity)
    }

    fn launch(namespace: &str, metrics_port: u16, identity: &str) -> Result<Self> {
        let log = std::env::temp_dir().join(format!("flux-operator-{namespace}-{identity}.log"));
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_flux-operator"));
        command
            .args([
                "run",
                "--namespace",
                namespace,
                "--lease-namespace",
                namespace,
            ])
            .args([
                "--identity",
                identity,
                "--cluster-domain",
                "cluster.local",
                "--log-format",
                "text",
            ])
            // Plain HTTP on loopback, no token: the tests read /metrics and the probes
            // directly (tests/e2e/prometheus.rs tests the endpoint as installed).
            .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
            .arg("--metrics-insecure-loopback")
            .env("RUST_LOG", "info,flux_operator=debug");
        let child = spawn_logged(&mut command, log_file).context("starting the operator binary")?;
        Ok(Self {
            child,
            metrics_port,
            log,
        })
    }

    /// SIGKILL: a crash, an OOM kill (no shutdown of any kind).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, as the kubelet stops a pod (a rollout, an upgrade), and wait until it exits.
    pub fn stop(&mut self) -> Result<()> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .context("kill -TERM")?;
        anyhow::ensure!(status.success(), "kill -TERM: {status}");
        let exit = self.child.wait()?;
        anyhow::ensure!(exit.success(), "the operator exited with {exit} on SIGTERM");
        Ok(())
    }

    pub async fn metrics(&self) -> Result<String> {
        http_get(self.metrics_port, "/metrics").await
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            print_log_tail(&self.log);
        }
    }
}

/// Start `cmd` with no standard input, its output and errors into `log` (a file the caller
/// opened: created anew, or appended to).
pub fn spawn_logged(cmd: &mut Command, log: std::fs::File) -> std::io::Result<Child> {
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
}

/// An operator's log file and its last 40 lines, on stderr (after a failed test).
pub fn print_log_tail(log: &Path) {
    eprintln!("operator log: {}", log.display());
    if let Ok(text) = std::fs::read_to_string(log) {
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
    }
}
