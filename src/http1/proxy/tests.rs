use std::collections::HashMap;

use super::*;

fn env(pairs: &[(&str, &str)]) -> Proxy {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Proxy::from_vars(|n| map.get(n).cloned()).unwrap()
}

fn via(p: &Proxy, url: &str) -> Option<String> {
    p.route(&url.parse().unwrap()).map(|p| p.shown.to_string())
}

#[test]
fn no_proxy_matches_hosts_domains_and_blocks() {
    let no = NoProxy::parse(
        "exact.test, .corp.example, example.org:8443, 10.0.0.0/8, 192.168.1.7, fd00::/8, [::1]:80, *.wild.test",
    );
    for host in [
        "exact.test",
        "EXACT.test",
        "corp.example",
        "a.b.corp.example",
        "example.org",
        "api.example.org",
        "example.org.",
        "10.1.2.3",
        "192.168.1.7",
        "[fd12::1]",
        "[::1]",
        "x.wild.test",
    ] {
        assert!(no.contains(host), "{host} should go direct");
    }
    for host in [
        "notexact.test",
        "exact.test.evil",
        "xcorp.example",
        "notexample.org",
        "11.0.0.1",
        "192.168.1.8",
        "[fe80::1]",
        "127.0.0.1",
        "localhost",
    ] {
        assert!(!no.contains(host), "{host} should go through the proxy");
    }
    assert!(NoProxy::parse("*").contains("anything.at.all"));
    assert!(NoProxy::parse(" , ").domains.is_empty());
    // A mapped IPv6 host is checked against an IPv4 block.
    assert!(NoProxy::parse("10.0.0.0/8").contains("[::ffff:10.0.0.1]"));
    // A block too wide is no block (and no name either).
    assert!(!NoProxy::parse("10.0.0.0/33").contains("10.0.0.1"));
    assert!(NoProxy::parse("0.0.0.0/0").contains("203.0.113.9"));
}

#[test]
fn the_environment_is_read_as_reqwest_reads_it() {
    let p = env(&[
        ("HTTP_PROXY", "http://upper:1"),
        ("http_proxy", "http://lower:2"),
        ("https_proxy", "lower-s:3"),
    ]);
    assert_eq!(via(&p, "http://a.test/").as_deref(), Some("http://upper:1"));
    assert_eq!(
        via(&p, "https://a.test/").as_deref(),
        Some("http://lower-s:3")
    );

    // ALL_PROXY fills in for either; an empty variable is unset.
    let p = env(&[
        ("HTTP_PROXY", ""),
        ("ALL_PROXY", "http://all:9"),
        ("HTTPS_PROXY", "http://s:8"),
    ]);
    assert_eq!(via(&p, "http://a.test/").as_deref(), Some("http://all:9"));
    assert_eq!(via(&p, "https://a.test/").as_deref(), Some("http://s:8"));

    // NO_PROXY, upper case first.
    let p = env(&[
        ("HTTP_PROXY", "http://p:1"),
        ("NO_PROXY", "direct.test"),
        ("no_proxy", "other.test"),
    ]);
    assert_eq!(via(&p, "http://direct.test:8080/mcp"), None);
    assert!(via(&p, "http://other.test/").is_some());

    // Only http for http targets: https ones go direct.
    let p = env(&[("http_proxy", "http://p:1")]);
    assert_eq!(via(&p, "https://a.test/"), None);
    assert_eq!(env(&[]), Proxy::none());
}

#[test]
fn a_fixed_proxy_takes_everything() {
    let p = Proxy::all("http://p.test:3128").unwrap();
    assert!(via(&p, "http://localhost/").is_some());
    assert!(via(&p, "https://10.0.0.1/").is_some());
    assert_eq!(via(&Proxy::none(), "http://a.test/"), None);
}

#[test]
fn proxy_urls_are_parsed_and_their_credentials_kept_out_of_sight() {
    let u = ProxyUrl::parse("http://us%40er:p%3Ass@proxy.test:3128/ignored").unwrap();
    assert_eq!(u.uri, "http://proxy.test:3128/");
    assert_eq!(&*u.shown, "http://proxy.test:3128");
    // "us@er:p:ss", percent-decoded, in Basic.
    assert_eq!(u.auth.as_ref().unwrap(), "Basic dXNAZXI6cDpzcw==");
    assert!(u.auth.as_ref().unwrap().is_sensitive());

    let u = ProxyUrl::parse("proxy.test").unwrap();
    assert_eq!(&*u.shown, "http://proxy.test:80");
    assert!(u.auth.is_none());
    let u = ProxyUrl::parse("http://[::1]:8080").unwrap();
    assert_eq!(&*u.shown, "http://[::1]:8080");
    let u = ProxyUrl::parse("http://user@p.test").unwrap();
    assert_eq!(u.auth.as_ref().unwrap(), "Basic dXNlcjo=");

    for bad in [
        "https://p.test",
        "socks5://p.test:1080",
        "http://",
        "http://a b",
    ] {
        assert!(ProxyUrl::parse(bad).is_err(), "{bad}");
    }
    let e = ProxyUrl::parse("https://user:secret@p.test").unwrap_err();
    assert!(!e.contains("secret"), "{e}");

    let bad = Proxy::from_vars(|n| (n == "HTTPS_PROXY").then(|| "ftp://x".to_owned()));
    assert_eq!(bad.unwrap_err().var, "HTTPS_PROXY");

    let p = Proxy::all("http://user:secret@p.test:1").unwrap();
    let debug = format!("{p:?}");
    assert!(
        !debug.contains("secret") && !debug.contains("user"),
        "{debug}"
    );
}
