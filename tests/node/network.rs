//! The real node's pods reach each other, this machine and the Services, and nothing beyond
//! this machine. Tests send no traffic to outside addresses, so what stops it is read, not
//! probed: the guard `e2e/node.sh` installs, the CNI configuration, and a pod's own route.

use std::process::Command;

use anyhow::{Context, Result, ensure};

use crate::cluster::{OPERATOR_NAMESPACE, installed_operator, kubectl_in, state_dir};

/// Every real node's pods (node N: 10.244.(N-1).0/24), and their bridges (`flux-e2e0`,
/// `flux-e2e1`), as the guards name them.
const PODS_CIDR: &str = "10.244.0.0/16";
const BRIDGES: &str = "flux-e2e+";

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
    // Everything forwarded from the pods' range that does not stay on the pods' bridges (the
    // real nodes', routed to each other) is dropped, and that check comes first in FORWARD,
    // before any rule could accept it.
    let guard = iptables(&["-t", "mangle", "-S", "FLUX-E2E-GUARD"])?;
    let drop = format!("-A FLUX-E2E-GUARD -s {PODS_CIDR} ! -o {BRIDGES} -j DROP");
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
/// The real node's InternalIP and its kubelet's port, as the node object says.
fn kubelet_endpoint() -> Result<(String, u16)> {
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
        .and_then(|p| u16::try_from(p).ok())
        .context("kubelet port")?;
    Ok((ip, port))
}

#[tokio::test]
async fn the_kubelet_refuses_anonymous_requests_and_forwards_only_for_the_pods() -> Result<()> {
    installed_operator()?;
    let (ip, port) = kubelet_endpoint()?;
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
        format!("-A FLUX-E2E-FORWARD -i {BRIDGES} -j RETURN"),
        format!("-A FLUX-E2E-FORWARD -o {BRIDGES} -j RETURN"),
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

/// The processes the harness starts on this machine's network (`e2e/up.sh`, `e2e/node.sh`),
/// as `ss` names them (the kernel's 15-character command names).
const HARNESS: &[&str] = &[
    "etcd",
    "kube-apiserver",
    "kube-controller",
    "kube-scheduler",
    "kwok-controller",
    "kubelet",
    "kube-proxy",
    "coredns",
    "containerd",
    "jobset",
    "kueue",
];

/// The guard `e2e/node.sh` puts first in INPUT for what must listen beyond loopback.
const INPUT_GUARD: &str = "FLUX-E2E-INPUT";

/// Every socket the harness listens on is bound to loopback, or is one the pods must reach
/// (the API server, the kubelet, CoreDNS) and sits behind the INPUT guard, which drops what
/// comes neither from this machine nor from the pods' bridge. Probed from a network
/// namespace that stands for another machine on the network: a port nothing listens on
/// refuses it (so it does reach this machine), the API server's and the kubelet's ports
/// do not answer it, while both answer this machine.
#[tokio::test]
async fn the_test_cluster_answers_only_this_machine_and_its_pods() -> Result<()> {
    installed_operator()?;
    // No guard chain reads as an empty one (the listeners below then say what is open).
    let guard = iptables(&["-t", "filter", "-S", INPUT_GUARD]).unwrap_or_default();
    // kube-proxy puts its INPUT rules first (none accepts); nothing before the guard does.
    let input = iptables(&["-t", "filter", "-S", "INPUT"])?;
    let rules: Vec<&str> = input
        .lines()
        .filter(|l| l.starts_with("-A INPUT"))
        .collect();
    let guard_at = rules
        .iter()
        .position(|l| *l == format!("-A INPUT -j {INPUT_GUARD}"))
        .with_context(|| format!("no jump to {INPUT_GUARD} in:\n{input}"))?;
    for rule in &rules[..guard_at] {
        ensure!(
            !rule.ends_with("-j ACCEPT"),
            "{rule} accepts before the guard:\n{input}"
        );
    }
    let guarded = |proto: &str, port: &str| {
        guard.lines().any(|l| {
            l.contains(&format!("-p {proto}"))
                && l.ends_with("-j DROP")
                && l.split(['=', ' ', ',']).any(|w| w == port)
        })
    };
    let listeners = String::from_utf8(
        Command::new("ss")
            .args(["-Hltunp"])
            .output()
            .context("running ss")?
            .stdout,
    )?;
    let mut open = Vec::new();
    for line in listeners.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (Some(proto), Some(local), Some(users)) = (words.first(), words.get(4), words.last())
        else {
            continue;
        };
        if !HARNESS
            .iter()
            .any(|p| users.contains(&format!("((\"{p}\"")))
        {
            continue;
        }
        let (addr, port) = local.rsplit_once(':').context("address:port")?;
        let loopback = addr.starts_with("127.") || addr == "[::1]";
        if !loopback && !guarded(proto, port) {
            open.push(line.to_string());
        }
    }
    ensure!(
        open.is_empty(),
        "listening beyond loopback, unguarded:\n{}\nguard:\n{guard}",
        open.join("\n")
    );

    let (ip, kubelet) = kubelet_endpoint()?;
    let server = crate::cluster::kubectl([
        "config",
        "view",
        "--minify",
        "-o",
        "jsonpath={.clusters[0].cluster.server}",
    ])?;
    let api = server
        .trim()
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
        .with_context(|| format!("the API server's port in {server}"))?;

    let outsider = Outsider::new()?;
    // curl's exit codes: 7 refused (reached, nothing there), 28 timed out (dropped).
    assert_eq!(
        outsider.curl(&ip, 9)?,
        7,
        "the outsider reaches {ip} at all"
    );
    for (what, port) in [("the API server", api), ("the kubelet", kubelet)] {
        assert_eq!(
            outsider.curl(&ip, port)?,
            28,
            "{what} on {ip}:{port} answered another machine"
        );
        let here = Command::new("curl")
            .args(["-sk", "-o", "/dev/null", "--max-time", "5"])
            .arg(format!("https://{ip}:{port}/"))
            .status()?;
        assert_eq!(
            here.code(),
            Some(0),
            "{what} on {ip}:{port} from this machine"
        );
    }
    Ok(())
}

/// A network namespace joined to this machine by a veth pair and nothing else: another
/// machine on the network, as far as this machine's firewall can tell. Removed on drop.
struct Outsider;

const OUTSIDER: &str = "flux-e2e-outsider";

impl Outsider {
    fn new() -> Result<Self> {
        let _ = Command::new("ip")
            .args(["netns", "delete", OUTSIDER])
            .status();
        let this = Outsider;
        for args in [
            vec!["netns", "add", OUTSIDER],
            vec![
                "link", "add", "fxe-out0", "type", "veth", "peer", "name", "fxe-out1", "netns",
                OUTSIDER,
            ],
            vec!["addr", "add", "198.51.100.1/30", "dev", "fxe-out0"],
            vec!["link", "set", "fxe-out0", "up"],
            vec![
                "-n",
                OUTSIDER,
                "addr",
                "add",
                "198.51.100.2/30",
                "dev",
                "fxe-out1",
            ],
            vec!["-n", OUTSIDER, "link", "set", "fxe-out1", "up"],
            vec!["-n", OUTSIDER, "link", "set", "lo", "up"],
            vec![
                "-n",
                OUTSIDER,
                "route",
                "add",
                "default",
                "via",
                "198.51.100.1",
            ],
        ] {
            let status = Command::new("ip").args(&args).status()?;
            ensure!(status.success(), "ip {args:?}: {status}");
        }
        Ok(this)
    }

    /// curl's exit code for an HTTPS request from the outsider to IP:PORT.
    fn curl(&self, ip: &str, port: u16) -> Result<i32> {
        let status = Command::new("ip")
            .args(["netns", "exec", OUTSIDER, "curl", "-sk", "-o", "/dev/null"])
            .args(["--connect-timeout", "3", "--max-time", "5"])
            .arg(format!("https://{ip}:{port}/"))
            .status()?;
        status.code().context("curl killed")
    }
}

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", OUTSIDER])
            .status();
    }
}
