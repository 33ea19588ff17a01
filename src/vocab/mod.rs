//! The vocabulary every layer shares: the names of backends and
//! namespaces, the ids of sessions and who owns them, and the small
//! encodings and clocks they are written with. It imports nothing of the
//! gateway's: everything else may import it.

mod ids;
mod keys;
mod names;
pub(crate) mod random;

pub use ids::{ClientKey, ClientSession, Principal, SessionId, UnnamedToken};
pub use keys::{KeyError, decode_keys, generate_key};
pub use names::{BackendName, InvalidName, NamespaceName, PrincipalName};

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// 16 bytes from 32 hex digits (either case), or None.
pub(crate) fn unhex(text: &str) -> Option<[u8; 16]> {
    let mut out = [0u8; 16];
    if text.len() != 32 {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Unix seconds now (ids and Redis keys expire in wall-clock time).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::{Principal, PrincipalName, UnnamedToken};

    /// A bare token is the same principal wherever it stands, and shown
    /// where it stands now; names are never positions.
    #[test]
    fn principals_are_tokens_or_names_never_positions() {
        let moved = Principal::Unnamed(UnnamedToken::new("tok-b", 0));
        assert_eq!(moved, Principal::Unnamed(UnnamedToken::new("tok-b", 1)));
        assert_ne!(moved, Principal::Unnamed(UnnamedToken::new("tok-a", 0)));
        assert_eq!(moved.to_string(), "token#0");
        assert!(!format!("{moved:?}").contains("tok-b"));
        for good in ["alice", "ops.bot-2", "A_b"] {
            let p = Principal::Named(PrincipalName::new(good).unwrap());
            assert_eq!(p.to_string(), good);
        }
        for bad in ["", "token#0", "a b", "a=b", &"x".repeat(65)] {
            assert!(!PrincipalName::is_valid(bad), "{bad}");
        }
        // Cloned per request and kept in every session: no larger than
        // the position it replaced made it.
        assert_eq!(std::mem::size_of::<Principal>(), 24);
    }

    #[test]
    fn hex_round_trips() {
        let bytes: [u8; 16] = core::array::from_fn(|i| (i * 17) as u8);
        let text = super::hex(&bytes);
        assert_eq!(text.len(), 32);
        assert_eq!(super::unhex(&text), Some(bytes));
        assert_eq!(super::unhex(&text.to_uppercase()), Some(bytes));
        assert_eq!(super::unhex(&text[1..]), None);
    }
}
