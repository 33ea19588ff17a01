//! Who a request is for, as a backend sees it: the client (its session, or
//! its principal without one), its era, what it can be asked, its token.

use std::sync::Arc;

use super::AccessToken;
use crate::protocol::{ClientCaps, Era};
use crate::vocab::{ClientKey, ClientSession, Principal, SessionId};

/// Who a request is for: the key of per-session isolation, and what the
/// client can be asked.
#[derive(Debug, Clone)]
pub struct Caller {
    pub(super) key: ClientKey,
    /// The client session, whose end ends the backend sessions it owns
    /// (None: no session to end).
    pub(super) session: Option<Arc<dyn ClientSession>>,
    /// A dual-era backend serves each client in the client's own era.
    pub(super) era: Era,
    /// The server-to-client requests it declared it can answer.
    pub(super) caps: ClientCaps,
    /// Its request's verified OAuth token (None: not scoped).
    pub(super) token: Option<Arc<AccessToken>>,
    /// A static token's scopes (`[auth] token_scopes`).
    pub(super) scopes: Option<Arc<[String]>>,
}

impl Caller {
    pub fn session(id: SessionId, session: Arc<dyn ClientSession>, caps: ClientCaps) -> Caller {
        Caller {
            key: ClientKey::Session(id),
            session: Some(session),
            era: Era::Legacy,
            caps,
            token: None,
            scopes: None,
        }
    }

    /// A legacy client without a session (`sessions = "stateless"`): its
    /// `initialize` is not remembered, so it is taken to answer anything.
    pub fn principal(p: Principal) -> Caller {
        Caller {
            key: ClientKey::Principal(p),
            session: None,
            era: Era::Legacy,
            caps: ClientCaps::ALL,
            token: None,
            scopes: None,
        }
    }

    /// What it declared in its `initialize`, as a 2026-07-28 backend is
    /// told: nothing without a session, whose `initialize` nobody kept
    /// (its questions could reach no stream of its own).
    pub fn declared(&self) -> ClientCaps {
        match self.session {
            Some(_) => self.caps,
            None => ClientCaps::default(),
        }
    }

    /// A legacy client (it can be asked mid-request; a modern one cannot).
    pub fn is_legacy(&self) -> bool {
        self.era == Era::Legacy
    }

    /// What it declared it can be asked.
    pub fn caps(&self) -> ClientCaps {
        self.caps
    }

    /// Its legacy session (None: a request without one).
    pub fn client_session(&self) -> Option<&Arc<dyn ClientSession>> {
        self.session.as_ref()
    }

    /// Which client this is.
    pub fn key(&self) -> &ClientKey {
        &self.key
    }

    /// Its principal (None for an answer relayed from another replica):
    /// its session's, or the key's without one. Read, not kept, so that a
    /// request pays for it only at a backend with per-principal credentials.
    pub fn who(&self) -> Option<&Principal> {
        match (&self.key, &self.session) {
            (ClientKey::Principal(p), _) => Some(p),
            (ClientKey::Session(_), Some(s)) => Some(s.principal()),
            (ClientKey::Session(_), None) => None,
        }
    }

    /// A caller for an answer relayed from another replica: only its key
    /// matters (answers are matched by client, nothing else).
    pub fn relayed(key: ClientKey) -> Caller {
        Caller {
            key,
            session: None,
            era: Era::Legacy,
            caps: ClientCaps::default(),
            token: None,
            scopes: None,
        }
    }

    /// The same client (session, or principal without one).
    pub fn is_same_client(&self, other: &Caller) -> bool {
        self.key == other.key
    }

    /// A 2026-07-28 client: no session, so per-session isolation keys on
    /// its principal; its capabilities come with each request.
    pub fn modern(p: Principal, caps: ClientCaps) -> Caller {
        Caller {
            key: ClientKey::Principal(p),
            session: None,
            era: Era::Modern,
            caps,
            token: None,
            scopes: None,
        }
    }

    /// The same caller, with its request's verified OAuth token.
    pub(crate) fn with_token(mut self, token: Option<Arc<AccessToken>>) -> Caller {
        self.token = token;
        self
    }

    /// The same caller, with its static token's scopes.
    pub(crate) fn with_scopes(mut self, scopes: Option<Arc<[String]>>) -> Caller {
        self.scopes = scopes;
        self
    }

    /// The scopes it holds; None when scopes do not restrict it.
    pub fn scopes(&self) -> Option<&[String]> {
        match &self.token {
            Some(t) => Some(&t.scopes[..]),
            None => self.scopes.as_deref(),
        }
    }
}
