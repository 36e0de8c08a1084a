//! Real-node benchmark (issue 19): this operator and the Go Flux Operator, on the same real
//! node, the same images and the same MiniCluster file, sizes `BENCH_NODE_SIZES` (default
//! 1,2,4,8), `BENCH_NODE_ROUNDS` (default 3) interleaved rounds (the arms' order alternates).
//! Printed figures, not a timed test: `make bench-node` (a fresh cluster with its real node,
//! torn down after), or `cargo bench --bench node` against `make up`.
//!
//! Both operators run as processes beside the cluster (this one limited to the run's
//! namespace, the Go one built by `e2e/build-go-operator.sh` from `../shared/vendor`), one
//! at a time, each started fresh and ready before its run. The MiniCluster is interactive,
//! of size N, with the flux view image the node has. The Go operator's build has no CURVE
//! generator (CGO off), so its file carries `flux.curveCert` (generated here); this operator
//! generates its own, as it does for users.
//!
//! - **up**: from `kubectl apply` to the end of the first job, `flux run -N N true`, as Flux
//!   stamps it (`t_inactive`). The job is submitted through `kubectl exec` in the lead pod
//!   once its container runs and Flux reports N nodes up.
//! - **down**: from `kubectl delete minicluster` to no pod left in the namespace.
//! - **where the time goes** (issue 32): each step from the apply, first seen by a watch on
//!   the namespace (`arms/timeline.rs`): the JobSet, the first Job, all N pods created,
//!   scheduled, their init containers (the flux view) started and done, every container
//!   running, the lead broker's start (Flux's `broker.starttime`), all pods Ready, all brokers
//!   up (the job's `t_submit`) and the job done (`t_inactive`); medians per size and arm.
//!
//! A third arm, unless `BENCH_NODE_IMAGE_VOLUME=0`: this operator with the flux view mounted
//! as an image volume (`flux.container.imageVolume`), no init container and no copy, against
//! the Go operator and against its default copy. `BENCH_NODE_FLOOR=1` adds the floor (issue
//! 32), twice, against each of which the image-volume arm is compared: the pods this operator
//! renders with the view mounted, applied with no operator and no JobSet ([`floor_objects`]);
//! and the same pods as host processes ([`run_on_host`]): the real-Flux tier's pod emulator
//! (`tests/flux/kubelet.rs`: namespaces on this machine, no API server, kubelet or runtime),
//! the same Flux (the view image is built from it), the same first job through its exec.
//! A deletion of this operator's MiniCluster slower than 10 s (`BENCH_NODE_SLOW`) keeps its
//! pods' logs, in `bench-node-slow/` of the cache ([`PodLogs`]).
//! `BENCH_NODE_SECCOMP=1` adds this operator with the pods' seccomp profile `Unconfined`
//! (`spec.pod.securityContext`), against its default `RuntimeDefault`.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail, ensure};

mod arms;
#[allow(dead_code)]
#[path = "../tests/node/cluster.rs"]
mod cluster;
#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/flux/cluster.rs"]
mod emulator;
#[allow(dead_code)]
#[path = "../tests/flux/kubelet.rs"]
mod kubelet;
#[path = "arms/timeline.rs"]
mod timeline;

use arms::{
    Arm, Bench, LIMIT, delete_and_time, load, now, push_go_certificate, running_lead, stats,
};
use cluster::{FLUX_ON_PATH, apply, kubectl_in, on_real_node};
use common::{TestNamespace, built_go_operator, client, wait_for};
use timeline::{PodSteps, Seen, Timeline};

const MC: &str = "bench";
const VIEW: &str = "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble";

/// One arm of the benchmark: an operator, and for this one how the view reaches the pods and
/// the seccomp profile it renders; or the floor, this operator's pods with no operator.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Variant {
    arm: Arm,
    image_volume: bool,
    unconfined: bool,
    /// No operator and no JobSet: [`floor_objects`] applied as they are.
    floor: bool,
    /// The pods as host processes: [`run_on_host`].
    host: bool,
}

impl Variant {
    fn of(arm: Arm) -> Self {
        Variant {
            arm,
            image_volume: false,
            unconfined: false,
            floor: false,
            host: false,
        }
    }

    /// This operator with the view mounted as an image volume: the arm the floors are
    /// compared with, and the MiniCluster both floors render.
    fn mounted() -> Self {
        Variant {
            image_volume: true,
            ..Variant::of(Arm::Operator)
        }
    }

    fn title(self) -> String {
        if self.floor {
            return "floor: bare pods, view mounted".to_string();
        }
        if self.host {
            return "floor: host processes, view mounted".to_string();
        }
        let mut title = self.arm.title().to_string();
        if self.image_volume {
            title.push_str(", image volume");
        }
        if self.unconfined {
            title.push_str(", seccomp Unconfined");
        }
        title
    }
}

fn minicluster(v: Variant, size: u32) -> Result<String> {
    let mut yaml = format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {MC}\n\
         spec:\n  size: {size}\n  interactive: true\n  containers:\n    - image: ubuntu:noble\n\
         \x20 flux:\n    container:\n      image: {VIEW}\n"
    );
    if v.image_volume {
        yaml.push_str("      imageVolume: true\n");
    }
    if v.unconfined {
        yaml.push_str(
            "  pod:\n    securityContext:\n      seccompProfile:\n        type: Unconfined\n",
        );
    }
    if v.arm == Arm::Go {
        push_go_certificate(&mut yaml, MC)?;
    }
    Ok(yaml)
}

/// The label the floor's pods carry, which its headless Service selects.
const FLOOR_LABEL: &str = "bench.flux-framework.org/floor";

/// The floor (issue 32): this operator's pods with no operator and no JobSet. What it renders
/// for the MiniCluster with the view mounted as an image volume (so the view is already
/// present), as plain objects: the ConfigMap, the certificate's Secret, a headless Service
/// for the pods' subdomain, and each broker's pod from the JobSet's templates with the host
/// name and completion index JobSet and the Job controller would give it. One `kubectl
/// apply` of the list starts the clock, as the operators' MiniCluster does.
fn floor_objects(ns: &str, size: u32) -> Result<String> {
    let mut mc = flux_operator::cli::parse_minicluster(&minicluster(Variant::mounted(), size)?)?;
    mc.metadata.namespace = Some(ns.into());
    let env = flux_operator::model::Environment {
        cluster_domain: "cluster.local".into(),
        view_image_volume: true,
    };
    let cluster = flux_operator::model::resolve(&mc, &env)
        .map_err(|e| anyhow::anyhow!("the floor's MiniCluster: {e:?}"))?;
    let desired = flux_operator::render::desired(&cluster)?;
    let cert = flux_operator::model::certificate::Certificate::generate(MC)?.to_text();
    let secret = flux_operator::render::curve_secret(&mc, &cert);
    let spec = &desired.jobset.spec;
    let subdomain = spec
        .network
        .as_ref()
        .and_then(|n| n.subdomain.clone())
        .unwrap_or_else(|| MC.to_string());
    let mut items = vec![
        serde_json::to_value(&desired.config_map)?,
        serde_json::to_value(&secret)?,
        serde_json::json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": subdomain},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": true,
                     "selector": {FLOOR_LABEL: MC}},
        }),
    ];
    for rj in &spec.replicated_jobs {
        let job = rj
            .template
            .spec
            .as_ref()
            .context("a replicated job without a spec")?;
        for index in 0..job.completions.unwrap_or(1) {
            items.push(floor_pod(&job.template, &rj.name, index, &subdomain)?);
        }
    }
    for item in &mut items {
        if let Some(meta) = item["metadata"].as_object_mut() {
            meta.remove("ownerReferences"); // there is no MiniCluster
            meta.insert("namespace".into(), ns.into());
        }
    }
    Ok(serde_json::to_string(
        &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}),
    )?)
}

/// Broker pod INDEX of replicated job JOB, as JobSet and the Job controller would make it
/// from TEMPLATE: host name `<mc>-<job>-0-<index>` in SUBDOMAIN, `JOB_COMPLETION_INDEX`.
fn floor_pod(
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
    job: &str,
    index: i32,
    subdomain: &str,
) -> Result<serde_json::Value> {
    let host = format!("{MC}-{job}-0-{index}");
    let mut pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": serde_json::to_value(&template.metadata)?,
        "spec": serde_json::to_value(&template.spec)?,
    });
    pod["metadata"]["name"] = format!("{host}-floor").into();
    pod["metadata"]["labels"][FLOOR_LABEL] = MC.into();
    pod["spec"]["hostname"] = host.into();
    pod["spec"]["subdomain"] = subdomain.into();
    for c in pod["spec"]["containers"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let var = serde_json::json!({"name": "JOB_COMPLETION_INDEX", "value": index.to_string()});
        match c["env"].as_array_mut() {
            Some(env) => env.push(var),
            None => c["env"] = serde_json::json!([var]),
        }
    }
    Ok(pod)
}

/// up and down, in seconds, for one MiniCluster of SIZE under V.
async fn run(bench: &mut Bench, v: Variant, size: u32) -> Result<Run> {
    let arm = v.arm;
    drop_caches()?;
    if v.host {
        return tokio::task::spawn_blocking(move || run_on_host(size)).await?;
    }
    bench.use_crd(arm).await?;
    let ns = TestNamespace::create(&format!("bench-{}", size)).await?;
    on_real_node(&ns.name)?;
    let _operator = match v.floor {
        false => Some(bench.start(arm, &ns.name).await?),
        true => None,
    };
    let file = tempfile::NamedTempFile::new()?;
    let objects = match v.floor {
        false => minicluster(v, size)?,
        true => floor_objects(&ns.name, size)?,
    };
    std::fs::write(file.path(), objects)?;
    warm_up(&ns.name, file.path())?;
    let (socket, prefix) = arm.socket_and_lead(MC);
    let timeline = Timeline::start(&bench.client, &ns.name).await;

    let t0 = now();
    apply(&ns.name, file.path())?;
    let applied = now();
    let lead = running_lead(&ns.name, &prefix, MC).await?;
    let script = first_job(socket, size);
    // (The kubelet may report the container running a moment before exec finds it.)
    let out = wait_for("the first job", LIMIT, || async {
        kubectl_in(
            &ns.name,
            &["exec", &lead, "-c", MC, "--", "bash", "-c", &script],
        )
        .map(Some)
    })
    .await?;
    let [started, submitted, done] = stamps(&out)?;
    let phases = Phases::of(t0, [started, submitted, done]);
    let steps = steps(
        &timeline.seen(),
        size as usize,
        t0,
        [applied, started, submitted, done],
    );
    drop(timeline);

    // Every pod's log through the deletion of this operator's MiniCluster, kept when slow.
    let logs = (arm == Arm::Operator && !v.floor).then(|| PodLogs::follow(&ns.name));
    let down = match v.floor {
        false => delete_and_time(&ns.name, MC).await?,
        true => delete_pods_and_time(&ns.name).await?,
    };
    if let Some(logs) = logs {
        let title: String = v
            .title()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ')
            .collect();
        let name = format!(
            "{}-size{size}-{}.log",
            title.replace(' ', "-"),
            now() as u64
        );
        let slow = env_list("BENCH_NODE_SLOW", &SLOW_DOWN.to_string())?[0] as f64;
        logs?.keep_if(down > slow, &name)?;
    }
    ns.cleanup().await;
    ensure!(
        phases.up > 0.0,
        "the job ended before the apply: {phases:?}"
    );
    Ok(Run {
        phases,
        down,
        steps,
    })
}

/// The script, run in the lead's Flux container, that waits for SIZE brokers up, runs the
/// first job on all of them, and prints the lead broker's start, the job's `t_submit` and
/// its `t_inactive`.
fn first_job(socket: &str, size: u32) -> String {
    format!(
        "{FLUX_ON_PATH}\n\
         export FLUX_URI=local://{socket}\n\
         until [ \"$(flux resource list -s up -no {{nnodes}} 2>/dev/null)\" = {size} ]; do sleep 0.1; done\n\
         flux run -N{size} true\n\
         echo $(flux getattr broker.starttime) $(flux jobs -a -no '{{t_submit}} {{t_inactive}}' | head -n 1)"
    )
}

/// The three stamps [`first_job`] prints.
fn stamps(out: &str) -> Result<[f64; 3]> {
    let stamps: Vec<f64> = out
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("broker.starttime, t_submit, t_inactive: {out}"))?;
    stamps[..]
        .try_into()
        .map_err(|_| anyhow::anyhow!("broker.starttime, t_submit, t_inactive: {out}"))
}

/// The host-process floor: the MiniCluster of the image-volume arm, rendered by this
/// operator's code, its pods started as processes by the pod emulator of the real-Flux tier
/// (their network namespace, mounts, the view image's tree mounted in place, the rendered
/// entrypoints), all at once as the Jobs would; the clock starts before the first is made.
/// The first job goes through the emulator's exec (`nsenter`), not `kubectl exec`. Down is
/// every pod deleted at once, each with its grace period, as the kubelet does.
fn run_on_host(size: u32) -> Result<Run> {
    let mc = emulator::minicluster(&minicluster(Variant::mounted(), size)?);
    let (socket, _) = Arm::Operator.socket_and_lead(MC);
    let script = first_job(socket, size);
    let t0 = now();
    let mut run = emulator::MiniClusterRun::start(mc, emulator::Start::default());
    // (The emulator's exec waits for the container to run, as kubectl exec is retried.)
    let container = run.flux_container();
    let out = match run.lead().exec(&container, &["bash", "-c", &script]) {
        Ok((0, out)) => out,
        Ok((code, out)) => bail!("the first job on the host ({code}): {out}"),
        Err(e) => bail!("the first job on the host: {e}"),
    };
    let [started, submitted, done] = stamps(&out)?;
    let down = std::time::Instant::now();
    run.delete_all_as_kubelet();
    let mut steps = vec![f64::NAN; STEPS.len()];
    for (step, t) in [
        ("lead broker", started),
        ("all up", submitted),
        ("job done", done),
    ] {
        steps[STEPS.iter().position(|s| *s == step).expect("a step")] = t - t0;
    }
    Ok(Run {
        phases: Phases::of(t0, [started, submitted, done]),
        down: down.elapsed().as_secs_f64(),
        steps,
    })
}

/// A deletion slower than this keeps its pods' logs ([`PodLogs`]), unless `BENCH_NODE_SLOW`
/// gives other seconds: the usual ones take 2 to 8 s, one whose follower cut its broker's rc3
/// short 10 s more (docs/benchmarks.md).
const SLOW_DOWN: u32 = 10;

/// Every container's log of the MiniCluster's pods from before its deletion until they are
/// gone (`kubectl logs -f`, which sends what each log holds first), in a file kept only for
/// a slow deletion: the evidence of where its time went.
struct PodLogs {
    follower: std::process::Child,
    file: tempfile::NamedTempFile,
}

impl PodLogs {
    fn follow(ns: &str) -> Result<Self> {
        let file = tempfile::NamedTempFile::new()?;
        let follower = std::process::Command::new("kubectl")
            .args(["-n", ns, "logs", "--follow", "--prefix", "--timestamps"])
            .args(["--all-containers", "--max-log-requests=64"])
            .arg(format!("--selector=flux-framework.org/minicluster={MC}"))
            .stdout(file.reopen()?)
            .stderr(file.reopen()?)
            .spawn()
            .context("kubectl logs --follow")?;
        // (Its streams open before the pods start stopping.)
        std::thread::sleep(std::time::Duration::from_millis(500));
        Ok(PodLogs { follower, file })
    }

    /// With `slow`, the log is kept as NAME in the cache's `bench-node-slow/` (its path
    /// printed); otherwise dropped.
    fn keep_if(mut self, slow: bool, name: &str) -> Result<()> {
        let _ = self.follower.kill();
        let _ = self.follower.wait();
        if !slow {
            return Ok(());
        }
        let home = std::env::var("HOME").unwrap_or_default();
        let cache = std::env::var("FLUX_OPERATOR_CACHE").unwrap_or_else(|_| {
            let xdg = std::env::var("XDG_CACHE_HOME").unwrap_or(format!("{home}/.cache"));
            format!("{xdg}/flux-operator-rs")
        });
        let dir = std::path::Path::new(&cache).join("bench-node-slow");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(name);
        std::fs::copy(self.file.path(), &path)?;
        eprintln!("a slow deletion: its pods' logs are in {}", path.display());
        Ok(())
    }
}

/// The floor's teardown: seconds from deleting its pods until none is left.
async fn delete_pods_and_time(ns: &str) -> Result<f64> {
    let t1 = std::time::Instant::now();
    kubectl_in(ns, &["delete", "pods", "--all", "--wait=false"])?;
    wait_for("every pod gone", LIMIT, || async {
        Ok(arms::pods(ns)?.is_empty().then_some(()))
    })
    .await?;
    Ok(t1.elapsed().as_secs_f64())
}

/// Every run starts from the same kernel state. A deleted pod's memory cgroup stays, dying,
/// while page cache charged to it remains (the view's copies, 81 MiB a pod), and with each
/// run's eight the kernel's share of the next run grew: the lead broker 3.8 s after the
/// apply at N = 8 on a fresh node, 8.2 s by the fifth run, 4.5 s again once the caches were
/// dropped (docs/benchmarks.md). Both arms pay the cold page cache that follows.
fn drop_caches() -> Result<()> {
    // Dirty pages are not dropped: write them first.
    let synced = std::process::Command::new("sync").status()?;
    ensure!(synced.success(), "sync: {synced}");
    std::fs::write("/proc/sys/vm/drop_caches", "3\n")
        .context("/proc/sys/vm/drop_caches (the bench runs as root)")
}

/// A server-side dry run of the MiniCluster's apply, before the clock starts. The arm before
/// this one replaced the CRD (both operators' CRDs are the same kind): the first apply after
/// that took 2 s more in 6 of 20 runs, 3 in each arm (in kubectl's caches or in the API
/// server's handler of the new CRD: not taken apart), which a user, whose CRD was installed
/// long before, does not pay. The dry run pays it here; the apply's own time is the step
/// `applied`.
fn warm_up(ns: &str, file: &std::path::Path) -> Result<()> {
    let path = file.to_string_lossy();
    kubectl_in(ns, &["apply", "--dry-run=server", "-f", &path]).map(drop)
}

/// The steps of the breakdown, in the order they happen.
const STEPS: [&str; 12] = [
    "applied",
    "JobSet",
    "first Job",
    "pods",
    "scheduled",
    "init started",
    "init done",
    "running",
    "lead broker",
    "Ready",
    "all up",
    "job done",
];

/// Seconds from the apply (T0) to each of [`STEPS`]; NaN where a step was not seen (the Go
/// operator makes no JobSet).
fn steps(
    seen: &Seen,
    n: usize,
    t0: f64,
    [applied, started, submitted, done]: [f64; 4],
) -> Vec<f64> {
    let all = |step: fn(&PodSteps) -> Option<f64>| seen.all(n, step);
    let first_job = seen.jobs.values().copied().reduce(f64::min);
    [
        Some(applied),
        seen.jobset,
        first_job,
        all(|p| p.created),
        all(|p| p.scheduled),
        all(|p| p.init_started),
        all(|p| p.init_done),
        all(|p| p.running),
        Some(started),
        all(|p| p.ready),
        Some(submitted),
        Some(done),
    ]
    .into_iter()
    .map(|t| t.map_or(f64::NAN, |t| t - t0))
    .collect()
}

/// Where the time to the first job went, in seconds.
#[derive(Clone, Copy, Debug)]
struct Phases {
    /// `kubectl apply` to the end of the first job.
    up: f64,
    /// `kubectl apply` to the lead broker's start (`broker.starttime`): the operator, JobSet,
    /// the Job controller, the scheduler, the kubelet, the init container and the entrypoint.
    lead: f64,
    /// The lead broker's start to every broker up (the job's `t_submit`: submitted as soon
    /// as a poll every 0.1 s saw N nodes up).
    joined: f64,
    /// `t_submit` to `t_inactive` of `flux run -N N true`.
    job: f64,
}

impl Phases {
    /// From T0 and the stamps [`first_job`] prints.
    fn of(t0: f64, [started, submitted, done]: [f64; 3]) -> Self {
        Phases {
            up: done - t0,
            lead: started - t0,
            joined: submitted - started,
            job: done - submitted,
        }
    }
}

#[derive(Clone, Debug)]
struct Run {
    phases: Phases,
    /// `kubectl delete minicluster` to no pod left.
    down: f64,
    /// Seconds from the apply to each of [`STEPS`].
    steps: Vec<f64>,
}

fn env_list(name: &str, default: &str) -> Result<Vec<u32>> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| s.trim().parse().with_context(|| format!("{name}: {s}")))
        .collect()
}

/// The arms run as processes, one at a time: an operator installed in the cluster (the
/// real-node tests leave the chart's installed) would reconcile every arm's MiniClusters too,
/// the Go operator's included (same kind), and the figures would mean nothing.
async fn no_operator_installed(client: &kube::Client) -> Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    let deployments: kube::Api<Deployment> = kube::Api::all(client.clone());
    let params = kube::api::ListParams::default().labels("app.kubernetes.io/name=flux-operator");
    for d in deployments.list(&params).await? {
        let replicas = d.spec.replicas.unwrap_or(1);
        let (ns, name) = (
            d.metadata.namespace.unwrap_or_default(),
            d.metadata.name.unwrap_or_default(),
        );
        ensure!(
            replicas == 0,
            "the operator is installed in the cluster (Deployment {ns}/{name}, {replicas} replicas) \
             and would reconcile the benchmark's MiniClusters: `helm uninstall -n {ns} flux-operator` \
             or `kubectl -n {ns} scale deploy/{name} --replicas=0` first"
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let sizes = env_list("BENCH_NODE_SIZES", "1,2,4,8")?;
    let rounds = env_list("BENCH_NODE_ROUNDS", "3")?[0];
    let client = client().await?;
    no_operator_installed(&client).await?;
    let mut bench = Bench {
        client,
        go_dir: built_go_operator()?,
        crd: None,
    };
    let started = load();
    let (ours, go) = (Variant::of(Arm::Operator), Variant::of(Arm::Go));
    let mut variants = vec![ours, go];
    let on = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
    if std::env::var("BENCH_NODE_IMAGE_VOLUME").as_deref() != Ok("0") {
        variants.push(Variant::mounted());
    }
    if on("BENCH_NODE_FLOOR") {
        variants.push(Variant {
            floor: true,
            ..ours
        });
        variants.push(Variant { host: true, ..ours });
    }
    if on("BENCH_NODE_SECCOMP") {
        variants.push(Variant {
            unconfined: true,
            ..ours
        });
    }
    // (size, variant) -> its runs, in round order
    let mut figures: Figures = BTreeMap::new();
    for round in 0..rounds {
        for (i, &size) in sizes.iter().enumerate() {
            let mut order = variants.clone();
            let turn = (round as usize + i) % order.len();
            order.rotate_left(turn);
            for v in order {
                let r = run(&mut bench, v, size)
                    .await
                    .with_context(|| format!("{} size {size} round {}", v.title(), round + 1))?;
                let p = r.phases;
                eprintln!(
                    "round {} size {size} {}: up {:.2} s (applied {:.2}, lead broker {:.2}, all joined +{:.2}, job +{:.2}), down {:.2} s",
                    round + 1,
                    v.title(),
                    p.up,
                    r.steps[0],
                    p.lead,
                    p.joined,
                    p.job,
                    r.down
                );
                figures.entry((size, v)).or_default().push(r);
            }
        }
    }
    bench.use_crd(Arm::Operator).await?;
    println!(
        "\nReal node, {rounds} interleaved rounds; load average at start {started}, at end {}\n",
        load()
    );
    print_table(&figures, &sizes, ours, go);
    let mounted = variants.iter().copied().find(|v| v.image_volume);
    for &extra in &variants[2..] {
        match (extra.floor || extra.host, mounted) {
            (true, Some(mounted)) => print_table(&figures, &sizes, mounted, extra),
            _ => {
                print_table(&figures, &sizes, extra, go);
                print_table(&figures, &sizes, extra, ours);
            }
        }
    }
    print_breakdown(&figures, &sizes, &variants);
    Ok(())
}

type Figures = BTreeMap<(u32, Variant), Vec<Run>>;

fn runs(figures: &Figures, size: u32, v: Variant) -> Vec<Run> {
    figures.get(&(size, v)).cloned().unwrap_or_default()
}

fn median(mut x: Vec<f64>) -> f64 {
    x.sort_by(f64::total_cmp);
    x.get(x.len() / 2).copied().unwrap_or(f64::NAN)
}

/// up and down of A against B, with the ratio A / B per round.
fn print_table(figures: &Figures, sizes: &[u32], a: Variant, b: Variant) {
    let (ta, tb) = (a.title(), b.title());
    println!(
        "| N | up: {ta} | up: {tb} | up ratio per round | down: {ta} | down: {tb} | down ratio per round |"
    );
    println!("|--:|--:|--:|--:|--:|--:|--:|");
    let col = |v: &[Run], f: fn(&Run) -> f64| v.iter().map(f).collect::<Vec<_>>();
    for &size in sizes {
        let (ours, theirs) = (runs(figures, size, a), runs(figures, size, b));
        let ratios = |f: fn(&Run) -> f64| {
            ours.iter()
                .zip(&theirs)
                .map(|(x, y)| format!("{:.2}", f(x) / f(y)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "| {size} | {} | {} | {} | {} | {} | {} |",
            stats(&col(&ours, |r| r.phases.up)),
            stats(&col(&theirs, |r| r.phases.up)),
            ratios(|r| r.phases.up),
            stats(&col(&ours, |r| r.down)),
            stats(&col(&theirs, |r| r.down)),
            ratios(|r| r.down),
        );
    }
    println!();
}

/// Medians, seconds from the apply, of every step of [`STEPS`] per size and arm.
fn print_breakdown(figures: &Figures, sizes: &[u32], variants: &[Variant]) {
    println!(
        "Where the time to the first job goes: seconds from the apply to each step, first seen \
         by a watch (medians; - where the arm has no such step)\n"
    );
    println!("| N | arm | {} |", STEPS.join(" | "));
    println!("|--:|--|{}", "--:|".repeat(STEPS.len()));
    for &size in sizes {
        for &v in variants {
            let v_runs = runs(figures, size, v);
            let cells: Vec<String> = (0..STEPS.len())
                .map(|i| {
                    let m = median(v_runs.iter().map(|r| r.steps[i]).collect());
                    if m.is_nan() {
                        "-".into()
                    } else {
                        format!("{m:.2}")
                    }
                })
                .collect();
            println!("| {size} | {} | {} |", v.title(), cells.join(" | "));
        }
    }
}
