//! Status from observation: a pure function of the MiniCluster, its JobSet and its pods.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::{
    LEAD_JOB, MiniCluster, MiniClusterStatus, Phase, ROLE_LABEL, RestoreStatus, SaveStatus,
    condition,
};
use crate::jobset::JobSet;
use crate::render;

/// What the status is computed from: the MiniCluster's JobSet, its pods, Kueue's verdict (the
/// part of [`super::plan::Observed`] the status reads).
pub struct Evidence<'a> {
    /// The MiniCluster's JobSet, if it exists.
    pub jobset: Option<&'a JobSet>,
    /// The MiniCluster's pods.
    pub pods: &'a [Arc<Pod>],
    /// Kueue's Workload admission, if the JobSet is queued.
    pub admission: Option<Admission>,
}

/// Kueue's verdict on the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    /// Whether the Workload is admitted.
    pub admitted: bool,
    /// The reason of the Workload's Admitted (or QuotaReserved) condition.
    pub reason: String,
    /// Its message.
    pub message: String,
    /// When Kueue admitted it (the Workload's Admitted condition).
    pub admitted_at: Option<Timestamp>,
}

/// Facts derived from the pods.
#[derive(Debug, Default, PartialEq)]
pub struct PodFacts {
    /// Pods whose Ready condition is True (and are not terminating).
    pub ready: i32,
    /// Pods not yet finished (not Succeeded or Failed).
    pub live: i32,
    /// Live pods being deleted (their brokers are leaving: a shrink, an eviction).
    pub stopping: i32,
    /// When the lead pod became Ready.
    pub lead_ready_at: Option<Timestamp>,
    /// When the last of the ready pods became Ready (valid when `ready >= size`).
    pub all_ready_at: Option<Timestamp>,
    /// Earliest pod creation.
    pub first_pod_at: Option<Timestamp>,
}

/// Count ready and live pods and find the readiness timestamps.
pub fn pod_facts(pods: &[Arc<Pod>]) -> PodFacts {
    let mut facts = PodFacts::default();
    for pod in pods {
        let terminating = pod.metadata.deletion_timestamp.is_some();
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
        // A terminating pod still counts: teardown ends when the pods are gone.
        if !matches!(phase, "Succeeded" | "Failed") {
            facts.live += 1;
            if terminating {
                facts.stopping += 1;
            }
        }
        if let Some(created) = &pod.metadata.creation_timestamp {
            facts.first_pod_at = Some(facts.first_pod_at.map_or(created.0, |t| t.min(created.0)));
        }
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready" && c.status == "True"));
        if let Some(ready) = ready
            && !terminating
            && phase == "Running"
        {
            facts.ready += 1;
            let at = ready.last_transition_time.as_ref().map(|t| t.0);
            if let Some(at) = at {
                facts.all_ready_at = Some(facts.all_ready_at.map_or(at, |t| t.max(at)));
                if is_lead(pod) {
                    facts.lead_ready_at = Some(at);
                }
            }
        }
    }
    facts
}

/// Whether the pod is a lead broker's (its role label).
pub fn is_lead(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ROLE_LABEL))
        .is_some_and(|r| r == LEAD_JOB)
}

/// The newest lead pod: the one whose reports and restarts are the instance's now.
pub fn newest_lead(pods: &[Arc<Pod>]) -> Option<&Arc<Pod>> {
    pods.iter()
        .filter(|p| is_lead(p))
        .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The termination message a container left: its current run's, or else its last one's.
fn termination_message(c: &ContainerStatus) -> Option<String> {
    [c.state.as_ref(), c.last_state.as_ref()]
        .into_iter()
        .flatten()
        .find_map(|s| s.terminated.as_ref()?.message.clone())
}

/// What the newest lead pod restored: the report its archive init container
/// ([`flux::ARCHIVE_INIT`](crate::flux::ARCHIVE_INIT)) left as its termination message (the
/// current run's, or the last failed one's while the kubelet retries it). `None` when no lead
/// pod has reported yet, or it found no archive.
pub fn lead_restore(pods: &[Arc<Pod>]) -> Option<RestoreStatus> {
    let lead = newest_lead(pods)?;
    let init = lead
        .status
        .as_ref()?
        .init_container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == crate::flux::ARCHIVE_INIT)?;
    let message = termination_message(init)?;
    let report = crate::flux::ArchiveReport::parse(&message).filter(|r| r.found)?;
    Some(RestoreStatus {
        archive: report.archive,
        pod: lead.metadata.name.clone().unwrap_or_default(),
        pending_jobs: report.pending,
        unfit_jobs: report.unfit,
        canceled_jobs: report.canceled,
        ended_jobs: report.ended,
        error: report.error.unwrap_or_default(),
    })
}

/// What the newest lead pod's save reported: the termination message its Flux container
/// (`container`) left when it ended (this run's, or the last one's after a restart).
pub fn lead_save(pods: &[Arc<Pod>], container: &str) -> Option<SaveStatus> {
    let lead = newest_lead(pods)?;
    let status = lead
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == container)?;
    let message = termination_message(status)?;
    let report = crate::flux::SaveReport::parse(&message)?;
    let manifest = report.manifest.unwrap_or_default();
    Some(SaveStatus {
        archive: report.archive,
        pod: lead.metadata.name.clone().unwrap_or_default(),
        saved: report.saved,
        jobs: manifest.jobs,
        bytes: manifest.bytes,
        sha256: manifest.sha256,
        error: report.error.unwrap_or_default(),
    })
}

/// The new status, keeping first-seen timestamps of `old` (the status the last reconcile
/// wrote; `mc.status` is not read).
// Long: one status, field by field and condition by condition, reads best in one place.
pub fn compute(
    mc: &MiniCluster,
    old: &MiniClusterStatus,
    observed: &Evidence<'_>,
    now: Timestamp,
) -> MiniClusterStatus {
    let old = old.clone();
    let generation = mc.metadata.generation;
    let size = mc.spec.size;
    let facts = pod_facts(observed.pods);
    let js = observed.jobset;
    if js.is_none() && old.completion_time.is_some() {
        // Finished, and its JobSet is gone (ttlSecondsAfterFinished): it stays finished.
        let mut status = old;
        if status.teardown_time.is_none() && facts.live == 0 {
            status.teardown_time = Some(Time(now));
        }
        status.ready_brokers = 0;
        return status;
    }

    let completed = js
        .and_then(|j| j.condition("Completed"))
        .filter(|c| c.status == "True");
    let failed = js
        .and_then(|j| j.condition("Failed"))
        .filter(|c| c.status == "True");
    let suspended = js.is_some_and(|j| j.spec.suspend == Some(true));
    let workers = js
        .and_then(|j| {
            j.spec
                .replicated_jobs
                .iter()
                .find(|r| r.name == crate::api::WORKERS_JOB)
        })
        .and_then(|r| r.template.spec.as_ref()?.parallelism)
        .unwrap_or(0);
    let current_size = if js.is_some() { 1 + workers.max(0) } else { 0 };
    let all_ready = facts.ready >= size && !suspended;

    let phase = if let Some(_c) = completed {
        Phase::Succeeded
    } else if failed.is_some() {
        Phase::Failed
    } else if suspended {
        Phase::Suspended
    } else if all_ready || old.phase == Some(Phase::Running) {
        // A running cluster stays Running while brokers come and go (a resize, a follower
        // restarting, the lead finishing before JobSet marks it Completed): the Ready and
        // Resizing conditions say what is going on. Starting is the first bring-up only.
        Phase::Running
    } else if facts.live > 0 {
        Phase::Starting
    } else {
        Phase::Pending
    };

    let mut status = MiniClusterStatus {
        observed_generation: generation,
        phase: Some(phase),
        size: current_size,
        selector: render::pod_selector(mc),
        maximum_size: mc.max_size(),
        ready_brokers: if phase.is_finished() { 0 } else { facts.ready },
        job_set: js.and_then(|j| j.metadata.name.clone()).unwrap_or_default(),
        curve_secret: old.curve_secret.clone(),
        lead_broker: crate::flux::config::lead_hostname(mc),
        start_time: old
            .start_time
            .clone()
            .or_else(|| facts.first_pod_at.map(Time)),
        lead_ready_time: old
            .lead_ready_time
            .clone()
            .or_else(|| facts.lead_ready_at.map(Time)),
        ready_time: old.ready_time.clone().or_else(|| {
            all_ready
                .then(|| facts.all_ready_at.unwrap_or(now))
                .map(Time)
        }),
        completion_time: old
            .completion_time
            .clone()
            .or_else(|| completed.or(failed).map(|c| c.last_transition_time.clone())),
        teardown_time: old.teardown_time.clone(),
        restore: lead_restore(observed.pods).or_else(|| old.restore.clone()),
        last_save: lead_save(
            observed.pods,
            crate::model::containers::flux_container_name(mc),
        )
        .or_else(|| old.last_save.clone()),
        instance: old.instance.clone(),
        conditions: old.conditions.clone(),
    };
    if phase.is_finished() && status.teardown_time.is_none() && facts.live == 0 {
        status.teardown_time = Some(Time(now));
    }

    let set =
        |status: &mut MiniClusterStatus, type_: &str, on: bool, reason: &str, message: String| {
            set_condition(
                &mut status.conditions,
                type_,
                on,
                reason,
                &message,
                generation,
                now,
            );
        };
    set(
        &mut status,
        condition::READY,
        all_ready && !phase.is_finished(),
        if all_ready {
            "BrokersReady"
        } else {
            "BrokersNotReady"
        },
        format!("{} of {size} broker pods ready", facts.ready),
    );
    set(
        &mut status,
        condition::SUSPENDED,
        suspended,
        if suspended {
            "JobSetSuspended"
        } else {
            "JobSetRunning"
        },
        if suspended {
            match &observed.admission {
                Some(a) if !a.admitted => format!("waiting for Kueue admission: {}", a.message),
                _ if mc.spec.suspend => "spec.suspend is true".to_string(),
                _ => "the JobSet is suspended".to_string(),
            }
        } else {
            "the JobSet may run pods".to_string()
        },
    );
    if let Some(a) = &observed.admission {
        set(
            &mut status,
            condition::ADMITTED,
            a.admitted,
            &a.reason,
            a.message.clone(),
        );
    }
    let resizing = js.is_some()
        && !phase.is_finished()
        && !suspended
        && facts.live != size
        && old.ready_time.is_some();
    let draining = resizing && facts.stopping > 0;
    set(
        &mut status,
        condition::RESIZING,
        resizing,
        if draining {
            "BrokersDraining"
        } else if resizing {
            "BrokersChanging"
        } else {
            "Stable"
        },
        if draining {
            format!(
                "{} broker pods for size {size}; {} stopping: their ranks are drained and \
                 their jobs have up to {}s to finish (spec.drainGracePeriodSeconds)",
                facts.live,
                facts.stopping,
                mc.drain_grace_seconds()
            )
        } else if phase.is_finished() {
            // Its pods stop as it ends: a count of them would read like a resize under way.
            format!("the MiniCluster has finished ({})", phase.as_str())
        } else {
            format!("{} broker pods for size {size}", facts.live)
        },
    );
    if let Some(c) = completed {
        set(
            &mut status,
            condition::SUCCEEDED,
            true,
            "LeadBrokerCompleted",
            c.message.clone(),
        );
    }
    if let Some(c) = failed {
        set(
            &mut status,
            condition::FAILED,
            true,
            &c.reason,
            c.message.clone(),
        );
    }
    status
}

/// Set (or update) a condition, keeping its transition time when the status is unchanged.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    on: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    let status = if on { "True" } else { "False" };
    let reason = if reason.is_empty() { "Unknown" } else { reason };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = Time(now);
            }
            c.status = status.to_string();
            c.reason = reason.to_string();
            c.message = message.to_string();
            c.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            observed_generation: generation,
            last_transition_time: Time(now),
        }),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::jobset::JobSetStatus;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn mc(size: i32) -> MiniCluster {
        let mut mc = crate::fixtures::m()
            .namespace("n")
            .generation(3)
            .container("x", "")
            .size(size)
            .build();
        mc.metadata.creation_timestamp = Some(Time(ts(0)));
        mc
    }

    fn pod(role: &str, phase: &str, ready_at: Option<i64>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                labels: Some([(ROLE_LABEL.to_string(), role.to_string())].into()),
                creation_timestamp: Some(Time(ts(1))),
                ..Default::default()
            },
            status: Some(PodStatus {
                phase: Some(phase.to_string()),
                conditions: ready_at.map(|t| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(ts(t))),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn jobset(workers: i32, conditions: Vec<Condition>) -> JobSet {
        let mut js = crate::render::jobset(&crate::fixtures::cluster(&mc(workers + 1)), "m-flux-0");
        js.metadata.name = Some("m".into());
        js.status = Some(JobSetStatus {
            conditions,
            ..Default::default()
        });
        js
    }

    fn cond(type_: &str, at: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: "True".into(),
            reason: type_.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(ts(at)),
        }
    }

    /// Status of `mc` with this JobSet and these pods, outside Kueue.
    fn observe(mc: &MiniCluster, js: &JobSet, pods: &[Pod], now: Timestamp) -> MiniClusterStatus {
        compute(
            mc,
            &mc.status.clone().unwrap_or_default(),
            &Evidence {
                jobset: Some(js),
                pods: &pods.iter().cloned().map(Arc::new).collect::<Vec<_>>(),
                admission: None,
            },
            now,
        )
    }

    fn find<'a>(s: &'a MiniClusterStatus, t: &str) -> &'a Condition {
        s.conditions.iter().find(|c| c.type_ == t).unwrap()
    }

    #[test]
    fn all_brokers_ready_means_running_with_api_timestamps() {
        let js = jobset(2, vec![]);
        let pods = [
            pod("lead", "Running", Some(5)),
            pod("workers", "Running", Some(7)),
            pod("workers", "Running", Some(6)),
        ];
        let s = observe(&mc(3), &js, &pods, ts(100));
        assert_eq!(s.phase, Some(Phase::Running));
        assert_eq!((s.ready_brokers, s.size, s.maximum_size), (3, 3, 3));
        assert_eq!(
            s.lead_broker,
            format!("{}-lead-0-0", mc(3).metadata.name.unwrap())
        );
        assert_eq!(
            s.ready_time.as_ref().map(|t| t.0),
            Some(ts(7)),
            "last pod's readiness, not now"
        );
        assert_eq!(s.lead_ready_time.as_ref().map(|t| t.0), Some(ts(5)));
        assert_eq!(s.observed_generation, Some(3));
        assert_eq!(find(&s, "Ready").status, "True");
        assert_eq!(find(&s, "Ready").observed_generation, Some(3));
        assert_eq!(s.selector, "flux-framework.org/minicluster=m");
    }

    #[test]
    fn a_running_cluster_stays_running_while_brokers_change() {
        let js = jobset(3, vec![]);
        let mut running = mc(4);
        running.status = Some(MiniClusterStatus {
            phase: Some(Phase::Running),
            ready_time: Some(Time(ts(5))),
            ..Default::default()
        });
        let pods = [
            pod("lead", "Running", Some(5)),
            pod("workers", "Running", Some(5)),
            pod("workers", "Pending", None),
            pod("workers", "Pending", None),
        ];
        let s = observe(&running, &js, &pods, ts(9));
        assert_eq!(s.phase, Some(Phase::Running));
        assert_eq!(find(&s, "Ready").status, "False");
        assert_eq!(
            find(&s, "Resizing").status,
            "False",
            "4 live pods for size 4"
        );
    }

    #[test]
    fn a_shrink_in_progress_says_the_leaving_brokers_drain_with_their_grace() {
        let js = jobset(1, vec![]);
        let mut shrinking = mc(2);
        shrinking.spec.drain_grace_period_seconds = Some(90);
        shrinking.status = Some(MiniClusterStatus {
            phase: Some(Phase::Running),
            ready_time: Some(Time(ts(5))),
            ..Default::default()
        });
        let mut leaving = pod("workers", "Running", Some(5));
        leaving.metadata.deletion_timestamp = Some(Time(ts(8)));
        let pods = [
            pod("lead", "Running", Some(5)),
            pod("workers", "Running", Some(5)),
            leaving,
        ];
        let s = observe(&shrinking, &js, &pods, ts(9));
        assert_eq!(s.phase, Some(Phase::Running));
        let resizing = find(&s, "Resizing");
        assert_eq!(
            (resizing.status.as_str(), resizing.reason.as_str()),
            ("True", "BrokersDraining")
        );
        assert!(
            resizing.message.contains("1 stopping") && resizing.message.contains("90s"),
            "{}",
            resizing.message
        );
        // Once it is gone: stable again.
        let s = observe(&shrinking, &js, &pods[..2], ts(30));
        assert_eq!(find(&s, "Resizing").reason, "Stable");
        // A grow (pods not yet there) is not a drain.
        let mut growing = shrinking.clone();
        growing.spec.size = 3;
        let s = observe(&growing, &js, &pods[..2], ts(30));
        assert_eq!(find(&s, "Resizing").reason, "BrokersChanging");
    }

    #[test]
    fn some_pods_ready_is_starting() {
        let js = jobset(2, vec![]);
        let pods = [
            pod("lead", "Running", Some(5)),
            pod("workers", "Pending", None),
        ];
        let s = observe(&mc(3), &js, &pods, ts(100));
        assert_eq!(s.phase, Some(Phase::Starting));
        assert_eq!(find(&s, "Ready").status, "False");
        assert!(s.ready_time.is_none());
    }

    #[test]
    fn completed_jobset_is_succeeded_then_torn_down() {
        let js = jobset(1, vec![cond("Completed", 40)]);
        let pods = [
            pod("lead", "Succeeded", None),
            pod("workers", "Running", Some(3)),
        ];
        let s = observe(&mc(2), &js, &pods, ts(50));
        assert_eq!(s.phase, Some(Phase::Succeeded));
        assert_eq!(s.completion_time.as_ref().map(|t| t.0), Some(ts(40)));
        assert!(s.teardown_time.is_none(), "a follower still runs");
        assert_eq!(find(&s, "Succeeded").status, "True");

        let mut done = mc(2);
        done.status = Some(s);
        let pods = [pod("lead", "Succeeded", None)];
        let s = observe(&done, &js, &pods, ts(55));
        assert_eq!(s.teardown_time.as_ref().map(|t| t.0), Some(ts(55)));
        // Its pods are gone, and that is no resize: Resizing says it has finished.
        let resizing = find(&s, "Resizing");
        assert_eq!(
            (resizing.status.as_str(), resizing.reason.as_str()),
            ("False", "Stable")
        );
        assert_eq!(resizing.message, "the MiniCluster has finished (Succeeded)");
    }

    #[test]
    fn failed_jobset_is_failed() {
        let js = jobset(1, vec![cond("Failed", 9)]);
        let s = compute(
            &mc(2),
            &MiniClusterStatus::default(),
            &Evidence {
                jobset: Some(&js),
                pods: &[],
                admission: None,
            },
            ts(10),
        );
        assert_eq!(s.phase, Some(Phase::Failed));
        assert_eq!(find(&s, "Failed").status, "True");
    }

    #[test]
    fn queued_cluster_says_why_it_waits() {
        let mut js = jobset(1, vec![]);
        js.spec.suspend = Some(true);
        let admission = Admission {
            admitted: false,
            reason: "Pending".into(),
            message: "insufficient quota for cpu".into(),
            admitted_at: None,
        };
        let s = compute(
            &mc(2),
            &MiniClusterStatus::default(),
            &Evidence {
                jobset: Some(&js),
                pods: &[],
                admission: Some(admission),
            },
            ts(10),
        );
        assert_eq!(s.phase, Some(Phase::Suspended));
        assert!(find(&s, "Suspended").message.contains("insufficient quota"));
        assert_eq!(find(&s, "Admitted").status, "False");
    }

    #[test]
    fn transition_time_only_moves_on_change() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, "Ready", false, "A", "", Some(1), ts(1));
        set_condition(&mut conditions, "Ready", false, "B", "m", Some(2), ts(2));
        assert_eq!(conditions[0].last_transition_time.0, ts(1));
        set_condition(&mut conditions, "Ready", true, "C", "", Some(2), ts(3));
        assert_eq!(conditions[0].last_transition_time.0, ts(3));
        assert_eq!(conditions.len(), 1);
    }

    /// A lead pod whose archive init container ended with `message` (exit `code`), created
    /// at `created`; `retrying` puts it in the last state (the kubelet runs it again).
    fn lead_with_archive_report(
        name: &str,
        created: i64,
        code: i32,
        message: &str,
        retrying: bool,
    ) -> Pod {
        use k8s_openapi::api::core::v1::{
            ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
        };
        let mut p = pod("lead", "Pending", None);
        p.metadata.name = Some(name.into());
        p.metadata.creation_timestamp = Some(Time(ts(created)));
        let ended = ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                message: Some(message.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let again = ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..Default::default()
        };
        let (state, last_state) = if retrying {
            (again, Some(ended))
        } else {
            (ended, None)
        };
        p.status.as_mut().unwrap().init_container_statuses = Some(vec![
            ContainerStatus {
                name: "flux-view".into(),
                ..Default::default()
            },
            ContainerStatus {
                name: crate::flux::ARCHIVE_INIT.into(),
                state: Some(state),
                last_state,
                ..Default::default()
            },
        ]);
        p
    }

    #[test]
    fn restore_status_comes_from_the_newest_lead_pods_archive_report() {
        let js = jobset(1, vec![]);
        let report = |pending: i32| {
            format!(
                r#"{{"archive": "/state/flux.tgz", "found": true, "pending": {pending}, "canceled": 2, "ended": 3}}"#
            )
        };
        // (pods, expected restore), with no restore in the old status.
        let cases: Vec<(Vec<Pod>, Option<RestoreStatus>)> = vec![
            (vec![pod("lead", "Running", Some(5))], None),
            (
                vec![lead_with_archive_report(
                    "m-lead-0-0-a",
                    1,
                    0,
                    r#"{"archive": "/state/flux.tgz", "found": false}"#,
                    false,
                )],
                None,
            ),
            (
                vec![lead_with_archive_report(
                    "m-lead-0-0-a",
                    1,
                    0,
                    "not json",
                    false,
                )],
                None,
            ),
            (
                vec![
                    lead_with_archive_report("m-lead-0-0-old", 1, 0, &report(9), false),
                    lead_with_archive_report("m-lead-0-0-new", 2, 0, &report(7), false),
                    pod("worker", "Running", Some(5)),
                ],
                Some(RestoreStatus {
                    unfit_jobs: Vec::new(),
                    archive: "/state/flux.tgz".into(),
                    pod: "m-lead-0-0-new".into(),
                    pending_jobs: 7,
                    canceled_jobs: 2,
                    ended_jobs: 3,
                    error: String::new(),
                }),
            ),
            (
                vec![lead_with_archive_report(
                    "m-lead-0-0-a",
                    1,
                    1,
                    r#"{"archive": "/state/flux.tgz", "found": true, "error": "not a gzip file"}"#,
                    true,
                )],
                Some(RestoreStatus {
                    archive: "/state/flux.tgz".into(),
                    pod: "m-lead-0-0-a".into(),
                    error: "not a gzip file".into(),
                    ..Default::default()
                }),
            ),
        ];
        for (i, (pods, want)) in cases.into_iter().enumerate() {
            let s = observe(&mc(2), &js, &pods, ts(10));
            assert_eq!(s.restore, want, "case {i}");
        }
        // Once reported, it stays while the lead pod is gone or has not reported again.
        let mut old = mc(2);
        let pods = [lead_with_archive_report(
            "m-lead-0-0-a",
            1,
            0,
            &report(4),
            false,
        )];
        old.status = Some(observe(&old, &js, &pods, ts(10)));
        let s = observe(&old, &js, &[pod("lead", "Running", Some(5))], ts(20));
        assert_eq!(s.restore.unwrap().pending_jobs, 4);
    }
}
