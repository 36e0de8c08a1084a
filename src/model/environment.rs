//! What the operator knows about the cluster it runs in ([`Environment`]): what the cluster
//! gives every MiniCluster, which its spec may override.

/// What the operator knows about the cluster it runs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Environment {
    /// The cluster's DNS domain (from `--cluster-domain` or discovered), e.g. `cluster.local`.
    /// `spec.network.clusterDomain` overrides it.
    pub cluster_domain: String,
    /// Mount flux views as image volumes unless a MiniCluster says otherwise
    /// (`--flux-view-image-volume`; `spec.flux.container.imageVolume` overrides it).
    pub view_image_volume: bool,
}
