//! MiniClusters under Kueue: with quota for 4 broker pods, a size-3 and a size-4 cluster
//! cannot run together. One runs, the other waits Suspended with Kueue's reason in its
//! status, and is admitted when the first finishes.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use flux_operator::api::{KUEUE_QUEUE_LABEL, MiniCluster, NAME_LABEL, Phase, ROLE_LABEL};

use crate::common::{Operator, TestNamespace, wait_for};
use crate::kueue::queues;
use crate::operator::{
    admitted_running_at, example, finish_lead, install_crd, mc_condition, wait_phase,
};

const TIMEOUT: Duration = Duration::from_secs(120);

/// A MiniCluster of `size` one-CPU brokers in Kueue queue `queue`.
pub fn queued(ns: &str, name: &str, size: i32, queue: &str) -> Result<MiniCluster> {
    let mut mc = example("hello-world", ns)?;
    mc.metadata.name = Some(name.to_string());
    mc.metadata.labels = Some([(KUEUE_QUEUE_LABEL.to_string(), queue.to_string())].into());
    mc.spec.size = size;
    mc.spec.tasks = size;
    mc.spec.containers[0].resources = Some(ResourceRequirements {
        requests: Some(
            [
                ("cpu".to_string(), Quantity("1".into())),
                ("memory".to_string(), Quantity("100Mi".into())),
            ]
            .into(),
        ),
        ..Default::default()
    });
    Ok(mc)
}

#[tokio::test]
async fn kueue_runs_one_cluster_and_queues_the_other() -> Result<()> {
    let mut ns = TestNamespace::create("queued").await?;
    install_crd(&ns.client).await?;
    let queue = queues(&mut ns, "4", "4Gi").await?;
    let operator = Operator::start(&ns.name)?;
    let mcs: Api<MiniCluster> = ns.api();

    let first = mcs
        .create(
            &PostParams::default(),
            &queued(&ns.name, "first", 3, &queue)?,
        )
        .await?
        .name_any();
    let running = wait_phase(&mcs, &first, Phase::Running).await?;
    assert_eq!(
        mc_condition(&running, "Admitted").map(|c| c.0).as_deref(),
        Some("True")
    );

    let second = mcs
        .create(
            &PostParams::default(),
            &queued(&ns.name, "second", 4, &queue)?,
        )
        .await?
        .name_any();
    let waiting = wait_for(
        "second cluster waiting with Kueue's reason",
        TIMEOUT,
        || async {
            let mc = mcs.get(&second).await?;
            let phase = mc.status.as_ref().and_then(|s| s.phase);
            let admitted = mc_condition(&mc, "Admitted");
            let waits = phase == Some(Phase::Suspended)
                && admitted
                    .as_ref()
                    .is_some_and(|(status, _, message)| status == "False" && !message.is_empty());
            Ok(waits.then_some(mc))
        },
    )
    .await?;
    let (_, _, suspended_message) = mc_condition(&waiting, "Suspended").unwrap_or_default();
    assert!(
        suspended_message.contains("Kueue"),
        "the Suspended condition says why: {suspended_message}"
    );
    assert_eq!(waiting.status.as_ref().map(|s| s.ready_brokers), Some(0));

    // The first cluster finishes; Kueue releases its quota and admits the second.
    finish_lead(&ns, &first).await?;
    wait_phase(&mcs, &first, Phase::Succeeded).await?;
    let admitted = wait_phase(&mcs, &second, Phase::Running).await?;
    assert_eq!(admitted.status.as_ref().map(|s| s.ready_brokers), Some(4));
    assert_eq!(
        mc_condition(&admitted, "Admitted").map(|c| c.0).as_deref(),
        Some("True")
    );

    let wait_count = format!(
        "flux_operator_minicluster_admission_wait_seconds_count{{namespace=\"{}\"}} 2",
        ns.name
    );
    wait_for("admission wait observed for both", TIMEOUT, || async {
        Ok(operator
            .metrics()
            .await?
            .contains(&wait_count)
            .then_some(()))
    })
    .await?;
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn resizing_a_queued_cluster_is_readmitted_at_the_new_size_with_new_pods() -> Result<()> {
    let mut ns = TestNamespace::create("queued-resize").await?;
    install_crd(&ns.client).await?;
    let queue = queues(&mut ns, "6", "6Gi").await?;
    let _operator = Operator::start(&ns.name)?;
    let mcs: Api<MiniCluster> = ns.api();
    let mut mc = queued(&ns.name, "elastic", 2, &queue)?;
    mc.spec.max_size = Some(4);
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;
    let lead_before = lead_uid(&ns, &name).await?;

    mcs.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"size": 3}})),
    )
    .await?;
    // Kueue has no workload slices for JobSet: the new size is a new Workload, and the
    // cluster is stopped and started again (what the user guide says a queued resize does).
    // A follower the JobSet starts before Kueue stops it runs on the old admission: the
    // status says so (`Admitted` False, `Resized`) until Kueue admits the new size.
    admitted_running_at(&mcs, &name, 3).await?;
    let lead_after = lead_uid(&ns, &name).await?;
    assert_ne!(
        lead_before, lead_after,
        "the lead pod survived a queued resize"
    );
    ns.cleanup().await;
    Ok(())
}

/// The UID of the lead broker's live pod.
async fn lead_uid(ns: &TestNamespace, name: &str) -> Result<String> {
    let pods: Api<Pod> = ns.api();
    let selector = format!("{NAME_LABEL}={name},{ROLE_LABEL}=lead");
    let list = pods.list(&ListParams::default().labels(&selector)).await?;
    list.items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .and_then(|p| p.metadata.uid)
        .ok_or_else(|| anyhow::anyhow!("no live lead pod for {name}"))
}

/// Quota follows a queued cluster's size both ways: with room for 4 one-CPU brokers, a
/// second cluster of 2 waits beside one of 3; shrinking the first to 2 frees the room and the
/// second is admitted; growing the first back to 3 (through the scale subresource, as an HPA
/// does) then does not fit, so it waits (suspended, Kueue's reason in its status) instead of
/// running over the quota.
#[tokio::test]
async fn a_queued_shrink_frees_quota_for_another_cluster_and_a_grow_beyond_it_waits() -> Result<()>
{
    let mut ns = TestNamespace::create("queued-quota").await?;
    install_crd(&ns.client).await?;
    let queue = queues(&mut ns, "4", "4Gi").await?;
    let _operator = Operator::start(&ns.name)?;
    let mcs: Api<MiniCluster> = ns.api();
    let mut first = queued(&ns.name, "first", 3, &queue)?;
    first.spec.max_size = Some(4);
    mcs.create(&PostParams::default(), &first).await?;
    wait_phase(&mcs, "first", Phase::Running).await?;
    mcs.create(
        &PostParams::default(),
        &queued(&ns.name, "second", 2, &queue)?,
    )
    .await?;
    wait_phase(&mcs, "second", Phase::Suspended).await?;

    let size = |n: i32| Patch::Merge(json!({"spec": {"size": n}}));
    mcs.patch("first", &PatchParams::default(), &size(2))
        .await?;
    let second = wait_phase(&mcs, "second", Phase::Running).await?;
    assert_eq!(
        mc_condition(&second, "Admitted").map(|c| c.0).as_deref(),
        Some("True")
    );

    // The grow through the scale subresource, as `kubectl scale` and an HPA write it.
    let scale = Patch::Merge(json!({"spec": {"replicas": 3}}));
    mcs.patch_scale("first", &PatchParams::default(), &scale)
        .await?;
    let waiting = wait_for("first waits for quota at size 3", TIMEOUT, || async {
        let mc = mcs.get("first").await?;
        let suspended = mc.status.as_ref().and_then(|s| s.phase) == Some(Phase::Suspended);
        Ok(mc_condition(&mc, "Admitted")
            .filter(|c| c.0 == "False" && suspended)
            .map(|_| mc))
    })
    .await?;
    assert_eq!(
        waiting.status.as_ref().and_then(|s| s.phase),
        Some(Phase::Suspended),
        "{:?}",
        waiting.status
    );
    assert_eq!(
        mcs.get("second").await?.status.and_then(|s| s.phase),
        Some(Phase::Running),
        "the admitted cluster keeps running"
    );
    ns.cleanup().await;
    Ok(())
}
