//! What a reconcile reads of the cluster, and how the watched objects become it: what the
//! watches hold about one MiniCluster's objects ([`Observed`]) and whose each object is
//! ([`Presence`]); each kind as its watch keeps it, trimmed to what the reconciler reads,
//! and what is read from it.
//!
//! - [`pods`]: a broker pod as its watch keeps it ([`pods::BrokerPod`]); which pod is a
//!   lead's, the newest lead, the pods' counts.
//! - [`lead_end`]: how a lead pod ended, as its Flux container said.
//! - [`jobset`]: a JobSet as the operator reads it back ([`jobset::ObservedJobSet`]).
//! - [`admission`]: Kueue's verdict on a JobSet's Workload ([`admission::Admission`]).
//! - [`trim`]: what the watches keep of the kinds they read as Kubernetes types.
//! - [`meta`]: the metadata of the kinds kept in types of their own.
//! - [`step`]: the one observe step of a reconcile ([`step::observe`]).
//!
//! All of it but the observe step is pure and imports nothing of the controller but
//! [`super::owned`]: the watches, the [`index`](super::index), the plan and the status read
//! it, never the other way. The observe step alone reads the index and what this process
//! made, through the [`Context`](super::context::Context).

pub mod admission;
pub mod jobset;
pub mod lead_end;
mod meta;
pub mod pods;
pub(super) mod step;
#[cfg(test)]
mod tests;
pub(super) mod trim;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;

use admission::Admission;
use jobset::ObservedJobSet;
use lead_end::LeadEnd;
use pods::BrokerPod;

use super::owned::controlled_by;
use crate::api::MiniCluster;

/// What the watches hold about one MiniCluster's objects.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The JobSet of the MiniCluster's name, owned or not.
    pub jobset: Option<Arc<ObservedJobSet>>,
    /// The services pod's Job (`spec.services`), if one carries the operator's label.
    pub services_job: Option<Arc<Job>>,
    /// The broker pods (by the name label).
    pub pods: Vec<Arc<BrokerPod>>,
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
    /// The other MiniClusters of the namespace whose archive is where this one's is
    /// ([`crate::model::archive::place`]), as the watch holds them.
    pub archive_sharers: Vec<Arc<MiniCluster>>,
    /// How the last of its lead pods that ended ended, also once the pod is gone.
    pub lead_end: Option<LeadEnd>,
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
    /// Its UID (`None` for one this process made and the watch has not shown yet).
    pub uid: Option<String>,
    /// [`crate::render::APPLIED_ANNOTATION`], if set.
    pub applied: Option<String>,
}
