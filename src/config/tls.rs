//! `[server] tls`: the listener's certificate chain and private key, read
//! from PEM files into what rustls serves. Read here, for `sluice check`,
//! at start and at each reload alike, so a file the check accepts is one
//! the listener can serve: the chain parses, the key parses for the
//! provider the listener uses, and the key is the chain's leaf's own.
//! `[cluster]`'s client certificate and CA are checked the same way, as
//! the Redis client's rustls reads them at each connection.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// Where the certificate chain and its key are (PEM; paths as written,
/// relative to the working directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// Why the files cannot be served, and the key that names the one at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}`: {why}")]
pub struct TlsError {
    pub key: &'static str,
    pub why: String,
}

pub(crate) const CERT_KEY: &str = "server.tls.cert_file";
pub(crate) const KEY_KEY: &str = "server.tls.key_file";

/// The one provider of the gateway's TLS, in and out: aws-lc-rs, as the
/// backend client's.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

impl TlsFiles {
    /// Reads both files whole; nothing is kept from a failed read.
    pub fn load(&self, provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, TlsError> {
        self.load_as(provider, CERT_KEY, KEY_KEY)
    }

    /// As [`load`](Self::load), for files that other keys name: the same
    /// checks as rustls's `with_client_auth_cert` makes of a client's.
    pub(crate) fn load_as(
        &self,
        provider: &CryptoProvider,
        cert_key: &'static str,
        key_key: &'static str,
    ) -> Result<Arc<CertifiedKey>, TlsError> {
        let fail = |key, why: String| TlsError { key, why };
        let chain = read_chain(&self.cert_file).map_err(|why| fail(cert_key, why))?;
        let key = PrivateKeyDer::from_pem_file(&self.key_file).map_err(|e| {
            fail(
                key_key,
                format!(
                    "`{}`: {}",
                    self.key_file.display(),
                    pem_error(&e, "PRIVATE KEY")
                ),
            )
        })?;
        let signing = provider.key_provider.load_private_key(key).map_err(|e| {
            fail(
                key_key,
                format!("`{}`: not a usable key: {e}", self.key_file.display()),
            )
        })?;
        let certified = CertifiedKey::new(chain, signing);
        match certified.keys_match() {
            // A key whose public half the provider cannot tell: the
            // handshake is the check (rustls's own `from_der` does so too).
            Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
                Ok(Arc::new(certified))
            }
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
                Err(fail(
                    key_key,
                    format!(
                        "`{}` is not the key of the certificate in `{}`",
                        self.key_file.display(),
                        self.cert_file.display()
                    ),
                ))
            }
            Err(e) => Err(fail(
                cert_key,
                format!("`{}`: {e}", self.cert_file.display()),
            )),
        }
    }
}

/// A CA file as a TLS client reads one: certificates, each one that
/// rustls takes as a trust anchor.
pub(crate) fn check_roots(path: &Path) -> Result<(), String> {
    let mut store = rustls::RootCertStore::empty();
    for cert in read_chain(path)? {
        store.add(cert).map_err(|e| {
            format!(
                "`{}`: a certificate rustls cannot trust as a CA: {e}",
                path.display()
            )
        })?;
    }
    Ok(())
}

/// The chain, leaf first, as the file orders it.
fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let at = path.display();
    let chain = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| format!("`{at}`: {}", pem_error(&e, "CERTIFICATE")))?;
    if chain.is_empty() {
        return Err(format!("`{at}`: no PEM CERTIFICATE block in it"));
    }
    Ok(chain)
}

fn pem_error(e: &rustls::pki_types::pem::Error, what: &str) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(io) => format!("cannot read it: {io}"),
        Error::NoItemsFound => format!("no PEM {what} block in it"),
        other => format!("not PEM: {other:?}"),
    }
}
