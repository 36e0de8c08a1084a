//! Objects of the test cluster: the API resources of JobSet, Kueue and the MiniCluster (as
//! `DynamicObject`s, so that tests and benches do not depend on the crate's own types),
//! their conditions, pods' phase and readiness, YAML streams, and installing a CRD and the
//! policy committed beside it.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use serde::Deserialize;
use serde_json::Value;

use super::wait::{wait_for, wait_gone};

/// The MiniCluster CRD's name: this operator's and the Go operator's alike.
pub const MINICLUSTER_CRD: &str = "miniclusters.flux-framework.org";

/// True if `obj.status.conditions` has a condition `type_` with `status`.
pub fn has_condition(obj: &Value, type_: &str, status: &str) -> bool {
    condition(obj, type_).is_some_and(|c| c["status"] == status)
}

/// The condition `type_` from `obj.status.conditions` (of a `DynamicObject`'s
/// `data`, or any serialized object).
pub fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Pod phase, e.g. "Running".
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// The pod's `Ready` condition is `True`.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Build a `DynamicObject` from JSON (which must carry apiVersion and kind).
pub fn dynamic_object(value: Value) -> Result<DynamicObject> {
    serde_json::from_value(value).context("building a DynamicObject from JSON")
}

/// The documents of a multi-document YAML stream (empty ones dropped), as the API server's
/// decoder sees them: a duplicated key is not an error, the last one wins (serde_json's map;
/// serde_norway's own Mapping would refuse it).
pub fn yaml_documents(text: &str) -> Result<Vec<Value>> {
    let mut docs = Vec::new();
    for doc in serde_norway::Deserializer::from_str(text) {
        let v = Value::deserialize(doc)?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}

/// The resource of `group`/`version` `kind`, named `plural` in URLs.
pub fn api_resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// jobset.x-k8s.io/v1alpha2 JobSet.
pub fn jobset_resource() -> ApiResource {
    api_resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")
}

/// flux-framework.org/v1alpha2 MiniCluster (this operator's CRD or the Go operator's).
pub fn minicluster_resource() -> ApiResource {
    api_resource(
        "flux-framework.org",
        "v1alpha2",
        "MiniCluster",
        "miniclusters",
    )
}

/// kueue.x-k8s.io/v1beta2 (served through Kueue's conversion webhook).
pub fn kueue_resource(kind: &str) -> ApiResource {
    let plural = match kind {
        "ResourceFlavor" => "resourceflavors",
        "ClusterQueue" => "clusterqueues",
        "LocalQueue" => "localqueues",
        "Workload" => "workloads",
        other => panic!("no plural known for Kueue kind {other}"),
    };
    api_resource("kueue.x-k8s.io", "v1beta2", kind, plural)
}

/// The CustomResourceDefinition in a YAML file.
pub fn crd_from_file(path: &Path) -> Result<CustomResourceDefinition> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_norway::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Wait until the CRD `name` is Established.
pub async fn crd_established(client: &Client, name: &str, timeout: Duration) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    wait_for(&format!("the CRD {name} established"), timeout, || async {
        let crd = crds.get(name).await?;
        let established = crd.status.and_then(|s| s.conditions).is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
        Ok(established.then_some(()))
    })
    .await
}

/// Install `crd` in place of the CRD of its name, if there is one: that one is deleted and
/// gone first (with every object of its kind), so that nothing of it is left to serve or to
/// convert. Returns once the new one is Established and every served version lists.
pub async fn replace_crd(client: &Client, crd: &CustomResourceDefinition) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd
        .metadata
        .name
        .as_deref()
        .context("the CRD has no name")?;
    if crds.get_opt(name).await?.is_some() {
        crds.delete(name, &DeleteParams::default()).await?;
        let what = format!("the old CRD {name} gone");
        wait_gone(&what, Duration::from_secs(120), &crds, name).await?;
    }
    crds.create(&PostParams::default(), crd).await?;
    crd_established(client, name, Duration::from_secs(60)).await?;
    let spec = &crd.spec;
    if let Some(version) = spec.versions.iter().find(|v| v.storage) {
        let api_version = format!("{}/{}", spec.group, version.name);
        collector_knows(client, &api_version, &spec.names.kind).await?;
    }
    for version in spec.versions.iter().filter(|v| v.served) {
        let resource = api_resource(
            &spec.group,
            &version.name,
            &spec.names.kind,
            &spec.names.plural,
        );
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let what = format!("{} {} served", spec.names.plural, version.name);
        wait_for(&what, Duration::from_secs(60), || async {
            Ok(api
                .list(&ListParams::default().limit(1))
                .await
                .ok()
                .map(drop))
        })
        .await?;
    }
    Ok(())
}

/// The policy that keeps a running MiniCluster's spec, as committed beside the CRD.
pub const IMMUTABLE_POLICY_FILE: &str = "crds/minicluster-immutable.yaml";
/// The files of admission policies `kubectl apply -k manifests/` installs with the CRD.
const POLICY_FILES: [&str; 2] = [IMMUTABLE_POLICY_FILE, "manifests/pod-security.yaml"];

/// Install the MiniCluster CRD in `crd_file` in place of the one installed ([`replace_crd`]),
/// with this operator's admission policies (`ours`, read from the checkout at `root`) or
/// without them (the Go operator's CRD comes with none).
pub async fn swap_minicluster_crd(
    client: &Client,
    crd_file: &Path,
    root: &Path,
    ours: bool,
) -> Result<()> {
    replace_crd(client, &crd_from_file(crd_file)?).await?;
    for policy in POLICY_FILES {
        admission_policies(client, &root.join(policy), ours).await?;
    }
    Ok(())
}

/// Install the admission policies and bindings in `file` (as `kubectl apply --server-side`
/// does), or with `installed` false remove them. They are cluster-scoped, as the CRD is.
pub async fn admission_policies(client: &Client, file: &Path, installed: bool) -> Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    for doc in yaml_documents(&text)? {
        let name = doc["metadata"]["name"]
            .as_str()
            .context("a nameless object")?;
        let kind = doc["kind"].as_str().unwrap_or_default();
        let plural = match kind {
            "ValidatingAdmissionPolicy" => "validatingadmissionpolicies",
            "ValidatingAdmissionPolicyBinding" => "validatingadmissionpolicybindings",
            other => anyhow::bail!("{}: unexpected kind {other:?}", file.display()),
        };
        let resource = api_resource("admissionregistration.k8s.io", "v1", kind, plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        if installed {
            let pp = PatchParams::apply("flux-operator-e2e").force();
            api.patch(name, &pp, &Patch::Apply(&doc)).await?;
        } else {
            absent_is_fine(api.delete(name, &DeleteParams::default()).await.map(drop))?;
        }
    }
    Ok(())
}

/// A delete's result, with "not found" counted as done.
fn absent_is_fine(deleted: kube::Result<()>) -> Result<()> {
    match deleted {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => Ok(other?),
    }
}

/// Wait until the garbage collector resolves owners of `kind`: it learns new resource types
/// by a discovery every 30 s, and until then an object owned by one is not collected (an
/// owner deleted just after its CRD was installed leaves its dependents for up to 30 s
/// more). Proven by a ConfigMap in `default` whose owner of that kind does not exist: it is
/// collected once the collector knows the kind.
pub async fn collector_knows(client: &Client, api_version: &str, kind: &str) -> Result<()> {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let name = format!(
        "gc-probe-{}-{}",
        kind.to_lowercase(),
        super::random_suffix()
    );
    let probe: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": api_version, "kind": kind, "name": "absent",
            "uid": format!("00000000-0000-0000-0000-{:012}", std::process::id()),
        }]},
    }))?;
    config_maps.create(&PostParams::default(), &probe).await?;
    let what = format!("the garbage collector resolving owners of kind {kind}");
    wait_gone(&what, Duration::from_secs(120), &config_maps, &name).await
}
