use super::*;

mod flux_pod;
use crate::api::{KUEUE_QUEUE_LABEL, MiniCluster, NAME_LABEL, ROLE_LABEL, StartupOrder};
use crate::flux::Role;

/// `hello` in `science`: one container running `hostname`, `size` brokers.
fn hello(size: i32) -> MiniCluster {
    crate::fixtures::m()
        .name("hello")
        .namespace("science")
        .size(size)
        .build()
}

fn rjob<'a>(js: &'a crate::jobset::JobSet, name: &str) -> &'a crate::jobset::ReplicatedJob {
    js.spec
        .replicated_jobs
        .iter()
        .find(|r| r.name == name)
        .unwrap()
}

fn parallelism(js: &crate::jobset::JobSet, name: &str) -> (i32, i32) {
    let spec = rjob(js, name).template.spec.as_ref().unwrap();
    (spec.parallelism.unwrap(), spec.completions.unwrap())
}

#[test]
fn jobset_has_lead_and_followers_in_one_subdomain() {
    let js = jobset(&crate::fixtures::cluster(&hello(4)), "m-flux-0");
    let names: Vec<_> = js
        .spec
        .replicated_jobs
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, ["lead", "workers"]);
    assert_eq!(parallelism(&js, "lead"), (1, 1));
    assert_eq!(parallelism(&js, "workers"), (3, 3));
    let network = js.spec.network.as_ref().unwrap();
    assert_eq!(network.subdomain.as_deref(), Some("hello"));
    assert_eq!(network.enable_dns_hostnames, Some(true));
    assert_eq!(network.publish_not_ready_addresses, Some(true));
    let success = js.spec.success_policy.as_ref().unwrap();
    assert_eq!(
        (
            success.operator.as_str(),
            success.target_replicated_jobs.clone()
        ),
        ("All", vec!["lead".to_string()])
    );
    assert_eq!(js.spec.suspend, Some(false));
    assert!(rjob(&js, "workers").depends_on.is_empty());
    for r in &js.spec.replicated_jobs {
        let job = r.template.spec.as_ref().unwrap();
        assert_eq!(job.completion_mode.as_deref(), Some("Indexed"));
        assert_eq!(job.active_deadline_seconds, Some(31_500_000));
    }
}

/// Who restarts what: a lead that runs a program never restarts its Flux container, and its
/// Job fails at once on any exit but the retry code (a lost pod is replaced, uncounted); an
/// interactive lead and every follower restart theirs (`OnFailure`), with no policy; an
/// explicit `restartPolicy: OnFailure` (the Go operator's default) keeps the lead's retries.
#[test]
fn a_lead_with_a_program_fails_its_job_on_the_program_s_failure_and_others_restart() {
    use crate::api::RestartPolicy;
    let interactive = {
        let mut mc = hello(3);
        mc.spec.interactive = true;
        mc
    };
    let batch = {
        let mut mc = hello(3);
        mc.spec.containers[0].batch = true;
        mc
    };
    let on_failure = {
        let mut mc = hello(3);
        mc.spec.pod.restart_policy = Some(RestartPolicy::OnFailure);
        mc
    };
    let never = {
        let mut mc = hello(3);
        mc.spec.pod.restart_policy = Some(RestartPolicy::Never);
        mc
    };
    // (what, cluster, lead's policy and failure policy, followers' policy)
    let cases = [
        ("a command", hello(3), "Never", true, "OnFailure"),
        ("a batch", batch, "Never", true, "OnFailure"),
        ("a single broker", hello(1), "Never", true, "OnFailure"),
        ("interactive", interactive, "OnFailure", false, "OnFailure"),
        (
            "OnFailure asked",
            on_failure,
            "OnFailure",
            false,
            "OnFailure",
        ),
        ("Never asked", never, "Never", true, "Never"),
    ];
    for (what, mc, lead_policy, fails_fast, follower_policy) in cases {
        let cluster = crate::fixtures::cluster(&mc);
        let js = jobset(&cluster, "m-flux-0");
        let lead = rjob(&js, "lead").template.spec.as_ref().unwrap();
        let pod = lead.template.spec.as_ref().unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some(lead_policy), "{what}");
        let flux = &pod.containers[0];
        let rules = lead.pod_failure_policy.as_ref().map(|p| &p.rules);
        assert_eq!(rules.is_some(), fails_fast, "{what}");
        if let Some(rules) = rules {
            assert_eq!(rules[0].action, "Ignore", "{what}");
            let lost = rules[0].on_pod_conditions.as_ref().unwrap();
            assert_eq!(lost[0].type_, "DisruptionTarget", "{what}");
            assert_eq!(rules[1].action, "FailJob", "{what}");
            let codes = rules[1].on_exit_codes.as_ref().unwrap();
            assert_eq!(codes.container_name.as_ref(), Some(&flux.name), "{what}");
            assert_eq!(codes.operator, "NotIn", "{what}");
            assert_eq!(codes.values, [crate::flux::RETRY_EXIT], "{what}");
            assert_eq!(
                flux.termination_message_policy.as_deref(),
                Some("FallbackToLogsOnError"),
                "{what}: a failed job's last lines are kept"
            );
        } else {
            assert_eq!(flux.termination_message_policy, None, "{what}");
        }
        if mc.spec.size > 1 {
            let workers = rjob(&js, "workers").template.spec.as_ref().unwrap();
            let pod = workers.template.spec.as_ref().unwrap();
            assert_eq!(
                pod.restart_policy.as_deref(),
                Some(follower_policy),
                "{what}"
            );
            assert!(workers.pod_failure_policy.is_none(), "{what}");
        }
    }
}

#[test]
fn headless_name_sets_the_subdomain() {
    let mut mc = hello(2);
    mc.spec.network.headless_name = "flux-service".into();
    assert_eq!(
        jobset(&crate::fixtures::cluster(&mc), "m-flux-0")
            .spec
            .network
            .unwrap()
            .subdomain
            .as_deref(),
        Some("flux-service")
    );
}

#[test]
fn a_single_broker_has_no_followers_job() {
    let js = jobset(&crate::fixtures::cluster(&hello(1)), "m-flux-0");
    assert_eq!(js.spec.replicated_jobs.len(), 1);
    assert_eq!(js.spec.replicated_jobs[0].name, "lead");
}

#[test]
fn elastic_cluster_sizes_the_followers_job_by_size() {
    let mut mc = hello(2);
    mc.spec.max_size = Some(6);
    assert_eq!(
        parallelism(
            &jobset(&crate::fixtures::cluster(&mc), "m-flux-0"),
            "workers"
        ),
        (1, 1)
    );
    mc.spec.size = 5;
    assert_eq!(
        parallelism(
            &jobset(&crate::fixtures::cluster(&mc), "m-flux-0"),
            "workers"
        ),
        (4, 4)
    );
}

#[test]
fn lead_first_makes_followers_depend_on_a_ready_lead() {
    let mut mc = hello(3);
    mc.spec.startup_order = StartupOrder::LeadFirst;
    let js = jobset(&crate::fixtures::cluster(&mc), "m-flux-0");
    let deps = &rjob(&js, "workers").depends_on;
    assert_eq!(deps.len(), 1);
    assert_eq!(
        (deps[0].name.as_str(), deps[0].status.as_str()),
        ("lead", "Ready")
    );
    let lead_pod = rjob(&js, "lead")
        .template
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    assert!(
        lead_pod.containers[0].readiness_probe.is_some(),
        "LeadFirst needs a real readiness probe"
    );
}

#[test]
fn kueue_labels_reach_the_jobset_and_start_it_suspended() {
    let mut mc = hello(2);
    mc.metadata.labels = Some([(KUEUE_QUEUE_LABEL.to_string(), "team-a".to_string())].into());
    mc.spec
        .job_labels
        .insert("kueue.x-k8s.io/priority-class".into(), "high".into());
    let js = jobset(&crate::fixtures::cluster(&mc), "m-flux-0");
    let labels = js.metadata.labels.as_ref().unwrap();
    assert_eq!(
        labels.get(KUEUE_QUEUE_LABEL).map(String::as_str),
        Some("team-a")
    );
    assert_eq!(
        labels
            .get("kueue.x-k8s.io/priority-class")
            .map(String::as_str),
        Some("high")
    );
    assert_eq!(js.spec.suspend, Some(true));

    // Later changes never carry `suspend` for a queued cluster: Kueue owns it.
    let change = jobset::change(&crate::fixtures::cluster(&mc), None).unwrap();
    assert!(change.apply(&mc)["spec"].get("suspend").is_none());
}

#[test]
fn later_changes_touch_only_the_followers_size_and_suspend() {
    let mut mc = hello(3);
    mc.spec.max_size = Some(6);
    let change = jobset::change(&crate::fixtures::cluster(&mc), Some(false)).unwrap();
    let apply = change.apply(&mc);
    assert_eq!(apply["spec"].as_object().unwrap().len(), 2, "{apply}");
    assert_eq!(apply["spec"]["replicatedJobs"][0]["name"], "workers");
    assert_eq!(
        apply["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"],
        2
    );
    assert_eq!(
        apply["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"],
        2
    );
    assert_eq!(apply["spec"]["suspend"], false);

    mc.spec.size = 5;
    let change = jobset::change(&crate::fixtures::cluster(&mc), Some(true)).unwrap();
    assert_eq!(
        change,
        jobset::Change {
            followers: Some(4),
            suspend: Some(true)
        }
    );

    // A lone lead broker has no followers job: only `suspend` may change.
    let lone = hello(1);
    assert!(jobset::change(&crate::fixtures::cluster(&lone), None).is_none());
    let change = jobset::change(&crate::fixtures::cluster(&lone), Some(true)).unwrap();
    assert!(change.apply(&lone)["spec"].get("replicatedJobs").is_none());
}

#[test]
fn pods_carry_role_labels_view_and_user_settings() {
    let mut mc = hello(2);
    mc.spec.pod.labels.insert("team".into(), "a".into());
    mc.spec
        .pod
        .node_selector
        .insert("pool".into(), "hpc".into());
    let default = pod_template(&crate::fixtures::cluster(&mc), Role::Lead, "m-flux-0");
    assert_eq!(
        default.spec.as_ref().unwrap().containers[0]
            .image_pull_policy
            .as_deref(),
        Some("IfNotPresent"),
        "as the Go operator: an image on the node is used, even one tagged latest"
    );
    mc.spec.containers[0].pull_always = true;
    let lead = pod_template(&crate::fixtures::cluster(&mc), Role::Lead, "m-flux-0");
    let labels = lead.metadata.as_ref().unwrap().labels.as_ref().unwrap();
    assert_eq!(labels.get(ROLE_LABEL).map(String::as_str), Some("lead"));
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    let spec = lead.spec.as_ref().unwrap();
    assert_eq!(
        spec.init_containers.as_ref().map(Vec::len),
        Some(1),
        "flux view init container"
    );
    assert_eq!(spec.node_selector.as_ref().unwrap()["pool"], "hpc");
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("Always")
    );
    assert!(
        spec.containers[0].command.is_some(),
        "the flux container runs the entrypoint"
    );
    let followers = pod_template(&crate::fixtures::cluster(&mc), Role::Follower, "m-flux-0");
    let labels = followers
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .as_ref()
        .unwrap();
    assert_eq!(labels.get(ROLE_LABEL).map(String::as_str), Some("workers"));

    mc.spec.flux.container.disable = true;
    assert!(
        pod_template(&crate::fixtures::cluster(&mc), Role::Lead, "m-flux-0")
            .spec
            .unwrap()
            .init_containers
            .is_none()
    );
}

#[test]
fn ports_of_a_container_beside_the_broker_get_a_service_named_after_it() {
    // As the Go operator: the Service is named after the container and selects every broker
    // pod (the container runs in each).
    let mut mc = hello(2);
    mc.spec.containers[0].run_flux = true;
    mc.spec.containers.push(crate::api::MiniClusterContainer {
        name: "nginx".into(),
        image: "nginx".into(),
        no_wrap_entrypoint: true,
        ports: vec![80],
        ..Default::default()
    });
    let svcs = network_services(&crate::fixtures::cluster(&mc));
    assert_eq!(svcs.len(), 1);
    assert_eq!(svcs[0].metadata.name.as_deref(), Some("nginx"));
    let spec = svcs[0].spec.as_ref().unwrap();
    assert_eq!(
        spec.selector.as_ref().unwrap(),
        &BTreeMap::from([(NAME_LABEL.to_string(), "hello".to_string())])
    );
    assert_eq!(spec.ports.as_ref().unwrap()[0].port, 80);
    assert_eq!(spec.cluster_ip, None, "a ClusterIP Service, not headless");
    // In every broker pod, with Flux within reach: the socket and the view are mounted.
    for role in [Role::Lead, Role::Follower] {
        let pod = pod_template(&crate::fixtures::cluster(&mc), role, "m-flux-0")
            .spec
            .unwrap();
        let nginx = pod.containers.iter().find(|c| c.name == "nginx").unwrap();
        assert_eq!(nginx.command, None, "noWrapEntrypoint keeps the image's");
        let mounts: Vec<&str> = nginx
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| m.mount_path.as_str())
            .collect();
        assert!(
            mounts.contains(&crate::model::mounts::RUN_MOUNT),
            "{mounts:?}"
        );
        assert!(mounts.contains(&"/mnt/flux"), "{mounts:?}");
    }
}

/// A MiniCluster of size 2 with two services: `web` (a port, the image's entrypoint) and
/// `api` (a command, a volume), its pods labelled, on a node pool, in the subdomain `net`.
fn with_two_services() -> MiniCluster {
    let mut mc = hello(2);
    mc.spec.network.headless_name = "net".into();
    mc.spec.pod.labels.insert("team".into(), "a".into());
    mc.spec
        .pod
        .node_selector
        .insert("pool".into(), "hpc".into());
    mc.spec.services.push(crate::api::MiniClusterContainer {
        name: "web".into(),
        image: "nginx".into(),
        ports: vec![8080],
        ..Default::default()
    });
    let mut api = crate::api::MiniClusterContainer {
        name: "api".into(),
        image: "api".into(),
        command: "serve --port 5000".into(),
        ..Default::default()
    };
    api.volumes.insert(
        "data".into(),
        crate::api::ContainerVolume {
            claim_name: "data".into(),
            path: "/data".into(),
            ..Default::default()
        },
    );
    mc.spec.services.push(api);
    mc
}

#[test]
fn services_run_once_in_their_own_pod_in_the_subdomain() {
    let mc = with_two_services();
    // Not in the broker pods.
    for role in [Role::Lead, Role::Follower] {
        let pod = pod_template(&crate::fixtures::cluster(&mc), role, "m-flux-0")
            .spec
            .unwrap();
        assert_eq!(pod.containers.len(), 1, "only the Flux container");
        assert!(pod.volumes.unwrap().iter().all(|v| v.name != "data"));
    }
    let job = services_job(&crate::fixtures::cluster(&mc), "m-flux-0").expect("a services Job");
    assert_eq!(job.metadata.name.as_deref(), Some("hello-services"));
    let spec = job.spec.unwrap();
    assert_eq!((spec.parallelism, spec.completions), (Some(1), Some(1)));
    assert_eq!(spec.suspend, Some(false));
    let template = spec.template;
    let labels = template.metadata.unwrap().labels.unwrap();
    assert_eq!(
        labels[JOBSET_NAME_LABEL], "hello",
        "in the subdomain's Service"
    );
    assert_eq!(labels["team"], "a");
    assert!(
        !labels.contains_key(NAME_LABEL) && !labels.contains_key(ROLE_LABEL),
        "never counted as a broker: {labels:?}"
    );
    let pod = template.spec.unwrap();
    assert_eq!(pod.hostname.as_deref(), Some("hello-services"));
    assert_eq!(pod.subdomain.as_deref(), Some("net"));
    assert_eq!(pod.restart_policy.as_deref(), Some("OnFailure"));
    assert_eq!(pod.node_selector.unwrap()["pool"], "hpc");
    assert!(pod.init_containers.is_none(), "no flux view");
    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["web", "api"]);
    assert_eq!(
        pod.containers[0].command, None,
        "no command: the image's own"
    );
    assert_eq!(
        pod.containers[1].command.as_deref().unwrap(),
        ["/bin/sh", "/etc/flux-operator/config/service.api.sh"]
    );
    let volumes: Vec<&str> = pod
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(volumes, [crate::model::mounts::CONFIG_VOLUME, "data"]);
}

#[test]
fn the_services_ports_select_their_pod_and_its_job_follows_spec_suspend() {
    let mut mc = with_two_services();
    // Its ports' Service selects the services pod.
    let svcs = network_services(&crate::fixtures::cluster(&mc));
    assert_eq!(svcs[0].metadata.name.as_deref(), Some("hello-web"));
    assert_eq!(
        svcs[0].spec.as_ref().unwrap().selector.as_ref().unwrap(),
        &services_pod_selector(&mc)
    );
    assert_eq!(services_pod_selector(&mc)[JOB_NAME_LABEL], "hello-services");
    // The desired state carries it; suspend follows spec.suspend.
    assert!(
        desired(&crate::fixtures::cluster(&mc))
            .unwrap()
            .services_job
            .is_some()
    );
    mc.spec.suspend = true;
    assert_eq!(
        services_job(&crate::fixtures::cluster(&mc), "m-flux-0")
            .unwrap()
            .spec
            .unwrap()
            .suspend,
        Some(true)
    );
    assert_eq!(
        services_job_update(&crate::fixtures::cluster(&mc))["spec"]["suspend"],
        true
    );
    assert!(services_job(&crate::fixtures::cluster(&hello(2)), "m-flux-0").is_none());
}

#[test]
fn config_map_carries_the_broker_config_and_is_owned_data() {
    let cm = config_map(&crate::fixtures::cluster(&hello(3))).unwrap();
    assert_eq!(
        cm.immutable,
        Some(true),
        "the scripts under a pod never change"
    );
    let data = cm.data.clone().unwrap();
    assert_eq!(
        cm.metadata.name,
        Some(format!("hello-flux-{}", content_hash(&data))),
        "named by its content"
    );
    let mut bigger = hello(3);
    bigger.spec.size = 4;
    let other = config_map(&crate::fixtures::cluster(&bigger)).unwrap();
    assert_ne!(
        other.metadata.name, cm.metadata.name,
        "other content, other name"
    );
    let js = jobset(
        &crate::fixtures::cluster(&hello(3)),
        cm.metadata.name.as_deref().unwrap(),
    );
    assert_eq!(
        crate::controller::plan::config_map_of(&(&js).into()).as_deref(),
        cm.metadata.name.as_deref(),
        "the JobSet's pods mount the ConfigMap it was rendered with"
    );
    let broker = data.get("broker.toml").expect("broker config");
    assert!(broker.contains("hello-lead-0-0"), "{broker}");
    assert!(
        data.values().all(|v| !v.contains("secret-key")),
        "no secret key in the ConfigMap"
    );
}

#[test]
fn minimal_service_names_only_the_lead() {
    let mut mc = hello(3);
    mc.spec.flux.minimal_service = true;
    let svcs = network_services(&crate::fixtures::cluster(&mc));
    assert_eq!(svcs.len(), 1);
    let spec = svcs[0].spec.as_ref().unwrap();
    assert_eq!(
        svcs[0].metadata.name.as_deref(),
        Some("hello"),
        "named like the subdomain"
    );
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(
        spec.selector
            .as_ref()
            .unwrap()
            .get(ROLE_LABEL)
            .map(String::as_str),
        Some("lead")
    );
    mc.spec.flux.topology = "kary:2".into();
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.flux.minimalService")
    );
}

#[test]
fn secret_holds_the_certificate_and_is_immutable() {
    let secret = curve_secret(&hello(2), "cert text");
    assert_eq!(secret.metadata.name.as_deref(), Some("hello-curve"));
    assert_eq!(secret.immutable, Some(true));
    assert_eq!(
        secret.data.unwrap()[crate::flux::CURVE_SECRET_KEY].0,
        b"cert text"
    );
}

/// `render` of every example, compared with the committed golden files in
/// `tests/golden/` (regenerate with `UPDATE_GOLDEN=1 cargo test`).
#[test]
fn examples_render_as_committed() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut entries: Vec<_> = std::fs::read_dir(root.join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    assert!(entries.len() >= 6, "examples exist");
    for path in entries {
        let mc = crate::cli::read_minicluster(&path).unwrap();
        assert!(
            crate::model::validate(&mc).is_empty(),
            "{} is valid",
            path.display()
        );
        let text = crate::cli::render_to_string(&mc, &crate::fixtures::env(), false).unwrap();
        let golden = root.join("tests/golden").join(path.file_name().unwrap());
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
            std::fs::write(&golden, &text).unwrap();
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        assert!(
            expected == text,
            "{} renders differently from {}; run UPDATE_GOLDEN=1 cargo test and review",
            path.display(),
            golden.display()
        );
    }
}

#[test]
fn config_map_past_one_mebibyte_is_refused_naming_the_field() {
    // Within the spec's bound on programs (in characters), past 1 MiB in bytes: four
    // programs of 64 Ki four-byte characters.
    let mut mc = hello(2);
    let long = "🚀".repeat(MAX_CONFIG_MAP_BYTES / 16);
    let c = &mut mc.spec.containers[0];
    c.command = long.clone();
    (c.commands.init, c.commands.pre, c.commands.post) = (long.clone(), long.clone(), long);
    let too_large = |mc: &MiniCluster| too_large(&desired(&crate::fixtures::cluster(mc)).unwrap());
    let e = too_large(&mc).expect("too large");
    assert_eq!(e.field, "spec.containers");
    assert!(e.to_string().contains("1 MiB"), "{e}");
    mc.spec.containers[0].command = "x".repeat(1000);
    assert_eq!(too_large(&mc), None);
}

#[test]
fn a_spec_whose_jobset_passes_one_mebibyte_is_refused_whole_before_anything_is_made() {
    // Each field within its bound (values of 4096 characters, 256 of them), the whole
    // too large: the environment is in both pod templates.
    let mut mc = hello(2);
    let value = "x".repeat(4096);
    let env = &mut mc.spec.containers[0].environment;
    env.extend((0..160).map(|i| (format!("V{i}"), value.clone())));
    assert!(crate::model::validate(&mc).is_empty());
    let e = too_large(&desired(&crate::fixtures::cluster(&mc)).unwrap()).expect("too large");
    assert_eq!(e.field, "spec");
    assert!(e.to_string().contains("1 MiB"), "{e}");
    // Half of it renders, and its JobSet is within the bound.
    mc.spec.containers[0]
        .environment
        .retain(|k, _| k.strip_prefix('V').and_then(|i| i.parse::<u32>().ok()) < Some(80));
    let desired = desired(&crate::fixtures::cluster(&mc)).unwrap();
    assert_eq!(too_large(&desired), None, "fits");
    let js = desired.jobset;
    let size = serde_json::to_vec(&js).unwrap().len();
    assert!(
        (MAX_JOBSET_BYTES / 2..=MAX_JOBSET_BYTES).contains(&size),
        "{size}"
    );
}

#[test]
fn empty_dir_without_path_is_shared_memory_as_in_the_go_operator() {
    let mut mc = hello(2);
    let v: crate::api::ContainerVolume =
        serde_norway::from_str("{emptyDir: true, emptyDirMedium: memory}").unwrap();
    mc.spec.containers[0].volumes.insert("shm".into(), v);
    assert!(crate::model::validate(&mc).is_empty());
    let tpl = pod_template(&crate::fixtures::cluster(&mc), Role::Lead, "m-flux-0");
    let spec = tpl.spec.unwrap();
    let vol = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "shm")
        .unwrap();
    assert_eq!(
        vol.empty_dir.as_ref().unwrap().medium.as_deref(),
        Some("Memory")
    );
    let mount = spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "shm")
        .unwrap();
    assert_eq!(mount.mount_path, "/dev/shm");
}
