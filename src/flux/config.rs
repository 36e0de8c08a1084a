//! The broker config, `broker.toml`.
//!
//! Every broker reads the same file (`flux start -o --config DIR`) and finds its rank as the
//! index of its hostname in `[bootstrap] hosts`. JobSet fixes the hostnames (`<mc>-lead-0-0`,
//! `<mc>-workers-0-<i>`), so the list is two hostlist entries: the lead, then the range of
//! follower indices up to `maxSize - 2`. Brokers bind every interface (`tcp://*:%p`, a bind
//! address may not be a DNS name) and connect by the pod's DNS name under the headless
//! Service: `tcp://%h.<subdomain>.<namespace>.svc.<cluster domain>:%p`.
//!
//! What the file holds and why:
//! - `[access]`: root (`kubectl exec`) may act as the instance owner, other users as guests.
//! - `[bootstrap]`: only the keys Flux allows there (it rejects unknown ones).
//! - `[tbon]`: `connect_timeout` from `spec.flux.connectTimeout` (a short timeout avoids
//!   30-second stalls while a pod address is not routable yet) and `topo` from
//!   `spec.flux.topology`.
//! - `[sched-fluxion-qmanager] queue-policy` from `spec.flux.scheduler.queuePolicy`.
//! - `[resource]` (see [`resource_hosts`]): `path` names the R file the entrypoints write with
//!   `flux R encode` before the broker starts, `noverify = true`. Without it Flux builds its
//!   resource set from every rank's hardware report: with ranks absent nothing is ever
//!   schedulable (`flux resource list` fails, jobs stay in S, shutdown hangs in rc3), and a
//!   rank that leaves (a shrink, a restarted broker, a replaced pod) is removed from the
//!   scheduler for good, so it takes no work when it comes back.
//!
//! The quorum (`broker.quorum`) is a broker attribute, not a config key: the entrypoints pass
//! it as `-Sbroker.quorum=N` (see [`Sizes::quorum`](crate::model::Sizes::quorum)). `spec.flux.brokerConfig` replaces the whole
//! file (see [`broker_toml`]).

use serde::{Deserialize, Serialize};

use super::{BROKER_PORT, CURVE_PRIVATE_PATH, RESOURCE_PATH};
use crate::api::{LEAD_JOB, MiniCluster, QueuePolicy, WORKERS_JOB};
use crate::model::Cluster;

/// The generated broker config. Serializes to the TOML Flux reads.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct BrokerConfig {
    /// `[access]`.
    pub access: Access,
    /// `[bootstrap]`.
    pub bootstrap: Bootstrap,
    /// `[tbon]`.
    #[serde(default, skip_serializing_if = "Tbon::is_empty")]
    pub tbon: Tbon,
    /// `[sched-fluxion-qmanager]` (absent with the simple scheduler or no queue policy).
    #[serde(
        default,
        rename = "sched-fluxion-qmanager",
        skip_serializing_if = "Option::is_none"
    )]
    pub sched_fluxion_qmanager: Option<QManager>,
    /// `[resource]` (only when ranks may be absent, see [`resource_hosts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<Resource>,
}

/// `[resource]`: the instance's resource set from a file instead of the ranks' reports.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Resource {
    /// The R file ([`RESOURCE_PATH`]), written by the entrypoint before `flux start`.
    pub path: String,
    /// The R describes every rank as the local node; do not drain ranks whose hardware
    /// differs from it.
    pub noverify: bool,
}

/// `[access]`: who may connect to the broker's local socket.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct Access {
    /// Users other than the instance owner connect as guests.
    pub allow_guest_user: bool,
    /// Root connects with owner rights (e.g. `kubectl exec` into a non-root broker).
    pub allow_root_owner: bool,
}

/// `[bootstrap]`: the strict table; only these keys are allowed by Flux.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Bootstrap {
    /// Path of the CURVE certificate (the entrypoint's private copy).
    pub curve_cert: String,
    /// Port substituted for `%p`.
    pub default_port: i32,
    /// Where each broker listens for its children.
    pub default_bind: String,
    /// How children reach a broker (`%h` is the host entry's name).
    pub default_connect: String,
    /// Whether IPv6 is enabled (left to Flux's default when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_ipv6: Option<bool>,
    /// Rank-ordered host entries (hostlists allowed).
    pub hosts: Vec<HostEntry>,
}

/// One `[bootstrap] hosts` entry: only `host`, `bind`, `connect` and `parent` are allowed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    /// A host name or an RFC 29 hostlist such as `mc-workers-0-[0-6]`.
    pub host: String,
    /// Bind address overriding `default_bind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    /// Connect address overriding `default_connect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<String>,
    /// Name of this entry's TBON parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// `[tbon]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Tbon {
    /// Tree shape, e.g. `kary:2` or `binomial` (Flux's default with a config is flat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topo: Option<String>,
    /// How long one connect attempt to the parent may take (Flux duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<String>,
}

impl Tbon {
    fn is_empty(&self) -> bool {
        self.topo.is_none() && self.connect_timeout.is_none()
    }
}

/// `[sched-fluxion-qmanager]`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct QManager {
    /// `fcfs` or `easy`.
    #[serde(rename = "queue-policy")]
    pub queue_policy: String,
}

/// Hostname of the lead broker's pod (rank 0).
pub fn lead_hostname(mc: &MiniCluster) -> String {
    format!("{}-{LEAD_JOB}-0-0", mc.name())
}

/// Prefix of the follower pods' hostnames; follower `i` is `<prefix><i>` (rank `i + 1`).
pub fn follower_hostname_prefix(mc: &MiniCluster) -> String {
    format!("{}-{WORKERS_JOB}-0-", mc.name())
}

/// All `maxSize` broker hostnames in rank order, expanded.
pub fn hostnames(cluster: &Cluster<'_>) -> Vec<String> {
    let (mc, prefix) = (cluster.mc, follower_hostname_prefix(cluster.mc));
    std::iter::once(lead_hostname(mc))
        .chain((0..cluster.sizes.max_size - 1).map(|i| format!("{prefix}{i}")))
        .collect()
}

/// The `[bootstrap] hosts` entries: the lead, then the followers as one hostlist.
pub fn host_entries(cluster: &Cluster<'_>) -> Vec<HostEntry> {
    let mc = cluster.mc;
    let entry = |host: String| HostEntry {
        host,
        bind: None,
        connect: None,
        parent: None,
    };
    let mut entries = vec![entry(lead_hostname(mc))];
    let followers = cluster.sizes.max_size - 1;
    let prefix = follower_hostname_prefix(mc);
    match followers {
        0 => {}
        1 => entries.push(entry(format!("{prefix}0"))),
        n => entries.push(entry(format!("{prefix}[0-{}]", n - 1))),
    }
    entries
}

/// Fully qualified DNS name of a broker pod.
pub fn fqdn(host: &str, subdomain: &str, namespace: &str, cluster_domain: &str) -> String {
    format!("{host}.{subdomain}.{namespace}.svc.{cluster_domain}")
}

/// The broker config of the resolved cluster, its addresses in the domain the model resolved
/// (ignores `spec.flux.brokerConfig`; see [`broker_toml`]).
pub fn broker_config(cluster: &Cluster<'_>) -> BrokerConfig {
    let (mc, options) = (cluster.mc, &cluster.options);
    let (sub, ns) = (cluster.subdomain, mc.namespace_or_default());
    let domain = &cluster.cluster_domain;
    BrokerConfig {
        access: Access {
            allow_guest_user: true,
            allow_root_owner: true,
        },
        bootstrap: Bootstrap {
            curve_cert: CURVE_PRIVATE_PATH.to_string(),
            default_port: BROKER_PORT,
            default_bind: "tcp://*:%p".to_string(),
            default_connect: format!("tcp://{}:%p", fqdn("%h", sub, ns, domain)),
            enable_ipv6: None,
            hosts: host_entries(cluster),
        },
        tbon: Tbon {
            topo: options.topology.map(str::to_string),
            connect_timeout: options.connect_timeout.map(str::to_string),
        },
        sched_fluxion_qmanager: options.queue_policy.map(|policy| QManager {
            queue_policy: match policy {
                QueuePolicy::Fcfs => "fcfs",
                QueuePolicy::Easy => "easy",
            }
            .to_string(),
        }),
        resource: resource_hosts(cluster).map(|_| Resource {
            path: RESOURCE_PATH.to_string(),
            noverify: true,
        }),
    }
}

/// TOML text of a generated broker config, with a header saying where it comes from.
pub fn to_toml(config: &BrokerConfig) -> String {
    let body =
        toml::to_string(config).expect("a BrokerConfig of strings and integers always serializes");
    format!(
        "# Flux broker config generated by flux-operator (every broker reads this file).\n\
         # A broker's rank is the index of its hostname in [bootstrap] hosts.\n\
         # broker.quorum is a broker attribute: the entrypoints pass -Sbroker.quorum when needed.\n\n{body}"
    )
}

/// The text of `broker.toml`: `spec.flux.brokerConfig` verbatim when set (it must parse as
/// TOML), otherwise the generated config.
pub fn broker_toml(cluster: &Cluster<'_>) -> String {
    match cluster.options.broker_config {
        Some(user) => user.to_string(),
        None => to_toml(&broker_config(cluster)),
    }
}

/// The text of `scheduler.toml` with `spec.flux.scheduler.simple`, `None` otherwise. It
/// selects sched-simple (flux-core's) as flux-modprobe's alternative for the `sched` and
/// `feasibility` services: selecting raises its priority above every other provider, Fluxion's
/// `sched-fluxion-qmanager` and `sched-fluxion-feasibility` (priority 500) included, so rc1
/// loads no Fluxion module (not even `sched-fluxion-resource`, which only they require). Unlike
/// `FLUX_MODPROBE_DISABLE`, it names only modules flux-core always has, so a Flux without
/// Fluxion is no error. A file of its own so it also holds with `spec.flux.brokerConfig`.
pub fn scheduler_toml(cluster: &Cluster<'_>) -> Option<String> {
    cluster.options.simple_scheduler.then(|| {
        "# spec.flux.scheduler.simple, generated by flux-operator: flux-core's sched-simple\n\
         # instead of Fluxion, whether or not Fluxion is installed (flux-modprobe alternatives).\n\
         [modules.alternatives]\n\
         sched = \"sched-simple\"\n\
         feasibility = \"sched-simple\"\n"
            .to_string()
    })
}

/// How often an interactive cluster's lead checkpoints its KVS into the state it keeps in
/// its pod: what a restart of its container (a SIGKILL writes no last checkpoint) loses at
/// most, a job's submission or its end. Flux skips a checkpoint when the KVS did not change,
/// so an idle instance writes nothing. Flux's default is no periodic checkpoint. (It was
/// 10 s: a job that ended in the 10 s before a crash came back running, and was failed.)
pub const KVS_CHECKPOINT_PERIOD: &str = "1s";

/// The text of `kvs.toml` for a cluster whose lead keeps its state across a restart of its
/// container ([`crate::model::containers::keeps_state`]): `kvs.checkpoint-period`. A file of
/// its own so it also holds with `spec.flux.brokerConfig`, unless that has a `[kvs]` table of
/// its own (which then decides).
pub fn kvs_toml(cluster: &Cluster<'_>) -> Option<String> {
    (cluster.flux.mode.keeps_state() && !cluster.options.user_kvs).then(|| {
        format!(
            "# generated by flux-operator for an interactive cluster: the lead keeps the\n\
             # instance's state in its pod, checkpointed this often, so a restart of its\n\
             # container starts the same instance again (see lead.sh).\n\
             [kvs]\n\
             checkpoint-period = \"{KVS_CHECKPOINT_PERIOD}\"\n"
        )
    })
}

/// The hostlist (RFC 29, rank order) the entrypoints give `flux R encode --hosts`: the
/// generated config always has a `[resource]` table, every host described as the node the
/// entrypoint runs on (as the Go operator does). A configured R is what lets Flux:
/// - run while ranks are absent (a quorum below the host count: `maxSize`, `minSize`), when
///   ranks that never started reported no hardware;
/// - give work again to a rank that left and came back (a grow after a shrink, a follower
///   broker restarted, a pod replaced after an eviction): with an R built from the ranks'
///   reports, Flux removes a rank that leaves from the scheduler's resources for good;
/// - restore an archive into another cluster (the saved instance's R names another
///   MiniCluster's hosts, and a configured R takes precedence over it).
///
/// `None` only with `spec.flux.brokerConfig`: the user's config decides.
pub fn resource_hosts(cluster: &Cluster<'_>) -> Option<String> {
    if cluster.options.broker_config.is_some() {
        return None;
    }
    Some(
        host_entries(cluster)
            .into_iter()
            .map(|e| e.host)
            .collect::<Vec<_>>()
            .join(","),
    )
}
