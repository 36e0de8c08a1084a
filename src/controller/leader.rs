//! Leader election with a local renew deadline.
//!
//! The lease (kube-lease-manager) lasts [`LEASE_SECONDS`] and its holder renews it
//! [`RENEW_AFTER_SECONDS`] after each renewal. The library only logs a failed renewal; on its
//! own the leader would go on reconciling after its lease expired and a standby took over
//! (two leaders). Here a leader whose renewals have failed for [`RENEW_DEADLINE`] steps down
//! first: the renewal that failed was due at most `RENEW_AFTER_SECONDS` after the last good
//! one, so the lease still had `LEASE_SECONDS - RENEW_AFTER_SECONDS` to run, more than the
//! deadline.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// How long a lease lasts without renewal.
pub const LEASE_SECONDS: u64 = 15;
/// The holder renews this long after each renewal (the library's grace is the rest).
pub const RENEW_AFTER_SECONDS: u64 = 5;
/// A leader whose renewals have failed this long steps down.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(5);
/// Pause between tries after a failed renewal.
const RETRY: Duration = Duration::from_secs(1);
/// A call that ran this long before it failed had been renewing fine until then.
const HEALTHY_RUN: Duration = Duration::from_secs(2);

/// What the election loop needs of a lease: wait until this replica's leadership changes
/// (`Ok(is_leader)`), or fail (the API server could not be reached, ...).
pub trait Lease {
    /// Waits until this replica's leadership changes: whether it now leads.
    fn changed(&self) -> impl Future<Output = Result<bool, String>> + Send;
    /// Gives the lease up (on shutdown), so a standby takes over at once.
    fn release(&self) -> impl Future<Output = ()> + Send;
}

impl Lease for kube_lease_manager::LeaseManager {
    async fn changed(&self) -> Result<bool, String> {
        kube_lease_manager::LeaseManager::changed(self)
            .await
            .map_err(|e| e.to_string())
    }

    async fn release(&self) {
        if let Err(error) = kube_lease_manager::LeaseManager::release(self).await {
            tracing::warn!(%error, "could not release the lease");
        }
    }
}

/// Drive the election until `leader`'s receivers are all dropped (then release the lease).
/// `leader` says whether this replica leads; it turns false when the lease is lost and when
/// renewals failed for [`RENEW_DEADLINE`].
pub async fn run(lease: impl Lease, leader: watch::Sender<bool>) {
    let mut failing_since: Option<Instant> = None;
    loop {
        let started = Instant::now();
        tokio::select! {
            biased;
            _ = leader.closed() => {
                lease.release().await;
                return;
            }
            result = lease.changed() => match result {
                Ok(is_leader) => {
                    failing_since = None;
                    leader.send_replace(is_leader);
                }
                Err(error) => {
                    // A call that ran long had been renewing fine: the failures start now.
                    if started.elapsed() >= HEALTHY_RUN {
                        failing_since = Some(Instant::now());
                    }
                    let since = *failing_since.get_or_insert(started);
                    if *leader.borrow() && since.elapsed() >= RENEW_DEADLINE {
                        tracing::warn!(%error, "lease renewal failed for {RENEW_DEADLINE:?}; stepping down");
                        leader.send_replace(false);
                    } else {
                        tracing::warn!(%error, "lease renewal failed; retrying");
                    }
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A lease that answers from a script: each call to `changed` takes the next entry
    /// (a delay, then the answer); at the end of the script it never answers.
    struct Scripted {
        script: Mutex<Vec<(Duration, Result<bool, String>)>>,
        released: AtomicUsize,
    }

    impl Scripted {
        fn new(mut script: Vec<(Duration, Result<bool, String>)>) -> Self {
            script.reverse();
            Self {
                script: Mutex::new(script),
                released: AtomicUsize::new(0),
            }
        }
    }

    impl Lease for &Scripted {
        async fn changed(&self) -> Result<bool, String> {
            let next = self.script.lock().unwrap().pop();
            match next {
                Some((delay, answer)) => {
                    tokio::time::sleep(delay).await;
                    answer
                }
                None => std::future::pending().await,
            }
        }

        async fn release(&self) {
            self.released.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn failing(n: usize) -> Vec<(Duration, Result<bool, String>)> {
        (0..n)
            .map(|_| {
                (
                    Duration::from_millis(10),
                    Err("connection refused".to_string()),
                )
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_whose_renewals_fail_steps_down_before_its_lease_expires() {
        // Acquired at t=0; renewals run fine for 60 s, then the API server is gone.
        let mut script = vec![
            (Duration::ZERO, Ok(true)),
            (Duration::from_secs(60), Err("EOF".into())),
        ];
        script.extend(failing(30));
        let lease = Scripted::new(script);
        let (tx, mut rx) = watch::channel(false);
        let t0 = Instant::now();
        let election = tokio::spawn(async move { run(&lease, tx).await });
        rx.wait_for(|l| *l).await.unwrap();
        rx.wait_for(|l| !*l).await.unwrap();
        let first_failure = Duration::from_secs(60);
        let stepped_down = t0.elapsed() - first_failure;
        assert!(
            stepped_down >= RENEW_DEADLINE,
            "not before the deadline: {stepped_down:?}"
        );
        let lease_left = Duration::from_secs(LEASE_SECONDS - RENEW_AFTER_SECONDS);
        assert!(
            stepped_down < lease_left,
            "stepped down {stepped_down:?} after the first failed renewal; the lease had {lease_left:?} left"
        );
        drop(rx);
        election.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn one_failed_renewal_after_a_healthy_hour_does_not_step_down() {
        let script = vec![
            (Duration::ZERO, Ok(true)),
            (Duration::from_secs(10), Err("blip".into())),
            // The next call renews fine for an hour, then fails once; then all is well.
            (Duration::from_secs(3600), Err("blip".into())),
        ];
        let lease = Scripted::new(script);
        let (tx, rx) = watch::channel(false);
        let election = tokio::spawn(async move { run(&lease, tx).await });
        tokio::time::sleep(Duration::from_secs(3700)).await;
        assert!(*rx.borrow(), "still the leader");
        drop(rx);
        election.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_receivers_releases_the_lease() {
        let lease: &'static Scripted =
            Box::leak(Box::new(Scripted::new(vec![(Duration::ZERO, Ok(true))])));
        let (tx, mut rx) = watch::channel(false);
        let election = tokio::spawn(run(lease, tx));
        rx.wait_for(|l| *l).await.unwrap();
        drop(rx);
        election.await.unwrap();
        assert_eq!(lease.released.load(Ordering::SeqCst), 1);
    }
}
