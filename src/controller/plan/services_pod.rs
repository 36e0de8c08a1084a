//! The services pod decider (`spec.services`): its Job is made once, like the JobSet (its
//! pod template cannot change), never for a cluster that is over; later only `suspend`
//! follows the spec. Made again after a deletion, it says so.

use kube::ResourceExt;

use super::super::owned::controlled_by;
use super::{Inputs, Lifecycle, Step};
use crate::model::Cluster;
use crate::render::{self, Desired};

/// Create or update the services pod's Job, if the spec has one.
pub(super) fn decide(
    input: &Inputs<'_>,
    cluster: &Cluster<'_>,
    life: &Lifecycle<'_>,
    desired: &Desired,
) -> Option<Step> {
    let mc = cluster.mc;
    let job = desired.services_job.as_ref()?;
    if life.over {
        return None;
    }
    match input.observed.services_job.as_deref() {
        None => {
            // Made after the JobSet: made before only if a status naming the JobSet was
            // written (after the run that made both).
            let recreated = (!input.old.job_set.is_empty()).then(|| {
                format!(
                    "Job {}, of the services pod (spec.services), was deleted; it was made again",
                    job.name_any()
                )
            });
            Some(Step::CreateServicesJob(Box::new(job.clone()), recreated))
        }
        Some(existing)
            if controlled_by(existing, mc)
                && existing.spec.as_ref().and_then(|s| s.suspend) != Some(cluster.jobs.suspend) =>
        {
            Some(Step::UpdateServicesJob(render::services_job_update(
                cluster,
            )))
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::tests::{Mc, Seen, completed, said, with_web_service};
    use super::*;

    #[test]
    fn the_services_job_is_made_once_follows_suspend_and_made_again_says_so() {
        let running = with_web_service(Mc::new(2)).running();
        let with_job = |seen: Seen, suspend: Option<bool>, owned: bool| {
            let mut seen = seen;
            let mut job = render::desired(&crate::fixtures::cluster(&seen.mc))
                .unwrap()
                .services_job
                .unwrap();
            job.spec.as_mut().unwrap().suspend = suspend;
            job.metadata.owner_references = owned.then(|| vec![super::super::tests::owner()]);
            seen.observed.services_job = Some(Arc::new(job));
            seen
        };
        // (what it proves, what the watches hold, the step)
        let cases = [
            ("no spec.services: none", Seen::nothing(&Mc::new(2)), None),
            (
                "a new cluster: made",
                Seen::nothing(&with_web_service(Mc::new(2))),
                Some("create".to_string()),
            ),
            (
                "there, as asked: nothing",
                with_job(Seen::everything(&running, 2), Some(false), true),
                None,
            ),
            (
                "suspended: follows",
                {
                    let mut seen = with_job(Seen::everything(&running, 2), Some(false), true);
                    seen.mc.spec.suspend = true;
                    seen
                },
                Some("update {\"suspend\":true}".to_string()),
            ),
            (
                "someone else's Job of its name: not touched",
                with_job(Seen::everything(&running, 2), Some(true), false),
                None,
            ),
            (
                "deleted: made again, saying so",
                Seen::everything(&running, 2),
                Some("create again".to_string()),
            ),
            (
                "deleted after the cluster finished: nothing",
                Seen::everything(&running, 0).jobset(completed),
                None,
            ),
        ];
        for (what, seen, want) in cases {
            let old = seen.mc.status.clone().unwrap_or_default();
            let spec = seen.resolve();
            let cluster = spec.as_ref().unwrap();
            let input = seen.inputs(&spec, &seen.observed, &old);
            let desired = render::desired(cluster).unwrap();
            let got = decide(&input, cluster, &Lifecycle::of(&input), &desired).map(|s| match s {
                Step::CreateServicesJob(_, again) => format!("create{}", said(&again)),
                Step::UpdateServicesJob(u) => format!("update {}", u["spec"]),
                other => format!("{other:?}"),
            });
            assert_eq!(got, want, "{what}");
        }
    }
}
