//! The Helm chart (`charts/flux-operator`), with the Helm binary `e2e/build.sh` builds from
//! its Go module: it lints, it renders exactly the objects `manifests/` installs (so the two
//! cannot drift apart), its optional ServiceMonitor, PodMonitor and PrometheusRule match
//! `manifests/prometheus/`, and what it renders applies to a real API server.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};

use crate::common::{TestNamespace, yaml_documents};
use crate::installed::kustomize_manifests;
use crate::operator::{install_crd, kubectl};

/// Labels only Helm puts on objects (release bookkeeping); everything else must agree.
const HELM_ONLY_LABELS: [&str; 4] = [
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
];

fn helm() -> PathBuf {
    kubectl().with_file_name("helm")
}

fn chart() -> String {
    format!("{}/charts/flux-operator", env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("{cmd:?}"))?;
    ensure!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// `helm template` of the chart into `namespace`, with `--set` values.
pub fn helm_template(namespace: &str, set: &[&str]) -> Result<String> {
    let mut cmd = Command::new(helm());
    cmd.args([
        "template",
        "flux-operator",
        &chart(),
        "--namespace",
        namespace,
        "--include-crds",
    ]);
    for s in set {
        cmd.args(["--set", s]);
    }
    run(&mut cmd)
}

/// Kinds of the install that live outside namespaces.
const CLUSTER_SCOPED: &[&str] = &[
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// Objects by `Kind namespace/name`, without Helm's own labels.
fn by_key(objects: Vec<Value>) -> BTreeMap<String, Value> {
    objects
        .into_iter()
        .map(|mut o| {
            if let Some(labels) = o
                .pointer_mut("/metadata/labels")
                .and_then(Value::as_object_mut)
            {
                for l in HELM_ONLY_LABELS {
                    labels.remove(l);
                }
            }
            // kubectl's kustomize sets its namespace on kinds it does not know to be
            // cluster-scoped (the admission policy); the API server drops it there.
            let kind = o["kind"].as_str().unwrap_or_default().to_string();
            if CLUSTER_SCOPED.contains(&kind.as_str())
                && let Some(meta) = o["metadata"].as_object_mut()
            {
                meta.remove("namespace");
            }
            let key = format!(
                "{kind} {}/{}",
                o["metadata"]["namespace"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            );
            (key, o)
        })
        .collect()
}

/// The JSON paths where `a` and `b` differ, with both values (short).
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                differences(&format!("{path}/{k}"), va, vb, out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}/{i}"), va, vb, out);
            }
        }
        // YAML writers disagree on 1000 vs 1000.0; the API server does not.
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => {}
        _ if a != b => {
            let short = |v: &Value| v.to_string().chars().take(200).collect::<String>();
            out.push(format!("{path}: chart {} vs {}", short(a), short(b)));
        }
        _ => {}
    }
}

fn assert_same(helm: &BTreeMap<String, Value>, other: &BTreeMap<String, Value>, what: &str) {
    assert_eq!(
        helm.keys().collect::<Vec<_>>(),
        other.keys().collect::<Vec<_>>(),
        "the chart and {what} render different objects"
    );
    let mut diffs = Vec::new();
    for (key, object) in other {
        differences(key, &helm[key], object, &mut diffs);
    }
    assert!(
        diffs.is_empty(),
        "the chart and {what} differ (a changed CRD: run `make crds`):\n{}",
        diffs.join("\n")
    );
}

#[test]
fn helm_lint_passes_with_defaults_and_every_option() -> Result<()> {
    let options: [&[&str]; 3] = [
        &[],
        &[
            "watchNamespace=science",
            "metrics.serviceMonitor.enabled=true",
            "metrics.podMonitor.enabled=true",
            "metrics.prometheusRule.enabled=true",
            "logFormat=text",
            "clusterDomain=example.org",
            "fluxView.imageVolume=true",
            "metrics.port=9090",
            "metrics.readers[0].name=prometheus-k8s",
            "metrics.readers[0].namespace=monitoring",
            "metrics.certSecret=flux-operator-metrics-tls",
        ],
        &["leaderElection.enabled=false", "replicaCount=1"],
    ];
    for set in options {
        let mut cmd = Command::new(helm());
        cmd.args(["lint", "--strict", &chart()]);
        for s in set {
            cmd.args(["--set", s]);
        }
        let out = run(&mut cmd)?;
        assert!(out.contains("0 chart(s) failed"), "{out}");
    }
    // Replicas without leader election would reconcile the same clusters twice: refused.
    let refused = helm_template(
        "flux-operator-system",
        &["leaderElection.enabled=false", "replicaCount=2"],
    );
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("leaderElection")),
        "{refused:?}"
    );
    Ok(())
}

/// `fluxView.imageVolume` reaches the operator as `FLUX_VIEW_IMAGE_VOLUME=true` (its
/// `--flux-view-image-volume`), and the default sets nothing.
#[test]
fn helm_flux_view_image_volume_value_sets_the_operators_default() -> Result<()> {
    let env_of = |set: &[&str]| -> Result<Option<Value>> {
        let objects = by_key(yaml_documents(&helm_template(
            "flux-operator-system",
            set,
        )?)?);
        let deployment = objects
            .values()
            .find(|o| o["kind"] == "Deployment")
            .cloned()
            .unwrap_or_default();
        Ok(
            deployment["spec"]["template"]["spec"]["containers"][0]["env"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["name"] == "FLUX_VIEW_IMAGE_VOLUME")
                .cloned(),
        )
    };
    assert_eq!(
        env_of(&["fluxView.imageVolume=true"])?,
        Some(serde_json::json!({"name": "FLUX_VIEW_IMAGE_VOLUME", "value": "true"}))
    );
    assert_eq!(env_of(&[])?, None);
    Ok(())
}

#[test]
fn helm_chart_renders_the_same_objects_as_the_kustomize_manifests() -> Result<()> {
    let chart = by_key(yaml_documents(&helm_template(
        "flux-operator-system",
        &[],
    )?)?);
    // Helm leaves the namespace to `helm install --create-namespace`.
    let manifests = by_key(
        kustomize_manifests()?
            .into_iter()
            .filter(|o| o["kind"] != "Namespace")
            .collect(),
    );
    assert_same(&chart, &manifests, "manifests/ (kustomize)");

    // Monitoring: the optional objects are manifests/prometheus/servicemonitor.yaml's.
    let with_monitoring = by_key(yaml_documents(&helm_template(
        "flux-operator-system",
        &[
            "metrics.serviceMonitor.enabled=true",
            "metrics.podMonitor.enabled=true",
            "metrics.prometheusRule.enabled=true",
        ],
    )?)?);
    let monitoring: BTreeMap<String, Value> = with_monitoring
        .into_iter()
        .filter(|(_, o)| o["apiVersion"] == "monitoring.coreos.com/v1")
        .collect();
    let path = format!(
        "{}/manifests/prometheus/servicemonitor.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut shipped = yaml_documents(&std::fs::read_to_string(&path)?)?;
    for o in &mut shipped {
        o["metadata"]["namespace"] = json!("flux-operator-system");
    }
    let shipped = by_key(shipped);
    assert_same(
        &monitoring,
        &shipped,
        "manifests/prometheus/servicemonitor.yaml",
    );

    // ... whose rules are rules.yml's, the plain Prometheus rule file.
    let rules = format!(
        "{}/manifests/prometheus/rules.yml",
        env!("CARGO_MANIFEST_DIR")
    );
    let rules: Value = serde_norway::from_str(&std::fs::read_to_string(&rules)?)?;
    let rule = &shipped["PrometheusRule flux-operator-system/flux-operator"];
    assert_eq!(
        rule["spec"]["groups"], rules["groups"],
        "PrometheusRule vs rules.yml"
    );
    Ok(())
}

/// The values shipped for the prometheus-adapter chart carry the very rules the adapter's own
/// config file does (the one the autoscaling tests run it with).
#[test]
fn prometheus_adapter_chart_values_carry_the_adapter_rules() -> Result<()> {
    let read = |name: &str| -> Result<Value> {
        let path = format!(
            "{}/manifests/autoscaling/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        Ok(serde_norway::from_str(&std::fs::read_to_string(&path)?)?)
    };
    let values = read("prometheus-adapter-values.yaml")?;
    let config = read("adapter-rules.yaml")?;
    assert_eq!(values["rules"]["custom"], config["rules"]);
    assert_eq!(values["rules"]["default"], json!(false));
    Ok(())
}

/// `helm template ... | kubectl apply --server-side --dry-run=server -f -`.
fn dry_run_apply(rendered: &str) -> Result<String> {
    crate::installed::kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--dry-run=server",
            "--field-manager=flux-operator-e2e",
            "-f",
            "-",
        ],
        rendered,
    )
}

#[tokio::test]
async fn helm_template_applies_with_server_side_dry_run() -> Result<()> {
    let ns = TestNamespace::create("helm").await?;
    install_crd(&ns.client).await?;
    // All namespaces (ClusterRoleBinding), then one (a RoleBinding in that namespace).
    let all = dry_run_apply(&helm_template(&ns.name, &[])?)?;
    for object in [
        "customresourcedefinition.apiextensions.k8s.io/miniclusters.flux-framework.org",
        "serviceaccount/flux-operator",
        "clusterrole.rbac.authorization.k8s.io/flux-operator",
        "clusterrolebinding.rbac.authorization.k8s.io/flux-operator ",
        "clusterrole.rbac.authorization.k8s.io/flux-operator-metrics-auth",
        "clusterrolebinding.rbac.authorization.k8s.io/flux-operator-metrics-auth",
        "clusterrole.rbac.authorization.k8s.io/flux-operator-metrics-reader",
        "role.rbac.authorization.k8s.io/flux-operator-leader-election",
        "rolebinding.rbac.authorization.k8s.io/flux-operator-leader-election",
        "deployment.apps/flux-operator",
        "service/flux-operator-metrics",
    ] {
        assert!(all.contains(object), "{object} in the dry run:\n{all}");
    }
    let watch = format!("watchNamespace={}", ns.name);
    let one = dry_run_apply(&helm_template(&ns.name, &[&watch, "logFormat=text"])?)?;
    // Bound cluster-wide then: only the two reviews /metrics asks for (cluster-scoped).
    let cluster_wide: Vec<&str> = one
        .lines()
        .filter(|l| l.starts_with("clusterrolebinding"))
        .collect();
    assert!(
        one.contains("rolebinding.rbac.authorization.k8s.io/flux-operator ")
            && cluster_wide.len() == 1
            && cluster_wide[0].contains("/flux-operator-metrics-auth "),
        "{one}"
    );
    // Scrapers listed in metrics.readers get the reader role.
    let readers = dry_run_apply(&helm_template(
        &ns.name,
        &[
            "metrics.readers[0].name=prometheus",
            &format!("metrics.readers[0].namespace={}", ns.name),
        ],
    )?)?;
    assert!(
        readers
            .contains("clusterrolebinding.rbac.authorization.k8s.io/flux-operator-metrics-reader"),
        "{readers}"
    );
    ns.cleanup().await;
    Ok(())
}
