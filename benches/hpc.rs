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
//! - `BENCH_HPC_BIND=none`: a diagnostic run in which the jobs in the pods ask for no binding;
//!   `BENCH_HPC_CPU_LIMIT=none`: one in which the pods have no CPU limit.
//! - **ping-pong**: `mpi-check pingpong` (`e2e/mpi/mpi-check.c`) between the two ranks:
//!   the latency of 8-byte messages and the bandwidth of 1 MiB ones, between the two pods
//!   (TCP through the node's bridge) and between two host processes (shared memory, and TCP
//!   on the loopback as the transport's own floor).
//!
//! The host runs each program twice, with shared memory and over TCP on the loopback only
//! (the floor of the transport the pods' ranks have). `hns_osu` adds the Go operator's
//! LAMMPS example (ReaxFF HNS) and OSU's latency and bandwidth, from the trixie MPI image.
//! `BENCH_HPC_PROGRAMS`: `lj`, `hns-osu` or both (the default), comma-separated.

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
mod hns_osu;
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

/// Where a round's program runs: LJ and the ping-pong, or the trixie programs.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Where {
    Host,
    HostTcp,
    In(Arm),
    MpiOperator,
    Trixie(hns_osu::Place),
}

impl Where {
    fn title(self) -> String {
        match self {
            Where::Host => "host mpirun".into(),
            Where::HostTcp => "host mpirun, TCP".into(),
            Where::In(arm) => arm.title().into(),
            Where::MpiOperator => "MPI Operator".into(),
            Where::Trixie(place) => format!("HNS and OSU, {}", place.title()),
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
}

/// The number in environment variable `name`, or `default`.
fn env_number(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn steps() -> u32 {
    env_number("BENCH_HPC_STEPS", 1500)
}

/// `BENCH_HPC_BIND=none`, a diagnostic: the jobs in the pods ask that no rank be bound to a
/// core (`-o cpu-affinity=off`, `mpirun --bind-to none`), to show what binding costs where
/// each pod believes the node's first core is its own.
fn unbound() -> bool {
    std::env::var("BENCH_HPC_BIND").is_ok_and(|v| v == "none")
}

/// The option of a Flux job that asks for no binding when `unbound()`.
fn flux_bind() -> &'static str {
    if unbound() {
        "-o cpu-affinity=off "
    } else {
        ""
    }
}

/// `mpirun`'s option that binds no rank when `unbound()`.
fn mpirun_bind() -> &'static str {
    if unbound() { "--bind-to none " } else { "" }
}

/// From an MPIJob launcher's log (its `START` and `END` stamps): the launch (start to end)
/// and the up (apply to start).
fn launched(run: &mpi_operator::Launched) -> Result<(f64, f64)> {
    let out = &run.log;
    let (start, end) = (tagged(out, "START ")?[0], tagged(out, "END ")?[0]);
    Ok((end - start, start - run.applied))
}

/// Whether `BENCH_HPC_PROGRAMS` (default: all) names PROGRAM.
fn runs_program(program: &str) -> bool {
    std::env::var("BENCH_HPC_PROGRAMS").map_or(true, |v| v.split(',').any(|p| p.trim() == program))
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

/// The floor: the same LAMMPS and ping-pong as plain processes, with shared memory or over
/// TCP on the loopback only.
fn on_host(mpi_check: &Path, tcp: bool) -> Result<Figures> {
    let only_tcp = [
        "--mca",
        "btl",
        "tcp,self",
        "--mca",
        "btl_tcp_if_include",
        "lo",
    ];
    let transport: &[&str] = if tcp { &only_tcp } else { &[] };
    let started = Instant::now();
    let mut lmp = mpirun(transport);
    lmp.args(["lmp", "-in"])
        .arg(input())
        .args(lammps_args().split(' '));
    let log = output(&mut lmp)?;
    let launch = started.elapsed().as_secs_f64();
    let (loop_s, wall_s) = lammps_times(&log)?;
    let count = PINGPONG_ITERATIONS.to_string();
    let out = output(mpirun(transport).arg(mpi_check).args(["pingpong", &count]))?;
    let (latency_us, bandwidth) = pingpong(&out)?;
    Ok(Figures {
        loop_s,
        wall_s,
        launch,
        latency_us,
        bandwidth,
        ..Default::default()
    })
}

/// `BENCH_HPC_CPU_LIMIT=none`, a diagnostic: the pods (the MiniClusters' and the MPIJobs'
/// workers) have no CPU limit, so no CFS quota holds their ranks, broker and probes.
pub fn cpu_limit() -> &'static str {
    if std::env::var("BENCH_HPC_CPU_LIMIT").is_ok_and(|v| v == "none") {
        "{}"
    } else {
        "{cpu: 1}"
    }
}

fn minicluster(arm: Arm, image: &str) -> Result<String> {
    let mut yaml = format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {MC}\n\
         spec:\n  size: 2\n  interactive: true\n  containers:\n    - image: {image}\n\
         \x20     resources:\n        requests: {{cpu: 100m}}\n        limits: {limits}\n\
         \x20 flux:\n    container:\n      image: {VIEW}\n",
        limits = cpu_limit(),
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
        flux_bind = flux_bind(),
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

/// A fresh MiniCluster of ARM with IMAGE in a namespace of its own: SCRIPT (of the lead's
/// socket) runs on its lead once it runs (it prints `UP <time>` when both brokers are up),
/// then the MiniCluster is deleted. The script's output, apply to `UP`, delete to no pod.
async fn run_in_minicluster(
    bench: &mut Bench,
    arm: Arm,
    image: &str,
    script: impl FnOnce(&str) -> Result<String>,
) -> Result<(String, f64, f64)> {
    bench.use_crd(arm).await?;
    let ns = TestNamespace::create("hpc").await?;
    on_real_node(&ns.name)?;
    let _operator = bench.start(arm, &ns.name).await?;
    let (socket, prefix) = arm.socket_and_lead(MC);
    let script = script(socket)?;

    let t0 = now();
    apply_yaml(&ns.name, &minicluster(arm, image)?)?;
    let lead = running_lead(&ns.name, &prefix, MC).await?;
    let out = wait_for("the programs in the MiniCluster", LIMIT, || async {
        let exec = ["exec", &lead, "-c", MC, "--", "bash", "-c", &script];
        kubectl_in(&ns.name, &exec).map(Some)
    })
    .await?;
    let up = tagged(&out, "UP ")?[0] - t0;
    let down = delete_and_time(&ns.name, MC).await?;
    ns.cleanup().await;
    Ok((out, up, down))
}

/// From a lead script's output: LAMMPS' loop and wall times, and its Flux job's submission
/// to end (the script's `STAMPS t_submit t_inactive`).
fn lammps_job(out: &str) -> Result<(f64, f64, f64)> {
    let (loop_s, wall_s) = lammps_times(out)?;
    let [submitted, done] = tagged(out, "STAMPS ")?[..] else {
        bail!("t_submit, t_inactive:\n{out}");
    };
    Ok((loop_s, wall_s, done - submitted))
}

/// LAMMPS and the ping-pong in a MiniCluster of ARM.
async fn in_minicluster(bench: &mut Bench, arm: Arm) -> Result<Figures> {
    let (out, up, down) = run_in_minicluster(bench, arm, IMAGE, lead_script).await?;
    let (loop_s, wall_s, launch) = lammps_job(&out)?;
    let (latency_us, bandwidth) = pingpong(&out)?;
    Ok(Figures {
        loop_s,
        wall_s,
        launch,
        up,
        down,
        latency_us,
        bandwidth,
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
        mpirun_bind = mpirun_bind(),
    )
}

/// LAMMPS and the ping-pong in an MPIJob of the MPI Operator.
async fn in_mpijob(mpi: &MpiOperator) -> Result<Figures> {
    let job = mpi_operator::Job {
        script: &launcher_script(),
        image: IMAGE,
        implementation: "OpenMPI",
        input: Some(&input()),
    };
    let run = mpi.run(&job).await?;
    let out = &run.log;
    let (launch, up) = launched(&run)?;
    let (loop_s, wall_s) = lammps_times(out)?;
    let (latency_us, bandwidth) = pingpong(out)?;
    Ok(Figures {
        loop_s,
        wall_s,
        launch,
        up,
        down: run.down,
        latency_us,
        bandwidth,
    })
}

/// One figure of a run.
type Figure = fn(&Figures) -> f64;

/// Every place a round runs, in the first round's order.
fn places() -> Vec<Where> {
    let mut all = Vec::new();
    if runs_program("lj") {
        all.extend([Where::Host, Where::HostTcp, Where::In(Arm::Operator)]);
        all.extend([Where::In(Arm::Go), Where::MpiOperator]);
    }
    if runs_program("hns-osu") {
        use hns_osu::Place;
        all.extend([Place::HostShm, Place::HostTcp].map(Where::Trixie));
        all.extend([Place::In(Arm::Operator), Place::In(Arm::Go)].map(Where::Trixie));
        all.push(Where::Trixie(Place::MpiOperator));
    }
    all
}

/// Every run's figures, by place.
#[derive(Default)]
struct Runs {
    lj: BTreeMap<Where, Vec<Figures>>,
    hns_osu: BTreeMap<hns_osu::Place, Vec<hns_osu::Figures>>,
}

impl Runs {
    /// Runs the programs of PLACE once, prints and keeps its figures.
    async fn run(
        &mut self,
        place: Where,
        bench: &mut Bench,
        mpi_check: &Path,
        mpi: &MpiOperator,
    ) -> Result<String> {
        let lj = match place {
            Where::Host => on_host(mpi_check, false)?,
            Where::HostTcp => on_host(mpi_check, true)?,
            Where::In(arm) => in_minicluster(bench, arm).await?,
            Where::MpiOperator => in_mpijob(mpi).await?,
            Where::Trixie(p) => {
                let f = match p {
                    hns_osu::Place::HostShm => hns_osu::on_host(false)?,
                    hns_osu::Place::HostTcp => hns_osu::on_host(true)?,
                    hns_osu::Place::In(arm) => hns_osu::in_minicluster(bench, arm).await?,
                    hns_osu::Place::MpiOperator => hns_osu::in_mpijob(mpi).await?,
                };
                let line = f.line();
                self.hns_osu.entry(p).or_default().push(f);
                return Ok(line);
            }
        };
        let line = format!(
            "loop {:.2} s, LAMMPS wall {:.0} s, launch {:.2} s, up {:.2} s, down {:.2} s, \
             ping-pong {:.1} us {:.0} MB/s",
            lj.loop_s, lj.wall_s, lj.launch, lj.up, lj.down, lj.latency_us, lj.bandwidth
        );
        self.lj.entry(place).or_default().push(lj);
        Ok(line)
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let rounds = env_number("BENCH_HPC_ROUNDS", 5) as usize;
    let all = places();
    ensure!(
        !all.is_empty(),
        "BENCH_HPC_PROGRAMS names neither lj nor hns-osu"
    );
    let mpi_check = host_mpi_check()?;
    let mut bench = Bench {
        client: client().await?,
        go_dir: built_go_operator()?,
        crd: None,
    };
    let mpi = MpiOperator::install()?;
    let started = load();
    let mut runs = Runs::default();
    for round in 0..rounds {
        let mut order = all.clone();
        order.rotate_left(round % all.len());
        for place in order {
            let line = runs
                .run(place, &mut bench, &mpi_check, &mpi)
                .await
                .with_context(|| format!("{} round {}", place.title(), round + 1))?;
            eprintln!("round {} {}: {line}", round + 1, place.title());
        }
    }
    bench.use_crd(Arm::Operator).await?;
    println!(
        "\n{rounds} interleaved rounds on the real node{}; load average at start {started}, at end {}",
        match (unbound(), cpu_limit() == "{}") {
            (true, true) => "; ranks in pods unbound, pods without a CPU limit",
            (true, false) => "; ranks in pods unbound (BENCH_HPC_BIND=none)",
            (false, true) => "; pods without a CPU limit (BENCH_HPC_CPU_LIMIT=none)",
            (false, false) => "",
        },
        load()
    );
    if !runs.lj.is_empty() {
        print_tables(&runs.lj);
    }
    if !runs.hns_osu.is_empty() {
        hns_osu::print_tables(&runs.hns_osu);
    }
    Ok(())
}

fn print_tables(figures: &BTreeMap<Where, Vec<Figures>>) {
    let runs = |w| figures.get(&w).cloned().unwrap_or_default();
    let (host, tcp, ours, go, mpi) = (
        runs(Where::Host),
        runs(Where::HostTcp),
        runs(Where::In(Arm::Operator)),
        runs(Where::In(Arm::Go)),
        runs(Where::MpiOperator),
    );
    let col = |v: &[Figures], f: Figure| v.iter().map(f).collect::<Vec<_>>();
    let ratios = |a: &[Figures], b: &[Figures], f: Figure| {
        let r: Vec<String> = a
            .iter()
            .zip(b)
            .map(|(a, b)| format!("{:.2}", f(a) / f(b)))
            .collect();
        r.join(", ")
    };
    println!(
        "\nLAMMPS (e2e/mpi/in.lj, {} steps, 32000 atoms), 2 MPI ranks, bookworm's Open MPI 4.1\n",
        steps(),
    );
    println!(
        "| figure (s, min / median / max) | host mpirun | host mpirun, TCP | operator | Go operator | \
         MPI Operator | operator / host TCP, per round | operator / Go, per round | \
         operator / MPI Operator, per round |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    let rows: [(&str, Figure, bool); 5] = [
        ("LAMMPS loop time", |f| f.loop_s, true),
        ("LAMMPS total wall time", |f| f.wall_s, true),
        ("launch (submission to end)", |f| f.launch, true),
        (
            "up: apply to both brokers up (MPI Operator: to mpirun's start)",
            |f| f.up,
            false,
        ),
        ("down: delete to no pod", |f| f.down, false),
    ];
    for (name, f, on_host) in rows {
        let (h, t, ht) = if on_host {
            (
                stats(&col(&host, f)),
                stats(&col(&tcp, f)),
                ratios(&ours, &tcp, f),
            )
        } else {
            ("-".into(), "-".into(), "-".into())
        };
        println!(
            "| {name} | {h} | {t} | {} | {} | {} | {ht} | {} | {} |",
            stats(&col(&ours, f)),
            stats(&col(&go, f)),
            stats(&col(&mpi, f)),
            ratios(&ours, &go, f),
            ratios(&ours, &mpi, f)
        );
    }
    println!("\nPing-pong between the two ranks (min / median / max)\n");
    println!(
        "| | host, shared memory | host, TCP on loopback | operator's pods | Go operator's pods | \
         MPI Operator's pods | operator / host TCP, per round |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|");
    let rows: [(&str, Figure); 2] = [
        ("latency, 8 B (µs)", |f| f.latency_us),
        ("bandwidth, 1 MiB (MB/s)", |f| f.bandwidth),
    ];
    for (name, f) in rows {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} |",
            stats(&col(&host, f)),
            stats(&col(&tcp, f)),
            stats(&col(&ours, f)),
            stats(&col(&go, f)),
            stats(&col(&mpi, f)),
            ratios(&ours, &tcp, f)
        );
    }
}
