//! The report: the tables printed at the end.

use super::*;

pub(crate) fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let v = sorted(v.to_vec());
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// "min / median / max" (or the one value).
pub(crate) fn mmm(v: &[f64], prec: usize) -> String {
    let s = sorted(v.to_vec());
    match s.len() {
        0 => "–".into(),
        1 => format!("{:.prec$}", s[0]),
        _ => format!(
            "{:.prec$} / {:.prec$} / {:.prec$}",
            s[0],
            median(&s),
            s[s.len() - 1]
        ),
    }
}

pub(crate) fn ratio(a: f64, b: f64) -> String {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "–".into()
    }
}

/// A figure of a run, when it has it.
pub(crate) type Figure<'a> = &'a dyn Fn(&Run) -> Option<f64>;

/// A row of a table: title, the figure of a run, decimals.
pub(crate) type Row = (&'static str, Box<dyn Fn(&Run) -> Option<f64>>, usize);

/// The figures of every run, printed as Markdown tables: one function a table.
pub(crate) struct Report<'a> {
    pub(crate) runs: &'a [Run],
    pub(crate) arms: &'a [Arm],
    pub(crate) rounds: usize,
    pub(crate) many_rounds: usize,
    pub(crate) idle: Duration,
}

pub(crate) fn report(
    runs: &[Run],
    arms: &[Arm],
    rounds: usize,
    many_rounds: usize,
    idle: Duration,
) -> String {
    let r = Report {
        runs,
        arms,
        rounds,
        many_rounds,
        idle,
    };
    let mut o = String::new();
    let scenarios: BTreeSet<Scenario> = runs.iter().map(|r| r.scenario).collect();
    let sizes = |of: fn(Scenario) -> Option<usize>| -> Vec<usize> {
        scenarios.iter().copied().filter_map(of).collect()
    };
    let singles = sizes(|s| match s {
        Scenario::Single(n) => Some(n),
        _ => None,
    });
    if !singles.is_empty() {
        r.seconds_to_ready(&mut o, &singles);
        r.teardown(&mut o, &singles);
        r.where_the_time_goes(&mut o, &singles);
        let n = *singles.last().unwrap_or(&0);
        r.webhooks(&mut o, Scenario::Single(n), &format!("N = {n}"));
    }
    let ends = sizes(|s| match s {
        Scenario::End(n) => Some(n),
        _ => None,
    });
    if !ends.is_empty() {
        r.end(&mut o, &ends);
    }
    for &sc in &scenarios {
        match sc {
            Scenario::Single(_) | Scenario::End(_) => {}
            Scenario::Resize(a, b) => r.resize(&mut o, a, b),
            Scenario::Many(m) => {
                r.many(&mut o, m);
                r.idle_requests(&mut o, m);
                r.requests_per_minicluster(&mut o, m);
                r.watch_events_per_minicluster(&mut o, m);
                r.webhooks(&mut o, sc, &format!("{m} MiniClusters"));
            }
        }
    }
    o
}

impl Report<'_> {
    /// The figure `f` of every run of `arm` in `sc` that has it.
    pub(crate) fn vals(&self, sc: Scenario, arm: Arm, f: Figure<'_>) -> Vec<f64> {
        self.runs
            .iter()
            .filter(|r| r.scenario == sc && r.arm == arm)
            .filter_map(f)
            .collect()
    }

    pub(crate) fn has(&self, a: Arm) -> bool {
        self.arms.contains(&a)
    }

    /// A table's head and rule: the first column's, then one right-aligned column an arm.
    pub(crate) fn head(&self, first: &str, first_rule: &str) -> (String, String) {
        let mut head = first.to_string();
        let mut rule = first_rule.to_string();
        for a in self.arms {
            let _ = write!(head, " {} |", a.title());
            rule.push_str("--:|");
        }
        (head, rule)
    }

    /// The pairs of arms whose ratio the tables show (numerator, denominator, title): those
    /// that both ran.
    pub(crate) fn pairs(&self) -> Vec<(Arm, Arm, &'static str)> {
        [
            (Arm::Operator, Arm::JobSet, "operator / bare JobSet"),
            (Arm::Operator, Arm::Go, "operator / Go"),
            (Arm::JobSet, Arm::Job, "bare JobSet / one Job"),
        ]
        .into_iter()
        .filter(|&(a, b, _)| self.has(a) && self.has(b))
        .collect()
    }

    /// `a / b` of the figure `f` in `sc`, the runs of one round paired, in round order
    /// ("1.04, 0.98, 1.10"; a round that lacks either is left out). An arm that ran twice in
    /// a round (`BENCH_MIRROR`) counts with the mean of its runs.
    pub(crate) fn per_round(&self, sc: Scenario, a: Arm, b: Arm, f: Figure<'_>) -> String {
        let of = |arm: Arm, round: usize| {
            let v: Vec<f64> = (self.runs.iter())
                .filter(|r| r.scenario == sc && r.arm == arm && r.round == round)
                .filter_map(f)
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let rounds: BTreeSet<usize> = self
            .runs
            .iter()
            .filter(|r| r.scenario == sc)
            .map(|r| r.round)
            .collect();
        let ratios: Vec<String> = rounds
            .into_iter()
            .filter_map(|k| Some(ratio(of(a, k)?, of(b, k)?)))
            .collect();
        if ratios.is_empty() {
            "–".into()
        } else {
            ratios.join(", ")
        }
    }

    /// A table of one figure in seconds, a row per scenario (`rows`: its first cell and the
    /// scenario): min / median / max for each arm, then for each pair of arms the ratio in
    /// each round and the ratio of the medians.
    pub(crate) fn timing_table(
        &self,
        o: &mut String,
        first: &str,
        rows: &[(String, Scenario)],
        f: Figure<'_>,
    ) {
        let (mut head, mut rule) = self.head(&format!("| {first} |"), "|--:|");
        for (_, _, title) in self.pairs() {
            let _ = write!(head, " {title}, per round | {title}, medians |");
            rule.push_str("--:|--:|");
        }
        let _ = writeln!(o, "{head}\n{rule}");
        for (label, sc) in rows {
            let mut line = format!("| {label} |");
            for &a in self.arms {
                let _ = write!(line, " {} |", mmm(&self.vals(*sc, a, f), 2));
            }
            for (a, b, _) in self.pairs() {
                let med = |arm: Arm| median(&self.vals(*sc, arm, f));
                let _ = write!(
                    line,
                    " {} | {} |",
                    self.per_round(*sc, a, b, f),
                    ratio(med(a), med(b))
                );
            }
            let _ = writeln!(o, "{line}");
        }
    }

    /// One MiniCluster of size N: min / median / max seconds to Ready, and the ratios.
    pub(crate) fn seconds_to_ready(&self, o: &mut String, singles: &[usize]) {
        let _ = writeln!(
            o,
            "\n### One MiniCluster of size N: seconds from apply to N pods Ready\n\n\
             min / median / max of {} rounds; the ratios in each round (the runs of one round \
             paired, in round order) and of the medians.\n",
            self.rounds
        );
        let rows: Vec<(String, Scenario)> = singles
            .iter()
            .map(|&n| (n.to_string(), Scenario::Single(n)))
            .collect();
        self.timing_table(o, "N", &rows, &|r| Some(r.secs));
    }

    /// One MiniCluster of size N: min / median / max seconds of its teardown, and the ratios.
    pub(crate) fn teardown(&self, o: &mut String, singles: &[usize]) {
        let _ = writeln!(
            o,
            "\n### Teardown of one MiniCluster of size N: seconds from the delete request to no \
             pod left\n\n\
             After the figures above, in the same runs: the operators' MiniCluster deleted, or \
             the bare arm's JobSet (then its Secret, ConfigMap and Services), with background \
             propagation as kubectl deletes; the clock stops when the pod watch has seen the \
             last pod deleted from the API. min / median / max of {} rounds; the ratios in each \
             round and of the medians.\n",
            self.rounds
        );
        let rows: Vec<(String, Scenario)> = singles
            .iter()
            .map(|&n| (n.to_string(), Scenario::Single(n)))
            .collect();
        self.timing_table(o, "N", &rows, &|r| r.teardown);
    }

    /// The end of a batch cluster of size N: min / median / max seconds from the lead pod's
    /// success to no other pod left, and the ratios.
    pub(crate) fn end(&self, o: &mut String, ends: &[usize]) {
        let _ = writeln!(
            o,
            "\n### The end of a batch cluster of size N: seconds from its lead pod's success to \
             no other pod left\n\n\
             Its N pods Ready (and this operator's status Running), then the lead pod's status \
             set to Succeeded, as the kubelet reports a lead broker that exited 0; the clock \
             stops when the pod watch has seen every other pod deleted from the API. This \
             operator and the bare JobSet only. min / median / max of {} rounds; the ratios in \
             each round and of the medians.\n",
            self.rounds
        );
        let rows: Vec<(String, Scenario)> = ends
            .iter()
            .map(|&n| (n.to_string(), Scenario::End(n)))
            .collect();
        self.timing_table(o, "N", &rows, &|r| Some(r.secs));
    }

    /// Resize from A to B: min / median / max seconds from the change request to B pods
    /// Ready, and the ratios.
    pub(crate) fn resize(&self, o: &mut String, a: usize, b: usize) {
        let _ = writeln!(
            o,
            "\n### Resize of one MiniCluster from size A to B: seconds from the change request \
             to B pods Ready\n\n\
             A MiniCluster of size A and maxSize B, its A pods Ready (and this operator's status \
             Running), then grown to B: the operators through the MiniCluster at size B \
             (applied), the bare JobSet through the apply this operator sends for that change \
             (`render::jobset::update`, field manager `{UPDATE_MANAGER}`, forced). min / median \
             / max of {} rounds; the ratios in each round and of the medians.\n",
            self.rounds
        );
        let rows = [(format!("{a} → {b}"), Scenario::Resize(a, b))];
        self.timing_table(o, "A → B", &rows, &|r| Some(r.secs));
        let _ = writeln!(
            o,
            "\nOf that, seconds from the change request to the first new pod (the operators' \
             own hop is in it: the MiniCluster's watch event, a reconcile and its JobSet \
             change) and to all B pods created:\n"
        );
        let rows = [(format!("{a} → {b}, first new pod"), Scenario::Resize(a, b))];
        self.timing_table(o, "A → B", &rows, &|r| Some(r.first_pod));
        o.push('\n');
        let rows = [(format!("{a} → {b}, all created"), Scenario::Resize(a, b))];
        self.timing_table(o, "A → B", &rows, &|r| Some(r.all_created));
    }

    /// One MiniCluster: medians of each step's seconds, each process's CPU, the pod
    /// creations' latency, the webhooks and JobSet's reconciles.
    pub(crate) fn where_the_time_goes(&self, o: &mut String, singles: &[usize]) {
        let _ = writeln!(
            o,
            "\n### Where the time goes (one MiniCluster; medians)\n\n\
             Seconds from apply to the first pod, to all N pods created (seen by the watch), to \
             all Ready, to the operator's status saying Running; CPU seconds of each process from apply to all Ready; pod creations' mean \
             latency in the apiserver; admission webhook calls and time (`mpod`/`vpod` are \
             Kueue's and, on JobSet pods, JobSet's too); JobSet reconciles.\n"
        );
        let _ = writeln!(
            o,
            "| N | arm | first pod | all created | all Ready | status Running | operator CPU | \
             apiserver CPU | JobSet CPU | kcm CPU | scheduler CPU | kwok CPU | etcd CPU | \
             pod POST ms | webhook calls | webhook s | JobSet reconciles |\n\
             |--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
        );
        for &n in singles {
            let sc = Scenario::Single(n);
            for &a in self.arms {
                let m = |f: &dyn Fn(&Run) -> Option<f64>| median(&self.vals(sc, a, f));
                let cpu = |p: &'static str| m(&move |r: &Run| r.cpu.get(p).copied());
                let f = |x: f64, p: usize| {
                    if x.is_finite() {
                        format!("{x:.p$}")
                    } else {
                        "–".into()
                    }
                };
                let _ = writeln!(
                    o,
                    "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    a.title(),
                    f(m(&|r| Some(r.first_pod)), 2),
                    f(m(&|r| Some(r.all_created)), 2),
                    f(m(&|r| Some(r.secs)), 2),
                    f(m(&|r| r.running), 2),
                    f(cpu("operator"), 2),
                    f(cpu("kube-apiserver"), 2),
                    f(cpu("jobset"), 2),
                    f(cpu("kube-controller-manager"), 2),
                    f(cpu("kube-scheduler"), 2),
                    f(cpu("kwok"), 2),
                    f(cpu("etcd"), 2),
                    f(
                        m(&|r| (r.api.pod_creates > 0.0)
                            .then(|| 1000.0 * r.api.pod_create_secs / r.api.pod_creates)),
                        1
                    ),
                    f(m(&|r| Some(r.api.webhook_calls.values().sum())), 0),
                    f(m(&|r| Some(r.api.webhook_secs.values().sum())), 2),
                    f(m(&|r| r.jobset_reconciles()), 0),
                );
            }
        }
    }

    /// Per webhook, in scenario `sc` (`what`): as the apiserver saw each call (the round
    /// trip, by webhook name) and as each webhook server saw it (by server and path).
    pub(crate) fn webhooks(&self, o: &mut String, sc: Scenario, what: &str) {
        type Pick = fn(&Run, &str) -> Option<(f64, f64)>;
        let apiserver: Pick = |r, k| {
            Some((
                r.api.webhook_calls.get(k).copied().unwrap_or(0.0),
                r.api.webhook_secs.get(k).copied().unwrap_or(0.0),
            ))
        };
        let server: Pick = |r, k| {
            let c = r.controllers.as_ref()?;
            Some((
                c.webhook_calls.get(k).copied().unwrap_or(0.0),
                c.webhook_secs.get(k).copied().unwrap_or(0.0),
            ))
        };
        let mut rows: Vec<(String, String, Pick)> = Vec::new();
        let in_sc = || self.runs.iter().filter(|r| r.scenario == sc);
        let api_names: BTreeSet<String> = in_sc()
            .flat_map(|r| r.api.webhook_calls.keys().cloned())
            .collect();
        for k in api_names {
            rows.push((format!("apiserver: {k}"), k, apiserver));
        }
        let server_names: BTreeSet<String> = in_sc()
            .filter_map(|r| r.controllers.as_ref())
            .flat_map(|c| c.webhook_calls.keys().cloned())
            .collect();
        for k in server_names {
            rows.push((format!("server: {k}"), k, server));
        }
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(
            o,
            "\nAdmission webhooks, {what} (medians): calls × mean ms per call, as the \
             apiserver timed each call (by webhook name; Kueue's and JobSet's pod webhooks \
             are both `mpod.kb.io`/`vpod.kb.io`) and as each webhook server timed it\n"
        );
        let (head, rule) = self.head("| webhook |", "|---|");
        let _ = writeln!(o, "{head}\n{rule}");
        for (title, key, pick) in rows {
            let mut line = format!("| {title} |");
            for &a in self.arms {
                let calls = median(&self.vals(sc, a, &|r| pick(r, &key).map(|p| p.0)));
                let secs = median(&self.vals(sc, a, &|r| pick(r, &key).map(|p| p.1)));
                if calls > 0.0 {
                    let _ = write!(line, " {calls:.0} × {:.1} ms |", 1000.0 * secs / calls);
                } else {
                    line.push_str(" 0 |");
                }
            }
            let _ = writeln!(o, "{line}");
        }
    }

    /// `m` MiniClusters of size 2: every figure of the runs and of the idle window after them,
    /// min / median / max over the rounds; then the ratios of seconds to Ready and of the
    /// apiserver's CPU, per round and of the medians.
    pub(crate) fn many(&self, o: &mut String, m: usize) {
        let how = if self.many_rounds == 1 {
            "One run per arm".to_string()
        } else {
            format!("min / median / max of {} rounds", self.many_rounds)
        };
        let _ = writeln!(
            o,
            "\n### {m} MiniClusters of size 2\n\n\
             {how}. CPU from /proc between the first apply and all {} pods Ready; peak RSS is \
             the operator's VmHWM (it starts for each run); then {} s idle.\n",
            2 * m,
            self.idle.as_secs()
        );
        let (head, rule) = self.head("| |", "|---|");
        let _ = writeln!(o, "{head}\n{rule}");
        let sc = Scenario::Many(m);
        for (title, f, prec) in many_rows(m).iter().chain(&idle_rows()) {
            let mut line = format!("| {title} |");
            for &a in self.arms {
                let _ = write!(line, " {} |", mmm(&self.vals(sc, a, f.as_ref()), *prec));
            }
            let _ = writeln!(o, "{line}");
        }
        let secs: Figure<'_> = &|r| Some(r.secs);
        let api_cpu: Figure<'_> = &|r| r.cpu.get("kube-apiserver").copied();
        // The scheduler places the same pods in every arm and sends the same requests: its
        // CPU per run says how fast the machine ran that run, beside the ratios it explains.
        let scheduler_cpu: Figure<'_> = &|r| r.cpu.get("kube-scheduler").copied();
        // Read the same way before and during every run: a round whose arms ran at two paces
        // shows here, beside the ratios above.
        let pace: Figure<'_> = &|r| r.pace_ms;
        let steal: Figure<'_> = &|r| r.cpu.get("machine steal").copied();
        let _ = writeln!(o);
        for (a, b, title) in self.pairs() {
            for (what, f) in [
                ("seconds to all pods Ready", secs),
                ("kube-apiserver CPU s", api_cpu),
                (
                    "kube-scheduler CPU s (the same pods in both arms: the machine's speed)",
                    scheduler_cpu,
                ),
                ("the machine's pace probe before the run, ms", pace),
                ("CPU s stolen by the host", steal),
            ] {
                let med = |arm: Arm| median(&self.vals(sc, arm, f));
                let _ = writeln!(
                    o,
                    "- {title}, {what}: {} per round; {} of the medians",
                    self.per_round(sc, a, b, f),
                    ratio(med(a), med(b))
                );
            }
        }
    }

    /// API requests in the idle window after `m` MiniClusters, by verb and resource: the
    /// rows with 2 or more in some arm.
    pub(crate) fn idle_requests(&self, o: &mut String, m: usize) {
        let sc = Scenario::Many(m);
        let idle_keys: BTreeSet<String> = self
            .runs
            .iter()
            .filter(|r| r.scenario == sc)
            .filter_map(|r| r.idle.as_ref())
            .flat_map(|i| i.api.requests.keys().cloned())
            .collect();
        let idle_rows: Vec<String> = idle_keys
            .into_iter()
            .filter_map(|k| {
                let per = |a: Arm| {
                    median(&self.vals(sc, a, &|r| {
                        Some(
                            r.idle
                                .as_ref()?
                                .api
                                .requests
                                .get(&k)
                                .copied()
                                .unwrap_or(0.0),
                        )
                    }))
                };
                if self.arms.iter().all(|&a| per(a).is_nan() || per(a) < 2.0) {
                    return None;
                }
                let mut line = format!("| {k} |");
                for &a in self.arms {
                    let _ = write!(line, " {:.0} |", per(a));
                }
                Some(line)
            })
            .collect();
        if idle_rows.is_empty() {
            return;
        }
        let _ = writeln!(
            o,
            "\nAPI requests in the {} s idle window (medians; rows with 2 or more in some arm; \
             every client)\n",
            self.idle.as_secs()
        );
        let (head, rule) = self.head("| verb resource |", "|---|");
        let _ = writeln!(o, "{head}\n{rule}\n{}", idle_rows.join("\n"));
    }

    /// API requests per MiniCluster from the first apply until all pods Ready, by verb and
    /// resource, with the operator's column minus the bare JobSet's.
    pub(crate) fn requests_per_minicluster(&self, o: &mut String, m: usize) {
        let sc = Scenario::Many(m);
        let _ = writeln!(
            o,
            "\nAPI requests per MiniCluster, from the first apply until all pods Ready (medians of \
             `apiserver_request_total` deltas / {m}; every client: the driver, the operator, JobSet, \
             the job controller, the scheduler, kwok). The operator's own share is about the \
             operator column minus the bare JobSet column.\n"
        );
        let keys: BTreeSet<String> = self
            .runs
            .iter()
            .filter(|r| r.scenario == sc)
            .flat_map(|r| r.api.requests.keys().cloned())
            .collect();
        let both = self.has(Arm::Operator) && self.has(Arm::JobSet);
        let (mut head, mut rule) = self.head("| verb resource |", "|---|");
        if both {
            head.push_str(" operator − bare JobSet |");
            rule.push_str("--:|");
        }
        let _ = writeln!(o, "{head}\n{rule}");
        for k in keys {
            let per = |a: Arm| {
                median(&self.vals(sc, a, &|r| {
                    Some(r.api.requests.get(&k).copied().unwrap_or(0.0) / m as f64)
                }))
            };
            if self.arms.iter().all(|&a| per(a).abs() < 0.05) {
                continue;
            }
            let mut line = format!("| {k} |");
            for &a in self.arms {
                let _ = write!(line, " {:.2} |", per(a));
            }
            if both {
                let _ = write!(line, " {:+.2} |", per(Arm::Operator) - per(Arm::JobSet));
            }
            let _ = writeln!(o, "{line}");
        }
    }

    /// Watch events the API server sent per MiniCluster from the first apply until all pods
    /// Ready, by resource (events, and KiB encoded), with the operator's column minus the bare
    /// JobSet's: the watch traffic the operator adds.
    pub(crate) fn watch_events_per_minicluster(&self, o: &mut String, m: usize) {
        let sc = Scenario::Many(m);
        let _ = writeln!(
            o,
            "\nWatch events per MiniCluster, from the first apply until all pods Ready (medians of \
             `apiserver_watch_events_total` and `apiserver_watch_events_sizes` deltas / {m}, \
             events and KiB; one event per watcher: every client's watches).\n"
        );
        let keys: BTreeSet<String> = (self.runs.iter())
            .filter(|r| r.scenario == sc)
            .flat_map(|r| r.api.watch_events.keys().cloned())
            .collect();
        let both = self.has(Arm::Operator) && self.has(Arm::JobSet);
        let (mut head, mut rule) = self.head("| resource |", "|---|");
        if both {
            head.push_str(" operator − bare JobSet |");
            rule.push_str("--:|");
        }
        let _ = writeln!(o, "{head}\n{rule}");
        for k in keys {
            let per = |a: Arm, of: fn(&ApiStats) -> &BTreeMap<String, f64>, unit: f64| {
                median(&self.vals(sc, a, &|r| {
                    Some(of(&r.api).get(&k).copied().unwrap_or(0.0) / unit / m as f64)
                }))
            };
            let events = |a: Arm| per(a, |s| &s.watch_events, 1.0);
            let kib = |a: Arm| per(a, |s| &s.watch_bytes, 1024.0);
            if self.arms.iter().all(|&a| events(a).abs() < 0.05) {
                continue;
            }
            let mut line = format!("| {k} |");
            for &a in self.arms {
                let _ = write!(line, " {:.2} ({:.1} KiB) |", events(a), kib(a));
            }
            if both {
                let (de, dk) = (
                    events(Arm::Operator) - events(Arm::JobSet),
                    kib(Arm::Operator) - kib(Arm::JobSet),
                );
                let _ = write!(line, " {de:+.2} ({dk:+.1} KiB) |");
            }
            let _ = writeln!(o, "{line}");
        }
    }
}

/// The rows of the many-clusters table up to the idle window: from the first apply until
/// all pods Ready (and every status Running).
pub(crate) fn many_rows(m: usize) -> Vec<Row> {
    vec![
        ("seconds to all pods Ready", Box::new(|r| Some(r.secs)), 2),
        (
            "seconds to the first JobSet",
            Box::new(|r| r.first_jobset),
            2,
        ),
        (
            "seconds to the first pod",
            Box::new(|r| Some(r.first_pod)),
            2,
        ),
        (
            "seconds to all MiniClusters Running (status)",
            Box::new(|r| r.running),
            2,
        ),
        (
            "operator CPU s",
            Box::new(|r| r.cpu.get("operator").copied()),
            2,
        ),
        ("operator peak RSS MiB", Box::new(|r| r.peak_rss_mib), 1),
        (
            "operator reconciles per MiniCluster, to all Running",
            Box::new(move |r| r.reconciles.map(|n| n / m as f64)),
            2,
        ),
        (
            "operator reconcile p50 ms, bucket bound (with API waits)",
            Box::new(|r| r.reconcile_ms.map(|q| q.0)),
            1,
        ),
        (
            "operator reconcile p99 ms, bucket bound (with API waits)",
            Box::new(|r| r.reconcile_ms.map(|q| q.1)),
            1,
        ),
        (
            "operator's own work per reconcile p50 ms, bucket bound (observe, plan)",
            Box::new(|r| r.decide_ms.map(|q| q.0)),
            3,
        ),
        (
            "operator's own work per reconcile p99 ms, bucket bound",
            Box::new(|r| r.decide_ms.map(|q| q.1)),
            3,
        ),
        (
            "kube-apiserver CPU s",
            Box::new(|r| r.cpu.get("kube-apiserver").copied()),
            2,
        ),
        (
            "kube-apiserver profile s, all samples (BENCH_PPROF_SECS)",
            Box::new(|r| Some(r.profile.as_ref()?.total)),
            2,
        ),
        (
            "kube-apiserver profile s: watch events sent",
            Box::new(|r| Some(r.profile.as_ref()?.watch)),
            2,
        ),
        (
            "kube-apiserver profile s: writes",
            Box::new(|r| Some(r.profile.as_ref()?.writes)),
            2,
        ),
        (
            "kube-apiserver profile s: gets and lists",
            Box::new(|r| Some(r.profile.as_ref()?.reads)),
            2,
        ),
        (
            "kube-apiserver profile s: Go's garbage collector",
            Box::new(|r| Some(r.profile.as_ref()?.gc)),
            2,
        ),
        (
            "kube-apiserver profile s: custom resources' status writes (in the writes)",
            Box::new(|r| Some(r.profile.as_ref()?.cr_status)),
            2,
        ),
        (
            "kube-apiserver profile s: CEL rules of custom resources (in the writes)",
            Box::new(|r| Some(r.profile.as_ref()?.cel)),
            2,
        ),
        (
            "kube-apiserver profile s: the rest",
            Box::new(|r| Some(r.profile.as_ref()?.rest())),
            2,
        ),
        (
            "JobSet controller CPU s",
            Box::new(|r| r.cpu.get("jobset").copied()),
            2,
        ),
        (
            "kube-controller-manager CPU s",
            Box::new(|r| r.cpu.get("kube-controller-manager").copied()),
            2,
        ),
        (
            "API requests per MiniCluster (all clients)",
            Box::new(move |r| Some(r.api.total_requests() / m as f64)),
            1,
        ),
        ("JobSet reconciles", Box::new(|r| r.jobset_reconciles()), 0),
        (
            "JobSet's worker busy, share of the run",
            Box::new(|r| r.jobset_busy()),
            2,
        ),
        (
            "JobSet's queue: mean wait s",
            Box::new(|r| r.jobset_queue_wait()),
            2,
        ),
        (
            "the machine's pace before the run: ms for a fixed piece of work",
            Box::new(|r| r.pace_ms),
            0,
        ),
        (
            "the machine: CPU s stolen by its host during the run",
            Box::new(|r| r.cpu.get("machine steal").copied()),
            1,
        ),
        (
            "the machine: CPU s idle during the run (of 2 per second)",
            Box::new(|r| r.cpu.get("machine idle").copied()),
            1,
        ),
    ]
}

/// The rows of the many-clusters table for the idle window after the run.
pub(crate) fn idle_rows() -> Vec<Row> {
    vec![
        (
            "idle: operator reconciles",
            Box::new(|r| r.idle.as_ref()?.operator_reconciles),
            0,
        ),
        (
            "idle: operator reconciles in its second half",
            Box::new(|r| r.idle.as_ref()?.operator_reconciles_late),
            0,
        ),
        (
            "idle: seconds into it of the last reconcile",
            Box::new(|r| r.idle.as_ref()?.operator_last_reconcile),
            0,
        ),
        (
            "idle: operator CPU s",
            Box::new(|r| r.idle.as_ref()?.cpu.get("operator").copied()),
            3,
        ),
        (
            "idle: JobSet reconciles",
            Box::new(|r| r.idle.as_ref()?.jobset_reconciles),
            0,
        ),
        (
            "idle: API requests (all clients)",
            Box::new(|r| Some(r.idle.as_ref()?.api.total_requests())),
            0,
        ),
        (
            "idle: kube-apiserver CPU s",
            Box::new(|r| r.idle.as_ref()?.cpu.get("kube-apiserver").copied()),
            2,
        ),
    ]
}
