//! The index: what the watches hold about every MiniCluster's objects, kept apart from the
//! writes. A reconcile reads its [`Observed`] from here; nothing in a reconcile lists or
//! gets what a watch already holds.
//!
//! Each kind has its own watch, its own reflector store and its own backoff
//! ([`watch_backoff`]: bounded at a few seconds, reset once the watch is healthy again), so
//! one failing watch (a 410 after an API server outage, a missing RBAC verb) neither stalls
//! the others nor leaves the controller waiting minutes. Errors are logged here and never
//! reach the controller's own trigger backoff, which would delay every watch at once.
//!
//! What is watched, and why:
//! - JobSets, Jobs (the services pod's only: [`services_jobs`]), Secrets and ConfigMaps
//!   carrying the operator's name label: whether each owned object exists and is as the
//!   operator applied it. JobSets and Jobs without their pod templates ([`trim_jobset`],
//!   [`trim_job`]); Secrets and ConfigMaps as metadata only (`Api<PartialObjectMeta<_>>`: the
//!   certificate never enters this process's memory through a watch).
//! - Services, all of them, as metadata only and trimmed ([`trim_service`]): the owned ones
//!   (the annotation [`crate::render::APPLIED_ANNOTATION`] says what was applied), and
//!   whether a Service named as a new cluster's pods' subdomain exists and whose it is
//!   ([`Presence::of_subdomain`]): JobSet would take any Service of that name, labelled or
//!   not, and this answers without a lookup per new MiniCluster.
//! - Pods carrying the name label: readiness and phases for status.
//! - Kueue Workloads, when Kueue is installed: admission for status (owner and conditions
//!   only, [`trim_workload`]).

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodCondition,
    PodStatus, Secret, Service,
};
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::utils::{Backoff, ResetTimerBackoff};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::{WatchStreamExt, utils::StreamBackoff};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::kueue;
use super::owned::controlled_by;
use super::plan::{CONFIG_MAP_ANNOTATION, Observed, OwnedObject, Presence};
use crate::api::{MiniCluster, NAME_LABEL, ROLE_LABEL};
use crate::jobset::JobSet;
use crate::render::JOBSET_NAME_LABEL;

/// The watches' stores.
#[derive(Clone)]
pub struct Index {
    /// The MiniClusters themselves (the controller's own store).
    pub(super) miniclusters: Store<MiniCluster>,
    pub(super) jobsets: Store<JobSet>,
    /// The services pods' Jobs (`spec.services`).
    pub(super) jobs: Store<Job>,
    pub(super) pods: Store<Pod>,
    pub(super) secrets: Store<PartialObjectMeta<Secret>>,
    pub(super) config_maps: Store<PartialObjectMeta<ConfigMap>>,
    pub(super) services: Store<PartialObjectMeta<Service>>,
    /// `None` when Kueue's Workload API is not served.
    pub(super) workloads: Option<Store<DynamicObject>>,
}

/// The backoff of one watch after an error: 0.5 s doubling to 5 s at most,
/// reset after 10 s without errors. A watch that fails for minutes retries every few seconds,
/// so the first reconcile after an outage comes seconds after the API server is back.
pub fn watch_backoff() -> impl Backoff + 'static {
    ResetTimerBackoff::new(
        watcher::ExponentialBackoff::from(
            backon::ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(500))
                .with_max_delay(WATCH_BACKOFF_MAX)
                .with_factor(2.0)
                .without_max_times(),
        ),
        Duration::from_secs(10),
    )
}

/// Longest a watch may wait between two errors, whatever happened before (see
/// [`watch_backoff`]); the tests hold the backoff to it.
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A watch of `K` feeding `writer`, yielding every object it sees change (deletions
/// included), errors logged and retried with [`watch_backoff`]; `trim` is applied to every
/// object before it is stored (drop what the reconciler never reads: the store holds every
/// watched object for the process's life).
pub fn reflect_trimmed<K>(
    stream: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
    writer: reflector::store::Writer<K>,
    what: &'static str,
    trim: fn(&mut K),
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    reflect_events(stream, writer, what, trim)
        .filter_map(|event| futures::future::ready(touched(event).map(Ok)))
}

/// [`reflect_trimmed`], yielding the watch's events themselves (each after the store took
/// it): for what must tell a deletion the API server reported ([`watcher::Event::Delete`])
/// from an object listed while the store is still being filled ([`watcher::Event::InitApply`]:
/// kube-runtime's store swaps a list in only at [`watcher::Event::InitDone`], so until then
/// a listed object is not in the store yet).
pub fn reflect_events<K>(
    stream: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
    writer: reflector::store::Writer<K>,
    what: &'static str,
    trim: fn(&mut K),
) -> impl Stream<Item = watcher::Event<K>> + Send + 'static
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let mut listed = 0usize;
    StreamBackoff::new(stream, watch_backoff())
        .modify(move |obj: &mut K| {
            obj.meta_mut().managed_fields = None;
            trim(obj);
        })
        .reflect(writer)
        .filter_map(move |item| {
            let item = match item {
                Ok(event) => {
                    log_listing(what, &event, &mut listed);
                    Some(event)
                }
                Err(error) => {
                    tracing::warn!(watch = what, %error, "watch failed; retrying");
                    None
                }
            };
            futures::future::ready(item)
        })
}

/// Say when a watch lists what it watches (at the start, and again whenever it has to:
/// a watch that expired or failed with "410 Gone"), and how much it listed.
fn log_listing<K>(what: &'static str, event: &watcher::Event<K>, listed: &mut usize) {
    match event {
        watcher::Event::Init => {
            *listed = 0;
            tracing::debug!(watch = what, "listing");
        }
        watcher::Event::InitApply(_) => *listed += 1,
        watcher::Event::InitDone => tracing::info!(watch = what, objects = *listed, "listed"),
        watcher::Event::Apply(_) | watcher::Event::Delete(_) => {}
    }
}

/// The object an event carries: changed, deleted, or listed.
pub fn touched<K>(event: watcher::Event<K>) -> Option<K> {
    match event {
        watcher::Event::Apply(obj) | watcher::Event::Delete(obj) => Some(obj),
        watcher::Event::InitApply(obj) => Some(obj),
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}

/// A full-object watch of `api` (labelled objects only when `labelled`).
pub fn watch_objects<K>(
    api: Api<K>,
    labelled: bool,
    what: &'static str,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    watch_trimmed(api, labelled, what, |_| {})
}

/// The MiniClusters' watch: its store, and its events as the store took them (see
/// [`reflect_events`]; teardown acts on deletions only).
pub fn watch_events(
    api: Api<MiniCluster>,
) -> (
    Store<MiniCluster>,
    impl Stream<Item = watcher::Event<MiniCluster>> + Send + 'static,
) {
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config(false));
    (
        reader,
        reflect_events(stream, writer, "miniclusters", |_| {}),
    )
}

/// [`watch_objects`], storing each object as `trim` leaves it.
pub fn watch_trimmed<K>(
    api: Api<K>,
    labelled: bool,
    what: &'static str,
    trim: fn(&mut K),
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    watch_with(api, config(labelled), what, trim)
}

/// [`watch_trimmed`] with its own watcher configuration (a label selector of its own).
pub fn watch_with<K>(
    api: Api<K>,
    config: watcher::Config,
    what: &'static str,
    trim: fn(&mut K),
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config);
    (reader, reflect_trimmed(stream, writer, what, trim))
}

/// A broker pod as the reconciler reads it ([`super::status::pod_facts`],
/// [`super::status::lead_restore`], [`super::trigger::by_label`]): its name, namespace,
/// UID, the name and role labels, its creation and deletion times; of its status the phase,
/// the Ready condition, the archive init container's state and, of a lead pod, its
/// containers' restart counts ([`super::instance::lead_seen`]). The rest (the spec, JobSet's
/// and the Job controller's labels and annotations, every other condition and container
/// status) is most of a pod's memory and is never read.
pub fn trim_pod(pod: &mut Pod) {
    pod.spec = None;
    let lead = super::status::is_lead(pod);
    let meta = &mut pod.metadata;
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|k, _| k == NAME_LABEL || k == ROLE_LABEL);
    }
    meta.annotations = None;
    meta.owner_references = None;
    meta.finalizers = None;
    meta.generate_name = None;
    let Some(status) = pod.status.take() else {
        return;
    };
    let ready: Vec<_> = status
        .conditions
        .into_iter()
        .flatten()
        .filter(|c| c.type_ == "Ready")
        .map(|c| PodCondition {
            type_: c.type_,
            status: c.status,
            last_transition_time: c.last_transition_time,
            ..PodCondition::default()
        })
        .collect();
    let archive: Vec<_> = status
        .init_container_statuses
        .into_iter()
        .flatten()
        .filter(|c| c.name == crate::flux::ARCHIVE_INIT)
        .collect();
    let restarts = lead.then(|| {
        status
            .container_statuses
            .into_iter()
            .flatten()
            .map(trim_container_status)
            .collect()
    });
    pod.status = Some(PodStatus {
        phase: status.phase,
        conditions: Some(ready),
        init_container_statuses: (!archive.is_empty()).then_some(archive),
        container_statuses: restarts,
        ..PodStatus::default()
    });
}

/// A lead pod's container as [`super::instance::lead_seen`] and
/// [`super::status::lead_save`] read it: its name, restart count, and how it ended (this
/// run and the last) with its termination message.
fn trim_container_status(c: ContainerStatus) -> ContainerStatus {
    let ended = |s: Option<ContainerState>| {
        s.and_then(|s| s.terminated).map(|t| ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: t.exit_code,
                reason: t.reason,
                finished_at: t.finished_at,
                message: t.message,
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        })
    };
    ContainerStatus {
        name: c.name,
        restart_count: c.restart_count,
        state: ended(c.state),
        last_state: ended(c.last_state),
        ..ContainerStatus::default()
    }
}

/// Jobs the operator makes itself (the services pod's): labelled with its name label and
/// not one of a JobSet's Jobs, which JobSet labels with the JobSet's name and which the
/// operator never reads (they would double the Jobs held, each with a broker pod template).
pub fn services_jobs() -> watcher::Config {
    watcher::Config::default().labels(&format!("{NAME_LABEL},!{JOBSET_NAME_LABEL}"))
}

/// A services Job as the reconciler reads it: metadata, `spec.suspend` and status (its pod
/// template is never read).
pub fn trim_job(job: &mut Job) {
    if let Some(spec) = job.spec.as_mut() {
        spec.template = Default::default();
    }
}

/// A JobSet as the reconciler reads it: metadata, status, `spec.suspend`, and of each
/// replicated Job its name, parallelism and completions. The pod templates, the bulk of a
/// JobSet (a `Volume` alone is 3 KiB in memory, however little it says), are dropped; the
/// one thing read from them, the ConfigMap the pods mount ([`super::plan::config_map_of`]),
/// is kept as the annotation [`CONFIG_MAP_ANNOTATION`] of the stored copy (never written to
/// the API server).
pub fn trim_jobset(js: &mut JobSet) {
    if let Some(config) = super::plan::config_map_of(js) {
        js.metadata
            .annotations
            .get_or_insert_default()
            .insert(CONFIG_MAP_ANNOTATION.to_string(), config);
    }
    for rj in &mut js.spec.replicated_jobs {
        if let Some(job) = rj.template.spec.as_mut() {
            *job = JobSpec {
                parallelism: job.parallelism,
                completions: job.completions,
                ..JobSpec::default()
            };
        }
        rj.template.metadata = None;
    }
}

/// A Kueue Workload as the reconciler reads it ([`kueue::admission_from`]): metadata (its
/// owner, the JobSet) and the conditions; its pod sets, a copy of every pod template, dropped.
pub fn trim_workload(wl: &mut DynamicObject) {
    let conditions = wl.data["status"]["conditions"].take();
    wl.data = serde_json::json!({"status": {"conditions": conditions}});
}

/// A Service as the reconciler reads it: its name, owners, deletion, the name label and the
/// applied annotation (a `kubectl apply` annotation, other labels and annotations of Services
/// the operator did not make are never read).
pub fn trim_service(svc: &mut PartialObjectMeta<Service>) {
    let meta = &mut svc.metadata;
    meta.labels = meta
        .labels
        .take()
        .map(|mut l| {
            l.retain(|k, _| k == NAME_LABEL);
            l
        })
        .filter(|l| !l.is_empty());
    meta.annotations = meta
        .annotations
        .take()
        .map(|mut a| {
            a.retain(|k, _| k == crate::render::APPLIED_ANNOTATION);
            a
        })
        .filter(|a| !a.is_empty());
    meta.finalizers = None;
    meta.creation_timestamp = None;
    meta.generate_name = None;
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

fn config(labelled: bool) -> watcher::Config {
    let config = watcher::Config::default();
    if labelled {
        config.labels(NAME_LABEL)
    } else {
        config
    }
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
        let pods: Vec<Arc<Pod>> = self
            .pods
            .state()
            .into_iter()
            .filter(|p| mine(&p.metadata))
            .collect();
        let admission = match (&self.workloads, jobset.as_ref().and_then(|j| j.uid())) {
            (Some(workloads), Some(uid)) => workloads
                .state()
                .into_iter()
                .find(|w| {
                    w.metadata.namespace.as_deref() == Some(ns.as_str())
                        && w.owner_references().iter().any(|o| o.uid == uid)
                })
                .map(|w| kueue::admission_from(&w.data)),
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered() -> (MiniCluster, JobSet) {
        let mut mc = crate::fixtures::with_command("m", 3, "app");
        mc.spec.max_size = Some(5);
        mc.metadata.uid = Some("uid".into());
        let js = crate::render::jobset(&crate::fixtures::cluster(&mc), "m-config");
        (mc, js)
    }

    #[test]
    fn a_trimmed_jobset_still_answers_what_the_reconciler_reads() {
        let (mc, full) = rendered();
        let mut trimmed = full.clone();
        trim_jobset(&mut trimmed);
        assert_eq!(
            crate::controller::plan::config_map_of(&trimmed).as_deref(),
            Some("m-config")
        );
        let update = crate::render::jobset::update(&mc, None).expect("an elastic update");
        assert!(!crate::render::jobset::needs_update(&trimmed, &update));
        let grown = crate::render::jobset::update(
            &MiniCluster {
                spec: crate::api::MiniClusterSpec {
                    size: 4,
                    ..mc.spec.clone()
                },
                ..mc.clone()
            },
            None,
        )
        .expect("an elastic update");
        assert!(crate::render::jobset::needs_update(&trimmed, &grown));
        let before = serde_json::to_vec(&full).expect("serializes").len();
        let after = serde_json::to_vec(&trimmed).expect("serializes").len();
        assert!(after * 3 < before, "trimmed {after} bytes of {before}");
    }

    #[test]
    fn a_trimmed_pod_still_answers_what_the_reconciler_reads() {
        let t = |s: &str| format!("2026-01-01T00:00:0{s}Z");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "m-lead-0-0-x", "namespace": "ns", "uid": "u",
                "creationTimestamp": t("1"),
                "labels": {NAME_LABEL: "m", ROLE_LABEL: "lead", "jobset.sigs.k8s.io/jobset-name": "m",
                    "batch.kubernetes.io/job-completion-index": "0"},
                "annotations": {"jobset.sigs.k8s.io/jobset-name": "m"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "m-lead-0",
                    "uid": "j", "controller": true}],
                "finalizers": ["batch.kubernetes.io/job-tracking"]},
            "spec": {"containers": [{"name": "app", "image": "x"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": t("2")},
                {"type": "Ready", "status": "True", "lastTransitionTime": t("5"),
                    "message": "all containers ready"}],
                "initContainerStatuses": [
                    {"name": "flux-view", "image": "v", "imageID": "", "ready": true,
                        "restartCount": 0},
                    {"name": crate::flux::ARCHIVE_INIT, "image": "v", "imageID": "", "ready": true,
                        "restartCount": 0, "state": {"terminated": {"exitCode": 0,
                        "message": "{\"found\": true, \"archive\": \"/a\", \"pending\": 2}"}}}],
                "containerStatuses": [{"name": "m", "image": "x", "imageID": "", "ready": true,
                    "restartCount": 2, "lastState": {"terminated": {"exitCode": 137,
                    "reason": "OOMKilled", "message": "long", "containerID": "c"}}}]},
        }))
        .expect("a pod");
        let mut trimmed = pod.clone();
        trim_pod(&mut trimmed);
        let facts = |p: &Pod| super::super::status::pod_facts(&[Arc::new(p.clone())]);
        assert_eq!(facts(&trimmed), facts(&pod));
        assert_eq!((facts(&pod).ready, facts(&pod).live), (1, 1));
        let restore = |p: &Pod| super::super::status::lead_restore(&[Arc::new(p.clone())]);
        assert!(restore(&pod).is_some());
        assert_eq!(restore(&trimmed), restore(&pod));
        assert_eq!(
            super::super::trigger::by_label(&trimmed.metadata),
            super::super::trigger::by_label(&pod.metadata)
        );
        let labels = trimmed.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels.len(), 2, "{labels:?}");
        let status = trimmed.status.as_ref().expect("a status");
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
        let mc = crate::fixtures::m().build();
        let seen = |p: &Pod| super::super::instance::lead_seen(&mc, &[Arc::new(p.clone())]);
        assert_eq!(seen(&pod).map(|s| s.restarts), Some(2));
        assert_eq!(seen(&trimmed), seen(&pod));
        assert!(status.pod_ip.is_none());
        let kept = serde_json::to_string(&status.container_statuses).expect("serializes");
        assert!(!kept.contains("\"c\""), "{kept}");
        assert!(trimmed.metadata.annotations.is_none() && trimmed.spec.is_none());
    }

    #[test]
    fn a_trimmed_workload_keeps_its_owner_and_admission() {
        let mut wl: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "ownerReferences": [
                {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "m", "uid": "u"}]},
            "spec": {"podSets": [{"name": "lead", "count": 1, "template": {"spec": {"containers": []}}}]},
            "status": {"conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted",
                "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .expect("a Workload");
        let before = kueue::admission_from(&wl.data);
        trim_workload(&mut wl);
        assert!(wl.data.get("spec").is_none(), "pod sets dropped");
        assert_eq!(wl.owner_references().len(), 1);
        let after = kueue::admission_from(&wl.data);
        assert!(after.admitted);
        assert_eq!(
            (before.reason, before.admitted_at),
            (after.reason, after.admitted_at)
        );
    }

    #[test]
    fn the_jobs_watch_leaves_out_the_jobsets_jobs() {
        let selector = services_jobs().label_selector.expect("a selector");
        assert_eq!(
            selector,
            "flux-framework.org/minicluster,!jobset.sigs.k8s.io/jobset-name"
        );
    }
}
