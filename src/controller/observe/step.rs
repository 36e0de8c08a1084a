//! One observe step: everything a reconcile knows of a MiniCluster's objects before it
//! decides ([`Observed`]). The watches' stores first ([`crate::controller::index`]; nothing a
//! watch holds is listed or fetched again), then what this process made and the watches do
//! not show yet ([`crate::controller::made`]), then, only where the index lacks an object the
//! status says exists, the API server's answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::jobset::ObservedJobSet;
use super::{Observed, Presence};
use crate::api::{MiniCluster, MiniClusterStatus};
use crate::controller::context::{Context, Error};

/// What one reconcile observed of a MiniCluster.
pub(in crate::controller) struct Observation {
    /// Its objects.
    pub observed: Observed,
    /// How long until the first object this process made and the watches do not show yet
    /// is no longer taken for granted: look again by then.
    pub awaited: Option<Duration>,
    /// The time the in-memory part took (the stores and what was made; not the API server's
    /// answers), for the decide metric.
    pub looked: Duration,
}

/// Observe `mc`, whose last written status is `status`.
pub(in crate::controller) async fn observe(
    mc: &MiniCluster,
    status: &MiniClusterStatus,
    ctx: &Context,
) -> Result<Observation, Error> {
    let looking = Instant::now();
    let mut observed = ctx.index.observe(mc);
    // What this process made and the watches do not show yet is there: no second create,
    // no lookup (see `made`).
    let awaited = ctx.fill_in(mc, &mut observed);
    let looked = looking.elapsed();
    confirm_absence(mc, status, &mut observed, ctx).await?;
    Ok(Observation {
        observed,
        awaited,
        looked,
    })
}

/// Where the index lacks an object the status says exists (the JobSet, the certificate
/// Secret) and this process did not just make it, ask the API server: a watch that has not
/// caught up with a create (another replica's, or before a restart) must not read as a
/// deletion (a recreated JobSet, a lost certificate).
async fn confirm_absence(
    mc: &MiniCluster,
    status: &MiniClusterStatus,
    observed: &mut Observed,
    ctx: &Context,
) -> Result<(), Error> {
    let ns = mc.namespace_or_default();
    if observed.jobset.is_none() && !status.job_set.is_empty() {
        tracing::debug!(jobset = %status.job_set, "JobSet in the status, not in the watch: looking");
        observed.jobset = Api::<ObservedJobSet>::namespaced(ctx.client.clone(), ns)
            .get_opt(mc.name())
            .await?
            .map(Arc::new);
    }
    if observed.secret == Presence::Absent && !status.curve_secret.is_empty() {
        tracing::debug!(secret = %status.curve_secret, "Secret in the status, not in the watch: looking");
        let found = Api::<Secret>::namespaced(ctx.client.clone(), ns)
            .get_metadata_opt(&status.curve_secret)
            .await?;
        observed.secret = Presence::of(found.as_ref(), mc);
    }
    Ok(())
}
