//! A 2026-07-28 backend answers a call it needs input for with
//! `input_required` (multi-round-trip requests). A legacy client knows
//! nothing of that, but it can be asked the same questions as
//! server-to-client requests on its request's stream. So the gateway asks
//! them, collects the answers, and retries the call with `inputResponses`
//! and the backend's `requestState`, as a modern client would. Bounded in
//! rounds, in questions waiting, and in time.

use std::collections::HashMap;
use std::time::Duration;

use indexmap::IndexMap;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use crate::jsonrpc::{self, Outcome};
use crate::upstream::{Answered, Caller, Event, EventSink};

type Fields = IndexMap<String, Box<RawValue>>;

/// Retries of one call.
pub(super) const MAX_ROUNDS: usize = 8;
/// How long one round waits for the client's answers.
const ROUND_LIMIT: Duration = Duration::from_secs(60);
/// Questions waiting for answers, per namespace.
const MAX_WAITING: usize = 256;
/// The backend part of the ids the gateway asks under: not a valid backend
/// name, so never confused with a backend's own question.
pub(super) const ASKER: &str = "@";

#[derive(Default)]
pub(super) struct Rounds {
    waiting: Mutex<HashMap<String, Question>>,
}

/// A question the gateway asked: who may answer, and where the answer goes.
type Question = (Caller, oneshot::Sender<Box<RawValue>>);

/// What an `input_required` result asks: its questions and its state.
pub(super) struct Needed {
    requests: IndexMap<String, Fields>,
    state: Option<Box<RawValue>>,
}

/// The questions of an `input_required` result (None for any other).
pub(super) fn needed(outcome: &Outcome) -> Option<Needed> {
    let Outcome::Result(r) = outcome else {
        return None;
    };
    if !r.get().contains("input_required") {
        return None;
    }
    let mut fields: Fields = serde_json::from_str(r.get()).ok()?;
    if fields.get("resultType").map(|t| t.get()) != Some("\"input_required\"") {
        return None;
    }
    let requests = fields
        .get("inputRequests")
        .and_then(|q| serde_json::from_str(q.get()).ok())
        .unwrap_or_default();
    Some(Needed {
        requests,
        state: fields.shift_remove("requestState"),
    })
}

impl Rounds {
    /// Asks the client every question of `needed` on its request's stream
    /// and returns the call's params for the retry, or an error outcome.
    pub(super) async fn ask(
        &self,
        caller: &Caller,
        events: &EventSink,
        needed: Needed,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, Outcome> {
        let refuse = |why: &str| {
            Outcome::Error(jsonrpc::error_object(
                jsonrpc::INTERNAL_ERROR,
                &format!("sluice cannot get the backend's input from this client: {why}"),
                None,
            ))
        };
        let mut pending = Vec::new();
        for (key, request) in &needed.requests {
            let method: String = request
                .get("method")
                .and_then(|m| serde_json::from_str(m.get()).ok())
                .ok_or_else(|| refuse("an input request without a method"))?;
            let params = request.get("params").map(|p| p.get());
            if let Some(capability) = caller.caps().missing_for(&method, params) {
                return Err(refuse(&format!("it did not declare {capability}")));
            }
            let token = crate::vocab::random::hex(16);
            let (tx, rx) = oneshot::channel();
            {
                let mut waiting = self.waiting.lock();
                if waiting.len() >= MAX_WAITING {
                    return Err(refuse("too many questions waiting"));
                }
                waiting.insert(token.clone(), (caller.clone(), tx));
            }
            let question = Event::Request {
                id: format!("sluice:{ASKER}:{token}"),
                method,
                params: request.get("params").cloned(),
            };
            pending.push((key.clone(), token, rx));
            if events.try_send(question).is_err() {
                self.forget(&pending);
                return Err(refuse("its stream is not accepting messages"));
            }
        }
        let mut responses = serde_json::Map::new();
        let answers = futures_util::future::join_all(pending.iter_mut().map(|(_, _, rx)| rx));
        let answers = tokio::time::timeout(ROUND_LIMIT, answers).await;
        self.forget(&pending);
        let answers = answers.map_err(|_| refuse("it did not answer in time"))?;
        for ((key, _, _), answer) in pending.iter().zip(answers) {
            let answer = answer.map_err(|_| refuse("its answer was lost"))?;
            let value = serde_json::from_str(answer.get()).unwrap_or(serde_json::Value::Null);
            responses.insert(key.clone(), value);
        }
        let mut fields: Fields = serde_json::from_str(params.map_or("{}", RawValue::get))
            .map_err(|_| refuse("the call's params are not an object"))?;
        fields.insert("inputResponses".into(), jsonrpc::raw(&responses));
        match needed.state {
            Some(state) => fields.insert("requestState".into(), state),
            None => fields.shift_remove("requestState"),
        };
        Ok(jsonrpc::raw(&fields))
    }

    /// A client's answer to one of the gateway's questions; only the client
    /// asked may answer.
    pub(super) fn answer(&self, caller: &Caller, token: &str, outcome: &Outcome) -> Answered {
        let mut waiting = self.waiting.lock();
        match waiting.get(token) {
            Some((asked, _)) if asked.is_same_client(caller) => {}
            Some(_) => return Answered::NotYours,
            None => return Answered::Unknown,
        }
        let Some((_, tx)) = waiting.remove(token) else {
            return Answered::Unknown;
        };
        let answer = match outcome {
            Outcome::Result(r) => (**r).clone(),
            Outcome::Error(e) => jsonrpc::raw(&serde_json::json!({ "error": e })),
        };
        match tx.send(answer) {
            Ok(()) => Answered::Delivered,
            Err(_) => Answered::Unknown,
        }
    }

    fn forget(&self, pending: &[(String, String, oneshot::Receiver<Box<RawValue>>)]) {
        let mut waiting = self.waiting.lock();
        for (_, token, _) in pending {
            waiting.remove(token);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.waiting.lock().len()
    }
}
