//! What the API server cannot check: run by the operator before it creates anything.
//!
//! Errors name the field (`spec.containers[0].volumes.data.path`) and become an
//! `InvalidSpec` condition plus a Warning Event. Fields that are accepted for compatibility
//! but not acted on are listed by [`unsupported`] and reported as `Unsupported`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use garde::Validate;

use super::{
    KUEUE_PODSET_GROUP, KUEUE_PREFERRED_TOPOLOGY, KUEUE_QUEUE_LABEL, KUEUE_REQUIRED_TOPOLOGY,
    MAX_POD_NAME, MiniCluster, MiniClusterContainer, POD_SUFFIX_LEN, WORKERS_JOB,
};

/// One problem with a spec, naming the field: the one error type for a bad spec, whoever finds
/// it (these checks, the renderer, Flux's files, the certificate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.containers[1].name`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl FieldError {
    /// The error of `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

fn err(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError::new(field, message)
}

/// All errors in the MiniCluster's spec that the schema cannot express. Empty when valid.
pub fn validate(mc: &MiniCluster) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Err(report) = mc.spec.validate() {
        for (path, error) in report.iter() {
            errors.push(err(
                format!("spec.{}", api_path(&path.to_string())),
                error.message().to_string(),
            ));
        }
    }
    let spec = &mc.spec;

    // Flux's rc scripts put the archive path unquoted into a shell command (`flux dump`,
    // `flux restore`), and `auto` means Flux's own state directory: an absolute path of plain
    // characters only.
    let archive = spec.archive.path.as_str();
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

    // The same checks the CRD's CEL rules make, so `render` and old API servers agree.
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
    let name = mc.name();
    // The CRD's CEL rule; the broker config makes host names of it.
    if !super::is_dns_label(name) || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        errors.push(err(
            "metadata.name",
            format!(
                "{name:?} is not a DNS label (lower-case letters, digits, '-', starting with a letter): it becomes the broker host names"
            ),
        ));
    }
    let longest = longest_pod_name(name, max_size);
    if longest > MAX_POD_NAME {
        errors.push(err(
            "metadata.name",
            format!(
                "{name:?} is too long: its longest pod name would have {longest} characters, more than {MAX_POD_NAME}"
            ),
        ));
    }

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
    for key in [super::NAME_LABEL, super::ROLE_LABEL] {
        if spec.pod.labels.contains_key(key) {
            errors.push(err(
                "spec.pod.labels",
                format!("{key} is set by the operator: its Services and status select pods by it"),
            ));
        }
    }

    let mut names = BTreeSet::new();
    // The flux view init container's name, and the name an unnamed Flux container gets.
    let unnamed_runner = spec
        .containers
        .iter()
        .any(|c| (c.run_flux || spec.containers.len() == 1) && c.name.is_empty());
    let mut reserved = vec![spec.flux.container.name.as_str()];
    if unnamed_runner {
        reserved.push(crate::render::default_container_name(mc));
    }
    if !spec.archive.path.trim().is_empty() {
        reserved.push(crate::flux::ARCHIVE_INIT);
        if spec.flux.container.name == crate::flux::ARCHIVE_INIT {
            errors.push(err(
                "spec.flux.container.name",
                format!(
                    "{:?} is taken: it is the lead pod's archive report init container (spec.archive)",
                    crate::flux::ARCHIVE_INIT
                ),
            ));
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        let field = format!("spec.containers[{i}]");
        let is_runner = c.run_flux || spec.containers.len() == 1;
        if !is_runner && c.name.is_empty() {
            errors.push(err(
                format!("{field}.name"),
                "a container that does not run Flux needs a name",
            ));
        }
        check_container(&field, c, &mut names, &reserved, &mut errors);
        check_texts(&field, c, is_runner, &mut errors);
        let operator = if is_runner {
            crate::render::flux_pod::flux_container_mounts(mc)
        } else {
            crate::render::flux_pod::sidecar_mounts(mc, crate::flux::Sidecar::Container(i))
        };
        check_mount_paths(&field, c, &operator, &mut errors);
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
    for (i, s) in spec.services.iter().enumerate() {
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
        check_container(&field, s, &mut names, &reserved, &mut errors);
        check_texts(&field, s, false, &mut errors);
        let operator =
            crate::render::flux_pod::sidecar_mounts(mc, crate::flux::Sidecar::Service(i));
        check_mount_paths(&field, s, &operator, &mut errors);
    }

    check_flux_texts(mc, &mut errors);
    check_as_the_renderer_does(mc, &mut errors);

    if !spec.flux.broker_config.is_empty()
        && let Err(e) = spec.flux.broker_config.parse::<toml::Table>()
    {
        errors.push(err(
            "spec.flux.brokerConfig",
            format!("is not valid TOML: {}", e.message()),
        ));
    }
    // The text is read here; whether its public key belongs to its secret key takes a CURVE
    // handshake, done when its Secret is made (also reported as InvalidSpec).
    let cert = spec.flux.curve_cert.as_str();
    if !cert.trim().is_empty()
        && let Err(e) = crate::flux::curve::Certificate::parse(cert)
    {
        errors.push(err(
            "spec.flux.curveCert",
            format!(
                "is not a CURVE certificate as `flux keygen` writes it: {}",
                e.to_string().trim_start_matches("spec.flux.curveCert: ")
            ),
        ));
    }
    check_placement(mc, &mut errors);
    errors
}

/// `spec.placement` is done by Kueue: it needs a queue, and the pod annotations it sets are
/// its own.
fn check_placement(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
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

/// The field of key `key` in map `map`: `map.key`, or `map["key"]` for a key that would not
/// read as one path segment (empty, or with characters other than letters, digits, `-`, `_`).
fn key_field(map: &str, key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        format!("{map}.{key}")
    } else {
        format!("{map}[{key:?}]")
    }
}

/// Refuses a NUL character in `text` (the renderer's own check,
/// [`check_no_nul`](crate::flux::command::check_no_nul)); whether there was none.
fn no_nul(field: impl Into<String>, text: &str, errors: &mut Vec<FieldError>) -> bool {
    match crate::flux::command::check_no_nul(text) {
        Ok(()) => true,
        Err(message) => {
            errors.push(err(
                field,
                format!(
                    "{message}, which no command line, environment variable or script can carry"
                ),
            ));
            false
        }
    }
}

/// Refuses text the scripts split into words as bash would (without expanding anything) but
/// that does not split: unbalanced quotes ([`split_words`](crate::flux::command::split_words),
/// as the renderer splits it). A NUL is refused first.
fn splits_into_words(field: String, text: &str, errors: &mut Vec<FieldError>) {
    if no_nul(field.clone(), text, errors)
        && let Err(message) = crate::flux::command::split_words(text)
    {
        errors.push(err(field, message));
    }
}

/// The text of a container that reaches a command line, an environment or a script: no NUL
/// anywhere, and the Flux container's `commands.prefix` splits into words (the lead's
/// entrypoint runs `flux start` under those words).
fn check_texts(
    field: &str,
    c: &MiniClusterContainer,
    is_runner: bool,
    errors: &mut Vec<FieldError>,
) {
    let commands = &c.commands;
    for (name, text) in [
        ("command", &c.command),
        ("workingDir", &c.working_dir),
        ("logs", &c.logs),
        ("commands.init", &commands.init),
        ("commands.pre", &commands.pre),
        ("commands.brokerPre", &commands.broker_pre),
        ("commands.workerPre", &commands.worker_pre),
        ("commands.servicePre", &commands.service_pre),
        ("commands.post", &commands.post),
        ("commands.script", &commands.script),
    ] {
        no_nul(format!("{field}.{name}"), text, errors);
    }
    let prefix = format!("{field}.commands.prefix");
    if is_runner {
        splits_into_words(prefix, &commands.prefix, errors);
    } else {
        // Ignored outside the Flux container ([`unsupported`]), but still no NUL.
        no_nul(prefix, &commands.prefix, errors);
    }
    for (name, value) in &c.environment {
        no_nul(
            key_field(&format!("{field}.environment"), name),
            value,
            errors,
        );
    }
}

/// The same for `spec.flux`: `optionFlags` and `submitCommand` split into words, and no NUL
/// in them, in `wrap`, the environment or the flux view's paths.
fn check_flux_texts(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    let flux = &mc.spec.flux;
    splits_into_words("spec.flux.optionFlags".into(), &flux.option_flags, errors);
    splits_into_words(
        "spec.flux.submitCommand".into(),
        &flux.submit_command,
        errors,
    );
    let view = &flux.container;
    for (name, text) in [
        ("wrap", &flux.wrap),
        ("container.mountPath", &view.mount_path),
        ("container.pythonPath", &view.python_path),
        ("container.workingDir", &view.working_dir),
    ] {
        no_nul(format!("spec.flux.{name}"), text, errors);
    }
    for (name, value) in &flux.environment {
        no_nul(key_field("spec.flux.environment", name), value, errors);
    }
}

/// The renderer's own checks, called here so that both agree: a domain the broker addresses
/// can end in, the flat topology a lead-only Service needs, and the names of the Services for
/// containers' ports. Each is reported unless its field already has an error.
fn check_as_the_renderer_does(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    if !mc.spec.network.cluster_domain.is_empty() {
        // Only the spec's domain is checked: the operator's own is not the spec's fault.
        let operator = crate::flux::Context {
            cluster_domain: String::new(),
        };
        if let Err(e) = crate::flux::config::cluster_domain(mc, &operator) {
            push_new(errors, flux_refusal(e));
        }
    }
    if let Err(e) = crate::flux::pod::check_minimal_service(mc) {
        push_new(errors, flux_refusal(e));
    }
    if let Err(e) = crate::render::sidecar_services(mc) {
        push_new(errors, render_refusal(e));
    }
}

/// Adds `error` unless its field already has one (a check reused from the renderer may find
/// again what a check here found first).
fn push_new(errors: &mut Vec<FieldError>, error: FieldError) {
    if !errors.iter().any(|e| e.field == error.field) {
        errors.push(error);
    }
}

/// A refusal of one of the renderer's checks, as a field error.
fn flux_refusal(e: crate::flux::Error) -> FieldError {
    // Not a spec problem; no reused check returns one, but never drop it.
    e.into_spec()
        .unwrap_or_else(|other| err("spec", other.to_string()))
}

/// The same for a check of the render module.
fn render_refusal(e: crate::render::Error) -> FieldError {
    e.into_spec()
        .unwrap_or_else(|other| err("spec", other.to_string()))
}

/// Fields of a MiniCluster manifest (as JSON) that the CRD's schema does not declare, by
/// path (`spec.containers[0].existingVolumes`): what the API server's strict field
/// validation (kubectl's default) refuses. `metadata` is the API server's, not checked here.
pub fn unknown_fields(manifest: &serde_json::Value) -> Vec<String> {
    use kube::CustomResourceExt;
    let crd = serde_json::to_value(MiniCluster::crd()).unwrap_or_default();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut found = Vec::new();
    if let Some(fields) = manifest.as_object() {
        for (k, v) in fields {
            match k.as_str() {
                "apiVersion" | "kind" | "metadata" => {}
                _ => unknown_in(&schema["properties"][k], v, k, &mut found, schema),
            }
        }
    }
    found
}

fn unknown_in(
    schema: &serde_json::Value,
    value: &serde_json::Value,
    path: &str,
    found: &mut Vec<String>,
    parent: &serde_json::Value,
) {
    if schema.is_null() {
        if parent["x-kubernetes-preserve-unknown-fields"] != true {
            found.push(path.to_string());
        }
        return;
    }
    if schema["x-kubernetes-preserve-unknown-fields"] == true {
        return;
    }
    match value {
        serde_json::Value::Object(fields) => {
            let map = &schema["additionalProperties"];
            for (k, v) in fields {
                if map.is_object() {
                    unknown_in(map, v, &format!("{path}[{k}]"), found, schema);
                } else {
                    unknown_in(
                        &schema["properties"][k],
                        v,
                        &format!("{path}.{k}"),
                        found,
                        schema,
                    );
                }
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                unknown_in(&schema["items"], v, &format!("{path}[{i}]"), found, schema);
            }
        }
        _ => {}
    }
}

/// Whether the Flux container is unnamed and would get `name`.
fn unnamed_runner_with(mc: &MiniCluster, name: &str) -> bool {
    let containers = &mc.spec.containers;
    name == crate::render::default_container_name(mc)
        && containers
            .iter()
            .any(|c| (c.run_flux || containers.len() == 1) && c.name.is_empty())
}

/// A garde path (`network.headless_name`) in the API's spelling (`network.headlessName`):
/// snake_case field names become camelCase; indexes (in brackets) stay, and so do the keys of
/// the maps garde looks into (`volumes.<name>`, spelled as [`key_field`] does).
pub fn api_path(path: &str) -> String {
    /// Maps garde validates entry by entry: the segment after one is a key.
    const MAPS: &[&str] = &["volumes"];
    let mut segments = Vec::new();
    let mut segment = String::new();
    let mut depth = 0usize;
    for ch in path.chars() {
        match ch {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '.' if depth == 0 => {
                segments.push(std::mem::take(&mut segment));
                continue;
            }
            _ => {}
        }
        segment.push(ch);
    }
    segments.push(segment);
    let mut out = String::with_capacity(path.len());
    let mut key_next = false;
    for (i, segment) in segments.iter().enumerate() {
        if key_next {
            out = key_field(&out, segment);
            key_next = false;
            continue;
        }
        if i > 0 {
            out.push('.');
        }
        out.push_str(&camel_case(segment));
        key_next = MAPS.contains(&segment.as_str());
    }
    out
}

/// `headless_name` as `headlessName`; what is in brackets stays.
fn camel_case(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    let mut depth = 0usize;
    let mut upper = false;
    for ch in segment.chars() {
        match ch {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '_' if depth == 0 => {
                upper = true;
                continue;
            }
            _ => {}
        }
        if upper {
            out.extend(ch.to_uppercase());
            upper = false;
        } else {
            out.push(ch);
        }
    }
    out
}

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
    for (vname, v) in &c.volumes {
        let vfield = key_field(&format!("{field}.volumes"), vname);
        if !super::is_dns_label(vname) {
            errors.push(err(vfield.clone(), "volume names must be DNS labels"));
        }
        if crate::render::flux_pod::RESERVED_VOLUMES.contains(&vname.as_str()) {
            errors.push(err(
                vfield.clone(),
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
                vfield.clone(),
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
}

/// A container mounts each path once: the API server refuses a pod whose container has two
/// volume mounts at one path, and only when the Job creates the pod, long after the
/// MiniCluster was accepted. So two of the container's `volumes` at one path (an emptyDir
/// without `path` mounts at `/dev/shm`), or one at a path where the operator mounts its own
/// volume into this container (`operator`), are refused here, naming the volume's field.
fn check_mount_paths(
    field: &str,
    c: &MiniClusterContainer,
    operator: &[k8s_openapi::api::core::v1::VolumeMount],
    errors: &mut Vec<FieldError>,
) {
    fn clean(path: &str) -> &str {
        match path.trim_end_matches('/') {
            "" => path,
            trimmed => trimmed,
        }
    }
    // Path -> the user volume mounted there (`None`: one of the operator's).
    let mut seen: BTreeMap<String, Option<&str>> = operator
        .iter()
        .map(|m| (clean(&m.mount_path).to_string(), None))
        .collect();
    for (vname, v) in &c.volumes {
        let path = crate::render::mount_path(v);
        if path.is_empty() {
            continue; // refused above: a volume needs a path
        }
        let key = clean(&path).to_string();
        match seen.get(&key) {
            None => {
                seen.insert(key, Some(vname));
            }
            Some(None) => errors.push(err(
                format!("{}.path", key_field(&format!("{field}.volumes"), vname)),
                format!(
                    "{path:?} is where the operator mounts its own volume in this container (the broker config, certificate, socket or flux view); pick another path"
                ),
            )),
            Some(Some(other)) => errors.push(err(
                format!("{}.path", key_field(&format!("{field}.volumes"), vname)),
                format!(
                    "{path:?} is also where volume {other} is mounted (an emptyDir without path mounts at {}); a container cannot mount two volumes at one path",
                    crate::render::DEFAULT_EMPTY_DIR_PATH
                ),
            )),
        }
    }
}

/// Length of the longest pod name JobSet will create for a MiniCluster called `name` that can
/// grow to `max_size` brokers: `<name>-workers-0-<max_size-2>` plus the Job controller's suffix.
pub fn longest_pod_name(name: &str, max_size: i32) -> usize {
    let last_index = max_size.saturating_sub(2).max(0);
    name.len() + 1 + WORKERS_JOB.len() + 3 + last_index.to_string().len() + POD_SUFFIX_LEN
}

/// Fields accepted for compatibility with the Go operator but not acted on here, with why.
pub fn unsupported(mc: &MiniCluster) -> Vec<FieldError> {
    let flux = &mc.spec.flux;
    let mut out = Vec::new();
    if flux.bursting.lead_broker.is_some()
        || !flux.bursting.hostlist.is_empty()
        || !flux.bursting.clusters.is_empty()
    {
        out.push(err(
            "spec.flux.bursting",
            "bursting to external clusters is not supported; the cluster runs without it",
        ));
    }
    if !flux.munge_secret.is_empty() {
        out.push(err(
            "spec.flux.mungeSecret",
            "munge keys are only used for bursting, which is not supported",
        ));
    }
    for sidecar in crate::flux::sidecars(mc) {
        let (crate::flux::Sidecar::Container(_), Some(c)) = (sidecar, sidecar.spec(mc)) else {
            continue;
        };
        for (name, text) in [
            ("pre", &c.commands.pre),
            ("brokerPre", &c.commands.broker_pre),
            ("workerPre", &c.commands.worker_pre),
            ("prefix", &c.commands.prefix),
            ("script", &c.commands.script),
        ] {
            if !text.trim().is_empty() {
                out.push(err(
                    format!("{}.commands.{name}", sidecar.field()),
                    "ignored: only the Flux container runs it; a container that does not run Flux runs commands.init, servicePre, its command and post (as in the Go operator)",
                ));
            }
        }
    }
    if !flux.arch.is_empty() {
        out.push(err(
            "spec.flux.arch",
            "ignored: the flux view image decides the architecture",
        ));
    }
    out
}
