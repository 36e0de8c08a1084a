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
        let vfield = key_field(&format!("{field}.environment"), name);
        no_nul(vfield.clone(), value, errors);
        script_safe_variable(vfield, name, Some(value), errors);
    }
    for name in c.secrets.keys() {
        script_safe_variable(
            key_field(&format!("{field}.secrets"), name),
            name,
            None,
            errors,
        );
    }
}

/// Variables that change how bash reads and runs the operator's scripts (word splitting,
/// files it sources, options, the trace prompt it expands), the instance's URI, and the
/// operator's own: set from a spec they would turn its entrypoints into something else.
const SCRIPT_VARIABLES: &[&str] = &[
    "IFS",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "CDPATH",
    "GLOBIGNORE",
    "PS4",
    "BASH_XTRACEFD",
    "POSIXLY_CORRECT",
    "FLUX_URI",
];

/// Refuses an environment variable `name` the scripts depend on ([`SCRIPT_VARIABLES`],
/// `FLUX_OPERATOR_*`), and a `PATH` (`value`, unknown from a Secret) without `/usr/bin` or
/// `/bin`, where the entrypoints find `mkdir`, `cp` and the like. Any other `PATH` is the
/// user's to set.
fn script_safe_variable(
    field: String,
    name: &str,
    value: Option<&str>,
    errors: &mut Vec<FieldError>,
) {
    if SCRIPT_VARIABLES.contains(&name) || name.starts_with("FLUX_OPERATOR_") {
        errors.push(super::err(
            field,
            format!(
                "{name} is not for a MiniCluster to set: the operator's entrypoints depend on it (shell options, word splitting, the instance's URI or the operator's own variables)"
            ),
        ));
    } else if name == "PATH"
        && value.is_some_and(|v| !v.split(':').any(|d| matches!(d, "/usr/bin" | "/bin")))
    {
        errors.push(super::err(
            field,
            "a PATH must keep /usr/bin or /bin: the operator's entrypoints run mkdir, cp and the like from there",
        ));
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
        let field = key_field("spec.flux.environment", name);
        no_nul(field.clone(), value, errors);
        script_safe_variable(field, name, Some(value), errors);
    }
}

/// The programs of the whole spec fit [`MAX_PROGRAMS`](crate::api::bounds::MAX_PROGRAMS)
/// (the CEL rule the API server runs; `render` reads a file the API server never saw).
pub(super) fn programs_fit(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    use crate::api::bounds::{MAX_PROGRAMS, programs_size};
    let size = programs_size(&mc.spec);
    if size > MAX_PROGRAMS {
        errors.push(super::err(
            "spec",
            format!(
                "the commands, hooks, scripts and broker config are {size} characters together, more than {MAX_PROGRAMS}: put longer programs in a ConfigMap volume"
            ),
        ));
    }
}
