//! A 2026-07-28 request's headers and body. The input is
//! `header lines NUL body`: newline-separated `name: value` lines up to the
//! first 0x00 byte, the JSON-RPC body after it (no NUL: lines only, empty
//! body). Lines that are not UTF-8 are skipped; the body stays bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (lines, body) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    if let Ok(lines) = std::str::from_utf8(lines) {
        sluice::fuzzing::modern_checks(lines, body);
    }
});
