//! `/metrics`, `/healthz` and `/readyz`.
//!
//! - `/readyz` answers 200 once this replica's own MiniCluster watch (the list and watch the
//!   controller's cache runs, with the same credentials) has completed its initial list, on
//!   the leader and on a standby waiting for the lease alike: a standby is ready when it
//!   could take over. It answers 503 before that.
//! - `/healthz` answers 200 unless the process is wedged: a heartbeat task on the runtime
//!   beats every second, and `/healthz` fails when the last beat is older than
//!   [`LIVENESS_STALL`]. An unreachable API server or a lost election does not fail it
//!   (restarting would not help); a runtime that cannot run its tasks does.
//!
//! - `/metrics` answers a bearer of a token the API server authenticates and allows `get` on
//!   the non-resource URL `/metrics` ([`super::auth`]): 401 without a valid token, 403 when
//!   its user is not allowed, 500 when the API server cannot say. With
//!   `--metrics-insecure-loopback` (loopback only) it answers anyone.
//!
//! The probes' two answer on a listener of their own too (`--health-addr`, plain HTTP), so
//! that clients of `/metrics` cannot hold the kubelet's probes.
//!
//! How connections are taken, and their limits: [`super::listen`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::SharedMetrics;
use super::auth::{self, Authorizer, Decision};

/// `/healthz` fails when the heartbeat is older than this.
pub const LIVENESS_STALL: Duration = Duration::from_secs(30);

/// How long a request may take before it is answered 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How often [`Health::heartbeat`] beats.
const BEAT: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct Inner {
    synced: AtomicBool,
    leader: AtomicBool,
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
            synced: AtomicBool::new(false),
            leader: AtomicBool::new(false),
            epoch: Instant::now(),
            last_beat_ms: AtomicU64::new(0),
        }))
    }
}

impl Health {
    /// This replica's MiniCluster watch has completed its initial list (or lost it).
    pub fn set_synced(&self, synced: bool) {
        self.0.synced.store(synced, Ordering::SeqCst);
    }

    /// This replica holds the lease (or runs without leader election).
    pub fn set_leader(&self, leader: bool) {
        self.0.leader.store(leader, Ordering::SeqCst);
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.0.synced.load(Ordering::SeqCst)
    }

    fn is_leader(&self) -> bool {
        self.0.leader.load(Ordering::SeqCst)
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

/// The endpoints; `/metrics` behind `auth` when there is one.
pub(super) fn router(
    metrics: SharedMetrics,
    health: Health,
    auth: Option<Arc<Authorizer>>,
) -> Router {
    router_answering_within(metrics, health, auth, REQUEST_TIMEOUT)
}

/// [`router`], each request answered 408 when it takes longer than `timeout` (the token's
/// reviews included).
pub(super) fn router_answering_within(
    metrics: SharedMetrics,
    health: Health,
    auth: Option<Arc<Authorizer>>,
    timeout: Duration,
) -> Router {
    let mut metrics_route = get(metrics_handler);
    if let Some(auth) = auth {
        metrics_route = metrics_route.layer(middleware::from_fn_with_state(auth, require_reader));
    }
    Router::new()
        .route("/metrics", metrics_route)
        .route("/healthz", get(live_handler))
        .route("/readyz", get(ready_handler))
        .with_state(AppState { metrics, health })
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            timeout,
        ))
}

/// `/healthz` and `/readyz` alone, for the probes' own listener (`--health-addr`): plain
/// HTTP, as they carry nothing secret.
pub(super) fn probes_router(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(live_probe))
        .route("/readyz", get(ready_probe))
        .with_state(health)
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
}

async fn ready_probe(State(health): State<Health>) -> impl IntoResponse {
    readiness(&health)
}

async fn live_probe(State(health): State<Health>) -> impl IntoResponse {
    liveness(&health, Instant::now())
}

/// Let the request through only for a bearer the API server allows to read `/metrics`.
async fn require_reader(
    State(auth): State<Arc<Authorizer>>,
    request: Request,
    next: Next,
) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(auth::bearer)
        .map(str::to_owned);
    let Some(token) = token else {
        return unauthorized();
    };
    match auth.decide(&token).await {
        Ok(Decision::Allowed) => next.run(request).await,
        Ok(Decision::Unauthenticated) => unauthorized(),
        Ok(Decision::Forbidden) => (
            StatusCode::FORBIDDEN,
            "forbidden: this token's user may not get /metrics\n",
        )
            .into_response(),
        Err(error) => {
            tracing::warn!(%error, "reviewing a token for /metrics");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the API server could not review this token\n",
            )
                .into_response()
        }
    }
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "unauthorized: send a Kubernetes bearer token allowed to get /metrics\n",
    )
        .into_response()
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
    match (health.is_ready(), health.is_leader()) {
        (false, _) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: MiniCluster watch not synced\n",
        ),
        (true, false) => (
            StatusCode::OK,
            "ready: standby, waiting for the lease; MiniCluster watch synced\n",
        ),
        (true, true) => (StatusCode::OK, "ready: leader; MiniCluster watch synced\n"),
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
    fn not_ready_until_the_watch_has_synced_leader_or_not() {
        let h = Health::default();
        assert_eq!(readiness(&h).0, StatusCode::SERVICE_UNAVAILABLE);
        h.set_leader(true);
        assert_eq!(readiness(&h).0, StatusCode::SERVICE_UNAVAILABLE);
        h.set_leader(false);
        h.set_synced(true);
        let (code, body) = readiness(&h);
        assert_eq!(code, StatusCode::OK);
        assert!(body.contains("standby"), "{body}");
        h.set_leader(true);
        let (code, body) = readiness(&h);
        assert_eq!(code, StatusCode::OK);
        assert!(body.contains("leader"), "{body}");
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
