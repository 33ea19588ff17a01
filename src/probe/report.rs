//! What `sluice probe` found: one verdict a check, each with its evidence,
//! for a person (lines) or a machine (`--json`).

use std::fmt::Write as _;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    LeakSuspected,
    SpecDeviation,
    /// Not enough to tell (say how to find out in the evidence).
    Inconclusive,
    /// Does not apply to this server (no sessions, for one).
    NotApplicable,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::LeakSuspected => "leak suspected",
            Verdict::SpecDeviation => "spec deviation",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotApplicable => "n/a",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub verdict: Verdict,
    pub evidence: String,
}

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub url: String,
    /// Stopped early (Ctrl-C): what was found so far.
    pub interrupted: bool,
    pub legacy: Option<String>,
    pub modern: bool,
    pub stateful: bool,
    pub sessions_opened: usize,
    pub initialize_per_s: Option<f64>,
    pub kib_per_session: Option<f64>,
    pub checks: Vec<Check>,
}

impl Report {
    pub(super) fn add(
        &mut self,
        name: &'static str,
        verdict: Verdict,
        evidence: impl Into<String>,
    ) {
        self.checks.push(Check {
            name,
            verdict,
            evidence: evidence.into(),
        });
    }

    pub fn verdict(&self, name: &str) -> Option<Verdict> {
        self.checks
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.verdict)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "sluice probe {}", self.url);
        if self.interrupted {
            let _ = writeln!(out, "(interrupted: what was found until then)");
        }
        let width = self.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &self.checks {
            let _ = writeln!(
                out,
                "  {:<width$}  {:<15} {}",
                c.name,
                c.verdict.label(),
                c.evidence
            );
        }
        out
    }
}
