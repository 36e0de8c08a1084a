//! Side-by-side benchmark (issue 12): this operator, the bare JobSet it renders, and the Go
//! Flux Operator, on the offline test control plane (KWOK: pods run nothing, so this measures
//! the control-plane path only). Printed figures, not a timed test; run with `make bench`,
//! which builds what it needs and runs this against a fresh cluster of its own through
//! `e2e/run-tests.sh` (see docs/benchmarks.md).
//!
//! Arms (`BENCH_ARMS`, default `operator,jobset,go`), one at a time, interleaved per round
//! (the order rotates from one scenario and round to the next; with `BENCH_MIRROR=1` each
//! round runs every scenario's arms in that order and then again in reverse, as A B B A, and
//! a round's figure of an arm is the mean of its two runs, so that a drift across the round,
//! and whatever the arm run before leaves behind, weighs the same on both arms):
//!
//! - `operator`: this repository's `flux-operator run` (the release build `cargo bench`
//!   makes), with `crds/` installed; the driver applies the MiniCluster;
//! - `jobset`: what `flux-operator render` prints for the same MiniCluster file (Secret,
//!   ConfigMap, JobSet, Services), applied by the driver with no operator running;
//! - `go`: the Go operator's manager built by `e2e/build-go-operator.sh` from
//!   `../shared/vendor`, with its own CRD from the same archive; the same MiniCluster file.
//!   Both CRDs are `miniclusters.flux-framework.org` (the same group and version), so the
//!   driver deletes the installed one and creates the other whenever the arm needs the
//!   other one (never during a measurement; no operator runs while it swaps);
//! - two diagnostic arms, off by default: `job` (the rendered workers' Job template as one
//!   Indexed Job of N pods, beside the rendered Secret and ConfigMap: the JobSet without
//!   JobSet) and `jobset-nowh` (the bare JobSet with JobSet's two pod webhooks unregistered
//!   for that run: their object selector is pointed at a label no pod has, then restored).
//!
//! Every object is applied with server-side apply (the PATCH `kubectl apply --server-side`
//! sends) from the driver's own client, one after another, so that no arm pays kubectl's
//! start-up or discovery and the clock starts at the first request in every arm.
//!
//! Scenarios:
//!
//! - one MiniCluster of size N for each N in `BENCH_SIZES` (default `8,64,256`): seconds
//!   from the first apply request until a pod watch (opened before it) has seen N pods Ready;
//!   also when the first JobSet and the first pod appeared and when all N existed; then its
//!   teardown: the operators' MiniCluster deleted, or the bare arm's JobSet and then its
//!   Secret, ConfigMap and Services (background propagation, as kubectl deletes), seconds
//!   from the first delete request until a pod watch has seen the last pod deleted from the
//!   API (a KWOK pod being deleted is stopped first by `e2e/stages/pod-stop-on-delete.yaml`);
//! - resize (`BENCH_RESIZE`, `A:B`, default `8:64`; empty or 0 skips it): one MiniCluster
//!   of size A and `maxSize: B` (the same file for every arm), its A pods Ready (and this
//!   operator's status Running), then grown to B: seconds from the change request until a
//!   pod watch has seen B pods Ready. The operators get the MiniCluster applied at size B;
//!   the bare JobSet gets the change this operator would make, from the crate's own code
//!   (`render::jobset::update` of the MiniCluster at size B, applied with field manager
//!   `controller::UPDATE_MANAGER`, forced, as `controller::apply` does; JobSet's
//!   `ElasticJobSet` gate is on in the harness); the `job` arm, its Job's parallelism and
//!   completions;
//! - the end of a batch cluster (`BENCH_END`, sizes, default `8`; empty or 0 skips it;
//!   issue 32): one MiniCluster of size N, its N pods Ready (and this operator's status
//!   Running), then its lead pod's status set to Succeeded, as the kubelet reports a lead
//!   broker that exited 0 (KWOK runs nothing): seconds from that request until a pod watch has
//!   seen every other pod deleted from the API (JobSet's success policy ends the JobSet, which
//!   deletes the followers' Job). This operator and the bare JobSet only: the Go operator's
//!   one Job ends when each of its pods does;
//! - many clusters (`BENCH_MANY`, default 50; 0 skips it): that many MiniClusters of size 2
//!   in one namespace, until all their pods are Ready; then `BENCH_IDLE` seconds (default
//!   30) of nothing, in which the operator's reconciles are counted from its /metrics.
//!   The clusters are sent over `BENCH_CONNECTIONS` requests in flight at once (default 8,
//!   as issue 36 measured them), each cluster's objects in order on one of them (the bare
//!   arm's Secret, ConfigMap, JobSet); 1 sends every object in turn, as `kubectl apply -f`
//!   of a directory does.
//!
//! Per run it also records, from /proc, the CPU seconds of the operator (and its peak RSS,
//! VmHWM: it starts fresh for each run), of kube-apiserver, the JobSet controller,
//! kube-controller-manager, kube-scheduler and kwok; and from the apiserver's /metrics
//! `apiserver_request_total` (by verb and resource: the apiserver does not label requests by
//! client, so these are every client's requests, the driver's and the controllers'
//! included), the watch events it sent (`apiserver_watch_events_total` and `_sizes`, by
//! resource: one per watcher, every client's), the admission webhooks' time and the pod
//! creations' latency. With `BENCH_PPROF_SECS` (default 0: off), the many-clusters runs also
//! take the apiserver's CPU profile over that many seconds from the first apply (its
//! `/debug/pprof/profile`, in pieces of at most 50 s, the apiserver ending a request after a
//! minute; kept beside the bench logs, `pprof-<arm>-<namespace>.pb.gz.<piece>`) and split it
//! by path with `go tool pprof`: watch events sent, writes (with the custom resources'
//! status writes and CEL rules apart), gets and lists, Go's garbage collector, the rest.
//!
//! A many-clusters run prints a second line: CPU by process, requests, watch events and bytes
//! per MiniCluster, the requests answered other than 2xx, the profile's split; and keeps its
//! requests (by verb and resource, and the not-2xx ones by code) in
//! `requests-<arm>-<namespace>.tsv` beside the bench logs. The report gives, per round, the
//! ratios of the seconds to Ready, of the apiserver's CPU and of the scheduler's: the
//! scheduler places the same pods with the same requests in every arm, so its CPU tells how
//! fast the machine ran each run of a round.
//!
//! `BENCH_ROUNDS` (default 3) rounds, each with every size and the resize; the first
//! `BENCH_MANY_ROUNDS` (default 1, to stay near 15 minutes in all) of them include the
//! many-clusters scenario. With `BENCH_WARMUP=1` (default 0), round 1's scenarios run once
//! under each arm before the rounds and are not kept (a fresh cluster's first runs are
//! then in no round). Every table gives min / median / max over the rounds and, for
//! each pair of arms (operator / bare JobSet, operator / Go), the ratio in each round (the
//! runs of one round paired) beside the ratio of the medians. Needs `KUBECONFIG`,
//! `E2E_STATE` and `E2E_CLUSTER` as `e2e/run-tests.sh` exports them.
//!
//! The code, in `benches/operators/`: `arms.rs` (the systems and the scenarios),
//! `objects.rs` (what a run applies), `process.rs` (an operator as a process), `bench.rs`
//! (the cluster, the CRDs, cleaning up), `scenarios.rs` (each scenario's rounds and how they
//! are timed), `figures.rs` and `helpers.rs` (what is measured and how), `report.rs` (the
//! tables).
//!
//! `BENCH_WRAP`, a diagnostic: a program to start this operator through, given its command
//! line (a heap profiler's launcher; see docs/benchmarks.md).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

#[path = "../tests/common/mod.rs"]
mod common;

use flux_operator::cli::parse_minicluster;
use flux_operator::controller::UPDATE_MANAGER;
use flux_operator::render;

use common::{
    GO_CRD, api_resource, built_go_operator, create_namespace, dynamic_object, free_port,
    histogram_p50_p99_ms, http_get, label, minicluster_resource, parse_sample, pod_ready,
    spawn_logged, sum_samples, swap_minicluster_crd, wait_for_every, yaml_documents,
};

const FIELD_MANAGER: &str = "flux-operator-bench";
/// The label on every namespace a run creates (and the selector that finds them again).
const RUN_LABEL: &str = "bench.flux-framework.org/run=true";
/// The field manager of the one-Job arm's resize (only the Job's size, not the whole Job).
const RESIZE_MANAGER: &str = "flux-operator-bench-resize";
/// After an operator reports ready, before the clock starts: its start-up lists are done.
const SETTLE: Duration = Duration::from_secs(2);
/// How often the bench's waits look again (the status-Running figure is one of them).
const POLL: Duration = Duration::from_millis(100);
/// JobSet's two pod webhooks, as up.sh registers them.
const JOBSET_MUTATING: &str = "jobset-mutating-webhook-configuration";
const JOBSET_VALIDATING: &str = "jobset-validating-webhook-configuration";
const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";

#[path = "operators/arms.rs"]
mod arms;
#[path = "operators/bench.rs"]
mod bench;
#[path = "operators/figures.rs"]
mod figures;
#[path = "operators/helpers.rs"]
mod helpers;
#[path = "operators/objects.rs"]
mod objects;
#[path = "operators/process.rs"]
mod process;
#[path = "operators/report.rs"]
mod report;
#[path = "operators/scenarios.rs"]
mod scenarios;

use arms::*;
use bench::*;
use figures::*;
use helpers::*;
use objects::*;
use process::*;
use report::*;
use scenarios::*;

fn main() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

/// The knobs, from the environment (see the module's comment).
struct Config {
    sizes: Vec<usize>,
    rounds: usize,
    many: usize,
    many_rounds: usize,
    idle: Duration,
    /// `BENCH_CONNECTIONS`: the many clusters' requests in flight at once (at least 1).
    connections: usize,
    arms: Vec<Arm>,
    /// `BENCH_RESIZE`: from size A to B (None: no resize scenario).
    resize: Option<(usize, usize)>,
    /// `BENCH_END`: the sizes of the batch-end scenario (empty: none).
    end: Vec<usize>,
    /// `BENCH_MIRROR`: every scenario's arms twice a round, A B then B A.
    mirror: bool,
    /// `BENCH_WARMUP`: round 1's scenarios once under each arm before the rounds, discarded.
    warmup: bool,
}

/// A 0-or-1 knob.
fn env_flag(name: &str) -> Result<bool> {
    match env_or(name, 0u8)? {
        0 => Ok(false),
        1 => Ok(true),
        other => bail!("{name}={other}: 0 or 1"),
    }
}

/// `BENCH_RESIZE`, "A:B" (default 8:64; empty or 0: none).
fn resize_from_env() -> Result<Option<(usize, usize)>> {
    let v = std::env::var("BENCH_RESIZE").unwrap_or_else(|_| "8:64".into());
    let v = v.trim();
    if v.is_empty() || v == "0" {
        return Ok(None);
    }
    let parse = |s: &str| -> Result<usize> {
        s.trim()
            .parse()
            .with_context(|| format!("BENCH_RESIZE={v}: A:B, e.g. 8:64"))
    };
    let (a, b) = v
        .split_once(':')
        .with_context(|| format!("BENCH_RESIZE={v}: A:B, e.g. 8:64"))?;
    let (a, b) = (parse(a)?, parse(b)?);
    ensure!(
        2 <= a && a < b,
        "BENCH_RESIZE={v}: needs 2 <= A < B (an elastic MiniCluster has size 2 or more)"
    );
    Ok(Some((a, b)))
}

impl Config {
    fn from_env() -> Result<Self> {
        let rounds: usize = env_or("BENCH_ROUNDS", 3)?;
        let config = Self {
            sizes: env_list("BENCH_SIZES", "8,64,256")?,
            rounds,
            many: env_or("BENCH_MANY", 50)?,
            many_rounds: env_or("BENCH_MANY_ROUNDS", 1)?.min(rounds),
            idle: Duration::from_secs(env_or("BENCH_IDLE", 30)?),
            connections: env_or("BENCH_CONNECTIONS", 8)?,
            arms: env_list("BENCH_ARMS", "operator,jobset,go")?,
            resize: resize_from_env()?,
            end: env_list("BENCH_END", "8")?
                .into_iter()
                .filter(|&n: &usize| n > 0)
                .collect(),
            mirror: env_flag("BENCH_MIRROR")?,
            warmup: env_flag("BENCH_WARMUP")?,
        };
        ensure!(!config.arms.is_empty(), "BENCH_ARMS is empty");
        ensure!(rounds > 0, "BENCH_ROUNDS must be at least 1");
        ensure!(
            config.connections > 0,
            "BENCH_CONNECTIONS must be at least 1"
        );
        Ok(config)
    }

    fn report(&self, runs: &[Run]) -> String {
        report(runs, &self.arms, self.rounds, self.many_rounds, self.idle)
    }
}

async fn bench() -> Result<()> {
    let config = Config::from_env()?;
    let started = Instant::now();
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let load_start = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let Config {
        sizes,
        rounds,
        many,
        many_rounds,
        idle,
        connections,
        arms,
        resize,
        end,
        mirror,
        warmup,
    } = &config;
    eprintln!(
        "bench: sizes {sizes:?}, {rounds} rounds, {many} MiniClusters of size 2 in {many_rounds} \
         of them over {connections} connections, idle {} s, resize {}, batch end {end:?}, arms \
         {:?}{}{}; load average {}",
        idle.as_secs(),
        resize.map_or("none".into(), |(a, b)| format!("{a} -> {b}")),
        arms.iter().map(|a| a.key()).collect::<Vec<_>>(),
        if *mirror { " mirrored (A B B A)" } else { "" },
        if *warmup {
            ", after a discarded warm-up"
        } else {
            ""
        },
        load_start.trim()
    );

    let mut bench = Bench::new(arms, *idle, *connections).await?;
    bench.clear_earlier_runs().await?;
    if let Err(e) = bench.jobset_metrics_access().await {
        eprintln!("bench: JobSet's metrics will not be read: {e:#}");
    }
    if bench.controllers().is_none() {
        eprintln!("bench: JobSet's /metrics does not answer; its reconciles are not counted");
    }

    let runs = run_all(&mut bench, &config, started).await?;
    let load_end = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let first_three = |load: &str| {
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "\n## Side-by-side benchmark, {date}\n\nLoad average at the start {}, at the end {}, \
         after each run {:.1} to {:.1}; {:.0} s in all. KWOK pods: the control-plane path only.",
        first_three(&load_start),
        first_three(&load_end),
        runs.iter().map(|r| r.load).fold(f64::INFINITY, f64::min),
        runs.iter()
            .map(|r| r.load)
            .fold(f64::NEG_INFINITY, f64::max),
        started.elapsed().as_secs_f64()
    );
    println!("{}", config.report(&runs));
    Ok(())
}

/// Every round: each scenario (the sizes, the resize, then the many clusters in the first
/// `many_rounds`) under each arm, the arms' order rotating from one scenario and round to the
/// next; with `warmup`, round 1's scenarios once under each arm before them, not kept. On a
/// failure the runs before it are printed, then the error returned.
async fn run_all(bench: &mut Bench, config: &Config, started: Instant) -> Result<Vec<Run>> {
    if config.warmup {
        warm_up(bench, config, started).await?;
    }
    let arms = &config.arms;
    let mut runs = Vec::new();
    for round in 1..=config.rounds {
        for (s, sc) in scenarios(config, round).into_iter().enumerate() {
            // Rotate the arms' order from one scenario to the next and, for each scenario,
            // from one round to the next (a count that only went up by scenario gave a
            // scenario the same order in every round when the scenarios were as many as
            // the arms: two arms, two scenarios).
            let mut order: Vec<Arm> = (0..arms.len())
                .map(|i| arms[(i + s + round) % arms.len()])
                .collect();
            if config.mirror {
                order.extend(order.clone().into_iter().rev());
            }
            for arm in order.into_iter().filter(|&a| runs_in(sc, a)) {
                let run = match bench.run(sc, arm, round).await {
                    Ok(run) => run,
                    Err(e) => {
                        if !runs.is_empty() {
                            println!("\n## Incomplete: the runs before the failure\n");
                            println!("{}", config.report(&runs));
                        }
                        return Err(e.context(format!("round {round}, {sc:?}, {}", arm.title())));
                    }
                };
                log_run(&run, round, config.rounds, started);
                runs.push(run);
            }
        }
    }
    Ok(runs)
}

/// The scenarios of `round`: the sizes, the resize, the batch end, and the many clusters in
/// the first `many_rounds`.
fn scenarios(config: &Config, round: usize) -> Vec<Scenario> {
    let mut scenarios: Vec<Scenario> = config.sizes.iter().map(|&n| Scenario::Single(n)).collect();
    if let Some((a, b)) = config.resize {
        scenarios.push(Scenario::Resize(a, b));
    }
    scenarios.extend(config.end.iter().map(|&n| Scenario::End(n)));
    if config.many > 0 && round <= config.many_rounds {
        scenarios.push(Scenario::Many(config.many));
    }
    scenarios
}

/// Round 1's scenarios once under each arm, in the listed order, logged and dropped: a fresh
/// cluster's first runs (an empty etcd, a CRD just installed, controllers' caches cold) are
/// then no round's, and every timed run follows runs of the same size.
async fn warm_up(bench: &mut Bench, config: &Config, started: Instant) -> Result<()> {
    for sc in scenarios(config, 1) {
        for &arm in config.arms.iter().filter(|&&a| runs_in(sc, a)) {
            let run = bench
                .run(sc, arm, 0)
                .await
                .map_err(|e| e.context(format!("warm-up, {sc:?}, {}", arm.title())))?;
            log_run(&run, 0, config.rounds, started);
        }
    }
    Ok(())
}

/// Whether `arm` runs `sc`: the batch end only where the lead's end ends the JobSet (this
/// operator and the bare JobSet).
fn runs_in(sc: Scenario, arm: Arm) -> bool {
    !matches!(sc, Scenario::End(_)) || matches!(arm, Arm::Operator | Arm::JobSet)
}

/// One line on stderr as each run ends.
fn log_run(run: &Run, round: usize, rounds: usize, started: Instant) {
    let what = match run.scenario {
        Scenario::End(_) => "from the lead's success to no other pod".to_string(),
        _ => format!(
            "to Ready ({}first pod {:.2} s, all created {:.2} s)",
            run.first_jobset
                .map(|t| format!("first JobSet {t:.2} s, "))
                .unwrap_or_default(),
            run.first_pod,
            run.all_created
        ),
    };
    let label = if round == 0 {
        "warm-up, not kept".to_string()
    } else {
        format!("round {round}/{rounds}")
    };
    eprintln!(
        "[{label}] {:>5} {:<24} {:7.2} s {what}{}{}{}{}; load {:.2}{}; {:.0} s elapsed",
        run.scenario.tag(),
        run.arm.title(),
        run.secs,
        run.teardown
            .map(|t| format!("; teardown {t:.2} s"))
            .unwrap_or_default(),
        // Each run's own, so that runs of two builds alternated by `BENCH_WRAP` can be told
        // apart (the tables give an arm's spread only), and kept when a bench is stopped
        // before its tables.
        run.cpu
            .get("operator")
            .map(|c| format!("; operator CPU {c:.2} s"))
            .unwrap_or_default(),
        run.peak_rss_mib
            .map(|m| format!(", peak RSS {m:.1} MiB"))
            .unwrap_or_default(),
        run.idle
            .as_ref()
            .and_then(|i| i.operator_reconciles)
            .map(|n| format!("; {n} reconciles idle"))
            .unwrap_or_default(),
        run.load,
        run.pace_ms
            .map(|p| format!(", pace {p:.0} ms before"))
            .unwrap_or_default(),
        started.elapsed().as_secs_f64()
    );
    if let Scenario::Many(m) = run.scenario {
        eprintln!("    {}", run_detail(run, m));
    }
}

/// A many-clusters run's own figures, per MiniCluster where they grow with the count: CPU
/// by process, requests, watch events and bytes, the API server's profile split. The tables
/// give each arm's spread; this line lets an outlier round be split by who did more.
fn run_detail(run: &Run, m: usize) -> String {
    let per = |x: f64| x / m as f64;
    let cpu = run
        .cpu
        .iter()
        .map(|(k, v)| format!("{k} {v:.1}"))
        .collect::<Vec<_>>()
        .join(", ");
    let events: f64 = run.api.watch_events.values().sum();
    let bytes: f64 = run.api.watch_bytes.values().sum();
    let mut line = format!(
        "CPU s: {cpu}; per MC: {:.1} requests, {:.1} watch events, {:.1} KiB sent",
        per(run.api.total_requests()),
        per(events),
        per(bytes) / 1024.0
    );
    let mut most: Vec<_> = run.api.failed.iter().collect();
    most.sort_by(|a, b| b.1.total_cmp(a.1));
    let most = most
        .iter()
        .take(3)
        .map(|(k, v)| format!("{k} {:.2}", per(**v)))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = write!(
        line,
        "; not 2xx per MC {:.2} ({most})",
        per(run.api.failed_requests())
    );
    if let Some(p) = &run.profile {
        let _ = write!(
            line,
            "; profile s: all {:.1}, watch {:.1}, writes {:.1} (CR status {:.1}, CEL {:.1}), \
             reads {:.1}, GC {:.1}, rest {:.1}",
            p.total,
            p.watch,
            p.writes,
            p.cr_status,
            p.cel,
            p.reads,
            p.gc,
            p.rest()
        );
    }
    line
}
