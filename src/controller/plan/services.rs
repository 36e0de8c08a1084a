//! The Services decider: each Service the spec asks for is applied when it is missing or
//! not as last applied (the watch shows the hash it was applied with: no GET). A missing one
//! the cluster had says so when it is made again.

use kube::ResourceExt;

use super::{Inputs, Lifecycle, Step};
use crate::render::{self, Desired};

/// The Services to apply.
pub(super) fn decide(input: &Inputs<'_>, life: &Lifecycle<'_>, desired: &Desired) -> Vec<Step> {
    let mut steps = Vec::new();
    for svc in &desired.network_services {
        let hash = svc.annotations().get(render::APPLIED_ANNOTATION).cloned();
        let current = input
            .observed
            .services
            .iter()
            .find(|s| s.name == svc.name_any());
        if current.is_none_or(|s| s.applied != hash) {
            let recreated = (current.is_none() && life.made_before).then(|| {
                format!(
                    "Service {}, made for this MiniCluster, was deleted; it was made again",
                    svc.name_any()
                )
            });
            steps.push(Step::ApplyService(Box::new(svc.clone()), recreated));
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Mc, Seen, said, with_web_service};
    use super::*;

    #[test]
    fn a_service_is_applied_when_missing_or_changed_and_made_again_says_so() {
        let mc = with_web_service(Mc::new(2)).running();
        // (what it proves, what the watches hold, the steps)
        let cases = [
            (
                "a new cluster",
                Seen::nothing(&with_web_service(Mc::new(2))),
                vec!["apply Service m-web"],
            ),
            ("as applied: nothing", Seen::everything(&mc, 2), vec![]),
            (
                "changed by hand: set back",
                {
                    let mut seen = Seen::everything(&mc, 2);
                    seen.observed.services[0].applied = Some("other".into());
                    seen
                },
                vec!["apply Service m-web"],
            ),
            (
                "deleted: made again, saying so",
                {
                    let mut seen = Seen::everything(&mc, 2);
                    seen.observed.services.clear();
                    seen
                },
                vec!["apply Service m-web again"],
            ),
        ];
        for (what, seen, want) in cases {
            let old = seen.mc.status.clone().unwrap_or_default();
            let spec = seen.resolve();
            let input = seen.inputs(&spec, &seen.observed, &old);
            let desired = render::desired(spec.as_ref().unwrap()).unwrap();
            let got: Vec<String> = decide(&input, &Lifecycle::of(&input), &desired)
                .iter()
                .map(|s| match s {
                    Step::ApplyService(svc, again) => {
                        format!("apply Service {}{}", svc.name_any(), said(again))
                    }
                    other => format!("{other:?}"),
                })
                .collect();
            assert_eq!(got, want, "{what}");
        }
    }
}
