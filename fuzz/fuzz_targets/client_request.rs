//! A client's HTTP/1.1 requests on one connection; the first byte picks
//! the size of the pieces they arrive in.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice::fuzzing::client_request(data));
