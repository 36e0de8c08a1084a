//! HPC benchmark (issue 29): an MPI program as users run it, in a MiniCluster of this
//! operator, in one of the Go Flux Operator (built from `../shared/vendor`), in an MPIJob of
//! Kubeflow's MPI Operator v0.6.0 (`mpi_operator`), and as plain processes on this machine
//! (the floor: `mpirun`, no Kubernetes). `BENCH_HPC_ROUNDS`
//! (default 5) interleaved rounds, the arms' order rotating each round. Printed figures, not a
//! timed test: `make bench-hpc` (a fresh cluster with its real node, torn down after), or
//! `cargo bench --bench hpc` against `make up`.
//!
//! The program is LAMMPS from Debian (the same package in the MPI image and on this
//! machine), `e2e/mpi/in.lj` (`BENCH_HPC_STEPS`, default 1500 steps: about 20 s on this machine), two MPI ranks with
//! Open MPI. In the MiniClusters (interactive, size 2, the MPI image, each pod limited to one
//! CPU) one rank runs on each broker's pod, started by `flux run -N2 -n2` through Flux's PMI;
//! on the host and in the MPIJob's launcher, by `mpirun -np 2` (in the MPIJob over ssh to its
//! two workers, which have the MiniClusters' requests and limits). Figures:
//! - **loop**: LAMMPS' own "Loop time" (its "Total wall time" counts whole seconds);
//! - **launch**: the launcher's time, from submission to the job's end: `mpirun`'s wall clock
//!   on the host and in the MPIJob's launcher, `t_submit` to `t_inactive` of the Flux job in
//!   the MiniClusters;
//! - **up** and **down**: `kubectl apply` to both brokers up (the MPIJob: to `mpirun`'s
//!   start in the launcher, which waits for its workers), `kubectl delete` to no pod;
//! - `BENCH_HPC_BIND=none`: a diagnostic run in which the jobs in the pods ask for no binding.
//! - **ping-pong**: `mpi-check pingpong` (`e2e/mpi/mpi-check.c`) between the two ranks:
//!   the latency of 8-byte messages and the bandwidth of 1 MiB ones, between the two pods
//!   (TCP through the node's bridge) and between two host processes (shared memory, and TCP
//!   on the loopback as the transport's own floor).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};

mod arms;
#[allow(dead_code)]
#[path = "../tests/node/cluster.rs"]
mod cluster;
#[path = "../tests/common/mod.rs"]
mod common;
mod mpi_operator;

use arms::{
    Arm, Bench, LIMIT, delete_and_time, load, now, push_go_certificate, running_lead, stats,
};
use cluster::{apply_yaml, kubectl_in, on_real_node, root};
use common::{TestNamespace, built_go_operator, client, wait_for};
use mpi_operator::MpiOperator;

const MC: &str = "hpc";
const IMAGE: &str = "mpi-apps:bookworm";
const VIEW: &str = "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble";
const PINGPONG_ITERATIONS: u32 = 2000;

/// Where a round's program runs.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Where {
    Host,
    In(Arm),
    MpiOperator,
}

impl Where {
    fn title(self) -> &'static str {
        match self {
            Where::Host => "host mpirun",
            Where::In(arm) => arm.title(),
            Where::MpiOperator => "MPI Operator",
        }
    }
}

/// One run's figures, in seconds (ping-pong in µs and MB/s).
#[derive(Clone, Copy, Debug, Default)]
struct Figures {
    loop_s: f64,
    wall_s: f64,
    launch: f64,
    up: f64,
    down: f64,
    latency_us: f64,
    bandwidth: f64,
    /// Host only: the ping-pong over TCP on the loopback.
    tcp_latency_us: f64,
    tcp_bandwidth: f64,
}

fn steps() -> u32 {
    std::env::var("BENCH_HPC_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500)
}

/// `BENCH_HPC_BIND=none`, a diagnostic: the jobs in the pods ask that no rank be bound to a
/// core (`-o cpu-affinity=off`, `mpirun --bind-to none`), to show what binding costs where
/// each pod believes the node's first core is its own.
fn unbound() -> bool {
    std::env::var("BENCH_HPC_BIND").is_ok_and(|v| v == "none")
}

fn input() -> PathBuf {
    root().join("e2e/mpi/in.lj")
}

fn lammps_args() -> String {
    format!("-var steps {} -log none -nocite", steps())
}

/// LAMMPS' "Loop time of X on 2 procs" and "Total wall time: H:MM:SS", in seconds.
fn lammps_times(log: &str) -> Result<(f64, f64)> {
    let loop_s = log.lines().find_map(|l| {
        l.strip_prefix("Loop time of ")?
            .split(' ')
            .next()?
            .parse()
            .ok()
    });
    let loop_s: f64 = loop_s.with_context(|| format!("no Loop time in:\n{log}"))?;
    ensure!(log.contains(" on 2 procs "), "not two MPI ranks:\n{log}");
    let wall = log
        .lines()
        .find_map(|l| l.strip_prefix("Total wall time: "))
        .with_context(|| format!("no Total wall time in:\n{log}"))?;
    let secs = wall
        .trim()
        .split(':')
        .try_fold(0.0, |acc, part| part.parse::<f64>().map(|v| acc * 60.0 + v))?;
    Ok((loop_s, secs))
}

/// "pingpong latency_us L bandwidth_MBps B hosts ..." -> (L, B).
fn pingpong(out: &str) -> Result<(f64, f64)> {
    let line = out.lines().find(|l| l.starts_with("pingpong "));
    let line = line.with_context(|| format!("no pingpong line in:\n{out}"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    match words[..] {
        [_, "latency_us", l, "bandwidth_MBps", b, ..] => Ok((l.parse()?, b.parse()?)),
        _ => bail!("unexpected: {line}"),
    }
}

/// `mpi-check` built on this machine with Open MPI's mpicc, as the image builds it.
fn host_mpi_check() -> Result<PathBuf> {
    let out = std::env::temp_dir().join("flux-operator-bench-mpi-check-openmpi");
    let status = Command::new("mpicc.openmpi")
        .arg("-O2")
        .arg("-o")
        .arg(&out)
        .arg(root().join("e2e/mpi/mpi-check.c"))
        .status()
        .context("mpicc.openmpi (make bench-hpc installs Open MPI)")?;
    ensure!(status.success(), "building mpi-check failed");
    Ok(out)
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("{cmd:?}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(out.status.success(), "{cmd:?}: {}\n{text}", out.status);
    Ok(text)
}

fn mpirun(extra: &[&str]) -> Command {
    let mut cmd = Command::new("mpirun.openmpi");
    cmd.args(["--allow-run-as-root", "-np", "2"]).args(extra);
    cmd
}

/// The floor: the same LAMMPS and ping-pong as plain processes.
fn on_host(mpi_check: &Path) -> Result<Figures> {
    let started = Instant::now();
    let mut lmp = mpirun(&["lmp", "-in"]);
    lmp.arg(input()).args(lammps_args().split(' '));
    let log = output(&mut lmp)?;
    let launch = started.elapsed().as_secs_f64();
    let (loop_s, wall_s) = lammps_times(&log)?;
    let count = PINGPONG_ITERATIONS.to_string();
    let shm = output(mpirun(&[]).arg(mpi_check).args(["pingpong", &count]))?;
    let tcp_args = [
        "--mca",
        "btl",
        "tcp,self",
        "--mca",
        "btl_tcp_if_include",
        "lo",
    ];
    let tcp = output(mpirun(&tcp_args).arg(mpi_check).args(["pingpong", &count]))?;
    let ((latency_us, bandwidth), (tcp_latency_us, tcp_bandwidth)) =
        (pingpong(&shm)?, pingpong(&tcp)?);
    Ok(Figures {
        loop_s,
        wall_s,
        launch,
        latency_us,
        bandwidth,
        tcp_latency_us,
        tcp_bandwidth,
        ..Default::default()
    })
}

fn minicluster(arm: Arm) -> Result<String> {
    let mut yaml = format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {MC}\n\
         spec:\n  size: 2\n  interactive: true\n  containers:\n    - image: {IMAGE}\n\
         \x20     resources:\n        requests: {{cpu: 100m}}\n        limits: {{cpu: 1}}\n\
         \x20 flux:\n    container:\n      image: {VIEW}\n"
    );
    if arm == Arm::Go {
        push_go_certificate(&mut yaml, MC)?;
    }
    Ok(yaml)
}

/// The lead's script: wait for both brokers, write the input, run LAMMPS as a Flux job and
/// print its stamps, then the ping-pong.
fn lead_script(socket: &str) -> Result<String> {
    let input = std::fs::read_to_string(input())?;
    Ok(format!(
        "export PATH=$PATH:/mnt/flux/view/bin FLUX_URI=local://{socket}\n\
         until [ \"$(flux resource list -s up -no {{nnodes}} 2>/dev/null)\" = 2 ]; do sleep 0.1; done\n\
         echo UP $(date +%s.%N)\n\
         cat > /tmp/in.lj <<'INPUT'\n{input}INPUT\n\
         id=$(flux submit -N2 -n2 {flux_bind}--cwd=/tmp lmp -in /tmp/in.lj {args})\n\
         flux job attach $id\n\
         flux job wait-event $id clean >/dev/null\n\
         echo STAMPS $(flux jobs -no '{{t_submit}} {{t_inactive}}' $id)\n\
         flux run -N2 -n2 {flux_bind}mpi-check-openmpi pingpong {PINGPONG_ITERATIONS}\n",
        args = lammps_args(),
        flux_bind = if unbound() {
            "-o cpu-affinity=off "
        } else {
            ""
        },
    ))
}

/// The number after `tag` on the line that starts with it.
fn tagged(out: &str, tag: &str) -> Result<Vec<f64>> {
    let line = out.lines().find_map(|l| l.strip_prefix(tag));
    let line = line.with_context(|| format!("no {tag} in:\n{out}"))?;
    Ok(line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()?)
}

/// LAMMPS and the ping-pong in a MiniCluster of ARM.
async fn in_minicluster(bench: &mut Bench, arm: Arm) -> Result<Figures> {
    bench.use_crd(arm).await?;
    let ns = TestNamespace::create("hpc").await?;
    on_real_node(&ns.name)?;
    let _operator = bench.start(arm, &ns.name).await?;
    let (socket, prefix) = arm.socket_and_lead(MC);
    let script = lead_script(socket)?;

    let t0 = now();
    apply_yaml(&ns.name, &minicluster(arm)?)?;
    let lead = running_lead(&ns.name, &prefix, MC).await?;
    let out = wait_for("LAMMPS in the MiniCluster", LIMIT, || async {
        let exec = ["exec", &lead, "-c", MC, "--", "bash", "-c", &script];
        kubectl_in(&ns.name, &exec).map(Some)
    })
    .await?;
    let up = tagged(&out, "UP ")?[0] - t0;
    let (loop_s, wall_s) = lammps_times(&out)?;
    let [submitted, done] = tagged(&out, "STAMPS ")?[..] else {
        bail!("t_submit, t_inactive:\n{out}");
    };
    let (latency_us, bandwidth) = pingpong(&out)?;

    let down = delete_and_time(&ns.name, MC).await?;
    ns.cleanup().await;
    Ok(Figures {
        loop_s,
        wall_s,
        launch: done - submitted,
        up,
        down,
        latency_us,
        bandwidth,
        ..Default::default()
    })
}

/// The launcher's script: LAMMPS under mpirun between two stamps, then the ping-pong.
fn launcher_script() -> String {
    format!(
        "set -e\n\
         echo START $(date +%s.%N)\n\
         mpirun --allow-run-as-root -np 2 {mpirun_bind}lmp -in /bench/in.lj {args}\n\
         echo END $(date +%s.%N)\n\
         mpirun --allow-run-as-root -np 2 {mpirun_bind}mpi-check-openmpi pingpong {PINGPONG_ITERATIONS}\n",
        args = lammps_args(),
        mpirun_bind = if unbound() { "--bind-to none " } else { "" },
    )
}

/// LAMMPS and the ping-pong in an MPIJob of the MPI Operator.
async fn in_mpijob(mpi: &MpiOperator) -> Result<Figures> {
    let run = mpi.run(&launcher_script(), &input()).await?;
    let out = &run.log;
    let (start, end) = (tagged(out, "START ")?[0], tagged(out, "END ")?[0]);
    let (loop_s, wall_s) = lammps_times(out)?;
    let (latency_us, bandwidth) = pingpong(out)?;
    Ok(Figures {
        loop_s,
        wall_s,
        launch: end - start,
        up: start - run.applied,
        down: run.down,
        latency_us,
        bandwidth,
        ..Default::default()
    })
}

/// One figure of a run.
type Figure = fn(&Figures) -> f64;

#[tokio::main]
async fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let rounds: usize = std::env::var("BENCH_HPC_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let mpi_check = host_mpi_check()?;
    let mut bench = Bench {
        client: client().await?,
        go_dir: built_go_operator()?,
        crd: None,
    };
    let mpi = MpiOperator::install()?;
    let started = load();
    let all = [
        Where::Host,
        Where::In(Arm::Operator),
        Where::In(Arm::Go),
        Where::MpiOperator,
    ];
    let mut figures: BTreeMap<Where, Vec<Figures>> = BTreeMap::new();
    for round in 0..rounds {
        let mut order = all;
        order.rotate_left(round % all.len());
        for place in order {
            let f = match place {
                Where::Host => on_host(&mpi_check),
                Where::In(arm) => in_minicluster(&mut bench, arm).await,
                Where::MpiOperator => in_mpijob(&mpi).await,
            }
            .with_context(|| format!("{} round {}", place.title(), round + 1))?;
            eprintln!(
                "round {} {}: loop {:.2} s, LAMMPS wall {:.0} s, launch {:.2} s, up {:.2} s, down {:.2} s, \
                 ping-pong {:.1} us {:.0} MB/s",
                round + 1,
                place.title(),
                f.loop_s,
                f.wall_s,
                f.launch,
                f.up,
                f.down,
                f.latency_us,
                f.bandwidth
            );
            figures.entry(place).or_default().push(f);
        }
    }
    bench.use_crd(Arm::Operator).await?;
    print_tables(&figures, rounds, &started);
    Ok(())
}

fn print_tables(figures: &BTreeMap<Where, Vec<Figures>>, rounds: usize, started: &str) {
    let runs = |w| figures.get(&w).cloned().unwrap_or_default();
    let (host, ours, go, mpi) = (
        runs(Where::Host),
        runs(Where::In(Arm::Operator)),
        runs(Where::In(Arm::Go)),
        runs(Where::MpiOperator),
    );
    let col = |v: &[Figures], f: fn(&Figures) -> f64| v.iter().map(f).collect::<Vec<_>>();
    let ratios = |a: &[Figures], b: &[Figures], f: fn(&Figures) -> f64| {
        let r: Vec<String> = a
            .iter()
            .zip(b)
            .map(|(a, b)| format!("{:.2}", f(a) / f(b)))
            .collect();
        r.join(", ")
    };
    println!(
        "\nLAMMPS (e2e/mpi/in.lj, {} steps, 32000 atoms), 2 MPI ranks, Open MPI; real node, {rounds} \
         interleaved rounds{}; load average at start {started}, at end {}\n",
        steps(),
        if unbound() {
            "; ranks in pods unbound (BENCH_HPC_BIND=none)"
        } else {
            ""
        },
        load()
    );
    println!(
        "| figure (s, min / median / max) | host mpirun | operator | Go operator | MPI Operator | \
         operator / host, per round | operator / Go, per round | operator / MPI Operator, per round |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|--:|");
    let rows: [(&str, Figure); 3] = [
        ("LAMMPS loop time", |f| f.loop_s),
        ("LAMMPS total wall time", |f| f.wall_s),
        ("launch (submission to end)", |f| f.launch),
    ];
    for (name, f) in rows {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} |",
            stats(&col(&host, f)),
            stats(&col(&ours, f)),
            stats(&col(&go, f)),
            stats(&col(&mpi, f)),
            ratios(&ours, &host, f),
            ratios(&ours, &go, f),
            ratios(&ours, &mpi, f)
        );
    }
    for (name, f) in [
        (
            "up: apply to both brokers up (MPI Operator: to mpirun's start)",
            (|f: &Figures| f.up) as fn(&Figures) -> f64,
        ),
        ("down: delete to no pod", |f| f.down),
    ] {
        println!(
            "| {name} | - | {} | {} | {} | - | {} | {} |",
            stats(&col(&ours, f)),
            stats(&col(&go, f)),
            stats(&col(&mpi, f)),
            ratios(&ours, &go, f),
            ratios(&ours, &mpi, f)
        );
    }
    println!("\nPing-pong between the two ranks (min / median / max)\n");
    println!(
        "| | host, shared memory | host, TCP on loopback | operator's pods | Go operator's pods | MPI Operator's pods |"
    );
    println!("|---|--:|--:|--:|--:|--:|");
    println!(
        "| latency, 8 B (µs) | {} | {} | {} | {} | {} |",
        stats(&col(&host, |f| f.latency_us)),
        stats(&col(&host, |f| f.tcp_latency_us)),
        stats(&col(&ours, |f| f.latency_us)),
        stats(&col(&go, |f| f.latency_us)),
        stats(&col(&mpi, |f| f.latency_us))
    );
    println!(
        "| bandwidth, 1 MiB (MB/s) | {} | {} | {} | {} | {} |",
        stats(&col(&host, |f| f.bandwidth)),
        stats(&col(&host, |f| f.tcp_bandwidth)),
        stats(&col(&ours, |f| f.bandwidth)),
        stats(&col(&go, |f| f.bandwidth)),
        stats(&col(&mpi, |f| f.bandwidth))
    );
}
