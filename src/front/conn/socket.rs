//! A client's socket: writes with a deadline, reads that can give back
//! bytes already read, and its place under `max_connections`.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::front::places::{Phase, Place};
use crate::timers::{self, Sleep};

/// A client's TCP stream. A write the client takes no bytes of for
/// `limit` fails with `TimedOut`, so a client that stops reading its
/// responses gives up its connection (and its place under
/// `max_connections`) instead of holding it. Bytes taken move the deadline
/// on: a slow reader is served. A write that goes through at once, nearly
/// every one, takes no timer.
pub(super) struct Socket {
    /// Given back before `tcp` is closed (fields drop in order): the
    /// table never shuts down a descriptor that is no longer this one.
    place: Option<Place>,
    tcp: TcpStream,
    /// Read before the connection went to hyper: its reads return these
    /// first.
    replay: Bytes,
    limit: Duration,
    /// Made by the first write that had to wait, then moved.
    stall: Option<Sleep>,
    /// A write is waiting, since the stall's deadline was set.
    waiting: bool,
}

impl Socket {
    pub(super) fn new(tcp: TcpStream, limit: Duration, place: Option<Place>) -> Socket {
        Socket {
            place,
            tcp,
            replay: Bytes::new(),
            limit,
            stall: None,
            waiting: false,
        }
    }

    /// The socket with `read` put back before what is still to come.
    pub(super) fn replaying(self, read: Bytes) -> Socket {
        Socket {
            replay: read,
            ..self
        }
    }

    /// A request head was taken: false if the connection was displaced
    /// (it is closing and serves nothing more).
    pub(super) fn begin(&self) -> bool {
        self.place.as_ref().is_none_or(|p| p.phase().begin())
    }

    /// A request head was taken with `had` bytes of its body, the rest
    /// still to come: false if the connection was displaced.
    pub(super) fn receive(&self, had: usize) -> bool {
        let now = crate::clock::now();
        self.place
            .as_ref()
            .is_none_or(|p| p.phase().receive(had, now))
    }

    /// `n` more bytes of the body have come, and with them all of it
    /// (`whole`) or not: false if the connection was displaced.
    pub(super) fn received(&self, n: usize, whole: bool) -> bool {
        let Some(place) = &self.place else {
            return true;
        };
        match whole {
            true => place.phase().begin(),
            false => place.phase().received(n),
        }
    }

    /// The request's response has been written: idle.
    pub(super) fn end(&self) {
        if let Some(place) = &self.place {
            place.phase().end(crate::clock::now());
        }
    }

    /// What hyper's requests mark, once the connection is handed to it.
    pub(super) fn phase(&self) -> Option<Arc<Phase>> {
        self.place.as_ref().map(|p| p.phase().clone())
    }

    /// `polled`, a write's poll, or its deadline's end.
    fn deadline<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if polled.is_ready() {
            self.waiting = false;
            return polled;
        }
        if !self.waiting {
            self.waiting = true;
            let at = Instant::now() + self.limit;
            match &mut self.stall {
                Some(stall) => stall.reset(at),
                None => self.stall = Some(timers::sleep_until(at)),
            }
        }
        let stall = self.stall.as_mut().expect("set while waiting");
        match Pin::new(stall).poll(cx) {
            Poll::Ready(()) => {
                tracing::debug!("client took no bytes within write_timeout; connection closed");
                Poll::Ready(Err(std::io::ErrorKind::TimedOut.into()))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.replay.is_empty() {
            return crate::raw_io::poll_read(&self.tcp, cx, buf);
        }
        let n = self.replay.len().min(buf.remaining());
        buf.put_slice(&self.replay.split_to(n));
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = crate::raw_io::poll_write_vectored(&self.tcp, cx, &[IoSlice::new(buf)]);
        self.deadline(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = crate::raw_io::poll_write_vectored(&self.tcp, cx, bufs);
        self.deadline(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpSocket, TcpStream};

    use super::Socket;

    const SIZE: usize = 1 << 20;

    /// A writer with a small send buffer, wrapped, and a reader with a
    /// small receive buffer: a megabyte has to wait for the reader.
    async fn pair(limit: Duration) -> (Socket, TcpStream) {
        let listening = TcpSocket::new_v4().unwrap();
        listening.set_recv_buffer_size(8192).unwrap();
        listening.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener: TcpListener = listening.listen(1).unwrap();
        let writer = TcpSocket::new_v4().unwrap();
        writer.set_send_buffer_size(8192).unwrap();
        let (writer, accepted) = tokio::join!(
            writer.connect(listener.local_addr().unwrap()),
            listener.accept()
        );
        (
            Socket::new(writer.unwrap(), limit, None),
            accepted.unwrap().0,
        )
    }

    #[tokio::test]
    async fn a_reader_that_keeps_taking_bytes_is_served_past_the_limit() {
        let (mut writer, mut reader) = pair(Duration::from_millis(400)).await;
        // The reader pauses after every read it makes.
        let pause = Duration::from_millis(20);
        let read = tokio::spawn(async move {
            let (mut got, mut reads, mut buf) = (0, 0u32, vec![0; 64 * 1024]);
            while got < SIZE {
                got += reader.read(&mut buf).await.unwrap();
                reads += 1;
                tokio::time::sleep(pause).await;
            }
            (got, reads)
        });
        writer.write_all(&vec![b'x'; SIZE]).await.unwrap();
        let (got, reads) = read.await.unwrap();
        assert_eq!(got, SIZE);
        // The write waited for the reader, and the reader's pauses alone
        // add up to more than the limit: only a deadline that bytes move
        // on lets the write through.
        assert!(
            writer.stall.is_some(),
            "the write never waited: the test shows nothing"
        );
        assert!(pause * reads > Duration::from_millis(400), "{reads} reads");
    }

    #[tokio::test]
    async fn a_reader_that_stops_fails_the_write() {
        let (mut writer, _reader) = pair(Duration::from_millis(200)).await;
        let err = writer.write_all(&vec![b'x'; SIZE]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    }
}
