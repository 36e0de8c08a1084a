//! Small helpers: the environment's knobs, the load, a process's CPU and memory, the API server's metrics.

use super::*;

pub(crate) fn env_or<T: FromStr>(name: &str, default: T) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|e| anyhow::anyhow!("{name}={v}: {e}")),
        _ => Ok(default),
    }
}

pub(crate) fn env_list<T: FromStr>(name: &str, default: &str) -> Result<Vec<T>>
where
    T::Err: std::fmt::Display,
{
    let v = std::env::var(name).unwrap_or_else(|_| default.to_string());
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|e| anyhow::anyhow!("{name}: {s}: {e}")))
        .collect()
}

pub(crate) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

pub(crate) fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process, in seconds.
pub(crate) fn cpu_secs(pid: u32, ticks: f64) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces), from field 3 (state) on.
    let rest = stat.rsplit_once(')').context("malformed stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11).context("no utime")?.parse()?;
    let stime: f64 = fields.get(12).context("no stime")?.parse()?;
    Ok((utime + stime) / ticks)
}

/// The whole machine's CPU seconds so far, from the first line of `/proc/stat` (in clock
/// ticks): (stolen by the hypervisor, idle with I/O wait). Over a run, the stolen seconds say
/// whether the host took cycles from this machine; the idle ones whether the run used it all.
pub(crate) fn machine_cpu(ticks: f64) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal ...
    let (idle, iowait, steal) = (*v.get(3)?, *v.get(4)?, *v.get(7)?);
    Some((steal / ticks, (idle + iowait) / ticks))
}

/// Milliseconds, the median of five, that a fixed piece of single-threaded work takes now:
/// random updates over 8 MiB (memory as well as the core). Taken before each run, with the
/// cluster quiet, it reads this machine's pace the same way for every arm, so that a run the
/// machine slowed can be told from what its arm did.
pub(crate) fn pace_ms() -> f64 {
    let mut buf = vec![0u64; 1 << 20];
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            for i in 0..(1u64 << 24) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let j = (x as usize) & (buf.len() - 1);
                buf[j] = buf[j].wrapping_add(i);
            }
            std::hint::black_box(&buf);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[2]
}

/// Peak resident set size (VmHWM) in MiB.
pub(crate) fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

pub(crate) fn read_pid(path: &Path) -> Result<u32> {
    std::fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .parse()
        .with_context(|| format!("parsing {}", path.display()))
}

/// (name, pid) of the control plane's processes, from their pid files under `E2E_STATE`
/// (the cluster `E2E_CLUSTER`).
pub(crate) fn control_plane(state: &Path) -> Result<Vec<(&'static str, u32)>> {
    let cluster = std::env::var("E2E_CLUSTER").unwrap_or_else(|_| "flux-operator-e2e".into());
    let kwok_pids = state.join("kwok/clusters").join(&cluster).join("pids");
    let mut procs = Vec::new();
    for (name, file) in [
        ("kube-apiserver", kwok_pids.join("kube-apiserver.pid")),
        ("jobset", state.join("pids/jobset.pid")),
        (
            "kube-controller-manager",
            kwok_pids.join("kube-controller-manager.pid"),
        ),
        ("kube-scheduler", kwok_pids.join("kube-scheduler.pid")),
        ("kwok", kwok_pids.join("kwok-controller.pid")),
        ("etcd", kwok_pids.join("etcd.pid")),
    ] {
        procs.push((name, read_pid(&file)?));
    }
    Ok(procs)
}

/// The split of the CPU profiles at `paths`, merged ([`ProfileSplit`]), from `go tool pprof
/// -top -cum` (Go builds the control plane here, so its toolchain is on the machine). `None`
/// when pprof cannot read them.
pub(crate) fn profile_split(paths: &[PathBuf]) -> Option<ProfileSplit> {
    let out = Command::new("go")
        .args([
            "tool",
            "pprof",
            "-top",
            "-cum",
            "-nodecount=100000",
            "-nodefraction=0",
            "-unit=s",
        ])
        .args(paths)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    // "Duration: 30.13s, Total samples = 25.31s (84.02%)"
    let total = text.lines().find_map(|l| {
        l.split_once("Total samples = ")?
            .1
            .split('s')
            .next()?
            .parse()
            .ok()
    })?;
    // "  flat  flat%   sum%        cum   cum%  name": the cumulative seconds of a function.
    let cum = |names: &[&str]| -> f64 {
        (text.lines())
            .filter_map(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                let name = fields.get(5..)?.join(" ");
                names
                    .contains(&name.as_str())
                    .then(|| fields[3].trim_end_matches('s').parse::<f64>().ok())?
            })
            .sum()
    };
    Some(ProfileSplit {
        total,
        watch: cum(ProfileSplit::WATCH),
        writes: cum(ProfileSplit::WRITES),
        reads: cum(ProfileSplit::READS),
        gc: cum(ProfileSplit::GC),
        cel: cum(ProfileSplit::CEL),
        cr_status: cum(ProfileSplit::CR_STATUS),
    })
}

/// The resource of a watch metric's sample, "resource[.group]" (Kubernetes labels it
/// `resource` and `group`; older releases `kind` and `group`).
fn watch_key(labels: &[(String, String)]) -> String {
    let resource = match label(labels, "resource") {
        "" => label(labels, "kind"),
        r => r,
    };
    match label(labels, "group") {
        "" => resource.to_string(),
        group => format!("{resource}.{group}"),
    }
}

pub(crate) fn api_stats_from(text: &str) -> ApiStats {
    let mut s = ApiStats::default();
    for line in text.lines() {
        let Some((name, labels, value)) = parse_sample(line) else {
            continue;
        };
        match name {
            "apiserver_request_total" => {
                let resource = label(&labels, "resource");
                let key = if resource.is_empty() {
                    format!("{} (non-resource)", label(&labels, "verb"))
                } else {
                    let group = label(&labels, "group");
                    let sub = label(&labels, "subresource");
                    let mut k = format!("{} {resource}", label(&labels, "verb"));
                    if !group.is_empty() {
                        k.push('.');
                        k.push_str(group);
                    }
                    if !sub.is_empty() {
                        k.push('/');
                        k.push_str(sub);
                    }
                    k
                };
                let code = label(&labels, "code");
                if !code.starts_with('2') {
                    *s.failed.entry(format!("{code} {key}")).or_default() += value;
                }
                *s.requests.entry(key).or_default() += value;
            }
            "apiserver_watch_events_total" => {
                *s.watch_events.entry(watch_key(&labels)).or_default() += value;
            }
            "apiserver_watch_events_sizes_sum" => {
                *s.watch_bytes.entry(watch_key(&labels)).or_default() += value;
            }
            "apiserver_admission_webhook_admission_duration_seconds_sum" => {
                *s.webhook_secs
                    .entry(label(&labels, "name").to_string())
                    .or_default() += value;
            }
            "apiserver_admission_webhook_admission_duration_seconds_count" => {
                *s.webhook_calls
                    .entry(label(&labels, "name").to_string())
                    .or_default() += value;
            }
            "apiserver_request_duration_seconds_sum"
                if label(&labels, "verb") == "POST"
                    && label(&labels, "resource") == "pods"
                    && label(&labels, "subresource").is_empty() =>
            {
                s.pod_create_secs += value;
            }
            "apiserver_request_duration_seconds_count"
                if label(&labels, "verb") == "POST"
                    && label(&labels, "resource") == "pods"
                    && label(&labels, "subresource").is_empty() =>
            {
                s.pod_creates += value;
            }
            _ => {}
        }
    }
    s
}

/// The MiniCluster every arm runs: the same file for both operators and for `render`.
pub(crate) fn minicluster_yaml(
    name: &str,
    namespace: &str,
    size: usize,
    max_size: Option<usize>,
) -> String {
    let max_size = max_size.map_or(String::new(), |m| format!("  maxSize: {m}\n"));
    format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {name}\n  \
         namespace: {namespace}\nspec:\n  size: {size}\n{max_size}  containers:\n    - image: rockylinux:9\n      \
         command: sleep infinity\n"
    )
}
