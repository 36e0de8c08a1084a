//! The decision: from a MiniCluster, the status the last reconcile wrote, what the watches
//! hold about its objects ([`Observed`]) and the time ([`Inputs`]), everything one reconcile
//! does ([`Plan`]): the objects to create, apply or delete, the whole new status (every
//! condition), the Events, and what to write instead if a step is stopped ([`IfStopped`]).
//!
//! Pure: no I/O and no clock, so every decision is table-tested. [`super::apply`] carries a
//! plan out and never decides. The plan is made of small deciders, one concern each with its
//! own table test: [`spec`] (valid and renderable), [`ownership`], [`archive`] (one cluster
//! per archive), [`certificate`],
//! [`config_map`], [`services`], [`jobset`] (create, update, restart), [`services_pod`],
//! [`cleanup`], [`ttl`], [`status`] (the whole status), [`hold`] (a held cluster's); the
//! Events come from
//! [`super::events`]. The whole-plan tests are in `tests.rs`.
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
//!   the `Restarted` condition, and the lifecycle timestamps start again. Every other object
//!   made again after a deletion says so with a `Recreated` Warning.
//! - A new cluster's first status is written when it says more than the API server's default
//!   for an unwritten status, `phase: Pending` ([`status::to_write`]): its objects made and its
//!   JobSet's pods not there yet cost no write.
//! - Events come from state transitions (old status to new), so a crash between an action
//!   and its Event loses nothing: the next run sees the same transition and publishes it.

mod archive;
mod certificate;
mod cleanup;
mod config_map;
mod hold;
pub(in crate::controller) mod jobset;
mod ownership;
mod services;
mod services_pod;
mod spec;
pub(super) mod status;
mod ttl;

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Service};

use super::events::{self, Note};
use super::observe::jobset::ObservedJobSet;
use super::observe::{Observed, OwnedObject};
use crate::api::validation;
use crate::api::{MiniCluster, MiniClusterStatus};
use crate::jobset::JobSet;
use crate::model::Cluster;
use crate::model::certificate::Certificate;

pub use certificate::{to_verify, verify_certificate};
pub use hold::{FOREIGN_RECHECK, IfStopped};

/// The spec resolved once per reconcile ([`crate::model::resolve`]): the typed cluster the deciders
/// read, or every error in the spec, each naming its API field path.
pub type Resolved<'a> = Result<Cluster<'a>, Vec<validation::FieldError>>;

/// Everything a plan is made from.
#[derive(Clone)]
pub struct Inputs<'a> {
    /// The MiniCluster: its metadata (names, UID, generation) for ownership and the status.
    /// Its spec is read through [`Inputs::spec`]; its `status` is not read (see `old`).
    pub mc: &'a MiniCluster,
    /// Its spec, resolved (in the operator's environment: the cluster's DNS domain).
    pub spec: &'a Resolved<'a>,
    /// The status the last reconcile wrote (this process's, if the cache lags behind).
    pub old: &'a MiniClusterStatus,
    /// What the watches hold about its objects.
    pub observed: &'a Observed,
    /// The spec's certificate refused by its CURVE handshake, which the reconcile makes
    /// before the plan ([`to_verify`], [`verify_certificate`]): its keys do not belong together.
    pub certificate_refused: Option<validation::FieldError>,
    /// The time.
    pub now: Timestamp,
}

/// Where the cluster is in its life, as several deciders read it from its JobSet (after
/// [`ownership`]: its own).
pub(super) struct Lifecycle<'a> {
    /// The JobSet.
    jobset: Option<&'a ObservedJobSet>,
    /// It finished (Completed or Failed).
    finished: bool,
    /// Finished for good: its JobSet finished, or went after it finished. Nothing is made
    /// again.
    over: bool,
    /// The Secret, ConfigMap and Services were made before: they are made before the JobSet,
    /// and a status naming a JobSet was written after a run that made them all (then a
    /// missing one was deleted, and making it again says so). Before the first status write
    /// (the JobSet with no pods yet, [`status::to_write`]) only the JobSet tells.
    made_before: bool,
}

impl<'a> Lifecycle<'a> {
    fn of(input: &Inputs<'a>) -> Self {
        let jobset = input.observed.jobset.as_deref();
        let finished = jobset.is_some_and(is_finished);
        Self {
            jobset,
            finished,
            over: finished || (jobset.is_none() && input.old.completion_time.is_some()),
            made_before: jobset.is_some() || !input.old.job_set.is_empty(),
        }
    }

    /// The JobSet, while it has not finished.
    fn live_jobset(&self) -> Option<&'a ObservedJobSet> {
        self.jobset.filter(|_| !self.finished)
    }
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
    DeleteConfigMap(Doomed),
    /// Delete an owned Service the spec no longer asks for.
    DeleteService(Doomed),
    /// `ttlSecondsAfterFinished` has passed since the recorded completion: delete the
    /// JobSet (its pods go with it), the one with this UID.
    DeleteJobSet(Option<String>),
    /// The same, for the services pod's Job.
    DeleteServicesJob(Option<String>),
    /// `spec.cleanup`: delete the finished MiniCluster (the one reconciled: its UID).
    DeleteMiniCluster,
}

/// An object a step deletes: its name and the UID it had when the delete was decided. The
/// delete carries that UID as a precondition, so a stale decision never deletes an object
/// of the same name made in between (the API server answers 409 and nothing goes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doomed {
    /// The object's name.
    pub name: String,
    /// Its UID as the watch saw it (`None`: made by this process and not seen yet).
    pub uid: Option<String>,
}

impl From<&OwnedObject> for Doomed {
    fn from(o: &OwnedObject) -> Self {
        Self {
            name: o.name.clone(),
            uid: o.uid.clone(),
        }
    }
}

impl Step {
    /// A step no other step of the plan waits for, nor it for them: the creates (or applies)
    /// of the Secret, the ConfigMap and the Services, which the JobSet's pods use but its
    /// create does not. The plan puts them first; the executor sends them together.
    pub fn is_independent(&self) -> bool {
        matches!(
            self,
            Step::CreateSecret(..) | Step::CreateConfigMap(..) | Step::ApplyService(..)
        )
    }
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
    /// What to write instead if a step is stopped while the plan is carried out.
    pub if_stopped: IfStopped,
}

/// Why a plan could not be made: the operator's fault, never the spec's (retried).
pub type Error = crate::flux::Error;

/// Decide: each decider in turn, in the order the plan's steps run.
pub fn plan(input: &Inputs<'_>) -> Result<Plan, Error> {
    let (cluster, desired) = match spec::decide(input)? {
        spec::Verdict::Renders(cluster, desired) => (cluster, *desired),
        spec::Verdict::Refused(message) => return Ok(hold::invalid(input, &message)),
    };
    match ownership::decide(input) {
        ownership::Verdict::Clear => {}
        ownership::Verdict::Wait => return Ok(hold::waiting(input)),
        ownership::Verdict::Foreign(object) => {
            return Ok(hold::foreign(input.mc, input.old, &object, input.now));
        }
    }
    let life = Lifecycle::of(input);
    if let Some(other) = archive::holder(input, &life) {
        return Ok(hold::archive_in_use(input, other));
    }
    let certificate = certificate::decide(input, cluster, &life);
    let config_map = config_map::decide(input, &life, &desired);
    let services = services::decide(input, &life, &desired);
    let jobset = jobset::decide(input, cluster, &life, &desired, certificate.lost.is_some());
    let services_pod = services_pod::decide(input, cluster, &life, &desired);
    let unused = cleanup::unused(
        input,
        &desired,
        &config_map.in_use,
        jobset.for_status.is_some(),
    );
    let ttl = ttl::decide(input, cluster);

    let status = status::status(
        input,
        status::Decided {
            jobset: jobset.for_status.as_deref(),
            curve_secret: certificate.curve_secret,
            degraded: [certificate.lost, config_map.lost, jobset.held]
                .into_iter()
                .flatten()
                .collect(),
            restarted: jobset.restarted,
        },
    );
    let status = status::to_write(input.old, status);
    let steps = (certificate.step.into_iter())
        .chain(config_map.step)
        .chain(services)
        .chain(jobset.step)
        .chain(services_pod)
        .chain(unused)
        .chain(ttl.steps)
        .chain(cleanup::finished(cluster, &status))
        .collect();
    Ok(Plan {
        steps,
        events: events::transitions(input.mc, input.old, &status),
        status,
        requeue: ttl.requeue,
        if_stopped: IfStopped::of(input),
    })
}

/// Whether writing `plan`'s status leaves the next reconcile nothing to do, were it to see
/// the same as this one: the plan takes no step, and the plan made again from its status has
/// none either, no Event, the same status and the same wait. Then that status write coming
/// back from the watch need not wake a reconcile ([`super::trigger::OwnWrites`]); where a
/// decision waits for the status to record something first (the TTL counts from the
/// completion the status recorded), it does.
pub fn settles(input: &Inputs<'_>, plan: &Plan) -> Result<bool, Error> {
    if !plan.steps.is_empty() || &plan.status == input.old {
        return Ok(false);
    }
    let next = self::plan(&Inputs {
        old: &plan.status,
        ..input.clone()
    })?;
    Ok(next.steps.is_empty()
        && next.events.is_empty()
        && next.status == plan.status
        && next.requeue == plan.requeue)
}

/// The errors, as one message.
fn join(errors: &[validation::FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether the JobSet finished (Completed or Failed).
pub fn is_finished(js: &ObservedJobSet) -> bool {
    js.condition_true("Completed") || js.condition_true("Failed")
}

/// The ConfigMap a JobSet's pods mount their broker config and scripts from.
pub fn config_map_of(js: &ObservedJobSet) -> Option<String> {
    (js.spec.replicated_jobs.iter())
        .filter_map(|r| r.template.spec.as_ref()?.template.spec.as_ref())
        .flat_map(|p| &p.volumes)
        .find(|v| v.name == crate::model::mounts::CONFIG_VOLUME)
        .and_then(|v| v.config_map.as_ref())
        .map(|c| c.name.clone())
}

#[cfg(test)]
mod tests;
