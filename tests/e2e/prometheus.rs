//! The metrics endpoint as installed, against the real API server: HTTPS, and `/metrics`
//! only for a bearer whose token the API server authenticates (TokenReview) and whose user
//! it allows `get` on `/metrics` (SubjectAccessReview), each review made with the
//! operator's own ServiceAccount token and the chart's RBAC. Then Debian's Prometheus
//! scrapes it on loopback with such a token, loads the recording rules from
//! `manifests/prometheus/rules.yml`, and its HTTP API returns the cluster-up histogram
//! after a MiniCluster became Ready.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, PostParams};
use serde_json::json;

use flux_operator::api::{MiniCluster, Phase};

use crate::common::{Prometheus, TestNamespace, http_get, wait_for, yaml_documents};
use crate::installed::Installed;
use crate::operator::{hello, install_crd, wait_phase};

const TIMEOUT: Duration = Duration::from_secs(60);

/// `GET https://127.0.0.1:<port><path>` with curl (`-k`: the operator's certificate is
/// self-signed), `Authorization: Bearer <token>` on curl's standard input when given:
/// (status code, body).
fn https_status(port: u16, path: &str, token: Option<&str>) -> Result<(u16, String)> {
    let mut curl = Command::new("curl");
    curl.args(["-sSk", "--max-time", "10", "-w", "\n%{http_code}"]);
    if token.is_some() {
        curl.args(["-H", "@-"]);
    }
    let mut child = curl
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("curl")?;
    let mut stdin = child.stdin.take().context("curl's stdin")?;
    if let Some(token) = token {
        writeln!(stdin, "Authorization: Bearer {token}")?;
    }
    drop(stdin);
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        out.status.success(),
        "curl {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (body, code) = text.rsplit_once('\n').context("curl's status line")?;
    Ok((code.trim().parse()?, body.to_string()))
}

/// The operator as the chart installs it for the test's namespace, with its own token and
/// RBAC, its endpoints on HTTPS with authentication; once `/healthz` answers.
async fn installed_https(ns: &mut TestNamespace) -> Result<Installed> {
    install_crd(&ns.client).await?;
    let watch = format!("watchNamespace={}", ns.name);
    let objects = yaml_documents(&crate::helm::helm_template(&ns.name, &[&watch])?)?;
    let operator = Installed::start_https(ns, objects).await?;
    let port = operator.metrics_port;
    wait_for("/healthz over HTTPS, no token", TIMEOUT, || async move {
        Ok((https_status(port, "/healthz", None)?.0 == 200).then_some(()))
    })
    .await?;
    Ok(operator)
}

/// A new ServiceAccount `name` in the test's namespace, bound to the chart's
/// `flux-operator-metrics-reader` ClusterRole when `reader`, and a token for it from the
/// TokenRequest API.
async fn scraper_token(ns: &mut TestNamespace, name: &str, reader: bool) -> Result<String> {
    let accounts: Api<ServiceAccount> = ns.api();
    let account = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    accounts.create(&PostParams::default(), &account).await?;
    if reader {
        let binding = ns.unique_name(&format!("{name}-metrics-reader"));
        let object: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        // Installed gives each cluster-scoped object of the chart a unique name.
                        "name": ns.unique_name("flux-operator-metrics-reader")},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns.name}],
        }))?;
        Api::<ClusterRoleBinding>::all(ns.client.clone())
            .create(&PostParams::default(), &object)
            .await?;
        ns.track_cluster_object(&ApiResource::erase::<ClusterRoleBinding>(&()), &binding);
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .context("no token in the TokenRequest's status")
}

#[tokio::test]
async fn metrics_without_a_valid_token_is_401_and_the_probes_need_none() -> Result<()> {
    let mut ns = TestNamespace::create("metrics-401").await?;
    let operator = installed_https(&mut ns).await?;
    let port = operator.metrics_port;
    let (code, body) = https_status(port, "/metrics", None)?;
    assert_eq!(code, 401, "no token: {body}");
    // Not a token the API server issued (TokenReview: not authenticated).
    let (code, body) = https_status(port, "/metrics", Some("not-a-token"))?;
    assert_eq!(code, 401, "a made-up token: {body}");
    assert!(!body.contains("flux_operator"), "{body}");
    // The probes answer anyone (the kubelet sends no token).
    let (code, body) = https_status(port, "/readyz", None)?;
    assert_eq!(code, 200, "/readyz: {body}");
    // Plain HTTP on the HTTPS port gets nothing.
    assert!(http_get(port, "/metrics").await.is_err());
    assert_no_refusals(&operator)?;
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn metrics_for_an_account_without_the_reader_role_is_403() -> Result<()> {
    let mut ns = TestNamespace::create("metrics-403").await?;
    let operator = installed_https(&mut ns).await?;
    let token = scraper_token(&mut ns, "not-a-reader", false).await?;
    let (code, body) = https_status(operator.metrics_port, "/metrics", Some(&token))?;
    assert_eq!(code, 403, "authenticated, not allowed: {body}");
    assert!(!body.contains("flux_operator"), "{body}");
    assert_no_refusals(&operator)?;
    ns.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn metrics_for_an_account_bound_to_the_reader_role_is_200_with_the_series() -> Result<()> {
    let mut ns = TestNamespace::create("metrics-200").await?;
    let operator = installed_https(&mut ns).await?;
    let token = scraper_token(&mut ns, "reader", true).await?;
    let port = operator.metrics_port;
    // The API server's RBAC cache may take a moment to see the new binding.
    let body = wait_for("/metrics answers the reader 200", TIMEOUT, || async {
        let (code, body) = https_status(port, "/metrics", Some(&token))?;
        Ok((code == 200).then_some(body))
    })
    .await?;
    assert!(
        body.contains("# TYPE flux_operator_miniclusters gauge"),
        "{body}"
    );
    assert_no_refusals(&operator)?;
    ns.cleanup().await;
    Ok(())
}

/// Plain HTTP serves `/metrics` to anyone: the binary will not do it off loopback.
#[test]
fn the_operator_refuses_plain_http_metrics_off_loopback() -> Result<()> {
    let out = Command::new(env!("CARGO_BIN_EXE_flux-operator"))
        .args([
            "run",
            "--cluster-domain",
            "cluster.local",
            "--log-format",
            "text",
        ])
        .args(["--metrics-addr", "0.0.0.0:0", "--metrics-insecure-loopback"])
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it started: {stderr}");
    assert!(stderr.contains("only a loopback address"), "{stderr}");
    Ok(())
}

/// The operator's own reviews were never refused by the API server (the chart's RBAC).
fn assert_no_refusals(operator: &Installed) -> Result<()> {
    let refused = operator.refusals()?;
    assert!(
        refused.is_empty(),
        "the API server refused the operator:\n{}",
        refused.join("\n")
    );
    Ok(())
}

/// Prometheus scraping `https://127.0.0.1:<target_port>/metrics` with `token`, as
/// manifests/prometheus/prometheus.yml does in a cluster.
fn scraping_the_operator(target_port: u16, token: &str) -> Result<Prometheus> {
    Prometheus::start(|dir| {
        let rules = format!(
            "{}/manifests/prometheus/rules.yml",
            env!("CARGO_MANIFEST_DIR")
        );
        let token_file = dir.join("token");
        std::fs::write(&token_file, token)?;
        Ok(format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {rules}\n\
             scrape_configs:\n  - job_name: flux-operator\n    scheme: https\n\
             \x20   authorization:\n      credentials_file: {}\n\
             \x20   tls_config:\n      insecure_skip_verify: true\n\
             \x20   static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n",
            token_file.display()
        ))
    })
}

#[tokio::test]
async fn prometheus_scrapes_the_cluster_up_histogram_over_https_with_a_token() -> Result<()> {
    let mut ns = TestNamespace::create("prometheus").await?;
    let operator = installed_https(&mut ns).await?;
    let token = scraper_token(&mut ns, "prometheus", true).await?;
    let prometheus = scraping_the_operator(operator.metrics_port, &token)?;

    let mcs: Api<MiniCluster> = ns.api();
    let mc = hello(&ns.name, 3)?;
    let name = mcs.create(&PostParams::default(), &mc).await?.name_any();
    wait_phase(&mcs, &name, Phase::Running).await?;

    let selector = format!("{{namespace=\"{}\"}}", ns.name);
    let count = wait_for(
        "cluster-up count in Prometheus",
        Duration::from_secs(60),
        || async {
            prometheus
                .query(&format!(
                    "flux_operator_minicluster_up_seconds_count{selector}"
                ))
                .await
        },
    )
    .await?;
    assert_eq!(count, 1.0);
    let sum = prometheus
        .query(&format!(
            "flux_operator_minicluster_up_seconds_sum{selector}"
        ))
        .await?
        .context("cluster-up sum")?;
    assert!(
        (0.0..120.0).contains(&sum),
        "cluster-up took {sum}s (API timestamps have one-second resolution, so 0 is possible)"
    );
    // The recording rule from manifests/prometheus/rules.yml is evaluated too.
    let mean = wait_for(
        "recorded mean cluster-up time",
        Duration::from_secs(60),
        || async {
            prometheus
                .query(&format!(
                    "namespace:flux_operator_minicluster_up_seconds:mean{selector}"
                ))
                .await
        },
    )
    .await?;
    assert!(
        (mean - sum).abs() < 1e-6,
        "mean {mean} of one observation is its sum {sum}"
    );
    ns.cleanup().await;
    Ok(())
}
