//! What the watch caches keep of the kinds they read as Kubernetes types (the services Jobs,
//! the Services, the MiniClusters): only what the reconciler reads (see
//! [`crate::controller::index`]), so a cluster of thousands of pods costs this process
//! little memory. The kinds read into types of their own are trimmed beside them: pods
//! ([`super::pods::trim_pod`]), JobSets ([`super::jobset::trim_jobset`]), Kueue's Workloads
//! ([`super::admission::trim_workload`]).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Service;
use kube::api::PartialObjectMeta;

use crate::api::{MiniCluster, MiniClusterStatus, NAME_LABEL};

/// A services Job as the reconciler reads it: metadata, `spec.suspend` and status (its pod
/// template is never read).
pub fn trim_job(job: &mut Job) {
    if let Some(spec) = job.spec.as_mut() {
        spec.template = Default::default();
    }
}

/// The annotation `kubectl apply` (client-side) keeps a copy of the whole applied object in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A MiniCluster as the controller keeps it: all of it but the copy of itself that
/// `kubectl apply` keeps in an annotation ([`LAST_APPLIED`]), which nothing here reads. A
/// status that is only the CRD's default (no reconcile wrote one,
/// [`MiniClusterStatus::is_unwritten`]) is kept as none, as the API server stores it.
pub fn trim_minicluster(mc: &mut MiniCluster) {
    if let Some(annotations) = mc.metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
    if mc
        .status
        .as_ref()
        .is_some_and(MiniClusterStatus::is_unwritten)
    {
        mc.status = None;
    }
}

/// A Service as the reconciler reads it: its name, owners, deletion, the name label and the
/// applied annotation (a `kubectl apply` annotation, other labels and annotations of Services
/// the operator did not make are never read).
pub fn trim_service(svc: &mut PartialObjectMeta<Service>) {
    let meta = &mut svc.metadata;
    meta.labels = meta
        .labels
        .take()
        .map(|mut l| {
            l.retain(|k, _| k == NAME_LABEL);
            l
        })
        .filter(|l| !l.is_empty());
    meta.annotations = meta
        .annotations
        .take()
        .map(|mut a| {
            a.retain(|k, _| k == crate::render::APPLIED_ANNOTATION);
            a
        })
        .filter(|a| !a.is_empty());
    meta.finalizers = None;
    meta.creation_timestamp = None;
    meta.generate_name = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_that_is_only_the_crds_default_is_kept_as_none_and_a_written_one_whole() {
        let mut mc = crate::fixtures::with_command("m", 2, "app");
        mc.status = Some(
            serde_json::from_value(serde_json::json!({
                "phase": "Pending", "readyBrokers": 0, "maximumSize": 0, "size": 0
            }))
            .unwrap(),
        );
        trim_minicluster(&mut mc);
        assert_eq!(
            mc.status, None,
            "the API server's default for an absent status"
        );
        let written = MiniClusterStatus {
            job_set: "m".into(),
            ..MiniClusterStatus::unwritten()
        };
        mc.status = Some(written.clone());
        trim_minicluster(&mut mc);
        assert_eq!(mc.status, Some(written), "a status a reconcile wrote");
    }

    #[test]
    fn a_kept_minicluster_has_no_copy_of_itself_and_every_other_annotation() {
        let mut mc = crate::fixtures::m().build();
        let applied = serde_json::to_string(&mc).expect("serializes");
        mc.metadata.annotations = Some(
            [
                (LAST_APPLIED.to_string(), applied),
                ("team".to_string(), "a".to_string()),
            ]
            .into(),
        );
        let mut kept = mc.clone();
        trim_minicluster(&mut kept);
        assert_eq!(kept.spec, mc.spec);
        assert_eq!(
            kept.metadata.annotations,
            Some([("team".to_string(), "a".to_string())].into())
        );
    }
}
