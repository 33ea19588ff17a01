//! The tools a session's searches found, for search mode's `expose_found`:
//! least recently found first, bounded by the caller (the oldest dropped
//! past it). Small (a few dozen names), so kept as a queue and scanned.

use std::collections::VecDeque;

#[derive(Default)]
pub(super) struct Found(VecDeque<Box<str>>);

impl Found {
    /// Notes `names` as just found, in order; whether the set changed.
    pub(super) fn note(&mut self, names: &[String], max: usize) -> bool {
        let mut changed = false;
        for name in names {
            match self.0.iter().position(|f| **f == **name) {
                Some(at) => {
                    let again = self.0.remove(at).unwrap_or_else(|| name.as_str().into());
                    self.0.push_back(again);
                }
                None => {
                    self.0.push_back(name.as_str().into());
                    changed = true;
                }
            }
        }
        while self.0.len() > max {
            self.0.pop_front();
            changed = true;
        }
        changed
    }

    pub(super) fn names(&self) -> Vec<String> {
        self.0.iter().map(|n| n.to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Found;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_least_recently_found_go_first() {
        let mut found = Found::default();
        assert!(found.note(&names(&["a", "b", "c"]), 3));
        // Found again: no change, but `a` is now the most recent.
        assert!(!found.note(&names(&["a"]), 3));
        assert!(found.note(&names(&["d"]), 3));
        assert_eq!(found.names(), ["c", "a", "d"]);
        assert!(!found.note(&[], 3));
    }
}
