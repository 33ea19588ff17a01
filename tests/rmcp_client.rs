//! rmcp's official Rust client, legacy lifecycle, through the gateway.

mod support;

use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::ServiceExt;
use rmcp::handler::client::ClientHandler;
use rmcp::model::{
    CallToolRequestParams, ClientConfig, GetPromptRequestParams, NumberOrString,
    ProgressNotificationParam, ProgressToken, ReadResourceRequestParams, RequestMetaObject,
};
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::transport::StreamableHttpClientTransport;
use support::*;

#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().push(params);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }
}

fn args(v: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    v.as_object().cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_lists_and_calls_through_the_gateway() {
    let gw = Gateway::start_default();
    let recorder = Recorder::default();
    let transport = StreamableHttpClientTransport::from_uri(gw.url("/mcp"));
    let client = recorder
        .clone()
        .serve(transport)
        .await
        .expect("initialize through sluice");
    let info = client.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("sluice")
    );

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(
        names,
        ["demo__echo", "demo__add", "demo__sleep_ms", "demo__counter"]
    );

    let mut call = CallToolRequestParams::new("demo__add");
    call.arguments = args(serde_json::json!({"a": 40, "b": 2}));
    let r = client.call_tool(call).await.unwrap();
    assert_eq!(r.structured_content, Some(serde_json::json!({"sum": 42})));

    let mut call = CallToolRequestParams::new("demo__sleep_ms");
    call.arguments = args(serde_json::json!({"ms": 100}));
    call.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::String("rmcp-progress".into()),
    )));
    let r = client.call_tool(call).await.unwrap();
    let text = serde_json::to_value(&r.content[0]).unwrap();
    assert_eq!(text["text"], "slept 100ms");
    // Handled on tasks of rmcp's own: maybe after the result is seen.
    wait_until(std::time::Duration::from_secs(5), || {
        recorder.progress.lock().len() >= 5
    });
    let progress = recorder.progress.lock().clone();
    assert_eq!(progress.len(), 5, "{progress:?}");
    // rmcp assigns its own token per request; all five must carry it.
    assert!(
        progress
            .iter()
            .all(|p| p.progress_token == progress[0].progress_token)
    );
    assert_eq!(progress.last().unwrap().progress, 4.0);

    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "demo__greeting");
    let mut get = GetPromptRequestParams::new("demo__greeting");
    get.arguments = args(serde_json::json!({"name": "Grace"}));
    let p = client.get_prompt(get).await.unwrap();
    let msg = serde_json::to_value(&p.messages[0]).unwrap();
    assert_eq!(msg["content"]["text"], "Hello, Grace!");

    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(resources[0].uri, "sluice://demo/demo://readme");
    let read = client
        .read_resource(ReadResourceRequestParams::new(
            "sluice://demo/demo://readme",
        ))
        .await
        .unwrap();
    let first = serde_json::to_value(&read.contents[0]).unwrap();
    assert_eq!(first["uri"], "sluice://demo/demo://readme");

    client.cancel().await.unwrap();
    // rmcp's cancel sends DELETE; the gateway ends the session.
    let m = gw.metrics();
    assert_eq!(m.get("sluice_client_sessions_live"), 0.0);
    assert_eq!(
        m.get(r#"sluice_client_sessions_closed_total{reason="delete"}"#),
        1.0
    );
}

/// rmcp's client with the 2026-07-28 `Discover` lifecycle: no session, no
/// initialize, per-request metadata; the gateway bridges it to the legacy
/// stdio demo backend over its own backend session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_discover_client_reaches_a_legacy_backend() {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};

    let gw = Gateway::start_default();
    let recorder = Recorder::default();
    let transport = StreamableHttpClientTransport::from_uri(gw.url("/mcp"));
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = recorder
        .clone()
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .expect("discover through sluice");
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 4);
    let mut call = CallToolRequestParams::new("demo__sleep_ms");
    call.arguments = args(serde_json::json!({"ms": 40}));
    let r = client.call_tool(call).await.unwrap();
    assert_eq!(
        serde_json::to_value(&r.content[0]).unwrap()["text"],
        "slept 40ms"
    );
    // rmcp runs each notification's handler on a task of its own, so the
    // call's answer can be back before the last progress is recorded.
    wait_until(std::time::Duration::from_secs(5), || {
        recorder.progress.lock().len() >= 5
    });
    assert_eq!(
        recorder.progress.lock().len(),
        5,
        "progress reaches a modern client too"
    );
    client.cancel().await.unwrap();
    let m = gw.metrics();
    assert_eq!(
        m.get("sluice_client_sessions_opened_total"),
        0.0,
        "a modern client has no session"
    );
    assert!(
        m.get(r#"sluice_requests_total{era="modern",method="tools/call",outcome="ok"}"#) >= 1.0
    );
}

/// rmcp in both lifecycles against a 2026-07-28 HTTP backend (the
/// conformance fixture): legacy clients bridged to it, modern ones served
/// statelessly end to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_both_lifecycles_reach_a_modern_backend() {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};

    let fx = Fixture::start_example("conformance_fixture", "127.0.0.1:0", &[]);
    let gw = Gateway::start(&http_backend("modern", &fx.url(), ""));
    for lifecycle in [
        ClientLifecycleMode::Initialize,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    ] {
        let recorder = Recorder::default();
        let transport = StreamableHttpClientTransport::from_uri(gw.url("/mcp"));
        let client = recorder
            .clone()
            .serve_with_lifecycle(transport, lifecycle.clone())
            .await
            .unwrap_or_else(|e| panic!("{lifecycle:?}: {e}"));
        let names: Vec<_> = client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        assert!(
            names.contains(&"modern__test_simple_text".to_owned()),
            "{names:?}"
        );
        let r = client
            .call_tool(CallToolRequestParams::new("modern__test_simple_text"))
            .await
            .unwrap();
        assert_eq!(
            serde_json::to_value(&r.content[0]).unwrap()["text"],
            "This is a simple text response for testing."
        );
        client
            .call_tool(CallToolRequestParams::new(
                "modern__test_tool_with_progress",
            ))
            .await
            .unwrap();
        // rmcp hands each notification to the handler on a task of its
        // own: the result may be seen before the last progress is.
        wait_until(std::time::Duration::from_secs(5), || {
            recorder.progress.lock().len() >= 3
        });
        client.cancel().await.unwrap();
    }
}

/// Issue 8: rmcp's client holds one sealed session while the gateway behind
/// its URL is SIGKILLed and started again (same key, same address): its
/// next calls succeed with no new `initialize`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_keeps_its_sealed_session_across_a_restart() {
    let key = keygen();
    let env = [("SLUICE_SESSION_KEY", key.as_str())];
    let toml = format!(
        "[server]\nsession_ids = \"sealed\"\n{}",
        demo_backend("demo")
    );
    let addr = format!("127.0.0.1:{}", free_port());
    let gw = Gateway::start_at(&toml, &env, &addr);
    gw.wait_ready();
    let transport = StreamableHttpClientTransport::from_uri(gw.url("/mcp"));
    let client = Recorder::default()
        .serve(transport)
        .await
        .expect("initialize through sluice");
    let echo = |text: &'static str| {
        let mut call = CallToolRequestParams::new("demo__echo");
        call.arguments = args(serde_json::json!({ "text": text }));
        call
    };
    let text_of = |r: &rmcp::model::CallToolResult| {
        serde_json::to_value(&r.content[0]).unwrap()["text"].clone()
    };
    let r = client.call_tool(echo("before")).await.unwrap();
    assert_eq!(text_of(&r), "before");

    // SAFETY: our own child.
    unsafe {
        libc::kill(gw.pid() as i32, libc::SIGKILL);
    }
    wait_until(std::time::Duration::from_secs(10), || !gw.is_running());
    drop(gw);
    let gw = Gateway::start_at(&toml, &env, &addr);
    gw.wait_ready();
    for text in ["after", "and after"] {
        let r = client
            .call_tool(echo(text))
            .await
            .expect("the same session");
        assert_eq!(text_of(&r), text);
    }
    let m = gw.metrics();
    assert_eq!(
        m.get(r#"sluice_client_sessions_resumed_total{cause="restart"}"#),
        1.0
    );
    assert_eq!(
        m.get("sluice_client_sessions_opened_total"),
        0.0,
        "no initialize"
    );
    client.cancel().await.unwrap();
}
