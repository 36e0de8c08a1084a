//! Whether the Flux instance started again while the MiniCluster ran: the lead broker's Flux
//! container restarted (an OOM kill, a crash) or its pod was replaced (deleted, evicted, a
//! node lost). Either way the lead broker is a new instance, and a user who sees only the
//! pod's RESTARTS go up would not know that the queue went with the old one. Pure: from the
//! pods in the watch cache and the status the last reconcile wrote, so an operator restart
//! neither misses nor repeats one.

use std::sync::Arc;

use super::observe::pods::BrokerPod;
use super::restart_jobs::{self, Evidence, How, Keeps};

use crate::api::{InstanceStatus, MiniCluster, reason};
use crate::flux::JobsReport;

/// The lead broker's pod as seen now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeadSeen {
    /// The newest lead pod's name.
    pub pod: String,
    /// The kubelet's restart count of its Flux container.
    pub restarts: i32,
    /// How that container last ended (`OOMKilled, exit code 137`), if it restarted.
    pub ended: Option<String>,
    /// The jobs its last run counted as it ended (its termination message).
    pub counted: Option<JobsReport>,
}

/// A new instance replaced the running one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    /// The `Restarted` condition's reason.
    pub reason: &'static str,
    /// What happened and what it means for the queue.
    pub message: String,
}

/// The newest lead pod of `mc` and its Flux container's restarts.
pub fn lead_seen(mc: &MiniCluster, pods: &[Arc<BrokerPod>]) -> Option<LeadSeen> {
    let lead = super::observe::pods::newest_lead(pods)?;
    let container = crate::model::containers::flux_container_name(mc);
    let status = lead
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container));
    let last = status.and_then(|c| c.last_state.as_ref()?.terminated.as_ref());
    let ended = last.map(|t| match &t.reason {
        Some(reason) => format!("{reason}, exit code {}", t.exit_code),
        None => format!("exit code {}", t.exit_code),
    });
    let counted = last.and_then(|t| JobsReport::parse(t.message.as_deref()?));
    Some(LeadSeen {
        pod: lead.metadata.name.clone().unwrap_or_default(),
        restarts: status.map_or(0, |c| c.restart_count),
        ended,
        counted,
    })
}

/// The instance status after `seen`, and the restart it shows, if any, with what it did
/// with the old instance's jobs as far as `evidence` tells ([`restart_jobs`]). `suspended`:
/// the JobSet is suspended, so its pods go and the next lead is a resumption, not a restart.
pub fn next(
    old: Option<&InstanceStatus>,
    seen: Option<&LeadSeen>,
    suspended: bool,
    keeps: Keeps<'_>,
    evidence: Evidence<'_>,
) -> (Option<InstanceStatus>, Option<Restart>) {
    let old = old.cloned();
    if suspended {
        let kept = old.map(|o| InstanceStatus {
            restarts: o.restarts,
            last_restart: o.last_restart,
            ..InstanceStatus::default()
        });
        return (kept, None);
    }
    let Some(seen) = seen else {
        return (old, None);
    };
    let before = old.unwrap_or_default();
    let same_pod = before.lead_pod.is_empty() || before.lead_pod == seen.pod;
    let (added, what) = if same_pod {
        let since = if before.lead_pod.is_empty() {
            0
        } else {
            before.lead_container_restarts
        };
        let added = (seen.restarts - since).max(0);
        let what = format!(
            "the Flux container of the lead broker's pod {} restarted ({})",
            seen.pod,
            seen.ended
                .as_deref()
                .unwrap_or("the kubelet's restart count went up")
        );
        (added, (reason::LEAD_BROKER_RESTARTED, what))
    } else {
        let what = format!(
            "the lead broker's pod {} was replaced by {}",
            before.lead_pod, seen.pod
        );
        (1 + seen.restarts, (reason::LEAD_POD_REPLACED, what))
    };
    let how = if same_pod {
        How::SamePod
    } else {
        How::NewPod {
            old: &before.lead_pod,
        }
    };
    let last_restart = if added > 0 {
        Some(restart_jobs::at_restart(how, &seen.pod, keeps, evidence))
    } else {
        (before.last_restart.clone()).map(|last| restart_jobs::later(last, keeps, evidence))
    };
    let restart = (added > 0).then(|| {
        let fate = if same_pod && keeps.state_in_pod {
            format!(
                "the Flux instance started again from the state it keeps in its pod; {}",
                kept_in_pod()
            )
        } else {
            format!("a new Flux instance started; {}", queue_fate(keeps.archive))
        };
        let counted = (last_restart.as_ref())
            .map(|j| restart_jobs::summary(j, keeps.archive.is_some() && !same_pod))
            .unwrap_or_default();
        Restart {
            reason: what.0,
            message: format!("{}: {fate}; {counted}", what.1),
        }
    });
    let now = InstanceStatus {
        lead_pod: seen.pod.clone(),
        lead_container_restarts: seen.restarts,
        restarts: before.restarts + added,
        last_restart,
    };
    (Some(now), restart)
}

/// What a restart in the same pod means for the jobs of an instance that keeps its state.
fn kept_in_pod() -> String {
    format!(
        "its job history and queue are as of its last checkpoint, and the jobs that were \
         running ended with an exception of type restart ({:?})",
        crate::flux::RESTART_NOTE
    )
}

/// What a new instance means for the old one's jobs.
fn queue_fate(archive: Option<&str>) -> String {
    match archive {
        Some(path) => format!(
            "it restores spec.archive.path {path} as last saved (status.restore), and what \
             the old instance did after that save is lost"
        ),
        None => "the old instance's queue, running jobs and job history are gone \
                 (spec.archive keeps the queue across a restart)"
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;
    use crate::api::{LEAD_JOB, ROLE_LABEL};

    fn lead_pod(name: &str, created: i64, container: &str, restarts: i32) -> Arc<BrokerPod> {
        let at = jiff::Timestamp::from_second(1_800_000_000 + created).unwrap();
        Arc::new(BrokerPod::from(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([(ROLE_LABEL.to_string(), LEAD_JOB.to_string())].into()),
                creation_timestamp: Some(Time(at)),
                ..Default::default()
            },
            status: Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: container.into(),
                    restart_count: restarts,
                    last_state: (restarts > 0).then(|| ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code: 137,
                            reason: Some("OOMKilled".into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    #[test]
    fn the_newest_lead_pod_and_its_flux_containers_restarts_are_seen() {
        let mc = crate::fixtures::m().container("x", "").build();
        let pods = [
            lead_pod("m-lead-0-0-a", 1, "m", 0),
            lead_pod("m-lead-0-0-b", 2, "m", 2),
        ];
        assert_eq!(
            lead_seen(&mc, &pods),
            Some(LeadSeen {
                pod: "m-lead-0-0-b".into(),
                restarts: 2,
                ended: Some("OOMKilled, exit code 137".into()),
                counted: None,
            })
        );
        // Another container's restarts are not the instance's.
        let other = [lead_pod("m-lead-0-0-a", 1, "sidecar", 3)];
        assert_eq!(lead_seen(&mc, &other).map(|s| s.restarts), Some(0));
        assert_eq!(lead_seen(&mc, &[]), None);
    }

    fn status(pod: &str, container_restarts: i32, restarts: i32) -> InstanceStatus {
        InstanceStatus {
            lead_pod: pod.into(),
            lead_container_restarts: container_restarts,
            restarts,
            last_restart: None,
        }
    }

    fn seen(pod: &str, restarts: i32) -> LeadSeen {
        LeadSeen {
            pod: pod.into(),
            restarts,
            ended: (restarts > 0).then(|| "Error, exit code 137".to_string()),
            counted: None,
        }
    }

    /// (case, old, seen, suspended, new status, restart reason)
    type Case = (
        &'static str,
        Option<InstanceStatus>,
        Option<LeadSeen>,
        bool,
        Option<InstanceStatus>,
        Option<&'static str>,
    );

    #[test]
    fn a_restarted_container_or_a_replaced_pod_is_a_new_instance_and_a_suspension_is_not() {
        // (case, old, seen, suspended, new status, restart reason)
        let cases: [Case; 8] = [
            ("no lead pod yet", None, None, false, None, None),
            (
                "the first lead pod",
                None,
                Some(seen("a", 0)),
                false,
                Some(status("a", 0, 0)),
                None,
            ),
            (
                "the same pod, nothing new",
                Some(status("a", 0, 0)),
                Some(seen("a", 0)),
                false,
                Some(status("a", 0, 0)),
                None,
            ),
            (
                "its container restarted",
                Some(status("a", 0, 0)),
                Some(seen("a", 1)),
                false,
                Some(status("a", 1, 1)),
                Some("LeadBrokerRestarted"),
            ),
            (
                "twice between two looks",
                Some(status("a", 1, 1)),
                Some(seen("a", 3)),
                false,
                Some(status("a", 3, 3)),
                Some("LeadBrokerRestarted"),
            ),
            (
                "its pod replaced",
                Some(status("a", 3, 3)),
                Some(seen("b", 0)),
                false,
                Some(status("b", 0, 4)),
                Some("LeadPodReplaced"),
            ),
            (
                "suspended: the pod is forgotten, the count kept",
                Some(status("b", 0, 4)),
                None,
                true,
                Some(status("", 0, 4)),
                None,
            ),
            (
                "resumed: the new lead is the first",
                Some(status("", 0, 4)),
                Some(seen("c", 0)),
                false,
                Some(status("c", 0, 4)),
                None,
            ),
        ];
        for (case, old, now, suspended, want, reason) in cases {
            let (got, restart) = next(
                old.as_ref(),
                now.as_ref(),
                suspended,
                Keeps::default(),
                Evidence::default(),
            );
            let got = got.map(|g| InstanceStatus {
                last_restart: None,
                ..g
            });
            assert_eq!(got, want, "{case}");
            assert_eq!(restart.map(|r| r.reason), reason, "{case}");
        }
    }

    #[test]
    fn the_restart_message_says_what_happened_to_the_queue() {
        let old = status("a", 0, 0);
        let (_, without) = next(
            Some(&old),
            Some(&seen("a", 1)),
            false,
            Keeps::default(),
            Evidence::default(),
        );
        let without = without.unwrap().message;
        assert!(
            without.contains("pod a restarted (Error, exit code 137)"),
            "{without}"
        );
        assert!(
            without.contains("queue, running jobs and job history are gone"),
            "{without}"
        );
        let archive = Keeps {
            archive: Some("/state/f.tar"),
            state_in_pod: true,
        };
        let (_, with) = next(
            Some(&old),
            Some(&seen("b", 0)),
            false,
            archive,
            Evidence::default(),
        );
        let with = with.unwrap().message;
        assert!(with.contains("pod a was replaced by b"), "{with}");
        assert!(
            with.contains("restores spec.archive.path /state/f.tar"),
            "a new pod keeps nothing of the old one's state: {with}"
        );
        let (_, kept) = next(
            Some(&old),
            Some(&seen("a", 1)),
            false,
            archive,
            Evidence::default(),
        );
        let kept = kept.unwrap().message;
        assert!(
            kept.contains("started again from the state it keeps in its pod")
                && kept.contains("as of its last checkpoint"),
            "{kept}"
        );
    }
}
