//! Spec features whose meaning only real Flux can show.

use std::time::Duration;

use flux_operator::model::certificate::Certificate;

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
fn a_cluster_of_size_one_runs_its_job_on_the_lead_alone() {
    let run = MiniClusterRun::start(minicluster(&mc("alone", 1, "", "")), Start::default());
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    assert!(run.followers.is_empty());
    let log = run.lead_log();
    assert!(
        log.lines().any(|l| l.trim() == "0"),
        "the job ran (id -u):\n{}",
        run.debug()
    );
}

#[test]
fn an_image_volume_view_starts_every_broker_from_the_image_in_place_and_runs_the_job() {
    let spec = "  flux:\n    container:\n      imageVolume: true\n";
    let run = MiniClusterRun::start(minicluster(&mc("mounted", 2, spec, "")), Start::default());
    assert_eq!(run.lead_init_containers(), Vec::<String>::new());
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
    let ids = run.lead_log().lines().filter(|l| l.trim() == "0").count();
    assert_eq!(ids, 2, "a task on each broker:\n{}", run.debug());
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
    for pod in std::iter::once(run.lead()).chain(run.followers.values()) {
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
fn container_beside_the_broker_runs_its_post_hook_with_flux_once_its_broker_has_joined() {
    // A container of spec.containers that does not run Flux, written as the Go operator's
    // REST API examples write it: a bash commands.post that tests the pod's
    // JOB_COMPLETION_INDEX (the broker rank, 0 on the lead) and talks to the broker through
    // `$fluxsocket` with the view's flux. Followers start first, the lead 6 s later: a
    // container that only waited for the socket talked to a follower broker that had not
    // joined yet ("Upstream Flux broker is offline").
    let yaml = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: sidecar
spec:
  size: 2
  interactive: true
  containers:
    - image: rockylinux:9
      runFlux: true
    - image: rockylinux:9
      name: watcher
      commands:
        post: |
          if [[ ${JOB_COMPLETION_INDEX} -eq 0 ]]; then where=lead; else where=rank-${JOB_COMPLETION_INDEX}; fi
          flux proxy $fluxsocket flux resource list -no {nnodes} && echo watcher-ok-$where
          sleep infinity
";
    let how = Start {
        followers_early: Duration::from_secs(6),
        ..Start::default()
    };
    let run = MiniClusterRun::start(minicluster(yaml), how);
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    // Each pod's container (follower and lead) runs flux once its own broker is up.
    let follower = run.followers.get(&0).unwrap();
    for (pod, which, says) in [
        (follower, "follower", "watcher-ok-rank-1"),
        (run.lead(), "lead", "watcher-ok-lead"),
    ] {
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        while !pod.logs("watcher").contains(says) {
            assert!(
                std::time::Instant::now() < deadline,
                "the {which}'s container never ran flux successfully:\n{}\n{}",
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
fn services_run_once_in_their_own_pod_which_every_broker_reaches_by_name() {
    // spec.services run in the pod `<mc>-services` in the MiniCluster's subdomain, as in the
    // Go operator, whose examples reach it as `<mc>-services.<subdomain>.<ns>.svc.<domain>`.
    // It has no broker: the service starts without waiting for one.
    let yaml = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: svc
spec:
  size: 2
  interactive: true
  containers:
    - image: rockylinux:9
  services:
    - name: web
      image: nginx
      ports: [8080]
      command: mkdir -p /tmp/www && echo services-ok > /tmp/www/index.html && cd /tmp/www && exec python3 -m http.server 8080
";
    let mut run = MiniClusterRun::start(minicluster(yaml), Start::default());
    run.start_services();
    assert!(!run.lead_spec_has("web"), "no service in the broker pods");
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    let url = "http://svc-services.svc.default.svc.cluster.local:8080/";
    let fetch = format!(
        "run -N2 --label-io python3 -c 'import urllib.request; print(urllib.request.urlopen(\"{url}\").read().decode().strip())'"
    );
    let out = run.wait_flux(&fetch, RUN, |o| o.matches("services-ok").count() == 2);
    assert!(
        out.contains("0: services-ok") && out.contains("1: services-ok"),
        "{out}"
    );
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

/// Without a CPU limit the cpuset is the node's shared pool, the same cores in every pod:
/// no task is bound unless the job asks (bound, two ranks in two pods of one node would share
/// core 0, docs/mpi.md).
#[test]
fn without_a_cpu_limit_no_task_is_bound_unless_the_job_asks() {
    let yaml = mc("nolimit", 2, "  interactive: true\n", "");
    let run = MiniClusterRun::start(minicluster(&yaml), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    let allowed = "run -N2 -n2 --label-io grep Cpus_allowed_list /proc/self/status";
    let out = run.flux_ok(allowed);
    assert_eq!(out.matches("0-1").count(), 2, "no task bound\n{out}");
    let out = run.flux_ok(&allowed.replace("run ", "run -o cpu-affinity=on "));
    assert_eq!(out.matches("0-1").count(), 0, "bound on request\n{out}");
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

#[test]
fn each_broker_has_the_cores_of_its_cpu_limit_unbound_and_the_gpus_it_asked_for() {
    // This machine's two CPUs are every pod's cpuset; a limit of one CPU is one core each.
    let container = "      resources:\n        limits: {cpu: 1, nvidia.com/gpu: 1}\n";
    let yaml = mc("cores", 2, "  interactive: true\n", container);
    let run = MiniClusterRun::start(minicluster(&yaml), Start::default());
    let list = "resource list -s up -no '{nnodes} {ncores} {ngpus}'";
    run.wait_flux(list, RUN, |o| o.trim() == "2 2 2");
    assert!(
        run.lead_log()
            .contains("cores per broker 1 (cpuset 2, CPU limit 1), GPUs per broker 1"),
        "{}",
        run.debug()
    );
    // One rank per core: two fit, a third does not.
    let allowed = "run -N2 -n2 --label-io grep Cpus_allowed_list /proc/self/status";
    let out = run.flux_ok(allowed);
    assert_eq!(
        out.matches("0-1").count(),
        2,
        "shared cores: no task bound\n{out}"
    );
    let (code, out) = run.flux("run -n3 true");
    assert_ne!(code, 0, "three ranks on two cores:\n{out}");
    assert!(out.contains("unsatisfiable"), "{out}");
    // A job that asks for binding gets its core.
    let bound =
        "run -N2 -n2 -o cpu-affinity=on --label-io grep Cpus_allowed_list /proc/self/status";
    let out = run.flux_ok(bound);
    assert_eq!(out.matches("0-1").count(), 0, "bound on request\n{out}");
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}
