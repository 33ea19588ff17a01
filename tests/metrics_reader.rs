//! The tests' reading of /metrics (`support::Metrics`): a series a test
//! names is one the gateway can export, or the test fails. Read here from
//! the gateway's own `Metrics`, rendered in process.

mod support;

use sluice::metrics::{CloseReason, Outcome, method_label};
use sluice::protocol::Era;
use sluice::vocab::BackendName;
use support::Metrics;

/// One client session closed for `idle`, one legacy `tools/call`, and a
/// backend `demo` with a session open.
fn scraped() -> Metrics {
    let m = sluice::metrics::Metrics::new();
    m.session_opened();
    m.session_closed(CloseReason::idle, "2025-11-25", 1.0);
    m.request(Era::Legacy, method_label("tools/call"), Outcome::ok, 0.01);
    m.backend_session_opened(&BackendName::new("demo").unwrap());
    Metrics::parse(&m.render())
}

#[test]
fn a_series_there_reads_as_its_value() {
    let m = scraped();
    assert_eq!(m.get("sluice_client_sessions_opened_total"), 1.0);
    assert_eq!(
        m.get(r#"sluice_client_sessions_closed_total{reason="idle"}"#),
        1.0
    );
    assert_eq!(
        m.get(r#"sluice_requests_total{era="legacy",method="tools/call",outcome="ok"}"#),
        1.0
    );
}

#[test]
#[should_panic(
    expected = r#"sluice_client_sessions_closed_total{reason="capacity"} is not in /metrics; the series named sluice_client_sessions_closed_total: ["sluice_client_sessions_closed_total{reason=\"idle\"}"]"#
)]
fn get_refuses_a_series_that_is_not_there() {
    scraped().get(r#"sluice_client_sessions_closed_total{reason="capacity"}"#);
}

#[test]
fn an_untouched_label_set_of_a_family_reads_as_0() {
    let m = scraped();
    for key in [
        r#"sluice_client_sessions_closed_total{reason="capacity"}"#,
        r#"sluice_requests_total{era="modern",method="tools/call",outcome="error"}"#,
        r#"sluice_requests_limited_total{reason="rate"}"#,
        r#"sluice_backend_sessions_closed_total{backend="demo",reason="idle"}"#,
        r#"sluice_backend_sessions_live{backend="other"}"#,
    ] {
        assert_eq!(m.get_or_untouched(key), 0.0, "{key}");
        assert!(!m.has(key), "{key}");
    }
    assert_eq!(
        m.get_or_untouched(r#"sluice_client_sessions_closed_total{reason="idle"}"#),
        1.0
    );
}

#[test]
#[should_panic(expected = "the gateway exports no metric sluice_client_session_closed_total")]
fn a_renamed_metric_is_refused() {
    scraped().get_or_untouched(r#"sluice_client_session_closed_total{reason="capacity"}"#);
}

#[test]
#[should_panic(
    expected = r#"sluice_client_sessions_closed_total has the labels ["reason"], in that order; the key gives ["cause"]"#
)]
fn a_renamed_label_is_refused() {
    scraped().get_or_untouched(r#"sluice_client_sessions_closed_total{cause="capacity"}"#);
}

/// Labels in another order than the gateway writes them would never match.
#[test]
#[should_panic(expected = r#"has the labels ["era", "method", "outcome"], in that order"#)]
fn labels_out_of_order_are_refused() {
    scraped().get_or_untouched(
        r#"sluice_requests_total{method="tools/call",era="modern",outcome="error"}"#,
    );
}

#[test]
#[should_panic(expected = r#"sluice_client_sessions_closed_total's reason is one of"#)]
fn a_value_outside_an_enum_label_is_refused() {
    scraped().get_or_untouched(r#"sluice_client_sessions_closed_total{reason="idle_ttl"}"#);
}

#[test]
#[should_panic(expected = r#"sluice_requests_total's method is one of"#)]
fn a_method_the_gateway_does_not_name_is_refused() {
    scraped()
        .get_or_untouched(r#"sluice_requests_total{era="modern",method="tools/cal",outcome="ok"}"#);
}

#[test]
#[should_panic(expected = "has no labels, so it is always in /metrics: read it with get")]
fn an_unlabelled_series_is_read_with_get() {
    scraped().get_or_untouched("sluice_connections_refused_total");
}
