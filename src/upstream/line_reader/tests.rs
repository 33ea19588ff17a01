use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use super::*;

/// Bytes given at most `step` at a time, as a pipe gives them.
struct Trickle {
    bytes: Vec<u8>,
    at: usize,
    step: usize,
}

impl AsyncRead for Trickle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self
            .step
            .min(buf.remaining())
            .min(self.bytes.len() - self.at);
        let at = self.at;
        buf.put_slice(&self.bytes[at..at + n]);
        self.at += n;
        Poll::Ready(Ok(()))
    }
}

fn reader(bytes: Vec<u8>, step: usize, max: usize, limit: usize) -> LineReader<Trickle> {
    let budget = Box::leak(Box::new(Budget::new()));
    budget.set_limit(limit);
    LineReader::new(Trickle { bytes, at: 0, step }, max, budget)
}

/// Each line as text: small ones as they are, the others described.
async fn lines(reader: &mut LineReader<Trickle>) -> Vec<String> {
    let mut handoff = Handoff::new();
    let mut out = Vec::new();
    while let Some(line) = reader.next(&mut handoff).await.unwrap() {
        out.push(match line {
            Line::Small(text) => String::from_utf8(text.to_vec()).unwrap(),
            Line::Large(text, permit) => {
                assert_eq!(permit.bytes(), text.len());
                assert_eq!(reader.budget.held(), text.len());
                format!("large {} {}", text.len(), text.iter().all(|&b| b == b'x'))
            }
            Line::Skipped {
                said,
                refused,
                length,
            } => format!("skipped {length} {:?} {}", said.id, refused.is_some()),
        });
        // What a line held is given back once it is dropped; the buffer
        // it grew is small again.
        assert!(reader.budget.held() == 0);
    }
    assert!(reader.buf.capacity() <= KEEP, "{}", reader.buf.capacity());
    out
}

fn x(n: usize) -> String {
    "x".repeat(n)
}

#[tokio::test]
async fn small_lines_are_split_at_their_ends() {
    for step in [1, 3, 4096] {
        let mut r = reader(b"{\"a\":1}\r\n\nab\ncd".to_vec(), step, 1 << 20, usize::MAX);
        assert_eq!(lines(&mut r).await, ["{\"a\":1}", "", "ab", "cd"]);
    }
}

#[tokio::test]
async fn a_long_line_is_read_into_its_own_buffer_and_held_under_the_budget() {
    let long = 3 * LARGE + 17;
    let text = format!("a\n{}\r\nb\n{}", x(long), x(LARGE));
    for step in [1000, 64 * 1024, 1 << 20] {
        let mut r = reader(text.clone().into_bytes(), step, 1 << 20, 8 << 20);
        assert_eq!(
            lines(&mut r).await,
            [
                "a".to_owned(),
                format!("large {long} true"),
                "b".to_owned(),
                format!("large {LARGE} true"),
            ]
        );
    }
}

#[tokio::test]
async fn a_line_the_budget_refuses_is_skipped_its_id_kept() {
    let refused = format!(
        "{{\"result\":{{\"text\":\"{}\"}},\"jsonrpc\":\"2.0\",\"id\":42}}",
        x(3 << 20)
    );
    // Refused at once (twice what it has is more than the budget), or
    // once it has grown.
    for limit in [LARGE, 2 << 20] {
        let text = format!("a\n{refused}\nb\n");
        let mut r = reader(text.into_bytes(), 64 * 1024, 16 << 20, limit);
        assert_eq!(
            lines(&mut r).await,
            [
                "a".to_owned(),
                format!("skipped {} Some(\"42\") true", refused.len()),
                "b".to_owned()
            ]
        );
    }
}

#[tokio::test]
async fn a_line_past_the_maximum_is_skipped() {
    let max = 2 * LARGE;
    for n in [max + 1, max + 5000, 4 * max] {
        let text = format!("{}\nb", x(n));
        let mut r = reader(text.into_bytes(), 64 * 1024, max, usize::MAX);
        assert_eq!(
            lines(&mut r).await,
            [format!("skipped {n} None false"), "b".to_owned()]
        );
    }
    // Exactly the maximum is a line.
    let mut r = reader(format!("{}\n", x(max)).into_bytes(), 4096, max, usize::MAX);
    assert_eq!(lines(&mut r).await, [format!("large {max} true")]);
}
