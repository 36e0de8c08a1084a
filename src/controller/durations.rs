//! Lifecycle durations. Each is observed when the status field that records its end first
//! appears, so it counts once (the reconciler reads the MiniCluster fresh, and the status
//! survives operator restarts).
//!
//! Where the operator saw both ends of a duration itself, the duration is the time between
//! those two sightings on its monotonic clock (sub-second). A sighting is the moment a
//! reconcile saw the transition: the MiniCluster new (no status yet, created within
//! [`FRESH`]), its JobSet created, Kueue's admission, the lead broker ready, all brokers
//! ready, the lead finished, no broker left. Sightings live in this process only: after a
//! restart or a failover, and when both ends were first seen in the same reconcile, the
//! duration comes from API timestamps instead (one-second resolution).

use std::time::Instant;

use jiff::{SignedDuration, Timestamp};

use super::observe::admission::Admission;
use super::observe::jobset::ObservedJobSet;
use crate::api::{MiniCluster, MiniClusterStatus, condition};
use crate::metrics::Metrics;

/// A MiniCluster first seen this long after its creation timestamp was not seen new (the
/// operator was down, or busy): its creation is not a sighting. The creation timestamp is
/// truncated to the second, so a live sighting is always less than a second plus the
/// watch's latency after it.
pub(super) const FRESH: SignedDuration = SignedDuration::from_secs(3);

pub(super) fn seconds_between(from: &Timestamp, to: &Timestamp) -> f64 {
    (to.as_millisecond() - from.as_millisecond()) as f64 / 1000.0
}

/// The moments this process saw of one MiniCluster (kept in its memory, see
/// [`super::context`]).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Seen {
    created: Option<Instant>,
    /// When this process's create of the JobSet succeeded: the status may name the JobSet
    /// only later (a new cluster's first status is written when its pods are up).
    jobset_made: Option<Instant>,
    admitted: Option<Instant>,
    completed: Option<Instant>,
}

impl Seen {
    /// This process's first look at `mc`, at `at` (wall clock `now`): if nobody has
    /// reconciled it yet and it was created just now, `at` is its creation.
    pub(super) fn first_look(mc: &MiniCluster, at: Instant, now: Timestamp) -> Seen {
        let untouched = mc.status.is_none();
        let fresh = mc
            .metadata
            .creation_timestamp
            .as_ref()
            .is_some_and(|created| now.duration_since(created.0) < FRESH);
        Seen {
            created: (untouched && fresh).then_some(at),
            ..Seen::default()
        }
    }

    /// This process made the MiniCluster's JobSet at `at`.
    pub(super) fn made_jobset(&mut self, at: Instant) {
        self.jobset_made = Some(at);
    }
}

/// Seconds from the sighting `start` to `end`, if the start was seen in an earlier reconcile;
/// otherwise the API timestamps' difference.
fn duration(
    start: Option<Instant>,
    end: Instant,
    api: impl FnOnce() -> Option<f64>,
) -> Option<f64> {
    match start {
        Some(s) if s < end => Some(end.duration_since(s).as_secs_f64()),
        _ => api(),
    }
}

/// A status write a reconcile made: the MiniCluster, its status before (`old`) and after
/// (`new`), what the reconcile saw of its JobSet and of Kueue's admission, and when it saw
/// the state `new` was computed from (`seen`).
pub(super) struct Transition<'a> {
    pub mc: &'a MiniCluster,
    pub old: &'a MiniClusterStatus,
    pub new: &'a MiniClusterStatus,
    pub jobset: Option<&'a ObservedJobSet>,
    pub admission: Option<&'a Admission>,
    pub seen: Instant,
}

/// Record each lifecycle duration the first time its status timestamp appears, in the
/// lifecycle's order; `live` is what this process saw of the MiniCluster before, and the
/// result what it has seen after this transition.
pub(super) fn observe_durations(metrics: &Metrics, t: &Transition<'_>, live: Seen) -> Seen {
    let mut observer = Observer {
        metrics,
        ns: t.mc.namespace_or_default(),
        live,
        after: live,
        created: t.mc.metadata.creation_timestamp.as_ref().map(|c| c.0),
        t,
    };
    observer.start();
    observer.admission();
    observer.up();
    observer.end();
    observer.after
}

/// One transition's durations: where they go, what this process saw of the MiniCluster
/// before (`live`) and after (`after`), and its creation.
struct Observer<'a> {
    metrics: &'a Metrics,
    ns: &'a str,
    live: Seen,
    after: Seen,
    created: Option<Timestamp>,
    t: &'a Transition<'a>,
}

impl Observer<'_> {
    fn observe(&self, family: &crate::metrics::Durations, secs: Option<f64>) {
        if let Some(secs) = secs {
            self.metrics.observe(family, self.ns, secs);
        }
    }

    /// From the sighting `start` to this one, else the API's `fallback`.
    fn since(&self, start: Option<Instant>, fallback: impl FnOnce() -> Option<f64>) -> Option<f64> {
        duration(start, self.t.seen, fallback)
    }

    /// The API's seconds from the MiniCluster's creation to `to`.
    fn since_created(&self, to: Option<&Timestamp>) -> Option<f64> {
        Some(seconds_between(self.created.as_ref()?, to?))
    }

    /// The JobSet made and the lead broker ready, from the creation.
    fn start(&self) {
        let (old, new) = (self.t.old, self.t.new);
        if old.job_set.is_empty() && !new.job_set.is_empty() {
            let made = self
                .t
                .jobset
                .and_then(|j| j.metadata.creation_timestamp.as_ref());
            let api = || self.since_created(made.map(|t| &t.0));
            let secs = match self.live.jobset_made {
                Some(at) => duration(self.live.created, at, api),
                None => api(),
            };
            self.observe(&self.metrics.jobset_created, secs);
        }
        if old.lead_ready_time.is_none()
            && let Some(t) = &new.lead_ready_time
        {
            let api = || self.since_created(Some(&t.0));
            self.observe(&self.metrics.lead_ready, self.since(self.live.created, api));
        }
    }

    /// The wait in Kueue's queue: the first admission only (a readmission after an eviction
    /// is not time spent queued since creation).
    fn admission(&mut self) {
        let (old, admission) = (self.t.old, self.t.admission);
        let was_admitted = old
            .conditions
            .iter()
            .any(|c| c.type_ == condition::ADMITTED && c.status == "True");
        if !was_admitted
            && old.start_time.is_none()
            && let Some(at) = admission.and_then(|a| a.admitted_at)
        {
            let api = || self.since_created(Some(&at));
            self.observe(
                &self.metrics.admission_wait,
                self.since(self.live.created, api),
            );
        }
        if !was_admitted && admission.is_some_and(|a| a.admitted) {
            self.after.admitted = Some(self.t.seen);
        }
    }

    /// All brokers up, from the creation and from the admission.
    fn up(&self) {
        let Some(up) = &self.t.new.ready_time else {
            return;
        };
        if self.t.old.ready_time.is_some() {
            return;
        }
        let api = || self.since_created(Some(&up.0));
        self.observe(&self.metrics.cluster_up, self.since(self.live.created, api));
        if let Some(at) = self.t.admission.and_then(|a| a.admitted_at) {
            let api = || Some(seconds_between(&at, &up.0));
            self.observe(
                &self.metrics.admission_to_up,
                self.since(self.live.admitted, api),
            );
        }
    }

    /// The teardown: from the lead's completion to no broker left.
    fn end(&mut self) {
        let (old, new) = (self.t.old, self.t.new);
        if old.completion_time.is_none() && new.completion_time.is_some() {
            self.after.completed = Some(self.t.seen);
        }
        if old.teardown_time.is_none()
            && let (Some(done), Some(gone)) = (&new.completion_time, &new.teardown_time)
        {
            let api = || Some(seconds_between(&done.0, &gone.0));
            self.observe(&self.metrics.teardown, self.since(self.live.completed, api));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn mc(created: Timestamp) -> MiniCluster {
        let mut mc = crate::fixtures::manifest(include_str!("../../examples/hello-world.yaml"));
        mc.metadata.namespace = Some("ns".into());
        mc.metadata.uid = Some("u-1".into());
        mc.metadata.creation_timestamp = Some(Time(created));
        mc
    }

    /// A transition with no JobSet or admission seen; `live` becomes what is seen after it.
    fn observe_at(
        mc: &MiniCluster,
        metrics: &Metrics,
        live: &mut Seen,
        old: &MiniClusterStatus,
        new: &MiniClusterStatus,
        seen: Instant,
    ) {
        let t = Transition {
            mc,
            old,
            new,
            jobset: None,
            admission: None,
            seen,
        };
        *live = observe_durations(metrics, &t, *live);
    }

    fn sum(metrics: &Metrics, name: &str) -> Option<f64> {
        let prefix = format!("flux_operator_minicluster_{name}_seconds_sum{{namespace=\"ns\"}} ");
        metrics
            .encode()
            .lines()
            .find_map(|l| l.strip_prefix(&prefix)?.parse().ok())
    }

    #[test]
    fn cluster_up_is_measured_between_sightings_below_a_second() {
        let created: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mc = mc(created);
        let metrics = Metrics::new();
        let t0 = Instant::now();
        // First look, 0.4 s after the (truncated) creation second.
        let mut live = Seen::first_look(&mc, t0, created + SignedDuration::from_millis(400));
        let old = MiniClusterStatus::default();
        let new = MiniClusterStatus {
            // The API says 1 s (pod conditions have whole seconds); the operator saw 0.35 s.
            ready_time: Some(Time(created + SignedDuration::from_secs(1))),
            ..Default::default()
        };
        let seen = t0 + Duration::from_millis(350);
        observe_at(&mc, &metrics, &mut live, &old, &new, seen);
        let up = sum(&metrics, "up").expect("observed");
        assert!((up - 0.35).abs() < 1e-9, "{up}");
    }

    #[test]
    fn the_jobset_made_counts_to_its_create_when_a_later_status_names_it() {
        let created: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mc = mc(created);
        let metrics = Metrics::new();
        let t0 = Instant::now();
        let mut live = Seen::first_look(&mc, t0, created + SignedDuration::from_millis(200));
        live.made_jobset(t0 + Duration::from_millis(80));
        // The first status, written when all brokers are ready 2 s later, names the JobSet.
        let new = MiniClusterStatus {
            job_set: "m".into(),
            ..Default::default()
        };
        let old = MiniClusterStatus::default();
        observe_at(
            &mc,
            &metrics,
            &mut live,
            &old,
            &new,
            t0 + Duration::from_secs(2),
        );
        let made = sum(&metrics, "jobset_created").expect("observed");
        assert!((made - 0.08).abs() < 1e-9, "{made}");
    }

    #[test]
    fn a_minicluster_not_seen_new_falls_back_to_api_timestamps() {
        let created: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t0 = Instant::now();
        let new = MiniClusterStatus {
            ready_time: Some(Time(created + SignedDuration::from_secs(7))),
            ..Default::default()
        };
        // Seen long after creation (the operator was down): API timestamps.
        let old_mc = mc(created);
        let metrics = Metrics::new();
        let mut live = Seen::first_look(&old_mc, t0, created + SignedDuration::from_secs(60));
        let seen = t0 + Duration::from_millis(10);
        let old = MiniClusterStatus::default();
        observe_at(&old_mc, &metrics, &mut live, &old, &new, seen);
        assert_eq!(sum(&metrics, "up"), Some(7.0));

        // Seen just after creation, but another replica already wrote its status (failover).
        let mut taken_over = mc(created);
        taken_over.status = Some(MiniClusterStatus::default());
        let metrics = Metrics::new();
        let mut live =
            Seen::first_look(&taken_over, t0, created + SignedDuration::from_millis(500));
        observe_at(&taken_over, &metrics, &mut live, &old, &new, seen);
        assert_eq!(sum(&metrics, "up"), Some(7.0));
    }

    #[test]
    fn teardown_seen_in_the_same_reconcile_as_completion_uses_api_timestamps() {
        let created: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mc = mc(created);
        let t0 = Instant::now();
        let metrics = Metrics::new();
        let mut live = Seen::first_look(&mc, t0, created);
        let done = Time(created + SignedDuration::from_secs(10));
        let running = MiniClusterStatus::default();
        let finished = MiniClusterStatus {
            completion_time: Some(done.clone()),
            ..Default::default()
        };
        let gone = MiniClusterStatus {
            completion_time: Some(done.clone()),
            teardown_time: Some(Time(created + SignedDuration::from_secs(12))),
            ..Default::default()
        };
        // Both at once: no sighting of the completion before, so the API's 2 s.
        observe_at(&mc, &metrics, &mut live, &running, &gone, t0);
        assert_eq!(sum(&metrics, "teardown"), Some(2.0));

        // Completion seen, then teardown 0.6 s later: the sightings' 0.6 s.
        let metrics = Metrics::new();
        let mut live = Seen::first_look(&mc, t0, created);
        let t1 = t0 + Duration::from_secs(10);
        observe_at(&mc, &metrics, &mut live, &running, &finished, t1);
        let t2 = t1 + Duration::from_millis(600);
        observe_at(&mc, &metrics, &mut live, &finished, &gone, t2);
        let teardown = sum(&metrics, "teardown").expect("observed");
        assert!((teardown - 0.6).abs() < 1e-9, "{teardown}");
    }
}
