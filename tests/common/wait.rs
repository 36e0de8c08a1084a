//! Bounded waits: poll a check until it holds; after a timeout, fail naming what was awaited
//! and the last thing seen.

use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use kube::api::{Api, ListParams};
use serde_json::Value;

/// How often the wait helpers look again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Poll `check` every [`POLL_INTERVAL`] until it returns `Ok(Some(value))`, and
/// return that value. Errors from `check` are retried (and reported if the time
/// runs out); after `timeout` this fails, naming `what` and the last error.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    wait_for_every(what, timeout, POLL_INTERVAL, check).await
}

/// [`wait_for`], looking every `interval` (the side-by-side bench times some of its waits,
/// at 100 ms).
pub async fn wait_for_every<T, F, Fut>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut check: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let start = Instant::now();
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if start.elapsed() >= timeout {
            let mut msg = format!("timed out after {timeout:?} waiting for {what}");
            if let Some(e) = last_error {
                msg.push_str(&format!(" (last error: {e:#})"));
            }
            return Err(anyhow!(msg));
        }
        tokio::time::sleep(interval).await;
    }
}

/// Wait until `api` has no object `name` (deleted from the API, not only terminating).
pub async fn wait_gone<K>(what: &str, timeout: Duration, api: &Api<K>, name: &str) -> Result<()>
where
    K: Clone + serde::de::DeserializeOwned + Debug,
{
    wait_for(what, timeout, || async {
        Ok(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await
}

/// Wait until the object `name` exists and satisfies `pred`; return it. On
/// timeout the error shows the object's last observed `status`.
pub async fn wait_for_object<K, P>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    pred: P,
) -> Result<K>
where
    K: Clone + Debug + serde::de::DeserializeOwned + serde::Serialize,
    P: Fn(&K) -> bool,
{
    let start = Instant::now();
    let mut last: Option<K> = None;
    let mut last_error = None;
    loop {
        match api.get_opt(name).await {
            Ok(Some(obj)) if pred(&obj) => return Ok(obj),
            Ok(obj) => last = obj.or(last),
            Err(e) => last_error = Some(e),
        }
        if start.elapsed() >= timeout {
            let status = last
                .and_then(|o| serde_json::to_value(o).ok())
                .map(|v| v.get("status").cloned().unwrap_or(Value::Null));
            let mut msg = format!("timed out after {timeout:?} waiting for {what}");
            match status {
                Some(s) => msg.push_str(&format!("; last status of {name}: {s}")),
                None => msg.push_str(&format!("; {name} was never found")),
            }
            if let Some(e) = last_error {
                msg.push_str(&format!(" (last error: {e})"));
            }
            bail!(msg);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Wait until `api` lists at least `count` objects with `labels` satisfying
/// `pred`; return all that satisfy it.
pub async fn wait_for_list<K, P>(
    api: &Api<K>,
    labels: &str,
    count: usize,
    what: &str,
    timeout: Duration,
    pred: P,
) -> Result<Vec<K>>
where
    K: Clone + Debug + serde::de::DeserializeOwned,
    P: Fn(&K) -> bool,
{
    let lp = ListParams::default().labels(labels);
    let start = Instant::now();
    let (mut listed, mut matched) = (0, 0);
    let mut last_error = None;
    loop {
        match api.list(&lp).await {
            Ok(list) => {
                listed = list.items.len();
                let items: Vec<K> = list.items.into_iter().filter(|o| pred(o)).collect();
                matched = items.len();
                if matched >= count {
                    return Ok(items);
                }
            }
            Err(e) => last_error = Some(e),
        }
        if start.elapsed() >= timeout {
            let mut msg = format!(
                "timed out after {timeout:?} waiting for {what}: {matched} of {count} matched \
                 ({listed} listed with labels {labels:?})"
            );
            if let Some(e) = last_error {
                msg.push_str(&format!(" (last error: {e})"));
            }
            bail!(msg);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
