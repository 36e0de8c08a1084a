//! The repository's examples, applied unchanged, run to their end with real Flux.

use std::time::Duration;

use crate::cluster::{MiniClusterRun, Start, minicluster};

const RUN: Duration = Duration::from_secs(120);

fn example(name: &str) -> String {
    let path = format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every follower's Flux container exits 0 once the lead shut the instance down.
fn assert_followers_done(run: &MiniClusterRun) {
    let c = run.flux_container();
    for (i, w) in &run.followers {
        let code = w
            .wait_exit(&c, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("follower {i}: {e}"));
        assert_eq!(code, 0, "follower {i} exit code\n{}", run.debug());
    }
}

#[test]
fn hello_world_runs_one_task_on_each_of_the_four_brokers_and_ends() {
    let run = MiniClusterRun::start(minicluster(&example("hello-world.yaml")), Start::default());
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    let log = run.lead_log();
    for host in [
        "hello-world-lead-0-0",
        "hello-world-workers-0-0",
        "hello-world-workers-0-1",
        "hello-world-workers-0-2",
    ] {
        assert!(
            log.contains(&format!("hello from {host}")),
            "no task ran on {host}:\n{log}"
        );
    }
    assert_followers_done(&run);
}

#[test]
fn batch_submits_each_line_as_a_job_and_writes_its_output_to_the_logs_directory() {
    // The example unchanged, plus a commands.post that shows what the jobs wrote on each pod
    // (a job writes its output on the pod of its first rank; the container's /tmp goes with
    // it).
    let yaml = example("batch.yaml").replace(
        "      batch: true\n",
        "      batch: true\n      commands:\n        post: head -v /tmp/flux-logs/job-*.out\n",
    );
    let run = MiniClusterRun::start(minicluster(&yaml), Start::default());
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    assert_followers_done(&run);
    let c = run.flux_container();
    let logs: String = std::iter::once(run.lead())
        .chain(run.followers.values())
        .map(|p| p.logs(&c))
        .collect();
    for job in 0..3 {
        assert!(
            logs.contains(&format!("==> /tmp/flux-logs/job-{job}.out <==")),
            "no output file of job {job}:\n{logs}"
        );
    }
    assert!(logs.contains("second job"), "{logs}");
    assert!(
        logs.lines()
            .any(|l| l == "batch-lead-0-0" || l == "batch-workers-0-0"),
        "the hostname job's output is missing: {logs}"
    );
}

#[test]
fn launcher_command_is_the_initial_program_and_its_jobs_complete() {
    let yaml = example("launcher.yaml").replace(
        "flux queue drain'",
        "flux queue drain; flux jobs -a --no-header --format={status}'",
    );
    let run = MiniClusterRun::start(minicluster(&yaml), Start::default());
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    let log = run.lead_log();
    assert_eq!(log.matches("COMPLETED").count(), 3, "{log}");
    assert_followers_done(&run);
}

#[test]
fn interactive_cluster_stays_up_and_ends_with_flux_shutdown_through_the_socket() {
    let run = MiniClusterRun::start(minicluster(&example("interactive.yaml")), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    let out = run.flux_ok("run -N2 --label-io hostname");
    assert!(out.contains("interactive-workers-0-0"), "{out}");
    // Still up: nothing ends an interactive instance but a shutdown.
    std::thread::sleep(Duration::from_secs(2));
    assert!(run.flux("uptime").0 == 0, "{}", run.debug());
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    assert_followers_done(&run);
}

#[test]
fn queued_example_runs_its_command_on_three_brokers_outside_kueue() {
    let run = MiniClusterRun::start(minicluster(&example("kueue.yaml")), Start::default());
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    let log = run.lead_log();
    for host in [
        "queued-lead-0-0",
        "queued-workers-0-0",
        "queued-workers-0-1",
    ] {
        assert!(
            log.lines().any(|l| l.trim() == host),
            "no task ran on {host} (whole lines: Flux's log names hosts too):\n{log}"
        );
    }
}

#[test]
fn elastic_example_starts_at_size_with_resources_for_the_ranks_present() {
    // size 2 of maxSize 6: before broker.toml carried R for the whole host list, Flux waited
    // for hardware reports of all 6 ranks and `flux resource list` failed.
    let run = MiniClusterRun::start(minicluster(&example("elastic.yaml")), Start::default());
    let up = run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    assert_eq!(up.trim(), "2");
    let out = run.flux_ok("run -N2 --label-io hostname");
    assert!(
        out.contains("elastic-lead-0-0") && out.contains("elastic-workers-0-0"),
        "{out}"
    );
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}
