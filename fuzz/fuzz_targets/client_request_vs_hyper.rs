//! A client's HTTP/1.1 requests on one connection, read by the gateway's
//! own path and by hyper: what the own path takes, hyper reads alike.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice::fuzzing::client_request_vs_hyper(data));
