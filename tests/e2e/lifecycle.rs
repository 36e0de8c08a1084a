//! The operator's handling of what happens around a cluster: specs only the operator can
//! judge, fields it does not act on, `spec.suspend` without Kueue, Kueue evicting and
//! readmitting a running cluster, a second replica taking over leadership, and one cluster
//! at a time on an archive.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use flux_operator::api::{
    BurstedCluster, ContainerVolume, KUEUE_QUEUE_LABEL, MiniCluster, MiniClusterContainer,
    NAME_LABEL, Phase,
};
use flux_operator::jobset::JobSet;

use crate::common::{Operator, TestNamespace, kueue_resource, pod_phase, wait_for, wait_gone};
use crate::kueue::queues;
use crate::operator::{
    Setup, example, hello, install_crd, mc_condition, running_at, setup, wait_phase,
};

const TIMEOUT: Duration = Duration::from_secs(90);

async fn running_pods(ns: &TestNamespace, name: &str) -> Result<usize> {
    let pods: Api<Pod> = ns.api();
    Ok(pods
        .list(&ListParams::default().labels(&format!("{NAME_LABEL}={name}")))
        .await?
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && pod_phase(p) == "Running")
        .count())
}

/// Warning Events (events.k8s.io) about a MiniCluster with this reason.
pub async fn warnings(ns: &TestNamespace, name: &str, reason: &str) -> Result<Vec<String>> {
    warnings_where(ns, reason, |r| r.name.as_deref() == Some(name)).await
}

/// Warning Events (events.k8s.io) with this reason about what `regarding` takes.
async fn warnings_where(
    ns: &TestNamespace,
    reason: &str,
    regarding: impl Fn(&k8s_openapi::api::core::v1::ObjectReference) -> bool,
) -> Result<Vec<String>> {
    let events: Api<EventV1> = ns.api();
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(&regarding)
                && e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some(reason)
        })
        .filter_map(|e| e.note)
        .collect())
}

#[tokio::test]
async fn operator_reports_what_the_api_server_cannot_check() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("invalid-spec").await?;

    // An environment variable name the schema cannot rule out: refused by the operator.
    let mut bad = example("hello-world", &ns.name)?;
    bad.metadata.name = Some("bad-env".into());
    bad.spec.containers[0]
        .environment
        .insert("1NOT-A-NAME".into(), "x".into());
    mcs.create(&PostParams::default(), &bad).await?;
    let invalid = wait_for("InvalidSpec condition", TIMEOUT, || async {
        let mc = mcs.get("bad-env").await?;
        Ok(mc_condition(&mc, "InvalidSpec")
            .filter(|c| c.0 == "True")
            .map(|c| (mc, c.2)))
    })
    .await?;
    let (mc, message) = invalid;
    assert!(
        message.contains("spec.containers[0].environment"),
        "names the field: {message}"
    );
    assert_eq!(
        mc.status.as_ref().and_then(|s| s.phase),
        Some(Phase::Pending),
        "held, not failed: fixing the spec lets it run"
    );
    let notes = wait_for("InvalidSpec Warning Event", TIMEOUT, || async {
        let notes = warnings(&ns, "bad-env", "InvalidSpec").await?;
        Ok((!notes.is_empty()).then_some(notes))
    })
    .await?;
    assert!(
        notes[0].contains("spec.containers[0].environment"),
        "{notes:?}"
    );
    let created = ns
        .api::<Secret>()
        .list(&ListParams::default().labels(&format!("{NAME_LABEL}=bad-env")))
        .await?
        .items
        .len()
        + ns.api::<ConfigMap>()
            .list(&ListParams::default().labels(&format!("{NAME_LABEL}=bad-env")))
            .await?
            .items
            .len()
        + ns.api::<JobSet>()
            .list(&ListParams::default())
            .await?
            .items
            .len();
    assert_eq!(created, 0, "nothing is created for an invalid spec");

    // Fixing the spec is not possible in place (it is immutable), but the cluster with an
    // accepted-but-unsupported field runs and says what it ignores.
    let mut bursting = example("hello-world", &ns.name)?;
    bursting.metadata.name = Some("bursting".into());
    bursting.spec.size = 2;
    bursting.spec.tasks = 2;
    bursting.spec.flux.bursting.clusters = vec![BurstedCluster {
        name: "remote".into(),
        size: Some(2),
    }];
    mcs.create(&PostParams::default(), &bursting).await?;
    let running = wait_phase(&mcs, "bursting", Phase::Running).await?;
    let unsupported = mc_condition(&running, "Unsupported").context("Unsupported condition")?;
    assert_eq!(unsupported.0, "True");
    assert!(
        unsupported.2.contains("spec.flux.bursting"),
        "{unsupported:?}"
    );
    let notes = wait_for("Unsupported Warning Event", TIMEOUT, || async {
        let notes = warnings(&ns, "bursting", "Unsupported").await?;
        Ok((!notes.is_empty()).then_some(notes))
    })
    .await?;
    assert!(notes[0].contains("spec.flux.bursting"), "{notes:?}");
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn suspend_holds_a_cluster_without_kueue() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("suspend").await?;
    let mut mc = hello(&ns.name, 2)?;
    mc.spec.suspend = true;
    mc.spec.services.push(MiniClusterContainer {
        name: "web".into(),
        image: "nginx".into(),
        ..Default::default()
    });
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();

    let held = wait_phase(&mcs, &name, Phase::Suspended).await?;
    assert_eq!(
        mc_condition(&held, "Suspended").map(|c| c.0).as_deref(),
        Some("True")
    );
    let js = ns.api::<JobSet>().get(&name).await?;
    assert_eq!(js.spec.suspend, Some(true));
    // The services pod is held too.
    let jobs: Api<Job> = ns.api();
    let services_job = format!("{name}-services");
    let held_job = jobs.get(&services_job).await?;
    assert_eq!(held_job.spec.and_then(|s| s.suspend), Some(true));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        running_pods(&ns, &name).await?,
        0,
        "a suspended cluster has no pods"
    );
    assert_eq!(services_pods(&ns, &services_job).await?, 0);

    mcs.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"suspend": false}})),
    )
    .await?;
    let running = wait_phase(&mcs, &name, Phase::Running).await?;
    assert_eq!(running.status.as_ref().map(|s| s.ready_brokers), Some(2));
    assert_eq!(
        mc_condition(&running, "Suspended").map(|c| c.0).as_deref(),
        Some("False")
    );
    wait_for("the services pod running", TIMEOUT, || async {
        Ok((services_pods(&ns, &services_job).await? == 1).then_some(()))
    })
    .await?;
    ns.cleanup().await;
    Ok(())
}

/// Running pods of the services Job.
async fn services_pods(ns: &TestNamespace, job: &str) -> Result<usize> {
    let pods: Api<Pod> = ns.api();
    Ok(pods
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await?
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && pod_phase(p) == "Running")
        .count())
}

#[tokio::test]
async fn a_finished_cluster_never_runs_again_after_its_ttl() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("ttl").await?;
    let mut mc = hello(&ns.name, 2)?;
    mc.spec.ttl_seconds_after_finished = Some(1);
    mc.spec.services.push(MiniClusterContainer {
        name: "web".into(),
        image: "nginx".into(),
        ..Default::default()
    });
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;
    crate::operator::finish_lead(&ns, &name).await?;
    wait_phase(&mcs, &name, Phase::Succeeded).await?;
    // The operator counts the TTL from the completion it recorded, and deletes the JobSet
    // and the services Job when it is over.
    let jobs: Api<Job> = ns.api();
    let services_job = format!("{name}-services");
    let jobsets: Api<JobSet> = ns.api();
    wait_for(
        "JobSet and services Job deleted after the TTL",
        TIMEOUT,
        || async {
            let jobset_gone = jobsets.get_opt(&name).await?.is_none();
            let job_gone = jobs
                .get_opt(&services_job)
                .await?
                .is_none_or(|j| j.metadata.deletion_timestamp.is_some());
            Ok((jobset_gone && job_gone).then_some(()))
        },
    )
    .await?;
    // Give a wrong operator every chance to re-create it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        jobsets.get_opt(&name).await?.is_none(),
        "the finished cluster was started again"
    );
    assert!(
        jobs.get_opt(&services_job)
            .await?
            .is_none_or(|j| j.metadata.deletion_timestamp.is_some()),
        "the finished cluster's services were started again"
    );
    let mc = mcs.get(&name).await?;
    assert_eq!(
        mc.status.as_ref().and_then(|s| s.phase),
        Some(Phase::Succeeded)
    );
    assert_eq!(running_pods(&ns, &name).await?, 0);
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn kueue_eviction_shows_in_status_and_the_cluster_comes_back() -> Result<()> {
    let mut ns = TestNamespace::create("evict").await?;
    install_crd(&ns.client).await?;
    let queue = queues(&mut ns, "8", "8Gi").await?;
    let _operator = Operator::start(&ns.name)?;
    let mcs: Api<MiniCluster> = ns.api();
    let mut mc = hello(&ns.name, 2)?;
    mc.metadata.labels = Some([(KUEUE_QUEUE_LABEL.to_string(), queue)].into());
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;

    // Deactivating the Workload makes Kueue evict it: the JobSet is suspended again.
    let workloads = ns.dynamic(&kueue_resource("Workload"));
    let workload = wait_for("the JobSet's Workload", TIMEOUT, || async {
        Ok(workloads
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .next())
    })
    .await?;
    let wl = workload.name_any();
    workloads
        .patch(
            &wl,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"active": false}})),
        )
        .await?;
    let evicted = wait_for(
        "Suspended and Admitted False (Evicted)",
        TIMEOUT,
        || async {
            let mc = mcs.get(&name).await?;
            let suspended = mc.status.as_ref().and_then(|s| s.phase) == Some(Phase::Suspended);
            let admitted = mc_condition(&mc, "Admitted");
            let evicted = admitted
                .as_ref()
                .is_some_and(|(status, reason, _)| status == "False" && reason == "Evicted");
            Ok((suspended && evicted).then_some(mc))
        },
    )
    .await?;
    let (_, _, message) = mc_condition(&evicted, "Admitted").context("Admitted condition")?;
    assert!(message.contains("evicted by Kueue"), "{message}");
    wait_for("pods gone after eviction", TIMEOUT, || async {
        Ok((running_pods(&ns, &name).await? == 0).then_some(()))
    })
    .await?;

    // Reactivated, it is admitted again and the cluster comes back.
    workloads
        .patch(
            &wl,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"active": true}})),
        )
        .await?;
    let back = wait_phase(&mcs, &name, Phase::Running).await?;
    assert_eq!(back.status.as_ref().map(|s| s.ready_brokers), Some(2));
    assert_eq!(
        mc_condition(&back, "Admitted").map(|c| c.0).as_deref(),
        Some("True")
    );
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_standby_replica_takes_over_when_the_leader_dies() -> Result<()> {
    let ns = TestNamespace::create("leader").await?;
    install_crd(&ns.client).await?;
    let mut first = Operator::start_as(&ns.name, "replica-a")?;
    let leases: Api<Lease> = ns.api();
    wait_for("replica-a holds the lease", TIMEOUT, || async {
        let holder = leases
            .get_opt("flux-operator-leader")
            .await?
            .and_then(|l| l.spec?.holder_identity);
        Ok((holder.as_deref() == Some("replica-a")).then_some(()))
    })
    .await?;
    let _second = Operator::start_as(&ns.name, "replica-b")?;

    let mcs: Api<MiniCluster> = ns.api();
    let mut mc = hello(&ns.name, 2)?;
    mcs.create(&PostParams::default(), &mc).await?;
    wait_phase(&mcs, "hello-world", Phase::Running).await?;
    let holder = leases
        .get("flux-operator-leader")
        .await?
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(
        holder.as_deref(),
        Some("replica-a"),
        "the standby does not take the lease from a live leader"
    );

    // The leader dies without releasing the lease; the standby takes over once it expires.
    first.kill();
    mc.metadata.name = Some("after-failover".into());
    mcs.create(&PostParams::default(), &mc).await?;
    wait_for("replica-b holds the lease", TIMEOUT, || async {
        let holder = leases
            .get_opt("flux-operator-leader")
            .await?
            .and_then(|l| l.spec?.holder_identity);
        Ok((holder.as_deref() == Some("replica-b")).then_some(()))
    })
    .await?;
    wait_phase(&mcs, "after-failover", Phase::Running).await?;
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn objects_it_does_not_own_are_never_taken_over() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("foreign").await?;
    // A Secret of the name the certificate would get, someone else's.
    let secrets: Api<Secret> = ns.api();
    let theirs: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "mine-curve"}, "stringData": {"owner": "someone else"}
    }))?;
    let theirs = secrets.create(&PostParams::default(), &theirs).await?;

    let mut mc = hello(&ns.name, 2)?;
    mc.metadata.name = Some("mine".into());
    mcs.create(&PostParams::default(), &mc).await?;
    let (mc, message) = wait_for("Blocked by the foreign Secret", TIMEOUT, || async {
        let mc = mcs.get("mine").await?;
        Ok(mc_condition(&mc, "Blocked")
            .filter(|c| c.0 == "True")
            .map(|c| (mc, c.2)))
    })
    .await?;
    assert!(
        message.contains("Secret mine-curve exists and is not owned"),
        "{message}"
    );
    assert_eq!(
        mc.status.as_ref().and_then(|s| s.phase),
        Some(Phase::Pending),
        "held, not failed: the cluster runs once the other Secret goes"
    );
    let notes = wait_for("Blocked Warning Event", TIMEOUT, || async {
        let notes = warnings(&ns, "mine", "Blocked").await?;
        Ok((!notes.is_empty()).then_some(notes))
    })
    .await?;
    assert!(notes[0].contains("Secret mine-curve"), "{notes:?}");
    let after = secrets.get("mine-curve").await?;
    assert_eq!(after.data, theirs.data, "the other Secret is untouched");
    assert!(after.metadata.owner_references.is_none(), "and not adopted");
    assert!(
        ns.api::<JobSet>().get_opt("mine").await?.is_none(),
        "no JobSet was created"
    );
    // The ConfigMap (content-addressed, its own) may have gone out together with the refused
    // Secret's create; nothing of the cluster's is anyone else's.
    let uid = mc.metadata.uid.clone();
    for cm in ns
        .api::<ConfigMap>()
        .list(&ListParams::default().labels(&format!("{NAME_LABEL}=mine")))
        .await?
        .items
    {
        assert!(
            cm.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref()),
            "only its own: {:?}",
            cm.metadata
        );
    }
    ns.cleanup().await;
    Ok(())
}

/// `name`, a hello-world cluster that saves to and restores from `/state/queue.tar.gz` on
/// the claim `data`.
fn on_archive(ns: &TestNamespace, name: &str) -> Result<MiniCluster> {
    let mut mc = hello(&ns.name, 2)?;
    mc.metadata.name = Some(name.into());
    mc.spec.archive.path = "/state/queue.tar.gz".into();
    mc.spec.containers[0].volumes.insert(
        "data".into(),
        ContainerVolume {
            path: "/state".into(),
            claim_name: "data".into(),
            ..ContainerVolume::default()
        },
    );
    Ok(mc)
}

#[tokio::test]
async fn a_second_cluster_on_an_archive_in_use_waits_and_starts_when_the_first_goes() -> Result<()>
{
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("one-archive").await?;
    let jobsets: Api<JobSet> = ns.api();
    mcs.create(&PostParams::default(), &on_archive(&ns, "first")?)
        .await?;
    wait_for("the first cluster's JobSet", TIMEOUT, || async {
        Ok(jobsets.get_opt("first").await?)
    })
    .await?;
    mcs.create(&PostParams::default(), &on_archive(&ns, "second")?)
        .await?;
    let (reason, message) = wait_for("the second cluster Blocked", TIMEOUT, || async {
        let mc = mcs.get("second").await?;
        Ok(mc_condition(&mc, "Blocked")
            .filter(|c| c.0 == "True")
            .map(|c| (c.1, c.2)))
    })
    .await?;
    assert_eq!(reason, "ArchiveInUse");
    assert!(
        message.contains(r#"spec.archive.path "/state/queue.tar.gz" (claim data:/queue.tar.gz) is the archive of MiniCluster "first""#),
        "{message}"
    );
    let notes = wait_for("a Blocked Warning Event", TIMEOUT, || async {
        let notes = warnings(&ns, "second", "Blocked").await?;
        Ok((!notes.is_empty()).then_some(notes))
    })
    .await?;
    assert!(notes[0].contains("MiniCluster \"first\""), "{notes:?}");
    assert!(
        jobsets.get_opt("second").await?.is_none(),
        "nothing of the second cluster runs while the first holds the archive"
    );

    mcs.delete("first", &Default::default()).await?;
    wait_gone("the first cluster", TIMEOUT, &mcs, "first").await?;
    wait_for(
        "the second cluster's JobSet, once the first is gone",
        TIMEOUT,
        || async { Ok(jobsets.get_opt("second").await?) },
    )
    .await?;
    // The status is written after the JobSet is applied, in the same reconcile.
    wait_for("the second cluster no longer Blocked", TIMEOUT, || async {
        let second = mcs.get("second").await?;
        let blocked = mc_condition(&second, "Blocked").map(|c| c.0);
        Ok((blocked.as_deref() == Some("False")).then_some(()))
    })
    .await?;
    ns.cleanup().await;
    Ok(())
}

/// Every delete the operator decides (an unused ConfigMap or Service, the JobSet and the
/// services Job after the TTL, the MiniCluster itself with `spec.cleanup`) is sent pinned to
/// the UID it was decided on. Against the real API server: a decision made on an object that
/// was since deleted and made again under the same name (a reconcile pending while a user
/// re-creates a MiniCluster of the same name) deletes nothing, and the new object stays;
/// pinned to the new one's UID, the same delete goes through.
#[tokio::test]
async fn a_delete_decided_on_a_replaced_object_leaves_the_new_one_of_the_same_name() -> Result<()> {
    use flux_operator::controller::{Deleted, delete_pinned};
    let ns = TestNamespace::create("pinned-deletes").await?;
    install_crd(&ns.client).await?;

    let mcs: Api<MiniCluster> = ns.api();
    let first = mcs
        .create(&PostParams::default(), &hello(&ns.name, 2)?)
        .await?;
    let decided_on = first.metadata.uid.clone();
    mcs.delete(&first.name_any(), &Default::default()).await?;
    wait_gone("the first MiniCluster", TIMEOUT, &mcs, &first.name_any()).await?;
    let again = mcs
        .create(&PostParams::default(), &hello(&ns.name, 2)?)
        .await?;
    let name = again.name_any();
    assert_eq!(
        delete_pinned(&mcs, &name, decided_on.as_deref()).await?,
        Deleted::Replaced
    );
    let kept = mcs.get(&name).await?;
    assert_eq!(kept.metadata.uid, again.metadata.uid, "the new one stays");
    assert!(kept.metadata.deletion_timestamp.is_none());

    // The same for a ConfigMap of the operator's.
    let cms: Api<ConfigMap> = ns.api();
    let cm = |data: &str| -> Result<ConfigMap> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "hello-world-config"}, "data": {"v": data}
        }))?)
    };
    let old = cms.create(&PostParams::default(), &cm("old")?).await?;
    cms.delete("hello-world-config", &Default::default())
        .await?;
    wait_gone("the old ConfigMap", TIMEOUT, &cms, "hello-world-config").await?;
    let new = cms.create(&PostParams::default(), &cm("new")?).await?;
    assert_eq!(
        delete_pinned(&cms, "hello-world-config", old.metadata.uid.as_deref()).await?,
        Deleted::Replaced
    );
    assert_eq!(
        cms.get("hello-world-config").await?.metadata.uid,
        new.metadata.uid
    );

    // Pinned to the object that is there, the delete goes through; then there is none.
    assert_eq!(
        delete_pinned(&cms, "hello-world-config", new.metadata.uid.as_deref()).await?,
        Deleted::Deleted
    );
    wait_gone("the new ConfigMap", TIMEOUT, &cms, "hello-world-config").await?;
    assert_eq!(
        delete_pinned(&cms, "hello-world-config", new.metadata.uid.as_deref()).await?,
        Deleted::Gone
    );
    assert_eq!(
        delete_pinned(&mcs, &name, again.metadata.uid.as_deref()).await?,
        Deleted::Deleted
    );
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn cleanup_deletes_the_finished_minicluster() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("cleanup").await?;
    let mut mc = hello(&ns.name, 2)?;
    mc.spec.cleanup = true;
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;
    crate::operator::finish_lead(&ns, &name).await?;
    wait_gone(
        "the MiniCluster deleted after it finished",
        TIMEOUT,
        &mcs,
        &name,
    )
    .await?;
    wait_gone(
        "its JobSet gone with it",
        TIMEOUT,
        &ns.api::<JobSet>(),
        &name,
    )
    .await?;
    ns.cleanup().await;
    Ok(())
}

const HOLD: &str = "e2e.flux-framework.org/hold";

/// Adds (`hold`) or removes a finalizer of the test's on every pod of the namespace that
/// `which` takes: a held pod deleted stays, terminating, as on a slow node.
async fn hold_pods(pods: &Api<Pod>, hold: bool, which: impl Fn(&Pod) -> bool) -> Result<()> {
    for pod in pods.list(&ListParams::default()).await? {
        if which(&pod) {
            set_hold(pods, pod, hold).await?;
        }
    }
    Ok(())
}

/// Sets the test's finalizer on one pod, read again and written again while the kubelet or
/// the Job controller (its tracking finalizer) writes the pod between our read and write:
/// the write names the version it read, so nothing of theirs is overwritten.
async fn set_hold(pods: &Api<Pod>, mut pod: Pod, hold: bool) -> Result<()> {
    for _ in 0..10 {
        let mut finalizers: Vec<String> = pod.finalizers().to_vec();
        finalizers.retain(|f| f != HOLD);
        if hold {
            finalizers.push(HOLD.to_string());
        }
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": pod.resource_version()}});
        match pods
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 409 => {
                match pods.get_opt(&pod.name_any()).await? {
                    Some(again) => pod = again,
                    None => return Ok(()),
                }
            }
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            other => return other.map(|_| ()).map_err(Into::into),
        }
    }
    anyhow::bail!(
        "pod {} kept changing under the finalizer write",
        pod.name_any()
    )
}

/// A pod made by hand from `lead`: its spec and its labels (the MiniCluster's and JobSet's,
/// the JobSet's uid included), but no owner. Not the Job's selector labels: with those the
/// Job controller adopts the pod, and it is then the Job's own.
fn look_alike(lead: &Pod) -> Pod {
    let mut labels = lead.metadata.labels.clone().unwrap_or_default();
    labels.retain(|k, _| {
        !k.starts_with("batch.kubernetes.io/") && k != "controller-uid" && k != "job-name"
    });
    let mut pod = Pod {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{}-lookalike", lead.name_any())),
            labels: Some(labels),
            ..Default::default()
        },
        spec: lead.spec.clone(),
        status: None,
    };
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = None;
    }
    pod
}

/// A MiniCluster deleted and at once created again under its name (issue 75): the old one's
/// pods still terminating (held by a finalizer, as a slow node keeps them) and a pod made by
/// hand with the lead's labels are not the new cluster's: it is Running with its own two
/// brokers, no restart, no `InstanceRestarted`. Before, the old lead was read as the new
/// one's replaced lead (a Warning and `restarts: 1`) and the look-alike counted as ready.
#[tokio::test]
async fn a_minicluster_created_again_under_its_name_counts_only_its_own_pods() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("recreated").await?;
    let pods: Api<Pod> = ns.api();
    let name = hello(&ns.name, 2)?.name_any();
    for round in 1..=10 {
        let mc = mcs
            .create(&PostParams::default(), &hello(&ns.name, 2)?)
            .await?;
        let uid = mc.uid().context("a uid")?;
        running_at(&mcs, &name, 2).await?;
        let labelled = pods
            .list(&ListParams::default().labels(&format!("{NAME_LABEL}={name}")))
            .await?;
        let terminating = labelled
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .count();
        if round > 1 {
            assert!(
                terminating > 0,
                "round {round}: the old pods are gone already"
            );
        }
        if round == 1 {
            let lead = labelled
                .iter()
                .find(|p| p.name_any().starts_with(&format!("{name}-lead-")))
                .context("the lead pod")?;
            pods.create(&PostParams::default(), &look_alike(lead))
                .await?;
            wait_for("the look-alike running", TIMEOUT, || async {
                let p = pods.get(&format!("{}-lookalike", lead.name_any())).await?;
                Ok((pod_phase(&p) == "Running").then_some(()))
            })
            .await?;
        }
        // A few reconciles' time for a wrong count or a restart to show.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = mcs.get(&name).await?;
        let status = now.status.clone().unwrap_or_default();
        assert_eq!(
            status.phase,
            Some(Phase::Running),
            "round {round}: {status:?}"
        );
        assert_eq!(status.ready_brokers, 2, "round {round}: {status:?}");
        let restarts = status.instance.as_ref().map_or(0, |i| i.restarts);
        assert_eq!(restarts, 0, "round {round}: {status:?}");
        let restarted =
            warnings_where(&ns, "InstanceRestarted", |r| r.uid.as_deref() == Some(&uid)).await?;
        assert!(restarted.is_empty(), "round {round}: {restarted:?}");

        // The previous round's pods may go; this round's are held through the delete.
        let terminating = |p: &Pod| p.metadata.deletion_timestamp.is_some();
        hold_pods(&pods, false, terminating).await?;
        hold_pods(&pods, true, |p| {
            !terminating(p) && !p.owner_references().is_empty()
        })
        .await?;
        mcs.delete(&name, &Default::default()).await?;
        wait_gone("the MiniCluster", TIMEOUT, &mcs, &name).await?;
    }
    hold_pods(&pods, false, |_| true).await?;
    ns.cleanup().await;
    Ok(())
}
