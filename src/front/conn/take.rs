//! Which requests the connection serves itself, and the request it takes:
//! `POST` to a namespace's endpoint over HTTP/1.1 with no body or one of a
//! single `Content-Length`, its head read by `http1::codec` in place, its
//! body as far as it has come. A head past the one head limit
//! (`http1::codec::MAX_HEAD`, `MAX_HEADERS`) is refused here, as hyper
//! would refuse it; everything else is hyper's.

use std::borrow::Cow;

use axum::body::Body;
use bytes::BytesMut;

use super::super::headers::{Head, Spans};
use super::MAX_BODY;
use super::feed::Feed;
use crate::http1::codec::{self as h1, ReadRequest, RequestBody};
use crate::vocab::NamespaceName;

/// A request for `POST /mcp` or `POST /ns/{namespace}/mcp`.
pub(super) struct Taken {
    pub(super) head: Head,
    pub(super) namespace: Cow<'static, str>,
    pub(super) body: Body,
    /// The client asked for the connection to close after it.
    pub(super) close: bool,
    /// Where the rest of its body goes as it is read (None: it came whole).
    pub(super) feed: Option<Feed>,
}

/// What `take` made of the buffer.
#[expect(
    clippy::large_enum_variant,
    reason = "one per request, moved once: a box would be an allocation"
)]
pub(super) enum Take {
    Ready(Taken),
    Other,
    Partial,
    /// A head past the limit, whole or not: answered 431, and the
    /// connection closed.
    TooLarge,
}

/// Takes the request at the front of `buf` once its head has arrived, if
/// it is one this path serves, with as much of its body as is here;
/// leaves `buf` as it was otherwise.
pub(super) fn take(buf: &mut BytesMut) -> Take {
    let mut spans = Spans::new();
    let simple = match classify(buf, &mut spans) {
        Parsed::Partial => return Take::Partial,
        Parsed::Other => return Take::Other,
        Parsed::TooLarge => return Take::TooLarge,
        Parsed::Simple(simple) => simple,
    };
    let head = Head::new(buf.split_to(simple.head_len).freeze(), spans);
    let here = buf.split_to(simple.body_len.min(buf.len())).freeze();
    let (body, feed) = match simple.body_len - here.len() {
        0 => (Body::from(here), None),
        left => {
            let feed = Feed::new(here, left);
            (Body::new(feed.body()), Some(feed))
        }
    };
    Take::Ready(Taken {
        head,
        body,
        close: simple.close,
        feed,
        namespace: simple.namespace,
    })
}

/// The head at the front of a buffer.
enum Parsed {
    Simple(Simple),
    Other,
    Partial,
    TooLarge,
}

/// A head this path serves.
struct Simple {
    head_len: usize,
    body_len: usize,
    close: bool,
    namespace: Cow<'static, str>,
}

/// The namespace of a target this path serves: `/mcp` or
/// `/ns/{namespace}/mcp` (the routes of `front::router`) with a name that
/// could be a namespace's as it stands (`config::names`). Anything else,
/// a percent-encoded name or a query included, goes to hyper and axum's
/// router, which answer it as before.
fn namespace_of(path: &str) -> Option<Cow<'static, str>> {
    if path == "/mcp" {
        return Some(Cow::Borrowed(crate::config::DEFAULT_NAMESPACE));
    }
    let name = path.strip_prefix("/ns/")?.strip_suffix("/mcp")?;
    NamespaceName::is_valid(name).then(|| Cow::Owned(name.to_owned()))
}

/// Reads the head at the front of `buf` (`http1::codec`), its headers'
/// places into `spans`, and says whether this path serves it: `POST` to a
/// namespace's endpoint over HTTP/1.1, with no body or one of a single
/// `Content-Length`, and nothing more asked of the connection than
/// `close` or `keep-alive`. Anything else (a head the codec refuses
/// included) is hyper's, but for a head too large, which no reader takes.
fn classify(buf: &[u8], spans: &mut Spans) -> Parsed {
    let head = match h1::read_request_head(buf, |name, span| spans.push(name, span)) {
        ReadRequest::Head(head) => head,
        ReadRequest::Partial => return Parsed::Partial,
        ReadRequest::TooLarge => return Parsed::TooLarge,
        ReadRequest::Malformed => return Parsed::Other,
    };
    let plain = head.method == "POST"
        && head.http11
        && !head.expect
        && !head.upgrade
        && !head.connection.other;
    let body_len = match head.body {
        RequestBody::Empty => 0,
        RequestBody::Length(n) if n < MAX_BODY => n as usize,
        RequestBody::Length(_) | RequestBody::Chunked | RequestBody::Invalid => {
            return Parsed::Other;
        }
    };
    match namespace_of(head.target) {
        Some(namespace) if plain => Parsed::Simple(Simple {
            head_len: head.len,
            body_len,
            close: head.connection.close,
            namespace,
        }),
        _ => Parsed::Other,
    }
}
