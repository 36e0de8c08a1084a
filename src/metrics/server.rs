//! `/metrics`, `/healthz` and `/readyz`.
//!
//! - `/readyz` answers 200 once this replica's watch cache of MiniClusters has synced: the
//!   controller's cache on the leader, a cache of its own on a standby waiting for the lease
//!   (so a standby is ready when it could take over: its credentials list and watch what the
//!   controller needs). It answers 503 before the first sync and while a new leader's
//!   controller cache syncs.
//! - `/healthz` answers 200 unless the process is wedged: a heartbeat task on the runtime
//!   beats every second, and `/healthz` fails when the last beat is older than
//!   [`LIVENESS_STALL`]. An unreachable API server or a lost election does not fail it
//!   (restarting would not help); a runtime that cannot run its tasks does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::SharedMetrics;

/// `/healthz` fails when the heartbeat is older than this.
pub const LIVENESS_STALL: Duration = Duration::from_secs(30);

/// How often [`Health::heartbeat`] beats.
const BEAT: Duration = Duration::from_secs(1);

/// What this replica is doing, as far as readiness is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Role {
    /// Caches not synced yet.
    Starting = 0,
    /// Waiting for the lease; its own MiniCluster cache has synced.
    Standby = 1,
    /// Reconciling; the controller's cache has synced.
    Leader = 2,
}

impl Role {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => Role::Standby,
            2 => Role::Leader,
            _ => Role::Starting,
        }
    }
}

#[derive(Debug)]
struct Inner {
    role: AtomicU8,
    epoch: Instant,
    /// Milliseconds since `epoch` at the last heartbeat.
    last_beat_ms: AtomicU64,
}

/// Readiness and liveness shared between the controller and the HTTP server.
#[derive(Clone, Debug)]
pub struct Health(Arc<Inner>);

impl Default for Health {
    fn default() -> Self {
        Self(Arc::new(Inner {
            role: AtomicU8::new(Role::Starting as u8),
            epoch: Instant::now(),
            last_beat_ms: AtomicU64::new(0),
        }))
    }
}

impl Health {
    /// This replica's caches have synced in `role` (or, with [`Role::Starting`], not yet).
    pub fn set(&self, role: Role) {
        self.0.role.store(role as u8, Ordering::SeqCst);
    }

    /// The current role.
    pub fn role(&self) -> Role {
        Role::from_u8(self.0.role.load(Ordering::SeqCst))
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.role() != Role::Starting
    }

    /// Record a heartbeat now.
    pub fn beat(&self) {
        self.beat_at(Instant::now());
    }

    fn beat_at(&self, at: Instant) {
        let ms = at.saturating_duration_since(self.0.epoch).as_millis() as u64;
        self.0.last_beat_ms.fetch_max(ms, Ordering::SeqCst);
    }

    /// Time since the last heartbeat, as seen at `now`.
    fn stalled_for(&self, now: Instant) -> Duration {
        let last = self.0.epoch + Duration::from_millis(self.0.last_beat_ms.load(Ordering::SeqCst));
        now.saturating_duration_since(last)
    }

    /// Whether `/healthz` answers 200 at `now`.
    pub fn is_live_at(&self, now: Instant) -> bool {
        self.stalled_for(now) <= LIVENESS_STALL
    }

    /// Beat every second for as long as the runtime runs this task.
    pub async fn heartbeat(self) {
        let mut tick = tokio::time::interval(BEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.beat();
        }
    }
}

#[derive(Clone)]
struct AppState {
    metrics: SharedMetrics,
    health: Health,
}

/// Serve the endpoints until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    metrics: SharedMetrics,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(live_handler))
        .route("/readyz", get(ready_handler))
        .with_state(AppState { metrics, health });
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving metrics and health endpoints");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics_handler(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
}

fn readiness(health: &Health) -> (StatusCode, &'static str) {
    match health.role() {
        Role::Starting => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: MiniCluster cache not synced\n",
        ),
        Role::Standby => (
            StatusCode::OK,
            "ready: standby, waiting for the lease; cache synced\n",
        ),
        Role::Leader => (StatusCode::OK, "ready: leader; cache synced\n"),
    }
}

fn liveness(health: &Health, now: Instant) -> (StatusCode, String) {
    if health.is_live_at(now) {
        (StatusCode::OK, "ok\n".into())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "wedged: no heartbeat for {:.1}s\n",
                health.stalled_for(now).as_secs_f64()
            ),
        )
    }
}

async fn ready_handler(State(state): State<AppState>) -> impl IntoResponse {
    readiness(&state.health)
}

async fn live_handler(State(state): State<AppState>) -> impl IntoResponse {
    liveness(&state.health, Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_ready_until_a_cache_has_synced() {
        let h = Health::default();
        assert_eq!(readiness(&h).0, StatusCode::SERVICE_UNAVAILABLE);
        h.set(Role::Standby);
        assert_eq!(readiness(&h), (StatusCode::OK, readiness(&h).1));
        assert!(readiness(&h).1.contains("standby"));
        h.set(Role::Starting); // a new leader's controller cache syncing
        assert_eq!(readiness(&h).0, StatusCode::SERVICE_UNAVAILABLE);
        h.set(Role::Leader);
        assert!(h.is_ready());
        assert!(readiness(&h).1.contains("leader"));
    }

    #[test]
    fn healthz_fails_only_when_the_heartbeat_stalls() {
        let h = Health::default();
        let t0 = Instant::now();
        h.beat_at(t0);
        assert_eq!(liveness(&h, t0 + Duration::from_secs(5)).0, StatusCode::OK);
        let just_inside = t0 + LIVENESS_STALL - Duration::from_millis(1);
        assert_eq!(liveness(&h, just_inside).0, StatusCode::OK);
        let (code, body) = liveness(&h, t0 + LIVENESS_STALL + Duration::from_secs(1));
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("wedged"), "{body}");
        // A late beat brings it back; an older one never moves the heartbeat backwards.
        h.beat_at(t0 + Duration::from_secs(40));
        h.beat_at(t0 + Duration::from_secs(2));
        assert_eq!(liveness(&h, t0 + Duration::from_secs(45)).0, StatusCode::OK);
    }

    #[tokio::test]
    async fn heartbeat_task_beats_every_second() {
        let h = Health::default();
        tokio::spawn(h.clone().heartbeat());
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let stalled = h.stalled_for(Instant::now());
        assert!(stalled < Duration::from_millis(1200), "{stalled:?}");
    }
}
