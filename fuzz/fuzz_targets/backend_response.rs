//! A backend's HTTP/1.1 response; the first byte picks the size of the
//! pieces it arrives in.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice::fuzzing::backend_response(data));
