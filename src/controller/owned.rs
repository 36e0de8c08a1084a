//! Ownership: the objects the operator creates for a MiniCluster belong to it alone.

use kube::Resource;

use crate::api::MiniCluster;

/// Whether `obj` is controller-owned by the MiniCluster (by UID: a deleted MiniCluster's
/// objects are not a new one's of the same name).
pub(super) fn controlled_by(obj: &impl Resource, mc: &MiniCluster) -> bool {
    obj.meta()
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == mc.metadata.uid.as_ref())
}
