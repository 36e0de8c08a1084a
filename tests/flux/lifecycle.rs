//! Start orders, elasticity and readiness, with real brokers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::{MiniClusterRun, Start, minicluster};
use crate::kubelet::{Pod, State};

const RUN: Duration = Duration::from_secs(120);

fn hello(name: &str, size: i32) -> String {
    format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {name}\n\
         spec:\n  size: {size}\n  tasks: {size}\n  containers:\n    - image: rockylinux:9\n      \
         command: hostname\n"
    )
}

fn assert_ran_on_all(run: &MiniClusterRun) {
    let log = run.lead_log();
    let mut hosts = vec![run.lead().meta.hostname.clone()];
    hosts.extend(run.followers.values().map(|w| w.meta.hostname.clone()));
    for h in hosts {
        assert!(
            log.lines().any(|l| l.trim() == h),
            "no task on {h}:\n{}",
            run.debug()
        );
    }
}

#[test]
fn followers_started_before_the_lead_join_it_and_the_job_runs_everywhere() {
    let how = Start {
        followers_early: Duration::from_secs(6),
        ..Start::default()
    };
    let run = MiniClusterRun::start(minicluster(&hello("early-workers", 3)), how);
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    assert_ran_on_all(&run);
}

#[test]
fn lead_started_before_the_followers_waits_for_them_and_the_job_runs_everywhere() {
    let how = Start {
        lead_early: Duration::from_secs(6),
        ..Start::default()
    };
    let run = MiniClusterRun::start(minicluster(&hello("early-lead", 3)), how);
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    assert_ran_on_all(&run);
}

#[test]
fn a_job_submitted_before_the_followers_join_waits_for_them_instead_of_being_rejected() {
    // Fluxion 0.54.0 fails a job that asks for more nodes than are up as unsatisfiable; the
    // lead holds the queue until the quorum (here every rank) is up.
    let yaml = "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  \
                name: early-job\nspec:\n  size: 3\n  interactive: true\n  containers:\n    \
                - image: rockylinux:9\n";
    let how = Start {
        only_followers: Some(vec![]),
        ..Start::default()
    };
    let mut run = MiniClusterRun::start(minicluster(yaml), how);
    run.wait_flux("resource list -s down -no {nnodes}", RUN, |o| {
        o.trim() == "2"
    });
    let id = run.flux_ok("submit -N3 hostname");
    let id = id.trim();
    std::thread::sleep(Duration::from_secs(3));
    let state = run.flux_ok(&format!("jobs -no {{state}} {id}"));
    assert_eq!(
        state.trim(),
        "SCHED",
        "{}\n{}",
        run.flux(&format!("job eventlog {id}")).1,
        run.debug()
    );
    let queue = run.flux_ok("queue status");
    assert!(
        queue.contains("held until the quorum of brokers is up"),
        "{queue}"
    );

    run.start_followers(&[0, 1]);
    assert_eq!(
        run.wait_job_result(id, RUN),
        "COMPLETED",
        "{}\n{}",
        run.flux(&format!("job eventlog {id}")).1,
        run.debug()
    );
    let out = run.flux_ok(&format!("job attach {id}"));
    for h in [
        "early-job-lead-0-0",
        "early-job-workers-0-0",
        "early-job-workers-0-1",
    ] {
        assert!(out.lines().any(|l| l.trim() == h), "{out}");
    }
    assert!(run.flux_ok("dmesg").contains("3 nodes up, queue released"));
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

#[test]
fn followers_keep_running_while_the_lead_is_unreachable_then_join_when_it_comes() {
    let how = Start {
        lead: false,
        ..Start::default()
    };
    let mut run = MiniClusterRun::start(minicluster(&hello("no-lead", 3)), how);
    std::thread::sleep(Duration::from_secs(8));
    let c = run.flux_container();
    for (i, w) in &run.followers {
        assert_eq!(
            w.state(&c),
            Some(State::Running),
            "follower {i}\n{}",
            run.debug()
        );
        assert_eq!(w.restarts(&c), 0, "the kubelet restarted follower {i}");
    }
    run.start_lead();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    assert_ran_on_all(&run);
}

const ELASTIC: &str = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: grow
spec:
  size: 2
  maxSize: 4
  interactive: true
  containers:
    - image: rockylinux:9
";

#[test]
fn elastic_cluster_grows_to_max_size_and_shrinks_back_while_the_instance_and_its_jobs_stay_up() {
    let mut run = MiniClusterRun::start(minicluster(ELASTIC), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    run.flux_ok("run -N2 hostname");

    // Grow: JobSet's followers Job gets two more pods (ranks 2 and 3).
    run.start_followers(&[1, 2]);
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "4");
    let out = run.flux_ok("run -N4 --label-io hostname");
    for h in [
        "grow-lead-0-0",
        "grow-workers-0-0",
        "grow-workers-0-1",
        "grow-workers-0-2",
    ] {
        assert!(out.contains(h), "{out}");
    }

    // A job on the ranks that stay (one core of each), running across the shrink.
    let id = run.flux_ok("submit -N2 -n2 --requires=rank:0-1 sleep 300");
    let id = id.trim();
    run.wait_flux(&format!("jobs -no {{state}} {id}"), RUN, |o| {
        o.trim() == "RUN"
    });

    // Shrink: the two highest followers go.
    run.delete_followers(&[1, 2], Duration::from_secs(2));
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    assert_eq!(
        run.flux_ok(&format!("jobs -no {{state}} {id}")).trim(),
        "RUN"
    );
    run.flux_ok("run -N2 -n2 hostname");

    // Grow again: the same ranks come back and take work.
    run.start_followers(&[1]);
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "3");
    let out = run.flux_ok("run -N3 -n3 --label-io hostname");
    assert!(out.contains("grow-workers-0-1"), "{out}");

    run.flux_ok(&format!("cancel {id}"));
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

/// An elastic cluster of `size: 2`, `maxSize: 4` with `queuePolicy` `policy`.
fn elastic_with_policy(name: &str, policy: &str) -> String {
    format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {name}\n\
         spec:\n  size: 2\n  maxSize: 4\n  interactive: true\n  flux:\n    scheduler:\n      \
         queuePolicy: {policy}\n  containers:\n    - image: rockylinux:9\n"
    )
}

#[test]
fn a_job_larger_than_the_cluster_waits_for_a_grow_under_easy_and_is_rejected_under_fcfs() {
    // Fluxion 0.54.0's fcfs match (with satisfiability) rejects a job that asks for more
    // nodes than are up; the backfilling policies (easy here) keep it pending.
    let fcfs = MiniClusterRun::start(
        minicluster(&elastic_with_policy("fcfs", "fcfs")),
        Start::default(),
    );
    let mut easy = MiniClusterRun::start(
        minicluster(&elastic_with_policy("easy", "easy")),
        Start::default(),
    );
    for run in [&fcfs, &easy] {
        run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    }
    let rejected = fcfs.flux_ok("submit -N4 hostname");
    let rejected = rejected.trim();
    assert_eq!(
        fcfs.wait_job_result(rejected, RUN),
        "FAILED",
        "{}",
        fcfs.debug()
    );
    let events = fcfs.flux_ok(&format!("job eventlog {rejected}"));
    assert!(events.contains("unsatisfiable"), "{events}");

    let id = easy.flux_ok("submit -N4 hostname");
    let id = id.trim();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        easy.flux_ok(&format!("jobs -no {{state}} {id}")).trim(),
        "SCHED",
        "{}",
        easy.flux(&format!("job eventlog {id}")).1
    );
    // Grow to maxSize: the job starts on the new ranks.
    easy.start_followers(&[1, 2]);
    assert_eq!(
        easy.wait_job_result(id, RUN),
        "COMPLETED",
        "{}\n{}",
        easy.flux(&format!("job eventlog {id}")).1,
        easy.debug()
    );
    let out = easy.flux_ok(&format!("job attach {id}"));
    assert!(out.lines().any(|l| l.trim() == "easy-workers-0-2"), "{out}");
    for run in [&fcfs, &easy] {
        run.shutdown();
        assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    }
}

#[test]
fn min_size_cluster_runs_with_min_size_brokers_present() {
    let yaml = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: quorum
spec:
  size: 3
  minSize: 2
  interactive: true
  containers:
    - image: rockylinux:9
";
    let how = Start {
        only_followers: Some(vec![0]),
        ..Start::default()
    };
    let run = MiniClusterRun::start(minicluster(yaml), how);
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    let out = run.flux_ok("run -N2 --label-io hostname");
    assert!(out.contains("quorum-workers-0-0"), "{out}");
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

#[test]
fn readiness_probes_pass_only_while_the_brokers_are_up_and_joined() {
    // The hooks hold each broker back, so the probes run before and after it starts.
    let yaml = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: probes
spec:
  size: 2
  interactive: true
  containers:
    - image: rockylinux:9
      commands:
        brokerPre: sleep 6
        workerPre: sleep 6
";
    let run = MiniClusterRun::start(minicluster(yaml), Start::default());
    let c = run.flux_container();
    let follower = run.followers.get(&0).unwrap().clone();
    let (lead_c, lead_probe) = run.flux_container_probe(true);
    let (follower_c, follower_probe) = run.flux_container_probe(false);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !run.lead().probe_once(&lead_c, &lead_probe),
        "lead ready before its broker"
    );
    assert!(
        !follower.probe_once(&follower_c, &follower_probe),
        "follower ready before its broker"
    );
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    assert!(
        run.lead().probe_once(&lead_c, &lead_probe),
        "{}",
        run.debug()
    );
    // The follower's probe may need a moment longer than the lead's view of it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !follower.probe_once(&follower_c, &follower_probe) {
        assert!(std::time::Instant::now() < deadline, "{}", run.debug());
        std::thread::sleep(Duration::from_millis(200));
    }
    // And the kubelet's own probe loop agrees.
    run.lead().wait_ready(&c, Duration::from_secs(10)).unwrap();
    follower.wait_ready(&c, Duration::from_secs(20)).unwrap();

    // The follower's broker killed: its port closes (the broker left state run), and opens
    // again once the entrypoint's restart has joined the instance again.
    follower
        .kill_in(&c, &["flux-broker"], "KILL")
        .unwrap_or_else(|e| panic!("{e}\n{}", run.debug()));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while follower.probe_once(&follower_c, &follower_probe) {
        assert!(
            std::time::Instant::now() < deadline,
            "the follower's probe still passes with its broker killed\n{}",
            run.debug()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !follower.probe_once(&follower_c, &follower_probe) {
        assert!(std::time::Instant::now() < deadline, "{}", run.debug());
        std::thread::sleep(Duration::from_millis(200));
    }
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

/// A shrink (the followers' Job deletes its highest pods; each gets SIGTERM and its grace):
/// the leaving ranks are drained; a job there that ends within `drainGracePeriodSeconds`
/// finishes normally; one that does not is requeued (a new id, queued; the old one canceled
/// with a note naming it). Then a grow: the ranks come back, are undrained, and the requeued
/// job, queued since the shrink, starts there.
#[test]
fn a_shrink_lets_a_job_finish_in_its_grace_requeues_one_that_cannot_and_a_grow_starts_it() {
    let yaml = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: drain
spec:
  size: 4
  maxSize: 4
  interactive: true
  drainGracePeriodSeconds: 10
  containers:
    - image: rockylinux:9
";
    let mut run = MiniClusterRun::start(minicluster(yaml), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "4");
    let short = run
        .flux_ok("submit -N1 --requires=rank:3 bash -c 'sleep 5; echo finished'")
        .trim()
        .to_string();
    // The ranks that stay (0 and 1) are kept busy, so the long job lands on rank 2 without a
    // constraint (a requeued copy of a job pinned to a leaving rank could never run).
    let blocker = run
        .flux_ok("submit -N2 --exclusive --requires=rank:0-1 sleep 600")
        .trim()
        .to_string();
    run.wait_flux(&format!("jobs -no {{state}} {blocker}"), RUN, |o| {
        o.trim() == "RUN"
    });
    run.wait_flux(&format!("jobs -no {{state}} {short}"), RUN, |o| {
        o.trim() == "RUN"
    });
    // Its command line has the word rc3, as the broker's finalizer has: the leaving rank's
    // trap must not take a job's process for rc3 (and let the broker go undrained).
    let long = run
        .flux_ok("submit -N1 bash -c 'sleep 600; :' rc3")
        .trim()
        .to_string();
    run.wait_flux(&format!("jobs -no {{state}} {long}"), RUN, |o| {
        o.trim() == "RUN"
    });
    assert_eq!(
        run.flux_ok(&format!("jobs -no {{ranks}} {long}")).trim(),
        "2"
    );
    assert_eq!(
        run.followers[&0].termination_grace(),
        Duration::from_secs(10 + 15)
    );

    // Shrink 4 -> 2: ranks 2 and 3 go.
    run.delete_followers_as_kubelet(&[1, 2]);
    assert_eq!(
        run.flux_ok(&format!("jobs -no {{result}} {short}")).trim(),
        "COMPLETED",
        "{}",
        run.debug()
    );
    assert_eq!(
        run.flux_ok(&format!("jobs -no {{result}} {long}")).trim(),
        "CANCELED"
    );
    let note = run.flux_ok(&format!("job eventlog {long}"));
    let requeued = note
        .split("requeued as ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("no requeue note: {note}\n{}", run.debug()))
        .to_string();
    assert_eq!(
        run.flux_ok(&format!("jobs -no {{state}} {requeued}"))
            .trim(),
        "SCHED",
        "the requeued job is queued: {}",
        run.flux(&format!("job eventlog {requeued}")).1
    );

    // Grow: the ranks come back, are undrained, and the requeued job starts there.
    run.start_followers(&[1, 2]);
    run.wait_flux(&format!("jobs -no {{state}} {requeued}"), RUN, |o| {
        o.trim() == "RUN"
    });
    let ranks = run.flux_ok(&format!("jobs -no {{ranks}} {requeued}"));
    assert!(
        ["2", "3"].contains(&ranks.trim()),
        "{ranks}: not on a returning rank"
    );

    run.flux_ok(&format!("cancel {requeued} {blocker}"));
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

/// A shrink that takes two ranks of one running job away (4 -> 2 under a job on ranks 1-3):
/// both leaving followers see the job, and exactly one of them requeues it. The copy waits
/// for the ranks it needs (not refused as unsatisfiable) and runs once the cluster grows back.
#[test]
fn a_shrink_under_a_job_on_two_leaving_ranks_requeues_it_exactly_once_and_the_copy_runs_after_a_grow()
 {
    let yaml = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: wide
spec:
  size: 4
  maxSize: 4
  interactive: true
  drainGracePeriodSeconds: 3
  containers:
    - image: rockylinux:9
";
    let mut run = MiniClusterRun::start(minicluster(yaml), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "4");
    let blocker = run
        .flux_ok("submit -N1 --requires=rank:0 sleep 600")
        .trim()
        .to_string();
    let wide = run.flux_ok("submit -N3 sleep 600").trim().to_string();
    run.wait_flux(&format!("jobs -no {{state}} {wide}"), RUN, |o| {
        o.trim() == "RUN"
    });
    assert_eq!(
        run.flux_ok(&format!("jobs -no {{ranks}} {wide}")).trim(),
        "[1-3]"
    );

    // Shrink 4 -> 2: ranks 2 and 3 go, both under the wide job.
    run.delete_followers_as_kubelet(&[1, 2]);
    assert_eq!(
        run.flux_ok(&format!("jobs -no {{result}} {wide}")).trim(),
        "CANCELED",
        "{}",
        run.debug()
    );
    let all = run.flux_ok("jobs -a -no {id}");
    let copies: Vec<&str> = all
        .lines()
        .map(str::trim)
        .filter(|id| *id != blocker && *id != wide)
        .collect();
    assert_eq!(
        copies.len(),
        1,
        "one copy of {wide}, not {copies:?}: {}\n{}",
        run.flux_ok(&format!("job eventlog {wide}")),
        run.debug()
    );
    let copy = copies[0].to_string();
    let eventlog = run.flux_ok(&format!("job eventlog {wide}"));
    assert!(
        // Flux prints an id with ƒ or f depending on the locale.
        eventlog.contains(&format!("requeued as {}", copy.replace('ƒ', "f"))),
        "the old job's note names its copy {copy}: {eventlog}"
    );
    // Held (urgency 0) while 2 nodes are up: released, Fluxion's fcfs would fail it as
    // unsatisfiable.
    assert_eq!(
        run.flux_ok(&format!("jobs -no {{state}}:{{urgency}} {copy}"))
            .trim(),
        "SCHED:0",
        "the copy waits for its ranks: {}",
        run.flux(&format!("job eventlog {copy}")).1
    );

    // Grow back to 4: the copy runs on the returning ranks.
    run.start_followers(&[1, 2]);
    run.wait_flux(&format!("jobs -no {{state}} {copy}"), RUN, |o| {
        o.trim() == "RUN"
    });
    assert_eq!(run.flux_ok("jobs -a -no {id}").lines().count(), 3);
    run.flux_ok(&format!("cancel {copy} {blocker}"));
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

/// A fixed-size cluster whose follower pod is replaced (an eviction; the Job controller
/// makes a new pod of the same index): the rank comes back and takes work again. (With the
/// R Flux builds from the ranks' hardware reports, a rank that leaves is removed from the
/// scheduler for good; the operator's configured R keeps it.)
#[test]
fn a_replaced_follower_pod_of_a_fixed_size_cluster_takes_work_again() {
    let yaml = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: evict
spec:
  size: 3
  interactive: true
  containers:
    - image: rockylinux:9
";
    let mut run = MiniClusterRun::start(minicluster(yaml), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "3");
    run.delete_followers_as_kubelet(&[1]);
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    run.start_followers(&[1]);
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "3");
    let out = run.flux_ok("run -N1 --requires=rank:2 hostname");
    assert_eq!(out.trim(), "evict-workers-0-1", "{}", run.debug());
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

/// An interactive cluster of two brokers, both up, with its pods taken out of the run (so
/// the test deletes them, not the run's drop): the Flux container's name, the lead, the
/// follower.
fn two_brokers_taken(name: &str) -> (MiniClusterRun, String, Arc<Pod>, Arc<Pod>) {
    let (mut run, c) = two_brokers(name);
    let follower = run.followers.remove(&0).expect("follower 0");
    let lead = run.lead.take().expect("the lead");
    (run, c, lead, follower)
}

/// An interactive MiniCluster of two brokers, both up, and its Flux container's name.
fn two_brokers(name: &str) -> (MiniClusterRun, String) {
    let yaml = format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {name}\n\
         spec:\n  size: 2\n  interactive: true\n  containers:\n    - image: rockylinux:9\n"
    );
    let run = MiniClusterRun::start(minicluster(&yaml), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    let c = run.flux_container();
    (run, c)
}

/// Delete `follower` as the kubelet does, with its grace period (at least 30 s, so a
/// deletion that waits it out shows): how long it took, and its log.
fn delete_follower_timed(follower: &Pod, c: &str) -> (Duration, String) {
    let grace = follower.termination_grace();
    assert!(grace >= Duration::from_secs(30), "{grace:?}");
    let started = Instant::now();
    follower.delete(grace);
    (started.elapsed(), follower.logs(c))
}

/// A MiniCluster deleted whole: the kubelet may stop the lead's pod before a follower's
/// SIGTERM comes (the two Jobs are deleted apart). The follower's broker then exits 0 with
/// the instance, and since the lead marked its followers as it stopped (it cannot tell a
/// deletion of its pod alone from the whole cluster's), the follower waits to rejoin a new
/// lead. Its SIGTERM in that wait must end it then, not start a broker that waits for a lead
/// that never comes until the grace period (75 s) ends in SIGKILL.
#[test]
fn a_follower_deleted_while_it_waits_to_rejoin_the_lead_exits_at_once_not_after_its_grace() {
    let (_run, c, lead, follower) = two_brokers_taken("whole");
    lead.delete(lead.termination_grace());
    let waiting = "rejoining its replacement";
    let rejoining = follower.wait_log(&c, Duration::from_secs(30), |l| l.contains(waiting));
    assert!(rejoining, "{}", follower.logs(&c));

    let (took, log) = delete_follower_timed(&follower, &c);
    assert!(
        took < Duration::from_secs(10),
        "the follower took {took:?}:\n{log}"
    );
    let after = &log[log.find(waiting).unwrap()..];
    assert!(
        !after.contains("starting a follower broker"),
        "a broker started after the SIGTERM:\n{log}"
    );
    assert!(after.contains("exiting 143"), "{log}");
}

/// The lead's pod gone at once (killed with no grace, its node lost): its broker never shuts
/// the instance down, and a follower does not notice. A follower then deleted must not wait
/// for its drain, which only the lead answers, until its grace period (75 s) ends in SIGKILL.
#[test]
fn a_follower_deleted_after_its_lead_was_killed_stops_without_waiting_for_the_lead() {
    let (_run, c, lead, follower) = two_brokers_taken("killed");
    lead.delete(Duration::ZERO);

    let (took, log) = delete_follower_timed(&follower, &c);
    assert!(
        took < Duration::from_secs(20),
        "the follower took {took:?}:\n{log}"
    );
    assert!(log.contains("the lead did not answer"), "{log}");
    assert!(log.contains("exiting 143"), "{log}");
}

/// A whole MiniCluster deleted: a follower's SIGTERM comes while its broker runs, and while
/// its trap drains the rank (1.5-2.3 s with eight ranks on two cores), the lead shuts the
/// instance down and the follower's broker runs its own rc3. A SIGTERM to the broker then
/// cuts rc3 short, and the broker cancels the modules rc3 did not unload and exits 10 s
/// later (the 13-15 s size-8 deletions on the real node). A broker that has left the
/// instance by itself is let finish.
#[test]
fn a_follower_deleted_as_its_broker_leaves_with_the_instance_lets_its_rc3_finish() {
    let_finish("with-instance", false);
}

/// The same, when the follower's readiness helper (joined.py, which ends as the broker
/// leaves `run`) has not ended yet as the trap decides: a Python process a moment late on a
/// busy node (1 of 80 deletions in a bench run took 12.7 s so). The trap sees rc3 running.
#[test]
fn a_follower_deleted_as_its_broker_leaves_lets_its_rc3_finish_before_its_readiness_helper_ends() {
    let_finish("helper-late", true);
}

fn let_finish(name: &str, hold_joined: bool) {
    let mut resumed = None;
    let (log, _) = deleted_while_rc3_runs(name, hold_joined, |follower, _, rc3| {
        resumed = Some(Instant::now());
        follower.resume(rc3);
    });
    let took = resumed.expect("rc3 resumed").elapsed();
    assert!(log.contains("letting it finish"), "{log}");
    assert!(!log.contains("not properly shut down"), "{log}");
    assert!(
        took < Duration::from_secs(5),
        "the follower took {took:?} after rc3 went on:\n{log}"
    );
}

/// A follower broker let finish leaving by itself that does not (its rc3 hangs, here held
/// stopped) gets its SIGTERM 10 s later all the same.
#[test]
fn a_follower_broker_let_finish_that_hangs_gets_its_sigterm_ten_seconds_later() {
    let mut waited = None;
    let (log, decided) = deleted_while_rc3_runs("hangs", false, |follower, c, rc3| {
        let signalled = |log: &str| {
            log.find("letting it finish")
                .is_some_and(|at| log[at..].contains("signal 15"))
        };
        waited = Some(follower.wait_log(c, Duration::from_secs(30), signalled));
        follower.resume(rc3);
    });
    let signalled_after = decided.elapsed();
    assert_eq!(waited, Some(true), "no SIGTERM came:\n{log}");
    assert!(
        signalled_after >= Duration::from_secs(9),
        "the SIGTERM came after {signalled_after:?}, not 10 s:\n{log}"
    );
}

/// Delete the follower of a two-broker MiniCluster as its lead shuts the instance down, the
/// two held with SIGSTOP where they meet: the trap's drain until the follower's broker runs
/// rc3, and rc3 until the trap has decided what to do with the broker; with `hold_joined`,
/// the follower's readiness helper too, from before the deletion until the trap has
/// decided. Then `then` gets the follower, its container and rc3's PID; the deletion's log
/// once it has ended, and when the trap decided.
fn deleted_while_rc3_runs(
    name: &str,
    hold_joined: bool,
    then: impl FnOnce(&Pod, &str, i32),
) -> (String, Instant) {
    let (mut run, c) = two_brokers(name);
    let follower = run.followers.remove(&0).expect("follower 0");
    let held = Duration::from_secs(30);
    let joined = hold_joined.then(|| {
        let joined = follower.stop_in(&c, &["joined.py"], held);
        joined.unwrap_or_else(|e| panic!("{e}:\n{}", follower.logs(&c)))
    });
    std::thread::scope(|s| {
        let deletion = s.spawn(|| delete_follower_timed(&follower, &c));
        // The trap's drain of rank 1 (the watcher lists drained ranks: drain --no-header).
        let drain = follower.stop_in(&c, &["flux-resource.py", "drain", "1"], held);
        let drain = drain.unwrap_or_else(|e| panic!("{e}:\n{}", follower.logs(&c)));
        s.spawn(|| run.shutdown());
        let rc3 = follower.stop_in(&c, &["flux-modprobe.py", "rc3"], held);
        let rc3 = rc3.unwrap_or_else(|e| panic!("{e}:\n{}", follower.logs(&c)));
        follower.resume(drain);
        let decided = ["stopping the follower broker", "letting it finish"];
        follower.wait_log(&c, held, |l| decided.iter().any(|d| l.contains(d)));
        let at = Instant::now();
        if let Some(joined) = joined {
            follower.resume(joined);
        }
        then(&follower, &c, rc3);
        (deletion.join().unwrap().1, at)
    })
}
