//! The archive decider: one archive, one cluster at a time. Two MiniClusters that save to and
//! restore from one place ([`crate::model::archive::place`]) would both resume the same jobs,
//! and the last save would win. The one that holds the archive goes on; a new cluster that
//! finds it held makes nothing and says why (`Blocked`, `ArchiveInUse`) until the holder
//! finishes or goes.

use std::sync::Arc;

use super::{Inputs, Lifecycle};
use crate::api::{MiniCluster, condition};

/// Another MiniCluster of the namespace that holds this one's archive, if one does.
///
/// Looked at only before this cluster's JobSet is made: one that already runs keeps going.
/// A sharer holds the archive if it has not finished and either has made its JobSet (it
/// runs, is suspended or is being deleted, when its lead saves) or was created first and is
/// not held itself (so of two new ones the older goes, and a broken older one holds nothing).
pub(super) fn holder<'a>(input: &Inputs<'a>, life: &Lifecycle<'_>) -> Option<&'a MiniCluster> {
    if life.jobset.is_some() || life.made_before || input.old.completion_time.is_some() {
        return None;
    }
    let me = input.mc;
    input
        .observed
        .archive_sharers
        .iter()
        .map(Arc::as_ref)
        .filter(|other| other.metadata.uid != me.metadata.uid)
        .find(|other| holds(other, me))
}

/// Whether `other`, on the same archive, holds it against `me`.
fn holds(other: &MiniCluster, me: &MiniCluster) -> bool {
    let Some(status) = other.status.as_ref() else {
        return created(other) < created(me);
    };
    if status.completion_time.is_some() {
        return false;
    }
    if !status.job_set.is_empty() {
        return true;
    }
    let held = status.conditions.iter().any(|c| {
        c.status == "True" && (c.type_ == condition::BLOCKED || c.type_ == condition::INVALID_SPEC)
    });
    !held && created(other) < created(me)
}

/// The order MiniClusters were created in: by creation time, then by name.
fn created(mc: &MiniCluster) -> (Option<jiff::Timestamp>, &str) {
    let time = mc.metadata.creation_timestamp.as_ref().map(|t| t.0);
    (time, mc.metadata.name.as_deref().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::super::status::Conditions;
    use super::super::tests::{Mc, Seen, now};
    use super::*;
    use crate::api::reason;

    /// Another MiniCluster `other` on the same archive, created `age` seconds before `m`
    /// (negative: after), with its status as `f` makes it.
    fn sharer(age: i64, f: impl FnOnce(&mut crate::api::MiniClusterStatus)) -> Arc<MiniCluster> {
        let mut other = crate::fixtures::m().uid("uid-other").size(2).build();
        other.metadata.name = Some("other".into());
        other.metadata.creation_timestamp =
            Some(Time(now() - jiff::SignedDuration::from_secs(100 + age)));
        f(other.status.get_or_insert_default());
        Arc::new(other)
    }

    fn mc() -> Mc {
        Mc::new(2)
            .status(|_| {})
            .created_at(now() - jiff::SignedDuration::from_secs(100))
    }

    fn held_by(seen: Seen, sharers: Vec<Arc<MiniCluster>>) -> Option<String> {
        let mut seen = seen;
        seen.observed.archive_sharers = sharers;
        let old = seen.mc.status.clone().unwrap_or_default();
        let spec = seen.resolve();
        let input = seen.inputs(&spec, &seen.observed, &old);
        holder(&input, &Lifecycle::of(&input)).map(|o| o.metadata.name.clone().unwrap_or_default())
    }

    #[test]
    fn the_cluster_that_holds_an_archive_keeps_it_and_a_new_one_waits() {
        let blocked = |s: &mut crate::api::MiniClusterStatus| {
            Conditions::of(&mut s.conditions, None, now()).set(
                condition::BLOCKED,
                true,
                reason::ARCHIVE_IN_USE,
                "x",
            );
        };
        let other = Some("other".to_string());
        // (what it proves, this cluster as the watches hold it, the sharers, the holder)
        let cases = [
            ("alone on its archive", Seen::nothing(&mc()), vec![], None),
            (
                "a running cluster on the same archive holds it",
                Seen::nothing(&mc()),
                vec![sharer(-50, |s| s.job_set = "other".into())],
                other.clone(),
            ),
            (
                "a new one created first holds it, before it made anything",
                Seen::nothing(&mc()),
                vec![sharer(10, |_| {})],
                other.clone(),
            ),
            (
                "of two new ones the one created later waits: not the older",
                Seen::nothing(&mc()),
                vec![sharer(-10, |_| {})],
                None,
            ),
            (
                "a finished cluster holds nothing: its archive is there to restore",
                Seen::nothing(&mc()),
                vec![sharer(10, |s| {
                    s.job_set = "other".into();
                    s.completion_time = Some(Time(now()));
                })],
                None,
            ),
            (
                "an older one held itself (blocked, or its spec refused) holds nothing",
                Seen::nothing(&mc()),
                vec![sharer(10, blocked)],
                None,
            ),
            (
                "a cluster that made its JobSet keeps going whoever shares",
                Seen::everything(&mc().created(), 0),
                vec![sharer(10, |s| s.job_set = "other".into())],
                None,
            ),
            (
                "itself, as the watch holds it, is no sharer",
                Seen::nothing(&mc()),
                vec![Arc::new(mc().0)],
                None,
            ),
        ];
        for (what, seen, sharers, want) in cases {
            assert_eq!(held_by(seen, sharers), want, "{what}");
        }
    }
}
