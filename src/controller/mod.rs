//! The controller process: leader election, watches, the HTTP endpoints, graceful shutdown.
//!
//! A reconcile observes ([`observe::step`]: the watches' stores, the [`index`], and what it
//! made), decides in one pure function ([`plan`]) and carries the plan out ([`apply`]);
//! [`reconcile`] ties the three, [`context`] is what they share. What is observed, and how
//! each watched object becomes it, is [`observe`]'s. Imports run one way:
//! reconcile -> {observe::step, apply} -> context -> {index, made, durations};
//! apply -> plan -> {events, status, instance} (all pure); and the watches, the index, the
//! plan and the status read [`observe`]'s types (pure), which read none of theirs: the index
//! and the plan share them, and neither reads the other. The observe step is the one file
//! of [`observe`] above the context.
//! The status is built by the plan (from what [`status`] reads of the pods), Events by
//! [`events`], durations by [`durations`].
//! [`run`] wires the process: the HTTP endpoints, leadership ([`leader`]), the watches and
//! their triggers ([`watches`], [`trigger`]), the controller, and shutdown. A MiniCluster
//! deleted takes its JobSet with it at once ([`teardown`]).

mod apply;
mod cluster_domain;
mod context;
mod durations;
mod events;
mod index;
mod instance;
pub mod kueue;
pub mod leader;
mod made;
pub mod observe;
mod owned;
pub mod plan;
mod reconcile;
mod restart_jobs;
pub mod status;
mod teardown;
#[cfg(test)]
mod tests;
mod trigger;
mod watches;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::core::PartialObjectMeta;
use kube::runtime::events::Reporter;
use kube::runtime::reflector::Store;
use kube::runtime::{Controller, WatchStreamExt, controller, watcher};
use kube::{Api, Client};
use tokio::sync::watch;

use crate::api::MiniCluster;
use crate::metrics::{self, Health, Metrics};
use crate::model::Environment;

pub use apply::{Deleted, delete_pinned};
pub use cluster_domain::discover_cluster_domain;
pub use context::{Context, FIELD_MANAGER, UPDATE_MANAGER};

/// An existing MiniCluster's reconcile waits until this long passed without another change
/// for it, so a burst of changes (pods of a cluster coming up) makes one reconcile; a new
/// MiniCluster, or a changed spec, is reconciled at once (see [`trigger`]).
pub use trigger::DEBOUNCE;
/// How often what is kept per MiniCluster is pruned of deleted MiniClusters.
const PRUNE: Duration = Duration::from_secs(60);

/// Settings of `flux-operator run`.
#[derive(clap::Args, Clone, Debug)]
pub struct Config {
    /// The metrics and health endpoints: address, TLS, authentication.
    #[command(flatten)]
    pub endpoints: metrics::Endpoints,
    /// The cluster's DNS domain for broker addresses. Discovered from /etc/resolv.conf when
    /// running in a pod; required otherwise.
    #[arg(long, env = "CLUSTER_DOMAIN")]
    pub cluster_domain: Option<String>,
    /// Mount each MiniCluster's flux view image as an image volume (read-only, nothing
    /// copied) unless its `flux.container.imageVolume` says otherwise. Needs Kubernetes 1.33+
    /// and a runtime with image volumes (containerd 2.1+, CRI-O 1.31+) on every node.
    #[arg(long, env = "FLUX_VIEW_IMAGE_VOLUME", default_value_t = false, action = clap::ArgAction::Set)]
    pub flux_view_image_volume: bool,
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

/// Every request's `User-Agent`: the API server's audit log (and anyone reading it) tells
/// the operator's requests from other clients' by it. kube's client sends none of its own.
pub const USER_AGENT: &str = concat!("flux-operator/", env!("CARGO_PKG_VERSION"));

/// The client of the cluster the process runs in (or its kubeconfig's), naming itself.
async fn client() -> anyhow::Result<Client> {
    named(kube::Config::infer().await?)
}

/// A client of `config` that sends [`USER_AGENT`] with every request.
fn named(mut config: kube::Config) -> anyhow::Result<Client> {
    config.headers.push((
        hyper::header::USER_AGENT,
        hyper::header::HeaderValue::from_static(USER_AGENT),
    ));
    Ok(Client::try_from(config)?)
}

/// Run the controller until SIGTERM/SIGINT (or until leadership is lost).
pub async fn run(config: Config) -> anyhow::Result<()> {
    crate::telemetry::init(config.log_format);
    let client = client().await?;
    let env = environment(&config)?;
    let metrics = Arc::new(Metrics::new());
    let health = Health::default();
    let stop_rx = stop_on_signal();
    let server = metrics::Server::bind(
        &config.endpoints,
        client.clone(),
        metrics.clone(),
        health.clone(),
    )
    .await?;
    let stop = stop_rx.clone();
    let server = tokio::spawn(server.run(move || wait_true(stop.clone())));
    let heartbeat = tokio::spawn(health.clone().heartbeat());
    let ns = config.namespace.as_deref();
    // Readiness: from the start, on a standby as on the leader.
    let readiness = tokio::spawn(readiness_watch(
        scoped::<PartialObjectMeta<MiniCluster>>(&client, ns),
        health.clone(),
    ));

    let Some(leadership) = acquire_leadership(&config, &client, stop_rx.clone()).await? else {
        readiness.abort();
        return Ok(());
    };
    health.set_leader(true);
    let stop_controller = until_stopped(stop_rx.clone(), leadership.as_ref());

    let own_writes = trigger::OwnWrites::default();
    let watches::Watches {
        miniclusters: mc_store,
        now: mc_now,
        later,
        index,
    } = watches::start(&client, ns, own_writes.clone()).await;
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
    let reporter = Reporter {
        controller: FIELD_MANAGER.into(),
        instance: config.identity.clone(),
    };
    let (sync, synced_rx) = spawn_sync(index.clone());
    let ctx = Arc::new(
        Context::new(client, reporter, metrics, index, env)
            .with_sync(synced_rx)
            .with_own_writes(own_writes),
    );
    let pruner = spawn_pruner(ctx.clone(), mc_store.clone());

    run_controller(controller, ctx).await;
    pruner.abort();
    sync.abort();
    tracing::info!("controller stopped");

    if let Some(Leadership { leader, task }) = leadership {
        drop(leader); // releases the lease
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    heartbeat.abort();
    readiness.abort();
    Ok(())
}

/// What the cluster gives every MiniCluster: its DNS domain, whether its nodes mount image
/// volumes.
fn environment(config: &Config) -> anyhow::Result<Environment> {
    let env = Environment {
        cluster_domain: cluster_domain(config)?,
        view_image_volume: config.flux_view_image_volume,
    };
    tracing::info!(
        cluster_domain = %env.cluster_domain,
        flux_view_image_volume = env.view_image_volume,
        "starting flux-operator"
    );
    Ok(env)
}

/// Turns true once SIGTERM or SIGINT comes ([`shutdown_signal`]).
fn stop_on_signal() -> watch::Receiver<bool> {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutdown requested");
        let _ = stop_tx.send(true);
    });
    stop_rx
}

/// `--cluster-domain`, or the domain of this pod's resolver.
fn cluster_domain(config: &Config) -> anyhow::Result<String> {
    match config.cluster_domain.clone() {
        Some(d) => Ok(d),
        None => discover_cluster_domain(std::path::Path::new("/etc/resolv.conf")).ok_or_else(|| {
            anyhow::anyhow!("cannot discover the cluster DNS domain from /etc/resolv.conf; pass --cluster-domain")
        }),
    }
}

/// Reconcile until the controller is told to stop (SIGTERM, or the lead lost).
async fn run_controller(controller: Controller<MiniCluster>, ctx: Arc<Context>) {
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
}

/// This replica's hold on the lead: `leader` turns false when the lease is lost; `task`
/// renews it until `leader` is dropped (which releases it).
struct Leadership {
    leader: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// Wait for the lease when leader election is on (`Some(None)` without it: this replica
/// leads); `None` when asked to stop first.
async fn acquire_leadership(
    config: &Config,
    client: &Client,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Option<Option<Leadership>>> {
    if !config.leader_election {
        return Ok(Some(None));
    }
    let identity = config.identity.clone().unwrap_or_else(default_identity);
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &config.lease_name)
        .with_namespace(&config.lease_namespace)
        .with_identity(&identity)
        .with_duration(leader::LEASE_SECONDS)
        .with_grace(leader::LEASE_SECONDS - leader::RENEW_AFTER_SECONDS)
        .build()
        .await?;
    let (tx, mut rx) = watch::channel(false);
    let task = tokio::spawn(leader::run(manager, tx));
    tracing::info!(%identity, lease = %config.lease_name, "waiting for leadership");
    loop {
        if *rx.borrow_and_update() {
            break;
        }
        tokio::select! {
            changed = rx.changed() => changed?,
            _ = stop.changed() => {
                drop(rx);
                let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
                return Ok(None);
            }
        }
    }
    tracing::info!(%identity, "acquired leadership");
    Ok(Some(Some(Leadership { leader: rx, task })))
}

/// Resolves when the process is asked to stop, or when this replica loses the lead.
fn until_stopped(
    mut stop: watch::Receiver<bool>,
    leadership: Option<&Leadership>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let lost = leadership.map(|l| l.leader.clone());
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
}

/// Reconciles wait for every watch's first list (SYNC_WAIT at most): before it, a store
/// would take an object that exists for missing (a create answered 409, a lookup).
fn spawn_sync(index: index::Index) -> (tokio::task::JoinHandle<()>, watch::Receiver<bool>) {
    let (synced_tx, synced_rx) = watch::channel(false);
    let task = tokio::spawn(async move {
        tokio::select! {
            () = index.wait_until_ready() => tracing::info!("watches synced"),
            () = tokio::time::sleep(context::SYNC_WAIT) => tracing::warn!(
                wait = ?context::SYNC_WAIT,
                "not every watch has listed yet; reconciling with what the stores hold"
            ),
        }
        let _ = synced_tx.send(true);
    });
    (task, synced_rx)
}

/// What is kept per MiniCluster in this process goes with the MiniCluster.
fn spawn_pruner(ctx: Arc<Context>, store: Store<MiniCluster>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(PRUNE);
        loop {
            every.tick().await;
            if store.wait_until_ready().await.is_ok() {
                ctx.retain(&store.state());
            }
        }
    })
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

/// This replica's own MiniCluster list and watch, with the controller's credentials, until
/// its initial list is complete: the replica is then ready (a standby could take over, a
/// leader's controller sees what it needs), and the watch ends. Metadata only: it reads no
/// spec, and every MiniCluster event it kept receiving would cost the API server a second
/// encoding and send beside the controller's own watch.
///
/// Not the controller's own store: kube-runtime's `Store::wait_until_ready` wakes only the
/// last of several waiters (one oneshot channel underneath), and the controller's runner
/// waits on that store itself, so a second waiter there either never wakes (readiness
/// stayed 503 forever) or takes the wake-up away from the runner.
async fn readiness_watch(api: Api<PartialObjectMeta<MiniCluster>>, health: Health) {
    let events = watcher(api, watcher::Config::default()).backoff(watches::stream::watch_backoff());
    futures::pin_mut!(events);
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::InitDone) => {
                tracing::info!("MiniCluster list complete; ready");
                health.set_synced(true);
                return;
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "MiniCluster list failed; retrying"),
        }
    }
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
