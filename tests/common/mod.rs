//! Shared helpers for the e2e tests: a client for the test cluster, a fresh
//! namespace per test that is deleted afterwards, typed handles for the JobSet
//! and Kueue APIs (as `DynamicObject`s, so the tests do not depend on the
//! crate's own types), and bounded wait helpers.
//!
//! The cluster comes from `e2e/up.sh` (`make up`, or `make test` which starts
//! and stops one); its kubeconfig is `$KUBECONFIG`.
//!
//! ```ignore
//! let ns = TestNamespace::create("my-test").await?;   // e2e-my-test-<random>
//! let jobsets = ns.dynamic(&jobset_resource());
//! jobsets.create(&PostParams::default(), &obj).await?;
//! let done = wait_for("JobSet completed", Duration::from_secs(60), || async {
//!     let js = jobsets.get("x").await?;
//!     Ok(has_condition(&js.data, "Completed", "True").then_some(js))
//! }).await?;
//! ns.cleanup().await; // also happens on drop (e.g. after a failed assertion)
//! ```
#![allow(dead_code)]

use std::collections::hash_map::RandomState;
use std::fmt::Debug;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::{Client, Resource};
use serde_json::{Value, json};

/// How often the wait helpers look again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Label put on every namespace a test creates (value: the test's name).
pub const TEST_LABEL: &str = "e2e.flux-framework.org/test";

/// Pod annotation read by the harness's kwok stages: the pod's containers exit 0
/// after this delay (a Go duration such as "5s") and the pod becomes Succeeded.
pub const COMPLETE_AFTER: &str = "e2e.flux-framework.org/complete-after";
/// Pod annotation: the pod fails (exit code 1, or `EXIT_CODE`) after this delay.
pub const FAIL_AFTER: &str = "e2e.flux-framework.org/fail-after";
/// Pod annotation: exit code used with `FAIL_AFTER`.
pub const EXIT_CODE: &str = "e2e.flux-framework.org/exit-code";

/// A client for the test cluster, from `$KUBECONFIG`.
pub async fn client() -> Result<Client> {
    if std::env::var_os("KUBECONFIG").is_none() {
        bail!(
            "KUBECONFIG is not set: start the test cluster with `make up` and \
             `export KUBECONFIG=$HOME/.cache/flux-operator-rs/cluster/kubeconfig`, or run `make test`"
        );
    }
    Client::try_default()
        .await
        .context("building a client from $KUBECONFIG")
}

/// A short random lowercase suffix (no extra crates: std's randomly seeded hasher).
pub fn random_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.write_u32(std::process::id());
    let mut n = h.finish();
    let alphabet = b"0123456789abcdefghijklmnopqrstuvwxyz";
    (0..6)
        .map(|_| {
            let c = alphabet[(n % 36) as usize] as char;
            n /= 36;
            c
        })
        .collect()
}

/// Turn a test name into a DNS label fragment.
fn sanitize(name: &str) -> String {
    let s: String = name
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let s = s.trim_matches('-');
    s.chars()
        .take(40)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

/// A cluster-scoped object a test created and wants deleted with its namespace.
#[derive(Clone, Debug)]
struct ClusterObject {
    resource: ApiResource,
    name: String,
}

/// A namespace of its own for one test, named `e2e-<test>-<random>`.
///
/// Deleted by [`TestNamespace::cleanup`], or when dropped (also after a panic
/// in the test), together with cluster-scoped objects registered with
/// [`TestNamespace::track_cluster_object`]. Set `E2E_KEEP_NAMESPACES=1` to keep
/// them for debugging.
pub struct TestNamespace {
    pub client: Client,
    pub name: String,
    cluster_objects: Vec<ClusterObject>,
    cleaned: bool,
}

impl TestNamespace {
    /// Create the namespace and wait until pods can be created in it (its
    /// default ServiceAccount exists, which the ServiceAccount admission
    /// plugin requires).
    pub async fn create(test: &str) -> Result<Self> {
        let client = client().await?;
        let name = format!("e2e-{}-{}", sanitize(test), random_suffix());
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": { "name": name, "labels": { TEST_LABEL: sanitize(test) } }
        }))?;
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        let this = Self {
            client: client.clone(),
            name: name.clone(),
            cluster_objects: Vec::new(),
            cleaned: false,
        };
        let sas: Api<ServiceAccount> = Api::namespaced(client, &name);
        wait_for(
            &format!("default ServiceAccount in {name}"),
            Duration::from_secs(30),
            || async { Ok(sas.get_opt("default").await?.map(|_| ())) },
        )
        .await?;
        Ok(this)
    }

    /// A typed API for a namespaced built-in resource in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// A dynamic API for a namespaced custom resource in this namespace.
    pub fn dynamic(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.name, resource)
    }

    /// A dynamic API for a cluster-scoped custom resource.
    pub fn cluster_dynamic(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), resource)
    }

    /// Delete this cluster-scoped object when the namespace is cleaned up.
    pub fn track_cluster_object(&mut self, resource: &ApiResource, name: &str) {
        self.cluster_objects.push(ClusterObject {
            resource: resource.clone(),
            name: name.to_string(),
        });
    }

    /// A name for a cluster-scoped object that is unique to this test run.
    pub fn unique_name(&self, what: &str) -> String {
        format!("{}-{}", self.name, sanitize(what))
    }

    /// Delete the namespace (without waiting for it to be gone) and the tracked
    /// cluster-scoped objects.
    pub async fn cleanup(mut self) {
        self.cleaned = true;
        if keep_namespaces() {
            eprintln!("E2E_KEEP_NAMESPACES set: keeping namespace {}", self.name);
            return;
        }
        delete_all(&self.client, &self.name, &self.cluster_objects).await;
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if self.cleaned || keep_namespaces() {
            return;
        }
        // The test ended early (an error or a failed assertion). Clean up on a
        // runtime and client of our own: the test's runtime may be the current
        // thread, blocked right here.
        let name = self.name.clone();
        let objects = self.cluster_objects.clone();
        let result = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let client = client().await?;
                delete_all(&client, &name, &objects).await;
                anyhow::Ok(())
            })
        })
        .join();
        if !matches!(result, Ok(Ok(()))) {
            eprintln!("warning: could not clean up test namespace {}", self.name);
        }
    }
}

fn keep_namespaces() -> bool {
    std::env::var("E2E_KEEP_NAMESPACES").is_ok_and(|v| !v.is_empty() && v != "0")
}

async fn delete_all(client: &Client, namespace: &str, objects: &[ClusterObject]) {
    let dp = DeleteParams::background();
    // Namespaced objects first (they go with the namespace), then the
    // cluster-scoped ones in reverse order of creation.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if let Err(e) = namespaces.delete(namespace, &dp).await {
        eprintln!("warning: deleting namespace {namespace}: {e}");
    }
    for o in objects.iter().rev() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &o.resource);
        match api.delete(&o.name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => eprintln!("warning: deleting {} {}: {e}", o.resource.kind, o.name),
        }
    }
}

/// Poll `check` every [`POLL_INTERVAL`] until it returns `Ok(Some(value))`, and
/// return that value. Errors from `check` are retried (and reported if the time
/// runs out); after `timeout` this fails, naming `what` and the last error.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let start = Instant::now();
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if start.elapsed() >= timeout {
            let mut msg = format!("timed out after {timeout:?} waiting for {what}");
            if let Some(e) = last_error {
                msg.push_str(&format!(" (last error: {e:#})"));
            }
            return Err(anyhow!(msg));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Wait until the object `name` exists and satisfies `pred`; return it. On
/// timeout the error shows the object's last observed `status`.
pub async fn wait_for_object<K, P>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    pred: P,
) -> Result<K>
where
    K: Clone + Debug + serde::de::DeserializeOwned + serde::Serialize,
    P: Fn(&K) -> bool,
{
    let start = Instant::now();
    let mut last: Option<K> = None;
    let mut last_error = None;
    loop {
        match api.get_opt(name).await {
            Ok(Some(obj)) if pred(&obj) => return Ok(obj),
            Ok(obj) => last = obj.or(last),
            Err(e) => last_error = Some(e),
        }
        if start.elapsed() >= timeout {
            let status = last
                .and_then(|o| serde_json::to_value(o).ok())
                .map(|v| v.get("status").cloned().unwrap_or(Value::Null));
            let mut msg = format!("timed out after {timeout:?} waiting for {what}");
            match status {
                Some(s) => msg.push_str(&format!("; last status of {name}: {s}")),
                None => msg.push_str(&format!("; {name} was never found")),
            }
            if let Some(e) = last_error {
                msg.push_str(&format!(" (last error: {e})"));
            }
            bail!(msg);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Wait until `api` lists at least `count` objects with `labels` satisfying
/// `pred`; return all that satisfy it.
pub async fn wait_for_list<K, P>(
    api: &Api<K>,
    labels: &str,
    count: usize,
    what: &str,
    timeout: Duration,
    pred: P,
) -> Result<Vec<K>>
where
    K: Clone + Debug + serde::de::DeserializeOwned,
    P: Fn(&K) -> bool,
{
    let lp = ListParams::default().labels(labels);
    let start = Instant::now();
    let (mut listed, mut matched) = (0, 0);
    let mut last_error = None;
    loop {
        match api.list(&lp).await {
            Ok(list) => {
                listed = list.items.len();
                let items: Vec<K> = list.items.into_iter().filter(|o| pred(o)).collect();
                matched = items.len();
                if matched >= count {
                    return Ok(items);
                }
            }
            Err(e) => last_error = Some(e),
        }
        if start.elapsed() >= timeout {
            let mut msg = format!(
                "timed out after {timeout:?} waiting for {what}: {matched} of {count} matched \
                 ({listed} listed with labels {labels:?})"
            );
            if let Some(e) = last_error {
                msg.push_str(&format!(" (last error: {e})"));
            }
            bail!(msg);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

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

/// Build a `DynamicObject` from JSON (which must carry apiVersion and kind).
pub fn dynamic_object(value: Value) -> Result<DynamicObject> {
    serde_json::from_value(value).context("building a DynamicObject from JSON")
}

fn api_resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// jobset.x-k8s.io/v1alpha2 JobSet.
pub fn jobset_resource() -> ApiResource {
    api_resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")
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

/// The Go operator's source archive, relative to `CARGO_MANIFEST_DIR`.
pub const GO_OPERATOR_ARCHIVE: &str = "../shared/vendor/flux-operator-0d75cef8.tar.gz";

/// Unpack the members of the Go operator's archive that match the `tar --wildcards`
/// PATTERNS into `dir`; return the archive's top directory there.
pub fn unpack_go_operator(dir: &std::path::Path, patterns: &[&str]) -> Result<std::path::PathBuf> {
    let archive = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GO_OPERATOR_ARCHIVE);
    anyhow::ensure!(
        archive.exists(),
        "the Go operator's source archive {} is missing (see ../shared/vendor/README.md)",
        archive.display()
    );
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(dir)
        .arg("--wildcards")
        .args(patterns)
        .status()
        .context("running tar")?;
    anyhow::ensure!(status.success(), "tar failed on {}", archive.display());
    let top = std::fs::read_dir(dir)?
        .next()
        .context("empty archive")??
        .path();
    Ok(top)
}
