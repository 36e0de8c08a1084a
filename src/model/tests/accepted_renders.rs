//! Every spec that resolves also renders (issue 20).
//!
//! Generated MiniClusters mix valid and invalid values in the fields where validation and
//! rendering can disagree (names, sizes, containers, commands, hooks, environment, volumes,
//! Flux options, network, archive, logging). For each one, either [`resolve`] refuses it,
//! every error naming an API field path (`spec.containers[0].command`), or the whole render
//! path the controller takes ([`render::desired`] of the resolved cluster) succeeds and what it renders carries no
//! NUL character (no argv, environment or script can). Never both accepted and
//! unrenderable, never a panic.
//!
//! The seed is fixed so CI is repeatable; `PROPTEST_RNG_SEED=<n>` explores other specs and
//! `PROPTEST_CASES=<n>` runs more of them.

use std::cell::Cell;

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

use crate::api::MiniCluster;
use crate::model::{Environment, resolve, unsupported};
use crate::render;

/// Cases per run: about 9 s in a debug build on two cores.
const CASES: u32 = 4000;
/// The seed CI uses.
const SEED: u64 = 20;

/// A value from `good` 19 times in 20, otherwise one from `bad`.
fn mixed(good: &'static [&'static str], bad: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![19 => select(good), 1 => select(bad)]
        .prop_map(String::from)
        .boxed()
}

/// `value` under `key` when there is one.
fn put(object: &mut Map<String, Value>, key: &str, value: Option<impl Into<Value>>) {
    if let Some(value) = value {
        object.insert(key.to_string(), value.into());
    }
}

const MC_NAMES: &[&str] = &[
    "hello",
    "lammps",
    "a",
    "web",
    "a-cluster-with-a-name-of-forty-characters",
];
const MC_NAMES_BAD: &[&str] = &[
    "Hello",
    "bad.name",
    "bad_name",
    "a-cluster-with-a-name-that-is-much-too-long-for-pod-names-x",
];

const CONTAINER_NAMES: &[&str] = &[
    "",
    "app",
    "server",
    "web",
    "hello",
    "hello-web",
    "flux-sidecar",
    "a-service-container-with-a-long-name-of-50-chars-x",
];
const CONTAINER_NAMES_BAD: &[&str] = &["App", "flux-view", "flux-archive", "bad.name", "-x"];

const COMMANDS: &[&str] = &[
    "hostname",
    "echo hello world",
    "lmp -in in.reaxc.hns",
    "echo 'a b' \"c d\"",
    "for i in 1 2; do echo $i; done",
    "sleep 1 && echo done",
    "FOO=1 env",
    "cd /tmp",
    "bash -c 'echo $HOSTNAME'",
    "#!/bin/bash\necho one\n# a comment\n\nhostname",
    "echo 'it'\\''s'",
    "  ",
    "echo ünïcode",
];
const COMMANDS_BAD: &[&str] = &["echo 'unbalanced", "echo \"unbalanced", "echo a\0b", "\0"];

/// `launcher`, `batch` and `batchRaw` as set on a container.
const MODES: &[&str] = &["", "", "", "", "launcher", "batch", "batch+batchRaw"];
const MODES_BAD: &[&str] = &["batchRaw", "launcher+batch"];

const HOOKS: &[&str] = &[
    "echo hook",
    "export A=1\nmkdir -p /tmp/x",
    "if true; then echo yes; fi",
    "echo '",
    "  ",
];
const HOOKS_BAD: &[&str] = &["echo a\0b", "\0\n"];

const PREFIXES: &[&str] = &["time", "strace -f", "env FOO='a b'", "mpirun -np 2", ""];
const PREFIXES_BAD: &[&str] = &["echo 'unbalanced", "mpirun \"-np 2", "a\0b"];

const OPTION_FLAGS: &[&str] = &[
    "-o cpu-affinity=per-task",
    "--setattr=x='a b'",
    "--exclusive",
    "",
];
const OPTION_FLAGS_BAD: &[&str] = &["-o 'unbalanced", "\"", "-o a\0b"];

const SUBMIT_COMMANDS: &[&str] = &["flux submit", "flux run", "flux submit --exclusive", ""];
const SUBMIT_COMMANDS_BAD: &[&str] = &["flux 'run", "flux\0run", "\"flux"];

const WRAPS: &[&str] = &["strace,-e,network", "valgrind", "a b", "'", ""];
const WRAPS_BAD: &[&str] = &["x\0y"];

const LOGS: &[&str] = &["/tmp/out", "/tmp/out/", "/tmp/with space", "/tmp/'q", ""];
const LOGS_BAD: &[&str] = &["/tmp/a\0b"];

const ENV_NAMES: &[&str] = &["A", "OMP_NUM_THREADS", "_x", "path"];
const ENV_NAMES_BAD: &[&str] = &["1BAD", "BAD-NAME", "", "A.B"];
const ENV_VALUES: &[&str] = &["", "1", "a b", "'quoted'", "$HOME", "multi\nline"];
const ENV_VALUES_BAD: &[&str] = &["a\0b", "\0"];

const VOLUME_NAMES: &[&str] = &["data", "scratch", "shm", "cfg"];
const VOLUME_NAMES_BAD: &[&str] = &["Bad_Name", "flux-operator-config", "flux-view", "", "a.b"];
const VOLUMES: &[&str] = &[
    r#"{"path": "/data", "claimName": "data"}"#,
    r#"{"emptyDir": true}"#,
    r#"{"emptyDir": true, "path": "/scratch", "emptyDirMedium": "Memory"}"#,
    r#"{"path": "/etc/app", "configMapName": "app", "items": {"a": "a.conf"}}"#,
    r#"{"path": "/secrets", "secretName": "creds", "readOnly": true}"#,
    r#"{"path": "/host", "hostPath": "/var/data"}"#,
];
const VOLUMES_BAD: &[&str] = &[
    r#"{"path": "/data", "claimName": "a", "hostPath": "/h"}"#,
    r#"{"claimName": "data"}"#,
    r#"{"path": "/mnt/flux", "claimName": "x"}"#,
    r#"{"path": "/etc/flux-operator/config", "emptyDir": true}"#,
    r#"{"path": "relative", "claimName": "x"}"#,
    r#"{"path": "/data", "claimName": "x", "emptyDirMedium": "Memory"}"#,
];

const PORTS: &[&[i32]] = &[&[], &[], &[], &[8080], &[8080, 9090]];
const PORTS_BAD: &[&[i32]] = &[&[0], &[70000]];

const HEADLESS_NAMES: &[&str] = &["net", "flux-net", "app", "web"];
const HEADLESS_NAMES_BAD: &[&str] = &["Bad_", "bad.net"];
const CLUSTER_DOMAINS: &[&str] = &["cluster.local", "hpc.example.", "Cluster.Local", "x"];
const CLUSTER_DOMAINS_BAD: &[&str] = &[
    "bad domain",
    "a..b",
    "-bad.local",
    ".",
    "x\0y",
    "a_b.local",
    "a-label-of-sixty-four-characters-is-one-more-than-dns-allows-xyz.local",
];

const TOPOLOGIES: &[&str] = &[
    "",
    "custom",
    "kary:0",
    "kary:2",
    "binomial",
    "mincrit",
    "mincrit:8",
];
const VIEW_NAMES: &[&str] = &["flux-view", "view"];
const VIEW_NAMES_BAD: &[&str] = &["hello", "flux-archive", "app"];
const VIEW_MOUNTS: &[&str] = &["/mnt/flux", "/opt/view"];
const VIEW_MOUNTS_BAD: &[&str] = &["/data", "/scratch"];
const BROKER_CONFIGS: &[&str] = &["[bootstrap]\ncurve_cert = \"/etc/curve.cert\"\n"];
const BROKER_CONFIGS_BAD: &[&str] = &["[bootstrap\nhosts = ", "a = \"\0\""];
const ARCHIVES: &[&str] = &["/state/archive.tar", "/var/lib/flux/dump.tar.gz"];
const ARCHIVES_BAD: &[&str] = &["relative", "/state/", "/with space", "/a\0b"];

const SIZES: &[i32] = &[1, 2, 3, 4, 10];
const SIZES_BAD: &[i32] = &[0, -1];
const MAX_SIZES: &[i32] = &[1, 2, 4, 10, 100, 1000];
const MIN_SIZES: &[i32] = &[1, 2, 3, 5];
const TASKS: &[i32] = &[0, 1, 4, 16];

fn environment() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => Just(json!({})),
        1 => btree_map(
            mixed(ENV_NAMES, ENV_NAMES_BAD),
            mixed(ENV_VALUES, ENV_VALUES_BAD),
            1..=2
        )
        .prop_map(|m| json!(m)),
    ]
}

fn volumes() -> impl Strategy<Value = Value> {
    let volume =
        mixed(VOLUMES, VOLUMES_BAD).prop_map(|text| serde_json::from_str::<Value>(&text).unwrap());
    prop_oneof![
        3 => Just(json!({})),
        1 => btree_map(mixed(VOLUME_NAMES, VOLUME_NAMES_BAD), volume, 1..=2)
            .prop_map(|m| json!(m)),
    ]
}

fn hook(probability: f64) -> impl Strategy<Value = Option<String>> {
    option::weighted(probability, mixed(HOOKS, HOOKS_BAD))
}

prop_compose! {
    /// `commands`; `lead_hooks` is how likely each hook only the Flux container runs is set.
    fn commands(lead_hooks: f64)(
        init in hook(0.15),
        pre in hook(lead_hooks),
        broker_pre in hook(lead_hooks),
        worker_pre in hook(lead_hooks),
        service_pre in hook(0.15),
        post in hook(0.15),
        prefix in option::weighted(0.15, mixed(PREFIXES, PREFIXES_BAD)),
        script in option::weighted(0.05, mixed(HOOKS, HOOKS_BAD)),
    ) -> Value {
        let mut c = Map::new();
        put(&mut c, "init", init);
        put(&mut c, "pre", pre);
        put(&mut c, "brokerPre", broker_pre);
        put(&mut c, "workerPre", worker_pre);
        put(&mut c, "servicePre", service_pre);
        put(&mut c, "post", post);
        put(&mut c, "prefix", prefix);
        put(&mut c, "script", script);
        Value::Object(c)
    }
}

prop_compose! {
    /// A container; `run_flux` is how likely it sets `runFlux`, `lead_hooks` how likely
    /// each hook only the Flux container runs is set.
    fn container(run_flux: f64, lead_hooks: f64)(
        name in mixed(CONTAINER_NAMES, CONTAINER_NAMES_BAD),
        command in option::weighted(0.8, mixed(COMMANDS, COMMANDS_BAD)),
        run_flux in prop::bool::weighted(run_flux),
        mode in mixed(MODES, MODES_BAD),
        logs in option::weighted(0.2, mixed(LOGS, LOGS_BAD)),
        environment in environment(),
        volumes in volumes(),
        commands in commands(lead_hooks),
        ports in prop_oneof![19 => select(PORTS), 1 => select(PORTS_BAD)],
        no_wrap in prop::bool::weighted(0.15),
    ) -> Value {
        let mut c = Map::new();
        if !name.is_empty() {
            c.insert("name".into(), name.into());
        }
        c.insert("image".into(), "app:1".into());
        put(&mut c, "command", command);
        c.insert("runFlux".into(), run_flux.into());
        for flag in mode.split('+').filter(|m| !m.is_empty()) {
            c.insert(flag.into(), true.into());
        }
        put(&mut c, "logs", logs);
        c.insert("environment".into(), environment);
        c.insert("volumes".into(), volumes);
        c.insert("commands".into(), commands);
        c.insert("ports".into(), json!(ports));
        c.insert("noWrapEntrypoint".into(), no_wrap.into());
        Value::Object(c)
    }
}

prop_compose! {
    fn flux()(
        option_flags in option::weighted(0.3, mixed(OPTION_FLAGS, OPTION_FLAGS_BAD)),
        submit_command in option::weighted(0.2, mixed(SUBMIT_COMMANDS, SUBMIT_COMMANDS_BAD)),
        wrap in option::weighted(0.15, mixed(WRAPS, WRAPS_BAD)),
        topology in option::weighted(0.3, select(TOPOLOGIES)),
        minimal_service in prop::bool::weighted(0.25),
        switches in prop::array::uniform4(prop::bool::weighted(0.15)),
        view in (
            option::weighted(0.1, mixed(VIEW_NAMES, VIEW_NAMES_BAD)),
            option::weighted(0.1, mixed(VIEW_MOUNTS, VIEW_MOUNTS_BAD)),
        ),
        scheduler in (prop::bool::weighted(0.2), option::weighted(0.2, select(&["fcfs", "easy"][..]))),
        broker_config in option::weighted(0.08, mixed(BROKER_CONFIGS, BROKER_CONFIGS_BAD)),
        curve_cert in option::weighted(0.02, Just("not a certificate")),
        environment in environment(),
        log_level in option::weighted(0.2, 0..=7i32),
    ) -> Value {
        let mut f = Map::new();
        put(&mut f, "optionFlags", option_flags);
        put(&mut f, "submitCommand", submit_command);
        put(&mut f, "wrap", wrap);
        put(&mut f, "topology", topology);
        f.insert("minimalService".into(), minimal_service.into());
        f.insert("disableSocket".into(), switches[0].into());
        f.insert("noWaitSocket".into(), switches[1].into());
        f.insert("completeWorkers".into(), switches[2].into());
        let mut container = Map::new();
        container.insert("disable".into(), switches[3].into());
        put(&mut container, "name", view.0);
        put(&mut container, "mountPath", view.1);
        f.insert("container".into(), Value::Object(container));
        let mut sched = Map::new();
        sched.insert("simple".into(), scheduler.0.into());
        put(&mut sched, "queuePolicy", scheduler.1);
        f.insert("scheduler".into(), Value::Object(sched));
        put(&mut f, "brokerConfig", broker_config);
        put(&mut f, "curveCert", curve_cert);
        f.insert("environment".into(), environment);
        put(&mut f, "logLevel", log_level);
        Value::Object(f)
    }
}

prop_compose! {
    fn network()(
        headless_name in option::weighted(0.15, mixed(HEADLESS_NAMES, HEADLESS_NAMES_BAD)),
        cluster_domain in option::weighted(0.25, mixed(CLUSTER_DOMAINS, CLUSTER_DOMAINS_BAD)),
        disable_affinity in any::<bool>(),
    ) -> Value {
        let mut n = Map::new();
        put(&mut n, "headlessName", headless_name);
        put(&mut n, "clusterDomain", cluster_domain);
        n.insert("disableAffinity".into(), disable_affinity.into());
        Value::Object(n)
    }
}

prop_compose! {
    fn minicluster()(
        name in mixed(MC_NAMES, MC_NAMES_BAD),
        size in prop_oneof![19 => select(SIZES), 1 => select(SIZES_BAD)],
        max_size in option::weighted(0.3, select(MAX_SIZES)),
        min_size in option::weighted(0.15, select(MIN_SIZES)),
        tasks in select(TASKS),
        containers in (
            prop_oneof![3 => vec(container(0.0, 0.15), 1..=1), 2 => vec(container(0.05, 0.15), 2..=3)],
            // Which one runs Flux (most of the time).
            option::weighted(0.9, 0..3usize),
        ),
        services in prop_oneof![3 => Just(Vec::new()), 1 => vec(container(0.05, 0.02), 1..=2)],
        network in network(),
        flux in flux(),
        logging in prop::array::uniform5(prop::bool::weighted(0.2)),
        archive in option::weighted(0.15, mixed(ARCHIVES, ARCHIVES_BAD)),
        interactive_and_labels in (prop::bool::weighted(0.1), prop::bool::weighted(0.03)),
    ) -> Value {
        let mut spec = Map::new();
        spec.insert("size".into(), size.into());
        put(&mut spec, "maxSize", max_size);
        put(&mut spec, "minSize", min_size);
        spec.insert("tasks".into(), tasks.into());
        let (mut containers, runner) = containers;
        if let Some(i) = runner {
            let count = containers.len();
            containers[i % count]["runFlux"] = true.into();
        }
        spec.insert("containers".into(), Value::Array(containers));
        spec.insert("services".into(), Value::Array(services));
        spec.insert("network".into(), network);
        spec.insert("flux".into(), flux);
        spec.insert(
            "logging".into(),
            json!({
                "quiet": logging[0],
                "strict": logging[1],
                "debug": logging[2],
                "timed": logging[3],
                "zeromq": logging[4],
            }),
        );
        if let Some(path) = archive {
            spec.insert("archive".into(), json!({ "path": path }));
        }
        let (interactive, reserved_label) = interactive_and_labels;
        spec.insert("interactive".into(), interactive.into());
        if reserved_label {
            spec.insert(
                "pod".into(),
                json!({ "labels": { crate::api::ROLE_LABEL: "lead" } }),
            );
        }
        json!({
            "apiVersion": "flux-framework.org/v1alpha2",
            "kind": "MiniCluster",
            "metadata": { "name": name, "namespace": "science" },
            "spec": spec,
        })
    }
}

/// Fields whose next path segment is a map key, spelled as the user wrote it.
const MAP_FIELDS: &[&str] = &[
    "volumes",
    "environment",
    "secrets",
    "labels",
    "annotations",
    "nodeSelector",
];

/// Whether `field` is a path in the API's spelling: `spec` or `metadata`, then camelCase
/// field names, `[index]` or `[key]`, and map keys after a map field.
fn is_api_path(field: &str) -> bool {
    let mut plain = String::new();
    let mut depth = 0usize;
    for ch in field.chars() {
        match ch {
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            _ if depth == 0 => plain.push(ch),
            _ => {}
        }
    }
    let mut segments = plain.split('.');
    if !matches!(segments.next(), Some("spec" | "metadata")) || depth != 0 {
        return false;
    }
    let mut key_next = false;
    for segment in segments {
        let ok = if key_next {
            !segment.is_empty()
        } else {
            let mut chars = segment.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
                && chars.all(|c| c.is_ascii_alphanumeric())
        };
        if !ok {
            return false;
        }
        key_next = !key_next && MAP_FIELDS.contains(&segment);
    }
    true
}

#[test]
fn api_paths_are_recognized() {
    for good in [
        "spec.containers[0].command",
        "spec.containers[1].volumes.Bad_Name.path",
        "spec.flux.environment.1BAD",
        "spec.flux.environment[\"A.B\"]",
        "spec.containers[0].volumes[\"\"].path",
        "spec.network.clusterDomain",
        "metadata.name",
        "spec.containers",
    ] {
        assert!(is_api_path(good), "{good}");
    }
    for bad in [
        "containers[0].command",
        "spec.flux.option_flags",
        "the operator's cluster domain (--cluster-domain)",
        "spec.containers[0",
        "spec..size",
    ] {
        assert!(!is_api_path(bad), "{bad}");
    }
}

/// Whether a string anywhere in `value` (keys included) has a NUL character.
fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(fields) => fields.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

#[test]
fn every_spec_validation_accepts_renders_and_every_refusal_names_api_fields() {
    let config = crate::fixtures::fixed_proptest_config(CASES, SEED);
    let cases = config.cases as usize;
    let env = Environment {
        cluster_domain: "cluster.local".to_string(),
        view_image_volume: false,
    };
    let accepted = Cell::new(0usize);
    let refused = Cell::new(0usize);
    let mut runner = TestRunner::new(config);
    let result = runner.run(&minicluster(), |manifest| {
        let mc: MiniCluster = serde_json::from_value(manifest)
            .map_err(|e| TestCaseError::fail(format!("the generator made a bad manifest: {e}")))?;
        let _ = unsupported(&mc);
        // Only a resolved spec reaches the renderer: nothing else can be rendered.
        match resolve(&mc, &env) {
            Ok(cluster) => {
            accepted.set(accepted.get() + 1);
            let desired = render::desired(&cluster)
                .map_err(|e| TestCaseError::fail(format!("accepted, but does not render: {e}")))?;
            prop_assert!(
                render::too_large(&desired).is_none(),
                "accepted, but too large to make"
            );
            let objects = serde_json::to_value((
                &desired.config_map,
                &desired.jobset,
                &desired.network_services,
                &desired.services_job,
            ))
            .map_err(|e| TestCaseError::fail(format!("rendered objects serialize: {e}")))?;
            prop_assert!(
                !has_nul(&objects),
                "accepted, but renders a NUL character (no argv, environment or script can carry one)"
            );
            }
            Err(errors) => {
            refused.set(refused.get() + 1);
            prop_assert!(!errors.is_empty(), "refused without an error");
            for e in &errors {
                prop_assert!(is_api_path(&e.field), "not an API field path: {e}");
                prop_assert!(!e.message.trim().is_empty(), "no message: {e}");
            }
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (accepted, refused) = (accepted.get(), refused.get());
    eprintln!(
        "{cases} generated MiniClusters: {accepted} accepted and rendered, {refused} refused"
    );
    // The generator must keep reaching both sides.
    assert!(
        accepted * 5 >= cases && refused * 5 >= cases,
        "{accepted} accepted, {refused} refused"
    );
}
