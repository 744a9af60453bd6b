//! Per-conversation gate state, bounded.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard};

/// How many conversations are remembered.
pub(crate) const CAPACITY: usize = 256;

/// Whether each conversation has planned in its current turn, for the
/// [`CAPACITY`] most recently written conversations (an LRU: reading does
/// not count as use). A conversation with no entry is armed (not planned),
/// so an evicted conversation fails closed.
pub(crate) struct Lanes {
    table: Mutex<LruCache<String, bool>>,
}

impl Default for Lanes {
    fn default() -> Self {
        let capacity = NonZeroUsize::new(CAPACITY).unwrap_or(NonZeroUsize::MIN);
        Lanes {
            table: Mutex::new(LruCache::new(capacity)),
        }
    }
}

impl Lanes {
    fn table(&self) -> MutexGuard<'_, LruCache<String, bool>> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn is_planned(&self, session: &str) -> bool {
        self.table().peek(session).copied().unwrap_or(false)
    }

    /// Records `planned` for `session`, evicting the least recently written
    /// conversation when the table is full.
    pub(crate) fn set(&self, session: &str, planned: bool) {
        let mut table = self.table();
        match table.get_mut(session) {
            Some(entry) => *entry = planned,
            None => {
                table.put(session.to_owned(), planned);
            }
        }
    }

    /// The planned conversations (for hot-swap handover), sorted.
    pub(crate) fn planned(&self) -> Vec<String> {
        let mut planned: Vec<String> = self
            .table()
            .iter()
            .filter(|(_, planned)| **planned)
            .map(|(id, _)| id.clone())
            .collect();
        planned.sort();
        planned
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_conversations_are_armed_and_conversations_are_independent() {
        let lanes = Lanes::default();
        assert!(!lanes.is_planned("a"));
        lanes.set("a", true);
        assert!(lanes.is_planned("a"));
        assert!(!lanes.is_planned("b"));
    }

    #[test]
    fn the_table_is_bounded_and_evicts_the_least_recently_written() {
        let lanes = Lanes::default();
        for i in 0..CAPACITY {
            lanes.set(&format!("s{i}"), true);
        }
        lanes.set("s0", true); // s0 is now the most recent; s1 the oldest
        lanes.set("new", true);
        assert_eq!(lanes.len(), CAPACITY);
        assert!(lanes.is_planned("s0"));
        assert!(!lanes.is_planned("s1"), "evicted, so armed again");
        assert!(lanes.is_planned("new"));
    }
}
