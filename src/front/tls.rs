//! `[server] tls`: the listener's certificate, swapped by a reload. One
//! rustls `ServerConfig` for the process (TLS 1.3 and 1.2 on aws-lc-rs,
//! ALPN `http/1.1`, no client certificates) asks `Current` for the
//! certificate at each handshake, so a reload replaces the certificate
//! and key alone: handshakes after it get the new one, and connections
//! already open keep the session they made.
//!
//! What a connection does with the handshake (its deadline, a plain HTTP
//! request refused) is `conn/tls.rs`.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use crate::config::{TlsError, TlsFiles};

/// ALPN: the one protocol the listener speaks. A client that offers ALPN
/// without it (h2 alone) is refused at the handshake rather than served
/// a protocol it did not ask for.
const ALPN: &[u8] = b"http/1.1";

/// The listener's TLS: the acceptor every connection's handshake goes
/// through, and the certificate it serves.
pub(crate) struct Certs {
    current: Arc<Current>,
    acceptor: TlsAcceptor,
}

/// The certificate and key in force, read at each handshake.
#[derive(Debug)]
struct Current(ArcSwap<CertifiedKey>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

impl Certs {
    /// Reads `files` (a bad one: the error names its key).
    pub(crate) fn new(files: &TlsFiles) -> Result<Certs, TlsError> {
        let provider = crate::config::tls_provider();
        let key = files.load(&provider)?;
        let current = Arc::new(Current(ArcSwap::new(key)));
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .expect("aws-lc-rs serves TLS 1.2 and 1.3")
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(Certs {
            current,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.clone()
    }

    /// Reads `files` whole; nothing changes until `install`.
    pub(crate) fn read(files: &TlsFiles) -> Result<Arc<CertifiedKey>, TlsError> {
        files.load(&crate::config::tls_provider())
    }

    /// From the next handshake on, `key` is served.
    pub(crate) fn install(&self, key: Arc<CertifiedKey>) {
        self.current.0.store(key);
    }
}
