//! The spec decider: what only the operator can check (the spec resolved, the certificate's
//! keys), then whether the spec renders at all. A spec refused here creates nothing.

use super::{Error, Inputs, certificate};
use crate::model::Cluster;
use crate::render::{self, Desired};

/// The resolved cluster and its desired objects, or why the spec is refused (`InvalidSpec`'s
/// message, naming the fields). `Err`: the operator's fault, not the spec's (retried).
pub(super) fn decide<'a>(
    input: &Inputs<'a>,
) -> Result<Result<(&'a Cluster<'a>, Desired), String>, Error> {
    let cluster = match input.spec {
        Ok(cluster) => cluster,
        Err(errors) => return Ok(Err(super::join(errors))),
    };
    // A certificate whose keys do not belong together: refused before anything is made (its
    // Secret is the first object a new cluster gets).
    if let Some(e) = certificate::refused(input) {
        return Ok(Err(e.to_string()));
    }
    match render::desired(cluster) {
        Ok(desired) => Ok(Ok((cluster, desired))),
        Err(e) if e.field().is_some() => Ok(Err(e.to_string())),
        Err(e) => Err(e),
    }
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
                (Ok(_), None) => {}
                (Err(message), Some(start)) => {
                    assert!(message.starts_with(start), "{what}: {message}");
                }
                (got, _) => panic!("{what}: {:?}", got.map(|_| "rendered")),
            }
        }
    }
}
