//! One backend's tools, indexed for search (BM25F): for each term, the
//! tools it appears in with its weight there, made once when the
//! catalogue is read. A query only adds up precomputed weights along the
//! posting lists of its terms; its cost grows with how many tools share
//! its words, not with the catalogue.
//!
//! Fields, weighted: the name split into words (its backend prefix
//! included) 3, the title 2, the description 1, the parameters' names 1
//! and their descriptions 0.5, each normalised by its length against the
//! catalogue's average (k1 = 1.2; b = 0.3 for names and titles, short and
//! telling, 0.75 for prose). IDF is the namespace's (`Idf`), summed over
//! every backend's catalogue, so scores from different backends compare.

use serde_json::value::RawValue;

use super::words::terms;
use crate::fast_map::FastMap;
use crate::jsonrpc::{Fields, string_field};

const K1: f32 = 1.2;

/// (weight, b) of each field, in `Field` order.
const FIELDS: [(f32, f32); 5] = [
    (3.0, 0.3),
    (2.0, 0.3),
    (1.0, 0.75),
    (1.0, 0.75),
    (0.5, 0.75),
];

#[derive(Clone, Copy)]
enum Field {
    Name = 0,
    Title,
    Description,
    ParamName,
    ParamDescription,
}

/// One tool as indexed.
pub(in crate::router) struct Tool {
    /// The name clients see.
    pub(in crate::router) name: Box<str>,
    /// Its definition as clients see it (renamed), raw.
    pub(in crate::router) definition: Box<RawValue>,
    /// Which of the namespace's `tool_scopes` patterns match it (bit i:
    /// pattern i); None: too many patterns to keep as bits.
    pub(in crate::router) needs: Option<u64>,
}

/// A tool's weight for one term.
#[derive(Clone, Copy)]
struct Posting {
    tool: u32,
    weight: f32,
}

pub(in crate::router) struct Catalogue {
    /// The backend's list version it was read at.
    pub(in crate::router) version: u64,
    pub(in crate::router) tools: Vec<Tool>,
    by_name: FastMap<Box<str>, u32>,
    postings: FastMap<Box<str>, Vec<Posting>>,
    /// Lowercased names (whole, and the part after the backend prefix),
    /// sorted, for exact and prefix matches.
    names: Vec<(Box<str>, u32)>,
}

/// A tool's terms by field, while it is indexed.
type Counted = FastMap<String, [f32; 5]>;

impl Catalogue {
    /// Indexes a backend's tools (as clients see them). `needs` gives the
    /// scope bits of a name.
    pub(in crate::router) fn build(
        version: u64,
        items: Vec<Fields>,
        needs: impl Fn(&str) -> Option<u64>,
    ) -> Catalogue {
        let mut tools = Vec::with_capacity(items.len());
        let mut counted: Vec<(Counted, [f32; 5])> = Vec::with_capacity(items.len());
        for item in items {
            let Some(name) = string_field(&item, "name") else {
                continue;
            };
            let (terms, lengths) = count(&name, &item);
            counted.push((terms, lengths));
            tools.push(Tool {
                needs: needs(&name),
                name: name.into_boxed_str(),
                definition: crate::jsonrpc::raw(&item),
            });
        }
        let n = counted.len().max(1) as f32;
        let mut average = [0f32; 5];
        for (_, lengths) in &counted {
            for (a, l) in average.iter_mut().zip(lengths) {
                *a += l / n;
            }
        }
        let mut postings: FastMap<Box<str>, Vec<Posting>> = FastMap::default();
        for (i, (terms, lengths)) in counted.into_iter().enumerate() {
            for (term, tf) in terms {
                let mut weighted = 0f32;
                for f in 0..FIELDS.len() {
                    if tf[f] > 0.0 {
                        let (weight, b) = FIELDS[f];
                        let norm = 1.0 - b + b * lengths[f] / average[f].max(1.0);
                        weighted += weight * tf[f] / norm;
                    }
                }
                let weight = weighted * (K1 + 1.0) / (weighted + K1);
                postings
                    .entry(term.into_boxed_str())
                    .or_default()
                    .push(Posting {
                        tool: i as u32,
                        weight,
                    });
            }
        }
        postings.values_mut().for_each(Vec::shrink_to_fit);
        let mut by_name = FastMap::default();
        let mut names = Vec::with_capacity(tools.len() * 2);
        for (i, t) in tools.iter().enumerate() {
            by_name.insert(t.name.clone(), i as u32);
            let lower = t.name.to_lowercase();
            if let Some((_, tool)) = lower.rsplit_once("__") {
                names.push((tool.into(), i as u32));
            }
            names.push((lower.into_boxed_str(), i as u32));
        }
        names.sort_unstable();
        Catalogue {
            version,
            tools,
            by_name,
            postings,
            names,
        }
    }

    pub(in crate::router) fn get(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&i| &self.tools[i as usize])
    }

    /// How many of its tools hold `term` (for the namespace's IDF).
    pub(in crate::router) fn frequency(&self, term: &str) -> usize {
        self.postings.get(term).map_or(0, Vec::len)
    }

    /// Adds `idf` times each tool's weight for `term` to `scores`, noting
    /// tools seen for the first time in `touched`.
    pub(in crate::router) fn score(
        &self,
        term: &str,
        idf: f32,
        scores: &mut [f32],
        touched: &mut Vec<u32>,
    ) {
        for p in self.postings.get(term).into_iter().flatten() {
            let s = &mut scores[p.tool as usize];
            if *s == 0.0 {
                touched.push(p.tool);
            }
            *s += idf * p.weight;
        }
    }

    /// Tools whose name (whole, or past its backend prefix) is `query`
    /// (2) or starts with it (1), lowercased.
    pub(in crate::router) fn name_matches(&self, query: &str, each: &mut impl FnMut(u32, u8)) {
        let from = self.names.partition_point(|(n, _)| &**n < query);
        for (name, i) in &self.names[from..] {
            if !name.starts_with(query) {
                break;
            }
            each(*i, if name.len() == query.len() { 2 } else { 1 });
        }
    }
}

/// A tool's terms with their count in each field, and each field's length.
fn count(name: &str, item: &Fields) -> (Counted, [f32; 5]) {
    let mut counted = Counted::default();
    let mut lengths = [0f32; 5];
    let mut add = |field: Field, text: &str| {
        terms(text, |t| {
            counted.entry(t.to_owned()).or_default()[field as usize] += 1.0;
            lengths[field as usize] += 1.0;
        });
    };
    add(Field::Name, name);
    if let Some(title) = string_field(item, "title") {
        add(Field::Title, &title);
    }
    if let Some(description) = string_field(item, "description") {
        add(Field::Description, &description);
    }
    #[derive(serde::Deserialize)]
    struct Schema {
        #[serde(default)]
        properties: indexmap::IndexMap<String, Property>,
    }
    #[derive(serde::Deserialize)]
    struct Property {
        description: Option<String>,
        title: Option<String>,
    }
    let schema = item
        .get("inputSchema")
        .and_then(|s| serde_json::from_str::<Schema>(s.get()).ok());
    for (param, p) in schema.into_iter().flat_map(|s| s.properties) {
        add(Field::ParamName, &param);
        for text in [p.title, p.description].into_iter().flatten() {
            add(Field::ParamDescription, &text);
        }
    }
    (counted, lengths)
}

/// The namespace's IDF of a term that `frequency` of `total` tools hold.
pub(in crate::router) fn idf(frequency: usize, total: usize) -> f32 {
    let (df, n) = (frequency as f32, total as f32);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> Fields {
        serde_json::from_value(serde_json::json!({
            "name": name, "description": description,
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string", "description": "Where the file is"}}}
        }))
        .unwrap()
    }

    #[test]
    fn words_in_names_weigh_more_than_in_descriptions() {
        let c = Catalogue::build(
            1,
            vec![
                tool("fs__read_file", "Reads a file's contents"),
                tool(
                    "fs__write_file",
                    "Writes text; creates the directory it needs",
                ),
                tool("fs__create_directory", "Makes a new folder"),
            ],
            |_| Some(0),
        );
        let mut scores = vec![0.0; 3];
        let mut touched = Vec::new();
        let mut term = String::new();
        terms("directories", |t| term = t.to_owned());
        c.score(&term, idf(c.frequency(&term), 3), &mut scores, &mut touched);
        assert_eq!(touched.len(), 2);
        assert!(scores[2] > scores[1], "{scores:?}");
        let mut matched = Vec::new();
        c.name_matches("read_file", &mut |i, tier| matched.push((i, tier)));
        assert_eq!(matched, [(0, 2)]);
        matched.clear();
        c.name_matches("fs__", &mut |i, tier| matched.push((i, tier)));
        assert_eq!(matched.len(), 3);
        assert!(c.get("fs__read_file").is_some());
    }
}
