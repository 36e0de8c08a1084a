//! Autoscaling benchmark (issue 33): how long a MiniCluster sized by an HPA on its queue takes
//! to grow for waiting jobs and to shrink once the queue is empty, against the floor: the same
//! MiniCluster scaled by hand the moment it is needed (`kubectl scale` as the jobs are
//! submitted, and as soon as the last one is seen done). `BENCH_AUTOSCALING_ROUNDS` (default 5)
//! interleaved rounds, the arms' order alternating. Printed figures, not a timed test:
//! `make bench-autoscaling` (a fresh cluster with its real node, torn down after).
//!
//! Each run: `examples/autoscaling.yaml` (2 brokers, maxSize 4) on the real node with the
//! operator installed by its chart; four `flux submit -N1 --exclusive sleep 30`, so two run
//! and two wait (for long enough: the HPA looks every 15 s, and jobs that wait for less run
//! on the nodes the first two free, which is the point of the HPA's windows). The HPA arm runs the stack of the autoscaling test (`tests/node/monitoring.rs`:
//! Prometheus with the shipped scrape job, prometheus-adapter with the shipped rules) and
//! `manifests/autoscaling/hpa.yaml` with its scale-down window cut from 300 s to 15 s (the
//! shipped window is a policy against flapping, not a cost; with it, add 285 s to the shrink).
//!
//! - **grow**: from the first job's submission (Flux's `t_submit`) to `spec.size` 4, and to 4
//!   brokers joined (4 broker pods Ready: a follower is Ready once its broker is in the
//!   instance).
//! - **jobs**: from the first submission to the last job done (`t_inactive`).
//! - **shrink**: from the queue empty (the last job's `t_inactive`) to `spec.size` 2, and to 2
//!   broker pods left.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

#[allow(dead_code)]
mod arms;
#[allow(dead_code)]
#[path = "../tests/node/cluster.rs"]
mod cluster;
#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/node/monitoring.rs"]
mod monitoring;

use arms::{load, now, stats};
use cluster::{Lead, apply_yaml, get_json, kubectl_in, namespace, root, wait_phase};
use common::{TestNamespace, pod_ready, wait_for};
use monitoring::{Adapter, QueueScraper, queue_adapter, queue_hpa};

const MC: &str = "autoscaling";
const LIMIT: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Arm {
    Hpa,
    ByHand,
}

/// Seconds of one run (see the module's doc).
#[derive(Debug, Default)]
struct Run {
    resized_up: f64,
    joined: f64,
    jobs: f64,
    resized_down: f64,
    gone: f64,
}

/// Until the MiniCluster's `spec.size` is `size` and it has `pods` broker pods, `ready` of
/// them Ready: the wall-clock time the size and the pods were first seen so (polled).
async fn wait_shape(ns: &TestNamespace, size: i64, pods: usize, ready: bool) -> Result<(f64, f64)> {
    let api: Api<Pod> = ns.api();
    let selector = format!("flux-framework.org/minicluster={MC}");
    let mut sized = None;
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        ensure!(
            std::time::Instant::now() < deadline,
            "size {size} with {pods} pods not reached"
        );
        let t = now();
        if sized.is_none()
            && get_json(&ns.name, &format!("minicluster/{MC}"))?["spec"]["size"] == size
        {
            sized = Some(t);
        }
        let list = api.list(&ListParams::default().labels(&selector)).await?;
        let counted = (list.items.iter())
            .filter(|p| p.metadata.deletion_timestamp.is_none() || !ready)
            .filter(|p| !ready || pod_ready(p))
            .count();
        if let Some(sized) = sized
            && counted == pods
        {
            return Ok((sized, t));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `flux jobs` stamps of every job: (first `t_submit`, last `t_inactive`), once all are done.
async fn job_stamps(lead: &Lead) -> Result<(f64, f64)> {
    let out = wait_for("every job done", LIMIT, || async {
        let out = lead.flux("jobs -a -no '{t_submit} {t_inactive} {result}'")?;
        Ok(
            (out.lines().count() == 4 && out.lines().all(|l| l.ends_with("COMPLETED")))
                .then_some(out),
        )
    })
    .await?;
    let mut submitted = f64::MAX;
    let mut done = 0f64;
    for line in out.lines() {
        let mut words = line.split_whitespace();
        let submit: f64 = words.next().context("t_submit")?.parse()?;
        let inactive: f64 = words.next().context("t_inactive")?.parse()?;
        submitted = submitted.min(submit);
        done = done.max(inactive);
    }
    Ok((submitted, done))
}

/// The monitoring stack and the HPA, once the HPA has read the metric (its `ScalingActive`).
async fn autoscaled(ns: &TestNamespace) -> Result<(QueueScraper, Adapter)> {
    let scraper = QueueScraper::start(&ns.name)?;
    let adapter = queue_adapter(&ns.name, &scraper)?;
    apply_yaml(&ns.name, &queue_hpa()?)?;
    wait_for("the HPA to read flux_nodes_wanted", LIMIT, || async {
        let hpa = get_json(&ns.name, "hpa/autoscaling")?;
        let conditions = hpa["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok(conditions
            .iter()
            .any(|c| c["type"] == "ScalingActive" && c["status"] == "True")
            .then_some(()))
    })
    .await?;
    Ok((scraper, adapter))
}

async fn run(arm: Arm) -> Result<Run> {
    let ns = namespace("bench-autoscaling").await?;
    let example = std::fs::read_to_string(root().join("examples/autoscaling.yaml"))?;
    apply_yaml(&ns.name, &example)?;
    wait_phase(&ns.name, MC, "Running").await?;
    let stack = match arm {
        Arm::Hpa => Some(autoscaled(&ns).await?),
        Arm::ByHand => None,
    };
    let scale = |n: u32| {
        kubectl_in(
            &ns.name,
            &[
                "scale",
                &format!("minicluster/{MC}"),
                &format!("--replicas={n}"),
            ],
        )
    };
    let lead = Lead::of(&ns.name, MC)?;
    lead.submit("--cc=1-4 -N1 --exclusive sleep 30")?;
    if arm == Arm::ByHand {
        scale(4)?;
    }
    let (sized_up, joined) = wait_shape(&ns, 4, 4, true).await?;
    let (submitted, empty) = job_stamps(&lead).await?;
    if arm == Arm::ByHand {
        scale(2)?;
    }
    let (sized_down, gone) = wait_shape(&ns, 2, 2, false).await?;
    drop(stack);
    kubectl_in(&ns.name, &["delete", "hpa", "--all"])?;
    ns.cleanup().await;
    Ok(Run {
        resized_up: sized_up - submitted,
        joined: joined - submitted,
        jobs: empty - submitted,
        resized_down: sized_down - empty,
        gone: gone - empty,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let rounds: usize = std::env::var("BENCH_AUTOSCALING_ROUNDS")
        .unwrap_or_else(|_| "5".into())
        .parse()
        .context("BENCH_AUTOSCALING_ROUNDS")?;
    let started = load();
    let mut runs: Vec<(Arm, Run)> = Vec::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [Arm::Hpa, Arm::ByHand]
        } else {
            [Arm::ByHand, Arm::Hpa]
        };
        for arm in order {
            let r = run(arm).await?;
            println!(
                "round {round} {arm:?}: size 4 after {:.2} s, 4 joined after {:.2} s, jobs done after {:.2} s; \
                 size 2 {:.2} s and 2 pods {:.2} s after the queue emptied",
                r.resized_up, r.joined, r.jobs, r.resized_down, r.gone
            );
            runs.push((arm, r));
        }
        let pair: Vec<&Run> = runs.iter().rev().take(2).map(|(_, r)| r).collect();
        let (hpa, hand) = match runs[runs.len() - 1].0 {
            Arm::Hpa => (pair[0], pair[1]),
            Arm::ByHand => (pair[1], pair[0]),
        };
        println!(
            "round {round} ratio HPA / by hand: joined {:.2}, pods gone {:.2}",
            hpa.joined / hand.joined,
            hpa.gone / hand.gone
        );
    }
    println!("\nload at start: {started}; at end: {}", load());
    println!("seconds, min / median / max of {rounds} rounds");
    println!("| arm | size 4 | 4 joined | jobs done | size 2 after empty | 2 pods after empty |");
    println!("|---|--:|--:|--:|--:|--:|");
    for arm in [Arm::Hpa, Arm::ByHand] {
        let of = |f: fn(&Run) -> f64| -> Vec<f64> {
            runs.iter()
                .filter(|(a, _)| *a == arm)
                .map(|(_, r)| f(r))
                .collect()
        };
        println!(
            "| {arm:?} | {} | {} | {} | {} | {} |",
            stats(&of(|r| r.resized_up)),
            stats(&of(|r| r.joined)),
            stats(&of(|r| r.jobs)),
            stats(&of(|r| r.resized_down)),
            stats(&of(|r| r.gone)),
        );
    }
    Ok(())
}
