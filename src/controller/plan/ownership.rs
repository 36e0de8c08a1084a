//! The ownership decider: an object of one of the MiniCluster's names that it does not own
//! is never taken over. Someone else's holds the cluster (`Blocked`); one being deleted (a
//! MiniCluster of the same name just went) is waited for.

use super::super::owned::controlled_by;
use super::Inputs;
use crate::controller::observe::Presence;
use crate::render;

/// Whether the plan may go on.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Every object of the cluster's names is its own, or absent.
    Clear,
    /// One is still being deleted: wait, changing nothing.
    Wait,
    /// One is someone else's: "Kind name (why it matters)".
    Foreign(String),
}

/// Decide whose the objects of the cluster's names are.
pub(super) fn decide(input: &Inputs<'_>) -> Verdict {
    let mc = input.mc;
    let observed = input.observed;
    let jobset = observed.jobset.as_deref();
    if let Some(js) = jobset
        && !controlled_by(js, mc)
    {
        if js.metadata.deletion_timestamp.is_some() {
            return Verdict::Wait;
        }
        return Verdict::Foreign(format!("JobSet {}", mc.name()));
    }
    match observed.secret {
        Presence::Terminating => return Verdict::Wait,
        Presence::Foreign => {
            return Verdict::Foreign(format!("Secret {}", render::curve_secret_name(mc)));
        }
        Presence::Absent | Presence::Owned => {}
    }
    // The pods' subdomain, before the JobSet that takes it is made (from the watch of all
    // Services: no lookup).
    if jobset.is_none() && input.old.completion_time.is_none() {
        match observed.subdomain {
            Presence::Terminating => return Verdict::Wait,
            Presence::Foreign => {
                return Verdict::Foreign(format!(
                    "Service {} (the pods' subdomain; spec.network.headlessName can name another)",
                    mc.subdomain()
                ));
            }
            Presence::Absent | Presence::Owned => {}
        }
    }
    Verdict::Clear
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::super::tests::{Mc, Seen, now};
    use super::*;

    #[test]
    fn objects_of_its_names_that_are_someone_elses_are_never_taken_over() {
        let subdomain =
            "Service m (the pods' subdomain; spec.network.headlessName can name another)";
        let foreign = |s: &str| Verdict::Foreign(s.to_string());
        // (what it proves, what the watches hold, the verdict)
        let cases = [
            (
                "nothing there yet",
                Seen::nothing(&Mc::new(2)),
                Verdict::Clear,
            ),
            (
                "everything its own",
                Seen::everything(&Mc::new(2).running(), 2),
                Verdict::Clear,
            ),
            (
                "someone else's JobSet",
                Seen::everything(&Mc::new(2), 0).jobset(|js| js.metadata.owner_references = None),
                foreign("JobSet m"),
            ),
            (
                "someone else's JobSet being deleted: waited for",
                Seen::everything(&Mc::new(2), 0).jobset(|js| {
                    js.metadata.owner_references = None;
                    js.metadata.deletion_timestamp = Some(Time(now()));
                }),
                Verdict::Wait,
            ),
            (
                "someone else's Secret",
                Seen::nothing(&Mc::new(2)).secret(Presence::Foreign),
                foreign("Secret m-curve"),
            ),
            (
                "a Secret being deleted",
                Seen::nothing(&Mc::new(2)).secret(Presence::Terminating),
                Verdict::Wait,
            ),
            (
                "someone else's Service named as the pods' subdomain",
                Seen::nothing(&Mc::new(2)).subdomain(Presence::Foreign),
                foreign(subdomain),
            ),
            (
                "that Service being deleted",
                Seen::nothing(&Mc::new(2)).subdomain(Presence::Terminating),
                Verdict::Wait,
            ),
            (
                "the subdomain is looked at only before the JobSet is made",
                Seen::everything(&Mc::new(2).running(), 2).subdomain(Presence::Foreign),
                Verdict::Clear,
            ),
        ];
        for (what, seen, want) in cases {
            let old = seen.mc.status.clone().unwrap_or_default();
            let spec = seen.resolve();
            assert_eq!(
                decide(&seen.inputs(&spec, &seen.observed, &old)),
                want,
                "{what}"
            );
        }
    }
}
