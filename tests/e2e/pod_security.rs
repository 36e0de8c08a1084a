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
