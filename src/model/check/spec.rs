//! The spec as a whole: the schema's own rules (so `render` and old API servers agree), the
//! sizes, the name, the archive path, Flux's files and Kueue's placement.

use garde::Validate;

use super::err;
use crate::api::validation::{FieldError, api_path, key_field, longest_pod_name};
use crate::api::{
    KUEUE_PODSET_GROUP, KUEUE_PREFERRED_TOPOLOGY, KUEUE_QUEUE_LABEL, KUEUE_REQUIRED_TOPOLOGY,
    MANAGED_BY_LABEL, MAX_POD_NAME, MiniCluster, NAME_LABEL, ROLE_LABEL, is_dns_label,
};

/// The rules the schema declares (garde's), in the API's field names.
pub(super) fn schema(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    if let Err(report) = mc.spec.validate() {
        for (path, error) in report.iter() {
            errors.push(err(
                format!("spec.{}", api_path(&path.to_string())),
                error.message().to_string(),
            ));
        }
    }
}

/// Flux's rc scripts put the archive path unquoted into a shell command (`flux dump`,
/// `flux restore`), and `auto` means Flux's own state directory: an absolute path of plain
/// characters only, with no `..` (which would lead out of the volume the path names, onto
/// the container's own filesystem or another volume, past the check that it outlives the pod).
pub(super) fn archive_path(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    let archive = mc.spec.archive.path.as_str();
    if archive.split('/').any(|part| part == "..") {
        errors.push(err(
            "spec.archive.path",
            format!("{archive:?} must not contain '..': name the file by its path under the volume's mount path"),
        ));
        return;
    }
    if !archive.is_empty()
        && (!archive.starts_with('/')
            || archive.ends_with('/')
            || !archive
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b)))
    {
        errors.push(err(
            "spec.archive.path",
            format!(
                "{archive:?} must be an absolute file path of letters, digits, '.', '_', '-' and '/' (Flux passes it to a shell unquoted)"
            ),
        ));
    }
}

/// The archive must outlive the pod that saves it: it lies under the mount path of a volume
/// of the Flux container that is a PersistentVolumeClaim, a host path or a CSI volume, and is
/// writable. On an emptyDir, a Secret, a ConfigMap or the container's own filesystem, the
/// save would vanish with the pod and the next cluster would start empty without a word.
pub(super) fn archive_volume(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    let archive = mc.spec.archive.path.as_str();
    let Ok((index, container)) = crate::model::containers::flux_container(mc) else {
        return; // reported by the containers' checks
    };
    if !archive.starts_with('/') {
        return; // reported by archive_path
    }
    let volume = crate::model::archive::volume_of(container, archive);
    let field = "spec.archive.path";
    let problem = match volume {
        None => format!(
            "{archive:?} is on the Flux container's own filesystem, which goes with the pod: put it under the path of a volume with claimName, hostPath or csiDriver in spec.containers[{index}].volumes"
        ),
        Some(on) if on.volume.read_only => format!(
            "{archive:?} is on volume {name:?} (spec.containers[{index}].volumes.{name}), which is mounted readOnly: the save could not be written",
            name = on.name
        ),
        Some(on) if !on.outlives_the_pod() => format!(
            "{archive:?} is on volume {name:?} (spec.containers[{index}].volumes.{name}), which does not outlive the pod (an emptyDir, a Secret or a ConfigMap): use a volume with claimName, hostPath or csiDriver",
            name = on.name
        ),
        Some(_) => return,
    };
    errors.push(err(field, problem));
}

/// The same checks the CRD's CEL rules make on the sizes.
pub(super) fn sizes(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    let spec = &mc.spec;
    let max_size = spec.max_size.unwrap_or(spec.size);
    if spec.size < 1 {
        errors.push(err("spec.size", "must be at least 1"));
    }
    if spec.size > max_size {
        errors.push(err(
            "spec.size",
            format!("{} exceeds spec.maxSize {max_size}", spec.size),
        ));
    }
    if max_size > 1 && spec.size < 2 {
        errors.push(err(
            "spec.size",
            "an elastic MiniCluster (maxSize > 1) needs size >= 2: JobSet keeps the followers Job at one pod or more",
        ));
    }
    if let Some(min) = spec.min_size
        && min > spec.size
    {
        errors.push(err(
            "spec.minSize",
            format!("{min} exceeds spec.size {}", spec.size),
        ));
    }
}

/// The name: the CRD's CEL rule (the broker config makes host names of it), and short enough
/// for the longest pod name.
pub(super) fn name(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    let name = mc.name();
    if !is_dns_label(name) || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        errors.push(err(
            "metadata.name",
            format!(
                "{name:?} is not a DNS label (lower-case letters, digits, '-', starting with a letter): it becomes the broker host names"
            ),
        ));
    }
    let longest = longest_pod_name(name, mc.spec.max_size.unwrap_or(mc.spec.size));
    if longest > MAX_POD_NAME {
        errors.push(err(
            "metadata.name",
            format!(
                "{name:?} is too long: its longest pod name would have {longest} characters, more than {MAX_POD_NAME}"
            ),
        ));
    }
}

/// `spec.flux.brokerConfig` is TOML, and `spec.flux.curveCert` a certificate. The text is
/// read here; whether its public key belongs to its secret key takes a CURVE handshake, done
/// before the plan (also reported as InvalidSpec).
pub(super) fn flux_files(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    let flux = &mc.spec.flux;
    if !flux.broker_config.is_empty()
        && let Err(e) = flux.broker_config.parse::<toml::Table>()
    {
        errors.push(err(
            "spec.flux.brokerConfig",
            format!("is not valid TOML: {}", e.message()),
        ));
    }
}

/// `spec.placement` is done by Kueue: it needs a queue, and the pod annotations it sets are
/// its own.
pub(super) fn placement(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    if mc.spec.placement.is_none() {
        return;
    }
    let queued = mc
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(KUEUE_QUEUE_LABEL))
        || mc.spec.job_labels.contains_key(KUEUE_QUEUE_LABEL);
    if !queued {
        errors.push(err(
            "spec.placement",
            format!(
                "topology placement is done by Kueue: label the MiniCluster with \
                 {KUEUE_QUEUE_LABEL} (a LocalQueue whose ResourceFlavor names a Topology)"
            ),
        ));
    }
    for key in [
        KUEUE_REQUIRED_TOPOLOGY,
        KUEUE_PREFERRED_TOPOLOGY,
        KUEUE_PODSET_GROUP,
    ] {
        if mc.spec.pod.annotations.contains_key(key) {
            errors.push(err(
                key_field("spec.pod.annotations", key),
                "is set by spec.placement: remove it from spec.pod.annotations",
            ));
        }
    }
}

/// Labels that are not the user's: the operator selects its objects and pods by its own, and
/// the Job and JobSet controllers select theirs by theirs (a Job whose pod template takes its
/// selector label is refused when the JobSet creates it).
const CONTROLLER_LABEL_PREFIXES: &[&str] = &["jobset.sigs.k8s.io/", "batch.kubernetes.io/"];
const CONTROLLER_LABELS: &[&str] = &["controller-uid", "job-name", MANAGED_BY_LABEL];

/// `spec.jobLabels` (on the JobSet) and `spec.pod.labels` (on every pod) do not take the
/// operator's or the controllers' labels.
pub(super) fn labels(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    for (field, labels) in [
        ("spec.jobLabels", &mc.spec.job_labels),
        ("spec.pod.labels", &mc.spec.pod.labels),
    ] {
        for key in labels.keys() {
            if key == NAME_LABEL || key == ROLE_LABEL {
                errors.push(err(
                    field,
                    format!(
                        "{key} is set by the operator: its Services and status select pods by it"
                    ),
                ));
            } else if CONTROLLER_LABELS.contains(&key.as_str())
                || CONTROLLER_LABEL_PREFIXES.iter().any(|p| key.starts_with(p))
            {
                errors.push(err(
                    field,
                    format!("{key} is set by the operator or the Job and JobSet controllers, which select their objects by it"),
                ));
            }
        }
    }
}
