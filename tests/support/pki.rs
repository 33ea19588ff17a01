//! A CA of the test's own, and the certificates it signs (for TLS to
//! Redis, on the gateway's listener, and on a backend behind a proxy).

/// A CA, and its certificate as PEM for clients to trust.
pub struct Pki {
    ca: rcgen::Issuer<'static, rcgen::KeyPair>,
    pub ca_pem: String,
}

impl Pki {
    pub fn new() -> Pki {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "sluice test CA");
        let ca_pem = params.self_signed(&key).unwrap().pem();
        Pki {
            ca: rcgen::Issuer::new(params, key),
            ca_pem,
        }
    }

    /// A certificate for `name` (an IP address or a DNS name, also its
    /// common name) and its key, as PEM.
    pub fn issue(&self, name: &str) -> (String, String) {
        self.issue_as(name, name, None)
    }

    /// A certificate for `name` with this common name and serial number.
    pub fn issue_as(&self, name: &str, cn: &str, serial: Option<u64>) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.serial_number = serial.map(rcgen::SerialNumber::from);
        let cert = params.signed_by(&key, &self.ca).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}
