//! The containers: exactly one runs Flux, every name is its own (not one the operator gives
//! its own containers), volumes have one source and a path, and no container mounts two
//! volumes at one path.

use std::collections::BTreeSet;

use super::err;
use super::texts::check_texts;
use crate::api::validation::{FieldError, key_field};
use crate::api::{MiniCluster, MiniClusterContainer, is_dns_label};
use crate::model::containers::{ARCHIVE_INIT, Companion, default_container_name, runs_flux};
use crate::model::mounts::{
    RESERVED_VOLUMES, check_mount_paths, companion_mounts, flux_container_mounts,
};
use crate::model::view::View;

/// Every check of `spec.containers`, `spec.services` and the names they share.
pub(super) fn check(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    let spec = &mc.spec;
    let runners = spec.containers.iter().filter(|c| c.run_flux).count();
    if runners > 1 || (runners == 0 && spec.containers.len() > 1) {
        errors.push(err(
            "spec.containers",
            format!("exactly one container must set runFlux: true, found {runners}"),
        ));
    }
    if unnamed_runner_with(mc, &spec.flux.container.name) {
        errors.push(err(
            "spec.flux.container.name",
            format!(
                "{:?} is the name the unnamed Flux container gets; name that container or pick another name here",
                spec.flux.container.name
            ),
        ));
    }
    let reserved = reserved_names(mc, errors);
    let mut names = BTreeSet::new();
    for (i, c) in spec.containers.iter().enumerate() {
        check_broker_pod_container(mc, i, c, &mut names, &reserved, errors);
    }
    for (i, s) in spec.services.iter().enumerate() {
        check_service(mc, i, s, &mut names, &reserved, errors);
    }
}

/// The names the operator gives containers of its own: the flux view init container's, the
/// one an unnamed Flux container gets, and with an archive its report init container's
/// (which the flux view's cannot take either).
fn reserved_names<'a>(mc: &'a MiniCluster, errors: &mut Vec<FieldError>) -> Vec<&'a str> {
    let spec = &mc.spec;
    let unnamed_runner = spec
        .containers
        .iter()
        .any(|c| runs_flux(c, &spec.containers) && c.name.is_empty());
    let mut reserved = vec![spec.flux.container.name.as_str()];
    if unnamed_runner {
        reserved.push(default_container_name(mc));
    }
    if mc.has_archive() {
        reserved.push(ARCHIVE_INIT);
        if spec.flux.container.name == ARCHIVE_INIT {
            errors.push(err(
                "spec.flux.container.name",
                format!(
                    "{ARCHIVE_INIT:?} is taken: it is the lead pod's archive report init container (spec.archive)"
                ),
            ));
        }
    }
    reserved
}

/// `spec.containers[i]`: the Flux container or one beside it in every broker pod.
fn check_broker_pod_container(
    mc: &MiniCluster,
    i: usize,
    c: &MiniClusterContainer,
    names: &mut BTreeSet<String>,
    reserved: &[&str],
    errors: &mut Vec<FieldError>,
) {
    let field = format!("spec.containers[{i}]");
    let is_runner = runs_flux(c, &mc.spec.containers);
    if !is_runner && c.name.is_empty() {
        errors.push(err(
            format!("{field}.name"),
            "a container that does not run Flux needs a name",
        ));
    }
    check_container(&field, c, names, reserved, errors);
    check_texts(&field, c, is_runner, errors);
    let view = paths_of_view(mc);
    let operator = if is_runner {
        flux_container_mounts(mc, view)
    } else {
        companion_mounts(mc, Companion::Container(i), view)
    };
    check_mount_paths(&field, c, &operator, errors);
    if c.launcher && c.batch {
        errors.push(err(
            format!("{field}.launcher"),
            "launcher and batch exclude each other",
        ));
    }
    if !c.commands.script.is_empty() && !c.command.is_empty() {
        errors.push(err(
            format!("{field}.commands.script"),
            "script and command exclude each other",
        ));
    }
    if c.batch_raw && !c.batch {
        errors.push(err(
            format!("{field}.batchRaw"),
            "batchRaw needs batch: true",
        ));
    }
}

/// `spec.services[i]`, in the services pod.
fn check_service(
    mc: &MiniCluster,
    i: usize,
    s: &MiniClusterContainer,
    names: &mut BTreeSet<String>,
    reserved: &[&str],
    errors: &mut Vec<FieldError>,
) {
    let field = format!("spec.services[{i}]");
    if s.name.is_empty() {
        errors.push(err(
            format!("{field}.name"),
            "service containers need a name",
        ));
    }
    if s.run_flux {
        errors.push(err(
            format!("{field}.runFlux"),
            "service containers do not run Flux",
        ));
    }
    for (hook, value) in [
        ("pre", &s.commands.pre),
        ("brokerPre", &s.commands.broker_pre),
        ("workerPre", &s.commands.worker_pre),
    ] {
        if !value.is_empty() {
            errors.push(err(
                format!("{field}.commands.{hook}"),
                "service containers take only commands.init, servicePre and post",
            ));
        }
    }
    check_container(&field, s, names, reserved, errors);
    check_texts(&field, s, false, errors);
    let operator = companion_mounts(mc, Companion::Service(i), paths_of_view(mc));
    check_mount_paths(&field, s, &operator, errors);
}

/// The view whose mount paths the user's must not take: those of a copy, which an image
/// volume mounts at the same paths (so the check needs no operator default).
fn paths_of_view(mc: &MiniCluster) -> Option<View> {
    (!mc.spec.flux.container.disable).then_some(View::Copy)
}

/// Whether the Flux container is unnamed and would get `name`.
fn unnamed_runner_with(mc: &MiniCluster, name: &str) -> bool {
    let containers = &mc.spec.containers;
    name == default_container_name(mc)
        && containers
            .iter()
            .any(|c| runs_flux(c, containers) && c.name.is_empty())
}

/// A container's name (its own, not one of `reserved`) and its volumes.
fn check_container(
    field: &str,
    c: &MiniClusterContainer,
    names: &mut BTreeSet<String>,
    reserved: &[&str],
    errors: &mut Vec<FieldError>,
) {
    if !c.name.is_empty() {
        if reserved.contains(&c.name.as_str()) {
            errors.push(err(
                format!("{field}.name"),
                format!(
                    "{:?} is taken: it is the name of the flux view init container, of the archive report init container, or the one the unnamed Flux container gets",
                    c.name
                ),
            ));
        }
        if !names.insert(c.name.clone()) {
            errors.push(err(
                format!("{field}.name"),
                format!("{:?} is used by another container", c.name),
            ));
        }
    }
    // Kubernetes hands out GPUs whole: a pod asking for a fraction could never be created.
    if let Err(e) = crate::model::containers::gpus(c, field) {
        errors.push(e);
    }
    for (vname, v) in &c.volumes {
        check_volume(
            &key_field(&format!("{field}.volumes"), vname),
            vname,
            v,
            errors,
        );
    }
}

/// One of a container's `volumes`: a DNS label not the operator's, one source, a path.
fn check_volume(
    vfield: &str,
    vname: &str,
    v: &crate::api::ContainerVolume,
    errors: &mut Vec<FieldError>,
) {
    if !is_dns_label(vname) {
        errors.push(err(vfield, "volume names must be DNS labels"));
    }
    if RESERVED_VOLUMES.contains(&vname) {
        errors.push(err(
            vfield,
            "this volume name is used by the operator's own volumes",
        ));
    }
    let sources = [
        !v.claim_name.is_empty(),
        !v.host_path.is_empty(),
        !v.secret_name.is_empty(),
        !v.config_map_name.is_empty(),
        !v.csi_driver.is_empty(),
        v.empty_dir,
    ]
    .iter()
    .filter(|s| **s)
    .count();
    if sources != 1 {
        errors.push(err(
            vfield,
            format!(
                "needs exactly one of claimName, hostPath, secretName, configMapName, csiDriver, emptyDir; found {sources}"
            ),
        ));
    }
    if v.path.is_empty() && !v.empty_dir {
        errors.push(err(
            format!("{vfield}.path"),
            "a volume needs the path to mount it at",
        ));
    }
    if !v.empty_dir && (!v.empty_dir_medium.is_empty() || v.empty_dir_size_limit.is_some()) {
        errors.push(err(
            vfield,
            "emptyDirMedium and emptyDirSizeLimit need emptyDir: true",
        ));
    }
}

/// The MiniCluster's own job (`flux submit -N<size> -n<tasks>`) places one rank per core, and
/// each broker has no more cores than its CPU limit (rounded up, see docs/mpi.md): `tasks`
/// above `size` times that can never be scheduled, so it is refused before any pod runs
/// instead of failing as unsatisfiable once they do. An interactive cluster runs no such job.
pub(super) fn tasks_fit(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    let Ok((i, c)) = crate::model::containers::flux_container(mc) else {
        return;
    };
    let limit = c
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref()?.get("cpu"));
    let Some(cores) = limit.and_then(|q| whole_cpus(&q.0)) else {
        return;
    };
    let interactive = crate::model::containers::mode(mc)
        .is_ok_and(|m| m == crate::model::containers::Mode::Interactive);
    let (size, tasks) = (i64::from(mc.spec.size), i64::from(mc.spec.tasks));
    if !interactive && size > 0 && tasks > size * cores {
        errors.push(err(
            "spec.tasks",
            format!(
                "{tasks} ranks need {tasks} cores, and {size} brokers with spec.containers[{i}].resources.limits.cpu {} have {} (one rank per core)",
                limit.map_or("", |q| q.0.as_str()),
                size * cores
            ),
        ));
    }
}

/// A CPU quantity in whole CPUs, rounded up as the downward API rounds it; `None` when it is
/// not a plain decimal or millicore figure (the API server checks the format).
fn whole_cpus(quantity: &str) -> Option<i64> {
    let q = quantity.trim();
    let millis = match q.strip_suffix('m') {
        Some(m) => m.parse::<i64>().ok()?,
        None => (q.parse::<f64>().ok()? * 1000.0).ceil() as i64,
    };
    (millis > 0).then(|| (millis + 999) / 1000)
}
