//! How the endpoints are served: HTTPS with `/metrics` behind the API server's
//! authentication and authorization (the default), or plain HTTP with nothing in front of
//! it on a loopback address only (`--metrics-insecure-loopback`).
//!
//! Either way a slow or stalled client cannot hold the server: at most
//! [`MAX_CONNECTIONS`] connections at once, [`HEADER_READ_TIMEOUT`] for the TLS handshake
//! and again for each request's headers, and
//! [`REQUEST_TIMEOUT`](super::server::REQUEST_TIMEOUT) to answer. Clients that take every
//! place there would hold the kubelet's probes too, so the probes may have a listener of
//! their own (`--health-addr`, plain HTTP, `/healthz` and `/readyz` only, with its own
//! [`MAX_CONNECTIONS`]): the install's manifests point the probes at it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use super::SharedMetrics;
use super::auth::Authorizer;
use super::server::{Health, probes_router, router};

/// How long a client may take for the TLS handshake, and then for each request's headers,
/// before its connection is closed.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Most connections served at once; more wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 64;

/// The endpoints' settings (`flux-operator run`).
#[derive(clap::Args, Clone, Debug)]
pub struct Endpoints {
    /// Address of `/metrics`, `/healthz` and `/readyz`: HTTPS, `/metrics` for bearers of a
    /// token allowed `get` on the non-resource URL `/metrics`.
    #[arg(long, env = "METRICS_ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// Serve plain HTTP and `/metrics` to anyone. Only on a loopback `--metrics-addr` (a
    /// scraper in the same pod or on the same host); refused on any other address.
    #[arg(long, env = "METRICS_INSECURE_LOOPBACK")]
    pub metrics_insecure_loopback: bool,
    /// A directory with `tls.crt` and `tls.key` (a mounted `kubernetes.io/tls` Secret) for
    /// the HTTPS endpoint; read at start. Without it, a self-signed certificate is made.
    #[arg(long, env = "METRICS_CERT_DIR")]
    pub metrics_cert_dir: Option<PathBuf>,
    /// Address of a second listener for the probes alone (`/healthz`, `/readyz`, plain
    /// HTTP), apart from `/metrics`' clients. Unset: the probes are served on
    /// `--metrics-addr` only.
    #[arg(long, env = "HEALTH_ADDR")]
    pub health_addr: Option<SocketAddr>,
}

/// The listening endpoints, ready to serve.
pub struct Server {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    /// The probes' own listener and their router.
    probes: Option<(TcpListener, Router)>,
}

impl Server {
    /// Check the settings, bind the address and make the certificate: every mistake is
    /// an error here, before the operator starts.
    pub async fn bind(
        endpoints: &Endpoints,
        client: kube::Client,
        metrics: SharedMetrics,
        health: Health,
    ) -> anyhow::Result<Self> {
        endpoints.check()?;
        let (tls, auth) = if endpoints.metrics_insecure_loopback {
            (None, None)
        } else {
            let config = super::tls::server_config(endpoints.metrics_cert_dir.as_deref())?;
            let auth = Arc::new(Authorizer::new(client));
            (Some(TlsAcceptor::from(config)), Some(auth))
        };
        let addr = endpoints.metrics_addr;
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding the metrics endpoint to {addr}"))?;
        tracing::info!(
            %addr,
            https = tls.is_some(),
            authenticated = auth.is_some(),
            "serving metrics and health endpoints"
        );
        let probes = match endpoints.health_addr {
            Some(addr) => {
                let probes = TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding the health endpoint to {addr}"))?;
                tracing::info!(%addr, "serving the health endpoints on their own listener");
                Some((probes, probes_router(health.clone())))
            }
            None => None,
        };
        Ok(Self {
            listener,
            tls,
            app: router(metrics, health, auth),
            probes,
        })
    }

    /// The address bound (the port, when 0 was asked for).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until the future `shutdown` makes resolves (one for each listener), then finish
    /// the requests in flight.
    pub async fn run<F>(self, shutdown: impl Fn() -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let probes = self.probes.map(|(listener, app)| {
            tokio::spawn(serve_on(
                listener,
                None,
                app,
                HEADER_READ_TIMEOUT,
                shutdown(),
            ))
        });
        serve_on(
            self.listener,
            self.tls,
            self.app,
            HEADER_READ_TIMEOUT,
            shutdown(),
        )
        .await;
        if let Some(probes) = probes {
            let _ = probes.await;
        }
    }
}

impl Endpoints {
    /// Plain HTTP serves `/metrics` to anyone who reaches it: only on loopback.
    fn check(&self) -> anyhow::Result<()> {
        let addr = self.metrics_addr;
        if !self.metrics_insecure_loopback {
            return Ok(());
        }
        if !addr.ip().is_loopback() {
            bail!(
                "--metrics-insecure-loopback serves /metrics over plain HTTP without \
                 authentication, so it binds only a loopback address (127.0.0.1, ::1); \
                 --metrics-addr is {addr}"
            );
        }
        if self.metrics_cert_dir.is_some() {
            bail!("--metrics-cert-dir is for HTTPS; --metrics-insecure-loopback serves plain HTTP");
        }
        Ok(())
    }
}

/// Accept connections on `listener` for `app` (through TLS when `tls` is set), at most
/// [`MAX_CONNECTIONS`] at once, each with `header_read` for its handshake and for each
/// request's headers (axum's own server sets no timer, so hyper's header timeout never
/// fires there), until `shutdown`; then finish the requests in flight.
pub(super) async fn serve_on(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    header_read: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let graceful = GracefulShutdown::new();
    let service = TowerToHyperService::new(app);
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, permit) = tokio::select! {
            accepted = accept(&listener, &permits) => accepted,
            () = &mut shutdown => break,
        };
        let connection = Connection {
            service: service.clone(),
            watcher: graceful.watcher(),
            header_read,
            _permit: permit,
        };
        tokio::spawn(connection.serve(stream, tls.clone()));
    }
    graceful.shutdown().await;
}

/// The next connection, once fewer than [`MAX_CONNECTIONS`] are open.
async fn accept(
    listener: &TcpListener,
    permits: &Arc<Semaphore>,
) -> (TcpStream, OwnedSemaphorePermit) {
    let permit = permits
        .clone()
        .acquire_owned()
        .await
        .expect("the semaphore is never closed");
    loop {
        match listener.accept().await {
            Ok((stream, _)) => return (stream, permit),
            Err(error) => {
                // Out of file descriptors, say: wait rather than spin.
                tracing::warn!(%error, "accepting a connection to the metrics endpoint");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// One client's connection, holding its place among [`MAX_CONNECTIONS`] until it ends.
struct Connection {
    service: TowerToHyperService<Router>,
    watcher: Watcher,
    header_read: Duration,
    _permit: OwnedSemaphorePermit,
}

impl Connection {
    async fn serve(self, stream: TcpStream, tls: Option<TlsAcceptor>) {
        let Some(tls) = tls else {
            return self.http(stream).await;
        };
        match tokio::time::timeout(self.header_read, tls.accept(stream)).await {
            Ok(Ok(stream)) => self.http(stream).await,
            Ok(Err(error)) => tracing::debug!(%error, "metrics endpoint: TLS handshake failed"),
            Err(_) => tracing::debug!("metrics endpoint: TLS handshake timed out"),
        }
    }

    async fn http<I>(self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_read)
            .serve_connection(TokioIo::new(io), self.service);
        // A client that goes away or is too slow ends its own connection only.
        let _ = self.watcher.watch(connection).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::metrics::Metrics;

    fn endpoints(addr: &str, insecure: bool) -> Endpoints {
        Endpoints {
            metrics_addr: addr.parse().unwrap(),
            metrics_insecure_loopback: insecure,
            metrics_cert_dir: None,
            health_addr: None,
        }
    }

    /// A client for an API server that is not there: every review fails.
    fn unreachable_api() -> kube::Client {
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    /// Serve on a free loopback port, plain or TLS (self-signed) with the authorizer.
    async fn start(tls: bool, header_read: Duration) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(Metrics::new());
        let (tls, auth) = if tls {
            let config = crate::metrics::tls::server_config(None).unwrap();
            let auth = Arc::new(Authorizer::new(unreachable_api()));
            (Some(TlsAcceptor::from(config)), Some(auth))
        } else {
            (None, None)
        };
        let app = router(metrics, Health::default(), auth);
        tokio::spawn(serve_on(
            listener,
            tls,
            app,
            header_read,
            std::future::pending(),
        ));
        addr
    }

    /// `GET path` over TLS without checking the server's certificate (it is self-signed),
    /// with `authorization` if given: the response's head and body.
    async fn https_get(addr: SocketAddr, path: &str, authorization: Option<&str>) -> String {
        let stream = TcpStream::connect(addr).await.unwrap();
        let connector = tokio_rustls::TlsConnector::from(trust_anything::client_config());
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = connector.connect(name, stream).await.unwrap();
        let auth = authorization
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n");
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        // The server may close without a TLS close_notify; what came before is the answer.
        let _ = tls.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[test]
    fn plain_http_is_refused_on_any_address_but_loopback() {
        for addr in ["0.0.0.0:8080", "10.0.0.7:8080", "[::]:8080"] {
            let error = endpoints(addr, true).check().unwrap_err().to_string();
            assert!(error.contains("only a loopback address"), "{addr}: {error}");
        }
        for addr in ["127.0.0.1:8080", "[::1]:8080"] {
            endpoints(addr, true).check().unwrap();
        }
        // HTTPS with authentication may listen anywhere.
        endpoints("0.0.0.0:8080", false).check().unwrap();
        let mut both = endpoints("127.0.0.1:8080", true);
        both.metrics_cert_dir = Some("/tmp".into());
        assert!(both.check().is_err(), "a certificate for plain HTTP");
    }

    /// One plain HTTP GET of `path` on its own connection: the whole answer.
    async fn plain_request(addr: SocketAddr, path: &str) -> String {
        let mut client = TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        client.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn a_client_that_never_finishes_its_headers_is_cut_off() {
        let timeout = Duration::from_millis(300);
        let addr = start(false, timeout).await;
        let mut slow = TcpStream::connect(addr).await.unwrap();
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

        let answer = plain_request(addr, "/readyz").await;
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    }

    #[tokio::test]
    async fn a_kept_alive_connection_left_idle_is_closed() {
        let timeout = Duration::from_millis(300);
        let addr = start(false, timeout).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut first = [0u8; 512];
        let n = client.read(&mut first).await.unwrap();
        assert!(
            first[..n].starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&first[..n])
        );
        // Kept alive, then nothing more: closed by the server.
        let mut rest = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut rest)).await;
        assert!(
            read.is_ok(),
            "an idle kept-alive connection was still open after 5 s"
        );
    }

    #[tokio::test]
    async fn a_client_that_never_finishes_the_tls_handshake_is_cut_off() {
        let timeout = Duration::from_millis(300);
        let addr = start(true, timeout).await;
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut buf)).await;
        assert!(
            read.is_ok(),
            "a client that never said hello was still connected after 5 s"
        );
        // Plain HTTP to the TLS port gets no answer.
        let mut plain = TcpStream::connect(addr).await.unwrap();
        plain
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut answer)).await;
        assert!(!answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    }

    #[tokio::test]
    async fn over_https_metrics_wants_a_token_and_the_probes_do_not() {
        let addr = start(true, Duration::from_secs(5)).await;
        let healthz = https_get(addr, "/healthz", None).await;
        assert!(healthz.starts_with("HTTP/1.1 200"), "{healthz}");
        let readyz = https_get(addr, "/readyz", None).await;
        assert!(readyz.starts_with("HTTP/1.1 503"), "not synced: {readyz}");
        for authorization in [None, Some("Basic dXNlcjpwdw=="), Some("Bearer ")] {
            let answer = https_get(addr, "/metrics", authorization).await;
            assert!(
                answer.starts_with("HTTP/1.1 401"),
                "{authorization:?}: {answer}"
            );
            assert!(
                answer
                    .to_ascii_lowercase()
                    .contains("www-authenticate: bearer"),
                "{answer}"
            );
            assert!(!answer.contains("flux_operator"), "{answer}");
        }
        // A token the API server cannot review is not let in.
        let answer = https_get(addr, "/metrics", Some("Bearer some.token")).await;
        assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
        assert!(!answer.contains("flux_operator"), "{answer}");
    }

    /// An API server that takes connections and never answers: the token's review hangs,
    /// and the request is answered 408 when its time is up, not held.
    #[tokio::test]
    async fn a_request_whose_token_review_hangs_is_answered_408_in_time() {
        let silent_api = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api_url = format!("http://{}", silent_api.local_addr().unwrap());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = silent_api.accept().await {
                held.push(stream);
            }
        });
        let client = kube::Client::try_from(kube::Config::new(api_url.parse().unwrap())).unwrap();
        let auth = Some(Arc::new(Authorizer::new(client)));
        let limit = Duration::from_millis(500);
        let app = super::super::server::router_answering_within(
            Arc::new(Metrics::new()),
            Health::default(),
            auth,
            limit,
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pending = std::future::pending();
        tokio::spawn(serve_on(
            listener,
            None,
            app,
            Duration::from_secs(5),
            pending,
        ));

        let started = Instant::now();
        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(
                b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\
                  Connection: close\r\n\r\n",
            )
            .await
            .unwrap();
        let mut answer = String::new();
        let read = tokio::time::timeout(Duration::from_secs(5), client.read_to_string(&mut answer));
        read.await.expect("no answer within 5 s").unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(started.elapsed() >= limit, "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn plain_http_on_loopback_serves_metrics_without_a_token() {
        let addr = start(false, Duration::from_secs(5)).await;
        let answer = plain_request(addr, "/metrics").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            answer.contains("# TYPE flux_operator_miniclusters gauge"),
            "{answer}"
        );
    }

    /// With every connection taken by clients that send nothing, the next one waits until
    /// their header timeout frees a place, then is served.
    #[tokio::test]
    async fn connections_beyond_the_limit_wait_for_a_free_place() {
        let timeout = Duration::from_secs(2);
        let addr = start(false, timeout).await;
        let mut stalled = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            stalled.push(TcpStream::connect(addr).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = Instant::now();
        let mut next = TcpStream::connect(addr).await.unwrap();
        next.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        next.read_to_string(&mut answer).await.unwrap();
        let waited = started.elapsed();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            waited >= Duration::from_secs(1),
            "served after {waited:?}, beside {MAX_CONNECTIONS} open connections"
        );
    }

    /// With every place of the metrics listener taken by clients that send nothing (the
    /// kubelet's probes there would wait, as the test above shows), the probes' own listener
    /// answers at once.
    #[tokio::test]
    async fn the_probes_listener_answers_while_metrics_clients_hold_every_connection() {
        let endpoints = Endpoints {
            health_addr: Some("127.0.0.1:0".parse().unwrap()),
            ..endpoints("127.0.0.1:0", true)
        };
        let metrics = Arc::new(Metrics::new());
        let health = Health::default();
        health.set_synced(true);
        let server = Server::bind(&endpoints, unreachable_api(), metrics, health)
            .await
            .unwrap();
        let addr = server.local_addr().unwrap();
        let probes = server.probes.as_ref().unwrap().0.local_addr().unwrap();
        tokio::spawn(server.run(std::future::pending::<()>));
        let mut stalled = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            stalled.push(TcpStream::connect(addr).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        for path in ["/readyz", "/healthz"] {
            let started = Instant::now();
            let answer = plain_request(probes, path).await;
            assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
            let took = started.elapsed();
            assert!(
                took < Duration::from_secs(1),
                "{path} answered after {took:?}"
            );
        }
        let answer = plain_request(probes, "/metrics").await;
        assert!(answer.starts_with("HTTP/1.1 404"), "/metrics: {answer}");
    }

    /// A TLS client that takes any certificate: the tests' server's is self-signed.
    mod trust_anything {
        use std::sync::Arc;

        use rustls::client::danger::{
            HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
        };
        use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
        use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
        use rustls::{DigitallySignedStruct, SignatureScheme};

        #[derive(Debug)]
        struct Anything(WebPkiSupportedAlgorithms);

        impl ServerCertVerifier for Anything {
            fn verify_server_cert(
                &self,
                _: &CertificateDer<'_>,
                _: &[CertificateDer<'_>],
                _: &ServerName<'_>,
                _: &[u8],
                _: UnixTime,
            ) -> Result<ServerCertVerified, rustls::Error> {
                Ok(ServerCertVerified::assertion())
            }

            fn verify_tls12_signature(
                &self,
                message: &[u8],
                cert: &CertificateDer<'_>,
                dss: &DigitallySignedStruct,
            ) -> Result<HandshakeSignatureValid, rustls::Error> {
                rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
            }

            fn verify_tls13_signature(
                &self,
                message: &[u8],
                cert: &CertificateDer<'_>,
                dss: &DigitallySignedStruct,
            ) -> Result<HandshakeSignatureValid, rustls::Error> {
                rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
            }

            fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
                self.0.supported_schemes()
            }
        }

        pub fn client_config() -> Arc<rustls::ClientConfig> {
            let provider: CryptoProvider = rustls::crypto::ring::default_provider();
            let algorithms = provider.signature_verification_algorithms;
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
                .with_safe_default_protocol_versions()
                .unwrap()
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Anything(algorithms)))
                .with_no_client_auth();
            Arc::new(config)
        }
    }
}
