//! The OTLP pipeline: spans batched by the SDK's batch processor (its own
//! thread, a bounded queue that drops past 2,048 spans) and sent as
//! OTLP/HTTP protobuf through the gateway's own HTTP client (TLS and
//! pooling as for backends).

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchSpanProcessor, Sampler, SdkTracerProvider};

use crate::config::TracingSettings;
use crate::http1::client::Client;

/// How long one export may take, retries included.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// What a collector's answer may hold (its body is only ever a status).
const MAX_ANSWER: usize = 64 * 1024;

pub(super) fn provider(settings: &TracingSettings) -> Result<SdkTracerProvider, String> {
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| "tracing needs the gateway's runtime".to_owned())?;
    let client = Exporter {
        client: Client::new(settings.proxy.clone())?,
        runtime,
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(settings.otlp_endpoint.to_string())
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("OTLP exporter: {e}"))?;
    // A client's sampled flag decides for its trace; the ratio for the rest.
    let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
        settings.sampling_ratio,
    )));
    Ok(SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(exporter).build())
        .with_sampler(sampler)
        .with_resource(
            Resource::builder()
                .with_service_name(settings.service_name.clone())
                .build(),
        )
        .build())
}

/// The exporter's HTTP client. The batch processor calls it from a thread
/// of its own, outside the runtime, so each request runs as a task on the
/// gateway's runtime and the processor waits for that task.
struct Exporter {
    client: Client,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Exporter")
    }
}

#[async_trait::async_trait]
impl HttpClient for Exporter {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let task = self.runtime.spawn(async move {
            tokio::time::timeout(EXPORT_TIMEOUT, send(&client, request))
                .await
                .map_err(|_| HttpError::from("the collector did not answer in time"))?
        });
        task.await.map_err(|e| HttpError::from(e.to_string()))?
    }
}

async fn send(client: &Client, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
    let (parts, body) = request.into_parts();
    let target = client.target(&parts.uri)?;
    let answer = client
        .request(parts.method, &target)
        .headers(&parts.headers)
        .body(body)
        .send()
        .await
        .map_err(|e| HttpError::from(e.to_string()))?;
    let status = answer.status();
    let body = answer.bytes(MAX_ANSWER).await.map_err(HttpError::from)?;
    let mut response = Response::new(body);
    *response.status_mut() = status;
    Ok(response)
}
