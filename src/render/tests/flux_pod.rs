//! Pod pieces: volumes, mounts, the view init container, environment, probe, Services
//! (the objects are render's, what goes in them the flux module's).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::MiniClusterContainer;
use crate::fixtures::with_command;
use crate::flux::{self, Role};
use crate::model::View;
use crate::model::containers::{ARCHIVE_INIT, Companion};
use crate::model::mounts::{
    self, CONFIG_MOUNT, CONFIG_VOLUME, CURVE_MOUNT, CURVE_VOLUME, KEY_MOUNT, KEY_VOLUME, RUN_MOUNT,
    RUN_VOLUME, STATE_MOUNT, STATE_VOLUME, VIEW_VOLUME,
};
use crate::model::network::PortTarget;
use crate::render::flux_pod;
use crate::render::{self};
use k8s_openapi::api::core::v1::{ImageVolumeSource, VolumeMount};

/// The view of the mount tests: copied (an image volume mounts at the same paths).
const COPY: Option<View> = Some(View::Copy);

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

/// An interactive cluster's lead keeps the instance's state in an emptyDir of its Flux
/// container, mounted in no other container; a cluster with a program has none.
#[test]
fn an_interactive_cluster_has_a_state_volume_for_its_flux_container_only() {
    let mut mc = with_command("mc", 2, "");
    mc.spec.interactive = true;
    let cluster = crate::fixtures::cluster(&mc);
    let volumes = flux_pod::pod_volumes(&cluster, "mc-flux", "mc-curve");
    let names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, mounts::RESERVED_VOLUMES);
    let state = volumes.iter().find(|v| v.name == STATE_VOLUME).unwrap();
    assert!(
        state.empty_dir.as_ref().is_some_and(|e| e.medium.is_none()),
        "on the node's disk"
    );
    assert!(
        mounts_of(&mounts::flux_container_mounts(&mc, COPY)).contains(&t(
            STATE_VOLUME,
            STATE_MOUNT,
            false,
            None
        ))
    );
    mc.spec.containers[0].run_flux = true;
    mc.spec.containers.push(MiniClusterContainer {
        name: "side".into(),
        ..Default::default()
    });
    let side = mounts::companion_mounts(&mc, Companion::Container(1), COPY);
    assert!(side.iter().all(|m| m.name != STATE_VOLUME), "{side:?}");

    let batch = with_command("mc", 2, "hostname");
    let volumes = flux_pod::pod_volumes(&crate::fixtures::cluster(&batch), "mc-flux", "mc-curve");
    assert!(volumes.iter().all(|v| v.name != STATE_VOLUME));
}

#[test]
fn volumes_and_mounts_with_the_view() {
    let mc = with_command("mc", 2, "hostname");
    let volumes = flux_pod::pod_volumes(&crate::fixtures::cluster(&mc), "mc-flux", "mc-curve");
    let names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            CONFIG_VOLUME,
            CURVE_VOLUME,
            RUN_VOLUME,
            KEY_VOLUME,
            VIEW_VOLUME
        ]
    );
    assert_eq!(names, mounts::RESERVED_VOLUMES[..5]);
    assert_eq!(volumes[0].config_map.as_ref().unwrap().name, "mc-flux");
    let secret = volumes[1].secret.as_ref().unwrap();
    assert_eq!(secret.secret_name.as_deref(), Some("mc-curve"));
    assert_eq!(secret.default_mode, Some(0o400));
    assert!(volumes[2..].iter().all(|v| v.empty_dir.is_some()));

    assert_eq!(
        mounts_of(&mounts::flux_container_mounts(&mc, COPY)),
        [
            t(CONFIG_VOLUME, CONFIG_MOUNT, true, None),
            t(CURVE_VOLUME, CURVE_MOUNT, true, None),
            t(RUN_VOLUME, RUN_MOUNT, false, None),
            t(KEY_VOLUME, KEY_MOUNT, false, None),
            t(VIEW_VOLUME, "/mnt/flux", true, None),
            t(VIEW_VOLUME, "/opt/software", true, Some("software")),
        ]
    );
    // A container beside the broker: its wrapper, the socket, the view; in the services
    // pod only its wrapper (and nothing when it is not wrapped).
    let mut mc = mc;
    mc.spec.containers[0].run_flux = true;
    mc.spec.containers.push(MiniClusterContainer {
        name: "side".into(),
        ..Default::default()
    });
    mc.spec.services.push(MiniClusterContainer {
        name: "web".into(),
        command: "nginx".into(),
        ..Default::default()
    });
    mc.spec.services.push(MiniClusterContainer {
        name: "bare".into(),
        ..Default::default()
    });
    assert_eq!(
        mounts_of(&mounts::companion_mounts(
            &mc,
            Companion::Container(1),
            COPY
        )),
        [
            t(CONFIG_VOLUME, CONFIG_MOUNT, true, None),
            t(RUN_VOLUME, RUN_MOUNT, true, None),
            t(VIEW_VOLUME, "/mnt/flux", true, None),
            t(VIEW_VOLUME, "/opt/software", true, Some("software")),
        ]
    );
    assert_eq!(
        mounts_of(&mounts::companion_mounts(&mc, Companion::Service(0), COPY)),
        [t(CONFIG_VOLUME, CONFIG_MOUNT, true, None)]
    );
    assert!(mounts::companion_mounts(&mc, Companion::Service(1), COPY).is_empty());
}

/// With `imageVolume` the view image is the volume: no init container and no `view-init.sh`,
/// the image's /opt at `mountPath` and its /opt/software at /opt/software (read-only, in
/// every broker container), pulled as the init container's image would be, and
/// `flux-view.sh` in the ConfigMap.
#[test]
fn an_image_volume_view_mounts_the_image_and_copies_nothing() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.containers[0].run_flux = true;
    mc.spec.containers.push(MiniClusterContainer {
        name: "side".into(),
        image: "busybox".into(),
        ..Default::default()
    });
    mc.spec.flux.container.image_volume = Some(true);
    mc.spec.flux.container.pull_always = true;
    let cluster = crate::fixtures::cluster(&mc);
    assert_eq!(cluster.view, Some(View::ImageVolume));
    assert!(flux_pod::view_init_container(&cluster).is_none());
    let volume = flux_pod::pod_volumes(&cluster, "a", "b")
        .into_iter()
        .find(|v| v.name == VIEW_VOLUME)
        .unwrap();
    assert_eq!(
        (volume.image, volume.empty_dir),
        (
            Some(ImageVolumeSource {
                reference: Some(mc.spec.flux.container.image.clone()),
                pull_policy: Some("Always".into()),
            }),
            None
        )
    );
    let view_mounts = |mounts: &[VolumeMount]| -> Vec<(String, Option<String>, Option<bool>)> {
        mounts
            .iter()
            .filter(|m| m.name == VIEW_VOLUME)
            .map(|m| (m.mount_path.clone(), m.sub_path.clone(), m.read_only))
            .collect()
    };
    let want = vec![
        ("/mnt/flux".to_string(), Some("opt".to_string()), Some(true)),
        (
            "/opt/software".into(),
            Some("opt/software".into()),
            Some(true),
        ),
    ];
    assert_eq!(view_mounts(&cluster.flux_mounts), want);
    assert_eq!(view_mounts(&cluster.companions[0].mounts), want);
    let data = flux::config_map_data(&cluster).unwrap();
    assert!(!data.contains_key("view-init.sh"));
    assert!(data["flux-view.sh"].contains("view_dir=/mnt/flux"));
}

#[test]
fn no_view_when_disabled() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.flux.container.disable = true;
    assert!(flux_pod::view_init_container(&crate::fixtures::cluster(&mc)).is_none());
    assert!(
        !flux_pod::pod_volumes(&crate::fixtures::cluster(&mc), "a", "b")
            .iter()
            .any(|v| v.name == VIEW_VOLUME)
    );
    assert!(
        !crate::fixtures::cluster(&mc)
            .flux_mounts
            .iter()
            .any(|m| m.name == VIEW_VOLUME)
    );
    let data = flux::config_map_data(&crate::fixtures::cluster(&mc)).unwrap();
    assert!(!data.contains_key("view-init.sh"));
    let env = flux_pod::flux_container_env(&crate::fixtures::cluster(&mc), Role::Lead);
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
    let mut mc = with_command("mc", 2, "hostname");
    assert_eq!(
        flux::curve_secret_mode(&crate::fixtures::cluster(&mc)),
        0o400
    );
    mc.spec.pod.security_context = Some(Default::default());
    mc.spec.pod.security_context.as_mut().unwrap().run_as_user = Some(1000);
    assert_eq!(
        flux::curve_secret_mode(&crate::fixtures::cluster(&mc)),
        0o444,
        "a non-root user cannot read a root-owned 0400 file"
    );
    mc.spec.pod.security_context.as_mut().unwrap().fs_group = Some(1000);
    assert_eq!(
        flux::curve_secret_mode(&crate::fixtures::cluster(&mc)),
        0o440
    );
    mc.spec.pod.security_context.as_mut().unwrap().fs_group = None;
    mc.spec.containers[0].security_context = Some(Default::default());
    mc.spec.containers[0]
        .security_context
        .as_mut()
        .unwrap()
        .run_as_user = Some(0);
    assert_eq!(
        flux::curve_secret_mode(&crate::fixtures::cluster(&mc)),
        0o400,
        "the container's user wins"
    );
}

#[test]
fn view_init_container_runs_as_non_root() {
    let mut mc = with_command("mc", 2, "hostname");
    let default = flux_pod::view_init_container(&crate::fixtures::cluster(&mc)).unwrap();
    assert_eq!(
        default.image_pull_policy.as_deref(),
        Some("IfNotPresent"),
        "as the Go operator: pulled only when missing"
    );
    mc.spec.flux.container.pull_always = true;
    let c = flux_pod::view_init_container(&crate::fixtures::cluster(&mc)).unwrap();
    assert_eq!(c.name, "flux-view");
    assert_eq!(c.image.as_deref(), Some(crate::api::DEFAULT_VIEW_IMAGE));
    assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(
        c.command.unwrap(),
        ["/bin/sh", &format!("{CONFIG_MOUNT}/view-init.sh")]
    );
    let sc = c.security_context.unwrap();
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(sc.run_as_user, Some(flux_pod::VIEW_INIT_USER));
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
        flux_pod::view_init_container(&crate::fixtures::cluster(&mc))
            .unwrap()
            .security_context,
        Some(own)
    );
}

#[test]
fn commands_and_env() {
    let mut mc = with_command("mc", 2, "hostname");
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
        flux::flux_container_command(Role::Lead),
        ["/bin/bash", "/etc/flux-operator/config/lead.sh"]
    );
    assert_eq!(
        flux::flux_container_command(Role::Follower),
        ["/bin/bash", "/etc/flux-operator/config/follower.sh"]
    );
    let env = flux_pod::flux_container_env(&crate::fixtures::cluster(&mc), Role::Follower);
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
        get("FLUX_OPERATOR_KEY_DIR").value.as_deref(),
        Some(KEY_MOUNT)
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

/// A service runs the wrapper when it has a command, else the image's entrypoint (with its
/// command as the args under noWrapEntrypoint).
#[test]
fn services_are_wrapped_unless_they_keep_their_entrypoint() {
    let mut mc = with_command("mc", 2, "hostname");
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
    let service = Companion::Service;
    let cluster = crate::fixtures::cluster(&mc);
    let companion = |which| cluster.companion(which).unwrap();
    assert_eq!(
        flux::companion_command(companion(service(0))).unwrap(),
        ["/bin/sh", "/etc/flux-operator/config/service.web.sh"]
    );
    assert_eq!(flux::companion_args(companion(service(0))), None);
    assert_eq!(flux::companion_command(companion(service(1))), None);
    assert_eq!(
        flux::companion_args(companion(service(1))).unwrap(),
        ["--port", "80", "--name", "a b"]
    );
    assert_eq!(flux::companion_command(companion(service(2))), None);
    assert_eq!(flux::companion_args(companion(service(2))), None);
    // Out of range: no such container.
    assert!(cluster.companion(service(3)).is_none());
    let data = flux::config_map_data(&crate::fixtures::cluster(&mc)).unwrap();
    assert!(data.contains_key("service.web.sh"));
    assert!(!data.contains_key("service.own.sh"));
}

/// Beside the Flux container: wrapped with a command or a hook (commands.post alone, as the
/// Go operator's REST API examples write it), else the image's entrypoint; a wrapped one's
/// environment (a service's gets none).
#[test]
fn containers_beside_flux_are_wrapped_when_they_have_something_to_run() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.services.push(MiniClusterContainer {
        name: "web".into(),
        command: "nginx -g 'daemon off;'".into(),
        ..Default::default()
    });
    let service = Companion::Service;
    mc.spec.containers[0].run_flux = true;
    let mut post = MiniClusterContainer {
        name: "api".into(),
        ..Default::default()
    };
    post.commands.post = "start-the-api".into();
    mc.spec.containers.push(post);
    mc.spec.containers.push(MiniClusterContainer {
        name: "registry".into(),
        ..Default::default()
    });
    mc.spec.containers.push(MiniClusterContainer {
        name: "nginx".into(),
        command: "-g 'daemon off;'".into(),
        no_wrap_entrypoint: true,
        ..Default::default()
    });
    let container = Companion::Container;
    let cluster = crate::fixtures::cluster(&mc);
    let companion = |which| cluster.companion(which).unwrap();
    assert_eq!(
        flux::companion_command(companion(container(1))).unwrap(),
        ["/bin/sh", "/etc/flux-operator/config/container.api.sh"]
    );
    assert_eq!(flux::companion_command(companion(container(2))), None);
    assert_eq!(flux::companion_args(companion(container(2))), None);
    assert_eq!(flux::companion_command(companion(container(3))), None);
    assert_eq!(
        flux::companion_args(companion(container(3))).unwrap(),
        ["-g", "daemon off;"]
    );
    // The Flux container is no companion.
    assert!(cluster.companion(container(0)).is_none());
    let data = flux::config_map_data(&crate::fixtures::cluster(&mc)).unwrap();
    assert!(data["container.api.post.sh"].contains("start-the-api"));
    assert!(data["container.api.sh"].contains("container.api.post.sh"));
    assert!(!data.contains_key("container.registry.sh"));
    // Its environment: where the wrapper finds things, the role, then its own.
    mc.spec.containers[1]
        .environment
        .insert("MINE".into(), "1".into());
    let env: Vec<(String, Option<String>)> = flux_pod::companion_env(
        &crate::fixtures::cluster(&mc),
        crate::fixtures::cluster(&mc)
            .companion(container(1))
            .unwrap(),
        Role::Follower,
    )
    .into_iter()
    .map(|e| (e.name, e.value))
    .collect();
    assert_eq!(
        env,
        [
            ("FLUX_OPERATOR_CONFIG_DIR".into(), Some(CONFIG_MOUNT.into())),
            ("FLUX_OPERATOR_RUN_DIR".into(), Some(RUN_MOUNT.into())),
            ("FLUX_OPERATOR_VIEW".into(), Some("/mnt/flux".into())),
            ("FLUX_OPERATOR_ROLE".into(), Some("worker".into())),
            ("MINE".into(), Some("1".into())),
        ]
    );
    assert!(
        flux_pod::companion_env(
            &crate::fixtures::cluster(&mc),
            crate::fixtures::cluster(&mc).companion(service(0)).unwrap(),
            Role::Lead
        )
        .is_empty()
    );
}

#[test]
fn lead_readiness_probe() {
    let mc = with_command("mc", 2, "hostname");
    let probe = flux_pod::lead_readiness_probe(&crate::fixtures::cluster(&mc));
    assert_eq!(
        probe.tcp_socket.unwrap().port,
        IntOrString::Int(flux::BROKER_PORT)
    );
    // One broker binds no TBON port: the probe looks for its socket.
    let one = with_command("mc", 1, "hostname");
    let probe = flux_pod::lead_readiness_probe(&crate::fixtures::cluster(&one));
    assert!(probe.tcp_socket.is_none());
    assert_eq!(
        probe.exec.unwrap().command.unwrap(),
        ["/bin/sh", "-c", "test -S /run/flux-operator/broker/local"]
    );
    assert_eq!(probe.period_seconds, Some(1));
    let mut quiet = one.clone();
    quiet.spec.flux.disable_socket = true;
    assert_eq!(
        flux_pod::lead_readiness_probe(&crate::fixtures::cluster(&quiet))
            .exec
            .unwrap()
            .command
            .unwrap(),
        ["true"]
    );
}

#[test]
fn follower_readiness_probe() {
    for (size, max) in [(2, None), (4, Some(8)), (2, Some(3))] {
        let mut mc = with_command("mc", size, "hostname");
        mc.spec.max_size = max;
        mc.spec.flux.topology = "kary:2".into();
        let probe =
            flux_pod::follower_readiness_probe(&crate::fixtures::cluster(&mc)).expect("a probe");
        // Joined: joined.py listens on its own port while the broker is in state run; not
        // the TBON port, which a follower binds in a tree.
        assert_eq!(
            probe.tcp_socket.as_ref().unwrap().port,
            IntOrString::Int(flux::JOINED_PORT)
        );
        assert_ne!(flux::JOINED_PORT, flux::BROKER_PORT);
        assert_eq!(
            probe.tcp_socket.as_ref().unwrap().host,
            None,
            "the pod's own address"
        );
        assert!(probe.exec.is_none() && probe.http_get.is_none());
        // Every second (the resolution of cluster-up), and a quick broker restart (under
        // 15 s) does not flap.
        assert_eq!(probe.period_seconds, Some(1));
        assert_eq!(probe.timeout_seconds, Some(1));
        assert_eq!(probe.failure_threshold, Some(15));
        assert_eq!(probe.success_threshold, Some(1));
        assert_eq!(probe.initial_delay_seconds, None);
    }
    // No known socket: no probe rather than one that claims readiness it cannot see.
    let mut mc = with_command("mc", 3, "hostname");
    mc.spec.flux.disable_socket = true;
    assert_eq!(
        flux_pod::follower_readiness_probe(&crate::fixtures::cluster(&mc)),
        None
    );
    // An archive keeps the socket (the save and the drain use it), so the probe too.
    crate::fixtures::archive_on_host(&mut mc, "/state/archive.tar.gz");
    assert!(flux_pod::follower_readiness_probe(&crate::fixtures::cluster(&mc)).is_some());
    // noWaitSocket only concerns companions: the socket is still there.
    let mut mc = with_command("mc", 3, "hostname");
    mc.spec.flux.no_wait_socket = true;
    assert!(flux_pod::follower_readiness_probe(&crate::fixtures::cluster(&mc)).is_some());
}

#[test]
fn paths_agree() {
    assert_eq!(
        flux::CURVE_PRIVATE_PATH,
        format!("{KEY_MOUNT}/{}", flux::CURVE_SECRET_KEY)
    );
    assert_eq!(flux::SOCKET_PATH, format!("{}/local", flux::BROKER_DIR));
    assert_eq!(flux::BROKER_DIR, format!("{RUN_MOUNT}/broker"));
    assert_eq!(flux::RESOURCE_PATH, format!("{}/R.json", flux::BROKER_DIR));
    assert!(!KEY_MOUNT.starts_with(&format!("{RUN_MOUNT}/")));
    assert!(!RUN_MOUNT.starts_with(&format!("{KEY_MOUNT}/")));
}

#[test]
fn port_and_lead_services() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.services.push(MiniClusterContainer {
        name: "api".into(),
        ports: vec![5000, 8080],
        ..Default::default()
    });
    mc.spec.services.push(MiniClusterContainer {
        name: "noports".into(),
        ..Default::default()
    });
    let ports = crate::fixtures::cluster(&mc).port_services;
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].name, "mc-api");
    assert_eq!(ports[0].target, PortTarget::ServicesPod);
    assert_eq!(ports[0].ports, [5000, 8080]);
    // A container beside the Flux container: a Service named after it, as the Go operator
    // names it, for every broker pod.
    mc.spec.containers[0].run_flux = true;
    mc.spec.containers.push(MiniClusterContainer {
        name: "nginx".into(),
        ports: vec![80],
        ..Default::default()
    });
    let ports = crate::fixtures::cluster(&mc).port_services;
    assert_eq!(ports[0].name, "nginx");
    assert_eq!(ports[0].target, PortTarget::BrokerPods);
    assert_eq!(ports[0].ports, [80]);
    // Names that would clash: with the subdomain's headless Service, with another Service.
    mc.spec.containers[1].name = "mc".into();
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.containers[1].name")
    );
    mc.spec.containers[1].name = "mc-api".into();
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.services[0].name")
    );
    mc.spec.containers.pop();
    mc.spec.services[0].name = "x".repeat(62);
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.services[0].name")
    );
    mc.spec.services[0].name = "api".into();

    assert_eq!(render::lead_service(&crate::fixtures::cluster(&mc)), None);
    mc.spec.flux.minimal_service = true;
    mc.spec.network.headless_name = "net".into();
    let lead = render::lead_service(&crate::fixtures::cluster(&mc)).unwrap();
    assert_eq!(lead.name, "net");
    assert_eq!(lead.port.port, 8050);
    mc.spec.flux.topology = "kary:2".into();
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.flux.minimalService")
    );
}

#[test]
fn errors_name_the_field() {
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.flux.option_flags = "-o 'unbalanced".into();
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.flux.optionFlags")
    );
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.flux.submit_command = "flux \"run".into();
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.flux.submitCommand")
    );
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.containers[0].commands.prefix = "'x".into();
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.containers[0].commands.prefix")
    );
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.flux.environment.insert("1BAD".into(), "x".into());
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        // The schema's rule names the map (the renderer's own check named the key).
        Some("spec.flux.environment")
    );
    let mut mc = with_command("mc", 2, "a\0b");
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.containers[0].command")
    );
    mc.spec.containers.push(mc.spec.containers[0].clone());
    assert_eq!(
        crate::fixtures::refused_field(&mc).as_deref(),
        Some("spec.containers")
    );
}

/// The private copy of the CURVE secret key lives in a volume that only the Flux container
/// mounts: companions share the run directory (the broker socket) but never see the key.
#[test]
fn only_the_flux_container_mounts_the_private_key() {
    let mut no_view = with_command("mc", 2, "hostname");
    no_view.spec.flux.container.disable = true;
    let mut mc = with_command("mc", 2, "hostname");
    mc.spec.services.push(MiniClusterContainer {
        name: "web".into(),
        command: "nginx".into(),
        ..Default::default()
    });
    let key_dir = std::path::Path::new(flux::CURVE_PRIVATE_PATH)
        .parent()
        .unwrap()
        .to_str()
        .unwrap();
    let sees_key = |m: &k8s_openapi::api::core::v1::VolumeMount| {
        m.name == KEY_VOLUME || flux::CURVE_PRIVATE_PATH.starts_with(&format!("{}/", m.mount_path))
    };
    for mc in [mc, no_view] {
        let volumes = flux_pod::pod_volumes(&crate::fixtures::cluster(&mc), "a", "b");
        let key = volumes
            .iter()
            .find(|v| v.name == KEY_VOLUME)
            .expect("a volume for the private key");
        assert_eq!(
            key.empty_dir.as_ref().unwrap().medium.as_deref(),
            Some("Memory"),
            "the key copy never touches the node's disk"
        );
        let flux_mounts = mounts::flux_container_mounts(&mc, COPY);
        let key_mounts: Vec<_> = flux_mounts.iter().filter(|m| sees_key(m)).collect();
        assert_eq!(key_mounts.len(), 1, "{flux_mounts:?}");
        assert_eq!(key_mounts[0].name, KEY_VOLUME);
        assert_eq!(key_mounts[0].mount_path, key_dir);
        assert_ne!(
            key_mounts[0].read_only,
            Some(true),
            "the entrypoint writes the copy"
        );

        let mut with_companion = mc.clone();
        with_companion.spec.containers[0].run_flux = true;
        with_companion.spec.containers.push(MiniClusterContainer {
            name: "side".into(),
            command: "true".into(),
            ..Default::default()
        });
        let service_mounts =
            mounts::companion_mounts(&with_companion, Companion::Container(1), COPY);
        assert!(
            service_mounts.iter().any(|m| m.name == RUN_VOLUME),
            "companions still share the broker socket"
        );
        assert!(
            flux::SOCKET_PATH.starts_with(&format!("{RUN_MOUNT}/")),
            "the socket stays in the shared run directory"
        );
        for m in &service_mounts {
            assert!(!sees_key(m), "a service container sees the key: {m:?}");
        }
        for m in flux_pod::view_init_container(&crate::fixtures::cluster(&mc))
            .and_then(|c| c.volume_mounts)
            .unwrap_or_default()
        {
            assert!(!sees_key(&m), "the view init container sees the key: {m:?}");
        }
    }
}

/// Service `a` with hooks and services named like those hooks' files get distinct
/// ConfigMap keys: every file each one needs is there, with its own content.
#[test]
fn service_files_never_collide() {
    let mut mc = with_command("mc", 2, "hostname");
    for name in ["a", "a-init", "a-pre", "init", "pre"] {
        let mut s = MiniClusterContainer {
            name: name.into(),
            command: format!("echo command-of-{name}"),
            ..Default::default()
        };
        s.commands.init = format!("echo init-of-{name}");
        s.commands.service_pre = format!("echo pre-of-{name}");
        mc.spec.services.push(s);
    }
    let data = flux::config_map_data(&crate::fixtures::cluster(&mc)).unwrap();
    let mut keys = std::collections::BTreeSet::new();
    for (i, s) in mc.spec.services.iter().enumerate() {
        let name = &s.name;
        let entry = flux::companion_command(
            crate::fixtures::cluster(&mc)
                .companion(Companion::Service(i))
                .unwrap(),
        )
        .unwrap()[1]
            .strip_prefix(&format!("{CONFIG_MOUNT}/"))
            .unwrap()
            .to_string();
        let script = &data[&entry];
        assert!(
            script.contains(&format!("echo command-of-{name}")),
            "{entry}"
        );
        assert!(
            script.contains(&format!("container {name} of MiniCluster")),
            "{entry}"
        );
        let init = flux::scripts::files::service_init(name);
        let pre = flux::scripts::files::service_pre(name);
        assert!(
            data[&init].contains(&format!("echo init-of-{name}")),
            "{init}"
        );
        assert!(data[&pre].contains(&format!("echo pre-of-{name}")), "{pre}");
        assert!(
            script.contains(&format!("\"$config_dir/{init}\"")),
            "{entry}"
        );
        assert!(
            script.contains(&format!("\"$config_dir/{pre}\"")),
            "{entry}"
        );
        for key in [entry, init, pre] {
            assert!(keys.insert(key.clone()), "{key} is used twice");
        }
    }
    // ConfigMap keys: [-._a-zA-Z0-9]+.
    for key in data.keys() {
        assert!(
            key.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)),
            "{key}"
        );
    }
    // Specs where one file would replace another are refused.
    let mut twice = mc.clone();
    twice.spec.services.push(twice.spec.services[0].clone());
    assert_eq!(
        crate::fixtures::refused_field(&twice).as_deref(),
        Some("spec.services[5].name")
    );
    let mut dotted = mc.clone();
    dotted.spec.services[1].name = "a.init".into();
    assert_eq!(
        crate::fixtures::refused_field(&dotted).as_deref(),
        Some("spec.services[1].name")
    );
}

#[test]
fn with_an_archive_the_lead_pod_reports_it_from_an_init_container_without_the_certificate() {
    let mut mc = with_command("mc", 2, "hostname");
    let lead = render::pod_template(&crate::fixtures::cluster(&mc), Role::Lead, "cm");
    let names = |t: &k8s_openapi::api::core::v1::PodTemplateSpec| -> Vec<String> {
        let spec = t.spec.as_ref().unwrap();
        spec.init_containers
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect()
    };
    assert_eq!(names(&lead), ["flux-view"]);

    crate::fixtures::archive_on_host(&mut mc, "/state/flux.tar.gz");
    mc.spec.containers[0].security_context = Some(k8s_openapi::api::core::v1::SecurityContext {
        run_as_user: Some(1000),
        ..Default::default()
    });
    let lead = render::pod_template(&crate::fixtures::cluster(&mc), Role::Lead, "cm");
    assert_eq!(names(&lead), ["flux-view", ARCHIVE_INIT]);
    let follower = render::pod_template(&crate::fixtures::cluster(&mc), Role::Follower, "cm");
    assert_eq!(names(&follower), ["flux-view"], "followers restore nothing");

    let spec = lead.spec.unwrap();
    let init = &spec.init_containers.as_ref().unwrap()[1];
    let main = &spec.containers[0];
    assert_eq!(
        init.command.as_deref().unwrap(),
        ["/bin/bash", &format!("{CONFIG_MOUNT}/archive-check.sh")]
    );
    // Reads the archive as the broker will: same image, user and volumes...
    assert_eq!(init.image, main.image);
    assert_eq!(init.security_context, main.security_context);
    let mounts = |c: &k8s_openapi::api::core::v1::Container| -> Vec<String> {
        c.volume_mounts
            .iter()
            .flatten()
            .map(|m| m.name.clone())
            .collect()
    };
    // ...every volume of the Flux container but the CURVE certificate, and no probe.
    for secret in [CURVE_VOLUME, KEY_VOLUME] {
        assert!(mounts(main).contains(&secret.to_string()));
        assert!(!mounts(init).contains(&secret.to_string()), "{secret}");
    }
    let mut expected = mounts(main);
    expected.retain(|m| m != CURVE_VOLUME && m != KEY_VOLUME);
    assert_eq!(mounts(init), expected);
    assert!(init.readiness_probe.is_none());
}
