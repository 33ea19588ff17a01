//! A body's framing (RFC 9112 §6, §7): a response's body read as its head
//! framed it, by length, chunked or until the close; a chunk written.

use bytes::{Buf, Bytes, BytesMut};

use super::Error;

/// A chunk's size line (with its extensions) or one trailer line.
const MAX_LINE: usize = 4 * 1024;
/// All of a chunked body's trailers together.
const MAX_TRAILERS: usize = 16 * 1024;

/// Where a body's reading stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decoder {
    /// This many bytes still to come.
    Length(u64),
    Chunked(Chunked),
    /// Everything until the backend closes the connection.
    UntilClose,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Chunked {
    /// A chunk's size line is next.
    Size,
    /// This many bytes of the chunk still to come.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer lines, this many bytes of them read so far.
    Trailers(usize),
    Done,
}

/// What the next look at the buffer gave.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    Data(Bytes),
    /// Nothing more until more is read.
    More,
    Done,
}

impl Decoder {
    /// The body has ended (before any of it is read, too: an empty one).
    pub(crate) fn is_done(&self) -> bool {
        matches!(self, Decoder::Length(0) | Decoder::Chunked(Chunked::Done))
    }

    /// The next piece of the body from the front of `buf`.
    pub(crate) fn step(&mut self, buf: &mut BytesMut) -> Result<Step, Error> {
        match self {
            Decoder::Length(0) => Ok(Step::Done),
            Decoder::Length(left) => {
                if buf.is_empty() {
                    return Ok(Step::More);
                }
                let take = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                *left -= take as u64;
                Ok(Step::Data(buf.split_to(take).freeze()))
            }
            Decoder::UntilClose if buf.is_empty() => Ok(Step::More),
            Decoder::UntilClose => Ok(Step::Data(buf.split().freeze())),
            Decoder::Chunked(state) => state.step(buf),
        }
    }

    /// The connection ended: the end of a body framed by it, an error for
    /// any other.
    pub(crate) fn eof(&mut self) -> Result<(), Error> {
        match self {
            Decoder::UntilClose => {
                *self = Decoder::Length(0);
                Ok(())
            }
            _ if self.is_done() => Ok(()),
            _ => Err(Error::Incomplete),
        }
    }
}

impl Chunked {
    fn step(&mut self, buf: &mut BytesMut) -> Result<Step, Error> {
        loop {
            match self {
                Chunked::Size => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(Step::More);
                    };
                    let size = chunk_size(&line)?;
                    *self = if size == 0 {
                        Chunked::Trailers(0)
                    } else {
                        Chunked::Data(size)
                    };
                }
                Chunked::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    let take = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                    *left -= take as u64;
                    if *left == 0 {
                        *self = Chunked::DataEnd;
                    }
                    return Ok(Step::Data(buf.split_to(take).freeze()));
                }
                Chunked::DataEnd => match buf.first() {
                    None => return Ok(Step::More),
                    Some(b'\n') => {
                        buf.advance(1);
                        *self = Chunked::Size;
                    }
                    Some(b'\r') => match buf.get(1) {
                        None => return Ok(Step::More),
                        Some(b'\n') => {
                            buf.advance(2);
                            *self = Chunked::Size;
                        }
                        Some(_) => return Err(Error::Chunk("no CRLF after a chunk")),
                    },
                    Some(_) => return Err(Error::Chunk("no CRLF after a chunk")),
                },
                Chunked::Trailers(read) => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(Step::More);
                    };
                    *read += line.len();
                    if line.is_empty() {
                        *self = Chunked::Done;
                    } else if *read > MAX_TRAILERS {
                        return Err(Error::Chunk("trailers too large"));
                    }
                }
                Chunked::Done => return Ok(Step::Done),
            }
        }
    }
}

/// One line off the front of `buf`, without its CRLF (or bare LF).
fn take_line(buf: &mut BytesMut) -> Result<Option<BytesMut>, Error> {
    let Some(at) = memchr::memchr(b'\n', buf) else {
        if buf.len() > MAX_LINE {
            return Err(Error::Chunk("line too long"));
        }
        return Ok(None);
    };
    if at > MAX_LINE {
        return Err(Error::Chunk("line too long"));
    }
    let mut line = buf.split_to(at + 1);
    line.truncate(at);
    if line.last() == Some(&b'\r') {
        line.truncate(at - 1);
    }
    Ok(Some(line))
}

/// `1a3f` with optional extensions (`;name=value`), which are ignored.
fn chunk_size(line: &[u8]) -> Result<u64, Error> {
    let end = line
        .iter()
        .position(|b| *b == b';' || *b == b' ' || *b == b'\t')
        .unwrap_or(line.len());
    let digits = &line[..end];
    if digits.is_empty() || digits.len() > 15 {
        return Err(Error::Chunk("bad chunk size"));
    }
    let mut size = 0u64;
    for d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return Err(Error::Chunk("bad chunk size")),
        };
        size = size << 4 | u64::from(v);
    }
    let rest = line[end..].trim_ascii_start();
    if !rest.is_empty() && rest[0] != b';' {
        return Err(Error::Chunk("bad chunk size"));
    }
    Ok(size)
}

/// Whether a `Transfer-Encoding` value's last coding is `chunked`: the
/// body is then framed by chunks (RFC 9112 §6.3), whatever came before.
pub(super) fn is_chunked(value: &[u8]) -> bool {
    let last = value.rsplit(|b| *b == b',').next().unwrap_or(value);
    last.trim_ascii().eq_ignore_ascii_case(b"chunked")
}

/// Appends one chunk of a chunked body.
pub(crate) fn write_chunk(out: &mut Vec<u8>, data: &[u8]) {
    write_chunk_head(out, data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends the head of a chunk of `len` bytes, for data written where it
/// lies (then `\r\n`).
pub(crate) fn write_chunk_head(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(format!("{len:x}\r\n").as_bytes());
}
