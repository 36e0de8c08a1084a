//! What wakes a reconcile, and how soon.
//!
//! A MiniCluster's own change that asks for work is reconciled at once: a new MiniCluster
//! (nothing made for it yet, no status), or a spec its status has not caught up with (a
//! resize, `suspend`). Nothing stands between a new MiniCluster and the creation of its
//! JobSet.
//!
//! Everything else waits until [`DEBOUNCE`] passes without another change for the same
//! MiniCluster: the watches of its objects and pods, and its own status written back. That
//! is what the debounce was added for (issue 12): a cluster's pods coming up, the watch events
//! of the objects one reconcile just made, each would otherwise make a reconcile of its own
//! (and a status write for every broker that becomes ready), where one does.
//!
//! The controller itself runs without a debounce: its requeues (backoff, TTL expiry) come
//! when they are due.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc;
use futures::{Stream, StreamExt, future};
use kube::api::ObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::scheduler::{ScheduleRequest, debounced_scheduler};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use tokio::time::Instant;

use crate::api::{MiniCluster, NAME_LABEL};

/// How long the triggers of an existing MiniCluster wait for quiet (see the module).
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// How soon a MiniCluster's own change is reconciled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// At once: there is work nobody has started on.
    Now,
    /// After [`DEBOUNCE`] of quiet, with whatever else comes in the meantime.
    Debounced,
}

/// How soon this version of a MiniCluster (as its watch delivered it) is reconciled: at once
/// when it is new (no status: nothing was made for it yet) or its spec changed since the
/// status was written (`observedGeneration` behind `generation`); debounced otherwise (the
/// operator's own status write coming back, a label).
pub fn wake(mc: &MiniCluster) -> Wake {
    let observed = mc.status.as_ref().and_then(|s| s.observed_generation);
    if observed.is_none() || observed != mc.metadata.generation {
        Wake::Now
    } else {
        Wake::Debounced
    }
}

/// The versions of MiniClusters this process's own status writes made, by UID, until the
/// watch brings each back. That echo wakes nothing: the reconcile that wrote the status had
/// decided from everything else, and whatever else changes wakes its own reconcile. One entry
/// a MiniCluster at most (the newest write), gone when its echo comes or the MiniCluster
/// goes ([`OwnWrites::retain`]).
#[derive(Clone, Debug, Default)]
pub struct OwnWrites(Arc<Mutex<HashMap<String, String>>>);

impl OwnWrites {
    /// This process wrote `mc`'s status; the API server stored it as `version`.
    pub fn wrote(&self, mc: &MiniCluster, version: Option<String>) {
        let (Some(uid), Ok(mut writes)) = (mc.uid(), self.0.lock()) else {
            return;
        };
        match version {
            Some(version) => writes.insert(uid, version),
            None => writes.remove(&uid),
        };
    }

    /// Whether `mc`, as its watch delivered it, is this process's own write coming back
    /// (then forgotten: it comes once).
    pub fn echoes(&self, mc: &MiniCluster) -> bool {
        let (Some(uid), Some(version)) = (mc.uid(), mc.resource_version()) else {
            return false;
        };
        let Ok(mut writes) = self.0.lock() else {
            return false;
        };
        let echo = writes.get(&uid) == Some(&version);
        if echo {
            writes.remove(&uid);
        }
        echo
    }

    /// Forget the writes of MiniClusters whose UIDs are not in `live`.
    pub fn retain(&self, live: &HashSet<String>) {
        if let Ok(mut writes) = self.0.lock() {
            writes.retain(|uid, _| live.contains(uid));
        }
    }
}

/// Split the MiniCluster watch: the versions to reconcile at once stay in the returned
/// stream (the controller's own trigger); the others go to the returned receiver, to be
/// debounced with the other triggers, except this process's own status writes coming back
/// ([`OwnWrites`]), which wake nothing.
pub fn split<S>(
    miniclusters: S,
    own: OwnWrites,
) -> (
    impl Stream<Item = Result<MiniCluster, watcher::Error>> + Send + 'static,
    impl Stream<Item = ObjectRef<MiniCluster>> + Send + 'static,
)
where
    S: Stream<Item = Result<MiniCluster, watcher::Error>> + Send + 'static,
{
    let (later, debounced) = mpsc::unbounded();
    let now = miniclusters.filter_map(move |item| {
        let keep = match &item {
            Ok(mc) if wake(mc) == Wake::Debounced => {
                if !own.echoes(mc) {
                    // The receiver lives as long as the controller's triggers do.
                    let _ = later.unbounded_send(ObjectRef::from_obj(mc));
                }
                false
            }
            Ok(mc) => {
                tracing::debug!(
                    minicluster = %mc.name(),
                    namespace = mc.namespace_or_default(),
                    generation = ?mc.metadata.generation,
                    "new or changed MiniCluster: reconciled at once"
                );
                true
            }
            Err(_) => true,
        };
        future::ready(keep.then_some(item))
    });
    (now, debounced)
}

/// `triggers`, each MiniCluster's emitted once [`DEBOUNCE`] (`period`) passed without
/// another trigger for it.
pub fn debounced(
    triggers: impl Stream<Item = ObjectRef<MiniCluster>> + Send + 'static,
    period: Duration,
) -> impl Stream<Item = ObjectRef<MiniCluster>> + Send + 'static {
    debounced_scheduler(
        triggers.map(|message| ScheduleRequest {
            message,
            run_at: Instant::now(),
        }),
        period,
    )
}

/// The MiniCluster an object belongs to by its name label (objects the operator made, and
/// their pods).
pub fn by_label(meta: &ObjectMeta) -> Option<ObjectRef<MiniCluster>> {
    let ns = meta.namespace.as_deref().unwrap_or("default");
    meta.labels
        .as_ref()
        .and_then(|l| l.get(NAME_LABEL))
        .map(|name| ObjectRef::<MiniCluster>::new(name).within(ns))
}

/// The MiniClusters that own an object (its owner references of that kind).
pub fn owners(meta: &ObjectMeta) -> Vec<ObjectRef<MiniCluster>> {
    meta.owner_references
        .iter()
        .flatten()
        .filter_map(|o| ObjectRef::from_owner_ref(meta.namespace.as_deref(), o, ()))
        .collect()
}

/// The watch stream of an owned kind as triggers of its owners (the watches log their own
/// errors; see [`super::index`]).
pub fn of_owned<K: Resource + Send + 'static>(
    stream: impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) -> impl Stream<Item = ObjectRef<MiniCluster>> + Send + 'static {
    stream
        .flat_map(|item| futures::stream::iter(item.map(|o| owners(o.meta())).unwrap_or_default()))
}

/// The watch stream of a labelled kind as triggers of the MiniClusters its labels name.
pub fn of_labelled<K: Resource + Send + 'static>(
    stream: impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) -> impl Stream<Item = ObjectRef<MiniCluster>> + Send + 'static {
    stream.filter_map(|item| future::ready(item.ok().and_then(|o| by_label(o.meta()))))
}

/// The object an event carries: changed, deleted, or listed.
pub fn touched<K>(event: watcher::Event<K>) -> Option<K> {
    match event {
        watcher::Event::Apply(obj) | watcher::Event::Delete(obj) => Some(obj),
        watcher::Event::InitApply(obj) => Some(obj),
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::*;
    use crate::api::MiniClusterStatus;

    fn mc(name: &str, generation: i64, observed: Option<Option<i64>>) -> MiniCluster {
        let mut mc: MiniCluster = serde_norway::from_str(&format!(
            "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {{name: {name}, namespace: ns}}\nspec:\n  containers: [{{image: x}}]\n"
        ))
        .unwrap();
        mc.metadata.generation = Some(generation);
        mc.status = observed.map(|observed_generation| MiniClusterStatus {
            observed_generation,
            ..Default::default()
        });
        mc
    }

    #[test]
    fn only_work_nobody_started_on_skips_the_debounce() {
        // (what the watch delivered, how soon it is reconciled)
        let cases = [
            (
                "a new MiniCluster, no status yet",
                mc("m", 1, None),
                Wake::Now,
            ),
            (
                "a status without observedGeneration (an older operator's)",
                mc("m", 1, Some(None)),
                Wake::Now,
            ),
            (
                "a resize: the spec moved past the status",
                mc("m", 2, Some(Some(1))),
                Wake::Now,
            ),
            (
                "the operator's own status write coming back",
                mc("m", 2, Some(Some(2))),
                Wake::Debounced,
            ),
        ];
        for (what, mc, want) in cases {
            assert_eq!(wake(&mc), want, "{what}");
        }
    }

    #[tokio::test]
    async fn a_new_minicluster_passes_at_once_and_its_own_status_echo_is_debounced() {
        let changes = futures::stream::iter(vec![
            Ok(mc("new", 1, None)),
            Ok(mc("echo", 1, Some(Some(1)))),
            Ok(mc("resized", 3, Some(Some(2)))),
        ]);
        let (now, later) = split(changes, OwnWrites::default());
        let now: Vec<String> = now.map(|r| r.unwrap().name().to_string()).collect().await;
        assert_eq!(now, ["new", "resized"]);
        let later: Vec<String> = later.map(|r| r.name).collect().await;
        assert_eq!(later, ["echo"]);
    }

    #[tokio::test]
    async fn the_operators_own_status_write_coming_back_wakes_nothing() {
        let at = |name: &str, version: &str| {
            let mut m = mc(name, 1, Some(Some(1)));
            m.metadata.uid = Some(format!("{name}-uid"));
            m.metadata.resource_version = Some(version.into());
            m
        };
        let own = OwnWrites::default();
        own.wrote(&at("m", "5"), Some("5".into()));
        own.wrote(&at("other", "5"), Some("5".into()));
        // (what it proves, the version the watch delivers, whether it wakes)
        let cases = [
            (
                "m, a version from before the write: wakes",
                at("m", "4"),
                true,
            ),
            (
                "m, the write itself coming back: nothing",
                at("m", "5"),
                false,
            ),
            ("m, a change after it: wakes", at("m", "6"), true),
            (
                "m, its version again (the write comes back once): wakes",
                at("m", "5"),
                true,
            ),
            (
                "another MiniCluster changed after this process wrote it: wakes",
                at("other", "7"),
                true,
            ),
        ];
        for (what, delivered, wakes) in cases {
            let (now, later) = split(futures::stream::iter([Ok(delivered)]), own.clone());
            assert_eq!(now.count().await, 0, "{what}: debounced, never at once");
            assert_eq!(later.count().await == 1, wakes, "{what}");
        }
    }

    #[tokio::test]
    async fn a_burst_of_triggers_for_one_minicluster_makes_one_reconcile() {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut out = Box::pin(debounced(rx, Duration::from_millis(50)));
        let a = ObjectRef::<MiniCluster>::new("a").within("ns");
        let b = ObjectRef::<MiniCluster>::new("b").within("ns");
        for _ in 0..20 {
            tx.unbounded_send(a.clone()).unwrap();
        }
        tx.unbounded_send(b.clone()).unwrap();
        tx.unbounded_send(a.clone()).unwrap();
        let mut got: Vec<String> = tokio::time::timeout(
            Duration::from_secs(10),
            out.as_mut().take(2).map(|r| r.name).collect::<Vec<_>>(),
        )
        .await
        .expect("both emitted after the debounce");
        got.sort();
        assert_eq!(got, ["a", "b"]);
        // Nothing more: the burst made one each. (The input is still open: a scheduler
        // whose input ends drops what it holds.)
        let more = tokio::time::timeout(Duration::from_millis(200), out.next()).await;
        assert!(more.is_err(), "{more:?}");
        drop(tx);
    }

    #[test]
    fn triggers_name_the_minicluster_by_owner_reference_or_label() {
        let owned: ObjectMeta = serde_json::from_value(serde_json::json!({
            "name": "m", "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster", "name": "m", "uid": "u", "controller": true},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "v"}
            ]
        }))
        .unwrap();
        let names: Vec<String> = owners(&owned).into_iter().map(|r| r.name).collect();
        assert_eq!(names, ["m"]);
        let labelled: ObjectMeta = serde_json::from_value(serde_json::json!({
            "name": "m-0", "namespace": "ns", "labels": {NAME_LABEL: "m"}
        }))
        .unwrap();
        let r = by_label(&labelled).unwrap();
        assert_eq!((r.name.as_str(), r.namespace.as_deref()), ("m", Some("ns")));
        assert!(by_label(&ObjectMeta::default()).is_none());
    }
}
