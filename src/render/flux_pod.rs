//! The pod pieces the Flux runtime needs, as Kubernetes objects: its volumes and their mounts
//! in each kind of container, the containers' environment, the flux view init container,
//! and the readiness probes. What goes into them (paths, command lines, variables, the
//! certificate's mode) is the flux module's.

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar,
    EnvVarSource, ExecAction, ImageVolumeSource, KeyToPath, Probe, ResourceFieldSelector,
    SeccompProfile, SecretVolumeSource, SecurityContext, TCPSocketAction, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::flux::{self, BROKER_PORT, CURVE_SECRET_KEY, Role};
use crate::model::containers::CompanionContainer;
use crate::model::mounts::CONFIG_MOUNT;
use crate::model::mounts::{
    CONFIG_VOLUME, CURVE_VOLUME, KEY_VOLUME, RUN_VOLUME, STATE_VOLUME, VIEW_VOLUME, mount,
};
use crate::model::{Cluster, View};

/// Size limit of [`KEY_VOLUME`] (it holds one certificate of a few hundred bytes).
const KEY_VOLUME_SIZE: &str = "1Mi";
/// User the view init container runs as unless `flux.container.securityContext` says
/// otherwise (`nobody`: the view's files are world-readable, the emptyDir world-writable).
pub const VIEW_INIT_USER: i64 = 65534;

/// Pod volumes Flux needs: the ConfigMap `config_map`, the CURVE Secret `curve_secret`, the
/// run directory (the socket), the key directory (memory-backed, for the certificate copy),
/// an interactive cluster's state directory, and the flux view (unless disabled).
pub fn pod_volumes(cluster: &Cluster<'_>, config_map: &str, curve_secret: &str) -> Vec<Volume> {
    let mut volumes = vec![
        Volume {
            name: CONFIG_VOLUME.into(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map.into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: CURVE_VOLUME.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(curve_secret.into()),
                default_mode: Some(flux::curve_secret_mode(cluster)),
                items: Some(vec![KeyToPath {
                    key: CURVE_SECRET_KEY.into(),
                    path: CURVE_SECRET_KEY.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: RUN_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
        Volume {
            name: KEY_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".into()),
                size_limit: Some(Quantity(KEY_VOLUME_SIZE.into())),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    volumes.extend(cluster.view.map(|view| view_volume(cluster, view)));
    if cluster.flux.mode.keeps_state() {
        volumes.push(Volume {
            name: STATE_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        });
    }
    volumes
}

/// The flux view's volume: the emptyDir the init container copies into, or the view image
/// itself, pulled as the init container's image would be.
fn view_volume(cluster: &Cluster<'_>, view: View) -> Volume {
    let image = cluster.flux_view;
    match view {
        View::Copy => Volume {
            name: VIEW_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
        View::ImageVolume => Volume {
            name: VIEW_VOLUME.into(),
            image: Some(ImageVolumeSource {
                reference: Some(image.image.clone()),
                pull_policy: Some(view_pull_policy(image).into()),
            }),
            ..Default::default()
        },
    }
}

/// `Always` with `flux.container.pullAlways`, else `IfNotPresent`.
fn view_pull_policy(view: &crate::api::FluxContainer) -> &'static str {
    if view.pull_always {
        "Always"
    } else {
        "IfNotPresent"
    }
}

/// Environment of the Flux container: where the entrypoint finds things, the role
/// ([`flux::flux_container_variables`]), its CPU limit from the downward API
/// ([`flux::CPU_LIMIT_VARIABLE`]), then the container's `environment` (values as
/// given; Kubernetes expands `$(VAR)`) and `secrets` (`valueFrom.secretKeyRef`).
/// `flux.environment` is exported by the entrypoint instead.
pub fn flux_container_env(cluster: &Cluster<'_>, role: Role) -> Vec<EnvVar> {
    let mut env: Vec<EnvVar> = flux::flux_container_variables(cluster, role)
        .into_iter()
        .map(|(name, value)| var(name, &value))
        .collect();
    env.push(cpu_limit_var());
    env.extend(cluster.flux.spec.env_vars());
    env
}

/// [`flux::CPU_LIMIT_VARIABLE`]: the container's own `limits.cpu` in whole CPUs, rounded up.
fn cpu_limit_var() -> EnvVar {
    EnvVar {
        name: flux::CPU_LIMIT_VARIABLE.into(),
        value: None,
        value_from: Some(EnvVarSource {
            resource_field_ref: Some(ResourceFieldSelector {
                container_name: None,
                resource: flux::CPU_LIMIT_FIELD.into(),
                divisor: Some(Quantity("1".into())),
            }),
            ..Default::default()
        }),
    }
}

/// Environment of a container that does not run Flux: in the broker pods, where its wrapper
/// finds things and the pod's role ([`flux::companion_variables`]); then its `environment`
/// and `secrets`.
pub fn companion_env(
    cluster: &Cluster<'_>,
    container: &CompanionContainer<'_>,
    role: Role,
) -> Vec<EnvVar> {
    let mut env: Vec<EnvVar> = flux::companion_variables(cluster, container, role)
        .into_iter()
        .map(|(name, value)| var(name, &value))
        .collect();
    env.extend(container.spec.env_vars());
    env
}

fn var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

/// The default security context of the view init container: non-root (`nobody`), no
/// privilege escalation, no capabilities, read-only root filesystem, RuntimeDefault seccomp
/// (it passes the "restricted" Pod Security Standard). The view's files are world-readable,
/// so the copies are readable by whatever user the application runs as.
pub fn view_init_security_context() -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(VIEW_INIT_USER),
        run_as_group: Some(VIEW_INIT_USER),
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            add: None,
            drop: Some(vec!["ALL".into()]),
        }),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        ..Default::default()
    }
}

/// The flux view init container, `None` unless the view is copied ([`View::Copy`]). It runs
/// `view-init.sh` from the ConfigMap to copy the view into the shared emptyDir.
pub fn view_init_container(cluster: &Cluster<'_>) -> Option<Container> {
    let view = cluster.flux_view;
    if cluster.view != Some(View::Copy) {
        return None;
    }
    Some(Container {
        name: view.name.clone(),
        image: Some(view.image.clone()),
        image_pull_policy: Some(view_pull_policy(view).into()),
        command: Some(flux::view_init_command()),
        working_dir: (!view.working_dir.is_empty()).then(|| view.working_dir.clone()),
        resources: view.resources.clone(),
        security_context: Some(
            view.security_context
                .clone()
                .unwrap_or_else(view_init_security_context),
        ),
        volume_mounts: Some(vec![
            mount(VIEW_VOLUME, &view.mount_path, false),
            mount(CONFIG_VOLUME, CONFIG_MOUNT, true),
        ]),
        ..Default::default()
    })
}

/// Readiness of the lead broker (every lead pod): its TBON port accepts connections once
/// the broker is up and followers can join. With `maxSize` 1 the broker binds no port, so
/// the probe checks its local socket instead (or nothing when `disableSocket`). Checked every
/// second, so `LeadFirst` startup waits little.
pub fn lead_readiness_probe(cluster: &Cluster<'_>) -> Probe {
    let base = Probe {
        period_seconds: Some(1),
        timeout_seconds: Some(1),
        failure_threshold: Some(3),
        ..Default::default()
    };
    if cluster.sizes.max_size > 1 {
        Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(BROKER_PORT),
                host: None,
            }),
            ..base
        }
    } else {
        let command = if cluster.options.disable_socket {
            vec!["true".to_string()]
        } else {
            flux::socket_exists_command()
        };
        Probe {
            exec: Some(ExecAction {
                command: Some(command),
            }),
            ..base
        }
    }
}

/// Readiness of a follower broker (every pod of the `workers` job): its broker has joined the
/// instance. `follower.sh` runs `joined.py`, which listens on [`flux::JOINED_PORT`] while the
/// broker is in state `run` (after its rc1, in the `broker.online` group the lead counts as
/// up; not while it waits for its parent or leaves), and the kubelet connects there: the
/// cluster's `Ready` means every broker is part of the instance. A TCP probe starts nothing in
/// the container; the exec probe before it ran a runc exec, a shell and `flux uptime` (about
/// four requests to the lead) every second in every follower, for the cluster's whole life,
/// beside the jobs it runs.
///
/// Probed every second, as the lead is: the cluster-up time the operator reports is when it
/// saw every broker ready, so the period is its resolution (at 5 s, found on the real node,
/// a hello-world finished before its followers were ever seen ready). A broker that fails
/// or leaves turns unready after `failureThreshold` x `periodSeconds` (15 s); a quick
/// restart does not flap.
///
/// `None` when the socket's path is not known (`flux.disableSocket` without an archive): the
/// broker then picks its own socket under `$TMPDIR`, so there is nothing fixed to ask, and a
/// probe that always succeeds would only claim something it does not know.
pub fn follower_readiness_probe(cluster: &Cluster<'_>) -> Option<Probe> {
    if !cluster.options.socket {
        return None;
    }
    Some(Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(flux::JOINED_PORT),
            host: None,
        }),
        period_seconds: Some(1),
        timeout_seconds: Some(1),
        success_threshold: Some(1),
        failure_threshold: Some(15),
        ..Default::default()
    })
}

/// The lead's port of the queue metrics (`queue-metrics.py`), declared and named so that a
/// PodMonitor or a Prometheus pod scrape finds it.
pub(super) fn queue_metrics_port() -> ContainerPort {
    ContainerPort {
        name: Some(flux::QUEUE_METRICS_PORT_NAME.to_string()),
        container_port: flux::QUEUE_METRICS_PORT,
        protocol: Some("TCP".to_string()),
        ..ContainerPort::default()
    }
}
