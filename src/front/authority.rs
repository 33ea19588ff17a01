//! Strict parsing of `Host` and `Origin` values, for the DNS-rebinding
//! defence. Anything that is not plainly `host[:port]` (or, for an Origin,
//! `scheme://host[:port]`) is refused rather than guessed at: a lenient
//! parser is how `[::1].evil.com` passes for loopback.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The host part of an authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host<'a> {
    /// A DNS name: letters, digits, `-`, `.` and `_` only.
    Name(&'a str),
    V4(Ipv4Addr),
    /// Written in brackets.
    V6(Ipv6Addr),
}

impl Host<'_> {
    pub(crate) fn is_loopback(&self) -> bool {
        match self {
            Host::Name(n) => n.eq_ignore_ascii_case("localhost"),
            Host::V4(ip) => IpAddr::V4(*ip).is_loopback(),
            Host::V6(ip) => ip.is_loopback(),
        }
    }

    fn same(&self, other: &Host<'_>) -> bool {
        match (self, other) {
            (Host::Name(a), Host::Name(b)) => a.eq_ignore_ascii_case(b),
            _ => self == other,
        }
    }
}

/// `host[:port]` as a `Host` header or a URI authority writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authority<'a> {
    pub(crate) host: Host<'a>,
    pub(crate) port: Option<u16>,
}

impl Authority<'_> {
    /// The same place: hosts compared without case, ports exactly.
    pub(crate) fn same(&self, other: &Authority<'_>) -> bool {
        self.host.same(&other.host) && self.port == other.port
    }
}

/// Parses `host[:port]`; None for anything else (userinfo, paths, junk
/// after a bracket, empty or out-of-range ports, stray characters).
pub(crate) fn parse_authority(s: &str) -> Option<Authority<'_>> {
    let (host, rest) = if let Some(v6) = s.strip_prefix('[') {
        let (inside, rest) = v6.split_once(']')?;
        (Host::V6(inside.parse().ok()?), rest)
    } else {
        let (name, rest) = match s.find(':') {
            Some(i) => s.split_at(i),
            None => (s, ""),
        };
        (host_name(name)?, rest)
    };
    let port = match rest {
        "" => None,
        p => Some(port(p.strip_prefix(':')?)?),
    };
    Some(Authority { host, port })
}

fn host_name(s: &str) -> Option<Host<'_>> {
    if s.is_empty() || s.len() > 253 {
        return None;
    }
    let dns = s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !dns {
        return None;
    }
    // A name whose last label starts with a digit is an address to a
    // browser (WHATWG URL), and must be a well-formed dotted one here:
    // `127.1` and `0x7f.0.0.1` are refused, not resolved.
    let last = s.rsplit('.').find(|l| !l.is_empty()).unwrap_or(s);
    if last.starts_with(|c: char| c.is_ascii_digit()) {
        return s.parse().ok().map(Host::V4);
    }
    Some(Host::Name(s))
}

fn port(s: &str) -> Option<u16> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses an `Origin`: `http://` or `https://`, then an authority, then
/// nothing. `null` and every other scheme are not origins we can place.
pub(crate) fn parse_origin(s: &str) -> Option<Authority<'_>> {
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))?;
    parse_authority(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_parsed_strictly() {
        let loopback = |s| parse_authority(s).is_some_and(|a| a.host.is_loopback());
        for ok in [
            "localhost",
            "LOCALHOST:7400",
            "127.0.0.1",
            "127.3.2.1:80",
            "[::1]",
            "[::1]:7400",
        ] {
            assert!(loopback(ok), "{ok}");
        }
        for not_loopback in [
            "evil.com",
            "evil.com:80",
            "10.0.0.1",
            "[::2]",
            "localhost.evil",
        ] {
            assert!(parse_authority(not_loopback).is_some(), "{not_loopback}");
            assert!(!loopback(not_loopback), "{not_loopback}");
        }
        for junk in [
            "",
            "[::1].evil.com",
            "[::1]evil.com:80",
            "[::1",
            "[evil.com]",
            "127.1",
            "0x7f.0.0.1",
            "localhost:",
            "localhost:99999",
            "localhost:80:80",
            "localhost:+80",
            "user@localhost",
            "localhost/path",
            "local host",
            "localhost\u{0}",
            "127.0.0.1 .evil.com",
        ] {
            assert_eq!(parse_authority(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn origins_are_parsed_strictly() {
        assert!(parse_origin("http://localhost:3000").is_some_and(|a| a.host.is_loopback()));
        assert!(parse_origin("https://[::1]").is_some_and(|a| a.host.is_loopback()));
        assert!(parse_origin("https://evil.example").is_some_and(|a| !a.host.is_loopback()));
        for junk in [
            "null",
            "file://",
            "http://localhost/",
            "http://localhost.evil.com@x",
            "http://[::1].evil.com",
            "localhost",
        ] {
            assert_eq!(parse_origin(junk), None, "{junk}");
        }
    }

    #[test]
    fn same_authority_ignores_case_of_names_only() {
        let a = parse_authority("LocalHost:80").unwrap();
        assert!(a.same(&parse_authority("localhost:80").unwrap()));
        assert!(!a.same(&parse_authority("localhost").unwrap()));
    }
}
