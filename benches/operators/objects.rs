//! The objects a run applies: a MiniCluster, or the JobSet, Secret and ConfigMap it renders.

use super::*;

/// An object ready to be sent: its API, name and body.
pub(crate) struct Apply {
    pub(crate) api: Api<DynamicObject>,
    pub(crate) name: String,
    pub(crate) obj: DynamicObject,
    /// Its field manager ([`FIELD_MANAGER`] unless it is a resize's).
    pub(crate) manager: &'static str,
}

impl Apply {
    pub(crate) fn kind(&self) -> &str {
        self.obj.types.as_ref().map_or("?", |t| t.kind.as_str())
    }

    /// The MiniCluster this object is or was rendered from: its name label, else its name.
    pub(crate) fn cluster(&self) -> &str {
        self.obj
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(flux_operator::api::NAME_LABEL))
            .unwrap_or(&self.name)
    }

    /// What holds the pods: deleted first in a teardown.
    pub(crate) fn is_workload(&self) -> bool {
        matches!(self.kind(), "MiniCluster" | "JobSet" | "Job")
    }
}

pub(crate) fn to_apply(client: &Client, v: Value) -> Result<Apply> {
    let api_version = v["apiVersion"].as_str().context("no apiVersion")?;
    let kind = v["kind"].as_str().context("no kind")?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let ar = api_resource(group, version, kind, &format!("{}s", kind.to_lowercase()));
    let obj = dynamic_object(v)?;
    let api = match obj.metadata.namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    Ok(Apply {
        api,
        name: obj.name_any(),
        obj,
        manager: FIELD_MANAGER,
    })
}

pub(crate) async fn apply(a: &Apply) -> Result<()> {
    a.api
        .patch(
            &a.name,
            &PatchParams::apply(a.manager).force(),
            &Patch::Apply(&a.obj),
        )
        .await
        .with_context(|| format!("applying {} {}", a.kind(), a.name))?;
    Ok(())
}

/// Apply `objects` cluster by cluster (consecutive objects of one MiniCluster: its own, or
/// the Secret, ConfigMap and JobSet rendered from it), up to `connections` clusters at once,
/// each cluster's objects in order (`connections` is at least 1: the config checks it).
pub(crate) async fn apply_clusters(objects: &[Apply], connections: usize) -> Result<()> {
    use futures::TryStreamExt as _;
    let clusters = objects.chunk_by(|a, b| a.cluster() == b.cluster());
    futures::stream::iter(clusters.map(Ok))
        .try_for_each_concurrent(connections, |cluster| async move {
            for a in cluster {
                apply(a).await?;
            }
            Ok(())
        })
        .await
}

/// Delete with background propagation, as kubectl does (gone already is fine).
pub(crate) async fn delete(a: &Apply) -> Result<()> {
    match a.api.delete(&a.name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting {} {}", a.kind(), a.name)),
    }
}
