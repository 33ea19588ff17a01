//! A backend's JSON-RPC line, as a connection dispatches it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice::fuzzing::backend_line(data));
