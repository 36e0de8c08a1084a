//! Which container runs Flux, what the lead runs, and the companion containers: where each
//! runs, and whether the operator's wrapper runs it.
//!
//! # Names
//!
//! A *companion container* (a [`Companion`]) is a container of the MiniCluster that does
//! not run Flux: one of `spec.containers` other than the Flux container (it runs beside the
//! broker in every broker pod), or one of `spec.services` (it runs once, in the services
//! pod). The code and the docs call them companions, and keep "sidecar" for what
//! Kubernetes means by it (an init container with `restartPolicy: Always`, which the
//! operator does not make). "Services" alone means the services pod and its companions;
//! Kubernetes Service objects are the network's (`render/network.rs`). The brokers other
//! than the lead are *followers* ([`Role::Follower`](crate::flux::Role::Follower)); the Go
//! operator's names stay where its users see them: the `workers` replicated job and its
//! pods `<mc>-workers-0-<i>`, `commands.workerPre`, `flux.completeWorkers`.

use crate::api::validation::{FieldError, key_field};
use crate::api::{MiniCluster, MiniClusterContainer};

/// The init container of the lead pod that reports what the archive holds
/// (`spec.archive`; see [`ArchiveReport`](crate::flux::ArchiveReport)).
pub const ARCHIVE_INIT: &str = "flux-archive";

/// The name the Flux container gets when the user left it unnamed: the MiniCluster's, as the
/// Go operator names it (so its users' `kubectl logs <pod> -c <minicluster>` keeps working).
pub fn default_container_name(mc: &MiniCluster) -> &str {
    mc.name()
}

/// The name the Flux container has in the pods (its own, or [`default_container_name`]).
pub fn flux_container_name(mc: &MiniCluster) -> &str {
    match flux_container(mc) {
        Ok((_, c)) if !c.name.is_empty() => &c.name,
        _ => default_container_name(mc),
    }
}

/// Whether container `c` of `containers` runs Flux: it says `runFlux`, or it is the only one.
pub fn runs_flux(c: &MiniClusterContainer, containers: &[MiniClusterContainer]) -> bool {
    c.run_flux || containers.len() == 1
}

/// What the lead broker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Submit the command (`tasks`, `-N size`) and wait for it: `flux submit ... --watch`.
    Submit,
    /// Each command line is its own `flux submit` inside one `flux batch`; wait for all.
    Batch,
    /// `batchRaw`: the command is a Flux batch script taken verbatim.
    BatchRaw,
    /// The command is the instance's initial program itself.
    Launcher,
    /// No program: the instance stays up until `flux shutdown` (`interactive` or no command).
    Interactive,
}

/// The container that runs Flux, with its index in `spec.containers`.
pub fn flux_container(mc: &MiniCluster) -> Result<(usize, &MiniClusterContainer), FieldError> {
    let containers = &mc.spec.containers;
    if containers.len() == 1 {
        return Ok((0, &containers[0]));
    }
    let mut runners = containers.iter().enumerate().filter(|(_, c)| c.run_flux);
    match (runners.next(), runners.next()) {
        (Some(found), None) => Ok(found),
        _ => Err(FieldError::new(
            "spec.containers",
            "exactly one container must set runFlux: true",
        )),
    }
}

/// The text the Flux container runs: `commands.script` when set, else `command`.
pub fn program_text(c: &MiniClusterContainer) -> &str {
    if c.commands.script.trim().is_empty() {
        &c.command
    } else {
        &c.commands.script
    }
}

/// The lead's mode for `mc`.
pub fn mode(mc: &MiniCluster) -> Result<Mode, FieldError> {
    let (_, c) = flux_container(mc)?;
    Ok(mode_of(mc, c))
}

/// Whether the lead of `mc` keeps the instance's state in its pod ([`Mode::keeps_state`]).
pub fn keeps_state(mc: &MiniCluster) -> bool {
    mode(mc).is_ok_and(Mode::keeps_state)
}

impl Mode {
    /// Whether a lead in this mode keeps the instance's state in its pod
    /// ([`super::mounts::STATE_VOLUME`]) across a restart of its container: an interactive
    /// cluster's only. Its lead runs no program, so the instance that starts again from its
    /// own state has nothing submitted twice; a lead with a program would run it again beside
    /// the jobs it submitted before.
    pub fn keeps_state(self) -> bool {
        self == Mode::Interactive
    }

    /// Whether the lead runs a program (the command, the batch, the launcher) whose end is
    /// the job's outcome: every mode but interactive.
    pub fn runs_program(self) -> bool {
        self != Mode::Interactive
    }
}

/// The lead's mode when `c` is the Flux container.
fn mode_of(mc: &MiniCluster, c: &MiniClusterContainer) -> Mode {
    if mc.spec.interactive || program_text(c).trim().is_empty() {
        Mode::Interactive
    } else if c.launcher {
        Mode::Launcher
    } else if c.batch && c.batch_raw {
        Mode::BatchRaw
    } else if c.batch {
        Mode::Batch
    } else {
        Mode::Submit
    }
}

/// A companion container (one that does not run Flux, see the module's names), and where it
/// runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Companion {
    /// `spec.containers[i]` other than the Flux container: beside the broker in every broker
    /// pod, as in the Go operator.
    Container(usize),
    /// `spec.services[i]`: once, in the services pod (`<mc>-services`), as in the Go operator.
    Service(usize),
}

impl Companion {
    /// Its spec, `None` for an index out of range (or the Flux container).
    pub fn spec(self, mc: &MiniCluster) -> Option<&MiniClusterContainer> {
        match self {
            Companion::Container(i) => mc
                .spec
                .containers
                .get(i)
                .filter(|_| flux_container(mc).is_ok_and(|(f, _)| f != i)),
            Companion::Service(i) => mc.spec.services.get(i),
        }
    }

    /// Its field, `spec.containers[i]` or `spec.services[i]`.
    pub fn field(self) -> String {
        match self {
            Companion::Container(i) => format!("spec.containers[{i}]"),
            Companion::Service(i) => format!("spec.services[{i}]"),
        }
    }

    /// Whether it runs in the broker pods (else in the services pod).
    pub fn in_broker_pods(self) -> bool {
        matches!(self, Companion::Container(_))
    }

    /// The prefix of its ConfigMap files
    /// ([`files::companion`](crate::flux::scripts::files::companion)).
    pub fn file_prefix(self) -> &'static str {
        match self {
            Companion::Container(_) => "container",
            Companion::Service(_) => "service",
        }
    }
}

/// Every companion container of `mc`: those of `spec.containers` beside the Flux container,
/// then `spec.services`.
pub fn companions(mc: &MiniCluster) -> Vec<Companion> {
    let flux = flux_container(mc).map(|(i, _)| i).ok();
    (0..mc.spec.containers.len())
        .filter(|i| Some(*i) != flux)
        .map(Companion::Container)
        .chain((0..mc.spec.services.len()).map(Companion::Service))
        .collect()
}

/// Whether a companion container runs through the operator's wrapper: never
/// with `noWrapEntrypoint` (the image's entrypoint stays), and only with something to run.
/// In the broker pods that is its `command` or one of `commands.init`, `servicePre`, `post`
/// (the Go operator wraps such a container even with nothing to run, so an image whose
/// entrypoint is its server never starts it: here that entrypoint stays); in the services
/// pod its `command`.
pub fn is_wrapped(mc: &MiniCluster, companion: Companion) -> bool {
    companion.spec(mc).is_some_and(|c| wraps(companion, c))
}

/// [`is_wrapped`] for the spec `c` of `companion`.
fn wraps(companion: Companion, c: &MiniClusterContainer) -> bool {
    let has = |t: &str| !t.trim().is_empty();
    let runs = match companion {
        Companion::Container(_) => {
            has(&c.command)
                || has(&c.commands.init)
                || has(&c.commands.service_pre)
                || has(&c.commands.post)
        }
        Companion::Service(_) => has(&c.command),
    };
    !c.no_wrap_entrypoint && runs
}

/// The container that runs Flux, resolved.
#[derive(Clone, Debug)]
pub struct FluxContainer<'a> {
    /// Its index in `spec.containers`.
    pub index: usize,
    /// Its spec.
    pub spec: &'a MiniClusterContainer,
    /// Its field, `spec.containers[i]`.
    pub field: String,
    /// What the lead runs.
    pub mode: Mode,
    /// The GPUs each of its pods asks for ([`gpus`]): each broker's R lists this many.
    pub gpus: u32,
    /// Whether it has a CPU limit (`resources.limits.cpu`): without one its cpuset is the
    /// node's shared pool, never cores of its own.
    pub cpu_limited: bool,
    /// `commands.prefix`, split into words: the lead runs `flux start` under them.
    pub prefix: Vec<String>,
}

impl<'a> FluxContainer<'a> {
    /// The Flux container of `mc`.
    pub fn of(mc: &'a MiniCluster) -> Result<Self, FieldError> {
        let (index, spec) = flux_container(mc)?;
        let field = format!("spec.containers[{index}]");
        let prefix = super::words::split_words(&spec.commands.prefix)
            .map_err(|message| FieldError::new(format!("{field}.commands.prefix"), message))?;
        Ok(Self {
            index,
            spec,
            gpus: gpus(spec, &field)?,
            cpu_limited: spec
                .resources
                .as_ref()
                .and_then(|r| r.limits.as_ref())
                .is_some_and(|l| l.contains_key("cpu")),
            prefix,
            field,
            mode: mode_of(mc, spec),
        })
    }
}

/// Whether an extended resource is a GPU that a device plugin hands a container whole: the
/// names NVIDIA's, AMD's and Intel's device plugins advertise (NVIDIA's MIG slices included:
/// each is one device to CUDA).
pub fn is_gpu_resource(name: &str) -> bool {
    matches!(
        name,
        "nvidia.com/gpu" | "amd.com/gpu" | "gpu.intel.com/i915" | "gpu.intel.com/xe"
    ) || name.starts_with("nvidia.com/mig-")
}

/// The GPUs container `c` (at `field`) asks for: the sum of its GPU resources
/// ([`is_gpu_resource`]), each its limit or else its request. Kubernetes allocates extended
/// resources only in whole units, so anything else is refused here, naming the field, before
/// a pod that could never be created is rendered.
pub fn gpus(c: &MiniClusterContainer, field: &str) -> Result<u32, FieldError> {
    let Some(resources) = &c.resources else {
        return Ok(0);
    };
    let (limits, requests) = (resources.limits.as_ref(), resources.requests.as_ref());
    let names = limits.into_iter().chain(requests).flat_map(|m| m.keys());
    let mut names: Vec<&String> = names.filter(|n| is_gpu_resource(n)).collect();
    names.sort();
    names.dedup();
    let mut total = 0u32;
    for name in names {
        let (kind, quantity) = match limits.and_then(|m| m.get(name)) {
            Some(q) => ("limits", q),
            None => (
                "requests",
                &requests.expect("a GPU name not in limits is in requests")[name],
            ),
        };
        let count = quantity.0.trim().parse::<u32>().map_err(|_| {
            FieldError::new(
                key_field(&format!("{field}.resources.{kind}"), name),
                format!("must be a whole number of devices, not {:?}", quantity.0),
            )
        })?;
        total = total.saturating_add(count);
    }
    Ok(total)
}

/// A companion container, resolved.
#[derive(Clone, Debug)]
pub struct CompanionContainer<'a> {
    /// Which one, and where it runs.
    pub companion: Companion,
    /// Its spec.
    pub spec: &'a MiniClusterContainer,
    /// Whether the operator's wrapper runs it ([`is_wrapped`]).
    pub wrapped: bool,
    /// Every mount: the operator's ([`companion_mounts`](super::mounts::companion_mounts)), then
    /// the user's `volumes` (empty until [`resolve`](super::resolve) fills them in).
    pub mounts: Vec<k8s_openapi::api::core::v1::VolumeMount>,
}

impl CompanionContainer<'_> {
    /// Its field, `spec.containers[i]` or `spec.services[i]`.
    pub fn field(&self) -> String {
        self.companion.field()
    }
}

/// Every companion container of `mc`, resolved, in [`companions`]' order.
pub fn companion_containers(mc: &MiniCluster) -> Vec<CompanionContainer<'_>> {
    companions(mc)
        .into_iter()
        .filter_map(|companion| {
            let spec = companion.spec(mc)?;
            Some(CompanionContainer {
                companion,
                spec,
                wrapped: wraps(companion, spec),
                mounts: Vec::new(),
            })
        })
        .collect()
}
