//! Finding the instance to run in: whether a MiniCluster can be reached, and which of its
//! own lead pods (and container) the Flux commands are run in.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ListParams, PartialObjectMeta};
use kube::{Client, ResourceExt};

use flux_operator::api::{LEAD_JOB, MiniCluster, NAME_LABEL, Phase, ROLE_LABEL, condition};
use flux_operator::flux::SOCKET_PATH;
use flux_operator::jobset::{JobSet, made_for_jobset};
use flux_operator::model::containers::flux_container_name;

/// Why a MiniCluster's instance cannot be reached.
#[derive(Debug, PartialEq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("MiniCluster {0} not found (kubectl get miniclusters -n {1})")]
    NotFound(String, String),
    #[error(
        "MiniCluster {0} sets spec.flux.disableSocket: its brokers have no local socket, so there is no instance to run Flux commands in from outside"
    )]
    NoSocket(String),
    #[error("MiniCluster {name} is {phase}{why}")]
    NotRunning {
        name: String,
        phase: String,
        why: String,
    },
    #[error("MiniCluster {name} has no ready lead broker pod ({found}){why}")]
    NoLead {
        name: String,
        found: String,
        why: String,
    },
    #[error("the lead pod {pod} has no container {container}")]
    NoContainer { pod: String, container: String },
}

/// Where and how to reach the instance.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Target {
    pub(crate) namespace: String,
    pub(crate) pod: String,
    pub(crate) container: String,
    /// The flux view's directory (`spec.flux.container.mountPath`), `None` without a view.
    pub(crate) view: Option<String>,
    /// The lead broker's URI (used only without a view; `flux-view.sh` sets the same).
    pub(crate) uri: String,
}

/// A target for the unit tests.
#[cfg(test)]
pub(crate) fn target_for_tests() -> Target {
    Target {
        namespace: "team".into(),
        pod: "demo-lead-0-0-abcde".into(),
        container: "demo".into(),
        view: Some("/mnt/flux".into()),
        uri: format!("local://{SOCKET_PATH}"),
    }
}

/// Whether the MiniCluster's instance can be reached, before looking at its pods.
fn check_reachable(mc: &MiniCluster) -> Result<(), Refusal> {
    let name = qualified(mc);
    // An archive keeps the socket even with disableSocket (the save needs it).
    if mc.spec.flux.disable_socket && !mc.has_archive() {
        return Err(Refusal::NoSocket(name));
    }
    let phase = mc.status.as_ref().and_then(|s| s.phase);
    match phase {
        // Starting: the lead may be up while followers start (a grow, a replaced follower);
        // the lead pod's readiness decides.
        Some(Phase::Running | Phase::Starting) => Ok(()),
        Some(other) => Err(Refusal::NotRunning {
            name,
            phase: other.as_str().to_string(),
            why: why_not(mc),
        }),
        None => Err(Refusal::NotRunning {
            name,
            phase: "without a status yet".into(),
            why: " (is the operator running?)".into(),
        }),
    }
}

/// The conditions that explain a MiniCluster that is not up, as ` (Type: message; ...)`.
pub(crate) fn why_not(mc: &MiniCluster) -> String {
    let conditions = mc
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let telling = [
        condition::INVALID_SPEC,
        condition::BLOCKED,
        condition::FAILED,
        condition::SUCCEEDED,
        condition::SUSPENDED,
        condition::DEGRADED,
    ];
    let mut parts: Vec<String> = conditions
        .iter()
        .filter(|c| c.status == "True" && telling.contains(&c.type_.as_str()))
        .map(describe)
        .collect();
    if parts.is_empty() {
        parts.extend(
            conditions
                .iter()
                .filter(|c| c.type_ == condition::READY && c.status != "True")
                .map(describe),
        );
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

fn describe(c: &Condition) -> String {
    let mut out = format!("{}={}", c.type_, c.status);
    if !c.reason.is_empty() {
        out.push_str(&format!(" {}", c.reason));
    }
    if !c.message.is_empty() {
        out.push_str(&format!(": {}", c.message));
    }
    out
}

pub(crate) fn qualified(mc: &MiniCluster) -> String {
    format!("{}/{}", mc.namespace_or_default(), mc.name())
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Unknown")
}

/// The lead pod to run in: of the lead pods (by label), the newest that is Running, ready and
/// not being deleted.
fn choose_lead<'a>(mc: &MiniCluster, pods: &'a [Pod]) -> Result<&'a Pod, Refusal> {
    let usable = pods.iter().filter(|p| {
        p.metadata.deletion_timestamp.is_none() && pod_phase(p) == "Running" && pod_ready(p)
    });
    usable
        .max_by(|a, b| {
            let created = |p: &Pod| p.metadata.creation_timestamp.clone().map(|t| t.0);
            created(a)
                .cmp(&created(b))
                .then_with(|| a.name_any().cmp(&b.name_any()))
        })
        .ok_or_else(|| Refusal::NoLead {
            name: qualified(mc),
            found: if pods.is_empty() {
                "no lead pod".into()
            } else {
                pods.iter()
                    .map(|p| {
                        let state = if p.metadata.deletion_timestamp.is_some() {
                            "terminating".to_string()
                        } else if pod_phase(p) == "Running" {
                            "Running, not ready".to_string()
                        } else {
                            pod_phase(p).to_string()
                        };
                        format!("{} {state}", p.name_any())
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            why: why_not(mc),
        })
}

/// Where to run Flux commands for `mc`, given its lead pods.
pub(crate) fn target(mc: &MiniCluster, pods: &[Pod]) -> Result<Target, Refusal> {
    check_reachable(mc)?;
    let pod = choose_lead(mc, pods)?;
    let container = flux_container_name(mc).to_string();
    let has_container = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.containers.iter().any(|c| c.name == container));
    if !has_container {
        return Err(Refusal::NoContainer {
            pod: pod.name_any(),
            container,
        });
    }
    let view = &mc.spec.flux.container;
    Ok(Target {
        namespace: mc.namespace_or_default().to_string(),
        pod: pod.name_any(),
        container,
        view: (!view.disable).then(|| view.mount_path.clone()),
        uri: format!("local://{SOCKET_PATH}"),
    })
}

/// The uid of `mc`'s own JobSet among `jobsets` (its name and namespace, `mc` its
/// controller): `None` while it has none.
fn own_jobset_uid(mc: &MiniCluster, jobsets: &[PartialObjectMeta<JobSet>]) -> Option<String> {
    jobsets
        .iter()
        .find(|js| {
            js.metadata.name.as_deref() == Some(mc.name())
                && js.metadata.namespace.as_deref() == Some(mc.namespace_or_default())
                && js
                    .owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && Some(&o.uid) == mc.metadata.uid.as_ref())
        })
        .and_then(|js| js.metadata.uid.clone())
}

/// The pods among `pods` that `mc`'s own JobSet made: not those of an earlier MiniCluster
/// of the same name, nor pods made with its labels by hand.
pub(crate) fn own_pods(
    mc: &MiniCluster,
    jobsets: &[PartialObjectMeta<JobSet>],
    pods: &[Pod],
) -> Vec<Pod> {
    let Some(uid) = own_jobset_uid(mc, jobsets) else {
        return Vec::new();
    };
    pods.iter()
        .filter(|p| {
            p.namespace().as_deref() == Some(mc.namespace_or_default())
                && p.labels().get(NAME_LABEL).map(String::as_str) == Some(mc.name())
                && made_for_jobset(&p.metadata, &uid)
        })
        .cloned()
        .collect()
}

/// The label selector of a MiniCluster's lead pods (`mc` empty: of every MiniCluster).
pub(crate) fn lead_selector(mc: &str) -> String {
    if mc.is_empty() {
        format!("{NAME_LABEL},{ROLE_LABEL}={LEAD_JOB}")
    } else {
        format!("{NAME_LABEL}={mc},{ROLE_LABEL}={LEAD_JOB}")
    }
}

/// The MiniCluster and where its instance is reached.
pub(crate) async fn find(client: &Client, namespace: &str, name: &str) -> Result<Target> {
    let mcs: Api<MiniCluster> = Api::namespaced(client.clone(), namespace);
    let mc = mcs
        .get_opt(name)
        .await
        .with_context(|| format!("reading MiniCluster {namespace}/{name}"))?
        .ok_or_else(|| Refusal::NotFound(format!("{namespace}/{name}"), namespace.to_string()))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let leads = pods
        .list(&ListParams::default().labels(&lead_selector(name)))
        .await
        .with_context(|| format!("listing the lead pods of MiniCluster {namespace}/{name}"))?;
    let jobsets: Api<JobSet> = Api::namespaced(client.clone(), namespace);
    let jobset = jobsets
        .get_metadata_opt(name)
        .await
        .with_context(|| format!("reading the JobSet of MiniCluster {namespace}/{name}"))?;
    let leads = own_pods(&mc, &Vec::from_iter(jobset), &leads.items);
    Ok(target(&mc, &leads)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{cond, minicluster, running};
    use flux_operator::jobset::JOBSET_UID_LABEL;
    use serde_json::json;

    fn pod(name: &str, created: &str, phase: &str, ready: bool, container: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "team", "creationTimestamp": created,
                         "labels": {NAME_LABEL: "demo", ROLE_LABEL: LEAD_JOB}},
            "spec": {"containers": [{"name": container, "image": "ubuntu:noble"}]},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .expect("a test pod")
    }

    #[test]
    fn the_lead_is_the_newest_running_ready_pod_not_being_deleted() {
        let mc = minicluster(json!({}), running());
        let mut gone = pod(
            "demo-lead-0-0-zzzzz",
            "2026-01-01T00:09:00Z",
            "Running",
            true,
            "demo",
        );
        gone.metadata.deletion_timestamp = gone.metadata.creation_timestamp.clone();
        let pods = [
            pod(
                "demo-lead-0-0-old00",
                "2026-01-01T00:00:00Z",
                "Running",
                true,
                "demo",
            ),
            pod(
                "demo-lead-0-0-new00",
                "2026-01-01T00:05:00Z",
                "Running",
                true,
                "demo",
            ),
            pod(
                "demo-lead-0-0-notrd",
                "2026-01-01T00:06:00Z",
                "Running",
                false,
                "demo",
            ),
            pod(
                "demo-lead-0-0-pendg",
                "2026-01-01T00:07:00Z",
                "Pending",
                false,
                "demo",
            ),
            gone,
        ];
        assert_eq!(
            choose_lead(&mc, &pods).unwrap().name_any(),
            "demo-lead-0-0-new00"
        );
    }

    #[test]
    fn no_ready_lead_pod_is_an_error_naming_the_pods_seen() {
        let mc = minicluster(json!({}), running());
        let pods = [pod(
            "demo-lead-0-0-notrd",
            "2026-01-01T00:06:00Z",
            "Running",
            false,
            "demo",
        )];
        let err = choose_lead(&mc, &pods).unwrap_err().to_string();
        assert_eq!(
            err,
            "MiniCluster team/demo has no ready lead broker pod (demo-lead-0-0-notrd Running, not ready)"
        );
        let err = choose_lead(&mc, &[]).unwrap_err().to_string();
        assert!(err.contains("(no lead pod)"), "{err}");
    }

    #[test]
    fn the_target_is_the_flux_container_and_the_view_s_mount_path() {
        let pods = [pod(
            "demo-lead-0-0-a",
            "2026-01-01T00:00:00Z",
            "Running",
            true,
            "demo",
        )];
        let t = target(&minicluster(json!({}), running()), &pods).unwrap();
        assert_eq!(
            t,
            Target {
                namespace: "team".into(),
                pod: "demo-lead-0-0-a".into(),
                container: "demo".into(),
                view: Some("/mnt/flux".into()),
                uri: "local:///run/flux-operator/broker/local".into(),
            }
        );
        // A named Flux container among others, a view elsewhere, or none.
        let spec = json!({
            "containers": [{"name": "side", "image": "x"},
                           {"name": "app", "image": "y", "runFlux": true}],
            "flux": {"container": {"mountPath": "/opt/my view"}},
        });
        let mut p = pod(
            "demo-lead-0-0-b",
            "2026-01-01T00:00:00Z",
            "Running",
            true,
            "app",
        );
        let t = target(&minicluster(spec, running()), std::slice::from_ref(&p)).unwrap();
        assert_eq!(
            (t.container.as_str(), t.view),
            ("app", Some("/opt/my view".into()))
        );
        let spec = json!({"flux": {"container": {"disable": true}}});
        p.spec.as_mut().unwrap().containers[0].name = "demo".into();
        let t = target(&minicluster(spec, running()), &[p]).unwrap();
        assert_eq!(t.view, None);
    }

    #[test]
    fn a_lead_pod_without_the_flux_container_is_an_error() {
        let pods = [pod(
            "demo-lead-0-0-a",
            "2026-01-01T00:00:00Z",
            "Running",
            true,
            "other",
        )];
        let err = target(&minicluster(json!({}), running()), &pods).unwrap_err();
        assert_eq!(
            err,
            Refusal::NoContainer {
                pod: "demo-lead-0-0-a".into(),
                container: "demo".into()
            }
        );
    }

    #[test]
    fn disable_socket_is_refused_unless_an_archive_keeps_the_socket() {
        let mc = minicluster(json!({"flux": {"disableSocket": true}}), running());
        assert_eq!(
            check_reachable(&mc),
            Err(Refusal::NoSocket("team/demo".into()))
        );
        assert!(
            check_reachable(&mc)
                .unwrap_err()
                .to_string()
                .contains("spec.flux.disableSocket")
        );
        let mc = minicluster(
            json!({"flux": {"disableSocket": true}, "archive": {"path": "/state/a.tar"}}),
            running(),
        );
        assert_eq!(check_reachable(&mc), Ok(()));
    }

    #[test]
    fn a_finished_or_unseen_minicluster_is_not_running_and_says_why() {
        let status = json!({"phase": "Failed", "conditions": [
            cond("Ready", "False", "NotAllReady", "0/2"),
            cond("Failed", "True", "BackoffLimitExceeded", "the lead broker failed")]});
        let err = check_reachable(&minicluster(json!({}), status)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "MiniCluster team/demo is Failed (Failed=True BackoffLimitExceeded: the lead broker failed)"
        );
        let err = check_reachable(&minicluster(json!({}), json!(null))).unwrap_err();
        assert!(err.to_string().contains("without a status yet"), "{err}");
        let starting = json!({"phase": "Starting", "readyBrokers": 1});
        assert_eq!(check_reachable(&minicluster(json!({}), starting)), Ok(()));
    }

    #[test]
    fn a_minicluster_s_pods_are_its_own_jobset_s_not_those_with_its_labels() {
        let mut mc = minicluster(json!({}), serde_json::Value::Null);
        mc.metadata.namespace = Some("ns".into());
        mc.metadata.uid = Some("mc-uid".into());
        let jobset = |uid: &str, owner: &str| -> PartialObjectMeta<JobSet> {
            serde_json::from_value(json!({
                "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": "demo", "namespace": "ns", "uid": uid,
                    "ownerReferences": [{"apiVersion": "flux-framework.org/v1alpha2",
                        "kind": "MiniCluster", "name": "demo", "uid": owner, "controller": true}]}
            }))
            .unwrap()
        };
        let pod = |name: &str, jobset_uid: Option<&str>| -> Pod {
            let mut labels = json!({NAME_LABEL: "demo", ROLE_LABEL: LEAD_JOB});
            let mut owners = json!([]);
            if let Some(uid) = jobset_uid {
                labels[JOBSET_UID_LABEL] = json!(uid);
                owners = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "demo-lead-0",
                    "uid": "job", "controller": true}]);
            }
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns",
                "labels": labels, "ownerReferences": owners}}))
            .unwrap()
        };
        let pods = [
            pod("new", Some("js-uid")),
            pod("of-the-deleted-one", Some("old-js-uid")),
            pod("by-hand", None),
        ];
        let names = |jobsets: &[PartialObjectMeta<JobSet>]| -> Vec<String> {
            own_pods(&mc, jobsets, &pods)
                .iter()
                .map(|p| p.name_any())
                .collect()
        };
        assert_eq!(names(&[jobset("js-uid", "mc-uid")]), ["new"]);
        // A JobSet of that name that this MiniCluster does not control: none is its.
        assert!(names(&[jobset("js-uid", "another-mc")]).is_empty());
        assert!(names(&[]).is_empty(), "no JobSet, no pods");
    }

    #[test]
    fn lead_pods_are_selected_by_the_operator_s_labels() {
        assert_eq!(
            lead_selector("demo"),
            "flux-framework.org/minicluster=demo,flux-framework.org/role=lead"
        );
        assert_eq!(
            lead_selector(""),
            "flux-framework.org/minicluster,flux-framework.org/role=lead"
        );
    }
}
