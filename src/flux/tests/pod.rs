//! Pod pieces: volumes, mounts, the view init container, environment, probe, Services.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::MiniClusterContainer;
use crate::flux::pod::{self, CONFIG_VOLUME, CURVE_VOLUME, RUN_VOLUME, VIEW_VOLUME};
use crate::flux::{self, CONFIG_MOUNT, CURVE_MOUNT, RUN_MOUNT, Role};

use super::mc_command;

fn mounts_of(
    m: &[k8s_openapi::api::core::v1::VolumeMount],
) -> Vec<(String, String, bool, Option<String>)> {
    m.iter()
        .map(|m| {
            (
                m.name.clone(),
                m.mount_path.clone(),
                m.read_only == Some(true),
                m.sub_path.clone(),
            )
        })
        .collect()
}

fn t(
    name: &str,
    path: &str,
    ro: bool,
    sub: Option<&str>,
) -> (String, String, bool, Option<String>) {
    (name.into(), path.into(), ro, sub.map(Into::into))
}

#[test]
fn volumes_and_mounts_with_the_view() {
    let mc = mc_command("mc", 2, "hostname");
    let volumes = flux::pod_volumes(&mc, "mc-flux", "mc-curve");
    let names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [CONFIG_VOLUME, CURVE_VOLUME, RUN_VOLUME, VIEW_VOLUME]
    );
    assert_eq!(volumes[0].config_map.as_ref().unwrap().name, "mc-flux");
    let secret = volumes[1].secret.as_ref().unwrap();
    assert_eq!(secret.secret_name.as_deref(), Some("mc-curve"));
    assert_eq!(secret.default_mode, Some(0o400));
    assert!(volumes[2].empty_dir.is_some() && volumes[3].empty_dir.is_some());

    assert_eq!(
        mounts_of(&flux::flux_container_mounts(&mc)),
        [
            t(CONFIG_VOLUME, CONFIG_MOUNT, true, None),
            t(CURVE_VOLUME, CURVE_MOUNT, true, None),
            t(RUN_VOLUME, RUN_MOUNT, false, None),
            t(VIEW_VOLUME, "/mnt/flux", true, None),
            t(VIEW_VOLUME, "/opt/software", true, Some("software")),
        ]
    );
    assert_eq!(
        mounts_of(&flux::service_container_mounts(&mc)),
        [
            t(CONFIG_VOLUME, CONFIG_MOUNT, true, None),
            t(RUN_VOLUME, RUN_MOUNT, true, None),
            t(VIEW_VOLUME, "/mnt/flux", true, None),
            t(VIEW_VOLUME, "/opt/software", true, Some("software")),
        ]
    );
}

#[test]
fn no_view_when_disabled() {
    let mut mc = mc_command("mc", 2, "hostname");
    mc.spec.flux.container.disable = true;
    assert!(flux::view_init_container(&mc).is_none());
    assert!(
        !flux::pod_volumes(&mc, "a", "b")
            .iter()
            .any(|v| v.name == VIEW_VOLUME)
    );
    assert!(
        !flux::flux_container_mounts(&mc)
            .iter()
            .any(|m| m.name == VIEW_VOLUME)
    );
    let data = flux::config_map_data(&mc, &super::ctx()).unwrap();
    assert!(!data.contains_key("view-init.sh"));
    let env = flux::flux_container_env(&mc, Role::Lead);
    assert_eq!(
        env.iter()
            .find(|e| e.name == "FLUX_OPERATOR_VIEW")
            .unwrap()
            .value
            .as_deref(),
        Some("")
    );
}

#[test]
fn curve_secret_mode_fits_the_user() {
    let mut mc = mc_command("mc", 2, "hostname");
    assert_eq!(pod::curve_secret_mode(&mc), 0o400);
    mc.spec.pod.security_context = Some(Default::default());
    mc.spec.pod.security_context.as_mut().unwrap().run_as_user = Some(1000);
    assert_eq!(
        pod::curve_secret_mode(&mc),
        0o444,
        "a non-root user cannot read a root-owned 0400 file"
    );
    mc.spec.pod.security_context.as_mut().unwrap().fs_group = Some(1000);
    assert_eq!(pod::curve_secret_mode(&mc), 0o440);
    mc.spec.pod.security_context.as_mut().unwrap().fs_group = None;
    mc.spec.containers[0].security_context = Some(Default::default());
    mc.spec.containers[0]
        .security_context
        .as_mut()
        .unwrap()
        .run_as_user = Some(0);
    assert_eq!(
        pod::curve_secret_mode(&mc),
        0o400,
        "the container's user wins"
    );
}

#[test]
fn view_init_container_runs_as_non_root() {
    let mut mc = mc_command("mc", 2, "hostname");
    mc.spec.flux.container.pull_always = true;
    let c = flux::view_init_container(&mc).unwrap();
    assert_eq!(c.name, "flux-view");
    assert_eq!(c.image.as_deref(), Some(crate::api::DEFAULT_VIEW_IMAGE));
    assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(
        c.command.unwrap(),
        ["/bin/sh", &format!("{CONFIG_MOUNT}/view-init.sh")]
    );
    let sc = c.security_context.unwrap();
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(sc.run_as_user, Some(pod::VIEW_INIT_USER));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(
        mounts_of(&c.volume_mounts.unwrap()),
        [
            t(VIEW_VOLUME, "/mnt/flux", false, None),
            t(CONFIG_VOLUME, CONFIG_MOUNT, true, None)
        ]
    );
    // The user's security context replaces the default.
    let own = k8s_openapi::api::core::v1::SecurityContext {
        run_as_user: Some(0),
        ..Default::default()
    };
    mc.spec.flux.container.security_context = Some(own.clone());
    assert_eq!(
        flux::view_init_container(&mc).unwrap().security_context,
        Some(own)
    );
}

#[test]
fn commands_and_env() {
    let mut mc = mc_command("mc", 2, "hostname");
    mc.spec.containers[0]
        .environment
        .insert("A".into(), "1".into());
    mc.spec.containers[0].secrets.insert(
        "TOKEN".into(),
        crate::api::SecretKeyRef {
            name: "s".into(),
            key: "k".into(),
        },
    );
    assert_eq!(
        flux::flux_container_command(&mc, Role::Lead),
        ["/bin/bash", "/etc/flux-operator/config/lead.sh"]
    );
    assert_eq!(
        flux::flux_container_command(&mc, Role::Worker),
        ["/bin/bash", "/etc/flux-operator/config/worker.sh"]
    );
    let env = flux::flux_container_env(&mc, Role::Worker);
    let get = |n: &str| env.iter().find(|e| e.name == n).unwrap().clone();
    assert_eq!(
        get("FLUX_OPERATOR_CONFIG_DIR").value.as_deref(),
        Some(CONFIG_MOUNT)
    );
    assert_eq!(
        get("FLUX_OPERATOR_CURVE_DIR").value.as_deref(),
        Some(CURVE_MOUNT)
    );
    assert_eq!(
        get("FLUX_OPERATOR_RUN_DIR").value.as_deref(),
        Some(RUN_MOUNT)
    );
    assert_eq!(
        get("FLUX_OPERATOR_VIEW").value.as_deref(),
        Some("/mnt/flux")
    );
    assert_eq!(get("FLUX_OPERATOR_ROLE").value.as_deref(), Some("worker"));
    assert_eq!(get("A").value.as_deref(), Some("1"));
    let token = get("TOKEN").value_from.unwrap().secret_key_ref.unwrap();
    assert_eq!((token.name.as_str(), token.key.as_str()), ("s", "k"));
}

#[test]
fn service_commands() {
    let mut mc = mc_command("mc", 2, "hostname");
    mc.spec.services.push(MiniClusterContainer {
        name: "web".into(),
        command: "nginx -g 'daemon off;'".into(),
        ..Default::default()
    });
    mc.spec.services.push(MiniClusterContainer {
        name: "own".into(),
        command: "--port 80 --name 'a b'".into(),
        no_wrap_entrypoint: true,
        ..Default::default()
    });
    mc.spec.services.push(MiniClusterContainer {
        name: "bare".into(),
        ..Default::default()
    });
    assert_eq!(
        flux::service_container_command(&mc, 0).unwrap(),
        ["/bin/sh", "/etc/flux-operator/config/service-web.sh"]
    );
    assert_eq!(flux::service_container_args(&mc, 0), None);
    assert_eq!(flux::service_container_command(&mc, 1), None);
    assert_eq!(
        flux::service_container_args(&mc, 1).unwrap(),
        ["--port", "80", "--name", "a b"]
    );
    assert_eq!(flux::service_container_command(&mc, 2), None);
    assert_eq!(flux::service_container_args(&mc, 2), None);
    assert_eq!(flux::service_container_command(&mc, 3), None);
    let data = flux::config_map_data(&mc, &super::ctx()).unwrap();
    assert!(data.contains_key("service-web.sh"));
    assert!(!data.contains_key("service-own.sh"));
}

#[test]
fn lead_readiness_probe() {
    let mc = mc_command("mc", 2, "hostname");
    let probe = flux::lead_readiness_probe(&mc);
    assert_eq!(
        probe.tcp_socket.unwrap().port,
        IntOrString::Int(flux::BROKER_PORT)
    );
    // One broker binds no TBON port: the probe looks for its socket.
    let one = mc_command("mc", 1, "hostname");
    let probe = flux::lead_readiness_probe(&one);
    assert!(probe.tcp_socket.is_none());
    assert_eq!(
        probe.exec.unwrap().command.unwrap(),
        ["test", "-S", flux::SOCKET_PATH]
    );
}

#[test]
fn sidecar_and_minimal_services() {
    let mut mc = mc_command("mc", 2, "hostname");
    mc.spec.services.push(MiniClusterContainer {
        name: "api".into(),
        ports: vec![5000, 8080],
        ..Default::default()
    });
    mc.spec.services.push(MiniClusterContainer {
        name: "noports".into(),
        ..Default::default()
    });
    let services = flux::sidecar_services(&mc).unwrap();
    assert_eq!(services.len(), 1);
    assert_eq!(services[0].name, "mc-api");
    assert_eq!(
        services[0].ports.iter().map(|p| p.port).collect::<Vec<_>>(),
        [5000, 8080]
    );
    mc.spec.services[0].name = "x".repeat(62);
    assert_eq!(
        flux::sidecar_services(&mc).unwrap_err().field(),
        Some("spec.services[0].name")
    );

    assert_eq!(flux::minimal_service(&mc).unwrap(), None);
    mc.spec.flux.minimal_service = true;
    mc.spec.network.headless_name = "net".into();
    let lead = flux::minimal_service(&mc).unwrap().unwrap();
    assert_eq!(lead.name, "net");
    assert_eq!(lead.port.port, 8050);
    mc.spec.flux.topology = "kary:2".into();
    assert_eq!(
        flux::minimal_service(&mc).unwrap_err().field(),
        Some("spec.flux.minimalService")
    );
}

#[test]
fn errors_name_the_field() {
    let mut mc = mc_command("mc", 2, "hostname");
    mc.spec.flux.option_flags = "-o 'unbalanced".into();
    assert_eq!(
        flux::config_map_data(&mc, &super::ctx())
            .unwrap_err()
            .field(),
        Some("spec.flux.optionFlags")
    );
    let mut mc = mc_command("mc", 2, "hostname");
    mc.spec.flux.submit_command = "flux \"run".into();
    assert_eq!(
        flux::config_map_data(&mc, &super::ctx())
            .unwrap_err()
            .field(),
        Some("spec.flux.submitCommand")
    );
    let mut mc = mc_command("mc", 2, "hostname");
    mc.spec.containers[0].commands.prefix = "'x".into();
    assert_eq!(
        flux::config_map_data(&mc, &super::ctx())
            .unwrap_err()
            .field(),
        Some("spec.containers[0].commands.prefix")
    );
    let mut mc = mc_command("mc", 2, "hostname");
    mc.spec.flux.environment.insert("1BAD".into(), "x".into());
    assert_eq!(
        flux::config_map_data(&mc, &super::ctx())
            .unwrap_err()
            .field(),
        Some("spec.flux.environment.1BAD")
    );
    let mut mc = mc_command("mc", 2, "a\0b");
    assert_eq!(
        flux::config_map_data(&mc, &super::ctx())
            .unwrap_err()
            .field(),
        Some("spec.containers[0].command")
    );
    mc.spec.containers.push(mc.spec.containers[0].clone());
    assert_eq!(
        flux::config_map_data(&mc, &super::ctx())
            .unwrap_err()
            .field(),
        Some("spec.containers")
    );
}
