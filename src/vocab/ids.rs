//! Who and what requests belong to: session ids, the principals that own
//! them, the client a backend session serves, and a client session as
//! something that ends.

use std::fmt;
use std::sync::Arc;

use super::PrincipalName;

/// 192 bits of OS randomness, hex encoded: visible ASCII, unguessable (or,
/// with sealed ids, the sealed session).
#[derive(Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SessionId(Arc<str>);

impl SessionId {
    pub fn random() -> SessionId {
        SessionId(super::random::hex(24).into())
    }

    /// The id a client presented; only looked up, never trusted.
    pub fn from_header(value: &str) -> SessionId {
        SessionId(value.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A table keyed by ids is looked up by the text a client presented,
/// without making an id of it (an allocation per request).
impl std::borrow::Borrow<str> for SessionId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// Never print an id: logs and errors must not leak them.
impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionId(..)")
    }
}

/// Who is calling: a static bearer token (by its name, or an unnamed one
/// by a digest of the token; never by its position, never its value), an
/// OAuth subject (a digest of its issuer and `sub`, never the claims
/// themselves), or anonymous when the gateway runs without `[auth]`.
///
/// A principal owns sessions, counts against per-principal limits and is
/// what scopes are given to, so it must not change when the list of tokens
/// does: a token's position did (retiring the first token made the second
/// `token#0`, with the first one's scopes and sessions).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Principal {
    Anonymous,
    /// A named static token (`NAME=TOKEN`): the name is the principal,
    /// wherever the token stands in the list. One `Arc` to clone, as a
    /// request's scopes or OAuth token already are.
    Named(PrincipalName),
    /// A static token without a name.
    Unnamed(UnnamedToken),
    Subject([u8; 16]),
}

/// An unnamed static token as a principal: known by a digest of the token
/// itself, so a reload that moves or removes tokens never hands one
/// token's sessions to another; shown by its position (`token#N`), which
/// is why nothing may be keyed by it.
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct UnnamedToken {
    digest: [u8; 16],
    position: u32,
}

impl UnnamedToken {
    /// The unnamed token `token`, at `position` in `bearer_tokens_env`.
    pub fn new(token: &str, position: usize) -> UnnamedToken {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        h.update(b"sluice-principal\0");
        h.update(token.as_bytes());
        let mut digest = [0; 16];
        digest.copy_from_slice(&h.finalize()[..16]);
        UnnamedToken {
            digest,
            position: u32::try_from(position).unwrap_or(u32::MAX),
        }
    }

    /// What reveals nothing of the token and is alike on every replica.
    pub fn digest(&self) -> &[u8; 16] {
        &self.digest
    }
}

/// The token, not its position: the same token is the same principal
/// after a reload that moved it.
impl PartialEq for UnnamedToken {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}

impl Eq for UnnamedToken {}

impl std::hash::Hash for UnnamedToken {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.digest.hash(state);
    }
}

impl fmt::Debug for UnnamedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "token#{}", self.position)
    }
}

impl Principal {
    /// The principal of an access token's `iss` and `sub`.
    pub fn subject(issuer: &str, subject: &str) -> Principal {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        h.update(b"sluice-subject\0");
        h.update(issuer.as_bytes());
        h.update(b"\0");
        h.update(subject.as_bytes());
        let mut out = [0; 16];
        out.copy_from_slice(&h.finalize()[..16]);
        Principal::Subject(out)
    }
}

#[cfg(test)]
impl Principal {
    /// The principal of static token `alice{n}`, for tests.
    pub(crate) fn named(n: usize) -> Principal {
        Principal::Named(PrincipalName::new(&format!("alice{n}")).expect("a valid name"))
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Principal::Anonymous => f.write_str("anonymous"),
            Principal::Named(name) => f.write_str(name.as_str()),
            Principal::Unnamed(t) => write!(f, "token#{}", t.position),
            Principal::Subject(d) => write!(f, "subject#{}", super::hex(&d[..4])),
        }
    }
}

/// Which client a backend session or a relayed request belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ClientKey {
    Session(SessionId),
    /// Without a session (stateless mode) the principal is the client.
    Principal(Principal),
}

impl ClientKey {
    /// What replicas know a client session's shared backend sessions by: a
    /// digest of its id (the id itself is a credential). None without a
    /// session: such a client has nothing to share.
    pub(crate) fn shared_tag(&self) -> Option<String> {
        use sha2::Digest as _;
        let ClientKey::Session(id) = self else {
            return None;
        };
        let mut h = sha2::Sha256::new();
        h.update(b"sluice-client\0");
        h.update(id.as_str().as_bytes());
        Some(super::hex(&h.finalize()[..16]))
    }

    /// What replicas know one principal's own backend session by (a
    /// backend with per-principal credentials): a digest of the principal,
    /// alike on every replica. None for anything else.
    pub(crate) fn principal_tag(&self) -> Option<String> {
        use sha2::Digest as _;
        let ClientKey::Principal(p) = self else {
            return None;
        };
        let mut h = sha2::Sha256::new();
        h.update(b"sluice-principal-link\0");
        match p {
            Principal::Anonymous => return None,
            Principal::Named(name) => {
                h.update(b"n");
                h.update(name.as_str().as_bytes());
            }
            Principal::Unnamed(t) => {
                h.update(b"u");
                h.update(t.digest());
            }
            Principal::Subject(d) => {
                h.update(b"s");
                h.update(d);
            }
        }
        Some(format!("p{}", super::hex(&h.finalize()[..16])))
    }
}

/// A client session as the backend sessions it owns see it: something
/// that ends. A trait because the sessions themselves live in a layer
/// above this one; each request's `Caller` clones the session's `Arc`
/// (one atomic add).
pub trait ClientSession: Send + Sync {
    /// Cancelled when the session ends.
    fn ended(&self) -> &tokio_util::sync::CancellationToken;
    /// Who owns it (a backend with per-principal credentials serves each
    /// principal its own way).
    fn principal(&self) -> &Principal;

    /// Search mode's `expose_found`: notes tools its search just found
    /// (names as it sees them), keeping the `max` most recently found;
    /// whether the set changed. Kept with the session, gone with it.
    fn note_found(&self, _names: &[String], _max: usize) -> bool {
        false
    }

    /// The tools its searches found, least recently found first.
    fn found(&self) -> Vec<String> {
        Vec::new()
    }
}

impl fmt::Debug for dyn ClientSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientSession(..)")
    }
}
