//! A client's POST body: the JSON-RPC envelope, batches included.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice::fuzzing::envelope(data));
