//! `/metrics` in the format its scraper reads (issue 49, part 4): the
//! classic Prometheus text (0.0.4) unless OpenMetrics is asked for, each
//! under its own content type, and cluster mode's metric only in cluster
//! mode (a gateway without Redis has no Redis to alert on).

mod support;

use prometheus_parse::{Scrape, Value};
use support::*;

/// What Prometheus 2 sends by default.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

async fn scrape(http: &Http, gw: &Gateway, accept: Option<&str>) -> (String, String) {
    let mut req = http.client.get(gw.url("/metrics"));
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
    (ct, resp.text().await.unwrap())
}

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_in_the_format_the_scraper_reads() {
    let gw = Gateway::start(&demo_backend("demo"));
    let http = Http::new(gw.url("/mcp"));
    http.initialize().await;

    // No Accept (curl, a classic scraper): 0.0.4 text, which a classic
    // parser reads with every counter typed and described.
    for accept in [None, Some("text/plain"), Some("*/*")] {
        let (ct, text) = scrape(&http, &gw, accept).await;
        assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8", "{accept:?}");
        let scrape = parse(&text);
        let opened = scrape
            .samples
            .iter()
            .find(|s| s.metric == "sluice_client_sessions_opened_total")
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            matches!(opened.value, Value::Counter(n) if n >= 1.0),
            "{:?}",
            opened.value
        );
        let counters = scrape
            .samples
            .iter()
            .filter(|s| s.metric.ends_with("_total"))
            .collect::<Vec<_>>();
        assert!(counters.len() >= 5, "{text}");
        for s in counters {
            assert!(
                matches!(s.value, Value::Counter(_)),
                "{} is read as {:?}",
                s.metric,
                s.value
            );
            assert!(
                scrape.docs.contains_key(&s.metric),
                "{} has no help",
                s.metric
            );
        }
        assert!(!text.contains("# EOF"), "{text}");
        // Without [cluster] there is no Redis to be up or down.
        assert!(!text.contains("sluice_cluster_up"), "{text}");
    }

    // Prometheus asks for OpenMetrics first, and gets it, marked as such.
    let (ct, text) = scrape(&http, &gw, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!(
        ct,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(text.contains("# TYPE sluice_client_sessions_opened counter\n"));
    assert!(
        text.contains("\nsluice_client_sessions_opened_total 1\n"),
        "{text}"
    );
    assert!(!text.contains("sluice_cluster_up"), "{text}");
}
