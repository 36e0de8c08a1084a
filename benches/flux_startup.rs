//! Real-Flux startup benchmark (issue 8): how long an interactive MiniCluster of N brokers
//! takes, from the lead broker's start, until every rank is online and until its first
//! N-node job is done. Printed figures, not a timed test. Needs root and Flux from
//! `e2e/build-flux.sh`; run with `make bench-flux`.
//!
//! Each run starts a fresh MiniCluster (`interactive: true`, `size: N`, one `rockylinux:9`
//! container) on the pod emulator of the real-Flux tier, rendered by the operator's own code,
//! lead and followers started together. One `kubectl exec`-style command in the lead waits
//! for the broker socket, then for the broker's `state-machine.wait` RPC (answered when rank 0
//! enters the `run` state, i.e. when the quorum, by default every rank, is online: no polling),
//! runs `flux run -N<N> true`, and prints what Flux recorded. Every figure is a difference of
//! two timestamps taken by Flux itself, so neither the exec nor this program's timing counts:
//!
//! - origin: the lead broker's `broker.starttime` attribute (wall clock, set at the start of
//!   `flux-broker`'s main, 10 ms resolution);
//! - (a) all ranks online: the lead's `flux dmesg` line `online: ... (ranks 0-<N-1>)`, which
//!   rank 0 logs when the `broker.online` group reaches the quorum (every rank), just before
//!   `quorum-full` takes it to `run`;
//! - (b) first job done: the job's `t_inactive` (`flux jobs`), the job submitted as soon as the
//!   instance entered `run` (as a batch MiniCluster's initial program would be).
//!
//! Also printed, for context: pods created -> lead broker start (this program's clock before
//! the pods are made, against `broker.starttime`: sandbox, volumes, init container and the
//! entrypoint up to `flux start`).
//!
//! Sizes are interleaved across rounds (round 1: 2, 4, 8, 16; round 2: ...) so that noise
//! spreads evenly. Before each run it waits (up to 10 minutes) until no `flux-broker` process
//! started in the last 10 minutes runs on the machine, and marks runs during which other
//! brokers ran (seen at the start or when the job was done); each run's line shows the
//! 1-minute load average.
//!
//! Environment: `FLUX_BENCH_SIZES` (default `2,4,8,16`), `FLUX_BENCH_RUNS` (default 5),
//! `FLUX_BENCH_FLUX=core` (the flux-core-only build with `scheduler.simple`, for development),
//! `FLUX_BENCH_DEBUG=1` (print what the lead's command printed).

#[path = "../tests/flux/cluster.rs"]
#[allow(dead_code)]
mod cluster;
#[path = "../tests/flux/kubelet.rs"]
#[allow(dead_code)]
mod kubelet;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cluster::{FluxBuild, MiniClusterRun, Start, minicluster};
use flux_operator::flux::SOCKET_PATH;

const TIMEOUT: Duration = Duration::from_secs(300);

/// One run's figures, in seconds from the lead broker's start.
#[derive(Clone, Copy, Debug)]
struct Figures {
    pods_to_broker: f64,
    online: f64,
    job_done: f64,
    /// Another `flux-broker` was running when the run started or when its job was done.
    noisy: bool,
}

fn yaml(n: usize, core_only: bool) -> String {
    let sched = if core_only {
        "  flux:\n    scheduler:\n      simple: true\n"
    } else {
        ""
    };
    format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  \
         name: bench{n}\nspec:\n  size: {n}\n  interactive: true\n{sched}  containers:\n    \
         - image: rockylinux:9\n"
    )
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Ages in seconds of the `flux-broker` processes on the machine younger than `max_age`
/// (a broker names itself `flux-broker-<rank>`). Older ones are left over from some other
/// run, idle: they are reported once, not waited for.
fn brokers(max_age: f64) -> Vec<f64> {
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: field 22 is the start time in clock ticks (100 Hz).
        let Some((comm, rest)) = stat.split_once(" (").and_then(|(_, r)| r.rsplit_once(") "))
        else {
            continue;
        };
        if !comm.starts_with("flux-broker") {
            continue;
        }
        let started = rest
            .split_whitespace()
            .nth(19)
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 100.0;
        let age = uptime - started;
        if age < max_age {
            out.push(age);
        }
    }
    out
}

/// Brokers started in the last 10 minutes count as another test's, running now.
const ACTIVE: f64 = 600.0;

/// Wait until no broker runs (ours from the previous run are going away too); whether some
/// still did after the wait.
fn wait_quiet() -> bool {
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut said = false;
    loop {
        let b = brokers(ACTIVE);
        if b.is_empty() {
            return false;
        }
        if Instant::now() > deadline {
            eprintln!(
                "  still {} other flux-broker processes: measuring anyway",
                b.len()
            );
            return true;
        }
        if !said {
            std::thread::sleep(Duration::from_secs(5));
            if !brokers(ACTIVE).is_empty() {
                eprintln!(
                    "  waiting for {} other flux-broker processes to end...",
                    b.len()
                );
                said = true;
            }
            continue;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn run_once(n: usize, core_only: bool) -> Result<Figures, String> {
    let noisy = wait_quiet();
    let how = Start {
        flux: if core_only {
            FluxBuild::CoreOnly
        } else {
            FluxBuild::WithFluxion
        },
        ..Start::default()
    };
    let created = now();
    let run = MiniClusterRun::start(minicluster(&yaml(n, core_only)), how);
    let view = run.mc.spec.flux.container.mount_path.clone();
    let script = format!(
        r#"export PATH="$PATH:{view}/view/bin" FLUX_URI=local://{SOCKET_PATH}
for _ in $(seq 6000); do [ -S {SOCKET_PATH} ] && break; sleep 0.05; done
for _ in $(seq 600); do
    flux python -c 'import flux; flux.Flux().rpc("state-machine.wait").get()' 2>/dev/null && break
    sleep 0.2
done
flux run -N{n} true || echo "@error flux run failed"
echo "@starttime $(flux getattr broker.starttime)"
flux jobs -a -no '@job {{t_submit}} {{t_inactive}} {{result}}'
flux dmesg | sed -n -e 's/^/@dmesg /' -e '/online:\|quorum-full/p'
"#
    );
    let (code, out) = run.exec_lead(&["/bin/bash", "-c", &script]);
    // Brokers of other tests that came up during the measurement (ours are `n`).
    let others = brokers(ACTIVE).len().saturating_sub(n);
    if std::env::var_os("FLUX_BENCH_DEBUG").is_some() {
        eprintln!("{out}");
    }
    let figures =
        parse(n, created, &out).map_err(|e| format!("{e} (exit {code}):\n{out}\n{}", run.debug()));
    let (code, sd) = run.flux("shutdown --quiet");
    if code != 0 {
        eprintln!("  flux shutdown: {sd}");
    } else {
        let _ = run.lead().wait_exit(&run.flux_container(), TIMEOUT);
    }
    drop(run);
    figures.map(|f| Figures {
        noisy: noisy || others > 0,
        ..f
    })
}

fn parse(n: usize, created: f64, out: &str) -> Result<Figures, String> {
    let field = |tag: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(tag))
            .map(str::trim)
            .ok_or_else(|| format!("no {tag} line"))
    };
    if out.contains("@error") {
        return Err("the job failed".into());
    }
    let start: f64 = field("@starttime ")?
        .parse()
        .map_err(|e| format!("broker.starttime: {e}"))?;
    let job: Vec<&str> = field("@job ")?.split_whitespace().collect();
    if job.get(2) != Some(&"COMPLETED") {
        return Err(format!("job: {job:?}"));
    }
    let done: f64 = job[1].parse().map_err(|e| format!("t_inactive: {e}"))?;
    let all = if n == 1 {
        "(ranks 0)".to_string()
    } else {
        format!("(ranks 0-{})", n - 1)
    };
    let online_line = out
        .lines()
        .filter_map(|l| l.strip_prefix("@dmesg "))
        .find(|l| l.contains("online:") && l.trim_end().ends_with(&all))
        .ok_or_else(|| format!("no dmesg line `online: ... {all}`"))?;
    let stamp = online_line.split_whitespace().next().unwrap_or_default();
    let online: jiff::Timestamp = stamp
        .parse()
        .map_err(|e| format!("dmesg timestamp {stamp:?}: {e}"))?;
    let online = online.as_microsecond() as f64 / 1e6;
    Ok(Figures {
        pods_to_broker: start - created,
        online: online - start,
        job_done: done - start,
        noisy: false,
    })
}

/// The 1-minute load average (other work on the machine skews the figures).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    let median = if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    };
    (v[0], median, v[v.len() - 1])
}

fn env_list(key: &str, default: &str) -> Vec<usize> {
    std::env::var(key)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| s.trim().parse().unwrap_or_else(|_| panic!("{key}: {s:?}")))
        .collect()
}

fn main() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1));
    if euid != Some("0") {
        eprintln!("flux_startup: the pod emulator needs root");
        std::process::exit(1);
    }
    let sizes = env_list("FLUX_BENCH_SIZES", "2,4,8,16");
    let runs = env_list("FLUX_BENCH_RUNS", "5")[0];
    let core_only = std::env::var("FLUX_BENCH_FLUX").is_ok_and(|v| v == "core");
    let build = if core_only {
        "flux-core only, sched-simple"
    } else {
        "flux-core + Fluxion (default scheduler)"
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "Real-Flux startup: interactive MiniCluster, {build}, {runs} runs per size, sizes \
         {sizes:?} interleaved, {cores} cores"
    );
    let stale = brokers(f64::INFINITY)
        .len()
        .saturating_sub(brokers(ACTIVE).len());
    if stale > 0 {
        println!(
            "({stale} flux-broker processes older than 10 minutes, idle leftovers: not waited for)"
        );
    }
    let mut results: Vec<Vec<Figures>> = vec![Vec::new(); sizes.len()];
    for round in 1..=runs {
        for (i, &n) in sizes.iter().enumerate() {
            match run_once(n, core_only) {
                Ok(f) => {
                    println!(
                        "round {round} size {n:>2}: pods->broker {:6.2} s  online {:6.2} s  \
                         job done {:6.2} s  load {}{}",
                        f.pods_to_broker,
                        f.online,
                        f.job_done,
                        load(),
                        if f.noisy {
                            "  (other brokers running)"
                        } else {
                            ""
                        }
                    );
                    results[i].push(f);
                }
                Err(e) => println!("round {round} size {n:>2}: FAILED: {e}"),
            }
        }
    }
    println!();
    println!("seconds, min / median / max over the runs; origin: the lead's broker.starttime");
    println!(
        "{:>7} {:>4}  {:>22}  {:>22}  {:>22}",
        "brokers", "runs", "pods -> lead broker", "(a) all ranks online", "(b) first job done"
    );
    for (i, &n) in sizes.iter().enumerate() {
        let r = &results[i];
        if r.is_empty() {
            println!("{n:>7} {:>4}  (every run failed)", 0);
            continue;
        }
        let cell = |f: fn(&Figures) -> f64| {
            let (lo, med, hi) = stats(r.iter().map(f).collect());
            format!("{lo:6.2} / {med:6.2} / {hi:6.2}")
        };
        let noisy = r.iter().filter(|f| f.noisy).count();
        println!(
            "{n:>7} {:>4}  {:>22}  {:>22}  {:>22}{}",
            r.len(),
            cell(|f| f.pods_to_broker),
            cell(|f| f.online),
            cell(|f| f.job_done),
            if noisy > 0 {
                format!("  ({noisy} with other brokers running)")
            } else {
                String::new()
            }
        );
    }
    println!();
    println!(
        "pods -> lead broker: this program's clock before the pods are made, to broker.starttime"
    );
    println!(
        "(a): `flux dmesg` `online: ... (ranks 0-<N-1>)` (rank 0: broker.online reached every rank)"
    );
    println!(
        "(b): the job's t_inactive (`flux jobs`); `flux run -N<N> true` submitted when the \
         lead entered `run` (state-machine.wait)"
    );
}
