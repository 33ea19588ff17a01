//! The two text formats `/metrics` is served in. prometheus-client writes
//! OpenMetrics 1.0.0 only: a counter family is named without `_total`
//! while its samples carry it, and the text ends with `# EOF`. A classic
//! (0.0.4) parser types a sample by the family whose name is exactly the
//! sample's, so it would read every counter as untyped and without help.
//! A scraper that asks for OpenMetrics (`Accept`) gets it as written; any
//! other gets it converted here to the classic form, which names a counter
//! family after its samples, as client_golang does.

/// A text format of the exposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text, version 0.0.4: what every scraper reads.
    Prometheus,
    /// OpenMetrics text, version 1.0.0.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header prefers (RFC 9110 12.5.1: each
    /// format takes the q of the most specific range that matches it).
    /// OpenMetrics only when it is preferred to plain text, as Prometheus
    /// asks; no header (empty), a tie, or neither matched: the classic
    /// text.
    pub fn negotiate(accept: &str) -> Format {
        let open = preference(accept, "application", "openmetrics-text", "1.0.0");
        let plain = preference(accept, "text", "plain", "0.0.4");
        if open.q > 0.0 && (open.q, open.specificity) > (plain.q, plain.specificity) {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    /// Its `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// How much an `Accept` header wants one media type: the q of its most
/// specific matching range (0 when none matches).
#[derive(Clone, Copy, Default)]
struct Preference {
    q: f32,
    /// 0 for `*/*`, 1 for `type/*`, 2 for the type itself.
    specificity: u8,
}

fn preference(accept: &str, kind: &str, subtype: &str, version: &str) -> Preference {
    let mut best: Option<Preference> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let Some((k, s)) = parts.next().and_then(|m| m.split_once('/')) else {
            continue;
        };
        let specificity = match (k.trim(), s.trim()) {
            ("*", "*") => 0,
            (k, "*") if k.eq_ignore_ascii_case(kind) => 1,
            (k, s) if k.eq_ignore_ascii_case(kind) && s.eq_ignore_ascii_case(subtype) => 2,
            _ => continue,
        };
        let mut q = 1.0;
        let mut other_version = false;
        for param in parts {
            let Some((name, value)) = param.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"');
            match name.trim() {
                n if n.eq_ignore_ascii_case("q") => q = value.parse().unwrap_or(0.0),
                n if n.eq_ignore_ascii_case("version") => other_version = value != version,
                _ => {}
            }
        }
        // A version of the format that is not the one written.
        if other_version {
            continue;
        }
        if best.is_none_or(|b| specificity > b.specificity) {
            best = Some(Preference { q, specificity });
        }
    }
    best.unwrap_or_default()
}

/// prometheus-client's OpenMetrics text as Prometheus 0.0.4 text: a
/// counter family takes its samples' `_total` name, `unknown` is
/// `untyped`, and `# UNIT` and `# EOF` (which 0.0.4 has not) are dropped.
/// (The gateway's families carry no exemplars and no units.)
pub(super) fn classic(open: &str) -> String {
    let mut out = String::with_capacity(open.len() + open.len() / 32);
    let mut help: Option<&str> = None;
    for line in open.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            // Written once its TYPE line says what the family is called.
            help = Some(rest);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (suffix, kind) = match kind {
                "counter" => ("_total", "counter"),
                "gauge" | "histogram" | "summary" => ("", kind),
                _ => ("", "untyped"),
            };
            if let Some(h) = help.take() {
                let text = h.strip_prefix(name).unwrap_or(h);
                push_line(&mut out, &["# HELP ", name, suffix, text]);
            }
            push_line(&mut out, &["# TYPE ", name, suffix, " ", kind]);
        } else if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        } else {
            push_line(&mut out, &[line]);
        }
    }
    out
}

fn push_line(out: &mut String, parts: &[&str]) {
    for p in parts {
        out.push_str(p);
    }
    out.push('\n');
}
