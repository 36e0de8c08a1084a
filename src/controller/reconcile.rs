//! One reconcile, thin: observe from the index, decide with [`plan::plan`], carry the plan
//! out with [`apply::execute`]. Level-triggered and idempotent; the watches wake it, and a
//! slow resync ([`super::context::RESYNC`]) looks at every MiniCluster now and then anyway.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use tracing::Instrument;

use super::apply;
use super::context::{Context, Error};
use super::observe::step::{Observation, observe};
use super::plan;
use crate::api::MiniCluster;
use crate::api::validation::FieldError;
use crate::model::certificate::Certificate;

/// Reconcile one MiniCluster.
pub async fn reconcile(mc: Arc<MiniCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let span =
        tracing::info_span!("reconcile", minicluster = %mc.name_any(), namespace = ?mc.namespace());
    let result = reconcile_inner(&mc, &ctx).instrument(span).await;
    ctx.metrics
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    if result.is_ok() {
        ctx.succeeded(&mc);
    }
    result
}

/// Back off exponentially per MiniCluster ([`backoff`]): 1 s, 2 s, 4 s ... up to 256 s.
pub fn error_policy(mc: Arc<MiniCluster>, error: &Error, ctx: Arc<Context>) -> Action {
    let attempts = ctx.failed(&mc);
    ctx.metrics
        .reconcile_errors
        .get_or_create(&crate::metrics::ErrorLabels {
            reason: error.reason().to_string(),
        })
        .inc();
    let delay = backoff(attempts);
    if error.reason() == "conflict" {
        tracing::info!(minicluster = %mc.name_any(), namespace = ?mc.namespace(), %error, ?delay, "apply conflict; retrying");
    } else {
        tracing::warn!(minicluster = %mc.name_any(), namespace = ?mc.namespace(), %error, ?delay, "reconcile failed; retrying");
    }
    Action::requeue(delay)
}

/// The wait after `attempts` failed reconciles in a row: 1 s, doubling, at most
/// [`BACKOFF_MAX`] (backon's exponential backoff, without jitter).
fn backoff(attempts: u32) -> Duration {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_factor(2.0)
        .with_max_delay(BACKOFF_MAX)
        .without_max_times()
        .build()
        .nth(attempts.saturating_sub(1) as usize)
        .unwrap_or(BACKOFF_MAX)
}

/// The longest wait between two reconciles of a MiniCluster that keep failing.
const BACKOFF_MAX: Duration = Duration::from_secs(256);

async fn reconcile_inner(cached: &MiniCluster, ctx: &Context) -> Result<Action, Error> {
    // Going away, or in a namespace going away: nothing is written for it any more (the
    // objects it owns go with it).
    if cached.metadata.deletion_timestamp.is_some() {
        tracing::debug!("being deleted: nothing to do");
        return Ok(Action::await_change());
    }
    if ctx.is_terminating(cached) {
        tracing::debug!("its namespace is being terminated: nothing to do");
        return Ok(Action::await_change());
    }
    ctx.synced().await;
    let mc = ctx.latest(cached);
    ctx.saw(&mc, Instant::now(), Timestamp::now());
    // The status the last reconcile wrote (this process's, if the cache lags behind it).
    let old = mc.status.clone().unwrap_or_default();
    let Observation {
        observed,
        awaited,
        looked,
    } = observe(&mc, &old, ctx).await?;
    let spec = crate::model::resolve(&mc, &ctx.env);
    let certificate_refused = verify_certificate(plan::to_verify(&spec, observed.secret)).await?;
    // The moment this reconcile saw the state the new status is computed from.
    let seen = Instant::now();
    let input = plan::Inputs {
        mc: &mc,
        spec: &spec,
        old: &old,
        observed: &observed,
        certificate_refused,
        now: Timestamp::now(),
    };
    let mut plan = plan::plan(&input).map_err(Error::Render)?;
    let settled = plan::settles(&input, &plan).map_err(Error::Render)?;
    let decide = looked + seen.elapsed();
    ctx.metrics.reconcile_decide.observe(decide.as_secs_f64());
    if let Some(wait) = awaited {
        plan.requeue = Some(plan.requeue.map_or(wait, |r| r.min(wait)));
    }
    apply::execute(&mc, &old, &observed, plan, ctx, seen, settled).await
}

/// [`plan::verify_certificate`] of the certificate [`plan::to_verify`] gives, off the async
/// threads (its CURVE handshake blocks).
async fn verify_certificate(given: Option<&Certificate>) -> Result<Option<FieldError>, Error> {
    let Some(cert) = given.cloned() else {
        return Ok(None);
    };
    tokio::task::spawn_blocking(move || plan::verify_certificate(&cert))
        .await
        .map_err(|e| Error::Internal(format!("certificate task: {e}")))?
        .map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_reconcile_waits_one_second_doubling_to_its_cap() {
        // (failures in a row, the wait)
        let cases = [
            (1, 1),
            (2, 2),
            (3, 4),
            (8, 128),
            (9, 256),
            (10, 256),
            (1000, 256),
        ];
        for (attempts, secs) in cases {
            assert_eq!(backoff(attempts), Duration::from_secs(secs), "{attempts}");
        }
    }
}
