//! The pod emulator itself lays pods out as a kubelet does. These run without Flux.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, PodSecurityContext, PodSpec,
    Secret, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::kubelet::{Images, Network, Pod, PodMeta};

fn meta(host: &str) -> PodMeta {
    PodMeta {
        name: host.into(),
        hostname: host.into(),
        subdomain: "sub".into(),
        namespace: "ns".into(),
        cluster_domain: "cluster.local".into(),
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: Some(read_only),
        ..Default::default()
    }
}

fn spec(script: &str, fs_group: Option<i64>, user: Option<i64>) -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: "main".into(),
            image: Some("debian".into()),
            command: Some(vec!["/bin/sh".into(), "-c".into(), script.into()]),
            volume_mounts: Some(vec![
                mount("cm", "/etc/cm", true),
                mount("sec", "/etc/sec", true),
                mount("scratch", "/scratch", false),
                VolumeMount {
                    sub_path: Some("a.txt".into()),
                    ..mount("cm", "/single/a.txt", true)
                },
            ]),
            ..Default::default()
        }],
        volumes: Some(vec![
            Volume {
                name: "cm".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: "cm".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Volume {
                name: "sec".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some("sec".into()),
                    default_mode: Some(0o400),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Volume {
                name: "scratch".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            },
        ]),
        security_context: Some(PodSecurityContext {
            fs_group,
            run_as_user: user,
            ..Default::default()
        }),
        restart_policy: Some("Never".into()),
        ..Default::default()
    }
}

fn objects() -> (ConfigMap, Secret) {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("cm".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("a.txt".into(), "alpha\n".into())])),
        ..Default::default()
    };
    let sec = Secret {
        metadata: ObjectMeta {
            name: Some("sec".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "key".into(),
            ByteString(b"s3cret\n".to_vec()),
        )])),
        ..Default::default()
    };
    (cm, sec)
}

fn run_pod(script: &str, fs_group: Option<i64>, user: Option<i64>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new(dir.path()).unwrap();
    let (cm, sec) = objects();
    let pod = Pod::start(
        &net,
        meta("p0"),
        &spec(script, fs_group, user),
        &[cm],
        &[sec],
        &Images::default(),
    )
    .unwrap();
    let code = pod.wait_exit("main", Duration::from_secs(30)).unwrap();
    let log = pod.logs("main");
    pod.delete(Duration::from_secs(1));
    assert_eq!(code, 0, "{log}");
    log
}

#[test]
fn volumes_are_laid_out_as_the_kubelet_lays_them_out() {
    let log = run_pod(
        "set -e; readlink /etc/cm/..data; readlink /etc/cm/a.txt; cat /etc/cm/a.txt; \
         stat -c '%a %u %g' /etc/cm/..data/a.txt /etc/sec/..data/key /scratch; \
         cat /single/a.txt; touch /etc/cm/x 2>/dev/null && echo cm-writable || echo cm-read-only; \
         touch /scratch/x && echo scratch-writable",
        None,
        None,
    );
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines[0].starts_with("..2"), "{log}");
    assert_eq!(lines[1], "..data/a.txt", "{log}");
    assert_eq!(lines[2], "alpha", "{log}");
    assert_eq!(lines[3], "644 0 0", "{log}");
    assert_eq!(lines[4], "400 0 0", "{log}");
    assert_eq!(lines[5], "777 0 0", "emptyDir: root, 0777: {log}");
    assert_eq!(lines[6], "alpha", "subPath: {log}");
    assert_eq!(lines[7], "cm-read-only", "{log}");
    assert_eq!(lines[8], "scratch-writable", "{log}");
}

#[test]
fn fs_group_owns_volumes_and_the_user_is_the_security_contexts() {
    let log = run_pod(
        "id -u; id -G; stat -c '%a %g' /scratch /etc/sec/..data/key",
        Some(2000),
        Some(1000),
    );
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines[0], "1000", "{log}");
    assert!(lines[1].split_whitespace().any(|g| g == "2000"), "{log}");
    assert_eq!(lines[2], "2777 2000", "emptyDir with fsGroup: {log}");
    assert_eq!(lines[3], "440 2000", "secret with fsGroup: {log}");
}

#[test]
fn pods_have_their_hostname_and_reach_each_other_by_fqdn_with_no_route_out() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new(dir.path()).unwrap();
    let (cm, sec) = objects();
    let server = Pod::start(
        &net,
        meta("server"),
        &spec("hostname; exec python3 -m http.server 8080", None, None),
        std::slice::from_ref(&cm),
        std::slice::from_ref(&sec),
        &Images::default(),
    )
    .unwrap();
    let client = Pod::start(
        &net,
        meta("client"),
        &spec(
            "hostname; for i in $(seq 50); do \
             python3 -c 'import urllib.request as u; u.urlopen(\"http://server.sub.ns.svc.cluster.local:8080/\", timeout=1)' \
             2>/dev/null && echo reached && exit 0; sleep 0.2; done; exit 1",
            None,
            None,
        ),
        &[cm],
        &[sec],
        &Images::default(),
    )
    .unwrap();
    let code = client.wait_exit("main", Duration::from_secs(30)).unwrap();
    let log = client.logs("main");
    assert_eq!(code, 0, "{log}\nserver: {}", server.logs("main"));
    assert!(log.starts_with("client\n"), "{log}");
    assert!(log.contains("reached"), "{log}");
    // The pods' only interface is eth0 on the switch namespace's bridge, which has no other
    // link: nothing a pod sends leaves the namespaces made here.
    let (_, routes) = server
        .exec("main", &["/bin/sh", "-c", "cat /proc/net/route"])
        .unwrap_or_default();
    assert!(
        routes
            .lines()
            .skip(1)
            .all(|l| l.starts_with("eth0") || l.starts_with("lo")),
        "{routes}"
    );
    assert!(
        !routes
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().nth(1) == Some("00000000")),
        "a default route: {routes}"
    );
    server.delete(Duration::from_secs(1));
    client.delete(Duration::from_secs(1));
}
