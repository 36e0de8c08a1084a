//! Starting the watches: one per kind, each with its own store and bounded backoff
//! ([`stream`]), keeping of each object only what the reconciler reads
//! ([`observe`](super::observe)); the
//! stores they fill ([`index`]), and the triggers they feed ([`trigger`]): what the
//! controller reconciles at once and what it debounces.

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, ResourceExt};

pub mod kept;
pub mod lead_ends;
pub mod stream;

#[cfg(test)]
mod footprint;
#[cfg(test)]
mod tests;

use super::observe::jobset::{self, ObservedJobSet};
use super::observe::pods::{BrokerPod, trim_pod};
use super::observe::{admission, trim};
use super::teardown::Teardown;
use super::{index, kueue, scoped, trigger};
use crate::api::MiniCluster;

/// The running watches.
pub struct Watches {
    /// The MiniClusters' store (the controller's own).
    pub miniclusters: Store<MiniCluster>,
    /// New MiniClusters and changed specs: reconciled at once.
    pub now: BoxStream<'static, Result<MiniCluster, watcher::Error>>,
    /// Everything else that wakes a MiniCluster: debounced together per MiniCluster.
    pub later: Vec<BoxStream<'static, ObjectRef<MiniCluster>>>,
    /// What a reconcile observes.
    pub index: index::Index,
}

/// Start every watch, in `ns` or in all namespaces; Kueue's Workloads only where Kueue's API
/// is served. `own`: the status writes whose echo wakes nothing (see [`trigger::split`]).
pub async fn start(client: &Client, ns: Option<&str>, own: trigger::OwnWrites) -> Watches {
    let workload_version = kueue::served_version(client, ns).await;
    tracing::info!(
        kueue = workload_version.is_some(),
        version = workload_version.unwrap_or("none"),
        "Kueue Workload API served"
    );
    let (mc_store, mc_events) = stream::watch_events(scoped::<MiniCluster>(client, ns));
    let lead_ends = lead_ends::LeadEnds::default();
    let mc_events = mc_events.inspect({
        let lead_ends = lead_ends.clone();
        move |event| {
            if let watcher::Event::Delete(mc) = event {
                lead_ends.forget(&mc.namespace().unwrap_or_default(), &mc.name_any());
            }
        }
    });
    let (jobs, job_stream) = stream::watch_with(
        scoped::<Job>(client, ns),
        stream::services_jobs(),
        "jobs",
        trim::trim_job,
    );
    let (jobsets, jobset_stream) = stream::watch_trimmed(
        scoped::<ObservedJobSet>(client, ns),
        true,
        "jobsets",
        jobset::trim_jobset,
    );
    let (pods, pod_stream) =
        stream::watch_trimmed(scoped::<BrokerPod>(client, ns), true, "pods", trim_pod);
    let (secrets, secret_stream) = stream::watch_objects(
        scoped::<PartialObjectMeta<Secret>>(client, ns),
        true,
        "secrets",
    );
    let (config_maps, config_map_stream) = stream::watch_objects(
        scoped::<PartialObjectMeta<ConfigMap>>(client, ns),
        true,
        "configmaps",
    );
    // All Services, not only labelled ones: the pods' subdomain (see index).
    let (services, service_stream) = stream::watch_trimmed(
        scoped::<PartialObjectMeta<Service>>(client, ns),
        false,
        "services",
        trim::trim_service,
    );
    // What wakes a reconcile, and how soon (see `trigger`): a new MiniCluster or a changed
    // spec at once; the watches of its objects and pods, and its own status coming back,
    // debounced together per MiniCluster.
    // A MiniCluster the API server reports deleted takes its JobSet with it at once (see
    // `teardown`).
    let teardown = Teardown::new(client, &mc_store, &jobsets, &jobs);
    let (mc_now, mc_later) = trigger::split(teardown.watch(mc_events), own);
    let mut later: Vec<BoxStream<'static, ObjectRef<MiniCluster>>> = vec![
        mc_later.boxed(),
        trigger::of_owned(jobset_stream).boxed(),
        trigger::of_owned(job_stream).boxed(),
        trigger::of_labelled(secret_stream).boxed(),
        trigger::of_labelled(config_map_stream).boxed(),
        trigger::of_labelled(service_stream).boxed(),
        trigger::of_labelled(pod_stream.inspect({
            let lead_ends = lead_ends.clone();
            move |pod| {
                if let Ok(pod) = pod {
                    lead_ends.record(pod);
                }
            }
        }))
        .boxed(),
    ];
    let workloads = workload_version.map(|version| {
        let (store, triggers) = workload_watch(client, ns, version);
        later.push(triggers);
        store
    });
    Watches {
        miniclusters: mc_store.clone(),
        now: mc_now.boxed(),
        later,
        index: index::Index {
            miniclusters: mc_store,
            jobsets,
            jobs,
            pods,
            secrets,
            config_maps,
            services,
            workloads,
            lead_ends,
        },
    }
}

/// Kueue's Workloads at `version`: their store, and a trigger for the MiniCluster whose
/// JobSet owns each one that changes (admitted, evicted, still pending for a new reason):
/// same name, same namespace.
fn workload_watch(
    client: &Client,
    ns: Option<&str>,
    version: &str,
) -> (
    Store<DynamicObject>,
    BoxStream<'static, ObjectRef<MiniCluster>>,
) {
    let resource = kueue::workload_resource(version);
    let api = match ns {
        Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource),
        None => Api::<DynamicObject>::all_with(client.clone(), &resource),
    };
    let writer = kube::runtime::reflector::store::Writer::new(resource.clone());
    let reader = writer.as_reader();
    let stream = stream::reflect_trimmed(
        watcher(api, watcher::Config::default()),
        writer,
        resource,
        "workloads",
        admission::trim_workload,
    );
    let triggers = stream
        .flat_map(|item| {
            let refs: Vec<ObjectRef<MiniCluster>> = item
                .map(|wl| {
                    let ns = wl.namespace();
                    wl.owner_references()
                        .iter()
                        .filter(|o| o.kind == "JobSet")
                        .map(|o| {
                            ObjectRef::<MiniCluster>::new(&o.name)
                                .within(ns.as_deref().unwrap_or("default"))
                        })
                        .collect()
                })
                .unwrap_or_default();
            futures::stream::iter(refs)
        })
        .boxed();
    (reader, triggers)
}
