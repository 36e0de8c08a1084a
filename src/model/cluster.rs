//! The resolved cluster: what render and flux make the objects and scripts from.

use k8s_openapi::api::core::v1::VolumeMount;

use super::certificate::Certificate;
use super::check::validate;
use super::containers::{Companion, CompanionContainer, FluxContainer, companion_containers};
use super::environment::Environment;
use super::mounts::{companion_mounts, flux_container_mounts, user_mounts};
use super::network::{PortService, cluster_domain, port_services};
use super::settings::{FluxOptions, JobSettings, PodSettings};
use super::view::View;
use crate::api::validation::FieldError;
use crate::api::{
    DEFAULT_RESTORE_LIMITS, FluxContainer as FluxViewSpec, LoggingSpec, MiniCluster,
    MiniClusterContainer, RestoreLimits, RunningJobs,
};

/// A MiniCluster whose spec was checked and resolved ([`resolve`]): every fact render and
/// flux would otherwise derive again from the spec, decided once. Flux and render read the
/// spec only through it: what passes through unchanged (a container's image, resources and
/// hooks' text, `spec.pod`) is borrowed here.
#[derive(Clone, Debug)]
pub struct Cluster<'a> {
    /// The MiniCluster, for its metadata (name, namespace, uid, labels).
    pub mc: &'a MiniCluster,
    /// The DNS domain the broker addresses end in (the spec's, or the operator's).
    pub cluster_domain: String,
    /// The pods' subdomain: the headless Service (`network.headlessName`, else the name).
    pub subdomain: &'a str,
    /// The instance's settings (`spec.flux`).
    pub options: FluxOptions<'a>,
    /// `spec.logging`: how the entrypoints and the brokers speak.
    pub logging: &'a LoggingSpec,
    /// `spec.flux.container`: the flux view's image, where it mounts, its Python path.
    pub flux_view: &'a FluxViewSpec,
    /// Every pod's settings.
    pub pods: PodSettings<'a>,
    /// The Jobs' settings.
    pub jobs: JobSettings<'a>,
    /// Seconds the jobs on a leaving follower get (`drainGracePeriodSeconds`, clamped).
    pub drain_grace_seconds: i32,
    /// The container that runs Flux, and what the lead runs.
    pub flux: FluxContainer<'a>,
    /// Every mount of the Flux container: the operator's, then the user's `volumes`.
    pub flux_mounts: Vec<VolumeMount>,
    /// The containers that do not run Flux: beside the broker, then `spec.services`.
    pub companions: Vec<CompanionContainer<'a>>,
    /// The Services for the ports of containers that do not run Flux.
    pub port_services: Vec<PortService>,
    /// How many brokers: now, at most, enough to start; and the tasks of the lead's job.
    pub sizes: Sizes,
    /// `spec.flux.curveCert`, parsed (`None`: the operator generates one).
    pub certificate: Option<Certificate>,
    /// `spec.archive`, when the instance saves and restores.
    pub archive: Option<Archive<'a>>,
    /// How Flux reaches the pods from the view image (`None`: `flux.container.disable`, the
    /// application image has Flux).
    pub view: Option<View>,
}

/// The cluster's sizes, resolved once from `size`, `maxSize`, `minSize` and `tasks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// `spec.size`: the brokers now.
    pub size: i32,
    /// The brokers the config lists (`maxSize`, at least `size`): the ranks there can be.
    pub max_size: i32,
    /// The broker quorum (`-Sbroker.quorum`): `minSize` when set, otherwise `size` when the
    /// config lists more hosts (`maxSize > size`) so absent ranks are simply offline; `None`
    /// keeps Flux's default (all ranks).
    pub quorum: Option<i32>,
    /// `spec.tasks`: the tasks of the lead's job.
    pub tasks: i32,
}

impl Sizes {
    /// The sizes of `mc`.
    pub fn of(mc: &MiniCluster) -> Sizes {
        let (size, max_size) = (mc.spec.size, mc.max_size());
        let quorum = match mc.spec.min_size {
            Some(min) => Some(min.max(1)),
            None if max_size > size => Some(size.max(1)),
            None => None,
        };
        Sizes {
            size,
            max_size,
            quorum,
            tasks: mc.spec.tasks,
        }
    }
}

/// Where the instance saves to and restores from (`spec.archive`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Archive<'a> {
    /// `spec.archive.path`.
    pub path: &'a str,
    /// Seconds running jobs get before the save (`gracePeriodSeconds`, clamped).
    pub grace_seconds: i32,
    /// What the save does with running jobs.
    pub running_jobs: RunningJobs,
    /// The bounds of a restore (`restoreLimits`, defaults filled in).
    pub limits: RestoreBounds,
}

/// `spec.archive.restoreLimits` with its defaults: how much of an archive the restore's check
/// reads before it refuses the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestoreBounds {
    /// Most members of the tar.
    pub members: i64,
    /// Most bytes of the tar, decompressed.
    pub bytes: i64,
    /// Longest the check may take, in seconds.
    pub seconds: i32,
}

impl RestoreBounds {
    /// The bounds `limits` sets, each unset one at its default.
    pub fn of(limits: &RestoreLimits) -> Self {
        let (members, bytes, seconds) = DEFAULT_RESTORE_LIMITS;
        Self {
            members: limits.members.unwrap_or(members).max(1),
            bytes: limits.bytes.unwrap_or(bytes).max(1),
            seconds: limits.seconds.unwrap_or(seconds).max(1),
        }
    }
}

impl<'a> Cluster<'a> {
    /// The MiniCluster's name.
    pub fn name(&self) -> &'a str {
        self.mc.name()
    }

    /// The resolved container `companion`, `None` for the Flux container or out of range.
    pub fn companion(&self, companion: Companion) -> Option<&CompanionContainer<'a>> {
        self.companions.iter().find(|s| s.companion == companion)
    }

    /// The containers of the broker pods (`spec.containers`), with their index, in order.
    pub fn broker_pod_containers(&self) -> Vec<(usize, &'a MiniClusterContainer)> {
        let mut all: Vec<_> = (self.companions.iter())
            .filter_map(|s| match s.companion {
                Companion::Container(i) => Some((i, s.spec)),
                Companion::Service(_) => None,
            })
            .chain([(self.flux.index, self.flux.spec)])
            .collect();
        all.sort_by_key(|(i, _)| *i);
        all
    }

    /// Whether the lead's program ends the cluster, fail or succeed: the lead's pod does not
    /// restart its Flux container (`restartPolicy: Never`) and its Job fails at once when the
    /// program failed ([`crate::flux::RETRY_EXIT`] tells a broker that ended before its job did,
    /// which the Job retries). Every mode that runs a program, unless `spec.pod.restartPolicy`
    /// asks for `OnFailure`: the Go operator's default, which runs a failed program again.
    pub fn program_ends_cluster(&self) -> bool {
        self.flux.mode.runs_program()
            && self.pods.pod.restart_policy != Some(crate::api::RestartPolicy::OnFailure)
    }

    /// The containers of `spec.services` (the services pod's), in order.
    pub fn services(&self) -> impl Iterator<Item = &CompanionContainer<'a>> {
        self.companions
            .iter()
            .filter(|s| !s.companion.in_broker_pods())
    }
}

/// The spec of `mc` resolved in `env`, or every error in it, each naming its API field path.
/// The one entry from a spec to what render and flux take: a spec that resolves renders.
pub fn resolve<'a>(mc: &'a MiniCluster, env: &Environment) -> Result<Cluster<'a>, Vec<FieldError>> {
    let mut errors = validate(mc);
    let certificate = given_certificate(mc).unwrap_or_else(|e| {
        errors.push(e);
        None
    });
    if !errors.is_empty() {
        return Err(errors);
    }
    let one = |e: FieldError| vec![e];
    let flux = FluxContainer::of(mc).map_err(one)?;
    let view = View::of(mc, env);
    let mut flux_mounts = flux_container_mounts(mc, view);
    flux_mounts.extend(user_mounts(flux.spec));
    let companions = companion_containers(mc)
        .into_iter()
        .map(|mut s| {
            let mut mounts = companion_mounts(mc, s.companion, view);
            mounts.extend(user_mounts(s.spec));
            s.mounts = mounts;
            s
        })
        .collect();
    Ok(Cluster {
        mc,
        cluster_domain: cluster_domain(mc, env).map_err(one)?,
        subdomain: mc.subdomain(),
        options: FluxOptions::of(mc).map_err(one)?,
        logging: &mc.spec.logging,
        flux_view: &mc.spec.flux.container,
        pods: PodSettings::of(mc),
        jobs: JobSettings::of(mc),
        drain_grace_seconds: mc.drain_grace_seconds(),
        flux,
        flux_mounts,
        companions,
        port_services: port_services(mc).map_err(one)?,
        sizes: Sizes::of(mc),
        certificate,
        archive: mc.has_archive().then(|| Archive {
            path: &mc.spec.archive.path,
            grace_seconds: mc.archive_grace_seconds(),
            running_jobs: mc.spec.archive.running_jobs,
            limits: RestoreBounds::of(&mc.spec.archive.restore_limits),
        }),
        view,
    })
}

/// `spec.flux.curveCert`, parsed (the one place it is): `None` when the spec gives none
/// (the operator generates one). Whether its keys belong together takes a CURVE handshake,
/// which the controller makes before its plan.
fn given_certificate(mc: &MiniCluster) -> Result<Option<Certificate>, FieldError> {
    let text = mc.spec.flux.curve_cert.as_str();
    if text.trim().is_empty() {
        return Ok(None);
    }
    Certificate::parse(text).map(Some).map_err(|e| {
        let message = format!(
            "is not a CURVE certificate as `flux keygen` writes it: {}",
            e.message
        );
        FieldError::new("spec.flux.curveCert", message)
    })
}
