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
