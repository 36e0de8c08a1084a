//! A MiniCluster brought up from the operator's own render output, with real Flux, on the
//! pod emulator ([`crate::kubelet`]).
//!
//! [`MiniClusterRun::start`] validates the MiniCluster as the operator does, renders the
//! ConfigMap and JobSet with `flux_operator::render`, makes the CURVE Secret as the
//! controller does (the resolved spec's, checked with a CURVE handshake, else a generated keypair) with
//! `render::curve_secret`, then starts the pods the JobSet's Jobs would create: the lead
//! (`<mc>-lead-0-0`) and `size - 1` followers (`<mc>-workers-0-<i>`), each from its
//! replicated job's pod template, with JobSet's hostname and subdomain. The tests then act
//! as JobSet and the Job controller would (add or delete follower pods on a resize).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flux_operator::api::{LEAD_JOB, MiniCluster, WORKERS_JOB};
use flux_operator::flux;
use flux_operator::model;
use flux_operator::model::Environment;
use flux_operator::render;
use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVar, PodSpec, Probe, Secret};

use crate::kubelet::{Images, Network, Pod, PodMeta, tail};

/// The cluster DNS domain the tests render with.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// Which Flux the flux view image carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FluxBuild {
    /// flux-core and Fluxion, as every flux view image has them.
    WithFluxion,
    /// flux-core only.
    CoreOnly,
}

/// The tree e2e/build-flux.sh built for `build`, which the flux view image has at `/opt`.
pub fn flux_tree(build: FluxBuild) -> PathBuf {
    let cache = std::env::var_os("FLUX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let base = std::env::var_os("FLUX_OPERATOR_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
                        .join(".cache/flux-operator-rs")
                });
            base.join("flux")
        });
    let versions = format!(
        "{}-{}",
        env_version("FLUX_CORE_VERSION"),
        env_version("FLUX_SCHED_VERSION")
    );
    let variant = match build {
        FluxBuild::WithFluxion => "opt",
        FluxBuild::CoreOnly => "opt-core",
    };
    let tree = cache.join(versions).join(variant);
    assert!(
        tree.join("software/flux/bin/flux").exists() && tree.join("view/bin").exists(),
        "no Flux at {}: run e2e/build-flux.sh (make test does)",
        tree.display()
    );
    tree
}

/// A version from e2e/versions.env (the one place they are pinned).
fn env_version(key: &str) -> String {
    let text = include_str!("../../e2e/versions.env");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} missing from e2e/versions.env"))
        .trim()
        .to_string()
}

/// Parse a MiniCluster manifest as the API server would get it (namespace `default`).
pub fn minicluster(yaml: &str) -> MiniCluster {
    let mut mc: MiniCluster = serde_norway::from_str(yaml).expect("MiniCluster YAML");
    mc.metadata
        .namespace
        .get_or_insert_with(|| "default".into());
    mc
}

/// A running MiniCluster.
pub struct MiniClusterRun {
    pub mc: MiniCluster,
    pub config_map: ConfigMap,
    pub secret: Secret,
    lead_spec: PodSpec,
    follower_spec: Option<PodSpec>,
    services_spec: Option<PodSpec>,
    net: Arc<Network>,
    images: Images,
    pub lead: Option<Arc<Pod>>,
    pub followers: BTreeMap<i32, Arc<Pod>>,
    /// The services pod (`spec.services`), once started.
    pub services: Option<Arc<Pod>>,
    /// Kept so the directory outlives the pods (logs are read from it).
    _dir: tempfile::TempDir,
}

/// How to bring a MiniCluster up.
#[derive(Clone, Debug)]
pub struct Start {
    pub flux: FluxBuild,
    /// Start the followers this long before the lead (negative: the lead first).
    pub followers_early: Duration,
    pub lead_early: Duration,
    /// Start the lead at all (false: only followers, the lead unreachable).
    pub lead: bool,
    /// Start only these followers (by index) instead of all `size - 1`.
    pub only_followers: Option<Vec<i32>>,
}

impl Default for Start {
    fn default() -> Self {
        Start {
            flux: FluxBuild::WithFluxion,
            followers_early: Duration::ZERO,
            lead_early: Duration::ZERO,
            lead: true,
            only_followers: None,
        }
    }
}

impl MiniClusterRun {
    /// Render `mc` and start its pods.
    pub fn start(mc: MiniCluster, how: Start) -> MiniClusterRun {
        let errors = model::validate(&mc);
        assert!(errors.is_empty(), "invalid MiniCluster: {errors:?}");
        let env = Environment {
            cluster_domain: CLUSTER_DOMAIN.into(),
            view_image_volume: false,
        };
        let resolved = model::resolve(&mc, &env).unwrap();
        let desired = render::desired(&resolved).expect("render");
        // As the controller makes it: the spec's (parsed when resolved), checked with a
        // CURVE handshake, else a keypair generated.
        let cert = match resolved.certificate.clone() {
            Some(cert) => {
                assert!(
                    cert.keys_match().expect("handshake"),
                    "the spec's keys match"
                );
                cert
            }
            None => flux_operator::model::certificate::Certificate::generate(mc.name())
                .expect("certificate"),
        };
        let secret = render::curve_secret(&mc, &cert.to_text());
        let template = |name: &str| -> Option<PodSpec> {
            desired
                .jobset
                .spec
                .replicated_jobs
                .iter()
                .find(|r| r.name == name)
                .and_then(|r| r.template.spec.as_ref())
                .and_then(|j| j.template.spec.clone())
        };
        let lead_spec = template(LEAD_JOB).expect("lead job");
        let follower_spec = template(WORKERS_JOB);
        let services_spec = desired
            .services_job
            .as_ref()
            .and_then(|j| j.spec.as_ref())
            .and_then(|j| j.template.spec.clone());
        let dir = tempfile::Builder::new()
            .prefix("flux-pods-")
            .tempdir()
            .expect("tempdir");
        let net = Network::new(dir.path()).expect("network");
        let images = Images {
            opt_trees: vec![("flux-view".into(), flux_tree(how.flux))],
        };
        let mut run = MiniClusterRun {
            mc,
            config_map: desired.config_map,
            secret,
            lead_spec,
            follower_spec,
            services_spec,
            net,
            images,
            lead: None,
            followers: BTreeMap::new(),
            services: None,
            _dir: dir,
        };
        let size = run.mc.spec.size;
        let only = how.only_followers.clone();
        let indices = || only.clone().unwrap_or_else(|| (0..size - 1).collect());
        if how.lead_early > Duration::ZERO {
            run.start_lead();
            std::thread::sleep(how.lead_early);
            run.start_followers(&indices());
        } else if how.followers_early > Duration::ZERO || !how.lead {
            run.start_followers(&indices());
            std::thread::sleep(how.followers_early);
            if how.lead {
                run.start_lead();
            }
        } else {
            run.start_lead();
            run.start_followers(&indices());
        }
        run
    }

    fn meta(&self, hostname: String) -> PodMeta {
        PodMeta {
            name: hostname.clone(),
            hostname,
            subdomain: self.mc.subdomain().to_string(),
            namespace: self.mc.namespace_or_default().to_string(),
            cluster_domain: CLUSTER_DOMAIN.into(),
        }
    }

    /// Start a pod of a Job as the Job controller does: an Indexed Job's pods get their
    /// index in `JOB_COMPLETION_INDEX`.
    fn start_pod(&self, hostname: String, spec: &PodSpec, index: Option<i32>) -> Arc<Pod> {
        let pod = self.start_pod_allowing_init_failure(hostname, spec, index);
        if let Some(e) = pod.init_error() {
            panic!("{}: {e}", pod.meta.name);
        }
        pod
    }

    /// [`Self::start_pod`], returning the pod also when an init container failed.
    fn start_pod_allowing_init_failure(
        &self,
        hostname: String,
        spec: &PodSpec,
        index: Option<i32>,
    ) -> Arc<Pod> {
        let mut spec = spec.clone();
        if let Some(index) = index {
            for c in spec
                .containers
                .iter_mut()
                .chain(spec.init_containers.iter_mut().flatten())
            {
                c.env.get_or_insert_default().push(EnvVar {
                    name: "JOB_COMPLETION_INDEX".into(),
                    value: Some(index.to_string()),
                    value_from: None,
                });
            }
        }
        Pod::start(
            &self.net,
            self.meta(hostname),
            &spec,
            std::slice::from_ref(&self.config_map),
            std::slice::from_ref(&self.secret),
            &self.images,
        )
        .expect("pod")
    }

    /// Start the lead broker's pod.
    pub fn start_lead(&mut self) {
        let spec = self.lead_spec.clone();
        self.lead = Some(self.start_pod(flux::config::lead_hostname(&self.mc), &spec, Some(0)));
    }

    /// Start the lead pod and return the failure of its init container, if one failed (its
    /// other containers then never started), instead of panicking on it.
    pub fn start_lead_allowing_init_failure(&mut self) -> Option<String> {
        let spec = self.lead_spec.clone();
        let pod = self.start_pod_allowing_init_failure(
            flux::config::lead_hostname(&self.mc),
            &spec,
            Some(0),
        );
        let failed = pod.init_error();
        self.lead = Some(pod);
        failed
    }

    /// Start the services pod (`spec.services`), as the services Job would: its hostname
    /// `<mc>-services` in the MiniCluster's subdomain.
    pub fn start_services(&mut self) {
        let spec = self.services_spec.clone().expect("a services Job");
        let host = render::services_job_name(&self.mc);
        assert_eq!(spec.hostname.as_deref(), Some(host.as_str()));
        assert_eq!(spec.subdomain.as_deref(), Some(self.mc.subdomain()));
        self.services = Some(self.start_pod(host, &spec, None));
    }

    /// Start follower pods by index (rank = index + 1), as the followers' Job would.
    pub fn start_followers(&mut self, indices: &[i32]) {
        if indices.is_empty() {
            return; // a lone lead (size 1) has no followers' Job
        }
        let spec = self.follower_spec.clone().expect("a workers job");
        let prefix = flux::config::follower_hostname_prefix(&self.mc);
        // Pods start together, as the Job controller creates them.
        let pods: Vec<(i32, Arc<Pod>)> = std::thread::scope(|s| {
            let handles: Vec<_> = indices
                .iter()
                .map(|&i| {
                    let spec = &spec;
                    let host = format!("{prefix}{i}");
                    let this = &*self;
                    s.spawn(move || (i, this.start_pod(host, spec, Some(i))))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        self.followers.extend(pods);
    }

    /// Delete follower pods (a shrink: the highest indices go), with a grace period.
    pub fn delete_followers(&mut self, indices: &[i32], grace: Duration) {
        for i in indices {
            if let Some(p) = self.followers.remove(i) {
                p.delete(grace);
            }
        }
    }

    /// Delete follower pods together, each with its own termination grace period, as the
    /// Job controller and the kubelet do when the followers' Job shrinks.
    pub fn delete_followers_as_kubelet(&mut self, indices: &[i32]) {
        let pods: Vec<Arc<Pod>> = indices
            .iter()
            .filter_map(|i| self.followers.remove(i))
            .collect();
        delete_together(&pods);
    }

    /// Delete every pod together, each with its own termination grace period: the
    /// MiniCluster deleted or suspended, or its Workload preempted by Kueue.
    pub fn delete_all_as_kubelet(&mut self) {
        let mut pods: Vec<Arc<Pod>> = std::mem::take(&mut self.followers).into_values().collect();
        pods.extend(self.lead.clone());
        pods.extend(self.services.take());
        delete_together(&pods);
    }

    /// `kill -<signal>` of the process running `command` in the lead's Flux container.
    pub fn kill_in_lead(&self, command: &[&str], signal: &str) {
        let c = self.flux_container();
        self.lead()
            .kill_in(&c, command, signal)
            .unwrap_or_else(|e| panic!("{e}\n{}", self.debug()));
    }

    /// Delete the lead pod as the kubelet does when the grace period ends while a process
    /// running `command` (program, first arguments) runs in its Flux container and `now`
    /// says this is the moment (see [`Pod::delete_killing_during`]).
    pub fn delete_lead_killing_during(&self, command: &[&str], now: impl Fn() -> bool) {
        let c = self.flux_container();
        self.lead()
            .delete_killing_during(&c, command, now, Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("{e}\n{}", self.debug()));
    }

    /// The lead pod as the operator's pod watch sees it once its archive init container
    /// ([`flux_operator::model::containers::ARCHIVE_INIT`]) has ended: labels, name, and the statuses of that container
    /// and of the Flux container with the termination messages they wrote (the kubelet's
    /// `state.terminated.message`).
    pub fn lead_pod_status(&self) -> k8s_openapi::api::core::v1::Pod {
        use k8s_openapi::api::core::v1::{
            ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus,
        };
        let lead = self.lead();
        Pod {
            metadata: kube::api::ObjectMeta {
                name: Some(lead.meta.name.clone()),
                labels: Some(
                    [(
                        flux_operator::api::ROLE_LABEL.to_string(),
                        LEAD_JOB.to_string(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            status: Some(PodStatus {
                init_container_statuses: Some(vec![ContainerStatus {
                    name: flux_operator::model::containers::ARCHIVE_INIT.into(),
                    state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code: 0,
                            message: Some(lead.termination_message(
                                flux_operator::model::containers::ARCHIVE_INIT,
                            )),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                container_statuses: Some(vec![ContainerStatus {
                    name: self.flux_container(),
                    state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            message: Some(lead.termination_message(&self.flux_container())),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Whether the lead's pod template has a container of this name.
    pub fn lead_spec_has(&self, container: &str) -> bool {
        self.lead_spec
            .containers
            .iter()
            .any(|c| c.name == container)
    }

    /// The names of the lead's pod template's init containers.
    pub fn lead_init_containers(&self) -> Vec<String> {
        let init = self.lead_spec.init_containers.iter().flatten();
        init.map(|c| c.name.clone()).collect()
    }

    /// The lead pod.
    pub fn lead(&self) -> &Arc<Pod> {
        self.lead.as_ref().expect("the lead pod was started")
    }

    /// The Flux container's name (the one container, or the `runFlux` one).
    pub fn flux_container(&self) -> String {
        let spec = &self.mc.spec;
        let c = spec
            .containers
            .iter()
            .find(|c| c.run_flux)
            .or(spec.containers.first())
            .expect("a container");
        if c.name.is_empty() {
            flux_operator::model::containers::default_container_name(&self.mc).to_string()
        } else {
            c.name.clone()
        }
    }

    /// The Flux container of the lead's (or a follower's) pod template, and its readiness
    /// probe, exactly as rendered.
    pub fn flux_container_probe(&self, lead: bool) -> (Container, Probe) {
        let spec = if lead {
            &self.lead_spec
        } else {
            self.follower_spec.as_ref().expect("a workers job")
        };
        let name = self.flux_container();
        let c = spec
            .containers
            .iter()
            .find(|c| c.name == name)
            .expect("the Flux container")
            .clone();
        let probe = c.readiness_probe.clone().expect("a readiness probe");
        (c, probe)
    }

    /// Wait for the lead broker's container to exit; its code.
    pub fn wait_lead(&self, timeout: Duration) -> i32 {
        let c = self.flux_container();
        self.lead()
            .wait_exit(&c, timeout)
            .unwrap_or_else(|e| panic!("{e}\n{}", self.debug()))
    }

    /// Run a command in the lead's Flux container (as `kubectl exec` would).
    pub fn exec_lead(&self, argv: &[&str]) -> (i32, String) {
        let c = self.flux_container();
        self.lead()
            .exec(&c, argv)
            .unwrap_or_else(|e| panic!("exec {argv:?}: {e}\n{}", self.debug()))
    }

    /// Run `flux <args>` in the lead's Flux container against its broker socket, with
    /// Flux from the view on PATH.
    pub fn flux(&self, args: &str) -> (i32, String) {
        let view = &self.mc.spec.flux.container.mount_path;
        let script = format!(
            "export PATH=\"$PATH:{view}/view/bin\" FLUX_URI=local://{}; flux {args}",
            flux::SOCKET_PATH
        );
        self.exec_lead(&["/bin/bash", "-c", &script])
    }

    /// `flux <args>` that must succeed; its output.
    pub fn flux_ok(&self, args: &str) -> String {
        let (code, out) = self.flux(args);
        assert_eq!(code, 0, "flux {args} failed: {out}\n{}", self.debug());
        out
    }

    /// Poll until `flux <args>` succeeds and `check` accepts its output.
    pub fn wait_flux(&self, args: &str, timeout: Duration, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            let (code, out) = self.flux(args);
            if code == 0 && check(&out) {
                return out;
            }
            last = out;
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "flux {args}: condition not met after {timeout:?}; last output:\n{last}\n{}",
            self.debug()
        );
    }

    /// Wait until job `id` is inactive; its result (`COMPLETED`, `FAILED`, `CANCELED`, ...).
    pub fn wait_job_result(&self, id: &str, timeout: Duration) -> String {
        let args = format!("jobs -no {{result}} {id}");
        self.wait_flux(&args, timeout, |o| !o.trim().is_empty())
            .trim()
            .to_string()
    }

    /// `flux shutdown` through the socket, as a user ends an interactive cluster. When the
    /// instance ends first, the lead's PID 1 exits and takes the exec'd command with it (as a
    /// `kubectl exec` session ends with its container), so a failed exit counts only if the
    /// lead's container is still running afterwards.
    pub fn shutdown(&self) {
        let (code, out) = self.flux("shutdown --quiet");
        if code != 0 {
            let ended = self
                .lead()
                .wait_exit(&self.flux_container(), Duration::from_secs(60))
                .is_ok();
            assert!(
                ended,
                "flux shutdown failed ({code}) and the lead still runs: {out}\n{}",
                self.debug()
            );
        }
    }

    /// The lead Flux container's log.
    pub fn lead_log(&self) -> String {
        self.lead().logs(&self.flux_container())
    }

    /// The logs of every pod, for failure messages.
    pub fn debug(&self) -> String {
        let mut out = String::new();
        let c = self.flux_container();
        for p in self.lead.iter().chain(self.followers.values()) {
            out.push_str(&format!(
                "---- {}/{c} ----\n{}\n",
                p.meta.name,
                tail(&p.logs(&c), 40)
            ));
        }
        out
    }
}

/// Delete `pods` at once, each with its `terminationGracePeriodSeconds`.
fn delete_together(pods: &[Arc<Pod>]) {
    std::thread::scope(|s| {
        for p in pods {
            s.spawn(move || p.delete(p.termination_grace()));
        }
    });
}

impl Drop for MiniClusterRun {
    fn drop(&mut self) {
        let grace = Duration::from_secs(2);
        if let Some(s) = &self.services {
            s.delete(grace);
        }
        for p in self.followers.values() {
            p.delete(grace);
        }
        if let Some(l) = &self.lead {
            l.delete(grace);
        }
    }
}
