//! What the API server cannot check: run by the operator before it creates anything.
//!
//! Errors name the field (`spec.containers[0].volumes.data.path`) and become an
//! `InvalidSpec` condition plus a Warning Event. Fields that are accepted for compatibility
//! but not acted on are listed by [`unsupported()`] and reported as `Unsupported`.
//!
//! One concern per file: [`spec`] (the schema's own rules, sizes, names, archive, placement,
//! Flux's files), [`containers`] (which runs Flux, names, volumes, mounts), [`texts`] (what
//! reaches a command line or a script), [`network`] (domain, minimal Service, Service names).

mod containers;
mod network;
mod spec;
mod texts;
mod unsupported;

pub use unsupported::unsupported;

use crate::api::MiniCluster;
use crate::api::validation::FieldError;
use crate::model::words::{check_no_nul, split_words};

/// All errors in the MiniCluster's spec that the schema cannot express. Empty when valid.
pub fn validate(mc: &MiniCluster) -> Vec<FieldError> {
    let mut errors = Vec::new();
    spec::schema(mc, &mut errors);
    spec::archive_path(mc, &mut errors);
    if mc.has_archive() {
        spec::archive_volume(mc, &mut errors);
    }
    spec::sizes(mc, &mut errors);
    spec::name(mc, &mut errors);
    spec::labels(mc, &mut errors);
    containers::check(mc, &mut errors);
    containers::tasks_fit(mc, &mut errors);
    texts::check_flux_texts(mc, &mut errors);
    texts::programs_fit(mc, &mut errors);
    network::check(mc, &mut errors);
    spec::flux_files(mc, &mut errors);
    spec::placement(mc, &mut errors);
    errors
}

fn err(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError::new(field, message)
}

/// Adds `error` unless its field already has one (a check the renderer relies on may find
/// again what an earlier check found first).
fn push_new(errors: &mut Vec<FieldError>, error: FieldError) {
    if !errors.iter().any(|e| e.field == error.field) {
        errors.push(error);
    }
}

/// Refuses a NUL character in `text` ([`check_no_nul`]); whether there was none.
fn no_nul(field: impl Into<String>, text: &str, errors: &mut Vec<FieldError>) -> bool {
    match check_no_nul(text) {
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
/// that does not split: unbalanced quotes ([`split_words`], as the renderer splits it). A NUL
/// is refused first.
fn splits_into_words(field: String, text: &str, errors: &mut Vec<FieldError>) {
    if no_nul(field.clone(), text, errors)
        && let Err(message) = split_words(text)
    {
        errors.push(err(field, message));
    }
}
