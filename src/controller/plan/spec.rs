//! The spec decider: what only the operator can check (the spec resolved, the certificate's
//! keys, the rendered objects' size). A spec refused here creates nothing.

use super::{Error, Inputs, certificate};
use crate::model::Cluster;
use crate::render::{self, Desired};

/// What the spec decider decides.
#[derive(Debug)]
pub(super) enum Verdict<'a> {
    /// The resolved cluster and its desired objects.
    Renders(&'a Cluster<'a>, Box<Desired>),
    /// Why the spec is refused: `InvalidSpec`'s message, naming the fields.
    Refused(String),
}

/// Whether the spec renders. `Err`: the operator's fault, never the spec's (retried).
pub(super) fn decide<'a>(input: &Inputs<'a>) -> Result<Verdict<'a>, Error> {
    let cluster = match input.spec {
        Ok(cluster) => cluster,
        Err(errors) => return Ok(Verdict::Refused(super::join(errors))),
    };
    // A certificate whose keys do not belong together: refused before anything is made (its
    // Secret is the first object a new cluster gets).
    if let Some(e) = certificate::refused(input) {
        return Ok(Verdict::Refused(e.to_string()));
    }
    let desired = render::desired(cluster)?;
    Ok(match render::too_large(&desired) {
        Some(e) => Verdict::Refused(e.to_string()),
        None => Verdict::Renders(cluster, Box::new(desired)),
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Mc, Seen};
    use super::*;
    use crate::model::certificate::Certificate;

    #[test]
    fn a_spec_is_refused_naming_the_field_or_rendered() {
        let good = Certificate::generate("m").unwrap();
        let other = Certificate::generate("m").unwrap();
        let cert = |text: String| {
            let mut mc = Mc::new(2);
            mc.0.spec.flux.curve_cert = text.into();
            mc
        };
        // (what it proves, the cluster, the refusal's start: None when it renders)
        let cases = [
            ("a valid spec renders", Mc::new(2), None),
            (
                "validation names the field",
                Mc::new(2).bad_env(),
                Some("spec.containers[0].environment"),
            ),
            (
                "a certificate's keys that do not belong together",
                cert(
                    good.to_text()
                        .replace(good.public_key(), other.public_key()),
                ),
                Some("spec.flux.curveCert: "),
            ),
            ("a good certificate", cert(good.to_text()), None),
        ];
        for (what, mc, refused) in cases {
            let seen = Seen::nothing(&mc);
            let observed = seen.observed.clone();
            let old = Default::default();
            let spec = seen.resolve();
            match (
                decide(&seen.inputs(&spec, &observed, &old)).unwrap(),
                refused,
            ) {
                (Verdict::Renders(..), None) => {}
                (Verdict::Refused(message), Some(start)) => {
                    assert!(message.starts_with(start), "{what}: {message}");
                }
                (got, _) => panic!("{what}: {got:?}"),
            }
        }
    }
}
