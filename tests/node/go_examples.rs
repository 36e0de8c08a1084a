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

/// check-output.sh for one test: the first pod's `flux-sample` logs equal the expected file.
async fn check_output(
    name: &str,
    setup: impl FnOnce(&TestNamespace, &Path) -> Result<()>,
) -> Result<()> {
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
    let actual = wait_for(
        "the Flux container to start",
        Duration::from_secs(180),
        || async { Ok(kubectl_in(&ns.name, &["logs", &first, "-c", "flux-sample", "-f"]).ok()) },
    )
    .await?;
    let expected = std::fs::read_to_string(dir.join("test.out.correct"))?;
    assert_eq!(
        actual.replace('\r', ""),
        expected.replace('\r', ""),
        "{name}: kubectl logs {first}"
    );

    wait_phase(&ns.name, "flux-sample", "Succeeded").await?;
    let pods: Value = serde_json::from_str(&kubectl_in(&ns.name, &["get", "pod", "-o", "json"])?)?;
    for pod in pods["items"].as_array().into_iter().flatten() {
        for status in pod["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(code) = status["state"]["terminated"]["exitCode"].as_i64() {
                assert_eq!(
                    code, 0,
                    "{name}: {} {}",
                    pod["metadata"]["name"], status["name"]
                );
            }
        }
    }
    ns.cleanup().await;
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
