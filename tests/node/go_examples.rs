//! The Go operator's own output tests, run as its CI runs them (`script/check-output.sh`):
//! apply `examples/tests/<name>/minicluster.yaml` of its source archive unchanged, follow
//! `kubectl logs` of the first pod's Flux container until it ends, diff it against
//! `test.out.correct`, and require every container to have exited 0.
//!
//! Covered: every test with a `test.out.correct` whose images this machine has (Debian root
//! filesystems tagged `ubuntu:noble`, see `e2e/images.sh`). Left out, with why:
//! `nginx-sidecar-service` (its expected page is the nginx.org image's, which Debian's
//! nginx does not serve), `pokemon` (an application image we cannot build), `volumes` (it
//! writes `/data` on the node, this machine's root).
//!
//! Also the two without a `test.out.correct` (their output has timings): `lammps` and
//! `osu-benchmarks`, run unchanged in the trixie image that carries the Go operator's image
//! names (`e2e/images-trixie.sh`), their logs checked for what the run must show.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, ensure};
use serde_json::Value;

use crate::cluster::{apply, kubectl, kubectl_in, namespace, wait_phase};
use crate::common::{TestNamespace, unpack_go_operator, wait_for};

/// `examples/tests` of the Go operator's archive, unpacked into DIR.
fn unpack(dir: &Path) -> Result<PathBuf> {
    Ok(unpack_go_operator(dir, &["*/examples/tests/*"])?.join("examples/tests"))
}

/// One test run as check-output.sh runs it: its `minicluster.yaml` applied unchanged, the
/// first pod's `flux-sample` log followed until the container ends; returned once the
/// MiniCluster has succeeded with every container exited 0.
async fn run_unchanged(
    name: &str,
    setup: impl FnOnce(&TestNamespace, &Path) -> Result<()>,
) -> Result<(String, Option<String>)> {
    let tmp = tempfile::tempdir()?;
    let tests = unpack(tmp.path())?;
    let dir = tests.join(name);
    let ns = namespace(&format!("go-{name}")).await?;
    setup(&ns, &tests)?;
    apply(&ns.name, &dir.join("minicluster.yaml"))?;

    // Its "first pod" is the first in name order: with JobSet names, the lead broker's. The
    // two Jobs create their pods in either order, so wait until the lead's exists.
    let first = wait_for(
        "the MiniCluster's pods, the lead's among them",
        Duration::from_secs(120),
        || async {
            let names = kubectl_in(
                &ns.name,
                &["get", "pod", "-o", "jsonpath={.items..metadata.name}"],
            )?;
            let names: Vec<&str> = names.split_whitespace().collect();
            let lead_made = names.iter().any(|n| n.starts_with("flux-sample-lead-"));
            Ok(lead_made.then(|| names[0].to_string()))
        },
    )
    .await?;
    ensure!(
        first.starts_with("flux-sample-lead-"),
        "first pod {first} is not the lead broker's"
    );
    let log = wait_for(
        "the Flux container to start",
        Duration::from_secs(180),
        || async { Ok(kubectl_in(&ns.name, &["logs", &first, "-c", "flux-sample", "-f"]).ok()) },
    )
    .await?;

    wait_phase(&ns.name, "flux-sample", "Succeeded").await?;
    let pods: Value = serde_json::from_str(&kubectl_in(&ns.name, &["get", "pod", "-o", "json"])?)?;
    for pod in pods["items"].as_array().into_iter().flatten() {
        for status in pod["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(code) = status["state"]["terminated"]["exitCode"].as_i64() {
                ensure!(
                    code == 0,
                    "{name}: {} {} exited {code}; first pod's log:\n{log}",
                    pod["metadata"]["name"],
                    status["name"]
                );
            }
        }
    }
    ns.cleanup().await;
    let expected = std::fs::read_to_string(dir.join("test.out.correct")).ok();
    Ok((log.replace('\r', ""), expected))
}

/// check-output.sh for one test: the first pod's `flux-sample` log equals the expected file.
async fn check_output(
    name: &str,
    setup: impl FnOnce(&TestNamespace, &Path) -> Result<()>,
) -> Result<()> {
    let (log, expected) = run_unchanged(name, setup).await?;
    let expected = expected.ok_or_else(|| anyhow::anyhow!("{name} has no test.out.correct"))?;
    assert_eq!(
        log,
        expected.replace('\r', ""),
        "{name}: the first pod's log"
    );
    Ok(())
}
fn nothing(_: &TestNamespace, _: &Path) -> Result<()> {
    Ok(())
}

#[tokio::test]
async fn go_operator_test_hello_world_prints_the_expected_output() -> Result<()> {
    check_output("hello-world", nothing).await
}

#[tokio::test]
async fn go_operator_test_post_prints_the_expected_output() -> Result<()> {
    check_output("post", nothing).await
}

#[tokio::test]
async fn go_operator_test_minimal_service_prints_the_expected_output() -> Result<()> {
    check_output("minimal-service", nothing).await
}

/// Its pre-run.sh puts `data/pancakes.txt` in a host directory and applies `pv.yaml` and
/// `pvc.yaml`: here the PersistentVolume's hostPath is a directory of the test's own (not
/// the node's `/tmp/data`); the claim and the MiniCluster are applied unchanged.
#[tokio::test]
async fn go_operator_test_existing_volumes_lists_the_claimed_volume() -> Result<()> {
    let data = tempfile::tempdir()?;
    let pv_name = std::sync::Mutex::new(String::new());
    let result = check_output("existing-volumes", |ns, tests| {
        std::fs::copy(
            tests.join("data/pancakes.txt"),
            data.path().join("pancakes.txt"),
        )?;
        let name = ns.unique_name("data");
        let pv = serde_json::json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteMany"],
                     "persistentVolumeReclaimPolicy": "Retain",
                     "claimRef": {"namespace": ns.name, "name": "data"},
                     "hostPath": {"path": data.path()}}
        });
        let file = tempfile::NamedTempFile::new()?;
        std::fs::write(file.path(), pv.to_string())?;
        kubectl(["apply", "-f", &file.path().to_string_lossy()])?;
        *pv_name.lock().unwrap() = name;
        let pvc = tests.join("existing-volumes/pvc.yaml");
        apply(&ns.name, &pvc)
    })
    .await;
    let name = pv_name.into_inner().unwrap();
    if !name.is_empty() {
        kubectl(["delete", "pv", &name, "--wait=false"])?;
    }
    result
}

/// The paper's application: LAMMPS' ReaxFF HNS example on 4 pods, 2 tasks, in the Go
/// operator's LAMMPS image (here trixie's LAMMPS, with REAXFF, on Open MPI 5: its ranks
/// find each other through the view's PMIx, with no option in the file).
#[tokio::test]
async fn go_operator_test_lammps_runs_reaxff_hns_on_two_ranks() -> Result<()> {
    let (log, _) = run_unchanged("lammps", nothing).await?;
    let grid = log
        .lines()
        .find_map(|l| l.trim().strip_suffix(" MPI processor grid"))
        .ok_or_else(|| anyhow::anyhow!("no processor grid in the LAMMPS log:\n{log}"))?;
    let ranks: u32 = grid
        .split(" by ")
        .map(|n| n.parse::<u32>().unwrap_or(0))
        .product();
    ensure!(ranks == 2, "LAMMPS split its box over {grid}, not 2 ranks");
    ensure!(
        log.contains("Total wall time: "),
        "no total wall time in the LAMMPS log:\n{log}"
    );
    let loop_line = log
        .lines()
        .find(|l| l.starts_with("Loop time of "))
        .ok_or_else(|| anyhow::anyhow!("no \"Loop time of\" in the LAMMPS log:\n{log}"))?;
    ensure!(
        loop_line.contains(" on 2 procs for 100 steps"),
        "LAMMPS did not run 100 steps on 2 ranks: {loop_line}"
    );
    ensure!(
        log.contains("pair reaxff"),
        "the log does not show ReaxFF's pair style in its neighbor lists:\n{log}"
    );
    Ok(())
}

/// The sizes and latencies of an OSU latency table ("# Size  Latency (us)" then a row per
/// size).
fn osu_rows(log: &str) -> Vec<(u64, f64)> {
    log.lines()
        .skip_while(|l| !l.starts_with("# Size"))
        .skip(1)
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
        })
        .collect()
}

/// OSU's one-sided `osu_get_latency` between 2 pods, in the Go operator's OSU image (here
/// built against trixie's Open MPI 5), with the file's `-ompi=openmpi@5` and its focal view.
#[tokio::test]
async fn go_operator_test_osu_benchmarks_prints_get_latency_for_every_size() -> Result<()> {
    let (log, _) = run_unchanged("osu-benchmarks", nothing).await?;
    ensure!(
        log.contains("# OSU MPI_Get latency Test"),
        "no osu_get_latency header in the log:\n{log}"
    );
    let rows = osu_rows(&log);
    let sizes: Vec<u64> = rows.iter().map(|r| r.0).collect();
    let every: Vec<u64> = (0..=22).map(|p| 1u64 << p).collect();
    ensure!(
        sizes == every,
        "sizes {sizes:?}, not 1 B to 4 MiB doubling:\n{log}"
    );
    ensure!(
        rows.iter().all(|r| r.1 > 0.0),
        "a latency that is not positive:\n{log}"
    );
    let at = |size: u64| rows.iter().find(|r| r.0 == size).map_or(0.0, |r| r.1);
    eprintln!(
        "osu_get_latency between 2 pods (us): 1 B {:.2}, 8 B {:.2}, 64 KiB {:.2}, 4 MiB {:.2}",
        at(1),
        at(8),
        at(1 << 16),
        at(1 << 22)
    );
    Ok(())
}
