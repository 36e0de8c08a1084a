//! Saving an instance's state to `archive.path` and restoring it into a new MiniCluster.
//!
//! With `sched-simple` and with Fluxion (the default). Fluxion needs the operator's hold of the
//! restored queue (an rc1 task, see `lead.sh.j2`): without it Fluxion 0.54.0 rejects every
//! restored pending job (`alloc denied due to type="unsatisfiable"`), because the job-manager
//! hands them over in rc1, before any rank is online, and Fluxion's fcfs match fails a job
//! that asks for more nodes than are up.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cluster::{MiniClusterRun, Start, minicluster};

const RUN: Duration = Duration::from_secs(120);

/// `scheduler:` lines of `spec.flux`, by scheduler (`flux:` also sets `logLevel`, Flux's
/// default, so it is never empty).
const SIMPLE: &str = "    scheduler:\n      simple: true\n";
const FLUXION: &str = "";

fn with_archive(name: &str, size: i32, host_dir: &str, scheduler: &str) -> String {
    format!(
        "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: {name}
spec:
  size: {size}
  interactive: true
  flux:
{scheduler}    logLevel: 6
  archive:
    path: /state/flux.tar.gz
  containers:
    - image: rockylinux:9
      volumes:
        state:
          path: /state
          hostPath: {host_dir}
"
    )
}

/// `id -> result` of every job the instance knows (`flux jobs -a`).
fn jobs(run: &MiniClusterRun) -> BTreeMap<String, String> {
    run.flux_ok("jobs -a --no-header --format={id.f58},{result}")
        .lines()
        .filter_map(|l| l.split_once(','))
        .map(|(id, r)| (id.trim().to_string(), r.trim().to_string()))
        .collect()
}

#[test]
fn saved_queue_restores_into_a_cluster_of_another_size_with_every_job_and_its_id() {
    saved_queue_restores(SIMPLE);
}

/// Fluxion sees the restored pending jobs only once the new cluster's ranks are up, so none is
/// rejected as unsatisfiable and every one runs.
#[test]
fn fluxion_runs_every_restored_pending_job_once_the_ranks_are_up() {
    saved_queue_restores(FLUXION);
}

fn saved_queue_restores(scheduler: &str) {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();

    // A cluster of 2: two jobs hold both nodes, eight more wait for nodes.
    let a = MiniClusterRun::start(
        minicluster(&with_archive("save", 2, &host_dir, scheduler)),
        Start::default(),
    );
    a.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    let mut running = Vec::new();
    for _ in 0..2 {
        running.push(a.flux_ok("submit -N1 sleep 600").trim().to_string());
    }
    for id in &running {
        a.wait_flux(&format!("jobs -no {{state}} {id}"), RUN, |o| {
            o.trim() == "RUN"
        });
    }
    let mut pending = Vec::new();
    for i in 0..8 {
        pending.push(
            a.flux_ok(&format!("submit -N1 echo restored-{i}"))
                .trim()
                .to_string(),
        );
    }
    for id in &pending {
        a.wait_flux(&format!("jobs -no {{state}} {id}"), RUN, |o| {
            o.trim() == "SCHED"
        });
    }
    a.shutdown();
    assert_eq!(a.wait_lead(RUN), 0, "{}", a.debug());
    assert!(
        a.lead_log()
            .contains("saved Flux state to /state/flux.tar.gz"),
        "{}",
        a.debug()
    );
    assert!(host.path().join("flux.tar.gz").exists());
    assert!(
        !host.path().join(".partial-flux.tar.gz").exists(),
        "a partial dump was left"
    );
    drop(a);

    // A new MiniCluster of 3 with the same archive: nothing is lost, every id is kept.
    let b = MiniClusterRun::start(
        minicluster(&with_archive("restore", 3, &host_dir, scheduler)),
        Start::default(),
    );
    assert!(
        b.lead_log().contains("restoring Flux state") || {
            b.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "3");
            b.lead_log().contains("restoring Flux state")
        }
    );
    b.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "3");
    for id in &pending {
        let result = b.wait_flux(&format!("jobs -no {{result}} {id}"), RUN, |o| {
            !o.trim().is_empty()
        });
        let why = b.flux(&format!("job eventlog {id}")).1 + &b.flux(&format!("job attach {id}")).1;
        assert_eq!(
            result.trim(),
            "COMPLETED",
            "job {id}:\n{why}\n{}",
            b.debug()
        );
    }
    if scheduler == FLUXION {
        let dmesg = b.flux_ok("dmesg");
        assert!(dmesg.contains("restored queue released"), "{dmesg}");
    }
    let all = jobs(&b);
    for id in &pending {
        assert_eq!(
            all.get(id).map(String::as_str),
            Some("COMPLETED"),
            "{all:?}"
        );
    }
    // The jobs that were running when the instance stopped are reported, not dropped.
    for id in &running {
        assert_eq!(all.get(id).map(String::as_str), Some("CANCELED"), "{all:?}");
    }
    let out = b.flux_ok(&format!("job attach {}", pending[3]));
    assert!(out.contains("restored-3"), "{out}");
    b.shutdown();
    assert_eq!(b.wait_lead(RUN), 0, "{}", b.debug());
}
