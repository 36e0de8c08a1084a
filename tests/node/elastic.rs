//! Elasticity under a real kubelet: `kubectl scale` grows a cluster while a job waits for the
//! new ranks, and shrinks it while jobs run on the leaving ranks, whose pods get the kubelet's
//! SIGTERM and their grace period.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};

use crate::cluster::{Lead, apply_yaml, kubectl_in, namespace, pods, wait_phase};
use crate::common::wait_for;

const MC: &str = "elastic";
const YAML: &str = r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: elastic
spec:
  size: 2
  maxSize: 4
  interactive: true
  drainGracePeriodSeconds: 10
  flux:
    scheduler:
      queuePolicy: easy
  containers:
    - image: ubuntu:noble
"#;

#[tokio::test]
async fn kubectl_scale_grows_under_a_waiting_job_and_shrinks_with_a_drain_that_loses_no_job()
-> Result<()> {
    let ns = namespace("elastic").await?;
    apply_yaml(&ns.name, YAML)?;
    wait_phase(&ns.name, MC, "Running").await?;
    let lead = Lead::of(&ns.name, MC)?;
    let minute = Duration::from_secs(60);

    // Grow: a job for 4 nodes waits on a cluster of 2, and runs once the new ranks join.
    let wide = lead.flux("submit -N4 hostname")?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(lead.flux(&format!("jobs -no {{state}} {wide}"))?, "SCHED");
    kubectl_in(
        &ns.name,
        &["scale", &format!("minicluster/{MC}"), "--replicas=4"],
    )?;
    lead.wait(
        &format!("jobs -no {{result}} {wide}"),
        "COMPLETED",
        3 * minute,
    )
    .await?;
    assert_eq!(lead.flux(&format!("jobs -no {{nnodes}} {wide}"))?, "4");
    lead.wait("resource list -s up -no {nnodes}", "4", minute)
        .await?;

    // Jobs on the ranks that will leave (3 and 2: the followers Job drops its highest
    // indices): a short one that ends within the 10 s grace, a long one that cannot. Ranks
    // 0 and 1 are kept busy so the long job lands on rank 2 without a constraint.
    // The short job holds rank 3 until the test releases it (a KVS key), so it is still
    // running whatever the waits below take, then ends 3 s later, inside the grace.
    let short = lead.flux(
        "submit -N1 --requires=rank:3 bash -c 'FLUX_KVS_NAMESPACE=primary flux kvs get --waitcreate e2e.release >/dev/null; sleep 3; echo finished'",
    )?;
    let blocker = lead.flux("submit -N2 --exclusive --requires=rank:0-1 sleep 600")?;
    lead.wait(&format!("jobs -no {{state}} {blocker}"), "RUN", minute)
        .await?;
    let long = lead.flux("submit -N1 sleep 600")?;
    lead.wait(&format!("jobs -no {{state}} {long}"), "RUN", minute)
        .await?;
    lead.wait(&format!("jobs -no {{state}} {short}"), "RUN", minute)
        .await?;
    assert_eq!(lead.flux(&format!("jobs -no {{ranks}} {long}"))?, "2");
    let leaving: Vec<String> = pods(&ns.name, MC, "workers")?
        .iter()
        .filter(|p| {
            let name = p["metadata"]["name"].as_str().unwrap_or_default();
            name.contains("-workers-0-1-") || name.contains("-workers-0-2-")
        })
        .map(|p| {
            assert_eq!(
                p["spec"]["terminationGracePeriodSeconds"], 25,
                "grace 10 s + 15 s"
            );
            p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(leaving.len(), 2, "{leaving:?}");

    // Shrink 4 -> 2 and time the leaving pods' end.
    lead.flux("kvs put e2e.release=1")?;
    let start = Instant::now();
    kubectl_in(
        &ns.name,
        &["scale", &format!("minicluster/{MC}"), "--replicas=2"],
    )?;
    wait_for("the leaving pods to be gone", minute, || async {
        let left = pods(&ns.name, MC, "workers")?;
        let gone = left
            .iter()
            .all(|p| !leaving.iter().any(|l| p["metadata"]["name"] == l.as_str()));
        Ok(gone.then_some(()))
    })
    .await?;
    let drain = start.elapsed();
    eprintln!("shrink 4 -> 2: the leaving pods were gone {drain:.1?} after kubectl scale");
    ensure!(
        drain < Duration::from_secs(25),
        "inside their 25 s grace: {drain:?}"
    );

    // The short job finished in its grace; the long one was requeued, nothing was lost.
    assert_eq!(
        lead.flux(&format!("jobs -no {{result}} {short}"))?,
        "COMPLETED"
    );
    assert_eq!(
        lead.flux(&format!("jobs -no {{result}} {long}"))?,
        "CANCELED"
    );
    let eventlog = lead.flux(&format!("job eventlog {long}"))?;
    let requeued = eventlog
        .split("requeued as ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .map(str::to_string);
    let Some(requeued) = requeued else {
        anyhow::bail!("no requeue note on {long}: {eventlog}");
    };
    assert_eq!(
        lead.flux(&format!("jobs -no {{state}} {requeued}"))?,
        "SCHED"
    );
    assert_eq!(
        lead.flux("resource list -s up -no {nnodes}")?,
        "2",
        "ranks 2 and 3 left"
    );
    // `flux submit` prints ids as `f...`, `flux jobs` as `ƒ...` where the locale allows:
    // compare them in one spelling.
    let plain = |id: &str| id.replacen('ƒ', "f", 1);
    let all = lead.flux("jobs -a -no {id}")?;
    for id in [&wide, &short, &blocker, &long, &requeued] {
        ensure!(
            all.lines().any(|l| plain(l) == plain(id)),
            "job {id} is not in flux jobs -a:\n{all}"
        );
    }
    ns.cleanup().await;
    Ok(())
}
