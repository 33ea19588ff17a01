//! An authorization flow's `state`: what the callback needs to finish the
//! flow, sealed with the session key ring (`sessions::sealed::KeyRing`),
//! so the gateway keeps nothing per flow but the serials already used.
//!
//! Sealed inside: the principal the grant will be for, the backend, the
//! PKCE verifier, the expiry (10 minutes after the start) and 128 random
//! bits naming the flow. Bound to it (associated data, never in the text):
//! the browser's own flow cookie, set by `/oauth/start/{id}`, so a state
//! carried to another browser does not open.
//!
//! Invariant: a state opens at most once. `FlowStates::finish` records its
//! serial until the state's own expiry (at most `MAX_USED` at once; past
//! that the one expiring soonest is forgotten, and could be replayed only
//! until then, with a code the authorization server has already spent).

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::pkce::Pkce;
use crate::sessions::sealed::KeyRing;
use crate::vocab::{BackendName, Principal, hex, unhex};

/// How long a flow may take, from the start URL to the callback.
pub(crate) const FLOW_TTL: Duration = Duration::from_secs(600);

/// Used serials remembered at once.
pub(crate) const MAX_USED: usize = 100_000;

/// Its own prefix: a session id never opens as a state, nor the reverse.
const PREFIX: &str = "f1.";
/// Sealed contents are JSON of a principal, a backend name and a verifier.
const MAX_PLAIN: usize = 1024;

/// What a state says, once opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FlowState {
    pub(crate) principal: Principal,
    pub(crate) backend: BackendName,
    pub(crate) pkce: Pkce,
    /// Unix seconds.
    pub(crate) expires: u64,
    /// The start id the flow began from: a client that was asked by URL
    /// elicitation knows it as the `elicitationId` to be told complete.
    pub(crate) started: String,
    serial: [u8; 16],
}

impl FlowState {
    /// What names this flow (replicas remember it used, cluster mode).
    pub(crate) fn serial_hex(&self) -> String {
        hex(&self.serial)
    }
}

/// Why a callback's state is refused. Its text goes on the plain 400 page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StateRefused {
    #[error("this sign-in link was not issued by this gateway for this browser")]
    Unknown,
    #[error("this sign-in link has expired; start again from your MCP client")]
    Expired,
    #[error("this sign-in link has already been used")]
    Used,
}

#[derive(Serialize, Deserialize)]
struct Plain {
    v: u8,
    principal: Principal,
    backend: String,
    verifier: String,
    expires: u64,
    serial: String,
    started: String,
}

/// Seals and opens states, each at most once.
pub(crate) struct FlowStates {
    max_used: usize,
    /// Serial -> expiry (unix seconds).
    used: Mutex<HashMap<[u8; 16], u64>>,
}

impl Default for FlowStates {
    fn default() -> Self {
        Self::new()
    }
}

impl FlowStates {
    pub(crate) fn new() -> FlowStates {
        FlowStates::with_max(MAX_USED)
    }

    /// At most `max_used` serials remembered.
    pub(crate) fn with_max(max_used: usize) -> FlowStates {
        FlowStates {
            max_used: max_used.max(1),
            used: Mutex::new(HashMap::new()),
        }
    }

    /// A new flow's state: for `principal` at `backend`, begun from the
    /// start id `started`, at `now` (unix seconds), bound to `browser`
    /// (the flow cookie's value).
    pub(crate) fn seal(
        &self,
        ring: &KeyRing,
        (principal, backend, started): (&Principal, &BackendName, &str),
        pkce: &Pkce,
        browser: &[u8],
        now: u64,
    ) -> String {
        let mut serial = [0u8; 16];
        getrandom::fill(&mut serial).expect("OS randomness is unavailable");
        let plain = Plain {
            v: 1,
            principal: principal.clone(),
            backend: backend.as_str().to_owned(),
            verifier: pkce.verifier().to_owned(),
            expires: now + FLOW_TTL.as_secs(),
            serial: hex(&serial),
            started: started.to_owned(),
        };
        let json = serde_json::to_vec(&plain).expect("a state serialises");
        ring.seal_bytes(PREFIX, &json, &binding(browser))
    }

    /// Opens `text` for the browser that presents `browser`, and marks it
    /// used: a second call with the same state is refused.
    pub(crate) fn finish(
        &self,
        ring: &KeyRing,
        text: &str,
        browser: &[u8],
        now: u64,
    ) -> Result<FlowState, StateRefused> {
        let plain = ring
            .open_bytes(PREFIX, text, &binding(browser), MAX_PLAIN)
            .ok_or(StateRefused::Unknown)?;
        let plain: Plain = serde_json::from_slice(&plain).map_err(|_| StateRefused::Unknown)?;
        let state = FlowState {
            backend: BackendName::new(&plain.backend).map_err(|_| StateRefused::Unknown)?,
            pkce: Pkce::from_verifier(&plain.verifier).ok_or(StateRefused::Unknown)?,
            serial: unhex(&plain.serial).ok_or(StateRefused::Unknown)?,
            principal: plain.principal,
            expires: plain.expires,
            started: plain.started,
        };
        if plain.v != 1 {
            return Err(StateRefused::Unknown);
        }
        if now >= state.expires {
            return Err(StateRefused::Expired);
        }
        let mut used = self.used.lock();
        if used.get(&state.serial).is_some_and(|e| *e > now) {
            return Err(StateRefused::Used);
        }
        if used.len() >= self.max_used {
            used.retain(|_, e| *e > now);
        }
        if used.len() >= self.max_used
            && let Some(soonest) = used.iter().min_by_key(|(_, e)| **e).map(|(s, _)| *s)
        {
            used.remove(&soonest);
        }
        used.insert(state.serial, state.expires);
        Ok(state)
    }

    /// Serials remembered now.
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.used.lock().len()
    }
}

fn binding(browser: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(browser.len() + 20);
    out.extend_from_slice(b"sluice-oauth-state\0");
    out.extend_from_slice(browser);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::PrincipalName;

    fn ring() -> KeyRing {
        KeyRing::parse(&KeyRing::generate()).unwrap()
    }

    fn alice() -> Principal {
        Principal::Named(PrincipalName::new("alice").unwrap())
    }

    fn backend() -> BackendName {
        BackendName::new("github").unwrap()
    }

    const NOW: u64 = 1_800_000_000;

    #[test]
    fn a_state_opens_once_for_its_browser_and_carries_the_flow() {
        let (ring, states, pkce) = (ring(), FlowStates::new(), Pkce::generate());
        let text = states.seal(&ring, (&alice(), &backend(), "s1"), &pkce, b"cookie-a", NOW);
        assert!(text.starts_with("f1."));
        assert!(!text.contains(pkce.verifier()));
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "safe in a query string as it is"
        );
        let state = states.finish(&ring, &text, b"cookie-a", NOW + 1).unwrap();
        assert_eq!(state.principal, alice());
        assert_eq!(state.backend, backend());
        assert_eq!(state.pkce, pkce);
        assert_eq!(state.expires, NOW + 600);
        assert_eq!(state.started, "s1");
        assert_eq!(
            states.finish(&ring, &text, b"cookie-a", NOW + 2),
            Err(StateRefused::Used),
            "replayed"
        );
    }

    #[test]
    fn forged_foreign_expired_and_other_browsers_states_are_refused() {
        let (ring, states) = (ring(), FlowStates::new());
        let text = states.seal(
            &ring,
            (&alice(), &backend(), "s1"),
            &Pkce::generate(),
            b"a",
            NOW,
        );
        assert_eq!(
            states.finish(&ring, &text, b"b", NOW),
            Err(StateRefused::Unknown),
            "another browser"
        );
        assert_eq!(
            states.finish(&self::ring(), &text, b"a", NOW),
            Err(StateRefused::Unknown),
            "another gateway's key"
        );
        let mut flipped = text.clone().into_bytes();
        let i = flipped.len() - 3;
        flipped[i] = if flipped[i] == b'A' { b'B' } else { b'A' };
        for bad in [
            String::from_utf8(flipped).unwrap(),
            text.replacen("f1.", "s1.", 1),
            "f1.".to_owned(),
            "anything".to_owned(),
            format!("f1.{}", "A".repeat(5000)),
        ] {
            assert_eq!(
                states.finish(&ring, &bad, b"a", NOW),
                Err(StateRefused::Unknown),
                "{bad}"
            );
        }
        assert_eq!(
            states.finish(&ring, &text, b"a", NOW + 600),
            Err(StateRefused::Expired)
        );
        assert_eq!(states.used(), 0, "nothing refused is remembered");
    }

    #[test]
    fn every_kind_of_principal_comes_back_as_itself() {
        let (ring, states, pkce) = (ring(), FlowStates::new(), Pkce::generate());
        for who in [
            alice(),
            Principal::subject("https://issuer.example.com", "auth0|5f2a9c"),
            Principal::Unnamed(crate::vocab::UnnamedToken::new("tok", 3)),
        ] {
            let text = states.seal(&ring, (&who, &backend(), "s1"), &pkce, b"a", NOW);
            assert_eq!(
                states.finish(&ring, &text, b"a", NOW).unwrap().principal,
                who
            );
        }
    }

    #[test]
    fn a_session_id_never_opens_as_a_state() {
        let ring = ring();
        let other = ring.seal_bytes("s1.", b"{}", &binding(b"a"));
        assert_eq!(
            FlowStates::new().finish(&ring, &other, b"a", NOW),
            Err(StateRefused::Unknown)
        );
    }

    #[test]
    fn used_serials_are_bounded_expired_ones_going_first() {
        let (ring, states) = (ring(), FlowStates::with_max(2));
        let seal = || {
            states.seal(
                &ring,
                (&alice(), &backend(), "s1"),
                &Pkce::generate(),
                b"a",
                NOW,
            )
        };
        let early = states.seal(
            &ring,
            (&alice(), &backend(), "s1"),
            &Pkce::generate(),
            b"a",
            NOW - 599,
        );
        let (a, b) = (seal(), seal());
        states.finish(&ring, &early, b"a", NOW).unwrap();
        states.finish(&ring, &a, b"a", NOW).unwrap();
        assert_eq!(states.used(), 2);
        // Full: the expired serial goes, the others stay refused.
        states.finish(&ring, &b, b"a", NOW + 1).unwrap();
        assert_eq!(states.used(), 2);
        assert_eq!(
            states.finish(&ring, &a, b"a", NOW + 2),
            Err(StateRefused::Used)
        );
        assert_eq!(
            states.finish(&ring, &b, b"a", NOW + 2),
            Err(StateRefused::Used)
        );
    }
}
