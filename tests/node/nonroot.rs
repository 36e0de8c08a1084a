//! Brokers as a non-root user under a real kubelet: the pod's securityContext applies to the
//! flux view's init container and the brokers alike, and the job runs as that user.

use anyhow::Result;

use crate::cluster::{apply_yaml, get_json, kubectl_in, lead_pod, namespace, pods, wait_phase};

const YAML: &str = r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: nonroot
spec:
  size: 2
  tasks: 2
  logging:
    quiet: true
  pod:
    securityContext:
      runAsUser: 1000
      runAsGroup: 1000
      fsGroup: 1000
  containers:
    - image: ubuntu:noble
      command: id -u
"#;

#[tokio::test]
async fn brokers_run_as_the_pods_non_root_user_and_so_does_the_job() -> Result<()> {
    let ns = namespace("nonroot").await?;
    apply_yaml(&ns.name, YAML)?;
    wait_phase(&ns.name, "nonroot", "Succeeded").await?;

    // The securityContext the user guide promises (docs/user-guide.md): the user's, on every broker pod.
    for role in ["lead", "workers"] {
        for pod in pods(&ns.name, "nonroot", role)? {
            let sc = &pod["spec"]["securityContext"];
            assert_eq!(sc["runAsUser"], 1000, "{role}: {sc}");
            assert_eq!(sc["runAsGroup"], 1000, "{role}: {sc}");
            assert_eq!(sc["fsGroup"], 1000, "{role}: {sc}");
        }
    }
    // The job's two tasks ran as uid 1000: the brokers that started them run as that user
    // (a Flux instance runs its jobs as its own user).
    let lead = lead_pod(&ns.name, "nonroot")?;
    let logs = kubectl_in(&ns.name, &["logs", &lead, "-c", "nonroot"])?;
    let ids: Vec<&str> = logs.lines().filter(|l| l.trim() == "1000").collect();
    assert_eq!(ids.len(), 2, "both tasks as uid 1000:\n{logs}");
    assert!(!logs.contains("not owned by"), "{logs}");
    let mc = get_json(&ns.name, "minicluster/nonroot")?;
    assert_eq!(mc["status"]["phase"], "Succeeded");
    ns.cleanup().await;
    Ok(())
}
