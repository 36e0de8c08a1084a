//! Real-node benchmark (issue 19): this operator and the Go Flux Operator, on the same real
//! node, the same images and the same MiniCluster file, sizes `BENCH_NODE_SIZES` (default
//! 1,2,4,8), `BENCH_NODE_ROUNDS` (default 3) interleaved rounds (the arms' order alternates).
//! Printed figures, not a timed test: `make bench-node` (a fresh cluster with its real node,
//! torn down after), or `cargo bench --features e2e --bench node` against `make up`.
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

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail, ensure};

mod arms;
#[allow(dead_code)]
#[path = "../tests/node/cluster.rs"]
mod cluster;
#[path = "../tests/common/mod.rs"]
mod common;

use arms::{
    Arm, Bench, LIMIT, delete_and_time, load, now, push_go_certificate, running_lead, stats,
};
use cluster::{apply_yaml, kubectl_in, on_real_node};
use common::{TestNamespace, built_go_operator, client, wait_for};

const MC: &str = "bench";
const VIEW: &str = "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble";

fn minicluster(arm: Arm, size: u32) -> Result<String> {
    let mut yaml = format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {MC}\n\
         spec:\n  size: {size}\n  interactive: true\n  containers:\n    - image: ubuntu:noble\n\
         \x20 flux:\n    container:\n      image: {VIEW}\n"
    );
    if arm == Arm::Go {
        push_go_certificate(&mut yaml, MC)?;
    }
    Ok(yaml)
}

/// up and down, in seconds, for one MiniCluster of SIZE under ARM.
async fn run(bench: &mut Bench, arm: Arm, size: u32) -> Result<Run> {
    bench.use_crd(arm).await?;
    let ns = TestNamespace::create(&format!("bench-{}", size)).await?;
    on_real_node(&ns.name)?;
    let _operator = bench.start(arm, &ns.name).await?;
    let yaml = minicluster(arm, size)?;
    let (socket, prefix) = arm.socket_and_lead(MC);

    let t0 = now();
    apply_yaml(&ns.name, &yaml)?;
    let lead = running_lead(&ns.name, &prefix, MC).await?;
    let script = format!(
        "export PATH=$PATH:/mnt/flux/view/bin FLUX_URI=local://{socket}\n\
         until [ \"$(flux resource list -s up -no {{nnodes}} 2>/dev/null)\" = {size} ]; do sleep 0.1; done\n\
         flux run -N{size} true\n\
         echo $(flux getattr broker.starttime) $(flux jobs -a -no '{{t_submit}} {{t_inactive}}' | head -n 1)"
    );
    // (The kubelet may report the container running a moment before exec finds it.)
    let out = wait_for("the first job", LIMIT, || async {
        kubectl_in(
            &ns.name,
            &["exec", &lead, "-c", MC, "--", "bash", "-c", &script],
        )
        .map(Some)
    })
    .await?;
    let stamps: Vec<f64> = out
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("broker.starttime, t_submit, t_inactive: {out}"))?;
    let [started, submitted, done] = stamps[..] else {
        bail!("broker.starttime, t_submit, t_inactive: {out}");
    };
    let phases = Phases {
        up: done - t0,
        lead: started - t0,
        joined: submitted - started,
        job: done - submitted,
    };

    let down = delete_and_time(&ns.name, MC).await?;
    ns.cleanup().await;
    ensure!(
        phases.up > 0.0,
        "the job ended before the apply: {phases:?}"
    );
    Ok(Run { phases, down })
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

#[derive(Clone, Copy, Debug)]
struct Run {
    phases: Phases,
    /// `kubectl delete minicluster` to no pod left.
    down: f64,
}

fn env_list(name: &str, default: &str) -> Result<Vec<u32>> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| s.trim().parse().with_context(|| format!("{name}: {s}")))
        .collect()
}

#[tokio::main]
async fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let sizes = env_list("BENCH_NODE_SIZES", "1,2,4,8")?;
    let rounds = env_list("BENCH_NODE_ROUNDS", "3")?[0];
    let mut bench = Bench {
        client: client().await?,
        go_dir: built_go_operator()?,
        crd: None,
    };
    let started = load();
    // (size, arm) -> its runs, in round order
    let mut figures: BTreeMap<(u32, Arm), Vec<Run>> = BTreeMap::new();
    for round in 0..rounds {
        for (i, &size) in sizes.iter().enumerate() {
            let mut arms = [Arm::Operator, Arm::Go];
            if (round as usize + i) % 2 == 1 {
                arms.reverse();
            }
            for arm in arms {
                let r = run(&mut bench, arm, size)
                    .await
                    .with_context(|| format!("{} size {size} round {}", arm.title(), round + 1))?;
                let p = r.phases;
                eprintln!(
                    "round {} size {size} {}: up {:.2} s (lead broker {:.2}, all joined +{:.2}, job +{:.2}), down {:.2} s",
                    round + 1,
                    arm.title(),
                    p.up,
                    p.lead,
                    p.joined,
                    p.job,
                    r.down
                );
                figures.entry((size, arm)).or_default().push(r);
            }
        }
    }
    bench.use_crd(Arm::Operator).await?;
    print_table(&figures, &sizes, rounds, &started);
    Ok(())
}

fn print_table(
    figures: &BTreeMap<(u32, Arm), Vec<Run>>,
    sizes: &[u32],
    rounds: u32,
    started: &str,
) {
    println!(
        "\nReal node, {rounds} interleaved rounds; load average at start {started}, at end {}\n",
        load()
    );
    println!(
        "| N | up: operator | up: Go operator | up ratio per round | down: operator | down: Go operator | down ratio per round |"
    );
    println!("|--:|--:|--:|--:|--:|--:|--:|");
    let runs = |size, arm| figures.get(&(size, arm)).cloned().unwrap_or_default();
    let col = |v: &[Run], f: fn(&Run) -> f64| v.iter().map(f).collect::<Vec<_>>();
    for &size in sizes {
        let (ours, go) = (runs(size, Arm::Operator), runs(size, Arm::Go));
        let ratios = |f: fn(&Run) -> f64| {
            ours.iter()
                .zip(&go)
                .map(|(a, b)| format!("{:.2}", f(a) / f(b)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "| {size} | {} | {} | {} | {} | {} | {} |",
            stats(&col(&ours, |r| r.phases.up)),
            stats(&col(&go, |r| r.phases.up)),
            ratios(|r| r.phases.up),
            stats(&col(&ours, |r| r.down)),
            stats(&col(&go, |r| r.down)),
            ratios(|r| r.down),
        );
    }
    println!(
        "\nWhere the time to the first job goes (medians, s): apply to the lead broker's start, \
         then to every broker up, then the job\n"
    );
    println!("| N | operator: lead / joined / job | Go operator: lead / joined / job |");
    println!("|--:|--:|--:|");
    for &size in sizes {
        let cell = |arm| {
            let v = runs(size, arm);
            let median = |f: fn(&Run) -> f64| {
                let mut x = col(&v, f);
                x.sort_by(f64::total_cmp);
                x.get(x.len() / 2).copied().unwrap_or(f64::NAN)
            };
            format!(
                "{:.2} / {:.2} / {:.2}",
                median(|r| r.phases.lead),
                median(|r| r.phases.joined),
                median(|r| r.phases.job)
            )
        };
        println!("| {size} | {} | {} |", cell(Arm::Operator), cell(Arm::Go));
    }
}
