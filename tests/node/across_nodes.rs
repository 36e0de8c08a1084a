//! MPI across two real nodes (`make test-two-nodes`): a MiniCluster's two brokers on
//! different nodes, so the ranks' traffic leaves one node's bridge for the other's, as on a
//! cluster of machines. Trixie's MPICH 4.2 and Open MPI 5, each at one and two ranks per
//! broker, several runs in a row under Flux's time limit.

use std::collections::BTreeSet;

use anyhow::{Result, ensure};

use crate::cluster::{Lead, pods, wait_phase};
use crate::mpi::{broker_hosts, mpi_cluster, ranks_and_verdict};
use crate::node_loss::{LeadOn, Nodes, placed, two_node_namespace};

#[tokio::test]
async fn mpich_4_2_and_open_mpi_5_ranks_on_two_nodes_pass_a_ring_and_an_allreduce_every_run()
-> Result<()> {
    const RUNS: usize = 5;
    let ns = two_node_namespace("across-nodes").await?;
    let nodes = Nodes::default();
    let mc = "across";
    let yaml = mpi_cluster(mc, 2).replace("mpi-apps:bookworm", "mpi-apps:trixie");
    placed(&ns.name, mc, &nodes, &yaml, LeadOn::First).await?;
    let on: BTreeSet<String> = ["lead", "workers"]
        .iter()
        .flat_map(|role| pods(&ns.name, mc, role).unwrap_or_default())
        .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
        .collect();
    ensure!(on.len() == 2, "the brokers on two nodes: {on:?}");
    let lead = Lead::of(&ns.name, mc)?;
    let hosts = broker_hosts(&ns.name, mc)?;
    for mpi in ["mpich", "openmpi"] {
        for tasks in [2, 4] {
            for i in 0..RUNS {
                let output = lead.flux(&format!(
                    "run -N2 -n{tasks} --time-limit=30s mpi-check-{mpi}"
                ))?;
                let (ranks, verdict) = ranks_and_verdict(&output);
                let ran_on: BTreeSet<String> = ranks.iter().map(|r| r.1.clone()).collect();
                ensure!(
                    ranks.len() == tasks && ran_on == hosts && verdict.starts_with("mpi-check ok"),
                    "{mpi}, {tasks} ranks on two nodes, run {}:\n{output}",
                    i + 1
                );
            }
        }
    }
    lead.flux("shutdown --quiet")?;
    wait_phase(&ns.name, mc, "Succeeded").await?;
    drop(nodes);
    ns.cleanup().await;
    Ok(())
}
