//! The scenarios' rounds: what each applies, and how its time is measured (up, resize, end, teardown, idle).

use super::*;

impl Bench {
    /// What a run of `scenario` under `arm` applies in `ns`, ready to send.
    pub(crate) fn steps(&self, scenario: Scenario, arm: Arm, ns: &str) -> Result<Steps> {
        let one = ["bench".to_string()];
        Ok(match scenario {
            Scenario::Single(n) => Steps {
                timed: self.objects(arm, &one, ns, n, None)?,
                pods: n,
                before: Vec::new(),
                before_pods: 0,
            },
            Scenario::Many(m) => {
                let names: Vec<String> = (0..m).map(|i| format!("bench-{i}")).collect();
                Steps {
                    timed: self.objects(arm, &names, ns, 2, None)?,
                    pods: 2 * m,
                    before: Vec::new(),
                    before_pods: 0,
                }
            }
            Scenario::Resize(a, b) => Steps {
                before: self.objects(arm, &one, ns, a, Some(b))?,
                before_pods: a,
                timed: vec![self.resize_request(arm, ns, &one[0], b)?],
                pods: b,
            },
            Scenario::End(n) => Steps {
                before: self.objects(arm, &one, ns, n, None)?,
                before_pods: n,
                timed: Vec::new(),
                pods: n,
            },
        })
    }

    /// The request that grows the MiniCluster `name` (of maxSize `b`) to size `b`: for the
    /// operators, the same MiniCluster applied at size `b`; for the bare JobSet, the apply
    /// the operator makes for that change (`render::jobset::update` of the MiniCluster at
    /// size `b`, as `controller::apply` sends it: field manager `UPDATE_MANAGER`, forced);
    /// for the one Job, its parallelism and completions.
    pub(crate) fn resize_request(&self, arm: Arm, ns: &str, name: &str, b: usize) -> Result<Apply> {
        let yaml = minicluster_yaml(name, ns, b, Some(b));
        match arm {
            Arm::Operator | Arm::Go => {
                let mc = yaml_documents(&yaml)?
                    .into_iter()
                    .next()
                    .context("no MiniCluster")?;
                to_apply(&self.client, mc)
            }
            Arm::JobSet | Arm::JobSetNoPodWebhooks => {
                let mc = parse_minicluster(&yaml)?;
                let env = flux_operator::model::Environment {
                    cluster_domain: "cluster.local".into(),
                    view_image_volume: false,
                };
                let cluster = flux_operator::model::resolve(&mc, &env)
                    .map_err(|e| anyhow::anyhow!("the resized MiniCluster: {e:?}"))?;
                // In no Kueue queue: the operator sends `suspend` as the spec has it.
                let update = render::jobset::change(&cluster, Some(cluster.jobs.suspend))
                    .context("the operator makes no JobSet change for an elastic MiniCluster")?
                    .apply(&mc);
                Ok(Apply {
                    manager: UPDATE_MANAGER,
                    ..to_apply(&self.client, update)?
                })
            }
            Arm::Job => {
                let job = json!({
                    "apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"parallelism": b, "completions": b},
                });
                Ok(Apply {
                    manager: RESIZE_MANAGER,
                    ..to_apply(&self.client, job)?
                })
            }
        }
    }

    pub(crate) async fn run(&mut self, scenario: Scenario, arm: Arm, round: usize) -> Result<Run> {
        self.started += 1;
        let ns = format!(
            "bench-{}-{}-r{round}-{}",
            arm.key(),
            scenario.tag(),
            self.started
        );
        if let Some(crd) = arm.crd() {
            self.ensure_crd(crd).await?;
        }
        let (key, value) = RUN_LABEL.split_once('=').expect("key=value");
        let labels = json!({ key: value });
        create_namespace(&self.client, &ns, labels).await?;
        let steps = self.steps(scenario, arm, &ns)?;
        // The last run's namespace gone before an operator starts: an operator watches every
        // namespace, and one started while a thousand objects of the last run were still
        // being deleted listed and cached them (its peak RSS at 1000 MiniClusters read 154
        // MiB, 59 alone).
        let t = Instant::now();
        self.wait_pending().await?;
        if t.elapsed() > Duration::from_secs(1) {
            eprintln!(
                "  waited {:.1} s more for the last run's namespace to go",
                t.elapsed().as_secs_f64()
            );
        }
        // The machine's pace with the last run's objects gone and nothing of this one
        // started. Taken before the wait above, while the deletion ran, it read 142 and 69
        // ms before two runs whose scheduler CPU for the same pods differed by 2%.
        let pace = tokio::task::spawn_blocking(pace_ms).await?;

        let mut operator = match arm {
            Arm::Operator | Arm::Go => {
                let mut p = self.start_operator(arm, &ns)?;
                p.wait_ready().await?;
                tokio::time::sleep(SETTLE).await;
                Some(p)
            }
            _ => None,
        };
        if arm == Arm::JobSetNoPodWebhooks {
            self.jobset_pod_webhooks(false).await?;
        }
        let result = self
            .measure_all(scenario, arm, &ns, &steps, operator.as_mut())
            .await;
        if arm == Arm::JobSetNoPodWebhooks {
            self.jobset_pod_webhooks(true).await?;
        }
        // The operator keeps running while its objects go, then stops.
        let deleted = match self.check_control_plane() {
            Ok(()) => self.delete_namespace(&ns, pods_limit(steps.pods)).await,
            Err(e) => Err(e),
        };
        if let Some(p) = operator {
            p.stop();
        }
        self.pending.push(ns);
        let run = result?;
        deleted?;
        Ok(Run {
            round,
            pace_ms: Some(pace),
            ..run
        })
    }

    /// The steps before the clock ([`Self::start_from`]), [`Self::measure`], then (one
    /// MiniCluster) [`Self::teardown`].
    pub(crate) async fn measure_all(
        &self,
        scenario: Scenario,
        arm: Arm,
        ns: &str,
        steps: &Steps,
        operator: Option<&mut OperatorProc>,
    ) -> Result<Run> {
        if !steps.before.is_empty() {
            self.start_from(arm, ns, &steps.before, steps.before_pods)
                .await?;
        }
        let run = match scenario {
            Scenario::End(n) => self.measure_end(scenario, arm, ns, n, operator).await?,
            _ => {
                self.measure(scenario, arm, ns, &steps.timed, steps.pods, operator)
                    .await?
            }
        };
        self.check_control_plane()?;
        let teardown = match scenario {
            Scenario::Single(_) => Some(self.teardown(ns, &steps.timed, steps.pods).await?),
            Scenario::Many(_) | Scenario::Resize(..) | Scenario::End(_) => None,
        };
        self.check_control_plane()?;
        Ok(Run { teardown, ..run })
    }

    /// A pod watch of `ns` until `pods` pods are Ready, returned once it has listed and
    /// watches (so it sees every pod made after this returns).
    pub(crate) async fn pod_watch(
        &self,
        ns: &str,
        pods: usize,
    ) -> Result<tokio::task::JoinHandle<Result<Timeline>>> {
        let api = Api::namespaced(self.client.clone(), ns);
        spawn_synced("pod", |synced| watch_pods(api, pods, synced)).await
    }

    /// A metadata watch of `ns`'s JobSets until the first one new since its list, returned
    /// once it has listed: when the first JobSet reached the API server's watch, to tell the
    /// operator's hop (a MiniCluster to its JobSet) from what follows it (JobSet's and the
    /// Job controller's, to the first pod).
    pub(crate) async fn first_jobset_watch(
        &self,
        ns: &str,
    ) -> Result<tokio::task::JoinHandle<Option<Instant>>> {
        let gvk = kube::api::GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet");
        let resource = kube::api::ApiResource::from_gvk(&gvk);
        let api = Api::<PartialObjectMeta<DynamicObject>>::namespaced_with(
            self.client.clone(),
            ns,
            &resource,
        );
        spawn_synced("JobSet", |synced| watch_first_new(api, synced)).await
    }

    /// Before the clock (a resize's starting size): apply `objects`, wait until `pods` pods
    /// are Ready and (this operator) its status says Running, then [`SETTLE`], so that the
    /// clock times the change alone.
    pub(crate) async fn start_from(
        &self,
        arm: Arm,
        ns: &str,
        objects: &[Apply],
        pods: usize,
    ) -> Result<()> {
        let watch = self.pod_watch(ns, pods).await?;
        for a in objects {
            apply(a).await?;
        }
        let limit = pods_limit(pods);
        tokio::time::timeout(limit, watch)
            .await
            .with_context(|| format!("{pods} pods not Ready after {} s", limit.as_secs()))???;
        if arm == Arm::Operator {
            self.wait_running(ns, Instant::now()).await?;
        }
        tokio::time::sleep(SETTLE).await;
        Ok(())
    }

    /// Delete what the arm applied, its workload first (the MiniCluster; or the JobSet, or
    /// the Job, then the rest), with background propagation as kubectl deletes: seconds from
    /// the first delete request until the pod watch has seen no pod left in `ns` (each one
    /// deleted from the API, not only terminating).
    pub(crate) async fn teardown(&self, ns: &str, objects: &[Apply], pods: usize) -> Result<f64> {
        let api = Api::namespaced(self.client.clone(), ns);
        let watch = spawn_synced("pod", |synced| watch_no_pods(api, None, synced)).await?;
        let (workload, rest): (Vec<&Apply>, Vec<&Apply>) =
            objects.iter().partition(|a| a.is_workload());
        let t0 = Instant::now();
        for a in workload.into_iter().chain(rest) {
            delete(a).await?;
        }
        let limit = pods_limit(pods);
        let gone = tokio::time::timeout(limit, watch)
            .await
            .with_context(|| {
                format!(
                    "pods of {ns} still there {} s after the delete",
                    limit.as_secs()
                )
            })???;
        Ok(gone.saturating_duration_since(t0).as_secs_f64())
    }

    pub(crate) async fn measure(
        &self,
        scenario: Scenario,
        arm: Arm,
        ns: &str,
        objects: &[Apply],
        pods: usize,
        operator: Option<&mut OperatorProc>,
    ) -> Result<Run> {
        let op_pid = operator.as_ref().map(|p| p.pid());
        // The pod watch is open (listed, watching) before the first request.
        let watch = self.pod_watch(ns, pods).await?;
        let jobset_watch = self.first_jobset_watch(ns).await?;
        let ctl0 = self.controllers();
        let api0 = self.api_stats().await?;
        let cpu0 = self.cpu(op_pid)?;
        let profile = match (scenario, env_or("BENCH_PPROF_SECS", 0u64)?) {
            (Scenario::Many(_), secs) if secs > 0 => {
                let file = format!("pprof-{}-{ns}.pb.gz", arm.key());
                Some(self.profile_api_server(secs, self.logs.join(file)))
            }
            _ => None,
        };
        let t0 = Instant::now();
        apply_clusters(objects, self.connections).await?;
        let limit = pods_limit(pods);
        let timeline = tokio::time::timeout(limit, watch)
            .await
            .with_context(|| format!("{pods} pods not Ready after {} s", limit.as_secs()))???;
        let cpu1 = self.cpu(op_pid)?;
        let api1 = self.api_stats().await?;
        let ctl1 = self.controllers();
        // The first JobSet came before the first pod, if any came (the Go operator and the
        // `job` arm make none).
        let first_jobset = if jobset_watch.is_finished() {
            jobset_watch.await.ok().flatten()
        } else {
            jobset_watch.abort();
            None
        };
        if let Some(p) = &operator {
            self.check_status_writers(ns, p.arm).await?;
        }
        // This operator's status: until every MiniCluster says Running (after the window
        // above, so its polling is not counted). The idle window starts after it. (A resized
        // MiniCluster said Running before the clock.)
        let running = match (arm, scenario) {
            (Arm::Operator, Scenario::Single(_) | Scenario::Many(_)) => {
                Some(self.wait_running(ns, t0).await?)
            }
            _ => None,
        };
        let reconciles = match &operator {
            Some(p) => p.reconciles().await,
            None => None,
        };
        let idle = match scenario {
            Scenario::Many(_) => Some(self.idle_window(operator.as_deref(), ctl1.as_ref()).await?),
            Scenario::Single(_) | Scenario::Resize(..) | Scenario::End(_) => None,
        };
        let (reconcile_ms, decide_ms) = match &operator {
            Some(p) => p.reconcile_quantiles().await,
            None => (None, None),
        };
        let profile = match profile {
            Some(task) => task.await??,
            None => None,
        };
        let api = api1.minus(&api0);
        if let Scenario::Many(_) = scenario {
            self.keep_requests(arm, ns, &api)?;
        }
        let secs = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
        Ok(Run {
            scenario,
            arm,
            round: 0, // set by the caller
            secs: secs(timeline.all_ready),
            first_pod: secs(timeline.first_pod),
            first_jobset: first_jobset.map(secs),
            all_created: secs(timeline.all_created),
            cpu: cpu_minus(&cpu1, &cpu0),
            peak_rss_mib: op_pid.and_then(peak_rss_mib),
            reconciles,
            reconcile_ms,
            decide_ms,
            api,
            controllers: ctl0.zip(ctl1).map(|(a, b)| b.minus(&a)),
            idle,
            running,
            teardown: None, // measured after
            load: load_average(),
            pace_ms: None, // set by `run`
            profile,
        })
    }

    /// A run's requests by verb and resource, and those not answered 2xx by code, kept
    /// beside the bench logs (`requests-<arm>-<namespace>.tsv`): the tables give each arm's
    /// medians, this file one run's, to tell which requests an outlier run made more of.
    fn keep_requests(&self, arm: Arm, ns: &str, api: &ApiStats) -> Result<()> {
        let mut text = String::new();
        for (k, v) in &api.requests {
            let _ = writeln!(text, "{v}\t{k}");
        }
        for (k, v) in &api.failed {
            let _ = writeln!(text, "{v}\tnot 2xx: {k}");
        }
        let file = self.logs.join(format!("requests-{}-{ns}.tsv", arm.key()));
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))
    }

    /// The end of a batch cluster of `pods` pods, Ready (issue 32): its lead pod's status set
    /// to Succeeded, as the kubelet reports it once the lead broker exited 0, then seconds
    /// until the pod watch has seen every other pod deleted from the API. The CPU and the
    /// requests over that window.
    pub(crate) async fn measure_end(
        &self,
        scenario: Scenario,
        arm: Arm,
        ns: &str,
        pods: usize,
        operator: Option<&mut OperatorProc>,
    ) -> Result<Run> {
        let op_pid = operator.as_ref().map(|p| p.pid());
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let lead = api
            .list(&ListParams::default().labels("flux-framework.org/role=lead"))
            .await?
            .items
            .first()
            .map(|p| p.name_any())
            .context("no lead pod")?;
        let watch = spawn_synced("pod", |synced| {
            watch_no_pods(api.clone(), Some(lead.clone()), synced)
        })
        .await?;
        let ctl0 = self.controllers();
        let api0 = self.api_stats().await?;
        let cpu0 = self.cpu(op_pid)?;
        let t0 = Instant::now();
        let succeeded = json!({"status": {"phase": "Succeeded"}});
        api.patch_status(&lead, &PatchParams::default(), &Patch::Merge(&succeeded))
            .await
            .with_context(|| format!("setting {lead} Succeeded"))?;
        let limit = pods_limit(pods);
        let gone = tokio::time::timeout(limit, watch)
            .await
            .with_context(|| {
                format!(
                    "followers of {ns} still there {} s after the lead's end",
                    limit.as_secs()
                )
            })???;
        let cpu1 = self.cpu(op_pid)?;
        let api1 = self.api_stats().await?;
        let ctl1 = self.controllers();
        let secs = gone.saturating_duration_since(t0).as_secs_f64();
        Ok(Run {
            scenario,
            arm,
            round: 0, // set by the caller
            secs,
            first_pod: 0.0,
            first_jobset: None,
            all_created: 0.0,
            cpu: cpu_minus(&cpu1, &cpu0),
            peak_rss_mib: op_pid.and_then(peak_rss_mib),
            reconciles: None,
            reconcile_ms: None,
            decide_ms: None,
            api: api1.minus(&api0),
            controllers: ctl0.zip(ctl1).map(|(a, b)| b.minus(&a)),
            idle: None,
            running: None,
            teardown: None,
            load: load_average(),
            pace_ms: None, // set by `run`
            profile: None,
        })
    }

    /// Seconds from `t0` until every MiniCluster in `ns` says Running in its status (looked
    /// at every [`POLL`]).
    pub(crate) async fn wait_running(&self, ns: &str, t0: Instant) -> Result<f64> {
        let mcs: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &minicluster_resource());
        let all_running = || async {
            let list = mcs.list(&ListParams::default()).await?;
            let all = list
                .items
                .iter()
                .all(|mc| mc.data["status"]["phase"] == "Running");
            Ok(all.then_some(()))
        };
        let what = "every MiniCluster Running";
        wait_for_every(what, Duration::from_secs(120), POLL, all_running).await?;
        Ok(t0.elapsed().as_secs_f64())
    }

    /// `self.idle` of nothing after a many-clusters run: what the operator, JobSet and the
    /// apiserver do meanwhile. `ctl1`: the controllers' figures at its start.
    pub(crate) async fn idle_window(
        &self,
        operator: Option<&OperatorProc>,
        ctl1: Option<&Controllers>,
    ) -> Result<Idle> {
        let op_pid = operator.map(|p| p.pid());
        let op_a = match operator {
            Some(p) => p.reconciles().await,
            None => None,
        };
        let api_a = self.api_stats().await?;
        let cpu_a = self.cpu(op_pid)?;
        // The operator's reconcile count every second: when did it settle?
        let window = Instant::now();
        let mut samples: Vec<(f64, f64)> = op_a.map(|c| (0.0, c)).into_iter().collect();
        while window.elapsed() < self.idle {
            let left = self.idle.saturating_sub(window.elapsed());
            tokio::time::sleep(left.min(Duration::from_secs(1))).await;
            if let Some(p) = operator
                && let Some(c) = p.reconciles().await
            {
                samples.push((window.elapsed().as_secs_f64(), c));
            }
        }
        let (late, last) = settling(&samples, self.idle);
        let cpu_b = self.cpu(op_pid)?;
        let api_b = self.api_stats().await?;
        let op_b = match operator {
            Some(p) => p.reconciles().await,
            None => None,
        };
        let ctl_b = self.controllers();
        Ok(Idle {
            operator_reconciles: op_a.zip(op_b).map(|(a, b)| b - a),
            operator_reconciles_late: late,
            operator_last_reconcile: last,
            jobset_reconciles: ctl1
                .zip(ctl_b.as_ref())
                .map(|(a, b)| b.jobset_reconciles - a.jobset_reconciles),
            api: api_b.minus(&api_a),
            cpu: cpu_minus(&cpu_b, &cpu_a),
        })
    }
}

/// From (seconds into the idle window, reconciles so far) samples: the reconciles in the
/// window's second half, and the seconds into it of the last one (0: none in the window).
pub(crate) fn settling(samples: &[(f64, f64)], idle: Duration) -> (Option<f64>, Option<f64>) {
    let half = idle.as_secs_f64() / 2.0;
    let late = samples
        .iter()
        .find(|(t, _)| *t >= half)
        .zip(samples.last())
        .map(|((_, a), (_, b))| b - a);
    let last = samples
        .windows(2)
        .filter(|w| w[1].1 > w[0].1)
        .map(|w| w[1].0)
        .next_back()
        .or(samples.first().map(|_| 0.0));
    (late, last)
}

/// The rendered JobSet's workers template as one Indexed Job of `size` pods, named as the
/// JobSet, and the headless Service JobSet would make for it (`network.subdomain`, not-ready
/// addresses published): the JobSet without JobSet (diagnostic arm `job`).
pub(crate) fn one_indexed_job(jobset: &Value, size: usize) -> Result<Vec<Value>> {
    let name = &jobset["metadata"]["name"];
    let rjobs = jobset["spec"]["replicatedJobs"]
        .as_array()
        .context("no replicatedJobs")?;
    let workers = rjobs
        .iter()
        .find(|r| r["name"] == "workers")
        .or_else(|| rjobs.first())
        .context("empty replicatedJobs")?;
    let subdomain = jobset["spec"]["network"]["subdomain"]
        .as_str()
        .map_or(name.clone(), |s| json!(s));
    let mut spec = workers["template"]["spec"].clone();
    spec["completions"] = json!(size);
    spec["parallelism"] = json!(size);
    spec["completionMode"] = json!("Indexed");
    spec["template"]["spec"]["subdomain"] = subdomain.clone();
    let metadata = json!({
        "namespace": jobset["metadata"]["namespace"],
        "labels": jobset["metadata"]["labels"],
    });
    let mut service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": true,
            "selector": {"flux-framework.org/minicluster": name},
        },
    });
    service["metadata"]["name"] = subdomain;
    let mut job =
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec});
    job["metadata"]["name"] = name.clone();
    Ok(vec![service, job])
}

/// How long to wait for `pods` pods to be Ready, or gone.
pub(crate) fn pods_limit(pods: usize) -> Duration {
    Duration::from_secs(120) + Duration::from_millis(500) * pods as u32
}

/// What a run applies: before the clock (a resize's MiniCluster at its starting size, until
/// `before_pods` pods are Ready), then once it starts; `pods` pods Ready stop it.
pub(crate) struct Steps {
    pub(crate) before: Vec<Apply>,
    pub(crate) before_pods: usize,
    pub(crate) timed: Vec<Apply>,
    pub(crate) pods: usize,
}

pub(crate) struct Timeline {
    pub(crate) first_pod: Instant,
    pub(crate) all_created: Instant,
    pub(crate) all_ready: Instant,
}

/// Spawn `watch`, given the sender it tells once it has listed, and return it when it has
/// (so it sees every object made after this returns). `what`: the watched kind, for the error.
pub(crate) async fn spawn_synced<T, F>(
    what: &str,
    watch: impl FnOnce(tokio::sync::oneshot::Sender<()>) -> F,
) -> Result<tokio::task::JoinHandle<T>>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
    let handle = tokio::spawn(watch(synced_tx));
    synced_rx
        .await
        .with_context(|| format!("the {what} watch ended before it synced"))?;
    Ok(handle)
}

/// Watch the namespace's pods until `target` of them are Ready; tell `synced` once the
/// watch has listed.
pub(crate) async fn watch_pods(
    api: Api<Pod>,
    target: usize,
    synced: tokio::sync::oneshot::Sender<()>,
) -> Result<Timeline> {
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut synced = Some(synced);
    let mut seen = HashSet::new();
    let mut ready = HashSet::new();
    let (mut first_pod, mut all_created) = (None, None);
    while let Some(event) = stream.next().await {
        let now = Instant::now();
        match event {
            Ok(watcher::Event::InitDone) => {
                if let Some(tx) = synced.take() {
                    let _ = tx.send(());
                }
            }
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                let name = pod.name_any();
                // (The first pod is the first one new since the list: a resize starts with
                // pods.)
                if seen.insert(name.clone()) {
                    if synced.is_none() {
                        first_pod.get_or_insert(now);
                    }
                    if seen.len() == target {
                        all_created = Some(now);
                    }
                }
                if pod_ready(&pod) {
                    ready.insert(name);
                } else {
                    ready.remove(&name);
                }
                if ready.len() >= target {
                    return Ok(Timeline {
                        first_pod: first_pod.unwrap_or(now),
                        all_created: all_created.unwrap_or(now),
                        all_ready: now,
                    });
                }
            }
            Ok(watcher::Event::Delete(pod)) => {
                ready.remove(&pod.name_any());
            }
            Ok(watcher::Event::Init) => {}
            Err(e) => eprintln!("  pod watch: {e} (retrying)"),
        }
    }
    bail!("the pod watch ended")
}

/// Watch (metadata only) until the first object new since the list; tell `synced` once the
/// watch has listed. When it came (None: the watch ended first).
pub(crate) async fn watch_first_new(
    api: Api<PartialObjectMeta<DynamicObject>>,
    synced: tokio::sync::oneshot::Sender<()>,
) -> Option<Instant> {
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut synced = Some(synced);
    let mut listed = HashSet::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::InitApply(o)) if synced.is_some() => {
                listed.insert(o.name_any());
            }
            Ok(watcher::Event::InitDone) => {
                if let Some(tx) = synced.take() {
                    let _ = tx.send(());
                }
            }
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))
                if synced.is_none() && !listed.contains(&o.name_any()) =>
            {
                return Some(Instant::now());
            }
            Ok(_) => {}
            Err(e) => eprintln!("  JobSet watch: {e} (retrying)"),
        }
    }
    None
}

/// Watch the namespace's pods until none is left but `except`, each deleted from the API (a
/// watch `Delete`; a terminating pod is still there); tell `synced` once the watch has
/// listed. When it is that none is left.
pub(crate) async fn watch_no_pods(
    api: Api<Pod>,
    except: Option<String>,
    synced: tokio::sync::oneshot::Sender<()>,
) -> Result<Instant> {
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut synced = Some(synced);
    let mut present = HashSet::new();
    // The pods of a list under way (the first one, or again after the watch broke off).
    let mut listing: Option<HashSet<String>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listing = Some(HashSet::new()),
            Ok(watcher::Event::InitApply(pod)) => {
                listing.get_or_insert_default().insert(pod.name_any());
            }
            Ok(watcher::Event::InitDone) => {
                present = listing.take().unwrap_or_default();
                if let Some(tx) = synced.take() {
                    let _ = tx.send(());
                }
            }
            Ok(watcher::Event::Apply(pod)) => {
                present.insert(pod.name_any());
            }
            Ok(watcher::Event::Delete(pod)) => {
                present.remove(&pod.name_any());
            }
            Err(e) => eprintln!("  pod watch: {e} (retrying)"),
        }
        if let Some(name) = &except {
            present.remove(name);
        }
        if synced.is_none() && listing.is_none() && present.is_empty() {
            return Ok(Instant::now());
        }
    }
    bail!("the pod watch ended")
}
