//! The flux view mounted as an image volume (`flux.container.imageVolume`): the runtime
//! (containerd 2, `e2e/build.sh`) mounts the view image itself, read-only, in every broker
//! pod, and no init container copies it. The test view image links `/opt/view` to an
//! absolute `/opt/views/...` path, as a Spack view does, which the entrypoints follow under
//! the mount.

use std::time::Duration;

use anyhow::{Result, ensure};

use crate::cluster::{Lead, apply_yaml, kubectl_in, namespace, pods, wait_phase};
use crate::mpi::{broker_hosts, mpi_cluster, ranks_and_verdict};

const MINUTE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn an_image_volume_view_copies_nothing_and_runs_open_mpi_ranks_on_every_broker() -> Result<()>
{
    let ns = namespace("image-volume").await?;
    let mc = "iv";
    let yaml = format!(
        "{}  flux:\n    container:\n      imageVolume: true\n",
        mpi_cluster(mc, 2)
    );
    apply_yaml(&ns.name, &yaml)?;
    wait_phase(&ns.name, mc, "Running").await?;
    let lead = Lead::of(&ns.name, mc)?;
    lead.wait("resource list -s up -no {nnodes}", "2", MINUTE)
        .await?;

    // Every broker pod: the view image as its volume, no init container.
    for role in ["lead", "workers"] {
        for pod in pods(&ns.name, mc, role)? {
            let spec = &pod["spec"];
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            ensure!(
                spec["initContainers"].as_array().is_none_or(Vec::is_empty),
                "{name}: no init container: {}",
                spec["initContainers"]
            );
            let view = spec["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|v| v["name"] == "flux-view")
                .cloned()
                .unwrap_or_default();
            ensure!(
                view["image"]["reference"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("ghcr.io/converged-computing/flux-view-")),
                "{name}: the view image is the volume: {view}"
            );
        }
    }
    // Read-only: nothing in the pod writes into the image.
    let pod = pods(&ns.name, mc, "lead")?[0]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let touched = kubectl_in(
        &ns.name,
        &[
            "exec",
            &pod,
            "--",
            "sh",
            "-c",
            "touch /mnt/flux/x 2>&1 || echo refused",
        ],
    )?;
    ensure!(
        touched.contains("refused"),
        "the view is read-only: {touched}"
    );
    // A person's shell: flux-view.sh from the ConfigMap (the image has none).
    let shell = kubectl_in(
        &ns.name,
        &[
            "exec",
            &pod,
            "--",
            "bash",
            "-c",
            ". /etc/flux-operator/config/flux-view.sh && flux resource list -s up -no {nnodes}",
        ],
    )?;
    ensure!(shell.trim() == "2", "flux through flux-view.sh: {shell}");

    // MPI across both brokers, through Flux's PMI, with Flux from the mounted image.
    let hosts = broker_hosts(&ns.name, mc)?;
    let output = lead.flux("run -N2 -n4 --time-limit=2m mpi-check-openmpi")?;
    let (ranks, verdict) = ranks_and_verdict(&output);
    assert_eq!(
        ranks.iter().map(|r| r.0).collect::<Vec<_>>(),
        (0..4).collect::<Vec<_>>(),
        "every rank reports once:\n{output}"
    );
    let ran_on: std::collections::BTreeSet<String> = ranks.iter().map(|r| r.1.clone()).collect();
    assert_eq!(ran_on, hosts, "ranks on both brokers' pods:\n{output}");
    assert!(
        verdict.starts_with("mpi-check ok: size 4, ring 6, allreduce 6, hosts "),
        "the ring and the allreduce sum the ranks:\n{output}"
    );
    lead.flux("shutdown --quiet")?;
    wait_phase(&ns.name, mc, "Succeeded").await?;
    ns.cleanup().await;
    Ok(())
}
