//! Spec features whose meaning only real Flux can show.

use std::time::Duration;

use flux_operator::flux::curve::Certificate;

use crate::cluster::{FluxBuild, MiniClusterRun, Start, minicluster};

const RUN: Duration = Duration::from_secs(120);

fn mc(name: &str, size: i32, extra_spec: &str, container_extra: &str) -> String {
    format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {name}\n\
         spec:\n  size: {size}\n  tasks: {size}\n{extra_spec}  containers:\n    - image: rockylinux:9\n      \
         command: id -u\n{container_extra}"
    )
}

#[test]
fn non_root_brokers_with_fs_group_start_and_run_the_job_as_that_user() {
    let spec = "  pod:\n    securityContext:\n      runAsUser: 1000\n      runAsGroup: 1000\n      fsGroup: 1000\n";
    let run = MiniClusterRun::start(minicluster(&mc("nonroot", 2, spec, "")), Start::default());
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    let log = run.lead_log();
    let ids: Vec<&str> = log.lines().filter(|l| l.trim() == "1000").collect();
    assert_eq!(ids.len(), 2, "both tasks run as uid 1000:\n{}", run.debug());
    assert!(!log.contains("not owned by instance owner"), "{log}");
}

#[test]
fn user_supplied_curve_certificate_is_the_one_the_brokers_use() {
    let cert = Certificate::generate("user-cert").unwrap();
    let indented: String = cert
        .to_text()
        .lines()
        .map(|l| format!("      {l}\n"))
        .collect();
    let yaml = format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: usercert\n\
         spec:\n  size: 2\n  interactive: true\n  flux:\n    curveCert: |\n{indented}  containers:\n    \
         - image: rockylinux:9\n"
    );
    let run = MiniClusterRun::start(minicluster(&yaml), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    // The two brokers joined over CURVE, and the copy each broker reads is the user's key pair.
    let (c, _) = run.flux_container_probe(true);
    let key = flux_operator::flux::CURVE_PRIVATE_PATH;
    for pod in std::iter::once(run.lead()).chain(run.workers.values()) {
        let (code, text) = pod.exec(&c.name, &["cat", key]).unwrap();
        assert_eq!(code, 0, "{text}");
        assert!(
            text.contains(cert.public_key()),
            "{}: another public key",
            pod.meta.name
        );
        assert!(
            text.contains(cert.secret_key()),
            "{}: another secret key",
            pod.meta.name
        );
    }
    let out = run.flux_ok("run -N2 --label-io hostname");
    assert!(out.contains("usercert-workers-0-0"), "{out}");
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

#[test]
fn sidecar_service_on_a_follower_runs_flux_only_once_its_broker_has_joined() {
    // Followers first, the lead 6 s later: a sidecar that only waited for the socket
    // talked to a follower broker that had not joined yet ("Upstream Flux broker is offline").
    let yaml = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: sidecar
spec:
  size: 2
  interactive: true
  containers:
    - image: rockylinux:9
  services:
    - name: watcher
      image: rockylinux:9
      command: flux resource list -no {nnodes} && echo watcher-ok && sleep infinity
";
    let how = Start {
        followers_early: Duration::from_secs(6),
        ..Start::default()
    };
    let run = MiniClusterRun::start(minicluster(yaml), how);
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    // Each pod's sidecar (follower and lead) runs flux once its own broker is up.
    let worker = run.workers.get(&0).unwrap();
    for (pod, which) in [(worker, "follower"), (run.lead(), "lead")] {
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        while !pod.logs("watcher").contains("watcher-ok") {
            assert!(
                std::time::Instant::now() < deadline,
                "the {which}'s sidecar never ran flux successfully:\n{}\n{}",
                pod.logs("watcher"),
                run.debug()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        assert!(
            !pod.logs("watcher").contains("offline"),
            "{}",
            pod.logs("watcher")
        );
    }
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

#[test]
fn failing_hook_under_strict_logging_stops_the_lead_and_names_the_hook() {
    let spec = "  logging:\n    strict: true\n";
    let hook = "      commands:\n        pre: |\n          echo before\n          false\n          echo never\n";
    let run = MiniClusterRun::start(minicluster(&mc("strict", 2, spec, hook)), Start::default());
    let code = run.wait_lead(RUN);
    assert_ne!(code, 0, "{}", run.debug());
    let log = run.lead_log();
    assert!(
        log.contains("commands.pre"),
        "the message names the hook:\n{log}"
    );
    assert!(!log.contains("never"), "{log}");
}

fn modules(run: &MiniClusterRun) -> String {
    run.flux_ok("module list")
}

#[test]
fn simple_scheduler_replaces_fluxion_when_fluxion_is_installed() {
    let spec = "  interactive: true\n  flux:\n    scheduler:\n      simple: true\n";
    let run = MiniClusterRun::start(minicluster(&mc("simple", 2, spec, "")), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    let mods = modules(&run);
    assert!(mods.contains("sched-simple"), "{mods}");
    assert!(!mods.contains("fluxion"), "{mods}");
    run.flux_ok("run -N2 hostname");
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

#[test]
fn simple_scheduler_works_on_a_flux_without_fluxion() {
    let spec = "  flux:\n    scheduler:\n      simple: true\n";
    let how = Start {
        flux: FluxBuild::CoreOnly,
        ..Start::default()
    };
    let run = MiniClusterRun::start(minicluster(&mc("nofluxion", 2, spec, "")), how);
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    assert_eq!(
        run.lead_log().lines().filter(|l| l.trim() == "0").count(),
        2,
        "{}",
        run.debug()
    );
}

#[test]
fn fluxion_is_the_default_scheduler_and_runs_the_easy_queue_policy_when_asked() {
    let spec = "  interactive: true\n  flux:\n    scheduler:\n      queuePolicy: easy\n";
    let run = MiniClusterRun::start(minicluster(&mc("easy", 2, spec, "")), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    let mods = modules(&run);
    assert!(mods.contains("sched-fluxion-qmanager"), "{mods}");
    assert!(!mods.contains("sched-simple"), "{mods}");
    let params = run.flux_ok(
        "python -c 'import flux, json; print(json.dumps(flux.Flux().rpc(\"sched-fluxion-qmanager.params\").get()))'",
    );
    assert!(params.contains("\"queue-policy\": \"easy\""), "{params}");
    run.flux_ok("run -N2 hostname");
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}
