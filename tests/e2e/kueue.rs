//! Kueue admitting (or holding back) JobSets, as the harness runs it.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

use crate::common::*;
use crate::jobset::jobset_json;

const TIMEOUT: Duration = Duration::from_secs(90);
const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// A ResourceFlavor, a ClusterQueue with `cpu` / `memory` quota in it and a
/// LocalQueue in the test's namespace. Returns the LocalQueue's name.
pub async fn queues(ns: &mut TestNamespace, cpu: &str, memory: &str) -> Result<String> {
    queues_with_flavor(ns, json!({}), cpu, memory).await
}

/// [`queues`], the ResourceFlavor with `flavor_spec` (node labels, a topology, tolerations).
pub async fn queues_with_flavor(
    ns: &mut TestNamespace,
    flavor_spec: Value,
    cpu: &str,
    memory: &str,
) -> Result<String> {
    let flavor = ns.unique_name("flavor");
    let cluster_queue = ns.unique_name("cq");
    let local_queue = "queue".to_string();

    let flavors = ns.cluster_dynamic(&kueue_resource("ResourceFlavor"));
    let rf = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": { "name": flavor }, "spec": flavor_spec
    });
    flavors
        .create(&PostParams::default(), &dynamic_object(rf)?)
        .await
        .context("creating the ResourceFlavor")?;
    ns.track_cluster_object(&kueue_resource("ResourceFlavor"), &flavor);

    let cqs = ns.cluster_dynamic(&kueue_resource("ClusterQueue"));
    let cq = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": { "name": cluster_queue },
        "spec": {
            // Only this test's namespace may use it.
            "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": ns.name } },
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory"],
                "flavors": [{ "name": flavor, "resources": [
                    { "name": "cpu", "nominalQuota": cpu },
                    { "name": "memory", "nominalQuota": memory }
                ]}]
            }]
        }
    });
    cqs.create(&PostParams::default(), &dynamic_object(cq)?)
        .await
        .context("creating the ClusterQueue")?;
    ns.track_cluster_object(&kueue_resource("ClusterQueue"), &cluster_queue);

    let lqs = ns.dynamic(&kueue_resource("LocalQueue"));
    let lq = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": { "name": local_queue }, "spec": { "clusterQueue": cluster_queue }
    });
    lqs.create(&PostParams::default(), &dynamic_object(lq)?)
        .await
        .context("creating the LocalQueue")?;

    // Kueue marks the ClusterQueue Active once it has seen the flavor.
    wait_for_object(&cqs, &cluster_queue, "ClusterQueue Active", TIMEOUT, |o| {
        has_condition(&o.data, "Active", "True")
    })
    .await?;
    Ok(local_queue)
}

/// A queued JobSet: 1 leader pod + `workers` worker pods, each requesting 1 CPU.
pub fn queued_jobset(name: &str, queue: &str, workers: u32, annotations: Value) -> Value {
    let mut js = jobset_json(name, 1, workers, annotations);
    js["metadata"]["labels"] = json!({ QUEUE_LABEL: queue });
    for rj in js["spec"]["replicatedJobs"].as_array_mut().unwrap() {
        rj["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] =
            json!({ "cpu": "1", "memory": "256Mi" });
    }
    js
}

/// The Workload Kueue made for the JobSet `name`.
pub async fn workload_of(workloads: &Api<DynamicObject>, name: &str) -> Result<DynamicObject> {
    wait_for(
        &format!("a Workload owned by JobSet {name}"),
        TIMEOUT,
        || async {
            let list = workloads.list(&ListParams::default()).await?;
            Ok(list.items.into_iter().find(|w| {
                w.metadata
                    .owner_references
                    .as_ref()
                    .is_some_and(|refs| refs.iter().any(|r| r.kind == "JobSet" && r.name == name))
            }))
        },
    )
    .await
}

#[tokio::test]
async fn kueue_admits_a_jobset_that_fits() -> Result<()> {
    let mut ns = TestNamespace::create("kueue-admit").await?;
    let queue = queues(&mut ns, "8", "8Gi").await?;
    let jobsets = ns.dynamic(&jobset_resource());
    let name = "fits";
    let created = jobsets
        .create(
            &PostParams::default(),
            &dynamic_object(queued_jobset(name, &queue, 2, json!({})))?,
        )
        .await
        .context("creating the JobSet")?;
    // Kueue's webhook suspends a queued JobSet on creation.
    ensure!(
        created.data["spec"]["suspend"] == json!(true),
        "Kueue did not suspend the JobSet on creation: {}",
        created.data["spec"]
    );

    let workloads = ns.dynamic(&kueue_resource("Workload"));
    let wl = workload_of(&workloads, name).await?;
    let wl_name = wl.metadata.name.clone().context("workload name")?;
    let wl = wait_for_object(&workloads, &wl_name, "Workload admitted", TIMEOUT, |w| {
        has_condition(&w.data, "QuotaReserved", "True")
            && has_condition(&w.data, "Admitted", "True")
    })
    .await?;
    let admission = wl
        .data
        .pointer("/status/admission/clusterQueue")
        .and_then(Value::as_str)
        .unwrap_or("");
    assert_eq!(
        admission,
        ns.unique_name("cq"),
        "admitted by the wrong ClusterQueue"
    );

    // Admission resumes the JobSet, and its 3 pods run.
    wait_for_object(
        &jobsets,
        name,
        "JobSet resumed (spec.suspend false)",
        TIMEOUT,
        |js| js.data["spec"]["suspend"] == json!(false),
    )
    .await?;
    let pods = wait_for_list(
        &ns.api::<Pod>(),
        &format!("jobset.sigs.k8s.io/jobset-name={name}"),
        3,
        "3 pods Running",
        TIMEOUT,
        |p: &Pod| pod_phase(p) == "Running",
    )
    .await?;
    assert_eq!(pods.len(), 3);

    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn kueue_holds_a_jobset_that_does_not_fit() -> Result<()> {
    let mut ns = TestNamespace::create("kueue-hold").await?;
    // 3 pods × 1 CPU do not fit in 2 CPUs.
    let queue = queues(&mut ns, "2", "8Gi").await?;
    let jobsets = ns.dynamic(&jobset_resource());
    let name = "too-big";
    jobsets
        .create(
            &PostParams::default(),
            &dynamic_object(queued_jobset(name, &queue, 2, json!({})))?,
        )
        .await
        .context("creating the JobSet")?;

    let workloads = ns.dynamic(&kueue_resource("Workload"));
    let wl = workload_of(&workloads, name).await?;
    let wl_name = wl.metadata.name.clone().context("workload name")?;
    let wl = wait_for_object(
        &workloads,
        &wl_name,
        "Workload with QuotaReserved=False",
        TIMEOUT,
        |w| has_condition(&w.data, "QuotaReserved", "False"),
    )
    .await?;
    let reserved = condition(&wl.data, "QuotaReserved").context("QuotaReserved condition")?;
    let message = reserved["message"].as_str().unwrap_or("");
    assert!(
        message.contains("insufficient") || message.contains("quota"),
        "QuotaReserved=False should say why, got: {reserved}"
    );
    assert!(
        !has_condition(&wl.data, "Admitted", "True"),
        "Workload admitted anyway: {}",
        wl.data["status"]
    );

    // It stays suspended and no pods are created.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let js = jobsets.get(name).await?;
    assert_eq!(
        js.data["spec"]["suspend"],
        json!(true),
        "JobSet was resumed without quota"
    );
    let pods = ns
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("jobset.sigs.k8s.io/jobset-name={name}")))
        .await?;
    assert!(
        pods.items.is_empty(),
        "{} pods exist for a JobSet without quota",
        pods.items.len()
    );

    ns.cleanup().await;
    Ok(())
}
