//! Session keys in the form `SLUICE_SESSION_KEY` takes (`sluice keygen`
//! prints one): base64url without padding, 32 bytes each, comma-separated.
//! Read here, below the config that checks them and the sessions that
//! seal with them.

use base64::Engine as _;

pub(crate) const KEY_LEN: usize = 32;
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("no key (generate one with `sluice keygen`)")]
    Empty,
    #[error("key {0} is not base64url (generate keys with `sluice keygen`)")]
    NotBase64(usize),
    #[error("key {0} is not 32 bytes (generate keys with `sluice keygen`)")]
    WrongLength(usize),
}

/// Decodes one key; `n` numbers it in errors.
fn decode_key(text: &str, n: usize) -> Result<[u8; KEY_LEN], KeyError> {
    let bytes = B64
        .decode(text.trim())
        .map_err(|_| KeyError::NotBase64(n))?;
    bytes.try_into().map_err(|_| KeyError::WrongLength(n))
}

/// Every key of a comma-separated list, in order (the first seals).
pub fn decode_keys(value: &str) -> Result<Vec<[u8; KEY_LEN]>, KeyError> {
    let keys = value
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .enumerate()
        .map(|(i, k)| decode_key(k, i + 1))
        .collect::<Result<Vec<_>, _>>()?;
    if keys.is_empty() {
        return Err(KeyError::Empty);
    }
    Ok(keys)
}

/// A new key.
pub fn generate_key() -> String {
    let mut key = [0u8; KEY_LEN];
    getrandom::fill(&mut key).expect("OS randomness is unavailable");
    B64.encode(key)
}
