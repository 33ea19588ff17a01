//! Sealed session ids (`session_ids = "sealed"`): the session itself,
//! encrypted and authenticated (XChaCha20-Poly1305, a random nonce per id),
//! is the id the client presents. A gateway holding the key can rebuild a
//! session it does not have in memory (after a restart, an idle eviction,
//! on another replica) from the id alone.
//!
//! What is sealed: the format, issue and expiry times (the expiry is
//! absolute: `session_max_lifetime`), the negotiated protocol version, the
//! client's capabilities (replayed to per-session backends), the process
//! that issued it, and 128 random bits that name the session. The
//! principal and the namespace are not in the id at all: they are the
//! associated data, so an id presented by another principal or on another
//! namespace simply fails to open.
//!
//! The key ring comes from `SLUICE_SESSION_KEY`: comma-separated keys, the
//! first seals, every one opens (rotation: add the new key first, drop the
//! old one once its ids have expired).

use std::fmt;

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use crate::protocol::{ClientCaps, LegacyVersion};
use crate::vocab::{KeyError, SessionId, decode_keys, generate_key};

/// The id's text starts with the format: other forms never open.
const PREFIX: &str = "s1.";
/// The format byte inside the sealed contents.
const FORMAT: u8 = 1;
const NONCE_LEN: usize = 24;
/// format, issued, expires, version, caps, boot, serial.
const CONTENTS_LEN: usize = 1 + 8 + 8 + 1 + 1 + 4 + 16;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// What a sealed id says about its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// Unix seconds.
    pub issued: u64,
    /// Unix seconds; the id is dead after this, whatever else happens.
    pub expires: u64,
    pub version: LegacyVersion,
    pub caps: ClientCaps,
    /// The gateway process that issued it (see `Sessions::boot`).
    pub boot: u32,
    /// Names the session (revocations are kept by it).
    pub serial: [u8; 16],
}

impl Contents {
    fn encode(&self) -> [u8; CONTENTS_LEN] {
        let mut out = [0u8; CONTENTS_LEN];
        out[0] = FORMAT;
        out[1..9].copy_from_slice(&self.issued.to_be_bytes());
        out[9..17].copy_from_slice(&self.expires.to_be_bytes());
        out[17] = version_byte(self.version);
        out[18] = self.caps.bits();
        out[19..23].copy_from_slice(&self.boot.to_be_bytes());
        out[23..39].copy_from_slice(&self.serial);
        out
    }

    fn decode(bytes: &[u8]) -> Option<Contents> {
        if bytes.len() != CONTENTS_LEN || bytes[0] != FORMAT {
            return None;
        }
        let u64_at = |i: usize| u64::from_be_bytes(bytes[i..i + 8].try_into().unwrap_or_default());
        Some(Contents {
            issued: u64_at(1),
            expires: u64_at(9),
            version: version_of(bytes[17])?,
            caps: ClientCaps::from_bits(bytes[18]),
            boot: u32::from_be_bytes(bytes[19..23].try_into().ok()?),
            serial: bytes[23..39].try_into().ok()?,
        })
    }
}

fn version_byte(v: LegacyVersion) -> u8 {
    match v {
        LegacyVersion::V2025_03_26 => 1,
        LegacyVersion::V2025_06_18 => 2,
        LegacyVersion::V2025_11_25 => 3,
        // After the others: ids sealed before it keep their bytes.
        LegacyVersion::V2024_11_05 => 4,
    }
}

fn version_of(b: u8) -> Option<LegacyVersion> {
    match b {
        1 => Some(LegacyVersion::V2025_03_26),
        2 => Some(LegacyVersion::V2025_06_18),
        3 => Some(LegacyVersion::V2025_11_25),
        4 => Some(LegacyVersion::V2024_11_05),
        _ => None,
    }
}

/// The keys: the first seals, all open.
#[derive(Clone)]
pub struct KeyRing {
    keys: Vec<XChaCha20Poly1305>,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyRing({} keys)", self.keys.len())
    }
}

impl KeyRing {
    /// From `SLUICE_SESSION_KEY`'s value (comma-separated keys).
    pub fn parse(value: &str) -> Result<KeyRing, KeyError> {
        let keys = decode_keys(value)?;
        Ok(KeyRing {
            keys: keys
                .iter()
                .map(|key| XChaCha20Poly1305::new(&(*key).into()))
                .collect(),
        })
    }

    /// A new key, as `sluice keygen` prints it.
    pub fn generate() -> String {
        generate_key()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Seals `contents`, bound to `bound` (principal and namespace).
    pub fn seal(&self, contents: &Contents, bound: &[u8]) -> SessionId {
        SessionId::from_header(&self.seal_bytes(PREFIX, &contents.encode(), bound))
    }

    /// Opens an id with any key of the ring; None if it is not one of ours,
    /// was altered, or is bound to another principal or namespace.
    pub fn open(&self, id: &str, bound: &[u8]) -> Option<Contents> {
        let plain = self.open_bytes(PREFIX, id, bound, CONTENTS_LEN)?;
        Contents::decode(&plain)
    }

    /// Seals any `plain` bytes as `prefix` and base64url text, bound to
    /// `bound` (associated data: never in the text, needed to open it).
    /// Other sealed things (an OAuth flow's `state`) use a prefix of their
    /// own, so one kind never opens as another.
    pub fn seal_bytes(&self, prefix: &str, plain: &[u8], bound: &[u8]) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).expect("OS randomness is unavailable");
        let sealed = self.keys[0]
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plain,
                    aad: bound,
                },
            )
            .unwrap_or_else(|_| unreachable!("sealing an in-memory buffer cannot fail"));
        let mut raw = Vec::with_capacity(NONCE_LEN + sealed.len());
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&sealed);
        format!("{prefix}{}", B64.encode(raw))
    }

    /// What `seal_bytes` sealed, opened with any key of the ring; None if
    /// the text is not of `prefix`, longer than `max_plain` bytes of
    /// contents, altered, or bound to other data.
    pub fn open_bytes(
        &self,
        prefix: &str,
        text: &str,
        bound: &[u8],
        max_plain: usize,
    ) -> Option<Vec<u8>> {
        let body = text.strip_prefix(prefix)?;
        if body.len() > (NONCE_LEN + max_plain + 16).div_ceil(3) * 4 {
            return None;
        }
        let raw = B64.decode(body).ok()?;
        if raw.len() < NONCE_LEN + 16 || raw.len() > NONCE_LEN + max_plain + 16 {
            return None;
        }
        let (nonce, sealed) = raw.split_at(NONCE_LEN);
        let nonce = XNonce::from_slice(nonce);
        self.keys.iter().find_map(|key| {
            key.decrypt(
                nonce,
                Payload {
                    msg: sealed,
                    aad: bound,
                },
            )
            .ok()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents() -> Contents {
        Contents {
            issued: 1_700_000_000,
            expires: 1_700_086_400,
            version: LegacyVersion::V2025_06_18,
            caps: ClientCaps::parse(r#"{"sampling":{},"roots":{"listChanged":true}}"#),
            boot: 7,
            serial: [9; 16],
        }
    }

    #[test]
    fn ids_open_with_their_binding_only() {
        let ring = KeyRing::parse(&KeyRing::generate()).unwrap();
        let id = ring.seal(&contents(), b"principal\0ns");
        let text = id.as_str();
        assert!(text.len() <= 256, "{}", text.len());
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        );
        assert_eq!(ring.open(text, b"principal\0ns"), Some(contents()));
        assert_eq!(ring.open(text, b"other\0ns"), None, "another principal");
        assert_eq!(
            ring.open(text, b"principal\0other"),
            None,
            "another namespace"
        );
        // Two ids of the same session differ (random nonce).
        assert_ne!(
            ring.seal(&contents(), b"p").as_str(),
            ring.seal(&contents(), b"p").as_str()
        );
    }

    #[test]
    fn tampered_truncated_padded_and_foreign_ids_do_not_open() {
        let ring = KeyRing::parse(&KeyRing::generate()).unwrap();
        let id = ring.seal(&contents(), b"b").as_str().to_owned();
        let mut flipped = id.clone().into_bytes();
        let last = flipped.len() - 5;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        for bad in [
            String::from_utf8(flipped).unwrap(),
            id[..id.len() - 1].to_owned(),
            format!("{id}A"),
            format!("{id}=="),
            id.replacen("s1.", "s2.", 1),
            "s1.".to_owned(),
            "s1.!!!!".to_owned(),
            "0123456789abcdef0123456789abcdef0123456789abcdef".to_owned(),
        ] {
            assert_eq!(ring.open(&bad, b"b"), None, "{bad}");
        }
        let other = KeyRing::parse(&KeyRing::generate()).unwrap();
        assert_eq!(other.open(&id, b"b"), None, "another key");
    }

    #[test]
    fn rotation_opens_with_every_key_and_seals_with_the_first() {
        let (old, new) = (KeyRing::generate(), KeyRing::generate());
        let before = KeyRing::parse(&old).unwrap().seal(&contents(), b"b");
        let both = KeyRing::parse(&format!("{new},{old}")).unwrap();
        assert_eq!(both.len(), 2);
        assert!(both.open(before.as_str(), b"b").is_some());
        let after = both.seal(&contents(), b"b");
        assert!(
            KeyRing::parse(&new)
                .unwrap()
                .open(after.as_str(), b"b")
                .is_some()
        );
        assert!(
            KeyRing::parse(&new)
                .unwrap()
                .open(before.as_str(), b"b")
                .is_none()
        );
    }

    #[test]
    fn bad_keys_are_named_by_position_never_shown() {
        assert_eq!(KeyRing::parse("").unwrap_err(), KeyError::Empty);
        let good = KeyRing::generate();
        assert_eq!(
            KeyRing::parse(&format!("{good},not*base64")).unwrap_err(),
            KeyError::NotBase64(2)
        );
        assert_eq!(
            KeyRing::parse("AAAA").unwrap_err(),
            KeyError::WrongLength(1)
        );
        assert!(!format!("{:?}", KeyRing::parse(&good).unwrap()).contains(&good));
    }
}
