//! The pod-facing pieces: volumes, mounts, the flux view init container, environment,
//! readiness probe, and the Services that sidecar ports and `minimalService` need.

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, ExecAction,
    KeyToPath, Probe, SeccompProfile, SecretVolumeSource, SecurityContext, ServicePort,
    TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::command::quote;
use super::scripts::{Sidecar, files, flux_container, is_wrapped, sidecars};
use super::{
    BROKER_PORT, CONFIG_MOUNT, CURVE_MOUNT, CURVE_SECRET_KEY, Error, KEY_MOUNT, RUN_MOUNT, Role,
    SOCKET_PATH, SOFTWARE_MOUNT,
};
use crate::api::{MiniCluster, is_dns_label};

/// Volume holding the ConfigMap (broker.toml, scripts, hooks).
pub const CONFIG_VOLUME: &str = "flux-operator-config";
/// Volume holding the CURVE certificate Secret.
pub const CURVE_VOLUME: &str = "flux-operator-curve";
/// emptyDir for the broker's local socket, shared with the service containers (read-only
/// there). Holds nothing secret.
pub const RUN_VOLUME: &str = "flux-operator-run";
/// Memory-backed emptyDir for the certificate copy Flux reads (mounted at [`KEY_MOUNT`] in the
/// Flux container only).
pub const KEY_VOLUME: &str = "flux-operator-key";
/// Size limit of [`KEY_VOLUME`] (it holds one certificate of a few hundred bytes).
const KEY_VOLUME_SIZE: &str = "1Mi";
/// emptyDir the init container copies the flux view into.
pub const VIEW_VOLUME: &str = "flux-view";
/// Volume names this module uses; user volumes must not take them.
pub const RESERVED_VOLUMES: [&str; 5] = [
    CONFIG_VOLUME,
    CURVE_VOLUME,
    RUN_VOLUME,
    KEY_VOLUME,
    VIEW_VOLUME,
];
/// User the view init container runs as unless `flux.container.securityContext` says
/// otherwise (`nobody`: the view's files are world-readable, the emptyDir world-writable).
pub const VIEW_INIT_USER: i64 = 65534;

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

fn view_enabled(mc: &MiniCluster) -> bool {
    !mc.spec.flux.container.disable
}

/// The mode of the certificate file in the Secret volume. Secret files are owned by root
/// (group fsGroup when set), so the narrowest mode that the broker's user can still read:
/// 0440 with `fsGroup` (the kubelet adds group read anyway), 0444 when the Flux container
/// runs as a known non-root user without fsGroup, 0400 otherwise (root or the image's user).
/// Flux itself reads the entrypoint's private copy, which is always 0400.
pub fn curve_secret_mode(mc: &MiniCluster) -> i32 {
    let pod = mc.spec.pod.security_context.as_ref();
    if pod.and_then(|p| p.fs_group).is_some() {
        return 0o440;
    }
    let container_user = flux_container(mc)
        .ok()
        .and_then(|(_, c)| c.security_context.as_ref())
        .and_then(|s| s.run_as_user);
    match container_user.or_else(|| pod.and_then(|p| p.run_as_user)) {
        Some(uid) if uid != 0 => 0o444,
        _ => 0o400,
    }
}

/// Pod volumes Flux needs: the ConfigMap `config_map`, the CURVE Secret `curve_secret`, the
/// run directory (the socket), the key directory (memory-backed, for the certificate copy),
/// and the flux view (unless disabled).
pub fn pod_volumes(mc: &MiniCluster, config_map: &str, curve_secret: &str) -> Vec<Volume> {
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
                default_mode: Some(curve_secret_mode(mc)),
                items: Some(vec![KeyToPath {
                    key: CURVE_SECRET_KEY.into(),
                    path: CURVE_SECRET_KEY.into(),
                    mode: None,
                }]),
                optional: None,
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
            }),
            ..Default::default()
        },
    ];
    if view_enabled(mc) {
        volumes.push(Volume {
            name: VIEW_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        });
    }
    volumes
}

fn view_mounts(mc: &MiniCluster) -> Vec<VolumeMount> {
    if !view_enabled(mc) {
        return Vec::new();
    }
    vec![
        mount(VIEW_VOLUME, &mc.spec.flux.container.mount_path, true),
        // The view's links and library paths point into /opt/software.
        VolumeMount {
            sub_path: Some("software".into()),
            ..mount(VIEW_VOLUME, SOFTWARE_MOUNT, true)
        },
    ]
}

/// Mounts of the Flux container: the ConfigMap and the Secret (read-only), the run
/// directory, the key directory, and the flux view with its install tree at `/opt/software`
/// (read-only). The only container that mounts the Secret or the key directory.
pub fn flux_container_mounts(mc: &MiniCluster) -> Vec<VolumeMount> {
    let mut mounts = vec![
        mount(CONFIG_VOLUME, CONFIG_MOUNT, true),
        mount(CURVE_VOLUME, CURVE_MOUNT, true),
        mount(RUN_VOLUME, RUN_MOUNT, false),
        mount(KEY_VOLUME, KEY_MOUNT, false),
    ];
    mounts.extend(view_mounts(mc));
    mounts
}

/// Mounts of a container that does not run Flux. In the broker pods: the ConfigMap (its
/// wrapper), the run directory (read-only: the broker socket) and the flux view, as the Go
/// operator mounts its view into every container (also with `noWrapEntrypoint`, for
/// `kubectl exec`). In the services pod, which has neither broker nor view: the ConfigMap when
/// the container is wrapped. Never the CURVE Secret or the key directory: a sidecar cannot
/// read the secret key.
pub fn sidecar_mounts(mc: &MiniCluster, sidecar: Sidecar) -> Vec<VolumeMount> {
    if !sidecar.in_broker_pods() {
        return if super::scripts::is_wrapped(mc, sidecar) {
            vec![mount(CONFIG_VOLUME, CONFIG_MOUNT, true)]
        } else {
            Vec::new()
        };
    }
    let mut mounts = vec![
        mount(CONFIG_VOLUME, CONFIG_MOUNT, true),
        mount(RUN_VOLUME, RUN_MOUNT, true),
    ];
    mounts.extend(view_mounts(mc));
    mounts
}

/// Container command of the Flux container: bash runs the role's entrypoint from the
/// ConfigMap (no exec bit needed on the mounted file).
pub fn flux_container_command(_mc: &MiniCluster, role: Role) -> Vec<String> {
    let script = match role {
        Role::Lead => files::LEAD,
        Role::Worker => files::WORKER,
    };
    vec!["/bin/bash".into(), format!("{CONFIG_MOUNT}/{script}")]
}

/// Environment of the Flux container: where the entrypoint finds things, the role, then the
/// container's `environment` (values as given; Kubernetes expands `$(VAR)`) and `secrets`
/// (`valueFrom.secretKeyRef`). `flux.environment` is exported by the entrypoint instead.
pub fn flux_container_env(mc: &MiniCluster, role: Role) -> Vec<EnvVar> {
    let view = &mc.spec.flux.container;
    let mut env = vec![
        var("FLUX_OPERATOR_CONFIG_DIR", CONFIG_MOUNT),
        var("FLUX_OPERATOR_CURVE_DIR", CURVE_MOUNT),
        var("FLUX_OPERATOR_KEY_DIR", KEY_MOUNT),
        var("FLUX_OPERATOR_RUN_DIR", RUN_MOUNT),
        var(
            "FLUX_OPERATOR_VIEW",
            if view.disable { "" } else { &view.mount_path },
        ),
        var("FLUX_OPERATOR_ROLE", role_value(role)),
    ];
    if let Ok((_, c)) = flux_container(mc) {
        env.extend(c.env_vars());
    }
    env
}

/// Container command of a container that does not run Flux: its wrapper script, or `None` to
/// keep the image's entrypoint (`noWrapEntrypoint`, or nothing to wrap: [`is_wrapped`]).
/// With `None`, use [`sidecar_args`] as the container's `args`.
pub fn sidecar_command(mc: &MiniCluster, sidecar: Sidecar) -> Option<Vec<String>> {
    let c = sidecar.spec(mc)?;
    is_wrapped(mc, sidecar).then(|| {
        vec![
            "/bin/sh".into(),
            format!(
                "{CONFIG_MOUNT}/{}",
                files::sidecar(sidecar.file_prefix(), &c.name)
            ),
        ]
    })
}

/// Container args of an unwrapped container that does not run Flux: its `command` split
/// into words (no shell involved, the image's entrypoint receives them), `None` when there
/// is no command or the container is wrapped.
pub fn sidecar_args(mc: &MiniCluster, sidecar: Sidecar) -> Option<Vec<String>> {
    let c = sidecar.spec(mc)?;
    if is_wrapped(mc, sidecar) || c.command.trim().is_empty() {
        return None;
    }
    Some(shlex::split(&c.command).unwrap_or_else(|| vec![c.command.clone()]))
}

/// Environment of a container that does not run Flux: in the broker pods, where its wrapper
/// finds things and the pod's role (the same variables as the Flux container's, without
/// the certificate's); then its `environment` and `secrets`.
pub fn sidecar_env(mc: &MiniCluster, sidecar: Sidecar, role: Role) -> Vec<EnvVar> {
    let Some(c) = sidecar.spec(mc) else {
        return Vec::new();
    };
    let mut env = Vec::new();
    if sidecar.in_broker_pods() {
        let view = &mc.spec.flux.container;
        env = vec![
            var("FLUX_OPERATOR_CONFIG_DIR", CONFIG_MOUNT),
            var("FLUX_OPERATOR_RUN_DIR", RUN_MOUNT),
            var(
                "FLUX_OPERATOR_VIEW",
                if view.disable { "" } else { &view.mount_path },
            ),
            var("FLUX_OPERATOR_ROLE", role_value(role)),
        ];
    }
    env.extend(c.env_vars());
    env
}

fn var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

fn role_value(role: Role) -> &'static str {
    match role {
        Role::Lead => "lead",
        Role::Worker => "worker",
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

/// The flux view init container, `None` with `flux.container.disable`. It runs
/// `view-init.sh` from the ConfigMap to copy the view into the shared emptyDir.
pub fn view_init_container(mc: &MiniCluster) -> Option<Container> {
    let view = &mc.spec.flux.container;
    if view.disable {
        return None;
    }
    Some(Container {
        name: view.name.clone(),
        image: Some(view.image.clone()),
        image_pull_policy: view.pull_always.then(|| "Always".to_string()),
        command: Some(vec![
            "/bin/sh".into(),
            format!("{CONFIG_MOUNT}/{}", files::VIEW_INIT),
        ]),
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

/// The exec command that succeeds once the broker's local socket ([`SOCKET_PATH`]) exists.
/// Through `/bin/sh` (the app image has it) so it needs no `test` binary on `PATH`.
fn socket_exists_command() -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        format!("test -S {SOCKET_PATH}"),
    ]
}

/// Readiness of the lead broker (every lead pod): its TBON port accepts connections once
/// the broker is up and followers can join. With `maxSize` 1 the broker binds no port, so
/// the probe checks its local socket instead (or nothing when `disableSocket`). Checked every
/// second, so `LeadFirst` startup waits little.
pub fn lead_readiness_probe(mc: &MiniCluster) -> Probe {
    let base = Probe {
        period_seconds: Some(1),
        timeout_seconds: Some(1),
        failure_threshold: Some(3),
        ..Default::default()
    };
    if mc.max_size() > 1 {
        Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(BROKER_PORT),
                host: None,
            }),
            ..base
        }
    } else {
        let command = if mc.spec.flux.disable_socket {
            vec!["true".to_string()]
        } else {
            socket_exists_command()
        };
        Probe {
            exec: Some(ExecAction {
                command: Some(command),
            }),
            ..base
        }
    }
}

/// The `flux` the probes run: the view's (not on the container's `PATH`; the entrypoint
/// only adds it for its own children), or the image's without a view.
fn probe_flux(mc: &MiniCluster) -> String {
    if view_enabled(mc) {
        let view = &mc.spec.flux.container.mount_path;
        quote(&format!("{}/view/bin/flux", view.trim_end_matches('/'))).into_owned()
    } else {
        "flux".to_string()
    }
}

/// The exec command that succeeds once the broker behind [`SOCKET_PATH`] has joined the
/// instance: `flux ping --count=1 broker` through the socket. The local broker answers it
/// itself (no traffic to the lead), but only once it is online (entered state init, which
/// needs its parent): before that Flux refuses every client request but a few
/// ("Upstream Flux broker is offline"), and without a broker there is no socket to connect
/// to. One C command and one local RPC, so cheap enough for every follower.
fn broker_joined_command(mc: &MiniCluster) -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        format!(
            "FLUX_URI=local://{SOCKET_PATH} exec {} ping --count=1 broker",
            probe_flux(mc)
        ),
    ]
}

/// Readiness of a follower broker (every worker pod): its broker has joined the instance
/// ([`broker_joined_command`]), so the cluster's `Ready` means every broker is part of the
/// instance. A follower waiting for its lead is not ready. A broker that fails or leaves
/// turns unready after `failureThreshold` x `periodSeconds` (15 s); a quick restart does not
/// flap.
///
/// `None` with `flux.disableSocket`: the broker then picks its own socket path under
/// `$TMPDIR`, so there is nothing fixed to ask, and a probe that always succeeds would only
/// claim something it does not know.
pub fn follower_readiness_probe(mc: &MiniCluster) -> Option<Probe> {
    if mc.spec.flux.disable_socket {
        return None;
    }
    Some(Probe {
        exec: Some(ExecAction {
            command: Some(broker_joined_command(mc)),
        }),
        period_seconds: Some(5),
        timeout_seconds: Some(2),
        success_threshold: Some(1),
        failure_threshold: Some(3),
        ..Default::default()
    })
}

/// Where a Service for a container's ports sends traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortTarget {
    /// Every broker pod (a container of `spec.containers` runs in each).
    BrokerPods,
    /// The services pod (`spec.services`).
    ServicesPod,
}

/// A Service for the ports of a container that does not run Flux (the render module
/// chooses the pod selector).
#[derive(Clone, Debug, PartialEq)]
pub struct SidecarService {
    /// Service name: the container's name for `spec.containers` (as the Go operator names
    /// it), `<minicluster>-<container>` for `spec.services`.
    pub name: String,
    /// The container's name.
    pub container: String,
    /// The pods it selects.
    pub target: PortTarget,
    /// One TCP port per entry of the container's `ports`.
    pub ports: Vec<ServicePort>,
}

fn port(name: String, p: i32) -> ServicePort {
    ServicePort {
        name: Some(name),
        port: p,
        target_port: Some(IntOrString::Int(p)),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// Services for the containers that do not run Flux and list `ports`. Their names must be
/// DNS labels, differ from each other and from the pods' subdomain (the headless Service).
pub fn sidecar_services(mc: &MiniCluster) -> Result<Vec<SidecarService>, Error> {
    let mut out: Vec<SidecarService> = Vec::new();
    for sidecar in sidecars(mc) {
        let Some(c) = sidecar.spec(mc).filter(|c| !c.ports.is_empty()) else {
            continue;
        };
        let (name, target) = match sidecar {
            Sidecar::Container(_) => (c.name.clone(), PortTarget::BrokerPods),
            Sidecar::Service(_) => (format!("{}-{}", mc.name(), c.name), PortTarget::ServicesPod),
        };
        let field = format!("{}.name", sidecar.field());
        let clash = if !is_dns_label(&name) {
            Some("which is not a DNS label of at most 63 characters".to_string())
        } else if name == mc.subdomain() {
            Some("the name of the pods' subdomain (the headless Service)".to_string())
        } else {
            out.iter()
                .find(|s| s.name == name)
                .map(|s| format!("the name of the Service for container {}", s.container))
        };
        if let Some(why) = clash {
            return Err(Error::Field {
                field,
                message: format!("the Service for its ports would be named {name:?}, {why}"),
            });
        }
        out.push(SidecarService {
            name,
            container: c.name.clone(),
            target,
            ports: c
                .ports
                .iter()
                .map(|p| port(format!("port-{p}"), *p))
                .collect(),
        });
    }
    Ok(out)
}

/// The lead-only Service of `flux.minimalService`.
#[derive(Clone, Debug, PartialEq)]
pub struct LeadService {
    /// The subdomain (headless Service name) the broker config's addresses use.
    pub name: String,
    /// The broker port.
    pub port: ServicePort,
}

/// With `flux.minimalService`, only the lead broker needs a DNS name: in the flat TBON every
/// follower connects to rank 0 and nothing connects to a follower. So a headless Service named
/// like the subdomain (`publishNotReadyAddresses: true`) that selects only the lead pod is
/// enough. A tree topology (`flux.topology`) makes followers parents, so it is an error.
pub fn minimal_service(mc: &MiniCluster) -> Result<Option<LeadService>, Error> {
    let flux = &mc.spec.flux;
    if !flux.minimal_service {
        return Ok(None);
    }
    let topology = flux.topology.trim();
    if !(topology.is_empty() || topology == "custom" || topology == "kary:0") {
        return Err(Error::Field {
            field: "spec.flux.minimalService".into(),
            message: format!(
                "needs the flat topology: with flux.topology {topology:?} followers connect to other followers, which then need DNS names"
            ),
        });
    }
    Ok(Some(LeadService {
        name: mc.subdomain().to_string(),
        port: port("broker".into(), BROKER_PORT),
    }))
}
