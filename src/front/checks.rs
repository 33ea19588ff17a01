//! Header checks that every MCP request passes before its body is read.

use axum::http::uri::Authority;
use axum::http::{Version, header};

use super::authority;
use super::error::{Reject, ScopeShortfall};
use super::headers::{HeaderLookup, visible_str};
use crate::auth::{Authenticator, Identity, Refusal};
use crate::vocab::{Principal, SessionId};

/// The last Host value this thread found to be a well-formed loopback
/// authority, which passes the Host check under any policy. A connection
/// sends the same Host on every request, and parsing it strictly (an
/// address, a port) cost about 800 instructions a request, a fiftieth of
/// a forwarded call (bench/analysis.md); comparing it costs a few.
mod loopback {
    use std::cell::RefCell;

    /// Longer values are checked each time (a host name is at most 253).
    const MAX: usize = 270;

    thread_local! {
        static HOST: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn seen(host: &[u8]) -> bool {
        !host.is_empty() && HOST.with_borrow(|last| last.as_slice() == host)
    }

    pub(super) fn remember(host: &[u8]) {
        if host.len() <= MAX {
            HOST.with_borrow_mut(|last| {
                last.clear();
                last.extend_from_slice(host);
            });
        }
    }
}

/// What the front admits (a reload replaces it).
#[derive(Clone)]
pub struct Policy {
    /// `[auth]` (None: every client is the anonymous principal).
    pub(crate) auth: Option<std::sync::Arc<Authenticator>>,
    pub allowed_origins: Vec<String>,
    /// A gateway on a loopback address accepts only loopback Host names
    /// (DNS-rebinding defence: a browser page cannot reach it by a name).
    pub loopback_host_only: bool,
    pub max_body_bytes: usize,
    pub stateless: bool,
}

impl Policy {
    /// The DNS-rebinding defence, for every endpoint: a well-formed Host
    /// (one, agreeing with an absolute-form request target, and present
    /// in HTTP/1.1, RFC 9112 section 3.2), loopback when the gateway
    /// listens on loopback, and an allowed Origin if any.
    pub(crate) fn guard(
        &self,
        headers: &impl HeaderLookup,
        target: Option<&Authority>,
        version: Version,
    ) -> Result<(), Reject> {
        let mut hosts = headers.all(&header::HOST);
        let host = match (hosts.next(), hosts.next()) {
            // HTTP/1.0 has no Host to require.
            (None, _) if version == Version::HTTP_11 => return Err(Reject::MissingHost),
            (None, _) => None,
            (Some(h), None) => Some(h),
            (Some(_), Some(_)) => return Err(Reject::BadHost),
        };
        // The common request: origin-form, with the Host its connection
        // sent before; checked then, it passes either way.
        let seen = target.is_none() && host.is_some_and(loopback::seen);
        if !seen {
            self.check_host(host, target)?;
        }
        let mut origins = headers.all(&header::ORIGIN);
        match (origins.next(), origins.next()) {
            (None, _) => Ok(()),
            (Some(origin), None) => {
                let origin = visible_str(origin).ok_or(Reject::ForbiddenOrigin)?;
                let listed = self.allowed_origins.iter().any(|o| o == origin);
                let loopback = self.allowed_origins.is_empty()
                    && authority::parse_origin(origin).is_some_and(|a| a.host.is_loopback());
                if listed || loopback {
                    Ok(())
                } else {
                    Err(Reject::ForbiddenOrigin)
                }
            }
            (Some(_), Some(_)) => Err(Reject::ForbiddenOrigin),
        }
    }

    /// The Host (and an absolute-form target's authority): well-formed,
    /// agreeing, and loopback when the gateway listens on loopback.
    fn check_host(&self, host: Option<&[u8]>, target: Option<&Authority>) -> Result<(), Reject> {
        let parsed = match host {
            None => None,
            Some(h) => Some(
                visible_str(h)
                    .and_then(authority::parse_authority)
                    .ok_or(Reject::BadHost)?,
            ),
        };
        let from_target = target.is_some();
        let target = match target {
            None => None,
            Some(a) => Some(authority::parse_authority(a.as_str()).ok_or(Reject::BadHost)?),
        };
        let effective = match (target, parsed) {
            (Some(t), Some(h)) if !t.same(&h) => return Err(Reject::BadHost),
            (Some(t), _) => Some(t),
            (None, h) => h,
        };
        let is_loopback = effective.as_ref().map(|a| a.host.is_loopback());
        if self.loopback_host_only && is_loopback == Some(false) {
            return Err(Reject::ForbiddenHost);
        }
        if let (Some(h), false, Some(true)) = (host, from_target, is_loopback) {
            loopback::remember(h);
        }
        Ok(())
    }

    /// The associated data a sealed session id is sealed with: the
    /// principal (its token itself: it is never in the id, and an id
    /// sealed for one token cannot open for another, whatever their order
    /// in the config) and the namespace.
    pub(crate) fn binding(&self, principal: &Principal, namespace: &str) -> Vec<u8> {
        let who: &[u8] = match (principal, &self.auth) {
            (Principal::Named(_) | Principal::Unnamed(_), Some(auth)) => auth
                .token(principal)
                .map_or(&[][..], |t| t.expose().as_bytes()),
            (Principal::Subject(digest), _) => digest,
            _ => &[],
        };
        let mut out = Vec::with_capacity(who.len() + namespace.len() + 24);
        out.extend_from_slice(b"sluice-session\0");
        if matches!(principal, Principal::Subject(_)) {
            // Never equal to a static token's bytes.
            out.extend_from_slice(b"subject\0");
        }
        out.extend_from_slice(who);
        out.push(0);
        out.extend_from_slice(namespace.as_bytes());
        out
    }

    /// A name for a principal that every replica computes alike and that
    /// reveals nothing of its token (None: anonymous, no tenant to count):
    /// a named token's name (the principal, whatever token it holds now),
    /// an unnamed one's digest of the token.
    pub(crate) fn principal_digest(&self, principal: &Principal) -> Option<String> {
        match principal {
            Principal::Anonymous => None,
            Principal::Named(name) => Some(format!("name-{name}")),
            Principal::Unnamed(t) => Some(crate::vocab::hex(t.digest())),
            // Already a digest of issuer and subject.
            Principal::Subject(digest) => Some(format!("sub-{}", crate::vocab::hex(digest))),
        }
    }

    /// Who is calling `namespace`'s endpoint: a static token or OAuth
    /// subject, or anonymous without `[auth]`.
    pub(crate) async fn authenticate(
        &self,
        headers: &impl HeaderLookup,
        namespace: &str,
    ) -> Result<Identity, Reject> {
        let Some(auth) = &self.auth else {
            return Ok(Identity::unscoped(Principal::Anonymous));
        };
        auth.authenticate(headers.get_str(&header::AUTHORIZATION), namespace)
            .await
            .map_err(|refusal| match refusal {
                Refusal::Unauthorized(challenge) => Reject::Unauthorized(challenge),
                Refusal::InsufficientScope { challenge, missing } => {
                    Reject::InsufficientScope(Box::new(ScopeShortfall { challenge, missing }))
                }
                Refusal::IssuerUnreachable => Reject::IssuerUnreachable,
            })
    }
}

/// Accept must list both media types (or a wildcard covering them).
pub(super) fn accepts(headers: &impl HeaderLookup, wanted: &[&'static str]) -> Result<(), Reject> {
    // What nearly every client sends for a POST, recognised without parsing.
    const BOTH: [&[u8]; 3] = [
        b"application/json, text/event-stream",
        b"text/event-stream, application/json",
        b"*/*",
    ];
    if wanted == ["application/json", "text/event-stream"]
        && headers
            .get(&header::ACCEPT)
            .is_some_and(|v| BOTH.contains(&v))
    {
        return Ok(());
    }
    let items = || {
        headers
            .all(&header::ACCEPT)
            .filter_map(visible_str)
            .flat_map(|v| v.split(','))
    };
    for want in wanted {
        let ok = items().any(|item| {
            let media = item.split(';').next().unwrap_or("").trim();
            media.eq_ignore_ascii_case(want) || media == "*/*"
        });
        if !ok {
            return Err(Reject::NotAcceptable(if wanted.len() == 2 {
                "application/json and text/event-stream"
            } else {
                want
            }));
        }
    }
    Ok(())
}

pub(super) fn json_content(headers: &impl HeaderLookup) -> Result<(), Reject> {
    let ct = headers.get_str(&header::CONTENT_TYPE).unwrap_or("");
    // What every client sends, decided without splitting it.
    if ct == "application/json" {
        return Ok(());
    }
    let media = ct.split(';').next().unwrap_or("").trim();
    if media.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(Reject::UnsupportedMediaType)
    }
}

pub(super) fn session_id(headers: &impl HeaderLookup) -> Option<SessionId> {
    presented_session_id(headers).map(SessionId::from_header)
}

/// The session id as the client sent it, for a lookup that needs no
/// `SessionId` of its own (making one allocates).
pub(super) fn presented_session_id(headers: &impl HeaderLookup) -> Option<&str> {
    headers.get_str(&crate::protocol::SESSION_HEADER)
}

/// `MCP-Protocol-Version`, when present, must name a revision we speak.
#[inline(always)]
pub(super) fn protocol_version(headers: &impl HeaderLookup) -> Result<Option<&str>, Reject> {
    let Some(v) = headers.get(&crate::protocol::VERSION_HEADER) else {
        return Ok(None);
    };
    let v = visible_str(v).ok_or(Reject::BadProtocolVersion)?;
    Ok(Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap, HeaderValue, Uri};

    fn policy() -> Policy {
        Policy {
            auth: None,
            allowed_origins: vec![],
            loopback_host_only: true,
            max_body_bytes: 1024,
            stateless: false,
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn admit(p: &Policy, h: &HeaderMap) -> Result<(), Reject> {
        p.guard(h, Uri::from_static("/mcp").authority(), Version::HTTP_10)
    }

    /// A Host remembered as loopback passes only as itself, only with an
    /// origin-form target; what is not loopback is never remembered.
    #[test]
    fn a_remembered_host_lets_nothing_else_through() {
        let p = policy();
        let open = Policy {
            loopback_host_only: false,
            ..policy()
        };
        assert!(admit(&open, &headers(&[("host", "evil.example")])).is_ok());
        assert!(matches!(
            admit(&p, &headers(&[("host", "evil.example")])),
            Err(Reject::ForbiddenHost)
        ));
        for _ in 0..2 {
            assert!(admit(&p, &headers(&[("host", "127.0.0.1:7400")])).is_ok());
        }
        for (bad, reject) in [
            ("127.0.0.1:7400x", Reject::BadHost),
            ("127.0.0.1:74000", Reject::BadHost),
            ("127.0.0.2.evil.example", Reject::ForbiddenHost),
        ] {
            let got = admit(&p, &headers(&[("host", bad)]));
            let debug = |r: Reject| format!("{r:?}");
            assert_eq!(got.map_err(debug), Err(debug(reject)), "{bad}");
        }
        let absolute = Uri::from_static("http://evil.example/mcp");
        assert!(matches!(
            p.guard(
                &headers(&[("host", "127.0.0.1:7400")]),
                absolute.authority(),
                Version::HTTP_11
            ),
            Err(Reject::BadHost)
        ));
        assert!(
            admit(
                &p,
                &headers(&[("host", "127.0.0.1:7400"), ("host", "127.0.0.1:7400")])
            )
            .is_err()
        );
    }

    #[test]
    fn origins_and_hosts() {
        let p = policy();
        assert!(
            admit(
                &p,
                &headers(&[
                    ("origin", "http://localhost:3000"),
                    ("host", "127.0.0.1:7400")
                ])
            )
            .is_ok()
        );
        assert!(admit(&p, &headers(&[("origin", "http://[::1]:9")])).is_ok());
        assert!(matches!(
            admit(&p, &headers(&[("origin", "https://evil.example")])),
            Err(Reject::ForbiddenOrigin)
        ));
        assert!(matches!(
            admit(&p, &headers(&[("host", "evil.example:7400")])),
            Err(Reject::ForbiddenHost)
        ));
        for bad in ["[::1].evil.com", "[::1]evil.com:80"] {
            assert!(matches!(
                admit(&p, &headers(&[("host", bad)])),
                Err(Reject::BadHost)
            ));
        }
        assert!(matches!(
            admit(
                &p,
                &headers(&[("host", "127.0.0.1"), ("host", "evil.example")])
            ),
            Err(Reject::BadHost)
        ));
        // An absolute-form target names the host, whatever Host says.
        let absolute = Uri::from_static("http://evil.example/metrics");
        assert!(matches!(
            p.guard(&headers(&[]), absolute.authority(), Version::HTTP_10),
            Err(Reject::ForbiddenHost)
        ));
        assert!(matches!(
            p.guard(
                &headers(&[("host", "127.0.0.1")]),
                absolute.authority(),
                Version::HTTP_11
            ),
            Err(Reject::BadHost)
        ));
        let listed = Policy {
            allowed_origins: vec!["https://app.example".into()],
            ..policy()
        };
        assert!(admit(&listed, &headers(&[("origin", "https://app.example")])).is_ok());
        assert!(admit(&listed, &headers(&[("origin", "http://localhost")])).is_err());
    }

    #[test]
    fn accept_rules() {
        let both = ["application/json", "text/event-stream"];
        assert!(
            accepts(
                &headers(&[("accept", "application/json, text/event-stream")]),
                &both
            )
            .is_ok()
        );
        assert!(accepts(&headers(&[("accept", "*/*")]), &both).is_ok());
        assert!(accepts(&headers(&[("accept", "application/json")]), &both).is_err());
        assert!(accepts(&headers(&[]), &both).is_err());
    }
}
