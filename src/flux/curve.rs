//! The ZeroMQ CURVE certificate all brokers of a MiniCluster share: a keypair from libzmq
//! (`zmq_curve_keypair` through the `zmq` crate), and the CURVE handshake that checks a
//! certificate's keys belong together. Its text format and parsing are the model's
//! ([`crate::model::certificate`]).
//!
//! The operator stores the text in a Secret; the entrypoint copies it to a private file with
//! mode 0400 because Flux refuses certificates readable by group or others.

use std::time::Duration;

use crate::model::certificate::Certificate;

use super::Error;
use crate::model::certificate::check_name;

impl Certificate {
    /// A fresh keypair from libzmq, named `name` (the MiniCluster's name).
    pub fn generate(name: &str) -> Result<Self, Error> {
        check_name(name).map_err(Error::Name)?;
        if !zmq::has("curve").unwrap_or(false) {
            return Err(Error::Curve(
                "libzmq was built without CURVE support".into(),
            ));
        }
        let pair = zmq::CurveKeyPair::new()
            .map_err(|e| Error::Curve(format!("zmq_curve_keypair: {e}")))?;
        let encode = |bytes: &[u8]| {
            zmq::z85_encode(bytes).map_err(|e| Error::Curve(format!("z85 encoding: {e:?}")))
        };
        Ok(Self {
            name: name.to_string(),
            public_key: encode(&pair.public_key)?,
            secret_key: encode(&pair.secret_key)?,
        })
    }

    /// Whether the public key belongs to the secret key: a real CURVE handshake over
    /// loopback, the way Flux uses the certificate (one keypair for server and client).
    pub fn keys_match(&self) -> Result<bool, Error> {
        handshake(self, self, self, Duration::from_secs(2))
            .map_err(|e| Error::Curve(format!("handshake check: {e}")))
    }
}

/// Runs a CURVE handshake over TCP loopback: a server socket with `server`'s secret key and
/// a client with `client`'s keypair that trusts `trusted`'s public key as the server key.
/// Returns whether a message got through within `timeout` (the handshake succeeded).
pub fn handshake(
    server: &Certificate,
    client: &Certificate,
    trusted: &Certificate,
    timeout: Duration,
) -> Result<bool, zmq::Error> {
    let decode = |key: &str| zmq::z85_decode(key).map_err(|_| zmq::Error::EINVAL);
    let ctx = zmq::Context::new();
    let pull = ctx.socket(zmq::PULL)?;
    pull.set_linger(0)?;
    pull.set_curve_server(true)?;
    pull.set_curve_secretkey(&decode(&server.secret_key)?)?;
    pull.set_rcvtimeo(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX))?;
    pull.bind("tcp://127.0.0.1:*")?;
    let endpoint = pull.get_last_endpoint()?.map_err(|_| zmq::Error::EINVAL)?;

    let push = ctx.socket(zmq::PUSH)?;
    push.set_linger(0)?;
    push.set_curve_serverkey(&decode(&trusted.public_key)?)?;
    push.set_curve_publickey(&decode(&client.public_key)?)?;
    push.set_curve_secretkey(&decode(&client.secret_key)?)?;
    push.connect(&endpoint)?;
    push.send("flux-operator handshake", 0)?;
    let got = match pull.recv_bytes(0) {
        Ok(msg) => msg == b"flux-operator handshake",
        Err(zmq::Error::EAGAIN) => false,
        Err(e) => return Err(e),
    };
    Ok(got)
}
