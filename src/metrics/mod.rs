//! Prometheus metrics (text format on `/metrics`) and the HTTP endpoints: `/metrics` over
//! HTTPS for bearers of a token allowed to read it ([`auth`]), `/healthz` and `/readyz` for
//! probes ([`Server`]).
//!
//! Lifecycle durations have sub-second resolution: they are measured on the operator's
//! monotonic clock between the moments it saw the two transitions itself (it saw the
//! MiniCluster new, then saw its brokers ready). When it did not see the start itself — it
//! started, restarted or took over the lease after that moment — a duration falls back to
//! API timestamps (creation, pod conditions, JobSet and Workload conditions), which have
//! one-second resolution. Each duration is observed once per MiniCluster: the status field
//! that records the moment (`readyTime`, `teardownTime`, ...) is the marker that it was
//! counted. Labels carry the namespace, never the MiniCluster name, to keep cardinality
//! bounded, and a namespace's series go [`PRUNE_AFTER`] after its last MiniCluster did, so
//! namespaces that come and go do not pile up series for ever.

pub mod auth;
mod listen;
mod server;
mod tls;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

pub use listen::{Endpoints, HEADER_READ_TIMEOUT, MAX_CONNECTIONS, Server};
pub use server::{Health, LIVENESS_STALL, REQUEST_TIMEOUT};

use crate::api::{MiniCluster, Phase};

/// Labels of the per-namespace lifecycle histograms.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NamespaceLabels {
    /// The MiniCluster's namespace.
    pub namespace: String,
}

/// Labels of the phase gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// The MiniClusters' namespace.
    pub namespace: String,
    /// The phase counted.
    pub phase: String,
}

/// Labels of reconcile errors.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// The error's kind.
    pub reason: String,
}

/// A histogram of seconds per namespace.
pub(crate) type Durations = Family<NamespaceLabels, Histogram, fn() -> Histogram>;

/// How long a namespace keeps its lifecycle series after its last MiniCluster is gone: long
/// enough for any scrape to read the last observations.
pub const PRUNE_AFTER: Duration = Duration::from_secs(600);

/// Upper bounds of the lifecycle histograms' buckets: 0.1 s to 10 minutes.
pub const LIFECYCLE_BUCKETS: [f64; 14] = [
    0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 180.0, 300.0, 600.0,
];

fn lifecycle_histogram() -> Histogram {
    Histogram::new(LIFECYCLE_BUCKETS)
}

fn reconcile_histogram() -> Histogram {
    // 1 ms .. about 16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// All metrics of the operator.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// MiniCluster creation -> JobSet created.
    pub jobset_created: Durations,
    /// MiniCluster creation -> lead broker pod ready.
    pub lead_ready: Durations,
    /// MiniCluster creation -> all `size` broker pods ready ("cluster up").
    pub cluster_up: Durations,
    /// Kueue admission (JobSet resumed) -> cluster up.
    pub admission_to_up: Durations,
    /// MiniCluster creation -> Kueue admission (time spent queued).
    pub admission_wait: Durations,
    /// Lead broker finished -> no broker pod running ("teardown").
    pub teardown: Durations,
    /// Duration of one reconcile.
    pub reconcile_duration: Histogram,
    /// The operator's own work in one reconcile: observing from the watch caches and
    /// planning, without the waits for the API server.
    pub reconcile_decide: Histogram,
    /// Reconciles that ended in an error, by reason.
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    /// MiniClusters by namespace and phase, counted from the watch cache at each scrape.
    phases: Arc<PhaseGauge>,
    /// Namespaces with lifecycle series, and when each was last known to have a MiniCluster.
    namespaces: Mutex<BTreeMap<String, Instant>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Create and register every metric under the `flux_operator` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("flux_operator");
        let durations =
            || Durations::new_with_constructor(lifecycle_histogram as fn() -> Histogram);
        let m = Self {
            jobset_created: durations(),
            lead_ready: durations(),
            cluster_up: durations(),
            admission_to_up: durations(),
            admission_wait: durations(),
            teardown: durations(),
            reconcile_duration: reconcile_histogram(),
            // 10 us .. about 5 s.
            reconcile_decide: Histogram::new(exponential_buckets(0.000_01, 2.0, 20)),
            reconcile_errors: Family::default(),
            phases: Arc::default(),
            namespaces: Mutex::default(),
            registry: Registry::default(),
        };
        let sub = &mut registry;
        let lifecycle = [
            (
                "minicluster_jobset_created",
                "Time from MiniCluster creation to its JobSet's creation",
                &m.jobset_created,
            ),
            (
                "minicluster_lead_ready",
                "Time from MiniCluster creation to the lead broker pod ready",
                &m.lead_ready,
            ),
            (
                "minicluster_up",
                "Time from MiniCluster creation to all size broker pods ready (cluster up)",
                &m.cluster_up,
            ),
            (
                "minicluster_admission_to_up",
                "Time from Kueue admission (JobSet resumed) to cluster up",
                &m.admission_to_up,
            ),
            (
                "minicluster_admission_wait",
                "Time from MiniCluster creation to Kueue admission (JobSet resumed)",
                &m.admission_wait,
            ),
            (
                "minicluster_teardown",
                "Time from the lead broker's completion to no broker pod running",
                &m.teardown,
            ),
        ];
        for (name, help, family) in lifecycle {
            sub.register_with_unit(name, help, Unit::Seconds, family.clone());
        }
        let reconcile = [
            (
                "reconcile_duration",
                "Duration of one MiniCluster reconcile",
                &m.reconcile_duration,
            ),
            (
                "reconcile_decide",
                "The operator's own work in one reconcile (observe from the watch caches, plan), \
                 without waits for the API server",
                &m.reconcile_decide,
            ),
        ];
        for (name, help, histogram) in reconcile {
            sub.register_with_unit(name, help, Unit::Seconds, histogram.clone());
        }
        sub.register(
            "reconcile_errors",
            "Reconciles that ended in an error",
            m.reconcile_errors.clone(),
        );
        sub.register_collector(Box::new(m.phases.clone()));
        Self { registry, ..m }
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        self.prune_at(Instant::now());
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Record one observation for a namespace (one of this value's duration families).
    pub fn observe(&self, family: &Durations, namespace: &str, seconds: f64) {
        let now = Instant::now();
        self.lock_namespaces()
            .entry(namespace.to_string())
            .and_modify(|last| *last = (*last).max(now))
            .or_insert(now);
        family
            .get_or_create(&NamespaceLabels {
                namespace: namespace.to_string(),
            })
            .observe(seconds.max(0.0));
    }

    fn lock_namespaces(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Instant>> {
        self.namespaces.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn durations(&self) -> [&Durations; 6] {
        [
            &self.jobset_created,
            &self.lead_ready,
            &self.cluster_up,
            &self.admission_to_up,
            &self.admission_wait,
            &self.teardown,
        ]
    }

    /// Drop the lifecycle series of every namespace that has had no MiniCluster in the
    /// watch cache for [`PRUNE_AFTER`] at `now`. Without a cache nothing is known absent.
    fn prune_at(&self, now: Instant) {
        let Some(store) = self.phases.store.get() else {
            return;
        };
        let present: BTreeSet<String> = store
            .state()
            .iter()
            .filter_map(|mc| mc.metadata.namespace.clone())
            .collect();
        let mut namespaces = self.lock_namespaces();
        namespaces.retain(|namespace, last| {
            if present.contains(namespace) {
                *last = (*last).max(now);
                return true;
            }
            if now.saturating_duration_since(*last) < PRUNE_AFTER {
                return true;
            }
            let labels = NamespaceLabels {
                namespace: namespace.clone(),
            };
            for family in self.durations() {
                family.remove(&labels);
            }
            false
        });
    }

    /// Count MiniClusters by phase from this cache at every scrape (set once, when the
    /// controller's cache exists).
    pub fn count_phases_from(&self, store: Store<MiniCluster>) {
        let _ = self.phases.store.set(store);
    }
}

/// The `miniclusters` gauge: computed when scraped, so a deleted MiniCluster stops counting
/// at once and nothing has to remember to update it.
#[derive(Debug, Default)]
struct PhaseGauge {
    store: OnceLock<Store<MiniCluster>>,
}

impl Collector for PhaseGauge {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let family = Family::<PhaseLabels, Gauge>::default();
        if let Some(store) = self.store.get() {
            for mc in store.state() {
                let phase = mc
                    .status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .unwrap_or(Phase::Pending);
                let labels = PhaseLabels {
                    namespace: mc.metadata.namespace.clone().unwrap_or_default(),
                    phase: phase.as_str().to_string(),
                };
                family.get_or_create(&labels).inc();
            }
        }
        let metric = encoder.encode_descriptor(
            "miniclusters",
            "MiniClusters by namespace and phase",
            None,
            family.metric_type(),
        )?;
        family.encode(metric)
    }
}

/// Shared handle to the metrics.
pub type SharedMetrics = Arc<Metrics>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_up_observation_is_exported_by_namespace() {
        let m = Metrics::new();
        m.observe(&m.cluster_up, "science", 12.5);
        let text = m.encode();
        assert!(
            text.contains("flux_operator_minicluster_up_seconds_count{namespace=\"science\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("flux_operator_minicluster_up_seconds_sum{namespace=\"science\"} 12.5"),
            "{text}"
        );
    }

    #[test]
    fn lifecycle_buckets_resolve_sub_second_up_to_ten_minutes() {
        let m = Metrics::new();
        m.observe(&m.cluster_up, "science", 0.3);
        let text = m.encode();
        for (le, count) in [
            ("0.1", 0),
            ("0.25", 0),
            ("0.5", 1),
            ("600.0", 1),
            ("+Inf", 1),
        ] {
            let line = format!(
                "flux_operator_minicluster_up_seconds_bucket{{le=\"{le}\",namespace=\"science\"}} {count}"
            );
            assert!(text.contains(&line), "{line} in {text}");
        }
        assert!(!text.contains("le=\"1200"), "{text}");
    }

    #[test]
    fn phase_gauge_is_empty_without_a_cache() {
        let text = Metrics::new().encode();
        assert!(
            text.contains("# TYPE flux_operator_miniclusters gauge"),
            "{text}"
        );
        assert!(!text.contains("flux_operator_miniclusters{"), "{text}");
    }

    #[test]
    fn a_namespace_without_miniclusters_loses_its_series_after_the_grace_and_not_before() {
        use kube::runtime::{reflector, watcher};
        let m = Metrics::new();
        let (store, mut writer) = reflector::store::<MiniCluster>();
        let mc = crate::fixtures::with_command("kept", 2, "true");
        writer.apply_watcher_event(&watcher::Event::Apply(mc.clone()));
        m.count_phases_from(store);
        m.observe(&m.cluster_up, "default", 1.0);
        m.observe(&m.cluster_up, "gone", 2.0);
        let series = |m: &Metrics| {
            let text = m.encode();
            ["default", "gone"].map(|ns| {
                text.contains(&format!(
                    "minicluster_up_seconds_count{{namespace=\"{ns}\"}}"
                ))
            })
        };
        assert_eq!(series(&m), [true, true]);
        let later = Instant::now() + PRUNE_AFTER + Duration::from_secs(1);
        m.prune_at(later);
        assert_eq!(
            series(&m),
            [true, false],
            "gone: no MiniCluster for the grace"
        );
        // The namespace that keeps its MiniCluster keeps its series however long it waits.
        m.prune_at(later + PRUNE_AFTER * 3);
        assert_eq!(series(&m), [true, false]);
        // Its MiniCluster gone too, it goes after the grace.
        writer.apply_watcher_event(&watcher::Event::Delete(mc));
        m.prune_at(later + PRUNE_AFTER * 3 + Duration::from_secs(1));
        assert_eq!(series(&m), [true, false]);
        m.prune_at(later + PRUNE_AFTER * 5);
        assert_eq!(series(&m), [false, false]);
    }
}
