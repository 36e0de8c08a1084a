//! The JobSet of a MiniCluster: a `lead` replicated job (rank 0) and a `workers` replicated
//! job (ranks 1..), one subdomain, success tied to the lead broker.

use k8s_openapi::api::batch::v1::{
    JobSpec, JobTemplateSpec, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{common_labels, owned_meta, pod_template};
use crate::api::{KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL, LEAD_JOB, WORKERS_JOB};
use crate::flux::Role;
use crate::jobset::{
    DependsOn, FailurePolicy, JobSet, JobSetSpec, Network, ReplicatedJob, SuccessPolicy,
};
use crate::model::Cluster;

/// The desired JobSet.
///
/// This is the object applied once, at creation. `suspend` is `spec.suspend` outside Kueue;
/// a cluster in a Kueue queue is created suspended and from then on Kueue owns the field:
/// later changes go through [`change`], which leaves it out for queued clusters.
pub fn jobset(cluster: &Cluster<'_>, config_map: &str) -> JobSet {
    let mc = cluster.mc;
    let mut replicated_jobs = vec![replicated_job(cluster, Role::Lead, 1, config_map)];
    let followers = cluster.sizes.size.saturating_sub(1);
    if cluster.sizes.max_size > 1 {
        let mut rj = replicated_job(cluster, Role::Follower, followers.max(1), config_map);
        if cluster.jobs.lead_first {
            rj.depends_on = vec![DependsOn {
                name: LEAD_JOB.to_string(),
                status: "Ready".to_string(),
            }];
        }
        replicated_jobs.push(rj);
    }

    let mut metadata = owned_meta(mc, mc.name().to_string());
    let labels = metadata.labels.get_or_insert_default();
    labels.extend(cluster.jobs.labels.clone());
    for key in [KUEUE_QUEUE_LABEL, KUEUE_PRIORITY_LABEL] {
        if let Some(v) = mc.metadata.labels.as_ref().and_then(|l| l.get(key)) {
            labels.insert(key.to_string(), v.clone());
        }
    }
    let queued = labels.contains_key(KUEUE_QUEUE_LABEL);

    JobSet {
        metadata,
        spec: JobSetSpec {
            replicated_jobs,
            network: Some(Network {
                enable_dns_hostnames: Some(true),
                subdomain: Some(cluster.subdomain.to_string()),
                publish_not_ready_addresses: Some(true),
            }),
            success_policy: Some(SuccessPolicy {
                operator: "All".to_string(),
                target_replicated_jobs: vec![LEAD_JOB.to_string()],
            }),
            // A failed Job fails the cluster: recreating every broker would lose the instance's
            // state anyway. Pod-level retries are the Jobs' backoffLimit.
            failure_policy: Some(FailurePolicy {
                max_restarts: Some(0),
            }),
            suspend: Some(cluster.jobs.suspend || queued),
            // `ttlSecondsAfterFinished` is counted by the operator from the completion it
            // recorded (see controller::plan), never by JobSet: a JobSet gone before the
            // operator saw it finish would look like one deleted under a running cluster.
            ttl_seconds_after_finished: None,
        },
        status: None,
    }
}

/// What of an existing JobSet may change: the followers' count (their Job's parallelism and
/// completions, for clusters that have a followers job) and, outside Kueue, `suspend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    /// Pods of the followers' Job (`None`: a lone lead broker has no followers' Job).
    pub followers: Option<i32>,
    /// `spec.suspend` (`None`: Kueue owns it).
    pub suspend: Option<bool>,
}

/// The later change of an existing JobSet, `suspend` as given; `None` when nothing may change.
pub fn change(cluster: &Cluster<'_>, suspend: Option<bool>) -> Option<Change> {
    let sizes = cluster.sizes;
    let followers = (sizes.max_size > 1).then(|| sizes.size.saturating_sub(1).max(1));
    (followers.is_some() || suspend.is_some()).then_some(Change { followers, suspend })
}

impl Change {
    /// The server-side apply of this change to `mc`'s JobSet: only the fields it sets.
    pub fn apply(&self, mc: &crate::api::MiniCluster) -> serde_json::Value {
        let mut spec = serde_json::Map::new();
        if let Some(followers) = self.followers {
            spec.insert(
                "replicatedJobs".into(),
                serde_json::json!([{
                    "name": WORKERS_JOB,
                    "template": {"spec": {"parallelism": followers, "completions": followers}},
                }]),
            );
        }
        if let Some(suspend) = self.suspend {
            spec.insert("suspend".into(), suspend.into());
        }
        serde_json::json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": mc.name(), "namespace": mc.namespace_or_default()},
            "spec": spec,
        })
    }
}

fn replicated_job(cluster: &Cluster<'_>, role: Role, pods: i32, config_map: &str) -> ReplicatedJob {
    let mc = cluster.mc;
    let name = match role {
        Role::Lead => LEAD_JOB,
        Role::Follower => WORKERS_JOB,
    };
    ReplicatedJob {
        name: name.to_string(),
        replicas: Some(1),
        depends_on: Vec::new(),
        template: JobTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(common_labels(mc)),
                ..ObjectMeta::default()
            }),
            spec: Some(JobSpec {
                parallelism: Some(pods),
                completions: Some(pods),
                completion_mode: Some("Indexed".to_string()),
                active_deadline_seconds: Some(cluster.jobs.deadline_seconds),
                backoff_limit: Some(cluster.jobs.backoff_limit),
                // A broker's pod that goes alone (deleted, evicted) is replaced only once it
                // has ended: a follower has drained its rank and requeued its jobs by then, and
                // a lead has saved the queue, so the next broker never races the old one for
                // its rank or its archive. The brokers' entrypoints exit non-zero when stopped.
                pod_replacement_policy: Some("Failed".to_string()),
                pod_failure_policy: (role == Role::Lead && cluster.program_ends_cluster())
                    .then(|| lead_failure_policy(cluster)),
                template: pod_template(cluster, role, config_map),
                ..JobSpec::default()
            }),
        },
    }
}

/// How the lead's Job takes a failed lead pod when the lead's program ends the cluster
/// ([`Cluster::program_ends_cluster`]): a pod the cluster lost (evicted, preempted, its node
/// gone: the `DisruptionTarget` condition) is replaced without counting against
/// `backoffLimit`; a Flux container that exited with anything but
/// [`RETRY_EXIT`](crate::flux::RETRY_EXIT) ended with its job, which failed: the Job fails
/// at once, and with it the JobSet (`maxRestarts: 0`) and the MiniCluster. A retry exit (the
/// broker ended before its job did) and any other failure (an init container's) count
/// against `backoffLimit` as before.
fn lead_failure_policy(cluster: &Cluster<'_>) -> PodFailurePolicy {
    let container = crate::model::containers::flux_container_name(cluster.mc);
    PodFailurePolicy {
        rules: vec![
            PodFailurePolicyRule {
                action: "Ignore".to_string(),
                on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                    type_: "DisruptionTarget".to_string(),
                    status: Some("True".to_string()),
                }]),
                on_exit_codes: None,
            },
            PodFailurePolicyRule {
                action: "FailJob".to_string(),
                on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                    container_name: Some(container.to_string()),
                    operator: "NotIn".to_string(),
                    values: vec![crate::flux::RETRY_EXIT],
                }),
                on_pod_conditions: None,
            },
        ],
    }
}
