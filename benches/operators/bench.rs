//! The bench: the cluster it runs against, the CRD each arm needs, starting an operator, cleaning up.

use super::*;

pub(crate) struct Bench {
    pub(crate) client: Client,
    pub(crate) root: PathBuf,
    pub(crate) state: PathBuf,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) operator_bin: PathBuf,
    pub(crate) go_dir: Option<PathBuf>,
    pub(crate) work: tempfile::TempDir,
    pub(crate) logs: PathBuf,
    /// (name, pid) of the control plane's processes.
    pub(crate) procs: Vec<(&'static str, u32)>,
    pub(crate) ticks: f64,
    pub(crate) crd: Option<Crd>,
    /// A token that may read JobSet's and Kueue's /metrics.
    pub(crate) metrics_token: Option<String>,
    pub(crate) jobset_metrics_port: Option<u16>,
    pub(crate) kueue_metrics_port: Option<u16>,
    pub(crate) idle: Duration,
    /// The many clusters' requests in flight at once (`BENCH_CONNECTIONS`).
    pub(crate) connections: usize,
    /// Namespaces of earlier runs the namespace controller is still removing.
    pub(crate) pending: Vec<String>,
    /// Runs started so far: each run's namespace is its own, also where an arm runs twice in
    /// a round (`BENCH_MIRROR`) while the first run's namespace is still being removed.
    pub(crate) started: usize,
}

/// The longest piece of an API server profile ([`Bench::profile_api_server`]): under the
/// minute after which the apiserver ends a request.
const PROFILE_PIECE_SECS: u64 = 50;

impl Bench {
    pub(crate) async fn new(arms: &[Arm], idle: Duration, connections: usize) -> Result<Self> {
        let kubeconfig = PathBuf::from(
            std::env::var("KUBECONFIG").context("KUBECONFIG is not set: run through make bench")?,
        );
        let state = PathBuf::from(std::env::var("E2E_STATE").context("E2E_STATE is not set")?);
        let procs = control_plane(&state)?;
        // (`make bench` has built it: this only reads the stamp.)
        let go_dir = if arms.contains(&Arm::Go) {
            Some(built_go_operator()?)
        } else {
            None
        };
        let ports = std::fs::read_to_string(state.join("ports.env")).unwrap_or_default();
        let port = |key: &str| {
            ports
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .and_then(|p| p.trim().parse().ok())
        };
        let (jobset_metrics_port, kueue_metrics_port) =
            (port("JOBSET_METRICS_PORT"), port("KUEUE_METRICS_PORT"));
        let logs = state.join("logs/bench");
        std::fs::create_dir_all(&logs)?;
        let client = common::client().await?;
        // Teardown needs the collector to know JobSets (their Jobs and pods go through it);
        // the MiniCluster kind is checked each time its CRD is installed (`replace_crd`).
        common::collector_knows(&client, "jobset.x-k8s.io/v1alpha2", "JobSet").await?;
        Ok(Self {
            client,
            root: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
            kubeconfig,
            operator_bin: PathBuf::from(env!("CARGO_BIN_EXE_flux-operator")),
            go_dir,
            work: tempfile::tempdir()?,
            logs,
            procs,
            ticks: clock_ticks(),
            crd: None,
            metrics_token: None,
            jobset_metrics_port,
            kueue_metrics_port,
            idle,
            connections,
            state,
            pending: Vec::new(),
            started: 0,
        })
    }

    /// Fail when a process of the control plane is gone (nothing restarts it here).
    pub(crate) fn check_control_plane(&self) -> Result<()> {
        for (name, pid) in &self.procs {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .map(|(_, r)| r.trim_start().starts_with('Z'))
                        .map(|z| !z)
                })
                .unwrap_or(false);
            ensure!(
                state,
                "{name} (pid {pid}) has exited; its log is under {}",
                self.state.display()
            );
        }
        Ok(())
    }

    pub(crate) fn cpu(&self, operator: Option<u32>) -> Result<Cpu> {
        let mut out = Cpu::new();
        for (name, pid) in &self.procs {
            out.insert(*name, cpu_secs(*pid, self.ticks)?);
        }
        if let Some(pid) = operator {
            out.insert("operator", cpu_secs(pid, self.ticks)?);
        }
        if let Some((steal, idle)) = machine_cpu(self.ticks) {
            out.insert("machine steal", steal);
            out.insert("machine idle", idle);
        }
        Ok(out)
    }

    /// A CPU profile of the API server over the next `secs` seconds (its
    /// `/debug/pprof/profile`), split by path once it is whole. The apiserver ends a
    /// request after a minute (`--request-timeout`), so a longer window is profiled in
    /// consecutive pieces of at most [`PROFILE_PIECE_SECS`], written to `path` with the
    /// piece's number appended, and split together.
    pub(crate) fn profile_api_server(
        &self,
        secs: u64,
        path: PathBuf,
    ) -> tokio::task::JoinHandle<Result<Option<ProfileSplit>>> {
        let client = self.client.clone();
        tokio::spawn(async move {
            use futures::AsyncReadExt as _;
            let mut pieces = Vec::new();
            let mut left = secs;
            while left > 0 {
                let piece = left.min(PROFILE_PIECE_SECS);
                left -= piece;
                let uri = format!("/debug/pprof/profile?seconds={piece}");
                let req = http::Request::get(uri).body(Vec::new())?;
                let mut body = Vec::new();
                let stream = client.request_stream(req).await?;
                futures::pin_mut!(stream);
                stream.read_to_end(&mut body).await?;
                let file = PathBuf::from(format!("{}.{}", path.display(), pieces.len() + 1));
                std::fs::write(&file, &body)
                    .with_context(|| format!("writing {}", file.display()))?;
                pieces.push(file);
            }
            Ok(profile_split(&pieces))
        })
    }

    pub(crate) async fn api_stats(&self) -> Result<ApiStats> {
        let req = http::Request::get("/metrics").body(Vec::new())?;
        let text = self.client.request_text(req).await?;
        Ok(api_stats_from(&text))
    }

    /// A ServiceAccount token that may read JobSet's /metrics (served with authentication
    /// and authorization through the apiserver, as controller-runtime does).
    pub(crate) async fn jobset_metrics_access(&mut self) -> Result<()> {
        let objs = [
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "bench-metrics", "namespace": "default"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "bench-metrics"},
                   "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "bench-metrics"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "bench-metrics"},
                   "subjects": [{"kind": "ServiceAccount", "name": "bench-metrics",
                                 "namespace": "default"}]}),
        ];
        for o in objs {
            apply(&to_apply(&self.client, o)?).await?;
        }
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), "default");
        let tr = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(4 * 3600),
                ..Default::default()
            }),
            ..Default::default()
        };
        let tr = sas
            .create_token_request("bench-metrics", &PostParams::default(), &tr)
            .await?;
        self.metrics_token = tr.status.and_then(|s| s.token);
        Ok(())
    }

    /// A controller's /metrics over HTTPS with the token (None when it does not answer).
    pub(crate) fn secure_metrics(&self, port: Option<u16>) -> Option<String> {
        let (token, port) = (self.metrics_token.as_ref()?, port?);
        let out = Command::new("curl")
            .args(["-fsS", "--max-time", "5", "--cacert"])
            .arg(self.state.join("certs/ca.crt"))
            .args(["-H", &format!("Authorization: Bearer {token}")])
            .arg(format!("https://127.0.0.1:{port}/metrics"))
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// JobSet's reconciles and both controllers' webhook figures so far (None when
    /// JobSet's metrics cannot be read).
    pub(crate) fn controllers(&self) -> Option<Controllers> {
        let jobset = self.secure_metrics(self.jobset_metrics_port)?;
        let mut c = Controllers {
            jobset_reconciles: sum_samples(
                &jobset,
                "controller_runtime_reconcile_total",
                &[("controller", "jobset")],
            )?,
            ..Default::default()
        };
        // A scrape without the line reads as not known (NaN), not as 0: a 0 made a run's
        // difference the whole count so far, negative.
        let queue = |name: &str| {
            sum_samples(&jobset, name, &[("controller", "jobset")]).unwrap_or(f64::NAN)
        };
        c.jobset_queue_wait_secs = queue("workqueue_queue_duration_seconds_sum");
        c.jobset_queue_items = queue("workqueue_queue_duration_seconds_count");
        c.jobset_work_secs = queue("workqueue_work_duration_seconds_sum");
        let kueue = self.secure_metrics(self.kueue_metrics_port);
        for (who, text) in [("JobSet", Some(jobset)), ("Kueue", kueue)] {
            for line in text.as_deref().unwrap_or("").lines() {
                let Some((name, labels, value)) = parse_sample(line) else {
                    continue;
                };
                let key = format!("{who} {}", label(&labels, "webhook"));
                match name {
                    "controller_runtime_webhook_latency_seconds_sum" => {
                        *c.webhook_secs.entry(key).or_default() += value
                    }
                    "controller_runtime_webhook_latency_seconds_count" => {
                        *c.webhook_calls.entry(key).or_default() += value
                    }
                    _ => {}
                }
            }
        }
        Some(c)
    }

    /// Install this CRD, replacing the other one (both are miniclusters.flux-framework.org).
    pub(crate) async fn ensure_crd(&mut self, want: Crd) -> Result<()> {
        if self.crd == Some(want) {
            return Ok(());
        }
        let t0 = Instant::now();
        let path = match want {
            Crd::Ours => self.root.join("crds/flux-framework.org_miniclusters.yaml"),
            Crd::Go => self
                .go_dir
                .as_ref()
                .context("no Go operator")?
                .join("src")
                .join(GO_CRD),
        };
        swap_minicluster_crd(&self.client, &path, &self.root, want == Crd::Ours).await?;
        self.crd = Some(want);
        eprintln!(
            "  installed the {} MiniCluster CRD in {:.1} s",
            if want == Crd::Ours {
                "operator's"
            } else {
                "Go operator's"
            },
            t0.elapsed().as_secs_f64()
        );
        Ok(())
    }

    pub(crate) fn start_operator(&self, arm: Arm, tag: &str) -> Result<OperatorProc> {
        let metrics_port = free_port()?;
        let health_port = free_port()?;
        let log = self.logs.join(format!("{tag}.log"));
        let out = std::fs::File::create(&log)?;
        let mut cmd = match arm {
            Arm::Operator => {
                let mut c = wrapped(&self.operator_bin);
                c.args([
                    "run",
                    "--cluster-domain",
                    "cluster.local",
                    "--leader-election=false",
                ])
                .args(["--log-format", "text", "--metrics-addr"])
                .arg(format!("127.0.0.1:{metrics_port}"))
                .arg("--metrics-insecure-loopback")
                .env(
                    "RUST_LOG",
                    std::env::var("BENCH_RUST_LOG").unwrap_or_else(|_| "info".into()),
                );
                c
            }
            Arm::Go => {
                // It watches every namespace: killed with the bench (see benches/arms), so a
                // killed bench leaves no manager behind to reconcile the next run's objects.
                // setpriv execs it: the pid this bench measures is the manager's.
                let mut c = Command::new("setpriv");
                c.args(["--pdeathsig", "KILL", "--"]).arg(
                    self.go_dir
                        .as_ref()
                        .context("no Go operator")?
                        .join("bin/manager"),
                );
                c.arg("--kubeconfig")
                    .arg(&self.kubeconfig)
                    .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
                    .arg(format!(
                        "--health-probe-bind-address=127.0.0.1:{health_port}"
                    ))
                    .arg("-zap-devel=false");
                c
            }
            _ => bail!("{} runs no operator", arm.title()),
        };
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .current_dir(self.work.path());
        let child =
            spawn_logged(&mut cmd, out).with_context(|| format!("starting {}", arm.title()))?;
        Ok(OperatorProc {
            arm,
            child,
            metrics_port,
            health_port,
            log,
        })
    }

    /// What the arm applies for these MiniClusters, as ready-to-send requests.
    pub(crate) fn objects(
        &self,
        arm: Arm,
        names: &[String],
        ns: &str,
        size: usize,
        max_size: Option<usize>,
    ) -> Result<Vec<Apply>> {
        let mut out = Vec::new();
        for name in names {
            let yaml = minicluster_yaml(name, ns, size, max_size);
            let docs = match arm {
                Arm::Operator | Arm::Go => yaml_documents(&yaml)?,
                Arm::JobSet | Arm::JobSetNoPodWebhooks | Arm::Job => {
                    let file = self.work.path().join(format!("{ns}-{name}.yaml"));
                    std::fs::write(&file, &yaml)?;
                    let rendered = Command::new(&self.operator_bin)
                        .args(["render", "--cluster-domain", "cluster.local", "-f"])
                        .arg(&file)
                        .stderr(Stdio::inherit())
                        .output()?;
                    ensure!(rendered.status.success(), "flux-operator render failed");
                    let docs = yaml_documents(&String::from_utf8(rendered.stdout)?)?;
                    if arm == Arm::Job {
                        let mut out = Vec::new();
                        for d in docs {
                            if d["kind"] == "JobSet" {
                                out.extend(one_indexed_job(&d, size)?);
                            } else {
                                out.push(d);
                            }
                        }
                        out
                    } else {
                        docs
                    }
                }
            };
            for d in docs {
                out.push(to_apply(&self.client, d)?);
            }
        }
        Ok(out)
    }

    /// Point JobSet's pod webhooks at no pod (`on = false`) or back at JobSet's pods.
    pub(crate) async fn jobset_pod_webhooks(&self, on: bool) -> Result<()> {
        let selector = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: if on {
                    JOBSET_NAME_LABEL
                } else {
                    "bench.flux-framework.org/no-pod-has-this"
                }
                .to_string(),
                operator: "Exists".into(),
                values: None,
            }]),
            match_labels: None,
        };
        let m: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        let mut cfg = m.get(JOBSET_MUTATING).await?;
        for w in cfg.webhooks.iter_mut().flatten() {
            if w.name == "mpod.kb.io" {
                w.object_selector = Some(selector.clone());
            }
        }
        m.replace(JOBSET_MUTATING, &PostParams::default(), &cfg)
            .await?;
        let v: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        let mut cfg = v.get(JOBSET_VALIDATING).await?;
        for w in cfg.webhooks.iter_mut().flatten() {
            if w.name == "vpod.kb.io" {
                w.object_selector = Some(selector.clone());
            }
        }
        v.replace(JOBSET_VALIDATING, &PostParams::default(), &cfg)
            .await?;
        // The apiserver picks webhook configurations up from its informer.
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(())
    }

    /// Delete the namespace and force its pods away; return when no pod is left in it (the
    /// namespace controller finishes the rest in the background), or fail after `limit`.
    /// (2000 pods took more than 300 s to go on two busy cores.)
    pub(crate) async fn delete_namespace(&self, ns: &str, limit: Duration) -> Result<()> {
        let nss: Api<Namespace> = Api::all(self.client.clone());
        nss.delete(ns, &DeleteParams::background()).await?;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let force = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::background()
        };
        let t0 = Instant::now();
        let mut last_force = None::<Instant>;
        loop {
            if last_force.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
                let _ = pods.delete_collection(&force, &ListParams::default()).await;
                last_force = Some(Instant::now());
            }
            if pods
                .list(&ListParams::default().limit(1))
                .await?
                .items
                .is_empty()
            {
                return Ok(());
            }
            ensure!(
                t0.elapsed() < limit,
                "pods of {ns} still there after {} s",
                limit.as_secs()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Remove what an interrupted bench left on a kept cluster: its namespaces carry the
    /// bench's label and this run's names, so a leftover one would be created again "as is"
    /// with its objects still in it, and an operator started next would list them all.
    pub(crate) async fn clear_earlier_runs(&mut self) -> Result<()> {
        let nss: Api<Namespace> = Api::all(self.client.clone());
        let left = nss.list(&ListParams::default().labels(RUN_LABEL)).await?;
        for ns in left.items.iter().map(ResourceExt::name_any) {
            eprintln!("bench: deleting namespace {ns}, left by an earlier run");
            self.delete_namespace(&ns, pods_limit(2000)).await?;
            self.pending.push(ns);
        }
        self.wait_pending().await
    }

    /// Only the arm's operator may write MiniCluster status: a second controller of
    /// MiniClusters (a forgotten operator, another session's) would make both reconcile
    /// without end and every figure meaningless.
    pub(crate) async fn check_status_writers(&self, ns: &str, arm: Arm) -> Result<()> {
        let mcs: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &minicluster_resource());
        let expected = match arm {
            Arm::Operator => "flux-operator",
            _ => "manager",
        };
        let mut writers = BTreeSet::new();
        for mc in mcs.list(&ListParams::default()).await? {
            for f in mc.metadata.managed_fields.iter().flatten() {
                if f.subresource.as_deref() == Some("status") {
                    writers.insert(f.manager.clone().unwrap_or_default());
                }
            }
        }
        writers.remove(expected);
        ensure!(
            writers.is_empty(),
            "MiniCluster status in {ns} is also written by {writers:?}, not only by {expected}: \
             another MiniCluster controller runs against this cluster; stop it and run again"
        );
        Ok(())
    }

    /// Wait until the namespaces of earlier runs are gone, so that the namespace
    /// controller's work does not fall into the next measurement.
    pub(crate) async fn wait_pending(&mut self) -> Result<()> {
        let nss: Api<Namespace> = Api::all(self.client.clone());
        for ns in std::mem::take(&mut self.pending) {
            let what = format!("namespace {ns} gone");
            wait_for_every(&what, Duration::from_secs(300), POLL, || async {
                Ok(nss.get_opt(&ns).await?.is_none().then_some(()))
            })
            .await?;
        }
        Ok(())
    }
}
