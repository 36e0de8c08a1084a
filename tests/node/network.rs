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
