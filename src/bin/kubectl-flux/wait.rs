//! `kubectl flux wait`: polling a MiniCluster until all its brokers are up, or until it is
//! clear that they will not come up.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kube::api::Api;

use flux_operator::api::{MiniCluster, Phase, condition};

use crate::args::{KubeArgs, WaitArgs};
use crate::target::{Refusal, why_not};
use crate::{PLUGIN_ERROR, connect};

/// Where a MiniCluster stands for `kubectl flux wait`.
#[derive(Debug, PartialEq)]
enum Progress {
    /// Every broker is up.
    Up(String),
    /// Not yet: what it is doing.
    Waiting(String),
    /// It will not come up without a change: why.
    Never(String),
}

fn progress(mc: &MiniCluster) -> Progress {
    let status = mc.status.clone().unwrap_or_default();
    let brokers = format!("{}/{} brokers ready", status.ready_brokers, mc.spec.size);
    // Up means the size asked now: a status written for an older spec (a scale the operator
    // has not seen yet), or a Running cluster with fewer brokers ready, is not up.
    let generation = mc.metadata.generation;
    let current = |g: Option<i64>| generation.is_none() || g == generation;
    let ready = current(status.observed_generation)
        && status.ready_brokers >= mc.spec.size
        && status.conditions.iter().any(|c| {
            c.type_ == condition::READY && c.status == "True" && current(c.observed_generation)
        });
    let phase = status.phase;
    if ready && !phase.is_some_and(Phase::is_finished) {
        return Progress::Up(brokers);
    }
    let is_true = |t: &str| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == t && c.status == "True")
    };
    let phase_text = phase.map_or("without a status yet", Phase::as_str);
    if phase.is_some_and(Phase::is_finished) || is_true(condition::INVALID_SPEC) {
        return Progress::Never(format!("{phase_text}, {brokers}{}", why_not(mc)));
    }
    Progress::Waiting(format!("{phase_text}, {brokers}{}", why_not(mc)))
}

pub(crate) async fn wait(kube: &KubeArgs, args: WaitArgs) -> Result<u8> {
    let (client, namespace) = connect(kube).await?;
    let mcs: Api<MiniCluster> = Api::namespaced(client, &namespace);
    let name = format!("{namespace}/{}", args.mc);
    let start = Instant::now();
    let mut said = String::new();
    loop {
        let mc = mcs
            .get_opt(&args.mc)
            .await
            .with_context(|| format!("reading MiniCluster {name}"))?
            .ok_or_else(|| Refusal::NotFound(name.clone(), namespace.clone()))?;
        match progress(&mc) {
            Progress::Up(brokers) => {
                println!("MiniCluster {name} is up: {brokers}");
                return Ok(0);
            }
            Progress::Never(why) => {
                eprintln!("error: MiniCluster {name} will not come up: {why}");
                return Ok(PLUGIN_ERROR);
            }
            Progress::Waiting(now) => {
                if start.elapsed() >= args.timeout {
                    eprintln!(
                        "error: timed out after {:?} waiting for MiniCluster {name}: {now}",
                        args.timeout
                    );
                    return Ok(PLUGIN_ERROR);
                }
                if now != said {
                    eprintln!("waiting for MiniCluster {name}: {now}");
                    said = now;
                }
            }
        }
        let left = args.timeout.saturating_sub(start.elapsed());
        tokio::time::sleep(left.min(Duration::from_secs(2))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{cond, minicluster, running};
    use serde_json::json;

    #[test]
    fn wait_ends_when_ready_and_gives_up_only_when_it_cannot_come_up() {
        assert_eq!(
            progress(&minicluster(json!({}), running())),
            Progress::Up("2/2 brokers ready".into())
        );
        let starting = json!({"phase": "Starting", "readyBrokers": 1, "conditions": [
            cond("Ready", "False", "BrokersStarting", "1 of 2 brokers ready")]});
        assert_eq!(
            progress(&minicluster(json!({}), starting)),
            Progress::Waiting(
                "Starting, 1/2 brokers ready (Ready=False BrokersStarting: 1 of 2 brokers ready)"
                    .into()
            )
        );
        let suspended = json!({"phase": "Suspended", "conditions": [
            cond("Suspended", "True", "WaitingForAdmission", "queue q")]});
        assert!(
            matches!(progress(&minicluster(json!({}), suspended)), Progress::Waiting(w) if w.contains("WaitingForAdmission"))
        );
        let invalid = json!({"phase": "Pending", "conditions": [
            cond("InvalidSpec", "True", "Invalid", "spec.x: bad")]});
        assert!(
            matches!(progress(&minicluster(json!({}), invalid)), Progress::Never(w) if w.contains("spec.x: bad"))
        );
        // Scaled from 2 to 4: until the operator has seen the new generation and 4 brokers
        // are ready, the cluster is not up, though it is Running with Ready true for 2.
        let scaled = |status: serde_json::Value| {
            let mut mc = minicluster(json!({"size": 4}), status);
            mc.metadata.generation = Some(3);
            mc
        };
        let seen = |generation: i64, ready: i32| {
            json!({"phase": "Running", "readyBrokers": ready, "observedGeneration": generation,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "BrokersReady",
                   "message": "", "observedGeneration": generation,
                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
        };
        assert!(matches!(
            progress(&scaled(seen(2, 2))),
            Progress::Waiting(w) if w.starts_with("Running, 2/4 brokers ready")
        ));
        assert!(matches!(
            progress(&scaled(seen(3, 2))),
            Progress::Waiting(_)
        ));
        assert_eq!(
            progress(&scaled(seen(3, 4))),
            Progress::Up("4/4 brokers ready".into())
        );
        let done = json!({"phase": "Succeeded"});
        assert!(matches!(
            progress(&minicluster(json!({}), done)),
            Progress::Never(_)
        ));
    }
}
