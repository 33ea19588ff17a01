//! Why a call to a backend produced no JSON-RPC outcome. Every message
//! names the backend, so a client can tell which of many failed.

use crate::vocab::BackendName;

#[derive(Debug, Clone, thiserror::Error)]
#[error("backend `{backend}` {kind}")]
pub struct UpstreamError {
    backend: BackendName,
    kind: ErrorKind,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum ErrorKind {
    #[error("is unavailable: {0}")]
    Unavailable(String),
    /// Refused without trying: the backend is known to be down.
    #[error("is unavailable ({0})")]
    Down(&'static str),
    #[error("exited before answering")]
    Exited,
    /// The request never reached the backend: it may be sent again.
    #[error("is unavailable: its session ended before the request was sent")]
    NotSent,
    #[error("did not answer in time")]
    Timeout,
    #[error("has too many requests in flight")]
    Overloaded,
    #[error("has reached its limit of {0} backend sessions")]
    AtCapacity(usize),
    #[error("failed: {0}")]
    Protocol(String),
    /// It answered HTTP 401: the credential sent was refused (its text as
    /// `Protocol`'s, its meaning typed: a grant's token is then dropped).
    #[error("failed: {0}")]
    CredentialRefused(String),
    /// The call could not be given the credential the backend takes.
    #[error("cannot be called for this client: {0}")]
    Unauthorized(String),
    /// Its answer would take the bodies in flight past the gateway's budget.
    #[error(
        "answered with a body too large for the gateway to hold now ({} bytes more, with {} of the {} bytes of `max_inflight_body_bytes` held by other bodies in flight); retry later",
        .0.wanted, .0.held, .0.limit
    )]
    OverBudget(crate::budget::Refused),
}

impl UpstreamError {
    fn new(backend: &BackendName, kind: ErrorKind) -> Self {
        Self {
            backend: backend.clone(),
            kind,
        }
    }
    pub(super) fn exited(b: &BackendName) -> Self {
        Self::new(b, ErrorKind::Exited)
    }
    pub(super) fn not_sent(b: &BackendName) -> Self {
        Self::new(b, ErrorKind::NotSent)
    }
    pub(super) fn timeout(b: &BackendName) -> Self {
        Self::new(b, ErrorKind::Timeout)
    }
    pub(super) fn overloaded(b: &BackendName) -> Self {
        Self::new(b, ErrorKind::Overloaded)
    }
    pub(super) fn unavailable(b: &BackendName, why: impl Into<String>) -> Self {
        Self::new(b, ErrorKind::Unavailable(why.into()))
    }
    /// A transport failure (never naming the URL: see `SendError`).
    pub(super) fn from_http(b: &BackendName, e: crate::http1::client::SendError) -> Self {
        Self::unavailable(b, e.to_string())
    }
    pub(super) fn at_capacity(b: &BackendName, max: usize) -> Self {
        Self::new(b, ErrorKind::AtCapacity(max))
    }
    /// The backend answered, but not as MCP says it should.
    pub(super) fn protocol(b: &BackendName, why: impl Into<String>) -> Self {
        Self::new(b, ErrorKind::Protocol(why.into()))
    }

    /// `what` answered an HTTP status that is no success.
    pub(super) fn http_status(b: &BackendName, what: &str, status: http::StatusCode) -> Self {
        let why = format!("{what}answered HTTP {status}");
        match status {
            http::StatusCode::UNAUTHORIZED => Self::new(b, ErrorKind::CredentialRefused(why)),
            _ => Self::new(b, ErrorKind::Protocol(why)),
        }
    }

    /// Its answer did not fit in the budget for bodies in flight.
    pub(super) fn over_budget(b: &BackendName, refused: crate::budget::Refused) -> Self {
        Self::new(b, ErrorKind::OverBudget(refused))
    }

    /// No credential for this client's call (token exchange refused).
    pub(super) fn unauthorized(b: &BackendName, why: impl Into<String>) -> Self {
        Self::new(b, ErrorKind::Unauthorized(why.into()))
    }

    /// Fails fast while the backend is known to be down: only the reason
    /// class reaches the client (details such as commands stay in the log).
    pub(super) fn down(b: &BackendName, reason: &'static str) -> Self {
        Self::new(b, ErrorKind::Down(reason))
    }

    /// A short class for health output: what kind of failure, never its
    /// details (which may name commands, paths or hosts).
    pub fn reason(&self) -> &'static str {
        match &self.kind {
            ErrorKind::Unavailable(_) => "unreachable",
            ErrorKind::Down(r) => r,
            ErrorKind::Exited | ErrorKind::NotSent => "exited",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::AtCapacity(_) => "at_capacity",
            ErrorKind::Protocol(_) | ErrorKind::CredentialRefused(_) => "protocol_error",
            ErrorKind::Unauthorized(_) => "unauthorized",
            ErrorKind::OverBudget(_) => "over_budget",
        }
    }

    /// The backend answered 401: the credential sent was refused.
    pub(super) fn is_refused_credential(&self) -> bool {
        matches!(self.kind, ErrorKind::CredentialRefused(_))
    }

    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }

    /// The request was not delivered, so retrying it cannot run it twice.
    pub(super) fn is_not_sent(&self) -> bool {
        self.kind == ErrorKind::NotSent
    }

    /// The backend could not be reached at all: its health is in question.
    pub(super) fn is_unreachable(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Unavailable(_) | ErrorKind::Down(_) | ErrorKind::NotSent
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_401_says_the_credential_was_refused() {
        let b = BackendName::new("github").unwrap();
        let refused = UpstreamError::http_status(&b, "initialize ", http::StatusCode::UNAUTHORIZED);
        assert!(refused.is_refused_credential());
        assert_eq!(refused.reason(), "protocol_error");
        assert!(
            refused
                .to_string()
                .ends_with("initialize answered HTTP 401 Unauthorized")
        );
        for other in [http::StatusCode::FORBIDDEN, http::StatusCode::BAD_GATEWAY] {
            assert!(!UpstreamError::http_status(&b, "", other).is_refused_credential());
        }
        // A body that merely quotes a 401 is no refusal.
        assert!(!UpstreamError::protocol(&b, "answered HTTP 401").is_refused_credential());
    }
}
