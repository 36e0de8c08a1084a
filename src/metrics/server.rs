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
//! A client has [`HEADER_READ_TIMEOUT`] to send its request's headers and the server
//! [`REQUEST_TIMEOUT`] to answer: a slow or stalled client cannot hold connections open.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::SharedMetrics;

/// How long a client may take to send a request's headers before its connection is closed.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request may take before it is answered 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// `/healthz` fails when the heartbeat is older than this.
pub const LIVENESS_STALL: Duration = Duration::from_secs(30);

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

/// Serve the endpoints until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    metrics: SharedMetrics,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving metrics and health endpoints");
    serve_on(
        listener,
        router(metrics, health),
        HEADER_READ_TIMEOUT,
        shutdown,
    )
    .await;
    Ok(())
}

fn router(metrics: SharedMetrics, health: Health) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(live_handler))
        .route("/readyz", get(ready_handler))
        .with_state(AppState { metrics, health })
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
}

/// Accept HTTP/1 connections on `listener` for `app`, each with `header_read` to send its
/// headers (axum's own server sets no timer, so hyper's header timeout never fires there),
/// until `shutdown`; then finish the requests in flight.
async fn serve_on(
    listener: tokio::net::TcpListener,
    app: Router,
    header_read: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let service = hyper_util::service::TowerToHyperService::new(app);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection to the metrics endpoint");
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_read)
            .serve_connection(TokioIo::new(stream), service.clone());
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A client that goes away or is too slow ends its own connection only.
            let _ = connection.await;
        });
    }
    graceful.shutdown().await;
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

    /// A client that opens a connection and never finishes its request's headers is cut off
    /// after the header timeout; one that sends them is answered.
    #[tokio::test]
    async fn a_client_that_never_finishes_its_headers_is_cut_off() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = router(Arc::new(super::super::Metrics::new()), Health::default());
        let timeout = Duration::from_millis(300);
        tokio::spawn(serve_on(listener, app, timeout, std::future::pending()));

        let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        let started = Instant::now();
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut buf)).await;
        assert!(
            read.is_ok(),
            "the slow client's connection was still open after 5 s"
        );
        assert!(started.elapsed() >= timeout, "{:?}", started.elapsed());

        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    }
}
