//! An operator as a process beside the cluster, stopped with the bench.

use super::*;

/// A command running `bin`, under `BENCH_WRAP` when it is set: a diagnostic prefix, a
/// program given the operator's command line (a heap profiler's launcher). It should `exec`
/// the operator, so that the signals and the figures from /proc reach the operator and not
/// the wrapper.
pub(crate) fn wrapped(bin: &Path) -> Command {
    let wrap = std::env::var("BENCH_WRAP").unwrap_or_default();
    let mut words = wrap.split_whitespace();
    let Some(first) = words.next() else {
        return Command::new(bin);
    };
    let mut c = Command::new(first);
    c.args(words).arg(bin);
    c
}

pub(crate) struct OperatorProc {
    pub(crate) arm: Arm,
    pub(crate) child: Child,
    pub(crate) metrics_port: u16,
    pub(crate) health_port: u16,
    pub(crate) log: PathBuf,
}

impl OperatorProc {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) async fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} exited ({status}) before it was ready; log: {}",
                    self.arm.title(),
                    self.log.display()
                );
            }
            let ready = match self.arm {
                Arm::Operator => http_get(self.metrics_port, "/readyz").await.is_ok(),
                // controller-runtime 0.12's /readyz is a ping; its workers start after the
                // caches synced.
                _ => {
                    http_get(self.health_port, "/readyz").await.is_ok()
                        && std::fs::read_to_string(&self.log)
                            .is_ok_and(|l| l.contains("Starting workers"))
                }
            };
            if ready {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "{} not ready after 90 s; log: {}",
                self.arm.title(),
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Reconciles so far, from the operator's /metrics.
    pub(crate) async fn reconciles(&self) -> Option<f64> {
        let text = http_get(self.metrics_port, "/metrics").await.ok()?;
        match self.arm {
            // `reconcile_duration` with unit seconds (src/metrics/mod.rs): its `_count`.
            Arm::Operator => {
                sum_samples(&text, "flux_operator_reconcile_duration_seconds_count", &[])
            }
            _ => sum_samples(
                &text,
                "controller_runtime_reconcile_total",
                &[("controller", "minicluster")],
            ),
        }
    }

    /// p50 and p99 (ms) of the whole reconcile and of its own work, this operator only.
    pub(crate) async fn reconcile_quantiles(&self) -> (Option<(f64, f64)>, Option<(f64, f64)>) {
        if self.arm != Arm::Operator {
            return (None, None);
        }
        let Ok(text) = http_get(self.metrics_port, "/metrics").await else {
            return (None, None);
        };
        (
            histogram_p50_p99_ms(&text, "flux_operator_reconcile_duration_seconds"),
            histogram_p50_p99_ms(&text, "flux_operator_reconcile_decide_seconds"),
        )
    }

    /// SIGTERM, up to 10 s, then SIGKILL.
    pub(crate) fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!(
            "  {} ignored SIGTERM for 10 s, killing it",
            self.arm.title()
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OperatorProc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
