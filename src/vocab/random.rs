//! Unguessable tokens: session ids, ids of relayed requests, request
//! states. Each is a capability, so each comes from the OS's randomness.

/// A random number below 2^`bits` (at most 64).
pub(crate) fn below_pow2(bits: u32) -> u64 {
    let mut raw = [0u8; 8];
    getrandom::fill(&mut raw).expect("OS randomness is unavailable");
    u64::from_le_bytes(raw) >> (64 - bits.clamp(1, 64))
}

/// `bytes` random bytes as lowercase hex (visible ASCII, header-safe).
pub(crate) fn hex(bytes: usize) -> String {
    let mut raw = vec![0u8; bytes];
    // Without OS randomness tokens would be guessable: refuse to run.
    getrandom::fill(&mut raw).expect("OS randomness is unavailable");
    super::hex(&raw)
}
