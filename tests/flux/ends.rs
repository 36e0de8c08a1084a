//! How a MiniCluster's job ends, with real Flux: the lead's Flux container exits with the
//! job's own exit code when the job ends (its pod is not restarted: `restartPolicy: Never`,
//! and its Job's `podFailurePolicy` fails the cluster on that code), and with the retry code
//! (75) when its broker ends before the job did, so that its Job starts a new lead instead.

use std::time::Duration;

use crate::cluster::{MiniClusterRun, Start, minicluster};

const RUN: Duration = Duration::from_secs(120);

/// A MiniCluster of `size` brokers whose Flux container runs `command`, with `extra` lines
/// under the container (indented as its fields).
fn yaml(name: &str, size: i32, command: &str, extra: &str) -> String {
    format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {name}\n\
         spec:\n  size: {size}\n  containers:\n    - image: rockylinux:9\n      command: {command}\n\
         {extra}"
    )
}

/// The lead's container exit code, after checking that the kubelet did not restart it and
/// that every follower ended cleanly with the instance.
fn lead_exit(run: &MiniClusterRun) -> i32 {
    let code = run.wait_lead(RUN);
    let c = run.flux_container();
    assert_eq!(run.lead().restarts(&c), 0, "not restarted\n{}", run.debug());
    for (i, follower) in &run.followers {
        let ended = follower.wait_exit(&c, Duration::from_secs(60));
        assert_eq!(ended, Ok(0), "follower {i}\n{}", run.debug());
    }
    code
}

#[test]
fn a_command_that_fails_ends_the_lead_with_its_exit_code_and_nothing_restarts() {
    let mc = yaml("fails", 2, "bash -c 'echo about to fail; exit 3'", "");
    let run = MiniClusterRun::start(minicluster(&mc), Start::default());
    assert_eq!(lead_exit(&run), 3, "{}", run.debug());
    let log = run.lead_log();
    assert!(log.contains("about to fail"), "{log}");
    assert!(log.contains("the job ended with exit code 3"), "{log}");
}

#[test]
fn a_batch_whose_one_job_fails_ends_the_lead_with_that_job_s_exit_code() {
    let mc = yaml(
        "batch-fails",
        2,
        "|\n        hostname\n        bash -c 'exit 4'\n        true",
        "      batch: true\n",
    );
    let run = MiniClusterRun::start(minicluster(&mc), Start::default());
    assert_eq!(lead_exit(&run), 4, "{}", run.debug());
    assert!(
        run.lead_log().contains("exited with exit code 4"),
        "flux job status names the job:\n{}",
        run.debug()
    );
}

#[test]
fn a_launcher_that_fails_and_one_that_succeeds_end_the_lead_with_their_codes() {
    for (name, command, want) in [
        ("launcher-fails", "bash -c 'flux run hostname && exit 5'", 5),
        ("launcher-ok", "bash -c 'flux run hostname'", 0),
    ] {
        let mc = yaml(name, 2, command, "      launcher: true\n");
        let run = MiniClusterRun::start(minicluster(&mc), Start::default());
        assert_eq!(lead_exit(&run), want, "{name}\n{}", run.debug());
    }
}

/// Once the job runs, `kill -9` of the lead broker: its container exits with the retry code.
fn kill_the_lead_broker_under_its_job(run: &MiniClusterRun) {
    run.wait_flux("jobs -no {state}", RUN, |o| o.trim() == "RUN");
    run.kill_in_lead(&["flux-broker"], "KILL");
    let code = run.wait_lead(RUN);
    assert_eq!(code, flux_operator::flux::RETRY_EXIT, "{}", run.debug());
}

/// The lead broker killed under a running job: the job did not end, so this is no outcome:
/// the container exits with the retry code, and the lead's Job would start a new lead.
#[test]
fn a_lead_broker_killed_before_its_job_ended_exits_with_the_retry_code() {
    let mc = yaml("killed", 1, "sleep 600", "");
    let run = MiniClusterRun::start(minicluster(&mc), Start::default());
    kill_the_lead_broker_under_its_job(&run);
    let c = run.flux_container();
    assert_eq!(run.lead().restarts(&c), 0, "{}", run.debug());
    assert!(
        run.lead_log()
            .contains("the instance ended before its job did"),
        "{}",
        run.debug()
    );
}

/// After the retry code, the lead's Job starts a new lead pod (here by hand, as the Job
/// would): the follower's broker, which lost its lead, restarts and joins the new instance,
/// and the job, which needs both brokers, runs again there to its end.
#[test]
fn after_a_retry_the_new_lead_pod_runs_the_job_again_with_the_follower_rejoined() {
    let mc = yaml(
        "retried",
        2,
        "bash -c 'sleep 8; echo done on $(hostname)'",
        "",
    )
    .replace("  size: 2\n", "  size: 2\n  tasks: 2\n");
    let mut run = MiniClusterRun::start(minicluster(&mc), Start::default());
    kill_the_lead_broker_under_its_job(&run);

    run.start_lead();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    let log = run.lead_log();
    for host in ["retried-lead-0-0", "retried-workers-0-0"] {
        assert!(
            log.contains(&format!("done on {host}")),
            "no task on {host}:\n{}",
            run.debug()
        );
    }
}
