//! Tests of the Flux module. `behaviour` runs the generated scripts under bash with a
//! stand-in `flux`; `curve` does real CURVE handshakes through libzmq.

mod behaviour;
mod command;
mod config;
mod curve;
mod shellcheck;

use crate::api::MiniCluster;
use crate::fixtures::with_command;

/// MiniClusters covering every mode, hook and option of the scripts, with a label.
// Long: a list of fixtures, one per mode and option, read best side by side.
pub(crate) fn matrix() -> Vec<(String, MiniCluster)> {
    let mut out = Vec::new();
    let commands = [
        ("words", "hostname -f"),
        ("shell", r#"echo "$HOME" | tr a-z A-Z > /tmp/out; ls *.txt"#),
        ("none", ""),
    ];
    for (label, command) in commands {
        out.push((format!("submit-{label}"), with_command("mc", 4, command)));
    }
    let mut script = with_command("mc", 2, "");
    script.spec.containers[0].commands.script = "#!/bin/bash\necho from script\n".into();
    out.push(("script".into(), script));
    let mut batch = with_command("mc", 3, "hostname\n\necho 'a b' | wc -c\n# comment\n");
    batch.spec.containers[0].batch = true;
    batch.spec.containers[0].logs = "/data/logs".into();
    out.push(("batch".into(), batch.clone()));
    batch.spec.containers[0].batch_raw = true;
    out.push(("batch-raw".into(), batch));
    let mut launcher = with_command("mc", 2, "snakemake --cores 4 --jobs 2");
    launcher.spec.containers[0].launcher = true;
    out.push(("launcher".into(), launcher));
    let mut interactive = with_command("mc", 2, "ignored");
    interactive.spec.interactive = true;
    out.push(("interactive".into(), interactive));

    let all = everything();
    out.push(("everything".into(), all.clone()));

    let mut other = all.clone();
    other.spec.logging = Default::default();
    other.spec.flux.container.disable = true;
    other.spec.flux.disable_socket = true;
    other.spec.flux.complete_workers = true;
    other.spec.flux.submit_command = "flux run".into();
    other.spec.containers[0].commands.prefix.clear();
    out.push(("no-view-no-socket".into(), other));

    out.push(("no-wait-socket".into(), no_wait_socket()));
    out
}

/// Everything on at once: every hook, logging option, a wrapper, an archive, a service and
/// a container beside Flux with every hook it runs.
fn everything() -> MiniCluster {
    let mut all = with_command("mc", 3, "mpirun -np 4 ./app");
    all.spec.max_size = Some(6);
    all.spec.min_size = Some(2);
    all.spec.tasks = 8;
    let c = &mut all.spec.containers[0].commands;
    c.init = "echo init".into();
    c.pre = "export A=1".into();
    c.broker_pre = "echo broker".into();
    c.worker_pre = "echo worker".into();
    c.post = "echo post".into();
    c.prefix = "strace -f".into();
    all.spec.logging = crate::api::LoggingSpec {
        quiet: true,
        strict: true,
        debug: true,
        timed: true,
        zeromq: true,
    };
    crate::fixtures::archive_on_host(&mut all, "/state/archive.tar");
    all.spec.flux.wrap = "valgrind,--tool=memcheck".into();
    all.spec.flux.option_flags = "-o cpu-affinity=per-task --exclusive".into();
    all.spec
        .flux
        .environment
        .insert("FLUX_X".into(), "a 'b' $c".into());
    all.spec.flux.scheduler.simple = true;
    all.spec.flux.container.python_path = "/mnt/flux/view/lib/python3.11/site-packages".into();
    all.spec.flux.log_level = 7;
    let mut svc = crate::api::MiniClusterContainer {
        name: "api".into(),
        command: "flux-restful --port 5000".into(),
        ..Default::default()
    };
    svc.commands.init = "echo svc-init".into();
    svc.commands.service_pre = "echo svc-pre".into();
    all.spec.services.push(svc);
    // A container beside the Flux container, with every hook it runs.
    all.spec.containers[0].run_flux = true;
    let mut side = crate::api::MiniClusterContainer {
        name: "metrics".into(),
        command: "flux-metrics --port 8080".into(),
        ..Default::default()
    };
    side.commands.init = "echo side-init".into();
    side.commands.service_pre = "echo side-pre".into();
    side.commands.post = "echo side-post".into();
    all.spec.containers.push(side);
    all
}

/// `flux.noWaitSocket`, with a container beside Flux that runs a command and one that runs
/// only a post hook.
fn no_wait_socket() -> MiniCluster {
    let mut nowait = with_command("mc", 2, "sleep 1");
    nowait.spec.flux.no_wait_socket = true;
    nowait.spec.containers[0].run_flux = true;
    nowait
        .spec
        .containers
        .push(crate::api::MiniClusterContainer {
            name: "side".into(),
            command: "while true; do flux jobs -a; sleep 5; done".into(),
            ..Default::default()
        });
    let mut post_only = crate::api::MiniClusterContainer {
        name: "post-only".into(),
        ..Default::default()
    };
    post_only.commands.post = "flux-restful --port 5000".into();
    nowait.spec.containers.push(post_only);
    nowait
}

/// The repository's `examples/*.yaml`, by file name.
pub(crate) fn examples() -> Vec<(String, MiniCluster)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let Ok(dir) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut mc: MiniCluster = serde_norway::from_str(&text).unwrap();
        mc.metadata
            .namespace
            .get_or_insert_with(|| "default".into());
        out.push((path.file_name().unwrap().to_string_lossy().into_owned(), mc));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
