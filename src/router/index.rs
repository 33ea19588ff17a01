//! Which backend serves an unprefixed name (`prefix = "never"`), learned
//! from the lists that pass through.
//!
//! Each entry remembers the list version of its backend when it was seen;
//! once that backend announces a change, its entries are stale: they are
//! pruned the next time its lists are read, and never block another
//! backend from claiming a name that moved. The index is bounded: past
//! `MAX_NAMES` it starts over (and refills from the lists on demand).

use crate::fast_map::FastMap;

use super::kind::Kind;

/// Names remembered per namespace.
const MAX_NAMES: usize = 100_000;

#[derive(Default)]
pub(super) struct NameIndex {
    /// One map per kind (`Kind as usize`), so a lookup by `&str` needs no
    /// key of its own.
    names: [FastMap<String, Entry>; 4],
    /// The version each member's entries were recorded at.
    versions: FastMap<usize, u64>,
}

#[derive(Clone, Copy)]
struct Entry {
    member: usize,
    version: u64,
}

/// What `claim` decided for a name.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Claim {
    Ours,
    /// A current entry of another member has it: a collision.
    Taken(usize),
}

impl NameIndex {
    /// Starts recording `member`'s names at `version`; entries from an
    /// older version of its lists are dropped first.
    pub(super) fn begin(&mut self, member: usize, version: u64) {
        let previous = self.versions.insert(member, version);
        if previous.is_some_and(|v| v != version) {
            for names in &mut self.names {
                names.retain(|_, e| e.member != member);
            }
        }
    }

    /// Records `name` for `member`, unless another member holds it under its
    /// current list version. `current` gives each member's version now.
    pub(super) fn claim(
        &mut self,
        kind: Kind,
        name: &str,
        member: usize,
        version: u64,
        current: impl Fn(usize) -> u64,
    ) -> Claim {
        if self.len() >= MAX_NAMES {
            self.names.iter_mut().for_each(FastMap::clear);
        }
        let names = &mut self.names[kind as usize];
        if let Some(e) = names.get(name)
            && e.member != member
            && current(e.member) == e.version
        {
            return Claim::Taken(e.member);
        }
        names.insert(name.to_owned(), Entry { member, version });
        Claim::Ours
    }

    /// The member serving `name`, if its entry is current.
    pub(super) fn lookup(
        &self,
        kind: Kind,
        name: &str,
        current: impl Fn(usize) -> u64,
    ) -> Option<usize> {
        let e = self.names[kind as usize].get(name)?;
        (current(e.member) == e.version).then_some(e.member)
    }

    /// The templates indexed for any current member, with their member.
    pub(super) fn templates(&self, current: impl Fn(usize) -> u64) -> Vec<(String, usize)> {
        self.names[Kind::Template as usize]
            .iter()
            .filter(|(_, e)| current(e.member) == e.version)
            .map(|(t, e)| (t.clone(), e.member))
            .collect()
    }

    pub(super) fn len(&self) -> usize {
        self.names.iter().map(FastMap::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_moved_is_not_a_collision_after_a_change() {
        let mut versions = [1u64, 1];
        let mut idx = NameIndex::default();
        idx.begin(0, 1);
        assert_eq!(
            idx.claim(Kind::Tool, "t", 0, 1, |m| versions[m]),
            Claim::Ours
        );
        idx.begin(1, 1);
        assert_eq!(
            idx.claim(Kind::Tool, "t", 1, 1, |m| versions[m]),
            Claim::Taken(0)
        );
        // Member 0's lists change: its entries are stale, the name is free.
        versions[0] = 2;
        assert_eq!(idx.lookup(Kind::Tool, "t", |m| versions[m]), None);
        assert_eq!(
            idx.claim(Kind::Tool, "t", 1, 1, |m| versions[m]),
            Claim::Ours
        );
        assert_eq!(idx.lookup(Kind::Tool, "t", |m| versions[m]), Some(1));
    }

    #[test]
    fn stale_entries_are_pruned_when_the_member_is_read_again() {
        let mut idx = NameIndex::default();
        idx.begin(0, 1);
        for i in 0..100 {
            idx.claim(Kind::Tool, &format!("t{i}"), 0, 1, |_| 1);
        }
        idx.begin(0, 2);
        assert_eq!(idx.len(), 0);
    }
}
