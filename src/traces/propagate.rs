//! W3C trace context in and out: `traceparent` / `tracestate` from a
//! client's HTTP headers or its request's `params._meta` (SEP-414, both
//! eras), and the same two fields for a backend request. Parsing and
//! formatting are the OpenTelemetry SDK's own propagator.

use std::collections::HashMap;

use http::HeaderName;
use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::value::RawValue;

pub(crate) const TRACEPARENT: &str = "traceparent";
pub(crate) const TRACESTATE: &str = "tracestate";
const TRACEPARENT_HEADER: HeaderName = HeaderName::from_static(TRACEPARENT);
const TRACESTATE_HEADER: HeaderName = HeaderName::from_static(TRACESTATE);

/// The context a client's HTTP headers carry (empty without a valid one),
/// each header's first value as `header` finds it.
pub(super) fn from_headers<'h>(header: impl Fn(&HeaderName) -> Option<&'h str>) -> Context {
    let Some(traceparent) = header(&TRACEPARENT_HEADER) else {
        return Context::new();
    };
    let fields = Fields {
        traceparent,
        tracestate: header(&TRACESTATE_HEADER),
    };
    TraceContextPropagator::new().extract(&fields)
}

/// The context a request's `params._meta` carries, if it carries a valid
/// one: it travels with the message itself (through other proxies too), so
/// it is preferred over the headers of the hop that delivered it.
pub(super) fn from_meta(params: Option<&RawValue>) -> Option<Context> {
    let params = params?.get();
    // Almost no request has one: a substring test before any parsing.
    static KEY: crate::jsonrpc::Needle = crate::jsonrpc::Needle::new(TRACEPARENT);
    if !KEY.in_text(params) {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "_meta")]
        meta: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        traceparent: Option<String>,
        tracestate: Option<String>,
    }
    let meta = serde_json::from_str::<Params>(params).ok()?.meta?;
    let fields = Fields {
        traceparent: meta.traceparent.as_deref()?,
        tracestate: meta.tracestate.as_deref(),
    };
    let cx = TraceContextPropagator::new().extract(&fields);
    cx.span().span_context().is_valid().then_some(cx)
}

/// `traceparent` and (when not empty) `tracestate` naming the span of `cx`.
pub(super) fn fields_of(cx: &Context) -> Vec<(&'static str, String)> {
    let mut out = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut out);
    [TRACEPARENT, TRACESTATE]
        .into_iter()
        .filter_map(|key| {
            let value = out.remove(key)?;
            (!value.is_empty()).then_some((key, value))
        })
        .collect()
}

struct Fields<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl Extractor for Fields<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => Some(self.traceparent),
            TRACESTATE => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanId, TraceId};

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn meta_carries_a_parent() {
        let params = raw(&format!(
            r#"{{"name":"t","_meta":{{"traceparent":"{PARENT}","tracestate":"congo=t61rcWkgMzE"}}}}"#
        ));
        let cx = from_meta(Some(&params)).unwrap();
        let span = cx.span();
        let sc = span.span_context();
        assert_eq!(
            sc.trace_id(),
            TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap()
        );
        assert_eq!(sc.span_id(), SpanId::from_hex("b7ad6b7169203331").unwrap());
        assert!(sc.is_sampled() && sc.is_remote());
        assert_eq!(sc.trace_state().header(), "congo=t61rcWkgMzE");
        // Out again, the same two fields.
        let fields = fields_of(&cx);
        assert_eq!(fields[0], (TRACEPARENT, PARENT.to_owned()));
        assert_eq!(fields[1], (TRACESTATE, "congo=t61rcWkgMzE".to_owned()));
    }

    #[test]
    fn no_or_bad_meta_is_no_parent() {
        for params in [
            r#"{"name":"t"}"#,
            r#"{"name":"traceparent"}"#,
            r#"{"_meta":{"traceparent":"00-00000000000000000000000000000000-b7ad6b7169203331-01"}}"#,
            r#"{"_meta":{"traceparent":"nonsense"}}"#,
            r#"{"_meta":{"traceparent":7}}"#,
        ] {
            assert!(from_meta(Some(&raw(params))).is_none(), "{params}");
        }
        assert!(from_meta(None).is_none());
    }

    #[test]
    fn headers_carry_a_parent() {
        let mut headers = http::HeaderMap::new();
        let lookup =
            |h: &http::HeaderMap| from_headers(|name| h.get(name).and_then(|v| v.to_str().ok()));
        assert!(!lookup(&headers).has_active_span());
        headers.insert(TRACEPARENT, PARENT.parse().unwrap());
        let cx = lookup(&headers);
        assert!(cx.span().span_context().is_valid());
        assert_eq!(fields_of(&cx)[0].1, PARENT);
    }
}
