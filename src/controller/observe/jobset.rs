//! A JobSet as the operator reads it back (its watch, a GET): [`ObservedJobSet`], a type of
//! its own holding only what the reconciler reads of the JobSet's API ([`crate::jobset`]),
//! trimmed further by its watch ([`trim_jobset`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::Deserialize;

use super::meta::metadata_without_managed_fields;
use crate::jobset::{JobSet, JobSetStatus};

/// A JobSet as the operator reads it back (its watch, a GET): the metadata, `spec.suspend`,
/// each replicated Job's name and size, the ConfigMap its pods mount, and the status. The pod
/// templates, the bulk of a JobSet (a `JobTemplateSpec` alone is 2.6 KiB in memory, however
/// little it says), are neither deserialized nor kept: a watch holds one of these per
/// MiniCluster for the process's life.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ObservedJobSet {
    /// The JobSet's metadata, without its managed fields.
    #[serde(default, deserialize_with = "metadata_without_managed_fields")]
    pub metadata: ObjectMeta,
    /// What is read of its spec.
    #[serde(default)]
    pub spec: ObservedSpec,
    /// Its status.
    pub status: Option<JobSetStatus>,
}

/// What the operator reads of a JobSet's spec; field for field as in
/// [`JobSetSpec`](crate::jobset::JobSetSpec).
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObservedSpec {
    /// The replicated jobs: names and sizes.
    #[serde(default)]
    pub replicated_jobs: Vec<ObservedReplicatedJob>,
    /// Suspended JobSets have no running pods.
    pub suspend: Option<bool>,
}

/// A replicated job's name and size, and the ConfigMap its pods mount.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ObservedReplicatedJob {
    /// Name, a suffix of the Job names.
    #[serde(default)]
    pub name: String,
    /// Number of Jobs.
    pub replicas: Option<i32>,
    /// The Job template: its size and mounted ConfigMap.
    #[serde(default)]
    pub template: ObservedJobTemplate,
}

/// A Job template as read back: `spec`.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ObservedJobTemplate {
    /// The Job's spec.
    pub spec: Option<ObservedJobSpec>,
}

/// A Job's spec as read back: its size and the ConfigMap its pods mount.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ObservedJobSpec {
    /// Pods at once.
    pub parallelism: Option<i32>,
    /// Pods to complete.
    pub completions: Option<i32>,
    /// The pod template: its volumes.
    #[serde(default)]
    pub template: ObservedPodTemplate,
}

/// A pod template as read back: `spec.volumes`.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ObservedPodTemplate {
    /// The pod's spec.
    pub spec: Option<ObservedPodSpec>,
}

/// A pod spec as read back: its volumes.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ObservedPodSpec {
    /// The ConfigMap volumes (the watch keeps the broker config's).
    #[serde(default)]
    pub volumes: Vec<ObservedVolume>,
}

/// A volume as read back: its name and, for a ConfigMap volume, the ConfigMap.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObservedVolume {
    /// The volume's name.
    #[serde(default)]
    pub name: String,
    /// The ConfigMap it mounts.
    pub config_map: Option<ObservedConfigMap>,
}

/// The ConfigMap a volume mounts.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ObservedConfigMap {
    /// Its name.
    #[serde(default)]
    pub name: String,
}

impl k8s_openapi::Resource for ObservedJobSet {
    const API_VERSION: &'static str = "jobset.x-k8s.io/v1alpha2";
    const GROUP: &'static str = "jobset.x-k8s.io";
    const KIND: &'static str = "JobSet";
    const VERSION: &'static str = "v1alpha2";
    const URL_PATH_SEGMENT: &'static str = "jobsets";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for ObservedJobSet {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The JobSet the operator made, as it would read it back: what a create returned, before
/// the watch shows it; the desired JobSet the status counts from while it is being made.
impl From<&JobSet> for ObservedJobSet {
    fn from(js: &JobSet) -> Self {
        let volumes = |spec: &k8s_openapi::api::core::v1::PodSpec| {
            (spec.volumes.iter().flatten())
                .map(|v| ObservedVolume {
                    name: v.name.clone(),
                    config_map: v.config_map.as_ref().map(|c| ObservedConfigMap {
                        name: c.name.clone(),
                    }),
                })
                .collect()
        };
        let job = |spec: &k8s_openapi::api::batch::v1::JobSpec| ObservedJobSpec {
            parallelism: spec.parallelism,
            completions: spec.completions,
            template: ObservedPodTemplate {
                spec: spec.template.spec.as_ref().map(|p| ObservedPodSpec {
                    volumes: volumes(p),
                }),
            },
        };
        ObservedJobSet {
            metadata: js.metadata.clone(),
            spec: ObservedSpec {
                replicated_jobs: (js.spec.replicated_jobs.iter())
                    .map(|r| ObservedReplicatedJob {
                        name: r.name.clone(),
                        replicas: r.replicas,
                        template: ObservedJobTemplate {
                            spec: r.template.spec.as_ref().map(job),
                        },
                    })
                    .collect(),
                suspend: js.spec.suspend,
            },
            status: js.status.clone(),
        }
    }
}

impl ObservedJobSet {
    /// Whether a condition of this type is True.
    pub fn condition_true(&self, type_: &str) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == "True")
        })
    }

    /// The condition of this type, if any.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
    }
}

/// A JobSet as the reconciler reads it ([`ObservedJobSet`]: its pod templates were never
/// deserialized), keeping of its pods' volumes only the one that mounts the broker config
/// ([`crate::controller::plan::config_map_of`]), and of its status only the conditions: the
/// counts of ready and active Jobs, which JobSet updates as the pods come up, and its own
/// restarts are never read (the pods tell), so a change of them alone wakes no reconcile.
pub fn trim_jobset(js: &mut ObservedJobSet) {
    let pods = (js.spec.replicated_jobs.iter_mut())
        .filter_map(|r| r.template.spec.as_mut()?.template.spec.as_mut());
    for pod in pods {
        pod.volumes
            .retain(|v| v.name == crate::model::mounts::CONFIG_VOLUME);
    }
    if let Some(status) = js.status.as_mut() {
        status.replicated_jobs_status = Vec::new();
        status.restarts = 0;
        status.terminal_state = None;
    }
}
