//! Entry points for the fuzz targets in `fuzz/` (and their seed tests):
//! every parser that reads what a peer or an operator wrote. Each must
//! return (an error is fine) on any input, without panicking, looping or
//! allocating without bound. Not an API; hidden from the docs.

use futures_util::{FutureExt, StreamExt};

/// A client's POST body: the JSON-RPC envelope, batches included.
/// The one-pass reading of an envelope (and of a call's `name`, and of a
/// key repeated in its params) must agree with serde's on every input.
pub fn envelope(bytes: &[u8]) {
    use crate::jsonrpc::Message;
    let _ = Message::parse_body(bytes, crate::fuzzing::MAX_BATCH);
    let parsed = Message::parse(bytes);
    assert_eq!(
        format!("{parsed:?}"),
        format!("{:?}", Message::parse_with_serde(bytes)),
        "the one-pass reading and serde's disagree"
    );
    if let Ok(Message::Request(r)) = &parsed {
        let params = r.params.as_deref();
        assert_eq!(
            crate::jsonrpc::peek_string(params, "name").map(|s| s.map(String::from)),
            crate::jsonrpc::peek_string_with_serde(params, "name"),
            "`name` read two ways"
        );
    }
    let client = Message::parse_client(bytes);
    assert_eq!(
        format!("{client:?}"),
        format!("{:?}", Message::parse_client_with_serde(bytes)),
        "a client's message (a key repeated in its params) read two ways"
    );
    // What the router routes on, where the one pass found it, is what
    // serde reads there.
    if let Ok(Message::Request(r)) = &client {
        let params = r.params.as_deref();
        for key in ["name", "uri"] {
            if let Some(found) = r.routed.get(params)
                && crate::jsonrpc::Routed::key_of(&r.method) == Some(key)
            {
                assert_eq!(
                    Ok(Some(found.to_owned())),
                    crate::jsonrpc::peek_string_with_serde(params, key),
                    "`{key}` where the one pass found it"
                );
            }
        }
    }
}

const MAX_BATCH: usize = 256;

/// A `Host` or `Origin` header value.
pub fn host_origin(value: &str) {
    crate::front::check_authority(value);
}

/// A modern request's `_meta` and mirrored headers: `lines` are
/// `name: value` header lines, `body` the JSON-RPC request.
pub fn modern_checks(lines: &str, body: &[u8]) {
    let mut headers = http::HeaderMap::new();
    for line in lines.lines() {
        if let Some((k, v)) = line.split_once(':')
            && let (Ok(k), Ok(v)) = (
                http::HeaderName::from_bytes(k.trim().as_bytes()),
                http::HeaderValue::from_str(v.trim()),
            )
        {
            headers.append(k, v);
        }
    }
    crate::front::check_modern(&headers, body);
}

/// A backend's server-sent-events stream, cut into chunks anywhere.
pub fn sse(bytes: &[u8]) {
    let cut = bytes.first().map_or(1, |b| usize::from(*b % 16) + 1);
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = bytes
        .chunks(cut)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    // The input is all there: the parser never waits, so one poll ends it.
    let events = crate::upstream::parse_events(futures_util::stream::iter(chunks))
        .collect::<Vec<_>>()
        .now_or_never();
    assert!(
        events.is_some(),
        "the SSE parser waited on a finished input"
    );
}

/// A backend's HTTP/1.1 response, its head and its body's framing. The
/// first byte picks the size of the pieces it arrives in; however it
/// arrives, it reads the same as when it arrives whole.
pub fn backend_response(bytes: &[u8]) {
    let Some((cut, wire)) = bytes.split_first() else {
        return;
    };
    let cut = usize::from(*cut % 32) + 1;
    let read = crate::http1::codec::read_whole(wire, cut);
    assert_eq!(
        read,
        crate::http1::codec::read_whole(wire, wire.len()),
        "read in pieces of {cut} and whole"
    );
    if let Ok((_, body, _)) = read {
        assert!(body.len() <= wire.len(), "a body larger than its input");
    }
}

/// A client's HTTP/1.1 requests on one connection. The first byte picks
/// the size of the pieces they arrive in; however they arrive, the same
/// requests are taken, with the same headers and bodies, and what goes to
/// hyper is the rest of the input, untouched.
pub fn client_request(bytes: &[u8]) {
    let Some((cut, wire)) = bytes.split_first() else {
        return;
    };
    let cut = usize::from(*cut % 32) + 1;
    let (taken, other) = crate::front::read_requests(wire, cut);
    let (whole, whole_other) = crate::front::read_requests(wire, wire.len());
    assert_eq!(taken, whole, "read in pieces of {cut} and whole");
    let at = |o: &Option<(usize, Vec<u8>)>| o.as_ref().map(|(at, _)| *at);
    assert_eq!(
        at(&other),
        at(&whole_other),
        "handed to hyper at another place"
    );
    for (at, handed) in other.iter().chain(&whole_other) {
        assert!(
            wire[*at..].starts_with(handed),
            "hyper is handed bytes other than the client's next ones"
        );
    }
}

/// A client's HTTP/1.1 requests on one connection, read by the gateway's
/// own path (`front/conn.rs`, the codec's reading) and by hyper, served
/// over an in-memory connection: every request the own path takes, hyper
/// reads alike (same method, target, version, headers and body, in the
/// same order; a body the input cut short, cut short for both), and stops
/// after the same request that asks to close. What the own path hands to
/// hyper is hyper's either way, so it is not compared.
pub fn client_request_vs_hyper(wire: &[u8]) {
    let (taken, _handed) = crate::front::read_requests(wire, wire.len());
    // Up to the first that asks to close: the own path reads on (the
    // connection would not), hyper stops there.
    let own = match taken.iter().position(|t| t.close) {
        Some(at) => &taken[..=at],
        None => &taken[..],
    };
    let theirs = differential::hyper_reads(wire);
    assert!(
        own.len() <= theirs.len(),
        "the own path took {} requests, hyper read {}: {theirs:?}",
        own.len(),
        theirs.len()
    );
    for (i, (ours, theirs)) in own.iter().zip(&theirs).enumerate() {
        let whole = ours.body.len() as u64 == ours.length;
        let expected = differential::Read {
            method: "POST".into(),
            target: ours.target.clone(),
            http11: true,
            headers: differential::by_name(ours.headers.iter().cloned()),
            body: whole.then(|| ours.body.clone()),
        };
        assert_eq!(*theirs, expected, "request {i} read two ways");
    }
    if own.last().is_some_and(|t| t.close) {
        assert_eq!(own.len(), theirs.len(), "hyper read on past a close");
    }
}

/// hyper's side of `client_request_vs_hyper`.
mod differential {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::convert::Infallible;
    use std::rc::Rc;

    use http_body_util::{BodyExt, Empty};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A request as hyper's service sees it.
    #[derive(Debug, PartialEq, Eq)]
    pub(super) struct Read {
        pub(super) method: String,
        pub(super) target: String,
        pub(super) http11: bool,
        /// Each name's values, in the order they came.
        pub(super) headers: BTreeMap<String, Vec<Vec<u8>>>,
        /// None: it ended before its length (the input did).
        pub(super) body: Option<Vec<u8>>,
    }

    /// Headers by name, each name's values in order (a `HeaderMap`
    /// iterates a name's values together, wherever they came).
    pub(super) fn by_name(
        headers: impl Iterator<Item = (String, Vec<u8>)>,
    ) -> BTreeMap<String, Vec<Vec<u8>>> {
        let mut map = BTreeMap::<String, Vec<Vec<u8>>>::new();
        for (name, value) in headers {
            map.entry(name).or_default().push(value);
        }
        map
    }

    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
    }

    /// Every request hyper's server (built as the front builds it) reads
    /// off a connection whose client sends `wire` and then closes its
    /// side; hyper answers each with an empty 200 and, reading on after
    /// the close (`half_close`), ends when the input has.
    pub(super) fn hyper_reads(wire: &[u8]) -> Vec<Read> {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let service = {
            let seen = seen.clone();
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let seen = seen.clone();
                async move {
                    let (parts, body) = req.into_parts();
                    let body = body.collect().await.ok().map(|b| b.to_bytes().to_vec());
                    let headers = parts
                        .headers
                        .iter()
                        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()));
                    seen.borrow_mut().push(Read {
                        method: parts.method.as_str().to_owned(),
                        target: parts.uri.to_string(),
                        http11: parts.version == http::Version::HTTP_11,
                        headers: by_name(headers),
                        body,
                    });
                    Ok::<_, Infallible>(hyper::Response::new(Empty::<bytes::Bytes>::new()))
                }
            })
        };
        RUNTIME.with(|rt| {
            rt.block_on(async {
                let (client, server) = tokio::io::duplex(64 * 1024);
                let mut http = crate::front::hyper_builder(None);
                http.half_close(true);
                let conn = http.serve_connection(hyper_util::rt::TokioIo::new(server), service);
                let (mut answers, mut requests) = tokio::io::split(client);
                let send = async move {
                    // The server may stop reading (a refusal): the rest is
                    // then never taken.
                    let _ = requests.write_all(wire).await;
                    let _ = requests.shutdown().await;
                };
                // Read as they come, so that hyper never waits to write.
                let read = async move {
                    let mut sink = Vec::new();
                    let _ = answers.read_to_end(&mut sink).await;
                };
                let _ = futures_util::future::join3(conn, send, read).await;
            });
        });
        seen.take()
    }
}

/// A config file, TOML or the desktop `mcpServers` JSON.
pub fn config(text: &str) {
    struct NoEnv;
    impl crate::config::Env for NoEnv {
        fn var(&self, _: &str) -> Option<String> {
            None
        }
        fn vars(&self) -> Vec<(String, String)> {
            Vec::new()
        }
    }
    let _ = crate::config::parse_toml(text, "fuzz.toml", &NoEnv);
    let _ = crate::config::parse_desktop(text, "fuzz.json", &NoEnv);
}

/// A backend's JSON-RPC line, as a connection dispatches it.
pub fn backend_line(bytes: &[u8]) {
    let _ = crate::jsonrpc::Message::parse(bytes);
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = crate::mirror::decode(text);
    }
}

/// Runs `target` on each seed of `fuzz/corpus/<name>`, behind every first
/// byte that picks a piece size (0 to 32); returns how many seeds there are.
#[cfg(test)]
pub(crate) fn run_seeds(name: &str, target: fn(&[u8])) -> usize {
    let seeds = seeds(name);
    for wire in &seeds {
        for cut in 0..=32 {
            let mut input = vec![cut];
            input.extend_from_slice(wire);
            target(&input);
        }
    }
    seeds.len()
}

/// The seeds of `fuzz/corpus/<name>`.
#[cfg(test)]
pub(crate) fn seeds(name: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(name);
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
        .collect()
}
