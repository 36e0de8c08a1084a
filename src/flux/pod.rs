//! What a pod needs to know of Flux: the containers' command lines, the variables that tell
//! the entrypoints where things are, the certificate's file mode, the readiness probes'
//! command lines, and what `flux.minimalService` needs (the model checks it:
//! [`check_minimal_service`](crate::model::network::check_minimal_service)). The render
//! module builds the Kubernetes objects (volumes, mounts, containers, probes, Services) from
//! these.

use super::scripts::files;
use super::{CONFIG_MOUNT, CURVE_MOUNT, KEY_MOUNT, RUN_MOUNT, Role, SOCKET_PATH};
use crate::model::Cluster;
use crate::model::containers::CompanionContainer;

/// The mode of the certificate file in the Secret volume. Secret files are owned by root
/// (group fsGroup when set), so the narrowest mode that the broker's user can still read:
/// 0440 with `fsGroup` (the kubelet adds group read anyway), 0444 when the Flux container
/// runs as a known non-root user without fsGroup, 0400 otherwise (root or the image's user).
/// Flux itself reads the entrypoint's private copy, which is always 0400.
pub fn curve_secret_mode(cluster: &Cluster<'_>) -> i32 {
    let pod = cluster.pods.pod.security_context.as_ref();
    if pod.and_then(|p| p.fs_group).is_some() {
        return 0o440;
    }
    let container_user = (cluster.flux.spec.security_context.as_ref()).and_then(|s| s.run_as_user);
    match container_user.or_else(|| pod.and_then(|p| p.run_as_user)) {
        Some(uid) if uid != 0 => 0o444,
        _ => 0o400,
    }
}

/// Container command of the Flux container: bash runs the role's entrypoint from the
/// ConfigMap (no exec bit needed on the mounted file).
pub fn flux_container_command(role: Role) -> Vec<String> {
    let script = match role {
        Role::Lead => files::LEAD,
        Role::Follower => files::FOLLOWER,
    };
    vec!["/bin/bash".into(), format!("{CONFIG_MOUNT}/{script}")]
}

/// The variables of the Flux container's entrypoint: where it finds things, and the role.
/// The render module puts them first in the container's environment, before the
/// container's own `environment` and `secrets`. `flux.environment` is exported by the
/// entrypoint instead.
pub fn flux_container_variables(cluster: &Cluster<'_>, role: Role) -> Vec<(&'static str, String)> {
    let view = cluster.flux_view;
    vec![
        ("FLUX_OPERATOR_CONFIG_DIR", CONFIG_MOUNT.into()),
        ("FLUX_OPERATOR_CURVE_DIR", CURVE_MOUNT.into()),
        ("FLUX_OPERATOR_KEY_DIR", KEY_MOUNT.into()),
        ("FLUX_OPERATOR_RUN_DIR", RUN_MOUNT.into()),
        (
            "FLUX_OPERATOR_VIEW",
            if view.disable {
                String::new()
            } else {
                view.mount_path.clone()
            },
        ),
        ("FLUX_OPERATOR_ROLE", role_value(role).into()),
    ]
}

/// The downward API field behind [`CPU_LIMIT_VARIABLE`](super::CPU_LIMIT_VARIABLE): the
/// Flux container's `limits.cpu` in whole CPUs (divisor 1 rounds up), the node's allocatable
/// CPUs when it has no limit. The render module puts it after [`flux_container_variables`].
pub const CPU_LIMIT_FIELD: &str = "limits.cpu";

/// Container command of a container that does not run Flux: its wrapper script, or `None` to
/// keep the image's entrypoint (`noWrapEntrypoint`, or nothing to wrap: [`CompanionContainer::wrapped`]).
/// With `None`, use [`companion_args`] as the container's `args`.
pub fn companion_command(container: &CompanionContainer<'_>) -> Option<Vec<String>> {
    container.wrapped.then(|| {
        vec![
            "/bin/sh".into(),
            format!(
                "{CONFIG_MOUNT}/{}",
                files::companion(container.companion.file_prefix(), &container.spec.name)
            ),
        ]
    })
}

/// Container args of an unwrapped container that does not run Flux: its `command` split
/// into words (no shell involved, the image's entrypoint receives them), `None` when there
/// is no command or the container is wrapped.
pub fn companion_args(container: &CompanionContainer<'_>) -> Option<Vec<String>> {
    let c = container.spec;
    if container.wrapped || c.command.trim().is_empty() {
        return None;
    }
    Some(shlex::split(&c.command).unwrap_or_else(|| vec![c.command.clone()]))
}

/// The variables of a container that does not run Flux: in the broker pods, where its
/// wrapper finds things and the pod's role (the same variables as the Flux container's,
/// without the certificate's); none in the services pod. Its own `environment` and `secrets`
/// follow them.
pub fn companion_variables(
    cluster: &Cluster<'_>,
    container: &CompanionContainer<'_>,
    role: Role,
) -> Vec<(&'static str, String)> {
    if !container.companion.in_broker_pods() {
        return Vec::new();
    }
    flux_container_variables(cluster, role)
        .into_iter()
        .filter(|(name, _)| !matches!(*name, "FLUX_OPERATOR_CURVE_DIR" | "FLUX_OPERATOR_KEY_DIR"))
        .collect()
}

/// `FLUX_OPERATOR_ROLE`: `lead` or `worker`. The followers' value stays `worker`: it is in
/// every rendered broker pod, and hooks (and the companions' wrapper) test it.
fn role_value(role: Role) -> &'static str {
    match role {
        Role::Lead => "lead",
        Role::Follower => "worker",
    }
}

/// Command of the archive report init container ([`ARCHIVE_INIT`](super::ARCHIVE_INIT)):
/// `archive-check.sh` from the ConfigMap.
pub fn archive_check_command() -> Vec<String> {
    vec![
        "/bin/bash".into(),
        format!("{CONFIG_MOUNT}/{}", files::ARCHIVE_CHECK),
    ]
}

/// Command of the flux view init container: `view-init.sh` from the ConfigMap copies the
/// view into the shared emptyDir.
pub fn view_init_command() -> Vec<String> {
    vec![
        "/bin/sh".into(),
        format!("{CONFIG_MOUNT}/{}", files::VIEW_INIT),
    ]
}

/// The exec command that succeeds once the broker's local socket ([`SOCKET_PATH`]) exists.
/// Through `/bin/sh` (the app image has it) so it needs no `test` binary on `PATH`.
pub fn socket_exists_command() -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        format!("test -S {SOCKET_PATH}"),
    ]
}
