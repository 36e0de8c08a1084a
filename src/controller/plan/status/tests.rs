//! The status builder's tests: the whole status from what the deciders found, and the
//! status read from the JobSet, the pods and Kueue, case by case.

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::super::super::events;
use super::super::tests::{Mc, Seen, now};
use super::conditions::{Conditions, restart_over, restored};
use super::*;
use crate::api::{Phase, ROLE_LABEL, RestoreStatus, condition, reason};
use crate::controller::observe::admission::Admission;
use crate::controller::observe::jobset::ObservedJobSet;
use crate::controller::observe::pods::BrokerPod;
use crate::jobset::{JobSet, JobSetStatus};

fn is_true(status: &MiniClusterStatus, type_: &str) -> Option<bool> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status == "True")
}

#[test]
fn the_status_says_what_the_deciders_found_and_clears_what_was_resolved() {
    let earlier = Time(now() - jiff::SignedDuration::from_hours(1));
    let mc = Mc::new(2).running().status(|s| {
        s.start_time = Some(earlier.clone());
        for type_ in [condition::BLOCKED, condition::DEGRADED] {
            Conditions::of(&mut s.conditions, None, now()).set(type_, true, "X", "x");
        }
    });
    let seen = Seen::everything(&mc, 2);
    let old = seen.mc.status.clone().unwrap_or_default();
    let spec = seen.resolve();
    let input = seen.inputs(&spec, &seen.observed, &old);
    let js = seen.observed.jobset.as_deref();
    // (what it proves, the decided, Degraded, Restarted, the phase)
    let cases = [
        (
            "all well: what held it before is resolved",
            Decided {
                jobset: js,
                curve_secret: "m-curve".into(),
                ..Decided::default()
            },
            Some(false),
            None,
            Some(Phase::Running),
        ),
        (
            "something lost: Degraded",
            Decided {
                jobset: js,
                degraded: vec!["lost".into()],
                ..Decided::default()
            },
            Some(true),
            None,
            Some(Phase::Running),
        ),
        (
            "the JobSet made again: Restarted, the lifecycle starts again",
            Decided {
                jobset: js,
                restarted: Some("again".into()),
                ..Decided::default()
            },
            Some(false),
            Some(true),
            Some(Phase::Running),
        ),
    ];
    for (what, decided, degraded, restarted, phase) in cases {
        let restarting = decided.restarted.is_some();
        let new = status(&input, decided);
        assert_eq!(is_true(&new, condition::DEGRADED), degraded, "{what}");
        assert_eq!(is_true(&new, condition::RESTARTED), restarted, "{what}");
        assert_eq!(is_true(&new, condition::BLOCKED), Some(false), "{what}");
        assert_eq!(
            is_true(&new, condition::INVALID_SPEC),
            Some(false),
            "{what}"
        );
        assert_eq!(new.phase, phase, "{what}");
        // Restarted: taken again from the pods seen now, not kept from the old instance.
        assert_eq!(
            new.start_time == Some(earlier.clone()),
            !restarting,
            "{what}"
        );
    }
}

#[test]
fn a_lead_container_restart_seen_after_its_new_instance_is_up_is_counted_and_told() {
    let mc = Mc::new(2).running().status(|s| {
        s.instance = Some(crate::api::InstanceStatus {
            lead_pod: "m-0".into(),
            ..Default::default()
        });
    });
    let mut seen = Seen::everything(&mc, 2);
    let container = match &seen.mc.spec.containers[0].name {
        n if n.is_empty() => seen.mc.metadata.name.clone().unwrap_or_default(),
        n => n.clone(),
    };
    let mut lead = (*seen.observed.pods[0]).clone();
    lead.status.as_mut().unwrap().container_statuses =
        Some(vec![k8s_openapi::api::core::v1::ContainerStatus {
            name: container,
            restart_count: 1,
            ..Default::default()
        }]);
    seen.observed.pods[0] = std::sync::Arc::new(lead);
    let old = seen.mc.status.clone().unwrap_or_default();
    let spec = seen.resolve();
    let input = seen.inputs(&spec, &seen.observed, &old);
    let new = status(
        &input,
        Decided {
            jobset: seen.observed.jobset.as_deref(),
            ..Decided::default()
        },
    );
    assert_eq!(new.instance.as_ref().map(|i| i.restarts), Some(1));
    // Every broker is ready again: the condition is over, and keeps the account.
    let restarted = new
        .conditions
        .iter()
        .find(|c| c.type_ == condition::RESTARTED)
        .expect("a Restarted condition");
    assert_eq!(
        (restarted.status.as_str(), restarted.reason.as_str()),
        ("False", "NewInstanceUp")
    );
    assert!(
        restarted
            .message
            .contains("lead broker's pod m-0 restarted")
            && restarted.message.contains("job history are gone")
            && restarted.message.ends_with("the new instance is up"),
        "{}",
        restarted.message
    );
    let notes = events::transitions(&seen.mc, &old, &new);
    let warned: Vec<_> = notes
        .iter()
        .filter(|n| n.warning)
        .map(|n| n.reason)
        .collect();
    assert_eq!(warned, ["InstanceRestarted"], "{notes:?}");
    // Seen again: nothing new.
    let input = seen.inputs(&spec, &seen.observed, &new);
    let again = status(
        &input,
        Decided {
            jobset: seen.observed.jobset.as_deref(),
            ..Decided::default()
        },
    );
    assert_eq!(again.instance, new.instance);
    assert!(
        events::transitions(&seen.mc, &new, &again)
            .iter()
            .all(|n| !n.warning)
    );
}

#[test]
fn restarted_clears_once_the_new_instance_is_up_or_finished() {
    let with = |phase: Phase, conditions: &[(&str, bool)]| {
        let mut s = MiniClusterStatus {
            phase: Some(phase),
            ..MiniClusterStatus::default()
        };
        for (type_, on) in conditions {
            Conditions::of(&mut s.conditions, None, now()).set(type_, *on, "X", "x");
        }
        s
    };
    let restarted = (condition::RESTARTED, true);
    // (what it proves, the new status before the check, the reason it clears with)
    let cases = [
        (
            "every broker of the new instance ready",
            with(Phase::Running, &[restarted, (condition::READY, true)]),
            Some("NewInstanceUp"),
        ),
        (
            "the new instance still coming up: still Restarted",
            with(Phase::Starting, &[restarted, (condition::READY, false)]),
            None,
        ),
        (
            "the new instance finished before all were ready",
            with(Phase::Succeeded, &[restarted, (condition::READY, false)]),
            Some("NewInstanceFinished"),
        ),
        (
            "never restarted: nothing to clear",
            with(Phase::Running, &[(condition::READY, true)]),
            None,
        ),
        (
            "cleared before: nothing more",
            with(
                Phase::Running,
                &[(condition::RESTARTED, false), (condition::READY, true)],
            ),
            None,
        ),
    ];
    for (what, new, reason) in cases {
        assert_eq!(restart_over(&new).map(|r| r.0), reason, "{what}");
    }
}

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
    observed(
        mc,
        &mc.status.clone().unwrap_or_default(),
        Some(&ObservedJobSet::from(js)),
        &pods
            .iter()
            .cloned()
            .map(|p| Arc::new(BrokerPod::from(p)))
            .collect::<Vec<_>>(),
        None,
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
    let s = observed(
        &mc(2),
        &MiniClusterStatus::default(),
        Some(&ObservedJobSet::from(&js)),
        &[],
        None,
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
    let s = observed(
        &mc(2),
        &MiniClusterStatus::default(),
        Some(&ObservedJobSet::from(&js)),
        &[],
        Some(&admission),
        ts(10),
    );
    assert_eq!(s.phase, Some(Phase::Suspended));
    assert!(find(&s, "Suspended").message.contains("insufficient quota"));
    assert_eq!(find(&s, "Admitted").status, "False");
}

#[test]
fn transition_time_only_moves_on_change() {
    let mut conditions = Vec::new();
    Conditions::of(&mut conditions, Some(1), ts(1)).set("Ready", false, "A", "");
    Conditions::of(&mut conditions, Some(2), ts(2)).set("Ready", false, "B", "m");
    assert_eq!(conditions[0].last_transition_time.0, ts(1));
    Conditions::of(&mut conditions, Some(2), ts(3)).set("Ready", true, "C", "");
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
            name: crate::model::containers::ARCHIVE_INIT.into(),
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

/// `Restored` is set once a lead pod reported the archive it found: true when it read it,
/// false when it refused it, with the pod's reason (a bound of `spec.archive.restoreLimits`
/// by its path); without a report there is no such condition.
#[test]
fn restored_says_whether_the_archive_was_read_or_refused_and_names_the_bound() {
    let read = RestoreStatus {
        archive: "/state/flux.tgz".into(),
        pod: "m-lead-0-0-a".into(),
        pending_jobs: 7,
        canceled_jobs: 2,
        ended_jobs: 3,
        ..Default::default()
    };
    let refused = RestoreStatus {
        error: "over spec.archive.restoreLimits.members (10): the archive holds more members"
            .into(),
        ..read.clone()
    };
    // (what it proves, the report, the condition: status, reason, a part of its message)
    let cases = [
        ("no report, no condition", None, None),
        (
            "read: true, with what the broker restores",
            Some(&read),
            Some(("True", reason::ARCHIVE_READ, "7 pending jobs")),
        ),
        (
            "refused: false, naming the bound by its field path",
            Some(&refused),
            Some((
                "False",
                reason::ARCHIVE_REFUSED,
                "refused archive /state/flux.tgz: over spec.archive.restoreLimits.members (10)",
            )),
        ),
    ];
    for (what, report, want) in cases {
        let mut list = Vec::new();
        restored(&mut Conditions::of(&mut list, Some(3), ts(1)), report);
        let got = list.iter().find(|c| c.type_ == condition::RESTORED);
        match (got, want) {
            (None, None) => {}
            (Some(c), Some((status, why, part))) => {
                assert_eq!(
                    (c.status.as_str(), c.reason.as_str()),
                    (status, why),
                    "{what}"
                );
                assert!(c.message.contains(part), "{what}: {}", c.message);
                assert_eq!(c.observed_generation, Some(3), "{what}");
            }
            (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
        }
    }
}

/// The lead pod `m-0` of `seen` with its Flux container ended: `exit_code`, and `message` as
/// its termination message (the kubelet's log tail, or a save's report).
fn lead_ended(seen: &mut Seen, exit_code: i32, message: &str) {
    let container = crate::model::containers::flux_container_name(&seen.mc).to_string();
    let mut lead = (*seen.observed.pods[0]).clone();
    let status = lead.status.as_mut().unwrap();
    status.phase = Some(
        if exit_code == 0 {
            "Succeeded"
        } else {
            "Failed"
        }
        .into(),
    );
    status.container_statuses = Some(vec![k8s_openapi::api::core::v1::ContainerStatus {
        name: container,
        state: Some(k8s_openapi::api::core::v1::ContainerState {
            terminated: Some(k8s_openapi::api::core::v1::ContainerStateTerminated {
                exit_code,
                // As the kubelet says it: 137 here is the memory limit's kill.
                reason: Some(String::from(match exit_code {
                    0 => "Completed",
                    137 => "OOMKilled",
                    _ => "Error",
                })),
                message: Some(message.to_string()).filter(|m| !m.is_empty()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    seen.observed.pods[0] = std::sync::Arc::new(lead);
}

fn jobset_failed(js: &mut ObservedJobSet) {
    js.status = Some(JobSetStatus {
        conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: "Failed".into(),
            status: "True".into(),
            reason: "FailedJobs".into(),
            message: "jobset failed due to one or more job failures".into(),
            observed_generation: None,
            last_transition_time: Time(now()),
        }],
        ..Default::default()
    });
}

/// (what, the JobSet's end, the lead's exit code and message, the result's exit code and
/// output, the `Failed` condition's reason)
type EndCase<'a> = (
    &'a str,
    fn(&mut ObservedJobSet),
    i32,
    &'a str,
    Option<(i32, &'a str)>,
    Option<&'a str>,
);

/// A cluster's end says how its job ended: a failed job's exit code, where its output is and
/// its last lines, in `status.result`, the `Failed` condition (`JobFailed`) and the `Failed`
/// Event (its note within the API's 1024 bytes); a success its exit code 0; a lead that
/// ended before its job (exit 75, retried) is no result, and JobSet's own reason stays.
#[test]
fn a_finished_cluster_tells_its_job_s_exit_code_and_output_and_a_retry_is_no_result() {
    let long_output = format!("{}\nError: input line 7 is wrong\n", "x".repeat(3000));
    let cases: [EndCase<'_>; 6] = [
        (
            "a job killed at its memory limit",
            jobset_failed,
            137,
            "allocating\n",
            Some((137, "allocating\n")),
            Some("JobFailed"),
        ),
        (
            "a failed job",
            jobset_failed,
            3,
            "step 1\nError: no such file\n",
            Some((3, "step 1\nError: no such file\n")),
            Some("JobFailed"),
        ),
        (
            "a long output",
            jobset_failed,
            1,
            &long_output,
            Some((1, &long_output)),
            Some("JobFailed"),
        ),
        (
            "a failed job whose save reported",
            jobset_failed,
            2,
            r#"{"archive": "/a/x.tar", "saved": true, "manifest": {"sha256": "s", "bytes": 1, "jobs": 1}}"#,
            Some((2, "")),
            Some("JobFailed"),
        ),
        (
            "a job that succeeded",
            super::super::tests::completed,
            0,
            "",
            Some((0, "")),
            None,
        ),
        (
            "a retry, then the JobSet failed",
            jobset_failed,
            75,
            "",
            None,
            Some("FailedJobs"),
        ),
    ];
    for (what, end, code, message, want, reason) in cases {
        let mc = Mc::new(2).running();
        let mut seen = Seen::everything(&mc, 2).jobset(end);
        lead_ended(&mut seen, code, message);
        let old = seen.mc.status.clone().unwrap_or_default();
        let new = status_after(&seen, &old);
        let got = new
            .result
            .as_ref()
            .map(|r| (r.exit_code, r.output.as_str()));
        assert_eq!(got, want, "{what}");
        if let Some(r) = &new.result {
            assert_eq!(r.pod, "m-0", "{what}");
            assert_eq!(
                r.logs_command(),
                format!("kubectl logs m-0 -c {}", r.container)
            );
        }
        let failed = new.conditions.iter().find(|c| c.type_ == condition::FAILED);
        assert_eq!(failed.map(|c| c.reason.as_str()), reason, "{what}");
        let notes = events::transitions(&seen.mc, &old, &new);
        let end_note = notes
            .iter()
            .find(|n| n.reason == "Failed" || n.reason == "Succeeded")
            .unwrap_or_else(|| panic!("{what}: no end Event in {notes:?}"));
        assert!(
            end_note.message.len() <= 1024,
            "{what}: {}",
            end_note.message.len()
        );
        if reason == Some("JobFailed") {
            let f = failed.unwrap();
            assert!(
                f.message.contains(&format!("exited with code {code}")),
                "{what}: {}",
                f.message
            );
            assert!(
                f.message.contains("kubectl logs m-0 -c "),
                "{what}: {}",
                f.message
            );
            assert_eq!(
                f.message.contains("code 137 (OOMKilled)"),
                code == 137,
                "{what}: {}",
                f.message
            );
            assert!(
                end_note.message.contains(&f.message),
                "{what}: {}",
                end_note.message
            );
        }
        let last_line = want.and_then(|(_, out)| out.trim_end().lines().last());
        if let Some(line) = last_line.filter(|_| reason == Some("JobFailed")) {
            assert!(
                end_note.message.ends_with(line),
                "{what}: the output's last line ends the Event: {}",
                end_note.message
            );
        }
    }
}

/// Once told, the result stays (the lead pod may go, the JobSet may be deleted by its TTL),
/// and an interactive cluster, which runs no program, has none.
#[test]
fn the_result_is_kept_once_told_and_an_interactive_cluster_has_none() {
    let mc = Mc::new(2).running();
    let mut seen = Seen::everything(&mc, 2).jobset(jobset_failed);
    lead_ended(&mut seen, 3, "boom\n");
    let first = status_after(&seen, &seen.mc.status.clone().unwrap_or_default());
    assert_eq!(first.result.as_ref().map(|r| r.exit_code), Some(3));
    let mut later = Seen::everything(&mc, 2).jobset(jobset_failed);
    later.observed.pods.clear();
    assert_eq!(status_after(&later, &first).result, first.result, "kept");

    let mut interactive = Mc::new(2).running();
    interactive.0.spec.interactive = true;
    let mut seen = Seen::everything(&interactive, 2).jobset(jobset_failed);
    lead_ended(&mut seen, 3, "boom\n");
    let old = seen.mc.status.clone().unwrap_or_default();
    assert_eq!(status_after(&seen, &old).result, None);
}

/// The status built from what `seen` holds, after `old`, with only its JobSet decided.
fn status_after(seen: &Seen, old: &MiniClusterStatus) -> MiniClusterStatus {
    let spec = seen.resolve();
    let input = seen.inputs(&spec, &seen.observed, old);
    let decided = Decided {
        jobset: seen.observed.jobset.as_deref(),
        ..Decided::default()
    };
    status(&input, decided)
}

/// A broker pod the node lifecycle controller marked not ready (its node stopped answering):
/// Ready False, ContainersReady still True.
fn lost_pod(role: &str, index: &str) -> Pod {
    let mut p = pod(role, "Running", Some(5));
    p.metadata.name = Some(format!("m-{role}-0-{index}-x"));
    let conditions = p.status.as_mut().unwrap().conditions.as_mut().unwrap();
    conditions[0].status = "False".into();
    conditions.push(PodCondition {
        type_: "ContainersReady".into(),
        status: "True".into(),
        last_transition_time: Some(Time(ts(4))),
        ..Default::default()
    });
    p
}

#[test]
fn brokers_lost_with_their_node_are_named_and_a_lost_lead_is_not_running() {
    let js = jobset(2, vec![]);
    let ready = |role: &str| pod(role, "Running", Some(5));
    let mut running = mc(3);
    running.status = Some(MiniClusterStatus {
        phase: Some(Phase::Running),
        ready_time: Some(Time(ts(5))),
        ..Default::default()
    });
    // (what it proves, the pods, the phase, BrokersLost, its reason, in its message)
    let cases = [
        (
            "a follower lost: the instance goes on, Running, the follower named with its rank",
            vec![ready("lead"), ready("workers"), lost_pod("workers", "1")],
            Phase::Running,
            Some(true),
            reason::FOLLOWERS_LOST,
            "m-workers-0-1-x (rank 2) since",
        ),
        (
            "the lead lost: the instance is gone, Starting",
            vec![lost_pod("lead", "0"), ready("workers"), ready("workers")],
            Phase::Starting,
            Some(true),
            reason::LEAD_BROKER_LOST,
            "m-lead-0-0-x (rank 0)",
        ),
        (
            "never lost: no BrokersLost",
            vec![ready("lead"), ready("workers"), ready("workers")],
            Phase::Running,
            None,
            "",
            "",
        ),
    ];
    for (what, pods, phase, lost, why, text) in cases {
        let status = observe(&running, &js, &pods, ts(10));
        assert_eq!(status.phase, Some(phase), "{what}");
        assert_eq!(is_true(&status, condition::BROKERS_LOST), lost, "{what}");
        assert_eq!(
            is_true(&status, condition::READY),
            Some(lost.is_none()),
            "{what}"
        );
        if lost.is_some() {
            let c = find(&status, condition::BROKERS_LOST);
            assert_eq!(c.reason, why, "{what}");
            assert!(c.message.contains(text), "{what}: {}", c.message);
        }
    }
    // The node came back (its kubelet wrote the pod ready again): the condition is over.
    let mut was_lost = running.clone();
    was_lost.status = Some(observe(
        &running,
        &js,
        &[ready("lead"), ready("workers"), lost_pod("workers", "1")],
        ts(10),
    ));
    let back = observe(
        &was_lost,
        &js,
        &[ready("lead"), ready("workers"), ready("workers")],
        ts(20),
    );
    let c = find(&back, condition::BROKERS_LOST);
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", reason::RESOLVED)
    );
    // And its Event: a Warning when it turned true, none when it is over.
    let notes = events::transitions(
        &running,
        running.status.as_ref().unwrap(),
        was_lost.status.as_ref().unwrap(),
    );
    assert!(
        notes.iter().any(|n| n.reason == "BrokersLost" && n.warning),
        "{notes:?}"
    );
}
