//! `MiniCluster.spec`: the compatibility surface of `flux-framework.org/v1alpha2` plus the
//! fields this operator adds (`suspend`, `startupOrder`, `ttlSecondsAfterFinished`,
//! `network.clusterDomain`).

use std::collections::BTreeMap;

use garde::Validate;
use k8s_openapi::api::core::v1::{
    EnvVar, EnvVarSource, PodResourceClaim, PodSecurityContext, ResourceRequirements,
    SecretKeySelector, SecurityContext, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::status::MiniClusterStatus;

/// The default application image of the Go operator, kept so old manifests mean the same.
pub const DEFAULT_APP_IMAGE: &str = "ghcr.io/rse-ops/accounting:app-latest";
/// The default flux view image (Flux built into a relocatable tree): the Go operator's
/// default, so a manifest that does not name one runs the same Flux. Its libraries need an
/// application image of the same OS (Ubuntu 24.04); pin `flux.container.image` otherwise.
pub const DEFAULT_VIEW_IMAGE: &str = "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble";
/// Where the flux view is copied in every pod.
pub const DEFAULT_VIEW_MOUNT: &str = "/mnt/flux";
/// About a year: the Go operator's default active deadline.
pub const DEFAULT_DEADLINE_SECONDS: i64 = 31_500_000;

/// A MiniCluster: an on-demand Flux Framework cluster of `size` brokers, run as one JobSet.
#[derive(CustomResource, KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq, Validate)]
#[kube(
    group = "flux-framework.org",
    version = "v1alpha2",
    kind = "MiniCluster",
    plural = "miniclusters",
    singular = "minicluster",
    shortname = "mc",
    category = "flux",
    namespaced,
    status = "MiniClusterStatus",
    derive = "PartialEq",
    scale(
        spec_replicas_path = ".spec.size",
        status_replicas_path = ".status.size",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyBrokers"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Restarts", type_ = "integer", json_path = ".status.instance.restarts"),
    printcolumn(
        name = "Exit",
        type_ = "integer",
        json_path = ".status.result.exitCode",
        description = "the job's exit code, once it ended (kubectl get -o wide)",
        priority = "1",
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    doc = "A MiniCluster is an on-demand Flux Framework cluster: a lead broker and followers run as one JobSet.",
    validation = kube::core::Rule::new(
        "size(self.metadata.name) + 17 + ((has(self.spec.maxSize) ? self.spec.maxSize : self.spec.size) < 12 ? 1 : string((has(self.spec.maxSize) ? self.spec.maxSize : self.spec.size) - 2).size()) <= 63"
    ).message("metadata.name is too long: the longest pod name, <name>-workers-0-<maxSize-2> plus the 6-character suffix Kubernetes adds, must fit in 63 characters"),
    validation = kube::core::Rule::new("self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')")
        .message("metadata.name must be a DNS label (lower-case letters, digits, '-', starting with a letter): it becomes the broker host names")
        ,
)]
#[serde(rename_all = "camelCase")]
#[garde(allow_unvalidated)]
#[schemars(transform = crate::api::bounds::bound)]
#[schemars(transform = crate::api::defaults::meaningful_only)]
#[x_kube(
    validation = kube::core::Rule::new("!has(self.maxSize) || self.size <= self.maxSize")
        .message("spec.size must not exceed spec.maxSize").field_path(".size"),
    validation = kube::core::Rule::new("!has(self.maxSize) || self.maxSize == 1 || self.size >= 2")
        .message("an elastic MiniCluster (maxSize > 1) needs size >= 2: JobSet keeps the followers Job at one pod or more")
        .field_path(".size"),
    validation = kube::core::Rule::new("!has(self.minSize) || self.minSize <= self.size")
        .message("spec.minSize must not exceed spec.size").field_path(".minSize"),
    validation = kube::core::Rule::new("self.containers.size() == 1 || self.containers.filter(c, has(c.runFlux) && c.runFlux).size() == 1")
        .message("exactly one of several containers must set runFlux: true").field_path(".containers"),
    validation = kube::core::Rule::new("self.containers.filter(c, has(c.runFlux) && c.runFlux).size() <= 1")
        .message("only one container may set runFlux: true").field_path(".containers"),
    // The one transition rule kept in the CRD, because `kubectl scale` (the scale
    // subresource) changes the size too; the other fields' immutability is a policy on the
    // main resource (api::immutable), so that status writes do not pay for it.
    validation = kube::core::Rule::new("has(self.maxSize) || self.size == oldSelf.size")
        .message("spec.size can change only when spec.maxSize is set: the broker config lists maxSize hosts, and maxSize defaults to the size at creation")
        .field_path(".size"),
)]
pub struct MiniClusterSpec {
    /// Containers of every broker pod. Exactly one runs Flux (`runFlux`; with a single
    /// container it is that one).
    #[schemars(length(min = 1, max = 32))]
    #[garde(length(min = 1), dive)]
    pub containers: Vec<MiniClusterContainer>,

    /// Service containers, run once in their own pod `<name>-services` in the brokers'
    /// subdomain (a Job of one pod), as in the Go operator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[garde(dive)]
    pub services: Vec<MiniClusterContainer>,

    /// Dynamic resource claims the containers may reference.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub resource_claims: Vec<PodResourceClaim>,

    /// The headless Service (network namespace) of the brokers.
    #[serde(default)]
    #[garde(dive)]
    pub network: Network,

    /// Extra labels for the JobSet and its Jobs (the old way to set a Kueue queue name).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub job_labels: BTreeMap<String, String>,

    /// Keep the brokers up with no initial program until `flux shutdown` or deletion.
    #[serde(default)]
    pub interactive: bool,

    /// Flux options shared by all brokers.
    #[serde(default)]
    #[garde(dive)]
    pub flux: FluxSpec,

    /// What the entrypoints print.
    #[serde(default)]
    pub logging: LoggingSpec,

    /// Restore Flux state from an archive at start.
    #[serde(default)]
    pub archive: MiniClusterArchive,

    /// Share one process namespace between the containers of a pod.
    #[serde(default)]
    pub share_process_namespace: bool,

    /// Delete the MiniCluster once the lead broker finished.
    #[serde(default)]
    pub cleanup: bool,

    /// Number of brokers (= pods). May change while running, between 1 and `maxSize`.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 100000))]
    #[garde(range(min = 1))]
    pub size: i32,

    /// Largest size the cluster may grow to; the broker config lists this many hosts.
    /// Defaults to `size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_size: Option<i32>,

    /// Retries of a failed broker pod (the Jobs' backoffLimit, default 6) before the cluster
    /// counts as failed. The cluster as a whole is not restarted: a new lead broker would
    /// start an empty Flux instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
    pub backoff_limit: Option<i32>,

    /// Broker quorum: how many brokers must be online before Flux starts work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub min_size: Option<i32>,

    /// Tasks of the submitted job (`-n`); 0 means one per broker (`-N size` only).
    #[serde(default = "one")]
    #[schemars(range(min = 0))]
    pub tasks: i32,

    /// Active deadline of the whole run, in seconds.
    #[serde(default = "default_deadline")]
    #[schemars(range(min = 1))]
    pub deadline_seconds: i64,

    /// Settings of the broker pods.
    #[serde(default)]
    #[x_kube(
        validation = kube::core::Rule::new("!has(self.labels) || !('flux-framework.org/minicluster' in self.labels || 'flux-framework.org/role' in self.labels)")
            .message("pod.labels must not set flux-framework.org/minicluster or flux-framework.org/role: the operator selects the broker pods by them"),
    )]
    #[garde(dive)]
    pub pod: PodSpec,

    /// Create or hold the cluster without pods (Kueue uses the same switch).
    #[serde(default)]
    pub suspend: bool,

    /// Whether followers start with the lead (`Together`) or wait for a ready lead broker
    /// (`LeadFirst`).
    #[serde(default)]
    pub startup_order: StartupOrder,

    /// Delete the cluster's workload this long after it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,

    /// Where Kueue puts the brokers: all of the cluster's pods in one domain (a rack, a block)
    /// of a topology level, through Kueue's topology-aware scheduling. Needs a Kueue queue
    /// (`kueue.x-k8s.io/queue-name`) whose ResourceFlavor names a Topology with this level.
    /// Not in the Go operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,

    /// When a follower's pod stops while the cluster runs (a shrink of `size`, an eviction):
    /// its rank is drained in Flux at once (no new work there) and the jobs running on it get
    /// this long to finish (default 60); what still runs then is requeued (submitted again,
    /// the old id canceled with a note naming the new one). The followers' termination grace
    /// period is this plus 15 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 3600))]
    pub drain_grace_period_seconds: Option<i32>,
}

fn one() -> i32 {
    1
}
fn default_deadline() -> i64 {
    DEFAULT_DEADLINE_SECONDS
}

/// When the followers start.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum StartupOrder {
    /// All brokers start at once; followers retry until the lead answers.
    #[default]
    Together,
    /// Followers start once the lead broker's pod is ready (JobSet `dependsOn`).
    LeadFirst,
}

/// A container of the broker pods, or of the services pod (`spec.services`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema, Validate)]
#[serde(rename_all = "camelCase")]
#[garde(allow_unvalidated)]
#[x_kube(
    validation = kube::core::Rule::new("!(has(self.launcher) && self.launcher && has(self.batch) && self.batch)")
        .message("launcher and batch exclude each other"),
    validation = kube::core::Rule::new("!(has(self.commands) && has(self.commands.script) && self.commands.script != '' && has(self.command) && self.command != '')")
        .message("commands.script and command exclude each other"),
    validation = kube::core::Rule::new(UNIQUE_MOUNT_PATHS)
        .message(kube::core::Message::Expression(UNIQUE_MOUNT_PATHS_MESSAGE.into()))
        .field_path(".volumes"),
)]
pub struct MiniClusterContainer {
    /// Container name; required unless this is the single Flux container.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 63))]
    #[garde(custom(dns_label_or_empty))]
    pub name: String,

    /// Container image.
    #[serde(default = "default_app_image")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: String,

    /// Command: for the Flux container, what Flux runs (a bash command line); for another
    /// container or a service, the container's command (the image's entrypoint's arguments
    /// with `noWrapEntrypoint`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub command: String,

    /// Working directory of the command.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 4096))]
    pub working_dir: String,

    /// Environment variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[garde(custom(env_names))]
    pub environment: BTreeMap<String, String>,

    /// Environment variables from existing Secrets: variable name -> {name, key}.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[garde(custom(env_names))]
    pub secrets: BTreeMap<String, SecretKeyRef>,

    /// Ports other pods may reach. A container that does not run Flux gets a Service for
    /// them: named after it, selecting every broker pod; a service's is `<name>-<service>`,
    /// selecting the services pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[garde(inner(range(min = 1, max = 65535)))]
    pub ports: Vec<i32>,

    /// Resource requests and limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Container security context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,

    /// Always pull the image (shorthand for `imagePullPolicy: Always`).
    #[serde(default)]
    pub pull_always: bool,

    /// Image pull policy; wins over `pullAlways`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,

    /// Name of an existing image pull Secret.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_pull_secret: String,

    /// postStart / preStop exec hooks.
    #[serde(default)]
    pub life_cycle: LifeCycle,

    /// This container runs Flux (exactly one does).
    #[serde(default)]
    pub run_flux: bool,

    /// The command is the Flux initial program itself (a workflow tool that submits its own
    /// jobs), not a job submitted into Flux.
    #[serde(default)]
    pub launcher: bool,

    /// Each line of the command is its own `flux submit`.
    #[serde(default)]
    pub batch: bool,

    /// With `batch`, the lines are a Flux batch script taken verbatim.
    #[serde(default)]
    pub batch_raw: bool,

    /// Directory for the output of batch jobs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub logs: String,

    /// For a container that does not run Flux: keep the image's own entrypoint (no wrapper
    /// script, so no `commands.*`).
    #[serde(default)]
    pub no_wrap_entrypoint: bool,

    /// Existing volumes to mount, by volume name (each at its own path).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_VOLUMES))]
    #[garde(dive)]
    pub volumes: BTreeMap<String, ContainerVolume>,

    /// Shell snippets run around Flux.
    #[serde(default)]
    pub commands: Commands,
}

impl MiniClusterContainer {
    /// The container's environment: `environment` as values, `secrets` as Secret key refs.
    pub fn env_vars(&self) -> Vec<EnvVar> {
        let plain = self.environment.iter().map(|(k, v)| EnvVar {
            name: k.clone(),
            value: Some(v.clone()),
            value_from: None,
        });
        let secret = self.secrets.iter().map(|(k, s)| EnvVar {
            name: k.clone(),
            value: None,
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: s.name.clone(),
                    key: s.key.clone(),
                    optional: None,
                }),
                ..EnvVarSource::default()
            }),
        });
        plain.chain(secret).collect()
    }
}

/// Most volumes one container may list: bounds the cost of the CEL rule of unique mount
/// paths, which the API server estimates before it accepts the CRD.
pub const MAX_VOLUMES: u32 = 64;

/// CEL: where volume `v` of a container is mounted, `''` when it names no path and is no
/// emptyDir (refused by the operator's validation).
macro_rules! mount_path_cel {
    ($v:literal) => {
        concat!(
            "(has(self.volumes[",
            $v,
            "].path) && self.volumes[",
            $v,
            "].path != '' ? self.volumes[",
            $v,
            "].path : ((has(self.volumes[",
            $v,
            "].emptyDir) && self.volumes[",
            $v,
            "].emptyDir) ? '/dev/shm' : ''))"
        )
    };
}

/// CEL: the mount paths of a container's volumes (`''` for one without path that is no
/// emptyDir, which the operator's validation refuses).
macro_rules! mount_paths_cel {
    () => {
        concat!("self.volumes.map(a, ", mount_path_cel!("a"), ")")
    };
}

/// CEL rule of a container: no two of its volumes mount at one path (the API server would
/// refuse the pod only when the Job creates it). An emptyDir without path mounts at
/// `/dev/shm`. The operator's validation checks the same, and the operator's own mounts.
/// Written over the list of paths: comparing map entries pairwise, or their keys, passes
/// the API server's cost estimate for a CRD many times over.
const UNIQUE_MOUNT_PATHS: &str = concat!(
    "!has(self.volumes) || ",
    mount_paths_cel!(),
    ".filter(p, p != '').all(p, ",
    mount_paths_cel!(),
    ".filter(q, q == p).size() == 1)"
);

/// The message of [`UNIQUE_MOUNT_PATHS`], naming the path.
const UNIQUE_MOUNT_PATHS_MESSAGE: &str = concat!(
    "'two volumes mount at ' + ",
    mount_paths_cel!(),
    ".filter(p, p != '' && ",
    mount_paths_cel!(),
    ".filter(q, q == p).size() > 1)[0] + ' (an emptyDir without path mounts at /dev/shm): a container mounts each path once'"
);

fn default_app_image() -> String {
    DEFAULT_APP_IMAGE.to_string()
}

/// Image pull policy of a container.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
// Variants undocumented on purpose: doc comments would turn the CRD's `enum` into `oneOf`.
#[allow(missing_docs)]
pub enum ImagePullPolicy {
    Always,
    IfNotPresent,
    Never,
}

/// A key of an existing Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
pub struct SecretKeyRef {
    /// Secret name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key in the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// Container lifecycle hooks (each an exec command line).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifeCycle {
    /// Run after the container started.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub post_start_exec: String,
    /// Run before the container stops.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pre_stop_exec: String,
}

/// Shell snippets the entrypoints run, in this order: `init`, `pre`, `brokerPre` (lead) or
/// `workerPre` (followers), the broker, `post`. A container that does not run Flux runs
/// `init`, `servicePre`, its command, `post`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Commands {
    /// Before anything else.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub init: String,
    /// On every broker, before Flux starts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub pre: String,
    /// On the lead broker only, before Flux starts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub broker_pre: String,
    /// On the followers only, before Flux starts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub worker_pre: String,
    /// In a container that does not run Flux, before its command.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub service_pre: String,
    /// After Flux exits (or the command, in a container that does not run Flux).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub post: String,
    /// Words put before the lead's `flux start` (e.g. a profiler).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub prefix: String,
    /// A whole script used as the command.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub script: String,
}

/// An existing volume to mount. Exactly one source: `claimName`, `hostPath`, `secretName`,
/// `configMapName`, `csiDriver` or `emptyDir`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema, Validate)]
#[serde(rename_all = "camelCase")]
#[garde(allow_unvalidated)]
pub struct ContainerVolume {
    /// Where the volume is mounted. Required, except that an emptyDir without one is mounted
    /// at `/dev/shm` (as the Go operator does).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 4096))]
    #[garde(custom(absolute_path_or_empty))]
    pub path: String,
    /// An existing PersistentVolumeClaim.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub claim_name: String,
    /// A directory of the node.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[garde(custom(absolute_path_or_empty))]
    pub host_path: String,
    /// An existing Secret.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub secret_name: String,
    /// An existing ConfigMap.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config_map_name: String,
    /// ConfigMap keys -> paths inside the volume.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub items: BTreeMap<String, String>,
    /// A CSI driver.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub csi_driver: String,
    /// Attributes for the CSI driver.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub csi_driver_attributes: BTreeMap<String, String>,
    /// A fresh emptyDir.
    #[serde(default)]
    pub empty_dir: bool,
    /// emptyDir medium (`Memory` for tmpfs; `memory`, as the Go operator spells it, too).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub empty_dir_medium: String,
    /// emptyDir size limit (a quantity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir_size_limit: Option<Quantity>,
    /// Mount read-only.
    #[serde(default)]
    pub read_only: bool,
}

/// A topology level: a node label key such as `example.com/rack` (a Kubernetes qualified name).
const TOPOLOGY_LEVEL: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";

/// Topology-aware placement of the brokers by Kueue (`spec.placement`): exactly one of
/// `required` and `preferred`, each a topology level (a node label key of the Topology).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = kube::core::Rule::new("has(self.required) != has(self.preferred)")
        .message("placement needs exactly one of required and preferred"),
)]
pub struct Placement {
    /// Every broker in one domain of this level, or the cluster waits in its queue until one
    /// domain has room (Kueue's `podset-required-topology`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317), regex(pattern = TOPOLOGY_LEVEL))]
    pub required: Option<String>,
    /// In one domain of this level if one has room, otherwise in as few domains below it as
    /// Kueue can find (Kueue's `podset-preferred-topology`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317), regex(pattern = TOPOLOGY_LEVEL))]
    pub preferred: Option<String>,
}

impl Placement {
    /// The Kueue pod-template annotation and its value.
    pub fn annotation(&self) -> Option<(&'static str, &str)> {
        match (&self.required, &self.preferred) {
            (Some(level), _) => Some((KUEUE_REQUIRED_TOPOLOGY, level)),
            (None, Some(level)) => Some((KUEUE_PREFERRED_TOPOLOGY, level)),
            (None, None) => None,
        }
    }
}

/// Kueue's pod-template annotations for topology-aware scheduling.
pub const KUEUE_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
/// See [`KUEUE_REQUIRED_TOPOLOGY`].
pub const KUEUE_PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// Kueue puts the pod sets of one group (two, one of them of size 1) in one topology domain.
pub const KUEUE_PODSET_GROUP: &str = "kueue.x-k8s.io/podset-group-name";
/// The group name the lead and followers share (Kueue refuses a number).
pub const PLACEMENT_GROUP: &str = "brokers";

/// The brokers' network.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema, Validate,
)]
#[serde(rename_all = "camelCase")]
#[garde(allow_unvalidated)]
pub struct Network {
    /// Name of the headless Service (the pods' subdomain). Defaults to the MiniCluster name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 63))]
    #[garde(custom(dns_label_or_empty))]
    pub headless_name: String,
    /// Do not spread broker pods one per node.
    #[serde(default)]
    pub disable_affinity: bool,
    /// **New.** The cluster's DNS domain for broker addresses; defaults to the operator's
    /// `--cluster-domain` or what it discovers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 253))]
    pub cluster_domain: String,
}

/// Output of the entrypoint scripts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoggingSpec {
    /// Print only the application's output.
    #[serde(default)]
    pub quiet: bool,
    /// The entrypoints stop at the first failing command (errexit, nounset, pipefail).
    #[serde(default)]
    pub strict: bool,
    /// More verbose Flux and entrypoint output.
    #[serde(default)]
    pub debug: bool,
    /// Time the Flux commands.
    #[serde(default)]
    pub timed: bool,
    /// ZeroMQ debug in the TBON (rank 0 logs handshake failures).
    #[serde(default)]
    pub zeromq: bool,
}

/// Flux state archive: the instance's queue and job history, saved when the cluster stops
/// and restored by the next MiniCluster with the same path.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MiniClusterArchive {
    /// Path of the archive in the lead broker's container (on a volume that outlives the
    /// pod): restored at start when it exists, saved there when the instance stops.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,

    /// What happens to running jobs when the cluster is stopped from outside (deleted,
    /// suspended, preempted by Kueue): `Finish` (default) gives them up to
    /// `gracePeriodSeconds` and cancels what still runs; `Cancel` cancels them at once.
    /// Either way they stay in the archive, canceled, with a note saying why.
    #[serde(default, skip_serializing_if = "is_default")]
    pub running_jobs: RunningJobs,

    /// Longest time running jobs get to finish before the archive is saved (default 60).
    /// The lead pod's termination grace period is this plus 30 s for the save itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 3600))]
    pub grace_period_seconds: Option<i32>,

    /// How much of an archive a restore reads before it refuses it: an archive over one of
    /// these bounds (or one that does not end in time) stops the lead pod before its broker
    /// starts, and `status.restore.error`, the `Restored` condition and the `RestoreFailed`
    /// Event name the bound.
    #[serde(default, skip_serializing_if = "is_default")]
    pub restore_limits: RestoreLimits,
}

/// `spec.archive.restoreLimits`: the bounds of a restore. Unset, each has its default.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct RestoreLimits {
    /// Most members (files) in the archive's tar (default 500000; a flux dump holds about
    /// eight per job). The archive's check holds each member's header in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000_000))]
    pub members: Option<i64>,
    /// Most bytes of the tar once decompressed (default 17179869184, 16 GiB): what the
    /// broker loads into its content store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub bytes: Option<i64>,
    /// Longest the archive's check may read it, in seconds (default 900).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub seconds: Option<i32>,
}

/// Defaults of `spec.archive.restoreLimits`: members, bytes, seconds.
pub const DEFAULT_RESTORE_LIMITS: (i64, i64, i32) = (500_000, 16 << 30, 900);

/// `spec.archive.runningJobs`.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum RunningJobs {
    /// Let running jobs finish, up to the grace period.
    #[default]
    Finish,
    /// Cancel running jobs at once.
    Cancel,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Default of `spec.archive.gracePeriodSeconds` and `spec.drainGracePeriodSeconds`.
pub const DEFAULT_GRACE_SECONDS: i32 = 60;

/// Pod-level settings of the broker pods.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema, Validate,
)]
#[serde(rename_all = "camelCase")]
#[garde(allow_unvalidated)]
pub struct PodSpec {
    /// Extra pod labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Extra pod annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Service account of the pods.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_account_name: String,
    /// Mount the service account token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automount_service_account_token: Option<bool>,
    /// Pod restart policy (`Never` or `OnFailure`; Jobs refuse `Always`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
    /// Node selector.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: node label -> allowed values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_affinity: BTreeMap<String, Vec<String>>,
    /// Tolerations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Scheduler of the pods.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheduler_name: String,
    /// Runtime class of the pods.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub runtime_class_name: String,
    /// DNS policy (defaults to ClusterFirst).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dns_policy: String,
    /// Use the host's IPC namespace.
    #[serde(default, rename = "hostIPC")]
    pub host_ipc: bool,
    /// Use the host's PID namespace.
    #[serde(default, rename = "hostPID")]
    pub host_pid: bool,
    /// Pod-level resource requests (and limits): the pod's total budget.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    /// Pod security context, passed through whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
}

/// Pod restart policy allowed for Job pods.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
// Variants undocumented on purpose: doc comments would turn the CRD's `enum` into `oneOf`.
#[allow(missing_docs)]
pub enum RestartPolicy {
    Never,
    OnFailure,
}

/// Flux options shared by every broker.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema, Validate)]
#[serde(rename_all = "camelCase")]
#[garde(allow_unvalidated)]
pub struct FluxSpec {
    /// The flux view init container that brings Flux into the pods.
    #[serde(default)]
    #[garde(dive)]
    pub container: FluxContainer,
    /// Architecture of the view (accepted for compatibility; the image decides).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub arch: String,
    /// Replaces `flux submit` in single-command mode (e.g. `flux run`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub submit_command: String,
    /// `flux start --wrap` arguments (comma-separated), e.g. `strace,-e,network`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub wrap: String,
    /// TBON connect timeout of the followers (Flux duration, e.g. `5s`).
    #[serde(default = "default_connect_timeout")]
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?(ms|s|m|h|d)?$"))]
    pub connect_timeout: String,
    /// Extra flags for the submitted job (e.g. `-o cpu-affinity=per-task`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub option_flags: String,
    /// Only the lead broker needs DNS: create a lead-only Service.
    #[serde(default)]
    pub minimal_service: bool,
    /// Do not set the broker's local socket path.
    #[serde(default)]
    pub disable_socket: bool,
    /// TBON topology, e.g. `kary:2`, `binomial` or `mincrit:8`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = r"^(kary:[0-9]+|binomial|mincrit(:[0-9]+)?|custom)?$"))]
    pub topology: String,
    /// Services do not wait for the broker socket.
    #[serde(default)]
    pub no_wait_socket: bool,
    /// Followers whose broker fails exit 0 instead of being restarted.
    #[serde(default)]
    pub complete_workers: bool,
    /// Broker log level (0-7; 6 is info).
    #[serde(default = "default_log_level")]
    #[schemars(range(min = 0, max = 7))]
    pub log_level: i32,
    /// A CURVE certificate to use instead of generating one (Flux's text format). It holds
    /// the secret key: prefer letting the operator generate one into a Secret.
    #[serde(default, skip_serializing_if = "SecretText::is_empty")]
    pub curve_cert: SecretText,
    /// Scheduler options.
    #[serde(default)]
    pub scheduler: FluxScheduler,
    /// Secret holding a munge key (for bursting).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub munge_secret: String,
    /// Bursting to external clusters.
    #[serde(default)]
    pub bursting: Bursting,
    /// A whole broker config (TOML) that replaces the generated one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub broker_config: String,
    /// Extra environment for Flux (exported before the broker starts).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[garde(custom(env_names))]
    pub environment: BTreeMap<String, String>,
}

impl Default for FluxSpec {
    fn default() -> Self {
        Self {
            container: FluxContainer::default(),
            arch: String::new(),
            submit_command: String::new(),
            wrap: String::new(),
            connect_timeout: default_connect_timeout(),
            option_flags: String::new(),
            minimal_service: false,
            disable_socket: false,
            topology: String::new(),
            no_wait_socket: false,
            complete_workers: false,
            log_level: default_log_level(),
            curve_cert: SecretText::default(),
            scheduler: FluxScheduler::default(),
            munge_secret: String::new(),
            bursting: Bursting::default(),
            broker_config: String::new(),
            environment: BTreeMap::new(),
        }
    }
}

/// Text that holds a secret: serialized as the plain string, never shown by `Debug`, so a
/// log line or panic message that prints a spec cannot leak it.
#[derive(Serialize, Deserialize, Clone, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(transparent)]
pub struct SecretText(String);

impl SecretText {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for SecretText {
    fn from(text: String) -> Self {
        Self(text)
    }
}

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("<redacted>")
        }
    }
}

fn default_connect_timeout() -> String {
    "5s".to_string()
}
fn default_log_level() -> i32 {
    6
}

/// The flux view init container.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
#[garde(allow_unvalidated)]
pub struct FluxContainer {
    /// The application image already has Flux: no view.
    #[serde(default)]
    pub disable: bool,
    /// Name of the init container.
    #[serde(default = "default_view_name")]
    #[schemars(length(min = 1, max = 63))]
    #[garde(custom(dns_label_or_empty))]
    pub name: String,
    /// The view image.
    #[serde(default = "default_view_image")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: String,
    /// Where the view is copied in every container.
    #[serde(default = "default_view_mount")]
    #[schemars(length(max = 4096), regex(pattern = r"^/.*"))]
    #[garde(custom(absolute_path_or_empty))]
    pub mount_path: String,
    /// Python path of the view's Flux bindings (derived from the view when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub python_path: String,
    /// Working directory of the init container.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub working_dir: String,
    /// Resources of the init container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Security context of the init container (defaults to non-root where allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    /// Always pull the view image.
    #[serde(default)]
    pub pull_always: bool,
    /// Image pull Secret of the view image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_pull_secret: String,
    /// Mount the view image as an image volume, read-only and copied nowhere, instead of
    /// copying it into every pod with an init container (so `name`, `workingDir`,
    /// `resources` and `securityContext` do not apply). Needs Kubernetes 1.33 or newer and
    /// a container runtime with image volumes (containerd 2.1+, CRI-O 1.31+). Unset: the
    /// operator's default (`--flux-view-image-volume`, off unless its installer says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_volume: Option<bool>,
}

impl Default for FluxContainer {
    fn default() -> Self {
        Self {
            disable: false,
            name: default_view_name(),
            image: default_view_image(),
            mount_path: default_view_mount(),
            python_path: String::new(),
            working_dir: String::new(),
            resources: None,
            security_context: None,
            pull_always: false,
            image_pull_secret: String::new(),
            image_volume: None,
        }
    }
}

fn default_view_name() -> String {
    "flux-view".to_string()
}
fn default_view_image() -> String {
    DEFAULT_VIEW_IMAGE.to_string()
}
fn default_view_mount() -> String {
    DEFAULT_VIEW_MOUNT.to_string()
}

/// Scheduler options.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FluxScheduler {
    /// Use sched-simple instead of Fluxion.
    #[serde(default)]
    pub simple: bool,
    /// Fluxion queue policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_policy: Option<QueuePolicy>,
}

/// Fluxion queue policy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
// Variants undocumented on purpose: doc comments would turn the CRD's `enum` into `oneOf`.
#[allow(missing_docs)]
pub enum QueuePolicy {
    Fcfs,
    Easy,
}

/// Bursting to external clusters (accepted; reported as not supported).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bursting {
    /// The lead broker of the cluster this one joins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_broker: Option<FluxBroker>,
    /// A custom host list for the broker config.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostlist: String,
    /// External clusters to burst to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<BurstedCluster>,
}

/// An external lead broker.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FluxBroker {
    /// Address (IP or host name).
    pub address: String,
    /// Name of the lead job.
    pub name: String,
    /// Size of the lead cluster.
    pub size: i32,
    /// Port.
    #[serde(default = "default_port")]
    pub port: i32,
}

fn default_port() -> i32 {
    8050
}

/// A cluster burst to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BurstedCluster {
    /// Host name prefix of the bursted cluster.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
}

// --- garde custom validators -------------------------------------------------------------

fn dns_label_or_empty(value: &str, _: &()) -> garde::Result {
    if value.is_empty() || is_dns_label(value) {
        Ok(())
    } else {
        Err(garde::Error::new(format!(
            "{value:?} is not a DNS label (lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit)"
        )))
    }
}

/// Whether `s` is an RFC 1123 DNS label.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `name` is an environment variable name the operator accepts: letters, digits and
/// `_`, not starting with a digit (so every shell can export it). The one home of this rule.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn env_names<V>(map: &BTreeMap<String, V>, _: &()) -> garde::Result {
    for name in map.keys() {
        if !is_env_name(name) {
            return Err(garde::Error::new(format!(
                "{name:?} is not a valid environment variable name (letters, digits, '_', not starting with a digit)"
            )));
        }
    }
    Ok(())
}

/// An absolute path with no `.` or `..` component, or nothing: what a mount is pointed at
/// must be where it says (`/data/../etc` is `/etc`, which the operator's clash checks would
/// not see).
fn absolute_path_or_empty(value: &str, _: &()) -> garde::Result {
    if value.is_empty() {
        return Ok(());
    }
    if !value.starts_with('/') {
        return Err(garde::Error::new(format!(
            "{value:?} must be an absolute path"
        )));
    }
    if value.split('/').any(|part| part == "." || part == "..") {
        return Err(garde::Error::new(format!(
            "{value:?} has a '.' or '..' component: write the path it means"
        )));
    }
    Ok(())
}
