//! The operator run exactly as `manifests/` installs it: its ServiceAccount, ClusterRole,
//! leader-election Role and their bindings from `kubectl kustomize manifests/`, the
//! container's arguments and environment from the Deployment there, and a token of that
//! ServiceAccount (`kubectl create token`), never the admin's credentials.
//!
//! Two things differ from a pod, both outside RBAC: the binary runs on this host (KWOK runs
//! no containers), and it watches only the test's namespace (`WATCH_NAMESPACE`), since
//! other tests' operators share the cluster. Its ClusterRole is bound cluster-wide as
//! installed. The RBAC objects go into the test's namespace and the cluster-scoped ones get
//! unique names, so tests never share them.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, ResourceRequirements, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use flux_operator::api::{KUEUE_QUEUE_LABEL, MiniCluster, NAME_LABEL, Phase};
use flux_operator::jobset::JobSet;

use crate::common::{
    TestNamespace, free_port, http_status, print_log_tail, spawn_logged, wait_for, wait_gone,
    yaml_documents,
};
use crate::operator::{
    example, finish_lead, hello, install_crd, kubectl, mc_condition, wait_phase,
};

const TIMEOUT: Duration = Duration::from_secs(120);

/// `kubectl kustomize manifests/`, one JSON value per object.
pub fn kustomize_manifests() -> Result<Vec<Value>> {
    let dir = format!("{}/manifests", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(kubectl()).args(["kustomize", &dir]).output()?;
    ensure!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_documents(&String::from_utf8(out.stdout)?)
}

fn kind(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or_default()
}

/// `kubectl <args>` with the admin kubeconfig, `stdin` piped in.
pub(crate) fn kubectl_stdin(args: &[&str], stdin: &str) -> Result<String> {
    use std::io::Write;
    let mut child = Command::new(kubectl())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .context("kubectl stdin")?
        .write_all(stdin.as_bytes())?;
    let out = child.wait_with_output()?;
    ensure!(
        out.status.success(),
        "kubectl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// The operator process, as installed, for one test namespace.
pub struct Installed {
    child: Child,
    pub metrics_port: u16,
    /// The probes' own listener (the manifests' `HEALTH_ADDR`, moved to a free loopback port).
    pub health_port: u16,
    pub log: PathBuf,
    pub pod_name: String,
    /// A client with the operator's own credentials (the ServiceAccount token).
    pub as_operator: Client,
}

impl Installed {
    /// Apply the manifests' RBAC for `ns`, mint a token of the ServiceAccount, and start the
    /// binary with the Deployment's arguments and environment and that token.
    pub async fn start(ns: &mut TestNamespace) -> Result<Self> {
        Self::start_with(ns, kustomize_manifests()?).await
    }

    /// The same with the objects of another install (the Helm chart's), its endpoints on
    /// plain HTTP on loopback (`METRICS_INSECURE_LOOPBACK`), as the other tests read them.
    pub async fn start_with(ns: &mut TestNamespace, objects: Vec<Value>) -> Result<Self> {
        Self::launch(ns, objects, false).await
    }

    /// The same with the endpoints as installed: HTTPS, `/metrics` behind the API server's
    /// TokenReview and SubjectAccessReview, made with the operator's own token.
    pub async fn start_https(ns: &mut TestNamespace, objects: Vec<Value>) -> Result<Self> {
        Self::launch(ns, objects, true).await
    }

    async fn launch(ns: &mut TestNamespace, objects: Vec<Value>, https: bool) -> Result<Self> {
        let mut rbac = Vec::new();
        let mut deployment = None;
        for mut o in objects {
            match kind(&o) {
                "ServiceAccount" | "Role" | "RoleBinding" => {
                    o["metadata"]["namespace"] = json!(ns.name);
                }
                kind @ ("ClusterRole" | "ClusterRoleBinding") => {
                    let name = ns.unique_name(o["metadata"]["name"].as_str().unwrap_or_default());
                    ns.track_cluster_object(&cluster_rbac(kind), &name);
                    o["metadata"]["name"] = json!(name);
                }
                "Deployment" => {
                    deployment = Some(o);
                    continue;
                }
                _ => continue,
            }
            if o.pointer("/roleRef/kind") == Some(&json!("ClusterRole")) {
                let name = o["roleRef"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                o["roleRef"]["name"] = json!(ns.unique_name(&name));
            }
            if let Some(subjects) = o.get_mut("subjects").and_then(Value::as_array_mut) {
                for s in subjects {
                    s["namespace"] = json!(ns.name);
                }
            }
            rbac.push(o);
        }
        ensure!(
            rbac.len() == 8,
            "expected a ServiceAccount, the operator's ClusterRole and Role and their \
             bindings, the metrics-auth ClusterRole and its binding, the metrics-reader \
             ClusterRole: {rbac:?}"
        );
        let deployment = deployment.context("no Deployment in manifests/")?;
        let list = json!({"apiVersion": "v1", "kind": "List", "items": rbac});
        kubectl_stdin(
            &[
                "apply",
                "--server-side",
                "--field-manager=flux-operator-e2e",
                "-f",
                "-",
            ],
            &list.to_string(),
        )?;

        let sa = deployment
            .pointer("/spec/template/spec/serviceAccountName")
            .and_then(Value::as_str)
            .context("serviceAccountName")?
            .to_string();
        let token = kubectl_stdin(
            &["create", "token", &sa, "-n", &ns.name, "--duration=2h"],
            "",
        )?;
        let kubeconfig = write_token_kubeconfig(&ns.name, token.trim()).await?;
        let as_operator = {
            let kc = kube::config::Kubeconfig::read_from(&kubeconfig)?;
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
            Client::try_from(config)?
        };

        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<String> = container["args"]
            .as_array()
            .context("container args")?
            .iter()
            .filter_map(|a| a.as_str().map(String::from))
            .collect();
        let pod_name = "flux-operator-installed-0".to_string();
        let mut env: Vec<(String, String)> = Vec::new();
        for e in container["env"].as_array().context("container env")? {
            let name = e["name"].as_str().context("env name")?.to_string();
            let value = match (
                e["value"].as_str(),
                e.pointer("/valueFrom/fieldRef/fieldPath"),
            ) {
                (Some(v), _) => v.to_string(),
                (None, Some(path)) if path == "metadata.name" => pod_name.clone(),
                (None, Some(path)) if path == "metadata.namespace" => ns.name.clone(),
                _ => bail!("env {name}: a source this test does not know: {e}"),
            };
            env.push((name, value));
        }
        let metrics_port = free_port()?;
        let health_port = free_port()?;
        ensure!(
            env.iter().any(|(k, _)| k == "HEALTH_ADDR"),
            "the manifests give the probes no listener of their own (HEALTH_ADDR)"
        );
        // What only a pod would have, or what a shared test cluster needs (see the module
        // comment): nothing here grants anything.
        if !env.iter().any(|(k, _)| k == "WATCH_NAMESPACE") {
            env.push(("WATCH_NAMESPACE".to_string(), ns.name.clone()));
        }
        env.extend([
            ("CLUSTER_DOMAIN".to_string(), "cluster.local".to_string()),
            (
                "METRICS_ADDR".to_string(),
                format!("127.0.0.1:{metrics_port}"),
            ),
            (
                "HEALTH_ADDR".to_string(),
                format!("127.0.0.1:{health_port}"),
            ),
            ("KUBECONFIG".to_string(), kubeconfig.display().to_string()),
        ]);
        if !https {
            env.push(("METRICS_INSECURE_LOOPBACK".to_string(), "true".to_string()));
        }
        let log = std::env::temp_dir().join(format!("flux-operator-{}-installed.log", ns.name));
        let log_file = std::fs::File::create(&log)?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_flux-operator"));
        command.args(&args).env_clear().envs(env);
        let child = spawn_logged(&mut command, log_file).context("starting the operator binary")?;
        Ok(Self {
            child,
            metrics_port,
            health_port,
            log,
            pod_name,
            as_operator,
        })
    }

    /// Log lines that say the API server refused the operator something.
    pub fn refusals(&self) -> Result<Vec<String>> {
        let text = std::fs::read_to_string(&self.log)?;
        Ok(text
            .lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                l.contains("forbidden") || l.contains("\"code\":403") || l.contains("code: 403")
            })
            .map(String::from)
            .collect())
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            print_log_tail(&self.log);
        }
    }
}

fn cluster_rbac(kind: &str) -> kube::api::ApiResource {
    let plural = match kind {
        "ClusterRole" => "clusterroles",
        _ => "clusterrolebindings",
    };
    kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind),
        plural,
    )
}

/// A kubeconfig with the test cluster's server and CA and `token` as the only credential.
async fn write_token_kubeconfig(namespace: &str, token: &str) -> Result<PathBuf> {
    let admin = kube::config::Kubeconfig::read()?;
    let context_name = admin.current_context.clone().context("current-context")?;
    let context = admin
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.clone())
        .context("the current context")?;
    let cluster = admin
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.clone())
        .context("the current cluster")?;
    let server = cluster.server.context("server")?;
    let mut cluster_entry = json!({"server": server});
    if let Some(ca) = cluster.certificate_authority_data {
        cluster_entry["certificate-authority-data"] = json!(ca);
    } else if let Some(path) = cluster.certificate_authority {
        cluster_entry["certificate-authority"] = json!(path);
    }
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster_entry}],
        "users": [{"name": "flux-operator", "user": {"token": token}}],
        "contexts": [{"name": "flux-operator", "context": {
            "cluster": "e2e", "user": "flux-operator", "namespace": namespace}}],
        "current-context": "flux-operator",
    });
    let path = std::env::temp_dir().join(format!("flux-operator-{namespace}.kubeconfig"));
    std::fs::write(&path, serde_json::to_string_pretty(&kubeconfig)?)?;
    Ok(path)
}

async fn running_brokers(ns: &TestNamespace, mc: &str) -> Result<usize> {
    Ok(ns
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("{NAME_LABEL}={mc}")))
        .await?
        .items
        .iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .count())
}

/// Everything the operator does, run with only the manifests' RBAC: no request is refused.
#[tokio::test]
async fn operator_runs_as_installed_with_only_the_manifests_rbac() -> Result<()> {
    let mut ns = TestNamespace::create("installed").await?;
    install_crd(&ns.client).await?;
    let queue = crate::kueue::queues(&mut ns, "4", "4Gi").await?;
    let operator = Installed::start(&mut ns).await?;

    // The token is the ServiceAccount's, and it is not an admin: it may watch Secrets (to see
    // its certificate Secret deleted) but never change or delete one.
    let theirs: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "someone-elses"},
        "stringData": {"k": "v"}}))?;
    ns.api::<Secret>()
        .create(&PostParams::default(), &theirs)
        .await?;
    let as_operator = Api::<Secret>::namespaced(operator.as_operator.clone(), &ns.name);
    match as_operator
        .delete("someone-elses", &Default::default())
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => bail!("the operator's token may delete Secrets: {other:?}"),
    }
    match as_operator
        .patch(
            "someone-elses",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"stringData": {"k": "w"}})),
        )
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => bail!("the operator's token may change Secrets: {other:?}"),
    }

    let mcs: Api<MiniCluster> = ns.api();
    let pp = PostParams::default();

    // hello-world, an elastic cluster, a queued one, one with a service, one that cleans up.
    let hello_world = mcs
        .create(&pp, &example("hello-world", &ns.name)?)
        .await?
        .name_any();
    let elastic = mcs
        .create(&pp, &example("elastic", &ns.name)?)
        .await?
        .name_any();
    let mut queued = hello(&ns.name, 2)?;
    queued.metadata.name = Some("queued".into());
    queued.metadata.labels = Some([(KUEUE_QUEUE_LABEL.to_string(), queue.clone())].into());
    queued.spec.containers[0].resources = Some(ResourceRequirements {
        requests: Some([("cpu".to_string(), Quantity("1".into()))].into()),
        ..Default::default()
    });
    let queued = mcs.create(&pp, &queued).await?.name_any();
    let mut with_service = hello(&ns.name, 2)?;
    with_service.metadata.name = Some("served".into());
    let mut companion = with_service.spec.containers[0].clone();
    companion.name = "web".into();
    companion.run_flux = false;
    companion.ports = vec![8080];
    with_service.spec.services = vec![companion];
    let with_service = mcs.create(&pp, &with_service).await?.name_any();
    let mut cleaned = hello(&ns.name, 2)?;
    cleaned.metadata.name = Some("cleaned".into());
    cleaned.spec.cleanup = true;
    let cleaned = mcs.create(&pp, &cleaned).await?.name_any();
    let mut expiring = hello(&ns.name, 2)?;
    expiring.metadata.name = Some("expiring".into());
    expiring.spec.ttl_seconds_after_finished = Some(1);
    let expiring = mcs.create(&pp, &expiring).await?.name_any();

    for name in [
        &hello_world,
        &elastic,
        &queued,
        &with_service,
        &cleaned,
        &expiring,
    ] {
        wait_phase(&mcs, name, Phase::Running).await?;
    }
    let admitted = mcs.get(&queued).await?;
    assert_eq!(
        mc_condition(&admitted, "Admitted").map(|c| c.0).as_deref(),
        Some("True"),
        "Kueue admitted the queued cluster"
    );

    // The lease is held by the installed operator, through its leader-election Role.
    let holder = ns
        .api::<Lease>()
        .get("flux-operator-leader")
        .await?
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some(operator.pod_name.as_str()));

    // Its probes pass on their own listener, so the Deployment would become Available.
    for path in ["/readyz", "/healthz"] {
        let (code, body) = http_status(operator.health_port, path).await?;
        assert_eq!(code, 200, "{path}: {body}");
    }

    // The service's Service and the services pod's Job, owned by their MiniCluster.
    let svc = ns
        .api::<Service>()
        .get(&format!("{with_service}-web"))
        .await?;
    assert!(
        svc.owner_references()
            .iter()
            .any(|o| o.name == with_service && o.controller == Some(true)),
        "{svc:?}"
    );
    let job = ns
        .api::<k8s_openapi::api::batch::v1::Job>()
        .get(&format!("{with_service}-services"))
        .await?;
    assert!(
        job.owner_references()
            .iter()
            .any(|o| o.name == with_service && o.controller == Some(true)),
        "{job:?}"
    );

    // Resize: the operator changes the followers Job of the running JobSet.
    let out = Command::new(kubectl())
        .args([
            "scale",
            "minicluster",
            &elastic,
            "-n",
            &ns.name,
            "--replicas=4",
        ])
        .output()?;
    ensure!(
        out.status.success(),
        "kubectl scale: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("elastic at 4 ready brokers", TIMEOUT, || async {
        let status = mcs.get(&elastic).await?.status.unwrap_or_default();
        let running = running_brokers(&ns, &elastic).await?;
        Ok((status.ready_brokers == 4 && status.size == 4 && running == 4).then_some(()))
    })
    .await?;

    // Finish: hello-world succeeds; the cleanup cluster deletes itself.
    finish_lead(&ns, &hello_world).await?;
    finish_lead(&ns, &cleaned).await?;
    finish_lead(&ns, &expiring).await?;
    wait_phase(&mcs, &hello_world, Phase::Succeeded).await?;
    // ttlSecondsAfterFinished: the operator deletes the finished cluster's JobSet (delete on
    // jobsets); the MiniCluster stays, Succeeded.
    let jobsets = ns.api::<JobSet>();
    wait_gone(
        "the expired cluster's JobSet deleted",
        TIMEOUT,
        &jobsets,
        &expiring,
    )
    .await?;
    wait_phase(&mcs, &expiring, Phase::Succeeded).await?;
    wait_gone("the cleanup MiniCluster deleted", TIMEOUT, &mcs, &cleaned).await?;
    wait_gone("its JobSet gone with it", TIMEOUT, &jobsets, &cleaned).await?;

    // Events were published (events.k8s.io, created by the operator's reporter).
    let events = ns.api::<Event>().list(&ListParams::default()).await?.items;
    let from_operator = events
        .iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("flux-operator"))
        .count();
    assert!(from_operator > 0, "no events from the operator: {events:?}");

    let refused = operator.refusals()?;
    assert!(
        refused.is_empty(),
        "the API server refused the operator:\n{}",
        refused.join("\n")
    );
    ns.cleanup().await;
    Ok(())
}

/// The Helm chart installed for one namespace (`watchNamespace`): the ClusterRole is bound
/// there only (a RoleBinding), and that is enough for a cluster under Kueue; elsewhere the
/// operator can read nothing.
#[tokio::test]
async fn operator_installed_by_helm_for_one_namespace_needs_nothing_outside_it() -> Result<()> {
    let mut ns = TestNamespace::create("helm-installed").await?;
    install_crd(&ns.client).await?;
    let queue = crate::kueue::queues(&mut ns, "4", "4Gi").await?;
    let watch = format!("watchNamespace={}", ns.name);
    let rendered = crate::helm::helm_template(&ns.name, &[&watch])?;
    let objects = yaml_documents(&rendered)?;
    assert!(
        objects.iter().all(|o| kind(o) != "ClusterRoleBinding"
            || o["metadata"]["name"] == "flux-operator-metrics-auth"),
        "a namespaced install binds nothing cluster-wide but the metrics endpoint's reviews"
    );
    let operator = Installed::start_with(&mut ns, objects).await?;

    // Nothing outside its namespace: not even MiniClusters in the default namespace.
    match Api::<MiniCluster>::namespaced(operator.as_operator.clone(), "default")
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => bail!("the namespaced operator may list MiniClusters elsewhere: {other:?}"),
    }

    let mcs: Api<MiniCluster> = ns.api();
    let mut queued = hello(&ns.name, 2)?;
    queued.metadata.name = Some("queued".into());
    queued.metadata.labels = Some([(KUEUE_QUEUE_LABEL.to_string(), queue)].into());
    queued.spec.containers[0].resources = Some(ResourceRequirements {
        requests: Some([("cpu".to_string(), Quantity("1".into()))].into()),
        ..Default::default()
    });
    let queued = mcs
        .create(&PostParams::default(), &queued)
        .await?
        .name_any();
    let running = wait_phase(&mcs, &queued, Phase::Running).await?;
    assert_eq!(
        mc_condition(&running, "Admitted").map(|c| c.0).as_deref(),
        Some("True"),
        "Kueue seen and admitted through the namespaced binding"
    );
    finish_lead(&ns, &queued).await?;
    wait_phase(&mcs, &queued, Phase::Succeeded).await?;
    for path in ["/readyz", "/healthz"] {
        let (code, body) = http_status(operator.health_port, path).await?;
        assert_eq!(code, 200, "{path}: {body}");
    }
    let refused = operator.refusals()?;
    assert!(
        refused.is_empty(),
        "the API server refused the operator:\n{}",
        refused.join("\n")
    );
    ns.cleanup().await;
    Ok(())
}
