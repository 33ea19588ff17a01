//! A config file, parsed both as TOML and as desktop `mcpServers` JSON.
//! Config files are read as UTF-8 text, so other input is skipped.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        sluice::fuzzing::config(text);
    }
});
