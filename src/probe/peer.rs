//! The server under probe, spoken to as a client would: one POST a
//! message, the answer read from JSON or an SSE stream. Every exchange has
//! a deadline.

use std::time::Duration;

use futures_util::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};
use serde_json::{Value, json};

use crate::http1::client::{Client, Response, Target};
use crate::protocol::{SESSION_HEADER, VERSION_HEADER};
use crate::upstream::event_stream;

/// One exchange's deadline: a server that accepts and never answers costs
/// this much, not the probe's whole run.
const EXCHANGE: Duration = Duration::from_secs(10);
/// The largest answer read; a probe needs only the envelope.
const MAX_BODY: usize = 4 * 1024 * 1024;
pub(super) const LEGACY_VERSION: &str = "2025-11-25";

/// What came back: the status, the session id it named, and the JSON-RPC
/// messages of the body (several for an SSE stream).
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) session: Option<String>,
    pub(super) messages: Vec<Value>,
}

impl Answer {
    /// The JSON-RPC error code of the answer's first message, if it is one.
    pub(super) fn error_code(&self) -> Option<i64> {
        self.messages.first()?.get("error")?.get("code")?.as_i64()
    }

    pub(super) fn result(&self) -> Option<&Value> {
        self.messages.iter().find_map(|m| m.get("result"))
    }
}

#[derive(Clone)]
pub(super) struct Peer {
    client: Client,
    target: Target,
    headers: HeaderMap,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum PeerError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Send(String),
    #[error("bad header: {0}")]
    Header(String),
}

impl Peer {
    /// `headers` are `Name: value` pairs sent with every request (a token).
    pub(super) fn new(url: &str, headers: &[String]) -> Result<Peer, PeerError> {
        let uri: Uri = url
            .parse()
            .map_err(|_| PeerError::Header(format!("not a URL: {url}")))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(PeerError::Header(format!("not an http(s) URL: {url}")));
        }
        let mut map = HeaderMap::new();
        for h in headers {
            let (k, v) = h
                .split_once(':')
                .ok_or_else(|| PeerError::Header(format!("`{h}` is not Name: value")))?;
            let k = HeaderName::from_bytes(k.trim().as_bytes())
                .map_err(|_| PeerError::Header(format!("`{}` is not a header name", k.trim())))?;
            let v = HeaderValue::from_str(v.trim())
                .map_err(|_| PeerError::Header(format!("the value of `{k}` is not valid")))?;
            map.append(k, v);
        }
        let proxy = crate::http1::proxy::Proxy::from_process().map_err(PeerError::Send)?;
        let client = Client::new(proxy).map_err(PeerError::Send)?;
        Ok(Peer {
            target: client
                .target(&uri)
                .map_err(|e| PeerError::Header(format!("{e}: {url}")))?,
            client,
            headers: map,
        })
    }

    /// POSTs one JSON-RPC message (on `session` if given) and reads the answer.
    pub(super) async fn post(
        &self,
        session: Option<&str>,
        extra: &[(&'static str, &str)],
        message: &Value,
    ) -> Result<Answer, PeerError> {
        let mut req = self
            .client
            .request(Method::POST, &self.target)
            .headers(&self.headers)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        if !extra.iter().any(|(k, _)| *k == VERSION_HEADER.as_str()) {
            req = req.header(VERSION_HEADER, LEGACY_VERSION);
        }
        if let Some(s) = session {
            req = req.header(SESSION_HEADER, s);
        }
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        let send = req.body(message.to_string()).send();
        let resp = tokio::time::timeout(EXCHANGE, send)
            .await
            .map_err(|_| PeerError::Timeout(EXCHANGE))?
            .map_err(|e| PeerError::Send(e.to_string()))?;
        tokio::time::timeout(EXCHANGE, read(resp))
            .await
            .map_err(|_| PeerError::Timeout(EXCHANGE))
    }

    /// DELETE on a session: the status.
    pub(super) async fn delete(&self, session: &str) -> Result<StatusCode, PeerError> {
        let send = self
            .client
            .request(Method::DELETE, &self.target)
            .headers(&self.headers)
            .header(VERSION_HEADER, LEGACY_VERSION)
            .header(SESSION_HEADER, session)
            .send();
        let resp = tokio::time::timeout(EXCHANGE, send)
            .await
            .map_err(|_| PeerError::Timeout(EXCHANGE))?
            .map_err(|e| PeerError::Send(e.to_string()))?;
        Ok(resp.status())
    }

    /// `initialize` as a 2025-11-25 client sends it.
    pub(super) async fn initialize(&self) -> Result<Answer, PeerError> {
        let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion": LEGACY_VERSION, "capabilities": {},
            "clientInfo": {"name": "sluice-probe", "version": env!("CARGO_PKG_VERSION")}}});
        self.post(None, &[], &init).await
    }

    /// A session as real clients open one: initialize, initialized, and
    /// the tool list. Returns its id (None: the server issued none).
    pub(super) async fn open_session(&self) -> Result<Option<String>, PeerError> {
        let init = self.initialize().await?;
        if !init.status.is_success() || init.result().is_none() {
            return Err(PeerError::Send(format!(
                "initialize answered HTTP {}",
                init.status
            )));
        }
        let session = init.session;
        let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        self.post(session.as_deref(), &[], &note).await?;
        self.post(session.as_deref(), &[], &list(2)).await?;
        Ok(session)
    }

    /// A 2026-07-28 request, with the metadata and headers it requires.
    pub(super) async fn modern(&self, id: u64, method: &str) -> Result<Answer, PeerError> {
        let (params, _) = crate::upstream::meta::ensure_modern(method, None);
        let req = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        let extra = [
            ("mcp-protocol-version", crate::protocol::MODERN_FIRST),
            ("mcp-method", method),
        ];
        self.post(None, &extra, &req).await
    }
}

/// `tools/list` under this id.
pub(super) fn list(id: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/list"})
}

async fn read(resp: Response) -> Answer {
    let status = resp.status();
    let session = resp.headers().get_str(&SESSION_HEADER).map(str::to_owned);
    let sse = resp
        .headers()
        .get_str(&CONTENT_TYPE)
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut messages = Vec::new();
    if sse {
        let mut events = std::pin::pin!(event_stream::of_response(resp));
        // One answer is what a probe waits for; a stream may run on after it.
        while let Some(Ok(ev)) = events.next().await {
            if let Ok(v) = serde_json::from_str::<Value>(&ev.data) {
                let answer = v.get("result").is_some() || v.get("error").is_some();
                messages.push(v);
                if answer {
                    break;
                }
            }
        }
    } else {
        let mut body = Vec::new();
        let mut chunks = std::pin::pin!(resp.bytes_stream());
        while let Some(Ok(chunk)) = chunks.next().await {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_BODY {
                break;
            }
        }
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Array(items)) => messages = items,
            Ok(v) => messages.push(v),
            Err(_) => {}
        }
    }
    Answer {
        status,
        session,
        messages,
    }
}
