//! `spec.archive` on a PersistentVolumeClaim of the real node: a cluster deleted with
//! `kubectl delete` saves its queue there, and a smaller cluster restores it.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};

use crate::cluster::{
    Lead, apply_yaml, claim_on_the_node, get_json, kubectl_in, namespace, pods, wait_phase,
};
use crate::common::wait_for;

const MC: &str = "resume";
const MINUTE: Duration = Duration::from_secs(60);

/// A MiniCluster of SIZE whose archive is on the claim `flux-state`; running jobs get 40 s.
fn minicluster(size: i32) -> String {
    format!(
        r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: {MC}
spec:
  size: {size}
  interactive: true
  archive:
    path: /state/flux.tar.gz
    runningJobs: Finish
    gracePeriodSeconds: 40
  containers:
    - image: ubuntu:noble
      volumes:
        state:
          path: /state
          claimName: flux-state
"#
    )
}

/// How many times job ID started (its eventlog's `start` events).
fn starts(lead: &Lead, id: &str) -> Result<usize> {
    let log = lead.flux(&format!("job eventlog {id}"))?;
    Ok(log
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("start"))
        .count())
}

#[tokio::test]
async fn a_deleted_cluster_saves_its_queue_on_a_pvc_and_a_smaller_one_runs_every_job_once()
-> Result<()> {
    let mut ns = namespace("archive-pvc").await?;
    let dir = claim_on_the_node(&mut ns, "flux-state")?;
    apply_yaml(&ns.name, &minicluster(3))?;
    wait_phase(&ns.name, MC, "Running").await?;
    let lead = Lead::of(&ns.name, MC)?;

    // Three nodes busy: two jobs that end inside the save's 40 s, one that cannot; four
    // more wait in the queue. All submitted in one exec, so that the cluster is deleted
    // well before the short ones end (their end would let the queued ones run).
    let mut submits = vec!["-N1 sleep 20".to_string(); 2];
    submits.push("-N1 sleep 600".into());
    submits.extend((0..4).map(|i| format!("-N1 echo queued-{i}")));
    let ids: Vec<String> = lead
        .submit(&submits.join(" && flux submit "))?
        .lines()
        .map(str::to_string)
        .collect();
    ensure!(ids.len() == 7, "{ids:?}");
    let (short, long, queued) = (&ids[0..2], ids[2].clone(), &ids[3..]);
    lead.wait("jobs -n --filter=running | wc -l", "3", MINUTE)
        .await?;

    // kubectl delete: the lead stops the queue, gives the running jobs 40 s, cancels what
    // still runs with a note, and the dump lands on the claim.
    let deleted = Instant::now();
    kubectl_in(&ns.name, &["delete", "minicluster", MC, "--wait=false"])?;
    wait_for("every pod gone", 2 * MINUTE, || async {
        Ok(
            (pods(&ns.name, MC, "lead")?.is_empty() && pods(&ns.name, MC, "workers")?.is_empty())
                .then_some(()),
        )
    })
    .await?;
    let save = deleted.elapsed();
    ensure!(
        dir.join("flux.tar.gz").exists(),
        "no archive in {}",
        dir.display()
    );
    eprintln!(
        "saved and gone {:.1} s after kubectl delete",
        save.as_secs_f64()
    );

    // A cluster of 2 restores it: every id there, the ended ones as they ended, the queued
    // ones run once each.
    apply_yaml(&ns.name, &minicluster(2))?;
    wait_phase(&ns.name, MC, "Running").await?;
    let mc = get_json(&ns.name, &format!("minicluster/{MC}"))?;
    let restore = &mc["status"]["restore"];
    // Normally all four queued jobs are pending in the archive; on a slow machine a short
    // job may end before the delete and let one run: then it is among the ended ones.
    let count = |k: &str| restore[k].as_i64().unwrap_or(-1);
    eprintln!("status.restore: {restore}");
    ensure!(count("pendingJobs") >= 1, "{restore}");
    ensure!(count("canceledJobs") == 1, "{restore}");
    ensure!(
        count("pendingJobs") + count("endedJobs") + count("canceledJobs") == 7,
        "{restore}"
    );
    let lead = Lead::of(&ns.name, MC)?;
    lead.wait("jobs -n --filter=pending,running | wc -l", "0", 2 * MINUTE)
        .await?;
    let all = lead.jobs()?;
    ensure!(all.len() == 7, "{all:?}");
    for id in short.iter().chain(queued) {
        ensure!(
            all.get(id).map(String::as_str) == Some("INACTIVE COMPLETED"),
            "{id}: {all:?}"
        );
        ensure!(starts(&lead, id)? == 1, "{id} started more than once");
    }
    ensure!(
        all.get(&long).map(String::as_str) == Some("INACTIVE CANCELED"),
        "{all:?}"
    );
    let note = lead.flux(&format!("job eventlog {long}"))?;
    ensure!(
        note.contains("still running when the instance was saved"),
        "{note}"
    );
    let out = lead.flux(&format!("job attach {}", queued[3]))?;
    ensure!(out == "queued-3", "{out}");
    ns.cleanup().await;
    Ok(())
}

/// An interactive cluster with an archive whose lead pod is deleted (by hand, evicted): the
/// old lead saves as it stops (the running job canceled by the save), the new lead pod
/// restores the archive, and `status.instance.lastRestart` counts, from the archive, what
/// `flux jobs -a` of the new instance shows: the completed job kept, the held one resumed,
/// the running one lost (canceled by the save), nothing uncounted (the old lead saved last).
#[tokio::test]
async fn a_deleted_lead_pod_with_an_archive_counts_what_the_new_instance_restored() -> Result<()> {
    let mut ns = namespace("archive-lead").await?;
    claim_on_the_node(&mut ns, "flux-state")?;
    let yaml = minicluster(2).replace("runningJobs: Finish", "runningJobs: Cancel");
    apply_yaml(&ns.name, &yaml)?;
    wait_phase(&ns.name, MC, "Running").await?;
    let old = Lead::of(&ns.name, MC)?;
    let (done, job, held) = old.completed_running_held().await?;
    let old_pod = crate::cluster::lead_pod(&ns.name, MC)?;
    kubectl_in(&ns.name, &["delete", "pod", &old_pod, "--wait=false"])?;
    let new_pod = wait_for("a new lead pod", 2 * MINUTE, || async {
        let pod = crate::cluster::lead_pod(&ns.name, MC)?;
        Ok((pod != old_pod).then_some(pod))
    })
    .await?;

    let (from, counted, last) = crate::failure::last_restart(&ns.name, MC).await?;
    ensure!(last["pod"] == new_pod.as_str(), "{last}");
    ensure!(
        last["uncounted"].is_null(),
        "the old lead saved last: {last}"
    );
    let lead = Lead::of(&ns.name, MC)?;
    let jobs = lead.jobs()?;
    let state = |id: &str| jobs.get(id).map(String::as_str).unwrap_or("gone");
    ensure!(state(&done) == "INACTIVE COMPLETED", "{jobs:?}");
    ensure!(state(&job) == "INACTIVE CANCELED", "{jobs:?}");
    ensure!(state(&held) == "SCHED", "{jobs:?}");
    ensure!(
        from == "Archive" && counted == [1, 1, 1, 0, 0],
        "{last} {jobs:?}"
    );
    ns.cleanup().await;
    Ok(())
}
