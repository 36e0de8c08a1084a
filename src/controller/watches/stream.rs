//! The watches' streams: each kind its own watch, reflector store and bounded backoff
//! ([`watch_backoff`]: a few seconds at most, reset once the watch is healthy again), so one
//! failing watch (a 410 after an API server outage, a missing RBAC verb) neither stalls the
//! others nor leaves the controller waiting minutes. Errors are logged here and never reach
//! the controller's own trigger backoff, which would delay every watch at once.

use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::utils::{Backoff, ResetTimerBackoff};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::{WatchStreamExt, utils::StreamBackoff};
use serde::de::DeserializeOwned;

use super::kept::Kept;
use crate::api::{MiniCluster, NAME_LABEL};
use crate::controller::trigger;
use crate::render::JOBSET_NAME_LABEL;

/// The backoff of one watch after an error: 0.5 s doubling to 5 s at most,
/// reset after 10 s without errors. A watch that fails for minutes retries every few seconds,
/// so the first reconcile after an outage comes seconds after the API server is back.
pub fn watch_backoff() -> impl Backoff + 'static {
    ResetTimerBackoff::new(
        watcher::ExponentialBackoff::from(
            backon::ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(500))
                .with_max_delay(WATCH_BACKOFF_MAX)
                .with_factor(2.0)
                .without_max_times(),
        ),
        Duration::from_secs(10),
    )
}

/// Longest a watch may wait between two errors, whatever happened before (see
/// [`watch_backoff`]); the tests hold the backoff to it.
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A watch of `K` feeding `writer`, yielding every object it sees change (deletions
/// included), errors logged and retried with [`watch_backoff`]; `trim` is applied to every
/// object before it is stored (drop what the reconciler never reads: the store holds every
/// watched object for the process's life). A new version that, trimmed, is the one stored
/// ([`Kept::same_as`]) is stored and not yielded: it changes nothing a reconcile reads, so it
/// wakes none (a pod's binding to a node, JobSet's counts of ready Jobs).
pub fn reflect_trimmed<K>(
    stream: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
    writer: reflector::store::Writer<K>,
    dyntype: K::DynamicType,
    what: &'static str,
    trim: fn(&mut K),
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Kept + Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let stored = writer.as_reader();
    let changed = move |event: &mut watcher::Event<K>| changes(&stored, &dyntype, event);
    reflect_changes(stream, writer, what, trim, changed).filter_map(|(event, changed)| {
        futures::future::ready(changed.then(|| trigger::touched(event)).flatten().map(Ok))
    })
}

/// [`reflect_trimmed`], yielding the watch's events themselves (each after the store took
/// it), unchanged ones too: for what must tell a deletion the API server reported
/// ([`watcher::Event::Delete`]) from an object listed while the store is still being filled
/// ([`watcher::Event::InitApply`]: kube-runtime's store swaps a list in only at
/// [`watcher::Event::InitDone`], so until then a listed object is not in the store yet).
pub fn reflect_events<K>(
    stream: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
    writer: reflector::store::Writer<K>,
    what: &'static str,
    trim: fn(&mut K),
) -> impl Stream<Item = watcher::Event<K>> + Send + 'static
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    reflect_changes(stream, writer, what, trim, |_| true).map(|(event, _)| event)
}

/// The watch's events, each after the store took it, with what `changed` said of it before
/// the store took it.
fn reflect_changes<K>(
    stream: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
    mut writer: reflector::store::Writer<K>,
    what: &'static str,
    trim: fn(&mut K),
    mut changed: impl FnMut(&mut watcher::Event<K>) -> bool + Send + 'static,
) -> impl Stream<Item = (watcher::Event<K>, bool)> + Send + 'static
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let mut listed = 0usize;
    StreamBackoff::new(stream, watch_backoff())
        .modify(move |obj: &mut K| {
            obj.meta_mut().managed_fields = None;
            trim(obj);
        })
        .filter_map(move |item| {
            let item = match item {
                Ok(mut event) => {
                    log_listing(what, &event, &mut listed);
                    let changed = changed(&mut event);
                    writer.apply_watcher_event(&event);
                    Some((event, changed))
                }
                Err(error) => {
                    tracing::warn!(watch = what, %error, "watch failed; retrying");
                    None
                }
            };
            futures::future::ready(item)
        })
}

/// Whether `event` changes what `stored` holds: a deletion does, and so does a new version
/// of an object (changed or listed again) unless it is the stored one but for its
/// `resourceVersion`; the list's start and end do not.
fn changes<K>(stored: &Store<K>, dyntype: &K::DynamicType, event: &mut watcher::Event<K>) -> bool
where
    K: Kept + Resource + Clone,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    match event {
        watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) => {
            let key = reflector::ObjectRef::from_obj_with(obj, dyntype.clone());
            !stored.get(&key).is_some_and(|old| obj.same_as(&old))
        }
        watcher::Event::Delete(_) => true,
        watcher::Event::Init | watcher::Event::InitDone => false,
    }
}

/// Say when a watch lists what it watches (at the start, and again whenever it has to:
/// a watch that expired or failed with "410 Gone"), and how much it listed.
fn log_listing<K>(what: &'static str, event: &watcher::Event<K>, listed: &mut usize) {
    match event {
        watcher::Event::Init => {
            *listed = 0;
            tracing::debug!(watch = what, "listing");
        }
        watcher::Event::InitApply(_) => *listed += 1,
        watcher::Event::InitDone => tracing::info!(watch = what, objects = *listed, "listed"),
        watcher::Event::Apply(_) | watcher::Event::Delete(_) => {}
    }
}

/// A full-object watch of `api` (labelled objects only when `labelled`).
pub fn watch_objects<K>(
    api: Api<K>,
    labelled: bool,
    what: &'static str,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Kept + Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    watch_trimmed(api, labelled, what, |_| {})
}

/// The MiniClusters' watch: its store (each kept as
/// [`crate::controller::observe::trim::trim_minicluster`] leaves it), and its events as the
/// store took them (see [`reflect_events`]; teardown acts on deletions only).
pub fn watch_events(
    api: Api<MiniCluster>,
) -> (
    Store<MiniCluster>,
    impl Stream<Item = watcher::Event<MiniCluster>> + Send + 'static,
) {
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config(false));
    (
        reader,
        reflect_events(
            stream,
            writer,
            "miniclusters",
            crate::controller::observe::trim::trim_minicluster,
        ),
    )
}

/// [`watch_objects`], storing each object as `trim` leaves it.
pub fn watch_trimmed<K>(
    api: Api<K>,
    labelled: bool,
    what: &'static str,
    trim: fn(&mut K),
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Kept + Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    watch_with(api, config(labelled), what, trim)
}

/// [`watch_trimmed`] with its own watcher configuration (a label selector of its own).
pub fn watch_with<K>(
    api: Api<K>,
    config: watcher::Config,
    what: &'static str,
    trim: fn(&mut K),
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Kept + Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config);
    (
        reader,
        reflect_trimmed(stream, writer, Default::default(), what, trim),
    )
}

/// Jobs the operator makes itself (the services pod's): labelled with its name label and
/// not one of a JobSet's Jobs, which JobSet labels with the JobSet's name and which the
/// operator never reads (they would double the Jobs held, each with a broker pod template).
pub fn services_jobs() -> watcher::Config {
    watcher::Config::default().labels(&format!("{NAME_LABEL},!{JOBSET_NAME_LABEL}"))
}

fn config(labelled: bool) -> watcher::Config {
    let config = watcher::Config::default();
    if labelled {
        config.labels(NAME_LABEL)
    } else {
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use futures::channel::mpsc;

    use crate::controller::observe::pods::BrokerPod;

    fn pod(version: &str, ready: &str, node: Option<&str>) -> BrokerPod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "m-0", "namespace": "ns", "resourceVersion": version,
                         "labels": {NAME_LABEL: "m"}},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": ready}]},
            "nodeName": node,
        }))
        .expect("a pod")
    }

    #[tokio::test]
    async fn only_a_change_of_what_the_store_keeps_wakes_a_reconcile() {
        let (feed, events) = mpsc::unbounded();
        let (store, writer) = reflector::store::<BrokerPod>();
        let woken = reflect_trimmed(events.map(Ok), writer, (), "pods", |_| {});
        futures::pin_mut!(woken);
        // (what it proves, the event, whether it wakes)
        let cases = [
            (
                "listed at the start: wakes",
                watcher::Event::InitApply(pod("1", "False", None)),
                true,
            ),
            ("the list's end: nothing", watcher::Event::InitDone, false),
            (
                "the same pod but its version (a binding the store does not keep): nothing",
                watcher::Event::Apply(pod("2", "False", Some("node-1"))),
                false,
            ),
            (
                "it became Ready: wakes",
                watcher::Event::Apply(pod("3", "True", Some("node-1"))),
                true,
            ),
            ("a new list starts: nothing", watcher::Event::Init, false),
            (
                "listed again after a watch failed, unchanged: nothing",
                watcher::Event::InitApply(pod("4", "True", None)),
                false,
            ),
            (
                "deleted: wakes",
                watcher::Event::Delete(pod("5", "True", None)),
                true,
            ),
            (
                "made again under the same name: wakes",
                watcher::Event::Apply(pod("6", "True", None)),
                true,
            ),
        ];
        for (what, event, wakes) in cases {
            feed.unbounded_send(event).expect("open");
            let next = tokio::time::timeout(Duration::from_millis(100), woken.next()).await;
            assert_eq!(next.is_ok(), wakes, "{what}: {next:?}");
        }
        let kept = store.get(&reflector::ObjectRef::new("m-0").within("ns"));
        assert_eq!(
            kept.and_then(|p| p.metadata.resource_version.clone())
                .as_deref(),
            Some("6"),
            "every version is stored, waking or not"
        );
    }

    #[test]
    fn the_jobs_watch_leaves_out_the_jobsets_jobs() {
        let selector = services_jobs().label_selector.expect("a selector");
        assert_eq!(
            selector,
            "flux-framework.org/minicluster,!jobset.sigs.k8s.io/jobset-name"
        );
    }
}
