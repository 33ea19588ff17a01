//! Session identifiers and the principals that own them.

use std::fmt;
use std::sync::Arc;

/// 192 bits of OS randomness, hex encoded: visible ASCII, unguessable.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SessionId(Arc<str>);

impl SessionId {
    pub fn random() -> SessionId {
        let mut bytes = [0u8; 24];
        // Without OS randomness ids would be guessable: refuse to run.
        getrandom::fill(&mut bytes).expect("OS randomness is unavailable");
        let mut s = String::with_capacity(48);
        for b in bytes {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 0xf)]));
        }
        SessionId(s.into())
    }

    /// The id a client presented; only looked up, never trusted.
    pub fn from_header(value: &str) -> SessionId {
        SessionId(value.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Never print an id: logs and errors must not leak them.
impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionId(..)")
    }
}

/// Who is calling: a configured bearer token (by position, never its value),
/// or anonymous when the gateway runs without `[auth]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    Anonymous,
    Token(usize),
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Principal::Anonymous => f.write_str("anonymous"),
            Principal::Token(i) => write!(f, "token#{i}"),
        }
    }
}
