//! Fields accepted for compatibility with the Go operator but not acted on.

use super::err;
use crate::api::MiniCluster;
use crate::api::validation::FieldError;
use crate::model::containers::{Companion, companions};

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
    for companion in companions(mc) {
        let (Companion::Container(_), Some(c)) = (companion, companion.spec(mc)) else {
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
                    format!("{}.commands.{name}", companion.field()),
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
