use super::*;
use crate::vocab::PrincipalName;

fn ring() -> KeyRing {
    KeyRing::parse(&KeyRing::generate()).unwrap()
}

fn who(name: &str) -> Principal {
    Principal::Named(PrincipalName::new(name).unwrap())
}

fn backend(name: &str) -> BackendName {
    BackendName::new(name).unwrap()
}

fn grant() -> Grant {
    Grant {
        access: Secret::new("access-SEKRIT-1"),
        refresh: Some(Secret::new("refresh-SEKRIT-2")),
        expires: Some(1_800_003_600),
        scope: Some("read write".into()),
        connected: 1_800_000_000,
    }
}

#[test]
fn a_sealed_grant_opens_as_it_was_and_shows_no_token() {
    let ring = ring();
    let alice = who("alice");
    let f = field(&alice).unwrap();
    let text = seal_grant(&ring, &backend("gh"), &alice, &grant()).unwrap();
    assert!(text.starts_with("g1."), "{text}");
    for token in ["access-SEKRIT-1", "refresh-SEKRIT-2", "SEKRIT"] {
        assert!(!text.contains(token), "{text}");
    }
    assert_eq!(
        open_grant(&ring, &backend("gh"), &f, &text),
        Some((alice.clone(), grant()))
    );
    // Every kind of principal comes back as itself.
    for p in [
        Principal::subject("https://issuer.example.com", "auth0|5f2a9c"),
        Principal::Unnamed(crate::vocab::UnnamedToken::new("tok", 3)),
    ] {
        let text = seal_grant(&ring, &backend("gh"), &p, &grant()).unwrap();
        let f = field(&p).unwrap();
        assert_eq!(open_grant(&ring, &backend("gh"), &f, &text).unwrap().0, p);
    }
    assert_eq!(
        field(&Principal::Anonymous),
        None,
        "the anonymous hold none"
    );
}

#[test]
fn a_wrong_key_another_principal_or_backend_and_tampering_refuse() {
    let ring = ring();
    let alice = who("alice");
    let f = field(&alice).unwrap();
    let text = seal_grant(&ring, &backend("gh"), &alice, &grant()).unwrap();
    assert_eq!(
        open_grant(&self::ring(), &backend("gh"), &f, &text),
        None,
        "another key"
    );
    assert_eq!(
        open_grant(&ring, &backend("gh"), &field(&who("bob")).unwrap(), &text),
        None,
        "copied to bob's field"
    );
    assert_eq!(
        open_grant(&ring, &backend("linear"), &f, &text),
        None,
        "copied to another backend"
    );
    let mut flipped = text.clone().into_bytes();
    let i = flipped.len() - 4;
    flipped[i] = if flipped[i] == b'A' { b'B' } else { b'A' };
    for bad in [
        String::from_utf8(flipped).unwrap(),
        text.replacen("g1.", "f1.", 1),
        "g1.".to_owned(),
        format!("g1.{}", "A".repeat(40_000)),
    ] {
        assert_eq!(open_grant(&ring, &backend("gh"), &f, &bad), None, "{bad}");
    }
    // Rotation: a ring that still holds the old key opens it.
    let (old, new) = (KeyRing::generate(), KeyRing::generate());
    let sealed = seal_grant(
        &KeyRing::parse(&old).unwrap(),
        &backend("gh"),
        &alice,
        &grant(),
    )
    .unwrap();
    let both = KeyRing::parse(&format!("{new},{old}")).unwrap();
    assert!(open_grant(&both, &backend("gh"), &f, &sealed).is_some());
}

#[test]
fn a_start_record_holds_no_secret_and_reads_back() {
    let record = StartRecord {
        principal: who("alice"),
        backend: "gh".into(),
        expires: 1_800_000_600,
    };
    let json = serde_json::to_string(&record).unwrap();
    assert_eq!(serde_json::from_str::<StartRecord>(&json).unwrap(), record);
}

#[test]
fn a_registration_is_sealed_and_opens_only_for_its_server_and_redirect() {
    let ring = ring();
    let tag = client_tag(
        "https://as.example.com",
        "https://gw.example.com/oauth/callback",
    );
    assert_ne!(
        tag,
        client_tag(
            "https://as.example.com",
            "https://other.example.com/oauth/callback"
        )
    );
    let client = ClientIdentity::configured("client-1", Some(Secret::new("client-SEKRIT")));
    let text = seal_client(&ring, &backend("gh"), &tag, &client).unwrap();
    assert!(
        !text.contains("SEKRIT") && !text.contains("client-1"),
        "{text}"
    );
    assert_eq!(
        open_client(&ring, &backend("gh"), &tag, &text),
        Some(client)
    );
    assert_eq!(open_client(&ring, &backend("gh"), "other", &text), None);
    assert_eq!(
        open_client(&self::ring(), &backend("gh"), &tag, &text),
        None
    );
}
