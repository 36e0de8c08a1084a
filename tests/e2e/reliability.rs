//! What a user's cluster meets besides the happy path: owned objects deleted or edited under
//! a running MiniCluster, against the real API server and JobSet controller.

use anyhow::Result;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use flux_operator::api::{NAME_LABEL, Phase};
use flux_operator::jobset::JobSet;

use crate::common::wait_for;
use crate::lifecycle::warnings;
use crate::operator::{Setup, TIMEOUT, hello, mc_condition, setup, wait_phase};

#[tokio::test]
async fn a_deleted_certificate_under_a_running_cluster_is_not_replaced_and_says_so() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("cert-lost").await?;
    let mut mc = hello(&ns.name, 2)?;
    mc.spec.max_size = Some(3);
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;
    let secrets: Api<Secret> = ns.api();
    let secret = format!("{name}-curve");
    secrets.delete(&secret, &DeleteParams::default()).await?;

    let (_, message) = wait_for("the Degraded condition", TIMEOUT, || async {
        let mc = mcs.get(&name).await?;
        Ok(mc_condition(&mc, "Degraded")
            .filter(|c| c.0 == "True")
            .map(|c| (mc, c.2)))
    })
    .await?;
    assert!(message.contains(&format!("Secret {secret}")), "{message}");
    let notes = wait_for("a Degraded Warning", TIMEOUT, || async {
        let notes = warnings(&ns, &name, "Degraded").await?;
        Ok((!notes.is_empty()).then_some(notes))
    })
    .await?;
    assert!(notes[0].contains("no new keypair"), "{notes:?}");
    // A while later (the operator was woken by the deletion and has reconciled since):
    // still no Secret of that name, so no broker can start with another key.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert!(
        secrets.get_opt(&secret).await?.is_none(),
        "no new keypair was made"
    );

    // A scale-up now would make pods that wait forever for the Secret: it is held, and the
    // Degraded condition says so; the JobSet keeps its one follower.
    mcs.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"size": 3}})),
    )
    .await?;
    wait_for("the held resize in Degraded", TIMEOUT, || async {
        let mc = mcs.get(&name).await?;
        Ok(mc_condition(&mc, "Degraded").filter(|c| c.2.contains("is held")))
    })
    .await?;
    let jobset = ns.api::<JobSet>().get(&name).await?;
    let workers = jobset
        .spec
        .replicated_jobs
        .iter()
        .find(|r| r.name == "workers")
        .and_then(|r| r.template.spec.as_ref()?.parallelism);
    assert_eq!(workers, Some(1), "the followers' Job was not grown");
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_config_map_deleted_under_a_running_cluster_is_made_again_with_a_warning() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("cm-lost").await?;
    let name = mcs
        .create(&PostParams::default(), &hello(&ns.name, 2)?)
        .await?
        .name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;
    let config_maps: Api<ConfigMap> = ns.api();
    let owned = ListParams::default().labels(&format!("{NAME_LABEL}={name}"));
    let before = config_maps.list(&owned).await?.items;
    assert_eq!(before.len(), 1, "one ConfigMap");
    let (cm, data) = (before[0].name_any(), before[0].data.clone());
    config_maps.delete(&cm, &DeleteParams::default()).await?;

    let notes = wait_for("a Recreated Warning", TIMEOUT, || async {
        let notes = warnings(&ns, &name, "Recreated").await?;
        Ok((!notes.is_empty()).then_some(notes))
    })
    .await?;
    assert!(notes[0].contains(&format!("ConfigMap {cm}")), "{notes:?}");
    let again = config_maps.get(&cm).await?;
    assert_eq!(again.data, data, "made again with the same content");
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_jobset_deleted_under_a_running_cluster_is_recreated_loudly() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("jobset-lost").await?;
    let name = mcs
        .create(&PostParams::default(), &hello(&ns.name, 2)?)
        .await?
        .name_any();
    let running = wait_phase(&mcs, &name, Phase::Running).await?;
    let first_ready = running.status.as_ref().and_then(|s| s.ready_time.clone());
    let jobsets: Api<JobSet> = ns.api();
    let old_uid = jobsets.get(&name).await?.uid();
    jobsets.delete(&name, &DeleteParams::foreground()).await?;

    let (mc, message) = wait_for("the Restarted condition", TIMEOUT, || async {
        let mc = mcs.get(&name).await?;
        Ok(mc_condition(&mc, "Restarted")
            .filter(|c| c.0 == "True")
            .map(|c| (mc, c.2)))
    })
    .await?;
    assert!(
        message.contains("was deleted while the cluster was Running"),
        "{message}"
    );
    assert!(
        mc.status.as_ref().and_then(|s| s.phase) != Some(Phase::Running)
            || mc.status.as_ref().and_then(|s| s.ready_time.clone()) != first_ready,
        "not silently the old Running with the old timestamps: {:?}",
        mc.status
    );
    let notes = wait_for("a Restarted Warning", TIMEOUT, || async {
        let notes = warnings(&ns, &name, "Restarted").await?;
        Ok((!notes.is_empty()).then_some(notes))
    })
    .await?;
    assert!(notes[0].contains("jobs are gone"), "{notes:?}");
    let again = wait_phase(&mcs, &name, Phase::Running).await?;
    assert_ne!(jobsets.get(&name).await?.uid(), old_uid, "a new JobSet");
    assert!(
        again.status.as_ref().and_then(|s| s.ready_time.clone()) >= first_ready,
        "ready time of the new instance"
    );
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_hand_edit_of_an_owned_object_never_stops_status_updates() -> Result<()> {
    let Setup {
        ns,
        operator: _operator,
        mcs,
    } = setup("hand-edit").await?;
    let mut mc = hello(&ns.name, 2)?;
    // flux.minimalService: an owned headless Service for the lead, which the operator may
    // re-apply.
    mc.spec.flux.minimal_service = true;
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;

    // Someone edits the operator's ConfigMap (labels: its data is immutable) and Service
    // with their own field manager.
    let config_maps: Api<ConfigMap> = ns.api();
    let cm = config_maps
        .list(&ListParams::default().labels(&format!("{NAME_LABEL}={name}")))
        .await?
        .items
        .remove(0);
    let edit = PatchParams::apply("someone").force();
    config_maps
        .patch(
            &cm.name_any(),
            &edit,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"edited": "yes"}}})),
        )
        .await?;
    let services: Api<Service> = ns.api();
    let svc = name.clone();
    let applied = services
        .get(&svc)
        .await?
        .annotations()
        .get("flux-framework.org/applied")
        .cloned();
    assert!(applied.is_some(), "the operator stamps what it applied");
    services
        .patch(
            &svc,
            &edit,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"annotations": {"flux-framework.org/applied": "hand-edited"}}, "spec": {"ports": [{"name": "hand", "port": 9999}]}})),
        )
        .await?;

    // The operator sees its stamp changed and applies its Service again, with force ...
    wait_for("the Service applied again", TIMEOUT, || async {
        let s = services.get(&svc).await?;
        Ok((s.annotations().get("flux-framework.org/applied") == applied.as_ref()).then_some(()))
    })
    .await?;
    // ... and status keeps following the cluster: the lead finishes, it Succeeds.
    crate::operator::finish_lead(&ns, &name).await?;
    wait_phase(&mcs, &name, Phase::Succeeded).await?;
    ns.cleanup().await;
    Ok(())
}
