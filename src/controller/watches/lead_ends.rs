//! How each MiniCluster's last ended lead pod ended, remembered after the pod is gone: the
//! job count and the save its Flux container left as its termination message. A lead pod
//! that is deleted (by hand, evicted) says it as it stops, and the API server may remove it
//! before a reconcile reads the pod store; the restart its replacement brings is counted
//! from this ([`crate::controller::restart_jobs`]). Filled from the pod watch's events, in
//! their order, so the old lead's end is here before its replacement is in the store. Kept
//! in memory only: an operator that restarts in between counts that restart as uncounted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::controller::observe::lead_end::{LeadEnd, lead_end};
use crate::controller::observe::pods::BrokerPod;

/// The last [`LeadEnd`] of each MiniCluster, by namespace and name.
#[derive(Clone, Default)]
pub struct LeadEnds(Arc<Mutex<HashMap<(String, String), LeadEnd>>>);

impl LeadEnds {
    /// Remember how `pod` ended, if it is a lead pod whose container said so.
    pub fn record(&self, pod: &BrokerPod) {
        if let Some((key, end)) = lead_end(pod) {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key, end);
        }
    }

    /// How the last ended lead pod of MiniCluster `name` in `ns` ended.
    pub fn of(&self, ns: &str, name: &str) -> Option<LeadEnd> {
        let ends = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        ends.get(&(ns.to_string(), name.to_string())).cloned()
    }

    /// Forget MiniCluster `name` in `ns` (it was deleted).
    pub fn forget(&self, ns: &str, name: &str) {
        let mut ends = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        ends.remove(&(ns.to_string(), name.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, ContainerStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::api::{LEAD_JOB, NAME_LABEL, ROLE_LABEL};
    use crate::controller::observe::pods::BrokerPodStatus;
    use crate::flux::{JobsReport, JobsSource};

    fn pod(role: &str, message: Option<&str>) -> BrokerPod {
        let labels = [(NAME_LABEL, "m"), (ROLE_LABEL, role)];
        BrokerPod {
            metadata: ObjectMeta {
                name: Some("m-lead-0-0-a".into()),
                namespace: Some("ns".into()),
                labels: Some(labels.map(|(k, v)| (k.into(), v.into())).into()),
                ..Default::default()
            },
            status: Some(BrokerPodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: "m".into(),
                    state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code: 143,
                            message: message.map(String::from),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_lead_pods_last_word_is_remembered_after_it_is_gone() {
        let ends = LeadEnds::default();
        let counted = r#"{"jobs": {"source": "instance", "pending": 1, "running": 2, "ended": 3}}"#;
        let saved = r#"{"archive": "/a.tar", "saved": true, "manifest": null}"#;
        ends.record(&pod(crate::api::WORKERS_JOB, Some(counted)));
        assert_eq!(
            ends.of("ns", "m"),
            None,
            "a follower's end is not the instance's"
        );
        ends.record(&pod(
            LEAD_JOB,
            Some("the last lines of a failed job's output"),
        ));
        assert_eq!(ends.of("ns", "m"), None, "output is not a report");
        ends.record(&pod(LEAD_JOB, Some(counted)));
        let jobs = JobsReport {
            source: JobsSource::Instance,
            pending: 1,
            running: 2,
            ended: 3,
        };
        let want = LeadEnd {
            pod: "m-lead-0-0-a".into(),
            jobs: Some(jobs),
            saved: false,
        };
        assert_eq!(ends.of("ns", "m"), Some(want));
        ends.record(&pod(LEAD_JOB, Some(saved)));
        assert!(
            ends.of("ns", "m")
                .is_some_and(|e| e.saved && e.jobs.is_none())
        );
        assert_eq!(ends.of("other", "m"), None);
        ends.forget("ns", "m");
        assert_eq!(ends.of("ns", "m"), None);
    }
}
