//! Flux told what Kubernetes gave each pod (issue 29): each broker's R lists the cores its
//! container's CPU limit allows and the GPUs it asked for, so `flux run -n` places one rank
//! per allocated core. The node here has two cores and no GPU: it advertises `nvidia.com/gpu`
//! as an extended resource for the test (no device plugin, no device: Flux's R is what is
//! proven, not a GPU program).

use std::time::Duration;

use anyhow::{Result, ensure};

use crate::cluster::{Lead, apply_yaml, kubectl, namespace, node_name, wait_phase};
use crate::mpi::mpi_cluster;

const MINUTE: Duration = Duration::from_secs(60);

/// The node advertises `count` of `nvidia.com/gpu` (a status patch, as the Kubernetes docs
/// advertise an extended resource); `None` takes it back.
fn advertise_gpus(count: Option<u32>) -> Result<()> {
    let patch = match count {
        Some(n) => {
            format!(r#"[{{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"{n}"}}]"#)
        }
        None => r#"[{"op":"remove","path":"/status/capacity/nvidia.com~1gpu"}]"#.to_string(),
    };
    let node = format!("node/{}", node_name());
    kubectl([
        "patch",
        &node,
        "--subresource=status",
        "--type=json",
        "-p",
        &patch,
    ])
    .map(drop)
}

#[tokio::test]
async fn pods_with_one_cpu_and_one_gpu_each_show_one_core_and_one_gpu_per_broker_and_place_one_rank_per_core()
-> Result<()> {
    advertise_gpus(Some(2))?;
    let result = one_core_one_gpu().await;
    advertise_gpus(None)?;
    result
}

async fn one_core_one_gpu() -> Result<()> {
    let ns = namespace("resources").await?;
    let mc = "cores";
    // Requests stay small so both pods fit beside the operator on two cores; the limit is
    // what each pod may use.
    let resources = "      resources:\n        requests: {cpu: 100m, nvidia.com/gpu: 1}\n        \
                     limits: {cpu: 1, nvidia.com/gpu: 1}\n";
    let yaml = format!("{}{resources}", mpi_cluster(mc, 2));
    apply_yaml(&ns.name, &yaml)?;
    wait_phase(&ns.name, mc, "Running").await?;
    let lead = Lead::of(&ns.name, mc)?;
    lead.wait("resource list -s up -no {nnodes}", "2", MINUTE)
        .await?;
    let list = lead.flux("resource list -s up -no '{nnodes} {ncores} {ngpus}'")?;
    ensure!(
        list == "2 2 2",
        "two brokers, one core and one GPU each: {list}"
    );

    // `flux run -n` over every core: one MPI rank per core, one on each pod, and no more.
    let output = lead.flux("run -n2 --time-limit=2m mpi-check-openmpi")?;
    let verdict = output.lines().find(|l| l.starts_with("mpi-check "));
    let verdict = verdict.unwrap_or_default();
    ensure!(
        verdict.starts_with("mpi-check ok: size 2, ring 1, allreduce 1, hosts ")
            && verdict.contains(&format!("{mc}-lead-0-0"))
            && verdict.contains(&format!("{mc}-workers-0-0")),
        "two ranks on two pods:\n{output}"
    );
    let over = lead.flux("run -n3 true 2>&1; echo exit=$?")?;
    ensure!(
        over.contains("unsatisfiable") && !over.ends_with("exit=0"),
        "a third rank has no core:\n{over}"
    );
    // The cores are the node's shared pool (no exclusive cpuset): no task is bound to one.
    let allowed = lead.flux("run -N2 -n2 grep Cpus_allowed_list /proc/self/status")?;
    ensure!(
        allowed.matches("0-1").count() == 2,
        "tasks may use the pod's whole cpuset:\n{allowed}"
    );
    lead.flux("shutdown --quiet")?;
    wait_phase(&ns.name, mc, "Succeeded").await?;
    ns.cleanup().await;
    Ok(())
}
