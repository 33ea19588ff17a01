//! A `Host` or `Origin` header value. Header values reach the parser as
//! `&str`, so input that is not UTF-8 is skipped.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = std::str::from_utf8(data) {
        sluice::fuzzing::host_origin(value);
    }
});
