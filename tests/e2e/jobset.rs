//! The JobSet controller and its webhooks, as the harness runs them.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::*;

const TIMEOUT: Duration = Duration::from_secs(90);

/// A JobSet with a 1-pod "leader" job and a "workers" job of `replicas`
/// replicas × `parallelism` pods, every pod annotated with `pod_annotations`.
/// Defaultable fields (success/startup policy, network, restartPolicy,
/// completionMode) are left out on purpose.
pub fn jobset_json(name: &str, replicas: u32, parallelism: u32, pod_annotations: Value) -> Value {
    let job = |parallelism: u32| {
        json!({
            "parallelism": parallelism,
            "completions": parallelism,
            "backoffLimit": 0,
            "template": {
                "metadata": { "annotations": pod_annotations.clone() },
                "spec": {
                    "containers": [{
                        "name": "main",
                        "image": "registry.invalid/e2e/noop:1",
                        "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } }
                    }]
                }
            }
        })
    };
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": { "name": name },
        "spec": {
            "replicatedJobs": [
                { "name": "leader", "replicas": 1, "template": { "spec": job(1) } },
                { "name": "workers", "replicas": replicas, "template": { "spec": job(parallelism) } }
            ]
        }
    })
}

fn jobset_selector(name: &str) -> String {
    format!("jobset.sigs.k8s.io/jobset-name={name}")
}

#[tokio::test]
async fn jobset_runs_to_completion() -> Result<()> {
    let ns = TestNamespace::create("jobset-complete").await?;
    let jobsets = ns.dynamic(&jobset_resource());
    let name = "complete";
    // Long enough to see every pod Running before they finish.
    let spec = jobset_json(name, 2, 2, json!({ COMPLETE_AFTER: "15s" }));
    let created = jobsets
        .create(&PostParams::default(), &dynamic_object(spec)?)
        .await
        .context("creating the JobSet")?;

    // The defaulting webhook answered (the CRD itself defaults none of these).
    let s = &created.data["spec"];
    ensure!(
        s.pointer("/network/enableDNSHostnames") == Some(&json!(true)),
        "network.enableDNSHostnames not defaulted: {s}"
    );
    ensure!(
        s.pointer("/network/publishNotReadyAddresses") == Some(&json!(true)),
        "network.publishNotReadyAddresses not defaulted: {s}"
    );
    ensure!(
        s.pointer("/successPolicy/operator") == Some(&json!("All")),
        "successPolicy not defaulted: {s}"
    );
    ensure!(
        s.pointer("/startupPolicy/startupPolicyOrder") == Some(&json!("AnyOrder")),
        "startupPolicy not defaulted: {s}"
    );
    for rj in s["replicatedJobs"].as_array().context("replicatedJobs")? {
        ensure!(
            rj.pointer("/template/spec/completionMode") == Some(&json!("Indexed")),
            "completionMode not defaulted: {rj}"
        );
        ensure!(
            rj.pointer("/template/spec/template/spec/restartPolicy") == Some(&json!("OnFailure")),
            "restartPolicy not defaulted: {rj}"
        );
    }

    // Its Jobs: 1 leader + 2 worker replicas.
    let jobs = wait_for_list(
        &ns.api::<Job>(),
        &jobset_selector(name),
        3,
        "3 Jobs of the JobSet",
        TIMEOUT,
        |_| true,
    )
    .await?;
    let mut job_names: Vec<_> = jobs
        .iter()
        .filter_map(|j| j.metadata.name.clone())
        .collect();
    job_names.sort();
    assert_eq!(
        job_names,
        [
            "complete-leader-0",
            "complete-workers-0",
            "complete-workers-1"
        ]
    );

    // Its pods (1 + 2×2), each bound to a simulated node and Running.
    let pods = wait_for_list(
        &ns.api::<Pod>(),
        &jobset_selector(name),
        5,
        "5 pods Running",
        TIMEOUT,
        |p: &Pod| pod_phase(p) == "Running",
    )
    .await?;
    for p in &pods {
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("");
        assert!(
            node.starts_with("kwok-node-"),
            "pod {:?} is on node {node:?}",
            p.metadata.name
        );
        assert!(
            pod_ready(p),
            "pod {:?} is Running but not Ready",
            p.metadata.name
        );
    }

    // The headless Service that gives the pods DNS names.
    let svc = wait_for_object(
        &ns.api::<Service>(),
        name,
        "the JobSet's headless Service",
        TIMEOUT,
        |_| true,
    )
    .await?;
    let svc_spec = svc.spec.context("service spec")?;
    assert_eq!(
        svc_spec.cluster_ip.as_deref(),
        Some("None"),
        "Service is not headless"
    );
    assert_eq!(svc_spec.publish_not_ready_addresses, Some(true));

    // The annotated pods finish, so the JobSet completes.
    let done = wait_for_object(&jobsets, name, "JobSet Completed", TIMEOUT, |js| {
        has_condition(&js.data, "Completed", "True")
    })
    .await?;
    assert!(
        !has_condition(&done.data, "Failed", "True"),
        "JobSet both Completed and Failed: {}",
        done.data["status"]
    );
    let succeeded = wait_for_list(
        &ns.api::<Pod>(),
        &jobset_selector(name),
        5,
        "5 pods Succeeded",
        TIMEOUT,
        |p: &Pod| pod_phase(p) == "Succeeded",
    )
    .await?;
    assert_eq!(succeeded.len(), 5);

    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn jobset_fails_when_a_pod_fails() -> Result<()> {
    let ns = TestNamespace::create("jobset-fail").await?;
    let jobsets = ns.dynamic(&jobset_resource());
    let name = "fails";
    let mut spec = jobset_json(name, 1, 1, json!({ COMPLETE_AFTER: "60s" }));
    // The worker fails (restartPolicy Never, backoffLimit 0: its Job fails, and
    // with no failurePolicy the JobSet fails).
    let worker = &mut spec["spec"]["replicatedJobs"][1]["template"]["spec"]["template"];
    worker["metadata"]["annotations"] = json!({ FAIL_AFTER: "3s", EXIT_CODE: "7" });
    worker["spec"]["restartPolicy"] = json!("Never");
    jobsets
        .create(&PostParams::default(), &dynamic_object(spec)?)
        .await
        .context("creating the JobSet")?;

    let failed = wait_for_object(&jobsets, name, "JobSet Failed", TIMEOUT, |js| {
        has_condition(&js.data, "Failed", "True")
    })
    .await?;
    assert!(
        !has_condition(&failed.data, "Completed", "True"),
        "failed JobSet is also Completed: {}",
        failed.data["status"]
    );

    // The failed pod carries the exit code the annotation asked for.
    let pods = wait_for_list(
        &ns.api::<Pod>(),
        &format!(
            "{},jobset.sigs.k8s.io/replicatedjob-name=workers",
            jobset_selector(name)
        ),
        1,
        "a Failed worker pod",
        TIMEOUT,
        |p: &Pod| pod_phase(p) == "Failed",
    )
    .await?;
    let code = pods[0]
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .map(|t| t.exit_code);
    assert_eq!(code, Some(7));

    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn elastic_jobset_resizes_a_running_job() -> Result<()> {
    let ns = TestNamespace::create("jobset-elastic").await?;
    let jobsets = ns.dynamic(&jobset_resource());
    let name = "elastic";
    jobsets
        .create(
            &PostParams::default(),
            &dynamic_object(jobset_json(name, 1, 2, json!({})))?,
        )
        .await
        .context("creating the JobSet")?;
    let workers = format!(
        "{},jobset.sigs.k8s.io/replicatedjob-name=workers",
        jobset_selector(name)
    );
    let running = |p: &Pod| pod_phase(p) == "Running" && p.metadata.deletion_timestamp.is_none();
    wait_for_list(
        &ns.api::<Pod>(),
        &workers,
        2,
        "2 worker pods Running",
        TIMEOUT,
        running,
    )
    .await?;

    // Needs JobSet's ElasticJobSet gate (the webhook allows the change) and
    // elastic Indexed Jobs in the apiserver (parallelism and completions in tandem).
    let resize = |n: u32| {
        json!([
            { "op": "replace", "path": "/spec/replicatedJobs/1/template/spec/parallelism", "value": n },
            { "op": "replace", "path": "/spec/replicatedJobs/1/template/spec/completions", "value": n }
        ])
    };
    let patch =
        |n: u32| Patch::<Value>::Json(serde_json::from_value(resize(n)).expect("a JSON patch"));
    jobsets
        .patch(name, &PatchParams::default(), &patch(4))
        .await
        .context("growing the workers to 4")?;
    let job = format!("{name}-workers-0");
    wait_for_object(
        &ns.api::<Job>(),
        &job,
        "workers Job grown to 4",
        TIMEOUT,
        |j: &Job| {
            j.spec
                .as_ref()
                .is_some_and(|s| s.parallelism == Some(4) && s.completions == Some(4))
        },
    )
    .await?;
    wait_for_list(
        &ns.api::<Pod>(),
        &workers,
        4,
        "4 worker pods Running",
        TIMEOUT,
        running,
    )
    .await?;

    jobsets
        .patch(name, &PatchParams::default(), &patch(1))
        .await
        .context("shrinking the workers to 1")?;
    wait_for(
        &format!("{job} shrunk to 1 running pod"),
        TIMEOUT,
        || async {
            let pods = ns
                .api::<Pod>()
                .list(&kube::api::ListParams::default().labels(&workers))
                .await?;
            let n = pods.items.iter().filter(|p| running(p)).count();
            Ok((n == 1).then_some(()))
        },
    )
    .await?;

    ns.cleanup().await;
    Ok(())
}
