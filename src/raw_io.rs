//! Reads and writes on the forwarding path's sockets by system call, not
//! through glibc's socket wrappers.
//!
//! glibc's `recv` and `writev` are pthread cancellation points: in a
//! process with more than one thread each of them switches asynchronous
//! cancellation on before the system call and off after it, a locked
//! instruction each way on the thread's cancellation word. A forwarded
//! call reads and writes twice, so that was eight locked instructions a
//! call (bench/analysis.md), for a feature nothing here uses: no thread of
//! the gateway is ever cancelled. `syscall(2)` makes the same system calls
//! without the wrapper.
//!
//! Readiness is tokio's, as its own `TcpStream` reads and writes keep it: a
//! read that comes back short takes the socket's readiness with it (the
//! buffer was drained; the next read waits for the reactor instead of
//! asking the kernel), and an operation that would block clears it.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, RawFd};
use std::task::{Context, Poll, ready};

use tokio::io::{Interest, ReadBuf};
use tokio::net::TcpStream;

/// `TcpStream::poll_read`, by `recvfrom(2)`.
pub(crate) fn poll_read(
    tcp: &TcpStream,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    let fd = tcp.as_raw_fd();
    loop {
        ready!(tcp.poll_read_ready(cx))?;
        // SAFETY: only what the kernel wrote is marked filled below.
        let spare = unsafe { buf.unfilled_mut() };
        let room = spare.len();
        let mut short = None;
        let read = tcp.try_io(Interest::READABLE, || {
            let n = recv(fd, spare)?;
            if 0 < n && n < room {
                // Everything there was: handed back below, and the
                // would-block tells tokio to clear the readiness.
                short = Some(n);
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        });
        let n = match (read, short) {
            (_, Some(n)) | (Ok(n), None) => n,
            (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => continue,
            (Err(e), None) if e.kind() == io::ErrorKind::Interrupted => continue,
            (Err(e), None) => return Poll::Ready(Err(e)),
        };
        // SAFETY: the kernel wrote `n` bytes at the start of `spare`.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        return Poll::Ready(Ok(()));
    }
}

/// `TcpStream::poll_write_vectored`, by `writev(2)`.
pub(crate) fn poll_write_vectored(
    tcp: &TcpStream,
    cx: &mut Context<'_>,
    bufs: &[IoSlice<'_>],
) -> Poll<io::Result<usize>> {
    let fd = tcp.as_raw_fd();
    loop {
        ready!(tcp.poll_write_ready(cx))?;
        match tcp.try_io(Interest::WRITABLE, || writev(fd, bufs)) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            done => return Poll::Ready(done),
        }
    }
}

fn recv(fd: RawFd, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`; no
    // address is asked for.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            0,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

fn writev(fd: RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    // `IoSlice` is an `iovec` on Unix (std guarantees the layout); the
    // kernel takes at most `IOV_MAX` of them.
    let count = bufs.len().min(1024);
    // SAFETY: the kernel only reads the `count` buffers, each valid for
    // its length.
    let n = unsafe { libc::syscall(libc::SYS_writev, fd, bufs.as_ptr(), count) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::io::IoSlice;

    use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadBuf};
    use tokio::net::{TcpListener, TcpStream};

    use super::{poll_read, poll_write_vectored};

    /// Bytes written in pieces arrive whole and in order; a read waits for
    /// them; the peer's close reads as zero; a write to a reset peer fails
    /// rather than hanging or killing the process.
    #[tokio::test]
    async fn reads_and_writes_by_system_call_behave_as_tokio_s() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (ours, theirs) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (ours, (mut theirs, _)) = (ours.unwrap(), theirs.unwrap());

        let slices = [
            IoSlice::new(b"hello, "),
            IoSlice::new(b""),
            IoSlice::new(b"world"),
        ];
        let n = poll_fn(|cx| poll_write_vectored(&ours, cx, &slices))
            .await
            .unwrap();
        assert_eq!(n, 12);
        let mut got = [0u8; 12];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hello, world");

        // A read waits for what is still to come.
        let reader = tokio::spawn(async move {
            let mut store = vec![0u8; 64];
            let mut buf = ReadBuf::new(&mut store);
            poll_fn(|cx| poll_read(&ours, cx, &mut buf)).await.unwrap();
            let first = buf.filled().to_vec();
            let mut buf = ReadBuf::new(&mut store);
            poll_fn(|cx| poll_read(&ours, cx, &mut buf)).await.unwrap();
            (first, buf.filled().len(), ours)
        });
        tokio::task::yield_now().await;
        theirs.write_all(b"ping").await.unwrap();
        theirs.shutdown().await.unwrap();
        let (first, after_close, ours) = reader.await.unwrap();
        assert_eq!(first, b"ping");
        assert_eq!(after_close, 0, "the peer's close reads as zero bytes");

        // Closed with a reset (zero linger): on loopback the reset has
        // arrived when the close returns, and the next write fails.
        theirs.set_zero_linger().unwrap();
        drop(theirs);
        let piece = [IoSlice::new(&[0u8; 4096])];
        let wrote = poll_fn(|cx| poll_write_vectored(&ours, cx, &piece)).await;
        assert!(wrote.is_err(), "writing to a reset peer fails: {wrote:?}");
    }
}
