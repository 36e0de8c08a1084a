//! The real node's pods reach each other, this machine and the Services, and nothing beyond
//! this machine. Tests send no traffic to outside addresses, so what stops it is read, not
//! probed: the guard `e2e/node.sh` installs, the CNI configuration, and a pod's own route.

use std::process::Command;

use anyhow::{Context, Result, ensure};

use crate::cluster::{OPERATOR_NAMESPACE, installed_operator, kubectl_in, state_dir};

const POD_CIDR: &str = "10.244.0.0/24";
const BRIDGE: &str = "flux-e2e0";

fn iptables(args: &[&str]) -> Result<String> {
    let out = Command::new("iptables")
        .args(args)
        .output()
        .context("running iptables")?;
    ensure!(out.status.success(), "iptables {args:?}: {out:?}");
    Ok(String::from_utf8(out.stdout)?)
}

#[tokio::test]
async fn pods_on_the_real_node_have_no_way_out_of_this_machine() -> Result<()> {
    // Everything forwarded from the pod range that does not stay on the pods' bridge is
    // dropped, and that check comes first in FORWARD, before any rule could accept it.
    let guard = iptables(&["-t", "mangle", "-S", "FLUX-E2E-GUARD"])?;
    let drop = format!("-A FLUX-E2E-GUARD -s {POD_CIDR} ! -o {BRIDGE} -j DROP");
    ensure!(guard.lines().any(|l| l == drop), "no `{drop}` in:\n{guard}");
    let forward = iptables(&["-t", "mangle", "-S", "FORWARD"])?;
    assert_eq!(
        forward.lines().find(|l| l.starts_with("-A FORWARD")),
        Some("-A FORWARD -j FLUX-E2E-GUARD"),
        "{forward}"
    );

    // The bridge plugin does not masquerade the pods' traffic as this machine's.
    let conf = std::fs::read_to_string(state_dir().join("node/cni/net.d/10-flux-e2e.conflist"))?;
    let conf: serde_json::Value = serde_json::from_str(&conf)?;
    let bridge = &conf["plugins"][0];
    assert_eq!(bridge["type"], "bridge");
    assert_eq!(bridge["ipMasq"], false, "{conf}");

    // A pod's only way anywhere is its default route, through this machine (the bridge's
    // gateway, 10.244.0.1), where the guard above applies: /proc/net/route of the
    // operator's pod, gateway in little-endian hex.
    installed_operator()?;
    let routes = kubectl_in(
        OPERATOR_NAMESPACE,
        &[
            "exec",
            "deployment/flux-operator",
            "--",
            "cat",
            "/proc/net/route",
        ],
    )?;
    let defaults: Vec<&str> = routes
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("00000000"))
        .collect();
    ensure!(
        defaults.len() == 1 && defaults[0].split_whitespace().nth(2) == Some("0100F40A"),
        "one default route, via 10.244.0.1:\n{routes}"
    );
    Ok(())
}

/// The kubelet takes no anonymous request: `curl` of its pod list with no credentials is
/// refused (401), while the API server, which shows it the cluster's client certificate,
/// still reaches it (`kubectl logs` of the operator, through the API server). Forwarding is
/// on for the pods' bridge only: whatever else would cross this machine is dropped.
#[tokio::test]
async fn the_kubelet_refuses_anonymous_requests_and_forwards_only_for_the_pods() -> Result<()> {
    installed_operator()?;
    let node =
        crate::cluster::get_json("default", &format!("node/{}", crate::cluster::node_name()))?;
    let ip = node["status"]["addresses"]
        .as_array()
        .context("node addresses")?
        .iter()
        .find(|a| a["type"] == "InternalIP")
        .and_then(|a| a["address"].as_str())
        .context("node InternalIP")?
        .to_string();
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .context("kubelet port")?;
    let out = Command::new("curl")
        .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("https://{ip}:{port}/pods"))
        .output()
        .context("running curl")?;
    assert_eq!(String::from_utf8(out.stdout)?, "401", "anonymous /pods");
    let logs = kubectl_in(
        OPERATOR_NAMESPACE,
        &["logs", "deployment/flux-operator", "--tail=1"],
    )?;
    ensure!(
        !logs.trim().is_empty(),
        "no operator log through the API server"
    );

    let guard = iptables(&["-t", "filter", "-S", "FLUX-E2E-FORWARD"])?;
    for rule in [
        format!("-A FLUX-E2E-FORWARD -i {BRIDGE} -j RETURN"),
        format!("-A FLUX-E2E-FORWARD -o {BRIDGE} -j RETURN"),
        "-A FLUX-E2E-FORWARD -j DROP".to_string(),
    ] {
        ensure!(guard.lines().any(|l| l == rule), "no `{rule}` in:\n{guard}");
    }
    // kube-proxy's FORWARD rules come first (it puts them there); none of them accepts a
    // new connection, so what is new and neither from nor to the pods reaches the guard.
    let forward = iptables(&["-t", "filter", "-S", "FORWARD"])?;
    let rules: Vec<&str> = forward
        .lines()
        .filter(|l| l.starts_with("-A FORWARD"))
        .collect();
    let guard_at = rules
        .iter()
        .position(|l| *l == "-A FORWARD -j FLUX-E2E-FORWARD")
        .with_context(|| format!("no jump to the guard in:\n{forward}"))?;
    for rule in &rules[..guard_at] {
        ensure!(
            !rule.ends_with("-j ACCEPT")
                || rule.contains("RELATED,ESTABLISHED")
                || rule.contains("--mark"),
            "{rule} accepts before the guard:\n{forward}"
        );
    }
    Ok(())
}
