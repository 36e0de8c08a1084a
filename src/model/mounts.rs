//! Every mount of a container: the operator's own volumes (the broker config, certificate,
//! run directory, key directory and flux view) and the user's `volumes`, and the clash check
//! the API server makes only when the Job creates the pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::VolumeMount;

use super::containers::{Companion, is_wrapped};
use super::view::View;
use crate::api::validation::{FieldError, key_field};
use crate::api::{ContainerVolume, MiniCluster, MiniClusterContainer};

/// Where the ConfigMap (broker config and scripts) is mounted in containers.
pub const CONFIG_MOUNT: &str = "/etc/flux-operator/config";
/// Where the CURVE Secret is mounted in the Flux container.
pub const CURVE_MOUNT: &str = "/etc/flux-operator/curve";
/// The run directory (emptyDir) of every broker pod. Shared with the containers that do not
/// run Flux (read-only there), so it must never hold a secret. Only
/// [`BROKER_DIR`](crate::flux::BROKER_DIR) lives in it.
pub const RUN_MOUNT: &str = "/run/flux-operator";
/// The Flux container's private key directory (memory-backed emptyDir [`KEY_VOLUME`],
/// mounted in no other container): the entrypoint's copy of the certificate.
pub const KEY_MOUNT: &str = "/run/flux-operator-key";
/// Where the view's install tree appears in the containers (its links point there).
pub const SOFTWARE_MOUNT: &str = "/opt/software";

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
/// The flux view: an emptyDir the init container copies the view into, or the view image
/// itself as an image volume ([`View`]).
pub const VIEW_VOLUME: &str = "flux-view";
/// emptyDir of an interactive cluster's Flux container where the lead broker keeps the
/// instance's state (its `statedir`), so a restart of the container in the same pod starts
/// the same instance again ([`super::containers::keeps_state`]).
pub const STATE_VOLUME: &str = "flux-operator-state";
/// Where [`STATE_VOLUME`] is mounted in the Flux container.
pub const STATE_MOUNT: &str = "/var/lib/flux-operator";
/// Volume names the operator uses; user volumes must not take them.
pub const RESERVED_VOLUMES: [&str; 6] = [
    CONFIG_VOLUME,
    CURVE_VOLUME,
    RUN_VOLUME,
    KEY_VOLUME,
    VIEW_VOLUME,
    STATE_VOLUME,
];

/// Mount path of an emptyDir volume that names none.
pub const DEFAULT_EMPTY_DIR_PATH: &str = "/dev/shm";

/// Where a volume is mounted: its `path`; an emptyDir without one at `/dev/shm`, as the Go
/// operator mounts emptyDirs (shared memory for MPI and the like).
pub fn mount_path(v: &ContainerVolume) -> String {
    match v.path.as_str() {
        "" if v.empty_dir => DEFAULT_EMPTY_DIR_PATH.to_string(),
        path => path.to_string(),
    }
}

/// A mount of volume `name` at `path`.
pub fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

/// The view at `flux.container.mountPath` (`view/` and `software/` there) and its install
/// tree at `/opt/software`, where the view's links and library paths point. The copy has
/// them at its top; an image volume is the image's root, so both come from its `/opt`
/// (where `view` may be a link to an absolute `/opt/...` path: the entrypoints follow it
/// under the mount). The same paths either way.
fn view_mounts(mc: &MiniCluster, view: Option<View>) -> Vec<VolumeMount> {
    let (top, software) = match view {
        None => return Vec::new(),
        Some(View::Copy) => (None, "software"),
        Some(View::ImageVolume) => (Some("opt".to_string()), "opt/software"),
    };
    vec![
        VolumeMount {
            sub_path: top,
            ..mount(VIEW_VOLUME, &mc.spec.flux.container.mount_path, true)
        },
        VolumeMount {
            sub_path: Some(software.into()),
            ..mount(VIEW_VOLUME, SOFTWARE_MOUNT, true)
        },
    ]
}

/// Mounts of the Flux container: the ConfigMap and the Secret (read-only), the run
/// directory, the key directory, the flux view with its install tree at `/opt/software`
/// (read-only), and for an interactive cluster the state directory. The only container that
/// mounts the Secret or the key directory.
pub fn flux_container_mounts(mc: &MiniCluster, view: Option<View>) -> Vec<VolumeMount> {
    let mut mounts = vec![
        mount(CONFIG_VOLUME, CONFIG_MOUNT, true),
        mount(CURVE_VOLUME, CURVE_MOUNT, true),
        mount(RUN_VOLUME, RUN_MOUNT, false),
        mount(KEY_VOLUME, KEY_MOUNT, false),
    ];
    if super::containers::keeps_state(mc) {
        mounts.push(mount(STATE_VOLUME, STATE_MOUNT, false));
    }
    mounts.extend(view_mounts(mc, view));
    mounts
}

/// Mounts of a container that does not run Flux. In the broker pods: the ConfigMap (its
/// wrapper), the run directory (read-only: the broker socket) and the flux view, as the Go
/// operator mounts its view into every container (also with `noWrapEntrypoint`, for
/// `kubectl exec`). In the services pod, which has neither broker nor view: the ConfigMap when
/// the container is wrapped. Never the CURVE Secret or the key directory: no companion mounts
/// the secret key (one running as the broker's user or root reaches it through the socket,
/// as the instance's owner: docs/security.md).
pub fn companion_mounts(
    mc: &MiniCluster,
    companion: Companion,
    view: Option<View>,
) -> Vec<VolumeMount> {
    if !companion.in_broker_pods() {
        return if is_wrapped(mc, companion) {
            vec![mount(CONFIG_VOLUME, CONFIG_MOUNT, true)]
        } else {
            Vec::new()
        };
    }
    let mut mounts = vec![
        mount(CONFIG_VOLUME, CONFIG_MOUNT, true),
        mount(RUN_VOLUME, RUN_MOUNT, true),
    ];
    mounts.extend(view_mounts(mc, view));
    mounts
}

/// The mounts of the user's `volumes` of a container.
pub fn user_mounts(c: &MiniClusterContainer) -> Vec<VolumeMount> {
    c.volumes
        .iter()
        .map(|(name, v)| VolumeMount {
            name: name.clone(),
            mount_path: mount_path(v),
            read_only: v.read_only.then_some(true),
            ..VolumeMount::default()
        })
        .collect()
}

/// A container mounts each path once: the API server refuses a pod whose container has two
/// volume mounts at one path, and only when the Job creates the pod, long after the
/// MiniCluster was accepted. So two of the container's `volumes` at one path (an emptyDir
/// without `path` mounts at `/dev/shm`), or one at a path where the operator mounts its own
/// volume into this container (`operator`), are refused, naming the volume's field (`field`
/// is the container's).
pub fn check_mount_paths(
    field: &str,
    c: &MiniClusterContainer,
    operator: &[VolumeMount],
    errors: &mut Vec<FieldError>,
) {
    fn clean(path: &str) -> &str {
        match path.trim_end_matches('/') {
            "" => path,
            trimmed => trimmed,
        }
    }
    // Path -> the user volume mounted there (`None`: one of the operator's).
    let mut seen: BTreeMap<String, Option<&str>> = operator
        .iter()
        .map(|m| (clean(&m.mount_path).to_string(), None))
        .collect();
    for (vname, v) in &c.volumes {
        let path = mount_path(v);
        if path.is_empty() {
            continue; // refused elsewhere: a volume needs a path
        }
        let key = clean(&path).to_string();
        let vfield = format!("{}.path", key_field(&format!("{field}.volumes"), vname));
        if let Some(message) = nested_in_operator_mount(&key, v.read_only, operator) {
            errors.push(FieldError::new(vfield, message));
            continue;
        }
        match seen.get(&key) {
            None => {
                seen.insert(key, Some(vname));
            }
            Some(None) => errors.push(FieldError::new(
                vfield,
                format!(
                    "{path:?} is where the operator mounts its own volume in this container (the broker config, certificate, socket or flux view); pick another path"
                ),
            )),
            Some(Some(other)) => errors.push(FieldError::new(
                vfield,
                format!(
                    "{path:?} is also where volume {other} is mounted (an emptyDir without path mounts at {DEFAULT_EMPTY_DIR_PATH}); a container cannot mount two volumes at one path"
                ),
            )),
        }
    }
}

/// Why a user volume at `path` cannot nest with the operator's mounts in this container: a
/// volume inside one of them would cover part of the broker config, certificate, socket or
/// flux view; a read-only volume around one leaves the runtime no way to make its mount
/// point. `None` when it does not nest (an equal path is the clash check's).
fn nested_in_operator_mount(
    path: &str,
    read_only: bool,
    operator: &[VolumeMount],
) -> Option<String> {
    let within = |inner: &str, outer: &str| {
        let outer = outer.trim_end_matches('/');
        inner.len() > outer.len() + 1
            && inner.starts_with(outer)
            && inner[outer.len()..].starts_with('/')
    };
    operator.iter().find_map(|m| {
        if within(path, &m.mount_path) {
            Some(format!(
                "{path:?} is inside {:?}, where the operator mounts its own volume in this container (the broker config, certificate, socket, state or flux view); pick a path outside it",
                m.mount_path
            ))
        } else if read_only && within(&m.mount_path, path) {
            Some(format!(
                "{path:?} is read-only and holds {:?}, where the operator mounts its own volume in this container: the runtime could not make that mount point; mount it elsewhere or not read-only",
                m.mount_path
            ))
        } else {
            None
        }
    })
}
