//! One of the front's SSE answers read back into its messages, in the
//! pieces it came in (`EventPieces`), for a relay inside the process
//! (`relay`): an event's data is the frames it arrived in, cut at its line
//! ends, never joined, so a large result (one frame of an `SseBody`, as it
//! lies) is relayed as it lies. Only `data` matters; other fields and
//! comments are skipped. Data lines are joined by a space, not a line end:
//! the data is a JSON-RPC message, whose line ends are whitespace.

use bytes::Bytes;

use super::message::Message;

/// An SSE body's events, as they come.
#[derive(Default)]
pub(crate) struct EventPieces {
    /// The line being read, and its length.
    line: Vec<Bytes>,
    line_len: usize,
    /// The event's data so far (None before its first `data` line).
    data: Option<Vec<Bytes>>,
    data_len: usize,
    max: usize,
}

/// An event larger than the bound.
#[derive(Debug, thiserror::Error)]
#[error("an event larger than {0} bytes")]
pub(crate) struct TooLarge(usize);

impl EventPieces {
    /// Events of at most `max` bytes.
    pub(crate) fn new(max: usize) -> EventPieces {
        EventPieces {
            max,
            ..EventPieces::default()
        }
    }

    /// The body's next frame: the messages of the events it ends go to
    /// `out`, in order.
    pub(crate) fn feed(
        &mut self,
        mut frame: Bytes,
        out: &mut Vec<Message>,
    ) -> Result<(), TooLarge> {
        while let Some(at) = memchr::memchr(b'\n', &frame) {
            let mut piece = frame.split_to(at + 1);
            piece.truncate(at);
            self.push(piece);
            self.line_end(out);
        }
        self.push(frame);
        if self.line_len + self.data_len > self.max {
            return Err(TooLarge(self.max));
        }
        Ok(())
    }

    /// The body ended: an event without its blank line still counts.
    pub(crate) fn end(mut self, out: &mut Vec<Message>) {
        self.line_end(out);
        self.line_end(out);
    }

    fn push(&mut self, piece: Bytes) {
        if !piece.is_empty() {
            self.line_len += piece.len();
            self.line.push(piece);
        }
    }

    /// A line was read whole: a blank one ends the event, a `data` one
    /// adds to it.
    fn line_end(&mut self, out: &mut Vec<Message>) {
        let mut line = std::mem::take(&mut self.line);
        self.line_len = 0;
        if let Some(last) = line.last_mut()
            && last.ends_with(b"\r")
        {
            last.truncate(last.len() - 1);
        }
        line.retain(|piece| !piece.is_empty());
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                self.data_len = 0;
                out.push(Message::of_pieces(data));
            }
            return;
        }
        let head: Vec<u8> = line
            .iter()
            .flat_map(|p| p.iter())
            .take(6)
            .copied()
            .collect();
        let skip = match &head[..] {
            [b'd', b'a', b't', b'a', b':', b' ', ..] => 6,
            [b'd', b'a', b't', b'a', b':', ..] | [b'd', b'a', b't', b'a'] => 5.min(head.len()),
            _ => return,
        };
        let data = self.data.get_or_insert_with(Vec::new);
        if !data.is_empty() {
            data.push(Bytes::from_static(b" "));
            self.data_len += 1;
        }
        let mut skip = skip;
        for mut piece in line {
            if skip >= piece.len() {
                skip -= piece.len();
                continue;
            }
            let _ = piece.split_to(skip);
            skip = 0;
            self.data_len += piece.len();
            data.push(piece);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(frames: &[&[u8]]) -> Vec<String> {
        let mut events = EventPieces::new(1 << 20);
        let mut out = Vec::new();
        for frame in frames {
            events
                .feed(Bytes::copy_from_slice(frame), &mut out)
                .unwrap();
        }
        events.end(&mut out);
        out.iter()
            .map(|m| String::from_utf8(m.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn events_are_read_back_whatever_their_frames() {
        let body: &[u8] = b": c\n\nevent: message\ndata: {\"a\":\r\ndata: 1}\r\n\r\n:\n\nid: 7\ndata:x\n\ndata: last";
        let want = ["{\"a\": 1}", "x", "last"];
        assert_eq!(messages(&[body]), want);
        for cut in 1..body.len() {
            assert_eq!(messages(&[&body[..cut], &body[cut..]]), want, "{cut}");
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(messages(&bytes), want);
    }

    #[test]
    fn a_large_piece_stays_as_it_came() {
        let big = Bytes::from(vec![b'z'; 100_000]);
        let mut events = EventPieces::new(1 << 20);
        let mut out = Vec::new();
        for frame in [
            Bytes::from_static(b"event: message\ndata: {\"r\":\""),
            big.clone(),
            Bytes::from_static(b"\"}\n\n"),
        ] {
            events.feed(frame, &mut out).unwrap();
        }
        let pieces = out[0].pieces();
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces[1].as_ptr(), big.as_ptr(), "not copied");
        let mut small = EventPieces::new(10);
        assert!(small.feed(big, &mut out).is_err());
    }
}
