//! One reconcile: observe, compute the desired objects (pure, in `render`), apply them with
//! server-side apply, write status. Level-triggered and idempotent; watches on the
//! MiniCluster, its JobSet and its pods wake it, nothing polls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tracing::Instrument;

use super::events::{announce, publish};
use super::observe::{Sightings, observe_durations};
use super::owned::{SecretState, controlled_by, ensure_curve_secret, not_owned};
use super::status::{self, Observed};
use crate::api::{MiniCluster, MiniClusterStatus, Phase, condition, validation};
use crate::jobset::JobSet;
use crate::metrics::SharedMetrics;
use crate::render::{self, Environment};

/// The field manager of every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "flux-operator";
/// The field manager of later changes to a JobSet: only the fields that may change while it
/// runs (the followers' size, `suspend` outside Kueue).
pub const UPDATE_MANAGER: &str = "flux-operator-update";

/// Shared state of the reconciler.
pub struct Context {
    pub(super) client: Client,
    pub(super) recorder: Recorder,
    pub(super) metrics: SharedMetrics,
    env: Environment,
    /// Whether Kueue's Workload API is served.
    kueue: bool,
    failures: Mutex<HashMap<ObjectRef<MiniCluster>, u32>>,
    /// When this process saw each MiniCluster's lifecycle moments (sub-second durations).
    sightings: Sightings,
}

impl Context {
    /// Build the context.
    pub fn new(
        client: Client,
        recorder: Recorder,
        metrics: SharedMetrics,
        cluster_domain: String,
        kueue: bool,
    ) -> Self {
        Self {
            client,
            recorder,
            metrics,
            env: Environment { cluster_domain },
            kueue,
            failures: Mutex::default(),
            sightings: Sightings::default(),
        }
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
    #[error("serialization: {0}")]
    Json(#[from] serde_json::Error),
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
            Error::Json(_) => "serialization",
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
            *n += 1;
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
        // Another manager (Kueue, JobSet) changed a field between our read and our apply.
        tracing::info!(minicluster = %mc.name_any(), namespace = ?mc.namespace(), %error, ?delay, "apply conflict; retrying");
    } else {
        tracing::warn!(minicluster = %mc.name_any(), namespace = ?mc.namespace(), %error, ?delay, "reconcile failed; retrying");
    }
    Action::requeue(delay)
}

async fn reconcile_inner(cached: &MiniCluster, ctx: &Context) -> Result<Action, Error> {
    let ns = cached.namespace().unwrap_or_else(|| "default".to_string());
    let name = cached.name_any();
    // The watch cache can lag behind our own last status write; status transitions (and the
    // metrics observed on them) must start from what the API server has now.
    let Some(fresh) = Api::<MiniCluster>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&name)
        .await?
    else {
        ctx.sightings.forget(cached);
        return Ok(Action::await_change());
    };
    let mc = &fresh;
    if mc.metadata.deletion_timestamp.is_some() {
        ctx.sightings.forget(mc);
        return Ok(Action::await_change());
    }
    let now = Timestamp::now();
    ctx.sightings.saw(mc, Instant::now(), now);

    // 1. What only the operator can check. Nothing is created for an invalid spec.
    let errors = validation::validate(mc);
    if !errors.is_empty() {
        let message = errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return invalid_spec(mc, ctx, &message, now).await;
    }

    // 2. Render first: a spec that cannot be rendered (e.g. a ConfigMap past 1 MiB) leaves
    // nothing behind, not even the certificate Secret.
    let desired = match render::desired(mc, &ctx.env) {
        Ok(d) => d,
        Err(e) if e.field().is_some() => return invalid_spec(mc, ctx, &e.to_string(), now).await,
        Err(e) => return Err(e.into()),
    };

    // The certificate, once. A user-supplied one replaces the generated one.
    match ensure_curve_secret(mc, ctx, &ns).await {
        Ok(SecretState::Ready) => {}
        Ok(SecretState::Foreign(message)) => {
            invalid_spec(mc, ctx, &message, now).await?;
            return Ok(Action::requeue(Duration::from_secs(60)));
        }
        Ok(SecretState::Terminating) => return Ok(Action::requeue(Duration::from_secs(2))),
        Err(Error::Certificate(e)) if e.field().is_some() => {
            return invalid_spec(mc, ctx, &e.to_string(), now).await;
        }
        Err(e) => return Err(e),
    }

    // 3. Desired state, applied. Objects of the same name that this MiniCluster does not own
    // are never taken over.
    let params = PatchParams::apply(FIELD_MANAGER);
    let config_maps = Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns);
    let services = Api::<Service>::namespaced(ctx.client.clone(), &ns);
    let mut foreign = not_owned(&config_maps, &render::config_map_name(mc), mc).await?;
    for svc in &desired.services {
        foreign = foreign.or(not_owned(&services, &svc.name_any(), mc).await?);
    }
    let jobs = Api::<Job>::namespaced(ctx.client.clone(), &ns);
    let services_job = match &desired.services_job {
        Some(job) => jobs.get_opt(&job.name_any()).await?,
        None => None,
    };
    if let Some(job) = services_job.as_ref().filter(|j| !controlled_by(*j, mc)) {
        foreign = foreign.or(Some(format!("Job {}", job.name_any())));
    }
    // The pods' subdomain is a headless Service JobSet creates (owned by our JobSet) unless
    // one of that name exists: another MiniCluster's Service of that name (`app` with a
    // service `web` makes `app-web`) would silently serve as this cluster's subdomain.
    let subdomain = mc.subdomain();
    if foreign.is_none()
        && !desired.services.iter().any(|s| s.name_any() == subdomain)
        && let Some(svc) = services.get_metadata_opt(subdomain).await?
    {
        let ours = svc.metadata.owner_references.iter().flatten().any(|o| {
            (o.kind == "JobSet" && o.name == name)
                || (o.kind == "MiniCluster" && Some(&o.uid) == mc.metadata.uid.as_ref())
        });
        if !ours {
            foreign = Some(format!(
                "Service {subdomain} (the pods' subdomain; spec.network.headlessName can name another)"
            ));
        }
    }
    let jobsets = Api::<JobSet>::namespaced(ctx.client.clone(), &ns);
    let observed = jobsets.get_opt(&name).await?;
    if let Some(existing) = &observed
        && !controlled_by(existing, mc)
    {
        foreign = Some(format!("JobSet {name}"));
    }
    if let Some(object) = foreign {
        let message = format!(
            "{object} exists and is not owned by this MiniCluster; delete it or rename the MiniCluster"
        );
        invalid_spec(mc, ctx, &message, now).await?;
        // Nothing watches the other object: look again now and then, in case it goes.
        return Ok(Action::requeue(Duration::from_secs(60)));
    }
    let applied: Result<(), kube::Error> = async {
        config_maps
            .patch(
                &render::config_map_name(mc),
                &params,
                &Patch::Apply(&desired.config_map),
            )
            .await?;
        for svc in &desired.services {
            services
                .patch(&svc.name_any(), &params, &Patch::Apply(svc))
                .await?;
        }
        // The services pod's Job: created once, like the JobSet (its pod template cannot
        // change), never again for a finished cluster; later only `suspend` follows.
        match (&desired.services_job, &services_job) {
            (Some(job), None)
                if mc
                    .status
                    .as_ref()
                    .is_none_or(|s| s.completion_time.is_none()) =>
            {
                jobs.patch(&job.name_any(), &params, &Patch::Apply(job))
                    .await?;
            }
            (Some(job), Some(existing))
                if existing.spec.as_ref().and_then(|s| s.suspend) != Some(mc.spec.suspend) =>
            {
                let update = render::services_job_update(mc);
                jobs.patch(
                    &job.name_any(),
                    &PatchParams::apply(UPDATE_MANAGER).force(),
                    &Patch::Apply(&update),
                )
                .await?;
            }
            _ => {}
        }
        Ok(())
    }
    .await;
    if let Err(e) = applied {
        return rejected_or_retry(mc, ctx, e, now).await;
    }

    let old_status = mc.status.clone().unwrap_or_default();
    let jobset = match observed {
        // The JobSet went after the cluster finished (ttlSecondsAfterFinished, or deleted by
        // hand): a finished cluster never runs again.
        None if old_status.completion_time.is_some() => None,
        None => {
            let created = match jobsets
                .patch(&name, &params, &Patch::Apply(&desired.jobset))
                .await
            {
                Ok(js) => js,
                Err(e) => return rejected_or_retry(mc, ctx, e, now).await,
            };
            publish(
                ctx,
                mc,
                EventType::Normal,
                "Created",
                "CreateJobSet",
                format!("Created JobSet {name}"),
            )
            .await;
            Some(created)
        }
        Some(js) => Some(js),
    };

    // Kueue's verdict, for a JobSet Kueue manages (a queue label, or a Workload it made).
    let admission = match &jobset {
        Some(js) if ctx.kueue => super::kueue::admission(&ctx.client, &ns, js).await?,
        _ => None,
    };
    let queued = admission.is_some() || jobset.as_ref().is_some_and(render::jobset::is_queued);

    // Later changes: only what may change on a running JobSet (the followers' size, and
    // `suspend` outside Kueue), under a field manager of its own, so nothing else the
    // operator set at creation is re-asserted against JobSet's or Kueue's own changes.
    let mut apply_error = None;
    let jobset = match jobset {
        Some(js) if !is_finished(&js) => {
            match render::jobset::update(mc, (!queued).then_some(mc.spec.suspend)) {
                Some(update) if render::jobset::needs_update(&js, &update) => {
                    match jobsets
                        .patch(
                            &name,
                            &PatchParams::apply(UPDATE_MANAGER).force(),
                            &Patch::Apply(&update),
                        )
                        .await
                    {
                        Ok(updated) => Some(updated),
                        Err(e) => {
                            apply_error = Some(e);
                            Some(js)
                        }
                    }
                }
                _ => Some(js),
            }
        }
        other => other,
    };

    // 4. Observe the pods and write status (also when an update failed: status shows what is).
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default().labels(&render::pod_selector(mc)))
        .await?
        .items;
    // The moment this reconcile saw the state the new status is computed from.
    let seen = Instant::now();
    let observed = Observed {
        jobset: jobset.as_ref(),
        pods: &pods,
        admission: admission.clone(),
    };
    let mut new_status = status::compute(mc, &observed, now);
    let unsupported = validation::unsupported(mc);
    status::set_condition(
        &mut new_status.conditions,
        condition::UNSUPPORTED,
        !unsupported.is_empty(),
        if unsupported.is_empty() {
            "AllSupported"
        } else {
            "FieldsIgnored"
        },
        &unsupported
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
        mc.metadata.generation,
        now,
    );
    status::set_condition(
        &mut new_status.conditions,
        condition::INVALID_SPEC,
        false,
        "Valid",
        "",
        mc.metadata.generation,
        now,
    );
    if new_status != old_status {
        patch_status(mc, ctx, &ns, &new_status).await?;
        announce(mc, ctx, &old_status, &new_status, &unsupported).await;
        observe_durations(
            mc,
            &ctx.metrics,
            &ctx.sightings,
            &ns,
            &old_status,
            &new_status,
            jobset.as_ref(),
            admission.as_ref(),
            seen,
        );
    }

    // 5. Clean up a finished cluster when asked.
    if mc.spec.cleanup && new_status.phase.is_some_and(Phase::is_finished) {
        Api::<MiniCluster>::namespaced(ctx.client.clone(), &ns)
            .delete(&name, &DeleteParams::background())
            .await?;
        publish(
            ctx,
            mc,
            EventType::Normal,
            "Cleanup",
            "Delete",
            "Deleted the finished MiniCluster (spec.cleanup)".into(),
        )
        .await;
    }
    match apply_error {
        Some(e) => rejected_or_retry(mc, ctx, e, now).await,
        None => Ok(Action::await_change()),
    }
}

/// Whether the JobSet finished (Completed or Failed).
fn is_finished(js: &JobSet) -> bool {
    js.condition_true("Completed") || js.condition_true("Failed")
}

/// An apply the API server refused for good (invalid, or denied by an admission webhook)
/// becomes a condition and an Event, not a retry loop; anything else is retried.
async fn rejected_or_retry(
    mc: &MiniCluster,
    ctx: &Context,
    e: kube::Error,
    now: Timestamp,
) -> Result<Action, Error> {
    match &e {
        kube::Error::Api(s)
            if s.code == 400
                || s.code == 422
                || (s.code == 403 && s.message.contains("admission webhook")) =>
        {
            let message = format!(
                "the API server refused the operator's change: {}",
                s.message
            );
            invalid_spec(mc, ctx, &message, now).await
        }
        _ => Err(e.into()),
    }
}

async fn invalid_spec(
    mc: &MiniCluster,
    ctx: &Context,
    message: &str,
    now: Timestamp,
) -> Result<Action, Error> {
    let ns = mc.namespace().unwrap_or_else(|| "default".to_string());
    let mut status = mc.status.clone().unwrap_or_default();
    let already = status.conditions.iter().any(|c| {
        c.type_ == condition::INVALID_SPEC
            && c.status == "True"
            && c.message == message
            && c.observed_generation == mc.metadata.generation
    });
    if already {
        return Ok(Action::await_change());
    }
    status.observed_generation = mc.metadata.generation;
    status.phase = Some(Phase::Failed);
    status::set_condition(
        &mut status.conditions,
        condition::INVALID_SPEC,
        true,
        "InvalidSpec",
        message,
        mc.metadata.generation,
        now,
    );
    patch_status(mc, ctx, &ns, &status).await?;
    publish(
        ctx,
        mc,
        EventType::Warning,
        "InvalidSpec",
        "Validate",
        message.to_string(),
    )
    .await;
    tracing::warn!(%message, "invalid MiniCluster spec");
    Ok(Action::await_change())
}

async fn patch_status(
    mc: &MiniCluster,
    ctx: &Context,
    ns: &str,
    status: &MiniClusterStatus,
) -> Result<(), Error> {
    let body = json!({
        "apiVersion": MiniCluster::api_version(&()),
        "kind": MiniCluster::kind(&()),
        "status": status,
    });
    Api::<MiniCluster>::namespaced(ctx.client.clone(), ns)
        .patch_status(
            &mc.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await?;
    Ok(())
}
