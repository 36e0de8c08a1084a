//! The checks the API server cannot make, and the facts they share with the renderer.

use std::collections::BTreeMap;

use crate::api::validation::longest_pod_name;
use crate::api::*;
use crate::fixtures::{cluster, manifest};
use crate::model::validate;

const HELLO: &str = r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata: {name: hello, namespace: science}
spec:
  size: 4
  containers:
    - image: ghcr.io/converged-computing/lammps:latest
      command: lmp -in in.reaxc.hns
"#;

#[test]
fn defaults_match_the_go_operator() {
    let mc = manifest(HELLO);
    assert_eq!(mc.spec.tasks, 1);
    assert_eq!(mc.spec.deadline_seconds, 31_500_000);
    assert_eq!(mc.spec.flux.log_level, 6);
    assert_eq!(mc.spec.flux.connect_timeout, "5s");
    assert_eq!(mc.spec.flux.container.mount_path, "/mnt/flux");
    assert_eq!(mc.spec.flux.container.image, DEFAULT_VIEW_IMAGE);
    assert_eq!(mc.spec.startup_order, StartupOrder::Together);
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
}

#[test]
fn old_operator_manifest_fields_parse() {
    let mc = manifest(
        r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata: {name: old}
spec:
  size: 2
  maxSize: 4
  tasks: 4
  interactive: false
  logging: {quiet: true, strict: true}
  flux:
    container: {image: ghcr.io/converged-computing/flux-view-ubuntu:tag-noble}
    optionFlags: "-o cpu-affinity=per-task"
    scheduler: {queuePolicy: easy}
  pod:
    nodeSelector: {node.kubernetes.io/instance-type: c2d}
    hostIPC: true
  containers:
    - image: app:1
      workingDir: /opt/app
      environment: {OMP_NUM_THREADS: "2"}
      volumes:
        data: {path: /data, claimName: data-pvc, readOnly: true}
      commands: {pre: "echo pre", brokerPre: "echo lead"}
      resources: {limits: {cpu: 2}}
"#,
    );
    assert_eq!(mc.spec.max_size, Some(4));
    assert!(mc.spec.pod.host_ipc);
    assert_eq!(mc.spec.flux.scheduler.queue_policy, Some(QueuePolicy::Easy));
    assert_eq!(mc.spec.containers[0].volumes["data"].claim_name, "data-pvc");
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
}

#[test]
fn gpus_are_counted_whole_from_limits_or_requests_and_a_fraction_names_its_field() {
    let with = |resources: &str| {
        manifest(&format!(
            "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {{name: g}}\n\
             spec:\n  size: 2\n  containers:\n    - image: app:1\n      resources: {resources}\n"
        ))
    };
    for (resources, want) in [
        ("{limits: {cpu: 2}}", 0),
        ("{limits: {nvidia.com/gpu: 2}}", 2),
        ("{requests: {amd.com/gpu: 1}}", 1),
        (
            "{limits: {nvidia.com/gpu: 1}, requests: {nvidia.com/gpu: 1}}",
            1,
        ),
        ("{limits: {nvidia.com/mig-1g.5gb: 1, nvidia.com/gpu: 1}}", 2),
        ("{limits: {example.com/fpga: 3}}", 0),
    ] {
        let mc = with(resources);
        assert!(validate(&mc).is_empty(), "{resources}: {:?}", validate(&mc));
        assert_eq!(cluster(&mc).flux.gpus, want, "{resources}");
    }
    let mc = with("{limits: {nvidia.com/gpu: 500m}}");
    let errors = validate(&mc);
    assert_eq!(
        errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
        [r#"spec.containers[0].resources.limits["nvidia.com/gpu"]"#]
    );
    assert!(errors[0].message.contains("whole number"), "{errors:?}");
}

#[test]
fn tasks_beyond_one_rank_per_core_of_the_cpu_limit_name_spec_tasks() {
    let with = |size: i32, tasks: i32, cpu: &str, extra: &str| {
        manifest(&format!(
            "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {{name: t}}\n\
             spec:\n  size: {size}\n  tasks: {tasks}\n{extra}  containers:\n    - image: app:1\n      \
             command: lmp\n      resources: {{limits: {{cpu: {cpu}}}}}\n"
        ))
    };
    for (size, tasks, cpu, extra, refused) in [
        (4, 8, "2", "", false),
        (4, 9, "2", "", true),
        (2, 4, "1500m", "", false), // rounded up: 2 cores each
        (2, 5, "1500m", "", true),
        (2, 2, "100m", "", false),
        (2, 3, "0.1", "", true),
        (2, 9, "1", "  interactive: true\n", false), // no job of its own
    ] {
        let errors = fields(&with(size, tasks, cpu, extra));
        assert_eq!(
            errors.contains(&"spec.tasks".to_string()),
            refused,
            "size {size} tasks {tasks} cpu {cpu}: {errors:?}"
        );
    }
    let message = &validate(&with(4, 9, "2", ""))[0].message;
    assert_eq!(
        message,
        "9 ranks need 9 cores, and 4 brokers with spec.containers[0].resources.limits.cpu 2 have 8 (one rank per core)"
    );
}

fn fields(mc: &MiniCluster) -> Vec<String> {
    validate(mc).into_iter().map(|e| e.field).collect()
}

#[test]
fn errors_name_the_field() {
    let mut mc = manifest(HELLO);
    mc.spec.max_size = Some(2);
    assert!(fields(&mc).contains(&"spec.size".to_string()));

    let mut mc = manifest(HELLO);
    let mut second = mc.spec.containers[0].clone();
    second.name = "two".into();
    second.run_flux = true;
    mc.spec.containers[0].run_flux = true;
    mc.spec.containers.push(second);
    assert!(fields(&mc).contains(&"spec.containers".to_string()));

    let mut mc = manifest(HELLO);
    mc.spec.containers[0].volumes.insert(
        "scratch".into(),
        ContainerVolume {
            path: "/scratch".into(),
            claim_name: "a".into(),
            host_path: "/b".into(),
            ..Default::default()
        },
    );
    assert!(
        fields(&mc).contains(&"spec.containers[0].volumes.scratch".to_string()),
        "{:?}",
        validate(&mc)
    );

    let mut mc = manifest(HELLO);
    mc.spec.containers[0]
        .environment
        .insert("1BAD".into(), "x".into());
    assert!(
        fields(&mc)
            .iter()
            .any(|f| f.starts_with("spec.containers[0].environment")),
        "{:?}",
        validate(&mc)
    );

    let mut mc = manifest(HELLO);
    mc.spec.flux.broker_config = "[bootstrap\nhosts = ".into();
    assert!(fields(&mc).contains(&"spec.flux.brokerConfig".to_string()));
}

#[test]
fn container_names_cannot_collide_with_generated_ones() {
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].run_flux = true;
    let mut other = mc.spec.containers[0].clone();
    other.run_flux = false;
    // The unnamed Flux container is named after the MiniCluster, as in the Go operator.
    other.name = "hello".into();
    mc.spec.containers.push(other);
    assert!(
        fields(&mc).contains(&"spec.containers[1].name".to_string()),
        "{:?}",
        validate(&mc)
    );
    mc.spec.containers[1].name = "flux-view".into();
    assert!(fields(&mc).contains(&"spec.containers[1].name".to_string()));
    mc.spec.containers[1].name = "sidecar".into();
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
}

#[test]
fn flux_view_name_cannot_be_the_unnamed_flux_containers() {
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].name = String::new();
    mc.spec.flux.container.name = "hello".into();
    assert_eq!(
        fields(&mc),
        ["spec.flux.container.name"],
        "{:?}",
        validate(&mc)
    );
    mc.spec.containers[0].name = "main".into();
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
    mc.spec.flux.container.name = "main".into();
    assert_eq!(fields(&mc), ["spec.containers[0].name"]);
}

#[test]
fn with_an_archive_no_container_takes_the_archive_init_containers_name() {
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].name = "flux-archive".into();
    // Without an archive there is no such init container.
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
    crate::fixtures::archive_on_host(&mut mc, "/state/flux.tar.gz");
    assert_eq!(
        fields(&mc),
        ["spec.containers[0].name"],
        "{:?}",
        validate(&mc)
    );
    mc.spec.containers[0].name = "main".into();
    mc.spec.flux.container.name = "flux-archive".into();
    assert_eq!(
        fields(&mc),
        ["spec.flux.container.name"],
        "{:?}",
        validate(&mc)
    );
}

#[test]
fn pod_labels_cannot_take_the_selector_labels() {
    let mut mc = manifest(HELLO);
    mc.spec.pod.labels.insert("team".into(), "a".into());
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
    for key in [crate::api::NAME_LABEL, crate::api::ROLE_LABEL] {
        let mut bad = mc.clone();
        bad.spec.pod.labels.insert(key.into(), "x".into());
        let errors = validate(&bad);
        assert_eq!(fields(&bad), ["spec.pod.labels"], "{errors:?}");
        assert!(errors[0].message.contains(key));
    }
}

#[test]
fn garde_errors_use_the_api_field_names() {
    use crate::api::validation::api_path;
    assert_eq!(api_path("network.headless_name"), "network.headlessName");
    assert_eq!(
        api_path("containers[0].environment[MY_VAR]"),
        "containers[0].environment[MY_VAR]"
    );
    // Volume names are map keys: spelled as written.
    assert_eq!(
        api_path("containers[0].volumes.my_data.host_path"),
        "containers[0].volumes.my_data.hostPath"
    );
    let mut mc = manifest(HELLO);
    mc.spec.network.headless_name = "Not_A_Label".into();
    assert_eq!(
        fields(&mc),
        ["spec.network.headlessName"],
        "{:?}",
        validate(&mc)
    );
}

#[test]
fn name_budget_matches_jobset_pod_names() {
    // hello-workers-0-2-abcde: the longest pod of a 4-broker cluster.
    assert_eq!(
        longest_pod_name("hello", 4),
        "hello-workers-0-2-abcde".len()
    );
    assert_eq!(
        longest_pod_name("hello", 12),
        "hello-workers-0-10-abcde".len()
    );
    let name = "a".repeat(47);
    let mut mc = manifest(HELLO);
    mc.metadata.name = Some(name);
    assert!(fields(&mc).contains(&"metadata.name".to_string()));
    mc.metadata.name = Some("a".repeat(45));
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
}

#[test]
fn elastic_cluster_needs_two_brokers() {
    let mut mc = manifest(HELLO);
    mc.spec.size = 1;
    mc.spec.max_size = Some(4);
    assert!(fields(&mc).contains(&"spec.size".to_string()));
    mc.spec.max_size = None;
    assert!(validate(&mc).is_empty());
}

#[test]
fn render_reads_a_file_as_the_api_server_does() {
    use crate::cli::parse_minicluster;
    // A duplicated key: kubectl sends the last one, the API server accepts it.
    let dup = "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: d}\n\
               spec:\n  size: 2\n  interactive: true\n  interactive: false\n\
               \x20 containers: [{image: rockylinux:9}]\n";
    let mc = parse_minicluster(dup).expect("a duplicated key is accepted");
    assert!(!mc.spec.interactive);
    // Unknown fields are refused, named by path; maps and known fields are not.
    let unknown = "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: u}\n\
                   spec:\n  size: 2\n  volumes: {data: {}}\n  pod: {labels: {a: b}}\n\
                   \x20 containers:\n  - image: rockylinux:9\n    existingVolumes: {}\n\
                   \x20   environment: {A_B: c}\n\
                   \x20   securityContext: {addCapabilities: [SYS_ADMIN]}\n";
    let e = parse_minicluster(unknown).expect_err("unknown fields are refused");
    let message = e.to_string();
    for field in [
        "spec.volumes",
        "spec.containers[0].existingVolumes",
        "spec.containers[0].securityContext.addCapabilities",
    ] {
        assert!(
            message.contains(&format!("unknown field \"{field}\"")),
            "{message}"
        );
    }
    assert!(
        !message.contains("environment") && !message.contains("labels"),
        "{message}"
    );
}

#[test]
fn archive_path_must_be_an_absolute_path_flux_can_pass_to_a_shell() {
    let mut mc = manifest(HELLO);
    crate::fixtures::archive_on_host(&mut mc, "/state/flux-archive_1.tar.gz");
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
    for bad in [
        "auto",
        "state.tar",
        "/state/a b.tar",
        "/state/$(id).tar",
        "/state/",
        "/state/../tmp/q.tar.gz",
        "/state/sub/../../tmp/q.tar.gz",
    ] {
        mc.spec.archive.path = bad.into();
        let errors = validate(&mc);
        assert!(
            errors.iter().any(|e| e.field == "spec.archive.path"),
            "{bad:?} accepted: {errors:?}"
        );
    }
}

#[test]
fn a_container_mounts_each_path_once() {
    let mut mc = manifest(HELLO);
    let c = &mut mc.spec.containers[0];
    let shm = ContainerVolume {
        empty_dir: true,
        ..Default::default()
    };
    // Two emptyDirs without path both mount at /dev/shm.
    c.volumes.insert("scratch".into(), shm.clone());
    c.volumes.insert("shm".into(), shm.clone());
    c.volumes.insert(
        "data".into(),
        ContainerVolume {
            claim_name: "data".into(),
            path: "/dev/shm/".into(),
            ..Default::default()
        },
    );
    let errors = validate(&mc);
    let shm_errors: Vec<_> = errors
        .iter()
        .filter(|e| e.message.contains("also where volume"))
        .collect();
    assert_eq!(shm_errors.len(), 2, "{errors:?}");
    assert_eq!(
        shm_errors[0].field,
        "spec.containers[0].volumes.scratch.path"
    );
    assert!(shm_errors[0].message.contains("volume data"), "{errors:?}");
    assert_eq!(shm_errors[1].field, "spec.containers[0].volumes.shm.path");

    // A path where the operator mounts the flux view into the Flux container.
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].volumes.insert(
        "mine".into(),
        ContainerVolume {
            host_path: "/data".into(),
            path: "/mnt/flux".into(),
            ..Default::default()
        },
    );
    let errors = validate(&mc);
    assert_eq!(
        fields(&mc),
        ["spec.containers[0].volumes.mine.path"],
        "{errors:?}"
    );
    assert!(errors[0].message.contains("operator mounts its own volume"));
    // Different paths are fine, and so is one emptyDir at /dev/shm.
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].volumes.insert("shm".into(), shm);
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
}

#[test]
fn hooks_only_the_flux_container_runs_are_reported_on_other_containers() {
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].run_flux = true;
    let mut side = MiniClusterContainer {
        name: "server".into(),
        command: "serve".into(),
        ..Default::default()
    };
    side.commands.pre = "wget server".into();
    side.commands.post = "echo done".into();
    mc.spec.containers.push(side);
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
    let unsupported = crate::model::unsupported(&mc);
    let fields: Vec<&str> = unsupported.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["spec.containers[1].commands.pre"]);
    assert!(
        unsupported[0]
            .message
            .contains("only the Flux container runs it")
    );
}

/// The certificate is parsed once, when the spec is resolved: its errors come with the
/// other checks' (all of them at once), naming the field.
#[test]
fn a_curve_cert_that_is_not_a_certificate_is_refused_naming_the_field() {
    let resolved = |mc: &MiniCluster| match crate::model::resolve(mc, &crate::fixtures::env()) {
        Ok(cluster) => Ok(cluster.certificate),
        Err(errors) => Err(errors),
    };
    let mut mc = manifest(HELLO);
    mc.spec.flux.curve_cert = "not a certificate".to_string().into();
    let errors = resolved(&mc).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].field, "spec.flux.curveCert");
    assert!(
        errors[0].message.starts_with("is not a CURVE certificate"),
        "{errors:?}"
    );
    // With another error, both are named.
    let name = std::mem::replace(&mut mc.spec.containers[0].name, "Not_A_Label".into());
    let errors = resolved(&mc).unwrap_err();
    assert!(errors.len() >= 2, "{errors:?}");
    assert!(
        errors.iter().any(|e| e.field == "spec.flux.curveCert"),
        "{errors:?}"
    );
    mc.spec.containers[0].name = name;
    let good = crate::model::certificate::Certificate::generate("mc").unwrap();
    mc.spec.flux.curve_cert = good.to_text().into();
    assert_eq!(resolved(&mc).unwrap(), Some(good.clone()));
    // A key of the wrong length is named too.
    mc.spec.flux.curve_cert = good.to_text().replace(good.public_key(), "short").into();
    let errors = resolved(&mc).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].field, "spec.flux.curveCert");
    assert!(errors[0].message.contains("public-key"), "{errors:?}");
}

/// Whether `mc` is accepted and renders whole (what the controller does next).
fn accepted_and_rendered(mc: &MiniCluster) -> bool {
    crate::model::resolve(mc, &crate::fixtures::env()).is_ok_and(|cluster| {
        crate::render::desired(&cluster).is_ok_and(|d| crate::render::too_large(&d).is_none())
    })
}

/// The one error of `mc`: its field and message.
fn only_error(mc: &MiniCluster) -> (String, String) {
    let errors = validate(mc);
    assert_eq!(errors.len(), 1, "{errors:?}");
    (errors[0].field.clone(), errors[0].message.clone())
}

#[test]
fn a_nul_in_a_command_is_refused_naming_the_field() {
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].command = "echo a\0b".into();
    let (field, message) = only_error(&mc);
    assert_eq!(field, "spec.containers[0].command");
    assert!(message.contains("NUL"), "{message}");
    // In a container that does not run Flux, and in a service, too.
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].run_flux = true;
    mc.spec.containers.push(MiniClusterContainer {
        name: "side".into(),
        command: "serve\0".into(),
        ..Default::default()
    });
    mc.spec.services.push(MiniClusterContainer {
        name: "db".into(),
        command: "\0".into(),
        ..Default::default()
    });
    assert_eq!(
        fields(&mc),
        ["spec.containers[1].command", "spec.services[0].command"]
    );
    mc.spec.containers[1].command = "serve".into();
    mc.spec.services[0].command = "db".into();
    assert!(accepted_and_rendered(&mc), "{:?}", validate(&mc));
}

#[test]
fn a_nul_in_the_batch_logs_directory_is_refused_naming_the_field() {
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].batch = true;
    mc.spec.containers[0].logs = "/tmp/out\0".into();
    assert_eq!(only_error(&mc).0, "spec.containers[0].logs");
    mc.spec.containers[0].logs = "/tmp/out".into();
    assert!(accepted_and_rendered(&mc), "{:?}", validate(&mc));
}

#[test]
fn a_nul_in_an_environment_value_is_refused_naming_the_variable() {
    let mut mc = manifest(HELLO);
    mc.spec.containers[0]
        .environment
        .insert("GREETING".into(), "hi\0".into());
    mc.spec
        .flux
        .environment
        .insert("FLUX_X".into(), "\0".into());
    assert_eq!(
        fields(&mc),
        [
            "spec.containers[0].environment.GREETING",
            "spec.flux.environment.FLUX_X"
        ]
    );
    mc.spec.containers[0]
        .environment
        .insert("GREETING".into(), "hi there".into());
    mc.spec.flux.environment.insert("FLUX_X".into(), "1".into());
    assert!(accepted_and_rendered(&mc), "{:?}", validate(&mc));
}

#[test]
fn a_nul_in_the_wrapper_prefix_or_flux_wrap_is_refused_naming_the_field() {
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].commands.prefix = "time\0".into();
    mc.spec.flux.wrap = "strace,\0".into();
    assert_eq!(
        fields(&mc),
        ["spec.containers[0].commands.prefix", "spec.flux.wrap"]
    );
    mc.spec.containers[0].commands.prefix = "time".into();
    mc.spec.flux.wrap = "strace,-e,network".into();
    assert!(accepted_and_rendered(&mc), "{:?}", validate(&mc));
}

#[test]
fn a_nul_in_a_hook_or_script_is_refused_naming_the_hook() {
    let mut mc = manifest(HELLO);
    let c = &mut mc.spec.containers[0];
    c.command.clear();
    c.commands.init = "echo init\0".into();
    c.commands.pre = "\0".into();
    c.commands.broker_pre = "a\0".into();
    c.commands.worker_pre = "b\0".into();
    c.commands.post = "c\0".into();
    c.commands.script = "#!/bin/bash\n\0".into();
    assert_eq!(
        fields(&mc),
        [
            "spec.containers[0].commands.init",
            "spec.containers[0].commands.pre",
            "spec.containers[0].commands.brokerPre",
            "spec.containers[0].commands.workerPre",
            "spec.containers[0].commands.post",
            "spec.containers[0].commands.script",
        ]
    );
    let c = &mut mc.spec.containers[0];
    for hook in [
        &mut c.commands.init,
        &mut c.commands.pre,
        &mut c.commands.broker_pre,
        &mut c.commands.worker_pre,
        &mut c.commands.post,
        &mut c.commands.script,
    ] {
        *hook = hook.replace('\0', "");
    }
    assert!(accepted_and_rendered(&mc), "{:?}", validate(&mc));
}

#[test]
fn option_flags_that_do_not_split_into_words_are_refused_naming_the_field() {
    let mut mc = manifest(HELLO);
    mc.spec.flux.option_flags = "-o 'cpu-affinity=per-task".into();
    let (field, message) = only_error(&mc);
    assert_eq!(field, "spec.flux.optionFlags");
    assert!(message.contains("cannot split"), "{message}");
    mc.spec.flux.option_flags = "-o 'cpu-affinity=per-task'".into();
    assert!(accepted_and_rendered(&mc), "{:?}", validate(&mc));
}

#[test]
fn a_submit_command_that_does_not_split_into_words_is_refused_naming_the_field() {
    let mut mc = manifest(HELLO);
    mc.spec.flux.submit_command = "flux \"run".into();
    assert_eq!(only_error(&mc).0, "spec.flux.submitCommand");
    mc.spec.flux.submit_command = "flux run".into();
    assert!(accepted_and_rendered(&mc), "{:?}", validate(&mc));
}

#[test]
fn a_wrapper_prefix_that_does_not_split_into_words_is_refused_naming_the_field() {
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].commands.prefix = "mpirun \"-np 2".into();
    assert_eq!(only_error(&mc).0, "spec.containers[0].commands.prefix");
    mc.spec.containers[0].commands.prefix = "mpirun -np 2".into();
    assert!(accepted_and_rendered(&mc), "{:?}", validate(&mc));
}

#[test]
fn a_cluster_domain_that_is_not_a_dns_name_is_refused_naming_the_field() {
    for bad in ["bad domain", "a..b", "-x.local", ".", "a_b.local", "x\0y"] {
        let mut mc = manifest(HELLO);
        mc.spec.network.cluster_domain = bad.into();
        let (field, message) = only_error(&mc);
        assert_eq!(field, "spec.network.clusterDomain", "{bad:?}");
        assert!(message.contains("not a DNS domain"), "{message}");
    }
    let mut mc = manifest(HELLO);
    mc.spec.network.cluster_domain = "hpc.example.".into();
    assert!(accepted_and_rendered(&mc), "{:?}", validate(&mc));
}

#[test]
fn a_minimal_service_with_a_tree_topology_is_refused_naming_the_field() {
    let mut mc = manifest(HELLO);
    mc.spec.flux.minimal_service = true;
    mc.spec.flux.topology = "kary:2".into();
    let (field, message) = only_error(&mc);
    assert_eq!(field, "spec.flux.minimalService");
    assert!(message.contains("flat topology"), "{message}");
    mc.spec.flux.topology = "kary:0".into();
    assert!(accepted_and_rendered(&mc), "{:?}", validate(&mc));
}

#[test]
fn a_name_that_is_not_a_dns_label_is_refused_naming_the_field() {
    for bad in ["Hello", "bad.name", "bad_name", "1abc"] {
        let mut mc = manifest(HELLO);
        mc.metadata.name = Some(bad.into());
        assert_eq!(only_error(&mc).0, "metadata.name", "{bad:?}");
    }
}

#[test]
fn a_service_for_ports_that_takes_the_subdomains_name_is_refused_naming_the_container() {
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].run_flux = true;
    mc.spec.containers.push(MiniClusterContainer {
        name: "web".into(),
        command: "serve".into(),
        ports: vec![8080],
        ..Default::default()
    });
    mc.spec.network.headless_name = "web".into();
    let (field, message) = only_error(&mc);
    assert_eq!(field, "spec.containers[1].name");
    assert!(message.contains("subdomain"), "{message}");
    mc.spec.network.headless_name = "net".into();
    assert!(accepted_and_rendered(&mc), "{:?}", validate(&mc));
}

#[test]
fn map_keys_that_are_not_one_path_segment_are_quoted_in_field_paths() {
    let mut mc = manifest(HELLO);
    mc.spec.containers[0].volumes.insert(
        String::new(),
        ContainerVolume {
            path: "relative".into(),
            claim_name: "data".into(),
            ..Default::default()
        },
    );
    mc.spec.containers[0]
        .environment
        .insert("A.B".into(), "\0".into());
    let fields = fields(&mc);
    for expected in [
        r#"spec.containers[0].volumes[""].path"#,
        r#"spec.containers[0].volumes[""]"#,
        r#"spec.containers[0].environment["A.B"]"#,
    ] {
        assert!(
            fields.iter().any(|f| f == expected),
            "{expected}: {fields:?}"
        );
    }
}

mod accepted_renders;

const PLACED: &str = r#"
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: placed
  labels: {kueue.x-k8s.io/queue-name: hpc}
spec:
  size: 3
  maxSize: 4
  placement: {required: example.com/rack}
  containers:
    - image: app
      command: app
"#;

fn pod_annotations(mc: &MiniCluster) -> Vec<BTreeMap<String, String>> {
    let js = crate::render::jobset(&cluster(mc), "cm");
    js.spec
        .replicated_jobs
        .iter()
        .map(|rj| {
            let job = rj.template.spec.as_ref().expect("job spec");
            let meta = job.template.metadata.as_ref().expect("pod metadata");
            meta.annotations.clone().unwrap_or_default()
        })
        .collect()
}

#[test]
fn placement_puts_one_topology_request_and_one_group_on_the_lead_and_the_followers() {
    let mc = manifest(PLACED);
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
    let both = pod_annotations(&mc);
    assert_eq!(both.len(), 2, "lead and followers");
    for annotations in both {
        assert_eq!(
            annotations.get(KUEUE_REQUIRED_TOPOLOGY).map(String::as_str),
            Some("example.com/rack")
        );
        assert_eq!(
            annotations.get(KUEUE_PODSET_GROUP).map(String::as_str),
            Some(PLACEMENT_GROUP)
        );
        assert!(!annotations.contains_key(KUEUE_PREFERRED_TOPOLOGY));
    }
}

#[test]
fn preferred_placement_of_a_lone_lead_has_no_group() {
    let mut mc = manifest(PLACED);
    mc.spec.size = 1;
    mc.spec.max_size = None;
    mc.spec.placement = Some(Placement {
        required: None,
        preferred: Some("example.com/block".into()),
    });
    let only = pod_annotations(&mc);
    assert_eq!(only.len(), 1, "a cluster of one has no followers job");
    assert_eq!(
        only[0].get(KUEUE_PREFERRED_TOPOLOGY).map(String::as_str),
        Some("example.com/block")
    );
    assert!(
        !only[0].contains_key(KUEUE_PODSET_GROUP),
        "Kueue groups exactly two pod sets"
    );
}

#[test]
fn placement_without_a_kueue_queue_is_refused_naming_the_field() {
    let mut mc = manifest(PLACED);
    mc.metadata.labels = None;
    assert_eq!(only_error(&mc).0, "spec.placement");
    mc.spec
        .job_labels
        .insert(KUEUE_QUEUE_LABEL.into(), "hpc".into());
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
}

#[test]
fn a_pod_annotation_that_placement_sets_is_refused_naming_the_annotation() {
    let mut mc = manifest(PLACED);
    mc.spec
        .pod
        .annotations
        .insert(KUEUE_PODSET_GROUP.into(), "mine".into());
    let (field, message) = only_error(&mc);
    assert_eq!(
        field,
        r#"spec.pod.annotations["kueue.x-k8s.io/podset-group-name"]"#
    );
    assert!(message.contains("spec.placement"), "{message}");
}

#[test]
fn the_archive_must_be_on_a_writable_volume_that_outlives_the_pod() {
    let with = |volumes: &str| {
        manifest(&format!(
            "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {{name: m}}\n\
             spec:\n  archive: {{path: /state/q/flux.tar.gz}}\n  containers:\n  - image: app\n    \
             volumes: {volumes}\n"
        ))
    };
    // (what it proves, the volumes, refused with a message containing)
    let cases = [
        ("a claim", "{state: {path: /state, claimName: c}}", None),
        (
            "a host path",
            "{state: {path: /state/, hostPath: /data}}",
            None,
        ),
        (
            "a CSI volume",
            "{state: {path: /state, csiDriver: d}}",
            None,
        ),
        (
            "the deepest mount decides: an emptyDir inside a claim",
            "{state: {path: /state, claimName: c}, scratch: {path: /state/q, emptyDir: true}}",
            Some("does not outlive the pod"),
        ),
        (
            "an emptyDir",
            "{state: {path: /state, emptyDir: true}}",
            Some("does not outlive the pod"),
        ),
        (
            "a Secret",
            "{state: {path: /state, secretName: s}}",
            Some("does not outlive the pod"),
        ),
        (
            "read-only",
            "{state: {path: /state, claimName: c, readOnly: true}}",
            Some("readOnly"),
        ),
        (
            "a mount whose path only shares a prefix",
            "{state: {path: /sta, claimName: c}}",
            Some("own filesystem"),
        ),
        ("no volume", "{}", Some("own filesystem")),
    ];
    for (what, volumes, refused) in cases {
        let errors = validate(&with(volumes));
        let archive: Vec<_> = errors
            .iter()
            .filter(|e| e.field == "spec.archive.path")
            .collect();
        match refused {
            None => assert!(archive.is_empty(), "{what}: {errors:?}"),
            Some(words) => assert!(
                archive.len() == 1 && archive[0].message.contains(words),
                "{what}: {errors:?}"
            ),
        }
    }
}

fn with_volume(path: &str, read_only: bool) -> MiniCluster {
    let mut mc = manifest(HELLO);
    let volume = ContainerVolume {
        path: path.into(),
        claim_name: "data".into(),
        read_only,
        ..Default::default()
    };
    mc.spec.containers[0].volumes.insert("d".into(), volume);
    mc
}

#[test]
fn a_mount_path_with_dot_dot_or_nesting_with_the_operators_mounts_is_refused_naming_the_volume() {
    let path = "spec.containers[0].volumes.d.path";
    let want = |bad: bool| if bad { vec![path.to_string()] } else { vec![] };
    let cases = [
        ("/data", false, false),
        ("/mnt", false, false),
        ("/data/../mnt/flux", false, true),
        ("/data/./x", false, true),
        ("/mnt/flux/inside", false, true),
        ("/etc/flux-operator/curve/x", false, true),
        ("/run/flux-operator/sock", false, true),
        ("/opt/software/bin", false, true),
        ("/mnt", true, true),
        ("/opt", true, true),
        ("/opt/data", true, false),
        ("/mnt/fluxdata", true, false),
    ];
    for (p, read_only, bad) in cases {
        let mc = with_volume(p, read_only);
        assert_eq!(
            fields(&mc),
            want(bad),
            "{p} read-only {read_only}: {:?}",
            validate(&mc)
        );
    }
    let mut mc = manifest(HELLO);
    mc.spec.flux.container.mount_path = "/mnt/../etc".into();
    assert_eq!(fields(&mc), ["spec.flux.container.mountPath"]);
}

#[test]
fn environment_names_the_entrypoints_depend_on_are_refused_naming_the_variable() {
    let with = |name: &str, value: &str| {
        let mut mc = manifest(HELLO);
        mc.spec.containers[0]
            .environment
            .insert(name.into(), value.into());
        mc
    };
    let field = |name: &str| format!("spec.containers[0].environment.{name}");
    for name in [
        "IFS",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "PS4",
        "FLUX_URI",
        "FLUX_OPERATOR_ROLE",
    ] {
        assert_eq!(fields(&with(name, "x")), [field(name)], "{name}");
    }
    assert_eq!(fields(&with("PATH", "/opt/conda/bin")), [field("PATH")]);
    for (name, value) in [
        ("PATH", "/opt/conda/bin:/usr/local/bin:/usr/bin:/bin"),
        ("LD_LIBRARY_PATH", "/opt/lib"),
        ("HOME", "/home/me"),
        ("FLUX_SHELL_RC", "x"),
    ] {
        assert!(fields(&with(name, value)).is_empty(), "{name}={value}");
    }
    let mut mc = manifest(HELLO);
    mc.spec.flux.environment.insert("IFS".into(), ",".into());
    mc.spec.containers[0].secrets.insert(
        "BASH_ENV".into(),
        SecretKeyRef {
            name: "s".into(),
            key: "k".into(),
        },
    );
    assert_eq!(
        fields(&mc),
        [
            "spec.containers[0].secrets.BASH_ENV",
            "spec.flux.environment.IFS"
        ]
    );
}

#[test]
fn job_and_pod_labels_cannot_take_the_operators_or_the_controllers_labels() {
    for key in [
        NAME_LABEL,
        "app.kubernetes.io/managed-by",
        "jobset.sigs.k8s.io/jobset-name",
        "batch.kubernetes.io/controller-uid",
        "job-name",
    ] {
        let mut mc = manifest(HELLO);
        mc.spec.job_labels.insert(key.into(), "x".into());
        mc.spec.pod.labels.insert(key.into(), "x".into());
        assert_eq!(fields(&mc), ["spec.jobLabels", "spec.pod.labels"], "{key}");
        assert!(validate(&mc)[0].message.contains(key), "{key}");
    }
    let mut mc = manifest(HELLO);
    mc.spec.job_labels.insert("team".into(), "a".into());
    mc.spec
        .job_labels
        .insert(KUEUE_QUEUE_LABEL.into(), "q".into());
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
}

#[test]
fn a_flux_view_container_name_that_is_not_a_dns_label_is_refused_naming_the_field() {
    let mut mc = manifest(HELLO);
    mc.spec.flux.container.name = "Flux_View".into();
    assert_eq!(fields(&mc), ["spec.flux.container.name"]);
}

#[test]
fn programs_beyond_their_sum_are_refused_naming_the_spec_as_the_api_servers_rule_does() {
    use crate::api::bounds::{MAX_PROGRAM, MAX_PROGRAMS};
    let mut mc = manifest(HELLO);
    let long = "x".repeat(MAX_PROGRAM as usize);
    mc.spec.containers[0].commands.init = long.clone();
    mc.spec.containers[0].commands.post = long.clone();
    mc.spec.containers[0].commands.pre = long.clone();
    assert!(validate(&mc).is_empty(), "{:?}", validate(&mc));
    mc.spec.containers[0].commands.worker_pre = long;
    let (field, message) = only_error(&mc);
    assert_eq!(field, "spec");
    assert!(message.contains(&MAX_PROGRAMS.to_string()), "{message}");
}

/// How the view reaches the pods: the spec's `imageVolume` when it says, else the
/// operator's default; no view at all with `disable`, whatever either says.
#[test]
fn the_view_is_an_image_volume_as_the_spec_or_else_the_operator_says() {
    use crate::model::{Environment, View};
    for (spec, operator, disable, want) in [
        (None, false, false, Some(View::Copy)),
        (None, true, false, Some(View::ImageVolume)),
        (Some(true), false, false, Some(View::ImageVolume)),
        (Some(false), true, false, Some(View::Copy)),
        (Some(true), true, true, None),
        (None, true, true, None),
    ] {
        let mut mc = crate::fixtures::with_command("mc", 2, "hostname");
        mc.spec.flux.container.image_volume = spec;
        mc.spec.flux.container.disable = disable;
        let env = Environment {
            cluster_domain: "cluster.local".into(),
            view_image_volume: operator,
        };
        let cluster = crate::model::resolve(&mc, &env).unwrap();
        assert_eq!(cluster.view, want, "{spec:?} {operator} {disable}");
    }
}

/// The quorum: `minSize` when set, else `size` when `maxSize` lists more hosts, else
/// Flux's default (all ranks).
#[test]
fn the_quorum_is_min_size_else_size_when_max_size_exceeds_it() {
    use crate::fixtures::with_spec;
    use crate::model::Sizes;
    let sizes = |spec: &str| Sizes::of(&with_spec("mc", "default", spec));
    let grows = sizes("size: 3\nmaxSize: 6\ncontainers:\n- image: app");
    assert_eq!((grows.size, grows.max_size, grows.quorum), (3, 6, Some(3)));
    let min = sizes("size: 3\nmaxSize: 6\nminSize: 2\ncontainers:\n- image: app");
    assert_eq!(min.quorum, Some(2));
    let fixed = sizes("size: 3\ncontainers:\n- image: app");
    assert_eq!((fixed.max_size, fixed.quorum), (3, None));
}
