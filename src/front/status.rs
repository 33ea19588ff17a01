//! `GET /status`: a page for the people who run the gateway. Backends (how
//! they are reached, up or down and since when, how their last session
//! to end on its own ended, their sessions, restarts),
//! client sessions, the request rate and latency over the last minutes, and
//! sessions and memory over the last hour, drawn as small charts, and each
//! namespace's catalogue (every tool, prompt and resource with the backend
//! and original name behind it, read from the backends' cached lists as a
//! caller no scope restricts would be shown them). The rest from counters
//! the gateway keeps anyway, sampled every `EVERY` into a ring of `KEEP`
//! samples: nothing per session, nothing unbounded. No
//! session id, token or backend URL is on it. Server-rendered, no script,
//! nothing fetched from elsewhere; it reloads itself.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::Front;
use crate::metrics::{Counts, LATENCY_BOUNDS_US};
use crate::router::{Item, View};
use crate::upstream::Caller;
use crate::vocab::Principal;

/// One sample every `EVERY`, the last hour kept.
const EVERY: Duration = Duration::from_secs(10);
const KEEP: usize = 360;
/// The window rates and percentiles are read over.
const RECENT: Duration = Duration::from_secs(300);
/// How long the catalogue may take to read (a backend down, lists not
/// yet cached): the page is drawn without it after that.
const CATALOGUE_WAIT: Duration = Duration::from_secs(5);

struct Sample {
    at: SystemTime,
    rss: u64,
    counts: Counts,
}

/// The last hour of samples.
#[derive(Default)]
pub(crate) struct History(Mutex<VecDeque<Sample>>);

impl History {
    fn push(&self, sample: Sample) {
        let mut ring = self.0.lock();
        if ring.len() == KEEP {
            ring.pop_front();
        }
        ring.push_back(sample);
    }
}

/// Samples until `stop`.
pub(crate) async fn sample_until(front: Arc<Front>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => front.status.push(now(&front)),
        }
    }
}

fn now(front: &Front) -> Sample {
    Sample {
        at: SystemTime::now(),
        rss: crate::metrics::resident_bytes(),
        counts: front.metrics.counts(),
    }
}

pub(super) async fn page(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    if let Err(refused) = front.operator_access(&headers) {
        return refused.into_response();
    }
    let views = catalogue(&front).await;
    let html = render(&front, views.as_deref());
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        html,
    )
        .into_response()
}

/// Every namespace's view as a caller no scope restricts (None: not read
/// in time).
async fn catalogue(front: &Front) -> Option<Vec<View>> {
    let layout = front.layout.load_full();
    let caller = Caller::principal(Principal::Anonymous);
    let views = async {
        let mut views = Vec::new();
        for ns in layout.router.namespaces() {
            views.push(ns.view(&caller).await);
        }
        views
    };
    tokio::time::timeout(CATALOGUE_WAIT, views).await.ok()
}

fn render(front: &Front, views: Option<&[View]>) -> String {
    let current = now(front);
    let ring = front.status.0.lock();
    let mut out = String::with_capacity(16 * 1024);
    out.push_str(HEAD);
    let _ = write!(
        out,
        "<h1>sluice <small>{}</small></h1><p class=\"when\">{} UTC · listener {} · reloads every 10 s</p>",
        env!("CARGO_PKG_VERSION"),
        clock(current.at),
        if front.tls.is_some() {
            "https (TLS)"
        } else {
            "http"
        },
    );

    // Backends.
    out.push_str("<h2>Backends</h2><table><tr><th>backend</th><th>transport</th><th>isolation</th><th>state</th><th>last problem</th><th>sessions live</th><th>opened</th><th>closed</th><th>restarts</th></tr>");
    let layout = front.layout.load_full();
    for b in &layout.backends {
        let (live, opened, closed) = front.metrics.backend_sessions(&b.name);
        let (last, restarts) = b.history();
        let state = match b.problem() {
            None => "<td class=\"up\">up</td>".to_owned(),
            Some(p) => format!("<td class=\"down\">down: {}</td>", escape(p)),
        };
        let mut last = last.map_or_else(
            || "–".to_owned(),
            |(p, at)| format!("{} at {}", escape(p), clock(at)),
        );
        // Why its process or session last ended on its own.
        if let Some((exit, at)) = b.last_exit() {
            let _ = write!(last, "<br>{} at {}", escape(&exit), clock(at));
        }
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td>{state}<td>{last}</td><td>{live}</td><td>{opened}</td><td>{closed}</td><td>{restarts}</td></tr>",
            escape(b.name.as_str()),
            b.transport(),
            if b.is_shared() {
                "shared"
            } else {
                "per-session"
            },
        );
    }
    out.push_str("</table>");

    // Client sessions.
    let c = &current.counts;
    let _ = write!(
        out,
        "<h2>Client sessions</h2><table><tr><th>live</th><th>opened</th>{}</tr><tr><td>{}</td><td>{}</td>{}</tr></table>",
        c.closed
            .iter()
            .map(|(r, _)| format!("<th>closed: {r}</th>"))
            .collect::<String>(),
        c.sessions_live,
        c.sessions_opened,
        c.closed
            .iter()
            .map(|(_, n)| format!("<td>{n}</td>"))
            .collect::<String>(),
    );

    // By namespace.
    out.push_str("<table><tr><th>namespace</th><th>endpoint</th><th>live</th><th>opened</th></tr>");
    let counts = front.sessions.by_namespace();
    for ns in layout.router.namespaces() {
        let (live, opened) = counts.get(usize::from(ns.tag)).copied().unwrap_or_default();
        let endpoint = if ns.name.as_str() == "default" {
            "/mcp".to_owned()
        } else {
            format!("/ns/{}/mcp", ns.name.as_str())
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{live}</td><td>{opened}</td></tr>",
            escape(ns.name.as_str()),
            escape(&endpoint),
        );
    }
    out.push_str("</table>");

    render_catalogue(&mut out, views);

    // Requests over the recent window.
    let base = ring
        .iter()
        .find(|s| current.at.duration_since(s.at).unwrap_or_default() <= RECENT);
    out.push_str("<h2>Requests</h2>");
    match base {
        Some(base) => {
            let secs = current
                .at
                .duration_since(base.at)
                .unwrap_or_default()
                .as_secs_f64()
                .max(1.0);
            let n = c.requests.saturating_sub(base.counts.requests);
            let errors = c.errors.saturating_sub(base.counts.errors);
            let latency: Vec<u64> = c
                .latency
                .iter()
                .zip(base.counts.latency.iter())
                .map(|(a, b)| a.saturating_sub(*b))
                .collect();
            let _ = write!(
                out,
                "<table><tr><th>over the last</th><th>requests</th><th>per second</th><th>not ok</th><th>p50</th><th>p90</th><th>p99</th></tr>\
                 <tr><td>{:.0} s</td><td>{n}</td><td>{:.1}</td><td>{errors}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
                secs,
                n as f64 / secs,
                percentile(&latency, 0.50),
                percentile(&latency, 0.90),
                percentile(&latency, 0.99),
            );
        }
        None => out.push_str("<p>no sample yet (one every 10 s)</p>"),
    }

    // The last hour.
    let points: Vec<(SystemTime, i64, u64)> = ring
        .iter()
        .map(|s| (s.at, s.counts.sessions_live, s.rss))
        .chain(std::iter::once((current.at, c.sessions_live, current.rss)))
        .collect();
    out.push_str("<h2>The last hour</h2><div class=\"charts\">");
    chart(
        &mut out,
        "client sessions live",
        &points.iter().map(|p| p.1 as f64).collect::<Vec<_>>(),
        |v| format!("{v:.0}"),
    );
    chart(
        &mut out,
        "resident memory",
        &points.iter().map(|p| p.2 as f64).collect::<Vec<_>>(),
        |v| format!("{:.1} MiB", v / 1024.0 / 1024.0),
    );
    out.push_str("</div></body></html>");
    out
}

/// Each namespace's counts, and its items in tables that open on a click.
fn render_catalogue(out: &mut String, views: Option<&[View]>) {
    out.push_str("<h2>Catalogue</h2>");
    let Some(views) = views else {
        out.push_str("<p>not read in time (a backend slow to list)</p>");
        return;
    };
    for view in views {
        let counts: Vec<String> = view
            .kinds()
            .iter()
            .map(|(kind, items)| format!("{} {kind}", items.len()))
            .collect();
        let _ = write!(
            out,
            "<h3>{} <small>{} mode · {}</small></h3>",
            escape(&view.namespace),
            view.discovery,
            counts.join(" · "),
        );
        for backend in &view.hidden {
            let _ = write!(
                out,
                "<p>{}: per-principal credentials, shown to the principals that have them (<code>sluice tools --principal NAME</code>)</p>",
                escape(backend)
            );
        }
        for backend in &view.unread {
            let _ = write!(
                out,
                "<p class=\"down\">{}: lists not read</p>",
                escape(backend)
            );
        }
        for (kind, items) in view.kinds() {
            if !items.is_empty() {
                catalogue_table(out, kind, items, view.discovery == "search");
            }
        }
    }
}

fn catalogue_table(out: &mut String, kind: &str, items: &[Item], searched: bool) {
    let _ = write!(
        out,
        "<details><summary>{kind}</summary><table><tr><th>name</th><th>backend</th><th>original name</th>{}</tr>",
        if searched { "<th>tools/list</th>" } else { "" },
    );
    for item in items {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td>",
            escape(&item.name),
            escape(item.backend.as_deref().unwrap_or("(gateway)")),
            escape(item.original.as_deref().unwrap_or("–")),
        );
        if searched {
            out.push_str(if item.listed {
                "<td>listed</td>"
            } else {
                "<td>by search</td>"
            });
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></details>");
}

/// The latency below which `q` of the requests fall (a bucket's bound).
fn percentile(buckets: &[u64], q: f64) -> String {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return "–".to_owned();
    }
    let want = (total as f64 * q).ceil() as u64;
    let mut seen = 0;
    for (i, n) in buckets.iter().enumerate() {
        seen += n;
        if seen >= want {
            return match LATENCY_BOUNDS_US.get(i) {
                Some(us) => format!("≤ {}", micros(*us)),
                None => format!(
                    "> {}",
                    micros(LATENCY_BOUNDS_US[LATENCY_BOUNDS_US.len() - 1])
                ),
            };
        }
    }
    "–".to_owned()
}

fn micros(us: u64) -> String {
    match us {
        0..1_000 => format!("{us} µs"),
        1_000..1_000_000 => format!("{} ms", us as f64 / 1000.0),
        _ => format!("{} s", us as f64 / 1e6),
    }
}

/// A small line chart (inline SVG) of `values`, oldest first.
fn chart(out: &mut String, title: &str, values: &[f64], show: impl Fn(f64) -> String) {
    const W: f64 = 360.0;
    const H: f64 = 80.0;
    let max = values.iter().copied().fold(0.0_f64, f64::max);
    let top = if max > 0.0 { max } else { 1.0 };
    let step = if values.len() > 1 {
        W / (values.len() - 1) as f64
    } else {
        0.0
    };
    let line: String = values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{:.1},{:.1} ", i as f64 * step, H - v / top * (H - 4.0)))
        .collect();
    let _ = write!(
        out,
        "<figure><figcaption>{} <b>{}</b> (max {})</figcaption>\
         <svg viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"{}\">\
         <polyline fill=\"none\" stroke=\"#2a6\" stroke-width=\"2\" points=\"{line}\"/></svg></figure>",
        escape(title),
        show(values.last().copied().unwrap_or(0.0)),
        show(max),
        escape(title),
    );
}

/// Hours, minutes and seconds of the day, UTC.
fn clock(at: SystemTime) -> String {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    format!(
        "{:02}:{:02}:{:02}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const HEAD: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"refresh\" content=\"10\"><title>sluice status</title><style>\
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1 small{font-weight:normal;color:#777;font-size:60%}\
.when{color:#777;margin-top:-.8em}\
table{border-collapse:collapse;margin:.4em 0 1.2em}\
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left}\
th{background:#f4f4f4;font-weight:600}\
td.up{color:#160;font-weight:600}td.down{color:#b00;font-weight:600}\
.charts{display:flex;gap:2em;flex-wrap:wrap}\
figure{margin:0}svg{background:#fafafa;border:1px solid #ddd}\
</style></head><body>";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_read_bucket_bounds() {
        let mut b = vec![0u64; LATENCY_BOUNDS_US.len() + 1];
        b[0] = 50; // ≤ 100 µs
        b[3] = 45; // ≤ 1 ms
        b[LATENCY_BOUNDS_US.len()] = 5; // over a minute
        assert_eq!(percentile(&b, 0.5), "≤ 100 µs");
        assert_eq!(percentile(&b, 0.9), "≤ 1 ms");
        assert_eq!(percentile(&b, 0.99), "> 60 s");
        assert_eq!(percentile(&[0; 3], 0.5), "–");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("<a href=\"x\">&"),
            "&lt;a href=&quot;x&quot;&gt;&amp;"
        );
    }
}
