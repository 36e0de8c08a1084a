//! When each step of a MiniCluster's start was first seen (issue 32): watches on the run's
//! namespace (the JobSet, its Jobs, the pods), each change stamped as it arrives, in
//! milliseconds, rather than read from the objects' own timestamps, which have whole seconds.
//! A step seen late by a watch is late by the API server's fan-out, the same for both arms.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde::de::DeserializeOwned;

use flux_operator::jobset::JobSet;

use super::now;

/// What a pod had reached, and when it was first seen there.
#[derive(Clone, Debug, Default)]
pub struct PodSteps {
    pub created: Option<f64>,
    pub scheduled: Option<f64>,
    /// Its first init container running (or already done).
    pub init_started: Option<f64>,
    /// Every init container done.
    pub init_done: Option<f64>,
    /// Every container running.
    pub running: Option<f64>,
    pub ready: Option<f64>,
}

#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub jobset: Option<f64>,
    pub jobs: BTreeMap<String, f64>,
    pub pods: BTreeMap<String, PodSteps>,
}

/// The watches of one run; they stop when this is dropped.
pub struct Timeline {
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Timeline {
    fn drop(&mut self) {
        self.tasks.iter().for_each(|t| t.abort());
    }
}

fn first(slot: &mut Option<f64>, reached: bool, t: f64) {
    if reached && slot.is_none() {
        *slot = Some(t);
    }
}

fn pod_steps(steps: &mut PodSteps, pod: &Pod, t: f64) {
    first(&mut steps.created, true, t);
    let spec = pod.spec.as_ref();
    first(
        &mut steps.scheduled,
        spec.and_then(|s| s.node_name.as_ref()).is_some(),
        t,
    );
    let status = pod.status.as_ref();
    let inits = status
        .and_then(|s| s.init_container_statuses.as_deref())
        .unwrap_or_default();
    let state =
        |c: &k8s_openapi::api::core::v1::ContainerStatus| c.state.clone().unwrap_or_default();
    first(
        &mut steps.init_started,
        inits
            .iter()
            .any(|c| state(c).running.is_some() || state(c).terminated.is_some()),
        t,
    );
    let wanted = spec
        .and_then(|s| s.init_containers.as_ref())
        .map_or(0, Vec::len);
    first(
        &mut steps.init_done,
        inits.len() == wanted && inits.iter().all(|c| state(c).terminated.is_some()),
        t,
    );
    let containers = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    first(
        &mut steps.running,
        !containers.is_empty() && containers.iter().all(|c| state(c).running.is_some()),
        t,
    );
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    first(&mut steps.ready, ready, t);
}

fn watch<K>(
    api: Api<K>,
    seen: Arc<Mutex<Seen>>,
    record: fn(&mut Seen, &K, f64),
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    tokio::spawn(async move {
        let mut objects = watcher(api, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(next) = objects.next().await {
            if let Ok(obj) = next {
                let t = now();
                record(&mut seen.lock().expect("timeline lock"), &obj, t);
            }
        }
    })
}

impl Timeline {
    /// Start watching NS (before the apply, so nothing is missed).
    pub async fn start(client: &Client, ns: &str) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let tasks = vec![
            watch::<JobSet>(
                Api::namespaced(client.clone(), ns),
                seen.clone(),
                |s, _, t| first(&mut s.jobset, true, t),
            ),
            watch::<Job>(
                Api::namespaced(client.clone(), ns),
                seen.clone(),
                |s, job, t| {
                    s.jobs.entry(job.name_any()).or_insert(t);
                },
            ),
            watch::<Pod>(
                Api::namespaced(client.clone(), ns),
                seen.clone(),
                |s, pod, t| pod_steps(s.pods.entry(pod.name_any()).or_default(), pod, t),
            ),
        ];
        // Let the watches list (an empty namespace) before the clock starts.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        Timeline { seen, tasks }
    }

    pub fn seen(&self) -> Seen {
        self.seen.lock().expect("timeline lock").clone()
    }
}

impl Seen {
    /// When the last of the first N pods reached the step STEP picks (None: not all did).
    pub fn all(&self, n: usize, step: fn(&PodSteps) -> Option<f64>) -> Option<f64> {
        let times: Vec<f64> = self.pods.values().filter_map(step).collect();
        (times.len() >= n).then(|| times.into_iter().fold(f64::MIN, f64::max))
    }
}
