//! The ConfigMap decider: the ConfigMap is content-addressed and immutable; a JobSet keeps
//! the one it was created with (so the scripts under a pod never change, also across operator
//! upgrades). A missing one is made again when the spec still renders it, and otherwise
//! leaves the cluster Degraded (a broker pod that restarts cannot start).

use kube::ResourceExt;

use super::{Inputs, Lifecycle, Step};
use crate::render::Desired;

/// What the ConfigMap decider decides.
#[derive(Debug)]
pub(super) struct Decision {
    /// The ConfigMap the pods use: the JobSet's, or (before it) the desired one.
    pub in_use: String,
    /// Create it (again).
    pub step: Option<Step>,
    /// It is gone and cannot be made again: why the cluster is Degraded.
    pub lost: Option<String>,
}

/// Decide the ConfigMap.
pub(super) fn decide(input: &Inputs<'_>, life: &Lifecycle<'_>, desired: &Desired) -> Decision {
    let desired_cm = desired.config_map.name_any();
    let in_use = life
        .jobset
        .and_then(super::config_map_of)
        .unwrap_or_else(|| desired_cm.clone());
    let mut decision = Decision {
        step: None,
        lost: None,
        in_use: in_use.clone(),
    };
    let there = input.observed.config_maps.iter().any(|c| c.name == in_use);
    if there || life.over {
        return decision;
    }
    if in_use == desired_cm {
        let recreated = life.made_before.then(|| {
            format!(
                "ConfigMap {in_use}, with the brokers' config and scripts, was deleted; it was \
                 made again with the same content"
            )
        });
        decision.step = Some(Step::CreateConfigMap(
            Box::new(desired.config_map.clone()),
            recreated,
        ));
    } else {
        decision.lost = Some(format!(
            "ConfigMap {in_use}, with the scripts the brokers started with, was deleted; a \
             broker pod that restarts cannot start"
        ));
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Mc, Seen, completed, said, with_config_map};
    use super::*;
    use crate::render;

    #[test]
    fn the_pods_keep_their_config_map_and_a_lost_one_is_made_again_or_degrades() {
        let mc = Mc::new(2).running();
        let desired = render::desired(&crate::fixtures::cluster(&mc.0))
            .unwrap()
            .config_map
            .name_any();
        // (what it proves, what the watches hold, the ConfigMap in use, the step, lost)
        let cases = [
            (
                "a new cluster: the desired one is made",
                Seen::nothing(&Mc::new(2)),
                desired.clone(),
                Some("create ConfigMap"),
                false,
            ),
            (
                "there: nothing",
                Seen::everything(&mc, 2),
                desired.clone(),
                None,
                false,
            ),
            (
                "deleted, and the spec renders the same: made again, saying so",
                Seen::everything(&mc, 2).config_maps(&[]),
                desired.clone(),
                Some("create ConfigMap again"),
                false,
            ),
            (
                "the JobSet uses another one (an older operator's), deleted: Degraded",
                Seen::everything(&mc, 2)
                    .jobset(|js| with_config_map(js, "m-flux"))
                    .config_maps(&[]),
                "m-flux".to_string(),
                None,
                true,
            ),
            (
                "the JobSet uses another one that is there: kept, nothing new",
                Seen::everything(&mc, 2)
                    .jobset(|js| with_config_map(js, "m-flux"))
                    .config_maps(&["m-flux"]),
                "m-flux".to_string(),
                None,
                false,
            ),
            (
                "deleted after the cluster finished: nothing is made again",
                Seen::everything(&mc, 0).jobset(completed).config_maps(&[]),
                desired.clone(),
                None,
                false,
            ),
        ];
        for (what, seen, in_use, step, lost) in cases {
            let old = seen.mc.status.clone().unwrap_or_default();
            let spec = seen.resolve();
            let input = seen.inputs(&spec, &seen.observed, &old);
            let decision = decide(
                &input,
                &Lifecycle::of(&input),
                &render::desired(spec.as_ref().unwrap()).unwrap(),
            );
            assert_eq!(decision.in_use, in_use, "{what}");
            let got = decision.step.as_ref().map(|s| match s {
                Step::CreateConfigMap(_, again) => format!("create ConfigMap{}", said(again)),
                other => format!("{other:?}"),
            });
            assert_eq!(got.as_deref(), step, "{what}");
            assert_eq!(decision.lost.is_some(), lost, "{what}");
        }
    }
}
