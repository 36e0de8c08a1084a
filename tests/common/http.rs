//! Plain HTTP on loopback, for the operators' `/metrics`, `/readyz` and `/healthz` and for
//! Prometheus: no client crate, one request per connection.

use anyhow::{Context, Result, ensure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A free TCP port on loopback (bound, then released for the process that will listen).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// An HTTP/1.0 GET on loopback: (status code, body without surrounding white space).
pub async fn http_status(port: u16, path: &str) -> Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("GET {path}: {response}"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.trim().to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// The body of an HTTP/1.0 GET on loopback that must answer 200.
pub async fn http_get(port: u16, path: &str) -> Result<String> {
    let (code, body) = http_status(port, path).await?;
    ensure!(code == 200, "GET {path}: {code} {body}");
    Ok(body)
}
