//! How the flux view image reaches the pods ([`View`]), as the cluster ([`super::Cluster`]),
//! its mounts ([`super::mounts`]) and the rendered pods read it.

use super::environment::Environment;
use crate::api::MiniCluster;

/// How the flux view image reaches the pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// An init container copies it into an emptyDir in every pod.
    Copy,
    /// The runtime mounts the image itself, read-only (`flux.container.imageVolume`).
    ImageVolume,
}

impl View {
    /// The view of `mc`: its `imageVolume`, else the operator's default.
    pub fn of(mc: &MiniCluster, env: &Environment) -> Option<View> {
        let view = &mc.spec.flux.container;
        if view.disable {
            return None;
        }
        Some(match view.image_volume.unwrap_or(env.view_image_volume) {
            true => View::ImageVolume,
            false => View::Copy,
        })
    }
}
