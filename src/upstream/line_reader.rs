//! A stdio child's stdout read as lines (`LineReader`). A small line is
//! handed over where it lies in one read buffer. A line that reaches
//! `budget::LARGE` bytes moves to a buffer of its own, its bytes taken
//! from the body budget before the buffer grows (doubling what it holds),
//! and is read straight into it to its end: held once, from its first
//! byte until its result has been written to its client. When the budget
//! cannot give the bytes, or the line passes its maximum, the rest of it
//! is read and dropped as it comes, only what it says about itself kept
//! (`jsonrpc::Skim`), so that its caller can be told and the child serve
//! others on.
//!
//! The read buffer never grows past about `LARGE`, and once a long line
//! has left it, it is made small again: a 48 MiB line once left a 48 MiB
//! buffer behind for the child's life.

use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::budget::{Budget, LARGE, Permit, Refused};
use crate::jsonrpc::{Skim, Skimmed};
use crate::workers::Handoff;

/// The read buffer's first size, and the most it keeps between lines.
const FIRST: usize = 8 * 1024;
const KEEP: usize = 64 * 1024;

/// One line, without its end.
pub(super) enum Line<'a> {
    /// Where it lies in the read buffer, until the next line is asked for.
    Small(&'a [u8]),
    /// In a buffer of its own, holding its share of the body budget.
    Large(Vec<u8>, Permit),
    /// Read and dropped: the budget refused it (`refused`), or it was
    /// longer than the maximum (`refused` is None).
    Skipped {
        said: Skimmed,
        refused: Option<Refused>,
        length: usize,
    },
}

/// Lines from `input`, each at most `max` bytes held, the long ones
/// under `budget` (the process's, `budget::BODIES`).
pub(super) struct LineReader<R> {
    input: R,
    budget: &'static Budget,
    /// Bytes read: lines handed out before `start`, the next after it.
    buf: Vec<u8>,
    start: usize,
    /// Bytes from `start` known to hold no line end.
    scanned: usize,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(super) fn new(input: R, max: usize, budget: &'static Budget) -> LineReader<R> {
        LineReader {
            input,
            budget,
            buf: Vec::with_capacity(FIRST),
            start: 0,
            scanned: 0,
            max,
        }
    }

    /// The next line, or None at the end of the input. `handoff` is
    /// flushed before any read that waits, and before a long line is
    /// read, so that what was read together is delivered together, and
    /// nothing waits on the pipe.
    pub(super) async fn next(
        &mut self,
        handoff: &mut Handoff,
    ) -> std::io::Result<Option<Line<'_>>> {
        if self.start == self.buf.len() {
            self.empty();
        }
        loop {
            let from = self.start + self.scanned;
            if let Some(at) = memchr::memchr(b'\n', &self.buf[from..]) {
                let line = self.start..from + at;
                self.start = from + at + 1;
                self.scanned = 0;
                return Ok(Some(Line::Small(without_cr(&self.buf[line]))));
            }
            self.scanned = self.buf.len() - self.start;
            if self.scanned >= LARGE {
                // Nothing is handed over while a long line is read: what
                // was, goes now (a progress notice before a large result).
                handoff.flush();
                return self.large().await.map(Some);
            }
            if self.fill(handoff).await? == 0 {
                // The last line may lack its end.
                if self.start == self.buf.len() {
                    return Ok(None);
                }
                let line = self.start..self.buf.len();
                self.start = self.buf.len();
                return Ok(Some(Line::Small(without_cr(&self.buf[line]))));
            }
        }
    }

    /// Nothing is pending: the buffer starts over, small again if a long
    /// line grew it.
    fn empty(&mut self) {
        self.buf.clear();
        self.start = 0;
        self.scanned = 0;
        if self.buf.capacity() > KEEP {
            self.buf = Vec::with_capacity(FIRST);
        }
    }

    /// Reads more into the read buffer: where lines handed out were, or
    /// into a buffer twice as large (a line not yet `LARGE` long has all
    /// of it but a quarter at most).
    async fn fill(&mut self, handoff: &mut Handoff) -> std::io::Result<usize> {
        let room = self.buf.capacity() - self.buf.len();
        if room < self.buf.capacity() / 4 {
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            if self.buf.capacity() - self.buf.len() < self.buf.capacity() / 4 {
                self.buf.reserve(self.buf.capacity());
            }
        }
        read(&mut self.input, &mut self.buf, handoff).await
    }

    /// The line pending in the read buffer is `LARGE` long: it moves to a
    /// buffer of its own, taken from the budget, and is read into it to
    /// its end.
    async fn large(&mut self) -> std::io::Result<Line<'static>> {
        let pending = self.start..self.buf.len();
        let size = pending.len() * 2;
        let mut permit = match self.budget.take(size) {
            Ok(permit) => permit,
            Err(refused) => {
                let mut said = Skim::new();
                said.feed(&self.buf[pending.clone()]);
                self.empty();
                return self.skip(said, pending.len(), Some(refused)).await;
            }
        };
        let mut own = Vec::with_capacity(size);
        own.extend_from_slice(&self.buf[pending]);
        self.empty();
        let mut searched = own.len();
        let refused = loop {
            if own.len() == own.capacity() {
                let more = own.capacity().saturating_mul(2).min(self.max + FIRST);
                if more == own.capacity() {
                    break None;
                }
                if let Err(refused) = permit.grow_to(more) {
                    break Some(refused);
                }
                own.reserve_exact(more - own.len());
            }
            if self.input.read_buf(&mut own).await? == 0 {
                // The last line may lack its end.
                return Ok(self.held(own, permit));
            }
            if let Some(at) = memchr::memchr(b'\n', &own[searched..]) {
                let end = searched + at;
                // What came after the line's end is the next line's.
                self.buf.extend_from_slice(&own[end + 1..]);
                own.truncate(end);
                if own.last() == Some(&b'\r') {
                    own.pop();
                }
                return Ok(self.held(own, permit));
            }
            searched = own.len();
        };
        // Refused, or too long: what was read goes now, the rest as it comes.
        let mut said = Skim::new();
        said.feed(&own);
        let length = own.len();
        drop((own, permit));
        self.skip(said, length, refused).await
    }

    /// A line read whole into its own buffer, holding just its bytes of
    /// the budget (unless it is longer than the maximum: dropped then).
    fn held(&self, mut own: Vec<u8>, mut permit: Permit) -> Line<'static> {
        if own.len() > self.max {
            let mut said = Skim::new();
            said.feed(&own);
            return Line::Skipped {
                said: said.finish(),
                refused: None,
                length: own.len(),
            };
        }
        own.shrink_to_fit();
        permit.shrink_to(own.len());
        Line::Large(own, permit)
    }

    /// Reads the rest of a line without keeping it, but for what `said`
    /// gathers; `length` bytes of it were read already.
    async fn skip(
        &mut self,
        mut said: Skim,
        mut length: usize,
        refused: Option<Refused>,
    ) -> std::io::Result<Line<'static>> {
        loop {
            self.buf.clear();
            let n = self.input.read_buf(&mut self.buf).await?;
            let end = memchr::memchr(b'\n', &self.buf[..n]);
            let line = &self.buf[..end.unwrap_or(n)];
            said.feed(line);
            length += line.len();
            if n == 0 || end.is_some() {
                self.start = end.map_or(0, |at| at + 1);
                return Ok(Line::Skipped {
                    said: said.finish(),
                    refused,
                    length,
                });
            }
        }
    }
}

/// Reads what is there into `buf`'s spare room; `handoff` is flushed
/// first if the read must wait (a read is cancel safe: polled once and
/// dropped, it took nothing).
async fn read<R: AsyncRead + Unpin>(
    input: &mut R,
    buf: &mut Vec<u8>,
    handoff: &mut Handoff,
) -> std::io::Result<usize> {
    if let Some(read) = input.read_buf(buf).now_or_never() {
        return read;
    }
    handoff.flush();
    input.read_buf(buf).await
}

fn without_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests;
