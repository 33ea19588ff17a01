//! PKCE (RFC 7636) with S256, the only method the MCP authorization spec
//! lets a client use: the verifier is 32 random bytes as base64url (43
//! characters), the challenge base64url(SHA-256(verifier)). The verifier
//! is a secret until the code is exchanged: it travels only sealed inside
//! the flow's `state`, and `Debug` never shows it.

use std::fmt;

use base64::Engine as _;
use sha2::Digest as _;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// One flow's code verifier.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Pkce {
    verifier: String,
}

impl Pkce {
    /// `code_challenge_method`: S256 only.
    pub(crate) const METHOD: &'static str = "S256";

    /// A new verifier from the OS's randomness.
    pub(crate) fn generate() -> Pkce {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).expect("OS randomness is unavailable");
        Pkce {
            verifier: B64.encode(bytes),
        }
    }

    /// A verifier read back (from an opened `state`); None unless it is
    /// one RFC 7636 allows (43 to 128 unreserved characters).
    pub(crate) fn from_verifier(verifier: &str) -> Option<Pkce> {
        let ok = (43..=128).contains(&verifier.len())
            && verifier
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
        ok.then(|| Pkce {
            verifier: verifier.to_owned(),
        })
    }

    /// `code_verifier`, for the token request only.
    pub(crate) fn verifier(&self) -> &str {
        &self.verifier
    }

    /// `code_challenge`, for the authorization request.
    pub(crate) fn challenge(&self) -> String {
        B64.encode(sha2::Sha256::digest(self.verifier.as_bytes()))
    }
}

impl fmt::Debug for Pkce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pkce(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636s_own_example() {
        // RFC 7636, Appendix B.
        let p = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk").unwrap();
        assert_eq!(p.challenge(), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    }

    #[test]
    fn generated_verifiers_are_fresh_valid_and_never_shown() {
        let (a, b) = (Pkce::generate(), Pkce::generate());
        assert_ne!(a, b);
        assert_eq!(a.verifier().len(), 43);
        assert_eq!(Pkce::from_verifier(a.verifier()), Some(a.clone()));
        assert!(!format!("{a:?}").contains(a.verifier()));
    }

    #[test]
    fn verifiers_rfc_7636_forbids_are_refused() {
        for bad in ["short", &"a".repeat(129), &format!("{}!", "a".repeat(43))] {
            assert_eq!(Pkce::from_verifier(bad), None, "{bad}");
        }
    }
}
