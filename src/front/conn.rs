//! A client connection. The common request, `POST /mcp` (or
//! `/ns/{namespace}/mcp`) over HTTP/1.1 with a `Content-Length` body, is
//! read, served and answered here: the wire format is `http1::codec`'s,
//! this is the connection's I/O and the choice of what it serves. At
//! the first request that is anything else (another method or target, a
//! chunked or `Expect`ed body, `Upgrade`, HTTP/1.0, a head the codec
//! refuses) the connection is handed to hyper with every byte read so
//! far, and hyper serves it to its end: whatever is unusual is answered
//! exactly as it was before this path existed. A head past the one head
//! limit (`codec::MAX_HEAD` bytes, `MAX_HEADERS` headers), which hyper is
//! given too (`hyper_builder`), is answered 431 here and the connection
//! closed; while a head is incomplete no more than the limit is read, so
//! a connection holding one costs at most that. The common request skips
//! hyper's dispatcher, a `HeaderMap` (its headers are looked up where they
//! lie, `headers::Head`), its body channel (a body that came with its head is
//! one piece; only one still arriving is fed to the request as it is read,
//! `feed`) and a boxed service future per request.
//!
//! hyper's behaviour is kept where a client can see it: the header-read
//! timeout (which also ends idle keep-alive connections), a client that
//! goes away drops its request's future (the request decides what
//! continues), pipelined requests are answered in order, and a shutdown
//! lets the request in flight finish and closes an idle connection at once.

use std::future::{Future, poll_fn};
use std::io::IoSlice;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::cancel_flag::CancelFlag;
use crate::http1::codec::{self as h1, Framing};
use axum::body::{Body, HttpBody};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::Watcher;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Edge;
use super::answer::{self, Answer, JsonBody};
use super::headers::RequestHeaders;
use super::places::{Phase, Place};
use crate::jsonrpc::Framed;
use busy::Busy;
use feed::Feed;
use socket::Socket;
use take::{Take, Taken, take};

mod busy;
mod feed;
mod socket;
mod take;
pub(super) mod tls;

/// What a connection needs besides its socket.
pub(super) struct Serve {
    pub(super) edge: Edge,
    pub(super) hyper: hyper::server::conn::http1::Builder,
    /// Every request goes to hyper (`SLUICE_HTTP=hyper`), none is read
    /// here.
    pub(super) hyper_only: bool,
    pub(super) watcher: Watcher,
    /// Cancelled when the gateway begins to shut down.
    pub(super) closing: CancelFlag,
    pub(super) header_read_timeout: std::time::Duration,
    pub(super) write_timeout: std::time::Duration,
}

/// A body at least this long goes to hyper (with its head).
const MAX_BODY: u64 = 1_000_000_000;
/// What one read asks for.
const READ_CHUNK: usize = 8 * 1024;
/// Bytes read and not yet taken: a request's body that its handler has
/// not read yet, or what a client sends ahead while its request runs.
/// Past them the socket is not read (nor watched for the client leaving)
/// until they are taken, as with hyper.
const MAX_AHEAD: usize = 256 * 1024;
/// A response body is written once this much of it has gathered.
const WRITE_CHUNK: usize = 64 * 1024;
/// The most a connection keeps of its response buffer between responses.
const KEEP_OUT: usize = 4 * 1024;
/// The most read while a head is incomplete: a head unfinished at the
/// limit is too large.
const HEAD_BUF: usize = h1::MAX_HEAD;
/// A read buffer this large, as its connection ends, is worth giving back
/// to the OS (`Io::release`).
const BIG_BUF: usize = 32 * 1024;

/// hyper's server, as it serves the connections handed to it: the head
/// limit of the own path (`codec::MAX_HEAD`, `MAX_HEADERS`; past it hyper
/// answers 431 as the own path does, `Reject::HeadTooLarge`), its read
/// buffer no larger (hyper's default is ~400 KiB a connection), and the
/// header-read timeout on `crate::timers` (none in the fuzz target, which
/// runs without them).
pub(crate) fn hyper_builder(
    header_read_timeout: Option<std::time::Duration>,
) -> hyper::server::conn::http1::Builder {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.keep_alive(true)
        .max_headers(h1::MAX_HEADERS)
        .max_header_size(h1::MAX_HEAD)
        .max_buf_size(HEAD_BUF);
    if let Some(timeout) = header_read_timeout {
        http.timer(crate::timers::HyperTimer)
            .header_read_timeout(timeout);
    }
    http
}

/// Serves one client connection, which holds `place`, to its end.
pub(super) async fn serve(tcp: TcpStream, serve: Serve, place: Place) {
    let tcp = Socket::new(tcp, serve.write_timeout, Some(place));
    if serve.hyper_only {
        return hand_over(tcp, Bytes::new(), serve).await;
    }
    let mut io = Io {
        tcp,
        buf: BytesMut::with_capacity(READ_CHUNK),
        out: Vec::new(),
    };
    let closing = serve.closing.clone();
    let mut closing_wait = pin!(closing.cancelled());
    let mut watching_closing = false;
    // One sleep for the connection, moved at each request.
    let mut header_read = crate::timers::sleep_until(Instant::now());
    // The layout as of the last request: looked at again (a plain load) at
    // each one, and loaded only after a reload. An idle connection keeps
    // the one it last used alive, but a reload stops its backends itself.
    let mut layouts = arc_swap::Cache::new(&serve.edge.front.layout);
    loop {
        header_read.reset(crate::clock::now() + serve.header_read_timeout);
        let request = poll_fn(|cx| {
            // Registered once: the token wakes this task when it is
            // cancelled; after that its flag is all there is to read.
            if !watching_closing {
                watching_closing = true;
                if closing_wait.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Next::Closed);
                }
            }
            match io.poll_request(cx, &closing) {
                Poll::Pending => Pin::new(&mut header_read).poll(cx).map(|()| Next::Closed),
                ready => ready,
            }
        })
        .await;
        let begun = |r: &Taken| match &r.feed {
            None => io.tcp.begin(),
            Some(feed) => io.tcp.receive(feed.queued()),
        };
        let request = match request {
            // Busy until answered: never displaced meanwhile (receiving
            // while its body is still to come: displaced if it falls
            // behind, `places`). One that was displaced has had its
            // socket shut: it serves no more.
            Next::Request(r) if begun(&r) => r,
            Next::Request(_) | Next::Closed => {
                io.release();
                return;
            }
            Next::Other => break,
            Next::TooLarge => {
                let refusal = Answer::Http(super::error::Reject::HeadTooLarge.into_response());
                let _ = io.respond(refusal, true).await;
                let _ = io.tcp.shutdown().await;
                io.release();
                return;
            }
        };
        let headers = RequestHeaders::Own(request.head);
        let handler = pin!(Edge::post_mcp(
            &serve.edge.front,
            layouts.load(),
            headers,
            None,                         // origin-form: no authority
            axum::http::Version::HTTP_11, // what this path serves
            request.namespace,
            request.body
        ));
        let Some(response) = io.run(handler, request.feed.as_ref()).await else {
            return;
        };
        // A body still on the wire, unread: this connection is done.
        let unread = request.feed.as_ref().is_some_and(|f| !f.is_whole());
        let close = request.close || unread || closing.is_cancelled();
        if io.respond(response, close).await.unwrap_or(true) {
            let _ = io.tcp.shutdown().await;
            return;
        }
        io.tcp.end();
    }
    // Something hyper answers: it reads the bytes already here first.
    hand_over(io.tcp, io.buf.freeze(), serve).await;
}

/// Serves the rest of a connection with hyper, `read` (bytes already read
/// from `tcp`) first.
async fn hand_over(tcp: Socket, read: Bytes, serve: Serve) {
    let phase = tcp.phase();
    hyper_serves(tcp.replaying(read), phase, serve).await;
}

/// hyper serves `stream` (the socket, or TLS over it) to its end, its
/// requests marked busy in `phase`.
async fn hyper_serves<S>(stream: S, phase: Option<Arc<Phase>>, serve: Serve)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = Busy::new(serve.edge, phase);
    let io = TokioIo::new(stream);
    let conn = serve
        .watcher
        .watch(serve.hyper.serve_connection(io, service));
    if let Err(e) = conn.await {
        tracing::debug!(error = %e, "connection ended with an error");
    }
    // hyper's buffers are out of sight: up to `HEAD_BUF` read, and what
    // it wrote.
    crate::workers::release_memory_soon();
}

/// What a connection waits for between requests.
#[expect(
    clippy::large_enum_variant,
    reason = "one per request, moved once: a box would be an allocation"
)]
enum Next {
    Request(Taken),
    /// Something for hyper.
    Other,
    /// A head past the limit.
    TooLarge,
    /// The client left, the socket failed, the header-read timeout
    /// passed, or the gateway is closing.
    Closed,
}

struct Io {
    tcp: Socket,
    /// Read and not yet taken.
    buf: BytesMut,
    /// A response's head, and the body gathered behind it.
    out: Vec<u8>,
}

impl Io {
    /// As the connection ends: a large read buffer (a head that grew it,
    /// and was never finished or was refused) is given back to the OS.
    fn release(&self) {
        if self.buf.capacity() >= BIG_BUF {
            crate::workers::release_memory_soon();
        }
    }

    /// The next request, reading as needed.
    fn poll_request(&mut self, cx: &mut Context<'_>, closing: &CancelFlag) -> Poll<Next> {
        loop {
            if !self.buf.is_empty() {
                match take(&mut self.buf) {
                    Take::Ready(t) => return Poll::Ready(Next::Request(t)),
                    Take::Other => return Poll::Ready(Next::Other),
                    Take::TooLarge => return Poll::Ready(Next::TooLarge),
                    Take::Partial => {}
                }
            }
            // An idle connection closes at shutdown; one with a request
            // under way reads it first.
            if self.buf.is_empty() && closing.is_cancelled() {
                return Poll::Ready(Next::Closed);
            }
            // Nothing here is a whole head: never more than the limit.
            match self.poll_read(cx, HEAD_BUF) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Read::Some) => {}
                Poll::Ready(Read::Closed) => return Poll::Ready(Next::Closed),
            }
        }
    }

    /// One read into the buffer, which it leaves no longer than `most`
    /// (more than it holds).
    fn poll_read(&mut self, cx: &mut Context<'_>, most: usize) -> Poll<Read> {
        let room = most - self.buf.len();
        // Grown by doubling: 8 KiB to 64 KiB for a head at the limit.
        if self.buf.capacity() - self.buf.len() < room.min(1024) {
            self.buf.reserve(READ_CHUNK);
        }
        // Through `AsyncRead`: a short read there takes the socket's
        // readiness with it, so no read that would block follows.
        let mut into = bytes::BufMut::limit(&mut self.buf, room);
        match tokio_util::io::poll_read_buf(Pin::new(&mut self.tcp), cx, &mut into) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(0) | Err(_)) => Poll::Ready(Read::Closed),
            Poll::Ready(Ok(_)) => Poll::Ready(Read::Some),
        }
    }

    /// `fut`, unless the client goes away first (then None: `fut` is
    /// dropped, as hyper drops a request's future). Meanwhile the rest of
    /// its body goes to `feed`.
    async fn run<F: Future<Output = Answer>>(
        &mut self,
        mut fut: Pin<&mut F>,
        feed: Option<&Feed>,
    ) -> Option<Answer> {
        poll_fn(|cx| {
            if let Poll::Ready(r) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(r));
            }
            match self.poll_peer(cx, feed) {
                Poll::Ready(()) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// Reads while a request runs: the rest of its body into `feed`, then
    /// whatever the client sends ahead (the next request, pipelined), up
    /// to `MAX_AHEAD`. Ready when the client has gone.
    fn poll_peer(&mut self, cx: &mut Context<'_>, feed: Option<&Feed>) -> Poll<()> {
        loop {
            if let Some(feed) = feed.filter(|f| !f.is_whole()) {
                if !self.buf.is_empty() {
                    let left = feed.left();
                    let n = left.min(self.buf.len());
                    // Displaced meanwhile: the request does not run on a
                    // body its client was cut off from.
                    if !self.tcp.received(n, n == left) {
                        feed.cut();
                        return Poll::Ready(());
                    }
                    feed.push(self.buf.split_to(n).freeze());
                    continue;
                }
                if feed.is_full(MAX_AHEAD, cx) {
                    return Poll::Pending;
                }
            } else if self.buf.len() >= MAX_AHEAD {
                return Poll::Pending;
            }
            match self.poll_read(cx, usize::MAX) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Read::Some) => {}
                Poll::Ready(Read::Closed) => {
                    if let Some(feed) = feed {
                        feed.cut();
                    }
                    return Poll::Ready(());
                }
            }
        }
    }

    /// Writes the answer: a JSON one as its head and body, in one write.
    /// Returns whether the connection closes after it (see `write_head`).
    async fn respond(&mut self, answer: Answer, close: bool) -> std::io::Result<bool> {
        let json = match answer {
            Answer::Json(json) => json,
            Answer::Http(response) => return self.respond_http(response, close).await,
        };
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let session = json
            .session
            .as_ref()
            .map(|id| id.as_str().as_bytes())
            .filter(|id| id.iter().all(|&b| h1::is_value_byte(b)));
        let (content_type, json_type) = (header::CONTENT_TYPE, answer::JSON);
        let session_header = crate::protocol::SESSION_HEADER;
        let headers = std::iter::once((content_type.as_str(), json_type.as_bytes()))
            .chain(session.map(|id| (session_header.as_str(), id)));
        let framing = Framing::Length(json.body.len() as u64);
        let close = h1::write_response_head(&mut out, json.status, headers, framing, close);
        let sent = match &json.body {
            JsonBody::Line(line) => self.write_two(&out, line.as_bytes()).await,
            // A large result: its head behind the response's, the result
            // as it lies, then its tail.
            JsonBody::Framed(framed) => {
                out.extend_from_slice(framed.head.as_bytes());
                match self.write_two(&out, framed.result.get().as_bytes()).await {
                    Ok(()) => self.tcp.write_all(Framed::TAIL.as_bytes()).await,
                    failed => failed,
                }
            }
        };
        if out.capacity() <= KEEP_OUT {
            self.out = out;
        }
        sent.map(|()| close)
    }

    /// Writes a response: its head and a body of known length in one
    /// write when it is small, else chunked as the body's frames come.
    async fn respond_http(&mut self, response: Response, close: bool) -> std::io::Result<bool> {
        let (parts, body) = response.into_parts();
        let bodyless = parts.status.is_informational()
            || parts.status == StatusCode::NO_CONTENT
            || parts.status == StatusCode::NOT_MODIFIED;
        let framing = match body.size_hint().exact() {
            _ if bodyless => Framing::None,
            Some(n) => Framing::Length(n),
            None => Framing::Chunked,
        };
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let close = write_head(&mut out, parts.status, &parts.headers, framing, close);
        let sent = self.send(&mut out, framing, body).await;
        // Kept for the next response unless a large one grew it.
        if out.capacity() <= KEEP_OUT {
            self.out = out;
        }
        sent.map(|()| close)
    }

    /// `out` (the head), then the body behind it.
    async fn send(
        &mut self,
        out: &mut Vec<u8>,
        framing: Framing,
        body: Body,
    ) -> std::io::Result<()> {
        if matches!(framing, Framing::None) {
            return self.tcp.write_all(out).await;
        }
        let chunked = matches!(framing, Framing::Chunked);
        let mut body = pin!(body);
        loop {
            // Every frame that is ready joins the write; a pause in the
            // body (an SSE stream between events) sends what there is.
            let next = poll_fn(|cx| match body.as_mut().poll_frame(cx) {
                Poll::Ready(f) => Poll::Ready(Frame::Got(f)),
                Poll::Pending if !out.is_empty() => Poll::Ready(Frame::Pause),
                Poll::Pending => match self.poll_peer(cx, None) {
                    Poll::Ready(()) => Poll::Ready(Frame::Gone),
                    Poll::Pending => Poll::Pending,
                },
            })
            .await;
            match next {
                Frame::Got(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue; // trailers: not sent
                    };
                    if data.is_empty() {
                        continue;
                    }
                    if chunked && data.len() >= WRITE_CHUNK {
                        // A large piece (an SSE answer's result, as it
                        // lies) is written where it lies, not copied.
                        h1::write_chunk_head(out, data.len());
                        self.write_two(out, &data).await?;
                        out.clear();
                        out.extend_from_slice(b"\r\n");
                        continue;
                    } else if chunked {
                        h1::write_chunk(out, &data);
                    } else if out.is_empty() || out.len() + data.len() > WRITE_CHUNK {
                        self.write_two(out, &data).await?;
                        out.clear();
                        continue;
                    } else {
                        out.extend_from_slice(&data);
                    }
                    if out.len() >= WRITE_CHUNK {
                        self.tcp.write_all(out).await?;
                        out.clear();
                    }
                }
                Frame::Got(None) => {
                    if chunked {
                        out.extend_from_slice(b"0\r\n\r\n");
                    }
                    return self.tcp.write_all(out).await;
                }
                // A body that fails mid-way: the connection ends, so the
                // client sees a cut response, not a complete wrong one.
                Frame::Got(Some(Err(_))) | Frame::Gone => {
                    return Err(std::io::ErrorKind::ConnectionAborted.into());
                }
                Frame::Pause => {
                    self.tcp.write_all(out).await?;
                    out.clear();
                }
            }
        }
    }

    /// `head` then `data`, in one system call when the socket takes both.
    async fn write_two(&mut self, head: &[u8], data: &[u8]) -> std::io::Result<()> {
        let (mut head, mut data) = (head, data);
        while !head.is_empty() {
            let n = self
                .tcp
                .write_vectored(&[IoSlice::new(head), IoSlice::new(data)])
                .await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            let from_head = n.min(head.len());
            head = &head[from_head..];
            data = &data[n - from_head..];
        }
        self.tcp.write_all(data).await
    }
}

enum Read {
    Some,
    Closed,
}

enum Frame {
    Got(Option<Result<hyper::body::Frame<Bytes>, axum::Error>>),
    /// Nothing more yet, and something gathered to write.
    Pause,
    Gone,
}

/// A response's status line and headers (`http1::codec`), from a map.
fn write_head(
    out: &mut Vec<u8>,
    status: StatusCode,
    headers: &HeaderMap,
    framing: Framing,
    close: bool,
) -> bool {
    let headers = headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()));
    h1::write_response_head(out, status, headers, framing, close)
}

/// What the connection makes of `wire` arriving in pieces of `cut`
/// bytes (for the fuzz target and its seeds): each request taken (its
/// headers, its body as far as it came, whether it asked to close), then,
/// if a request of another kind came, where in `wire` hyper takes over and
/// the bytes it is handed (those that had arrived).
pub(crate) fn read_whole(wire: &[u8], cut: usize) -> (Vec<Seen>, Option<(usize, Vec<u8>)>) {
    let mut arrived = 0;
    let mut buf = BytesMut::new();
    let mut taken: Vec<Seen> = Vec::new();
    let mut feeding: Option<(Feed, Body)> = None;
    // What a body has now; it never waits here.
    let drain = |body: &mut Body, into: &mut Vec<u8>| {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut *body).poll_frame(&mut cx) {
            into.extend_from_slice(&frame.into_data().unwrap_or_default());
        }
    };
    for piece in wire.chunks(cut.max(1)) {
        buf.extend_from_slice(piece);
        arrived += piece.len();
        loop {
            if let Some((feed, body)) = &mut feeding {
                let n = feed.left().min(buf.len());
                feed.push(buf.split_to(n).freeze());
                let last = taken.last_mut().expect("a request is fed");
                drain(body, &mut last.body);
                if !feed.is_whole() {
                    break;
                }
                feeding = None;
            }
            if buf.is_empty() {
                break;
            }
            match take(&mut buf) {
                Take::Ready(t) => {
                    let mut body = t.body;
                    let mut read = Seen {
                        target: String::from_utf8_lossy(t.head.target()).into_owned(),
                        length: body.size_hint().exact().unwrap_or_default(),
                        headers: t
                            .head
                            .iter()
                            .map(|(k, v)| (k.to_ascii_lowercase(), v.to_vec()))
                            .map(|(k, v)| (String::from_utf8(k).unwrap_or_default(), v))
                            .collect(),
                        body: Vec::new(),
                        close: t.close,
                        namespace: t.namespace.into_owned(),
                    };
                    drain(&mut body, &mut read.body);
                    taken.push(read);
                    feeding = t.feed.map(|f| (f, body));
                }
                // Refused as hyper refuses it: not compared further.
                Take::Other | Take::TooLarge => {
                    return (taken, Some((arrived - buf.len(), buf.to_vec())));
                }
                Take::Partial => break,
            }
        }
    }
    (taken, None)
}

/// A request as `read_whole` saw it (its method is `POST`, its version
/// HTTP/1.1).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) target: String,
    /// Names in lower case, in the order they came.
    pub(crate) headers: Vec<(String, Vec<u8>)>,
    /// Its `Content-Length`.
    pub(crate) length: u64,
    /// As much of the body as came.
    pub(crate) body: Vec<u8>,
    pub(crate) close: bool,
    pub(crate) namespace: String,
}

#[cfg(test)]
mod tests;
