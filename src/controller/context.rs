//! What every reconcile shares: the client, the index, the Events' reporter, the metrics,
//! and what this process keeps per MiniCluster; and the reconcile's errors.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::runtime::events::Reporter;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use super::durations::Sightings;
use super::index::Index;
use super::made::{self, Made, Object};
use super::plan::Observed;
use crate::api::{MiniCluster, MiniClusterStatus};
use crate::metrics::SharedMetrics;
use crate::render::{self, Environment};

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
    pub(super) failures: Mutex<HashMap<ObjectRef<MiniCluster>, u32>>,
    /// When this process saw each MiniCluster's lifecycle moments (sub-second durations).
    pub(super) sightings: Sightings,
    /// The status this process last wrote, per MiniCluster UID: the watch cache can lag
    /// behind it, and transitions (Events, metrics) must start from what was written.
    written: Mutex<HashMap<String, MiniClusterStatus>>,
    /// What this process made, per MiniCluster UID, that the watches have not shown yet.
    made: Mutex<HashMap<String, Made>>,
    /// MiniClusters (UIDs) whose namespace is being terminated: nothing is written for them.
    doomed: Mutex<HashSet<String>>,
    /// True once every watch has listed what it watches (or has had its time to):
    /// reconciles wait for it, so an object that exists is never taken for missing.
    synced: watch::Receiver<bool>,
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
            failures: Mutex::default(),
            sightings: Sightings::default(),
            written: Mutex::default(),
            made: Mutex::default(),
            doomed: Mutex::default(),
            synced: watch::channel(true).1,
        }
    }

    /// Reconciles wait until `synced` is true (see [`SYNC_WAIT`]).
    pub fn with_sync(mut self, synced: watch::Receiver<bool>) -> Self {
        self.synced = synced;
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

    /// `mc`'s namespace is being terminated: no more writes for it, nor for the other
    /// MiniClusters the store holds in that namespace (all were made before the deletion
    /// began: a terminating namespace takes no new object; a namespace of the same name made
    /// later has MiniClusters of other UIDs). How many MiniClusters that is.
    pub(super) fn doom(&self, mc: &MiniCluster) -> usize {
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
        let n = uids.len();
        if let Ok(mut doomed) = self.doomed.lock() {
            doomed.extend(uids);
        }
        n
    }

    /// Whether `mc`'s namespace was found being terminated ([`Context::doom`]).
    pub(super) fn is_doomed(&self, mc: &MiniCluster) -> bool {
        mc.uid().is_some_and(|uid| {
            self.doomed
                .lock()
                .map(|d| d.contains(&uid))
                .unwrap_or(false)
        })
    }

    /// Remember that this process made `object` for `mc`.
    pub(super) fn made(&self, mc: &MiniCluster, object: Object) {
        if let (Some(uid), Ok(mut made)) = (mc.uid(), self.made.lock()) {
            made.entry(uid).or_default().push((object, Instant::now()));
        }
    }

    /// Complete `observed` with what this process made for `mc` that the watches do not show
    /// yet ([`made::fill_in`]); how long until the first of those is no longer taken for
    /// granted.
    pub(super) fn fill_in(&self, mc: &MiniCluster, observed: &mut Observed) -> Option<Duration> {
        let (Some(uid), Ok(mut made)) = (mc.uid(), self.made.lock()) else {
            return None;
        };
        let entry = made.get_mut(&uid)?;
        let wait = made::fill_in(observed, entry, Instant::now());
        if entry.is_empty() {
            made.remove(&uid);
        }
        wait
    }

    /// Remember the status just written for `mc`.
    pub(super) fn remember(&self, mc: &MiniCluster, status: &MiniClusterStatus) {
        if let (Some(uid), Ok(mut written)) = (mc.uid(), self.written.lock()) {
            written.insert(uid, status.clone());
        }
    }

    /// `mc` with the status this process last wrote, if the cache has not caught up with it.
    pub(super) fn latest(&self, mc: &MiniCluster) -> MiniCluster {
        let mut mc = mc.clone();
        if let (Some(uid), Ok(written)) = (mc.uid(), self.written.lock())
            && let Some(status) = written.get(&uid)
        {
            mc.status = Some(status.clone());
        }
        mc
    }

    /// Forget what is kept per MiniCluster for those no longer in the cache.
    pub(super) fn retain(&self, live: &[Arc<MiniCluster>]) {
        let uids: HashSet<String> = live.iter().filter_map(|mc| mc.uid()).collect();
        let refs: HashSet<ObjectRef<MiniCluster>> = live
            .iter()
            .map(|mc| ObjectRef::from_obj(mc.as_ref()))
            .collect();
        if let Ok(mut written) = self.written.lock() {
            written.retain(|uid, _| uids.contains(uid));
        }
        if let Ok(mut made) = self.made.lock() {
            made.retain(|uid, _| uids.contains(uid));
        }
        if let Ok(mut doomed) = self.doomed.lock() {
            doomed.retain(|uid| uids.contains(uid));
        }
        self.sightings.retain(&uids);
        if let Ok(mut failures) = self.failures.lock() {
            failures.retain(|key, _| refs.contains(key));
        }
    }

    /// How many MiniClusters this process keeps something for (tests: nothing leaks).
    pub fn tracked(&self) -> usize {
        self.written.lock().map(|w| w.len()).unwrap_or_default()
            + self.made.lock().map(|m| m.len()).unwrap_or_default()
            + self.doomed.lock().map(|d| d.len()).unwrap_or_default()
            + self.sightings.len()
    }
}

/// Errors of a reconcile; all are retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("rendering: {0}")]
    Render(#[from] render::Error),
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
