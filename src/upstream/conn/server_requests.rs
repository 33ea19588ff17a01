//! The backend's requests to a client (sampling, elicitation, roots),
//! relayed: answered by the gateway itself where it can (`ping`, configured
//! roots), else routed to the one client that may answer, under an
//! unguessable id, and refused after `ASK_TIMEOUT` if that client never
//! does. At most `MAX_SERVER_REQUESTS` wait at once.

use std::sync::atomic::Ordering;

use serde_json::value::RawValue;

use super::{
    ASK_TIMEOUT, Answered, Conn, MAX_SERVER_REQUESTS, OUTSIDE_CALLS, Pending, ServerRequest,
    elicitations,
};
use crate::jsonrpc::{self, Outcome};
use crate::upstream::ClientKey;
use crate::upstream::events::Event;
use crate::upstream::notice::Notice;

impl Conn {
    /// A server request rides on the response stream of the client request
    /// that caused it when the transport says so (`origin`). Over a stdio
    /// pipe nothing ties it to a request: route it only when exactly one
    /// request that can carry it is in flight, else refuse it so the backend
    /// is not left waiting.
    pub(super) fn on_server_request(
        &self,
        r: jsonrpc::Request,
        origin: Option<u64>,
    ) -> Option<Notice> {
        if r.method == "ping" {
            let pong = Outcome::Result(jsonrpc::raw(&serde_json::json!({})).into());
            self.send(jsonrpc::response(&r.id, &pong));
            return None;
        }
        if r.method == "roots/list"
            && let Some(roots) = &self.roots
        {
            let list: Vec<_> = roots
                .iter()
                .map(|uri| serde_json::json!({ "uri": uri }))
                .collect();
            let result =
                Outcome::Result(jsonrpc::raw(&serde_json::json!({ "roots": list })).into());
            self.send(jsonrpc::response(&r.id, &result));
            return None;
        }
        let mut ask = None;
        // A URL mode elicitation's completion goes to the client asked.
        let url_elicitation = (r.method == "elicitation/create")
            .then(|| elicitations::of_request(r.params.as_deref()?.get()))
            .flatten();
        let refusal = {
            let mut st = self.state.lock();
            let target = match origin {
                Some(id) => st.calls.get(&id).map(|c| (id, c.to.clone())),
                None => st.sole_caller().map(|(id, to)| (id, Some(to))),
            };
            match target {
                // Outside any call, a per-session backend asks its own client
                // (on the client's GET stream), if the client can answer.
                None if origin.is_none() && self.owner.is_some() => {
                    let Some((client, caps)) = &self.owner else {
                        unreachable!("checked in the guard")
                    };
                    match caps.missing_for(&r.method, r.params.as_deref().map(RawValue::get)) {
                        Some(_) => Some((
                            jsonrpc::METHOD_NOT_FOUND,
                            "the client did not declare the capability it needs",
                        )),
                        None if st.server_requests.len() >= MAX_SERVER_REQUESTS => Some((
                            jsonrpc::INTERNAL_ERROR,
                            "too many server requests awaiting answers",
                        )),
                        None => {
                            let token = crate::vocab::random::hex(16);
                            st.server_requests.insert(
                                token.clone(),
                                ServerRequest {
                                    backend_id: r.id.clone(),
                                    origin: OUTSIDE_CALLS,
                                    client: client.clone(),
                                },
                            );
                            if let Some(id) = url_elicitation {
                                st.elicitations.learn(id, client.clone());
                            }
                            self.note_asked(&st);
                            ask = Some(token);
                            None
                        }
                    }
                }
                Some((_, Some(to)))
                    if to
                        .caps
                        .missing_for(&r.method, r.params.as_deref().map(RawValue::get))
                        .is_some() =>
                {
                    let missing = to
                        .caps
                        .missing_for(&r.method, r.params.as_deref().map(RawValue::get))
                        .unwrap_or_default();
                    // What the client itself would answer: it has no such method.
                    Some((
                        jsonrpc::METHOD_NOT_FOUND,
                        match missing {
                            "sampling" => "the client did not declare the sampling capability",
                            "elicitation" => {
                                "the client did not declare the elicitation capability"
                            }
                            _ => "the client did not declare the roots capability",
                        },
                    ))
                }
                Some((origin, Some(to))) if st.server_requests.len() < MAX_SERVER_REQUESTS => {
                    // Unguessable: an id is the capability to answer.
                    let token = crate::vocab::random::hex(16);
                    let event = Event::Request {
                        id: format!("sluice:{}:{token}", self.backend),
                        method: r.method.clone(),
                        params: r.params.clone(),
                    };
                    if to.events.try_send(event).is_ok() {
                        if let Some(id) = url_elicitation {
                            st.elicitations.learn(id, to.client.clone());
                        }
                        st.server_requests.insert(
                            token,
                            ServerRequest {
                                backend_id: r.id.clone(),
                                origin,
                                client: to.client,
                            },
                        );
                        self.note_asked(&st);
                        None
                    } else {
                        Some((
                            jsonrpc::INTERNAL_ERROR,
                            "the client's stream is not accepting messages",
                        ))
                    }
                }
                Some((_, Some(_))) => Some((
                    jsonrpc::INTERNAL_ERROR,
                    "too many server requests awaiting answers",
                )),
                Some((_, None)) => Some((
                    jsonrpc::INTERNAL_ERROR,
                    "the request it belongs to cannot carry it",
                )),
                None if origin.is_some() => Some((
                    jsonrpc::INTERNAL_ERROR,
                    "the request it belongs to has ended",
                )),
                None => Some((
                    jsonrpc::INTERNAL_ERROR,
                    "not exactly one client request in flight on this shared backend; use per-session isolation",
                )),
            }
        };
        if let Some(token) = ask {
            self.expire_later(token.clone());
            return Some(Notice::Ask {
                id: format!("sluice:{}:{token}", self.backend),
                method: r.method,
                params: r.params,
                client: None,
            });
        }
        if let Some((code, why)) = refusal {
            if let Some(suppressed) = self.warnings.admit() {
                tracing::warn!(backend = %self.backend, method = %r.method, why, suppressed, "refused server-to-client request");
            }
            let err = jsonrpc::error_object(
                code,
                &format!("sluice cannot route {}: {why}", r.method),
                None,
            );
            self.send(jsonrpc::response(&r.id, &Outcome::Error(err)));
        }
        None
    }

    /// Unanswered (no GET stream open, a client that never replies), a
    /// question is refused after `ASK_TIMEOUT`, so the backend is not left
    /// waiting.
    pub(super) fn expire_later(&self, token: String) {
        let conn = self.me.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                tokio::time::sleep(ASK_TIMEOUT).await;
                if let Some(conn) = conn.upgrade() {
                    conn.expire(&token);
                }
            });
        }
    }

    /// Refuses a question that got no answer.
    fn expire(&self, token: &str) {
        let request = {
            let mut st = self.state.lock();
            let request = st.server_requests.remove(token);
            self.note_asked(&st);
            request
        };
        if let Some(r) = request {
            let err = jsonrpc::error_object(
                jsonrpc::INTERNAL_ERROR,
                "sluice: the client did not answer in time",
                None,
            );
            self.send(jsonrpc::response(&r.backend_id, &Outcome::Error(err)));
        }
    }

    /// Under the lock, after `server_requests` changed.
    pub(super) fn note_asked(&self, st: &Pending) {
        self.asked
            .store(st.server_requests.len(), Ordering::Release);
    }

    /// Delivers a client's answer to a server-to-client request, if that
    /// client is the one it was relayed to.
    pub(crate) fn answer(&self, token: &str, from: &ClientKey, outcome: &Outcome) -> Answered {
        let request = {
            let mut st = self.state.lock();
            match st.server_requests.get(token) {
                None => return Answered::Unknown,
                Some(r) if r.client != *from => return Answered::NotYours,
                Some(_) => {
                    let request = st.server_requests.remove(token);
                    self.note_asked(&st);
                    request
                }
            }
        };
        if let Some(r) = request {
            self.send(jsonrpc::response(&r.backend_id, outcome));
        }
        Answered::Delivered
    }
}
