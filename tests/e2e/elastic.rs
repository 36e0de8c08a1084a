//! A running MiniCluster changes size: the followers Job resizes (JobSet's ElasticJobSet),
//! pods come and go, status follows; the scale subresource refuses sizes above maxSize.

use std::process::Command;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use flux_operator::api::{MiniCluster, NAME_LABEL, Phase};
use flux_operator::jobset::JobSet;

use crate::common::{TestNamespace, pod_phase, wait_for};
use crate::operator::{Setup, example, kubectl, setup, wait_phase};

const TIMEOUT: Duration = Duration::from_secs(90);

/// Waits until `size` broker pods run and are ready, status agrees, and the JobSet's
/// followers job asks for `size - 1` pods.
async fn wait_size(ns: &TestNamespace, name: &str, size: i32) -> Result<()> {
    let mcs: Api<MiniCluster> = ns.api();
    let pods: Api<Pod> = ns.api();
    let jobsets: Api<JobSet> = ns.api();
    wait_for(&format!("{name} at size {size}"), TIMEOUT, || async {
        let running = pods
            .list(&ListParams::default().labels(&format!("{NAME_LABEL}={name}")))
            .await?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && pod_phase(p) == "Running")
            .count() as i32;
        let status = mcs.get(name).await?.status.unwrap_or_default();
        let js = jobsets.get(name).await?;
        let workers = js
            .spec
            .replicated_jobs
            .iter()
            .find(|r| r.name == "workers")
            .and_then(|r| r.template.spec.as_ref()?.parallelism)
            .unwrap_or(0);
        let done = running == size
            && status.size == size
            && status.ready_brokers == size
            && workers == size - 1;
        Ok(done.then_some(()))
    })
    .await
}

/// `kubectl scale minicluster/<name> --replicas=<n>`: the scale subresource, as an HPA uses it.
fn kubectl_scale(ns: &TestNamespace, name: &str, replicas: i32) -> Result<std::process::Output> {
    let replicas = format!("--replicas={replicas}");
    let args = ["scale", "minicluster", name, "-n", &ns.name, &replicas];
    Ok(Command::new(kubectl()).args(args).output()?)
}

#[tokio::test]
async fn running_cluster_grows_shrinks_and_refuses_beyond_max_size() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("elastic").await?;
    let mut mc = example("elastic", &ns.name)?;
    mc.spec.max_size = Some(4);
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;
    wait_size(&ns, &name, 2).await?;

    // kubectl edit-style change of spec.size: 2 -> 4.
    mcs.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"size": 4}})),
    )
    .await?;
    wait_size(&ns, &name, 4).await?;

    // The scale subresource (kubectl scale, an HPA): 4 -> 3.
    let out = kubectl_scale(&ns, &name, 3)?;
    assert!(
        out.status.success(),
        "kubectl scale: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_size(&ns, &name, 3).await?;
    let mc = mcs.get(&name).await?;
    assert_eq!(mc.spec.size, 3);
    assert_eq!(mc.status.as_ref().map(|s| s.maximum_size), Some(4));

    // Beyond maxSize the API server refuses, with the reason.
    let out = kubectl_scale(&ns, &name, 6)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "scaling to 6 with maxSize 4 must fail"
    );
    assert!(stderr.contains("maxSize"), "the refusal says why: {stderr}");
    assert_eq!(mcs.get(&name).await?.spec.size, 3);
    ns.cleanup().await;
    Ok(())
}
