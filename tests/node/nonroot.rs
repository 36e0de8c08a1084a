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

/// examples/restricted.yaml in a namespace that enforces the restricted Pod Security level:
/// the chart's admission policy takes it, Kubernetes' own Pod Security admission admits every
/// pod the operator renders for it (the view's init container, the brokers, with the
/// RuntimeDefault seccomp profile the operator adds and no service account token), and the
/// job runs as the unprivileged user.
#[tokio::test]
async fn the_restricted_example_runs_where_the_restricted_level_is_enforced() -> Result<()> {
    let ns = namespace("restricted").await?;
    kubectl_in(
        &ns.name,
        &[
            "label",
            "namespace",
            &ns.name,
            "pod-security.kubernetes.io/enforce=restricted",
        ],
    )?;
    crate::cluster::apply(&ns.name, &crate::cluster::example("restricted"))?;
    wait_phase(&ns.name, "restricted", "Succeeded").await?;
    for role in ["lead", "workers"] {
        for pod in pods(&ns.name, "restricted", role)? {
            let spec = &pod["spec"];
            assert_eq!(
                spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
                "{role}: {spec}"
            );
            assert_eq!(
                spec["automountServiceAccountToken"], false,
                "{role}: {spec}"
            );
        }
    }
    let lead = lead_pod(&ns.name, "restricted")?;
    let logs = kubectl_in(&ns.name, &["logs", &lead, "-c", "restricted"])?;
    let ids: Vec<&str> = logs.lines().filter(|l| l.trim() == "1000").collect();
    assert_eq!(ids.len(), 2, "both tasks as uid 1000:\n{logs}");
    ns.cleanup().await;
    Ok(())
}
