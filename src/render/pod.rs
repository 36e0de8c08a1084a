//! The broker pod template: the user's containers, the flux view init container, and the
//! pod-level settings of `spec.pod`; and the pieces the services pod shares with it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, CSIVolumeSource, ConfigMapVolumeSource, Container, ContainerPort,
    EmptyDirVolumeSource, ExecAction, HostPathVolumeSource, KeyToPath, Lifecycle, LifecycleHandler,
    LocalObjectReference, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolumeClaimVolumeSource, PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec,
    ResourceRequirements, SecretVolumeSource, Volume, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::{common_labels, curve_secret_name, flux_pod};
use crate::api::{
    ContainerVolume, ImagePullPolicy, KUEUE_PODSET_GROUP, MiniClusterContainer, NAME_LABEL,
    PLACEMENT_GROUP, ROLE_LABEL,
};
use crate::flux::{self, Role};
use crate::model::Cluster;
use crate::model::containers::CompanionContainer;
use crate::model::containers::default_container_name;
use crate::model::containers::{ARCHIVE_INIT, Companion};
use crate::model::mounts::user_mounts;
use crate::model::mounts::{CURVE_VOLUME, KEY_VOLUME};

/// Kueue's topology request for `spec.placement`, the same on the lead's and the followers'
/// pod templates, the two in one pod-set group (so in one domain) when there are followers.
fn placement_annotations(cluster: &Cluster<'_>) -> BTreeMap<String, String> {
    let Some((key, level)) = cluster.pods.placement else {
        return BTreeMap::new();
    };
    let mut annotations = BTreeMap::from([(key.to_string(), level.to_string())]);
    if cluster.sizes.max_size > 1 {
        annotations.insert(KUEUE_PODSET_GROUP.to_string(), PLACEMENT_GROUP.to_string());
    }
    annotations
}

/// The pod template of one role; `config_map` names the ConfigMap with the broker config and
/// scripts (see [`super::config_map`]).
pub fn pod_template(cluster: &Cluster<'_>, role: Role, config_map: &str) -> PodTemplateSpec {
    let (mc, settings, pod) = (cluster.mc, &cluster.pods, cluster.pods.pod);
    let mut labels = common_labels(mc);
    labels.extend(pod.labels.clone());
    labels.insert(ROLE_LABEL.to_string(), role_name(role).to_string());
    let mut annotations = pod.annotations.clone();
    annotations.extend(placement_annotations(cluster));
    let annotations = (!annotations.is_empty()).then_some(annotations);

    let in_pod = cluster.broker_pod_containers();
    let containers: Vec<Container> = (in_pod.iter())
        .filter_map(|(i, _)| match cluster.companion(Companion::Container(*i)) {
            None => (*i == cluster.flux.index).then(|| flux_container(cluster, role)),
            Some(companion) => Some(companion_container(cluster, companion, role)),
        })
        .collect();

    let mut volumes = flux_pod::pod_volumes(cluster, config_map, &curve_secret_name(mc));
    volumes.extend(user_volumes(in_pod.iter().map(|(_, c)| *c)));

    let pull_secrets = pull_secrets(
        (in_pod.iter().map(|(_, c)| c.image_pull_secret.as_str())).chain(std::iter::once(
            cluster.flux_view.image_pull_secret.as_str(),
        )),
    );

    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels),
            annotations,
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers,
            init_containers: Some(
                flux_pod::view_init_container(cluster)
                    .into_iter()
                    .chain(archive_init_container(cluster, role))
                    .collect::<Vec<_>>(),
            )
            .filter(|c| !c.is_empty()),
            volumes: Some(volumes),
            restart_policy: Some(restart_policy(cluster, role).to_string()),
            termination_grace_period_seconds: crate::flux::termination_grace_seconds(cluster, role),
            share_process_namespace: settings.share_process_namespace.then_some(true),
            service_account_name: non_empty(&pod.service_account_name),
            automount_service_account_token: super::automount_token(pod),
            node_selector: (!pod.node_selector.is_empty()).then(|| pod.node_selector.clone()),
            affinity: affinity(cluster),
            tolerations: (!pod.tolerations.is_empty()).then(|| pod.tolerations.clone()),
            scheduler_name: non_empty(&pod.scheduler_name),
            runtime_class_name: non_empty(&pod.runtime_class_name),
            dns_policy: non_empty(&pod.dns_policy),
            host_ipc: pod.host_ipc.then_some(true),
            host_pid: pod.host_pid.then_some(true),
            resources: (!pod.resources.is_empty()).then(|| ResourceRequirements {
                requests: Some(pod.resources.clone()),
                ..Default::default()
            }),
            security_context: Some(super::pod_security_context(pod)),
            resource_claims: (!settings.resource_claims.is_empty())
                .then(|| settings.resource_claims.to_vec()),
            image_pull_secrets: pull_secrets,
            ..PodSpec::default()
        }),
    }
}

/// A broker pod's restart policy: `spec.pod.restartPolicy`, `OnFailure` when unset, except a
/// lead whose program ends the cluster ([`Cluster::program_ends_cluster`]): `Never`, so that
/// its job's end is its pod's, and its Job's `podFailurePolicy` tells a failed job (the
/// cluster fails) from a broker that ended early (a new lead pod).
fn restart_policy(cluster: &Cluster<'_>, role: Role) -> &'static str {
    match cluster.pods.pod.restart_policy {
        _ if role == Role::Lead && cluster.program_ends_cluster() => "Never",
        Some(crate::api::RestartPolicy::Never) => "Never",
        _ => "OnFailure",
    }
}

/// The pod's image pull Secrets: the non-empty names, each once.
pub(super) fn pull_secrets<'a>(
    names: impl Iterator<Item = &'a str>,
) -> Option<Vec<LocalObjectReference>> {
    let mut names: Vec<String> = names
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    (!names.is_empty()).then(|| {
        names
            .into_iter()
            .map(|name| LocalObjectReference { name })
            .collect()
    })
}

/// `lead` or `workers`, as in the role label.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Lead => crate::api::LEAD_JOB,
        Role::Follower => crate::api::WORKERS_JOB,
    }
}

pub(super) fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Fields every kind of container shares.
pub(super) fn base_container(c: &MiniClusterContainer, default_name: &str) -> Container {
    let pull_policy = match (c.image_pull_policy, c.pull_always) {
        (Some(ImagePullPolicy::Always), _) | (None, true) => Some("Always"),
        (Some(ImagePullPolicy::IfNotPresent), _) => Some("IfNotPresent"),
        (Some(ImagePullPolicy::Never), _) => Some("Never"),
        // As the Go operator renders it: an image already on the node is used (also one
        // tagged `latest`, which Kubernetes would otherwise pull every time).
        (None, false) => Some("IfNotPresent"),
    };
    let exec = |cmd: &str| {
        (!cmd.is_empty()).then(|| LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec!["/bin/sh".into(), "-c".into(), cmd.into()]),
            }),
            ..LifecycleHandler::default()
        })
    };
    let lifecycle = Lifecycle {
        post_start: exec(&c.life_cycle.post_start_exec),
        pre_stop: exec(&c.life_cycle.pre_stop_exec),
        ..Lifecycle::default()
    };
    Container {
        name: if c.name.is_empty() {
            default_name.to_string()
        } else {
            c.name.clone()
        },
        image: Some(c.image.clone()),
        image_pull_policy: pull_policy.map(str::to_string),
        working_dir: non_empty(&c.working_dir),
        ports: (!c.ports.is_empty()).then(|| {
            c.ports
                .iter()
                .map(|p| ContainerPort {
                    container_port: *p,
                    ..ContainerPort::default()
                })
                .collect()
        }),
        resources: c.resources.clone(),
        security_context: c.security_context.clone(),
        lifecycle: (lifecycle.post_start.is_some() || lifecycle.pre_stop.is_some())
            .then_some(lifecycle),
        volume_mounts: Some(user_mounts(c)).filter(|m| !m.is_empty()),
        env: Some(c.env_vars()).filter(|e| !e.is_empty()),
        ..Container::default()
    }
}

fn flux_container(cluster: &Cluster<'_>, role: Role) -> Container {
    let mut container = base_container(cluster.flux.spec, default_container_name(cluster.mc));
    container.command = Some(flux::flux_container_command(role));
    container.env = Some(flux_pod::flux_container_env(cluster, role)).filter(|e| !e.is_empty());
    container.volume_mounts = Some(cluster.flux_mounts.clone());
    // Ready means the broker is up, not just that the container started: the lead answers
    // on its TBON port (JobSet's dependsOn for LeadFirst waits on this too).
    // A follower is ready once its broker's socket exists.
    container.readiness_probe = match role {
        Role::Lead => Some(flux_pod::lead_readiness_probe(cluster)),
        Role::Follower => flux_pod::follower_readiness_probe(cluster),
    };
    if role == Role::Lead && cluster.program_ends_cluster() {
        // A failed job leaves no termination message of its own (a save's report, with
        // `spec.archive`, is one): the kubelet keeps the log's last lines instead, which the
        // status shows as the job's output.
        container.termination_message_policy = Some("FallbackToLogsOnError".to_string());
    }
    if role == Role::Lead {
        // One entry per port: the spec's own 8052, if listed, gets the name.
        let ports = container.ports.get_or_insert_default();
        ports.retain(|p| p.container_port != flux::QUEUE_METRICS_PORT);
        ports.push(flux_pod::queue_metrics_port());
    }
    container
}

/// The lead pod's archive report init container (`spec.archive`; see
/// [`flux::ArchiveReport`]), after the view's: the Flux container's image, user, environment
/// and volumes (so it reads the archive as the broker will), without the CURVE certificate,
/// probes, ports or hooks.
fn archive_init_container(cluster: &Cluster<'_>, role: Role) -> Option<Container> {
    if role != Role::Lead || cluster.archive.is_none() {
        return None;
    }
    let mut container = flux_container(cluster, role);
    container.name = ARCHIVE_INIT.to_string();
    container.command = Some(flux::archive_check_command());
    container.readiness_probe = None;
    container.ports = None;
    container.lifecycle = None;
    if let Some(mounts) = container.volume_mounts.as_mut() {
        mounts.retain(|m| m.name != CURVE_VOLUME && m.name != KEY_VOLUME);
    }
    Some(container)
}

/// A container that does not run Flux (beside the broker, or in the services pod): wrapped
/// by its entrypoint (`commands.*`, Flux on `PATH`, the broker's socket), or with
/// `noWrapEntrypoint` the image's entrypoint with `command` as arguments.
pub(super) fn companion_container(
    cluster: &Cluster<'_>,
    companion: &CompanionContainer<'_>,
    role: Role,
) -> Container {
    let mut container = base_container(companion.spec, "service");
    container.command = flux::companion_command(companion);
    if container.command.is_none() {
        container.args = flux::companion_args(companion);
    }
    container.volume_mounts = Some(companion.mounts.clone()).filter(|m| !m.is_empty());
    container.env =
        Some(flux_pod::companion_env(cluster, companion, role)).filter(|e| !e.is_empty());
    container
}

/// `emptyDirMedium` as Kubernetes spells it: the Go operator's examples write `memory`.
fn empty_dir_medium(medium: &str) -> Option<String> {
    match medium {
        "" => None,
        m if m.eq_ignore_ascii_case("memory") => Some("Memory".to_string()),
        m => Some(m.to_string()),
    }
}

/// The pod volumes of these containers' `volumes`, unique by name.
pub(super) fn user_volumes<'a>(
    containers: impl IntoIterator<Item = &'a MiniClusterContainer>,
) -> Vec<Volume> {
    let mut by_name: BTreeMap<&str, &ContainerVolume> = BTreeMap::new();
    for c in containers {
        for (name, v) in &c.volumes {
            by_name.entry(name).or_insert(v);
        }
    }
    by_name
        .into_iter()
        .map(|(name, v)| volume(name, v))
        .collect()
}

fn volume(name: &str, v: &ContainerVolume) -> Volume {
    let mut vol = Volume {
        name: name.to_string(),
        ..Volume::default()
    };
    if !v.claim_name.is_empty() {
        vol.persistent_volume_claim = Some(PersistentVolumeClaimVolumeSource {
            claim_name: v.claim_name.clone(),
            read_only: v.read_only.then_some(true),
        });
    } else if !v.host_path.is_empty() {
        vol.host_path = Some(HostPathVolumeSource {
            path: v.host_path.clone(),
            type_: None,
        });
    } else if !v.secret_name.is_empty() {
        vol.secret = Some(SecretVolumeSource {
            secret_name: Some(v.secret_name.clone()),
            ..Default::default()
        });
    } else if !v.config_map_name.is_empty() {
        vol.config_map = Some(ConfigMapVolumeSource {
            name: v.config_map_name.clone(),
            items: (!v.items.is_empty()).then(|| {
                v.items
                    .iter()
                    .map(|(key, path)| KeyToPath {
                        key: key.clone(),
                        path: path.clone(),
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        });
    } else if !v.csi_driver.is_empty() {
        vol.csi = Some(CSIVolumeSource {
            driver: v.csi_driver.clone(),
            read_only: v.read_only.then_some(true),
            volume_attributes: (!v.csi_driver_attributes.is_empty())
                .then(|| v.csi_driver_attributes.clone()),
            ..Default::default()
        });
    } else {
        vol.empty_dir = Some(EmptyDirVolumeSource {
            medium: empty_dir_medium(&v.empty_dir_medium),
            size_limit: v.empty_dir_size_limit.clone(),
            ..Default::default()
        });
    }
    vol
}

/// Required node affinity from `pod.nodeAffinity`, and (unless `network.disableAffinity`)
/// a preference for one broker per node.
fn affinity(cluster: &Cluster<'_>) -> Option<Affinity> {
    let (mc, pods) = (cluster.mc, &cluster.pods);
    let node_affinity = node_affinity(pods.pod);
    let pod_anti_affinity = pods.spread.then(|| PodAntiAffinity {
        preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
            weight: 100,
            pod_affinity_term: PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        NAME_LABEL.to_string(),
                        mc.name().to_string(),
                    )])),
                    match_expressions: None,
                }),
                topology_key: "kubernetes.io/hostname".to_string(),
                ..PodAffinityTerm::default()
            },
        }]),
        ..PodAntiAffinity::default()
    });
    (node_affinity.is_some() || pod_anti_affinity.is_some()).then_some(Affinity {
        node_affinity,
        pod_anti_affinity,
        ..Affinity::default()
    })
}

/// Required node affinity from `pod.nodeAffinity`: node label -> allowed values.
pub(super) fn node_affinity(pod: &crate::api::PodSpec) -> Option<NodeAffinity> {
    (!pod.node_affinity.is_empty()).then(|| NodeAffinity {
        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(
                    pod.node_affinity
                        .iter()
                        .map(|(key, values)| NodeSelectorRequirement {
                            key: key.clone(),
                            operator: "In".to_string(),
                            values: Some(values.clone()),
                        })
                        .collect(),
                ),
                match_fields: None,
            }],
        }),
        ..NodeAffinity::default()
    })
}
