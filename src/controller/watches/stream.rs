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
/// watched object for the process's life).
pub fn reflect_trimmed<K>(
    stream: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
    writer: reflector::store::Writer<K>,
    what: &'static str,
    trim: fn(&mut K),
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    reflect_events(stream, writer, what, trim)
        .filter_map(|event| futures::future::ready(trigger::touched(event).map(Ok)))
}

/// [`reflect_trimmed`], yielding the watch's events themselves (each after the store took
/// it): for what must tell a deletion the API server reported ([`watcher::Event::Delete`])
/// from an object listed while the store is still being filled ([`watcher::Event::InitApply`]:
/// kube-runtime's store swaps a list in only at [`watcher::Event::InitDone`], so until then
/// a listed object is not in the store yet).
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
    let mut listed = 0usize;
    StreamBackoff::new(stream, watch_backoff())
        .modify(move |obj: &mut K| {
            obj.meta_mut().managed_fields = None;
            trim(obj);
        })
        .reflect(writer)
        .filter_map(move |item| {
            let item = match item {
                Ok(event) => {
                    log_listing(what, &event, &mut listed);
                    Some(event)
                }
                Err(error) => {
                    tracing::warn!(watch = what, %error, "watch failed; retrying");
                    None
                }
            };
            futures::future::ready(item)
        })
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
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    watch_trimmed(api, labelled, what, |_| {})
}

/// The MiniClusters' watch: its store (each kept as [`super::trim::trim_minicluster`] leaves
/// it), and its events as the store took them (see [`reflect_events`]; teardown acts on
/// deletions only).
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
            super::trim::trim_minicluster,
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
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
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
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config);
    (reader, reflect_trimmed(stream, writer, what, trim))
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

    #[test]
    fn the_jobs_watch_leaves_out_the_jobsets_jobs() {
        let selector = services_jobs().label_selector.expect("a selector");
        assert_eq!(
            selector,
            "flux-framework.org/minicluster,!jobset.sigs.k8s.io/jobset-name"
        );
    }
}
