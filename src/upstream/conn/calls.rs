//! A call's life on the connection: its gateway id and pending entry, sent
//! through the wire's queue or posted by the caller's task, answered,
//! failed, or given up (`CallGuard` removes the entry and tells the
//! backend), all under one deadline.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;

use indexmap::IndexMap;
use serde_json::value::RawValue;

use super::{
    Conn, Delivery, Frame, ListenerRef, MAX_IN_FLIGHT, OUTSIDE_CALLS, PendingCall, Post, Writes,
};
use crate::jsonrpc::{self, Outcome};
use crate::upstream::UpstreamError;
use crate::upstream::answer;
use crate::upstream::deadline::Deadline;

/// Removes the pending entry if the caller gives up (timeout, client gone)
/// and tells the backend, so nothing waits on an answer nobody reads.
struct CallGuard<'a> {
    conn: &'a Conn,
    id: u64,
    /// The call's answer came (its entry is gone with it).
    answered: bool,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        // Nothing to undo: questions of this call would be waiting, and none
        // can come after its answer (they are tied to it by its entry).
        if self.answered && self.conn.asked.load(Ordering::Acquire) == 0 {
            return;
        }
        let (was_pending, unanswered) = {
            let mut st = self.conn.state.lock();
            // A client may answer after the response it came with (legacy):
            // the questions outlive the call, for `ASK_TIMEOUT`.
            let mut unanswered = Vec::new();
            for (token, r) in st.server_requests.iter_mut() {
                if r.origin == self.id {
                    r.origin = OUTSIDE_CALLS;
                    unanswered.push(token.clone());
                }
            }
            (st.calls.remove(&self.id).is_some(), unanswered)
        };
        for token in unanswered {
            self.conn.expire_later(token);
        }
        if was_pending {
            let params = jsonrpc::raw(&serde_json::json!({
                "requestId": self.id,
                "reason": "cancelled by the gateway",
            }));
            self.conn.send(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
    }
}

impl Conn {
    /// Sends a request and waits for its outcome.
    pub(crate) async fn call(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        to: Option<ListenerRef<'_>>,
        timeout: std::time::Duration,
    ) -> Result<Outcome, UpstreamError> {
        self.call_with(method, params.as_deref(), to, timeout, Vec::new())
            .await
    }

    /// `call`, with HTTP headers for the transport to send along.
    pub(crate) async fn call_with(
        &self,
        method: &str,
        params: Option<&RawValue>,
        to: Option<ListenerRef<'_>>,
        timeout: std::time::Duration,
        headers: Vec<(String, String)>,
    ) -> Result<Outcome, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (params, client_token) = match (params, to) {
            (Some(p), Some(_)) => {
                let (p, token) = rewrite_progress_token(p, id);
                (Some(p), token)
            }
            (p, _) => (p.map(Cow::Borrowed), None),
        };
        let (tx, rx) = answer::channel();
        {
            let mut st = self.state.lock();
            if st.closed {
                return Err(UpstreamError::not_sent(&self.backend));
            }
            if st.calls.len() >= MAX_IN_FLIGHT {
                return Err(UpstreamError::overloaded(&self.backend));
            }
            st.calls.insert(
                id,
                PendingCall {
                    reply: tx,
                    shard: crate::workers::shard(),
                    to: to.map(ListenerRef::to_owned),
                    client_token,
                    delivery: match self.writes {
                        Writes::Tracked => Delivery::Queued,
                        Writes::Untracked => Delivery::Maybe,
                    },
                },
            );
        }
        let mut guard = CallGuard {
            conn: self,
            id,
            answered: false,
        };
        let frame = Frame {
            line: jsonrpc::numbered_request(id, method, params.as_deref()),
            call: Some(id),
            headers,
        };
        // One deadline for queueing and answering: a backend that stops
        // reading (a full write queue) is as late as one that stops writing.
        let deadline = Deadline::after(timeout);
        let answer = match self.post.get() {
            Some(post) => {
                deadline
                    .run(&self.backend, self.posted(post.as_ref(), frame, rx))
                    .await
            }
            None => {
                deadline
                    .run(&self.backend, self.writer.send(frame))
                    .await?
                    .map_err(|_| UpstreamError::not_sent(&self.backend))?;
                deadline.run(&self.backend, rx).await
            }
        };
        guard.answered = answer.is_ok();
        let outcome = match answer {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(UpstreamError::exited(&self.backend)),
            Err(timeout) => Err(timeout),
        };
        drop(guard);
        outcome
    }

    /// A request sent by the wire itself: the answer may come while the
    /// response is still being read (an SSE stream), or once it is.
    async fn posted(
        &self,
        post: &dyn Post,
        frame: Frame,
        mut rx: answer::Answer<Result<Outcome, UpstreamError>>,
    ) -> Result<Result<Outcome, UpstreamError>, answer::Closed> {
        let mut send = post.post(self, frame);
        let mut sent = false;
        std::future::poll_fn(|cx| {
            // The wire first: an answer it reads settles the call without
            // waking the task (`answer`), and is looked at just below, in
            // the same poll. A finished wire has settled the call.
            if !sent {
                sent = rx.settled_by(|| send.as_mut().poll(cx)).is_ready();
            }
            Pin::new(&mut rx).poll(cx)
        })
        .await
    }

    pub(crate) async fn notify(
        &self,
        method: &str,
        params: Option<&RawValue>,
        deadline: Deadline,
    ) -> Result<(), UpstreamError> {
        let frame = Frame {
            line: jsonrpc::notification(method, params),
            call: None,
            headers: Vec::new(),
        };
        deadline
            .run(&self.backend, self.writer.send(frame))
            .await?
            .map_err(|_| UpstreamError::exited(&self.backend))
    }

    /// Queues a message the gateway does not await, without waiting.
    pub(crate) fn send(&self, line: String) -> bool {
        let frame = Frame {
            line,
            call: None,
            headers: Vec::new(),
        };
        self.writer.try_send(frame).is_ok()
    }

    /// Ends one waiting call with an error (its transport failed).
    pub(crate) fn fail(&self, id: u64, error: UpstreamError) {
        self.fail_with(id, || error);
    }

    /// `fail`, the error made only if the call is still waiting (after a
    /// response stream, it almost never is).
    pub(crate) fn fail_with(&self, id: u64, error: impl FnOnce() -> UpstreamError) {
        if let Some(call) = self.state.lock().calls.remove(&id) {
            call.reply.send(Err(error()));
        }
    }

    /// The connection is gone: every waiting caller gets an error now, but
    /// for requests a tracked wire is writing: it settles those.
    pub(crate) fn fail_all(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.server_requests.clear();
        self.note_asked(&st);
        for (_, call) in st.calls.extract_if(|_, c| c.delivery != Delivery::Writing) {
            let error = match call.delivery {
                Delivery::Queued => UpstreamError::not_sent(&self.backend),
                _ => UpstreamError::exited(&self.backend),
            };
            call.reply.send(Err(error));
        }
    }

    /// A tracked wire takes a request to write it: false when its caller
    /// is gone (or was told it was not sent), so it must not be written.
    pub(crate) fn claim(&self, id: u64) -> bool {
        let mut st = self.state.lock();
        match st.calls.get_mut(&id) {
            Some(call) if call.delivery == Delivery::Queued => {
                call.delivery = Delivery::Writing;
                true
            }
            _ => false,
        }
    }

    /// A tracked wire is done with a claimed request: `written` if any of
    /// it reached the pipe (the backend may act on it), else it is failed
    /// as unsent, for the caller to send elsewhere.
    pub(crate) fn settle(&self, id: u64, written: bool) {
        let mut st = self.state.lock();
        if !written {
            if let Some(call) = st.calls.remove(&id) {
                call.reply.send(Err(UpstreamError::not_sent(&self.backend)));
            }
        } else if st.closed {
            st.calls.remove(&id);
        } else if let Some(call) = st.calls.get_mut(&id) {
            call.delivery = Delivery::Maybe;
        }
    }
}

/// Replaces `params._meta.progressToken` with the gateway's request id and
/// returns the client's token; every other field stays raw.
pub(super) fn rewrite_progress_token(
    params: &RawValue,
    id: u64,
) -> (Cow<'_, RawValue>, Option<Box<RawValue>>) {
    let unchanged = (Cow::Borrowed(params), None);
    // Most calls carry no token: don't take them apart for nothing.
    static PROGRESS_TOKEN: jsonrpc::Needle = jsonrpc::Needle::new("\"progressToken\"");
    if !PROGRESS_TOKEN.in_text(params.get()) {
        return unchanged;
    }
    let Ok(mut fields) = serde_json::from_str::<IndexMap<String, Box<RawValue>>>(params.get())
    else {
        return unchanged;
    };
    let Some(meta) = fields.get("_meta") else {
        return unchanged;
    };
    let Ok(mut meta) = serde_json::from_str::<IndexMap<String, Box<RawValue>>>(meta.get()) else {
        return unchanged;
    };
    let Some(token) = meta.insert("progressToken".into(), jsonrpc::raw_u64(id)) else {
        return unchanged;
    };
    fields.insert("_meta".into(), jsonrpc::raw(&meta));
    (Cow::Owned(jsonrpc::raw(&fields)), Some(token))
}
