//! Side-by-side benchmark (issue 12): this operator, the bare JobSet it renders, and the Go
//! Flux Operator, on the offline test control plane (KWOK: pods run nothing, so this measures
//! the control-plane path only). Printed figures, not a timed test; run with `make bench`,
//! which builds what it needs and runs this against a fresh cluster of its own through
//! `e2e/run-tests.sh` (see docs/benchmarks.md).
//!
//! Arms (`BENCH_ARMS`, default `operator,jobset,go`), one at a time, interleaved per round
//! (the order rotates from one scenario and round to the next):
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
//!   also when the first pod appeared and when all N existed; then its teardown: the
//!   operators' MiniCluster deleted, or the bare arm's JobSet and then its Secret, ConfigMap
//!   and Services (background propagation, as kubectl deletes), seconds from the first
//!   delete request until a pod watch has seen the last pod deleted from the API (a KWOK pod
//!   being deleted is stopped first by `e2e/stages/pod-stop-on-delete.yaml`);
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
//!
//! Per run it also records, from /proc, the CPU seconds of the operator (and its peak RSS,
//! VmHWM: it starts fresh for each run), of kube-apiserver, the JobSet controller,
//! kube-controller-manager, kube-scheduler and kwok; and from the apiserver's /metrics
//! `apiserver_request_total` (by verb and resource: the apiserver does not label requests by
//! client, so these are every client's requests, the driver's and the controllers'
//! included), the admission webhooks' time and the pod creations' latency.
//!
//! `BENCH_ROUNDS` (default 3) rounds, each with every size and the resize; the first
//! `BENCH_MANY_ROUNDS` (default 1, to stay near 15 minutes in all) of them include the
//! many-clusters scenario. Every table gives min / median / max over the rounds and, for
//! each pair of arms (operator / bare JobSet, operator / Go), the ratio in each round (the
//! runs of one round paired) beside the ratio of the medians. Needs `KUBECONFIG`,
//! `E2E_STATE` and `E2E_CLUSTER` as `e2e/run-tests.sh` exports them.
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
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

#[path = "../tests/common/mod.rs"]
mod common;

use flux_operator::cli::parse_minicluster;
use flux_operator::controller::UPDATE_MANAGER;
use flux_operator::render;

use common::{
    GO_CRD, api_resource, built_go_operator, crd_from_file, create_namespace, dynamic_object,
    free_port, histogram_p50_p99_ms, http_get, label, minicluster_resource, parse_sample,
    pod_ready, replace_crd, spawn_logged, sum_samples, wait_for_every, yaml_documents,
};

const FIELD_MANAGER: &str = "flux-operator-bench";
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

// ---------------------------------------------------------------------------------------
// Arms and scenarios

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Arm {
    Operator,
    JobSet,
    Go,
    Job,
    JobSetNoPodWebhooks,
}

impl FromStr for Arm {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "operator" => Arm::Operator,
            "jobset" => Arm::JobSet,
            "go" => Arm::Go,
            "job" => Arm::Job,
            "jobset-nowh" => Arm::JobSetNoPodWebhooks,
            _ => bail!("unknown arm {s:?} (operator, jobset, go, job, jobset-nowh)"),
        })
    }
}

impl Arm {
    fn key(self) -> &'static str {
        match self {
            Arm::Operator => "operator",
            Arm::JobSet => "jobset",
            Arm::Go => "go",
            Arm::Job => "job",
            Arm::JobSetNoPodWebhooks => "jobset-nowh",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Arm::Operator => "operator",
            Arm::JobSet => "bare JobSet",
            Arm::Go => "Go operator",
            Arm::Job => "one Indexed Job",
            Arm::JobSetNoPodWebhooks => "JobSet, no pod webhooks",
        }
    }

    fn crd(self) -> Option<Crd> {
        match self {
            Arm::Operator => Some(Crd::Ours),
            Arm::Go => Some(Crd::Go),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Crd {
    Ours,
    Go,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Scenario {
    /// One MiniCluster of this size.
    Single(usize),
    /// One MiniCluster of size A and maxSize B, its A pods Ready, grown to size B.
    Resize(usize, usize),
    /// This many MiniClusters of size 2, then the idle window.
    Many(usize),
    /// One MiniCluster of this size, Ready, then its lead pod Succeeded.
    End(usize),
}

impl Scenario {
    fn tag(self) -> String {
        match self {
            Scenario::Single(n) => format!("n{n}"),
            Scenario::Many(m) => format!("m{m}"),
            Scenario::Resize(a, b) => format!("resize{a}-{b}"),
            Scenario::End(n) => format!("end{n}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Figures of one run

#[derive(Clone, Debug, Default)]
struct ApiStats {
    /// `apiserver_request_total` by "VERB resource[.group][/subresource]".
    requests: BTreeMap<String, f64>,
    /// Admission webhook time and calls by webhook name (Kueue's and JobSet's pod webhooks
    /// share the names `mpod.kb.io` and `vpod.kb.io`).
    webhook_secs: BTreeMap<String, f64>,
    webhook_calls: BTreeMap<String, f64>,
    /// `apiserver_request_duration_seconds` of pod creations.
    pod_create_secs: f64,
    pod_creates: f64,
}

/// `a - b` key by key (a key missing from `b` counts as 0 there); the keys at 0 dropped.
fn sub(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    a.iter()
        .map(|(k, v)| (k.clone(), v - b.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v != 0.0)
        .collect()
}

impl ApiStats {
    fn minus(&self, before: &ApiStats) -> ApiStats {
        ApiStats {
            requests: sub(&self.requests, &before.requests),
            webhook_secs: sub(&self.webhook_secs, &before.webhook_secs),
            webhook_calls: sub(&self.webhook_calls, &before.webhook_calls),
            pod_create_secs: self.pod_create_secs - before.pod_create_secs,
            pod_creates: self.pod_creates - before.pod_creates,
        }
    }

    fn total_requests(&self) -> f64 {
        self.requests.values().sum()
    }
}

/// CPU seconds by process name.
type Cpu = BTreeMap<&'static str, f64>;

fn cpu_minus(after: &Cpu, before: &Cpu) -> Cpu {
    after
        .iter()
        .map(|(k, v)| (*k, v - before.get(k).copied().unwrap_or(0.0)))
        .collect()
}

/// What JobSet's and Kueue's own /metrics say (controller-runtime's metrics).
#[derive(Clone, Debug, Default)]
struct Controllers {
    jobset_reconciles: f64,
    /// Webhook time and calls as each webhook server measured them (from reading the
    /// request to writing the answer), by "JobSet /mutate--v1-pod" etc.
    webhook_secs: BTreeMap<String, f64>,
    webhook_calls: BTreeMap<String, f64>,
}

impl Controllers {
    fn minus(&self, before: &Controllers) -> Controllers {
        Controllers {
            jobset_reconciles: self.jobset_reconciles - before.jobset_reconciles,
            webhook_secs: sub(&self.webhook_secs, &before.webhook_secs),
            webhook_calls: sub(&self.webhook_calls, &before.webhook_calls),
        }
    }
}

#[derive(Clone, Debug)]
struct Idle {
    operator_reconciles: Option<f64>,
    /// Reconciles in the second half of the window.
    operator_reconciles_late: Option<f64>,
    /// Seconds into the window of the operator's last reconcile (0: none in the window).
    operator_last_reconcile: Option<f64>,
    jobset_reconciles: Option<f64>,
    api: ApiStats,
    cpu: Cpu,
}

#[derive(Clone, Debug)]
struct Run {
    scenario: Scenario,
    arm: Arm,
    /// The round (from 1): the runs of one round are paired in the ratios.
    round: usize,
    /// Apply -> all pods Ready.
    secs: f64,
    /// Apply -> first pod seen.
    first_pod: f64,
    /// Apply -> every pod seen.
    all_created: f64,
    /// CPU seconds during apply -> all Ready ("operator" is the operator's, when it runs).
    cpu: Cpu,
    /// The operator's peak RSS (VmHWM), MiB.
    peak_rss_mib: Option<f64>,
    /// The operator's reconciles over the run (it starts fresh for each), p50 and p99 in ms
    /// as bucket upper bounds: the whole reconcile, and its own work (observe and plan, no
    /// API waits: `flux_operator_reconcile_decide_seconds`).
    reconcile_ms: Option<(f64, f64)>,
    decide_ms: Option<(f64, f64)>,
    api: ApiStats,
    controllers: Option<Controllers>,
    idle: Option<Idle>,
    /// Apply -> every MiniCluster's status.phase Running (this operator only).
    running: Option<f64>,
    /// One MiniCluster, after the figures above: its delete request -> no pod of it left.
    teardown: Option<f64>,
    load: f64,
}

impl Run {
    fn jobset_reconciles(&self) -> Option<f64> {
        self.controllers.as_ref().map(|c| c.jobset_reconciles)
    }
}

// ---------------------------------------------------------------------------------------
// Small helpers

fn env_or<T: FromStr>(name: &str, default: T) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|e| anyhow::anyhow!("{name}={v}: {e}")),
        _ => Ok(default),
    }
}

fn env_list<T: FromStr>(name: &str, default: &str) -> Result<Vec<T>>
where
    T::Err: std::fmt::Display,
{
    let v = std::env::var(name).unwrap_or_else(|_| default.to_string());
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|e| anyhow::anyhow!("{name}: {s}: {e}")))
        .collect()
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process, in seconds.
fn cpu_secs(pid: u32, ticks: f64) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces), from field 3 (state) on.
    let rest = stat.rsplit_once(')').context("malformed stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11).context("no utime")?.parse()?;
    let stime: f64 = fields.get(12).context("no stime")?.parse()?;
    Ok((utime + stime) / ticks)
}

/// Peak resident set size (VmHWM) in MiB.
fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn read_pid(path: &Path) -> Result<u32> {
    std::fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .parse()
        .with_context(|| format!("parsing {}", path.display()))
}

/// (name, pid) of the control plane's processes, from their pid files under `E2E_STATE`
/// (the cluster `E2E_CLUSTER`).
fn control_plane(state: &Path) -> Result<Vec<(&'static str, u32)>> {
    let cluster = std::env::var("E2E_CLUSTER").unwrap_or_else(|_| "flux-operator-e2e".into());
    let kwok_pids = state.join("kwok/clusters").join(&cluster).join("pids");
    let mut procs = Vec::new();
    for (name, file) in [
        ("kube-apiserver", kwok_pids.join("kube-apiserver.pid")),
        ("jobset", state.join("pids/jobset.pid")),
        (
            "kube-controller-manager",
            kwok_pids.join("kube-controller-manager.pid"),
        ),
        ("kube-scheduler", kwok_pids.join("kube-scheduler.pid")),
        ("kwok", kwok_pids.join("kwok-controller.pid")),
        ("etcd", kwok_pids.join("etcd.pid")),
    ] {
        procs.push((name, read_pid(&file)?));
    }
    Ok(procs)
}

fn api_stats_from(text: &str) -> ApiStats {
    let mut s = ApiStats::default();
    for line in text.lines() {
        let Some((name, labels, value)) = parse_sample(line) else {
            continue;
        };
        match name {
            "apiserver_request_total" => {
                let resource = label(&labels, "resource");
                let key = if resource.is_empty() {
                    format!("{} (non-resource)", label(&labels, "verb"))
                } else {
                    let group = label(&labels, "group");
                    let sub = label(&labels, "subresource");
                    let mut k = format!("{} {resource}", label(&labels, "verb"));
                    if !group.is_empty() {
                        k.push('.');
                        k.push_str(group);
                    }
                    if !sub.is_empty() {
                        k.push('/');
                        k.push_str(sub);
                    }
                    k
                };
                *s.requests.entry(key).or_default() += value;
            }
            "apiserver_admission_webhook_admission_duration_seconds_sum" => {
                *s.webhook_secs
                    .entry(label(&labels, "name").to_string())
                    .or_default() += value;
            }
            "apiserver_admission_webhook_admission_duration_seconds_count" => {
                *s.webhook_calls
                    .entry(label(&labels, "name").to_string())
                    .or_default() += value;
            }
            "apiserver_request_duration_seconds_sum"
                if label(&labels, "verb") == "POST"
                    && label(&labels, "resource") == "pods"
                    && label(&labels, "subresource").is_empty() =>
            {
                s.pod_create_secs += value;
            }
            "apiserver_request_duration_seconds_count"
                if label(&labels, "verb") == "POST"
                    && label(&labels, "resource") == "pods"
                    && label(&labels, "subresource").is_empty() =>
            {
                s.pod_creates += value;
            }
            _ => {}
        }
    }
    s
}

/// The MiniCluster every arm runs: the same file for both operators and for `render`.
fn minicluster_yaml(name: &str, namespace: &str, size: usize, max_size: Option<usize>) -> String {
    let max_size = max_size.map_or(String::new(), |m| format!("  maxSize: {m}\n"));
    format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {name}\n  \
         namespace: {namespace}\nspec:\n  size: {size}\n{max_size}  containers:\n    - image: rockylinux:9\n      \
         command: sleep infinity\n"
    )
}

// ---------------------------------------------------------------------------------------
// Objects to apply

/// An object ready to be sent: its API, name and body.
struct Apply {
    api: Api<DynamicObject>,
    name: String,
    obj: DynamicObject,
    /// Its field manager ([`FIELD_MANAGER`] unless it is a resize's).
    manager: &'static str,
}

impl Apply {
    fn kind(&self) -> &str {
        self.obj.types.as_ref().map_or("?", |t| t.kind.as_str())
    }

    /// What holds the pods: deleted first in a teardown.
    fn is_workload(&self) -> bool {
        matches!(self.kind(), "MiniCluster" | "JobSet" | "Job")
    }
}

fn to_apply(client: &Client, v: Value) -> Result<Apply> {
    let api_version = v["apiVersion"].as_str().context("no apiVersion")?;
    let kind = v["kind"].as_str().context("no kind")?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let ar = api_resource(group, version, kind, &format!("{}s", kind.to_lowercase()));
    let obj = dynamic_object(v)?;
    let api = match obj.metadata.namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    Ok(Apply {
        api,
        name: obj.name_any(),
        obj,
        manager: FIELD_MANAGER,
    })
}

async fn apply(a: &Apply) -> Result<()> {
    a.api
        .patch(
            &a.name,
            &PatchParams::apply(a.manager).force(),
            &Patch::Apply(&a.obj),
        )
        .await
        .with_context(|| format!("applying {} {}", a.kind(), a.name))?;
    Ok(())
}

/// Delete with background propagation, as kubectl does (gone already is fine).
async fn delete(a: &Apply) -> Result<()> {
    match a.api.delete(&a.name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting {} {}", a.kind(), a.name)),
    }
}

// ---------------------------------------------------------------------------------------
// An operator process

/// A command running `bin`, under `BENCH_WRAP` when it is set: a diagnostic prefix, a
/// program given the operator's command line (a heap profiler's launcher). It should `exec`
/// the operator, so that the signals and the figures from /proc reach the operator and not
/// the wrapper.
fn wrapped(bin: &Path) -> Command {
    let wrap = std::env::var("BENCH_WRAP").unwrap_or_default();
    let mut words = wrap.split_whitespace();
    let Some(first) = words.next() else {
        return Command::new(bin);
    };
    let mut c = Command::new(first);
    c.args(words).arg(bin);
    c
}

struct OperatorProc {
    arm: Arm,
    child: Child,
    metrics_port: u16,
    health_port: u16,
    log: PathBuf,
}

impl OperatorProc {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    async fn wait_ready(&mut self) -> Result<()> {
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
    async fn reconciles(&self) -> Option<f64> {
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
    async fn reconcile_quantiles(&self) -> (Option<(f64, f64)>, Option<(f64, f64)>) {
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
    fn stop(mut self) {
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

// ---------------------------------------------------------------------------------------
// The bench

struct Bench {
    client: Client,
    root: PathBuf,
    state: PathBuf,
    kubeconfig: PathBuf,
    operator_bin: PathBuf,
    go_dir: Option<PathBuf>,
    work: tempfile::TempDir,
    logs: PathBuf,
    /// (name, pid) of the control plane's processes.
    procs: Vec<(&'static str, u32)>,
    ticks: f64,
    crd: Option<Crd>,
    /// A token that may read JobSet's and Kueue's /metrics.
    metrics_token: Option<String>,
    jobset_metrics_port: Option<u16>,
    kueue_metrics_port: Option<u16>,
    idle: Duration,
    /// Namespaces of earlier runs the namespace controller is still removing.
    pending: Vec<String>,
}

impl Bench {
    async fn new(arms: &[Arm], idle: Duration) -> Result<Self> {
        let kubeconfig = PathBuf::from(
            std::env::var("KUBECONFIG").context("KUBECONFIG is not set: run through make bench")?,
        );
        let state = PathBuf::from(std::env::var("E2E_STATE").context("E2E_STATE is not set")?);
        let procs = control_plane(&state)?;
        // (`make bench` has built it: this only reads the stamp.)
        let go_dir = if arms.contains(&Arm::Go) {
            Some(built_go_operator()?)
        } else {
            None
        };
        let ports = std::fs::read_to_string(state.join("ports.env")).unwrap_or_default();
        let port = |key: &str| {
            ports
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .and_then(|p| p.trim().parse().ok())
        };
        let (jobset_metrics_port, kueue_metrics_port) =
            (port("JOBSET_METRICS_PORT"), port("KUEUE_METRICS_PORT"));
        let logs = state.join("logs/bench");
        std::fs::create_dir_all(&logs)?;
        let client = common::client().await?;
        // Teardown needs the collector to know JobSets (their Jobs and pods go through it);
        // the MiniCluster kind is checked each time its CRD is installed (`replace_crd`).
        common::collector_knows(&client, "jobset.x-k8s.io/v1alpha2", "JobSet").await?;
        Ok(Self {
            client,
            root: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
            kubeconfig,
            operator_bin: PathBuf::from(env!("CARGO_BIN_EXE_flux-operator")),
            go_dir,
            work: tempfile::tempdir()?,
            logs,
            procs,
            ticks: clock_ticks(),
            crd: None,
            metrics_token: None,
            jobset_metrics_port,
            kueue_metrics_port,
            idle,
            state,
            pending: Vec::new(),
        })
    }

    /// Fail when a process of the control plane is gone (nothing restarts it here).
    fn check_control_plane(&self) -> Result<()> {
        for (name, pid) in &self.procs {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .map(|(_, r)| r.trim_start().starts_with('Z'))
                        .map(|z| !z)
                })
                .unwrap_or(false);
            ensure!(
                state,
                "{name} (pid {pid}) has exited; its log is under {}",
                self.state.display()
            );
        }
        Ok(())
    }

    fn cpu(&self, operator: Option<u32>) -> Result<Cpu> {
        let mut out = Cpu::new();
        for (name, pid) in &self.procs {
            out.insert(*name, cpu_secs(*pid, self.ticks)?);
        }
        if let Some(pid) = operator {
            out.insert("operator", cpu_secs(pid, self.ticks)?);
        }
        Ok(out)
    }

    async fn api_stats(&self) -> Result<ApiStats> {
        let req = http::Request::get("/metrics").body(Vec::new())?;
        let text = self.client.request_text(req).await?;
        Ok(api_stats_from(&text))
    }

    /// A ServiceAccount token that may read JobSet's /metrics (served with authentication
    /// and authorization through the apiserver, as controller-runtime does).
    async fn jobset_metrics_access(&mut self) -> Result<()> {
        let objs = [
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "bench-metrics", "namespace": "default"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "bench-metrics"},
                   "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "bench-metrics"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "bench-metrics"},
                   "subjects": [{"kind": "ServiceAccount", "name": "bench-metrics",
                                 "namespace": "default"}]}),
        ];
        for o in objs {
            apply(&to_apply(&self.client, o)?).await?;
        }
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), "default");
        let tr = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(4 * 3600),
                ..Default::default()
            }),
            ..Default::default()
        };
        let tr = sas
            .create_token_request("bench-metrics", &PostParams::default(), &tr)
            .await?;
        self.metrics_token = tr.status.and_then(|s| s.token);
        Ok(())
    }

    /// A controller's /metrics over HTTPS with the token (None when it does not answer).
    fn secure_metrics(&self, port: Option<u16>) -> Option<String> {
        let (token, port) = (self.metrics_token.as_ref()?, port?);
        let out = Command::new("curl")
            .args(["-fsS", "--max-time", "5", "--cacert"])
            .arg(self.state.join("certs/ca.crt"))
            .args(["-H", &format!("Authorization: Bearer {token}")])
            .arg(format!("https://127.0.0.1:{port}/metrics"))
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// JobSet's reconciles and both controllers' webhook figures so far (None when
    /// JobSet's metrics cannot be read).
    fn controllers(&self) -> Option<Controllers> {
        let jobset = self.secure_metrics(self.jobset_metrics_port)?;
        let mut c = Controllers {
            jobset_reconciles: sum_samples(
                &jobset,
                "controller_runtime_reconcile_total",
                &[("controller", "jobset")],
            )?,
            ..Default::default()
        };
        let kueue = self.secure_metrics(self.kueue_metrics_port);
        for (who, text) in [("JobSet", Some(jobset)), ("Kueue", kueue)] {
            for line in text.as_deref().unwrap_or("").lines() {
                let Some((name, labels, value)) = parse_sample(line) else {
                    continue;
                };
                let key = format!("{who} {}", label(&labels, "webhook"));
                match name {
                    "controller_runtime_webhook_latency_seconds_sum" => {
                        *c.webhook_secs.entry(key).or_default() += value
                    }
                    "controller_runtime_webhook_latency_seconds_count" => {
                        *c.webhook_calls.entry(key).or_default() += value
                    }
                    _ => {}
                }
            }
        }
        Some(c)
    }

    /// Install this CRD, replacing the other one (both are miniclusters.flux-framework.org).
    async fn ensure_crd(&mut self, want: Crd) -> Result<()> {
        if self.crd == Some(want) {
            return Ok(());
        }
        let t0 = Instant::now();
        let path = match want {
            Crd::Ours => self.root.join("crds/flux-framework.org_miniclusters.yaml"),
            Crd::Go => self
                .go_dir
                .as_ref()
                .context("no Go operator")?
                .join("src")
                .join(GO_CRD),
        };
        replace_crd(&self.client, &crd_from_file(&path)?).await?;
        self.crd = Some(want);
        eprintln!(
            "  installed the {} MiniCluster CRD in {:.1} s",
            if want == Crd::Ours {
                "operator's"
            } else {
                "Go operator's"
            },
            t0.elapsed().as_secs_f64()
        );
        Ok(())
    }

    fn start_operator(&self, arm: Arm, tag: &str) -> Result<OperatorProc> {
        let metrics_port = free_port()?;
        let health_port = free_port()?;
        let log = self.logs.join(format!("{tag}.log"));
        let out = std::fs::File::create(&log)?;
        let mut cmd = match arm {
            Arm::Operator => {
                let mut c = wrapped(&self.operator_bin);
                c.args([
                    "run",
                    "--cluster-domain",
                    "cluster.local",
                    "--leader-election=false",
                ])
                .args(["--log-format", "text", "--metrics-addr"])
                .arg(format!("127.0.0.1:{metrics_port}"))
                .arg("--metrics-insecure-loopback")
                .env(
                    "RUST_LOG",
                    std::env::var("BENCH_RUST_LOG").unwrap_or_else(|_| "info".into()),
                );
                c
            }
            Arm::Go => {
                // It watches every namespace: killed with the bench (see benches/arms), so a
                // killed bench leaves no manager behind to reconcile the next run's objects.
                // setpriv execs it: the pid this bench measures is the manager's.
                let mut c = Command::new("setpriv");
                c.args(["--pdeathsig", "KILL", "--"]).arg(
                    self.go_dir
                        .as_ref()
                        .context("no Go operator")?
                        .join("bin/manager"),
                );
                c.arg("--kubeconfig")
                    .arg(&self.kubeconfig)
                    .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
                    .arg(format!(
                        "--health-probe-bind-address=127.0.0.1:{health_port}"
                    ))
                    .arg("-zap-devel=false");
                c
            }
            _ => bail!("{} runs no operator", arm.title()),
        };
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .current_dir(self.work.path());
        let child =
            spawn_logged(&mut cmd, out).with_context(|| format!("starting {}", arm.title()))?;
        Ok(OperatorProc {
            arm,
            child,
            metrics_port,
            health_port,
            log,
        })
    }

    /// What the arm applies for these MiniClusters, as ready-to-send requests.
    fn objects(
        &self,
        arm: Arm,
        names: &[String],
        ns: &str,
        size: usize,
        max_size: Option<usize>,
    ) -> Result<Vec<Apply>> {
        let mut out = Vec::new();
        for name in names {
            let yaml = minicluster_yaml(name, ns, size, max_size);
            let docs = match arm {
                Arm::Operator | Arm::Go => yaml_documents(&yaml)?,
                Arm::JobSet | Arm::JobSetNoPodWebhooks | Arm::Job => {
                    let file = self.work.path().join(format!("{ns}-{name}.yaml"));
                    std::fs::write(&file, &yaml)?;
                    let rendered = Command::new(&self.operator_bin)
                        .args(["render", "--cluster-domain", "cluster.local", "-f"])
                        .arg(&file)
                        .stderr(Stdio::inherit())
                        .output()?;
                    ensure!(rendered.status.success(), "flux-operator render failed");
                    let docs = yaml_documents(&String::from_utf8(rendered.stdout)?)?;
                    if arm == Arm::Job {
                        let mut out = Vec::new();
                        for d in docs {
                            if d["kind"] == "JobSet" {
                                out.extend(one_indexed_job(&d, size)?);
                            } else {
                                out.push(d);
                            }
                        }
                        out
                    } else {
                        docs
                    }
                }
            };
            for d in docs {
                out.push(to_apply(&self.client, d)?);
            }
        }
        Ok(out)
    }

    /// Point JobSet's pod webhooks at no pod (`on = false`) or back at JobSet's pods.
    async fn jobset_pod_webhooks(&self, on: bool) -> Result<()> {
        let selector = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: if on {
                    JOBSET_NAME_LABEL
                } else {
                    "bench.flux-framework.org/no-pod-has-this"
                }
                .to_string(),
                operator: "Exists".into(),
                values: None,
            }]),
            match_labels: None,
        };
        let m: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        let mut cfg = m.get(JOBSET_MUTATING).await?;
        for w in cfg.webhooks.iter_mut().flatten() {
            if w.name == "mpod.kb.io" {
                w.object_selector = Some(selector.clone());
            }
        }
        m.replace(JOBSET_MUTATING, &PostParams::default(), &cfg)
            .await?;
        let v: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        let mut cfg = v.get(JOBSET_VALIDATING).await?;
        for w in cfg.webhooks.iter_mut().flatten() {
            if w.name == "vpod.kb.io" {
                w.object_selector = Some(selector.clone());
            }
        }
        v.replace(JOBSET_VALIDATING, &PostParams::default(), &cfg)
            .await?;
        // The apiserver picks webhook configurations up from its informer.
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(())
    }

    /// Delete the namespace and force its pods away; return when no pod is left in it (the
    /// namespace controller finishes the rest in the background).
    async fn delete_namespace(&self, ns: &str) -> Result<()> {
        let nss: Api<Namespace> = Api::all(self.client.clone());
        nss.delete(ns, &DeleteParams::background()).await?;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let force = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::background()
        };
        let t0 = Instant::now();
        let mut last_force = None::<Instant>;
        loop {
            if last_force.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
                let _ = pods.delete_collection(&force, &ListParams::default()).await;
                last_force = Some(Instant::now());
            }
            if pods
                .list(&ListParams::default().limit(1))
                .await?
                .items
                .is_empty()
            {
                return Ok(());
            }
            ensure!(
                t0.elapsed() < Duration::from_secs(300),
                "pods of {ns} still there after 300 s"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Only the arm's operator may write MiniCluster status: a second controller of
    /// MiniClusters (a forgotten operator, another session's) would make both reconcile
    /// without end and every figure meaningless.
    async fn check_status_writers(&self, ns: &str, arm: Arm) -> Result<()> {
        let mcs: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &minicluster_resource());
        let expected = match arm {
            Arm::Operator => "flux-operator",
            _ => "manager",
        };
        let mut writers = BTreeSet::new();
        for mc in mcs.list(&ListParams::default()).await? {
            for f in mc.metadata.managed_fields.iter().flatten() {
                if f.subresource.as_deref() == Some("status") {
                    writers.insert(f.manager.clone().unwrap_or_default());
                }
            }
        }
        writers.remove(expected);
        ensure!(
            writers.is_empty(),
            "MiniCluster status in {ns} is also written by {writers:?}, not only by {expected}: \
             another MiniCluster controller runs against this cluster; stop it and run again"
        );
        Ok(())
    }

    /// Wait until the namespaces of earlier runs are gone, so that the namespace
    /// controller's work does not fall into the next measurement.
    async fn wait_pending(&mut self) -> Result<()> {
        let nss: Api<Namespace> = Api::all(self.client.clone());
        for ns in std::mem::take(&mut self.pending) {
            let what = format!("namespace {ns} gone");
            wait_for_every(&what, Duration::from_secs(300), POLL, || async {
                Ok(nss.get_opt(&ns).await?.is_none().then_some(()))
            })
            .await?;
        }
        Ok(())
    }

    /// What a run of `scenario` under `arm` applies in `ns`, ready to send.
    fn steps(&self, scenario: Scenario, arm: Arm, ns: &str) -> Result<Steps> {
        let one = ["bench".to_string()];
        Ok(match scenario {
            Scenario::Single(n) => Steps {
                timed: self.objects(arm, &one, ns, n, None)?,
                pods: n,
                before: Vec::new(),
                before_pods: 0,
            },
            Scenario::Many(m) => {
                let names: Vec<String> = (0..m).map(|i| format!("bench-{i}")).collect();
                Steps {
                    timed: self.objects(arm, &names, ns, 2, None)?,
                    pods: 2 * m,
                    before: Vec::new(),
                    before_pods: 0,
                }
            }
            Scenario::Resize(a, b) => Steps {
                before: self.objects(arm, &one, ns, a, Some(b))?,
                before_pods: a,
                timed: vec![self.resize_request(arm, ns, &one[0], b)?],
                pods: b,
            },
            Scenario::End(n) => Steps {
                before: self.objects(arm, &one, ns, n, None)?,
                before_pods: n,
                timed: Vec::new(),
                pods: n,
            },
        })
    }

    /// The request that grows the MiniCluster `name` (of maxSize `b`) to size `b`: for the
    /// operators, the same MiniCluster applied at size `b`; for the bare JobSet, the apply
    /// the operator makes for that change (`render::jobset::update` of the MiniCluster at
    /// size `b`, as `controller::apply` sends it: field manager `UPDATE_MANAGER`, forced);
    /// for the one Job, its parallelism and completions.
    fn resize_request(&self, arm: Arm, ns: &str, name: &str, b: usize) -> Result<Apply> {
        let yaml = minicluster_yaml(name, ns, b, Some(b));
        match arm {
            Arm::Operator | Arm::Go => {
                let mc = yaml_documents(&yaml)?
                    .into_iter()
                    .next()
                    .context("no MiniCluster")?;
                to_apply(&self.client, mc)
            }
            Arm::JobSet | Arm::JobSetNoPodWebhooks => {
                let mc = parse_minicluster(&yaml)?;
                // In no Kueue queue: the operator sends `suspend` as the spec has it.
                let update = render::jobset::update(&mc, Some(mc.spec.suspend))
                    .context("the operator makes no JobSet update for an elastic MiniCluster")?;
                Ok(Apply {
                    manager: UPDATE_MANAGER,
                    ..to_apply(&self.client, update)?
                })
            }
            Arm::Job => {
                let job = json!({
                    "apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"parallelism": b, "completions": b},
                });
                Ok(Apply {
                    manager: RESIZE_MANAGER,
                    ..to_apply(&self.client, job)?
                })
            }
        }
    }

    async fn run(&mut self, scenario: Scenario, arm: Arm, round: usize) -> Result<Run> {
        let ns = format!("bench-{}-{}-r{round}", arm.key(), scenario.tag());
        if let Some(crd) = arm.crd() {
            self.ensure_crd(crd).await?;
        }
        let labels = json!({"bench.flux-framework.org/run": "true"});
        create_namespace(&self.client, &ns, labels).await?;
        let steps = self.steps(scenario, arm, &ns)?;

        let mut operator = match arm {
            Arm::Operator | Arm::Go => {
                let mut p = self.start_operator(arm, &ns)?;
                p.wait_ready().await?;
                tokio::time::sleep(SETTLE).await;
                Some(p)
            }
            _ => None,
        };
        if arm == Arm::JobSetNoPodWebhooks {
            self.jobset_pod_webhooks(false).await?;
        }
        // (the operator started meanwhile)
        let t = Instant::now();
        self.wait_pending().await?;
        if t.elapsed() > Duration::from_secs(1) {
            eprintln!(
                "  waited {:.1} s more for the last run's namespace to go",
                t.elapsed().as_secs_f64()
            );
        }
        let result = self
            .measure_all(scenario, arm, &ns, &steps, operator.as_mut())
            .await;
        if arm == Arm::JobSetNoPodWebhooks {
            self.jobset_pod_webhooks(true).await?;
        }
        // The operator keeps running while its objects go, then stops.
        let deleted = match self.check_control_plane() {
            Ok(()) => self.delete_namespace(&ns).await,
            Err(e) => Err(e),
        };
        if let Some(p) = operator {
            p.stop();
        }
        self.pending.push(ns);
        let run = result?;
        deleted?;
        Ok(Run { round, ..run })
    }

    /// The steps before the clock ([`Self::start_from`]), [`Self::measure`], then (one
    /// MiniCluster) [`Self::teardown`].
    async fn measure_all(
        &self,
        scenario: Scenario,
        arm: Arm,
        ns: &str,
        steps: &Steps,
        operator: Option<&mut OperatorProc>,
    ) -> Result<Run> {
        if !steps.before.is_empty() {
            self.start_from(arm, ns, &steps.before, steps.before_pods)
                .await?;
        }
        let run = match scenario {
            Scenario::End(n) => self.measure_end(scenario, arm, ns, n, operator).await?,
            _ => {
                self.measure(scenario, arm, ns, &steps.timed, steps.pods, operator)
                    .await?
            }
        };
        self.check_control_plane()?;
        let teardown = match scenario {
            Scenario::Single(_) => Some(self.teardown(ns, &steps.timed, steps.pods).await?),
            Scenario::Many(_) | Scenario::Resize(..) | Scenario::End(_) => None,
        };
        self.check_control_plane()?;
        Ok(Run { teardown, ..run })
    }

    /// A pod watch of `ns` until `pods` pods are Ready, returned once it has listed and
    /// watches (so it sees every pod made after this returns).
    async fn pod_watch(
        &self,
        ns: &str,
        pods: usize,
    ) -> Result<tokio::task::JoinHandle<Result<Timeline>>> {
        let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
        let watch = tokio::spawn(watch_pods(
            Api::namespaced(self.client.clone(), ns),
            pods,
            synced_tx,
        ));
        synced_rx
            .await
            .context("the pod watch ended before it synced")?;
        Ok(watch)
    }

    /// Before the clock (a resize's starting size): apply `objects`, wait until `pods` pods
    /// are Ready and (this operator) its status says Running, then [`SETTLE`], so that the
    /// clock times the change alone.
    async fn start_from(&self, arm: Arm, ns: &str, objects: &[Apply], pods: usize) -> Result<()> {
        let watch = self.pod_watch(ns, pods).await?;
        for a in objects {
            apply(a).await?;
        }
        let limit = pods_limit(pods);
        tokio::time::timeout(limit, watch)
            .await
            .with_context(|| format!("{pods} pods not Ready after {} s", limit.as_secs()))???;
        if arm == Arm::Operator {
            self.wait_running(ns, Instant::now()).await?;
        }
        tokio::time::sleep(SETTLE).await;
        Ok(())
    }

    /// Delete what the arm applied, its workload first (the MiniCluster; or the JobSet, or
    /// the Job, then the rest), with background propagation as kubectl deletes: seconds from
    /// the first delete request until the pod watch has seen no pod left in `ns` (each one
    /// deleted from the API, not only terminating).
    async fn teardown(&self, ns: &str, objects: &[Apply], pods: usize) -> Result<f64> {
        let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
        let watch = tokio::spawn(watch_no_pods(
            Api::namespaced(self.client.clone(), ns),
            None,
            synced_tx,
        ));
        synced_rx
            .await
            .context("the pod watch ended before it synced")?;
        let (workload, rest): (Vec<&Apply>, Vec<&Apply>) =
            objects.iter().partition(|a| a.is_workload());
        let t0 = Instant::now();
        for a in workload.into_iter().chain(rest) {
            delete(a).await?;
        }
        let limit = pods_limit(pods);
        let gone = tokio::time::timeout(limit, watch)
            .await
            .with_context(|| {
                format!(
                    "pods of {ns} still there {} s after the delete",
                    limit.as_secs()
                )
            })???;
        Ok(gone.saturating_duration_since(t0).as_secs_f64())
    }

    async fn measure(
        &self,
        scenario: Scenario,
        arm: Arm,
        ns: &str,
        objects: &[Apply],
        pods: usize,
        operator: Option<&mut OperatorProc>,
    ) -> Result<Run> {
        let op_pid = operator.as_ref().map(|p| p.pid());
        // The pod watch is open (listed, watching) before the first request.
        let watch = self.pod_watch(ns, pods).await?;
        let ctl0 = self.controllers();
        let api0 = self.api_stats().await?;
        let cpu0 = self.cpu(op_pid)?;
        let t0 = Instant::now();
        for a in objects {
            apply(a).await?;
        }
        let limit = pods_limit(pods);
        let timeline = tokio::time::timeout(limit, watch)
            .await
            .with_context(|| format!("{pods} pods not Ready after {} s", limit.as_secs()))???;
        let cpu1 = self.cpu(op_pid)?;
        let api1 = self.api_stats().await?;
        let ctl1 = self.controllers();
        if let Some(p) = &operator {
            self.check_status_writers(ns, p.arm).await?;
        }
        // This operator's status: until every MiniCluster says Running (after the window
        // above, so its polling is not counted). The idle window starts after it. (A resized
        // MiniCluster said Running before the clock.)
        let running = match (arm, scenario) {
            (Arm::Operator, Scenario::Single(_) | Scenario::Many(_)) => {
                Some(self.wait_running(ns, t0).await?)
            }
            _ => None,
        };
        let idle = match scenario {
            Scenario::Many(_) => Some(self.idle_window(operator.as_deref(), ctl1.as_ref()).await?),
            Scenario::Single(_) | Scenario::Resize(..) | Scenario::End(_) => None,
        };
        let (reconcile_ms, decide_ms) = match &operator {
            Some(p) => p.reconcile_quantiles().await,
            None => (None, None),
        };
        let secs = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
        Ok(Run {
            scenario,
            arm,
            round: 0, // set by the caller
            secs: secs(timeline.all_ready),
            first_pod: secs(timeline.first_pod),
            all_created: secs(timeline.all_created),
            cpu: cpu_minus(&cpu1, &cpu0),
            peak_rss_mib: op_pid.and_then(peak_rss_mib),
            reconcile_ms,
            decide_ms,
            api: api1.minus(&api0),
            controllers: ctl0.zip(ctl1).map(|(a, b)| b.minus(&a)),
            idle,
            running,
            teardown: None, // measured after
            load: load_average(),
        })
    }

    /// The end of a batch cluster of `pods` pods, Ready (issue 32): its lead pod's status set
    /// to Succeeded, as the kubelet reports it once the lead broker exited 0, then seconds
    /// until the pod watch has seen every other pod deleted from the API. The CPU and the
    /// requests over that window.
    async fn measure_end(
        &self,
        scenario: Scenario,
        arm: Arm,
        ns: &str,
        pods: usize,
        operator: Option<&mut OperatorProc>,
    ) -> Result<Run> {
        let op_pid = operator.as_ref().map(|p| p.pid());
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let lead = api
            .list(&ListParams::default().labels("flux-framework.org/role=lead"))
            .await?
            .items
            .first()
            .map(|p| p.name_any())
            .context("no lead pod")?;
        let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
        let watch = tokio::spawn(watch_no_pods(api.clone(), Some(lead.clone()), synced_tx));
        synced_rx
            .await
            .context("the pod watch ended before it synced")?;
        let ctl0 = self.controllers();
        let api0 = self.api_stats().await?;
        let cpu0 = self.cpu(op_pid)?;
        let t0 = Instant::now();
        let succeeded = json!({"status": {"phase": "Succeeded"}});
        api.patch_status(&lead, &PatchParams::default(), &Patch::Merge(&succeeded))
            .await
            .with_context(|| format!("setting {lead} Succeeded"))?;
        let limit = pods_limit(pods);
        let gone = tokio::time::timeout(limit, watch)
            .await
            .with_context(|| {
                format!(
                    "followers of {ns} still there {} s after the lead's end",
                    limit.as_secs()
                )
            })???;
        let cpu1 = self.cpu(op_pid)?;
        let api1 = self.api_stats().await?;
        let ctl1 = self.controllers();
        let secs = gone.saturating_duration_since(t0).as_secs_f64();
        Ok(Run {
            scenario,
            arm,
            round: 0, // set by the caller
            secs,
            first_pod: 0.0,
            all_created: 0.0,
            cpu: cpu_minus(&cpu1, &cpu0),
            peak_rss_mib: op_pid.and_then(peak_rss_mib),
            reconcile_ms: None,
            decide_ms: None,
            api: api1.minus(&api0),
            controllers: ctl0.zip(ctl1).map(|(a, b)| b.minus(&a)),
            idle: None,
            running: None,
            teardown: None,
            load: load_average(),
        })
    }

    /// Seconds from `t0` until every MiniCluster in `ns` says Running in its status (looked
    /// at every [`POLL`]).
    async fn wait_running(&self, ns: &str, t0: Instant) -> Result<f64> {
        let mcs: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &minicluster_resource());
        let all_running = || async {
            let list = mcs.list(&ListParams::default()).await?;
            let all = list
                .items
                .iter()
                .all(|mc| mc.data["status"]["phase"] == "Running");
            Ok(all.then_some(()))
        };
        let what = "every MiniCluster Running";
        wait_for_every(what, Duration::from_secs(120), POLL, all_running).await?;
        Ok(t0.elapsed().as_secs_f64())
    }

    /// `self.idle` of nothing after a many-clusters run: what the operator, JobSet and the
    /// apiserver do meanwhile. `ctl1`: the controllers' figures at its start.
    async fn idle_window(
        &self,
        operator: Option<&OperatorProc>,
        ctl1: Option<&Controllers>,
    ) -> Result<Idle> {
        let op_pid = operator.map(|p| p.pid());
        let op_a = match operator {
            Some(p) => p.reconciles().await,
            None => None,
        };
        let api_a = self.api_stats().await?;
        let cpu_a = self.cpu(op_pid)?;
        // The operator's reconcile count every second: when did it settle?
        let window = Instant::now();
        let mut samples: Vec<(f64, f64)> = op_a.map(|c| (0.0, c)).into_iter().collect();
        while window.elapsed() < self.idle {
            let left = self.idle.saturating_sub(window.elapsed());
            tokio::time::sleep(left.min(Duration::from_secs(1))).await;
            if let Some(p) = operator
                && let Some(c) = p.reconciles().await
            {
                samples.push((window.elapsed().as_secs_f64(), c));
            }
        }
        let (late, last) = settling(&samples, self.idle);
        let cpu_b = self.cpu(op_pid)?;
        let api_b = self.api_stats().await?;
        let op_b = match operator {
            Some(p) => p.reconciles().await,
            None => None,
        };
        let ctl_b = self.controllers();
        Ok(Idle {
            operator_reconciles: op_a.zip(op_b).map(|(a, b)| b - a),
            operator_reconciles_late: late,
            operator_last_reconcile: last,
            jobset_reconciles: ctl1
                .zip(ctl_b.as_ref())
                .map(|(a, b)| b.jobset_reconciles - a.jobset_reconciles),
            api: api_b.minus(&api_a),
            cpu: cpu_minus(&cpu_b, &cpu_a),
        })
    }
}

/// From (seconds into the idle window, reconciles so far) samples: the reconciles in the
/// window's second half, and the seconds into it of the last one (0: none in the window).
fn settling(samples: &[(f64, f64)], idle: Duration) -> (Option<f64>, Option<f64>) {
    let half = idle.as_secs_f64() / 2.0;
    let late = samples
        .iter()
        .find(|(t, _)| *t >= half)
        .zip(samples.last())
        .map(|((_, a), (_, b))| b - a);
    let last = samples
        .windows(2)
        .filter(|w| w[1].1 > w[0].1)
        .map(|w| w[1].0)
        .next_back()
        .or(samples.first().map(|_| 0.0));
    (late, last)
}

/// The rendered JobSet's workers template as one Indexed Job of `size` pods, named as the
/// JobSet, and the headless Service JobSet would make for it (`network.subdomain`, not-ready
/// addresses published): the JobSet without JobSet (diagnostic arm `job`).
fn one_indexed_job(jobset: &Value, size: usize) -> Result<Vec<Value>> {
    let name = &jobset["metadata"]["name"];
    let rjobs = jobset["spec"]["replicatedJobs"]
        .as_array()
        .context("no replicatedJobs")?;
    let workers = rjobs
        .iter()
        .find(|r| r["name"] == "workers")
        .or_else(|| rjobs.first())
        .context("empty replicatedJobs")?;
    let subdomain = jobset["spec"]["network"]["subdomain"]
        .as_str()
        .map_or(name.clone(), |s| json!(s));
    let mut spec = workers["template"]["spec"].clone();
    spec["completions"] = json!(size);
    spec["parallelism"] = json!(size);
    spec["completionMode"] = json!("Indexed");
    spec["template"]["spec"]["subdomain"] = subdomain.clone();
    let metadata = json!({
        "namespace": jobset["metadata"]["namespace"],
        "labels": jobset["metadata"]["labels"],
    });
    let mut service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": true,
            "selector": {"flux-framework.org/minicluster": name},
        },
    });
    service["metadata"]["name"] = subdomain;
    let mut job =
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec});
    job["metadata"]["name"] = name.clone();
    Ok(vec![service, job])
}

/// How long to wait for `pods` pods to be Ready, or gone.
fn pods_limit(pods: usize) -> Duration {
    Duration::from_secs(120) + Duration::from_millis(500) * pods as u32
}

/// What a run applies: before the clock (a resize's MiniCluster at its starting size, until
/// `before_pods` pods are Ready), then once it starts; `pods` pods Ready stop it.
struct Steps {
    before: Vec<Apply>,
    before_pods: usize,
    timed: Vec<Apply>,
    pods: usize,
}

struct Timeline {
    first_pod: Instant,
    all_created: Instant,
    all_ready: Instant,
}

/// Watch the namespace's pods until `target` of them are Ready; tell `synced` once the
/// watch has listed.
async fn watch_pods(
    api: Api<Pod>,
    target: usize,
    synced: tokio::sync::oneshot::Sender<()>,
) -> Result<Timeline> {
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut synced = Some(synced);
    let mut seen = HashSet::new();
    let mut ready = HashSet::new();
    let (mut first_pod, mut all_created) = (None, None);
    while let Some(event) = stream.next().await {
        let now = Instant::now();
        match event {
            Ok(watcher::Event::InitDone) => {
                if let Some(tx) = synced.take() {
                    let _ = tx.send(());
                }
            }
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                let name = pod.name_any();
                // (The first pod is the first one new since the list: a resize starts with
                // pods.)
                if seen.insert(name.clone()) {
                    if synced.is_none() {
                        first_pod.get_or_insert(now);
                    }
                    if seen.len() == target {
                        all_created = Some(now);
                    }
                }
                if pod_ready(&pod) {
                    ready.insert(name);
                } else {
                    ready.remove(&name);
                }
                if ready.len() >= target {
                    return Ok(Timeline {
                        first_pod: first_pod.unwrap_or(now),
                        all_created: all_created.unwrap_or(now),
                        all_ready: now,
                    });
                }
            }
            Ok(watcher::Event::Delete(pod)) => {
                ready.remove(&pod.name_any());
            }
            Ok(watcher::Event::Init) => {}
            Err(e) => eprintln!("  pod watch: {e} (retrying)"),
        }
    }
    bail!("the pod watch ended")
}

/// Watch the namespace's pods until none is left but `except`, each deleted from the API (a
/// watch `Delete`; a terminating pod is still there); tell `synced` once the watch has
/// listed. When it is that none is left.
async fn watch_no_pods(
    api: Api<Pod>,
    except: Option<String>,
    synced: tokio::sync::oneshot::Sender<()>,
) -> Result<Instant> {
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut synced = Some(synced);
    let mut present = HashSet::new();
    // The pods of a list under way (the first one, or again after the watch broke off).
    let mut listing: Option<HashSet<String>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listing = Some(HashSet::new()),
            Ok(watcher::Event::InitApply(pod)) => {
                listing.get_or_insert_default().insert(pod.name_any());
            }
            Ok(watcher::Event::InitDone) => {
                present = listing.take().unwrap_or_default();
                if let Some(tx) = synced.take() {
                    let _ = tx.send(());
                }
            }
            Ok(watcher::Event::Apply(pod)) => {
                present.insert(pod.name_any());
            }
            Ok(watcher::Event::Delete(pod)) => {
                present.remove(&pod.name_any());
            }
            Err(e) => eprintln!("  pod watch: {e} (retrying)"),
        }
        if let Some(name) = &except {
            present.remove(name);
        }
        if synced.is_none() && listing.is_none() && present.is_empty() {
            return Ok(Instant::now());
        }
    }
    bail!("the pod watch ended")
}

// ---------------------------------------------------------------------------------------
// Report

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

fn median(v: &[f64]) -> f64 {
    let v = sorted(v.to_vec());
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// "min / median / max" (or the one value).
fn mmm(v: &[f64], prec: usize) -> String {
    let s = sorted(v.to_vec());
    match s.len() {
        0 => "–".into(),
        1 => format!("{:.prec$}", s[0]),
        _ => format!(
            "{:.prec$} / {:.prec$} / {:.prec$}",
            s[0],
            median(&s),
            s[s.len() - 1]
        ),
    }
}

fn ratio(a: f64, b: f64) -> String {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "–".into()
    }
}

/// A figure of a run, when it has it.
type Figure<'a> = &'a dyn Fn(&Run) -> Option<f64>;

/// A row of a table: title, the figure of a run, decimals.
type Row = (&'static str, Box<dyn Fn(&Run) -> Option<f64>>, usize);

/// The figures of every run, printed as Markdown tables: one function a table.
struct Report<'a> {
    runs: &'a [Run],
    arms: &'a [Arm],
    rounds: usize,
    many_rounds: usize,
    idle: Duration,
}

fn report(runs: &[Run], arms: &[Arm], rounds: usize, many_rounds: usize, idle: Duration) -> String {
    let r = Report {
        runs,
        arms,
        rounds,
        many_rounds,
        idle,
    };
    let mut o = String::new();
    let scenarios: BTreeSet<Scenario> = runs.iter().map(|r| r.scenario).collect();
    let sizes = |of: fn(Scenario) -> Option<usize>| -> Vec<usize> {
        scenarios.iter().copied().filter_map(of).collect()
    };
    let singles = sizes(|s| match s {
        Scenario::Single(n) => Some(n),
        _ => None,
    });
    if !singles.is_empty() {
        r.seconds_to_ready(&mut o, &singles);
        r.teardown(&mut o, &singles);
        r.where_the_time_goes(&mut o, &singles);
        let n = *singles.last().unwrap_or(&0);
        r.webhooks(&mut o, Scenario::Single(n), &format!("N = {n}"));
    }
    let ends = sizes(|s| match s {
        Scenario::End(n) => Some(n),
        _ => None,
    });
    if !ends.is_empty() {
        r.end(&mut o, &ends);
    }
    for &sc in &scenarios {
        match sc {
            Scenario::Single(_) | Scenario::End(_) => {}
            Scenario::Resize(a, b) => r.resize(&mut o, a, b),
            Scenario::Many(m) => {
                r.many(&mut o, m);
                r.idle_requests(&mut o, m);
                r.requests_per_minicluster(&mut o, m);
                r.webhooks(&mut o, sc, &format!("{m} MiniClusters"));
            }
        }
    }
    o
}

impl Report<'_> {
    /// The figure `f` of every run of `arm` in `sc` that has it.
    fn vals(&self, sc: Scenario, arm: Arm, f: Figure<'_>) -> Vec<f64> {
        self.runs
            .iter()
            .filter(|r| r.scenario == sc && r.arm == arm)
            .filter_map(f)
            .collect()
    }

    fn has(&self, a: Arm) -> bool {
        self.arms.contains(&a)
    }

    /// A table's head and rule: the first column's, then one right-aligned column an arm.
    fn head(&self, first: &str, first_rule: &str) -> (String, String) {
        let mut head = first.to_string();
        let mut rule = first_rule.to_string();
        for a in self.arms {
            let _ = write!(head, " {} |", a.title());
            rule.push_str("--:|");
        }
        (head, rule)
    }

    /// The pairs of arms whose ratio the tables show (numerator, denominator, title): those
    /// that both ran.
    fn pairs(&self) -> Vec<(Arm, Arm, &'static str)> {
        [
            (Arm::Operator, Arm::JobSet, "operator / bare JobSet"),
            (Arm::Operator, Arm::Go, "operator / Go"),
            (Arm::JobSet, Arm::Job, "bare JobSet / one Job"),
        ]
        .into_iter()
        .filter(|&(a, b, _)| self.has(a) && self.has(b))
        .collect()
    }

    /// `a / b` of the figure `f` in `sc`, the runs of one round paired, in round order
    /// ("1.04, 0.98, 1.10"; a round that lacks either is left out).
    fn per_round(&self, sc: Scenario, a: Arm, b: Arm, f: Figure<'_>) -> String {
        let of = |arm: Arm, round: usize| {
            self.runs
                .iter()
                .find(|r| r.scenario == sc && r.arm == arm && r.round == round)
                .and_then(f)
        };
        let rounds: BTreeSet<usize> = self
            .runs
            .iter()
            .filter(|r| r.scenario == sc)
            .map(|r| r.round)
            .collect();
        let ratios: Vec<String> = rounds
            .into_iter()
            .filter_map(|k| Some(ratio(of(a, k)?, of(b, k)?)))
            .collect();
        if ratios.is_empty() {
            "–".into()
        } else {
            ratios.join(", ")
        }
    }

    /// A table of one figure in seconds, a row per scenario (`rows`: its first cell and the
    /// scenario): min / median / max for each arm, then for each pair of arms the ratio in
    /// each round and the ratio of the medians.
    fn timing_table(
        &self,
        o: &mut String,
        first: &str,
        rows: &[(String, Scenario)],
        f: Figure<'_>,
    ) {
        let (mut head, mut rule) = self.head(&format!("| {first} |"), "|--:|");
        for (_, _, title) in self.pairs() {
            let _ = write!(head, " {title}, per round | {title}, medians |");
            rule.push_str("--:|--:|");
        }
        let _ = writeln!(o, "{head}\n{rule}");
        for (label, sc) in rows {
            let mut line = format!("| {label} |");
            for &a in self.arms {
                let _ = write!(line, " {} |", mmm(&self.vals(*sc, a, f), 2));
            }
            for (a, b, _) in self.pairs() {
                let med = |arm: Arm| median(&self.vals(*sc, arm, f));
                let _ = write!(
                    line,
                    " {} | {} |",
                    self.per_round(*sc, a, b, f),
                    ratio(med(a), med(b))
                );
            }
            let _ = writeln!(o, "{line}");
        }
    }

    /// One MiniCluster of size N: min / median / max seconds to Ready, and the ratios.
    fn seconds_to_ready(&self, o: &mut String, singles: &[usize]) {
        let _ = writeln!(
            o,
            "\n### One MiniCluster of size N: seconds from apply to N pods Ready\n\n\
             min / median / max of {} rounds; the ratios in each round (the runs of one round \
             paired, in round order) and of the medians.\n",
            self.rounds
        );
        let rows: Vec<(String, Scenario)> = singles
            .iter()
            .map(|&n| (n.to_string(), Scenario::Single(n)))
            .collect();
        self.timing_table(o, "N", &rows, &|r| Some(r.secs));
    }

    /// One MiniCluster of size N: min / median / max seconds of its teardown, and the ratios.
    fn teardown(&self, o: &mut String, singles: &[usize]) {
        let _ = writeln!(
            o,
            "\n### Teardown of one MiniCluster of size N: seconds from the delete request to no \
             pod left\n\n\
             After the figures above, in the same runs: the operators' MiniCluster deleted, or \
             the bare arm's JobSet (then its Secret, ConfigMap and Services), with background \
             propagation as kubectl deletes; the clock stops when the pod watch has seen the \
             last pod deleted from the API. min / median / max of {} rounds; the ratios in each \
             round and of the medians.\n",
            self.rounds
        );
        let rows: Vec<(String, Scenario)> = singles
            .iter()
            .map(|&n| (n.to_string(), Scenario::Single(n)))
            .collect();
        self.timing_table(o, "N", &rows, &|r| r.teardown);
    }

    /// The end of a batch cluster of size N: min / median / max seconds from the lead pod's
    /// success to no other pod left, and the ratios.
    fn end(&self, o: &mut String, ends: &[usize]) {
        let _ = writeln!(
            o,
            "\n### The end of a batch cluster of size N: seconds from its lead pod's success to \
             no other pod left\n\n\
             Its N pods Ready (and this operator's status Running), then the lead pod's status \
             set to Succeeded, as the kubelet reports a lead broker that exited 0; the clock \
             stops when the pod watch has seen every other pod deleted from the API. This \
             operator and the bare JobSet only. min / median / max of {} rounds; the ratios in \
             each round and of the medians.\n",
            self.rounds
        );
        let rows: Vec<(String, Scenario)> = ends
            .iter()
            .map(|&n| (n.to_string(), Scenario::End(n)))
            .collect();
        self.timing_table(o, "N", &rows, &|r| Some(r.secs));
    }

    /// Resize from A to B: min / median / max seconds from the change request to B pods
    /// Ready, and the ratios.
    fn resize(&self, o: &mut String, a: usize, b: usize) {
        let _ = writeln!(
            o,
            "\n### Resize of one MiniCluster from size A to B: seconds from the change request \
             to B pods Ready\n\n\
             A MiniCluster of size A and maxSize B, its A pods Ready (and this operator's status \
             Running), then grown to B: the operators through the MiniCluster at size B \
             (applied), the bare JobSet through the apply this operator sends for that change \
             (`render::jobset::update`, field manager `{UPDATE_MANAGER}`, forced). min / median \
             / max of {} rounds; the ratios in each round and of the medians.\n",
            self.rounds
        );
        let rows = [(format!("{a} → {b}"), Scenario::Resize(a, b))];
        self.timing_table(o, "A → B", &rows, &|r| Some(r.secs));
        let _ = writeln!(
            o,
            "\nOf that, seconds from the change request to the first new pod (the operators' \
             own hop is in it: the MiniCluster's watch event, a reconcile and its JobSet \
             change) and to all B pods created:\n"
        );
        let rows = [(format!("{a} → {b}, first new pod"), Scenario::Resize(a, b))];
        self.timing_table(o, "A → B", &rows, &|r| Some(r.first_pod));
        o.push('\n');
        let rows = [(format!("{a} → {b}, all created"), Scenario::Resize(a, b))];
        self.timing_table(o, "A → B", &rows, &|r| Some(r.all_created));
    }

    /// One MiniCluster: medians of each step's seconds, each process's CPU, the pod
    /// creations' latency, the webhooks and JobSet's reconciles.
    fn where_the_time_goes(&self, o: &mut String, singles: &[usize]) {
        let _ = writeln!(
            o,
            "\n### Where the time goes (one MiniCluster; medians)\n\n\
             Seconds from apply to the first pod, to all N pods created (seen by the watch), to \
             all Ready, to the operator's status saying Running; CPU seconds of each process from apply to all Ready; pod creations' mean \
             latency in the apiserver; admission webhook calls and time (`mpod`/`vpod` are \
             Kueue's and, on JobSet pods, JobSet's too); JobSet reconciles.\n"
        );
        let _ = writeln!(
            o,
            "| N | arm | first pod | all created | all Ready | status Running | operator CPU | \
             apiserver CPU | JobSet CPU | kcm CPU | scheduler CPU | kwok CPU | etcd CPU | \
             pod POST ms | webhook calls | webhook s | JobSet reconciles |\n\
             |--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
        );
        for &n in singles {
            let sc = Scenario::Single(n);
            for &a in self.arms {
                let m = |f: &dyn Fn(&Run) -> Option<f64>| median(&self.vals(sc, a, f));
                let cpu = |p: &'static str| m(&move |r: &Run| r.cpu.get(p).copied());
                let f = |x: f64, p: usize| {
                    if x.is_finite() {
                        format!("{x:.p$}")
                    } else {
                        "–".into()
                    }
                };
                let _ = writeln!(
                    o,
                    "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    a.title(),
                    f(m(&|r| Some(r.first_pod)), 2),
                    f(m(&|r| Some(r.all_created)), 2),
                    f(m(&|r| Some(r.secs)), 2),
                    f(m(&|r| r.running), 2),
                    f(cpu("operator"), 2),
                    f(cpu("kube-apiserver"), 2),
                    f(cpu("jobset"), 2),
                    f(cpu("kube-controller-manager"), 2),
                    f(cpu("kube-scheduler"), 2),
                    f(cpu("kwok"), 2),
                    f(cpu("etcd"), 2),
                    f(
                        m(&|r| (r.api.pod_creates > 0.0)
                            .then(|| 1000.0 * r.api.pod_create_secs / r.api.pod_creates)),
                        1
                    ),
                    f(m(&|r| Some(r.api.webhook_calls.values().sum())), 0),
                    f(m(&|r| Some(r.api.webhook_secs.values().sum())), 2),
                    f(m(&|r| r.jobset_reconciles()), 0),
                );
            }
        }
    }

    /// Per webhook, in scenario `sc` (`what`): as the apiserver saw each call (the round
    /// trip, by webhook name) and as each webhook server saw it (by server and path).
    fn webhooks(&self, o: &mut String, sc: Scenario, what: &str) {
        type Pick = fn(&Run, &str) -> Option<(f64, f64)>;
        let apiserver: Pick = |r, k| {
            Some((
                r.api.webhook_calls.get(k).copied().unwrap_or(0.0),
                r.api.webhook_secs.get(k).copied().unwrap_or(0.0),
            ))
        };
        let server: Pick = |r, k| {
            let c = r.controllers.as_ref()?;
            Some((
                c.webhook_calls.get(k).copied().unwrap_or(0.0),
                c.webhook_secs.get(k).copied().unwrap_or(0.0),
            ))
        };
        let mut rows: Vec<(String, String, Pick)> = Vec::new();
        let in_sc = || self.runs.iter().filter(|r| r.scenario == sc);
        let api_names: BTreeSet<String> = in_sc()
            .flat_map(|r| r.api.webhook_calls.keys().cloned())
            .collect();
        for k in api_names {
            rows.push((format!("apiserver: {k}"), k, apiserver));
        }
        let server_names: BTreeSet<String> = in_sc()
            .filter_map(|r| r.controllers.as_ref())
            .flat_map(|c| c.webhook_calls.keys().cloned())
            .collect();
        for k in server_names {
            rows.push((format!("server: {k}"), k, server));
        }
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(
            o,
            "\nAdmission webhooks, {what} (medians): calls × mean ms per call, as the \
             apiserver timed each call (by webhook name; Kueue's and JobSet's pod webhooks \
             are both `mpod.kb.io`/`vpod.kb.io`) and as each webhook server timed it\n"
        );
        let (head, rule) = self.head("| webhook |", "|---|");
        let _ = writeln!(o, "{head}\n{rule}");
        for (title, key, pick) in rows {
            let mut line = format!("| {title} |");
            for &a in self.arms {
                let calls = median(&self.vals(sc, a, &|r| pick(r, &key).map(|p| p.0)));
                let secs = median(&self.vals(sc, a, &|r| pick(r, &key).map(|p| p.1)));
                if calls > 0.0 {
                    let _ = write!(line, " {calls:.0} × {:.1} ms |", 1000.0 * secs / calls);
                } else {
                    line.push_str(" 0 |");
                }
            }
            let _ = writeln!(o, "{line}");
        }
    }

    /// `m` MiniClusters of size 2: every figure of the runs and of the idle window after them,
    /// min / median / max over the rounds; then the ratios of seconds to Ready, per round
    /// and of the medians.
    fn many(&self, o: &mut String, m: usize) {
        let how = if self.many_rounds == 1 {
            "One run per arm".to_string()
        } else {
            format!("min / median / max of {} rounds", self.many_rounds)
        };
        let _ = writeln!(
            o,
            "\n### {m} MiniClusters of size 2\n\n\
             {how}. CPU from /proc between the first apply and all {} pods Ready; peak RSS is \
             the operator's VmHWM (it starts for each run); then {} s idle.\n",
            2 * m,
            self.idle.as_secs()
        );
        let (head, rule) = self.head("| |", "|---|");
        let _ = writeln!(o, "{head}\n{rule}");
        let sc = Scenario::Many(m);
        for (title, f, prec) in many_rows(m).iter().chain(&idle_rows()) {
            let mut line = format!("| {title} |");
            for &a in self.arms {
                let _ = write!(line, " {} |", mmm(&self.vals(sc, a, f.as_ref()), *prec));
            }
            let _ = writeln!(o, "{line}");
        }
        let secs: Figure<'_> = &|r| Some(r.secs);
        let med = |a: Arm| median(&self.vals(sc, a, secs));
        let _ = writeln!(o);
        for (a, b, title) in self.pairs() {
            let _ = writeln!(
                o,
                "- {title}, seconds to all pods Ready: {} per round; {} of the medians",
                self.per_round(sc, a, b, secs),
                ratio(med(a), med(b))
            );
        }
    }

    /// API requests in the idle window after `m` MiniClusters, by verb and resource: the
    /// rows with 2 or more in some arm.
    fn idle_requests(&self, o: &mut String, m: usize) {
        let sc = Scenario::Many(m);
        let idle_keys: BTreeSet<String> = self
            .runs
            .iter()
            .filter(|r| r.scenario == sc)
            .filter_map(|r| r.idle.as_ref())
            .flat_map(|i| i.api.requests.keys().cloned())
            .collect();
        let idle_rows: Vec<String> = idle_keys
            .into_iter()
            .filter_map(|k| {
                let per = |a: Arm| {
                    median(&self.vals(sc, a, &|r| {
                        Some(
                            r.idle
                                .as_ref()?
                                .api
                                .requests
                                .get(&k)
                                .copied()
                                .unwrap_or(0.0),
                        )
                    }))
                };
                if self.arms.iter().all(|&a| per(a).is_nan() || per(a) < 2.0) {
                    return None;
                }
                let mut line = format!("| {k} |");
                for &a in self.arms {
                    let _ = write!(line, " {:.0} |", per(a));
                }
                Some(line)
            })
            .collect();
        if idle_rows.is_empty() {
            return;
        }
        let _ = writeln!(
            o,
            "\nAPI requests in the {} s idle window (medians; rows with 2 or more in some arm; \
             every client)\n",
            self.idle.as_secs()
        );
        let (head, rule) = self.head("| verb resource |", "|---|");
        let _ = writeln!(o, "{head}\n{rule}\n{}", idle_rows.join("\n"));
    }

    /// API requests per MiniCluster from the first apply until all pods Ready, by verb and
    /// resource, with the operator's column minus the bare JobSet's.
    fn requests_per_minicluster(&self, o: &mut String, m: usize) {
        let sc = Scenario::Many(m);
        let _ = writeln!(
            o,
            "\nAPI requests per MiniCluster, from the first apply until all pods Ready (medians of \
             `apiserver_request_total` deltas / {m}; every client: the driver, the operator, JobSet, \
             the job controller, the scheduler, kwok). The operator's own share is about the \
             operator column minus the bare JobSet column.\n"
        );
        let keys: BTreeSet<String> = self
            .runs
            .iter()
            .filter(|r| r.scenario == sc)
            .flat_map(|r| r.api.requests.keys().cloned())
            .collect();
        let both = self.has(Arm::Operator) && self.has(Arm::JobSet);
        let (mut head, mut rule) = self.head("| verb resource |", "|---|");
        if both {
            head.push_str(" operator − bare JobSet |");
            rule.push_str("--:|");
        }
        let _ = writeln!(o, "{head}\n{rule}");
        for k in keys {
            let per = |a: Arm| {
                median(&self.vals(sc, a, &|r| {
                    Some(r.api.requests.get(&k).copied().unwrap_or(0.0) / m as f64)
                }))
            };
            if self.arms.iter().all(|&a| per(a).abs() < 0.05) {
                continue;
            }
            let mut line = format!("| {k} |");
            for &a in self.arms {
                let _ = write!(line, " {:.2} |", per(a));
            }
            if both {
                let _ = write!(line, " {:+.2} |", per(Arm::Operator) - per(Arm::JobSet));
            }
            let _ = writeln!(o, "{line}");
        }
    }
}

/// The rows of the many-clusters table up to the idle window: from the first apply until
/// all pods Ready (and every status Running).
fn many_rows(m: usize) -> Vec<Row> {
    vec![
        ("seconds to all pods Ready", Box::new(|r| Some(r.secs)), 2),
        (
            "seconds to all MiniClusters Running (status)",
            Box::new(|r| r.running),
            2,
        ),
        (
            "operator CPU s",
            Box::new(|r| r.cpu.get("operator").copied()),
            2,
        ),
        ("operator peak RSS MiB", Box::new(|r| r.peak_rss_mib), 1),
        (
            "operator reconcile p50 ms, bucket bound (with API waits)",
            Box::new(|r| r.reconcile_ms.map(|q| q.0)),
            1,
        ),
        (
            "operator reconcile p99 ms, bucket bound (with API waits)",
            Box::new(|r| r.reconcile_ms.map(|q| q.1)),
            1,
        ),
        (
            "operator's own work per reconcile p50 ms, bucket bound (observe, plan)",
            Box::new(|r| r.decide_ms.map(|q| q.0)),
            3,
        ),
        (
            "operator's own work per reconcile p99 ms, bucket bound",
            Box::new(|r| r.decide_ms.map(|q| q.1)),
            3,
        ),
        (
            "kube-apiserver CPU s",
            Box::new(|r| r.cpu.get("kube-apiserver").copied()),
            2,
        ),
        (
            "JobSet controller CPU s",
            Box::new(|r| r.cpu.get("jobset").copied()),
            2,
        ),
        (
            "kube-controller-manager CPU s",
            Box::new(|r| r.cpu.get("kube-controller-manager").copied()),
            2,
        ),
        (
            "API requests per MiniCluster (all clients)",
            Box::new(move |r| Some(r.api.total_requests() / m as f64)),
            1,
        ),
        ("JobSet reconciles", Box::new(|r| r.jobset_reconciles()), 0),
    ]
}

/// The rows of the many-clusters table for the idle window after the run.
fn idle_rows() -> Vec<Row> {
    vec![
        (
            "idle: operator reconciles",
            Box::new(|r| r.idle.as_ref()?.operator_reconciles),
            0,
        ),
        (
            "idle: operator reconciles in its second half",
            Box::new(|r| r.idle.as_ref()?.operator_reconciles_late),
            0,
        ),
        (
            "idle: seconds into it of the last reconcile",
            Box::new(|r| r.idle.as_ref()?.operator_last_reconcile),
            0,
        ),
        (
            "idle: operator CPU s",
            Box::new(|r| r.idle.as_ref()?.cpu.get("operator").copied()),
            3,
        ),
        (
            "idle: JobSet reconciles",
            Box::new(|r| r.idle.as_ref()?.jobset_reconciles),
            0,
        ),
        (
            "idle: API requests (all clients)",
            Box::new(|r| Some(r.idle.as_ref()?.api.total_requests())),
            0,
        ),
        (
            "idle: kube-apiserver CPU s",
            Box::new(|r| r.idle.as_ref()?.cpu.get("kube-apiserver").copied()),
            2,
        ),
    ]
}

// ---------------------------------------------------------------------------------------

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
    arms: Vec<Arm>,
    /// `BENCH_RESIZE`: from size A to B (None: no resize scenario).
    resize: Option<(usize, usize)>,
    /// `BENCH_END`: the sizes of the batch-end scenario (empty: none).
    end: Vec<usize>,
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
            arms: env_list("BENCH_ARMS", "operator,jobset,go")?,
            resize: resize_from_env()?,
            end: env_list("BENCH_END", "8")?
                .into_iter()
                .filter(|&n: &usize| n > 0)
                .collect(),
        };
        ensure!(!config.arms.is_empty(), "BENCH_ARMS is empty");
        ensure!(rounds > 0, "BENCH_ROUNDS must be at least 1");
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
        arms,
        resize,
        end,
    } = &config;
    eprintln!(
        "bench: sizes {sizes:?}, {rounds} rounds, {many} MiniClusters of size 2 in {many_rounds} \
         of them, idle {} s, resize {}, batch end {end:?}, arms {:?}; load average {}",
        idle.as_secs(),
        resize.map_or("none".into(), |(a, b)| format!("{a} -> {b}")),
        arms.iter().map(|a| a.key()).collect::<Vec<_>>(),
        load_start.trim()
    );

    let mut bench = Bench::new(arms, *idle).await?;
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
/// `many_rounds`) under each arm, the arms' order rotating from one scenario to the next. On
/// a failure the runs before it are printed, then the error returned.
async fn run_all(bench: &mut Bench, config: &Config, started: Instant) -> Result<Vec<Run>> {
    let arms = &config.arms;
    let mut runs = Vec::new();
    let mut k = 0usize;
    for round in 1..=config.rounds {
        let mut scenarios: Vec<Scenario> =
            config.sizes.iter().map(|&n| Scenario::Single(n)).collect();
        if let Some((a, b)) = config.resize {
            scenarios.push(Scenario::Resize(a, b));
        }
        scenarios.extend(config.end.iter().map(|&n| Scenario::End(n)));
        if config.many > 0 && round <= config.many_rounds {
            scenarios.push(Scenario::Many(config.many));
        }
        for sc in scenarios {
            // Rotate the arms' order from one scenario to the next.
            let order: Vec<Arm> = (0..arms.len())
                .map(|i| arms[(i + k) % arms.len()])
                .collect();
            k += 1;
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
            "to Ready (first pod {:.2} s, all created {:.2} s)",
            run.first_pod, run.all_created
        ),
    };
    eprintln!(
        "[round {round}/{rounds}] {:>5} {:<24} {:7.2} s {what}{}{}; load {:.2}; {:.0} s elapsed",
        run.scenario.tag(),
        run.arm.title(),
        run.secs,
        run.teardown
            .map(|t| format!("; teardown {t:.2} s"))
            .unwrap_or_default(),
        run.idle
            .as_ref()
            .and_then(|i| i.operator_reconciles)
            .map(|n| format!("; {n} reconciles idle"))
            .unwrap_or_default(),
        run.load,
        started.elapsed().as_secs_f64()
    );
}
