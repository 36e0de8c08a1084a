//! Pure desired state: a resolved MiniCluster ([`crate::model::Cluster`], from
//! [`crate::model::resolve`]) -> the objects that make it run.
//!
//! Nothing here does I/O. The reconciler applies what these functions return; the `render`
//! command prints it; most unit tests exercise it directly.
//!
//! Per MiniCluster `mc` the operator owns:
//! - Secret `mc-curve`: the CURVE certificate ([`curve_secret`], generated once by the
//!   controller, never here);
//! - ConfigMap `mc-flux-<hash>`: broker config and entrypoint scripts ([`config_map`]),
//!   immutable and named by its content, so the scripts a pod starts with never change
//!   under it: the JobSet references the one it was created with;
//! - JobSet `mc`: the lead and followers replicated jobs ([`jobset()`]);
//! - with `spec.services`, Job `mc-services`: the services pod ([`services_job`]);
//! - Kubernetes Services ([`network_services`]): one per companion container with ports,
//!   and the lead's with `flux.minimalService`.
//!
//! Here "services" alone means the services pod (`spec.services`); Kubernetes Service
//! objects are the network's (`network.rs`).

pub mod flux_pod;
pub mod jobset;
mod network;
mod pod;
mod services_pod;

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, PodSecurityContext, SeccompProfile, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use sha2::{Digest, Sha256};

use crate::api::validation::FieldError;
use crate::api::{MiniCluster, NAME_LABEL, PodSpec};
use crate::flux;
use crate::model::Cluster;

pub use self::jobset::jobset;
pub use self::network::{LeadService, lead_service, network_services};
pub use self::pod::pod_template;
pub use self::services_pod::{
    JOB_NAME_LABEL, JOBSET_NAME_LABEL, services_job, services_job_name, services_job_update,
    services_pod_selector,
};

/// Everything the operator creates for a MiniCluster except the certificate Secret.
#[derive(Clone, Debug)]
pub struct Desired {
    /// The content-addressed ConfigMap with the broker config and scripts.
    pub config_map: ConfigMap,
    /// The JobSet of the lead and follower brokers.
    pub jobset: crate::jobset::JobSet,
    /// The Kubernetes Services: those for companion containers' ports, and the lead's
    /// subdomain Service with `flux.minimalService` ([`network_services`]).
    pub network_services: Vec<Service>,
    /// The services pod's Job, with `spec.services`.
    pub services_job: Option<Job>,
}

/// Compute the desired objects of a resolved MiniCluster ([`crate::model::resolve`]). A
/// resolved cluster always renders: an error is the operator's (a template's bug, libzmq).
/// Whether the objects fit the API server is [`too_large`]'s to say.
pub fn desired(cluster: &Cluster<'_>) -> Result<Desired, flux::Error> {
    let config_map = config_map(cluster)?;
    let jobset = jobset(
        cluster,
        &config_map.metadata.name.clone().unwrap_or_default(),
    );
    Ok(Desired {
        network_services: network_services(cluster).into_iter().map(stamped).collect(),
        services_job: services_job(
            cluster,
            &config_map.metadata.name.clone().unwrap_or_default(),
        ),
        config_map,
        jobset,
    })
}

/// Annotation on an owned object the operator may re-apply: the [`content_hash`] of what it
/// last applied, so a watch shows whether the object is still as desired without a GET.
pub const APPLIED_ANNOTATION: &str = "flux-framework.org/applied";

/// A short, stable hash of a value's JSON (SHA-256, 10 hex digits): names content-addressed
/// objects and stamps [`APPLIED_ANNOTATION`].
pub fn content_hash(value: &impl serde::Serialize) -> String {
    // Maps serialize in key order (BTreeMap, or serde_json's sorted Map), so the same content
    // always gives the same bytes.
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    digest[..5].iter().map(|b| format!("{b:02x}")).collect()
}

/// The object with [`APPLIED_ANNOTATION`] set to the hash of its content (without it).
pub fn stamped<K: Resource + serde::Serialize>(mut obj: K) -> K {
    if let Some(a) = obj.meta_mut().annotations.as_mut() {
        a.remove(APPLIED_ANNOTATION);
    }
    let hash = content_hash(&obj);
    obj.meta_mut()
        .annotations
        .get_or_insert_default()
        .insert(APPLIED_ANNOTATION.to_string(), hash);
    obj
}

/// Name of the certificate Secret.
pub fn curve_secret_name(mc: &MiniCluster) -> String {
    format!("{}-curve", mc.name())
}

/// Name prefix of the ConfigMaps with the broker config and scripts: `<mc>-flux-` and a
/// [`content_hash`] of the data.
pub fn config_map_prefix(mc: &MiniCluster) -> String {
    format!("{}-flux-", mc.name())
}

/// Labels every owned object carries.
pub fn common_labels(mc: &MiniCluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), mc.name().to_string()),
        (
            crate::api::MANAGED_BY_LABEL.to_string(),
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
pub fn config_map(cluster: &Cluster<'_>) -> Result<ConfigMap, flux::Error> {
    let mc = cluster.mc;
    let data = flux::config_map_data(cluster)?;
    let name = format!("{}{}", config_map_prefix(mc), content_hash(&data));
    Ok(ConfigMap {
        metadata: owned_meta(mc, name),
        data: Some(data),
        immutable: Some(true),
        ..ConfigMap::default()
    })
}

/// The API server refuses a ConfigMap whose data (keys and values) passes 1 MiB.
pub const MAX_CONFIG_MAP_BYTES: usize = 1024 * 1024;

/// The most a rendered JobSet may hold, in bytes of JSON: the bound on the spec as a whole.
/// The API server stores an object of at most 1.5 MiB (etcd's request limit); the JobSet
/// carries the containers twice (the lead's and the followers' pod templates) and gains a
/// status, so a spec that passes this is refused before anything is created rather than
/// left half-made.
pub const MAX_JOBSET_BYTES: usize = 1024 * 1024;

/// Why the desired objects of a spec cannot be made, naming the field: the ConfigMap past
/// [`MAX_CONFIG_MAP_BYTES`], or the JobSet past [`MAX_JOBSET_BYTES`]. The spec's own bounds
/// (the API server's CEL rules, the model's checks) hold each field; only the rendered whole
/// tells whether they fit together. `None`: they fit.
pub fn too_large(desired: &Desired) -> Option<FieldError> {
    let cm = &desired.config_map;
    let data = cm.data.iter().flatten();
    let size: usize = data.map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_CONFIG_MAP_BYTES {
        return Some(FieldError::new(
            "spec.containers",
            format!(
                "the commands, scripts and broker config make the ConfigMap {} {size} bytes, \
                 more than the {MAX_CONFIG_MAP_BYTES} (1 MiB) the API server allows",
                cm.metadata.name.as_deref().unwrap_or_default()
            ),
        ));
    }
    let js = &desired.jobset;
    let size = serde_json::to_vec(js).map_or(usize::MAX, |json| json.len());
    (size > MAX_JOBSET_BYTES).then(|| {
        FieldError::new(
            "spec",
            format!(
                "the spec makes the JobSet {} {size} bytes, more than the {MAX_JOBSET_BYTES} \
                 (1 MiB) a MiniCluster may render: the containers' environment, commands and \
                 volumes are in both the lead's and the followers' pod templates; move large \
                 values to a ConfigMap or Secret",
                js.metadata.name.as_deref().unwrap_or_default()
            ),
        )
    })
}

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

/// The pods' service account token: mounted only when asked for
/// (`spec.pod.automountServiceAccountToken`) or when the pods run as a named account
/// (`spec.pod.serviceAccountName`); Flux needs none, and a token in every pod is a
/// credential every job can read.
pub fn automount_token(pod: &PodSpec) -> Option<bool> {
    pod.automount_service_account_token
        .or_else(|| pod.service_account_name.is_empty().then_some(false))
}

/// The pods' security context: the user's (`spec.pod.securityContext`), with the
/// container runtime's default seccomp profile unless it names one (Kubernetes' own default
/// is no filter at all; Flux and MPI need none of the system calls it blocks).
pub fn pod_security_context(pod: &PodSpec) -> PodSecurityContext {
    let mut context = pod.security_context.clone().unwrap_or_default();
    context
        .seccomp_profile
        .get_or_insert_with(|| SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        });
    context
}
