//! A broker's pod deleted by hand under a running instance, with a real kubelet and Job
//! controller: what a user sees in Flux and in `kubectl get minicluster`.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::cluster::{
    Lead, apply_yaml, get_json, kubectl_in, minicluster_events as events, namespace, pods,
    wait_phase,
};
use crate::common::wait_for;

const MINUTE: Duration = Duration::from_secs(60);

/// An interactive cluster of 3 whose followers drain for 5 s.
fn yaml(mc: &str) -> String {
    format!(
        r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: {mc}
spec:
  size: 3
  interactive: true
  drainGracePeriodSeconds: 5
  containers:
    - image: ubuntu:noble
"#
    )
}

fn names(pods: &[Value]) -> BTreeSet<String> {
    pods.iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .map(str::to_string)
        .collect()
}

/// The follower pods of index `index` (`<mc>-workers-0-<index>-*`), by name.
fn followers_at(ns: &str, mc: &str, index: usize) -> Result<BTreeSet<String>> {
    let prefix = format!("{mc}-workers-0-{index}-");
    Ok(names(&pods(ns, mc, "workers")?)
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect())
}

/// `status.failed` of the Job of replicated job JOB (`lead` or `workers`).
fn job_failed(ns: &str, mc: &str, job: &str) -> Result<i64> {
    let job = get_json(ns, &format!("job/{mc}-{job}-0"))?;
    Ok(job["status"]["failed"].as_i64().unwrap_or(0))
}

/// Until the MiniCluster reports all `size` brokers ready; the phase then.
async fn all_ready(ns: &str, mc: &str, size: i64) -> Result<Value> {
    wait_for(&format!("{size} brokers ready"), 3 * MINUTE, || async {
        let obj = get_json(ns, &format!("minicluster/{mc}"))?;
        Ok((obj["status"]["readyBrokers"] == size).then(|| obj["status"]["phase"].clone()))
    })
    .await
}

/// What a user sees of a new instance: `status.instance.restarts` is `restarts`, the
/// `Restarted` condition (over: the new instance is up) has REASON and says the queue is
/// gone, and one `InstanceRestarted` Warning per restart says the same.
/// `says`: what the condition's message and the Event say became of the instance.
async fn restart_is_told(
    ns: &str,
    mc: &str,
    restarts: i64,
    reason: &str,
    says: &str,
) -> Result<()> {
    let status = wait_for("status.instance.restarts", MINUTE, || async {
        let obj = get_json(ns, &format!("minicluster/{mc}"))?;
        Ok((obj["status"]["instance"]["restarts"] == restarts).then(|| obj["status"].clone()))
    })
    .await?;
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let restarted = conditions
        .iter()
        .find(|c| c["type"] == "Restarted")
        .with_context(|| format!("no Restarted condition: {status}"))?;
    let message = restarted["message"].as_str().unwrap_or_default();
    ensure!(
        restarted["reason"] == reason || restarted["reason"] == "NewInstanceUp",
        "{restarted}"
    );
    ensure!(message.contains(says), "{restarted}");
    let told = wait_for("an InstanceRestarted Event", MINUTE, || async {
        let told: Vec<_> = events(ns, mc)?
            .into_iter()
            .filter(|(r, _)| r == "InstanceRestarted")
            .collect();
        Ok((told.len() as i64 == restarts).then_some(told))
    })
    .await?;
    ensure!(told.iter().all(|(_, m)| m.contains(says)), "{told:?}");
    Ok(())
}

/// `status.instance.lastRestart` once it is counted: whose records, and the counts
/// (kept, resumed, lost, failed, forgotten).
pub async fn last_restart(ns: &str, mc: &str) -> Result<(String, [i64; 5], Value)> {
    let last = wait_for("status.instance.lastRestart counted", MINUTE, || async {
        let obj = get_json(ns, &format!("minicluster/{mc}"))?;
        let last = obj["status"]["instance"]["lastRestart"].clone();
        Ok(last["countedFrom"].is_string().then_some(last))
    })
    .await?;
    let count = |k: &str| last[k].as_i64().unwrap_or(0);
    let counts = ["kept", "resumed", "lost", "failed", "forgotten"].map(count);
    let from = last["countedFrom"].as_str().unwrap_or_default().to_string();
    Ok((from, counts, last))
}

/// The jobs of `jobs` (`Lead::jobs`) whose state and result are `state`.
fn in_state(jobs: &std::collections::BTreeMap<String, String>, state: &str) -> i64 {
    jobs.values().filter(|s| s.as_str() == state).count() as i64
}

/// Three distinct hosts answer a job across every rank.
fn runs_on_every_rank(lead: &Lead) -> Result<()> {
    let hosts = lead.flux("run -N3 -n3 hostname")?;
    let hosts: BTreeSet<&str> = hosts.lines().collect();
    ensure!(hosts.len() == 3, "{hosts:?}");
    Ok(())
}

#[tokio::test]
async fn a_follower_pod_deleted_under_a_job_drains_and_requeues_it_and_the_replacement_runs_it()
-> Result<()> {
    let mc = "lost";
    let ns = namespace("follower-lost").await?;
    apply_yaml(&ns.name, &yaml(mc))?;
    wait_phase(&ns.name, mc, "Running").await?;
    let lead = Lead::of(&ns.name, mc)?;

    // A job that only rank 2 (the followers' index 1) may run.
    let job = lead.flux("submit -N1 --requires=rank:2 sleep 600")?;
    lead.wait(&format!("jobs -no {{state}} {job}"), "RUN", MINUTE)
        .await?;
    let victim = followers_at(&ns.name, mc, 1)?;
    ensure!(victim.len() == 1, "{victim:?}");
    let victim = victim.into_iter().next().unwrap_or_default();
    kubectl_in(&ns.name, &["delete", "pod", &victim, "--wait=false"])?;

    // The rank drains, the job gets its 5 s, then it is submitted again and the old id is
    // canceled with a note naming the new one.
    lead.wait(&format!("jobs -no {{result}} {job}"), "CANCELED", MINUTE)
        .await?;
    let eventlog = lead.flux(&format!("job eventlog {job}"))?;
    let requeued = eventlog
        .split("requeued as ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| c == ':' || c.is_whitespace()).next())
        .with_context(|| format!("no requeue note in\n{eventlog}"))?
        .to_string();

    // The Job starts the replacement only once the old pod has ended (exit 143: a failure,
    // not a success); its broker takes rank 2 back, undrains it, and the requeued job runs.
    let phase = all_ready(&ns.name, mc, 3).await?;
    ensure!(phase == "Running", "phase {phase}");
    let now = followers_at(&ns.name, mc, 1)?;
    ensure!(!now.contains(&victim), "{victim} still listed: {now:?}");
    ensure!(
        job_failed(&ns.name, mc, "workers")? == 1,
        "workers Job failed count"
    );
    lead.wait(&format!("jobs -no {{state}} {requeued}"), "RUN", 2 * MINUTE)
        .await?;
    lead.flux(&format!("cancel {requeued}"))?;
    runs_on_every_rank(&lead)?;
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn the_lead_pod_deleted_starts_a_new_lead_that_every_follower_rejoins() -> Result<()> {
    let mc = "headless";
    let ns = namespace("lead-lost").await?;
    apply_yaml(&ns.name, &yaml(mc))?;
    wait_phase(&ns.name, mc, "Running").await?;
    let old = Lead::of(&ns.name, mc)?;
    runs_on_every_rank(&old)?;
    let followers = names(&pods(&ns.name, mc, "workers")?);
    // A completed, a running and a held job, which the new instance will not have.
    let (done, job, _held) = old.completed_running_held().await?;
    // What the old instance holds, as `flux jobs -a` shows it: the one running job, and
    // the others (the held one, the completed ones, `runs_on_every_rank`'s among them).
    let held_then = old.jobs()?;
    let running = in_state(&held_then, "RUN");
    let others = held_then.len() as i64 - running;
    ensure!(running == 1 && others == 3, "{held_then:?}");
    let old_pod = crate::cluster::lead_pod(&ns.name, mc)?;
    kubectl_in(&ns.name, &["delete", "pod", &old_pod, "--wait=false"])?;

    // The old lead ends (a failure: 143), then the Job starts a new one; the followers, told
    // by the old lead before it stopped, start their brokers again and join it.
    let new_pod = wait_for("a new lead pod", 2 * MINUTE, || async {
        let pod = crate::cluster::lead_pod(&ns.name, mc)?;
        Ok((pod != old_pod).then_some(pod))
    })
    .await?;
    let phase = all_ready(&ns.name, mc, 3).await?;
    ensure!(phase == "Running", "phase {phase}");
    ensure!(
        job_failed(&ns.name, mc, "lead")? == 1,
        "lead Job failed count"
    );
    let lead = Lead::of(&ns.name, mc)?;
    lead.wait("resource list -s up -no {nnodes}", "3", 2 * MINUTE)
        .await?;
    runs_on_every_rank(&lead)?;
    // The same follower pods: they rejoined, nothing replaced them.
    let now = names(&pods(&ns.name, mc, "workers")?);
    ensure!(now == followers, "followers {followers:?} became {now:?}");
    let log = kubectl_in(
        &ns.name,
        &["logs", followers.iter().next().map_or("", |s| s), "-c", mc],
    )?;
    ensure!(log.contains("rejoining its replacement"), "{log}");
    ensure!(new_pod != old_pod);
    // The old lead counted its instance's jobs as it stopped: the running one lost, the
    // others forgotten; the new instance has none of them.
    let counts = "(counted as its pod stopped): 0 kept, 0 resumed, 1 lost, 0 failed, 3 forgotten";
    restart_is_told(&ns.name, mc, 1, "LeadPodReplaced", counts).await?;
    restart_is_told(
        &ns.name,
        mc,
        1,
        "LeadPodReplaced",
        "a new Flux instance started; the old instance's queue, running jobs and job history are gone",
    )
    .await?;
    let (from, counted, last) = last_restart(&ns.name, mc).await?;
    ensure!(
        from == "StoppedInstance" && counted == [0, 0, running, 0, others],
        "{last}"
    );
    ensure!(last["pod"] == new_pod.as_str(), "{last}");
    let jobs = lead.jobs()?;
    ensure!(
        !jobs.contains_key(&done) && !jobs.contains_key(&job),
        "{jobs:?}"
    );
    ns.cleanup().await;
    Ok(())
}

/// The lead broker of an interactive cluster killed inside its container (as an OOM kill or
/// a crash ends it): the kubelet restarts the container and the same Flux instance starts
/// again from the state its lead keeps in the pod, the followers rejoin it, and the
/// MiniCluster says so (before any of this it said Running and Ready throughout, and the
/// instance came back empty): the job that had completed is still in the history, the one
/// that was running failed with the restart.
#[tokio::test]
async fn the_lead_broker_killed_in_its_container_starts_the_same_instance_again_and_is_reported()
-> Result<()> {
    let mc = "crashed";
    let ns = namespace("lead-crashed").await?;
    apply_yaml(&ns.name, &yaml(mc))?;
    wait_phase(&ns.name, mc, "Running").await?;
    let old = Lead::of(&ns.name, mc)?;
    let (done, job, held) = old.completed_running_held().await?;
    // Past the KVS checkpoint the lead takes every second (with the 10 s it took before, a
    // job that had completed in them came back failed).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pod = crate::cluster::lead_pod(&ns.name, mc)?;
    crate::cluster::flux_exec(&ns.name, &pod, mc, "kill -9 $(flux getattr broker.pid)")?;

    let phase = all_ready(&ns.name, mc, 3).await?;
    ensure!(phase == "Running", "phase {phase}");
    ensure!(
        crate::cluster::lead_pod(&ns.name, mc)? == pod,
        "the same pod"
    );
    restart_is_told(
        &ns.name,
        mc,
        1,
        "LeadBrokerRestarted",
        "the Flux instance started again from the state it keeps in its pod",
    )
    .await?;
    let lead = Lead::of(&ns.name, mc)?;
    lead.wait("resource list -s up -no {nnodes}", "3", 2 * MINUTE)
        .await?;
    // What the condition says: the history is kept, the running job failed.
    let jobs = lead.jobs()?;
    ensure!(
        jobs.get(&done).map(String::as_str) == Some("INACTIVE COMPLETED"),
        "{done}: {jobs:?}"
    );
    ensure!(
        jobs.get(&job).map(String::as_str) == Some("INACTIVE FAILED"),
        "{job}: {jobs:?}"
    );
    let ended = lead.flux(&format!("job eventlog {job}"))?;
    ensure!(
        ended.contains("type=\"restart\"") && ended.contains(flux_operator::flux::RESTART_NOTE),
        "the running job's end names the restart:\n{ended}"
    );
    ensure!(
        jobs.get(&held).map(String::as_str) == Some("SCHED"),
        "{held}: {jobs:?}"
    );
    // The counts, from the state the crashed instance left, are what `flux jobs -a` shows:
    // the completed job kept, the held one resumed, the running one lost.
    let (from, counted, last) = last_restart(&ns.name, mc).await?;
    let shown = [
        in_state(&jobs, "INACTIVE COMPLETED"),
        in_state(&jobs, "SCHED"),
        in_state(&jobs, "INACTIVE FAILED"),
        0,
        0,
    ];
    ensure!(
        from == "Checkpoint" && counted == shown && shown == [1, 1, 1, 0, 0],
        "{last} {jobs:?}"
    );
    let counts =
        "(counted from the state it left): 1 kept, 1 resumed, 1 lost, 0 failed, 0 forgotten";
    restart_is_told(&ns.name, mc, 1, "LeadBrokerRestarted", counts).await?;
    lead.flux(&format!("cancel {held}"))?;
    runs_on_every_rank(&lead)?;
    ns.cleanup().await;
    Ok(())
}
