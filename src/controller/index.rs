//! The index: what the watches hold about every MiniCluster's objects, kept apart from the
//! writes. A reconcile reads its [`Observed`] from here; nothing in a reconcile lists or
//! gets what a watch already holds. The watches themselves and their streams are in
//! [`super::watches`], what their caches keep of each object in [`super::observe`].
//!
//! What is watched, and why:
//! - JobSets, Jobs (the services pod's only: [`services_jobs`](super::watches::stream::services_jobs)), Secrets and ConfigMaps
//!   carrying the operator's name label: whether each owned object exists and is as the
//!   operator applied it. JobSets read as [`ObservedJobSet`] (no pod templates; only the
//!   broker config's volume, [`trim_jobset`](super::observe::jobset::trim_jobset)), Jobs without their pod templates
//!   ([`trim_job`](super::observe::trim::trim_job)); Secrets and ConfigMaps as metadata only (`Api<PartialObjectMeta<_>>`: the
//!   certificate never enters this process's memory through a watch).
//! - Services, all of them, as metadata only and trimmed ([`trim_service`](super::observe::trim::trim_service)): the owned ones
//!   (the annotation [`crate::render::APPLIED_ANNOTATION`] says what was applied), and
//!   whether a Service named as a new cluster's pods' subdomain exists and whose it is
//!   ([`Presence::of_subdomain`]): JobSet would take any Service of that name, labelled or
//!   not, and this answers without a lookup per new MiniCluster.
//! - Pods carrying the name label, read as [`BrokerPod`] (no spec): readiness and phases for
//!   status. A MiniCluster's pods are those of its own JobSet: the label
//!   alone would take the pods of an earlier MiniCluster of the same name, still
//!   terminating, and pods anyone made with the same labels
//!   ([`made_for_jobset`]).
//! - Kueue Workloads, when Kueue is installed: admission for status (owner, conditions and
//!   pod counts only, [`trim_workload`](super::observe::admission::trim_workload)).

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::observe::admission::admission_of;
use super::observe::jobset::ObservedJobSet;
use super::observe::pods::BrokerPod;
use super::observe::{Observed, OwnedObject, Presence};
use super::owned::controlled_by;
use super::watches::lead_ends::LeadEnds;
use crate::api::{MiniCluster, NAME_LABEL};
use crate::jobset::{made_by_a_job, made_for_jobset};

/// The watches' stores.
#[derive(Clone)]
pub struct Index {
    /// The MiniClusters themselves (the controller's own store).
    pub(super) miniclusters: Store<MiniCluster>,
    pub(super) jobsets: Store<ObservedJobSet>,
    /// The services pods' Jobs (`spec.services`).
    pub(super) jobs: Store<Job>,
    pub(super) pods: Store<BrokerPod>,
    pub(super) secrets: Store<PartialObjectMeta<Secret>>,
    pub(super) config_maps: Store<PartialObjectMeta<ConfigMap>>,
    pub(super) services: Store<PartialObjectMeta<Service>>,
    /// `None` when Kueue's Workload API is not served.
    pub(super) workloads: Option<Store<DynamicObject>>,
    /// How each MiniCluster's last ended lead pod ended, also once it is gone.
    pub(super) lead_ends: LeadEnds,
}

/// The objects of a metadata store that `mine` selects and `mc` controls, with the hash
/// each was applied with.
fn owned_objects<K>(
    store: &Store<PartialObjectMeta<K>>,
    mc: &MiniCluster,
    mine: &dyn Fn(&kube::api::ObjectMeta) -> bool,
) -> Vec<OwnedObject>
where
    PartialObjectMeta<K>: Resource + Clone,
    <PartialObjectMeta<K> as Resource>::DynamicType: Eq + std::hash::Hash + Clone,
{
    store
        .state()
        .iter()
        .filter(|o| mine(&o.metadata) && controlled_by(o.as_ref(), mc))
        .map(|o| OwnedObject {
            name: o.metadata.name.clone().unwrap_or_default(),
            uid: o.metadata.uid.clone(),
            applied: o
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::render::APPLIED_ANNOTATION))
                .cloned(),
        })
        .collect()
}

impl Index {
    /// Wait until every store of the MiniClusters' objects has its first complete list. Not
    /// the MiniCluster store: the controller's runner waits on it, and kube-runtime wakes only
    /// one waiter of a store (see `readiness_watch` in the module above). One caller only, for
    /// the same reason.
    pub async fn wait_until_ready(&self) {
        let _ = self.jobsets.wait_until_ready().await;
        let _ = self.jobs.wait_until_ready().await;
        let _ = self.pods.wait_until_ready().await;
        let _ = self.secrets.wait_until_ready().await;
        let _ = self.config_maps.wait_until_ready().await;
        let _ = self.services.wait_until_ready().await;
        if let Some(w) = &self.workloads {
            let _ = w.wait_until_ready().await;
        }
    }

    /// The other MiniClusters of namespace `ns` whose archive is where `mc`'s is.
    fn archive_sharers(&self, mc: &MiniCluster, ns: &str) -> Vec<Arc<MiniCluster>> {
        let Some(place) = crate::model::archive::place(mc) else {
            return Vec::new();
        };
        self.miniclusters
            .state()
            .into_iter()
            .filter(|other| {
                other.metadata.namespace.as_deref() == Some(ns)
                    && other.metadata.uid != mc.metadata.uid
                    && crate::model::archive::place(other).as_deref() == Some(place.as_str())
            })
            .collect()
    }

    /// The Workload Kueue made for `js`: the live one where Kueue is replacing an old one
    /// (a queued resize deletes the old Workload as it makes the new).
    fn workload_of(
        workloads: &Store<DynamicObject>,
        js: &ObservedJobSet,
        ns: &str,
    ) -> Option<Arc<DynamicObject>> {
        let uid = js.metadata.uid.as_deref()?;
        workloads
            .state()
            .into_iter()
            .filter(|w| {
                w.metadata.namespace.as_deref() == Some(ns)
                    && w.owner_references().iter().any(|o| o.uid == uid)
            })
            .min_by_key(|w| w.metadata.deletion_timestamp.is_some())
    }

    /// What the watches hold about `mc`'s objects.
    pub fn observe(&self, mc: &MiniCluster) -> Observed {
        let ns = mc.namespace().unwrap_or_else(|| "default".into());
        let name = mc.name();
        let mine = |meta: &kube::api::ObjectMeta| {
            meta.namespace.as_deref() == Some(ns.as_str())
                && meta
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(NAME_LABEL))
                    .map(String::as_str)
                    == Some(name)
        };
        let jobset = self.jobsets.get(&ObjectRef::new(name).within(&ns));
        let jobset_uid = jobset
            .as_deref()
            .filter(|js| controlled_by(*js, mc))
            .and_then(|js| js.metadata.uid.clone());
        // Without its JobSet (deleted, its pods still going; or not made yet), the pods its
        // Jobs made since the MiniCluster was: an earlier one's are older than it.
        let born = mc.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let own = |p: &BrokerPod| match &jobset_uid {
            Some(uid) => made_for_jobset(&p.metadata, uid),
            None => {
                let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
                made_by_a_job(&p.metadata) && born.is_none_or(|b| created.is_some_and(|c| c >= b))
            }
        };
        let pods: Vec<Arc<BrokerPod>> = self
            .pods
            .state()
            .into_iter()
            .filter(|p| mine(&p.metadata) && own(p))
            .collect();
        let admission = match (&self.workloads, jobset.as_deref()) {
            (Some(workloads), Some(js)) => {
                Self::workload_of(workloads, js, &ns).map(|w| admission_of(&w.data, js))
            }
            _ => None,
        };
        let secret_name = crate::render::curve_secret_name(mc);
        let secret = Presence::of(
            self.secrets
                .get(&ObjectRef::new(&secret_name).within(&ns))
                .as_deref(),
            mc,
        );
        let config_maps = owned_objects(&self.config_maps, mc, &mine);
        let services = owned_objects(&self.services, mc, &mine);
        let services_job = self
            .jobs
            .get(&ObjectRef::new(&crate::render::services_job_name(mc)).within(&ns));
        let subdomain = Presence::of_subdomain(
            self.services
                .get(&ObjectRef::new(mc.subdomain()).within(&ns))
                .as_deref(),
            mc,
        );
        let archive_sharers = self.archive_sharers(mc, &ns);
        let lead_end = self.lead_ends.of(&ns, name);
        Observed {
            jobset,
            services_job,
            pods,
            admission,
            secret,
            config_maps,
            services,
            subdomain,
            archive_sharers,
            lead_end,
        }
    }
}
