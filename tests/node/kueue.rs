//! MiniClusters queued by the real Kueue controller, with brokers run by the real kubelet:
//! admission counts every broker pod, a higher-priority cluster preempts a lower one, and the
//! preempted one saves its queue before its pods go and restores it when admitted again.

use std::time::Duration;

use anyhow::{Result, ensure};
use serde_json::Value;

use crate::cluster::{Lead, apply_yaml, claim_on_the_node, get_json, namespace, pods, wait_phase};
use crate::common::{TestNamespace, kueue_resource, wait_for};

const MINUTE: Duration = Duration::from_secs(60);

/// A flavor, a ClusterQueue of 400m CPU that preempts lower priorities, two priority
/// classes and the LocalQueue `queue` in the test namespace. The cluster-scoped objects get
/// unique names and go with the namespace. The priority classes' names.
fn queues(ns: &mut TestNamespace) -> Result<(String, String)> {
    let flavor = ns.unique_name("flavor");
    let cq = ns.unique_name("cq");
    let (low, high) = (ns.unique_name("low"), ns.unique_name("high"));
    let yaml = format!(
        r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {flavor}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {cq}}}
spec:
  namespaceSelector: {{}}
  preemption: {{withinClusterQueue: LowerPriority}}
  resourceGroups:
    - coveredResources: [cpu, memory]
      flavors:
        - name: {flavor}
          resources:
            - {{name: cpu, nominalQuota: 400m}}
            - {{name: memory, nominalQuota: 1Gi}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {{name: {low}}}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {{name: {high}}}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: queue}}
spec: {{clusterQueue: {cq}}}
"#
    );
    apply_yaml(&ns.name, &yaml)?;
    for (kind, name) in [
        ("ResourceFlavor", &flavor),
        ("ClusterQueue", &cq),
        ("WorkloadPriorityClass", &low),
        ("WorkloadPriorityClass", &high),
    ] {
        ns.track_cluster_object(&kueue_kind(kind), name);
    }
    Ok((low, high))
}

/// Kueue's KIND, as [`kueue_resource`] knows it, and its priority classes.
fn kueue_kind(kind: &str) -> kube::core::ApiResource {
    if kind != "WorkloadPriorityClass" {
        return kueue_resource(kind);
    }
    kube::core::ApiResource {
        group: "kueue.x-k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "kueue.x-k8s.io/v1beta2".into(),
        kind: kind.into(),
        plural: "workloadpriorityclasses".into(),
    }
}

/// An interactive MiniCluster of SIZE brokers (100m CPU each) in `queue` at PRIORITY; with
/// an archive on the claim `flux-state` when ARCHIVE.
fn minicluster(name: &str, size: i32, priority: &str, archive: bool) -> String {
    let (archive, volumes) = if archive {
        (
            "  archive: {path: /state/flux.tar.gz, runningJobs: Cancel}\n",
            "      volumes: {state: {path: /state, claimName: flux-state}}\n",
        )
    } else {
        ("", "")
    };
    format!(
        r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: {name}
  labels:
    kueue.x-k8s.io/queue-name: queue
    kueue.x-k8s.io/priority-class: {priority}
spec:
  size: {size}
  interactive: true
{archive}  containers:
    - image: ubuntu:noble
      resources:
        requests: {{cpu: 100m, memory: 64Mi}}
{volumes}"#
    )
}

/// The Workload of MiniCluster MC (Kueue's, for its JobSet).
fn workload(ns: &str, mc: &str) -> Result<Value> {
    let list = get_json(ns, "workloads.kueue.x-k8s.io")?;
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| {
            w["metadata"]["ownerReferences"][0]["name"]
                .as_str()
                .is_some_and(|o| o == mc)
        })
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no Workload for {mc} yet"))
}

/// The MiniCluster's condition TYPE: (status, reason).
fn condition(ns: &str, mc: &str, type_: &str) -> Result<(String, String)> {
    let obj = get_json(ns, &format!("minicluster/{mc}"))?;
    let c = obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .cloned()
        .unwrap_or_default();
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Ok((text("status"), text("reason")))
}

#[tokio::test]
async fn a_preempted_minicluster_saves_its_queue_and_restores_it_when_admitted_again() -> Result<()>
{
    let mut ns = namespace("kueue-preempt").await?;
    let (low, high) = queues(&mut ns)?;
    claim_on_the_node(&mut ns, "flux-state")?;

    // Admitted with every broker pod counted, the lead's too: 3 x 100m of the 400m.
    apply_yaml(&ns.name, &minicluster("low", 3, &low, true))?;
    wait_phase(&ns.name, "low", "Running").await?;
    let wl = workload(&ns.name, "low")?;
    let counts: i64 = wl["spec"]["podSets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["count"].as_i64())
        .sum();
    ensure!(counts == 3, "pod sets {}", wl["spec"]["podSets"]);
    ensure!(condition(&ns.name, "low", "Admitted")?.0 == "True");

    // Work in it: one job running, two waiting behind it (the queue is fcfs, -N3 exclusive).
    let lead = Lead::of(&ns.name, "low")?;
    let running = lead.submit("-N3 sleep 600")?;
    let waiting: Vec<String> = (0..2)
        .map(|i| lead.submit(&format!("-N1 echo after-{i}")))
        .collect::<Result<_>>()?;
    lead.wait("jobs -n --filter=running | wc -l", "1", MINUTE)
        .await?;

    // A higher-priority cluster of 2 (200m) does not fit beside it: Kueue preempts `low`,
    // which saves its queue as its pods stop, and admits `high`.
    apply_yaml(&ns.name, &minicluster("high", 2, &high, false))?;
    let reason = wait_for("low Suspended and not admitted", 3 * MINUTE, || async {
        let phase = get_json(&ns.name, "minicluster/low")?["status"]["phase"].clone();
        let (admitted, reason) = condition(&ns.name, "low", "Admitted")?;
        Ok((phase == "Suspended" && admitted == "False").then_some(reason))
    })
    .await?;
    eprintln!("low: Admitted False, reason {reason}");
    wait_phase(&ns.name, "high", "Running").await?;
    wait_for("low's pods gone", 2 * MINUTE, || async {
        Ok((pods(&ns.name, "low", "lead")?.is_empty()
            && pods(&ns.name, "low", "workers")?.is_empty())
        .then_some(()))
    })
    .await?;

    // `high` ends; Kueue admits `low` again, which restores its queue: the waiting jobs run
    // with their ids, the running one is reported canceled by the save.
    crate::cluster::kubectl_in(&ns.name, &["delete", "minicluster", "high", "--wait=false"])?;
    let back = wait_phase(&ns.name, "low", "Running").await?;
    ensure!(
        back["status"]["restore"]["pendingJobs"] == 2,
        "{}",
        back["status"]
    );
    ensure!(condition(&ns.name, "low", "Admitted")?.0 == "True");
    let lead = Lead::of(&ns.name, "low")?;
    lead.wait("jobs -n --filter=pending,running | wc -l", "0", 2 * MINUTE)
        .await?;
    let all = lead.jobs()?;
    for id in &waiting {
        ensure!(
            all.get(id).map(String::as_str) == Some("INACTIVE COMPLETED"),
            "{id}: {all:?}"
        );
    }
    ensure!(
        all.get(&running).map(String::as_str) == Some("INACTIVE CANCELED"),
        "{all:?}"
    );
    ns.cleanup().await;
    Ok(())
}
