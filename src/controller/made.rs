//! What this process made for a MiniCluster that its watches have not shown yet.
//!
//! Each kind has its own watch, and under load one lags behind another by more than the
//! debounce: the reconcile woken by the Secret's watch event could find the ConfigMap, made
//! a moment later, not yet in its store, and create it again (answered 409, then a GET), or
//! find the JobSet missing while the status names it (a GET). A create that succeeded is
//! remembered here until the watch shows the object (the store is the truth again from then
//! on), or for [`MADE_TTL`] at most: an object deleted before its watch ever showed it is
//! then made again by the usual path (create, 409, a look at whose it is).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;

use super::observe::jobset::ObservedJobSet;
use super::observe::{Observed, OwnedObject, Presence};

/// How long a create is taken for granted while its watch does not show it.
pub const MADE_TTL: Duration = Duration::from_secs(30);

/// One object made.
#[derive(Clone, Debug)]
pub enum Object {
    /// The certificate Secret.
    Secret,
    /// A ConfigMap of this name.
    ConfigMap(String),
    /// A Service, with the hash it was applied with.
    Service(OwnedObject),
    /// The JobSet, as the create returned it.
    JobSet(Arc<ObservedJobSet>),
    /// The services pod's Job, as the create returned it.
    ServicesJob(Arc<Job>),
}

/// What was made for one MiniCluster, and when.
pub type Made = Vec<(Object, Instant)>;

/// Complete `observed` with what was made and its watch does not show yet; forget what the
/// watches show and what is older than [`MADE_TTL`]. Returns how long until the first of the
/// remembered objects expires (`None`: nothing remembered any more): look again by then.
pub fn fill_in(observed: &mut Observed, made: &mut Made, now: Instant) -> Option<Duration> {
    made.retain(|(object, at)| {
        let fresh = now.saturating_duration_since(*at) < MADE_TTL;
        let shown = match object {
            Object::Secret => observed.secret != Presence::Absent,
            Object::ConfigMap(name) => observed.config_maps.iter().any(|c| &c.name == name),
            Object::Service(svc) => observed.services.iter().any(|s| s.name == svc.name),
            Object::JobSet(_) => observed.jobset.is_some(),
            Object::ServicesJob(_) => observed.services_job.is_some(),
        };
        if shown || !fresh {
            return false;
        }
        match object {
            Object::Secret => observed.secret = Presence::Owned,
            Object::ConfigMap(name) => observed.config_maps.push(OwnedObject {
                name: name.clone(),
                uid: None,
                applied: None,
            }),
            Object::Service(svc) => observed.services.push(svc.clone()),
            Object::JobSet(js) => observed.jobset = Some(js.clone()),
            Object::ServicesJob(job) => observed.services_job = Some(job.clone()),
        }
        true
    });
    made.iter()
        .map(|(_, at)| MADE_TTL.saturating_sub(now.saturating_duration_since(*at)))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobset::JobSet;

    fn cm(name: &str) -> OwnedObject {
        OwnedObject {
            name: name.into(),
            uid: None,
            applied: None,
        }
    }

    fn jobset() -> Arc<ObservedJobSet> {
        let mut js = ObservedJobSet::from(&JobSet::new("m", Default::default()));
        js.metadata.uid = Some("made".into());
        Arc::new(js)
    }

    // Long: one table of cases, each a line that reads as a sentence; split, the cases would
    // lose the shared set-up they are read against.
    /// A case of [`what_was_made_counts_until_its_watch_shows_it_or_it_is_too_old`]: what
    /// the watches hold, what was made, when we look, what the reconcile then sees, what is
    /// still remembered.
    struct Case {
        name: &'static str,
        watched: Observed,
        made: Made,
        at: Instant,
        check: fn(&Observed),
        left: usize,
    }

    #[test]
    fn what_was_made_counts_until_its_watch_shows_it_or_it_is_too_old() {
        let t0 = Instant::now();
        for mut case in made_cases(t0) {
            let mut observed = case.watched;
            let wait = fill_in(&mut observed, &mut case.made, case.at);
            (case.check)(&observed);
            assert_eq!(case.made.len(), case.left, "{}: remembered", case.name);
            assert_eq!(wait.is_some(), case.left > 0, "{}: look again", case.name);
        }
    }

    fn made_cases(t0: Instant) -> Vec<Case> {
        let later = |s: u64| t0 + Duration::from_secs(s);
        let watched_js = Arc::new(ObservedJobSet::from(&JobSet::new("m", Default::default())));
        vec![
            Case {
                name: "a ConfigMap made a moment ago, not yet watched, is there",
                watched: Observed::default(),
                made: vec![(Object::ConfigMap("m-flux-1".into()), t0)],
                at: later(1),
                check: |o| assert_eq!(o.config_maps, [cm("m-flux-1")]),
                left: 1,
            },
            Case {
                name: "once the watch shows it, the store is the truth and it is forgotten",
                watched: Observed {
                    config_maps: vec![cm("m-flux-1")],
                    ..Default::default()
                },
                made: vec![(Object::ConfigMap("m-flux-1".into()), t0)],
                at: later(1),
                check: |o| assert_eq!(o.config_maps, [cm("m-flux-1")], "not twice"),
                left: 0,
            },
            Case {
                name: "after MADE_TTL without the watch showing it, it is not taken for granted",
                watched: Observed::default(),
                made: vec![(Object::ConfigMap("m-flux-1".into()), t0)],
                at: later(MADE_TTL.as_secs()),
                check: |o| assert!(o.config_maps.is_empty()),
                left: 0,
            },
            Case {
                name: "the Secret and the JobSet, made, are there before their watches show them",
                watched: Observed::default(),
                made: vec![(Object::Secret, t0), (Object::JobSet(jobset()), t0)],
                at: later(2),
                check: |o| {
                    assert_eq!(o.secret, Presence::Owned);
                    assert_eq!(
                        o.jobset.as_ref().unwrap().metadata.uid.as_deref(),
                        Some("made")
                    );
                },
                left: 2,
            },
            Case {
                name: "a JobSet the watch holds wins over the one the create returned",
                watched: Observed {
                    jobset: Some(watched_js),
                    ..Default::default()
                },
                made: vec![(Object::JobSet(jobset()), t0)],
                at: later(1),
                check: |o| assert_eq!(o.jobset.as_ref().unwrap().metadata.uid, None),
                left: 0,
            },
            Case {
                name: "a Service applied, not yet watched, counts with the hash it was applied with",
                watched: Observed::default(),
                made: vec![(
                    Object::Service(OwnedObject {
                        name: "m".into(),
                        uid: None,
                        applied: Some("h1".into()),
                    }),
                    t0,
                )],
                at: later(1),
                check: |o| assert_eq!(o.services[0].applied.as_deref(), Some("h1")),
                left: 1,
            },
        ]
    }

    #[test]
    fn the_reconcile_looks_again_when_the_oldest_remembered_create_expires() {
        let t0 = Instant::now();
        let mut made = vec![
            (Object::Secret, t0),
            (Object::ConfigMap("c".into()), t0 + Duration::from_secs(5)),
        ];
        let wait = fill_in(
            &mut Observed::default(),
            &mut made,
            t0 + Duration::from_secs(10),
        );
        assert_eq!(wait, Some(MADE_TTL - Duration::from_secs(10)));
    }
}
