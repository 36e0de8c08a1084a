//! The part of JobSet's API (`jobset.x-k8s.io/v1alpha2`) this operator writes and reads.
//!
//! Only the fields used here are modelled; unknown fields are ignored on read and never
//! written, so server-side apply leaves everything else to JobSet and Kueue.
//!
//! What the operator reads back of a JobSet (its watch, a GET) is a type of its own,
//! [`ObservedJobSet`](crate::controller::observe::jobset::ObservedJobSet).

/// The label JobSet puts on its Jobs and their pods, valued with the JobSet's uid: how a pod
/// is known as the pod of one JobSet, not of an earlier one of the same name.
pub const JOBSET_UID_LABEL: &str = "jobset.sigs.k8s.io/jobset-uid";

/// Whether the pod whose metadata is `meta` was made for the JobSet whose uid is
/// `jobset_uid`: a Job is its controller and JobSet stamped that uid on it (through the
/// Job's pod template). A MiniCluster's pods are its own JobSet's, not every pod with its
/// labels: an earlier MiniCluster of the same name may still be terminating its pods, and
/// anyone who may create pods in the namespace can copy labels.
pub fn made_for_jobset(meta: &ObjectMeta, jobset_uid: &str) -> bool {
    let stamped = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(JOBSET_UID_LABEL))
        .is_some_and(|uid| uid == jobset_uid);
    stamped && made_by_a_job(meta)
}

/// Whether a Job is the controller of the pod whose metadata is `meta`.
pub fn made_by_a_job(meta: &ObjectMeta) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "Job" && o.api_version == "batch/v1")
}

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// Desired state of a JobSet.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "jobset.x-k8s.io",
    version = "v1alpha2",
    kind = "JobSet",
    plural = "jobsets",
    namespaced,
    status = "JobSetStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct JobSetSpec {
    /// The groups of identical Jobs.
    pub replicated_jobs: Vec<ReplicatedJob>,
    /// Pod DNS: subdomain and hostnames.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// When the JobSet counts as succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<SuccessPolicy>,
    /// Restarts after a Job failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<FailurePolicy>,
    /// Suspended JobSets have no running pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Delete the JobSet this long after it finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// A group of identical Jobs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJob {
    /// Name, a suffix of the Job names.
    pub name: String,
    /// The Job template.
    pub template: JobTemplateSpec,
    /// Number of Jobs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Start only after these replicated jobs reached a status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependsOn>,
}

/// A dependency on another replicated job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DependsOn {
    /// The replicated job depended on.
    pub name: String,
    /// `Ready` or `Complete`.
    pub status: String,
}

/// Pod networking of a JobSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    /// Give pods stable host names and create the headless Service.
    #[serde(rename = "enableDNSHostnames", skip_serializing_if = "Option::is_none")]
    pub enable_dns_hostnames: Option<bool>,
    /// Name of the headless Service and the pods' subdomain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    /// Publish DNS records before pods are ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub publish_not_ready_addresses: Option<bool>,
}

/// When the JobSet succeeds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SuccessPolicy {
    /// `All` or `Any` of the targeted Jobs.
    pub operator: String,
    /// Replicated jobs whose Jobs count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_replicated_jobs: Vec<String>,
}

/// Restart budget.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    /// How many times the whole JobSet may be recreated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,
}

/// Observed state of a JobSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobSetStatus {
    /// `Completed`, `Failed`, `Suspended`, `StartupPolicyCompleted`, ...
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// Times the JobSet was recreated.
    #[serde(default)]
    pub restarts: i32,
    /// `Completed` or `Failed` once finished.
    #[serde(default)]
    pub terminal_state: Option<String>,
    /// Counts per replicated job.
    #[serde(default)]
    pub replicated_jobs_status: Vec<ReplicatedJobStatus>,
}

/// Job counts of one replicated job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ReplicatedJobStatus {
    /// The replicated job.
    pub name: String,
    /// Jobs whose pods are all ready.
    #[serde(default)]
    pub ready: i32,
    /// Jobs that succeeded.
    #[serde(default)]
    pub succeeded: i32,
    /// Jobs that failed.
    #[serde(default)]
    pub failed: i32,
    /// Jobs running.
    #[serde(default)]
    pub active: i32,
    /// Jobs suspended.
    #[serde(default)]
    pub suspended: i32,
}
