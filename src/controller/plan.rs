//! The decision: from a MiniCluster and what the watches hold about its objects
//! ([`Observed`]), everything one reconcile does ([`Plan`]): the objects to create, apply or
//! delete, the whole new status (every condition), and the Events.
//!
//! Pure: no I/O and no clock (the time comes in), so every decision is table-tested below.
//! [`super::apply`] carries a plan out.
//!
//! Rules the plan keeps:
//! - Nothing is created for a spec that fails validation or cannot be rendered.
//! - Objects of the same name that this MiniCluster does not own are never taken over: the
//!   cluster is held with the `Blocked` condition.
//! - The certificate is generated once. A Secret deleted under a cluster whose JobSet runs
//!   is not replaced by a new keypair (brokers started later could not join): `Degraded`.
//! - The ConfigMap is content-addressed and immutable; a running JobSet keeps the one it was
//!   created with, so the scripts under a pod never change (also across operator upgrades).
//! - A JobSet deleted under a cluster that had not finished is recreated, loudly: a Warning,
//!   the `Restarted` condition, and the lifecycle timestamps start again.
//! - Events come from state transitions (old status to new), so a crash between an action
//!   and its Event loses nothing: the next run sees the same transition and publishes it.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::ResourceExt;

use super::events::{self, Note};
use super::owned::controlled_by;
use super::status::{self, Admission, set_condition};
use crate::api::validation::{self, FieldError};
use crate::api::{MiniCluster, MiniClusterStatus, Phase, condition};
use crate::flux::curve::Certificate;
use crate::jobset::JobSet;
use crate::render::{self, Environment};

/// What the watches hold about one MiniCluster's objects.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The JobSet of the MiniCluster's name, owned or not.
    pub jobset: Option<Arc<JobSet>>,
    /// The services pod's Job (`spec.services`), if one carries the operator's label.
    pub services_job: Option<Arc<Job>>,
    /// The broker pods (by the name label).
    pub pods: Vec<Arc<Pod>>,
    /// Kueue's verdict on the JobSet's Workload, if Kueue made one.
    pub admission: Option<Admission>,
    /// The certificate Secret.
    pub secret: Presence,
    /// ConfigMaps this MiniCluster owns.
    pub config_maps: Vec<OwnedObject>,
    /// Services this MiniCluster owns.
    pub services: Vec<OwnedObject>,
    /// The Service named as the pods' subdomain ([`MiniCluster::subdomain`]), whoever made
    /// it ([`Presence::of_subdomain`]).
    pub subdomain: Presence,
    /// `spec.flux.curveCert`, as the reconcile found it before the plan ([`check_certificate`]):
    /// `None` when the spec gives none (the operator generates one).
    pub curve_cert: Option<Result<Box<Certificate>, FieldError>>,
}

/// `spec.flux.curveCert` of `mc`, parsed, and checked with a CURVE handshake unless its Secret
/// exists already (then the certificate is not used again). Whether the keys belong together
/// takes that handshake (blocking work through libzmq), so it is looked at here, before the
/// pure plan, which then refuses a bad one as `InvalidSpec` before it creates anything.
/// `Err` only when libzmq itself fails (not the spec's fault: retried).
pub fn check_certificate(
    mc: &MiniCluster,
    secret: Presence,
) -> Result<Option<Result<Box<Certificate>, FieldError>>, crate::flux::Error> {
    match crate::flux::given_certificate(mc, secret != Presence::Owned) {
        None => Ok(None),
        Some(Ok(cert)) => Ok(Some(Ok(Box::new(cert)))),
        Some(Err(e)) => match e.field() {
            Some(field) => Ok(Some(Err(FieldError {
                field: field.to_string(),
                message: e
                    .to_string()
                    .trim_start_matches(&format!("{field}: "))
                    .to_string(),
            }))),
            None => Err(e),
        },
    }
}

/// Whether an object of a given name exists, and whose it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Presence {
    /// No object of that name.
    #[default]
    Absent,
    /// Controlled by this MiniCluster.
    Owned,
    /// Someone else's, being deleted (e.g. a MiniCluster of the same name just deleted).
    Terminating,
    /// Someone else's.
    Foreign,
}

impl Presence {
    /// Whose the object `obj` of one of `mc`'s names is (`None`: no such object).
    pub fn of(obj: Option<&impl kube::Resource>, mc: &MiniCluster) -> Self {
        match obj {
            None => Presence::Absent,
            Some(o) if controlled_by(o, mc) => Presence::Owned,
            Some(o) if o.meta().deletion_timestamp.is_some() => Presence::Terminating,
            Some(_) => Presence::Foreign,
        }
    }

    /// Whose the Service `svc` named as `mc`'s pods' subdomain is. JobSet makes that headless
    /// Service (owned by the JobSet) unless one of that name exists, and then silently uses
    /// the one there: another MiniCluster's Service of that name (`app` with a service `web`
    /// makes `app-web`), or anyone's, would serve as this cluster's subdomain. `Owned`: made
    /// for this MiniCluster (by its JobSet, of its name, or by the operator for it).
    pub fn of_subdomain(svc: Option<&impl kube::Resource>, mc: &MiniCluster) -> Self {
        let Some(svc) = svc else {
            return Presence::Absent;
        };
        let ours = svc.meta().owner_references.iter().flatten().any(|o| {
            (o.kind == "JobSet" && o.name == mc.name())
                || (o.kind == "MiniCluster" && Some(&o.uid) == mc.metadata.uid.as_ref())
        });
        if ours {
            Presence::Owned
        } else if svc.meta().deletion_timestamp.is_some() {
            Presence::Terminating
        } else {
            Presence::Foreign
        }
    }
}

/// An owned object the watches hold: its name and the hash it was applied with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedObject {
    /// The object's name.
    pub name: String,
    /// [`render::APPLIED_ANNOTATION`], if set.
    pub applied: Option<String>,
}

/// One write.
///
/// Recreated: every create of an object the cluster had before (someone deleted it) carries
/// the Warning that says so, published only if that create (or apply) made the object: a
/// watch that has not caught up with the first create is no deletion.
#[derive(Clone, Debug)]
pub enum Step {
    /// Create the CURVE certificate's Secret (fails if the name is taken): with the spec's
    /// certificate (checked before the plan), or, when `None`, a keypair generated then.
    /// With the Recreated Warning if it was made before.
    CreateSecret(Option<Box<Certificate>>, Option<String>),
    /// Create the content-addressed ConfigMap, with the Recreated Warning if this create makes
    /// again one the cluster had.
    CreateConfigMap(Box<ConfigMap>, Option<String>),
    /// Server-side apply (with force) of an owned Service, with the Recreated Warning if it
    /// is missing and was made before.
    ApplyService(Box<Service>, Option<String>),
    /// Create the JobSet (a create: never over an object someone else owns, and no lookup
    /// before it).
    CreateJobSet(Box<JobSet>),
    /// The later change of a running JobSet: the followers' size, `suspend` outside Kueue.
    UpdateJobSet(serde_json::Value),
    /// Create the services pod's Job (a create: never over someone else's), with the
    /// Recreated Warning if it was made before.
    CreateServicesJob(Box<Job>, Option<String>),
    /// The services pod's Job follows `spec.suspend`.
    UpdateServicesJob(serde_json::Value),
    /// Delete an owned ConfigMap no JobSet uses any more.
    DeleteConfigMap(String),
    /// Delete an owned Service the spec no longer asks for.
    DeleteService(String),
    /// `ttlSecondsAfterFinished` has passed since the recorded completion: delete the
    /// JobSet (its pods go with it).
    DeleteJobSet,
    /// The same, for the services pod's Job.
    DeleteServicesJob,
    /// `spec.cleanup`: delete the finished MiniCluster.
    DeleteMiniCluster,
}

/// Everything one reconcile does.
#[derive(Clone, Debug)]
pub struct Plan {
    /// In order: Secret, ConfigMap, Services, JobSet, the services Job, then deletions.
    pub steps: Vec<Step>,
    /// The whole new status.
    pub status: MiniClusterStatus,
    /// Events for the transitions from the old status to [`Plan::status`].
    pub events: Vec<Note>,
    /// Look again after this long even if nothing changes (waiting for something no watch
    /// reports).
    pub requeue: Option<Duration>,
}

/// Why a plan could not be made: the operator's fault, not the spec's (retried).
pub type Error = render::Error;

/// Decide. `mc.status` is the status the last reconcile wrote.
pub fn plan(
    mc: &MiniCluster,
    observed: &Observed,
    env: &Environment,
    now: Timestamp,
) -> Result<Plan, Error> {
    let old = mc.status.clone().unwrap_or_default();

    // 1. The spec: what only the operator can check, then whether it renders at all.
    let errors = validation::validate(mc);
    if !errors.is_empty() {
        let message = join(&errors);
        return Ok(held(
            mc,
            condition::INVALID_SPEC,
            "InvalidSpec",
            &message,
            None,
            now,
        ));
    }
    // A certificate whose keys do not belong together: refused before anything is made (its
    // Secret is the first object a new cluster gets).
    if let Some(Err(e)) = &observed.curve_cert {
        return Ok(held(
            mc,
            condition::INVALID_SPEC,
            "InvalidSpec",
            &e.to_string(),
            None,
            now,
        ));
    }
    let desired = match render::desired(mc, env) {
        Ok(d) => d,
        Err(e) if e.field().is_some() => {
            return Ok(held(
                mc,
                condition::INVALID_SPEC,
                "InvalidSpec",
                &e.to_string(),
                None,
                now,
            ));
        }
        Err(e) => return Err(e),
    };

    // 2. Ownership: never take over an object of the same name.
    let name = mc.name();
    let jobset = observed.jobset.as_deref();
    if let Some(js) = jobset
        && !controlled_by(js, mc)
    {
        if js.metadata.deletion_timestamp.is_some() {
            return Ok(waiting(mc, now));
        }
        return Ok(foreign(mc, &format!("JobSet {name}"), now));
    }
    let secret_name = render::curve_secret_name(mc);
    match observed.secret {
        Presence::Terminating => return Ok(waiting(mc, now)),
        Presence::Foreign => return Ok(foreign(mc, &format!("Secret {secret_name}"), now)),
        Presence::Absent | Presence::Owned => {}
    }

    // The pods' subdomain, before the JobSet that takes it is made (from the watch of all
    // Services: no lookup).
    if jobset.is_none() && old.completion_time.is_none() {
        match observed.subdomain {
            Presence::Terminating => return Ok(waiting(mc, now)),
            Presence::Foreign => {
                let object = format!(
                    "Service {} (the pods' subdomain; spec.network.headlessName can name another)",
                    mc.subdomain()
                );
                return Ok(foreign(mc, &object, now));
            }
            Presence::Absent | Presence::Owned => {}
        }
    }

    let mut steps = Vec::new();
    let mut degraded = Vec::new();
    // Whether this cluster's Secret, ConfigMap and Services were made before: they are made
    // before its JobSet, and a status that names a JobSet was written after a run that made
    // them all (then a missing one was deleted, and making it again says so).
    let made_before = jobset.is_some() || !old.job_set.is_empty();
    let finished = jobset.is_some_and(is_finished);
    let live_jobset = jobset.filter(|_| !finished);
    // Finished for good: its JobSet finished, or went after it finished. Nothing is made again.
    let over = finished || (jobset.is_none() && old.completion_time.is_some());

    // 3. The certificate: once. A user-supplied one is the same every time it is made.
    let mut curve_secret = old.curve_secret.clone();
    // The brokers' certificate is gone for good: new pods could not start (see step 6).
    let mut certificate_lost = false;
    match observed.secret {
        Presence::Owned => curve_secret = secret_name.clone(),
        _ if over => {}
        _ if live_jobset.is_some() && mc.spec.flux.curve_cert.is_empty() => {
            certificate_lost = true;
            degraded.push(format!(
                "Secret {secret_name} with the brokers' CURVE certificate was deleted while the \
                 cluster runs; no new keypair is made, because brokers started with one could \
                 not join brokers started with the other: delete and recreate the MiniCluster \
                 to start over"
            ));
        }
        _ => {
            let given = observed.curve_cert.clone().and_then(Result::ok);
            let recreated = (!old.curve_secret.is_empty()).then(|| {
                format!(
                    "Secret {secret_name}, with the brokers' CURVE certificate, was deleted; it \
                     was made again ({})",
                    if given.is_some() {
                        "from spec.flux.curveCert"
                    } else {
                        "with a new keypair, for a JobSet made from now on"
                    }
                )
            });
            steps.push(Step::CreateSecret(given, recreated));
            curve_secret = secret_name.clone();
        }
    }

    // 4. The ConfigMap: the one the JobSet was created with, or (before it) the desired one.
    let desired_cm = desired.config_map.name_any();
    let in_use = jobset
        .and_then(config_map_of)
        .unwrap_or_else(|| desired_cm.clone());
    let have = |n: &str| observed.config_maps.iter().any(|c| c.name == n);
    if !have(&in_use) && !over {
        if in_use == desired_cm {
            let recreated = made_before.then(|| {
                format!(
                    "ConfigMap {in_use}, with the brokers' config and scripts, was deleted; \
                     it was made again with the same content"
                )
            });
            steps.push(Step::CreateConfigMap(
                Box::new(desired.config_map.clone()),
                recreated,
            ));
        } else {
            degraded.push(format!(
                "ConfigMap {in_use}, with the scripts the brokers started with, was deleted; \
                 a broker pod that restarts cannot start"
            ));
        }
    }

    // 5. Services: applied when absent or not as desired; owned ones no longer desired go.
    for svc in &desired.services {
        let hash = svc.annotations().get(render::APPLIED_ANNOTATION).cloned();
        let current = observed.services.iter().find(|s| s.name == svc.name_any());
        if current.is_none_or(|s| s.applied != hash) {
            let recreated = (current.is_none() && made_before).then(|| {
                format!(
                    "Service {}, made for this MiniCluster, was deleted; it was made again",
                    svc.name_any()
                )
            });
            steps.push(Step::ApplyService(Box::new(svc.clone()), recreated));
        }
    }

    // 6. The JobSet.
    let mut base = mc.clone();
    let mut restarted = None;
    let created;
    let jobset_for_status = match jobset {
        // Finished, and its JobSet went (ttlSecondsAfterFinished, or deleted): it stays
        // finished and never runs again.
        None if old.completion_time.is_some() => {
            created = None;
            None
        }
        None => {
            if !old.job_set.is_empty() {
                restarted = Some(format!(
                    "JobSet {name} was deleted while the cluster was {}; it was recreated: a \
                     new Flux instance starts and the old instance's jobs are gone",
                    old.phase.map_or("Pending", Phase::as_str)
                ));
                let status = base.status.get_or_insert_default();
                status.phase = None;
                status.start_time = None;
                status.lead_ready_time = None;
                status.ready_time = None;
            }
            steps.push(Step::CreateJobSet(Box::new(desired.jobset.clone())));
            created = Some(desired.jobset.clone());
            created.as_ref()
        }
        Some(js) => {
            created = None;
            if !finished {
                let queued = observed.admission.is_some() || render::jobset::is_queued(js);
                if let Some(update) =
                    render::jobset::update(mc, (!queued).then_some(mc.spec.suspend))
                    && render::jobset::needs_update(js, &update)
                {
                    if certificate_lost {
                        degraded.push(
                            "the change to the JobSet (size or suspend) is held: its new pods \
                             would wait for the deleted certificate Secret"
                                .to_string(),
                        );
                    } else {
                        steps.push(Step::UpdateJobSet(update));
                    }
                }
            }
            Some(js)
        }
    };

    // The services pod (`spec.services`): made once, like the JobSet (its pod template
    // cannot change), never for a cluster that is over; later only `suspend` follows.
    if let Some(job) = &desired.services_job {
        match observed.services_job.as_deref() {
            None if !over => {
                // Made after the JobSet: made before only if a status naming the JobSet was
                // written (after the run that made both).
                let recreated = (!old.job_set.is_empty()).then(|| {
                    format!(
                        "Job {}, of the services pod (spec.services), was deleted; it was made \
                         again",
                        job.name_any()
                    )
                });
                steps.push(Step::CreateServicesJob(Box::new(job.clone()), recreated));
            }
            Some(existing)
                if !over
                    && controlled_by(existing, mc)
                    && existing.spec.as_ref().and_then(|s| s.suspend) != Some(mc.spec.suspend) =>
            {
                steps.push(Step::UpdateServicesJob(render::services_job_update(mc)));
            }
            _ => {}
        }
    }

    // 7. ConfigMaps nobody uses any more (an older operator's, or made before the JobSet).
    if jobset.is_some() || created.is_some() {
        for cm in &observed.config_maps {
            if cm.name != in_use {
                steps.push(Step::DeleteConfigMap(cm.name.clone()));
            }
        }
    }
    for svc in &observed.services {
        if !desired.services.iter().any(|d| d.name_any() == svc.name) {
            steps.push(Step::DeleteService(svc.name.clone()));
        }
    }

    // 8. Status: the whole of it, every condition.
    let pods: Vec<Pod> = observed.pods.iter().map(|p| p.as_ref().clone()).collect();
    let mut new = status::compute(
        &base,
        &status::Observed {
            jobset: jobset_for_status,
            pods: &pods,
            admission: observed.admission.clone(),
        },
        now,
    );
    new.curve_secret = curve_secret;
    let generation = mc.metadata.generation;
    let unsupported = validation::unsupported(mc);
    set_condition(
        &mut new.conditions,
        condition::UNSUPPORTED,
        !unsupported.is_empty(),
        if unsupported.is_empty() {
            "AllSupported"
        } else {
            "FieldsIgnored"
        },
        &join(&unsupported),
        generation,
        now,
    );
    set_condition(
        &mut new.conditions,
        condition::INVALID_SPEC,
        false,
        "Valid",
        "",
        generation,
        now,
    );
    clear(&mut new, condition::BLOCKED, generation, now);
    if degraded.is_empty() {
        clear(&mut new, condition::DEGRADED, generation, now);
    } else {
        let reason = "OwnedObjectDeleted";
        set_condition(
            &mut new.conditions,
            condition::DEGRADED,
            true,
            reason,
            &degraded.join("; "),
            generation,
            now,
        );
    }
    if let Some(message) = &restarted {
        set_condition(
            &mut new.conditions,
            condition::RESTARTED,
            true,
            "JobSetDeleted",
            message,
            generation,
            now,
        );
    }

    // 9. `ttlSecondsAfterFinished`, counted by the operator from the completion its status
    // recorded: the JobSet is never deleted before the status says the cluster finished,
    // so a finished cluster cannot be mistaken for a deleted running one.
    let mut requeue = None;
    if let (Some(ttl), Some(done)) = (mc.spec.ttl_seconds_after_finished, &old.completion_time) {
        let alive = |meta: &kube::api::ObjectMeta| meta.deletion_timestamp.is_none();
        let jobset_left = jobset.is_some_and(|js| alive(&js.metadata));
        let job_left = observed
            .services_job
            .as_deref()
            .is_some_and(|j| controlled_by(j, mc) && alive(&j.metadata));
        if jobset_left || job_left {
            let expires = done
                .0
                .saturating_add(jiff::SignedDuration::from_secs(i64::from(ttl.max(0))))
                .unwrap_or(Timestamp::MAX);
            if now >= expires {
                if jobset_left {
                    steps.push(Step::DeleteJobSet);
                }
                if job_left {
                    steps.push(Step::DeleteServicesJob);
                }
            } else {
                requeue = Some(Duration::try_from(expires.duration_since(now)).unwrap_or_default());
            }
        }
    }

    // 10. Clean up a finished cluster when asked.
    if mc.spec.cleanup && new.phase.is_some_and(Phase::is_finished) {
        steps.push(Step::DeleteMiniCluster);
    }

    let events = events::transitions(mc, &old, &new);
    Ok(Plan {
        steps,
        status: new,
        events,
        requeue,
    })
}

/// A condition that may have been set before is now false (not added if it never was).
fn clear(status: &mut MiniClusterStatus, type_: &str, generation: Option<i64>, now: Timestamp) {
    if status.conditions.iter().any(|c| c.type_ == type_) {
        set_condition(
            &mut status.conditions,
            type_,
            false,
            "Resolved",
            "",
            generation,
            now,
        );
    }
}

/// Nothing is done: `type_` says why. The phase stays what it was (Pending for a new
/// cluster): a spec can be fixed and a foreign object can go, neither is final.
fn held(
    mc: &MiniCluster,
    type_: &str,
    reason: &str,
    message: &str,
    requeue: Option<Duration>,
    now: Timestamp,
) -> Plan {
    let old = mc.status.clone().unwrap_or_default();
    let mut new = old.clone();
    new.observed_generation = mc.metadata.generation;
    new.phase = Some(old.phase.unwrap_or(Phase::Pending));
    set_condition(
        &mut new.conditions,
        type_,
        true,
        reason,
        message,
        mc.metadata.generation,
        now,
    );
    Plan {
        steps: Vec::new(),
        events: events::transitions(mc, &old, &new),
        status: new,
        requeue,
    }
}

/// An object of one of the MiniCluster's names belongs to something else. Nothing watches
/// the other object: look again now and then, in case it goes.
fn foreign(mc: &MiniCluster, object: &str, now: Timestamp) -> Plan {
    let message = format!(
        "{object} exists and is not owned by this MiniCluster; delete it or rename the MiniCluster"
    );
    held(
        mc,
        condition::BLOCKED,
        "ForeignObject",
        &message,
        Some(FOREIGN_RECHECK),
        now,
    )
}

/// How often a cluster held by a foreign object looks again.
pub const FOREIGN_RECHECK: Duration = Duration::from_secs(60);

/// An object of the MiniCluster's names is still being deleted (a MiniCluster of the same
/// name just went): wait for it, changing nothing.
fn waiting(mc: &MiniCluster, _now: Timestamp) -> Plan {
    Plan {
        steps: Vec::new(),
        status: mc.status.clone().unwrap_or_default(),
        events: Vec::new(),
        requeue: Some(Duration::from_secs(2)),
    }
}

/// The API server refused the operator's change (invalid, or an admission webhook said no):
/// held, `Blocked`, until the spec or the webhook changes.
pub fn refused(mc: &MiniCluster, message: &str, now: Timestamp) -> Plan {
    let message = format!("the API server refused the operator's change: {message}");
    held(mc, condition::BLOCKED, "Refused", &message, None, now)
}

/// An object the plan meant to create exists and belongs to something else (found when the
/// create ran: the watches only see labelled objects).
pub fn found_foreign(mc: &MiniCluster, object: &str, now: Timestamp) -> Plan {
    foreign(mc, object, now)
}

fn join(errors: &[validation::FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether the JobSet finished (Completed or Failed).
pub fn is_finished(js: &JobSet) -> bool {
    js.condition_true("Completed") || js.condition_true("Failed")
}

/// The ConfigMap a JobSet's pods mount their broker config and scripts from.
pub fn config_map_of(js: &JobSet) -> Option<String> {
    js.spec
        .replicated_jobs
        .iter()
        .filter_map(|r| r.template.spec.as_ref()?.template.spec.as_ref())
        .flat_map(|p| p.volumes.iter().flatten())
        .find(|v| v.name == crate::render::flux_pod::CONFIG_VOLUME)
        .and_then(|v| v.config_map.as_ref())
        .map(|c| c.name.clone())
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
