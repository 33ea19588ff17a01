//! A header value as text, for the front's request heads and the HTTP
//! client's response heads alike.

/// `value` as a `&str` if it is visible ASCII, as `HeaderValue::to_str`
/// has it. Every value given here is a valid one (no control byte but tab,
/// no DEL: httparse checked it, or `HeaderValue` did), so that is "ASCII",
/// which is tested a word at a time.
pub(crate) fn visible_str(value: &[u8]) -> Option<&str> {
    debug_assert!(!value.iter().any(|&b| b < 32 && b != b'\t' || b == 127));
    // SAFETY: ASCII only, checked first.
    value
        .is_ascii()
        .then(|| unsafe { std::str::from_utf8_unchecked(value) })
}
