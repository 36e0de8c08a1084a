//! Table tests of the whole [`plan`]: a MiniCluster and what the watches hold, built with
//! the builders below (the deciders' own tests use them too); each case names what it proves
//! and checks the steps, the phase, the conditions and the Events.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};

use super::*;
use crate::api::{LEAD_JOB, MiniClusterStatus, Phase, ROLE_LABEL, condition};
use crate::controller::observe::jobset::ObservedJobSet;
use crate::controller::observe::pods::BrokerPod;
use crate::controller::observe::{Observed, OwnedObject, Presence};
use crate::jobset::JobSetStatus;
use crate::render;
use kube::ResourceExt;
use kube::api::PartialObjectMeta;

const UID: &str = "uid-mc";

pub(super) fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

pub(super) use crate::fixtures::env;

/// A MiniCluster `m` in `ns` with a UID, as the API server returns it.
pub(super) struct Mc(pub(super) MiniCluster);

impl Mc {
    pub(super) fn new(size: i32) -> Self {
        Self(
            crate::fixtures::m()
                .generation(2)
                .uid(UID)
                .size(size)
                .build(),
        )
    }
    pub(super) fn max_size(mut self, n: i32) -> Self {
        self.0.spec.max_size = Some(n);
        self
    }
    pub(super) fn suspend(mut self) -> Self {
        self.0.spec.suspend = true;
        self
    }
    pub(super) fn cleanup(mut self) -> Self {
        self.0.spec.cleanup = true;
        self
    }
    pub(super) fn bad_env(mut self) -> Self {
        self.0.spec.containers[0]
            .environment
            .insert("1BAD".into(), "x".into());
        self
    }
    pub(super) fn created_at(mut self, at: Timestamp) -> Self {
        self.0.metadata.creation_timestamp = Some(Time(at));
        self
    }
    pub(super) fn status(mut self, f: impl FnOnce(&mut MiniClusterStatus)) -> Self {
        f(self.0.status.get_or_insert_default());
        self
    }
    /// As after the reconcile that created everything.
    pub(super) fn created(self) -> Self {
        self.status(|s| {
            s.phase = Some(Phase::Pending);
            s.job_set = "m".into();
            s.curve_secret = "m-curve".into();
        })
    }
    /// As when all brokers were ready.
    pub(super) fn running(self) -> Self {
        self.created().status(|s| {
            s.phase = Some(Phase::Running);
            s.start_time = Some(Time(now()));
            s.ready_time = Some(Time(now()));
        })
    }
}

pub(super) fn owner() -> OwnerReference {
    OwnerReference {
        api_version: "flux-framework.org/v1alpha2".into(),
        kind: "MiniCluster".into(),
        name: "m".into(),
        uid: UID.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// What the watches hold.
pub(super) struct Seen {
    pub(super) observed: Observed,
    pub(super) mc: MiniCluster,
    env: crate::model::Environment,
}

impl Seen {
    pub(super) fn nothing(mc: &Mc) -> Self {
        Self {
            observed: Observed::default(),
            mc: mc.0.clone(),
            env: env(),
        }
    }
    /// Everything the operator creates, as rendered for `mc`, and `ready` of the pods ready.
    pub(super) fn everything(mc: &Mc, ready: i32) -> Self {
        let desired = render::desired(&crate::fixtures::cluster(&mc.0)).unwrap();
        let mut js = desired.jobset.clone();
        js.metadata.owner_references = Some(vec![owner()]);
        js.metadata.uid = Some("uid-js".into());
        let mut seen = Self::nothing(mc);
        seen.observed.jobset = Some(Arc::new(ObservedJobSet::from(&js)));
        seen.observed.secret = Presence::Owned;
        seen.observed.config_maps = vec![OwnedObject {
            name: desired.config_map.name_any(),
            uid: None,
            applied: None,
        }];
        seen.observed.services = desired
            .network_services
            .iter()
            .map(|s| OwnedObject {
                name: s.name_any(),
                uid: None,
                applied: s.annotations().get(render::APPLIED_ANNOTATION).cloned(),
            })
            .collect();
        seen.pods(ready)
    }
    pub(super) fn pods(mut self, ready: i32) -> Self {
        self.observed.pods = (0..ready)
            .map(|i| {
                Arc::new(BrokerPod::from(Pod {
                    metadata: ObjectMeta {
                        name: Some(format!("m-{i}")),
                        labels: Some(
                            [(
                                ROLE_LABEL.to_string(),
                                if i == 0 { LEAD_JOB } else { "workers" }.to_string(),
                            )]
                            .into(),
                        ),
                        creation_timestamp: Some(Time(now())),
                        ..Default::default()
                    },
                    status: Some(PodStatus {
                        phase: Some("Running".into()),
                        conditions: Some(vec![PodCondition {
                            type_: "Ready".into(),
                            status: "True".into(),
                            last_transition_time: Some(Time(now())),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }))
            })
            .collect();
        self
    }
    pub(super) fn without_jobset(mut self) -> Self {
        self.observed.jobset = None;
        self
    }
    pub(super) fn without_secret(mut self) -> Self {
        self.observed.secret = Presence::Absent;
        self
    }
    pub(super) fn secret(mut self, p: Presence) -> Self {
        self.observed.secret = p;
        self
    }
    pub(super) fn subdomain(mut self, p: Presence) -> Self {
        self.observed.subdomain = p;
        self
    }
    pub(super) fn jobset(mut self, f: impl FnOnce(&mut ObservedJobSet)) -> Self {
        let mut js = self.observed.jobset.as_deref().cloned().unwrap();
        f(&mut js);
        self.observed.jobset = Some(Arc::new(js));
        self
    }
    pub(super) fn config_maps(mut self, names: &[&str]) -> Self {
        self.observed.config_maps = names
            .iter()
            .map(|n| OwnedObject {
                name: n.to_string(),
                uid: Some(format!("uid-{n}")),
                applied: None,
            })
            .collect();
        self
    }
    fn plan(&self) -> Plan {
        self.plan_at(now())
    }
    /// The plan at `at`, with the spec's certificate checked as the reconcile checks it.
    fn plan_at(&self, at: Timestamp) -> Plan {
        let observed = self.observed.clone();
        let old = self.mc.status.clone().unwrap_or_default();
        let spec = self.resolve();
        let mut input = self.inputs(&spec, &observed, &old);
        input.now = at;
        plan(&input).unwrap()
    }
    /// Its spec, resolved as the reconcile resolves it.
    pub(super) fn resolve(&self) -> Resolved<'_> {
        crate::model::resolve(&self.mc, &self.env)
    }
    /// The inputs of a plan at `now()` from this MiniCluster and its resolved `spec`, the
    /// spec's certificate checked as the reconcile checks it.
    pub(super) fn inputs<'a>(
        &'a self,
        spec: &'a Resolved<'a>,
        observed: &'a Observed,
        old: &'a MiniClusterStatus,
    ) -> Inputs<'a> {
        let given = to_verify(spec, observed.secret);
        Inputs {
            mc: &self.mc,
            spec,
            old,
            observed,
            certificate_refused: given.and_then(|cert| verify_certificate(cert).unwrap()),
            now: now(),
        }
    }
}

pub(super) fn completed(js: &mut ObservedJobSet) {
    js.status = Some(JobSetStatus {
        conditions: vec![Condition {
            type_: "Completed".into(),
            status: "True".into(),
            reason: "AllJobsCompleted".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(now()),
        }],
        ..Default::default()
    });
}

/// The JobSet's pods mount ConfigMap `name` (as an older operator's JobSet would).
pub(super) fn with_config_map(js: &mut ObservedJobSet, name: &str) {
    for rj in &mut js.spec.replicated_jobs {
        let pod = rj
            .template
            .spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap();
        for v in &mut pod.volumes {
            if let Some(cm) = v.config_map.as_mut() {
                cm.name = name.into();
            }
        }
    }
}

/// `mc` with a services pod (`spec.services`) that has a port, so a Service `m-web` too.
pub(super) fn with_web_service(mc: Mc) -> Mc {
    let mut mc = mc;
    mc.0.spec.services = serde_json::from_value(
        serde_json::json!([{"name": "web", "image": "nginx", "ports": [80]}]),
    )
    .unwrap();
    mc
}

/// The steps as short words, for the table.
fn steps(plan: &Plan) -> Vec<String> {
    plan.steps
        .iter()
        .map(|s| match s {
            Step::CreateSecret(_, again) => format!("create Secret{}", said(again)),
            Step::CreateConfigMap(_, again) => format!("create ConfigMap{}", said(again)),
            Step::ApplyService(s, again) => {
                format!("apply Service {}{}", s.name_any(), said(again))
            }
            Step::CreateJobSet(_) => "create JobSet".to_string(),
            Step::UpdateJobSet(u) => format!("update JobSet {}", u["spec"]),
            Step::CreateServicesJob(_, again) => format!("create services Job{}", said(again)),
            Step::UpdateServicesJob(u) => format!("update services Job {}", u["spec"]),
            Step::DeleteConfigMap(d) => format!("delete ConfigMap {}", d.name),
            Step::DeleteService(d) => format!("delete Service {}", d.name),
            Step::DeleteMiniCluster => "delete MiniCluster".to_string(),
            Step::DeleteJobSet(_) => "delete JobSet".to_string(),
            Step::DeleteServicesJob(_) => "delete services Job".to_string(),
        })
        .collect()
}

/// " again" for a create that carries the Recreated Warning.
pub(super) fn said(recreated: &Option<String>) -> &'static str {
    if recreated.is_some() { " again" } else { "" }
}

fn condition(plan: &Plan, type_: &str) -> Option<(String, String)> {
    plan.status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.message.clone()))
}

fn is_true(plan: &Plan, type_: &str) -> bool {
    condition(plan, type_).is_some_and(|(s, _)| s == "True")
}

fn events(plan: &Plan) -> Vec<&'static str> {
    plan.events.iter().map(|e| e.reason).collect()
}

struct Case {
    name: &'static str,
    seen: Seen,
    steps: Vec<&'static str>,
    phase: Phase,
    events: Vec<&'static str>,
    conditions_true: Vec<&'static str>,
}

#[test]
fn a_cluster_is_made_once_runs_and_an_invalid_spec_makes_nothing() {
    check_plans(vec![
        Case {
            name: "a new MiniCluster gets its Secret, ConfigMap and JobSet; Pending, unwritten",
            seen: Seen::nothing(&Mc::new(2)),
            steps: vec!["create Secret", "create ConfigMap", "create JobSet"],
            phase: Phase::Pending,
            events: vec![],
            conditions_true: vec![],
        },
        Case {
            name: "nothing to do once everything exists and all brokers are ready",
            seen: Seen::everything(&Mc::new(2).running(), 2),
            steps: vec![],
            phase: Phase::Running,
            events: vec![],
            conditions_true: vec!["Ready"],
        },
        Case {
            name: "all brokers ready for the first time: Running, in the status only",
            seen: Seen::everything(&Mc::new(2).created(), 2),
            steps: vec![],
            phase: Phase::Running,
            events: vec![],
            conditions_true: vec!["Ready"],
        },
        Case {
            name: "an invalid spec creates nothing and stays Pending (not final: it can be fixed)",
            seen: Seen::nothing(&Mc::new(2).bad_env()),
            steps: vec![],
            phase: Phase::Pending,
            events: vec!["InvalidSpec"],
            conditions_true: vec!["InvalidSpec"],
        },
    ]);
}

#[test]
fn a_new_clusters_first_status_waits_until_it_says_more_than_pending() {
    let not_ready = |mut seen: Seen| {
        seen.observed.pods = seen
            .observed
            .pods
            .iter()
            .map(|p| {
                let mut p = (**p).clone();
                p.status.as_mut().unwrap().conditions = Some(vec![]);
                Arc::new(p)
            })
            .collect();
        seen
    };
    // (what it proves, what the watches hold, whether the plan writes a status)
    let cases = [
        (
            "nothing made yet: its objects are made, no status",
            Seen::nothing(&Mc::new(2)),
            false,
        ),
        (
            "everything made, no pod yet: no status",
            Seen::everything(&Mc::new(2), 0),
            false,
        ),
        (
            "its pods exist, not ready: Starting is written",
            not_ready(Seen::everything(&Mc::new(2), 2)),
            true,
        ),
        (
            "all brokers ready: Running is written",
            Seen::everything(&Mc::new(2), 2),
            true,
        ),
        (
            "suspended by its spec: Suspended is written",
            Seen::nothing(&Mc::new(2).suspend()),
            true,
        ),
        (
            "an invalid spec: InvalidSpec is written",
            Seen::nothing(&Mc::new(2).bad_env()),
            true,
        ),
        (
            "someone else's Secret of its name: Blocked is written",
            Seen::nothing(&Mc::new(2)).secret(Presence::Foreign),
            true,
        ),
    ];
    for (what, seen, writes) in cases {
        let plan = seen.plan();
        let old = seen.mc.status.clone().unwrap_or_default();
        assert_eq!(plan.status != old, writes, "{what}: {:?}", plan.status);
        if !writes && old.is_unwritten() {
            assert_eq!(plan.status, MiniClusterStatus::default(), "{what}");
        }
    }
}

#[test]
fn someone_elses_objects_block_it_and_lost_ones_degrade_or_restart_it() {
    check_plans(vec![
        Case {
            name: "a Secret of its name that someone else owns blocks it, nothing is taken over",
            seen: Seen::nothing(&Mc::new(2)).secret(Presence::Foreign),
            steps: vec![],
            phase: Phase::Pending,
            events: vec!["Blocked"],
            conditions_true: vec!["Blocked"],
        },
        Case {
            name: "a Service named as its pods' subdomain that is someone else's blocks it",
            seen: Seen::nothing(&Mc::new(2)).subdomain(Presence::Foreign),
            steps: vec![],
            phase: Phase::Pending,
            events: vec!["Blocked"],
            conditions_true: vec!["Blocked"],
        },
        Case {
            name: "the subdomain is looked at only before the JobSet is made",
            seen: Seen::everything(&Mc::new(2).running(), 2).subdomain(Presence::Foreign),
            steps: vec![],
            phase: Phase::Running,
            events: vec![],
            conditions_true: vec!["Ready"],
        },
        Case {
            name: "a JobSet of its name that someone else owns blocks it",
            seen: Seen::everything(&Mc::new(2), 0).jobset(|js| js.metadata.owner_references = None),
            steps: vec![],
            phase: Phase::Pending,
            events: vec!["Blocked"],
            conditions_true: vec!["Blocked"],
        },
        Case {
            name: "a certificate Secret deleted under a running cluster is not replaced: Degraded",
            seen: Seen::everything(&Mc::new(2).running(), 2).without_secret(),
            steps: vec![],
            phase: Phase::Running,
            events: vec!["Degraded"],
            conditions_true: vec!["Degraded", "Ready"],
        },
        Case {
            name: "a resize while the certificate Secret is missing is held: Degraded says why",
            seen: {
                let mut seen =
                    Seen::everything(&Mc::new(2).max_size(4).running(), 2).without_secret();
                seen.mc.spec.size = 4;
                seen
            },
            steps: vec![],
            phase: Phase::Running,
            events: vec!["Degraded"],
            // Not Ready: 2 of the 4 brokers asked for.
            conditions_true: vec!["Degraded"],
        },
        Case {
            name: "a JobSet deleted under a running cluster is recreated, loudly, timestamps reset",
            seen: Seen::everything(&Mc::new(2).running(), 0).without_jobset(),
            steps: vec!["create JobSet"],
            phase: Phase::Pending,
            events: vec!["Restarted", "Pending"],
            conditions_true: vec!["Restarted"],
        },
    ]);
}

#[test]
fn a_finished_cluster_makes_nothing_again_and_deletes_itself_when_asked() {
    check_plans(vec![
        Case {
            name: "a finished cluster whose JobSet went (TTL) never runs again",
            seen: Seen::everything(
                &Mc::new(2).running().status(|s| {
                    s.phase = Some(Phase::Succeeded);
                    s.completion_time = Some(Time(now()));
                    s.teardown_time = Some(Time(now()));
                }),
                0,
            )
            .without_jobset(),
            steps: vec![],
            phase: Phase::Succeeded,
            events: vec![],
            conditions_true: vec![],
        },
        Case {
            name: "a finished cluster whose Secret and ConfigMap went makes neither again",
            seen: Seen::everything(&Mc::new(2).running(), 0)
                .jobset(completed)
                .without_secret()
                .config_maps(&[]),
            steps: vec![],
            phase: Phase::Succeeded,
            events: vec!["Succeeded"],
            conditions_true: vec!["Succeeded"],
        },
        Case {
            name: "a finished cluster with spec.cleanup deletes itself after its status",
            seen: Seen::everything(&Mc::new(2).cleanup().running(), 0).jobset(completed),
            steps: vec!["delete MiniCluster"],
            phase: Phase::Succeeded,
            events: vec!["Succeeded", "Cleanup"],
            conditions_true: vec!["Succeeded"],
        },
    ]);
}

/// Each case's plan: its steps, phase, Events, and which conditions are true.
fn check_plans(cases: Vec<Case>) {
    for case in cases {
        let plan = case.seen.plan();
        assert_eq!(steps(&plan), case.steps, "{}: steps", case.name);
        // A status never written shows the CRD's default phase, Pending.
        let shown = if plan.status.is_unwritten() {
            Some(Phase::Pending)
        } else {
            plan.status.phase
        };
        assert_eq!(shown, Some(case.phase), "{}: phase", case.name);
        assert_eq!(events(&plan), case.events, "{}: events", case.name);
        for type_ in [
            "Ready",
            "InvalidSpec",
            "Blocked",
            "Degraded",
            "Restarted",
            "Succeeded",
        ] {
            assert_eq!(
                is_true(&plan, type_),
                case.conditions_true.contains(&type_),
                "{}: condition {type_} in {:?}",
                case.name,
                plan.status.conditions
            );
        }
    }
}

#[test]
fn a_running_jobset_keeps_the_config_map_it_started_with_when_the_spec_renders_another() {
    let started = Mc::new(2).max_size(4).running();
    let seen = Seen::everything(&started, 2);
    let old_cm = config_map_of(seen.observed.jobset.as_deref().unwrap()).unwrap();
    // Resize: the rendered ConfigMap changes (the lead's quorum and `-N` follow `size`).
    let mut resized = seen;
    resized.mc.spec.size = 3;
    let plan = resized.plan();
    let new_cm = render::desired(&crate::fixtures::cluster(&resized.mc))
        .unwrap()
        .config_map
        .name_any();
    assert_ne!(old_cm, new_cm, "the content differs, so does the name");
    assert_eq!(
        steps(&plan),
        vec![format!(
            "update JobSet {}",
            serde_json::json!({"replicatedJobs": [{"name": "workers", "template": {"spec": {"parallelism": 2, "completions": 2}}}], "suspend": false})
        )],
        "only the size changes; no new ConfigMap, the old one is not deleted"
    );
}

#[test]
fn config_maps_nobody_uses_are_deleted_and_a_lost_one_the_pods_use_is_degraded() {
    let mc = Mc::new(2).running();
    let seen = Seen::everything(&mc, 2);
    let in_use = config_map_of(seen.observed.jobset.as_deref().unwrap()).unwrap();
    let old = "m-flux".to_string();
    let plan = seen.config_maps(&[&in_use, &old]).plan();
    assert_eq!(steps(&plan), vec![format!("delete ConfigMap {old}")]);

    // The JobSet references a ConfigMap of an older operator, now gone: nothing renders it.
    let seen = Seen::everything(&mc, 2)
        .jobset(|js| with_config_map(js, "m-flux"))
        .config_maps(&[]);
    let plan = seen.plan();
    assert!(steps(&plan).is_empty(), "{:?}", steps(&plan));
    let (status, message) = condition(&plan, condition::DEGRADED).unwrap();
    assert_eq!(status, "True");
    assert!(message.contains("ConfigMap m-flux"), "{message}");
}

#[test]
fn a_deleted_config_map_with_the_same_content_is_made_again_with_a_warning() {
    let mc = Mc::new(2).running();
    let plan = Seen::everything(&mc, 2).config_maps(&[]).plan();
    // "again": the executor publishes a Recreated Warning if its create makes it.
    assert_eq!(steps(&plan), vec!["create ConfigMap again"]);
    assert!(!is_true(&plan, condition::DEGRADED));
}

#[test]
fn events_come_from_transitions_so_a_crash_before_them_loses_none() {
    // The run that saw the JobSet finish died before its Events and status: the next run
    // sees the finished JobSet in the watch and the old status, so it publishes the same
    // Events.
    let mc = Mc::new(2).running();
    let seen = Seen::everything(&mc, 0).jobset(completed);
    let plan = seen.plan();
    assert!(steps(&plan).is_empty(), "{:?}", steps(&plan));
    assert_eq!(events(&plan), vec!["Succeeded"]);
    // Once the status is written, the same observation makes no Event.
    let mut after = seen;
    after.mc.status = Some(plan.status.clone());
    assert!(after.plan().events.is_empty());
}

#[test]
fn a_user_supplied_certificate_deleted_under_a_running_cluster_is_made_again() {
    let mut mc = Mc::new(2).running();
    mc.0.spec.flux.curve_cert = crate::model::certificate::Certificate::generate("m")
        .unwrap()
        .to_text()
        .into();
    let plan = Seen::everything(&mc, 2).without_secret().plan();
    // "again": with the Recreated Warning.
    assert_eq!(steps(&plan), vec!["create Secret again"]);
    assert!(!is_true(&plan, condition::DEGRADED));
}

#[test]
fn a_curve_cert_that_is_not_a_certificate_is_invalid_spec_before_anything_is_made() {
    let good = Certificate::generate("m").unwrap();
    let other = Certificate::generate("m").unwrap();
    // (what it proves, the spec's curveCert)
    let cases = [
        (
            "text that is no certificate",
            "not a certificate".to_string(),
        ),
        (
            "a key that is not a Z85 key",
            good.to_text().replace(good.public_key(), "short"),
        ),
        (
            "keys that do not belong together (only a CURVE handshake shows it)",
            good.to_text()
                .replace(good.public_key(), other.public_key()),
        ),
    ];
    for (what, text) in cases {
        let mut mc = Mc::new(2);
        mc.0.spec.flux.curve_cert = text.into();
        let plan = Seen::nothing(&mc).plan();
        assert!(plan.steps.is_empty(), "{what}: {:?}", steps(&plan));
        let (status, message) = condition(&plan, condition::INVALID_SPEC).unwrap();
        assert_eq!(status, "True", "{what}");
        assert!(
            message.starts_with("spec.flux.curveCert: "),
            "{what}: {message}"
        );
        assert!(!is_true(&plan, condition::BLOCKED), "{what}");
        assert_eq!(plan.status.phase, Some(Phase::Pending), "{what}");
        assert_eq!(events(&plan), ["InvalidSpec"], "{what}");
    }
    // A good one is the Secret's, as given (checked once, before the plan).
    let mut mc = Mc::new(2);
    mc.0.spec.flux.curve_cert = good.to_text().into();
    let plan = Seen::nothing(&mc).plan();
    assert_eq!(
        steps(&plan),
        ["create Secret", "create ConfigMap", "create JobSet"]
    );
    assert!(
        matches!(&plan.steps[0], Step::CreateSecret(Some(c), None) if **c == good),
        "{:?}",
        plan.steps[0]
    );
}

#[test]
fn the_plan_never_panics_on_extreme_sizes() {
    // The CRD's bounds keep these from the API path; `flux-operator render` reads files.
    for (size, max) in [
        (i32::MIN, Some(i32::MIN)),
        (i32::MIN, None),
        (0, Some(-1)),
        (-5, Some(i32::MAX)),
    ] {
        let mut mc = Mc::new(2);
        mc.0.spec.size = size;
        mc.0.spec.max_size = max;
        let plan = Seen::nothing(&mc).plan();
        assert!(
            is_true(&plan, condition::INVALID_SPEC),
            "size {size} max {max:?}"
        );
        assert!(plan.steps.is_empty());
    }
    for (size, max) in [
        (i32::MAX, None),
        (2, Some(i32::MAX)),
        (i32::MAX, Some(i32::MAX)),
    ] {
        let mut mc = Mc::new(2);
        mc.0.spec.size = size;
        mc.0.spec.max_size = max;
        let _ = Seen::nothing(&mc).plan();
    }
}

#[test]
fn the_services_pod_job_is_made_once_and_then_only_follows_suspend() {
    let mut mc = Mc::new(2);
    mc.0.spec.services =
        serde_json::from_value(serde_json::json!([{"name": "web", "image": "nginx"}])).unwrap();
    let plan = Seen::nothing(&mc).plan();
    assert_eq!(
        steps(&plan),
        vec![
            "create Secret",
            "create ConfigMap",
            "create JobSet",
            "create services Job"
        ]
    );
    let job = plan
        .steps
        .iter()
        .find_map(|s| match s {
            Step::CreateServicesJob(j, _) => Some(j.clone()),
            _ => None,
        })
        .unwrap();
    let mut seen = Seen::everything(&mc.running(), 2);
    let mut owned = *job;
    owned.metadata.owner_references = Some(vec![owner()]);
    seen.observed.services_job = Some(Arc::new(owned));
    assert!(steps(&seen.plan()).is_empty(), "{:?}", steps(&seen.plan()));
    seen.mc.spec.suspend = true;
    assert_eq!(
        steps(&seen.plan()),
        vec![
            "update JobSet {\"replicatedJobs\":[{\"name\":\"workers\",\"template\":{\"spec\":{\"completions\":1,\"parallelism\":1}}}],\"suspend\":true}".to_string(),
            "update services Job {\"suspend\":true}".to_string()
        ]
    );
}

/// A cluster with `ttlSecondsAfterFinished: 30` whose JobSet completed at `now()`.
pub(super) fn finished_with_ttl(completion_recorded: bool) -> Seen {
    let mc = Mc::new(2).running().status(|s| {
        if completion_recorded {
            s.phase = Some(Phase::Succeeded);
            s.completion_time = Some(Time(now()));
        }
    });
    let mut mc = mc;
    mc.0.spec.ttl_seconds_after_finished = Some(30);
    Seen::everything(&mc, 0).jobset(completed)
}

#[test]
fn the_ttl_runs_from_the_recorded_completion_and_deletes_the_jobset_only_after_it() {
    // The reconcile that sees the JobSet finish records the completion and deletes nothing,
    // even with a TTL of 0: the deletion must never come before the status says finished.
    let mut first = finished_with_ttl(false);
    first.mc.spec.ttl_seconds_after_finished = Some(0);
    let p = first.plan();
    assert_eq!(p.status.phase, Some(Phase::Succeeded));
    assert!(p.status.completion_time.is_some());
    assert!(steps(&p).is_empty(), "{:?}", steps(&p));

    // Recorded, TTL not yet over: nothing deleted, a requeue at the expiry.
    let seen = finished_with_ttl(true);
    let early = seen.plan_at(now() + jiff::SignedDuration::from_secs(10));
    assert!(steps(&early).is_empty());
    assert_eq!(early.requeue, Some(Duration::from_secs(20)));

    // Over: the JobSet goes, the cluster stays Succeeded.
    let late = seen.plan_at(now() + jiff::SignedDuration::from_secs(30));
    assert_eq!(steps(&late), ["delete JobSet"]);
    assert_eq!(late.status.phase, Some(Phase::Succeeded));

    // Without a TTL the finished JobSet stays.
    let mut kept = finished_with_ttl(true);
    kept.mc.spec.ttl_seconds_after_finished = None;
    let p = kept.plan_at(now() + jiff::SignedDuration::from_secs(3600));
    assert!(steps(&p).is_empty());
}

#[test]
fn a_status_write_settles_unless_a_decision_waits_for_what_it_records() {
    // (what it proves, the cluster and what the watches hold, whether its plan settles)
    let cases = [
        (
            "a new cluster: its objects are made (their watches wake the next reconcile)",
            Seen::nothing(&Mc::new(2)),
            false,
        ),
        (
            "all brokers ready: Running is written, and nothing waits for it",
            Seen::everything(&Mc::new(2).created(), 2),
            true,
        ),
        (
            "Running already written: no write, nothing to settle",
            {
                let mut seen = Seen::everything(&Mc::new(2).created(), 2);
                seen.mc.status = Some(seen.plan().status);
                seen
            },
            false,
        ),
        (
            "finished with a TTL: the TTL counts from the completion the write records",
            finished_with_ttl(false),
            false,
        ),
        (
            "finished without a TTL: Succeeded is written, and nothing waits for it",
            {
                let mut seen = finished_with_ttl(false);
                seen.mc.spec.ttl_seconds_after_finished = None;
                seen
            },
            true,
        ),
    ];
    for (what, seen, settled) in cases {
        let observed = seen.observed.clone();
        let old = seen.mc.status.clone().unwrap_or_default();
        let spec = seen.resolve();
        let input = seen.inputs(&spec, &observed, &old);
        let p = plan(&input).unwrap();
        assert_eq!(settles(&input, &p).unwrap(), settled, "{what}: {p:?}");
    }
}

#[test]
fn a_held_resize_names_the_missing_secret_and_goes_ahead_once_the_secret_is_back() {
    let mut seen = Seen::everything(&Mc::new(2).max_size(4).running(), 2).without_secret();
    seen.mc.spec.size = 4;
    let (_, message) = condition(&seen.plan(), "Degraded").unwrap();
    assert!(
        message.contains("Secret m-curve") && message.contains("is held"),
        "{message}"
    );
    // With the Secret there again, the same resize is carried out.
    let seen = seen.secret(Presence::Owned);
    assert_eq!(steps(&seen.plan()).len(), 1, "{:?}", steps(&seen.plan()));
}

#[test]
fn the_subdomain_service_is_ours_when_our_jobset_or_this_minicluster_made_it() {
    let by = |kind: &str, name: &str, uid: &str| OwnerReference {
        api_version: "x/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: None,
    };
    let svc = |owners: Vec<OwnerReference>, deleting: bool| PartialObjectMeta::<Service> {
        metadata: ObjectMeta {
            name: Some("m".into()),
            owner_references: Some(owners),
            deletion_timestamp: deleting.then(|| Time(now())),
            ..Default::default()
        },
        ..Default::default()
    };
    let mc = Mc::new(2).0;
    // (what it proves, the Service of the subdomain's name, whose it is)
    let cases = [
        ("no Service: JobSet makes it", None, Presence::Absent),
        (
            "the headless Service of its JobSet (by name: a JobSet made again has a new UID)",
            Some(svc(vec![by("JobSet", "m", "any")], false)),
            Presence::Owned,
        ),
        (
            "a Service the operator made for this MiniCluster (flux.minimalService)",
            Some(svc(vec![by("MiniCluster", "m", UID)], false)),
            Presence::Owned,
        ),
        (
            "another JobSet's headless Service",
            Some(svc(vec![by("JobSet", "other", "u")], false)),
            Presence::Foreign,
        ),
        (
            "a MiniCluster of the same name deleted before: another UID",
            Some(svc(vec![by("MiniCluster", "m", "old")], false)),
            Presence::Foreign,
        ),
        (
            "anyone's, unowned",
            Some(svc(vec![], false)),
            Presence::Foreign,
        ),
        (
            "anyone's, being deleted: waited for",
            Some(svc(vec![], true)),
            Presence::Terminating,
        ),
    ];
    for (what, svc, want) in cases {
        assert_eq!(Presence::of_subdomain(svc.as_ref(), &mc), want, "{what}");
    }
}

/// A running cluster with a services pod that has a port (so a Service too), with a
/// certificate of its own, and everything the operator made for it in the watches.
fn with_everything_made(created: bool) -> Seen {
    let mut mc = with_web_service(Mc::new(2));
    mc.0.spec.flux.curve_cert = Certificate::generate("m").unwrap().to_text().into();
    let mc = if created { mc.running() } else { mc };
    let mut seen = Seen::everything(&mc, 2);
    let mut job = render::desired(&crate::fixtures::cluster(&mc.0))
        .unwrap()
        .services_job
        .unwrap();
    job.metadata.owner_references = Some(vec![owner()]);
    seen.observed.services_job = Some(Arc::new(job));
    seen
}

#[test]
// Long: a table, one case per object.
fn every_object_made_again_after_a_deletion_says_so_and_only_then() {
    // (what it proves, what the watches hold, the steps: "again" carries a Recreated Warning)
    let cases: Vec<(&str, Seen, Vec<&str>)> = vec![
        (
            "nothing deleted: nothing made",
            with_everything_made(true),
            vec![],
        ),
        (
            "the ConfigMap",
            deleted(|o| o.config_maps.clear()),
            vec!["create ConfigMap again"],
        ),
        (
            "the Secret of a certificate from the spec",
            deleted(|o| o.secret = Presence::Absent),
            vec!["create Secret again"],
        ),
        (
            "a Service",
            deleted(|o| o.services.clear()),
            vec!["apply Service m-web again"],
        ),
        (
            "a Service changed by hand is set back, not made again",
            deleted(|o| o.services[0].applied = Some("other".into())),
            vec!["apply Service m-web"],
        ),
        (
            "the services pod's Job",
            deleted(|o| o.services_job = None),
            vec!["create services Job again"],
        ),
        (
            "all but the JobSet gone with it: made again, the JobSet's Restarted says the rest",
            deleted(|o| {
                o.jobset = None;
                o.secret = Presence::Absent;
                o.config_maps.clear();
                o.services.clear();
                o.services_job = None;
            }),
            vec![
                "create Secret again",
                "create ConfigMap again",
                "apply Service m-web again",
                "create JobSet",
                "create services Job again",
            ],
        ),
        (
            "a new cluster: nothing is made again",
            Seen::nothing(&Mc(with_everything_made(false).mc)),
            vec![
                "create Secret",
                "create ConfigMap",
                "apply Service m-web",
                "create JobSet",
                "create services Job",
            ],
        ),
        (
            "a run that died after the JobSet, before the services Job: no deletion",
            {
                let mut seen = with_everything_made(false);
                seen.observed.services_job = None;
                seen
            },
            vec!["create services Job"],
        ),
    ];
    for (what, seen, want) in cases {
        let plan = seen.plan();
        assert_eq!(steps(&plan), want, "{what}");
        assert!(!is_true(&plan, condition::DEGRADED), "{what}");
    }
}

/// A running cluster with everything made (the certificate from the spec), then `f` done to
/// what the watches hold.
fn deleted(f: fn(&mut Observed)) -> Seen {
    let mut seen = with_everything_made(true);
    f(&mut seen.observed);
    seen
}

#[test]
fn each_recreated_warning_names_what_was_deleted() {
    let plan = deleted(|o| {
        o.secret = Presence::Absent;
        o.config_maps.clear();
        o.services.clear();
        o.services_job = None;
    })
    .plan();
    let messages: Vec<&str> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::CreateSecret(_, m)
            | Step::CreateConfigMap(_, m)
            | Step::ApplyService(_, m)
            | Step::CreateServicesJob(_, m) => m.as_deref(),
            _ => None,
        })
        .collect();
    for (message, name) in messages.iter().zip([
        "Secret m-curve",
        "ConfigMap m-flux-",
        "Service m-web",
        "Job m-services",
    ]) {
        assert!(message.contains(name), "{message} names {name}");
        assert!(message.contains("was deleted"), "{message}");
    }
    assert_eq!(messages.len(), 4, "{messages:?}");
}

#[test]
fn the_steps_the_executor_sends_together_come_before_every_other_step() {
    // The executor sends the leading independent steps (Secret, ConfigMap, Services) at once
    // and the rest in order: no plan may put an independent step after a dependent one.
    let web = || with_web_service(Mc::new(2));
    let cases = [
        ("a new cluster", Seen::nothing(&Mc::new(2))),
        ("a new cluster with a Service", Seen::nothing(&web())),
        (
            "everything deleted under a running cluster",
            Seen::everything(&web().running(), 2)
                .without_jobset()
                .without_secret()
                .config_maps(&[]),
        ),
        (
            "a stray ConfigMap and a deleted Service",
            Seen::everything(&Mc::new(2).running(), 2).config_maps(&["m-old"]),
        ),
    ];
    for (what, seen) in cases {
        let plan = seen.plan();
        let first_dependent = plan.steps.iter().position(|s| !s.is_independent());
        let independent_after =
            first_dependent.is_some_and(|i| plan.steps[i..].iter().any(Step::is_independent));
        assert!(!independent_after, "{what}: {:?}", steps(&plan));
        assert!(!plan.steps.is_empty(), "{what}: a plan with steps");
    }
}
