//! The operator end to end: the real binary, run against the test cluster with its watch
//! limited to the test's namespace, reconciling MiniClusters into JobSets that the real
//! JobSet controller runs on simulated nodes.
//!
//! Pods do not run containers here (KWOK); a test says "the lead broker finished" by
//! annotating the lead pod with the harness's complete-after annotation.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{CustomResourceExt, ResourceExt};
use serde_json::json;

use flux_operator::api::{MiniCluster, MiniClusterStatus, NAME_LABEL, Phase, ROLE_LABEL};
use flux_operator::jobset::JobSet;

use crate::common::{
    COMPLETE_AFTER, IMMUTABLE_POLICY_FILE, MINICLUSTER_CRD, Operator, TestNamespace,
    admission_policies, crd_established, wait_for, wait_gone,
};

pub const TIMEOUT: Duration = Duration::from_secs(90);

/// Install (or update) the MiniCluster CRD and wait until it is established, with the
/// policy that keeps a running MiniCluster's spec (`crds/`, as a user installs them).
pub async fn install_crd(client: &kube::Client) -> Result<()> {
    let policy = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(IMMUTABLE_POLICY_FILE);
    admission_policies(client, &policy, true).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = MiniCluster::crd();
    crds.patch(
        &crd.name_any(),
        &PatchParams::apply("flux-operator-e2e").force(),
        &Patch::Apply(&crd),
    )
    .await?;
    crd_established(client, MINICLUSTER_CRD, Duration::from_secs(30)).await
}

pub fn example(name: &str, namespace: &str) -> Result<MiniCluster> {
    let path = format!("{}/examples/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    let mut mc: MiniCluster = serde_norway::from_str(&std::fs::read_to_string(&path)?)?;
    mc.metadata.namespace = Some(namespace.to_string());
    Ok(mc)
}

/// A test namespace with the MiniCluster CRD installed and the operator running for it.
pub struct Setup {
    pub ns: TestNamespace,
    pub operator: Operator,
    pub mcs: Api<MiniCluster>,
}

/// Namespace, CRD and operator for one test.
pub async fn setup(test: &str) -> Result<Setup> {
    let ns = TestNamespace::create(test).await?;
    install_crd(&ns.client).await?;
    let operator = Operator::start(&ns.name)?;
    let mcs = ns.api();
    Ok(Setup { ns, operator, mcs })
}

/// The hello-world example at `size` brokers, one task each.
pub fn hello(namespace: &str, size: i32) -> Result<MiniCluster> {
    let mut mc = example("hello-world", namespace)?;
    mc.spec.size = size;
    mc.spec.tasks = size;
    Ok(mc)
}

/// A condition of the MiniCluster's status: (status, reason, message).
pub fn mc_condition(mc: &MiniCluster, type_: &str) -> Option<(String, String, String)> {
    let c = mc
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Wait until `name` is Running with `size` brokers, every one ready.
pub async fn running_at(api: &Api<MiniCluster>, name: &str, size: i32) -> Result<MiniCluster> {
    running_when(api, name, size, false).await
}

/// Wait until queued `name` is Running with `size` brokers, every one ready, on Kueue's
/// admission of that size (`Admitted` True): after a queued resize, brokers the JobSet starts
/// before Kueue stops it run on the old size's admission (`Admitted` False, `Resized`).
pub async fn admitted_running_at(
    api: &Api<MiniCluster>,
    name: &str,
    size: i32,
) -> Result<MiniCluster> {
    running_when(api, name, size, true).await
}

async fn running_when(
    api: &Api<MiniCluster>,
    name: &str,
    size: i32,
    admitted: bool,
) -> Result<MiniCluster> {
    let what = if admitted { ", admitted" } else { "" };
    wait_for(
        &format!("{name} running with {size} brokers{what}"),
        Duration::from_secs(120),
        || async {
            let mc = api.get(name).await?;
            let s = mc.status.clone().unwrap_or_default();
            let is_admitted = mc_condition(&mc, "Admitted").is_some_and(|c| c.0 == "True");
            Ok((s.phase == Some(Phase::Running)
                && s.ready_brokers == size
                && s.size == size
                && (is_admitted || !admitted))
                .then_some(mc))
        },
    )
    .await
}

pub async fn wait_phase(api: &Api<MiniCluster>, name: &str, phase: Phase) -> Result<MiniCluster> {
    wait_for(
        &format!("MiniCluster {name} {phase:?}"),
        TIMEOUT,
        || async {
            let mc = api.get(name).await?;
            Ok((mc.status.as_ref().and_then(|s| s.phase) == Some(phase)).then_some(mc))
        },
    )
    .await
}

fn owned_by(obj: &impl ResourceExt, mc: &MiniCluster) -> bool {
    obj.owner_references()
        .iter()
        .any(|o| Some(&o.uid) == mc.metadata.uid.as_ref() && o.controller == Some(true))
}

async fn labelled<K>(api: &Api<K>, mc: &str) -> Result<Vec<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .list(&ListParams::default().labels(&format!("{NAME_LABEL}={mc}")))
        .await?
        .items)
}

pub async fn pods_of_role(ns: &TestNamespace, mc: &str, role: &str) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = ns.api();
    Ok(pods
        .list(&ListParams::default().labels(&format!("{NAME_LABEL}={mc},{ROLE_LABEL}={role}")))
        .await?
        .items)
}

pub async fn finish_lead(ns: &TestNamespace, mc: &str) -> Result<()> {
    let pods: Api<Pod> = ns.api();
    for pod in pods_of_role(ns, mc, "lead").await? {
        let patch = json!({"metadata": {"annotations": {COMPLETE_AFTER: "1s"}}});
        pods.patch(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    Ok(())
}

/// The host names of `[bootstrap] hosts`, with `prefix[a-b]` ranges expanded.
fn hosts_in_broker_config(text: &str) -> Result<Vec<String>> {
    let table: toml::Table = text.parse()?;
    let hosts = table["bootstrap"]["hosts"]
        .as_array()
        .context("bootstrap.hosts")?;
    let mut out = Vec::new();
    for entry in hosts {
        let host = entry["host"].as_str().context("host")?;
        match host.split_once('[') {
            None => out.push(host.to_string()),
            Some((prefix, range)) => {
                let range = range.trim_end_matches(']');
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                for i in a.parse::<u32>()?..=b.parse::<u32>()? {
                    out.push(format!("{prefix}{i}"));
                }
            }
        }
    }
    Ok(out)
}

pub fn kubectl() -> PathBuf {
    let cache = std::env::var("E2E_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            let base = std::env::var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|_| {
                    PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache")
                });
            base.join("flux-operator-rs/bin")
        });
    cache.join("kubectl")
}

/// Done-when 1 and 5: hello world with 4 brokers comes up, finishes, and is measured.
#[tokio::test]
async fn hello_world_runs_to_completion_with_metrics() -> Result<()> {
    let Setup { ns, operator, mcs } = setup("hello").await?;
    let mc = mcs
        .create(&PostParams::default(), &example("hello-world", &ns.name)?)
        .await?;
    let name = mc.name_any();

    let ready = wait_phase(&mcs, &name, Phase::Running).await?;
    let status = ready.status.clone().unwrap_or_default();
    assert_eq!(status.ready_brokers, 4, "{status:?}");
    assert_eq!(status.size, 4);
    assert_eq!(status.job_set, name);
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "{status:?}"
    );
    assert_eq!(status.observed_generation, ready.metadata.generation);

    // Exactly the Secret, the ConfigMap and the JobSet with two replicated jobs.
    let secrets = labelled(&ns.api::<Secret>(), &name).await?;
    let config_maps = labelled(&ns.api::<ConfigMap>(), &name).await?;
    let jobsets = labelled(&ns.api::<JobSet>(), &name).await?;
    assert_eq!(
        secrets.iter().map(|s| s.name_any()).collect::<Vec<_>>(),
        [format!("{name}-curve")]
    );
    assert_eq!(config_maps.len(), 1, "one ConfigMap");
    assert!(
        config_maps[0]
            .name_any()
            .starts_with(&format!("{name}-flux-")),
        "named by its content: {}",
        config_maps[0].name_any()
    );
    assert_eq!(config_maps[0].immutable, Some(true));
    assert_eq!(jobsets.len(), 1);
    let rjobs: Vec<_> = jobsets[0]
        .spec
        .replicated_jobs
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(rjobs, ["lead", "workers"]);
    for owned in [
        owned_by(&secrets[0], &ready),
        owned_by(&config_maps[0], &ready),
        owned_by(&jobsets[0], &ready),
    ] {
        assert!(owned, "every object is controller-owned by the MiniCluster");
    }

    // Four pods, running, with exactly the host names the broker config lists.
    let pods = labelled(&ns.api::<Pod>(), &name).await?;
    assert_eq!(pods.len(), 4);
    let broker_toml = config_maps[0]
        .data
        .as_ref()
        .and_then(|d| d.get("broker.toml"))
        .context("broker.toml")?;
    let listed = hosts_in_broker_config(broker_toml)?;
    let mut hostnames: Vec<String> = pods
        .iter()
        .map(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.hostname.clone())
                .unwrap_or_default()
        })
        .collect();
    hostnames.sort();
    let mut expected = listed.clone();
    expected.sort();
    assert_eq!(
        hostnames, expected,
        "pod host names are the broker config's hosts"
    );
    for pod in &pods {
        assert_eq!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
        assert!(
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some(),
            "bound to a node"
        );
        assert_eq!(
            pod.spec.as_ref().and_then(|s| s.subdomain.as_deref()),
            Some(name.as_str())
        );
    }

    // kubectl shows it with the printer columns.
    let out = Command::new(kubectl())
        .args(["get", "minicluster", &name, "-n", &ns.name])
        .output()?;
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "SIZE", "READY", "PHASE", "RESTARTS", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        &row[..5],
        [name.as_str(), "4", "4", "Running", "0"],
        "{table}"
    );

    // Cluster-up was observed.
    let up_count = format!(
        "flux_operator_minicluster_up_seconds_count{{namespace=\"{}\"}} 1",
        ns.name
    );
    let metrics = operator.metrics().await?;
    assert!(metrics.contains(&up_count), "{metrics}");

    // The lead broker finishes: the cluster succeeds and the followers go.
    finish_lead(&ns, &name).await?;
    let done = wait_phase(&mcs, &name, Phase::Succeeded).await?;
    let status = done.status.unwrap_or_default();
    assert!(status.completion_time.is_some());
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Succeeded" && c.status == "True")
    );
    wait_for("follower pods gone", TIMEOUT, || async {
        Ok(pods_of_role(&ns, &name, "workers")
            .await?
            .is_empty()
            .then_some(()))
    })
    .await?;
    let teardown = format!(
        "flux_operator_minicluster_teardown_seconds_count{{namespace=\"{}\"}} 1",
        ns.name
    );
    wait_for("teardown observed", TIMEOUT, || async {
        Ok(operator.metrics().await?.contains(&teardown).then_some(()))
    })
    .await?;
    ns.cleanup().await;
    Ok(())
}

/// Done-when 2: the API server refuses invalid specs and names the field.
#[tokio::test]
async fn api_server_refuses_invalid_specs() -> Result<()> {
    let ns = TestNamespace::create("invalid").await?;
    install_crd(&ns.client).await?;
    let mcs: Api<MiniCluster> = ns.api();
    let refused = |mc: MiniCluster| {
        let mcs = mcs.clone();
        async move {
            match mcs.create(&PostParams::default(), &mc).await {
                Err(kube::Error::Api(s)) if s.code == 422 => Ok(s.message),
                Err(e) => bail!("unexpected error: {e}"),
                Ok(_) => bail!(
                    "the API server accepted an invalid MiniCluster {}",
                    mc.name_any()
                ),
            }
        }
    };

    let mut mc = example("hello-world", &ns.name)?;
    mc.spec.max_size = Some(2);
    let msg = refused(mc).await?;
    assert!(
        msg.contains("spec.size") && msg.contains("maxSize"),
        "{msg}"
    );

    let mut mc = example("hello-world", &ns.name)?;
    let mut second = mc.spec.containers[0].clone();
    second.name = "second".into();
    second.run_flux = true;
    mc.spec.containers[0].name = "first".into();
    mc.spec.containers[0].run_flux = true;
    mc.spec.containers.push(second);
    let msg = refused(mc).await?;
    assert!(
        msg.contains("spec.containers") && msg.contains("runFlux"),
        "{msg}"
    );

    let mut mc = example("hello-world", &ns.name)?;
    mc.metadata.name = Some(format!("a{}", "b".repeat(46)));
    let msg = refused(mc).await?;
    assert!(
        msg.contains("metadata.name") && msg.contains("too long"),
        "{msg}"
    );

    // Bounded input: a text past its bound, and programs past their sum.
    let mut mc = example("hello-world", &ns.name)?;
    mc.spec.containers[0]
        .environment
        .insert("BIG".into(), "x".repeat(5000));
    let msg = refused(mc).await?;
    assert!(
        msg.contains("spec.containers[0].environment.BIG") && msg.contains("4096"),
        "{msg}"
    );
    let mut mc = example("hello-world", &ns.name)?;
    let program = "x".repeat(65536);
    let c = &mut mc.spec.containers[0];
    (
        c.commands.init,
        c.commands.pre,
        c.commands.post,
        c.commands.worker_pre,
    ) = (program.clone(), program.clone(), program.clone(), program);
    let msg = refused(mc).await?;
    assert!(msg.contains("at most 262144 characters together"), "{msg}");

    // Immutable fields: `size` may change (within maxSize), `tasks` may not.
    let mut elastic = example("hello-world", &ns.name)?;
    elastic.spec.max_size = Some(6);
    let mc = mcs.create(&PostParams::default(), &elastic).await?;
    let name = mc.name_any();
    policy_in_force(&mcs, &name).await?;
    let ok = mcs
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"size": 3}})),
        )
        .await;
    assert!(ok.is_ok(), "size is mutable: {ok:?}");
    match mcs
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"tasks": 8}})),
        )
        .await
    {
        Err(kube::Error::Api(s)) => assert!(
            s.message.contains("spec.tasks") && s.message.contains("immutable"),
            "{}",
            s.message
        ),
        other => bail!("changing tasks was not refused: {other:?}"),
    }
    match mcs
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"maxSize": 8}})),
        )
        .await
    {
        Err(kube::Error::Api(s)) => assert!(s.message.contains("immutable"), "{}", s.message),
        other => bail!("changing maxSize was not refused: {other:?}"),
    }
    match mcs
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"jobLabels": {"a": "b"}}})),
        )
        .await
    {
        Err(kube::Error::Api(s)) => assert!(s.message.contains("immutable"), "{}", s.message),
        other => bail!("adding jobLabels was not refused: {other:?}"),
    }
    // A field absent at creation may not be added later either (the CRD's transition
    // rules, which this policy replaced, ran only where both had the field).
    match mcs
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"placement": {"required": "example.com/rack"}}})),
        )
        .await
    {
        Err(kube::Error::Api(s)) => assert!(
            s.message.contains("spec.placement") && s.message.contains("immutable"),
            "{}",
            s.message
        ),
        other => bail!("adding placement was not refused: {other:?}"),
    }
    // Without maxSize the broker config lists only `size` hosts: size is fixed.
    let mut fixed = example("hello-world", &ns.name)?;
    fixed.metadata.name = Some("fixed".into());
    mcs.create(&PostParams::default(), &fixed).await?;
    match mcs
        .patch(
            "fixed",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"size": 5}})),
        )
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert!(s.message.contains("spec.maxSize is set"), "{}", s.message)
        }
        other => bail!("resizing without maxSize was not refused: {other:?}"),
    }
    // `kubectl scale` (the scale subresource) is held to the same rule.
    let scale = json!({"spec": {"replicas": 5}});
    match mcs
        .patch_scale("fixed", &PatchParams::default(), &Patch::Merge(&scale))
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert!(s.message.contains("spec.maxSize is set"), "{}", s.message)
        }
        other => bail!("scaling without maxSize was not refused: {other:?}"),
    }
    // Labels and annotations stay the user's to change.
    let labelled = json!({"metadata": {"labels": {"team": "a"}}});
    mcs.patch("fixed", &PatchParams::default(), &Patch::Merge(&labelled))
        .await?;
    ns.cleanup().await;
    Ok(())
}

/// Wait until the API server's admission has seen the immutability policy that
/// `install_crd` installed (a moment after it): a dry-run change of `spec.tasks` to MiniCluster
/// `name` is refused.
async fn policy_in_force(mcs: &Api<MiniCluster>, name: &str) -> Result<()> {
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let change = json!({"spec": {"tasks": 7}});
    wait_for("the immutability policy in force", TIMEOUT, || async {
        match mcs.patch(name, &dry, &Patch::Merge(&change)).await {
            Err(kube::Error::Api(s)) if s.message.contains("spec.tasks is immutable") => {
                Ok(Some(()))
            }
            Ok(_) => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await
}

/// A user's file as `kubectl apply` sends it: `size` brokers (up to 4), one container.
fn users_file(ns: &str, name: &str, size: i32) -> serde_json::Value {
    json!({
        "apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"size": size, "maxSize": 4,
                 "containers": [{"image": "rockylinux:9", "command": "sleep infinity"}]},
    })
}

/// The namespace's MiniClusters as JSON, not through the operator's types.
fn minicluster_json(ns: &TestNamespace) -> Api<kube::api::DynamicObject> {
    let kind = kube::api::ApiResource::erase::<MiniCluster>(&());
    Api::namespaced_with(ns.client.clone(), &ns.name, &kind)
}

/// MiniCluster `name` as the API server stores it.
async fn stored_json(ns: &TestNamespace, name: &str) -> Result<serde_json::Value> {
    Ok(serde_json::to_value(minicluster_json(ns).get(name).await?)?)
}

/// `kubectl ARGS -f FILE` with `doc` as the file; its output, failing on a refusal.
fn kubectl_with(doc: &serde_json::Value, args: &[&str]) -> Result<String> {
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), serde_json::to_vec(doc)?)?;
    let path = file.path().to_str().context("a temporary path")?;
    let out = Command::new(kubectl())
        .args(args)
        .args(["-f", path])
        .output()?;
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        bail!(
            "kubectl {args:?} refused: {}{said}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(said)
}

/// The stored spec is what the file said and the defaults that are values of their own; a
/// switch or a section left out stays out (api::defaults), and a container keeps its
/// defaults.
#[tokio::test]
async fn a_new_minicluster_stores_what_was_written_and_only_defaults_that_say_something()
-> Result<()> {
    let ns = TestNamespace::create("stored-spec").await?;
    install_crd(&ns.client).await?;
    kubectl_with(&users_file(&ns.name, "plain", 2), &["apply"])?;
    let stored = stored_json(&ns, "plain").await?;
    let spec = stored["spec"].as_object().context("a stored spec")?;
    let keys: Vec<&str> = spec.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "containers",
            "deadlineSeconds",
            "maxSize",
            "size",
            "startupOrder",
            "tasks"
        ],
        "stored: {}",
        stored["spec"]
    );
    let container = &stored["spec"]["containers"][0];
    assert_eq!(container["batch"], false, "{container}");
    assert_eq!(container["commands"], json!({}), "{container}");
    Ok(())
}

/// A MiniCluster stored by an older CRD, which wrote every default (`false`, `{}`, the whole
/// `flux` section) into it, takes its file applied again with a new size after the upgrade,
/// client-side and server-side: the containers list an apply sends whole still defaults to
/// what that CRD stored, so the immutability policy sees no change; what it stored stays.
#[tokio::test]
async fn a_file_applied_again_to_a_minicluster_an_older_crd_stored_is_taken() -> Result<()> {
    let ns = TestNamespace::create("older-crd").await?;
    install_crd(&ns.client).await?;
    let file = users_file(&ns.name, "older", 2);
    let mut stored = file.clone();
    let last_applied = serde_json::to_string(&file)?;
    stored["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/last-applied-configuration": last_applied});
    let older = json!({
        "archive": {}, "cleanup": false, "interactive": false, "shareProcessNamespace": false,
        "suspend": false,
        "flux": {"bursting": {}, "completeWorkers": false, "connectTimeout": "5s",
                 "container": {"disable": false,
                               "image": "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble",
                               "mountPath": "/mnt/flux", "name": "flux-view", "pullAlways": false},
                 "disableSocket": false, "logLevel": 6, "minimalService": false,
                 "noWaitSocket": false, "scheduler": {"simple": false}},
        "logging": {"debug": false, "quiet": false, "strict": false, "timed": false,
                    "zeromq": false},
        "network": {"disableAffinity": false}, "pod": {"hostIPC": false, "hostPID": false},
    });
    for (k, v) in older.as_object().context("the older defaults")? {
        stored["spec"][k] = v.clone();
    }
    stored["spec"]["containers"][0] = json!({
        "image": "rockylinux:9", "command": "sleep infinity", "batch": false,
        "batchRaw": false, "commands": {}, "launcher": false, "lifeCycle": {},
        "noWrapEntrypoint": false, "pullAlways": false, "runFlux": false,
    });
    // Through the API, not `kubectl create`, which writes its own body as the last applied.
    minicluster_json(&ns)
        .create(&PostParams::default(), &serde_json::from_value(stored)?)
        .await?;
    let mcs: Api<MiniCluster> = ns.api();
    policy_in_force(&mcs, "older").await?;

    kubectl_with(&users_file(&ns.name, "older", 3), &["apply"])?;
    let after = stored_json(&ns, "older").await?;
    assert_eq!(after["spec"]["size"], 3);
    kubectl_with(
        &users_file(&ns.name, "older", 4),
        &["apply", "--server-side", "--force-conflicts"],
    )?;
    let after = stored_json(&ns, "older").await?;
    assert_eq!(after["spec"]["size"], 4);
    assert_eq!(
        after["spec"]["logging"], older["logging"],
        "what it stored stays"
    );
    assert_eq!(after["spec"]["flux"], older["flux"], "what it stored stays");
    Ok(())
}

/// Done-when 3: deleting a MiniCluster removes everything it owned.
#[tokio::test]
async fn deleting_a_minicluster_removes_what_it_owned() -> Result<()> {
    let Setup { ns, operator, mcs } = setup("delete").await?;
    let mc = hello(&ns.name, 2)?;
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;
    let gauge = format!(
        "flux_operator_miniclusters{{namespace=\"{}\",phase=\"Running\"}} 1",
        ns.name
    );
    wait_for("the phase gauge counts it", TIMEOUT, || async {
        Ok(operator.metrics().await?.contains(&gauge).then_some(()))
    })
    .await?;

    mcs.delete(&name, &DeleteParams::background()).await?;
    wait_for("owned objects gone", TIMEOUT, || async {
        let left = labelled(&ns.api::<Secret>(), &name).await?.len()
            + labelled(&ns.api::<ConfigMap>(), &name).await?.len()
            + labelled(&ns.api::<JobSet>(), &name).await?.len()
            + labelled(&ns.api::<Pod>(), &name).await?.len();
        Ok((left == 0).then_some(()))
    })
    .await?;
    let in_namespace = format!("flux_operator_miniclusters{{namespace=\"{}\"", ns.name);
    wait_for("the phase gauge forgets it", TIMEOUT, || async {
        Ok((!operator.metrics().await?.contains(&in_namespace)).then_some(()))
    })
    .await?;
    ns.cleanup().await;
    Ok(())
}

/// `kubectl delete --cascade=orphan`: the MiniCluster goes, its JobSet and pods stay (the
/// operator deletes a deleted MiniCluster's JobSet itself, ahead of the garbage collector,
/// but never one the delete orphaned).
#[tokio::test]
async fn an_orphaning_delete_of_a_minicluster_leaves_its_jobset_and_pods() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("orphan").await?;
    let mc = hello(&ns.name, 2)?;
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;
    let jobsets = ns.api::<JobSet>();
    let before = jobsets.get(&name).await?;

    let orphan = DeleteParams {
        propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    mcs.delete(&name, &orphan).await?;
    wait_gone("the MiniCluster gone", TIMEOUT, &mcs, &name).await?;
    // Long enough for the operator's delete (it follows the watch event within
    // milliseconds) and the collector's.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = jobsets.get(&name).await?;
    assert_eq!(after.metadata.uid, before.metadata.uid, "the same JobSet");
    assert!(
        after.metadata.deletion_timestamp.is_none(),
        "not being deleted"
    );
    assert!(
        after
            .metadata
            .owner_references
            .iter()
            .flatten()
            .all(|o| o.kind != "MiniCluster"),
        "orphaned: {:?}",
        after.metadata.owner_references
    );
    let pods = labelled(&ns.api::<Pod>(), &name).await?;
    assert_eq!(pods.len(), 2, "its pods stay");
    ns.cleanup().await;
    Ok(())
}

/// Done-when 4: an operator killed mid-creation and started again leaves no duplicate, no
/// orphan, and the same certificate.
/// A new MiniCluster reads Pending from its create on, before any operator has seen it (the
/// CRD's default for an absent status), and the operator's first status write says more:
/// none of the versions a watch sees from the create to Running is a written status that says
/// only Pending.
#[tokio::test]
async fn a_new_cluster_is_pending_from_its_create_and_no_status_write_says_only_that() -> Result<()>
{
    let ns = TestNamespace::create("first-status").await?;
    install_crd(&ns.client).await?;
    let mcs: Api<MiniCluster> = ns.api();
    let created = mcs
        .create(&PostParams::default(), &hello(&ns.name, 2)?)
        .await?;
    let name = created.name_any();
    let read = mcs
        .get(&name)
        .await?
        .status
        .context("a status, the CRD's default")?;
    assert_eq!(
        read,
        MiniClusterStatus::unwritten(),
        "no operator yet: Pending and nothing else"
    );

    let version = created.resource_version().context("resourceVersion")?;
    let watch = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut events = mcs.watch(&watch, &version).await?.boxed();
    let _operator = Operator::start(&ns.name)?;
    let seen = tokio::time::timeout(TIMEOUT, async {
        let mut seen = Vec::new();
        while let Some(event) = events.try_next().await? {
            let WatchEvent::Modified(mc) = event else {
                continue;
            };
            let status = mc.status.unwrap_or_default();
            let running = status.phase == Some(Phase::Running);
            seen.push(status);
            if running {
                return anyhow::Ok(seen);
            }
        }
        bail!("the watch ended before Running")
    })
    .await
    .context("Running within the timeout")??;
    for status in &seen {
        assert!(
            status.is_unwritten() || status.phase != Some(Phase::Pending),
            "a status write that says only Pending: {status:?}"
        );
    }
    let running = seen.last().context("Running")?;
    assert_eq!(
        (
            running.job_set.as_str(),
            running.curve_secret.as_str(),
            running.ready_brokers
        ),
        (name.as_str(), format!("{name}-curve").as_str(), 2),
        "the first status names what was made"
    );
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn operator_restart_mid_creation_is_harmless() -> Result<()> {
    let ns = TestNamespace::create("restart").await?;
    install_crd(&ns.client).await?;
    let mut operator = Operator::start(&ns.name)?;
    let port = operator.metrics_port;
    let mcs: Api<MiniCluster> = ns.api();
    let mc = hello(&ns.name, 3)?;
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();

    let secrets: Api<Secret> = ns.api();
    let secret_name = format!("{name}-curve");
    let first = wait_for("certificate Secret", TIMEOUT, || async {
        Ok(secrets.get_opt(&secret_name).await?)
    })
    .await?;
    operator.kill();
    drop(operator);
    let _operator = Operator::start_on(&ns.name, port)?;

    let running = wait_phase(&mcs, &name, Phase::Running).await?;
    let second = secrets.get(&secret_name).await?;
    assert_eq!(
        first.data, second.data,
        "the certificate survived the restart unchanged"
    );
    assert_eq!(
        first.metadata.uid, second.metadata.uid,
        "the Secret was not recreated"
    );
    let all_secrets = labelled(&secrets, &name).await?;
    let config_maps = labelled(&ns.api::<ConfigMap>(), &name).await?;
    let jobsets = labelled(&ns.api::<JobSet>(), &name).await?;
    assert_eq!(
        (all_secrets.len(), config_maps.len(), jobsets.len()),
        (1, 1, 1),
        "no duplicates"
    );
    assert!(
        owned_by(&all_secrets[0], &running)
            && owned_by(&config_maps[0], &running)
            && owned_by(&jobsets[0], &running)
    );
    assert_eq!(labelled(&ns.api::<Pod>(), &name).await?.len(), 3);
    ns.cleanup().await;
    Ok(())
}

/// Done-when 6: the install manifests apply (server-side dry run) to a real API server.
#[tokio::test]
async fn install_manifests_apply_with_server_side_dry_run() -> Result<()> {
    let ns = TestNamespace::create("manifests").await?;
    install_crd(&ns.client).await?;
    // The manifests create their own namespace; a dry run cannot put objects into a
    // namespace it only pretends to create, so make it exist first.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(ns.client.clone());
    let system = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-operator-system"}});
    namespaces
        .patch(
            "flux-operator-system",
            &PatchParams::apply("flux-operator-e2e"),
            &Patch::Apply(&system),
        )
        .await?;
    let manifests = format!("{}/manifests", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(kubectl())
        .args([
            "apply",
            "--server-side",
            "--dry-run=server",
            "--field-manager=flux-operator-e2e",
            "-k",
            &manifests,
        ])
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl apply failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for kind in [
        "customresourcedefinition",
        "clusterrole",
        "deployment",
        "service",
        "serviceaccount",
    ] {
        assert!(stdout.contains(kind), "{kind} in the dry run: {stdout}");
    }
    ns.cleanup().await;
    Ok(())
}
