//! What every reconcile shares: the client, the index, the Events' reporter, the metrics,
//! and what this process keeps per MiniCluster; and the reconcile's errors.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube::runtime::events::Reporter;
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use super::durations::{Seen, Transition, observe_durations};
use super::index::Index;
use super::made::{self, Made, Object};
use super::observe::Observed;
use super::trigger::OwnWrites;
use crate::api::{MiniCluster, MiniClusterStatus};
use crate::metrics::SharedMetrics;
use crate::model::Environment;

/// The field manager of every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "flux-operator";
/// The field manager of later changes to a JobSet: only the fields that may change while it
/// runs (the followers' size, `suspend` outside Kueue).
pub const UPDATE_MANAGER: &str = "flux-operator-update";
/// Every MiniCluster is looked at again after this long without a change (a missed watch
/// event heals); with nothing changed, such a look makes no API call.
pub const RESYNC: Duration = Duration::from_secs(600);

/// Shared state of the reconciler.
pub struct Context {
    pub(super) client: Client,
    /// Who publishes the Events (see [`super::apply`]'s `publish`: a recorder per Event).
    pub(super) reporter: Reporter,
    pub(super) metrics: SharedMetrics,
    pub(super) index: Index,
    pub(super) env: Environment,
    /// What this process keeps per MiniCluster UID ([`Memory`]), pruned in one place
    /// ([`Context::retain`]).
    memory: Mutex<HashMap<String, Memory>>,
    /// True once every watch has listed what it watches (or has had its time to):
    /// reconciles wait for it, so an object that exists is never taken for missing.
    synced: watch::Receiver<bool>,
    /// The versions its own status writes made, shared with the MiniClusters' trigger: their
    /// echo wakes nothing.
    own_writes: OwnWrites,
}

/// What this process keeps about one MiniCluster between its reconciles (lost with the
/// process: each is rebuilt or not needed after a restart).
#[derive(Debug, Default)]
pub(super) struct Memory {
    /// The status this process last wrote, as the API server stored it, until the watch
    /// cache shows it: the cache can lag behind a write, and transitions (Events, metrics)
    /// must start from what was written. Forgotten once the cache has it (a status is
    /// 1 KiB, kept for every MiniCluster otherwise).
    written: Option<MiniClusterStatus>,
    /// What this process made that the watches have not shown yet.
    made: Made,
    /// Its namespace is being terminated: nothing is written for it.
    terminating: bool,
    /// Reconciles failed in a row: the backoff's attempts.
    failures: u32,
    /// When this process saw its lifecycle moments (sub-second durations); `None` before
    /// its first look.
    seen: Option<Seen>,
}

/// How long reconciles wait for the watches' first lists before going ahead with what the
/// stores hold (a watch that cannot list, e.g. for want of a permission, holds nothing up
/// for longer).
pub const SYNC_WAIT: Duration = Duration::from_secs(30);

impl Context {
    /// Build the context.
    pub fn new(
        client: Client,
        reporter: Reporter,
        metrics: SharedMetrics,
        index: Index,
        env: Environment,
    ) -> Self {
        Self {
            client,
            reporter,
            metrics,
            index,
            env,
            memory: Mutex::default(),
            synced: watch::channel(true).1,
            own_writes: OwnWrites::default(),
        }
    }

    /// Reconciles wait until `synced` is true (see [`SYNC_WAIT`]).
    pub fn with_sync(mut self, synced: watch::Receiver<bool>) -> Self {
        self.synced = synced;
        self
    }

    /// The status writes go into `own` (the one the MiniClusters' trigger reads).
    pub(super) fn with_own_writes(mut self, own: OwnWrites) -> Self {
        self.own_writes = own;
        self
    }

    /// Wait until the watches have listed what they watch (at once after the start).
    pub(super) async fn synced(&self) {
        if *self.synced.borrow() {
            return;
        }
        tracing::debug!("waiting for the watches' first lists");
        let _ = self.synced.clone().wait_for(|s| *s).await;
    }

    /// `f` on `mc`'s memory, made empty first if there is none (`None`: `mc` has no UID).
    fn memory<T>(&self, mc: &MiniCluster, f: impl FnOnce(&mut Memory) -> T) -> Option<T> {
        let (uid, mut memory) = (mc.uid()?, self.memory.lock().ok()?);
        Some(f(memory.entry(uid).or_default()))
    }

    /// `f` on `mc`'s memory, if there is one.
    fn known<T>(&self, mc: &MiniCluster, f: impl FnOnce(&mut Memory) -> T) -> Option<T> {
        let (uid, mut memory) = (mc.uid()?, self.memory.lock().ok()?);
        memory.get_mut(&uid).map(f)
    }

    /// `mc`'s namespace is being terminated: no more writes for it, nor for the other
    /// MiniClusters the store holds in that namespace (all were made before the deletion
    /// began: a terminating namespace takes no new object; a namespace of the same name made
    /// later has MiniClusters of other UIDs). How many MiniClusters that is.
    pub(super) fn mark_terminating(&self, mc: &MiniCluster) -> usize {
        let ns = mc.namespace_or_default();
        let mut uids: HashSet<String> = self
            .index
            .miniclusters
            .state()
            .iter()
            .filter(|m| m.namespace_or_default() == ns)
            .filter_map(|m| m.uid())
            .collect();
        uids.extend(mc.uid());
        if let Ok(mut memory) = self.memory.lock() {
            for uid in &uids {
                memory.entry(uid.clone()).or_default().terminating = true;
            }
        }
        uids.len()
    }

    /// Whether `mc`'s namespace was found being terminated ([`Context::mark_terminating`]).
    pub(super) fn is_terminating(&self, mc: &MiniCluster) -> bool {
        self.known(mc, |m| m.terminating).unwrap_or(false)
    }

    /// Remember that this process made `object` for `mc`.
    pub(super) fn made(&self, mc: &MiniCluster, object: Object) {
        let now = Instant::now();
        self.memory(mc, |m| {
            if let (Object::JobSet(_), Some(seen)) = (&object, m.seen.as_mut()) {
                seen.made_jobset(now);
            }
            m.made.push((object, now));
        });
    }

    /// Complete `observed` with what this process made for `mc` that the watches do not show
    /// yet ([`made::fill_in`]); how long until the first of those is no longer taken for
    /// granted.
    pub(super) fn fill_in(&self, mc: &MiniCluster, observed: &mut Observed) -> Option<Duration> {
        self.known(mc, |m| made::fill_in(observed, &mut m.made, Instant::now()))?
    }

    /// Remember the status just written for `mc`, as the API server stored it, and the
    /// version that write made if its watch event is to wake nothing ([`OwnWrites`]).
    pub(super) fn remember(
        &self,
        mc: &MiniCluster,
        stored: MiniClusterStatus,
        version: Option<String>,
    ) {
        self.own_writes.wrote(mc, version);
        self.memory(mc, |m| m.written = Some(stored));
    }

    /// `mc` with the status this process last wrote, if the cache has not caught up with it;
    /// once it has, what was written is forgotten.
    pub(super) fn latest(&self, mc: &MiniCluster) -> MiniCluster {
        let mut mc = mc.clone();
        let written = self.known(&mc, |m| {
            if m.written.is_some() && m.written == mc.status {
                m.written = None;
            }
            m.written.clone()
        });
        if let Some(status) = written.flatten() {
            mc.status = Some(status);
        }
        mc
    }

    /// Whether a written status waits for the cache to show it (tests).
    #[cfg(test)]
    pub(super) fn awaits_cache(&self, mc: &MiniCluster) -> bool {
        self.known(mc, |m| m.written.is_some()).unwrap_or(false)
    }

    /// A reconcile at `at` (wall clock `now`) looks at `mc`: its first look is a sighting
    /// ([`Seen::first_look`]).
    pub(super) fn saw(&self, mc: &MiniCluster, at: Instant, now: Timestamp) {
        self.memory(mc, |m| {
            m.seen.get_or_insert_with(|| Seen::first_look(mc, at, now));
        });
    }

    /// Observe the durations a status write ends ([`observe_durations`]), from and into
    /// what this process saw of the MiniCluster.
    pub(super) fn observe_durations(&self, t: &Transition<'_>) {
        self.memory(t.mc, |m| {
            let live = m.seen.unwrap_or_default();
            m.seen = Some(observe_durations(&self.metrics, t, live));
        });
    }

    /// One more failed reconcile of `mc` in a row: how many now.
    pub(super) fn failed(&self, mc: &MiniCluster) -> u32 {
        let count = |m: &mut Memory| {
            m.failures = m.failures.saturating_add(1);
            m.failures
        };
        self.memory(mc, count).unwrap_or(1)
    }

    /// A reconcile of `mc` succeeded: the failures in a row are over.
    pub(super) fn succeeded(&self, mc: &MiniCluster) {
        self.known(mc, |m| m.failures = 0);
    }

    /// Forget what is kept per MiniCluster for those no longer in the cache.
    pub(super) fn retain(&self, live: &[Arc<MiniCluster>]) {
        let uids: HashSet<String> = live.iter().filter_map(|mc| mc.uid()).collect();
        if let Ok(mut memory) = self.memory.lock() {
            memory.retain(|uid, _| uids.contains(uid));
        }
        self.own_writes.retain(&uids);
    }

    /// How many MiniClusters this process keeps something for (tests: nothing leaks).
    pub fn tracked(&self) -> usize {
        self.memory.lock().map(|m| m.len()).unwrap_or_default()
    }
}

/// Errors of a reconcile; all are retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("rendering: {0}")]
    Render(crate::flux::Error),
    #[error("certificate: {0}")]
    Certificate(#[from] crate::flux::Error),
    #[error("{0}")]
    Internal(String),
}

impl Error {
    pub(super) fn reason(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(s)) if s.code == 409 => "conflict",
            Error::Kube(_) => "api",
            Error::Render(_) => "render",
            Error::Certificate(_) => "certificate",
            Error::Internal(_) => "internal",
        }
    }
}
