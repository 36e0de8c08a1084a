//! Pure desired state: `MiniCluster` -> the objects that make it run.
//!
//! Nothing here does I/O. The reconciler applies what these functions return; the `render`
//! command prints it; most unit tests exercise it directly.
//!
//! Per MiniCluster `mc` the operator owns:
//! - Secret `mc-curve`: the CURVE certificate ([`curve_secret`], generated once by the
//!   controller, never here);
//! - ConfigMap `mc-flux`: broker config and entrypoint scripts ([`config_map`]);
//! - JobSet `mc`: the lead and followers replicated jobs ([`jobset`]);
//! - with `spec.services`, Job `mc-services`: the services pod ([`services_job`]);
//! - a Service per container that does not run Flux and has ports ([`services`]).

pub mod flux_pod;
pub mod jobset;
mod pod;
mod services;
mod services_pod;

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use crate::api::{MiniCluster, NAME_LABEL};
use crate::flux;

pub use self::jobset::jobset;
pub use self::pod::{DEFAULT_CONTAINER_NAME, DEFAULT_EMPTY_DIR_PATH, mount_path, pod_template};
pub use self::services::{
    LeadService, PortTarget, SidecarService, minimal_service, services, sidecar_services,
};
pub use self::services_pod::{
    JOB_NAME_LABEL, JOBSET_NAME_LABEL, services_job, services_job_name, services_job_update,
    services_pod_selector,
};

/// Everything the operator creates for a MiniCluster except the certificate Secret.
#[derive(Clone, Debug)]
pub struct Desired {
    pub config_map: ConfigMap,
    pub jobset: crate::jobset::JobSet,
    pub services: Vec<Service>,
    /// The services pod's Job, with `spec.services`.
    pub services_job: Option<Job>,
}

/// Inputs that come from the operator's environment rather than the MiniCluster.
#[derive(Clone, Debug)]
pub struct Environment {
    /// The cluster's DNS domain (e.g. `cluster.local`), already resolved.
    pub cluster_domain: String,
}

/// Why a MiniCluster cannot be rendered. Each names the field at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Flux(#[from] flux::Error),
    /// A spec field makes an object impossible (e.g. a Service name that clashes).
    #[error("{field}: {message}")]
    Field {
        /// JSON path of the field, e.g. `spec.containers[1].name`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl Error {
    /// The spec field at fault, when the error is the spec's (not the operator's).
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::Flux(e) => e.field(),
            Error::Field { field, .. } => Some(field),
        }
    }
}

/// Compute the desired objects of a valid MiniCluster.
pub fn desired(mc: &MiniCluster, env: &Environment) -> Result<Desired, Error> {
    Ok(Desired {
        config_map: config_map(mc, env)?,
        jobset: jobset(mc),
        services: services(mc)?,
        services_job: services_job(mc),
    })
}

/// Name of the certificate Secret.
pub fn curve_secret_name(mc: &MiniCluster) -> String {
    format!("{}-curve", mc.name())
}

/// Name of the ConfigMap with the broker config and scripts.
pub fn config_map_name(mc: &MiniCluster) -> String {
    format!("{}-flux", mc.name())
}

/// Labels every owned object carries.
pub fn common_labels(mc: &MiniCluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), mc.name().to_string()),
        (
            "app.kubernetes.io/managed-by".to_string(),
            "flux-operator".to_string(),
        ),
    ])
}

/// Label selector of all broker pods (the scale subresource's `status.selector`).
pub fn pod_selector(mc: &MiniCluster) -> String {
    format!("{NAME_LABEL}={}", mc.name())
}

/// Metadata of an owned object: name, namespace, labels and the controller reference.
pub fn owned_meta(mc: &MiniCluster, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: mc.metadata.namespace.clone(),
        labels: Some(common_labels(mc)),
        owner_references: owner_reference(mc).map(|o| vec![o]),
        ..ObjectMeta::default()
    }
}

/// The controller owner reference to the MiniCluster (None before it has a uid, e.g. offline).
pub fn owner_reference(mc: &MiniCluster) -> Option<OwnerReference> {
    mc.controller_owner_ref(&())
}

/// The ConfigMap holding the broker config and the entrypoint scripts.
pub fn config_map(mc: &MiniCluster, env: &Environment) -> Result<ConfigMap, Error> {
    let ctx = flux::Context {
        cluster_domain: env.cluster_domain.clone(),
    };
    let data = flux::config_map_data(mc, &ctx)?;
    let size: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_CONFIG_MAP_BYTES {
        return Err(flux::Error::Field {
            field: "spec.containers".to_string(),
            message: format!(
                "the commands, scripts and broker config make the ConfigMap {} {size} bytes, \
                 more than the {MAX_CONFIG_MAP_BYTES} (1 MiB) the API server allows",
                config_map_name(mc)
            ),
        }
        .into());
    }
    Ok(ConfigMap {
        metadata: owned_meta(mc, config_map_name(mc)),
        data: Some(data),
        ..ConfigMap::default()
    })
}

/// The API server refuses a ConfigMap whose data (keys and values) passes 1 MiB.
pub const MAX_CONFIG_MAP_BYTES: usize = 1024 * 1024;

/// The Secret holding the CURVE certificate in Flux's text format.
pub fn curve_secret(mc: &MiniCluster, certificate_text: &str) -> Secret {
    Secret {
        metadata: owned_meta(mc, curve_secret_name(mc)),
        type_: Some("Opaque".to_string()),
        data: Some(BTreeMap::from([(
            flux::CURVE_SECRET_KEY.to_string(),
            ByteString(certificate_text.as_bytes().to_vec()),
        )])),
        immutable: Some(true),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests;
