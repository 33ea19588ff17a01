use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::protocol::ClientCaps;
use crate::upstream::notice::Notice;

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).unwrap()
}

fn conn() -> (Arc<Conn>, mpsc::Receiver<Frame>) {
    conn_writing(Writes::Untracked)
}

fn conn_writing(writes: Writes) -> (Arc<Conn>, mpsc::Receiver<Frame>) {
    let (tx, rx) = mpsc::channel(16);
    (
        Conn::new(
            BackendName::new("b").unwrap(),
            Arc::new(super::super::throttle::Throttle::new(
                5,
                std::time::Duration::from_secs(10),
            )),
            tx,
            writes,
        ),
        rx,
    )
}

/// A tracked wire (a pipe) tells which requests left: those that did not
/// fail as unsent (safe to send again), whenever the session ends; those
/// that did, or that it is still writing when it ends, fail as exited.
#[tokio::test]
async fn requests_that_never_left_fail_as_unsent() {
    let timeout = Duration::from_secs(5);
    let (conn, mut wire) = conn_writing(Writes::Tracked);
    let call = |c: &Arc<Conn>| {
        let c = c.clone();
        tokio::spawn(async move { c.call("tools/call", None, None, timeout).await })
    };
    // Queued, never claimed: the session ends.
    let queued = call(&conn);
    let q = wire.recv().await.unwrap().call.unwrap();
    // Claimed and written, then the session ends: it may have run.
    let written = call(&conn);
    let w = wire.recv().await.unwrap().call.unwrap();
    assert!(conn.claim(w));
    conn.settle(w, true);
    // Claimed when the session ends; the write then fails at its first byte.
    let writing = call(&conn);
    let f = wire.recv().await.unwrap().call.unwrap();
    assert!(conn.claim(f));
    conn.fail_all();
    assert!(
        !conn.claim(q),
        "a request told it was unsent must not be written"
    );
    conn.settle(f, false);
    let err = |r: Result<Result<Outcome, UpstreamError>, _>| r.unwrap().unwrap_err();
    assert!(err(queued.await).is_not_sent());
    assert!(err(writing.await).is_not_sent());
    let w = err(written.await);
    assert!(
        !w.is_not_sent() && w.to_string().contains("exited before answering"),
        "{w}"
    );
    // After the end nothing is sent at all.
    assert!(err(call(&conn).await).is_not_sent());
    // An untracked wire (HTTP) never claims that a request did not leave.
    let (http, mut wire) = conn_writing(Writes::Untracked);
    let pending = call(&http);
    wire.recv().await.unwrap();
    http.fail_all();
    assert!(!err(pending.await).is_not_sent());
}

/// A listener for client `who` (a principal index), and its event stream
/// as JSON-RPC lines.
fn listener(who: usize) -> (Listener, mpsc::Receiver<String>) {
    listener_with(who, ClientCaps::ALL)
}

fn listener_with(who: usize, caps: ClientCaps) -> (Listener, mpsc::Receiver<String>) {
    let (events, rx) = crate::upstream::events::channel(8);
    let (lines, out) = mpsc::channel(8);
    tokio::spawn(async move {
        while let Some(e) = rx.recv().await {
            let _ = lines.send(e.line()).await;
        }
    });
    let client = ClientKey::Principal(crate::vocab::Principal::named(who));
    (
        Listener {
            events,
            client,
            caps,
        },
        out,
    )
}

async fn next_json(rx: &mut mpsc::Receiver<Frame>) -> Value {
    serde_json::from_str(&rx.recv().await.unwrap().line).unwrap()
}

#[test]
fn progress_token_is_rewritten_and_the_rest_kept() {
    let p = raw(r#"{"name":"t","arguments":{"x": 1.50},"_meta":{"progressToken":"abc","k":[1]}}"#);
    let (p, tok) = calls::rewrite_progress_token(&p, 42);
    assert_eq!(tok.unwrap().get(), r#""abc""#);
    assert_eq!(
        p.get(),
        r#"{"name":"t","arguments":{"x": 1.50},"_meta":{"progressToken":42,"k":[1]}}"#
    );
}

#[test]
fn params_without_token_pass_unchanged() {
    let text = r#"{"name":"t", "arguments":{}}"#;
    let raw = raw(text);
    let (p, tok) = calls::rewrite_progress_token(&raw, 1);
    assert!(tok.is_none());
    assert_eq!(p.get(), text);
}

/// Concurrent callers get gateway ids; responses and progress are routed
/// by them, whatever ids the clients used.
#[tokio::test]
async fn responses_and_progress_reach_their_caller() {
    let (conn, mut wire) = conn();
    let (ev_a, mut events_a) = listener(1);
    let (ev_b, mut events_b) = listener(2);
    let c = conn.clone();
    let a = tokio::spawn(async move {
        let p = raw(r#"{"_meta":{"progressToken":"same"}}"#);
        c.call("x", Some(p), Some(ev_a.by_ref()), Duration::from_secs(5))
            .await
    });
    let id_a = next_json(&mut wire).await["id"].as_u64().unwrap();
    let c = conn.clone();
    let b = tokio::spawn(async move {
        let p = raw(r#"{"_meta":{"progressToken":"same"}}"#);
        c.call("x", Some(p), Some(ev_b.by_ref()), Duration::from_secs(5))
            .await
    });
    let id_b = next_json(&mut wire).await["id"].as_u64().unwrap();
    assert_ne!(id_a, id_b);

    conn.dispatch(format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{id_b},"progress":1}}}}"#), None);
    let p: Value = serde_json::from_str(&events_b.recv().await.unwrap()).unwrap();
    assert_eq!(p["params"]["progressToken"], "same");
    assert!(events_a.try_recv().is_err());

    conn.dispatch(
        format!(r#"{{"jsonrpc":"2.0","id":{id_b},"result":{{"who":"b"}}}}"#),
        None,
    );
    conn.dispatch(
        format!(r#"{{"jsonrpc":"2.0","id":{id_a},"result":{{"who":"a"}}}}"#),
        None,
    );
    let Outcome::Result(ra) = a.await.unwrap().unwrap() else {
        panic!()
    };
    let Outcome::Result(rb) = b.await.unwrap().unwrap() else {
        panic!()
    };
    assert_eq!(ra.get(), r#"{"who":"a"}"#);
    assert_eq!(rb.get(), r#"{"who":"b"}"#);
}

/// With one request in flight a server request goes to that client, and
/// the client's answer returns to the backend under the backend's own id.
#[tokio::test]
async fn a_server_request_is_routed_to_the_one_caller() {
    let (conn, mut wire) = conn();
    let (ev, mut events) = listener(1);
    let c = conn.clone();
    let to = ev.clone();
    let call = tokio::spawn(async move {
        c.call("x", None, Some(to.by_ref()), Duration::from_secs(5))
            .await
    });
    let id = next_json(&mut wire).await["id"].as_u64().unwrap();

    conn.dispatch(
        r#"{"jsonrpc":"2.0","id":"srv-7","method":"sampling/createMessage","params":{"m":1}}"#,
        None,
    );
    let asked: Value = serde_json::from_str(&events.recv().await.unwrap()).unwrap();
    assert_eq!(asked["method"], "sampling/createMessage");
    assert_eq!(asked["params"], serde_json::json!({"m":1}));
    let client_id = asked["id"].as_str().unwrap().to_owned();
    let token = client_id.rsplit(':').next().unwrap();
    assert!(client_id.starts_with("sluice:b:"));
    assert_eq!(token.len(), 32, "128 random bits, not a counter");

    // Issue 9 (1): another client cannot answer it, however it got the id.
    let intruder = listener(2).0.client;
    assert_eq!(
        conn.answer(
            token,
            &intruder,
            &Outcome::Result(raw(r#"{"forged":true}"#).into())
        ),
        Answered::NotYours
    );
    assert!(wire.try_recv().is_err(), "nothing reached the backend");
    assert_eq!(
        conn.answer(
            token,
            &ev.client,
            &Outcome::Result(raw(r#"{"ok":true}"#).into())
        ),
        Answered::Delivered
    );
    let back = next_json(&mut wire).await;
    assert_eq!(back["id"], "srv-7");
    assert_eq!(back["result"], serde_json::json!({"ok":true}));
    assert_eq!(
        conn.answer(token, &ev.client, &Outcome::Result(raw("{}").into())),
        Answered::Unknown,
        "answered only once"
    );

    conn.dispatch(
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#),
        None,
    );
    assert!(call.await.unwrap().is_ok());
}

/// With two requests in flight nothing ties a server request to either:
/// the backend gets an error instead of waiting forever.
#[tokio::test]
async fn an_ambiguous_server_request_is_refused() {
    let (conn, mut wire) = conn();
    let (ev, mut events) = listener(1);
    for _ in 0..2 {
        let c = conn.clone();
        let ev = ev.clone();
        tokio::spawn(async move {
            c.call("x", None, Some(ev.by_ref()), Duration::from_secs(5))
                .await
        });
        next_json(&mut wire).await;
    }
    conn.dispatch(
        r#"{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{}}"#,
        None,
    );
    let refusal = next_json(&mut wire).await;
    assert_eq!(refusal["id"], 9);
    assert_eq!(refusal["error"]["code"], -32603);
    assert!(events.try_recv().is_err());
}

/// A caller that gives up (timeout) is removed and the backend is told.
#[tokio::test(start_paused = true)]
async fn a_timed_out_call_is_cancelled_at_the_backend() {
    let (conn, mut wire) = conn();
    let err = {
        let c = conn.clone();
        let call =
            tokio::spawn(async move { c.call("x", None, None, Duration::from_secs(1)).await });
        let id = next_json(&mut wire).await["id"].as_u64().unwrap();
        let err = call.await.unwrap().unwrap_err();
        let cancel = next_json(&mut wire).await;
        assert_eq!(cancel["method"], "notifications/cancelled");
        assert_eq!(cancel["params"]["requestId"], id);
        err
    };
    assert!(err.is_timeout());
    assert!(conn.state.lock().calls.is_empty());
}

/// Over HTTP the response stream names the request: routing is exact even
/// with many requests in flight.
#[tokio::test]
async fn a_server_request_on_a_response_stream_goes_to_its_request() {
    let (conn, mut wire) = conn();
    let (ev_a, mut events_a) = listener(1);
    let (ev_b, mut events_b) = listener(2);
    let c = conn.clone();
    tokio::spawn(async move {
        c.call("x", None, Some(ev_a.by_ref()), Duration::from_secs(5))
            .await
    });
    let id_a = next_json(&mut wire).await["id"].as_u64().unwrap();
    let c = conn.clone();
    tokio::spawn(async move {
        c.call("x", None, Some(ev_b.by_ref()), Duration::from_secs(5))
            .await
    });
    next_json(&mut wire).await;
    conn.dispatch(
        r#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}"#,
        Some(id_a),
    );
    let asked: Value = serde_json::from_str(&events_a.recv().await.unwrap()).unwrap();
    assert_eq!(asked["method"], "sampling/createMessage");
    assert!(events_b.try_recv().is_err());
}

/// Issue 13 (3): a request the client did not declare it can answer is
/// refused to the backend (as the client would: no such method), never
/// relayed.
#[tokio::test]
async fn a_server_request_the_client_cannot_answer_is_refused() {
    let (conn, mut wire) = conn();
    let (ev, mut events) = listener_with(1, ClientCaps::parse(r#"{"elicitation":{}}"#));
    let c = conn.clone();
    let to = ev.clone();
    tokio::spawn(async move {
        c.call("x", None, Some(to.by_ref()), Duration::from_secs(5))
            .await
    });
    next_json(&mut wire).await;
    conn.dispatch(
        r#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}"#,
        None,
    );
    let refusal = next_json(&mut wire).await;
    assert_eq!(refusal["id"], "s1");
    assert_eq!(refusal["error"]["code"], -32601);
    assert!(events.try_recv().is_err(), "not relayed");
    conn.dispatch(
        r#"{"jsonrpc":"2.0","id":"s2","method":"elicitation/create","params":{}}"#,
        None,
    );
    let asked: Value = serde_json::from_str(&events.recv().await.unwrap()).unwrap();
    assert_eq!(asked["method"], "elicitation/create");
}

/// A call answered on its own response stream is told so
/// (`dispatch_answering`), and ends without a word to the backend; a
/// question it asked on the way outlives its answer (a legacy client may
/// answer after the response) until it expires, and the backend is then
/// told it got no answer.
#[tokio::test(start_paused = true)]
async fn an_answered_call_ends_quietly_and_its_questions_outlive_it() {
    let (conn, mut wire) = conn();
    let (ev, mut events) = listener(1);
    let call = |conn: &Arc<Conn>| {
        let (c, to) = (conn.clone(), ev.clone());
        tokio::spawn(async move {
            c.call("x", None, Some(to.by_ref()), Duration::from_secs(5))
                .await
        })
    };
    let answer = |id: u64| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);

    // No question: the answer ends the call, nothing more is sent.
    let first = call(&conn);
    let id = next_json(&mut wire).await["id"].as_u64().unwrap();
    assert!(
        !conn.dispatch_answering(answer(id + 1000), Some(id)).1,
        "not its id"
    );
    assert!(conn.dispatch_answering(answer(id), Some(id)).1);
    assert!(first.await.unwrap().is_ok());
    assert!(
        wire.try_recv().is_err(),
        "no cancellation for an answered call"
    );

    // A question on the stream, then the answer: the question stays until
    // it expires unanswered.
    let second = call(&conn);
    let id = next_json(&mut wire).await["id"].as_u64().unwrap();
    conn.dispatch_answering(
        r#"{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{}}"#,
        Some(id),
    );
    let asked: Value = serde_json::from_str(&events.recv().await.unwrap()).unwrap();
    assert_eq!(asked["method"], "elicitation/create");
    assert!(conn.dispatch_answering(answer(id), Some(id)).1);
    assert!(second.await.unwrap().is_ok());
    assert!(
        wire.try_recv().is_err(),
        "no cancellation for an answered call"
    );
    let refused = tokio::time::timeout(ASK_TIMEOUT * 2, next_json(&mut wire))
        .await
        .expect("the unanswered question expired");
    assert_eq!(refused["id"], "q1");
    assert!(refused["error"].is_object());
}

/// The client a completion outside any call is for, and its line.
fn completion_for(notice: Option<Notice>) -> (Option<ClientKey>, String) {
    match notice {
        Some(Notice::ElicitationComplete { line, client }) => (client, line.to_string()),
        other => panic!("not a completion: {other:?}"),
    }
}

type Call = tokio::task::JoinHandle<Result<Outcome, UpstreamError>>;

/// A `tools/call` for `to` in flight, and its gateway id.
async fn tools_call(
    conn: &Arc<Conn>,
    wire: &mut mpsc::Receiver<Frame>,
    to: &Listener,
) -> (Call, u64) {
    let (c, to) = (conn.clone(), to.clone());
    let call = tokio::spawn(async move {
        c.call(
            "tools/call",
            None,
            Some(to.by_ref()),
            Duration::from_secs(5),
        )
        .await
    });
    (call, next_json(wire).await["id"].as_u64().unwrap())
}

/// Issue 50: a backend's `notifications/elicitation/complete` outside any
/// call (its GET stream) goes to the client a URL mode elicitation was
/// handed to: relayed as `elicitation/create`, or listed by a -32042 error
/// (which reaches its caller byte for byte). Said once; an unknown id
/// names nobody.
#[tokio::test]
async fn an_elicitation_completes_for_the_client_it_was_handed_to() {
    let (conn, mut wire) = conn();
    let (ev_a, mut events_a) = listener(1);
    let (call, id) = tools_call(&conn, &mut wire, &ev_a).await;
    conn.dispatch(
        r#"{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"mode":"url","message":"m","url":"https://x.test/","elicitationId":"el-A"}}"#,
        Some(id),
    );
    let asked: Value = serde_json::from_str(&events_a.recv().await.unwrap()).unwrap();
    assert_eq!(asked["params"]["elicitationId"], "el-A");
    conn.dispatch(
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#),
        None,
    );
    call.await.unwrap().unwrap();

    // Client B's call is answered -32042, as the backend wrote it.
    let (ev_b, _events_b) = listener(2);
    let (call, id) = tools_call(&conn, &mut wire, &ev_b).await;
    let error = r#"{"code":-32042,"message":"open it","data":{"elicitations":[{"mode":"url","elicitationId":"el-B","url":"https://x.test/b","message":"m"}],"x": 1.50}}"#;
    conn.dispatch(
        format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#),
        None,
    );
    let Outcome::Error(got) = call.await.unwrap().unwrap() else {
        panic!("not an error")
    };
    assert_eq!(got.get(), error, "byte for byte");

    let done = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{{"elicitationId":"{id}"}}}}"#
        )
    };
    let (client, line) = completion_for(conn.dispatch(done("el-B"), None));
    assert_eq!(client, Some(ev_b.client.clone()));
    assert_eq!(line, done("el-B"));
    let (client, _) = completion_for(conn.dispatch(done("el-A"), None));
    assert_eq!(client, Some(ev_a.client.clone()));
    let (client, _) = completion_for(conn.dispatch(done("el-A"), None));
    assert_eq!(client, None, "said once");
    let (client, _) = completion_for(conn.dispatch(done("never-asked"), None));
    assert_eq!(client, None);
}

/// On a call's own response stream a completion goes to that call's client.
#[tokio::test]
async fn an_elicitation_completed_on_a_calls_stream_goes_to_its_client() {
    let (conn, mut wire) = conn();
    let (ev, mut events) = listener(1);
    let (_call, id) = tools_call(&conn, &mut wire, &ev).await;
    let line = r#"{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"x"}}"#;
    assert!(conn.dispatch(line, Some(id)).is_none(), "not a notice");
    assert_eq!(events.recv().await.unwrap(), line);
}
