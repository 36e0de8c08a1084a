//! Containers beside the brokers and the services pod, reached as the Go operator's
//! `nginx-service` and `flux-sidecar` examples reach them: the services pod by the DNS name
//! cluster DNS gives it, the instance by the `$fluxsocket` of the companion's pod.

use anyhow::Result;

use crate::cluster::{apply_yaml, kubectl_in, lead_pod, namespace, wait_phase};

#[tokio::test]
async fn the_job_reaches_the_services_pod_by_dns_and_a_companion_lists_the_jobs_through_fluxsocket()
-> Result<()> {
    let ns = namespace("services").await?;
    let yaml = format!(
        r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: svc
spec:
  size: 2
  logging:
    quiet: true
  services:
    - image: ubuntu:noble
      name: web
      ports: [8080]
      command: mkdir -p /srv && echo served-by-the-services-pod > /srv/index.html && cd /srv && exec python3 -m http.server 8080
  containers:
    - image: ubuntu:noble
      runFlux: true
      command: python3 -c "import urllib.request, time; time.sleep(10); print(urllib.request.urlopen('http://svc-services.svc.{ns}.svc.cluster.local:8080/').read().decode().strip())"
    - image: ubuntu:noble
      name: queue
      command: sleep 3 && flux proxy ${{fluxsocket}} flux jobs -a -no '{{name}}:{{state}}'
"#,
        ns = ns.name
    );
    apply_yaml(&ns.name, &yaml)?;
    wait_phase(&ns.name, "svc", "Succeeded").await?;

    let lead = lead_pod(&ns.name, "svc")?;
    let job = kubectl_in(&ns.name, &["logs", &lead, "-c", "svc"])?;
    assert_eq!(job.trim(), "served-by-the-services-pod", "the job's output");
    // The companion waited for its broker, then asked the instance through its socket while
    // the job ran (it fetches after 10 s).
    let queue = kubectl_in(&ns.name, &["logs", &lead, "-c", "queue"])?;
    // (No space in the format: `flux proxy` passes its command through a shell again.)
    assert_eq!(
        queue.trim(),
        "python3:RUN",
        "flux jobs -a from the companion"
    );
    ns.cleanup().await;
    Ok(())
}
