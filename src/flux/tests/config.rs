//! The broker config: parsed back as TOML, its hosts expanded and compared with the exact pod
//! FQDNs JobSet creates, in rank order.

use std::collections::BTreeSet;

use crate::flux::config::{self, fqdn, hostnames};
use crate::model::Environment as Context;

use crate::fixtures::with_spec;

/// The pod FQDNs in rank order, written out independently of the module: JobSet names pods
/// `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`; rank 0 is the lead, ranks 1.. the followers.
fn expected_fqdns(name: &str, sub: &str, ns: &str, max_size: i32, domain: &str) -> Vec<String> {
    let mut out = vec![format!("{name}-lead-0-0.{sub}.{ns}.svc.{domain}")];
    for i in 0..max_size - 1 {
        out.push(format!("{name}-workers-0-{i}.{sub}.{ns}.svc.{domain}"));
    }
    out
}

/// Resolves `default_connect` for every expanded host entry, as Flux does (`%h`, `%p`, `%%`).
fn connect_fqdns(table: &toml::Table) -> Vec<String> {
    let boot = table["bootstrap"].as_table().unwrap();
    let port = boot["default_port"].as_integer().unwrap();
    let connect = boot["default_connect"].as_str().unwrap();
    let mut out = Vec::new();
    for entry in boot["hosts"].as_array().unwrap() {
        let entry = entry.as_table().unwrap();
        for host in expand_hostlist(entry["host"].as_str().unwrap()).unwrap() {
            let uri = connect
                .replace("%h", &host)
                .replace("%p", &port.to_string())
                .replace("%%", "%");
            let addr = uri.strip_prefix("tcp://").unwrap();
            let (dns, p) = addr.rsplit_once(':').unwrap();
            assert_eq!(p, port.to_string());
            out.push(dns.to_string());
        }
    }
    out
}

#[test]
fn hosts_are_the_pod_fqdns_in_rank_order() {
    // (name, namespace, headlessName, size, maxSize, domain)
    let cases = [
        ("mc", "default", "", 1, None, "cluster.local"),
        ("mc", "default", "", 2, None, "cluster.local"),
        ("flux-sample", "team-a", "", 4, Some(8), "cluster.local"),
        ("lammps", "hpc", "net", 3, Some(3), "k8s.example.org"),
        ("big", "ns1", "", 12, Some(120), "corp.internal"),
        ("one", "x", "", 2, Some(2), "c.local"),
    ];
    for (name, ns, headless, size, max, domain) in cases {
        let mut spec = format!("size: {size}\ncontainers:\n- image: app\n");
        if let Some(m) = max {
            spec.push_str(&format!("maxSize: {m}\n"));
        }
        if !headless.is_empty() {
            spec.push_str(&format!("network:\n  headlessName: {headless}\n"));
        }
        let mc = with_spec(name, ns, &spec);
        let ctx = Context {
            cluster_domain: domain.into(),
            view_image_volume: false,
        };
        let text = crate::flux::config::broker_toml(&crate::model::resolve(&mc, &ctx).unwrap());
        let table: toml::Table = text
            .parse()
            .unwrap_or_else(|e| panic!("{name}: not TOML: {e}\n{text}"));
        let sub = if headless.is_empty() { name } else { headless };
        let max_size = max.unwrap_or(size);
        let want = expected_fqdns(name, sub, ns, max_size, domain);
        assert_eq!(
            connect_fqdns(&table),
            want,
            "{name}: hosts in the TOML\n{text}"
        );
        assert_eq!(want.len(), max_size as usize);
        // hostnames() agrees, and is what fqdn() qualifies.
        let qualified: Vec<String> = hostnames(&crate::fixtures::cluster(&mc))
            .iter()
            .map(|h| fqdn(h, sub, ns, domain))
            .collect();
        assert_eq!(qualified, want);
        // Compact: one entry for the lead, one hostlist for all followers.
        let hosts = table["bootstrap"]["hosts"].as_array().unwrap();
        assert_eq!(
            hosts.len(),
            if max_size == 1 { 1 } else { 2 },
            "{name}: {hosts:?}"
        );
        assert_eq!(
            table["bootstrap"]["default_bind"].as_str(),
            Some("tcp://*:%p")
        );
        assert_eq!(table["bootstrap"]["default_port"].as_integer(), Some(8050));
    }
}

#[test]
fn host_entries_are_compact_hostlists() {
    let mc = with_spec("mc", "default", "size: 8\ncontainers:\n- image: app");
    let hosts: Vec<String> = config::host_entries(&crate::fixtures::cluster(&mc))
        .into_iter()
        .map(|h| h.host)
        .collect();
    assert_eq!(hosts, ["mc-lead-0-0", "mc-workers-0-[0-6]"]);
    let mc = with_spec("mc", "default", "size: 2\ncontainers:\n- image: app");
    let hosts: Vec<String> = config::host_entries(&crate::fixtures::cluster(&mc))
        .into_iter()
        .map(|h| h.host)
        .collect();
    assert_eq!(hosts, ["mc-lead-0-0", "mc-workers-0-0"]);
    let mc = with_spec("mc", "default", "size: 1\ncontainers:\n- image: app");
    let hosts: Vec<String> = config::host_entries(&crate::fixtures::cluster(&mc))
        .into_iter()
        .map(|h| h.host)
        .collect();
    assert_eq!(hosts, ["mc-lead-0-0"]);
}

#[test]
fn expand_hostlist_follows_rfc29() {
    assert_eq!(expand_hostlist("a").unwrap(), ["a"]);
    assert_eq!(expand_hostlist("w-[0-2]").unwrap(), ["w-0", "w-1", "w-2"]);
    assert_eq!(expand_hostlist("w[1,3-4]x").unwrap(), ["w1x", "w3x", "w4x"]);
    assert_eq!(expand_hostlist("n[08-10]").unwrap(), ["n08", "n09", "n10"]);
    assert!(expand_hostlist("w[3-1]").is_err());
    assert!(expand_hostlist("w[1").is_err());
}

#[test]
fn only_allowed_bootstrap_keys() {
    let mut mc = with_spec("mc", "ns", "size: 3\nmaxSize: 5\ncontainers:\n- image: app");
    mc.spec.flux.topology = "kary:2".into();
    let table: toml::Table = config::broker_toml(&crate::fixtures::cluster(&mc))
        .parse()
        .unwrap();
    let allowed: BTreeSet<&str> = [
        "hosts",
        "curve_cert",
        "default_port",
        "default_bind",
        "default_connect",
        "enable_ipv6",
    ]
    .into();
    let boot = table["bootstrap"].as_table().unwrap();
    for key in boot.keys() {
        assert!(
            allowed.contains(key.as_str()),
            "[bootstrap] key {key} is not allowed by Flux"
        );
    }
    for entry in boot["hosts"].as_array().unwrap() {
        for key in entry.as_table().unwrap().keys() {
            assert!(
                ["host", "bind", "connect", "parent"].contains(&key.as_str()),
                "host entry key {key}"
            );
        }
    }
    assert_eq!(
        boot["curve_cert"].as_str(),
        Some(crate::flux::CURVE_PRIVATE_PATH)
    );
    // Only tables Flux accepts.
    let tables: BTreeSet<&str> = table.keys().map(String::as_str).collect();
    assert_eq!(tables, ["access", "bootstrap", "resource", "tbon"].into());
    assert_eq!(table["tbon"]["topo"].as_str(), Some("kary:2"));
    assert_eq!(table["tbon"]["connect_timeout"].as_str(), Some("5s"));
    assert_eq!(table["access"]["allow-guest-user"].as_bool(), Some(true));
    assert_eq!(table["access"]["allow-root-owner"].as_bool(), Some(true));
}

#[test]
fn connect_uses_subdomain_namespace_and_domain() {
    let mc = with_spec(
        "mc",
        "science",
        "size: 2\ncontainers:\n- image: app\nnetwork:\n  headlessName: flux-net",
    );
    let cfg = config::broker_config(
        &crate::model::resolve(
            &mc,
            &Context {
                cluster_domain: "cluster.example.".into(),
                view_image_volume: false,
            },
        )
        .unwrap(),
    );
    assert_eq!(
        cfg.bootstrap.default_connect,
        "tcp://%h.flux-net.science.svc.cluster.example:%p"
    );
    // spec.network.clusterDomain wins over the operator's.
    let mut mc = mc;
    mc.spec.network.cluster_domain = "other.domain".into();
    let cfg = config::broker_config(&crate::fixtures::cluster(&mc));
    assert_eq!(
        cfg.bootstrap.default_connect,
        "tcp://%h.flux-net.science.svc.other.domain:%p"
    );
}

#[test]
fn cluster_domain_is_never_assumed() {
    let mc = with_spec("mc", "default", "size: 2\ncontainers:\n- image: app");
    // Refused before anything renders: the domain is resolved by the model.
    let errors = crate::model::resolve(
        &mc,
        &Context {
            cluster_domain: String::new(),
            view_image_volume: false,
        },
    )
    .unwrap_err();
    assert_eq!(
        errors[0].field, "the operator's cluster domain (--cluster-domain)",
        "{errors:?}"
    );
    let mut mc = mc;
    mc.spec.network.cluster_domain = "bad domain".into();
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.network.clusterDomain")
    );
}

#[test]
fn queue_policy_and_simple_scheduler() {
    let mut mc = with_spec(
        "mc",
        "default",
        "size: 2\ncontainers:\n- image: app\nflux:\n  scheduler:\n    queuePolicy: easy",
    );
    let table: toml::Table = config::broker_toml(&crate::fixtures::cluster(&mc))
        .parse()
        .unwrap();
    assert_eq!(
        table["sched-fluxion-qmanager"]["queue-policy"].as_str(),
        Some("easy")
    );
    mc.spec.flux.scheduler.simple = true;
    let table: toml::Table = config::broker_toml(&crate::fixtures::cluster(&mc))
        .parse()
        .unwrap();
    assert!(!table.contains_key("sched-fluxion-qmanager"));
}

#[test]
fn a_resource_file_of_every_host_in_rank_order_unless_the_user_gives_the_broker_config() {
    // (spec, hosts for `flux R encode` or None)
    let cases = [
        // A fixed size too: a rank that leaves and comes back takes work again.
        ("size: 3", Some("mc-lead-0-0,mc-workers-0-[0-1]")),
        ("size: 1", Some("mc-lead-0-0")),
        (
            "size: 3\nmaxSize: 3",
            Some("mc-lead-0-0,mc-workers-0-[0-1]"),
        ),
        (
            "size: 3\nminSize: 3",
            Some("mc-lead-0-0,mc-workers-0-[0-1]"),
        ),
        (
            "size: 5\nmaxSize: 5\nminSize: 5",
            Some("mc-lead-0-0,mc-workers-0-[0-3]"),
        ),
        (
            "size: 2\nmaxSize: 6",
            Some("mc-lead-0-0,mc-workers-0-[0-4]"),
        ),
        (
            "size: 3\nminSize: 2",
            Some("mc-lead-0-0,mc-workers-0-[0-1]"),
        ),
        ("size: 2\nmaxSize: 2", Some("mc-lead-0-0,mc-workers-0-0")),
        // A restored archive carries the saved instance's R: the cluster's own hosts instead.
        (
            "size: 3\narchive:\n  path: /state/flux.tar.gz",
            Some("mc-lead-0-0,mc-workers-0-[0-1]"),
        ),
    ];
    for (spec, hosts) in cases {
        let mc = with_spec(
            "mc",
            "default",
            &format!(
                "{spec}\ncontainers:\n- image: app\n  volumes: {{state: {{path: /state, claimName: c}}}}"
            ),
        );
        let cluster = crate::fixtures::cluster(&mc);
        assert_eq!(config::resource_hosts(&cluster).as_deref(), hosts, "{spec}");
        let table: toml::Table = config::broker_toml(&cluster).parse().unwrap();
        match hosts {
            None => assert!(!table.contains_key("resource"), "{spec}"),
            Some(hosts) => {
                let resource = table["resource"].as_table().unwrap();
                assert_eq!(
                    resource["path"].as_str(),
                    Some("/run/flux-operator/broker/R.json"),
                    "{spec}"
                );
                assert_eq!(resource["noverify"].as_bool(), Some(true), "{spec}");
                assert_eq!(resource.len(), 2, "{spec}");
                // The R covers exactly the [bootstrap] hosts, in rank order.
                let expanded: Vec<String> = hosts
                    .split(',')
                    .flat_map(|h| expand_hostlist(h).unwrap())
                    .collect();
                assert_eq!(expanded, hostnames(&cluster), "{spec}");
            }
        }
    }
    // The user's broker config decides on its own.
    let mut mc = with_spec(
        "mc",
        "default",
        "size: 2\nmaxSize: 6\ncontainers:\n- image: app",
    );
    mc.spec.flux.broker_config = "[bootstrap]\ncurve_cert = \"/x\"\n".into();
    assert_eq!(config::resource_hosts(&crate::fixtures::cluster(&mc)), None);
}

#[test]
fn broker_config_replaces_the_generated_one_whole() {
    let mut mc = with_spec("mc", "default", "size: 2\ncontainers:\n- image: app");
    mc.spec.flux.broker_config = "[bootstrap]\ncurve_cert = \"/x\"\n".into();
    let data = crate::flux::config_map_data(&crate::fixtures::cluster(&mc)).unwrap();
    assert_eq!(data["broker.toml"], mc.spec.flux.broker_config);
    mc.spec.flux.broker_config = "[bootstrap\n".into();
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.flux.brokerConfig")
    );
}

#[test]
fn simple_scheduler_is_selected_by_modprobe_alternatives_not_by_disabling_fluxion() {
    let mut mc = with_spec("mc", "default", "size: 2\ncontainers:\n- image: app");
    assert_eq!(config::scheduler_toml(&crate::fixtures::cluster(&mc)), None);
    let data = crate::flux::config_map_data(&crate::fixtures::cluster(&mc)).unwrap();
    assert!(!data.contains_key("scheduler.toml"));
    mc.spec.flux.scheduler.simple = true;
    for user_config in ["", "[bootstrap]\ncurve_cert = \"/x\"\n"] {
        mc.spec.flux.broker_config = user_config.into();
        let data = crate::flux::config_map_data(&crate::fixtures::cluster(&mc)).unwrap();
        let table: toml::Table = data["scheduler.toml"].parse().unwrap();
        // Only the [modules] table flux-modprobe reads, naming only flux-core's sched-simple
        // for both services it provides (Fluxion splits them across two modules).
        assert_eq!(table.keys().collect::<Vec<_>>(), ["modules"]);
        let modules = table["modules"].as_table().unwrap();
        assert_eq!(modules.keys().collect::<Vec<_>>(), ["alternatives"]);
        let alternatives = modules["alternatives"].as_table().unwrap();
        assert_eq!(alternatives.len(), 2);
        assert_eq!(alternatives["sched"].as_str(), Some("sched-simple"));
        assert_eq!(alternatives["feasibility"].as_str(), Some("sched-simple"));
        // broker.toml (generated or the user's) has no [modules] table for it to clash with.
        let broker: toml::Table = data["broker.toml"].parse().unwrap();
        assert!(!broker.contains_key("modules"), "{user_config:?}");
    }
}

#[test]
fn the_config_map_tomls_are_broker_and_scheduler() {
    // Flux reads every *.toml of its config directory, which also holds the scripts.
    let mut mc = with_spec(
        "mc",
        "default",
        "size: 2\ncontainers:\n- image: app\n  command: hostname\n  batch: true",
    );
    mc.spec.containers[0].commands.pre = "echo".into();
    let data = crate::flux::config_map_data(&crate::fixtures::cluster(&mc)).unwrap();
    let tomls: Vec<&String> = data.keys().filter(|k| k.ends_with(".toml")).collect();
    assert_eq!(tomls, ["broker.toml"]);
    mc.spec.flux.scheduler.simple = true;
    let data = crate::flux::config_map_data(&crate::fixtures::cluster(&mc)).unwrap();
    let tomls: Vec<&String> = data.keys().filter(|k| k.ends_with(".toml")).collect();
    assert_eq!(tomls, ["broker.toml", "scheduler.toml"]);
    for key in data.keys() {
        assert!(
            key.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)),
            "bad ConfigMap key {key}"
        );
    }
}

/// Expands an RFC 29 hostlist with at most one bracketed range set, such as
/// `mc-workers-0-[0-2,5]`, in order. A plain name expands to itself.
fn expand_hostlist(hostlist: &str) -> Result<Vec<String>, String> {
    let Some(open) = hostlist.find('[') else {
        return Ok(vec![hostlist.to_string()]);
    };
    let close = hostlist[open..]
        .find(']')
        .map(|i| open + i)
        .ok_or_else(|| format!("{hostlist:?}: unclosed '['"))?;
    let (prefix, ranges, suffix) = (
        &hostlist[..open],
        &hostlist[open + 1..close],
        &hostlist[close + 1..],
    );
    if suffix.contains('[') {
        return Err(format!("{hostlist:?}: more than one bracket set"));
    }
    let mut out = Vec::new();
    for part in ranges.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let width = lo.len();
        let parse = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("{hostlist:?}: bad number {s:?}"))
        };
        let (lo_n, hi_n) = (parse(lo)?, parse(hi)?);
        if lo_n > hi_n {
            return Err(format!("{hostlist:?}: descending range {part:?}"));
        }
        for n in lo_n..=hi_n {
            out.push(format!("{prefix}{n:0width$}{suffix}"));
        }
    }
    Ok(out)
}
