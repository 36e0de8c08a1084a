//! One reconcile, thin: observe from the index, decide with [`plan::plan`], carry the plan
//! out with [`apply::execute`]. Level-triggered and idempotent; the watches wake it, and a
//! slow resync ([`RESYNC`]) looks at every MiniCluster now and then anyway.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, ResourceExt};
use tracing::Instrument;

use super::apply;
use super::durations::Sightings;
use super::index::Index;
use super::plan::{self, Observed, Presence};
use crate::api::{MiniCluster, MiniClusterStatus};
use crate::jobset::JobSet;
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
    pub(super) recorder: Recorder,
    pub(super) metrics: SharedMetrics,
    pub(super) index: Index,
    pub(super) env: Environment,
    failures: Mutex<HashMap<ObjectRef<MiniCluster>, u32>>,
    /// When this process saw each MiniCluster's lifecycle moments (sub-second durations).
    pub(super) sightings: Sightings,
    /// The status this process last wrote, per MiniCluster UID: the watch cache can lag
    /// behind it, and transitions (Events, metrics) must start from what was written.
    written: Mutex<HashMap<String, MiniClusterStatus>>,
}

impl Context {
    /// Build the context.
    pub fn new(
        client: Client,
        recorder: Recorder,
        metrics: SharedMetrics,
        index: Index,
        cluster_domain: String,
    ) -> Self {
        Self {
            client,
            recorder,
            metrics,
            index,
            env: Environment { cluster_domain },
            failures: Mutex::default(),
            sightings: Sightings::default(),
            written: Mutex::default(),
        }
    }

    /// Remember the status just written for `mc`.
    pub(super) fn remember(&self, mc: &MiniCluster, status: &MiniClusterStatus) {
        if let (Some(uid), Ok(mut written)) = (mc.uid(), self.written.lock()) {
            written.insert(uid, status.clone());
        }
    }

    /// `mc` with the status this process last wrote, if the cache has not caught up with it.
    fn latest(&self, mc: &MiniCluster) -> MiniCluster {
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
        self.sightings.retain(&uids);
        if let Ok(mut failures) = self.failures.lock() {
            failures.retain(|key, _| refs.contains(key));
        }
    }

    /// How many MiniClusters this process keeps something for (tests: nothing leaks).
    pub fn tracked(&self) -> usize {
        self.written.lock().map(|w| w.len()).unwrap_or_default() + self.sightings.len()
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
    fn reason(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(s)) if s.code == 409 => "conflict",
            Error::Kube(_) => "api",
            Error::Render(_) => "render",
            Error::Certificate(_) => "certificate",
            Error::Internal(_) => "internal",
        }
    }
}

/// Reconcile one MiniCluster.
pub async fn reconcile(mc: Arc<MiniCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let span =
        tracing::info_span!("reconcile", minicluster = %mc.name_any(), namespace = ?mc.namespace());
    let result = reconcile_inner(&mc, &ctx).instrument(span).await;
    ctx.metrics
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    if result.is_ok()
        && let Ok(mut failures) = ctx.failures.lock()
    {
        failures.remove(&ObjectRef::from_obj(mc.as_ref()));
    }
    result
}

/// Back off exponentially per MiniCluster: 1 s, 2 s, 4 s ... up to 5 minutes.
pub fn error_policy(mc: Arc<MiniCluster>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(mc.as_ref());
    let attempts = ctx
        .failures
        .lock()
        .map(|mut f| {
            let n = f.entry(key).or_insert(0);
            *n = n.saturating_add(1);
            *n
        })
        .unwrap_or(1);
    ctx.metrics
        .reconcile_errors
        .get_or_create(&crate::metrics::ErrorLabels {
            reason: error.reason().to_string(),
        })
        .inc();
    let delay = Duration::from_secs(1u64 << attempts.min(9).saturating_sub(1))
        .min(Duration::from_secs(300));
    if error.reason() == "conflict" {
        tracing::info!(minicluster = %mc.name_any(), namespace = ?mc.namespace(), %error, ?delay, "apply conflict; retrying");
    } else {
        tracing::warn!(minicluster = %mc.name_any(), namespace = ?mc.namespace(), %error, ?delay, "reconcile failed; retrying");
    }
    Action::requeue(delay)
}

async fn reconcile_inner(cached: &MiniCluster, ctx: &Context) -> Result<Action, Error> {
    if cached.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let mc = ctx.latest(cached);
    ctx.sightings.saw(&mc, Instant::now(), Timestamp::now());
    let mut observed = ctx.index.observe(&mc);
    confirm_absence(&mc, &mut observed, ctx).await?;
    // The moment this reconcile saw the state the new status is computed from.
    let seen = Instant::now();
    let plan = plan::plan(&mc, &observed, &ctx.env, Timestamp::now())?;
    apply::execute(&mc, &observed, plan, ctx, seen).await
}

/// Where the index lacks an object the status says exists (the JobSet, the certificate
/// Secret), ask the API server: a watch that has not caught up with the operator's own
/// create must not read as a deletion (a recreated JobSet, a lost certificate).
async fn confirm_absence(
    mc: &MiniCluster,
    observed: &mut Observed,
    ctx: &Context,
) -> Result<(), Error> {
    let status = mc.status.clone().unwrap_or_default();
    let ns = mc.namespace_or_default();
    if observed.jobset.is_none() && !status.job_set.is_empty() {
        observed.jobset = Api::<JobSet>::namespaced(ctx.client.clone(), ns)
            .get_opt(mc.name())
            .await?
            .map(Arc::new);
    }
    if observed.secret == Presence::Absent && !status.curve_secret.is_empty() {
        let found = Api::<Secret>::namespaced(ctx.client.clone(), ns)
            .get_metadata_opt(&status.curve_secret)
            .await?;
        if let Some(secret) = found {
            observed.secret = if super::owned::controlled_by(&secret, mc) {
                Presence::Owned
            } else if secret.metadata.deletion_timestamp.is_some() {
                Presence::Terminating
            } else {
                Presence::Foreign
            };
        }
    }
    Ok(())
}
