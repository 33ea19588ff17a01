//! What the backend sends, handled: answers to their callers (on the
//! caller's worker), progress to the one client whose request it is about,
//! notifications and server requests to where they belong.

use indexmap::IndexMap;
use serde_json::value::RawValue;

use super::{Conn, elicitations};
use crate::jsonrpc::{self, Incoming, Outcome};
use crate::upstream::events::Event;
use crate::upstream::notice::Notice;
use crate::workers::Handoff;

impl Conn {
    /// `dispatch_answering`'s notice alone.
    #[cfg(test)]
    pub(crate) fn dispatch(&self, line: impl AsRef<[u8]>, origin: Option<u64>) -> Option<Notice> {
        self.dispatch_via(line, origin, &mut Handoff::new()).0
    }

    /// Handles one message from the backend. `origin` is the gateway id of
    /// the request whose response stream carried it, when the transport
    /// tells. Returns what the backend announced for clients, if anything,
    /// and whether the message answered the call `origin`.
    pub(crate) fn dispatch_answering(
        &self,
        line: impl AsRef<[u8]>,
        origin: Option<u64>,
    ) -> (Option<Notice>, bool) {
        let (notice, answered) = self.dispatch_via(line, origin, &mut Handoff::new());
        (notice, answered.is_some() && answered == origin)
    }

    /// `dispatch` for a reader that answers callers on other workers: their
    /// answers go with `handoff`'s next flush. Also returns the call the
    /// message answered, if any.
    pub(crate) fn dispatch_via(
        &self,
        line: impl AsRef<[u8]>,
        origin: Option<u64>,
        handoff: &mut Handoff,
    ) -> (Option<Notice>, Option<u64>) {
        let msg = match Incoming::parse(line.as_ref()) {
            Ok(m) => m,
            Err(e) => {
                if let Some(suppressed) = self.warnings.admit() {
                    tracing::warn!(backend = %self.backend, error = %e, suppressed, "unparseable message from backend");
                }
                return (None, None);
            }
        };
        match msg {
            Incoming::Response { id, outcome } => (None, self.answer_pending(id, outcome, handoff)),
            Incoming::Notification(n) => (self.on_notification(n, origin), None),
            Incoming::Request(r) => (self.on_server_request(r, origin), None),
        }
    }

    /// A response its transport already read (a large body's result, kept
    /// where it lay: `jsonrpc::take_result`), to its caller, as `dispatch`
    /// would hand it. True if it answered `origin`.
    pub(crate) fn answer_read(&self, id: &RawValue, outcome: Outcome, origin: Option<u64>) -> bool {
        let answered = self.answer_pending(id, outcome, &mut Handoff::new());
        answered.is_some() && answered == origin
    }

    /// The response to the call `id` names, to its caller (on another
    /// worker, with `handoff`'s next flush); the call it answered, if any
    /// was pending.
    pub(crate) fn answer_pending(
        &self,
        id: &RawValue,
        outcome: Outcome,
        handoff: &mut Handoff,
    ) -> Option<u64> {
        let id: Option<u64> = serde_json::from_str(id.get()).ok();
        let call = id.and_then(|id| self.state.lock().calls.remove(&id));
        // A -32042 error hands its caller URL elicitations: their
        // completions go to that client.
        if let (Some(call), Outcome::Error(error)) = (&call, &outcome)
            && let Some(to) = &call.to
        {
            let ids = elicitations::of_error(error.get());
            if !ids.is_empty() {
                let mut st = self.state.lock();
                for id in ids {
                    st.elicitations.learn(id, to.client.clone());
                }
            }
        }
        match call {
            Some(call) => handoff.run_on(call.shard, move || {
                call.reply.send(Ok(outcome));
            }),
            None => {
                tracing::debug!(backend = %self.backend, "response for no pending request");
                return None;
            }
        }
        id
    }

    fn on_notification(&self, n: jsonrpc::Notification, origin: Option<u64>) -> Option<Notice> {
        match n.method.as_str() {
            "notifications/progress" => {
                let params = n.params?;
                let mut fields: IndexMap<String, Box<RawValue>> =
                    serde_json::from_str(params.get()).ok()?;
                let token: u64 = serde_json::from_str(fields.get("progressToken")?.get()).ok()?;
                let st = self.state.lock();
                let call = st.calls.get(&token)?;
                let (Some(to), Some(client_token)) = (&call.to, &call.client_token) else {
                    return None;
                };
                let events = &to.events;
                fields.insert("progressToken".into(), client_token.clone());
                let line =
                    jsonrpc::notification("notifications/progress", Some(&jsonrpc::raw(&fields)));
                // A slow client loses progress, never blocks the backend for others.
                let _ = events.try_send(Event::Notification(line));
                None
            }
            // A URL elicitation's end: on a request's own stream, to that
            // request's client; outside any, to the client it was handed to.
            "notifications/elicitation/complete" => {
                let id = elicitations::of_completion(n.params.as_deref()?.get())?;
                let line = jsonrpc::notification(&n.method, n.params.as_deref());
                let mut st = self.state.lock();
                let client = st.elicitations.take(&id);
                let on_stream = origin.and_then(|o| st.calls.get(&o)?.to.clone());
                drop(st);
                match on_stream {
                    Some(to) => {
                        let _ = to.events.try_send(Event::Notification(line));
                        None
                    }
                    None => Some(Notice::ElicitationComplete {
                        line: line.into(),
                        client,
                    }),
                }
            }
            m if m.ends_with("/list_changed") || m == "notifications/resources/updated" => {
                Notice::of(m, n.params.as_deref())
            }
            // On a request's own stream it belongs to that request's client;
            // sent outside any request, to every client that set a level.
            "notifications/message" => match origin {
                Some(id) => {
                    let to = self.state.lock().calls.get(&id).and_then(|c| c.to.clone());
                    if let Some(to) = to {
                        let line = jsonrpc::notification(&n.method, n.params.as_deref());
                        let _ = to.events.try_send(Event::Notification(line));
                    }
                    None
                }
                None => Notice::of(&n.method, n.params.as_deref()),
            },
            _ => None,
        }
    }
}
