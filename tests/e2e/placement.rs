//! `spec.placement`: Kueue's topology-aware scheduling puts every broker of a MiniCluster in
//! one domain of a level. Each test brings its own KWOK nodes, two blocks of two racks of two
//! nodes with 2 CPU each (a rack holds 4 one-CPU brokers, a block 8), tainted so that no other
//! test's pods land there, a Topology over them and a flavor that tolerates the taint.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

use flux_operator::api::{MiniCluster, NAME_LABEL, Phase, Placement};

use crate::common::*;
use crate::kueue::queues_with_flavor;
use crate::operator::{admitted_running_at, install_crd, mc_condition, running_at, wait_phase};
use crate::queued::queued;

const TIMEOUT: Duration = Duration::from_secs(120);
const BLOCK: &str = "e2e.flux-framework.org/block";
const RACK: &str = "e2e.flux-framework.org/rack";
const POOL: &str = "e2e.flux-framework.org/tas-pool";

fn topology_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Topology"),
        "topologies",
    )
}

/// The nodes, the Topology, a flavor over them, a ClusterQueue with room for 16 CPU and a
/// LocalQueue. Returns the LocalQueue's name.
async fn topology_queue(ns: &mut TestNamespace) -> Result<String> {
    let pool = ns.name.clone();
    let nodes: Api<Node> = Api::all(ns.client.clone());
    for block in 0..2 {
        for rack in 0..2 {
            for n in 0..2 {
                let name = format!("{pool}-b{block}-r{rack}-n{n}");
                let node: Node = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {
                        "name": name,
                        "annotations": {"kwok.x-k8s.io/node": "fake"},
                        "labels": {
                            "type": "kwok", "kubernetes.io/hostname": name,
                            POOL: pool, BLOCK: format!("b{block}"), RACK: format!("b{block}-r{rack}"),
                        },
                    },
                    "spec": {"taints": [{"key": POOL, "value": pool, "effect": "NoSchedule"}]},
                    "status": {
                        "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                        "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                    },
                }))?;
                nodes.create(&PostParams::default(), &node).await?;
                ns.track_cluster_object(&ApiResource::erase::<Node>(&()), &name);
            }
        }
    }
    wait_for("the pool's 8 nodes Ready", TIMEOUT, || async {
        let list = nodes
            .list(&ListParams::default().labels(&format!("{POOL}={pool}")))
            .await?;
        let ready = list
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        Ok((ready == 8).then_some(()))
    })
    .await?;

    let topology = ns.unique_name("topology");
    let topo = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
        "metadata": {"name": topology},
        "spec": {"levels": [
            {"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}
        ]},
    });
    ns.cluster_dynamic(&topology_resource())
        .create(&PostParams::default(), &dynamic_object(topo)?)
        .await
        .context("creating the Topology")?;
    ns.track_cluster_object(&topology_resource(), &topology);

    let flavor = json!({
        "nodeLabels": {POOL: pool},
        "topologyName": topology,
        "tolerations": [{"key": POOL, "operator": "Equal", "value": pool, "effect": "NoSchedule"}],
    });
    queues_with_flavor(ns, flavor, "16", "64Gi").await
}

/// A queued elastic MiniCluster of `size` one-CPU brokers placed by `placement`.
fn placed(
    ns: &str,
    name: &str,
    size: i32,
    queue: &str,
    placement: Placement,
) -> Result<MiniCluster> {
    let mut mc = queued(ns, name, size, queue)?;
    mc.spec.max_size = Some(8);
    mc.spec.placement = Some(placement);
    Ok(mc)
}

fn rack(level: &str) -> Placement {
    Placement {
        required: Some(level.to_string()),
        preferred: None,
    }
}

/// The value of node label `level` for each running pod of MiniCluster `name`, by pod name.
async fn domains_of(
    ns: &TestNamespace,
    name: &str,
    level: &str,
) -> Result<BTreeMap<String, String>> {
    let pods: Api<Pod> = ns.api();
    let nodes: Api<Node> = Api::all(ns.client.clone());
    let mut domains = BTreeMap::new();
    for pod in pods
        .list(&ListParams::default().labels(&format!("{NAME_LABEL}={name}")))
        .await?
        .items
    {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .with_context(|| format!("pod {:?} is not bound", pod.metadata.name))?;
        let label = nodes
            .get(&node)
            .await?
            .metadata
            .labels
            .unwrap_or_default()
            .get(level)
            .cloned()
            .with_context(|| format!("node {node} has no {level} label: not one of the pool's"))?;
        domains.insert(pod.metadata.name.unwrap_or_default(), label);
    }
    Ok(domains)
}

/// Every one of `size` running brokers of `name` is in one domain of `level`.
async fn all_in_one(ns: &TestNamespace, name: &str, size: usize, level: &str) -> Result<()> {
    let domains = domains_of(ns, name, level).await?;
    assert_eq!(domains.len(), size, "{domains:?}");
    let distinct: BTreeSet<_> = domains.values().collect();
    ensure!(
        distinct.len() == 1,
        "{name}'s brokers are in more than one {level} domain: {domains:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_required_rack_puts_every_broker_in_one_rack_and_a_resize_stays_there() -> Result<()> {
    let mut ns = TestNamespace::create("placement-rack").await?;
    install_crd(&ns.client).await?;
    let queue = topology_queue(&mut ns).await?;
    let _operator = Operator::start(&ns.name)?;
    let mcs: Api<MiniCluster> = ns.api();
    mcs.create(
        &PostParams::default(),
        &placed(&ns.name, "racked", 3, &queue, rack(RACK))?,
    )
    .await?;
    let running = wait_phase(&mcs, "racked", Phase::Running).await?;
    assert_eq!(
        mc_condition(&running, "Admitted").map(|c| c.0).as_deref(),
        Some("True")
    );
    all_in_one(&ns, "racked", 3, RACK).await?;

    // A rack holds four: the grown cluster is placed again, all four in one rack.
    mcs.patch(
        "racked",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"size": 4}})),
    )
    .await?;
    admitted_running_at(&mcs, "racked", 4).await?;
    all_in_one(&ns, "racked", 4, RACK).await?;
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_cluster_no_rack_can_hold_waits_with_kueues_reason_and_a_preferred_block_runs()
-> Result<()> {
    let mut ns = TestNamespace::create("placement-wait").await?;
    install_crd(&ns.client).await?;
    let queue = topology_queue(&mut ns).await?;
    let _operator = Operator::start(&ns.name)?;
    let mcs: Api<MiniCluster> = ns.api();

    // Five one-CPU brokers: the quota has room, no rack does.
    mcs.create(
        &PostParams::default(),
        &placed(&ns.name, "toobig", 5, &queue, rack(RACK))?,
    )
    .await?;
    let waiting = wait_for("toobig says why it waits", TIMEOUT, || async {
        let mc = mcs.get("toobig").await?;
        Ok(mc_condition(&mc, "Admitted")
            .filter(|(status, _, message)| status == "False" && message.contains("topology"))
            .map(|(_, _, message)| message))
    })
    .await?;
    eprintln!("toobig waits: {waiting}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure!(
        domains_of(&ns, "toobig", RACK).await?.is_empty(),
        "a cluster that fits in no rack got pods"
    );

    // Preferred: one block holds eight, so all five go to one block.
    let block = Placement {
        required: None,
        preferred: Some(BLOCK.to_string()),
    };
    mcs.create(
        &PostParams::default(),
        &placed(&ns.name, "blocked", 5, &queue, block)?,
    )
    .await?;
    running_at(&mcs, "blocked", 5).await?;
    all_in_one(&ns, "blocked", 5, BLOCK).await?;
    ns.cleanup().await;
    Ok(())
}
