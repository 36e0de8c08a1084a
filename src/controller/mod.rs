//! The controller process: leader election, watches, the HTTP endpoints, graceful shutdown.
//!
//! A reconcile observes from the [`index`] (the watches' stores), decides in one pure
//! function ([`plan`]) and carries the plan out ([`apply`]); [`reconcile`] ties the three,
//! [`context`] is what they share. No module cycle: reconcile -> {index, plan, apply} ->
//! context; plan -> {events, status, owned} (all pure).
//! Status is computed by [`status`], Events by [`events`], durations by [`durations`].

mod apply;
mod cluster_domain;
mod context;
mod durations;
mod events;
mod index;
pub mod kueue;
pub mod leader;
mod made;
mod owned;
pub mod plan;
mod reconcile;
pub mod status;
#[cfg(test)]
mod tests;
mod trigger;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, WatchStreamExt, controller, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

use crate::api::MiniCluster;
use crate::jobset::JobSet;
use crate::metrics::{self, Health, Metrics};

pub use cluster_domain::discover_cluster_domain;
pub use context::{Context, FIELD_MANAGER};

/// An existing MiniCluster's reconcile waits until this long passed without another change
/// for it, so a burst of changes (pods of a cluster coming up) makes one reconcile; a new
/// MiniCluster, or a changed spec, is reconciled at once (see [`trigger`]).
pub use trigger::DEBOUNCE;
/// How often what is kept per MiniCluster is pruned of deleted MiniClusters.
const PRUNE: Duration = Duration::from_secs(60);

/// Settings of `flux-operator run`.
#[derive(clap::Args, Clone, Debug)]
pub struct Config {
    /// Address of the metrics and health endpoints.
    #[arg(long, env = "METRICS_ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// The cluster's DNS domain for broker addresses. Discovered from /etc/resolv.conf when
    /// running in a pod; required otherwise.
    #[arg(long, env = "CLUSTER_DOMAIN")]
    pub cluster_domain: Option<String>,
    /// Only one replica reconciles at a time (a Lease in --lease-namespace).
    #[arg(long, env = "LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "flux-operator-leader")]
    pub lease_name: String,
    /// Namespace of the Lease (the operator's own namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,
    /// This replica's identity in the election.
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Log format: `json` or `text`.
    #[arg(long, env = "LOG_FORMAT", default_value = "json")]
    pub log_format: crate::telemetry::LogFormat,
    /// Most reconciles running at once. Each in flight holds its rendered objects and an
    /// API connection; a thousand MiniClusters created at once would otherwise run a
    /// thousand reconciles side by side (kube-runtime's default is no bound).
    #[arg(long, env = "MAX_CONCURRENT_RECONCILES", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reconciles: u16,
}

/// Run the controller until SIGTERM/SIGINT (or until leadership is lost).
pub async fn run(config: Config) -> anyhow::Result<()> {
    crate::telemetry::init(config.log_format);
    let client = Client::try_default().await?;
    let cluster_domain = match config.cluster_domain.clone() {
        Some(d) => d,
        None => discover_cluster_domain(std::path::Path::new("/etc/resolv.conf")).ok_or_else(|| {
            anyhow::anyhow!("cannot discover the cluster DNS domain from /etc/resolv.conf; pass --cluster-domain")
        })?,
    };
    tracing::info!(%cluster_domain, "starting flux-operator");

    let metrics = Arc::new(Metrics::new());
    let health = Health::default();
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutdown requested");
        let _ = stop_tx.send(true);
    });
    let server = tokio::spawn(metrics::serve(
        config.metrics_addr,
        metrics.clone(),
        health.clone(),
        wait_true(stop_rx.clone()),
    ));
    let heartbeat = tokio::spawn(health.clone().heartbeat());
    let ns = config.namespace.as_deref();
    // Readiness: from the start, on a standby as on the leader.
    let readiness = tokio::spawn(readiness_watch(
        scoped::<MiniCluster>(&client, ns),
        health.clone(),
    ));

    // Leader election: wait for the lease; losing it later (or failing to renew it in time)
    // stops this replica.
    let mut leader = None;
    if config.leader_election {
        let identity = config.identity.clone().unwrap_or_else(default_identity);
        let manager =
            kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &config.lease_name)
                .with_namespace(&config.lease_namespace)
                .with_identity(&identity)
                .with_duration(leader::LEASE_SECONDS)
                .with_grace(leader::LEASE_SECONDS - leader::RENEW_AFTER_SECONDS)
                .build()
                .await?;
        let (tx, mut rx) = watch::channel(false);
        let task = tokio::spawn(leader::run(manager, tx));
        tracing::info!(%identity, lease = %config.lease_name, "waiting for leadership");
        let mut stop = stop_rx.clone();
        loop {
            if *rx.borrow_and_update() {
                break;
            }
            tokio::select! {
                changed = rx.changed() => changed?,
                _ = stop.changed() => {
                    readiness.abort();
                    drop(rx);
                    let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
                    return Ok(());
                }
            }
        }
        tracing::info!(%identity, "acquired leadership");
        leader = Some((rx, task));
    }
    health.set_leader(true);

    let stop_controller = {
        let mut stop = stop_rx.clone();
        let lost = leader.as_ref().map(|(rx, _)| rx.clone());
        async move {
            match lost {
                Some(mut lost) => tokio::select! {
                    _ = stop.wait_for(|s| *s) => {},
                    _ = lost.wait_for(|l| !*l) => tracing::warn!("lost leadership; stopping"),
                },
                None => {
                    let _ = stop.wait_for(|s| *s).await;
                }
            }
        }
    };

    // The watches: one per kind, each with its own store and bounded backoff (see index).
    let workload_version = kueue::served_version(&client, ns).await;
    tracing::info!(
        kueue = workload_version.is_some(),
        version = workload_version.unwrap_or("none"),
        "Kueue Workload API served"
    );
    let (mc_store, mc_stream) =
        index::watch_objects(scoped::<MiniCluster>(&client, ns), false, "miniclusters");
    let (jobs, job_stream) = index::watch_with(
        scoped::<Job>(&client, ns),
        index::services_jobs(),
        "jobs",
        index::trim_job,
    );
    let (jobsets, jobset_stream) = index::watch_trimmed(
        scoped::<JobSet>(&client, ns),
        true,
        "jobsets",
        index::trim_jobset,
    );
    let (pods, pod_stream) =
        index::watch_trimmed(scoped::<Pod>(&client, ns), true, "pods", index::trim_pod);
    let (secrets, secret_stream) = index::watch_objects(
        scoped::<PartialObjectMeta<Secret>>(&client, ns),
        true,
        "secrets",
    );
    let (config_maps, config_map_stream) = index::watch_objects(
        scoped::<PartialObjectMeta<ConfigMap>>(&client, ns),
        true,
        "configmaps",
    );
    // All Services, not only labelled ones: the pods' subdomain (see index).
    let (services, service_stream) = index::watch_trimmed(
        scoped::<PartialObjectMeta<Service>>(&client, ns),
        false,
        "services",
        index::trim_service,
    );
    // What wakes a reconcile, and how soon (see `trigger`): a new MiniCluster or a changed
    // spec at once; the watches of its objects and pods, and its own status coming back,
    // debounced together per MiniCluster.
    let (mc_now, mc_later) = trigger::split(mc_stream);
    let mut later: Vec<futures::stream::BoxStream<'static, ObjectRef<MiniCluster>>> = vec![
        mc_later.boxed(),
        trigger::of_owned(jobset_stream).boxed(),
        trigger::of_owned(job_stream).boxed(),
        trigger::of_labelled(secret_stream).boxed(),
        trigger::of_labelled(config_map_stream).boxed(),
        trigger::of_labelled(service_stream).boxed(),
        trigger::of_labelled(pod_stream).boxed(),
    ];
    let mut workloads = None;
    if let Some(version) = workload_version {
        // A Workload changing (admitted, evicted, still pending for a new reason) wakes the
        // MiniCluster whose JobSet owns it: same name, same namespace.
        let resource = kueue::workload_resource(version);
        let api = match ns {
            Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource),
            None => Api::<DynamicObject>::all_with(client.clone(), &resource),
        };
        let writer = kube::runtime::reflector::store::Writer::new(resource.clone());
        let reader = writer.as_reader();
        let stream = index::reflect_trimmed(
            watcher(api, watcher::Config::default()),
            writer,
            "workloads",
            index::trim_workload,
        );
        workloads = Some(reader);
        later.push(
            stream
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
                .boxed(),
        );
    }
    let controller = Controller::for_stream(mc_now, mc_store.clone())
        // No debounce in the controller: its requeues come when due, and what is debounced
        // is chosen above.
        .with_config(controller::Config::default().concurrency(config.max_concurrent_reconciles))
        .reconcile_on(trigger::debounced(
            futures::stream::select_all(later),
            DEBOUNCE,
        ));
    let controller = controller.graceful_shutdown_on(stop_controller);
    metrics.count_phases_from(mc_store.clone());
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: FIELD_MANAGER.into(),
            instance: config.identity.clone(),
        },
    );
    let index = index::Index {
        miniclusters: mc_store.clone(),
        jobsets,
        jobs,
        pods,
        secrets,
        config_maps,
        services,
        workloads,
    };
    // Reconciles wait for every watch's first list (SYNC_WAIT at most): before it, a store
    // would take an object that exists for missing (a create answered 409, a lookup).
    let (synced_tx, synced_rx) = watch::channel(false);
    let sync = tokio::spawn({
        let index = index.clone();
        async move {
            tokio::select! {
                () = index.wait_until_ready() => tracing::info!("watches synced"),
                () = tokio::time::sleep(context::SYNC_WAIT) => tracing::warn!(
                    wait = ?context::SYNC_WAIT,
                    "not every watch has listed yet; reconciling with what the stores hold"
                ),
            }
            let _ = synced_tx.send(true);
        }
    });
    let ctx = Arc::new(
        Context::new(client, recorder, metrics, index, cluster_domain).with_sync(synced_rx),
    );
    // What is kept per MiniCluster in this process goes with the MiniCluster.
    let pruner = tokio::spawn({
        let ctx = ctx.clone();
        let store = mc_store.clone();
        async move {
            let mut every = tokio::time::interval(PRUNE);
            loop {
                every.tick().await;
                if store.wait_until_ready().await.is_ok() {
                    ctx.retain(&store.state());
                }
            }
        }
    });

    controller
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| async move {
            match result {
                // Watch errors are logged (and retried) by each watch in `index`.
                Err(kube::runtime::controller::Error::QueueError(error)) => {
                    tracing::warn!(%error, "watch failed; retrying")
                }
                Err(error) => tracing::debug!(%error, "reconcile round failed"),
                Ok(_) => {}
            }
        })
        .await;
    pruner.abort();
    sync.abort();
    tracing::info!("controller stopped");

    if let Some((rx, task)) = leader {
        drop(rx); // releases the lease
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    heartbeat.abort();
    readiness.abort();
    Ok(())
}

fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// This replica's own MiniCluster watch, from start to exit: the same list and watch the
/// controller's cache runs, with the same credentials. The replica is ready once its initial
/// list is complete: a standby could take over, a leader's controller sees what it needs.
///
/// Not the controller's own store: kube-runtime's `Store::wait_until_ready` wakes only the
/// last of several waiters (one oneshot channel underneath), and the controller's runner
/// waits on that store itself, so a second waiter there either never wakes (readiness
/// stayed 503 forever) or takes the wake-up away from the runner.
async fn readiness_watch(api: Api<MiniCluster>, health: Health) {
    watcher(api, watcher::Config::default())
        .backoff(index::watch_backoff())
        .for_each(|event| {
            let health = health.clone();
            async move {
                match event {
                    Ok(watcher::Event::InitDone) if !health.is_ready() => {
                        tracing::info!("MiniCluster watch synced; ready");
                        health.set_synced(true);
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "MiniCluster watch failed; retrying"),
                }
            }
        })
        .await;
}

async fn wait_true(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

fn default_identity() -> String {
    std::env::var("HOSTNAME").unwrap_or_else(|_| format!("flux-operator-{}", std::process::id()))
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
