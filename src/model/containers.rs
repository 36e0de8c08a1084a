//! Which container runs Flux, what the lead runs, and the containers that do not run Flux:
//! where each runs, and whether the operator's wrapper runs it.

use crate::api::validation::FieldError;
use crate::api::{MiniCluster, MiniClusterContainer};

/// The init container of the lead pod that reports what the archive holds
/// (`spec.archive`; see [`ArchiveReport`](crate::flux::ArchiveReport)).
pub const ARCHIVE_INIT: &str = "flux-archive";

/// The name the Flux container gets when the user left it unnamed: the MiniCluster's, as the
/// Go operator names it (so its users' `kubectl logs <pod> -c <minicluster>` keeps working).
pub fn default_container_name(mc: &MiniCluster) -> &str {
    mc.name()
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

/// A container that does not run Flux, and where it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sidecar {
    /// `spec.containers[i]` other than the Flux container: beside the broker in every broker
    /// pod, as in the Go operator.
    Container(usize),
    /// `spec.services[i]`: once, in the services pod (`<mc>-services`), as in the Go operator.
    Service(usize),
}

impl Sidecar {
    /// Its spec, `None` for an index out of range (or the Flux container).
    pub fn spec(self, mc: &MiniCluster) -> Option<&MiniClusterContainer> {
        match self {
            Sidecar::Container(i) => mc
                .spec
                .containers
                .get(i)
                .filter(|_| flux_container(mc).is_ok_and(|(f, _)| f != i)),
            Sidecar::Service(i) => mc.spec.services.get(i),
        }
    }

    /// Its field, `spec.containers[i]` or `spec.services[i]`.
    pub fn field(self) -> String {
        match self {
            Sidecar::Container(i) => format!("spec.containers[{i}]"),
            Sidecar::Service(i) => format!("spec.services[{i}]"),
        }
    }

    /// Whether it runs in the broker pods (else in the services pod).
    pub fn in_broker_pods(self) -> bool {
        matches!(self, Sidecar::Container(_))
    }

    /// The prefix of its ConfigMap files
    /// ([`files::sidecar`](crate::flux::scripts::files::sidecar)).
    pub fn file_prefix(self) -> &'static str {
        match self {
            Sidecar::Container(_) => "container",
            Sidecar::Service(_) => "service",
        }
    }
}

/// Every container of `mc` that does not run Flux: those of `spec.containers` beside the
/// Flux container, then `spec.services`.
pub fn sidecars(mc: &MiniCluster) -> Vec<Sidecar> {
    let flux = flux_container(mc).map(|(i, _)| i).ok();
    (0..mc.spec.containers.len())
        .filter(|i| Some(*i) != flux)
        .map(Sidecar::Container)
        .chain((0..mc.spec.services.len()).map(Sidecar::Service))
        .collect()
}

/// Whether a container that does not run Flux runs through the operator's wrapper: never
/// with `noWrapEntrypoint` (the image's entrypoint stays), and only with something to run.
/// In the broker pods that is its `command` or one of `commands.init`, `servicePre`, `post`
/// (the Go operator wraps such a container even with nothing to run, so an image whose
/// entrypoint is its server never starts it: here that entrypoint stays); in the services
/// pod its `command`.
pub fn is_wrapped(mc: &MiniCluster, sidecar: Sidecar) -> bool {
    sidecar.spec(mc).is_some_and(|c| wraps(sidecar, c))
}

/// [`is_wrapped`] for the spec `c` of `sidecar`.
fn wraps(sidecar: Sidecar, c: &MiniClusterContainer) -> bool {
    let has = |t: &str| !t.trim().is_empty();
    let runs = match sidecar {
        Sidecar::Container(_) => {
            has(&c.command)
                || has(&c.commands.init)
                || has(&c.commands.service_pre)
                || has(&c.commands.post)
        }
        Sidecar::Service(_) => has(&c.command),
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
}

impl<'a> FluxContainer<'a> {
    /// The Flux container of `mc`.
    pub fn of(mc: &'a MiniCluster) -> Result<Self, FieldError> {
        let (index, spec) = flux_container(mc)?;
        Ok(Self {
            index,
            spec,
            field: format!("spec.containers[{index}]"),
            mode: mode_of(mc, spec),
        })
    }
}

/// A container that does not run Flux, resolved.
#[derive(Clone, Debug)]
pub struct SidecarContainer<'a> {
    /// Which one, and where it runs.
    pub sidecar: Sidecar,
    /// Its spec.
    pub spec: &'a MiniClusterContainer,
    /// Whether the operator's wrapper runs it ([`is_wrapped`]).
    pub wrapped: bool,
    /// Every mount: the operator's ([`sidecar_mounts`](super::mounts::sidecar_mounts)), then
    /// the user's `volumes` (empty until [`resolve`](super::resolve) fills them in).
    pub mounts: Vec<k8s_openapi::api::core::v1::VolumeMount>,
}

impl SidecarContainer<'_> {
    /// Its field, `spec.containers[i]` or `spec.services[i]`.
    pub fn field(&self) -> String {
        self.sidecar.field()
    }
}

/// Every container of `mc` that does not run Flux, resolved, in [`sidecars`]' order.
pub fn sidecar_containers(mc: &MiniCluster) -> Vec<SidecarContainer<'_>> {
    sidecars(mc)
        .into_iter()
        .filter_map(|sidecar| {
            let spec = sidecar.spec(mc)?;
            Some(SidecarContainer {
                sidecar,
                spec,
                wrapped: wraps(sidecar, spec),
                mounts: Vec::new(),
            })
        })
        .collect()
}
