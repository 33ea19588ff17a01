//! A backend's server-sent-events stream; the first byte picks the chunk
//! size the stream is cut into.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice::fuzzing::sse(data));
