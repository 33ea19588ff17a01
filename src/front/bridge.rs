//! Server-to-client requests across eras. A legacy backend asks its client
//! mid-call (sampling, elicitation, roots); a 2026-07-28 client cannot be
//! asked mid-request and answers by retrying instead (multi-round-trip
//! requests, `S/2026-07-28/basic/patterns/mrtr.mdx`). So the bridge ends
//! the client's response with `input_required`, parks the running call,
//! and when the retry brings `inputResponses` with the `requestState` it
//! was given, answers the backend and resumes the call.
//!
//! Parked calls are bounded (`MAX_PARKED`) and expire (`PARK_TTL`); an
//! expired or dropped one is cancelled like a closed stream, and the
//! backend's questions are answered with an error. A `requestState` is
//! 128 random bits, bound to the principal that got it; one the bridge did
//! not issue belongs to a 2026-07-28 backend and passes through untouched.

use std::collections::HashMap;
use std::time::Duration;

use indexmap::IndexMap;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::reply::Running;
use crate::jsonrpc::{self, Outcome};
use crate::router::Namespace;
use crate::upstream::{Caller, Event};
use crate::vocab::Principal;

/// Calls waiting for a client's retry, over the whole gateway.
const MAX_PARKED: usize = 1024;
/// How long a parked call waits for its retry.
const PARK_TTL: Duration = Duration::from_secs(120);
/// Marks the `requestState` values the bridge issues.
const STATE_PREFIX: &str = "sluice-mrtr.";

#[derive(Default)]
pub(crate) struct Bridge {
    parked: Mutex<HashMap<String, Parked>>,
}

struct Parked {
    principal: Principal,
    running: Running,
    /// The questions not answered yet: (gateway id, method, params).
    asked: Vec<Question>,
    expires: Instant,
}

#[derive(Clone)]
struct Question {
    id: String,
    method: String,
    params: Option<Box<RawValue>>,
}

impl Bridge {
    /// How many calls wait for a retry.
    pub(crate) fn len(&self) -> usize {
        self.parked.lock().len()
    }

    fn insert(
        &self,
        principal: Principal,
        running: Running,
        asked: Vec<Question>,
    ) -> Result<String, Running> {
        let mut parked = self.parked.lock();
        let now = Instant::now();
        // Expired ones go first (dropping one cancels its call).
        parked.retain(|_, p| p.expires > now);
        if parked.len() >= MAX_PARKED {
            return Err(running);
        }
        let token = format!("{STATE_PREFIX}{}", crate::vocab::random::hex(16));
        parked.insert(
            token.clone(),
            Parked {
                principal,
                running,
                asked,
                expires: now + PARK_TTL,
            },
        );
        Ok(token)
    }

    fn take(&self, token: &str, principal: &Principal) -> Option<Parked> {
        let mut parked = self.parked.lock();
        match parked.get(token) {
            Some(p) if p.principal == *principal && p.expires > Instant::now() => {
                parked.remove(token)
            }
            _ => None,
        }
    }

    /// Parks a running call whose backend asked questions; the outcome is
    /// the `input_required` result the client gets (or an error when full),
    /// as the era is yet to decorate it.
    pub(super) fn park(
        &self,
        principal: Principal,
        running: Running,
        asked: Vec<Event>,
    ) -> Outcome {
        let asked: Vec<Question> = asked
            .into_iter()
            .filter_map(|e| match e {
                Event::Request { id, method, params } => Some(Question { id, method, params }),
                Event::Notification(_) => None,
            })
            .collect();
        self.ask(principal, running, asked)
    }

    /// Parks `running` until its questions are answered: the
    /// `input_required` result that asks them, or an error when full (the
    /// dropped call is cancelled; its backend's questions refused).
    fn ask(&self, principal: Principal, running: Running, asked: Vec<Question>) -> Outcome {
        let inputs = input_requests(&asked);
        match self.insert(principal, running, asked) {
            Ok(token) => Outcome::Result(
                jsonrpc::raw(&json!({
                    "resultType": "input_required",
                    "inputRequests": inputs,
                    "requestState": token,
                }))
                .into(),
            ),
            Err(_running) => Outcome::Error(jsonrpc::error_object(
                jsonrpc::INTERNAL_ERROR,
                "sluice: too many requests are waiting for input; retry later",
                None,
            )),
        }
    }

    /// A retry of a parked call: its answers go to the backend. None when
    /// the state is unknown, expired or another principal's (the client
    /// starts over).
    pub(super) fn resume(
        &self,
        ns: &Namespace,
        caller: &Caller,
        principal: &Principal,
        state: &str,
        fields: &IndexMap<String, Box<RawValue>>,
    ) -> Option<Resumed> {
        let mut parked = self.take(state, principal)?;
        let responses: IndexMap<String, Box<RawValue>> = fields
            .get("inputResponses")
            .and_then(|r| serde_json::from_str(r.get()).ok())
            .unwrap_or_default();
        let mut unanswered = Vec::new();
        for q in std::mem::take(&mut parked.asked) {
            match responses.get(&q.id) {
                Some(answer) => {
                    let id = jsonrpc::raw(&q.id);
                    ns.answer(caller, &id, &Outcome::Result(answer.clone().into()));
                }
                None => unanswered.push(q),
            }
        }
        if unanswered.is_empty() {
            return Some(Resumed::Running(parked.running));
        }
        // Asked again, under a new state; the call stays parked.
        let asked = self.ask(principal.clone(), parked.running, unanswered);
        Some(Resumed::Asked(asked))
    }
}

/// What a retry of a parked call comes to.
pub(super) enum Resumed {
    /// Every question answered: the call goes on, and its response
    /// continues under the retry's id.
    Running(Running),
    /// Some were not: the outcome asks them again (or is an error when
    /// full), as the era is yet to decorate it.
    Asked(Outcome),
}

fn input_requests(asked: &[Question]) -> Map<String, Value> {
    asked
        .iter()
        .map(|q| {
            let params: Value = q
                .params
                .as_deref()
                .and_then(|p| serde_json::from_str(p.get()).ok())
                .unwrap_or(Value::Null);
            let mut request = json!({ "method": q.method });
            if !params.is_null() {
                request["params"] = params;
            }
            (q.id.clone(), request)
        })
        .collect()
}

/// The `requestState` of a retry, when the bridge issued it.
pub(super) fn retry_state(fields: &IndexMap<String, Box<RawValue>>) -> Option<String> {
    let state: String = serde_json::from_str(fields.get("requestState")?.get()).ok()?;
    state.starts_with(STATE_PREFIX).then_some(state)
}
