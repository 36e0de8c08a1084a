//! The cleanup decider: what goes. ConfigMaps no JobSet uses any more (an older operator's,
//! or one made before the JobSet), Services the spec no longer asks for, and with
//! `spec.cleanup` the MiniCluster itself once it finished.

use kube::ResourceExt;

use super::{Inputs, Step};
use crate::api::{MiniClusterStatus, Phase};
use crate::model::Cluster;
use crate::render::Desired;

/// Owned objects nobody uses any more. ConfigMaps go only once a JobSet exists (or is being
/// created), so the one it will use is known: `in_use`.
pub(super) fn unused(
    input: &Inputs<'_>,
    desired: &Desired,
    in_use: &str,
    with_jobset: bool,
) -> Vec<Step> {
    let observed = input.observed;
    let mut steps = Vec::new();
    if with_jobset {
        for cm in &observed.config_maps {
            if cm.name != in_use {
                steps.push(Step::DeleteConfigMap(cm.into()));
            }
        }
    }
    for svc in &observed.services {
        if !desired
            .network_services
            .iter()
            .any(|d| d.name_any() == svc.name)
        {
            steps.push(Step::DeleteService(svc.into()));
        }
    }
    steps
}

/// `spec.cleanup`: delete the MiniCluster once the new status says it finished (after that
/// status is written).
pub(super) fn finished(cluster: &Cluster<'_>, new: &MiniClusterStatus) -> Option<Step> {
    (cluster.mc.spec.cleanup && new.phase.is_some_and(Phase::is_finished))
        .then_some(Step::DeleteMiniCluster)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Mc, Seen};
    use super::*;
    use crate::controller::observe::OwnedObject;
    use crate::render;

    #[test]
    fn what_nobody_uses_goes_pinned_to_the_uid_seen_and_a_finished_cluster_with_cleanup_goes_too() {
        let mc = Mc::new(2).running();
        let desired = render::desired(&crate::fixtures::cluster(&mc.0)).unwrap();
        let in_use = desired.config_map.name_any();
        let stray = || OwnedObject {
            name: "m-old".into(),
            uid: Some("uid-stray".into()),
            applied: None,
        };
        // (what it proves, what the watches hold, with a JobSet, the steps)
        let cases = [
            ("everything in use", Seen::everything(&mc, 2), true, vec![]),
            (
                "a ConfigMap no JobSet uses",
                Seen::everything(&mc, 2).config_maps(&[&in_use, "m-flux"]),
                true,
                vec!["DeleteConfigMap(Doomed { name: \"m-flux\", uid: Some(\"uid-m-flux\") })"],
            ),
            (
                "before a JobSet: not yet (which one it will use is not known)",
                Seen::everything(&mc, 2).config_maps(&[&in_use, "m-flux"]),
                false,
                vec![],
            ),
            (
                "a Service the spec does not ask for",
                {
                    let mut seen = Seen::everything(&mc, 2);
                    seen.observed.services.push(stray());
                    seen
                },
                true,
                vec!["DeleteService(Doomed { name: \"m-old\", uid: Some(\"uid-stray\") })"],
            ),
        ];
        for (what, seen, with_jobset, want) in cases {
            let old = seen.mc.status.clone().unwrap_or_default();
            let spec = seen.resolve();
            let input = seen.inputs(&spec, &seen.observed, &old);
            let got: Vec<String> = unused(&input, &desired, &in_use, with_jobset)
                .iter()
                .map(|s| format!("{s:?}"))
                .collect();
            assert_eq!(got, want, "{what}");
        }

        // (what it proves, spec.cleanup, the new phase, deleted)
        let cases = [
            ("finished, cleanup", true, Phase::Succeeded, true),
            ("failed, cleanup", true, Phase::Failed, true),
            ("running, cleanup", true, Phase::Running, false),
            ("finished, no cleanup", false, Phase::Succeeded, false),
        ];
        for (what, cleanup, phase, want) in cases {
            let mut seen = Seen::nothing(&Mc::new(2));
            seen.mc.spec.cleanup = cleanup;
            let new = MiniClusterStatus {
                phase: Some(phase),
                ..Default::default()
            };
            let got = finished(seen.resolve().as_ref().unwrap(), &new);
            assert_eq!(got.is_some(), want, "{what}");
        }
    }
}
