//! Unguessable tokens: session ids, ids of relayed requests, request
//! states. Each is a capability, so each comes from the OS's randomness.

/// `bytes` random bytes as lowercase hex (visible ASCII, header-safe).
pub(crate) fn hex(bytes: usize) -> String {
    let mut raw = vec![0u8; bytes];
    // Without OS randomness tokens would be guessable: refuse to run.
    getrandom::fill(&mut raw).expect("OS randomness is unavailable");
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes * 2);
    for b in raw {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    s
}
