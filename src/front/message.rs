//! One JSON-RPC message as the pieces it is written from (`Message`), for
//! the answers sent message by message: an SSE answer's events, the
//! HTTP+SSE transport's, `sluice stdio`'s lines. A large response is its
//! head, its result where it lies (holding its share of the body budget
//! until it has been written) and its tail: never copied into a line.
//! No piece holds a line end (JSON's are whitespace, made spaces), so a
//! message is one `data:` line of an event, or one line on stdout.

use bytes::Bytes;
use serde_json::value::RawValue;

use crate::jsonrpc::{self, Framed, Outcome, blank_line_ends};

/// Pieces at least this long are written where they lie; shorter ones
/// are gathered with what is around them (`jsonrpc::FRAMED_FROM`: below
/// it a copy costs less than another write).
pub(crate) const WRITTEN_APART: usize = jsonrpc::FRAMED_FROM;

/// A message's pieces, in order.
#[derive(Debug, Default)]
pub(crate) struct Message {
    pieces: Vec<Bytes>,
}

impl Message {
    /// A message made as one line.
    pub(crate) fn line(line: String) -> Message {
        let mut bytes = line.into_bytes();
        blank_line_ends(&mut bytes);
        Message {
            pieces: vec![Bytes::from(bytes)],
        }
    }

    /// The response to `id`: a large result framed, as it lies.
    pub(crate) fn response(id: &RawValue, outcome: Outcome) -> Message {
        match jsonrpc::response_or_framed(id, outcome) {
            Ok(framed) => Message::framed(framed),
            Err(line) => Message::line(line),
        }
    }

    pub(crate) fn framed(framed: Framed) -> Message {
        let mut head = framed.head.into_bytes();
        blank_line_ends(&mut head);
        Message {
            pieces: vec![
                Bytes::from(head),
                framed.result.into_line(),
                Bytes::from_static(Framed::TAIL.as_bytes()),
            ],
        }
    }

    /// A message as it came, in pieces: those that hold a line end (short
    /// ones; a large result's never does) are copied to make them spaces.
    pub(crate) fn of_pieces(mut pieces: Vec<Bytes>) -> Message {
        for piece in &mut pieces {
            if memchr::memchr2(b'\n', b'\r', piece).is_some() {
                let mut bytes = piece.to_vec();
                blank_line_ends(&mut bytes);
                *piece = Bytes::from(bytes);
            }
        }
        Message { pieces }
    }

    pub(crate) fn pieces(&self) -> &[Bytes] {
        &self.pieces
    }

    pub(crate) fn len(&self) -> usize {
        self.pieces.iter().map(Bytes::len).sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message joined (for what reads it whole: a small one).
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        self.pieces.concat()
    }

    /// The pieces to write, with `before` and `after` around them: the
    /// short ones gathered into one piece with what is next to them, the
    /// long ones (a result as it lies) apart.
    pub(crate) fn written(self, before: &[u8], after: &[u8]) -> Vec<Bytes> {
        let mut out = Vec::with_capacity(3);
        let mut gathered = before.to_vec();
        for piece in self.pieces {
            if piece.len() < WRITTEN_APART {
                gathered.extend_from_slice(&piece);
                continue;
            }
            if !gathered.is_empty() {
                out.push(Bytes::from(std::mem::take(&mut gathered)));
            }
            out.push(piece);
        }
        gathered.extend_from_slice(after);
        out.push(Bytes::from(gathered));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_one_line_and_a_large_result_one_piece_of_it() {
        let id = jsonrpc::raw(&7);
        let small = Message::response(&id, Outcome::Result(jsonrpc::raw(&"a\nb").into()));
        assert_eq!(small.pieces().len(), 1);
        let text = "y".repeat(WRITTEN_APART);
        let raw = RawValue::from_string(format!("{{\n\"t\": \"{text}\"}}")).unwrap();
        let large = Message::response(&id, Outcome::Result(raw.into()));
        let whole = large.to_vec();
        assert!(!whole.contains(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(
            (v["id"].as_u64(), v["result"]["t"].as_str()),
            (Some(7), Some(&*text))
        );
        let written = large.written(b"data: ", b"\n\n");
        let lengths: Vec<usize> = written.iter().map(Bytes::len).collect();
        // The head behind the prefix; the result apart; the tail before the end.
        assert_eq!(lengths[1], text.len() + 10);
        assert_eq!(written.concat(), [&b"data: "[..], &whole, b"\n\n"].concat());
        let parts = Message::of_pieces(vec![Bytes::from_static(b"{\"a\":\r\n1}")]);
        assert_eq!(parts.to_vec(), b"{\"a\":  1}");
    }
}
