//! The certificate decider: the CURVE Secret is made once; a generated one lost under a
//! running cluster is not replaced (brokers started with a new keypair could not join the
//! others) and holds a change that would start new pods; a certificate from the spec whose
//! keys do not belong together refuses the spec.

use super::{Inputs, Lifecycle, Resolved, Step};
use crate::api::validation::FieldError;
use crate::controller::observe::Presence;
use crate::model::Cluster;
use crate::model::certificate::Certificate;
use crate::render;

/// What the certificate decider decides.
#[derive(Debug, Default)]
pub(super) struct Decision {
    /// Create the Secret.
    pub step: Option<Step>,
    /// The Secret's name for the status (empty until it is made).
    pub curve_secret: String,
    /// The generated certificate's Secret is gone under a running cluster: why the cluster
    /// is Degraded. New pods could not start, so a resize or suspend change is held.
    pub lost: Option<String>,
}

/// `spec.flux.curveCert` refused (its keys do not belong together): `InvalidSpec`, before
/// anything is made.
pub(super) fn refused<'a>(input: &'a Inputs<'_>) -> Option<&'a FieldError> {
    input.certificate_refused.as_ref()
}

/// Decide the certificate Secret.
pub(super) fn decide(input: &Inputs<'_>, cluster: &Cluster<'_>, life: &Lifecycle<'_>) -> Decision {
    let name = render::curve_secret_name(cluster.mc);
    let mut decision = Decision {
        curve_secret: input.old.curve_secret.clone(),
        ..Decision::default()
    };
    match input.observed.secret {
        Presence::Owned => decision.curve_secret = name,
        _ if life.over => {}
        _ if life.live_jobset().is_some() && cluster.certificate.is_none() => {
            decision.lost = Some(format!(
                "Secret {name} with the brokers' CURVE certificate was deleted while the \
                 cluster runs; no new keypair is made, because brokers started with one could \
                 not join brokers started with the other: delete and recreate the MiniCluster \
                 to start over"
            ));
        }
        _ => {
            let given = cluster.certificate.clone().map(Box::new);
            let recreated = (!input.old.curve_secret.is_empty()).then(|| {
                format!(
                    "Secret {name}, with the brokers' CURVE certificate, was deleted; it was \
                     made again ({})",
                    if given.is_some() {
                        "from spec.flux.curveCert"
                    } else {
                        "with a new keypair, for a JobSet made from now on"
                    }
                )
            });
            decision.step = Some(Step::CreateSecret(given, recreated));
            decision.curve_secret = name;
        }
    }
    decision
}

/// The certificate a reconcile checks before its plan: the spec's (parsed when the spec was
/// resolved), unless its Secret exists already (then it is not used again).
pub fn to_verify<'a>(spec: &'a Resolved<'a>, secret: Presence) -> Option<&'a Certificate> {
    let cluster = spec.as_ref().ok().filter(|_| secret != Presence::Owned)?;
    cluster.certificate.as_ref()
}

/// `cert` checked with a CURVE handshake: `Some` with the spec's error when its keys do not
/// belong together. The handshake is blocking work through libzmq, so the reconcile makes it
/// off the async threads, before the pure plan, which then refuses the spec as `InvalidSpec`
/// before it creates anything. `Err` only when libzmq itself fails (not the spec's fault:
/// retried).
pub fn verify_certificate(cert: &Certificate) -> Result<Option<FieldError>, crate::flux::Error> {
    Ok((!cert.keys_match()?).then(|| {
        FieldError::new(
            "spec.flux.curveCert",
            "the public key does not belong to the secret key (CURVE handshake failed)",
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Mc, Seen, said};
    use super::*;

    #[test]
    fn the_secret_is_made_once_and_a_lost_generated_one_is_not_replaced() {
        let cert = Certificate::generate("m").unwrap().to_text();
        let given = |mc: Mc| {
            let mut mc = mc;
            mc.0.spec.flux.curve_cert = cert.clone().into();
            mc
        };
        // (what it proves, the cluster and what the watches hold, the step, lost)
        let cases = [
            (
                "a new cluster: made, from a generated keypair",
                Seen::nothing(&Mc::new(2)),
                Some("create Secret (generated)"),
                false,
            ),
            (
                "a new cluster with a certificate of its own: made from it",
                Seen::nothing(&given(Mc::new(2))),
                Some("create Secret (given)"),
                false,
            ),
            (
                "there: nothing",
                Seen::everything(&Mc::new(2).running(), 2),
                None,
                false,
            ),
            (
                "a generated one deleted under a running cluster: lost, not replaced",
                Seen::everything(&Mc::new(2).running(), 2).without_secret(),
                None,
                true,
            ),
            (
                "one from the spec deleted under a running cluster: made again from it",
                Seen::everything(&given(Mc::new(2).running()), 2).without_secret(),
                Some("create Secret (given) again"),
                false,
            ),
            (
                "deleted with the JobSet: made again for the JobSet made again",
                Seen::everything(&Mc::new(2).running(), 2)
                    .without_secret()
                    .without_jobset(),
                Some("create Secret (generated) again"),
                false,
            ),
            (
                "deleted after the cluster finished: nothing is made for it again",
                Seen::everything(&Mc::new(2).running(), 0)
                    .jobset(super::super::tests::completed)
                    .without_secret(),
                None,
                false,
            ),
        ];
        for (what, seen, step, lost) in cases {
            let observed = seen.observed.clone();
            let old = seen.mc.status.clone().unwrap_or_default();
            let spec = seen.resolve();
            let input = seen.inputs(&spec, &observed, &old);
            let decision = decide(&input, spec.as_ref().unwrap(), &Lifecycle::of(&input));
            let got = decision.step.as_ref().map(|s| match s {
                Step::CreateSecret(given, again) => format!(
                    "create Secret ({}){}",
                    if given.is_some() {
                        "given"
                    } else {
                        "generated"
                    },
                    said(again)
                ),
                other => format!("{other:?}"),
            });
            assert_eq!(got.as_deref(), step, "{what}");
            assert_eq!(decision.lost.is_some(), lost, "{what}");
            // Made now, there, or (lost, finished) as the status said.
            assert_eq!(decision.curve_secret, "m-curve", "{what}");
        }
    }
}
