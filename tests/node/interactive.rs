//! An interactive cluster reached with `kubectl exec`, and readiness that means every broker
//! has joined.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};

use crate::cluster::{
    apply, apply_yaml, example, flux_exec, get_json, kubectl_in, lead_pod, namespace, observed,
    operator_metrics, pods, wait_phase,
};
use crate::common::wait_for;

#[tokio::test]
async fn interactive_cluster_answers_flux_resource_list_and_flux_run_across_all_brokers_through_kubectl_exec()
-> Result<()> {
    let ns = namespace("interactive").await?;
    apply(&ns.name, &example("interactive"))?;
    wait_phase(&ns.name, "interactive", "Running").await?;
    let lead = lead_pod(&ns.name, "interactive")?;

    let nodes = flux_exec(
        &ns.name,
        &lead,
        "interactive",
        "flux resource list -s up -no {nnodes}",
    )?;
    assert_eq!(nodes.trim(), "2", "both brokers' nodes are up");
    let hosts = flux_exec(&ns.name, &lead, "interactive", "flux run -N2 -n2 hostname")?;
    let hosts: BTreeSet<&str> = hosts.lines().collect();
    let mut expected = BTreeSet::new();
    for role in ["lead", "workers"] {
        for pod in pods(&ns.name, "interactive", role)? {
            expected.insert(
                pod["spec"]["hostname"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    assert_eq!(
        hosts,
        expected.iter().map(String::as_str).collect(),
        "a task on each broker's host"
    );

    // The operator saw it up: a real cluster-up time, after the lead's.
    let metrics = wait_for(
        "the cluster-up observation",
        Duration::from_secs(30),
        || async {
            let text = operator_metrics()?;
            Ok((observed(&text, "up", &ns.name).0 > 0.0).then_some(text))
        },
    )
    .await?;
    let (count, up) = observed(&metrics, "up", &ns.name);
    let (_, lead_ready) = observed(&metrics, "lead_ready", &ns.name);
    assert_eq!(count, 1.0, "one cluster-up observation\n{metrics}");
    ensure!(
        up >= lead_ready && up > 0.0 && up < 600.0,
        "up {up} s, lead ready {lead_ready} s"
    );

    // As the README tells a user (and as the Go operator's users do it): a shell in the lead
    // broker's Job, `flux-view.sh` sourced, `flux proxy $fluxsocket` into the instance.
    let proxied = kubectl_in(
        &ns.name,
        &[
            "exec",
            "job/interactive-lead-0",
            "-c",
            "interactive",
            "--",
            "bash",
            "-c",
            ". /mnt/flux/flux-view.sh && flux proxy $fluxsocket flux resource list -s up -no {nnodes}",
        ],
    )?;
    assert_eq!(proxied.trim(), "2", "flux proxy through flux-view.sh");

    // It stays up until told otherwise, then ends cleanly.
    assert_eq!(
        get_json(&ns.name, "minicluster/interactive")?["status"]["phase"],
        "Running"
    );
    flux_exec(&ns.name, &lead, "interactive", "flux shutdown --quiet")?;
    wait_phase(&ns.name, "interactive", "Succeeded").await?;
    ns.cleanup().await;
    Ok(())
}

/// The followers' `commands.workerPre` sleeps, so the lead is up well before they join:
/// all that time the MiniCluster must not say Ready; once it does, Flux counts every rank up.
#[tokio::test]
async fn minicluster_is_ready_only_once_every_broker_has_joined_the_instance() -> Result<()> {
    let ns = namespace("readiness").await?;
    let yaml = r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: late-followers
spec:
  size: 3
  interactive: true
  containers:
    - image: ubuntu:noble
      commands:
        workerPre: sleep 25
"#;
    apply_yaml(&ns.name, yaml)?;

    // The lead's broker runs while its followers sleep.
    let lead = wait_for(
        "the lead broker's socket",
        Duration::from_secs(180),
        || async {
            let lead = lead_pod(&ns.name, "late-followers")?;
            Ok(
                flux_exec(&ns.name, &lead, "late-followers", "flux getattr size")
                    .ok()
                    .map(|_| lead),
            )
        },
    )
    .await?;
    let up_at_lead = flux_exec(
        &ns.name,
        &lead,
        "late-followers",
        "flux resource list -s up -no {nnodes}",
    )?;
    let mc = get_json(&ns.name, "minicluster/late-followers")?;
    let ready = ready_status(&mc);
    ensure!(
        up_at_lead.trim() != "3",
        "the followers were still asleep; Flux says {up_at_lead}"
    );
    assert_eq!(
        ready, "False",
        "not Ready while followers are missing: {}",
        mc["status"]
    );

    // Poll closely for the moment it turns Ready, and ask Flux right then.
    let start = Instant::now();
    wait_for("Ready", Duration::from_secs(180), || async {
        let mc = get_json(&ns.name, "minicluster/late-followers")?;
        Ok((ready_status(&mc) == "True").then_some(()))
    })
    .await?;
    let up = flux_exec(
        &ns.name,
        &lead,
        "late-followers",
        "flux resource list -s up -no {nnodes}",
    )?;
    assert_eq!(
        up.trim(),
        "3",
        "Ready after {:?}, and Flux has every rank up",
        start.elapsed()
    );
    let _ = kubectl_in(
        &ns.name,
        &["delete", "minicluster", "late-followers", "--wait=false"],
    );
    ns.cleanup().await;
    Ok(())
}

fn ready_status(mc: &serde_json::Value) -> String {
    mc["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .and_then(|c| c["status"].as_str())
        .unwrap_or("Unknown")
        .to_string()
}
