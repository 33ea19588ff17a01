//! `[server] tls`: both files named, each read as PEM, the key the
//! certificate's own; every failure names its key. `[cluster]`'s client
//! certificate and CA likewise.

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::*;

/// A self-signed certificate and its key, as PEM.
fn pair() -> (String, String) {
    let c = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    (c.cert.pem(), c.signing_key.serialize_pem())
}

/// A config with `tls` over files written to a directory of its own.
fn with_tls(dir: &std::path::Path, cert: &str, key: &str) -> String {
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, cert).unwrap();
    std::fs::write(&k, key).unwrap();
    format!(
        "[server]\ntls = {{ cert_file = \"{}\", key_file = \"{}\" }}\n{MINIMAL}",
        c.display(),
        k.display()
    )
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-tls-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_certificate_and_its_key_are_served_and_shown() {
    let dir = scratch("ok");
    let (cert, key) = pair();
    let loaded = ok(&with_tls(&dir, &cert, &key), &[]);
    let tls = loaded.config.server.tls.as_ref().expect("tls on");
    assert!(tls.cert_file.ends_with("cert.pem"));
    let shown = describe(&loaded);
    assert!(
        shown.contains("server.tls") && shown.contains("on: certificate"),
        "{shown}"
    );
    assert!(describe(&ok(MINIMAL, &[])).contains("off (plain TCP)"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn each_bad_file_is_named_by_its_key() {
    let dir = scratch("bad");
    let (cert, key) = pair();
    let (_, other_key) = pair();
    let cases = [
        (
            cert.as_str(),
            other_key.as_str(),
            "`server.tls.key_file`: ",
            "is not the key of the certificate",
        ),
        (
            "not pem",
            key.as_str(),
            "`server.tls.cert_file`: ",
            "no PEM CERTIFICATE",
        ),
        (
            cert.as_str(),
            "",
            "`server.tls.key_file`: ",
            "no PEM PRIVATE KEY",
        ),
        (
            key.as_str(),
            key.as_str(),
            "`server.tls.cert_file`: ",
            "no PEM CERTIFICATE",
        ),
    ];
    for (c, k, at, why) in cases {
        let all = err(&with_tls(&dir, c, k), &[]).join("\n");
        assert!(all.contains(at) && all.contains(why), "{at} {why}:\n{all}");
        assert!(all.contains("sluice.toml:2"), "the line of `tls`:\n{all}");
    }
    let missing = format!(
        "[server]\ntls = {{ cert_file = \"{}\", key_file = \"/nonexistent/key.pem\" }}\n{MINIMAL}",
        dir.join("cert.pem").display()
    );
    std::fs::write(dir.join("cert.pem"), &cert).unwrap();
    let all = err(&missing, &[]).join("\n");
    assert!(
        all.contains("server.tls.key_file") && all.contains("cannot read it"),
        "{all}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn both_files_are_required() {
    let only_cert = format!("[server]\ntls = {{ cert_file = \"/x.pem\" }}\n{MINIMAL}");
    let all = err(&only_cert, &[]).join("\n");
    assert!(all.contains("`server.tls.key_file`: required"), "{all}");
    let neither = format!("[server]\ntls = {{ }}\n{MINIMAL}");
    let all = err(&neither, &[]).join("\n");
    assert!(
        all.contains("server.tls.cert_file") && all.contains("server.tls.key_file"),
        "{all}"
    );
    let unknown = format!("[server]\ntls = {{ cert = \"/x.pem\" }}\n{MINIMAL}");
    assert!(err(&unknown, &[]).join("\n").contains("cert"));
}

#[test]
fn auth_beyond_loopback_in_plain_tcp_is_warned_of() {
    let open = format!(
        "[server]\nlisten = \"0.0.0.0:7400\"\n[auth]\nbearer_tokens_env = \"T\"\n{MINIMAL}"
    );
    let loaded = ok(&open, &[("T", "secret")]);
    let warns = |loaded: &Loaded| {
        lint::lint(&loaded.config, &env(&[]), build::Syntax::Toml)
            .into_iter()
            .any(|(severity, i)| {
                severity == lint::Severity::Warning && i.message.starts_with("`server.tls`")
            })
    };
    assert!(warns(&loaded));
    let dir = scratch("lint");
    let (cert, key) = pair();
    let tls = with_tls(&dir, &cert, &key)
        .replace("[server]\n", "[server]\nlisten = \"0.0.0.0:7400\"\n")
        + "[auth]\nbearer_tokens_env = \"T\"\n";
    let loaded = ok(&tls, &[("T", "secret")]);
    assert!(!warns(&loaded));
    std::fs::remove_dir_all(dir).unwrap();
}

/// `[cluster]` over TLS (issue 49): the client certificate, its key and
/// the CA are read as the Redis client's rustls reads them at each
/// connection, so what it refuses is refused at load (start, reload,
/// `check`), named by its key, and not met at every reconnection.
#[test]
fn redis_client_files_rustls_refuses_are_refused() {
    let dir = scratch("redis");
    let (cert, key) = pair();
    let (_, other_key) = pair();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let (cert, key, other_key, junk) = (
        file("cert.pem", &cert),
        file("key.pem", &key),
        file("other.pem", &other_key),
        file("junk.pem", "not pem"),
    );
    let session_key = crate::vocab::generate_key();
    let sealed = [("SLUICE_SESSION_KEY", session_key.as_str())];
    let cluster = |ca: &str, cert: &str, key: &str| {
        format!(
            "[server]\nsession_ids = \"sealed\"\n[cluster]\nredis_url = \"rediss://127.0.0.1:1/\"\n\
             redis_ca_file = \"{ca}\"\nredis_client_cert_file = \"{cert}\"\n\
             redis_client_key_file = \"{key}\"\n{MINIMAL}"
        )
    };
    let loaded = ok(&cluster(&cert, &cert, &key), &sealed);
    let c = loaded.config.cluster.unwrap();
    assert!(c.ca_file.is_some() && c.client_cert.is_some());

    // The refusal checked is rustls's own: a client configuration with
    // this certificate and another key is not made.
    let chain = vec![CertificateDer::from_pem_file(&cert).unwrap()];
    let wrong = PrivateKeyDer::from_pem_file(&other_key).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(tls_provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(chain, wrong);
    assert!(client.is_err());

    let cases = [
        (
            cluster(&cert, &cert, &other_key),
            "sluice.toml:7: `cluster.redis_client_key_file`: ",
            "is not the key of the certificate",
        ),
        (
            cluster(&cert, &junk, &key),
            "sluice.toml:6: `cluster.redis_client_cert_file`: ",
            "no PEM CERTIFICATE",
        ),
        (
            cluster(&cert, &cert, &junk),
            "sluice.toml:7: `cluster.redis_client_key_file`: ",
            "no PEM PRIVATE KEY",
        ),
        (
            cluster(&junk, &cert, &key),
            "sluice.toml:5: `cluster.redis_ca_file`: ",
            "no PEM CERTIFICATE",
        ),
    ];
    for (text, at, why) in cases {
        let all = err(&text, &sealed).join("\n");
        assert!(all.contains(at) && all.contains(why), "{at} {why}:\n{all}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
