//! The rmcp `ServerHandler`: capabilities, list results with caching hints,
//! and dispatch of calls to the tool, MRTR, task, resource and prompt modules.
#![allow(deprecated)] // logging (set_level, capability) is deprecated by SEP-2577

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::*,
    service::{RequestContext, SubscriptionContext, SubscriptionSink},
    task_manager::TaskManager,
};
use tokio::sync::Mutex;

use crate::{catalog, mrtr, tasks, tools};

/// How long a client or gateway may cache list and read results
/// (`--list-ttl-ms`; 0 is what the SDKs send by default).
pub(crate) static CACHE_TTL_MS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(300_000);

/// The ttl results carry now.
pub(crate) fn cache_ttl_ms() -> u64 {
    CACHE_TTL_MS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Shared by every session and every stateless request (the HTTP service
/// clones it per session / per request; all state lives behind `Arc`s).
#[derive(Clone)]
pub(crate) struct Fixture {
    /// Legacy `resources/subscribe` URIs (accepted, never updated).
    legacy_subscriptions: Arc<Mutex<HashSet<String>>>,
    /// Open 2026-07-28 `subscriptions/listen` streams.
    listeners: Arc<Mutex<HashMap<u64, SubscriptionSink>>>,
    next_listener: Arc<AtomicU64>,
    /// Seals and verifies MRTR `requestState` (HMAC).
    pub(crate) request_state: RequestStateCodec,
    /// SEP-2663 tasks started by the task fixture tools.
    pub(crate) tasks: TaskManager,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        Self {
            legacy_subscriptions: Arc::default(),
            listeners: Arc::default(),
            next_listener: Arc::new(AtomicU64::new(0)),
            request_state: RequestStateCodec::try_new(random_key()).expect("32-byte key"),
            tasks: TaskManager::new(),
        }
    }

    /// Sends a list-changed notification to every open listen stream that
    /// asked for that kind (the SDK drops kinds a stream did not request).
    pub(crate) async fn notify_listeners(&self, tools: bool) {
        let sinks: Vec<SubscriptionSink> = self.listeners.lock().await.values().cloned().collect();
        for sink in sinks {
            let _ = if tools {
                sink.notify_tool_list_changed().await
            } else {
                sink.notify_prompt_list_changed().await
            };
        }
    }
}

/// A fresh per-process key for the request-state codec: state sealed by one
/// fixture process is never accepted by another.
fn random_key() -> Vec<u8> {
    let mut key = vec![0u8; 32];
    getrandom::fill(&mut key).expect("OS randomness");
    key
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_logging()
                .enable_completions()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("sluice-conformance-fixture", "1.0.0"))
        .with_instructions("Fixture backend exposing the MCP conformance suite's server surface.")
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::all().into_iter().find(|tool| tool.name == name)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        cx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn discover(&self, _cx: RequestContext<RoleServer>) -> Result<DiscoverResult, ErrorData> {
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        )
        .with_ttl_ms(cache_ttl_ms())
        .with_cache_scope(CacheScope::Public))
    }

    async fn ping(&self, _cx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        catalog::complete(&request)
    }

    // ----- tools -----

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::all())
            .with_ttl_ms(cache_ttl_ms())
            .with_cache_scope(CacheScope::Public))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if mrtr::is_mrtr_tool(&name) {
            return mrtr::call_tool(self, request, &cx);
        }
        if tasks::is_task_tool(&name) {
            return tasks::call_tool(self, request, &cx).await;
        }
        tools::call(self, request, cx).await
    }

    // ----- resources -----

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(catalog::resources())
            .with_ttl_ms(cache_ttl_ms())
            .with_cache_scope(CacheScope::Public))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(
            ListResourceTemplatesResult::with_all_items(catalog::resource_templates())
                .with_ttl_ms(cache_ttl_ms())
                .with_cache_scope(CacheScope::Public),
        )
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        catalog::read(&request.uri).map(|result| {
            result
                .with_ttl_ms(cache_ttl_ms())
                .with_cache_scope(CacheScope::Private)
                .into()
        })
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.legacy_subscriptions.lock().await.insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.legacy_subscriptions.lock().await.remove(&request.uri);
        Ok(())
    }

    // ----- prompts -----

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(catalog::prompts())
            .with_ttl_ms(cache_ttl_ms())
            .with_cache_scope(CacheScope::Public))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name == mrtr::PROMPT {
            return Ok(mrtr::get_prompt(&request));
        }
        catalog::get_prompt(&request).map(Into::into)
    }

    // ----- 2026-07-28 subscriptions/listen -----

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let key = self.next_listener.fetch_add(1, Ordering::Relaxed);
        self.listeners
            .lock()
            .await
            .insert(key, context.sink().clone());
        context.cancelled().await;
        self.listeners.lock().await.remove(&key);
        Ok(())
    }

    // ----- SEP-2663 tasks extension -----

    async fn get_task(
        &self,
        request: GetTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel_task(&request.task_id)
    }
}
