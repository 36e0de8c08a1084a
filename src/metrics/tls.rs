//! The metrics endpoint's TLS: a certificate from `--metrics-cert-dir` (`tls.crt` and
//! `tls.key`, the layout of a `kubernetes.io/tls` Secret), or a self-signed one made at start.
//!
//! A self-signed certificate is what controller-runtime's metrics server makes too: it
//! keeps the token a scraper sends off the wire in clear text; a scraper that wants to
//! verify the server mounts a certificate it issued (cert-manager) and points
//! `--metrics-cert-dir` at it. The files are read once, at start.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The names the self-signed certificate is made for: a scraper that skips verification
/// does not read them, one that checks names finds the Service's.
fn self_signed_names() -> Vec<String> {
    let mut names = vec!["localhost".to_string()];
    if let Ok(host) = std::env::var("HOSTNAME") {
        names.push(host);
    }
    names
}

/// A new key and a certificate for it, signed by itself.
pub fn self_signed() -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let made = rcgen::generate_simple_self_signed(self_signed_names())
        .context("making the metrics endpoint's self-signed certificate")?;
    let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    Ok((vec![made.cert.der().clone()], key.into()))
}

/// The chain in `dir/tls.crt` and the key in `dir/tls.key` (PEM).
pub fn from_dir(
    dir: &Path,
) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let crt = dir.join("tls.crt");
    let key = dir.join("tls.key");
    let chain = CertificateDer::pem_file_iter(&crt)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading {}", crt.display()))?;
    anyhow::ensure!(!chain.is_empty(), "{}: no certificate", crt.display());
    let key =
        PrivateKeyDer::from_pem_file(&key).with_context(|| format!("reading {}", key.display()))?;
    Ok((chain, key))
}

/// The server side of the endpoint's TLS: TLS 1.2 and 1.3 with ring's safe defaults, no
/// client certificates, HTTP/1.1 only.
pub fn server_config(cert_dir: Option<&Path>) -> anyhow::Result<Arc<ServerConfig>> {
    let (chain, key) = match cert_dir {
        Some(dir) => from_dir(dir)?,
        None => self_signed()?,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the metrics certificate and key do not go together")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_from_files_is_served_and_a_mismatched_key_refused() {
        let dir = tempfile::tempdir().unwrap();
        let one = rcgen::generate_simple_self_signed(vec!["one".to_string()]).unwrap();
        let other = rcgen::generate_simple_self_signed(vec!["other".to_string()]).unwrap();
        std::fs::write(dir.path().join("tls.crt"), one.cert.pem()).unwrap();
        std::fs::write(dir.path().join("tls.key"), one.signing_key.serialize_pem()).unwrap();
        server_config(Some(dir.path())).expect("a matching pair");

        std::fs::write(
            dir.path().join("tls.key"),
            other.signing_key.serialize_pem(),
        )
        .unwrap();
        let error = server_config(Some(dir.path())).unwrap_err();
        assert!(
            format!("{error:#}").contains("do not go together"),
            "{error:#}"
        );

        std::fs::remove_file(dir.path().join("tls.crt")).unwrap();
        let error = server_config(Some(dir.path())).unwrap_err();
        assert!(format!("{error:#}").contains("tls.crt"), "{error:#}");
    }
}
