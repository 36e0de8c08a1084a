//! The figures of one run: API server requests, CPU, memory, the controllers' own metrics.

use super::*;

#[derive(Clone, Debug, Default)]
pub(crate) struct ApiStats {
    /// `apiserver_request_total` by "VERB resource[.group][/subresource]".
    pub(crate) requests: BTreeMap<String, f64>,
    /// The requests answered with other than 2xx, by "CODE VERB resource..." (conflicts,
    /// not-founds, throttling): the retries a loaded control plane makes its clients send.
    pub(crate) failed: BTreeMap<String, f64>,
    /// Admission webhook time and calls by webhook name (Kueue's and JobSet's pod webhooks
    /// share the names `mpod.kb.io` and `vpod.kb.io`).
    pub(crate) webhook_secs: BTreeMap<String, f64>,
    pub(crate) webhook_calls: BTreeMap<String, f64>,
    /// `apiserver_request_duration_seconds` of pod creations.
    pub(crate) pod_create_secs: f64,
    pub(crate) pod_creates: f64,
    /// `apiserver_watch_events_total` by "resource[.group]": the events the API server sent,
    /// one per watcher (its fan-out).
    pub(crate) watch_events: BTreeMap<String, f64>,
    /// `apiserver_watch_events_sizes` (sum, bytes) by the same key: what it encoded.
    pub(crate) watch_bytes: BTreeMap<String, f64>,
}

/// `a - b` key by key (a key missing from `b` counts as 0 there); the keys at 0 dropped.
pub(crate) fn sub(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    a.iter()
        .map(|(k, v)| (k.clone(), v - b.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v != 0.0)
        .collect()
}

impl ApiStats {
    pub(crate) fn minus(&self, before: &ApiStats) -> ApiStats {
        ApiStats {
            requests: sub(&self.requests, &before.requests),
            failed: sub(&self.failed, &before.failed),
            webhook_secs: sub(&self.webhook_secs, &before.webhook_secs),
            webhook_calls: sub(&self.webhook_calls, &before.webhook_calls),
            pod_create_secs: self.pod_create_secs - before.pod_create_secs,
            pod_creates: self.pod_creates - before.pod_creates,
            watch_events: sub(&self.watch_events, &before.watch_events),
            watch_bytes: sub(&self.watch_bytes, &before.watch_bytes),
        }
    }

    pub(crate) fn total_requests(&self) -> f64 {
        self.requests.values().sum()
    }

    /// The requests not answered 2xx. Folded from 0.0: an empty f64 sum is -0.0, printed
    /// "-0.00".
    pub(crate) fn failed_requests(&self) -> f64 {
        self.failed.values().fold(0.0, |a, b| a + b)
    }
}

/// CPU seconds by process name.
pub(crate) type Cpu = BTreeMap<&'static str, f64>;

pub(crate) fn cpu_minus(after: &Cpu, before: &Cpu) -> Cpu {
    after
        .iter()
        .map(|(k, v)| (*k, v - before.get(k).copied().unwrap_or(0.0)))
        .collect()
}

/// What JobSet's and Kueue's own /metrics say (controller-runtime's metrics).
#[derive(Clone, Debug, Default)]
pub(crate) struct Controllers {
    pub(crate) jobset_reconciles: f64,
    /// JobSet's one worker: seconds its items waited in the queue, how many it took out, and
    /// seconds it spent on them (controller-runtime's `workqueue_*_duration_seconds`; NaN
    /// when a scrape lacked the line).
    pub(crate) jobset_queue_wait_secs: f64,
    pub(crate) jobset_queue_items: f64,
    pub(crate) jobset_work_secs: f64,
    /// Webhook time and calls as each webhook server measured them (from reading the
    /// request to writing the answer), by "JobSet /mutate--v1-pod" etc.
    pub(crate) webhook_secs: BTreeMap<String, f64>,
    pub(crate) webhook_calls: BTreeMap<String, f64>,
}

impl Controllers {
    pub(crate) fn minus(&self, before: &Controllers) -> Controllers {
        Controllers {
            jobset_reconciles: self.jobset_reconciles - before.jobset_reconciles,
            jobset_queue_wait_secs: self.jobset_queue_wait_secs - before.jobset_queue_wait_secs,
            jobset_queue_items: self.jobset_queue_items - before.jobset_queue_items,
            jobset_work_secs: self.jobset_work_secs - before.jobset_work_secs,
            webhook_secs: sub(&self.webhook_secs, &before.webhook_secs),
            webhook_calls: sub(&self.webhook_calls, &before.webhook_calls),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Idle {
    pub(crate) operator_reconciles: Option<f64>,
    /// Reconciles in the second half of the window.
    pub(crate) operator_reconciles_late: Option<f64>,
    /// Seconds into the window of the operator's last reconcile (0: none in the window).
    pub(crate) operator_last_reconcile: Option<f64>,
    pub(crate) jobset_reconciles: Option<f64>,
    pub(crate) api: ApiStats,
    pub(crate) cpu: Cpu,
}

#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub(crate) scenario: Scenario,
    pub(crate) arm: Arm,
    /// The round (from 1): the runs of one round are paired in the ratios.
    pub(crate) round: usize,
    /// Apply -> all pods Ready.
    pub(crate) secs: f64,
    /// Apply -> first pod seen.
    pub(crate) first_pod: f64,
    /// Apply -> first JobSet seen (None: the arm makes none).
    pub(crate) first_jobset: Option<f64>,
    /// Apply -> every pod seen.
    pub(crate) all_created: f64,
    /// CPU seconds during apply -> all Ready ("operator" is the operator's, when it runs).
    pub(crate) cpu: Cpu,
    /// The operator's peak RSS (VmHWM), MiB.
    pub(crate) peak_rss_mib: Option<f64>,
    /// The operator's reconciles (it starts fresh for each run) until every status said
    /// Running, the idle window's not counted.
    pub(crate) reconciles: Option<f64>,
    /// The operator's reconciles over the run (it starts fresh for each), p50 and p99 in ms
    /// as bucket upper bounds: the whole reconcile, and its own work (observe and plan, no
    /// API waits: `flux_operator_reconcile_decide_seconds`).
    pub(crate) reconcile_ms: Option<(f64, f64)>,
    pub(crate) decide_ms: Option<(f64, f64)>,
    pub(crate) api: ApiStats,
    pub(crate) controllers: Option<Controllers>,
    pub(crate) idle: Option<Idle>,
    /// Apply -> every MiniCluster's status.phase Running (this operator only).
    pub(crate) running: Option<f64>,
    /// One MiniCluster, after the figures above: its delete request -> no pod of it left.
    pub(crate) teardown: Option<f64>,
    pub(crate) load: f64,
    /// Milliseconds the machine took, just before the run, for a fixed piece of
    /// single-threaded work (`helpers::pace_ms`): how fast this machine ran then, taken the same way
    /// before every run of every arm, once the last run's namespace is gone.
    pub(crate) pace_ms: Option<f64>,
    /// The API server's CPU profile over the run, by path (`BENCH_PPROF_SECS`).
    pub(crate) profile: Option<ProfileSplit>,
}

/// Where the API server's CPU went, from its CPU profile (`go tool pprof -top -cum`):
/// seconds of samples under each path's functions. The paths run in goroutines of their own
/// (a write's storage part in its finisher's), so no sample is under two of them.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProfileSplit {
    /// Every sample.
    pub(crate) total: f64,
    /// Sending watch events: the watch handlers (encoding, compressing, writing) and the
    /// cache's dispatch of each event to its watchers.
    pub(crate) watch: f64,
    /// Create, update, patch and delete requests: decoding, admission, validation (CEL
    /// included), managed fields, the write to etcd, encoding the answer.
    pub(crate) writes: f64,
    /// Get and list requests.
    pub(crate) reads: f64,
    /// Go's garbage collector, in its own workers.
    pub(crate) gc: f64,
    /// Within the writes: custom resources' CEL rules (`x-kubernetes-validations`).
    pub(crate) cel: f64,
    /// Within the writes: custom resources' status writes (a MiniCluster's status applies,
    /// JobSet's status updates), from the stored object to etcd and back.
    pub(crate) cr_status: f64,
}

impl ProfileSplit {
    /// The functions whose cumulative time is each path's ([`profile_split`]), as
    /// Kubernetes v1.37 names them.
    pub(crate) const WATCH: &[&str] = &[
        "k8s.io/apiserver/pkg/endpoints/handlers.(*WatchServer).HandleHTTP",
        "k8s.io/apiserver/pkg/storage/cacher.(*cacheWatcher).processInterval",
        "k8s.io/apiserver/pkg/storage/cacher.(*Cacher).dispatchEvents",
    ];
    pub(crate) const WRITES: &[&str] = &[
        "k8s.io/apiserver/pkg/endpoints/handlers/finisher.finishRequest.func1",
        "k8s.io/apiserver/pkg/endpoints/handlers.CreateResource.createHandler.func1",
        "k8s.io/apiserver/pkg/endpoints/handlers.UpdateResource.func1",
        "k8s.io/apiserver/pkg/endpoints/handlers.PatchResource.func1",
        "k8s.io/apiserver/pkg/endpoints/handlers.DeleteResource.func1",
        "k8s.io/apiserver/pkg/endpoints/handlers.DeleteCollection.func1",
    ];
    pub(crate) const READS: &[&str] = &[
        "k8s.io/apiserver/pkg/endpoints/handlers.getResourceHandler.func1",
        "k8s.io/apiserver/pkg/endpoints/handlers.ListResource.func1",
    ];
    pub(crate) const GC: &[&str] = &["runtime.gcBgMarkWorker"];
    pub(crate) const CEL: &[&str] =
        &["k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel.(*Validator).Validate"];
    pub(crate) const CR_STATUS: &[&str] =
        &["k8s.io/apiextensions-apiserver/pkg/registry/customresource.(*StatusREST).Update"];

    /// The rest: everything else (the filters before a handler, etcd's client, GC, ...).
    pub(crate) fn rest(&self) -> f64 {
        self.total - self.watch - self.writes - self.reads - self.gc
    }
}

impl Run {
    pub(crate) fn jobset_reconciles(&self) -> Option<f64> {
        self.controllers.as_ref().map(|c| c.jobset_reconciles)
    }

    /// Mean seconds a JobSet waited in JobSet's queue before its worker took it.
    pub(crate) fn jobset_queue_wait(&self) -> Option<f64> {
        let c = self.controllers.as_ref()?;
        (c.jobset_queue_items > 0.0)
            .then(|| c.jobset_queue_wait_secs / c.jobset_queue_items)
            .filter(|w| w.is_finite())
    }

    /// The share of the run JobSet's one worker was busy (1: all through it).
    pub(crate) fn jobset_busy(&self) -> Option<f64> {
        let c = self.controllers.as_ref()?;
        (self.secs > 0.0)
            .then(|| c.jobset_work_secs / self.secs)
            .filter(|b| b.is_finite())
    }
}
