//! `manifests/pod-security.yaml` on the real API server: a MiniCluster is held at
//! `kubectl apply` to the Pod Security level its namespace enforces, refused with a message
//! naming the field, before any pod exists.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use flux_operator::api::MiniCluster;

use crate::common::{TestNamespace, admission_policies, wait_for};
use crate::operator::{example, install_crd};

const LEVEL_LABEL: &str = "pod-security.kubernetes.io/enforce";

/// A test namespace enforcing `level` (none: unlabeled), with the CRD and the policy.
async fn namespace(test: &str, level: Option<&str>) -> Result<TestNamespace> {
    let ns = TestNamespace::create(test).await?;
    install_crd(&ns.client).await?;
    let policy = format!("{}/manifests/pod-security.yaml", env!("CARGO_MANIFEST_DIR"));
    admission_policies(&ns.client, Path::new(&policy), true).await?;
    if let Some(level) = level {
        let namespaces: Api<Namespace> = Api::all(ns.client.clone());
        let patch = json!({"metadata": {"labels": {LEVEL_LABEL: level}}});
        namespaces
            .patch(&ns.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(ns)
}

/// Create `mc`; the API server's refusal message, or `None` when it was created (and is
/// deleted again: nothing runs in these tests).
async fn create(ns: &TestNamespace, mc: &MiniCluster) -> Result<Option<String>> {
    let mcs: Api<MiniCluster> = ns.api();
    match mcs.create(&PostParams::default(), mc).await {
        Ok(_) => {
            mcs.delete(&mc.name_any(), &DeleteParams::default()).await?;
            Ok(None)
        }
        Err(kube::Error::Api(s)) => Ok(Some(s.message)),
        Err(e) => Err(e.into()),
    }
}

/// The hello-world example named `name`, changed by `change` (a JSON merge of its spec).
fn variant(ns: &TestNamespace, name: &str, change: serde_json::Value) -> Result<MiniCluster> {
    let mut value = serde_json::to_value(example("hello-world", &ns.name)?)?;
    value["metadata"]["name"] = json!(name);
    merge(&mut value["spec"], &change);
    Ok(serde_json::from_value(value)?)
}

/// What a baseline namespace forbids, each with the field its refusal must name.
fn beyond_baseline(ns: &TestNamespace) -> Result<Vec<(MiniCluster, &'static str)>> {
    let app = |extra: serde_json::Value| {
        let mut c = json!({"image": "ubuntu:noble", "name": "app", "command": "hostname"});
        merge(&mut c, &extra);
        json!({"containers": [c]})
    };
    Ok(vec![
        (
            variant(
                ns,
                "privileged",
                app(json!({"securityContext": {"privileged": true}})),
            )?,
            "spec.containers[].securityContext.privileged (containers app)",
        ),
        (
            variant(
                ns,
                "host-root",
                app(json!({"volumes": {"root": {"path": "/host", "hostPath": "/"}}})),
            )?,
            "spec.containers[].volumes[].hostPath (containers app)",
        ),
        (
            variant(ns, "host-pid", json!({"pod": {"hostPID": true}}))?,
            "spec.pod.hostPID",
        ),
        (
            variant(
                ns,
                "sys-admin",
                app(json!({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}})),
            )?,
            "spec.containers[].securityContext.capabilities.add (containers app",
        ),
        (
            variant(
                ns,
                "unconfined",
                json!({"pod": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}}),
            )?,
            "spec.pod.securityContext",
        ),
    ])
}

/// The policy is in force (an admission policy takes a moment to load): a privileged
/// MiniCluster in `ns` (baseline or restricted) is refused.
async fn policy_in_force(ns: &TestNamespace) -> Result<()> {
    let (probe, _) = beyond_baseline(ns)?.remove(0);
    wait_for(
        "the pod security policy",
        Duration::from_secs(60),
        || async { Ok(create(ns, &probe).await?.map(|_| ())) },
    )
    .await
}

/// `patch` merged into `target` as a JSON merge patch merges (objects key by key).
fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        _ => *target = patch.clone(),
    }
}

#[tokio::test]
async fn a_baseline_namespace_refuses_privileged_host_path_host_pid_and_capabilities_naming_the_field()
-> Result<()> {
    let ns = namespace("psa-baseline", Some("baseline")).await?;
    policy_in_force(&ns).await?;
    for (mc, field) in beyond_baseline(&ns)? {
        let Some(message) = create(&ns, &mc).await? else {
            bail!("{} was accepted in a baseline namespace", mc.name_any());
        };
        assert!(message.contains(field), "{}: {message}", mc.name_any());
        assert!(
            message.contains("Pod Security level baseline") && message.contains(&ns.name),
            "{message}"
        );
    }
    // What baseline allows: the examples, and capabilities from its list.
    for name in [
        "hello-world",
        "batch",
        "interactive",
        "elastic",
        "restricted",
    ] {
        let mc = example(name, &ns.name)?;
        assert_eq!(create(&ns, &mc).await?, None, "examples/{name}.yaml");
    }
    let chown = variant(
        &ns,
        "chown",
        json!({"containers": [{"image": "ubuntu:noble", "name": "app",
            "securityContext": {"capabilities": {"add": ["CHOWN"]}}}]}),
    )?;
    assert_eq!(create(&ns, &chown).await?, None);
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_privileged_or_unlabeled_namespace_allows_what_a_pod_there_may_do() -> Result<()> {
    // Held to baseline first, so the policy is known to be in force when the others pass.
    let held = namespace("psa-held", Some("baseline")).await?;
    policy_in_force(&held).await?;
    for level in [Some("privileged"), None] {
        let ns = namespace("psa-open", level).await?;
        for (mc, _) in beyond_baseline(&ns)? {
            assert_eq!(
                create(&ns, &mc).await?,
                None,
                "{} at {level:?}",
                mc.name_any()
            );
        }
        ns.cleanup().await;
    }
    held.cleanup().await;
    Ok(())
}

/// A change to a MiniCluster's spec (its JSON).
type Change = fn(&mut serde_json::Value);

/// The restricted example changed by `change` (applied to its JSON), named `name`.
fn restricted_but(ns: &TestNamespace, name: &str, change: Change) -> Result<MiniCluster> {
    let mut value = serde_json::to_value(example("restricted", &ns.name)?)?;
    value["metadata"]["name"] = json!(name);
    change(&mut value["spec"]);
    Ok(serde_json::from_value(value)?)
}

#[tokio::test]
async fn a_restricted_namespace_takes_the_restricted_example_and_refuses_root_escalation_and_capabilities()
-> Result<()> {
    let ns = namespace("psa-restricted", Some("restricted")).await?;
    policy_in_force(&ns).await?;
    assert_eq!(create(&ns, &example("restricted", &ns.name)?).await?, None);
    let message = create(&ns, &example("hello-world", &ns.name)?)
        .await?
        .context("hello-world accepted")?;
    assert!(
        message.contains("Pod Security level restricted"),
        "{message}"
    );
    let cases: [(&str, Change, &str); 4] = [
        (
            "escalating",
            |s| s["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = json!(true),
            "allowPrivilegeEscalation must be false (containers escalating)",
        ),
        (
            "as-root",
            |s| s["pod"]["securityContext"]["runAsUser"] = json!(0),
            "runAsNonRoot: true and a runAsUser other than 0",
        ),
        (
            "capable",
            |s| {
                s["containers"][0]["securityContext"]["capabilities"] = json!({"drop": ["NET_RAW"]})
            },
            "capabilities.drop must hold ALL",
        ),
        (
            "raw-net",
            |s| s["containers"][0]["securityContext"]["capabilities"]["add"] = json!(["NET_RAW"]),
            "only NET_BIND_SERVICE",
        ),
    ];
    for (name, change, part) in cases {
        let message = create(&ns, &restricted_but(&ns, name, change)?)
            .await?
            .with_context(|| format!("{name} accepted"))?;
        assert!(message.contains(part), "{name}: {message}");
    }
    ns.cleanup().await;
    Ok(())
}

/// One security-relevant change to a MiniCluster's spec (its JSON).
struct Variant {
    name: &'static str,
    change: Change,
}

/// `securityContext` of the first container.
fn app_sc(s: &mut serde_json::Value) -> &mut serde_json::Value {
    &mut s["containers"][0]["securityContext"]
}

/// `securityContext` of the flux view's init container.
fn view_sc(s: &mut serde_json::Value) -> &mut serde_json::Value {
    &mut s["flux"]["container"]["securityContext"]
}

/// Every Pod Security Standards control a MiniCluster can touch, in the app's container, the
/// pod, the flux view's container and the services pod.
fn variants() -> Vec<Variant> {
    let v = |name, change| Variant { name, change };
    vec![
        v("as-given", |_| {}),
        v("privileged", |s| app_sc(s)["privileged"] = json!(true)),
        v("cap-sys-admin", |s| {
            app_sc(s)["capabilities"]["add"] = json!(["SYS_ADMIN"])
        }),
        v("cap-chown", |s| {
            app_sc(s)["capabilities"]["add"] = json!(["CHOWN"])
        }),
        v("cap-net-bind", |s| {
            app_sc(s)["capabilities"]["add"] = json!(["NET_BIND_SERVICE"])
        }),
        v("host-path", |s| {
            s["containers"][0]["volumes"] = json!({"root": {"path": "/host", "hostPath": "/"}})
        }),
        v("host-pid", |s| s["pod"]["hostPID"] = json!(true)),
        v("host-ipc", |s| s["pod"]["hostIPC"] = json!(true)),
        v("seccomp-unconfined", |s| {
            app_sc(s)["seccompProfile"] = json!({"type": "Unconfined"})
        }),
        v("pod-seccomp-unconfined", |s| {
            s["pod"]["securityContext"]["seccompProfile"] = json!({"type": "Unconfined"})
        }),
        v("apparmor-unconfined", |s| {
            app_sc(s)["appArmorProfile"] = json!({"type": "Unconfined"})
        }),
        v("pod-apparmor-unconfined", |s| {
            s["pod"]["securityContext"]["appArmorProfile"] = json!({"type": "Unconfined"})
        }),
        v(
            "apparmor-annotation",
            |s| {
                s["pod"]["annotations"] = json!({"container.apparmor.security.beta.kubernetes.io/hello-world": "unconfined"})
            },
        ),
        v("proc-unmasked", |s| {
            app_sc(s)["procMount"] = json!("Unmasked")
        }),
        v("selinux-spc", |s| {
            app_sc(s)["seLinuxOptions"] = json!({"type": "spc_t"})
        }),
        v("selinux-container-t", |s| {
            app_sc(s)["seLinuxOptions"] = json!({"type": "container_t"})
        }),
        v("selinux-user", |s| {
            app_sc(s)["seLinuxOptions"] = json!({"user": "sysadm_u"})
        }),
        v("sysctl-unsafe", |s| {
            s["pod"]["securityContext"]["sysctls"] =
                json!([{"name": "kernel.msgmax", "value": "65536"}])
        }),
        v("sysctl-safe", |s| {
            s["pod"]["securityContext"]["sysctls"] =
                json!([{"name": "net.ipv4.tcp_syncookies", "value": "1"}])
        }),
        v("pod-run-as-root", |s| {
            s["pod"]["securityContext"]["runAsUser"] = json!(0)
        }),
        v("pod-root-container-user", |s| {
            s["pod"]["securityContext"]["runAsUser"] = json!(0);
            app_sc(s)["runAsUser"] = json!(1000);
        }),
        v("escalation", |s| {
            app_sc(s)["allowPrivilegeEscalation"] = json!(true)
        }),
        v("run-as-non-root-false", |s| {
            app_sc(s)["runAsNonRoot"] = json!(false)
        }),
        v("no-drop-all", |s| {
            app_sc(s)["capabilities"]["drop"] = json!([])
        }),
        v("view-selinux-spc", |s| {
            view_sc(s)["seLinuxOptions"] = json!({"type": "spc_t"})
        }),
        v("view-apparmor-unconfined", |s| {
            view_sc(s)["appArmorProfile"] = json!({"type": "Unconfined"})
        }),
        v("view-proc-unmasked", |s| {
            view_sc(s)["procMount"] = json!("Unmasked")
        }),
        v("view-cap-net-admin", |s| {
            view_sc(s)["capabilities"]["add"] = json!(["NET_ADMIN"])
        }),
        v("view-cap-chown", |s| {
            view_sc(s)["capabilities"]["add"] = json!(["CHOWN"])
        }),
        v("services-privileged", |s| {
            s["services"] = json!([{"image": "ubuntu:noble", "name": "svc", "command": "sleep 1",
                "securityContext": {"privileged": true}}])
        }),
    ]
}

/// The pods the operator renders from `mc` (the brokers' and the services pod's), as the
/// Job controller would create them; `None` when the operator would refuse the spec itself.
fn rendered_pods(mc: &MiniCluster) -> Option<Vec<k8s_openapi::api::core::v1::Pod>> {
    use k8s_openapi::api::core::v1::Pod;
    let env = flux_operator::model::Environment {
        cluster_domain: "cluster.local".into(),
        view_image_volume: false,
    };
    let cluster = flux_operator::model::resolve(mc, &env).ok()?;
    let desired = flux_operator::render::desired(&cluster).ok()?;
    let mut templates: Vec<_> = desired
        .jobset
        .spec
        .replicated_jobs
        .iter()
        .filter_map(|r| r.template.spec.as_ref().map(|j| j.template.clone()))
        .collect();
    templates.extend(
        desired
            .services_job
            .and_then(|j| j.spec.map(|s| s.template)),
    );
    Some(
        templates
            .into_iter()
            .enumerate()
            .map(|(i, t)| Pod {
                metadata: kube::api::ObjectMeta {
                    name: Some(format!("{}-{i}", mc.name_any())),
                    ..t.metadata.unwrap_or_default()
                },
                spec: t.spec,
                status: None,
            })
            .collect(),
    )
}

/// Pod Security's verdict on `mc`'s pods in `ns` (server-side dry runs): the first refusal.
/// A pod the API server finds invalid (`procMount: Unmasked` wants `hostUsers: false`) is
/// refused too: it could not be created either.
async fn pod_security_verdict(
    ns: &TestNamespace,
    pods: &[k8s_openapi::api::core::v1::Pod],
) -> Result<Option<String>> {
    let api: Api<k8s_openapi::api::core::v1::Pod> = ns.api();
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    for pod in pods {
        match api.create(&dry, pod).await {
            Ok(_) => {}
            Err(kube::Error::Api(s))
                if s.message.contains("violates PodSecurity") || s.reason == "Invalid" =>
            {
                return Ok(Some(s.message));
            }
            Err(e) => bail!("dry run of pod {}: {e}", pod.name_any()),
        }
    }
    Ok(None)
}

/// The policy's verdict on `mc` in `ns` (a server-side dry run): its refusal, if any.
async fn policy_verdict(ns: &TestNamespace, mc: &MiniCluster) -> Result<Option<String>> {
    let mcs: Api<MiniCluster> = ns.api();
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match mcs.create(&dry, mc).await {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(s)) => Ok(Some(s.message)),
        Err(e) => Err(e.into()),
    }
}

/// For every control at both levels, the policy admits a MiniCluster exactly when Pod
/// Security admits the pods the operator renders from it: no MiniCluster the policy takes is
/// left Starting with `FailedCreate`, none is refused that would run. (A misspelled level,
/// which Pod Security reads as restricted and the policy too, cannot be set here: the API
/// server refuses the label.)
#[tokio::test]
async fn the_policy_admits_a_minicluster_exactly_when_pod_security_admits_its_pods() -> Result<()> {
    let mut disagreements = Vec::new();
    let mut judged = 0;
    for (level, base) in [("baseline", "hello-world"), ("restricted", "restricted")] {
        let ns = namespace("psa-agree", Some(level)).await?;
        policy_in_force(&ns).await?;
        for variant in variants() {
            let mut value = serde_json::to_value(example(base, &ns.name)?)?;
            value["metadata"]["name"] = json!(variant.name);
            (variant.change)(&mut value["spec"]);
            let mc: MiniCluster = serde_json::from_value(value)?;
            let Some(pods) = rendered_pods(&mc) else {
                eprintln!(
                    "{level} {}: the operator refuses the spec itself",
                    variant.name
                );
                continue;
            };
            let policy = policy_verdict(&ns, &mc).await?;
            let pod_security = pod_security_verdict(&ns, &pods).await?;
            judged += 1;
            eprintln!(
                "{level} {}: policy {}, Pod Security {}",
                variant.name,
                if policy.is_some() {
                    "refuses"
                } else {
                    "admits"
                },
                if pod_security.is_some() {
                    "refuses"
                } else {
                    "admits"
                }
            );
            if policy.is_some() != pod_security.is_some() {
                disagreements.push(format!(
                    "{level} {}: policy {policy:?}, Pod Security {pod_security:?}",
                    variant.name
                ));
            }
        }
        ns.cleanup().await;
    }
    assert!(judged >= 50, "only {judged} variants judged");
    assert!(
        disagreements.is_empty(),
        "{} disagreements:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    Ok(())
}

/// Once a namespace's level is raised above what a MiniCluster asks for, changes that leave
/// its pods as they are still pass (a suspension, a label, its finalizers removed as it is
/// deleted), while a new MiniCluster like it is refused. (Its containers cannot change: the
/// CRD's immutability policy keeps them.)
#[tokio::test]
async fn a_raised_level_still_lets_a_minicluster_be_suspended_labelled_and_deleted() -> Result<()> {
    let ns = namespace("psa-raised", Some("privileged")).await?;
    let held = namespace("psa-raised-probe", Some("baseline")).await?;
    policy_in_force(&held).await?;
    held.cleanup().await;
    let (mc, _) = beyond_baseline(&ns)?.remove(0);
    let name = mc.name_any();
    let mcs: Api<MiniCluster> = ns.api();
    mcs.create(&PostParams::default(), &mc).await?;
    let namespaces: Api<Namespace> = Api::all(ns.client.clone());
    let patch = json!({"metadata": {"labels": {LEVEL_LABEL: "baseline"}}});
    namespaces
        .patch(&ns.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let merge = |patch: serde_json::Value| {
        let mcs = mcs.clone();
        let name = name.clone();
        async move {
            mcs.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(drop)
        }
    };
    // The new level is in force: another MiniCluster like it is refused.
    let mut again = mc.clone();
    again.metadata.name = Some(format!("{name}-again"));
    let refused = wait_for(
        "the raised level in force",
        Duration::from_secs(60),
        || async { create(&ns, &again).await },
    )
    .await?;
    assert!(refused.contains("Pod Security level baseline"), "{refused}");
    for (what, patch) in [
        ("suspended", json!({"spec": {"suspend": true}})),
        ("labelled", json!({"metadata": {"labels": {"team": "a"}}})),
        (
            "given a finalizer",
            json!({"metadata": {"finalizers": ["e2e.flux-framework.org/hold"]}}),
        ),
    ] {
        merge(patch)
            .await
            .with_context(|| format!("{name} could not be {what}"))?;
    }
    mcs.delete(&name, &DeleteParams::default()).await?;
    merge(json!({"metadata": {"finalizers": null}}))
        .await
        .context("its finalizer could not be removed while it is deleted")?;
    crate::common::wait_gone("the MiniCluster", Duration::from_secs(60), &mcs, &name).await?;
    ns.cleanup().await;
    Ok(())
}
