//! The one set of helpers the tests against a cluster and the benchmarks share: the e2e
//! tests (`tests/e2e`), the real-node tests (`tests/node`) and both cluster benches
//! (`benches/operators.rs`, `benches/node.rs`) include this module.
//!
//! Here: a client for the test cluster, a fresh namespace per test that is deleted
//! afterwards; in `wait.rs`, bounded wait helpers; in `objects.rs`, typed handles for the
//! JobSet, Kueue and MiniCluster APIs (as `DynamicObject`s, so the tests do not depend on
//! the crate's own types), conditions, pods' readiness, YAML streams and CRDs; in `http.rs`,
//! plain HTTP on loopback; in `metrics.rs`, Prometheus' text format; in `prometheus.rs`, Debian's Prometheus run for a test; in `process.rs`, this operator's binary run for one namespace
//! and other processes with a log;
//! in `go.rs`, the Go operator's archive and build. All of it is used as `common::name`.
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
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Client, Resource};
use serde_json::{Value, json};

mod go;
mod http;
mod metrics;
mod objects;
mod process;
mod prometheus;
mod wait;

// One namespace for every helper, `common::name`. Each includer uses some of them (the
// reason for `dead_code` above, too).
#[allow(unused_imports)]
pub use self::{
    go::{GO_CRD, GO_OPERATOR_ARCHIVE, built_go_operator, unpack_go_operator},
    http::{free_port, http_get, http_status},
    metrics::{Sample, histogram_p50_p99_ms, label, parse_sample, sum_samples},
    objects::{
        IMMUTABLE_POLICY_FILE, MINICLUSTER_CRD, admission_policies, api_resource, collector_knows,
        condition, crd_established, crd_from_file, dynamic_object, has_condition, jobset_resource,
        kueue_resource, minicluster_resource, pod_phase, pod_ready, replace_crd,
        swap_minicluster_crd, yaml_documents,
    },
    process::{Operator, print_log_tail, spawn_logged},
    prometheus::Prometheus,
    wait::{POLL_INTERVAL, wait_for, wait_for_every, wait_for_list, wait_for_object, wait_gone},
};

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
    /// Create the namespace and wait until pods can be created in it.
    pub async fn create(test: &str) -> Result<Self> {
        let client = client().await?;
        let name = format!("e2e-{}-{}", sanitize(test), random_suffix());
        post_namespace(&client, &name, json!({ TEST_LABEL: sanitize(test) })).await?;
        let this = Self {
            client: client.clone(),
            name: name.clone(),
            cluster_objects: Vec::new(),
            cleaned: false,
        };
        default_service_account(&client, &name).await?;
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

/// Create the namespace `name` with `labels` (a JSON map) and wait until pods can be
/// created in it. It stays: for a namespace deleted after the test, see [`TestNamespace`].
pub async fn create_namespace(client: &Client, name: &str, labels: Value) -> Result<()> {
    post_namespace(client, name, labels).await?;
    default_service_account(client, name).await
}

async fn post_namespace(client: &Client, name: &str, labels: Value) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": name, "labels": labels }
    }))?;
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(())
}

/// Wait for the namespace's default ServiceAccount, which the ServiceAccount admission
/// plugin requires of every pod.
async fn default_service_account(client: &Client, namespace: &str) -> Result<()> {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    wait_for(
        &format!("default ServiceAccount in {namespace}"),
        Duration::from_secs(30),
        || async { Ok(sas.get_opt("default").await?.map(|_| ())) },
    )
    .await
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
