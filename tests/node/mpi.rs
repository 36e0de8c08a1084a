//! MPI programs across the brokers (issue 29): what HPC users run. The MPI image
//! (`e2e/images.sh`: Debian's MPICH, Open MPI and LAMMPS, and `mpi-check` from `e2e/mpi`
//! built against each MPI) runs in a MiniCluster's pods; `flux run` starts the ranks on
//! every broker, and the MPI finds its peers through Flux's PMI (no `mpirun`, no ssh).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Result, ensure};

use crate::cluster::{Lead, apply_yaml, kubectl_in, namespace, pods, wait_phase};

const MINUTE: Duration = Duration::from_secs(60);

/// An interactive MiniCluster of `size` brokers running the MPI image (its container last,
/// so a caller may add the container's fields).
pub fn mpi_cluster(mc: &str, size: u32) -> String {
    format!(
        r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: {mc}
spec:
  size: {size}
  interactive: true
  containers:
    - image: mpi-apps:bookworm
"#
    )
}

/// The host names of every broker pod of `mc`.
pub fn broker_hosts(ns: &str, mc: &str) -> Result<BTreeSet<String>> {
    let mut hosts = BTreeSet::new();
    for role in ["lead", "workers"] {
        for pod in pods(ns, mc, role)? {
            hosts.insert(
                pod["spec"]["hostname"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    Ok(hosts)
}

/// What `mpi-check` printed: the host of each rank, and its last line (rank 0's verdict).
pub fn ranks_and_verdict(output: &str) -> (Vec<(usize, String)>, String) {
    let mut ranks: Vec<(usize, String)> = output
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("rank ")?;
            let (rank, rest) = rest.split_once(" of ")?;
            let (_, host) = rest.split_once(" on ")?;
            Some((rank.parse().ok()?, host.to_string()))
        })
        .collect();
    ranks.sort();
    let verdict = output
        .lines()
        .find(|l| l.starts_with("mpi-check "))
        .unwrap_or_default()
        .to_string();
    (ranks, verdict)
}

#[tokio::test]
async fn open_mpi_ranks_on_every_broker_pass_a_ring_and_an_allreduce_through_fluxs_pmi()
-> Result<()> {
    let ns = namespace("mpi").await?;
    let mc = "mpi";
    apply_yaml(&ns.name, &mpi_cluster(mc, 3))?;
    wait_phase(&ns.name, mc, "Running").await?;
    let lead = Lead::of(&ns.name, mc)?;
    lead.wait("resource list -s up -no {nnodes}", "3", MINUTE)
        .await?;
    let hosts = broker_hosts(&ns.name, mc)?;
    ensure!(hosts.len() == 3, "three broker hosts: {hosts:?}");

    // One rank per broker, then two per broker: the world spans every pod. Open MPI only:
    // MPICH 4.0's ranks pass the ring and the allreduce here but now and then hang in
    // MPI_Finalize (docs/mpi.md). Each run is bounded by Flux's own time limit.
    let runs = [("openmpi", 3, 3), ("openmpi", 3, 6)];
    for (mpi, nodes, tasks) in runs {
        let output = lead.flux(&format!(
            "run -N{nodes} -n{tasks} --time-limit=2m mpi-check-{mpi}"
        ))?;
        let (ranks, verdict) = ranks_and_verdict(&output);
        let what = format!("{mpi}, -N{nodes} -n{tasks}:\n{output}");
        assert_eq!(
            ranks.iter().map(|r| r.0).collect::<Vec<_>>(),
            (0..tasks).collect::<Vec<_>>(),
            "every rank of the world reports once ({what})"
        );
        let ran_on: BTreeSet<String> = ranks.iter().map(|r| r.1.clone()).collect();
        assert_eq!(ran_on, hosts, "ranks on every broker's pod ({what})");
        let want = tasks * (tasks - 1) / 2;
        assert!(
            verdict.starts_with(&format!(
                "mpi-check ok: size {tasks}, ring {want}, allreduce {want}, hosts "
            )),
            "the ring and the allreduce sum the ranks ({what})"
        );
    }
    lead.flux("shutdown --quiet")?;
    wait_phase(&ns.name, mc, "Succeeded").await?;
    ns.cleanup().await;
    Ok(())
}

/// Trixie's MPICH 4.2 and Open MPI 5 (`mpi-apps:trixie`, with the portable view) on the real
/// node: `mpi-check` 20 times in a row at one and at two ranks per broker each, every run
/// under Flux's time limit, so a hang one run in twenty fails. Open MPI 5 wires up through
/// the PMIx server the view gives every job; MPICH through Flux's PMI-1. (Bookworm's MPICH
/// 4.0 is not here: its finalize hangs across pods, docs/mpi.md.)
#[tokio::test]
async fn trixies_mpich_4_2_and_open_mpi_5_end_twenty_runs_in_a_row_at_one_and_two_ranks_per_broker()
-> Result<()> {
    const RUNS: usize = 20;
    let ns = namespace("mpi-trixie").await?;
    let mc = "trixie";
    let yaml = mpi_cluster(mc, 2).replace("mpi-apps:bookworm", "mpi-apps:trixie");
    apply_yaml(&ns.name, &yaml)?;
    wait_phase(&ns.name, mc, "Running").await?;
    let lead = Lead::of(&ns.name, mc)?;
    lead.wait("resource list -s up -no {nnodes}", "2", MINUTE)
        .await?;
    let hosts = broker_hosts(&ns.name, mc)?;
    for mpi in ["mpich", "openmpi"] {
        for tasks in [2, 4] {
            let mut secs = Vec::with_capacity(RUNS);
            for i in 0..RUNS {
                let started = std::time::Instant::now();
                let output = lead
                    .flux(&format!("run -N2 -n{tasks} --time-limit=30s mpi-check-{mpi}"))
                    .map_err(|e| {
                        anyhow::anyhow!("{mpi}, {tasks} ranks: run {} of {RUNS} did not end well (exit 142 is Flux's time limit: a hang): {e}", i + 1)
                    })?;
                secs.push(started.elapsed().as_secs_f64());
                let (ranks, verdict) = ranks_and_verdict(&output);
                let ran_on: BTreeSet<String> = ranks.iter().map(|r| r.1.clone()).collect();
                ensure!(
                    ranks.len() == tasks && ran_on == hosts && verdict.starts_with("mpi-check ok"),
                    "{mpi}, {tasks} ranks, run {}: every rank on both pods, ring and allreduce:\n{output}",
                    i + 1
                );
            }
            secs.sort_by(f64::total_cmp);
            eprintln!(
                "{mpi} (trixie), {tasks} ranks on 2 brokers: {RUNS} of {RUNS} runs ended; seconds \
                 min {:.2} median {:.2} max {:.2}",
                secs[0],
                secs[RUNS / 2],
                secs[RUNS - 1]
            );
        }
    }
    lead.flux("shutdown --quiet")?;
    wait_phase(&ns.name, mc, "Succeeded").await?;
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn lammps_runs_as_mpi_ranks_on_two_brokers_and_reports_its_loop_and_total_wall_time()
-> Result<()> {
    let ns = namespace("lammps").await?;
    // A batch MiniCluster as a user writes one: LAMMPS' Lennard-Jones melt from Debian's
    // lammps-examples, two ranks, one on each broker, the log on standard output.
    let yaml = r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: lammps
spec:
  size: 2
  tasks: 2
  containers:
    - image: mpi-apps:bookworm
      workingDir: /opt/lammps/examples/melt
      command: lmp -in in.melt -log none -nocite
"#;
    apply_yaml(&ns.name, yaml)?;
    wait_phase(&ns.name, "lammps", "Succeeded").await?;
    let lead = pods(&ns.name, "lammps", "lead")?;
    let pod = lead[0]["metadata"]["name"].as_str().unwrap_or_default();
    let log = kubectl_in(&ns.name, &["logs", pod, "-c", "lammps"])?;
    assert!(
        log.contains("1 by 1 by 2 MPI processor grid")
            || log.contains("2 by 1 by 1 MPI processor grid")
            || log.contains("1 by 2 by 1 MPI processor grid"),
        "LAMMPS split its box over 2 MPI ranks:\n{log}"
    );
    assert!(
        log.lines()
            .any(|l| l.starts_with("Loop time of ") && l.contains(" on 2 procs for 250 steps")),
        "the run's 250 steps on 2 ranks:\n{log}"
    );
    assert!(log.contains("Total wall time: "), "{log}");
    ns.cleanup().await;
    Ok(())
}
