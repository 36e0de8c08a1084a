//! The services pod: `spec.services` run once, beside the brokers rather than in their pods,
//! as in the Go operator. It creates a bare Pod `<mc>-services` with that hostname in the
//! MiniCluster's subdomain, which examples reach as
//! `<mc>-services.<headlessName>.<ns>.svc.<domain>`.
//!
//! Here the pod comes from a Job `<mc>-services` of one pod: a bare Pod is gone for good when
//! it is evicted or its node fails, a Job makes another; the pod template carries the same
//! hostname and subdomain, so the DNS name is the same. (A StatefulSet would name the host
//! `<mc>-services-0`; a ReplicaSet would restart a service that exits 0, where the Go
//! operator's `restartPolicy: OnFailure` lets it finish.) The pod joins the pods' headless
//! Service, which JobSet makes and which selects pods by JobSet's name label; it does not
//! carry the broker pods' `flux-framework.org/minicluster` label, so it is never counted as
//! a broker (status, the scale subresource's selector, the one-broker-per-node preference).
//! With `flux.minimalService` the headless Service selects only the lead broker, and the
//! services pod has no DNS name in the subdomain (neither has it in the Go operator).
//!
//! The Job is created once, like the JobSet, owned by the MiniCluster, and only its
//! `suspend` follows `spec.suspend` later. It is not queued in Kueue (only the JobSet is).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMapVolumeSource, PodSpec, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::owned_meta;
use super::pod::{companion_container, node_affinity, non_empty, pull_secrets, user_volumes};
use crate::api::MiniCluster;
use crate::flux::Role;
use crate::model::Cluster;

/// The label by which JobSet's headless Service (the pods' subdomain) selects its pods.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
/// The label the Job controller puts on the pods of a Job, valued with the Job's name.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

/// Name of the services Job, and the services pod's hostname: `<mc>-services`.
pub fn services_job_name(mc: &MiniCluster) -> String {
    format!("{}-services", mc.name())
}

/// Labels that select the services pod (for the Services of its containers' ports).
pub fn services_pod_selector(mc: &MiniCluster) -> BTreeMap<String, String> {
    BTreeMap::from([(JOB_NAME_LABEL.to_string(), services_job_name(mc))])
}

/// The Job running the services pod, `None` without `spec.services`; `config_map` names
/// the ConfigMap with the scripts (see [`super::config_map`]).
pub fn services_job(cluster: &Cluster<'_>, config_map: &str) -> Option<Job> {
    let (mc, pod, jobs) = (cluster.mc, cluster.pods.pod, &cluster.jobs);
    cluster.services().next()?;
    let name = services_job_name(mc);
    let mut labels = pod.labels.clone();
    labels.insert(
        "app.kubernetes.io/managed-by".to_string(),
        "flux-operator".to_string(),
    );
    labels.insert(JOBSET_NAME_LABEL.to_string(), mc.name().to_string());

    Some(Job {
        metadata: owned_meta(mc, name.clone()),
        spec: Some(JobSpec {
            parallelism: Some(1),
            completions: Some(1),
            backoff_limit: Some(jobs.backoff_limit),
            suspend: Some(jobs.suspend),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: (!pod.annotations.is_empty()).then(|| pod.annotations.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(services_pod_spec(cluster, name, config_map)),
            },
            ..JobSpec::default()
        }),
        status: None,
    })
}

/// The services pod: host `name` in the pods' subdomain, the `spec.services` containers,
/// the ConfigMap when one of them is wrapped, and `spec.pod`'s settings that apply to it.
fn services_pod_spec(cluster: &Cluster<'_>, name: String, config_map: &str) -> PodSpec {
    let pod = cluster.pods.pod;
    let containers = cluster
        .services()
        // (The role is that of a broker pod: not used in the services pod.)
        .map(|s| companion_container(cluster, s, Role::Lead))
        .collect();
    let mut volumes: Vec<Volume> = Vec::new();
    if cluster.services().any(|s| s.wrapped) {
        volumes.push(Volume {
            name: crate::model::mounts::CONFIG_VOLUME.to_string(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map.to_string(),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    volumes.extend(user_volumes(cluster.services().map(|s| s.spec)));
    PodSpec {
        hostname: Some(name),
        subdomain: Some(cluster.subdomain.to_string()),
        containers,
        volumes: (!volumes.is_empty()).then_some(volumes),
        restart_policy: Some(
            match pod.restart_policy {
                Some(crate::api::RestartPolicy::Never) => "Never",
                _ => "OnFailure",
            }
            .to_string(),
        ),
        service_account_name: non_empty(&pod.service_account_name),
        automount_service_account_token: super::automount_token(pod),
        node_selector: (!pod.node_selector.is_empty()).then(|| pod.node_selector.clone()),
        affinity: node_affinity(pod).map(|n| Affinity {
            node_affinity: Some(n),
            ..Affinity::default()
        }),
        tolerations: (!pod.tolerations.is_empty()).then(|| pod.tolerations.clone()),
        scheduler_name: non_empty(&pod.scheduler_name),
        runtime_class_name: non_empty(&pod.runtime_class_name),
        dns_policy: non_empty(&pod.dns_policy),
        security_context: Some(super::pod_security_context(pod)),
        image_pull_secrets: pull_secrets(
            cluster
                .services()
                .map(|s| s.spec.image_pull_secret.as_str()),
        ),
        ..PodSpec::default()
    }
}

/// The later-change apply for an existing services Job: only `suspend`.
pub fn services_job_update(cluster: &Cluster<'_>) -> serde_json::Value {
    let mc = cluster.mc;
    serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": services_job_name(mc), "namespace": mc.namespace_or_default()},
        "spec": {"suspend": cluster.jobs.suspend},
    })
}
