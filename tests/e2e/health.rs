//! `/readyz` and `/healthz` of real replicas: the leader and a standby waiting for the
//! lease are both ready (a Deployment of two becomes Available, `kubectl rollout status`
//! returns) and both live; the standby stays ready when it takes over.

use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};

use flux_operator::api::{MiniCluster, Phase};

use crate::common::{Operator, TestNamespace, http_status, wait_for};
use crate::operator::{hello, install_crd, wait_phase};

const TIMEOUT: Duration = Duration::from_secs(60);

async fn holder(leases: &Api<Lease>) -> Result<Option<String>> {
    Ok(leases
        .get_opt("flux-operator-leader")
        .await?
        .and_then(|l| l.spec?.holder_identity))
}

/// Wait until `/readyz` answers 200 naming `role`; return how long that took and the body.
async fn until_ready_as(port: u16, role: &str) -> Result<(Duration, String)> {
    let start = Instant::now();
    let what = format!("/readyz on port {port} answers 200 as {role}");
    wait_for(&what, TIMEOUT, || async {
        let (code, body) = http_status(port, "/readyz").await?;
        Ok((code == 200 && body.contains(role)).then_some(body))
    })
    .await
    .map(|body| (start.elapsed(), body))
}

#[tokio::test]
async fn leader_and_standby_are_ready_and_live_while_the_standby_waits() -> Result<()> {
    let ns = TestNamespace::create("health").await?;
    install_crd(&ns.client).await?;
    let leases: Api<Lease> = ns.api();

    let mut leader = Operator::start_as(&ns.name, "replica-a")?;
    let (took, body) = until_ready_as(leader.metrics_port, "leader").await?;
    eprintln!("leader /readyz 200 after {took:?}: {body}");
    assert_eq!(holder(&leases).await?.as_deref(), Some("replica-a"));

    let standby = Operator::start_as(&ns.name, "replica-b")?;
    let (took, body) = until_ready_as(standby.metrics_port, "standby").await?;
    eprintln!("standby /readyz 200 after {took:?}: {body}");

    // Both stay ready and live for a while, and the standby does not take the lease.
    for _ in 0..8 {
        for (who, port) in [
            ("leader", leader.metrics_port),
            ("standby", standby.metrics_port),
        ] {
            for path in ["/readyz", "/healthz"] {
                let (code, body) = http_status(port, path).await?;
                assert_eq!(code, 200, "{who} {path}: {body}");
            }
        }
        assert_eq!(holder(&leases).await?.as_deref(), Some("replica-a"));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The leader dies; the standby takes the lease, reconciles, and is ready as the leader.
    leader.kill();
    wait_for("replica-b holds the lease", TIMEOUT, || async {
        Ok((holder(&leases).await?.as_deref() == Some("replica-b")).then_some(()))
    })
    .await?;
    let mcs: Api<MiniCluster> = ns.api();
    let mc = hello(&ns.name, 2)?;
    mcs.create(&PostParams::default(), &mc).await?;
    wait_phase(&mcs, "hello-world", Phase::Running).await?;
    let (code, body) = http_status(standby.metrics_port, "/readyz").await?;
    assert_eq!((code, body.contains("leader")), (200, true), "{body}");
    assert_eq!(http_status(standby.metrics_port, "/healthz").await?.0, 200);
    ns.cleanup().await;
    Ok(())
}
