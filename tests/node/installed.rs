//! The operator as installed (Helm chart, its image, a pod on the real node) running the
//! README's hello-world on real Flux.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::cluster::{
    OPERATOR_NAMESPACE, apply, example, get_json, installed_operator, kubectl_in, lead_pod,
    namespace, node_name, observed, operator_metrics, operator_pods, pods, wait_phase,
};
use crate::common::wait_for;

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

#[tokio::test]
async fn helm_installed_operator_is_available_on_the_real_node_through_its_readiness_probe()
-> Result<()> {
    installed_operator()?;
    let deployment = get_json(OPERATOR_NAMESPACE, "deployment/flux-operator")?;
    let available = condition(&deployment, "Available").map(|c| c["status"].clone());
    ensure!(available == Some("True".into()), "{}", deployment["status"]);
    let pods = operator_pods()?;
    let pod = pods.first().context("no operator pod")?;
    assert_eq!(
        pod["spec"]["nodeName"],
        node_name().as_str(),
        "runs on the real node"
    );
    assert_eq!(pod["spec"]["containers"][0]["image"], "flux-operator:dev");
    assert_eq!(pod["spec"]["serviceAccountName"], "flux-operator");
    // Ready because the kubelet ran the probe, not because something marked it.
    let ready = condition(pod, "Ready").expect("a Ready condition");
    assert_eq!(ready["status"], "True", "{}", pod["status"]);
    let probe = &pod["spec"]["containers"][0]["readinessProbe"];
    ensure!(
        probe.is_object(),
        "the chart gives the operator a readiness probe"
    );
    let status = &pod["status"]["containerStatuses"][0];
    assert_eq!(status["ready"], true);
    ensure!(status["state"]["running"].is_object(), "{status}");
    assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 0);
    Ok(())
}

#[tokio::test]
async fn hello_world_logs_a_line_from_every_broker_host_succeeds_ends_all_pods_and_is_timed()
-> Result<()> {
    let ns = namespace("hello").await?;
    apply(&ns.name, &example("hello-world"))?;
    wait_phase(&ns.name, "hello-world", "Succeeded").await?;

    // The job's output, as a user reads it: one line from each broker's host.
    let lead = lead_pod(&ns.name, "hello-world")?;
    let logs = kubectl_in(&ns.name, &["logs", &lead, "-c", "hello-world"])?;
    let hosts: BTreeSet<&str> = logs
        .lines()
        .filter_map(|l| l.strip_prefix("hello from "))
        .collect();
    // The brokers' host names: JobSet's, `<mc>-lead-0-0` and `<mc>-workers-0-<i>`.
    let expected: BTreeSet<String> = std::iter::once("hello-world-lead-0-0".to_string())
        .chain((0..3).map(|i| format!("hello-world-workers-0-{i}")))
        .collect();
    assert_eq!(
        hosts,
        expected.iter().map(String::as_str).collect(),
        "logs of {lead}:\n{logs}"
    );

    // Every pod ends: the lead by its success, the followers when it shuts the instance down
    // (or JobSet deletes them with the completed JobSet's jobs).
    wait_for(
        "every pod of hello-world to end",
        Duration::from_secs(120),
        || async {
            let mut live = Vec::new();
            for role in ["lead", "workers"] {
                for pod in pods(&ns.name, "hello-world", role)? {
                    let phase = pod["status"]["phase"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    if phase != "Succeeded" && phase != "Failed" {
                        live.push(format!("{} {phase}", pod["metadata"]["name"]));
                    }
                }
            }
            Ok(live.is_empty().then_some(()))
        },
    )
    .await?;

    // The in-cluster operator measured it: scraped through the API server's proxy. (Its
    // cluster-up time is the interactive test's: this job may end before every follower's
    // readiness probe has run once after the join.)
    let metrics = wait_for(
        "the teardown observation",
        Duration::from_secs(60),
        || async {
            let text = operator_metrics()?;
            Ok(text
                .contains("flux_operator_minicluster_teardown_seconds_count")
                .then_some(text))
        },
    )
    .await?;
    for m in ["lead_ready", "teardown"] {
        let (count, sum) = observed(&metrics, m, &ns.name);
        assert_eq!(
            count, 1.0,
            "{m}: one observation for this namespace\n{metrics}"
        );
        ensure!(
            sum > 0.0 && sum < 600.0,
            "{m} took {sum} s: not a real figure"
        );
    }
    ns.cleanup().await;
    Ok(())
}
