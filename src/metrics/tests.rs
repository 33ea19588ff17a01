use super::*;
use crate::protocol::Era;
use crate::vocab::BackendName;

#[test]
fn summary_line_reports_the_window_and_then_goes_quiet() {
    let m = Metrics::new();
    assert_eq!(m.summary(), None, "nothing happened: no line");
    let b = BackendName::new("demo").unwrap();
    m.backend_session_opened(&b);
    for _ in 0..40 {
        m.session_opened();
    }
    for _ in 0..3 {
        m.session_closed(CloseReason::delete, "2025-11-25", 1.5);
    }
    for _ in 0..35 {
        m.session_closed(CloseReason::idle, "2025-11-25", 1.5);
    }
    let line = m.summary().unwrap();
    assert!(
        line.starts_with(
            "sessions live=2 new=40 closed=38 (delete=3 idle=35) backend_sessions=1 rss="
        ),
        "{line}"
    );
    // The window restarts; live sessions still deserve a line.
    assert!(
        m.summary()
            .unwrap()
            .starts_with("sessions live=2 new=0 closed=0 backend_sessions=1")
    );
    m.session_closed(CloseReason::capacity, "2025-11-25", 1.5);
    m.session_closed(CloseReason::capacity, "2025-11-25", 1.5);
    m.summary();
    assert_eq!(m.summary(), None);
}

#[test]
fn exposition_uses_the_contract_names() {
    let m = Metrics::new();
    m.session_opened();
    m.session_closed(CloseReason::principal_cap, "2025-11-25", 1.5);
    m.request(Era::Legacy, method_label("tools/call"), Outcome::ok, 0.01);
    m.request(Era::Legacy, method_label("x/unknown"), Outcome::error, 0.01);
    let text = m.render();
    for needle in [
        "sluice_client_sessions_live 0",
        "sluice_client_sessions_opened_total 1",
        r#"sluice_client_sessions_closed_total{reason="principal_cap"} 1"#,
        r#"sluice_requests_total{era="legacy",method="tools/call",outcome="ok"} 1"#,
        r#"sluice_requests_total{era="legacy",method="other",outcome="error"} 1"#,
        "sluice_request_duration_seconds_bucket",
        r#"mcp_server_session_duration_seconds_count{mcp_protocol_version="2025-11-25"} 1"#,
        r#"mcp_server_session_duration_seconds_sum{mcp_protocol_version="2025-11-25"} 1.5"#,
        "process_resident_memory_bytes",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
}

#[test]
fn tools_call_is_the_method_its_constant_names() {
    assert_eq!(method_label("tools/call"), Method::TOOLS_CALL);
}

#[test]
fn operation_series_are_bounded_and_kept_per_metrics() {
    let (a, b) = (Metrics::new(), Metrics::new());
    let tools_call = Method::TOOLS_CALL;
    // The same labels in two `Metrics` are two series.
    a.served(
        &a.series(tools_call, "demo", "demo__echo", "echo"),
        None,
        0.5,
    );
    b.served(
        &b.series(tools_call, "demo", "demo__echo", "echo"),
        None,
        0.5,
    );
    let count = r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="demo__echo",error_type=""} 1"#;
    assert!(a.render().contains(count), "{}", a.render());
    assert!(b.render().contains(count), "{}", b.render());
    // Past the bound, a new name is `_OTHER`; a name already there stays.
    for n in 0..operations::MAX_TOOLS + 5 {
        let s = a.series(tools_call, "demo", &format!("t{n}"), &format!("t{n}"));
        a.asked(&s, Some(ErrorType::code(-32602)), 0.1);
    }
    let text = a.render();
    assert!(
        text.contains(r#"gen_ai_tool_name="_OTHER",error_type="-32602",backend="demo"} 5"#),
        "{text}"
    );
    let echo = a.series(tools_call, "demo", "demo__echo", "echo");
    a.served(&echo, None, 0.5);
    assert!(a.render().contains(&count.replace("} 1", "} 2")));
    // Codes outside the specification's are one label value.
    assert_eq!(ErrorType::code(-31999).label(), "_OTHER");
    assert_eq!(ErrorType::code(-32602).label(), "-32602");
}

/// The classic text a scraper gets by default reads right to a classic
/// (0.0.4) parser: counters keep their type and help. prometheus-client's
/// own OpenMetrics text, read the same way, loses both (what issue 49 found).
#[test]
fn classic_text_keeps_counters_typed_and_described() {
    use prometheus_parse::{Scrape, Value};
    let m = Metrics::new().with_cluster();
    m.session_opened();
    m.request(Era::Legacy, method_label("tools/call"), Outcome::ok, 0.01);
    m.backend_restarted(&BackendName::new("demo").unwrap(), RestartReason::signal);
    let parse = |text: &str| Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let classic = parse(&m.render());
    // (A labelled family is written once it has a series; every counter
    // of a running gateway is checked in tests/exposition.rs.)
    for name in [
        "sluice_client_sessions_opened_total",
        "sluice_requests_total",
        "sluice_backend_restarts_total",
    ] {
        let sample = classic.samples.iter().find(|s| s.metric == name).unwrap();
        assert!(
            matches!(sample.value, Value::Counter(1.0)),
            "{name}: {:?}",
            sample.value
        );
        assert!(
            classic.docs.get(name).is_some_and(|h| !h.is_empty()),
            "{name} has no help"
        );
    }
    let text = m.render();
    assert!(!text.contains("# EOF"), "{text}");
    assert!(text.contains(r#"sluice_backend_restarts_total{backend="demo",reason="signal"} 1"#));
    // Gauges and histograms are as they were.
    assert!(text.contains("# TYPE sluice_client_sessions_live gauge\n"));
    assert!(text.contains("# TYPE sluice_request_duration_seconds histogram\n"));
    assert!(text.contains("# TYPE sluice_cluster_up gauge\n"));

    // The OpenMetrics text, for a scraper that asks for it.
    let open = m.render_as(Format::OpenMetrics);
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert!(open.contains("# TYPE sluice_requests counter\n"));
    let misread = parse(&open);
    let sample = misread
        .samples
        .iter()
        .find(|s| s.metric == "sluice_requests_total")
        .unwrap();
    assert!(matches!(sample.value, Value::Untyped(_)));
    // The same samples either way.
    let samples = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(samples(&text), samples(&open));
}

#[test]
fn openmetrics_only_for_a_scraper_that_prefers_it() {
    use Format::{OpenMetrics, Prometheus};
    for (accept, want) in [
        ("", Prometheus),
        ("*/*", Prometheus),
        ("text/plain", Prometheus),
        ("application/json", Prometheus),
        ("application/openmetrics-text", OpenMetrics),
        ("Application/OpenMetrics-Text; version=1.0.0", OpenMetrics),
        // Prometheus 2's and 3's defaults.
        (
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
            OpenMetrics,
        ),
        (
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
            OpenMetrics,
        ),
        // Plain text preferred, or only another version asked for.
        (
            "text/plain;version=0.0.4,application/openmetrics-text;q=0.5",
            Prometheus,
        ),
        ("application/openmetrics-text;version=0.0.1", Prometheus),
        ("application/openmetrics-text;q=0", Prometheus),
        // A tie goes to the more specific range, then to the classic text.
        ("application/openmetrics-text, */*", OpenMetrics),
        ("application/openmetrics-text, text/plain", Prometheus),
    ] {
        assert_eq!(Format::negotiate(accept), want, "{accept}");
    }
}
