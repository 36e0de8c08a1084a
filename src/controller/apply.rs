//! Carrying out a [`Plan`]: its writes in order, then its Events, then the status, once.
//!
//! Creation is the only place the executor reads: the watches see only labelled objects, so
//! the operator creates an object with a create, never an apply, that fails if the name is
//! taken; only then does it look at whose the object is (a 409, then a GET). A Service is
//! server-side applied (it may change later) after a GET that makes sure no one else's has
//! that name. Owned objects are applied with force: a field someone changed by hand is set
//! back. What a create made is remembered ([`super::made`]) until its watch shows it.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, Recorder};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::context::{Context, Error, FIELD_MANAGER, RESYNC, UPDATE_MANAGER};
use super::durations::Transition;
use super::made::Object;
use super::observe::{Observed, OwnedObject};
use super::owned::controlled_by;
use super::plan::{Plan, Step};
use crate::api::{MiniCluster, MiniClusterStatus};
use crate::jobset::JobSet;
use crate::model::certificate::Certificate;
use crate::render;

/// Why a step did not happen.
enum Stop {
    /// An object of that name belongs to something else ("Kind name").
    Foreign(String),
    /// The API server refused the change for good (invalid, or an admission webhook).
    Refused(String),
    /// The MiniCluster's namespace is being deleted: nothing can be made in it any more.
    Terminating,
    /// Anything else: retried with backoff.
    Retry(Error),
}

impl From<kube::Error> for Stop {
    fn from(e: kube::Error) -> Self {
        match &e {
            e if namespace_terminating(e) => Stop::Terminating,
            kube::Error::Api(s)
                if s.code == 400
                    || s.code == 422
                    || (s.code == 403 && s.message.contains("admission webhook")) =>
            {
                Stop::Refused(s.message.clone())
            }
            _ => Stop::Retry(e.into()),
        }
    }
}

/// Whether the API server refused a write because the namespace is being deleted: the
/// NamespaceLifecycle admission's answer to a create there (403 `Forbidden`, "unable to
/// create new content in namespace ... because it is being terminated", with the cause
/// `NamespaceTerminating`). Final for every MiniCluster in that namespace.
pub(super) fn namespace_terminating(error: &kube::Error) -> bool {
    let kube::Error::Api(s) = error else {
        return false;
    };
    s.code == 403
        && (s.message.contains("because it is being terminated")
            || s.details
                .iter()
                .any(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")))
}

/// The namespace of `mc` is being deleted: remember it (no more writes for its MiniClusters)
/// and stop, without an error to retry.
fn stop_for_terminating_namespace(mc: &MiniCluster, ctx: &Context) -> Action {
    let miniclusters = ctx.mark_terminating(mc);
    tracing::info!(
        namespace = mc.namespace_or_default(),
        miniclusters,
        "namespace is being terminated: nothing more is written for its MiniClusters"
    );
    Action::await_change()
}

/// Carry out `plan` for `mc`; `old` is the status the plan started from. A step stopped for
/// good (someone else's object, a refusal) ends the steps, and the plan's own
/// [`IfStopped`](super::plan::IfStopped) says what to write instead: nothing is decided here.
/// `settled`: the plan's status, once written, leaves nothing to do ([`super::plan::settles`]),
/// so the watch bringing it back wakes nothing.
pub(super) async fn execute(
    mc: &MiniCluster,
    old: &MiniClusterStatus,
    observed: &Observed,
    plan: Plan,
    ctx: &Context,
    seen: Instant,
    settled: bool,
) -> Result<Action, Error> {
    let mut plan = plan;
    let mut settled = settled;
    match run_steps(&plan.steps, mc, ctx).await {
        Ok(()) => {}
        Err(Stop::Terminating) => return Ok(stop_for_terminating_namespace(mc, ctx)),
        Err(Stop::Retry(e)) => return Err(e),
        Err(Stop::Foreign(object)) => {
            (plan, settled) = (plan.if_stopped.foreign(mc, &object), false)
        }
        Err(Stop::Refused(message)) => {
            (plan, settled) = (plan.if_stopped.refused(mc, &message), false)
        }
    }

    // Events before the status: a crash in between publishes them again next time, never
    // loses them (they come from the status transition).
    for note in &plan.events {
        if !publish(ctx, mc, note).await {
            return Ok(stop_for_terminating_namespace(mc, ctx));
        }
    }
    if &plan.status != old {
        let (stored, version) = write_status(mc, ctx, &plan.status).await?;
        ctx.remember(mc, stored, version.filter(|_| settled));
        let transition = Transition {
            mc,
            old,
            new: &plan.status,
            jobset: observed.jobset.as_deref(),
            admission: observed.admission.as_ref(),
            seen,
        };
        ctx.observe_durations(&transition);
    }
    if plan
        .steps
        .iter()
        .any(|s| matches!(s, Step::DeleteMiniCluster))
    {
        let api = Api::<MiniCluster>::namespaced(ctx.client.clone(), mc.namespace_or_default());
        if let Err(e) = delete_pinned(&api, &mc.name_any(), mc.metadata.uid.as_deref()).await {
            return Err(e.into());
        }
    }
    Ok(Action::requeue(plan.requeue.unwrap_or(RESYNC)))
}

/// Run the steps up to the first that stops. The leading steps that do not depend on each
/// other ([`Step::is_independent`]: the Secret, ConfigMap and Services a JobSet's pods use)
/// go out together, so a new cluster's JobSet waits for one round trip of them, not one per
/// object; the first of them that stops (in plan order) is the one reported.
async fn run_steps(steps: &[Step], mc: &MiniCluster, ctx: &Context) -> Result<(), Stop> {
    let together = steps.iter().take_while(|s| s.is_independent()).count();
    let (independent, rest) = steps.split_at(together);
    futures::future::join_all(independent.iter().map(|step| run(step, mc, ctx)))
        .await
        .into_iter()
        .collect::<Result<Vec<()>, Stop>>()?;
    for step in rest {
        match step {
            Step::DeleteMiniCluster => {} // after the status
            step => run(step, mc, ctx).await?,
        }
    }
    Ok(())
}

/// One step: a create (or a Service's apply) remembered until its watch shows it
/// ([`Context::made`]) and announced when it makes again what was made before; a later
/// change, applied with force under [`UPDATE_MANAGER`]; a delete pinned to the UID decided
/// on. (The MiniCluster's own delete comes after the status: [`execute`].)
async fn run(step: &Step, mc: &MiniCluster, ctx: &Context) -> Result<(), Stop> {
    let ns = mc.namespace_or_default();
    let api = || ctx.client.clone();
    match step {
        Step::CreateSecret(given, recreated) => {
            let made = create_secret(mc, given.as_deref(), ctx).await?;
            ctx.made(mc, Object::Secret);
            announce(ctx, mc, made, "RecreateSecret", recreated).await
        }
        Step::CreateConfigMap(cm, recreated) => create_config_map(cm, recreated, mc, ctx).await,
        Step::ApplyService(svc, recreated) => apply_service(svc, recreated, mc, ctx).await,
        Step::CreateJobSet(js) => create_jobset(js, mc, ctx).await,
        Step::CreateServicesJob(job, recreated) => {
            create_services_job(job, recreated, mc, ctx).await
        }
        Step::UpdateJobSet(update) => {
            let jobsets = Api::<JobSet>::namespaced(api(), ns);
            change(&jobsets, mc.name(), update).await
        }
        Step::UpdateServicesJob(update) => {
            let jobs = Api::<Job>::namespaced(api(), ns);
            change(&jobs, &render::services_job_name(mc), update).await
        }
        Step::DeleteConfigMap(d) => {
            let config_maps = Api::<ConfigMap>::namespaced(api(), ns);
            delete(&config_maps, &d.name, d.uid.as_deref()).await
        }
        Step::DeleteService(d) => {
            let services = Api::<Service>::namespaced(api(), ns);
            delete(&services, &d.name, d.uid.as_deref()).await
        }
        Step::DeleteJobSet(uid) => {
            let jobsets = Api::<JobSet>::namespaced(api(), ns);
            delete(&jobsets, mc.name(), uid.as_deref()).await
        }
        Step::DeleteServicesJob(uid) => {
            let jobs = Api::<Job>::namespaced(api(), ns);
            delete(&jobs, &render::services_job_name(mc), uid.as_deref()).await
        }
        Step::DeleteMiniCluster => Ok(()),
    }
}

async fn create_config_map(
    cm: &ConfigMap,
    recreated: &Option<String>,
    mc: &MiniCluster,
    ctx: &Context,
) -> Result<(), Stop> {
    let api = Api::<ConfigMap>::namespaced(ctx.client.clone(), mc.namespace_or_default());
    let made = create_unless_owned(&api, cm, mc).await?;
    ctx.made(mc, Object::ConfigMap(cm.name_any()));
    announce(ctx, mc, made.is_some(), "RecreateConfigMap", recreated).await
}

/// A Service is applied (it may change later), after a look that no one else's has its name.
async fn apply_service(
    svc: &Service,
    recreated: &Option<String>,
    mc: &MiniCluster,
    ctx: &Context,
) -> Result<(), Stop> {
    let api = Api::<Service>::namespaced(ctx.client.clone(), mc.namespace_or_default());
    let existed = refuse_foreign(&api, &svc.name_any(), mc).await?;
    let force = PatchParams::apply(FIELD_MANAGER).force();
    let applied = api
        .patch(&svc.name_any(), &force, &Patch::Apply(svc))
        .await?;
    ctx.made(
        mc,
        Object::Service(OwnedObject {
            name: svc.name_any(),
            uid: applied.metadata.uid,
            applied: svc.annotations().get(render::APPLIED_ANNOTATION).cloned(),
        }),
    );
    announce(ctx, mc, !existed, "RecreateService", recreated).await
}

/// A create, not an apply: it fails if the name is taken, so no lookup first. (The pods'
/// subdomain was checked by the plan, from the Service watch.)
async fn create_jobset(js: &JobSet, mc: &MiniCluster, ctx: &Context) -> Result<(), Stop> {
    let api = Api::<JobSet>::namespaced(ctx.client.clone(), mc.namespace_or_default());
    if let Some(made) = create_unless_owned(&api, js, mc).await? {
        ctx.made(mc, Object::JobSet(Arc::new((&made).into())));
    }
    Ok(())
}

async fn create_services_job(
    job: &Job,
    recreated: &Option<String>,
    mc: &MiniCluster,
    ctx: &Context,
) -> Result<(), Stop> {
    let api = Api::<Job>::namespaced(ctx.client.clone(), mc.namespace_or_default());
    let made = create_unless_owned(&api, job, mc).await?;
    let announced = made.is_some();
    if let Some(made) = made {
        ctx.made(mc, Object::ServicesJob(Arc::new(made)));
    }
    announce(ctx, mc, announced, "RecreateJob", recreated).await
}

/// The later change of an object the operator made: applied with force under
/// [`UPDATE_MANAGER`], which owns only the fields it changes.
async fn change<K>(api: &Api<K>, name: &str, update: &serde_json::Value) -> Result<(), Stop>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let force = PatchParams::apply(UPDATE_MANAGER).force();
    api.patch(name, &force, &Patch::Apply(update)).await?;
    Ok(())
}

/// The Recreated Warning of a step ([`Step`]), if its create made the object.
async fn announce(
    ctx: &Context,
    mc: &MiniCluster,
    made: bool,
    action: &'static str,
    recreated: &Option<String>,
) -> Result<(), Stop> {
    if made
        && let Some(message) = recreated
        && !publish(ctx, mc, &super::events::recreated(action, message)).await
    {
        return Err(Stop::Terminating);
    }
    Ok(())
}

/// `Err(Foreign)` if an object of that name exists and this MiniCluster does not own it;
/// otherwise whether it exists.
async fn refuse_foreign<K>(api: &Api<K>, name: &str, mc: &MiniCluster) -> Result<bool, Stop>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_metadata_opt(name).await? {
        Some(o) if !controlled_by(&o, mc) => Err(Stop::Foreign(format!("{} {name}", K::kind(&())))),
        found => Ok(found.is_some()),
    }
}

/// Create `obj` unless an object of its name exists: fine if it is this MiniCluster's (a
/// watch that has not caught up), `Foreign` otherwise. `Ok(Some(made))` when this call made
/// it, `Ok(None)` when it was there already.
async fn create_unless_owned<K>(api: &Api<K>, obj: &K, mc: &MiniCluster) -> Result<Option<K>, Stop>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api.create(&params, obj).await {
        Ok(made) => Ok(Some(made)),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let name = obj.name_any();
            tracing::debug!(
                kind = K::kind(&()).as_ref(),
                %name,
                "create found the name taken; looking at whose it is"
            );
            match api.get_metadata_opt(&name).await? {
                Some(o) if controlled_by(&o, mc) => Ok(None),
                Some(o) if o.metadata.deletion_timestamp.is_some() => Err(Stop::Retry(
                    Error::Internal(format!("{} {name} is still being deleted", K::kind(&()))),
                )),
                Some(_) => Err(Stop::Foreign(format!("{} {name}", K::kind(&())))),
                // Gone between the two calls: try again.
                None => Err(Stop::Retry(Error::Kube(kube::Error::Api(s)))),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Delete `name`, pinned to `uid` when known: gone already (404) or replaced by another
/// object of the name since the decision (409, the precondition failed) is done, and the
/// next reconcile decides about the new one.
async fn delete<K>(api: &Api<K>, name: &str, uid: Option<&str>) -> Result<(), Stop>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if delete_pinned(api, name, uid).await? == Deleted::Replaced {
        tracing::info!(%name, "not deleted: another object of its name replaced it");
    }
    Ok(())
}

/// What a delete the operator decided did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    /// The object is being deleted.
    Deleted,
    /// There was no object of the name.
    Gone,
    /// Another object of the name had replaced the one decided on (its UID differs): the
    /// API server refused the delete (409) and nothing was deleted.
    Replaced,
}

/// The delete every step of a plan sends: of `name`, with the UID the plan decided on as a
/// precondition when known (a background delete), so a decision made on an object that was
/// since deleted and made again under the same name never deletes the new one.
pub async fn delete_pinned<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<&str>,
) -> Result<Deleted, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &pinned(uid)).await {
        Ok(_) => Ok(Deleted::Deleted),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Deleted::Gone),
        Err(kube::Error::Api(s)) if s.code == 409 && uid.is_some() => Ok(Deleted::Replaced),
        Err(e) => Err(e),
    }
}

/// A background delete with a UID precondition when `uid` is known.
fn pinned(uid: Option<&str>) -> DeleteParams {
    DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::background()
    }
}

/// Create the certificate's Secret: the spec's certificate (`given`, checked before the plan)
/// or a keypair generated now (through libzmq: blocking work, off the async threads). The key
/// is never logged. Whether this call made it.
async fn create_secret(
    mc: &MiniCluster,
    given: Option<&Certificate>,
    ctx: &Context,
) -> Result<bool, Stop> {
    let certificate = match given {
        Some(cert) => cert.clone(),
        None => {
            let name = mc.name().to_string();
            tokio::task::spawn_blocking(move || Certificate::generate(&name))
                .await
                .map_err(|e| Stop::Retry(Error::Internal(format!("certificate task: {e}"))))?
                .map_err(|e| Stop::Retry(e.into()))?
        }
    };
    let secret = render::curve_secret(mc, &certificate.to_text());
    let api = Api::<Secret>::namespaced(ctx.client.clone(), mc.namespace_or_default());
    Ok(create_unless_owned(&api, &secret, mc).await?.is_some())
}

/// Write `status` (a server-side apply of the status subresource); the status as the API
/// server stored it (timestamps to the second), which its watch event will show, and the
/// MiniCluster's version that write made.
async fn write_status(
    mc: &MiniCluster,
    ctx: &Context,
    status: &MiniClusterStatus,
) -> Result<(MiniClusterStatus, Option<String>), Error> {
    let body = json!({
        "apiVersion": MiniCluster::api_version(&()),
        "kind": MiniCluster::kind(&()),
        "status": status,
    });
    Api::<MiniCluster>::namespaced(ctx.client.clone(), mc.namespace_or_default())
        .patch_status(
            &mc.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map(|stored| {
            let version = stored.metadata.resource_version;
            (stored.status.unwrap_or_else(|| status.clone()), version)
        })
        .map_err(Error::from)
}

/// Publish an Event about `mc`. False if its namespace is being terminated (nothing more is
/// published or written there); other failures are logged, not retried.
async fn publish(ctx: &Context, mc: &MiniCluster, note: &super::events::Note) -> bool {
    let event = Event {
        type_: note.type_(),
        reason: note.reason.into(),
        note: Some(note.message.clone()),
        action: note.action.into(),
        secondary: None,
    };
    // A recorder of its own for each Event: kube's keeps every Event it published for six
    // minutes to count repeats into a series, 3 KiB each (6 MB at 1000 new MiniClusters);
    // these Events come from status transitions and seldom repeat.
    let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
    match recorder.publish(&event, &mc.object_ref(&())).await {
        Err(error) if namespace_terminating(&error) => return false,
        Err(error) => tracing::warn!(%error, "could not publish event"),
        Ok(()) => {}
    }
    if note.warning {
        tracing::warn!(reason = note.reason, message = %note.message, "event");
    } else {
        tracing::info!(reason = note.reason, message = %note.message, "event");
    }
    true
}
