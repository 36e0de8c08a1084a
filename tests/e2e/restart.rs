//! An operator restart touches nothing that lives (issue 37): a rollout, an upgrade, an OOM
//! kill or a crash of the operator must leave every running MiniCluster exactly as it was:
//! the same objects (by UID), the same pods, the same conditions, no Event published again,
//! no lifecycle duration observed twice.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Resource, ResourceExt};

use flux_operator::api::{MiniCluster, NAME_LABEL};
use flux_operator::jobset::JobSet;

use crate::common::{Operator, TestNamespace, sum_samples, wait_for};
use crate::operator::{Setup, TIMEOUT, hello, mc_condition, running_at, setup};

/// Everything of the test's namespace that a restart must leave as it was.
#[derive(Debug, PartialEq)]
struct Live {
    /// `Kind/name` -> UID of every object the operator made and every broker pod.
    objects: BTreeMap<String, String>,
    /// MiniCluster -> its conditions, each with its transition time and generation.
    conditions: BTreeMap<String, Vec<String>>,
    /// Event name -> what it says and how often.
    events: BTreeMap<String, String>,
}

async fn uids<K>(ns: &TestNamespace, into: &mut BTreeMap<String, String>) -> Result<()>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let listed = ns
        .api::<K>()
        .list(&ListParams::default().labels(NAME_LABEL))
        .await?;
    for obj in listed {
        let uid = obj.uid().unwrap_or_default();
        into.insert(format!("{kind}/{}", obj.name_any()), uid);
    }
    Ok(())
}

async fn live(ns: &TestNamespace) -> Result<Live> {
    let mut objects = BTreeMap::new();
    uids::<JobSet>(ns, &mut objects).await?;
    uids::<Secret>(ns, &mut objects).await?;
    uids::<ConfigMap>(ns, &mut objects).await?;
    uids::<Service>(ns, &mut objects).await?;
    uids::<Pod>(ns, &mut objects).await?;
    let mut conditions = BTreeMap::new();
    for mc in ns.api::<MiniCluster>().list(&ListParams::default()).await? {
        let status = mc.status.clone().unwrap_or_default();
        let described = status
            .conditions
            .iter()
            .map(|c| {
                format!(
                    "{}={} {} {:?} at {} (generation {:?})",
                    c.type_,
                    c.status,
                    c.reason,
                    c.message,
                    c.last_transition_time.0,
                    c.observed_generation
                )
            })
            .collect();
        conditions.insert(mc.name_any(), described);
    }
    let mut events = BTreeMap::new();
    for e in ns.api::<Event>().list(&ListParams::default()).await? {
        let said = format!(
            "{:?} {:?} {:?} count {:?} series {:?}",
            e.regarding.as_ref().and_then(|r| r.name.clone()),
            e.reason,
            e.note,
            e.deprecated_count,
            e.series.as_ref().map(|s| s.count)
        );
        events.insert(e.name_any(), said);
    }
    Ok(Live {
        objects,
        conditions,
        events,
    })
}

/// What the namespace holds once two looks 3 s apart agree (the operator's last status
/// writes and Events have landed).
async fn settled(ns: &TestNamespace) -> Result<Live> {
    let started = std::time::Instant::now();
    let mut last = live(ns).await?;
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = live(ns).await?;
        if now == last {
            return Ok(now);
        }
        anyhow::ensure!(
            started.elapsed() < TIMEOUT,
            "the namespace never settled: {now:#?}"
        );
        last = now;
    }
}

/// Wait until `operator` has reconciled at least `n` times (each MiniCluster at least once
/// after its start), then 3 s more for anything it set off to land.
async fn reconciled(operator: &Operator, n: f64) -> Result<String> {
    let text = wait_for("the restarted operator's reconciles", TIMEOUT, || async {
        let text = operator.metrics().await.unwrap_or_default();
        let done = sum_samples(&text, "flux_operator_reconcile_duration_seconds_count", &[]);
        Ok(done.filter(|d| *d >= n).map(|_| text))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    Ok(text)
}

#[tokio::test]
async fn an_operator_restart_by_kill_or_sigterm_changes_nothing_of_running_miniclusters()
-> Result<()> {
    let Setup {
        ns,
        mut operator,
        mcs,
    } = setup("restart").await?;
    let names = ["first", "second", "third", "cert-lost"];
    for name in names {
        let mut mc = hello(&ns.name, 2)?;
        mc.metadata.name = Some(name.into());
        mcs.create(&PostParams::default(), &mc).await?;
    }
    for name in names {
        running_at(&mcs, name, 2).await?;
    }
    // One cluster's certificate deleted by hand: held Degraded, never replaced (the restart
    // must not defeat that guard either).
    ns.api::<Secret>()
        .delete("cert-lost-curve", &DeleteParams::default())
        .await?;
    wait_for("cert-lost Degraded", TIMEOUT, || async {
        let mc = mcs.get("cert-lost").await?;
        Ok(mc_condition(&mc, "Degraded").filter(|c| c.0 == "True"))
    })
    .await?;
    let before = settled(&ns).await?;
    assert_eq!(
        before
            .objects
            .keys()
            .filter(|k| k.starts_with("JobSet/"))
            .count(),
        4,
        "{before:#?}"
    );
    assert!(
        !before.objects.contains_key("Secret/cert-lost-curve"),
        "the deleted certificate is not replaced: {before:#?}"
    );

    for how in ["kill -9", "SIGTERM"] {
        match how {
            "kill -9" => operator.kill(),
            _ => operator.stop()?,
        }
        operator = Operator::start(&ns.name)?;
        let metrics = reconciled(&operator, names.len() as f64).await?;
        let after = live(&ns).await?;
        assert_eq!(after.objects, before.objects, "objects after a {how}");
        assert_eq!(
            after.conditions, before.conditions,
            "conditions after a {how}"
        );
        assert_eq!(after.events, before.events, "Events after a {how}");
        let up = sum_samples(&metrics, "flux_operator_minicluster_up_seconds_count", &[]);
        assert_eq!(
            up.unwrap_or(0.0),
            0.0,
            "no cluster-up observed again after a {how}"
        );
    }
    ns.cleanup().await;
    Ok(())
}
