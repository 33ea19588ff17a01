//! `/metrics` as a test reads it. A series a test names must be one the
//! gateway exports: `get` panics when the series is absent, and the two
//! readings that allow absence (`get_or_untouched`, `has`) first check the
//! key against the gateway's own families (the name, the label names in
//! order, and the value of a label drawn from one of its enums). A renamed
//! metric, label or enum value fails the test rather than reading as 0.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

/// Parsed Prometheus text: `name{labels}` -> value.
pub struct Metrics(HashMap<String, f64>);

impl Metrics {
    pub fn parse(text: &str) -> Metrics {
        Metrics(samples(text).collect())
    }

    /// A series that must be in the exposition; panics naming it, and the
    /// series of the same name that are there.
    pub fn get(&self, key: &str) -> f64 {
        match self.0.get(key) {
            Some(value) => *value,
            None => panic!("{}", self.missing(key)),
        }
    }

    /// A labelled series that may not exist yet, as 0: prometheus-client
    /// writes a label set only once it has been touched (a counter
    /// incremented, a gauge set), so a counter never incremented is not
    /// in the exposition at all. The key must still name one of the
    /// gateway's labelled families with its labels in order, else this
    /// panics. An unlabelled series is always there: read it with `get`.
    pub fn get_or_untouched(&self, key: &str) -> f64 {
        let (name, labels) = parse_key(key);
        assert!(
            !labels.is_empty(),
            "{key} has no labels, so it is always in /metrics: read it with get"
        );
        schema()
            .check(&name, &labels)
            .unwrap_or_else(|e| panic!("{e}"));
        self.0.get(key).copied().unwrap_or(0.0)
    }

    /// Whether a series the gateway can export is in the exposition (a
    /// backend a reload removed is no longer reported, say); panics if the
    /// gateway has no such series at all.
    pub fn has(&self, key: &str) -> bool {
        let (name, labels) = parse_key(key);
        schema()
            .check(&name, &labels)
            .unwrap_or_else(|e| panic!("{e}"));
        self.0.contains_key(key)
    }

    fn missing(&self, key: &str) -> String {
        let (name, labels) = parse_key(key);
        let why = match schema().check(&name, &labels) {
            Err(e) => e,
            Ok(()) => format!("{key} is not in /metrics"),
        };
        let mut like: Vec<&str> = self
            .0
            .keys()
            .filter(|k| parse_key(k).0 == name)
            .map(String::as_str)
            .collect();
        if like.is_empty() {
            let mut names: Vec<String> = self.0.keys().map(|k| parse_key(k).0).collect();
            names.sort();
            names.dedup();
            return format!("{why}; no series named {name}, only {names:?}");
        }
        like.sort_unstable();
        format!("{why}; the series named {name}: {like:?}")
    }
}

/// The samples of a Prometheus text exposition: (`name{labels}`, value).
fn samples(text: &str) -> impl Iterator<Item = (String, f64)> + '_ {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
}

/// `name{a="x",b="y"}` -> (name, [(a, x), (b, y)]); values unescaped.
fn parse_key(key: &str) -> (String, Vec<(String, String)>) {
    let Some((name, rest)) = key.split_once('{') else {
        return (key.to_owned(), Vec::new());
    };
    let body = rest
        .strip_suffix('}')
        .unwrap_or_else(|| panic!("{key}: no closing brace"));
    let mut labels = Vec::new();
    let mut chars = body.chars();
    loop {
        let label: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if label.is_empty() {
            break;
        }
        assert_eq!(chars.next(), Some('"'), "{key}: a label value is quoted");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => value.push(match chars.next() {
                    Some('n') => '\n',
                    Some(c) => c,
                    None => panic!("{key}: a trailing backslash"),
                }),
                c => value.push(c),
            }
        }
        labels.push((label.trim_start_matches(',').to_owned(), value));
    }
    (name.to_owned(), labels)
}

/// A label value that stands for any value: the schema touches a label
/// with it where the gateway's callers choose the value (backend and map
/// names, reasons given as strings).
const ANY: &str = "ANY";

/// Every sample name the gateway can export, with its label names in
/// order, each with the values it may take (`ANY` among them: any value).
struct Schema(BTreeMap<String, Vec<(String, BTreeSet<String>)>>);

impl Schema {
    fn check(&self, name: &str, labels: &[(String, String)]) -> Result<(), String> {
        let Some(known) = self.0.get(name) else {
            let names: Vec<&String> = self.0.keys().collect();
            return Err(format!(
                "the gateway exports no metric {name}; it exports {names:?}"
            ));
        };
        let want: Vec<&str> = known.iter().map(|(l, _)| l.as_str()).collect();
        let given: Vec<&str> = labels.iter().map(|(l, _)| l.as_str()).collect();
        if want != given {
            return Err(format!(
                "{name} has the labels {want:?}, in that order; the key gives {given:?}"
            ));
        }
        for ((label, values), (_, value)) in known.iter().zip(labels) {
            if !values.contains(ANY) && !values.contains(value) && !is_method(label, value) {
                return Err(format!(
                    "{name}'s {label} is one of {values:?}, never {value:?}"
                ));
            }
        }
        Ok(())
    }
}

/// The `method` label takes the gateway's known methods (its own list),
/// which `method_label` maps each to itself, and "other" for the rest.
fn is_method(label: &str, value: &str) -> bool {
    use sluice::metrics::method_label;
    label == "method" && method_label(value) != method_label(ANY)
}

/// The schema of a fresh `sluice::metrics::Metrics` with every family
/// touched: enum-valued labels with every variant, the rest with `ANY`.
fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        use sluice::metrics::{
            CloseReason, ErrorType, LimitReason, Outcome, RestartReason, ResumeCause, ShedReason,
            method_label,
        };
        use sluice::protocol::Era;
        use sluice::vocab::BackendName;

        // Cluster mode's own metric too.
        let m = sluice::metrics::Metrics::new().with_cluster();
        m.cluster_up(true);
        for reason in [
            CloseReason::delete,
            CloseReason::idle,
            CloseReason::capacity,
            CloseReason::shutdown,
            CloseReason::principal_cap,
        ] {
            m.session_closed(reason, ANY, 1.0);
        }
        for cause in [
            ResumeCause::evicted,
            ResumeCause::restart,
            ResumeCause::replica,
        ] {
            m.session_resumed(cause);
        }
        for reason in [
            ShedReason::no_request,
            ShedReason::idle,
            ShedReason::head_timeout,
            ShedReason::slow_body,
        ] {
            m.connection_shed(reason);
        }
        m.limited(LimitReason::rate);
        m.limited(LimitReason::concurrency);
        m.reloaded(true);
        m.reloaded(false);
        for era in [Era::Legacy, Era::Modern] {
            for outcome in [Outcome::ok, Outcome::error, Outcome::rejected] {
                m.request(era, method_label(ANY), outcome, 0.0);
            }
        }
        let backend = BackendName::new(ANY).unwrap();
        m.backend_session_opened(&backend);
        m.backend_session_closed(&backend, ANY);
        m.backend_up(&backend, true);
        for reason in [
            RestartReason::exited,
            RestartReason::signal,
            RestartReason::closed,
            RestartReason::unhealthy,
            RestartReason::memory,
            RestartReason::pids,
        ] {
            m.backend_restarted(&backend, reason);
        }
        m.list_refresh(&backend, ANY);
        m.oauth_grants(ANY, 0);
        m.oauth_flow(ANY, ANY);
        m.entries(ANY, ANY, 0);
        m.answer_dropped(ANY);
        let any_error = Some(ErrorType::transport(ANY));
        m.server_operation(method_label(ANY), any_error, 0.0);
        let series = m.series(method_label(ANY), ANY, ANY, ANY);
        m.served(&series, any_error, 0.0);
        m.asked(&series, any_error, 0.0);

        let mut families: BTreeMap<String, Vec<(String, BTreeSet<String>)>> = BTreeMap::new();
        for (key, _) in samples(&m.render()) {
            let (name, labels) = parse_key(&key);
            let known = families.entry(name).or_insert_with(|| {
                labels
                    .iter()
                    .map(|(l, _)| (l.clone(), BTreeSet::new()))
                    .collect()
            });
            for ((_, values), (_, value)) in known.iter_mut().zip(labels) {
                values.insert(value);
            }
        }
        // A family the lines above do not touch is not in the rendering.
        let histogram = |n: &String| families.contains_key(&format!("{n}_count"));
        for name in m.names() {
            assert!(
                families.contains_key(name) || histogram(name),
                "tests/support/metrics.rs does not touch {name}: add it to schema()"
            );
        }
        Schema(families)
    })
}
