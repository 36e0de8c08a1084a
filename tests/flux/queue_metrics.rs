//! The queue metrics of the lead pod (`queue-metrics.py` on port flux-metrics), read from
//! a real instance with jobs in every state a user waits on.

use std::time::Duration;

use flux_operator::flux::QUEUE_METRICS_PORT;

use crate::cluster::{MiniClusterRun, Start, minicluster};
use crate::metrics::sum_samples;

const RUN: Duration = Duration::from_secs(120);

const YAML: &str = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: queue
spec:
  size: 2
  maxSize: 3
  interactive: true
  containers:
    - image: rockylinux:9
";

/// `GET /metrics` on the lead's metrics port, from inside its Flux container.
fn scrape(run: &MiniClusterRun) -> String {
    run.flux_ok(&format!(
        "python -c 'import urllib.request as u; \
         print(u.urlopen(\"http://127.0.0.1:{QUEUE_METRICS_PORT}/metrics\", timeout=10).read().decode())'"
    ))
}

/// `flux submit <args>`: the job's id.
fn submit(run: &MiniClusterRun, args: &str) -> String {
    run.flux_ok(&format!("submit {args}")).trim().to_string()
}

fn value(text: &str, metric: &str, filter: &[(&str, &str)]) -> f64 {
    sum_samples(text, metric, filter)
        .unwrap_or_else(|| panic!("no {metric} {filter:?} in:\n{text}"))
}

#[test]
fn queue_metrics_count_jobs_by_state_nodes_by_state_and_the_size_the_queue_wants() {
    let run = MiniClusterRun::start(minicluster(YAML), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    let idle = scrape(&run);
    assert_eq!(
        value(&idle, "flux_jobs", &[("state", "waiting")]),
        0.0,
        "{idle}"
    );
    assert_eq!(
        value(&idle, "flux_nodes", &[("state", "up")]),
        2.0,
        "{idle}"
    );
    assert_eq!(
        value(&idle, "flux_nodes", &[("state", "down")]),
        1.0,
        "{idle}"
    );
    assert_eq!(
        value(&idle, "flux_nodes", &[("state", "free")]),
        2.0,
        "{idle}"
    );
    assert_eq!(value(&idle, "flux_nodes_wanted", &[]), 1.0, "{idle}");

    // Both ranks busy; a 2-node job waits for them; one held; one waiting on a dependency.
    let running = submit(&run, "-N2 --exclusive sleep 300");
    run.wait_flux(&format!("jobs -no {{state}} {running}"), RUN, |o| {
        o.trim() == "RUN"
    });
    let waiting = submit(&run, "-N2 true");
    submit(&run, "--urgency=hold true");
    submit(&run, &format!("--dependency=afterany:{running} true"));
    run.wait_flux(&format!("jobs -no {{state}} {waiting}"), RUN, |o| {
        o.trim() == "SCHED"
    });
    std::thread::sleep(Duration::from_secs(1));
    let busy = scrape(&run);
    for (state, count) in [
        ("running", 1.0),
        ("waiting", 1.0),
        ("held", 1.0),
        ("pending", 1.0),
    ] {
        assert_eq!(
            value(&busy, "flux_jobs", &[("state", state)]),
            count,
            "{state}:\n{busy}"
        );
    }
    assert_eq!(
        value(&busy, "flux_nodes", &[("state", "allocated")]),
        2.0,
        "{busy}"
    );
    assert_eq!(
        value(&busy, "flux_nodes", &[("state", "free")]),
        0.0,
        "{busy}"
    );
    // The 2 allocated ranks kept, and 2 more for the waiting job.
    assert_eq!(value(&busy, "flux_nodes_wanted", &[]), 4.0, "{busy}");
    let age = value(&busy, "flux_oldest_waiting_job_age_seconds", &[]);
    assert!((1.0..60.0).contains(&age), "waiting for {age} s:\n{busy}");

    // Drained ranks are not free, and finished jobs are counted by result.
    run.flux_ok(&format!("cancel {running} {waiting}"));
    run.flux_ok("resource drain 1 e2e");
    // Only the held job is left (the dependent one ran once its dependency ended).
    run.wait_flux("jobs -no {id} --filter=pending,running", RUN, |o| {
        o.lines().count() == 1
    });
    let drained = scrape(&run);
    assert_eq!(
        value(&drained, "flux_nodes", &[("state", "drained")]),
        1.0,
        "{drained}"
    );
    assert_eq!(
        value(&drained, "flux_nodes", &[("state", "free")]),
        1.0,
        "{drained}"
    );
    assert_eq!(
        value(&drained, "flux_jobs_inactive", &[("result", "canceled")]),
        2.0,
        "{drained}"
    );
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}

/// Python, in the lead's Flux container: holds CONNECTIONS to the exporter open, one with half
/// a request sent and the rest with nothing, then scrapes once and prints how long it took;
/// then 20 scrapes at once, and how many queries of the broker they made (the exporter's
/// count, read more than its cached second before and after them; the reading after is a
/// query of its own).
const STALLERS: &str = r#"
import socket, threading, time, urllib.request as u
url = "http://127.0.0.1:PORT/metrics"
def queries():
    text = u.urlopen(url, timeout=30).read().decode()
    line = [l for l in text.splitlines() if l.startswith("flux_queue_metrics_queries_total ")]
    return float(line[0].split()[1])
held = [socket.create_connection(("127.0.0.1", PORT)) for _ in range(CONNECTIONS)]
held[0].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
time.sleep(0.5)
t0 = time.monotonic()
u.urlopen(url, timeout=30).read()
print("scrape_seconds", time.monotonic() - t0)
time.sleep(1.5)
before = queries()
time.sleep(1.5)
storm = [threading.Thread(target=lambda: u.urlopen(url, timeout=30).read()) for _ in range(20)]
t0 = time.monotonic()
for t in storm: t.start()
for t in storm: t.join()
print("storm_seconds", time.monotonic() - t0)
time.sleep(1.5)
print("storm_queries", queries() - before - 1)
"#;

/// The figure after `name` in the stallers' output.
fn figure(out: &str, name: &str) -> f64 {
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
}

#[test]
fn held_open_and_half_sent_connections_do_not_stall_a_scrape_and_a_storm_costs_one_query_a_second()
{
    let run = MiniClusterRun::start(minicluster(YAML), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    let script = STALLERS
        .replace("PORT", &QUEUE_METRICS_PORT.to_string())
        .replace("CONNECTIONS", "8");
    let out = run.flux_ok(&format!("python -c '{script}'"));
    // Before: the single-threaded server read the held connection's request line for good,
    // and the scrape behind it waited its whole timeout.
    let scrape = figure(&out, "scrape_seconds");
    assert!(scrape < 3.0, "the scrape took {scrape} s:\n{out}");
    let storm = figure(&out, "storm_seconds");
    assert!(storm < 10.0, "20 scrapes at once took {storm} s:\n{out}");
    // One query for the storm, or two if it straddled the end of the cached second.
    let queries = figure(&out, "storm_queries");
    assert!(
        (1.0..=2.0).contains(&queries),
        "20 scrapes asked the broker {queries} times:\n{out}"
    );
    run.shutdown();
    assert_eq!(run.wait_lead(RUN), 0, "{}", run.debug());
}
