//! `subscriptions/listen` (2026-07-28): one SSE stream per listen request,
//! carrying the list changes the client asked for from every backend of the
//! namespace. It holds nothing but itself: it ends when the client closes
//! it or the gateway stops.

use std::sync::Arc;

use axum::response::Response;
use futures_util::stream::{self, StreamExt};
use indexmap::IndexMap;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::Front;
use crate::jsonrpc::{self, Outcome, RawId};
use crate::router::{ClientNotice, Namespace};
use crate::upstream::Caller;

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The filter keys the gateway honours, and the notification each admits.
const HONOURED: [(&str, &str); 3] = [
    ("toolsListChanged", "notifications/tools/list_changed"),
    ("promptsListChanged", "notifications/prompts/list_changed"),
    (
        "resourcesListChanged",
        "notifications/resources/list_changed",
    ),
];

pub(super) fn open(
    front: &Arc<Front>,
    ns: &Arc<Namespace>,
    caller: Caller,
    id: RawId,
    params: &IndexMap<String, Box<RawValue>>,
) -> Response {
    let asked: Map<String, Value> = params
        .get("notifications")
        .and_then(|n| serde_json::from_str(n.get()).ok())
        .unwrap_or_default();
    // Acknowledge only what is honoured: resource subscriptions are not.
    let mut honoured = Map::new();
    let mut wanted = Vec::new();
    for (key, method) in HONOURED {
        if asked.get(key) == Some(&Value::Bool(true)) {
            honoured.insert(key.into(), Value::Bool(true));
            wanted.push(method);
        }
    }
    let sub_id: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
    let meta = json!({ SUBSCRIPTION_ID: sub_id });
    let ack = jsonrpc::notification(
        "notifications/subscriptions/acknowledged",
        Some(&jsonrpc::raw(
            &json!({ "notifications": honoured, "_meta": meta }),
        )),
    );
    let changes = super::follow::notices(front, ns, caller)
        .filter_map(move |n| {
            std::future::ready(match n {
                ClientNotice::ListChanged(method) if wanted.contains(&method) => Some(method),
                _ => None,
            })
        })
        .map(move |method| {
            let params = jsonrpc::raw(&json!({ "_meta": { SUBSCRIPTION_ID: sub_id.clone() } }));
            jsonrpc::notification(method, Some(&params))
        });
    let stopping = front.stopping.clone();
    // A graceful end: the listen request completes, then the stream closes.
    let farewell = stream::once(async move {
        stopping.cancelled().await;
        let result = jsonrpc::raw(&json!({ "resultType": "complete", "_meta": meta }));
        jsonrpc::response(&id, &Outcome::Result(result.into()))
    });
    let lines =
        stream::once(async move { ack }).chain(stream::select(changes, farewell).take_while({
            let mut ended = false;
            move |line| {
                let go = !ended;
                ended = line.contains("\"result\"");
                std::future::ready(go)
            }
        }));
    super::answer::sse(lines.map(super::message::Message::line))
}
