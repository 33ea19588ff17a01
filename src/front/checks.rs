//! Header checks that every MCP request passes before its body is read.

use axum::http::{HeaderMap, header};

use super::error::Reject;
use crate::config::Secret;
use crate::sessions::{Principal, SessionId};

/// What the front admits, fixed at startup.
pub struct Policy {
    pub tokens: Option<Vec<Secret>>,
    pub allowed_origins: Vec<String>,
    /// A gateway on a loopback address accepts only loopback Host names
    /// (DNS-rebinding defence: a browser page cannot reach it by a name).
    pub loopback_host_only: bool,
    pub max_body_bytes: usize,
    pub stateless: bool,
}

impl Policy {
    pub fn admit(&self, headers: &HeaderMap) -> Result<Principal, Reject> {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().map_err(|_| Reject::ForbiddenOrigin)?;
            let listed = self.allowed_origins.iter().any(|o| o == origin);
            let loopback = self.allowed_origins.is_empty() && origin_is_loopback(origin);
            if !listed && !loopback {
                return Err(Reject::ForbiddenOrigin);
            }
        }
        if self.loopback_host_only
            && let Some(host) = headers.get(header::HOST)
        {
            let host = host.to_str().map_err(|_| Reject::ForbiddenHost)?;
            if !is_loopback_name(strip_port(host)) {
                return Err(Reject::ForbiddenHost);
            }
        }
        self.authenticate(headers)
    }

    fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Reject> {
        let Some(tokens) = &self.tokens else {
            return Ok(Principal::Anonymous);
        };
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .ok_or(Reject::Unauthorized)?;
        tokens
            .iter()
            .position(|t| t.matches(presented.trim()))
            .map(Principal::Token)
            .ok_or(Reject::Unauthorized)
    }
}

fn origin_is_loopback(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    is_loopback_name(strip_port(rest))
}

fn strip_port(host: &str) -> &str {
    if let Some(v6) = host.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Accept must list both media types (or a wildcard covering them).
pub(super) fn accepts(headers: &HeaderMap, wanted: &[&'static str]) -> Result<(), Reject> {
    let accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    for want in wanted {
        let ok = accept.split(',').any(|item| {
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

pub(super) fn json_content(headers: &HeaderMap) -> Result<(), Reject> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = ct.split(';').next().unwrap_or("").trim();
    if media.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(Reject::UnsupportedMediaType)
    }
}

pub(super) fn session_id(headers: &HeaderMap) -> Option<SessionId> {
    headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(SessionId::from_header)
}

/// `MCP-Protocol-Version`, when present, must name a revision we speak.
pub(super) fn protocol_version(headers: &HeaderMap) -> Result<Option<&str>, Reject> {
    let Some(v) = headers.get("mcp-protocol-version") else {
        return Ok(None);
    };
    let v = v.to_str().map_err(|_| Reject::BadProtocolVersion)?;
    Ok(Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn policy() -> Policy {
        Policy {
            tokens: None,
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

    #[test]
    fn origins_and_hosts() {
        let p = policy();
        assert!(
            p.admit(&headers(&[
                ("origin", "http://localhost:3000"),
                ("host", "127.0.0.1:7400")
            ]))
            .is_ok()
        );
        assert!(p.admit(&headers(&[("origin", "http://[::1]:9")])).is_ok());
        assert!(matches!(
            p.admit(&headers(&[("origin", "https://evil.example")])),
            Err(Reject::ForbiddenOrigin)
        ));
        assert!(matches!(
            p.admit(&headers(&[("host", "evil.example:7400")])),
            Err(Reject::ForbiddenHost)
        ));
        let listed = Policy {
            allowed_origins: vec!["https://app.example".into()],
            ..policy()
        };
        assert!(
            listed
                .admit(&headers(&[("origin", "https://app.example")]))
                .is_ok()
        );
        assert!(
            listed
                .admit(&headers(&[("origin", "http://localhost")]))
                .is_err()
        );
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
