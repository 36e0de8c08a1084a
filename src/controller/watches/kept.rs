//! Whether a watched object's new version says anything new to a reconcile ([`Kept`]): an
//! event that changes nothing a store keeps (trimmed, [`crate::controller::observe`]) wakes
//! nothing.

use k8s_openapi::api::batch::v1::Job;
use kube::Resource;
use kube::api::{DynamicObject, PartialObjectMeta};

use crate::controller::observe::jobset::ObservedJobSet;
use crate::controller::observe::pods::BrokerPod;

/// A watched object as its store keeps it (trimmed), compared with the stored version of
/// the same object: whether this new version says nothing new to a reconcile.
pub trait Kept {
    /// The same as `stored` but for `metadata.resourceVersion` (which every write moves).
    fn same_as(&mut self, stored: &Self) -> bool;
}

/// [`Kept::same_as`] of a kind compared whole: `new` equals `stored` once it carries
/// `stored`'s `resourceVersion` (put back after).
fn same_but_version<K: Resource + PartialEq>(new: &mut K, stored: &K) -> bool {
    let stored_version = stored.meta().resource_version.clone();
    let own = std::mem::replace(&mut new.meta_mut().resource_version, stored_version);
    let same = new == stored;
    new.meta_mut().resource_version = own;
    same
}

/// The kinds whose store keeps them whole, compared whole ([`same_but_version`]).
macro_rules! kept_whole {
    ($($kind:ty),*) => {$(
        impl Kept for $kind {
            fn same_as(&mut self, stored: &Self) -> bool {
                same_but_version(self, stored)
            }
        }
    )*};
}

kept_whole!(BrokerPod, ObservedJobSet, Job, DynamicObject);

/// A metadata-only watch keeps the metadata alone.
impl<K> Kept for PartialObjectMeta<K> {
    fn same_as(&mut self, stored: &Self) -> bool {
        let stored_version = stored.metadata.resource_version.clone();
        let own = std::mem::replace(&mut self.metadata.resource_version, stored_version);
        let same = self.metadata == stored.metadata;
        self.metadata.resource_version = own;
        same
    }
}
