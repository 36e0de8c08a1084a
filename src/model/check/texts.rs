//! Text that reaches a command line, an environment or a script: no NUL anywhere, and what
//! the scripts split into words splits.

use super::{no_nul, splits_into_words};
use crate::api::validation::{FieldError, key_field};
use crate::api::{MiniCluster, MiniClusterContainer};

/// The text of a container: no NUL anywhere, and the Flux container's `commands.prefix`
/// splits into words (the lead's entrypoint runs `flux start` under those words).
pub(super) fn check_texts(
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
        // Ignored outside the Flux container ([`super::unsupported`]), but still no NUL.
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
pub(super) fn check_flux_texts(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
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
