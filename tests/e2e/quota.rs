//! How much of the API server a namespace's MiniClusters may take: each is bounded by the
//! CRD's field bounds and the operator's bound on the spec as a whole (its JobSet within
//! 1 MiB); how many a namespace holds is an admin's ResourceQuota on the CRD's object
//! count, which the API server enforces at `kubectl apply` (docs/security.md).

use anyhow::Result;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use flux_operator::api::MiniCluster;

use crate::common::TestNamespace;
use crate::operator::{example, install_crd};

/// The quota's resource: how many MiniClusters the namespace holds.
const COUNT: &str = "count/miniclusters.flux-framework.org";

#[tokio::test]
async fn a_resource_quota_on_the_object_count_caps_how_many_miniclusters_a_namespace_holds()
-> Result<()> {
    let ns = TestNamespace::create("quota").await?;
    install_crd(&ns.client).await?;
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "miniclusters"},
        "spec": {"hard": {COUNT: "2"}},
    }))?;
    let quotas: Api<ResourceQuota> = ns.api();
    quotas.create(&PostParams::default(), &quota).await?;
    // The quota controller fills in what is used before the API server enforces it.
    crate::common::wait_for(
        "the quota's usage",
        std::time::Duration::from_secs(60),
        || async {
            let q = quotas.get("miniclusters").await?;
            Ok(q.status.and_then(|s| s.used).map(|_| ()))
        },
    )
    .await?;

    let mcs: Api<MiniCluster> = ns.api();
    let named = |name: &str| -> Result<MiniCluster> {
        let mut mc = example("hello-world", &ns.name)?;
        mc.metadata.name = Some(name.to_string());
        Ok(mc)
    };
    for name in ["one", "two"] {
        mcs.create(&PostParams::default(), &named(name)?).await?;
    }
    // Admission counts each create into the quota's status, and the quota controller then
    // recounts from its own cache of MiniClusters; a recount from a cache that had not seen
    // both yet wrote back 1 and let a third in (Kubernetes' quota is eventually consistent).
    // Once the controller's own count is 2, the third must be refused.
    crate::common::wait_for(
        "the quota controller counting both",
        std::time::Duration::from_secs(60),
        || async {
            let q = quotas.get("miniclusters").await?;
            let used = q.status.and_then(|s| s.used).unwrap_or_default();
            Ok((used.get(COUNT).map(|q| q.0.as_str()) == Some("2")).then_some(()))
        },
    )
    .await?;
    let refused = mcs.create(&PostParams::default(), &named("three")?).await;
    let Err(kube::Error::Api(status)) = refused else {
        anyhow::bail!("a third MiniCluster was created past a quota of two: {refused:?}");
    };
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status.message.contains("exceeded quota: miniclusters"),
        "{}",
        status.message
    );
    // A deletion frees its place.
    mcs.delete("one", &DeleteParams::default()).await?;
    crate::common::wait_for(
        "room for a third",
        std::time::Duration::from_secs(60),
        || async {
            Ok(mcs
                .create(&PostParams::default(), &named("three")?)
                .await
                .ok()
                .map(|_| ()))
        },
    )
    .await?;
    ns.cleanup().await;
    Ok(())
}
